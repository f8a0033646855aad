// SPDX-License-Identifier: BSD-3-Clause
/// @file Network and parse_network: a model composed at run time from a one-line description has
/// the layers, sizes, descriptions and parameter layout the text says; given the same parameters
/// it computes the bits of the same layers composed at compile time; its gradients pass finite
/// differences; and every malformed description is one config_error naming the character and the
/// token at fault.
#include <doctest/doctest.h>

#include <reprosgd/nn/model_spec.hpp>
#include <reprosgd/nn/network.hpp>
#include <reprosgd/nn/residual.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/testing/gradient_check.hpp>

#include "nn_test_support.hpp"

#include <bit>
#include <cstdint>
#include <string>

namespace {

using namespace reprosgd_test::nn;
using reprosgd::ImageShape;
using reprosgd::parse_network;

M filled(long rows, long cols, std::uint64_t salt) {
  M m("m", rows, cols);
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < cols; ++j) m(i, j) = value(static_cast<std::uint64_t>(i * cols + j), 1.0f, salt);
  return m;
}

long bit_differences(const float* a, const float* b, std::size_t n) {
  long d = 0;
  for (std::size_t i = 0; i < n; ++i) d += std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i]);
  return d;
}

std::string error_of(const std::string& spec, ImageShape input = {1, 10, 9}, int features = 0) {
  try {
    (void)parse_network(spec, input, features);
  } catch (const reprosgd::config_error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_SUITE("nn/network") {
  TEST_CASE("a description gives the layers, sizes and descriptions it says") {
    const auto net = parse_network("conv(6,3,p1), bn, relu, maxpool(2), res(conv(6,3,p1),bn,relu), "
                                   "res(conv(8,3,s2,p1),relu), gap, dense(12), bn, dropout(0.25), ln, dense(10)",
                                   {1, 10, 9});
    CHECK(net.input == ImageShape{1, 10, 9});
    CHECK(net.input_width() == 90);
    CHECK(net.output_width(90) == 10);
    CHECK(net.layers().size() == 12);
    CHECK(net.describe(90) ==
          "network(conv2d(1x10x9,6,k3,s1,p1,he);batchnorm2d(6x10x9,momentum=0x1.99999ap-4,eps=0x1.4f8b58p-17);relu;"
          "maxpool2d(6x10x9,k2,s2,p0);residual(conv2d(6x5x4,6,k3,s1,p1,he);"
          "batchnorm2d(6x5x4,momentum=0x1.99999ap-4,eps=0x1.4f8b58p-17);relu);"
          "residual(conv2d(6x5x4,8,k3,s2,p1,he);relu;projection=conv2d(6x5x4,8,k1,s2,p0,he));global_avg_pool(8x3x2);"
          "dense(8,12,he);batchnorm1d(12,momentum=0x1.99999ap-4,eps=0x1.4f8b58p-17);dropout(0x1p-2);"
          "layernorm(12,eps=0x1.4f8b58p-17);dense(12,10,he))");
    // Parameters: conv 54+6, bn 24, block conv 324+6 and bn 24, block conv 432+8 and projection 48+8,
    // dense 96+12, bn1d 48, ln 24, dense 120+10.
    CHECK(net.parameter_count(90) == 60 + 24 + 330 + 24 + 440 + 56 + 108 + 48 + 24 + 130);
    CHECK(net.statistics_runs(90).size() == 3);
    const auto mlp = parse_network("dense(32),tanh,res(dense(32),relu),dense(4)", {}, 20);
    CHECK(mlp.input == ImageShape{});
    CHECK(mlp.output_width(20) == 4);
    CHECK(mlp.describe(20) == "network(dense(20,32,he);tanh;residual(dense(32,32,he);relu);dense(32,4,he))");
    CHECK(parse_network("res(dense(8)),dense(2)", {}, 5).describe(5) ==
          "network(residual(dense(5,8,he);projection=dense(5,8,he));dense(8,2,he))");
  }

  TEST_CASE("a Sequential of a Network is the compile-time Sequential of the same layers, bit for bit") {
    // The model takes the Network's layers as its own: the same layer count, widths, descriptions
    // (the configuration hash), keys (initialisation and dropout), shards and arithmetic.
    using namespace reprosgd;
    const ImageShape in{2, 7, 6};
    auto fixed = make_sequential<Mem>(
        Conv2D{in, 4, 3, 1, 1}, BatchNorm2D{{4, 7, 6}}, ReLU{}, MaxPool2D{{4, 7, 6}, 2},
        Residual{Conv2D{{4, 3, 3}, 4, 3, 1, 1}, BatchNorm2D{{4, 3, 3}}, ReLU{}, Dropout{0.25f}},
        ProjectedResidual{Conv2D{{4, 3, 3}, 5, 1, 2}, Conv2D{{4, 3, 3}, 5, 3, 2, 1}, Tanh{}}, Flatten{{5, 2, 2}},
        Dropout{0.5f}, LayerNorm{20}, Dense{20, 3});
    auto run_time = make_sequential<Mem>(parse_network(
        "conv(4,3,p1),bn,relu,maxpool(2),res(conv(4,3,p1),bn,relu,dropout(0.25)),res(conv(5,3,s2,p1),tanh),flatten,"
        "dropout(0.5),ln,dense(3)",
        in));
    REQUIRE(run_time.layer_count() == fixed.depth);
    CHECK(run_time.describe() == fixed.describe());
    for (std::size_t i = 0; i <= fixed.depth; ++i) CHECK(run_time.width(i) == fixed.width(i));
    REQUIRE(run_time.parameter_count() == fixed.parameter_count());
    CHECK(run_time.input_shape() == in);
    fixed.initialize(Kokkos::Serial(), PhiloxStream(3));
    run_time.initialize(Kokkos::Serial(), PhiloxStream(3));
    CHECK(bit_differences(fixed.parameters().data(), run_time.parameters().data(), fixed.parameter_count()) == 0);
    for (int p = 2; p <= 3; ++p)
      for (int q = 0; q < p; ++q) CHECK(run_time.canonical_runs(q, p) == fixed.canonical_runs(q, p));
    const M x = filled(5, 84, 7), gy = filled(5, 3, 8);
    auto ws_a = fixed.make_workspace(5);
    auto ws_b = run_time.make_workspace(5);
    Kokkos::deep_copy(ws_a.act[0], x);
    Kokkos::deep_copy(ws_b.act[0], x);
    const auto ctx = training_context<Kokkos::Serial>(3);
    fixed.forward(ctx, ws_a, 5);
    run_time.forward(ctx, ws_b, 5);
    Kokkos::deep_copy(ws_a.grad_out, gy);
    Kokkos::deep_copy(ws_b.grad_out, gy);
    B ga("ga", fixed.parameter_count()), gb("gb", run_time.parameter_count());
    fixed.backward(ctx, ws_a, 5, ga);
    run_time.backward(ctx, ws_b, 5, gb);
    Kokkos::fence();
    for (std::size_t i = 1; i <= fixed.depth; ++i)
      CHECK(bit_differences(ws_a.act[i].data(), ws_b.act[i].data(), ws_a.act[i].size()) == 0);
    CHECK(bit_differences(ga.data(), gb.data(), ga.extent(0)) == 0);
  }

  TEST_CASE("residual blocks split their convolutions and dense layers over a model group: every parameter held once "
            "(statistics on every rank), with the whole model's initial bits") {
    using namespace reprosgd;
    const auto compile_time = [] {
      return make_sequential<Mem>(
          Conv2D{{1, 6, 5}, 5, 3, 1, 1, Init::he_normal, 2}, ReLU{},
          Residual{Conv2D{{5, 6, 5}, 5, 3, 1, 1, Init::he_normal, 2}, BatchNorm2D{{5, 6, 5}}, ReLU{}},
          ProjectedResidual{Conv2D{{5, 6, 5}, 7, 1, 2, 0, Init::he_normal, 2},
                            Residual{Conv2D{{5, 6, 5}, 5, 3, 1, 1, Init::he_normal, 2}},
                            Conv2D{{5, 6, 5}, 7, 3, 2, 1, Init::he_normal, 2}, ReLU{}},
          GlobalAvgPool{{7, 3, 3}}, Dense{7, 4, Init::he_normal, 2});
    };
    const auto run_time = [] {
      return make_sequential<Mem>(parse_network("conv(5,3,p1),relu,res(conv(5,3,p1),bn,relu),res(res(conv(5,3,p1)),"
                                                "conv(7,3,s2,p1),relu),gap,dense(4)",
                                                {1, 6, 5}, 0, NetworkSpecOptions{.feature_chunk = 2}));
    };
    auto whole = compile_time();
    const std::size_t n = whole.canonical_parameter_count(), statistics = 2 * 5;  // running mean, variance
    whole.initialize(Kokkos::Serial(), PhiloxStream(11));
    for (int p = 1; p <= 4; ++p) {
      CAPTURE(p);
      std::vector<int> covered(n, 0);
      std::size_t held = 0;
      for (int q = 0; q < p; ++q) {
        CAPTURE(q);
        auto shard = compile_time();
        auto other = run_time();
        shard.shard(q, p);
        other.shard(q, p);
        CHECK(shard.canonical_runs(q) == other.canonical_runs(q));
        CHECK(shard.parameter_count() == other.parameter_count());
        shard.initialize(Kokkos::Serial(), PhiloxStream(11));
        std::size_t local = 0;
        for (const CanonicalRun& r : shard.canonical_runs(q)) {
          REQUIRE(r.local == local);  // the runs tile the shard's buffer in order
          local += r.length;
          for (std::size_t k = 0; k < r.length; ++k) ++covered[r.canonical + k];
          CHECK(bit_differences(shard.parameters().data() + r.local, whole.parameters().data() + r.canonical, r.length) == 0);
        }
        CHECK(local == shard.parameter_count());
        held += shard.parameter_count();
        // The statistics runs point at the batch norm's running mean and variance in the shard.
        const auto runs = shard.statistics_runs();
        REQUIRE(runs.size() == 1);
        CHECK(runs[0].count == statistics);
        CHECK(bit_differences(shard.parameters().data() + runs[0].offset,
                              whole.parameters().data() + whole.statistics_runs()[0].offset, statistics) == 0);
      }
      // Batch norm's 4 x 5 parameters are replicated; every other parameter has one owner.
      long once = 0, everywhere = 0;
      for (int c : covered) {
        CHECK((c == 1 || c == p));
        once += c == 1;
        everywhere += c == p;
      }
      CHECK(held == n + static_cast<std::size_t>(p - 1) * 20);
      if (p > 1) CHECK(everywhere == 20);
      CHECK(once + (p > 1 ? everywhere : 0) == static_cast<long>(n));
    }
  }

  TEST_CASE("a Network with a shortcut stays one layer of its model") {
    using namespace reprosgd;
    const Network block({AnyLayer{Dense{6, 6}}, AnyLayer{ActivationFn{Activation::relu}}}, Shortcut::identity);
    auto model = make_sequential<Mem>(Network(block).with_input_width(6));
    CHECK(model.layer_count() == 1);
    CHECK(model.describe() == std::vector<std::string>{"residual(dense(6,6,he);relu)"});
    const Network empty = Network(std::vector<AnyLayer>{}).with_input_width(4);
    CHECK_THROWS_WITH_AS(make_sequential<Mem>(empty), "reprosgd::LayerChain: a chain has 1 to 254 layers, got 0",
                         config_error);
  }

  TEST_CASE("a Network's gradients by finite differences") {
    const auto net = parse_network("conv(3,3,p1),bn,tanh,res(conv(3,3,p1),tanh),res(conv(4,3,s2,p1)),gap,dense(3)", {2, 5, 4});
    const reprosgd::testing::GradientCheckOptions options{.rows = 3, .step = 1e-3f, .tolerance = 3e-3, .scale_floor = 1.0};
    const auto report = reprosgd::testing::check_gradients(Kokkos::Serial(), net, 40, options);
    INFO(report.describe());
    CHECK(report.passed);
  }

  TEST_CASE("a malformed description is one config_error naming the character and the token") {
    CHECK(error_of("conv(8,3,p1),bogus,relu") ==
          "reprosgd::parse_network: at character 14 ('bogus'): unknown layer (conv, maxpool, avgpool, gap, flatten, "
          "dense, bn, ln, relu, tanh, sigmoid, dropout, res)");
    CHECK(error_of("conv(8,x)") == "reprosgd::parse_network: at character 8 ('x'): 'x' is not a positive integer (in conv(8,x))");
    CHECK(error_of("conv(8)") == "reprosgd::parse_network: at character 1 ('conv(8)'): expected conv(OUT,K[,sS][,pP])");
    CHECK(error_of("conv(8,3,q2)") ==
          "reprosgd::parse_network: at character 10 ('q2'): expected sSTRIDE or pPADDING, once each (in conv(8,3,q2))");
    CHECK(error_of("conv(8,3),conv(4,12)") ==
          "reprosgd::parse_network: at character 11 ('conv(4,12)'): reprosgd::Conv2D: kernel 12 is larger than the padded "
          "input 8x7 (input 8x8x7, padding 0)");
    CHECK(error_of("conv(8,3),dense(10)") ==
          "reprosgd::parse_network: at character 11 ('dense(10)'): dense needs features but receives a 8x8x7 image (put "
          "flatten or gap before it)");
    CHECK(error_of("flatten,maxpool(2)") ==
          "reprosgd::parse_network: at character 9 ('maxpool(2)'): needs an image but receives 90 features (the data's "
          "samples are not images, or a flatten/gap came before)");
    CHECK(error_of("conv(8,3),relu)") == "reprosgd::parse_network: at character 15 (')'): a ')' without its '('");
    CHECK(error_of("res(conv(8,3,p1),relu") == "reprosgd::parse_network: at character 1 ('res('): this '(' is never closed");
    CHECK(error_of("conv(4,3,p1),,relu") == "reprosgd::parse_network: at character 14: expected a layer");
    CHECK(error_of("dropout(1.5)") ==
          "reprosgd::parse_network: at character 1 ('dropout(1.5)'): reprosgd::Dropout: p must be in [0, 1), got 1.500000");
    CHECK(error_of("res(conv(4,3),relu)") ==
          "reprosgd::parse_network: at character 1 ('res(conv(4,3),relu)'): the block maps 1x10x9 to 4x8x7: no 1x1 "
          "convolution on the shortcut gives that shape");
    CHECK(error_of("res(flatten)") ==
          "reprosgd::parse_network: at character 1 ('res(flatten)'): the block maps 1x10x9 to 90 features: a shortcut "
          "needs both images or both features");
    CHECK(error_of("dense(4)", {}, 0) ==
          "reprosgd::parse_network: the input has no values (an image shape or a positive feature count)");
  }
}
