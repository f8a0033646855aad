// SPDX-License-Identifier: BSD-3-Clause
/// @file Tests of reprosgd/data/normalize.hpp: known statistics, bitwise agreement with a plain
/// serial reference, zero-variance features, apply and scale on every backend.
#include <reprosgd/data/normalize.hpp>

#include <support/exec_spaces.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using HostFeatures = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using HostLabels = Kokkos::View<std::int32_t*, Kokkos::HostSpace>;

std::uint32_t bits(float x) {
  std::uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// 4 samples x 3 features: a ramp, a constant, a two-valued feature.
reprosgd::Dataset<> known() {
  HostFeatures x("x", 4, 3);
  const float v[4][3] = {{1, 5, -2}, {2, 5, 2}, {3, 5, -2}, {4, 5, 2}};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) x(i, j) = v[i][j];
  return reprosgd::make_dataset(x, HostLabels("y", 4), 1);
}

// A data set with values of many magnitudes, over more than one block of 16 features.
reprosgd::Dataset<> irregular(std::size_t n, std::size_t f) {
  HostFeatures x("x", n, f);
  std::uint64_t s = 12345;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < f; ++j) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      x(i, j) = static_cast<float>(static_cast<std::int32_t>(s >> 40) - (1 << 23)) * 0x1p-20f * static_cast<float>(j + 1);
    }
  return reprosgd::make_dataset(x, HostLabels("y", n), 1);
}

}  // namespace

TEST_SUITE("data/normalize") {
  TEST_CASE("statistics: known answers, population standard deviation, zero variance") {
    const auto s = reprosgd::compute_normalization(known());
    REQUIRE(s.size() == 3);
    CHECK(s.mean[0] == 2.5f);
    CHECK(s.mean[1] == 5.0f);
    CHECK(s.mean[2] == 0.0f);
    CHECK(bits(s.std_dev[0]) == bits(static_cast<float>(std::sqrt(1.25))));  // var = (2.25+0.25+0.25+2.25)/4
    CHECK(s.std_dev[1] == 0.0f);
    CHECK(s.std_dev[2] == 2.0f);
    CHECK_THROWS_WITH_AS((void)reprosgd::compute_normalization(reprosgd::make_dataset(HostFeatures("x", 0, 2), HostLabels("y", 0), 1)),
                         "reprosgd::compute_normalization: the data set has no samples", reprosgd::data_error);
  }

  TEST_CASE("statistics equal, bit for bit, a plain serial two-pass loop in double") {
    const std::size_t n = 257, f = 37;
    const auto d = irregular(n, f);
    const auto s = reprosgd::compute_normalization(d);
    for (std::size_t j = 0; j < f; ++j) {
      double sum = 0;
      for (std::size_t i = 0; i < n; ++i) sum = sum + static_cast<double>(d.features(i, j));
      const double mean = sum / static_cast<double>(n);
      double q = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double t = static_cast<double>(d.features(i, j)) - mean;
        q = q + t * t;
      }
      CAPTURE(j);
      CHECK(bits(s.mean[j]) == bits(static_cast<float>(mean)));
      CHECK(bits(s.std_dev[j]) == bits(static_cast<float>(std::sqrt(q / static_cast<double>(n)))));
    }
  }

  TEST_CASE("apply_normalization rejects statistics of the wrong size or with a bad std_dev") {
    auto d = known();
    reprosgd::NormalizationStats s{{0, 0}, {1, 1}};
    CHECK_THROWS_WITH_AS(reprosgd::apply_normalization(d, s),
                         "reprosgd::apply_normalization: statistics for 2 means and 2 standard deviations, the data set has 3 features",
                         reprosgd::data_error);
    s = {{0, 0, 0}, {1, -1, 1}};
    CHECK_THROWS_WITH_AS(reprosgd::apply_normalization(d, s),
                         "reprosgd::apply_normalization: std_dev[1] = -1.000000 is not a finite non-negative number",
                         reprosgd::data_error);
    CHECK(d.features(0, 0) == 1.0f);  // untouched
  }
}

TEST_CASE_TEMPLATE_DEFINE("apply_normalization and scale_features: elementwise, the same bits on every backend", Space,
                          normalize_on_backends) {
  auto d = known();
  const auto s = reprosgd::compute_normalization(d);
  reprosgd::apply_normalization(Space(), d, s);
  const float sd = static_cast<float>(std::sqrt(1.25));
  for (int i = 0; i < 4; ++i) {
    CHECK(bits(d.features(i, 0)) == bits((static_cast<float>(i + 1) - 2.5f) / sd));
    CHECK(d.features(i, 1) == 0.0f);  // constant feature: centred, not divided by zero
    CHECK(d.features(i, 2) == (i % 2 == 0 ? -1.0f : 1.0f));
  }
  reprosgd::scale_features(Space(), d, 0.5f);
  CHECK(d.features(1, 2) == 0.5f);
  CHECK(bits(d.features(3, 0)) == bits(((4.0f - 2.5f) / sd) * 0.5f));

  // A larger irregular set: normalised statistics are ~0 mean, ~1 deviation, and every element
  // equals the scalar formula.
  const auto x = irregular(300, 40);
  const auto orig = reprosgd::clone(x);
  const auto sx = reprosgd::compute_normalization(x);
  reprosgd::apply_normalization(Space(), x, sx);
  for (std::size_t i = 0; i < 300; ++i)
    for (std::size_t j = 0; j < 40; ++j)
      REQUIRE(bits(x.features(i, j)) == bits((orig.features(i, j) - sx.mean[j]) / sx.std_dev[j]));
  const auto after = reprosgd::compute_normalization(x);
  for (std::size_t j = 0; j < 40; ++j) {
    CHECK(std::fabs(after.mean[j]) < 1e-5f);
    CHECK(std::fabs(after.std_dev[j] - 1.0f) < 1e-5f);
  }
}
TEST_CASE_TEMPLATE_APPLY(normalize_on_backends, reprosgd_test::host_spaces);  // data sets stay in host memory; a device gets micro-batches (unit_trainer)
