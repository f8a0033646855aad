// SPDX-License-Identifier: BSD-3-Clause
/// @file Finite-difference checks of every layer's backward pass (parameter and input gradients,
/// Dense with one and with several feature chunks) through reprosgd::testing::check_gradients,
/// tests of that helper itself (it passes a correct layer, fails a wrong one and names the element,
/// refuses invalid options), and the checks of both losses.
#include <doctest/doctest.h>

#include <reprosgd/kernels/loss.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>
#include <reprosgd/testing/gradient_check.hpp>

#include "nn_test_support.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

namespace {

using namespace reprosgd_test::nn;
using Exec = Kokkos::Serial;

float value(std::uint64_t i, float scale) { return reprosgd_test::nn::value(i, scale, 12345); }

// The layer on Serial and on the default host space, at the tolerance these tests always had: 5 rows,
// h = 1e-2, |numeric - analytic| <= 2e-3 max(1, |numeric|). Both spaces give the same report: the
// layers and the helper are deterministic.
template <class L>
void check_layer(const L& layer, int in_width, float input_scale, const std::string& what) {
  CAPTURE(what);
  const reprosgd::testing::GradientCheckOptions options{
      .rows = 5, .step = 1e-2f, .tolerance = 2e-3, .scale_floor = 1.0, .input_scale = input_scale};
  const auto serial = reprosgd::testing::check_gradients(Exec(), layer, in_width, options);
  INFO(serial.describe());
  CHECK(serial.passed);
  CHECK(serial.parameters == layer.parameter_count(in_width));
  CHECK(serial.inputs == static_cast<std::size_t>(5 * in_width));
  CHECK(reprosgd::testing::check_gradients(layer, in_width, options).describe() == serial.describe());
}

}  // namespace

// Test layers for the helper, in a named namespace (nvcc's extended lambdas).
namespace gradient_check_test {

/// What a Scale layer gets wrong in its backward.
enum class Bug { none, input_factor, parameter_factor, unwritten_input };

/// y = a x with one parameter a, initialised to 2: gx = a gy, ga = sum_ij gy x (one thread, row-major
/// order). The bugs: gx = gy (the factor a dropped), ga = sum gy (the factor x dropped), gx never written.
template <Bug B>
struct Scale {
  static constexpr const char* name() noexcept { return "scale"; }
  [[nodiscard]] int output_width(int width) const noexcept { return width; }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return 1; }
  [[nodiscard]] std::string describe(int) const { return "scale"; }
  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& p, int) const {
    Kokkos::deep_copy(ctx.space, p, 2.0f);
  }
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P& p, const In& x, const Out& y) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    const long c = static_cast<long>(x.extent(1));
    Kokkos::parallel_for(Kokkos::RangePolicy<exec>(ctx.space, 0, static_cast<long>(x.extent(0)) * c),
                         KOKKOS_LAMBDA(const long e) { y(e / c, e % c) = p(0) * x(e / c, e % c); });
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P& p, const In& x, const Out&, const GOut& gy, const GIn& gx, const GP& gp) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    const long rows = static_cast<long>(x.extent(0)), c = static_cast<long>(x.extent(1));
    constexpr bool drop_a = B == Bug::input_factor, drop_x = B == Bug::parameter_factor;
    if (gx.extent(0) > 0 && B != Bug::unwritten_input)
      Kokkos::parallel_for(Kokkos::RangePolicy<exec>(ctx.space, 0, rows * c), KOKKOS_LAMBDA(const long e) {
        gx(e / c, e % c) = drop_a ? gy(e / c, e % c) : p(0) * gy(e / c, e % c);
      });
    Kokkos::parallel_for(Kokkos::RangePolicy<exec>(ctx.space, 0, 1), KOKKOS_LAMBDA(const long) {
      float acc = 0.0f;
      for (long e = 0; e < rows * c; ++e) acc = acc + (drop_x ? gy(e / c, e % c) : gy(e / c, e % c) * x(e / c, e % c));
      gp(0) = acc;
    });
  }
};
static_assert(reprosgd::Layer<Scale<Bug::none>>);

}  // namespace gradient_check_test

TEST_SUITE("testing/gradient_check") {
  using gradient_check_test::Bug, gradient_check_test::Scale;
  using reprosgd::testing::check_gradients, reprosgd::testing::GradientCheckOptions;

  TEST_CASE("a correct layer passes; the report says what was checked") {
    const auto r = check_gradients(Scale<Bug::none>{}, 4, {.rows = 3});
    INFO(r.describe());
    CHECK(r.passed);
    CHECK(r.layer == "scale");
    CHECK(r.parameters == 1);
    CHECK(r.inputs == 12);
    CHECK(r.failures == 0);
    CHECK(r.tolerance == 2e-3);
    CHECK(r.worst.error <= 2e-3);
    CHECK(r.describe().rfind("reprosgd::testing::check_gradients: scale: ok, 1 parameter and 12 input gradients "
                             "within 0.002; worst ",
                             0) == 0);
    // y = a x is linear in x and in a: the central difference is exact up to the float rounding of
    // the loss terms, so the worst error is far below the tolerance.
    CHECK(r.worst.error < 1e-4);
  }

  TEST_CASE("REPROSGD_CHECK_GRADIENTS: the doctest form, with and without options and a space") {
    REPROSGD_CHECK_GRADIENTS(Scale<Bug::none>{}, 4);
    REPROSGD_CHECK_GRADIENTS(Scale<Bug::none>{}, 4, {.rows = 2, .seed = 3});
    REPROSGD_CHECK_GRADIENTS(Kokkos::Serial(), reprosgd::Sigmoid{}, 5, {.input_scale = 3.0f});
  }

  TEST_CASE("a backward that drops the factor a in dx fails, at an input gradient") {
    const auto r = check_gradients(Scale<Bug::input_factor>{}, 4, {.rows = 3});
    INFO(r.describe());
    CHECK_FALSE(r.passed);
    CHECK(r.failures >= 1);
    CHECK(r.failures <= r.inputs);  // the parameter gradient is right
    CHECK(r.worst.kind == "input");
    CHECK(r.worst.index < 12);
    CHECK(r.worst.numeric == doctest::Approx(2.0 * r.worst.analytic).epsilon(1e-3));  // the missing a = 2
    CHECK(r.describe().find(": scale: FAILED, ") != std::string::npos);
    CHECK(r.describe().find("; worst input ") != std::string::npos);
  }

  TEST_CASE("a backward that drops the factor x in da fails, at parameter 0") {
    const auto r = check_gradients(Scale<Bug::parameter_factor>{}, 4, {.rows = 3});
    INFO(r.describe());
    CHECK_FALSE(r.passed);
    CHECK(r.failures == 1);
    CHECK(r.worst.kind == "parameter");
    CHECK(r.worst.index == 0);
    CHECK(r.describe().find("FAILED, 1 of 13 gradients (1 parameter, 12 input) over 0.002; worst parameter 0: ") !=
          std::string::npos);
  }

  TEST_CASE("an input gradient backward never writes fails with an infinite error (gradients start as NaN)") {
    const auto r = check_gradients(Scale<Bug::unwritten_input>{}, 4, {.rows = 3});
    CHECK_FALSE(r.passed);
    CHECK(r.failures == 12);
    CHECK(r.worst.kind == "input");
    CHECK(r.worst.index == 0);  // the first of equal (infinite) errors
    CHECK(std::isnan(r.worst.analytic));
    CHECK(r.worst.error == std::numeric_limits<double>::infinity());
  }

  TEST_CASE("the kink margin keeps ReLU's probes off its kink") {
    const reprosgd::ReLU relu;
    // A step of 0.5 with inputs in [-1, 1) and no margin: some probes cross 0 and the quotient lies.
    CHECK_FALSE(check_gradients(relu, 8, {.step = 0.5f, .kink_margin = 0.0f}).passed);
    // The same step with every input at least 0.6 from 0: no probe crosses it.
    const auto r = check_gradients(relu, 8, {.step = 0.5f, .kink_margin = 0.6f});
    INFO(r.describe());
    CHECK(r.passed);
  }

  TEST_CASE("the same options give the same report; another seed other inputs") {
    const reprosgd::Tanh tanh;
    const auto a = check_gradients(tanh, 6), b = check_gradients(tanh, 6), c = check_gradients(tanh, 6, {.seed = 7});
    CHECK(a.describe() == b.describe());
    CHECK(a.worst.numeric == b.worst.numeric);
    CHECK(c.passed);
    CHECK(c.describe() != a.describe());
  }

  TEST_CASE("describe() of a passing and of a failing report") {
    reprosgd::testing::GradientCheckReport r;
    r.layer = "dense(6,4,he)";
    r.passed = true;
    r.parameters = 28;
    r.inputs = 30;
    r.tolerance = 2e-3;
    r.worst = {"parameter", 3, 0.51234, 0.512401, 0.000119};
    CHECK(r.describe() ==
          "reprosgd::testing::check_gradients: dense(6,4,he): ok, 28 parameter and 30 input gradients within 0.002; "
          "worst parameter 3: analytic 0.51234, numeric 0.512401, error 0.000119");
    r.passed = false;
    r.failures = 2;
    r.worst = {"input", 17, 0.25, 0.5, 0.5};
    CHECK(r.describe() ==
          "reprosgd::testing::check_gradients: dense(6,4,he): FAILED, 2 of 58 gradients (28 parameter, 30 input) over "
          "0.002; worst input 17: analytic 0.25, numeric 0.5, error 0.5");
  }

  TEST_CASE("invalid options and widths are config_errors that name the option") {
    const Scale<Bug::none> s;
    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    const float finf = std::numeric_limits<float>::infinity(), fnan = std::numeric_limits<float>::quiet_NaN();
    const std::string who = "reprosgd::testing::check_gradients: ";
    auto message = [&](int width, const GradientCheckOptions& o) -> std::string {
      try {
        (void)check_gradients(s, width, o);
      } catch (const reprosgd::config_error& e) {
        return e.what();
      }
      return "no error";
    };
    CHECK(message(0, {}) == who + "in_width must be >= 1, got 0");
    CHECK(message(4, {.rows = 0}) == who + "rows must be >= 1, got 0");
    CHECK(message(4, {.rows = -3}) == who + "rows must be >= 1, got -3");
    CHECK(message(4, {.step = 0.0f}) == who + "step must be finite and > 0, got 0");
    CHECK(message(4, {.step = -0.01f}) == who + "step must be finite and > 0, got -0.01");
    CHECK(message(4, {.step = finf}) == who + "step must be finite and > 0, got inf");
    CHECK(message(4, {.step = fnan}) == who + "step must be finite and > 0, got nan");
    CHECK(message(4, {.tolerance = 0.0}) == who + "tolerance must be finite and > 0, got 0");
    CHECK(message(4, {.tolerance = nan}) == who + "tolerance must be finite and > 0, got nan");
    CHECK(message(4, {.tolerance = inf}) == who + "tolerance must be finite and > 0, got inf");
    CHECK(message(4, {.scale_floor = -1.0}) == who + "scale_floor must be finite and > 0, got -1");
    CHECK(message(4, {.scale_floor = inf}) == who + "scale_floor must be finite and > 0, got inf");
    CHECK(message(4, {.input_scale = 0.0f}) == who + "input_scale must be finite and > 0, got 0");
    CHECK(message(4, {.input_scale = fnan}) == who + "input_scale must be finite and > 0, got nan");
    CHECK(message(4, {.kink_margin = -0.5f}) == who + "kink_margin must be finite and >= 0, got -0.5");
    CHECK(message(4, {.kink_margin = finf}) == who + "kink_margin must be finite and >= 0, got inf");
    CHECK(message(4, {.kink_margin = 0.0f}) == "no error");  // no margin is allowed
    CHECK_THROWS_AS((void)check_gradients(s, 4, {.rows = 0}), reprosgd::config_error);
    // The layer's own refusal of the width comes through unchanged.
    CHECK_THROWS_WITH_AS((void)check_gradients(reprosgd::Dense{6, 4}, 5), "reprosgd::Dense: expects 6 inputs, receives 5",
                         reprosgd::config_error);
  }
}

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
