// SPDX-License-Identifier: BSD-3-Clause
/// @file Finite-difference checks (central differences, loss accumulated in double) of every layer's
/// backward pass (parameter and input gradients, Dense with one and with several feature chunks)
/// and of both losses.
#include <doctest/doctest.h>

#include <reprosgd/kernels/loss.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>

#include "nn_test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace reprosgd_test::nn;
using Exec = Kokkos::Serial;

float value(std::uint64_t i, float scale) { return reprosgd_test::nn::value(i, scale, 12345); }

// loss(x, p) = sum_ij R(i,j) * layer(x; p)(i,j), accumulated in double.
template <class L>
double probe_loss(const L& layer, const Ctx<>& ctx, const B& p, const M& x, const M& y, const M& r) {
  layer.forward(ctx, p, x, y);
  Kokkos::fence();
  double s = 0.0;
  for (std::size_t i = 0; i < y.extent(0); ++i)
    for (std::size_t j = 0; j < y.extent(1); ++j) s += static_cast<double>(r(i, j)) * static_cast<double>(y(i, j));
  return s;
}

template <class L>
void check_layer(const L& layer, int in_width, float input_scale, const std::string& what) {
  CAPTURE(what);
  const long m = 5;
  const int out_width = layer.output_width(in_width);
  const auto ctx = training_context(99, 1, 3, 17);
  // Not a structured binding: the lambda below captures p, which clang 15 (the HIP build's) refuses
  // for a binding.
  const LayerParams params = initialized_params(layer, ctx, in_width);
  const auto p = params.p;
  const auto gp = params.gp;
  Kokkos::fence();
  M x("x", m, in_width), y("y", m, out_width), r("r", m, out_width), gx("gx", m, in_width);
  for (long i = 0; i < m; ++i)
    for (int j = 0; j < in_width; ++j) {
      // Kept at least 0.05 away from 0, where ReLU has its kink and the difference quotient lies.
      const float v = value(static_cast<std::uint64_t>(i * 100 + j), input_scale);
      x(i, j) = v + (v >= 0.0f ? 0.05f : -0.05f);
    }
  for (long i = 0; i < m; ++i)
    for (int j = 0; j < out_width; ++j) r(i, j) = value(static_cast<std::uint64_t>(7777 + i * 100 + j), 1.0f);
  (void)probe_loss(layer, ctx, p, x, y, r);
  layer.backward(ctx, p, x, y, r, gx, gp);
  Kokkos::fence();

  const float h = 1e-2f;
  auto check = [&](float& slot, float analytic, const char* kind, std::size_t idx) {
    const float saved = slot;
    slot = saved + h;
    const double up = probe_loss(layer, ctx, p, x, y, r);
    slot = saved - h;
    const double down = probe_loss(layer, ctx, p, x, y, r);
    slot = saved;
    const double numeric = (up - down) / (2.0 * static_cast<double>(h));
    INFO(kind << " " << idx << ": analytic " << analytic << ", numeric " << numeric);
    CHECK(std::fabs(numeric - analytic) <= 2e-3 * std::max(1.0, std::fabs(numeric)));
  };
  for (std::size_t k = 0; k < p.extent(0); ++k) check(p(k), gp(k), "parameter", k);
  for (long i = 0; i < m; ++i)
    for (int j = 0; j < in_width; ++j) check(x(i, j), gx(i, j), "input", static_cast<std::size_t>(i * in_width + j));
}

}  // namespace

TEST_SUITE("nn/gradient_check") {
  TEST_CASE("Dense") { check_layer(reprosgd::Dense{6, 4}, 6, 1.0f, "dense he"); }
  TEST_CASE("Dense, Xavier") { check_layer(reprosgd::Dense{3, 7, reprosgd::Init::xavier_uniform}, 3, 1.0f, "dense xavier"); }
  // Several feature chunks: dx is the Exact sum of the chunks' float partials, not one GEMM.
  TEST_CASE("Dense, several feature chunks") {
    const reprosgd::Dense he{6, 20, reprosgd::Init::he_normal, 8};
    REQUIRE(he.chunks() == 3);  // 8 + 8 + 4 features
    check_layer(he, 6, 1.0f, "dense he, 3 chunks of 8");
    const reprosgd::Dense xavier{5, 9, reprosgd::Init::xavier_uniform, 4};
    REQUIRE(xavier.chunks() == 3);  // 4 + 4 + 1 features
    check_layer(xavier, 5, 1.0f, "dense xavier, 3 chunks of 4");
    const reprosgd::Dense ones{4, 6, reprosgd::Init::he_normal, 1};
    REQUIRE(ones.chunks() == 6);
    check_layer(ones, 4, 1.0f, "dense he, 6 chunks of 1");
  }
  TEST_CASE("ReLU") { check_layer(reprosgd::ReLU{}, 8, 1.0f, "relu"); }
  TEST_CASE("Tanh") { check_layer(reprosgd::Tanh{}, 8, 2.0f, "tanh"); }
  TEST_CASE("Sigmoid") { check_layer(reprosgd::Sigmoid{}, 8, 3.0f, "sigmoid"); }
  TEST_CASE("ActivationFn") {
    check_layer(reprosgd::ActivationFn{reprosgd::Activation::tanh}, 5, 1.5f, "activation tanh");
  }
  TEST_CASE("ReLU, Tanh and Sigmoid are ActivationFn of their kind, described by the kind's name") {
    using reprosgd::Activation, reprosgd::ActivationFn;
    static_assert(std::is_base_of_v<ActivationFn, reprosgd::ReLU>);
    CHECK(reprosgd::ReLU{}.kind == Activation::relu);
    CHECK(reprosgd::Tanh{}.kind == Activation::tanh);
    CHECK(reprosgd::Sigmoid{}.kind == Activation::sigmoid);
    // describe() enters checkpoint configuration hashes: these strings must never change.
    CHECK(reprosgd::ReLU{}.describe(8) == "relu");
    CHECK(reprosgd::Tanh{}.describe(8) == "tanh");
    CHECK(reprosgd::Sigmoid{}.describe(8) == "sigmoid");
    CHECK(ActivationFn{}.describe(8) == "relu");
    CHECK(ActivationFn{Activation::tanh}.describe(8) == "tanh");
    CHECK(ActivationFn{Activation::sigmoid}.describe(8) == "sigmoid");
  }
  TEST_CASE("Dropout (the mask is fixed by the context's coordinates)") {
    check_layer(reprosgd::Dropout{0.3f}, 9, 1.0f, "dropout");
  }

  TEST_CASE("softmax cross-entropy and MSE gradients") {
    const long m = 4;
    const int c = 6;
    M logits("logits", m, c), grad("grad", m, c);
    Kokkos::View<std::int32_t*, Mem> labels("labels", m);
    Kokkos::View<float*, Mem> row_loss("row_loss", m);
    Kokkos::View<std::int32_t*, Mem> correct("correct", m);
    for (long i = 0; i < m; ++i) {
      labels(i) = static_cast<std::int32_t>((i * 5) % c);
      for (int j = 0; j < c; ++j) logits(i, j) = value(static_cast<std::uint64_t>(500 + i * c + j), 3.0f);
    }
    for (bool ce : {true, false}) {
      CAPTURE(ce);
      auto run = [&](bool want_grad) {
        const M g(want_grad ? grad : M("none", 0, c));
        if (ce)
          reprosgd::softmax_cross_entropy(Exec(), logits, labels, m, 0.25f, g, row_loss, correct);
        else
          reprosgd::mse_one_hot(Exec(), logits, labels, m, 0.25f, g, row_loss, correct);
        Kokkos::fence();
        double s = 0.0;
        for (long i = 0; i < m; ++i) s += row_loss(i);
        return 0.25 * s;  // the gradient is scaled by 1/B = 0.25
      };
      run(true);
      M analytic("analytic", m, c);
      Kokkos::deep_copy(analytic, grad);
      for (long i = 0; i < m; ++i)
        for (int j = 0; j < c; ++j) {
          const float saved = logits(i, j);
          logits(i, j) = saved + 1e-2f;
          const double up = run(false);
          logits(i, j) = saved - 1e-2f;
          const double down = run(false);
          logits(i, j) = saved;
          const double numeric = (up - down) / 2e-2;
          INFO("logit " << i << "," << j << ": analytic " << analytic(i, j) << ", numeric " << numeric);
          CHECK(std::fabs(numeric - analytic(i, j)) <= 1e-3);
        }
    }
  }

  TEST_CASE("softmax cross-entropy is stable for huge logits and reports the argmax") {
    M logits("logits", 1, 3), grad("grad", 1, 3);
    Kokkos::View<std::int32_t*, Mem> labels("labels", 1);
    Kokkos::View<float*, Mem> loss("loss", 1);
    Kokkos::View<std::int32_t*, Mem> correct("correct", 1);
    logits(0, 0) = 1e30f;
    logits(0, 1) = -1e30f;
    logits(0, 2) = 0.0f;
    labels(0) = 0;
    reprosgd::softmax_cross_entropy(Exec(), logits, labels, 1, 1.0f, grad, loss, correct);
    Kokkos::fence();
    CHECK(loss(0) == 0.0f);
    CHECK(correct(0) == 1);
    CHECK(grad(0, 0) == 0.0f);
    CHECK(grad(0, 1) == 0.0f);
    labels(0) = 1;
    reprosgd::softmax_cross_entropy(Exec(), logits, labels, 1, 1.0f, grad, loss, correct);
    Kokkos::fence();
    CHECK(loss(0) == 2e30f);
    CHECK(correct(0) == 0);
  }

  TEST_CASE("layer configuration errors") {
    const reprosgd::Dense d784{784, 10}, d0{0, 10};
    CHECK_THROWS_WITH_AS((void)d784.output_width(100), "reprosgd::Dense: expects 784 inputs, receives 100",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS((void)d0.output_width(0), "reprosgd::Dense: sizes must be positive, got 0x10",
                         reprosgd::config_error);
    const reprosgd::Dropout p1{1.0f}, pm{-0.1f};
    CHECK_THROWS_WITH_AS((void)p1.output_width(4), "reprosgd::Dropout: p must be in [0, 1), got 1.000000",
                         reprosgd::config_error);
    CHECK_THROWS_AS((void)pm.output_width(4), reprosgd::config_error);
  }
}
