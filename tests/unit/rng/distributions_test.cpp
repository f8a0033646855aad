// SPDX-License-Identifier: BSD-3-Clause
/// @file Conversions of random words: exact values at the extremes, moments, dropout rates, every backend.
#include <doctest/doctest.h>

#include <reprosgd/rng/distributions.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <Kokkos_Core.hpp>

#include <support/exec_spaces.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

using reprosgd::PhiloxStream;
using reprosgd::Purpose;

namespace {

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

// std::bit_cast is not device code; memcpy is, and compiles to a register move.
KOKKOS_INLINE_FUNCTION std::uint32_t float_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

std::string threshold_error(float p) {
  try {
    (void)reprosgd::dropout_threshold(p);
  } catch (const reprosgd::config_error& e) {
    return e.what();
  }
  return "no exception";
}

constexpr int draws = 1'000'000;

}  // namespace

TEST_SUITE("rng/distributions") {

TEST_CASE("uniform_float: exact values at the extremes") {
  using reprosgd::uniform_float;
  CHECK(bits(uniform_float(0)) == bits(0.0f));
  CHECK(bits(uniform_float(0xFF)) == bits(0.0f));  // the low 8 bits are dropped
  CHECK(bits(uniform_float(1u << 8)) == bits(0x1p-24f));
  CHECK(bits(uniform_float(0x80000000u)) == bits(0.5f));
  CHECK(bits(uniform_float(0xFFFFFFFFu)) == bits(0x1.fffffep-1f));  // 1 - 2^-24, the largest float < 1
  static_assert(reprosgd::uniform_float(0xFFFFFFFFu) < 1.0f);
}

TEST_CASE("uniform_float_open0: exact values at the extremes") {
  using reprosgd::uniform_float_open0;
  CHECK(bits(uniform_float_open0(0)) == bits(0x1p-24f));
  CHECK(bits(uniform_float_open0(0xFF)) == bits(0x1p-24f));
  CHECK(bits(uniform_float_open0(1u << 8)) == bits(0x1p-23f));
  CHECK(bits(uniform_float_open0(0x7FFFFF00u)) == bits(0.5f));
  CHECK(bits(uniform_float_open0(0xFFFFFFFFu)) == bits(1.0f));
}

TEST_CASE("uniform conversions: all 2^24 values exact, equally spaced, low bits ignored") {
  int bad = 0;
  for (std::uint32_t v = 0; v < (1u << 24); ++v) {
    const float expect = static_cast<float>(v) / 16777216.0f;  // exact: division by a power of two
    bad += bits(reprosgd::uniform_float(v << 8)) != bits(expect);
    bad += bits(reprosgd::uniform_float((v << 8) | 0xA5u)) != bits(expect);
    bad += bits(reprosgd::uniform_float_open0(v << 8)) != bits(static_cast<float>(v + 1) / 16777216.0f);
  }
  CHECK(bad == 0);
}

TEST_CASE("uniform_float: mean and variance of 1e6 draws within 5 sigma") {
  const PhiloxStream rng(1);
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < draws; ++i) {
    const double x = reprosgd::uniform_float(rng.uint32({Purpose::user, 0, 0, 0, std::uint64_t(i)}));
    sum += x;
    sum_sq += x * x;
  }
  const double mean = sum / draws, var = sum_sq / draws - mean * mean;
  // sigma(mean) = sqrt(1/12 / n) = 2.9e-4; sigma(var) = sqrt((1/80 - 1/144) / n) = 7.5e-5.
  CHECK(std::abs(mean - 0.5) < 5 * 2.9e-4);
  CHECK(std::abs(var - 1.0 / 12.0) < 5 * 7.5e-5);
}

TEST_CASE("normal_float: exact special points, then mean, variance and kurtosis of 1e6 draws") {
  using reprosgd::normal_float;
  // u1 = 0xFFFFFFFF gives uniform 1, log 1 = 0, radius 0.
  CHECK(normal_float(0xFFFFFFFFu, 0x12345678u) == 0.0f);
  // u1 = 0 gives the largest radius sqrt(-2 log 2^-24) = sqrt(48 ln 2) = 5.7680…
  CHECK(normal_float(0, 0) == doctest::Approx(std::sqrt(48.0 * std::log(2.0))).epsilon(1e-6));
  CHECK(bits(normal_float(0, 0x80000000u)) == bits(-normal_float(0, 0)));  // cospi(1) = -1
  CHECK(normal_float(0, 0x40000000u) == 0.0f);                            // cospi(1/2) = 0

  const PhiloxStream rng(2);
  double m1 = 0, m2 = 0, m4 = 0, max_abs = 0;
  for (int i = 0; i < draws / 2; ++i) {
    const auto w = rng.generate({Purpose::user, 1, 0, 0, 4 * std::uint64_t(i)});
    for (int k = 0; k < 4; k += 2) {
      const double x = normal_float(w[k], w[k + 1]);
      m1 += x;
      m2 += x * x;
      m4 += x * x * x * x;
      max_abs = std::max(max_abs, std::abs(x));
    }
  }
  const double mean = m1 / draws, var = m2 / draws - mean * mean, kurt = (m4 / draws) / (var * var);
  CHECK(std::abs(mean) < 5 * 1e-3);           // sigma = 1/sqrt(n) = 1e-3
  CHECK(std::abs(var - 1.0) < 5 * 1.42e-3);   // sigma = sqrt(2/n)
  CHECK(std::abs(kurt - 3.0) < 5 * 4.9e-3);   // sigma = sqrt(24/n)
  CHECK(max_abs <= 5.77);                     // the tail is cut at sqrt(48 ln 2)
  CHECK(max_abs > 4.0);                       // but it is there
}

TEST_CASE("dropout_threshold: exact integer rounding, ties to even") {
  using reprosgd::dropout_threshold;
  CHECK(dropout_threshold(0.0f) == 0u);
  CHECK(dropout_threshold(0.5f) == 0x80000000u);
  CHECK(dropout_threshold(0.25f) == 0x40000000u);
  CHECK(dropout_threshold(0.1f) == 429496736u);  // 0.1f = 13421773 * 2^-27, times 2^32
  CHECK(dropout_threshold(0x1.fffffep-1f) == 0xFFFFFF00u);  // the largest p: no saturation needed
  CHECK(dropout_threshold(0x1p-33f) == 0u);       // 0.5 -> even 0
  CHECK(dropout_threshold(0x1.8p-32f) == 2u);     // 1.5 -> even 2
  CHECK(dropout_threshold(0x1.4p-32f) == 1u);     // 1.25 -> 1
  CHECK(dropout_threshold(0x1.cp-32f) == 2u);     // 1.75 -> 2
  CHECK(dropout_threshold(0x1p-40f) == 0u);
  CHECK(dropout_threshold(0x1.000002p-1f) == 0x80000100u);  // 0.5 + 2^-24 -> 2^31 + 2^8
}

TEST_CASE("dropout_threshold: p outside [0, 1) is a config_error with an exact message") {
  CHECK(threshold_error(1.0f) == "reprosgd::dropout_threshold: p = 1.000000 is not in [0, 1)");
  CHECK(threshold_error(-0.1f) == "reprosgd::dropout_threshold: p = -0.100000 is not in [0, 1)");
  CHECK(threshold_error(std::numeric_limits<float>::quiet_NaN()).rfind("reprosgd::dropout_threshold: p = ", 0) == 0);
  CHECK(threshold_error(std::numeric_limits<float>::infinity()) ==
        "reprosgd::dropout_threshold: p = inf is not in [0, 1)");
}

TEST_CASE("dropout_keep: keep rates for p = 0.1 and 0.5 within 5 sigma, nothing dropped for p = 0") {
  using reprosgd::dropout_keep;
  CHECK(dropout_keep(0, 0));
  CHECK(dropout_keep(0xFFFFFFFFu, 0xFFFFFF00u));
  CHECK_FALSE(dropout_keep(0x7FFFFFFFu, 0x80000000u));
  CHECK(dropout_keep(0x80000000u, 0x80000000u));
  const PhiloxStream rng(3);
  const std::uint32_t t0 = reprosgd::dropout_threshold(0.0f);
  const std::uint32_t t1 = reprosgd::dropout_threshold(0.1f);
  const std::uint32_t t5 = reprosgd::dropout_threshold(0.5f);
  long kept0 = 0, kept1 = 0, kept5 = 0;
  for (int i = 0; i < draws; ++i) {
    const std::uint32_t u = rng.uint32({Purpose::dropout, 0, 5, std::uint64_t(i / 100), std::uint64_t(i % 100)});
    kept0 += dropout_keep(u, t0);
    kept1 += dropout_keep(u, t1);
    kept5 += dropout_keep(u, t5);
  }
  CHECK(kept0 == draws);
  CHECK(std::abs(double(kept1) / draws - 0.9) < 5 * 3e-4);  // sigma = sqrt(0.09 / n)
  CHECK(std::abs(double(kept5) / draws - 0.5) < 5 * 5e-4);  // sigma = sqrt(0.25 / n)
}

TEST_CASE_TEMPLATE_DEFINE("conversions give the same bits on every backend", Space, distributions_backend) {
  constexpr int n = 1 << 16;
  using MemSpace = typename Space::memory_space;
  Kokkos::View<std::uint32_t* [4], MemSpace> out("out", n);
  const PhiloxStream rng(4);
  const std::uint32_t threshold = reprosgd::dropout_threshold(0.3f);
  Kokkos::parallel_for(
      "conversions", Kokkos::RangePolicy<Space>(Space(), 0, n), KOKKOS_LAMBDA(int i) {
        const auto w = rng.generate({Purpose::data, 2, 9, std::uint64_t(i), 0});
        out(i, 0) = float_bits(reprosgd::uniform_float(w[0]));
        out(i, 1) = float_bits(reprosgd::uniform_float_open0(w[1]));
        out(i, 2) = float_bits(reprosgd::normal_float(w[2], w[3]));
        out(i, 3) = reprosgd::dropout_keep(w[0], threshold) ? 1u : 0u;
      });
  Space().fence();
  auto out_h = Kokkos::create_mirror_view(out);
  Kokkos::deep_copy(out_h, out);
  int mismatches = 0;
  for (int i = 0; i < n; ++i) {
    const auto w = rng.generate({Purpose::data, 2, 9, std::uint64_t(i), 0});
    mismatches += out_h(i, 0) != bits(reprosgd::uniform_float(w[0]));
    mismatches += out_h(i, 1) != bits(reprosgd::uniform_float_open0(w[1]));
    mismatches += out_h(i, 2) != bits(reprosgd::normal_float(w[2], w[3]));
    mismatches += out_h(i, 3) != (reprosgd::dropout_keep(w[0], threshold) ? 1u : 0u);
  }
  CHECK(mismatches == 0);
}
TEST_CASE_TEMPLATE_APPLY(distributions_backend, reprosgd_test::spaces);

}  // TEST_SUITE
