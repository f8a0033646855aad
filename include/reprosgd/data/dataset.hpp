// SPDX-License-Identifier: BSD-3-Clause
/// @file Dataset: an in-memory classification or regression data set over Kokkos Views, and its checks.
#pragma once

#include <reprosgd/error.hpp>
#include <reprosgd/kernels/image.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

REPROSGD_BEGIN_NAMESPACE

/**
 * An in-memory data set: N samples of F float features and, for classification, one class label
 * each, or, for regression, T float targets each (then `labels` is empty and `num_classes` 0).
 *
 * A plain aggregate of Views. Copying a Dataset copies the View handles, not the data (Kokkos
 * reference semantics), so a Dataset built by make_dataset() from a user's Views shares their memory.
 *
 * @tparam MemorySpace the Kokkos memory space the Views live in.
 *
 * **Example**:
 * @code
 * Kokkos::View<float**, Kokkos::LayoutRight> x("x", n, f);
 * Kokkos::View<std::int32_t*> y("y", n);
 * auto data = reprosgd::make_dataset(x, y, 10);   // no copy: data.features.data() == x.data()
 * @endcode
 */
template <class MemorySpace = Kokkos::HostSpace>
struct Dataset {
  using memory_space = MemorySpace;
  using features_type = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>;
  using labels_type = Kokkos::View<std::int32_t*, MemorySpace>;
  using targets_type = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>;

  features_type features;  ///< N x F, row-major: sample i is the contiguous row features(i, :)
  labels_type labels;      ///< N class labels in [0, num_classes); empty for a regression data set
  int num_classes = 0;
  targets_type targets;    ///< regression: N x T targets, row-major; empty (N x 0) for classification
  /// Each sample's image shape when the features are an image (C x H x W floats stored
  /// height, width, channel: NHWC rows, docs/layers.md), else 0x0x0. The Fashion-MNIST loader sets
  /// 1x28x28; the Trainer refuses a model whose first image layer expects another shape.
  ImageShape sample_shape{};

  /// The number of samples N.
  [[nodiscard]] std::size_t size() const noexcept { return features.extent(0); }
  /// The number of features F per sample.
  [[nodiscard]] int feature_count() const noexcept { return static_cast<int>(features.extent(1)); }
  /// The number of regression targets T per sample; 0 for a classification data set.
  [[nodiscard]] int target_count() const noexcept { return static_cast<int>(targets.extent(1)); }
  /// Whether the samples carry regression targets instead of class labels.
  [[nodiscard]] bool is_regression() const noexcept { return targets.extent(1) > 0; }
};

/// A training set and a test set, as returned by the loaders and the synthetic generator.
template <class MemorySpace = Kokkos::HostSpace>
struct TrainTest {
  Dataset<MemorySpace> train;
  Dataset<MemorySpace> test;
};

namespace detail {

// Shape and label checks shared by make_dataset(), validate() and the readers, so that every
// entry point reports the same problem with the same words; `who` is the public function name.
template <class MemorySpace>
void check_dataset(const Dataset<MemorySpace>& data, const char* who) {
  if (data.features.extent(1) == 0 && data.features.extent(0) != 0)
    throw data_error(std::string(who) + ": features have 0 columns");
  if (data.is_regression()) {
    if (data.targets.extent(0) != data.features.extent(0))
      throw data_error(std::string(who) + ": features have " + std::to_string(data.features.extent(0)) +
                       " samples but targets have " + std::to_string(data.targets.extent(0)));
    if (data.labels.extent(0) != 0 || data.num_classes != 0)
      throw config_error(std::string(who) + ": a regression data set (targets) has no labels and num_classes 0");
    return;
  }
  if (data.targets.extent(0) != 0)
    throw data_error(std::string(who) + ": targets have " + std::to_string(data.targets.extent(0)) +
                     " rows but 0 columns");
  if (data.num_classes < 1)
    throw config_error(std::string(who) + ": num_classes must be at least 1, got " +
                       std::to_string(data.num_classes));
  if (data.features.extent(0) != data.labels.extent(0))
    throw data_error(std::string(who) + ": features have " + std::to_string(data.features.extent(0)) +
                     " samples but labels have " + std::to_string(data.labels.extent(0)));
  if (data.features.extent(1) > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw data_error(std::string(who) + ": " + std::to_string(data.features.extent(1)) +
                     " features per sample, more than the supported " +
                     std::to_string(std::numeric_limits<int>::max()));
  // A host mirror of a host View is the View itself: no copy unless the labels live on a device.
  auto labels = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), data.labels);
  const std::size_t n = labels.extent(0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t y = labels(i);
    if (y < 0 || y >= data.num_classes)
      throw data_error(std::string(who) + ": label " + std::to_string(y) + " at index " + std::to_string(i) +
                       " is outside [0, " + std::to_string(data.num_classes) + ")");
  }
}

// True for +-Inf and NaN: the exponent field is all ones. A bit test, so it works the same under
// any compiler flags and in device code.
KOKKOS_INLINE_FUNCTION bool is_non_finite(float x) noexcept {
  std::uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  return (u & 0x7f800000u) == 0x7f800000u;
}

inline std::string describe_non_finite(float x) {
  std::uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x007fffffu) != 0) return "NaN";
  return (u >> 31) != 0 ? "-Inf" : "+Inf";
}

}  // namespace detail

/**
 * Wraps a user's feature and label Views in a Dataset **without copying** them, after checking them.
 *
 * Any Views that convert to the Dataset's View types are accepted: managed or unmanaged
 * (`Kokkos::MemoryTraits<Kokkos::Unmanaged>` around the user's own buffer), with either
 * `Kokkos::LayoutRight` or, for the labels, any rank-1 layout Kokkos can assign. The Dataset then
 * refers to the same memory: `make_dataset(x, y, c).features.data() == x.data()`.
 *
 * @param features N x F Kokkos View of float, LayoutRight (row-major).
 * @param labels   N Kokkos View of std::int32_t in the same memory space.
 * @param num_classes the number of classes C; every label must lie in [0, C).
 * @returns the Dataset sharing the Views.
 * @throws config_error when num_classes < 1.
 * @throws data_error when the extents differ, F == 0, or a label lies outside [0, C); the message
 *         names the first bad index and value ("reprosgd::make_dataset: label 12 at index 7 is
 *         outside [0, 10)").
 *
 * Not collective. Labels in device memory are copied to the host once to be checked.
 */
template <class FeaturesView, class LabelsView>
  requires(Kokkos::is_view<FeaturesView>::value && Kokkos::is_view<LabelsView>::value)
[[nodiscard]] Dataset<typename FeaturesView::memory_space> make_dataset(const FeaturesView& features,
                                                                        const LabelsView& labels, int num_classes) {
  using space = typename FeaturesView::memory_space;
  using result = Dataset<space>;
  static_assert(FeaturesView::rank == 2, "reprosgd::make_dataset: features must be a rank-2 View (N x F)");
  static_assert(LabelsView::rank == 1, "reprosgd::make_dataset: labels must be a rank-1 View (N)");
  static_assert(std::is_same_v<typename FeaturesView::non_const_value_type, float> &&
                    !std::is_const_v<typename FeaturesView::value_type>,
                "reprosgd::make_dataset: features must be a View of non-const float");
  static_assert(std::is_same_v<typename LabelsView::non_const_value_type, std::int32_t> &&
                    !std::is_const_v<typename LabelsView::value_type>,
                "reprosgd::make_dataset: labels must be a View of non-const std::int32_t");
  static_assert(std::is_same_v<typename LabelsView::memory_space, space>,
                "reprosgd::make_dataset: features and labels must live in the same memory space");
  static_assert(std::is_same_v<typename FeaturesView::array_layout, Kokkos::LayoutRight>,
                "reprosgd::make_dataset: features must be LayoutRight (row-major), so that a sample "
                "is one contiguous row; copy a LayoutLeft View into a LayoutRight one first");
  static_assert(std::is_constructible_v<typename result::labels_type, LabelsView>,
                "reprosgd::make_dataset: the labels View cannot be assigned to "
                "Kokkos::View<std::int32_t*, MemorySpace> without a copy (strided layout?)");
  result data{typename result::features_type(features), typename result::labels_type(labels), num_classes,
              typename result::targets_type()};
  detail::check_dataset(data, "reprosgd::make_dataset");
  return data;
}

/**
 * Wraps a user's feature and target Views in a regression Dataset **without copying** them, after
 * checking their shapes: `make_regression_dataset(x, t).targets.data() == t.data()`.
 *
 * @param features N x F Kokkos View of float, LayoutRight (row-major).
 * @param targets  N x T Kokkos View of float, LayoutRight, in the same memory space (T >= 1).
 * @throws data_error when the row counts differ, F == 0 or T == 0 ("reprosgd::make_regression_dataset:
 *         features have 10 samples but targets have 9").
 *
 * Not collective. Non-finite values are validate_finite()'s to find.
 */
template <class FeaturesView, class TargetsView>
  requires(Kokkos::is_view<FeaturesView>::value && Kokkos::is_view<TargetsView>::value)
[[nodiscard]] Dataset<typename FeaturesView::memory_space> make_regression_dataset(const FeaturesView& features,
                                                                                   const TargetsView& targets) {
  using space = typename FeaturesView::memory_space;
  using result = Dataset<space>;
  static_assert(FeaturesView::rank == 2 && TargetsView::rank == 2,
                "reprosgd::make_regression_dataset: features (N x F) and targets (N x T) must be rank-2 Views");
  static_assert(std::is_same_v<typename FeaturesView::non_const_value_type, float> &&
                    !std::is_const_v<typename FeaturesView::value_type> &&
                    std::is_same_v<typename TargetsView::non_const_value_type, float> &&
                    !std::is_const_v<typename TargetsView::value_type>,
                "reprosgd::make_regression_dataset: features and targets must be Views of non-const float");
  static_assert(std::is_same_v<typename TargetsView::memory_space, space>,
                "reprosgd::make_regression_dataset: features and targets must live in the same memory space");
  static_assert(std::is_same_v<typename FeaturesView::array_layout, Kokkos::LayoutRight> &&
                    std::is_same_v<typename TargetsView::array_layout, Kokkos::LayoutRight>,
                "reprosgd::make_regression_dataset: features and targets must be LayoutRight (row-major)");
  if (targets.extent(1) == 0)
    throw data_error("reprosgd::make_regression_dataset: targets have 0 columns (a regression needs at least one)");
  result data{typename result::features_type(features), typename result::labels_type(), 0,
              typename result::targets_type(targets)};
  detail::check_dataset(data, "reprosgd::make_regression_dataset");
  return data;
}

/**
 * Checks the shapes and the labels of a Dataset (the checks make_dataset() runs), for Datasets
 * assembled or modified by hand.
 *
 * @throws config_error, data_error as make_dataset(), with the prefix "reprosgd::validate".
 */
template <class MemorySpace>
void validate(const Dataset<MemorySpace>& data) {
  detail::check_dataset(data, "reprosgd::validate");
}

namespace detail {

// The first non-finite element of a rank-2 View in row-major order: (row, column, its text "NaN",
// "+Inf" or "-Inf"), or none. One row per iteration: the first bad column of a row, then the
// integer minimum, so the answer does not depend on threads.
struct NonFinite {
  std::size_t row = 0, column = 0;
  std::string value;
};
template <class ExecSpace, class Matrix>
std::optional<NonFinite> first_non_finite(const ExecSpace& space, const Matrix& m) {
  const std::int64_t cols = static_cast<std::int64_t>(m.extent(1));
  const std::int64_t total = static_cast<std::int64_t>(m.extent(0)) * cols;
  if (total == 0) return std::nullopt;
  std::int64_t first = total;
  Kokkos::parallel_reduce(
      "reprosgd::validate_finite",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(space, 0, static_cast<std::int64_t>(m.extent(0))),
      KOKKOS_LAMBDA(std::int64_t i, std::int64_t & lowest) {
        for (std::int64_t j = 0; j < cols; ++j)
          if (detail::is_non_finite(m(i, j))) {
            if (i * cols + j < lowest) lowest = i * cols + j;
            break;
          }
      },
      Kokkos::Min<std::int64_t>(first));
  space.fence();
  if (first >= total) return std::nullopt;
  NonFinite bad{static_cast<std::size_t>(first / cols), static_cast<std::size_t>(first % cols), {}};
  Kokkos::View<float, Kokkos::HostSpace> value("reprosgd::validate_finite::value");
  Kokkos::deep_copy(value, Kokkos::subview(m, bad.row, bad.column));
  bad.value = detail::describe_non_finite(value());
  return bad;
}

// Throws data_error naming the first non-finite element, reported as `what` (feature or target).
template <class ExecSpace, class Matrix>
void find_non_finite(const ExecSpace& space, const Matrix& features, const char* what) {
  if (const auto bad = first_non_finite(space, features))
    throw data_error("reprosgd::validate_finite: " + bad->value + " in sample " + std::to_string(bad->row) + ", " +
                     what + " " + std::to_string(bad->column));
}

}  // namespace detail

/**
 * Throws if any feature (or regression target) is NaN or infinite, naming the first one in
 * row-major order, features first.
 *
 * The search is a parallel_reduce of an *integer* minimum (the flat index), so the reported
 * element is the same for every thread count and backend.
 *
 * @param space the execution space instance that runs the search; it must be able to access
 *              MemorySpace.
 * @throws data_error "reprosgd::validate_finite: NaN in sample 17, feature 3" (or "+Inf", "-Inf";
 *         "..., target 0" for a target).
 */
template <class ExecSpace, class MemorySpace>
  requires Kokkos::is_execution_space<ExecSpace>::value
void validate_finite(const ExecSpace& space, const Dataset<MemorySpace>& data) {
  static_assert(Kokkos::SpaceAccessibility<ExecSpace, MemorySpace>::accessible,
                "reprosgd::validate_finite: the execution space cannot access the data set's memory space");
  detail::find_non_finite(space, data.features, "feature");
  if (data.is_regression()) detail::find_non_finite(space, data.targets, "target");
}

/// validate_finite() on a default instance of the memory space's execution space.
template <class MemorySpace>
void validate_finite(const Dataset<MemorySpace>& data) {
  validate_finite(typename MemorySpace::execution_space(), data);
}

/**
 * The Dataset in memory space `Space` (a memory or an execution space). When the data already live
 * there (or are accessible there through the same memory space), the result shares the Views;
 * otherwise they are deep-copied. Use clone() for a copy that never aliases.
 */
template <class Space, class MemorySpace>
  requires(Kokkos::is_memory_space<Space>::value || Kokkos::is_execution_space<Space>::value)
[[nodiscard]] Dataset<typename Space::memory_space> to_memory_space(const Dataset<MemorySpace>& data) {
  using target = typename Space::memory_space;
  Dataset<target> out;
  out.features = Kokkos::create_mirror_view_and_copy(target(), data.features);
  out.labels = Kokkos::create_mirror_view_and_copy(target(), data.labels);
  out.num_classes = data.num_classes;
  out.targets = Kokkos::create_mirror_view_and_copy(target(), data.targets);
  return out;
}

/// A deep copy of the Dataset in the same memory space (new allocations; the source is untouched).
template <class MemorySpace>
[[nodiscard]] Dataset<MemorySpace> clone(const Dataset<MemorySpace>& data) {
  Dataset<MemorySpace> out;
  out.features = typename Dataset<MemorySpace>::features_type(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::clone::features")),
      data.features.extent(0), data.features.extent(1));
  out.labels = typename Dataset<MemorySpace>::labels_type(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::clone::labels")), data.labels.extent(0));
  out.targets = typename Dataset<MemorySpace>::targets_type(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::clone::targets")),
      data.targets.extent(0), data.targets.extent(1));
  Kokkos::deep_copy(out.features, data.features);
  Kokkos::deep_copy(out.labels, data.labels);
  Kokkos::deep_copy(out.targets, data.targets);
  out.num_classes = data.num_classes;
  return out;
}

REPROSGD_END_NAMESPACE
