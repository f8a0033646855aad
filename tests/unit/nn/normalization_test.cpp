// SPDX-License-Identifier: BSD-3-Clause
/// @file BatchNorm2D, BatchNorm1D, LayerNorm and Residual: known answers against references that
/// state each value's operations, the same bits on every host space, finite-difference checks of
/// every gradient (odd and non-square shapes, residual blocks with and without a projection,
/// nested), the statistics a micro-batch enters into its gradient row and how Sequential blends
/// them after a step, evaluation with the running statistics, and the messages of bad options.
#include <doctest/doctest.h>

#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/conv2d.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>
#include <reprosgd/nn/normalization.hpp>
#include <reprosgd/nn/pool2d.hpp>
#include <reprosgd/nn/residual.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/testing/gradient_check.hpp>

#include "nn_test_support.hpp"
#include <support/exec_spaces.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace reprosgd_test::nn;
using reprosgd::BatchNorm1D;
using reprosgd::BatchNorm2D;
using reprosgd::Conv2D;
using reprosgd::Dense;
using reprosgd::ImageShape;
using reprosgd::LayerNorm;
using reprosgd::ProjectedResidual;
using reprosgd::ReLU;
using reprosgd::Residual;

M filled(long rows, long cols, std::uint64_t salt, float scale = 1.0f, float shift = 0.0f) {
  M m("m", rows, cols);
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < cols; ++j) m(i, j) = value(static_cast<std::uint64_t>(i * cols + j), scale, salt) + shift;
  return m;
}

bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

long bit_differences(const M& a, const M& b) {
  long n = 0;
  for (std::size_t i = 0; i < a.extent(0); ++i)
    for (std::size_t j = 0; j < a.extent(1); ++j) n += same_bits(a(i, j), b(i, j)) ? 0 : 1;
  return n;
}
long bit_differences(const B& a, const B& b) {
  long n = 0;
  for (std::size_t i = 0; i < a.extent(0); ++i) n += same_bits(a(i), b(i)) ? 0 : 1;
  return n;
}

struct Pass {
  M y, gx;
  B gp;
};
/// forward and backward of `layer` on Space with parameters p, input x and output gradient gy.
template <class Space, class L>
Pass run_layer(const L& layer, const B& p, const M& x, const M& gy, bool training = true, float share = 1.0f) {
  const int width = static_cast<int>(x.extent(1));
  const int out = layer.output_width(width);
  Pass r{M("y", x.extent(0), out), M("gx", x.extent(0), width), B("gp", layer.parameter_count(width))};
  auto ctx = training_context<Space>(9);
  ctx.training = training;
  ctx.batch_share = share;
  layer.forward(ctx, p, x, r.y);
  layer.backward(ctx, p, x, r.y, gy, r.gx, r.gp);
  Space().fence();
  return r;
}

template <class L>
B params_of(const L& layer, int width, std::uint64_t salt) {
  B p("p", layer.parameter_count(width));
  layer.initialize(training_context<Kokkos::Serial>(3), p, width);
  Kokkos::fence();
  // Move gamma and beta off 1 and 0 so that they matter.
  for (std::size_t k = 0; k < p.extent(0); ++k) p(k) += value(k, 0.25f, salt);
  return p;
}

template <class L>
void check_gradients_of(const L& layer, int width, const std::string& what, float step = 1e-2f, long rows = 3) {
  CAPTURE(what);
  const reprosgd::testing::GradientCheckOptions options{.rows = rows, .step = step, .tolerance = 3e-3, .scale_floor = 1.0};
  const auto serial = reprosgd::testing::check_gradients(Kokkos::Serial(), layer, width, options);
  INFO(serial.describe());
  CHECK(serial.passed);
  CHECK(serial.inputs == static_cast<std::size_t>(rows * width));
  CHECK(reprosgd::testing::check_gradients(layer, width, options).describe() == serial.describe());
}

}  // namespace

TEST_SUITE("nn/normalization") {
  TEST_CASE("parameters, descriptions and statistics runs: known answers") {
    const BatchNorm2D bn{{3, 5, 4}};
    CHECK(bn.output_width(60) == 60);
    CHECK(bn.parameter_count(60) == 12);
    CHECK(bn.describe(60) == "batchnorm2d(3x5x4,momentum=0x1.99999ap-4,eps=0x1.4f8b58p-17)");
    REQUIRE(bn.statistics_runs(60).size() == 1);
    CHECK(bn.statistics_runs(60)[0].offset == 6);
    CHECK(bn.statistics_runs(60)[0].count == 6);
    CHECK(BatchNorm1D{7}.parameter_count(7) == 28);
    CHECK(BatchNorm1D{7, 0.5f, 0.25f}.describe(7) == "batchnorm1d(7,momentum=0x1p-1,eps=0x1p-2)");
    CHECK(LayerNorm{9}.parameter_count(9) == 18);
    CHECK(LayerNorm{9, 0.5f}.describe(9) == "layernorm(9,eps=0x1p-1)");
    const Residual r{Dense{4, 6}, ReLU{}, Dense{6, 4}};
    CHECK(r.output_width(4) == 4);
    CHECK(r.parameter_count(4) == 30 + 28);
    CHECK(r.describe(4) == "residual(dense(4,6,he);relu;dense(6,4,he))");
    const Residual rb{Dense{4, 4}, BatchNorm1D{4}, ReLU{}, BatchNorm1D{4}};
    const auto runs = rb.statistics_runs(4);
    REQUIRE(runs.size() == 2);
    CHECK(runs[0].offset == 20 + 8);
    CHECK(runs[1].offset == 20 + 16 + 8);
    const ProjectedResidual pr{Conv2D{{2, 5, 5}, 3, 1, 2}, Conv2D{{2, 5, 5}, 3, 3, 2, 1}};
    CHECK(pr.output_width(50) == 27);
    CHECK(pr.describe(50) == "residual(conv2d(2x5x5,3,k3,s2,p1,he);projection=conv2d(2x5x5,3,k1,s2,p0,he))");
    // Initial values: gamma 1, beta 0, running mean 0, running variance 1.
    B p("p", 12);
    bn.initialize(training_context<Kokkos::Serial>(1), p, 60);
    Kokkos::fence();
    const std::vector<float> want{1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1};
    for (std::size_t k = 0; k < 12; ++k) CHECK(p(k) == want[k]);
  }

  TEST_CASE("bad options and shapes are config_errors naming the layer and the numbers") {
    CHECK_THROWS_WITH_AS((void)(BatchNorm2D{{3, 5, 4}}.output_width(59)),
                         "reprosgd::BatchNorm2D: expects 3x5x4 = 60 inputs, receives 59", reprosgd::config_error);
    CHECK_THROWS_WITH_AS((void)(BatchNorm2D{{3, 5, 4}, 1.5f}.output_width(60)),
                         "reprosgd::BatchNorm2D: momentum must be in [0, 1], got 1.500000", reprosgd::config_error);
    CHECK_THROWS_WITH_AS((void)(BatchNorm1D{4, 0.1f, 0.0f}.output_width(4)),
                         "reprosgd::BatchNorm1D: eps must be finite and > 0, got 0.000000", reprosgd::config_error);
    CHECK_THROWS_WITH_AS((void)(BatchNorm1D{4}.output_width(5)), "reprosgd::BatchNorm1D: expects 4 inputs, receives 5",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS((void)(LayerNorm{0}.output_width(0)), "reprosgd::LayerNorm: features must be positive, got 0",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS((void)(Residual{Dense{4, 6}, ReLU{}}.output_width(4)),
                         "reprosgd::Residual: the block maps 4 inputs to 6 outputs; the identity shortcut needs as many "
                         "outputs as inputs (add a projection)",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS((void)(ProjectedResidual{Dense{4, 5}, Dense{4, 6}}.output_width(4)),
                         "reprosgd::Residual: the block maps 4 inputs to 6 outputs but the projection to 5",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS((void)(Residual{Dense{5, 5}}.output_width(4)), "reprosgd::Dense: expects 5 inputs, receives 4",
                         reprosgd::config_error);
  }

  TEST_CASE("BatchNorm2D: forward, backward and the micro-batch's statistics are the reference's") {
    const ImageShape s{3, 3, 2};
    const BatchNorm2D bn{s};
    const long rows = 4, N = rows * 6, C = 3;
    const B p = params_of(bn, 18, 5);
    const M x = filled(rows, 18, 11, 2.0f, 0.5f), gy = filled(rows, 18, 12);
    const Pass r = run_layer<Kokkos::Serial>(bn, p, x, gy, true, 0.25f);
    for (long c = 0; c < C; ++c) {
      double sum = 0.0, sq = 0.0;
      for (long n = 0; n < N; ++n) sum += x.data()[n * C + c];
      const double mu = sum / N;
      for (long n = 0; n < N; ++n) sq += (x.data()[n * C + c] - mu) * (x.data()[n * C + c] - mu);
      const float mean = static_cast<float>(mu), invstd = static_cast<float>(1.0 / std::sqrt(sq / N + 1e-5f));
      double sdy = 0.0, sdyx = 0.0;
      for (long n = 0; n < N; ++n) {
        const long e = n * C + c;
        const float xhat = (x.data()[e] - mean) * invstd;
        CHECK(same_bits(r.y.data()[e], p(c) * xhat + p(C + c)));
        sdy += gy.data()[e];
        sdyx += static_cast<double>(gy.data()[e]) * static_cast<double>(xhat);
      }
      CHECK(same_bits(r.gp(c), static_cast<float>(sdyx)));
      CHECK(same_bits(r.gp(C + c), static_cast<float>(sdy)));
      const float a = static_cast<float>(sdy / N), b = static_cast<float>(sdyx / N), k = p(c) * invstd;
      for (long n = 0; n < N; ++n) {
        const long e = n * C + c;
        const float xhat = (x.data()[e] - mean) * invstd;
        CHECK(same_bits(r.gx.data()[e], k * ((gy.data()[e] - a) - xhat * b)));
      }
      // The statistics slots: share x mean and share x the unbiased variance.
      CHECK(same_bits(r.gp(2 * C + c), 0.25f * mean));
      CHECK(same_bits(r.gp(3 * C + c), 0.25f * static_cast<float>(sq / (N - 1))));
    }
  }

  TEST_CASE("BatchNorm in evaluation normalises with the running statistics and enters none") {
    const BatchNorm1D bn{2};
    B p("p", 8);
    const std::vector<float> v{2.0f, 0.5f, 1.0f, -1.0f, 3.0f, -2.0f, 4.0f, 0.25f};  // gamma, beta, mean, var
    for (std::size_t k = 0; k < 8; ++k) p(k) = v[k];
    const M x = filled(3, 2, 21), gy = filled(3, 2, 22);
    const Pass r = run_layer<Kokkos::Serial>(bn, p, x, gy, false);
    for (long i = 0; i < 3; ++i)
      for (long c = 0; c < 2; ++c) {
        const float invstd = static_cast<float>(1.0 / std::sqrt(static_cast<double>(v[6 + c]) + 1e-5f));
        CHECK(same_bits(r.y(i, c), v[c] * ((x(i, c) - v[4 + c]) * invstd) + v[2 + c]));
        CHECK(same_bits(r.gx(i, c), (v[c] * invstd) * gy(i, c)));
      }
    for (std::size_t k = 4; k < 8; ++k) CHECK(r.gp(k) == 0.0f);
  }

  TEST_CASE("LayerNorm: forward and backward are the reference's") {
    const LayerNorm ln{7};
    const B p = params_of(ln, 7, 6);
    const M x = filled(3, 7, 31, 1.5f, -0.25f), gy = filled(3, 7, 32);
    const Pass r = run_layer<Kokkos::Serial>(ln, p, x, gy);
    for (long i = 0; i < 3; ++i) {
      double sum = 0.0, sq = 0.0;
      for (long j = 0; j < 7; ++j) sum += x(i, j);
      const double mu = sum / 7;
      for (long j = 0; j < 7; ++j) sq += (x(i, j) - mu) * (x(i, j) - mu);
      const float mean = static_cast<float>(mu), invstd = static_cast<float>(1.0 / std::sqrt(sq / 7 + 1e-5f));
      double s = 0.0, t = 0.0;
      for (long j = 0; j < 7; ++j) {
        const float xhat = (x(i, j) - mean) * invstd;
        CHECK(same_bits(r.y(i, j), p(j) * xhat + p(7 + j)));
        const float g = gy(i, j) * p(j);
        s += g;
        t += static_cast<double>(g) * static_cast<double>(xhat);
      }
      const float a = static_cast<float>(s / 7), b = static_cast<float>(t / 7);
      for (long j = 0; j < 7; ++j) {
        const float xhat = (x(i, j) - mean) * invstd;
        CHECK(same_bits(r.gx(i, j), invstd * ((gy(i, j) * p(j) - a) - xhat * b)));
      }
    }
  }

  TEST_CASE("gradients of every normalisation layer and residual block by finite differences") {
    check_gradients_of(BatchNorm2D{{3, 5, 4}}, 60, "batchnorm2d, non-square");
    check_gradients_of(BatchNorm2D{{2, 1, 1}}, 2, "batchnorm2d of 1x1 images", 1e-2f, 5);
    check_gradients_of(BatchNorm1D{5}, 5, "batchnorm1d", 1e-2f, 6);
    check_gradients_of(LayerNorm{7}, 7, "layernorm");
    check_gradients_of(LayerNorm{2 * 3 * 3}, 18, "layernorm of an image");
    check_gradients_of(Residual{Dense{4, 6}, ReLU{}, Dense{6, 4}}, 4, "residual dense-relu-dense");
    // Tanh, not ReLU, after the batch norm: its outputs sit near 0, where a probe would cross ReLU's kink.
    check_gradients_of(Residual{Conv2D{{2, 5, 4}, 3, 3, 1, 1}, BatchNorm2D{{3, 5, 4}}, reprosgd::Tanh{},
                                Conv2D{{3, 5, 4}, 2, 3, 1, 1}},
                       40, "residual conv-bn-tanh-conv, non-square", 1e-3f);
    check_gradients_of(ProjectedResidual{Conv2D{{2, 5, 5}, 3, 1, 2}, Conv2D{{2, 5, 5}, 3, 3, 2, 1}, reprosgd::Tanh{}}, 50,
                       "residual with a strided 1x1 projection");
    check_gradients_of(Residual{Dense{3, 3}, Residual{reprosgd::Tanh{}, Dense{3, 3}}, LayerNorm{3}}, 3, "nested residual");
  }

  TEST_CASE_TEMPLATE_DEFINE("every host space gives the serial bits", Space, norm_bits_id) {
    auto same = [&](const auto& layer, int width) {
      const B p = params_of(layer, width, 8);
      const M x = filled(5, width, 41), gy = filled(5, layer.output_width(width), 42);
      const Pass a = run_layer<Kokkos::Serial>(layer, p, x, gy), b = run_layer<Space>(layer, p, x, gy);
      CHECK(bit_differences(a.y, b.y) == 0);
      CHECK(bit_differences(a.gx, b.gx) == 0);
      CHECK(bit_differences(a.gp, b.gp) == 0);
    };
    same(BatchNorm2D{{16, 6, 5}}, 480);
    same(BatchNorm1D{33}, 33);
    same(LayerNorm{65}, 65);
    same(Residual{Conv2D{{4, 6, 5}, 4, 3, 1, 1}, BatchNorm2D{{4, 6, 5}}, ReLU{}, reprosgd::Dropout{0.3f}}, 120);
  }
  TEST_CASE_TEMPLATE_APPLY(norm_bits_id, reprosgd_test::host_spaces);

  TEST_CASE("Sequential keeps a residual block's activations and blends the statistics after a step") {
    const BatchNorm1D bn{4, 0.25f};
    auto model = reprosgd::make_sequential<Mem>(Dense{3, 4}, bn, Residual{Dense{4, 4}, BatchNorm1D{4}, ReLU{}},
                                                Dense{4, 2});
    static_assert(decltype(model)::keeps_statistics);
    static_assert(!reprosgd::detail::keeps_statistics_v<reprosgd::BasicSequential<Mem, Dense>>);
    const auto runs = model.statistics_runs();
    REQUIRE(runs.size() == 2);
    CHECK(runs[0].offset == 16 + 8);
    CHECK(runs[1].offset == 16 + 16 + 20 + 8);
    model.initialize(Kokkos::Serial(), reprosgd::PhiloxStream(4));
    auto ws = model.make_workspace(6);
    CHECK(ws.stash[2].extent(0) == 3 * 6 * 4);  // the block's three outputs
    const M x = filled(6, 3, 51);
    Kokkos::deep_copy(ws.act[0], x);
    auto ctx = training_context<Kokkos::Serial>(4);
    ctx.batch_share = 0.5f;
    model.forward(ctx, ws, 6);
    Kokkos::deep_copy(ws.grad_out, 1.0f);
    B grads("grads", model.parameter_count());
    model.backward(ctx, ws, 6, grads);
    Kokkos::fence();
    // The residual's output equals the Layer concept's own call (its own stash, forward again).
    const auto& res = model.layer<2>();
    M y("y", 6, 4), gx("gx", 6, 4);
    const reprosgd::BufferRef<Mem> rp(model.parameters().data() + model.parameter_offset(2), res.parameter_count(4));
    res.forward(ctx, rp, ws.act[2], y);
    Kokkos::fence();
    CHECK(bit_differences(y, ws.act[3]) == 0);
    // The first BatchNorm's statistics slots: half the micro-batch's mean and unbiased variance.
    const std::size_t o = model.parameter_offset(1);
    for (long c = 0; c < 4; ++c) {
      double sum = 0.0, sq = 0.0;
      for (long n = 0; n < 6; ++n) sum += ws.act[1](n, c);
      for (long n = 0; n < 6; ++n) sq += (ws.act[1](n, c) - sum / 6) * (ws.act[1](n, c) - sum / 6);
      CHECK(same_bits(grads(o + 8 + c), 0.5f * static_cast<float>(sum / 6)));
      CHECK(same_bits(grads(o + 12 + c), 0.5f * static_cast<float>(sq / 5)));
    }
    // blend: running = 0.75 * running + 0.25 * step's, the slots zeroed; commit after the update.
    B before("before", model.parameter_count());
    Kokkos::deep_copy(before, model.parameters());
    B step_stats("step", 8);
    for (int k = 0; k < 8; ++k) step_stats(k) = grads(o + 8 + k);
    model.blend_statistics(Kokkos::Serial(), grads);
    Kokkos::fence();
    for (std::size_t k = 0; k < 8; ++k) CHECK(grads(o + 8 + k) == 0.0f);
    Kokkos::deep_copy(model.parameters(), 7.0f);  // whatever an optimizer would write
    model.commit_statistics(Kokkos::Serial());
    Kokkos::fence();
    for (std::size_t k = 0; k < 8; ++k)
      CHECK(same_bits(model.parameters()(o + 8 + k), 0.75f * before(o + 8 + k) + 0.25f * step_stats(k)));
    CHECK(model.parameters()(o) == 7.0f);  // gamma is the optimizer's
  }
}
