// SPDX-License-Identifier: BSD-3-Clause
/// @file The image layers (Conv2D, MaxPool2D, AvgPool2D, GlobalAvgPool, Flatten): forward and backward
/// bit for bit against scalar references that state each element's order of operations, on every
/// host space; finite-difference checks of every gradient (stride, padding, non-square images, a
/// kernel as large as the input, several channel chunks, 1x1); max pooling's tie rule; the
/// messages of bad shapes; a Sequential CNN with its scratch.
#include <doctest/doctest.h>

#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/conv2d.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/flatten.hpp>
#include <reprosgd/nn/pool2d.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/testing/gradient_check.hpp>

#include "nn_test_support.hpp"
#include <support/exec_spaces.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace reprosgd_test::nn;
using reprosgd::AvgPool2D;
using reprosgd::Conv2D;
using reprosgd::Flatten;
using reprosgd::GlobalAvgPool;
using reprosgd::ImageShape;
using reprosgd::MaxPool2D;

float value(std::uint64_t i, float scale) { return reprosgd_test::nn::value(i, scale, 4711); }

M filled(long rows, long cols, std::uint64_t salt, float scale = 1.0f) {
  M m("m", rows, cols);
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < cols; ++j) m(i, j) = value(salt + static_cast<std::uint64_t>(i * cols + j), scale);
  return m;
}

bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

/// Rows x cols elements of a and b that differ in any bit.
long bit_differences(const M& a, const M& b) {
  long n = 0;
  for (std::size_t i = 0; i < a.extent(0); ++i)
    for (std::size_t j = 0; j < a.extent(1); ++j) n += same_bits(a(i, j), b(i, j)) ? 0 : 1;
  return n;
}

/// x(n, h, w, c) of NHWC rows, 0 in the padding.
float pixel(const M& x, const ImageShape& s, long n, long h, long w, long c) {
  if (h < 0 || h >= s.height || w < 0 || w >= s.width) return 0.0f;
  return x(n, (h * s.width + w) * s.channels + c);
}

/// The convolution as the contract states it: for each output element, one FMA per patch element
/// (kh, kw, c ascending, padding as zeros) from +0, then + bias.
M conv_reference(const Conv2D& conv, const B& p, const M& x) {
  const auto g = conv.geometry();
  const long rows = static_cast<long>(x.extent(0)), C = conv.input.channels, K = conv.kernel, O = conv.out_channels;
  const long OH = g.out_height(), OW = g.out_width();
  M y("y", rows, OH * OW * O);
  for (long n = 0; n < rows; ++n)
    for (long oh = 0; oh < OH; ++oh)
      for (long ow = 0; ow < OW; ++ow)
        for (long o = 0; o < O; ++o) {
          float acc = 0.0f;
          for (long kh = 0; kh < K; ++kh)
            for (long kw = 0; kw < K; ++kw)
              for (long c = 0; c < C; ++c) {
                const float xv = pixel(x, conv.input, n, oh * g.stride - g.padding + kh, ow * g.stride - g.padding + kw, c);
                acc = std::fma(xv, p(((kh * K + kw) * C + c) * O + o), acc);
              }
          y(n, (oh * OW + ow) * O + o) = acc + p(K * K * C * O + o);
        }
  return y;
}

/// Runs layer forward and backward on Space (the host buffers are Space's memory): y, gx and gp.
struct Pass {
  M y, gx;
  B gp;
};
template <class Space, class L>
Pass run_layer(const L& layer, const B& p, const M& x, const M& gy) {
  const int width = static_cast<int>(x.extent(1));
  const int out = layer.output_width(width);
  Pass r{M("y", x.extent(0), out), M("gx", x.extent(0), width), B("gp", layer.parameter_count(width))};
  const auto ctx = training_context<Space>(9);
  layer.forward(ctx, p, x, r.y);
  layer.backward(ctx, p, x, r.y, gy, r.gx, r.gp);
  Space().fence();
  return r;
}

template <class L>
void check_gradients_of(const L& layer, const std::string& what, float step = 1e-2f) {
  CAPTURE(what);
  const int width = layer.input_width();
  const reprosgd::testing::GradientCheckOptions options{.rows = 3, .step = step, .tolerance = 2e-3, .scale_floor = 1.0};
  const auto serial = reprosgd::testing::check_gradients(Kokkos::Serial(), layer, width, options);
  INFO(serial.describe());
  CHECK(serial.passed);
  CHECK(serial.parameters == layer.parameter_count(width));
  CHECK(serial.inputs == static_cast<std::size_t>(3 * width));
  CHECK(reprosgd::testing::check_gradients(layer, width, options).describe() == serial.describe());
}

}  // namespace

TEST_SUITE("nn/conv") {
  TEST_CASE("shapes, parameters and descriptions: known answers") {
    const Conv2D conv{{3, 28, 28}, 32, 3, 1, 1};
    CHECK(conv.input_width() == 3 * 28 * 28);
    CHECK(conv.output_width(3 * 28 * 28) == 32 * 28 * 28);
    CHECK(conv.parameter_count(0) == 3 * 3 * 3 * 32 + 32);
    CHECK(conv.describe(0) == "conv2d(3x28x28,32,k3,s1,p1,he)");
    CHECK(conv.scratch_size(0, 4) == 4u * 28 * 28 * 27);
    const Conv2D strided{{2, 7, 5}, 4, 3, 2, 0, reprosgd::Init::xavier_uniform, 3};
    CHECK(strided.output_shape() == ImageShape{4, 3, 2});
    CHECK(strided.describe(0) == "conv2d(2x7x5,4,k3,s2,p0,xavier,chunk=3)");
    CHECK(strided.scratch_size(0, 2) == 2u * (3 * 2) * 18);  // 2 samples' patches (their gradient overwrites them)
    CHECK(Conv2D{{8, 4, 4}, 16, 1}.scratch_size(0, 10) == 0);  // 1x1: the patch matrix is the input
    const MaxPool2D pool{{32, 28, 28}, 2};
    CHECK(pool.output_width(32 * 28 * 28) == 32 * 14 * 14);
    CHECK(pool.describe(0) == "maxpool2d(32x28x28,k2,s2,p0)");
    // An image size the stride does not divide: the last partial window is dropped.
    CHECK(MaxPool2D{{1, 7, 9}, 2}.output_shape() == ImageShape{1, 3, 4});
    CHECK(AvgPool2D{{2, 5, 5}, 3, 1, 1}.output_shape() == ImageShape{2, 5, 5});
    CHECK(AvgPool2D{{2, 5, 5}, 3, 1, 1}.describe(0) == "avgpool2d(2x5x5,k3,s1,p1)");
    CHECK(GlobalAvgPool{{64, 7, 7}}.output_width(64 * 49) == 64);
    CHECK(GlobalAvgPool{{64, 7, 7}}.describe(0) == "global_avg_pool(64x7x7)");
    CHECK(Flatten{{64, 7, 7}}.output_width(64 * 49) == 64 * 49);
    CHECK(Flatten{{64, 7, 7}}.describe(0) == "flatten(64x7x7)");
  }

  TEST_CASE("bad shapes are config_errors naming the layer and the numbers") {
    using reprosgd::config_error;
    CHECK_THROWS_WITH_AS(((void)Conv2D{{1, 28, 28}, 8, 3}.output_width(784 * 2)),
                         "reprosgd::Conv2D: expects 1x28x28 = 784 inputs, receives 1568", config_error);
    CHECK_THROWS_WITH_AS(((void)Conv2D{{1, 4, 6}, 8, 7, 1, 1}.output_width(24)),
                         "reprosgd::Conv2D: kernel 7 is larger than the padded input 6x8 (input 1x4x6, padding 1)",
                         config_error);
    CHECK_THROWS_WITH_AS(((void)Conv2D{{1, 4, 4}, 0, 3}.output_width(16)),
                         "reprosgd::Conv2D: out_channels must be positive, got 0", config_error);
    CHECK_THROWS_WITH_AS(((void)Conv2D{{1, 4, 4}, 2, 3, 0}.output_width(16)), "reprosgd::Conv2D: stride must be positive, got 0",
                         config_error);
    CHECK_THROWS_WITH_AS(((void)Conv2D{{0, 4, 4}, 2, 3}.output_width(0)),
                         "reprosgd::Conv2D: the input shape must be positive, got 0x4x4", config_error);
    CHECK_THROWS_WITH_AS(((void)Conv2D{{1, 4, 4}, 2, 3, 1, -1}.output_width(16)),
                         "reprosgd::Conv2D: padding must not be negative, got -1", config_error);
    CHECK_THROWS_WITH_AS((void)MaxPool2D({3, 5, 5}, 2).output_width(74),
                         "reprosgd::MaxPool2D: expects 3x5x5 = 75 inputs, receives 74", config_error);
    CHECK_THROWS_WITH_AS((void)MaxPool2D({3, 5, 5}, 2, 2, 2).output_width(75),
                         "reprosgd::MaxPool2D: padding 2 is more than half the kernel 2", config_error);
    CHECK_THROWS_WITH_AS((void)AvgPool2D({1, 2, 2}, 3).output_width(4),
                         "reprosgd::AvgPool2D: kernel 3 is larger than the padded input 2x2 (input 1x2x2, padding 0)",
                         config_error);
    CHECK_THROWS_WITH_AS(((void)GlobalAvgPool{{4, 2, 2}}.output_width(15)),
                         "reprosgd::GlobalAvgPool: expects 4x2x2 = 16 inputs, receives 15", config_error);
    CHECK_THROWS_WITH_AS(((void)Flatten{{4, 2, 2}}.output_width(17)), "reprosgd::Flatten: expects 4x2x2 = 16 inputs, receives 17",
                         config_error);
    // Channels that do not chain: the second convolution expects 8 channels, the first gives 6.
    CHECK_THROWS_WITH_AS(reprosgd::Sequential(Conv2D{{1, 6, 6}, 6, 3, 1, 1}, Conv2D{{8, 6, 6}, 4, 3, 1, 1}),
                         "reprosgd::Conv2D: expects 8x6x6 = 288 inputs, receives 216", config_error);
  }

  TEST_CASE_TEMPLATE_DEFINE("Conv2D: forward and backward are the reference's bits on every host space", Space, conv_bits_id) {
    struct Shape {
      Conv2D conv;
      const char* what;
    };
    const Shape shapes[] = {
        {Conv2D{{3, 6, 5}, 4, 3, 1, 1}, "3x6x5, k3 s1 p1"},
        {Conv2D{{2, 7, 9}, 5, 3, 2, 1}, "2x7x9, k3 s2 p1 (odd sizes)"},
        {Conv2D{{1, 5, 5}, 3, 5, 1, 0}, "kernel = input"},
        {Conv2D{{4, 3, 3}, 70, 1, 1, 0}, "1x1, 70 channels: two chunks"},
        {Conv2D{{2, 6, 6}, 5, 2, 2, 0, reprosgd::Init::he_normal, 2}, "k2 s2, chunks of 2"},
    };
    for (const auto& s : shapes) {
      const std::string what = s.what;
      CAPTURE(what);
      const int width = s.conv.input_width();
      const auto ctx = training_context<Kokkos::Serial>(3);
      const auto lp = initialized_params(s.conv, ctx, width);
      const M x = filled(3, width, 100);
      const M gy = filled(3, s.conv.output_width(width), 900);
      const Pass serial = run_layer<Kokkos::Serial>(s.conv, lp.p, x, gy);
      CHECK(bit_differences(serial.y, conv_reference(s.conv, lp.p, x)) == 0);
      const Pass other = run_layer<Space>(s.conv, lp.p, x, gy);
      CHECK(bit_differences(serial.y, other.y) == 0);
      CHECK(bit_differences(serial.gx, other.gx) == 0);
      long gp_diff = 0;
      for (std::size_t i = 0; i < serial.gp.extent(0); ++i) gp_diff += same_bits(serial.gp(i), other.gp(i)) ? 0 : 1;
      CHECK(gp_diff == 0);
    }
  }
  TEST_CASE_TEMPLATE_APPLY(conv_bits_id, reprosgd_test::host_spaces);

  TEST_CASE("Conv2D: the weight gradient is patches^T dY, the input gradient col2im of dY W^T (one chunk: exact answers)") {
    // 1 channel, 3x3 image, kernel 2, stride 1, no padding: 4 output pixels, one filter.
    const Conv2D conv{{1, 3, 3}, 1, 2};
    B p("p", 5);
    for (int i = 0; i < 4; ++i) p(i) = static_cast<float>(i + 1);  // W = [1 2; 3 4], bias 0.5
    p(4) = 0.5f;
    M x("x", 1, 9);
    for (int i = 0; i < 9; ++i) x(0, i) = static_cast<float>(i);  // 0 1 2 / 3 4 5 / 6 7 8
    M gy("gy", 1, 4);
    gy(0, 0) = 1.0f, gy(0, 1) = 2.0f, gy(0, 2) = 3.0f, gy(0, 3) = 4.0f;
    const Pass r = run_layer<Kokkos::Serial>(conv, p, x, gy);
    // y(0,0) = 0*1 + 1*2 + 3*3 + 4*4 + 0.5 = 27.5; then 37.5, 57.5, 67.5.
    CHECK(r.y(0, 0) == 27.5f);
    CHECK(r.y(0, 1) == 37.5f);
    CHECK(r.y(0, 2) == 57.5f);
    CHECK(r.y(0, 3) == 67.5f);
    // dW(kh,kw) = sum over windows of x(window + (kh,kw)) * gy: dW(0,0) = 0*1 + 1*2 + 3*3 + 4*4 = 27.
    CHECK(r.gp(0) == 27.0f);
    CHECK(r.gp(1) == 37.0f);
    CHECK(r.gp(2) == 57.0f);
    CHECK(r.gp(3) == 67.0f);
    CHECK(r.gp(4) == 10.0f);  // db = 1 + 2 + 3 + 4
    // gx(1,1) is in all four windows, at offsets (1,1), (1,0), (0,1), (0,0): 4*1 + 3*2 + 2*3 + 1*4 = 20.
    CHECK(r.gx(0, 4) == 20.0f);
    CHECK(r.gx(0, 0) == 1.0f);   // only window (0,0) at offset (0,0): 1*1
    CHECK(r.gx(0, 8) == 16.0f);  // only window (1,1) at offset (1,1): 4*4
  }

  TEST_CASE("gradients of every image layer by finite differences") {
    check_gradients_of(Conv2D{{2, 5, 4}, 3, 3, 1, 1}, "conv k3 s1 p1, non-square");
    check_gradients_of(Conv2D{{2, 7, 6}, 3, 3, 2, 1}, "conv k3 s2 p1, odd sizes");
    check_gradients_of(Conv2D{{1, 4, 5}, 2, 2, 2, 0, reprosgd::Init::xavier_uniform}, "conv k2 s2, xavier");
    check_gradients_of(Conv2D{{2, 4, 4}, 3, 4, 1, 0}, "conv kernel = input size");
    check_gradients_of(Conv2D{{2, 4, 4}, 5, 3, 1, 1, reprosgd::Init::he_normal, 2}, "conv, 3 channel chunks");
    check_gradients_of(Conv2D{{3, 3, 2}, 4, 1}, "conv 1x1");
    // Max pooling: a step of 1e-3 keeps each window's winner (the inputs are 2e-3 or more apart).
    check_gradients_of(MaxPool2D{{2, 6, 5}, 2}, "maxpool k2 s2, odd width", 1e-3f);
    check_gradients_of(MaxPool2D{{2, 5, 5}, 3, 2, 1}, "maxpool k3 s2 p1 (overlapping)", 1e-3f);
    check_gradients_of(AvgPool2D{{2, 6, 5}, 2}, "avgpool k2 s2");
    check_gradients_of(AvgPool2D{{2, 5, 4}, 3, 1, 1}, "avgpool k3 s1 p1");
    check_gradients_of(GlobalAvgPool{{3, 4, 5}}, "global average pool");
    check_gradients_of(Flatten{{3, 2, 2}}, "flatten");
  }

  TEST_CASE("max pooling's tie rule: the lowest index of equal maxima takes the gradient") {
    // One channel, 3x3, all equal: with kernel 2 stride 1 the four windows each give their gradient
    // to their first pixel (0,0), (0,1), (1,0), (1,1).
    const MaxPool2D pool{{1, 3, 3}, 2, 1};
    M x("x", 1, 9);
    Kokkos::deep_copy(x, 2.0f);
    M gy("gy", 1, 4);
    gy(0, 0) = 1.0f, gy(0, 1) = 10.0f, gy(0, 2) = 100.0f, gy(0, 3) = 1000.0f;
    const Pass r = run_layer<Kokkos::Serial>(pool, B("p", 0), x, gy);
    for (int i = 0; i < 4; ++i) CHECK(r.y(0, i) == 2.0f);
    const float expected[9] = {1.0f, 10.0f, 0.0f, 100.0f, 1000.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 0; i < 9; ++i) {
      CAPTURE(i);
      CHECK(r.gx(0, i) == expected[i]);
    }
    // A tie between the window's last two pixels: the earlier one (row 1, column 0) wins.
    M y("y", 1, 1);
    M x2("x2", 1, 4);
    x2(0, 0) = 1.0f, x2(0, 1) = 0.5f, x2(0, 2) = 3.0f, x2(0, 3) = 3.0f;
    M gy2("gy2", 1, 1);
    gy2(0, 0) = 7.0f;
    const Pass r2 = run_layer<Kokkos::Serial>(MaxPool2D{{1, 2, 2}, 2}, B("p", 0), x2, gy2);
    CHECK(r2.y(0, 0) == 3.0f);
    CHECK(r2.gx(0, 2) == 7.0f);
    CHECK(r2.gx(0, 3) == 0.0f);
    // A NaN wins over every number: it propagates to the output, and takes the gradient.
    x2(0, 1) = std::numeric_limits<float>::quiet_NaN();
    const Pass r3 = run_layer<Kokkos::Serial>(MaxPool2D{{1, 2, 2}, 2}, B("p", 0), x2, gy2);
    CHECK(std::isnan(r3.y(0, 0)));
    CHECK(r3.gx(0, 1) == 7.0f);
    CHECK(r3.gx(0, 2) == 0.0f);
  }

  TEST_CASE_TEMPLATE_DEFINE("pooling: every host space gives the serial bits", Space, pool_bits_id) {
    const MaxPool2D maxpool{{3, 7, 6}, 3, 2, 1};
    const AvgPool2D avgpool{{3, 7, 6}, 3, 2, 1};
    const GlobalAvgPool gap{{3, 7, 6}};
    const M x = filled(4, 3 * 7 * 6, 55);
    auto same = [&](const auto& layer) {
      const M gy = filled(4, layer.output_width(126), 77);
      const Pass a = run_layer<Kokkos::Serial>(layer, B("p", 0), x, gy), b = run_layer<Space>(layer, B("p", 0), x, gy);
      CHECK(bit_differences(a.y, b.y) == 0);
      CHECK(bit_differences(a.gx, b.gx) == 0);
    };
    same(maxpool);
    same(avgpool);
    same(gap);
    // Average pooling's known answer: (sum of the window's inputs in kh, kw order, padding zeros) / 9.
    const Pass a = run_layer<Space>(avgpool, B("p", 0), x, filled(4, avgpool.output_width(126), 77));
    const ImageShape s = avgpool.input;
    float acc = 0.0f;
    for (long kh = 0; kh < 3; ++kh)
      for (long kw = 0; kw < 3; ++kw) acc = acc + pixel(x, s, 2, 1 * 2 - 1 + kh, 2 * 2 - 1 + kw, 1);
    CHECK(same_bits(a.y(2, (1 * 3 + 2) * 3 + 1), acc / 9.0f));
  }
  TEST_CASE_TEMPLATE_APPLY(pool_bits_id, reprosgd_test::host_spaces);

  TEST_CASE("a Sequential CNN keeps the convolutions' scratch in its workspace and equals the layers' own calls") {
    const Conv2D c1{{1, 8, 7}, 4, 3, 1, 1};
    const MaxPool2D p1{{4, 8, 7}, 2};
    const Conv2D c2{{4, 4, 3}, 6, 3, 1, 1};
    const GlobalAvgPool g{{6, 4, 3}};
    auto model = reprosgd::make_sequential<Mem>(c1, reprosgd::ReLU{}, p1, c2, reprosgd::ReLU{}, g, reprosgd::Dense{6, 3});
    CHECK(model.input_width() == 56);
    CHECK(model.output_width() == 3);
    model.initialize(Kokkos::Serial(), reprosgd::PhiloxStream(5));
    auto ws = model.make_workspace(5);
    CHECK(ws.layer_scratch.extent(0) == std::max(c1.scratch_size(56, 5), c2.scratch_size(48, 5)));
    const M x = filled(5, 56, 31);
    Kokkos::deep_copy(ws.act[0], x);
    const auto ctx = training_context<Kokkos::Serial>(5);
    model.forward(ctx, ws, 5);
    // The first convolution through the Layer concept's call (its own scratch): the same bits.
    M y1("y1", 5, c1.output_width(56));
    c1.forward(ctx, reprosgd::BufferRef<Mem>(model.parameters().data(), c1.parameter_count(56)), x, y1);
    CHECK(bit_differences(y1, ws.act[1]) == 0);
    const auto desc = model.describe();
    CHECK(desc.front() == "conv2d(1x8x7,4,k3,s1,p1,he)");
    CHECK(desc[2] == "maxpool2d(4x8x7,k2,s2,p0)");
  }
}
