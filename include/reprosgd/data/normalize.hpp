// SPDX-License-Identifier: BSD-3-Clause
/// @file Per-feature standardisation (deterministic statistics, elementwise apply) and scaling.
#pragma once

#include <reprosgd/data/dataset.hpp>
#include <reprosgd/error.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/**
 * Per-feature standardisation statistics: feature j is mapped to (x - mean[j]) / std_dev[j], or to
 * x - mean[j] where std_dev[j] is 0 (a constant feature: no division by zero).
 *
 * A plain aggregate of vectors, so it can be stored with a checkpoint and reapplied to test data.
 */
struct NormalizationStats {
  std::vector<float> mean;     ///< per feature, the mean over the samples
  std::vector<float> std_dev;  ///< per feature, the population standard deviation (divide by N)

  /// The number of features the statistics describe.
  [[nodiscard]] std::size_t size() const noexcept { return mean.size(); }
};

/**
 * Computes the mean and population standard deviation of every column of an N x F matrix (the
 * features of a data set, or the regression targets of a model: docs/surrogates.md).
 *
 * Deterministic: each column's sums run in double over the rows in ascending order (two passes:
 * the mean, then the squared deviations from it), each column owned by one thread, so the result
 * is the same for any thread count or backend; mean = float(sum / N) and std_dev =
 * float(sqrt(variance)) with the correctly rounded IEEE square root, each rounded to float once.
 * Any layout; Views outside host memory are copied to the host first.
 *
 * @throws data_error when the matrix has no rows.
 */
template <class View>
  requires(Kokkos::is_view<View>::value && View::rank == 2 &&
           std::is_same_v<typename View::non_const_value_type, float>)
[[nodiscard]] NormalizationStats compute_normalization(const View& columns) {
  const std::size_t n = columns.extent(0);
  const std::size_t f = columns.extent(1);
  if (n == 0) throw data_error("reprosgd::compute_normalization: the data set has no samples");
  auto x = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), columns);
  std::vector<double> mean(f, 0.0);
  std::vector<double> var(f, 0.0);
  // Blocks of 16 features (one 64-byte line of a row) keep the row-major reads cache friendly;
  // inside a block each feature still accumulates alone over ascending samples.
  constexpr std::size_t block = 16;
  const std::size_t blocks = (f + block - 1) / block;
  double* mean_p = mean.data();
  double* var_p = var.data();
  Kokkos::parallel_for(
      "reprosgd::compute_normalization",
      Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, static_cast<std::int64_t>(blocks)),
      [=](std::int64_t b) {
        const std::size_t j0 = static_cast<std::size_t>(b) * block;
        const std::size_t j1 = std::min(f, j0 + block);
        double s[block] = {};
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = j0; j < j1; ++j) s[j - j0] = s[j - j0] + static_cast<double>(x(i, j));
        double m[block] = {};
        for (std::size_t j = j0; j < j1; ++j) m[j - j0] = s[j - j0] / static_cast<double>(n);
        double q[block] = {};
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = j0; j < j1; ++j) {
            const double d = static_cast<double>(x(i, j)) - m[j - j0];
            q[j - j0] = q[j - j0] + d * d;
          }
        for (std::size_t j = j0; j < j1; ++j) {
          mean_p[j] = m[j - j0];
          var_p[j] = q[j - j0] / static_cast<double>(n);
        }
      });
  Kokkos::DefaultHostExecutionSpace().fence();
  NormalizationStats stats;
  stats.mean.resize(f);
  stats.std_dev.resize(f);
  for (std::size_t j = 0; j < f; ++j) {
    stats.mean[j] = static_cast<float>(mean[j]);
    stats.std_dev[j] = static_cast<float>(std::sqrt(var[j]));  // sqrt is correctly rounded (IEEE 754)
  }
  return stats;
}

/// The statistics of a data set's features: compute_normalization(data.features).
template <class MemorySpace>
[[nodiscard]] NormalizationStats compute_normalization(const Dataset<MemorySpace>& data) {
  return compute_normalization(data.features);
}

/**
 * Standardises the features in place: x(i, j) = (x(i, j) - mean[j]) / std_dev[j], with the
 * division skipped where std_dev[j] is 0. Elementwise, one float subtraction and one division per
 * element, so bitwise identical on every backend. Fences `space` before returning.
 *
 * The data set's Views are modified: when they are a user's own Views, apply to a clone() instead
 * to keep the originals.
 *
 * @throws data_error when the statistics describe a different number of features, or a std_dev is
 *         negative or not finite.
 */
template <class ExecSpace, class MemorySpace>
  requires Kokkos::is_execution_space<ExecSpace>::value
void apply_normalization(const ExecSpace& space, const Dataset<MemorySpace>& data, const NormalizationStats& stats) {
  static_assert(Kokkos::SpaceAccessibility<ExecSpace, MemorySpace>::accessible,
                "reprosgd::apply_normalization: the execution space cannot access the data set's memory space");
  const std::size_t f = data.features.extent(1);
  if (stats.mean.size() != f || stats.std_dev.size() != f)
    throw data_error("reprosgd::apply_normalization: statistics for " + std::to_string(stats.mean.size()) +
                     " means and " + std::to_string(stats.std_dev.size()) + " standard deviations, the data set has " +
                     std::to_string(f) + " features");
  Kokkos::View<float*, MemorySpace> mean(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::mean")), f);
  Kokkos::View<float*, MemorySpace> divisor(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::std_dev")), f);
  auto mean_h = Kokkos::create_mirror_view(mean);
  auto div_h = Kokkos::create_mirror_view(divisor);
  for (std::size_t j = 0; j < f; ++j) {
    const float s = stats.std_dev[j];
    if (!(s >= 0.0f) || detail::is_non_finite(s))
      throw data_error("reprosgd::apply_normalization: std_dev[" + std::to_string(j) + "] = " + std::to_string(s) +
                       " is not a finite non-negative number");
    mean_h(j) = stats.mean[j];
    div_h(j) = s > 0.0f ? s : 1.0f;  // x / 1 == x exactly: constant features are only centred
  }
  Kokkos::deep_copy(space, mean, mean_h);
  Kokkos::deep_copy(space, divisor, div_h);
  const auto x = data.features;
  const std::int64_t cols = static_cast<std::int64_t>(f);
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  Kokkos::parallel_for(
      "reprosgd::apply_normalization", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(space, 0, rows),
      KOKKOS_LAMBDA(std::int64_t i) {
        for (std::int64_t j = 0; j < cols; ++j) x(i, j) = (x(i, j) - mean(j)) / divisor(j);
      });
  space.fence();
}

/// apply_normalization() on a default instance of the memory space's execution space.
template <class MemorySpace>
void apply_normalization(const Dataset<MemorySpace>& data, const NormalizationStats& stats) {
  apply_normalization(typename MemorySpace::execution_space(), data, stats);
}

/**
 * Multiplies every feature by `factor` in place (one float multiplication per element, so
 * bitwise identical everywhere; e.g. 1/255 for raw pixels). Fences `space` before returning.
 */
template <class ExecSpace, class MemorySpace>
  requires Kokkos::is_execution_space<ExecSpace>::value
void scale_features(const ExecSpace& space, const Dataset<MemorySpace>& data, float factor) {
  static_assert(Kokkos::SpaceAccessibility<ExecSpace, MemorySpace>::accessible,
                "reprosgd::scale_features: the execution space cannot access the data set's memory space");
  const auto x = data.features;
  const std::int64_t cols = static_cast<std::int64_t>(x.extent(1));
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  Kokkos::parallel_for(
      "reprosgd::scale_features", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(space, 0, rows),
      KOKKOS_LAMBDA(std::int64_t i) {
        for (std::int64_t j = 0; j < cols; ++j) x(i, j) = x(i, j) * factor;
      });
  space.fence();
}

/// scale_features() on a default instance of the memory space's execution space.
template <class MemorySpace>
void scale_features(const Dataset<MemorySpace>& data, float factor) {
  scale_features(typename MemorySpace::execution_space(), data, factor);
}

REPROSGD_END_NAMESPACE
