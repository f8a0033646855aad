// SPDX-License-Identifier: BSD-3-Clause
/// @file testing::check_gradients: a finite-difference check of a layer's backward pass (every
/// parameter gradient and every input gradient), for the library's layers and a user's own.
/// docs/concepts/layer.md, "Check its gradients".
///
/// The probe loss is L(x, p) = sum_ij R(i,j) y(i,j), y = layer.forward(x; p), with fixed weights R
/// in [-1, 1) and the sum accumulated in double, so dL/dy = R and backward(gy = R) must give dL/dp
/// and dL/dx. Each element is moved by ±h in float and compared with the central difference
/// (L(+h) - L(-h)) / (2h), h being the distance the float actually moved. No test framework is
/// needed; REPROSGD_CHECK_GRADIENTS wraps it for doctest.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/concepts/layer_context.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/nn/layer_traits.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

REPROSGD_BEGIN_NAMESPACE
namespace testing {

/// How check_gradients probes a layer. The defaults check the library's layers.
struct GradientCheckOptions {
  long rows = 5;                ///< samples in the probe micro-batch
  std::uint64_t seed = 12345;   ///< inputs, loss weights R, the parameters' initialisation and dropout
  float step = 1e-2f;           ///< h, the finite-difference step
  double tolerance = 2e-3;      ///< largest error accepted (see scale_floor)
  /// The error is |numeric - analytic| / max(scale_floor, |numeric|): relative for gradients larger
  /// than scale_floor, absolute (in units of scale_floor) for smaller ones.
  double scale_floor = 1.0;
  float input_scale = 1.0f;     ///< inputs are drawn in [-input_scale, input_scale) ...
  /// ... then moved away from 0 by kink_margin (v + sign(v) * kink_margin), so that with
  /// step < kink_margin no probe crosses 0, where ReLU has its kink and the difference quotient lies.
  float kink_margin = 0.05f;
};

/// One checked element: which gradient, and how far backward's value is from the central difference.
struct GradientCheckElement {
  std::string kind;        ///< "parameter" or "input"
  std::size_t index = 0;   ///< in the layer's parameter slice, or row-major in the input (row * in_width + column)
  double analytic = 0.0;   ///< what backward wrote
  double numeric = 0.0;    ///< the central difference
  double error = 0.0;      ///< |numeric - analytic| / max(scale_floor, |numeric|); +inf if either is not finite
};

/// What check_gradients found.
struct GradientCheckReport {
  std::string layer;               ///< layer.describe(in_width)
  bool passed = false;             ///< every element's error <= tolerance
  std::size_t parameters = 0;      ///< parameter gradients checked (all of them)
  std::size_t inputs = 0;          ///< input gradients checked (rows x in_width)
  std::size_t failures = 0;        ///< elements whose error exceeds the tolerance
  double tolerance = 0.0;
  GradientCheckElement worst;      ///< the element with the largest error (the first of equals)

  /// One line for a test failure or a log: the verdict, the counts and the worst element, e.g.
  /// "reprosgd::testing::check_gradients: dense(6,4,he): ok, 28 parameter and 30 input gradients
  /// within 0.002; worst parameter 3: analytic 0.51234, numeric 0.512401, error 0.000119".
  [[nodiscard]] std::string describe() const {
    char worst_text[200];
    std::snprintf(worst_text, sizeof worst_text, "worst %s %zu: analytic %.6g, numeric %.6g, error %.3g",
                  worst.kind.c_str(), worst.index, worst.analytic, worst.numeric, worst.error);
    char head[120];
    if (passed)
      std::snprintf(head, sizeof head, "ok, %zu parameter and %zu input gradients within %g", parameters, inputs,
                    tolerance);
    else
      std::snprintf(head, sizeof head, "FAILED, %zu of %zu gradients (%zu parameter, %zu input) over %g", failures,
                    parameters + inputs, parameters, inputs, tolerance);
    return "reprosgd::testing::check_gradients: " + layer + ": " + head + "; " + worst_text;
  }
};

namespace detail {

/// A float in [-1, 1) from (seed, stream, i): splitmix64, the same on every machine and compiler.
inline float gradient_check_value(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  std::uint64_t z = seed * 0x9e3779b97f4a7c15ULL + stream * 0xd1b54a32d192ed03ULL + i + 0x632be59bd9b4e019ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<float>(static_cast<std::int64_t>(z >> 40) - (1LL << 23)) * (1.0f / static_cast<float>(1 << 23));
}

inline std::string gradient_check_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// Throws config_error naming the first invalid option.
inline void check_gradient_check_options(const GradientCheckOptions& o, int in_width) {
  const std::string who = "reprosgd::testing::check_gradients: ";
  auto positive = [](double v) { return std::isfinite(v) && v > 0.0; };
  if (in_width < 1) throw config_error(who + "in_width must be >= 1, got " + std::to_string(in_width));
  if (o.rows < 1) throw config_error(who + "rows must be >= 1, got " + std::to_string(o.rows));
  if (!positive(o.step)) throw config_error(who + "step must be finite and > 0, got " + gradient_check_number(o.step));
  if (!positive(o.tolerance))
    throw config_error(who + "tolerance must be finite and > 0, got " + gradient_check_number(o.tolerance));
  if (!positive(o.scale_floor))
    throw config_error(who + "scale_floor must be finite and > 0, got " + gradient_check_number(o.scale_floor));
  if (!positive(o.input_scale))
    throw config_error(who + "input_scale must be finite and > 0, got " + gradient_check_number(o.input_scale));
  if (!(std::isfinite(o.kink_margin) && o.kink_margin >= 0.0f))
    throw config_error(who + "kink_margin must be finite and >= 0, got " + gradient_check_number(o.kink_margin));
}

}  // namespace detail

/**
 * Check `layer`'s backward pass against central differences of a probe loss: every parameter
 * gradient and every input gradient, for `in_width` inputs and options.rows rows.
 *
 * What it does, in order:
 * 1. the context: LayerContext{space, PhiloxStream(seed), layer 0, step 0, sample offset 0,
 *    training}; the parameters: layer.initialize(ctx, params, in_width) (the layer's own
 *    initialisation, so a parameter-dependent gradient is checked where training starts);
 * 2. inputs x(i,j) = v + sign(v) * kink_margin with v in [-input_scale, input_scale), loss
 *    weights R(i,j) in [-1, 1), both pure functions of (seed, i, j);
 * 3. forward, then backward with gy = R into gradients prefilled with NaN, so an element backward
 *    leaves unwritten fails (error +inf) — the Layer concept asks backward to write them all;
 * 4. each parameter (but a layer's statistics, statistics_runs(): not trained), then each input element, moved by ±step in float, the loss summed in double,
 *    the central difference compared with backward's value.
 * The parameters and inputs are views in space's memory, as Sequential passes them (BufferRef,
 * MatrixRef), written element by element on the host between forward calls.
 *
 * @tparam ExecSpace a Kokkos execution space whose memory the host can access (Serial, OpenMP,
 *         Threads; the overload without one uses Kokkos::DefaultHostExecutionSpace)
 * @tparam L a model of Layer
 * @param options rows, seed, step, tolerance, scale_floor, input_scale, kink_margin
 * @returns the report: passed, the counts, the worst element, describe()
 * @throws config_error on invalid options (rows < 1, a step, tolerance, scale_floor or input_scale
 *         that is not finite and > 0, a kink_margin that is not finite and >= 0, in_width < 1), and
 *         whatever layer.output_width(in_width) throws for a width the layer refuses
 * Not collective. @deterministic the report is the same for the same layer, options and build.
 *
 * **Example**:
 * @code
 * const auto report = reprosgd::testing::check_gradients(MyLayer{}, 8, {.input_scale = 2.0f});
 * if (!report.passed) std::puts(report.describe().c_str());
 * @endcode
 */
template <class ExecSpace, Layer L>
  requires Kokkos::is_execution_space<ExecSpace>::value
[[nodiscard]] GradientCheckReport check_gradients(const ExecSpace& space, const L& layer, int in_width,
                                                  const GradientCheckOptions& options = {}) {
  using mem = typename ExecSpace::memory_space;
  static_assert(Kokkos::SpaceAccessibility<Kokkos::HostSpace, mem>::accessible,
                "reprosgd::testing::check_gradients: the execution space must be a host space (Serial, OpenMP, "
                "Threads): the probes write its memory element by element");
  detail::check_gradient_check_options(options, in_width);
  const int out_width = layer.output_width(in_width);
  const std::size_t n_params = layer.parameter_count(in_width);
  const long rows = options.rows;

  GradientCheckReport report;
  report.layer = layer.describe(in_width);
  report.tolerance = options.tolerance;
  const LayerContext<ExecSpace, PhiloxStream> ctx{space, PhiloxStream(options.seed), 0, 0, 0, true};
  const Buffer<mem> p_own("reprosgd::testing::check_gradients::p", n_params),
      gp_own("reprosgd::testing::check_gradients::gp", n_params);
  const Matrix<mem> x_own("reprosgd::testing::check_gradients::x", rows, in_width),
      y_own("reprosgd::testing::check_gradients::y", rows, out_width),
      r_own("reprosgd::testing::check_gradients::r", rows, out_width),
      gx_own("reprosgd::testing::check_gradients::gx", rows, in_width);
  const BufferRef<mem> p(p_own.data(), n_params), gp(gp_own.data(), n_params);
  const MatrixRef<mem> x(x_own.data(), rows, in_width), y(y_own.data(), rows, out_width),
      r(r_own.data(), rows, out_width), gx(gx_own.data(), rows, in_width);

  layer.initialize(ctx, p, in_width);
  space.fence();
  for (long i = 0; i < rows; ++i)
    for (int j = 0; j < in_width; ++j) {
      const auto e = static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(in_width) + static_cast<std::uint64_t>(j);
      const float v = detail::gradient_check_value(options.seed, 1, e) * options.input_scale;
      x(i, j) = v + (v >= 0.0f ? options.kink_margin : -options.kink_margin);
    }
  for (long i = 0; i < rows; ++i)
    for (int j = 0; j < out_width; ++j)
      r(i, j) = detail::gradient_check_value(
          options.seed, 2, static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(out_width) + static_cast<std::uint64_t>(j));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Kokkos::deep_copy(gp_own, nan);
  Kokkos::deep_copy(gx_own, nan);

  auto loss = [&] {
    layer.forward(ctx, p, x, y);
    space.fence();
    double s = 0.0;
    for (long i = 0; i < rows; ++i)
      for (int j = 0; j < out_width; ++j) s += static_cast<double>(r(i, j)) * static_cast<double>(y(i, j));
    return s;
  };
  (void)loss();
  layer.backward(ctx, p, x, y, r, gx, gp);
  space.fence();

  bool first = true;
  auto probe = [&](float& slot, float analytic_value, const char* kind, std::size_t index) {
    const float saved = slot;
    const float up_value = saved + options.step, down_value = saved - options.step;
    slot = up_value;
    const double up = loss();
    slot = down_value;
    const double down = loss();
    slot = saved;
    GradientCheckElement e{kind, index, static_cast<double>(analytic_value), 0.0, 0.0};
    e.numeric = (up - down) / (static_cast<double>(up_value) - static_cast<double>(down_value));
    e.error = std::isfinite(e.numeric) && std::isfinite(e.analytic)
                  ? std::fabs(e.numeric - e.analytic) / std::fmax(options.scale_floor, std::fabs(e.numeric))
                  : std::numeric_limits<double>::infinity();
    if (!(e.error <= options.tolerance)) ++report.failures;
    if (first || e.error > report.worst.error) report.worst = e;
    first = false;
  };
  // Statistics (BatchNorm's running mean and variance) are not trained: backward writes the
  // micro-batch's statistics in their slots, not a gradient, so they are not probed.
  std::vector<bool> statistic(n_params, false);
  if constexpr (reprosgd::detail::KeepsStatistics<L>)
    for (const StatisticsRun& r : layer.statistics_runs(in_width))
      for (std::size_t k = r.offset; k < r.offset + r.count; ++k) statistic[k] = true;
  std::size_t probed = 0;
  for (std::size_t k = 0; k < n_params; ++k)
    if (!statistic[k]) probe(p(k), gp(k), "parameter", k), ++probed;
  for (long i = 0; i < rows; ++i)
    for (int j = 0; j < in_width; ++j)
      probe(x(i, j), gx(i, j), "input", static_cast<std::size_t>(i) * static_cast<std::size_t>(in_width) + j);
  report.parameters = probed;
  report.inputs = static_cast<std::size_t>(rows) * static_cast<std::size_t>(in_width);
  report.passed = report.failures == 0;
  return report;
}

/// check_gradients on Kokkos::DefaultHostExecutionSpace.
template <Layer L>
[[nodiscard]] GradientCheckReport check_gradients(const L& layer, int in_width, const GradientCheckOptions& options = {}) {
  return check_gradients(Kokkos::DefaultHostExecutionSpace(), layer, in_width, options);
}

}  // namespace testing
REPROSGD_END_NAMESPACE

/// doctest assertion: reprosgd::testing::check_gradients(args...) passes; on failure the report's
/// describe() names the worst element. `REPROSGD_CHECK_GRADIENTS(layer, width)`,
/// `REPROSGD_CHECK_GRADIENTS(layer, width, {.input_scale = 2.0f})` or with a host space first.
/// Include doctest before using it; the header itself does not need doctest.
#define REPROSGD_CHECK_GRADIENTS(...)                                                                 \
  do {                                                                                                \
    const ::reprosgd::testing::GradientCheckReport reprosgd_report_ =                                 \
        ::reprosgd::testing::check_gradients(__VA_ARGS__);                                            \
    INFO(reprosgd_report_.describe());                                                                \
    CHECK(reprosgd_report_.passed);                                                                   \
  } while (0)
