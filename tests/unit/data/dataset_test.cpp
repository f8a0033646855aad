// SPDX-License-Identifier: BSD-3-Clause
/// @file Tests of reprosgd/data/dataset.hpp: user Views are shared, shapes and labels are checked,
/// validate_finite names the first bad element on every backend.
#include <reprosgd/data/dataset.hpp>

#include <support/exec_spaces.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace {

using HostFeatures = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using HostLabels = Kokkos::View<std::int32_t*, Kokkos::HostSpace>;

reprosgd::Dataset<> small_dataset(std::size_t n, std::size_t f, int classes) {
  HostFeatures x("x", n, f);
  HostLabels y("y", n);
  for (std::size_t i = 0; i < n; ++i) {
    y(i) = static_cast<std::int32_t>(i % static_cast<std::size_t>(classes));
    for (std::size_t j = 0; j < f; ++j) x(i, j) = static_cast<float>(i * f + j);
  }
  return reprosgd::make_dataset(x, y, classes);
}

}  // namespace

TEST_SUITE("data/dataset") {
  TEST_CASE("make_dataset shares the user's managed Views") {
    HostFeatures x("x", 5, 3);
    HostLabels y("y", 5);
    auto d = reprosgd::make_dataset(x, y, 4);
    static_assert(std::is_same_v<decltype(d), reprosgd::Dataset<Kokkos::HostSpace>>);
    CHECK(d.features.data() == x.data());
    CHECK(d.labels.data() == y.data());
    CHECK(d.size() == 5);
    CHECK(d.feature_count() == 3);
    CHECK(d.num_classes == 4);
    x(4, 2) = 7.5f;  // the same memory, seen through both
    CHECK(d.features(4, 2) == 7.5f);
    CHECK(x.use_count() == 2);
  }

  TEST_CASE("make_dataset wraps unmanaged Views over the user's own buffers without copying") {
    std::vector<float> xs(6 * 4, 0.25f);
    std::vector<std::int32_t> ys = {0, 1, 2, 0, 1, 2};
    Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> x(xs.data(), 6, 4);
    Kokkos::View<std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> y(ys.data(), 6);
    auto d = reprosgd::make_dataset(x, y, 3);
    CHECK(d.features.data() == xs.data());
    CHECK(d.labels.data() == ys.data());
    xs[5] = -1.0f;
    CHECK(d.features(1, 1) == -1.0f);
    CHECK(d.size() == 6);
  }

  TEST_CASE("make_dataset accepts rank-1 LayoutLeft labels and Views declared with an execution space") {
    Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::DefaultHostExecutionSpace> x("x", 2, 2);
    Kokkos::View<std::int32_t*, Kokkos::LayoutLeft, Kokkos::DefaultHostExecutionSpace> y("y", 2);
    auto d = reprosgd::make_dataset(x, y, 1);
    CHECK(d.labels.data() == y.data());
    CHECK(d.features.data() == x.data());
  }

  TEST_CASE("make_dataset rejects mismatched shapes and bad labels, naming the first bad one") {
    HostFeatures x("x", 4, 2);
    HostLabels y3("y", 3);
    CHECK_THROWS_WITH_AS((void)reprosgd::make_dataset(x, y3, 2),
                         "reprosgd::make_dataset: features have 4 samples but labels have 3", reprosgd::data_error);
    HostLabels y("y", 4);
    y(1) = 12;
    y(3) = -1;
    CHECK_THROWS_WITH_AS((void)reprosgd::make_dataset(x, y, 10),
                         "reprosgd::make_dataset: label 12 at index 1 is outside [0, 10)", reprosgd::data_error);
    y(1) = 9;
    CHECK_THROWS_WITH_AS((void)reprosgd::make_dataset(x, y, 10),
                         "reprosgd::make_dataset: label -1 at index 3 is outside [0, 10)", reprosgd::data_error);
    y(3) = 0;
    CHECK_THROWS_WITH_AS((void)reprosgd::make_dataset(x, y, 9),
                         "reprosgd::make_dataset: label 9 at index 1 is outside [0, 9)", reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)reprosgd::make_dataset(x, y, 0),
                         "reprosgd::make_dataset: num_classes must be at least 1, got 0", reprosgd::config_error);
    HostFeatures x0("x0", 4, 0);
    CHECK_THROWS_WITH_AS((void)reprosgd::make_dataset(x0, y, 10), "reprosgd::make_dataset: features have 0 columns",
                         reprosgd::data_error);
    CHECK_NOTHROW((void)reprosgd::make_dataset(x, y, 10));
  }

  TEST_CASE("validate re-checks a Dataset modified by hand") {
    auto d = small_dataset(6, 2, 3);
    CHECK_NOTHROW(reprosgd::validate(d));
    d.labels(5) = 3;
    CHECK_THROWS_WITH_AS(reprosgd::validate(d), "reprosgd::validate: label 3 at index 5 is outside [0, 3)",
                         reprosgd::data_error);
    d.labels = HostLabels("y", 2);
    CHECK_THROWS_WITH_AS(reprosgd::validate(d), "reprosgd::validate: features have 6 samples but labels have 2",
                         reprosgd::data_error);
  }

  TEST_CASE("make_regression_dataset shares the user's Views and checks their shapes") {
    HostFeatures x("x", 5, 3), t("t", 5, 2);
    t(4, 1) = 7.0f;
    const auto d = reprosgd::make_regression_dataset(x, t);
    CHECK(d.features.data() == x.data());
    CHECK(d.targets.data() == t.data());
    CHECK(d.is_regression());
    CHECK(d.size() == 5);
    CHECK(d.feature_count() == 3);
    CHECK(d.target_count() == 2);
    CHECK(d.labels.extent(0) == 0);
    CHECK(d.num_classes == 0);
    CHECK_NOTHROW(reprosgd::validate(d));
    CHECK_FALSE(small_dataset(4, 2, 2).is_regression());
    CHECK(small_dataset(4, 2, 2).target_count() == 0);
    CHECK_THROWS_WITH_AS((void)reprosgd::make_regression_dataset(x, HostFeatures("t", 4, 2)),
                         "reprosgd::make_regression_dataset: features have 5 samples but targets have 4", reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)reprosgd::make_regression_dataset(x, HostFeatures("t", 5, 0)),
                         "reprosgd::make_regression_dataset: targets have 0 columns (a regression needs at least one)",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)reprosgd::make_regression_dataset(HostFeatures("x", 5, 0), t),
                         "reprosgd::make_regression_dataset: features have 0 columns", reprosgd::data_error);
    auto labelled = d;
    labelled.labels = HostLabels("y", 5);
    CHECK_THROWS_WITH_AS(reprosgd::validate(labelled),
                         "reprosgd::validate: a regression data set (targets) has no labels and num_classes 0",
                         reprosgd::config_error);
    auto rows_only = small_dataset(5, 3, 2);
    rows_only.targets = HostFeatures("t", 5, 0);
    CHECK_THROWS_WITH_AS(reprosgd::validate(rows_only), "reprosgd::validate: targets have 5 rows but 0 columns",
                         reprosgd::data_error);
    auto copy = reprosgd::clone(d);
    CHECK(copy.targets.data() != t.data());
    CHECK(copy.targets(4, 1) == 7.0f);
    CHECK(reprosgd::to_memory_space<Kokkos::HostSpace>(d).targets.data() == t.data());
    t(2, 0) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH_AS(reprosgd::validate_finite(d), "reprosgd::validate_finite: NaN in sample 2, target 0",
                         reprosgd::data_error);
  }

  TEST_CASE("an empty data set is valid") {
    auto d = reprosgd::make_dataset(HostFeatures("x", 0, 3), HostLabels("y", 0), 2);
    CHECK(d.size() == 0);
    CHECK(d.feature_count() == 3);
    CHECK_NOTHROW(reprosgd::validate_finite(d));
  }

  TEST_CASE("to_memory_space shares Views already in the space; clone copies") {
    auto d = small_dataset(7, 3, 2);
    auto same = reprosgd::to_memory_space<Kokkos::HostSpace>(d);
    CHECK(same.features.data() == d.features.data());
    CHECK(same.labels.data() == d.labels.data());
    CHECK(same.num_classes == 2);
    auto via_exec = reprosgd::to_memory_space<Kokkos::DefaultHostExecutionSpace>(d);
    CHECK(via_exec.features.data() == d.features.data());
    auto copy = reprosgd::clone(d);
    CHECK(copy.features.data() != d.features.data());
    CHECK(copy.labels.data() != d.labels.data());
    CHECK(copy.num_classes == 2);
    REQUIRE(copy.size() == 7);
    REQUIRE(copy.feature_count() == 3);
    for (std::size_t i = 0; i < 7; ++i) {
      CHECK(copy.labels(i) == d.labels(i));
      for (std::size_t j = 0; j < 3; ++j) CHECK(copy.features(i, j) == d.features(i, j));
    }
    copy.features(0, 0) = 99.0f;
    CHECK(d.features(0, 0) == 0.0f);
  }
}

TEST_CASE_TEMPLATE_DEFINE("validate_finite reports the first non-finite element in row-major order", Space,
                          validate_finite_on_backends) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto d = small_dataset(40, 6, 5);
  CHECK_NOTHROW(reprosgd::validate_finite(Space(), d));
  d.features(17, 5) = inf;  // same row, later column
  d.features(17, 3) = nan;  // the first one
  d.features(20, 0) = -inf;
  d.features(39, 5) = nan;
  CHECK_THROWS_WITH_AS(reprosgd::validate_finite(Space(), d), "reprosgd::validate_finite: NaN in sample 17, feature 3",
                       reprosgd::data_error);
  d.features(17, 3) = 1.0f;
  CHECK_THROWS_WITH_AS(reprosgd::validate_finite(Space(), d), "reprosgd::validate_finite: +Inf in sample 17, feature 5",
                       reprosgd::data_error);
  d.features(17, 5) = 1.0f;
  CHECK_THROWS_WITH_AS(reprosgd::validate_finite(Space(), d), "reprosgd::validate_finite: -Inf in sample 20, feature 0",
                       reprosgd::data_error);
  d.features(20, 0) = std::numeric_limits<float>::max();  // finite extremes are fine
  d.features(21, 0) = std::numeric_limits<float>::denorm_min();
  d.features(39, 4) = -0.0f;
  CHECK_THROWS_WITH_AS(reprosgd::validate_finite(Space(), d), "reprosgd::validate_finite: NaN in sample 39, feature 5",
                       reprosgd::data_error);
  d.features(39, 5) = 0.0f;
  CHECK_NOTHROW(reprosgd::validate_finite(Space(), d));
  CHECK_NOTHROW(reprosgd::validate_finite(d));
}
TEST_CASE_TEMPLATE_APPLY(validate_finite_on_backends, reprosgd_test::host_spaces);  // data sets stay in host memory; a device gets micro-batches (unit_trainer)
