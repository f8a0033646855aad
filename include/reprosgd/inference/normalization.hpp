// SPDX-License-Identifier: BSD-3-Clause
/// @file Normalization: the standardisation statistics that travel with a model (its inputs and,
/// for a regression, its outputs), their checks, and the kernels that apply them on the way in and
/// invert them on the way out (docs/surrogates.md, "Normalisation").
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/data/dataset.hpp>
#include <reprosgd/data/normalize.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/views.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/**
 * What predict() does to a model's inputs before its first layer and to its outputs after the last.
 *
 * - `inputs` (empty: none): input feature j enters the model as `(x - mean[j]) / d[j]`, where
 *   `d[j] = std_dev[j]` if it is > 0 and 1 otherwise (a constant feature is only centred). One
 *   float subtraction and one float division, rounded each: the bits of apply_normalization(), so
 *   a model trained on apply_normalization()'d data sees the same floats in predict().
 * - `outputs` (empty: none; set for a regression trained on standardised targets): output j
 *   leaves predict() as `y * d[j] + mean[j]`, one float multiplication then one float addition,
 *   each rounded (never a fused multiply-add: the library's target compiles with
 *   -ffp-contract=off, docs/numerics.md). This inverts the standardisation of the targets.
 *
 * The statistics come from compute_normalization(): per column, sums in double over the rows in
 * ascending order, mean = float(sum / N), std_dev = float(sqrt(population variance)), so they are
 * the same bits for any thread count, backend or rank count. A model file stores them with the
 * parameters (save_model), so whoever loads the model applies the same ones.
 *
 * **Example**:
 * @code
 * reprosgd::Normalization norm{.inputs = reprosgd::compute_normalization(data.train)};
 * reprosgd::apply_normalization(data.train, norm.inputs);   // what training sees
 * ... train ...
 * reprosgd::save_model("surrogate.rsgdm", model, norm);        // predict() applies norm.inputs
 * @endcode
 */
struct Normalization {
  NormalizationStats inputs;   ///< per input feature; empty: inputs are used as given
  NormalizationStats outputs;  ///< per output; empty: outputs are the model's own

  [[nodiscard]] bool has_inputs() const noexcept { return !inputs.mean.empty() || !inputs.std_dev.empty(); }
  [[nodiscard]] bool has_outputs() const noexcept { return !outputs.mean.empty() || !outputs.std_dev.empty(); }

  /**
   * Throws unless the statistics fit a model of `in` inputs and `out` outputs: every present set
   * has one mean and one standard deviation per column, means are finite, standard deviations are
   * finite and >= 0. `who` starts the message ("reprosgd::Inference: ...").
   * @throws config_error naming the first problem
   */
  void check(int in, int out, const char* who) const {
    check_set(inputs, in, "input", who);
    check_set(outputs, out, "output", who);
  }

  friend bool operator==(const Normalization& a, const Normalization& b) {
    return a.inputs.mean == b.inputs.mean && a.inputs.std_dev == b.inputs.std_dev &&
           a.outputs.mean == b.outputs.mean && a.outputs.std_dev == b.outputs.std_dev;
  }

 private:
  static void check_set(const NormalizationStats& s, int width, const char* what, const char* who) {
    const bool present = !s.mean.empty() || !s.std_dev.empty();
    if (!present) return;
    const std::string w = std::string(who) + ": the " + what + " normalisation ";
    if (s.mean.size() != static_cast<std::size_t>(width) || s.std_dev.size() != static_cast<std::size_t>(width))
      throw config_error(w + "has " + std::to_string(s.mean.size()) + " means and " + std::to_string(s.std_dev.size()) +
                         " standard deviations, the model has " + std::to_string(width) + " " + what + "s");
    for (std::size_t j = 0; j < s.mean.size(); ++j) {
      if (detail::is_non_finite(s.mean[j]))
        throw config_error(w + "has a non-finite mean at " + std::to_string(j));
      if (detail::is_non_finite(s.std_dev[j]) || !(s.std_dev[j] >= 0.0f))
        throw config_error(w + "has a standard deviation at " + std::to_string(j) +
                           " that is not a finite number >= 0");
    }
  }
};

namespace detail {

/// A Normalization's statistics in memory space M, ready for the kernels: the mean and the divisor
/// d (std_dev, or 1 where it is 0) of each column; empty Views where a set is absent.
template <class M>
struct NormalizationViews {
  Kokkos::View<float*, M> in_mean, in_div, out_mean, out_div;

  NormalizationViews() = default;
  explicit NormalizationViews(const Normalization& n) {
    upload(n.inputs, in_mean, in_div, "reprosgd::Inference::input");
    upload(n.outputs, out_mean, out_div, "reprosgd::Inference::output");
  }
  [[nodiscard]] bool inputs() const noexcept { return in_mean.extent(0) > 0; }
  [[nodiscard]] bool outputs() const noexcept { return out_mean.extent(0) > 0; }

 private:
  static void upload(const NormalizationStats& s, Kokkos::View<float*, M>& mean, Kokkos::View<float*, M>& div,
                     const std::string& label) {
    if (s.mean.empty()) return;
    mean = Kokkos::View<float*, M>(label + "_mean", s.mean.size());
    div = Kokkos::View<float*, M>(label + "_divisor", s.mean.size());
    auto mh = Kokkos::create_mirror_view(mean);
    auto dh = Kokkos::create_mirror_view(div);
    for (std::size_t j = 0; j < s.mean.size(); ++j) {
      mh(j) = s.mean[j];
      dh(j) = s.std_dev[j] > 0.0f ? s.std_dev[j] : 1.0f;  // x / 1 == x and y * 1 == y exactly
    }
    Kokkos::deep_copy(mean, mh);
    Kokkos::deep_copy(div, dh);
  }
};

}  // namespace detail

/**
 * dst(i, j) = (src(r0 + i, j) - mean(j)) / div(j) for the dst.extent(0) rows (a plain copy when
 * `mean` is empty): the model's input rows, standardised as apply_normalization() does. `src` may
 * have any layout Kokkos can index. One thread per row. @deterministic @device
 */
template <class ExecSpace, class Src, class Dst, class Mean>
void normalize_input_rows(const ExecSpace& space, const Src& src, long r0, const Mean& mean, const Mean& div,
                          const Dst& dst) {
  const long rows = static_cast<long>(dst.extent(0)), cols = static_cast<long>(dst.extent(1));
  if (rows == 0 || cols == 0) return;
  const bool standardise = mean.extent(0) > 0;
  Kokkos::parallel_for(
      "reprosgd::Inference::inputs", Kokkos::RangePolicy<ExecSpace>(space, 0, rows), KOKKOS_LAMBDA(const long i) {
        if (standardise) {
          for (long j = 0; j < cols; ++j) dst(i, j) = (src(r0 + i, j) - mean(j)) / div(j);
        } else {
          for (long j = 0; j < cols; ++j) dst(i, j) = src(r0 + i, j);
        }
      });
}

/**
 * dst(r0 + i, j) = src(i, j) * div(j) + mean(j) for the src.extent(0) rows (a plain copy when
 * `mean` is empty): the model's outputs with the target standardisation inverted, two rounded
 * operations. `dst` may have any layout Kokkos can index. One thread per row. @deterministic @device
 */
template <class ExecSpace, class Src, class Dst, class Mean>
void denormalize_output_rows(const ExecSpace& space, const Src& src, const Mean& mean, const Mean& div, const Dst& dst,
                             long r0) {
  const long rows = static_cast<long>(src.extent(0)), cols = static_cast<long>(src.extent(1));
  if (rows == 0 || cols == 0) return;
  const bool invert = mean.extent(0) > 0;
  Kokkos::parallel_for(
      "reprosgd::Inference::outputs", Kokkos::RangePolicy<ExecSpace>(space, 0, rows), KOKKOS_LAMBDA(const long i) {
        if (invert) {
          for (long j = 0; j < cols; ++j) {
            const float scaled = src(i, j) * div(j);
            dst(r0 + i, j) = scaled + mean(j);
          }
        } else {
          for (long j = 0; j < cols; ++j) dst(r0 + i, j) = src(i, j);
        }
      });
}

REPROSGD_END_NAMESPACE
