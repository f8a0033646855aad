// SPDX-License-Identifier: BSD-3-Clause
/// @file Every finite float through every float function of reprosgd/math/elementary.hpp, against glibc in double.
#include <doctest/doctest.h>

#include <reprosgd/math/elementary.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <ctime>
#include <thread>
#include <vector>

namespace {

namespace rm = reprosgd::math;

float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
std::uint32_t to_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Position on the float number line: adjacent floats differ by one, +0 and -0 share 0.
std::int64_t ordinal(float f) {
  const std::uint32_t b = to_bits(f);
  const std::int64_t mag = b & 0x7fffffffu;
  return (b & 0x80000000u) ? -mag : mag;
}

// 1 / (the size of one float ulp at the exact value r), taken in r's binade so that a result just
// below a power of two is measured in the finer ulp; the subnormal spacing 2^-149 below 2^-126.
// Built from the exponent bits: frexp/ldexp would cost more than the function under test.
double inverse_float_ulp_at(double r) {
  std::uint64_t b;
  std::memcpy(&b, &r, sizeof b);
  const int e = static_cast<int>((b >> 52) & 0x7ff) - 1023;  // r in [2^e, 2^(e+1)); r = 0: -1023
  const int ulp_exp = std::max(e, -126) - 23;
  const std::uint64_t inv = static_cast<std::uint64_t>(1023 - ulp_exp) << 52;
  double out;
  std::memcpy(&out, &inv, sizeof out);
  return out;
}

struct SweepResult {
  std::uint32_t max_ulp = 0;           // integer distance to the reference rounded to float
  std::uint32_t max_ulp_bits = 0;      // smallest input bit pattern where it occurs
  double max_err = 0.0;                // max |ours - reference| in ulps of the exact value, over the
                                       // results that are not the reference rounded to float
  std::uint32_t max_err_bits = 0;
  std::uint64_t checked = 0;           // finite inputs compared
  std::uint64_t not_nearest = 0;       // results that differ from the reference rounded to float
  std::uint64_t special_mismatch = 0;  // NaN vs number, or a zero of the wrong sign
  std::uint32_t first_special_bits = 0xffffffffu;
};

void merge(SweepResult& into, const SweepResult& r) {
  // Ties go to the smaller bit pattern so that the report does not depend on the thread schedule.
  if (r.max_ulp > into.max_ulp || (r.max_ulp == into.max_ulp && r.max_ulp_bits < into.max_ulp_bits)) {
    into.max_ulp = r.max_ulp;
    into.max_ulp_bits = r.max_ulp_bits;
  }
  if (r.max_err > into.max_err || (r.max_err == into.max_err && r.max_err_bits < into.max_err_bits)) {
    into.max_err = r.max_err;
    into.max_err_bits = r.max_err_bits;
  }
  into.checked += r.checked;
  into.not_nearest += r.not_nearest;
  into.special_mismatch += r.special_mismatch;
  into.first_special_bits = std::min(into.first_special_bits, r.first_special_bits);
}

enum class Symmetry { none, odd, even };

// Compares one result y = f(x) with the double reference r of f(x).
inline void check_one(SweepResult& res, std::uint32_t b, float y, double r) {
  const float e = static_cast<float>(r);
  ++res.checked;
  const bool y_nan = std::isnan(y);
  const bool e_nan = std::isnan(e);
  if (y_nan || e_nan || (y == 0.0f && e == 0.0f)) {
    if (y_nan != e_nan || (!y_nan && std::signbit(y) != std::signbit(e))) {
      ++res.special_mismatch;
      res.first_special_bits = std::min(res.first_special_bits, b);
    }
    return;
  }
  const std::int64_t d = ordinal(y) - ordinal(e);
  if (d == 0) return;  // the reference rounded to float: correctly rounded (barring double rounding)
  const auto ulps = static_cast<std::uint32_t>(d < 0 ? -d : d);
  ++res.not_nearest;
  if (ulps > res.max_ulp || (ulps == res.max_ulp && b < res.max_ulp_bits)) {
    res.max_ulp = ulps;
    res.max_ulp_bits = b;
  }
  if (std::isfinite(y) && std::isfinite(e)) {
    const double err = std::fabs(static_cast<double>(y) - r) * inverse_float_ulp_at(r);
    if (err > res.max_err || (err == res.max_err && b < res.max_err_bits)) {
      res.max_err = err;
      res.max_err_bits = b;
    }
  }
}

// Every `stride`-th input (REPROSGD_EXHAUSTIVE_STRIDE, default 1: all of them). CTest sets 13 while
// the header is the one whose full sweep passed (tests/unit/math/elementary_verified.sha256), 1
// when it changed (cmake/ReproSGDTestHelpers.cmake, reprosgd_exhaustive_stride).
std::uint64_t sweep_stride() {
  const char* s = std::getenv("REPROSGD_EXHAUSTIVE_STRIDE");
  const long v = s ? std::strtol(s, nullptr, 10) : 1;
  return v >= 1 ? static_cast<std::uint64_t>(v) : 1;
}

// All 2^32 bit patterns but NaN and infinity, in blocks handed out to two threads. The per-thread
// results are integers and maxima with ties broken by the bit pattern, so the combined result does
// not depend on the schedule. For an odd or even function the reference is evaluated once per
// pair ±x (glibc's tanh/sin/cos are odd/even too) and f is still called on both.
template <class F, class Ref>
SweepResult sweep(const char* name, Symmetry sym, F ours, Ref reference) {
  constexpr std::uint64_t block = std::uint64_t{1} << 22;
  const std::uint64_t end = sym == Symmetry::none ? (std::uint64_t{1} << 32) : (std::uint64_t{1} << 31);
  const std::uint64_t blocks = end / block;
  const std::uint64_t stride = sweep_stride();
  constexpr int threads = 2;
  std::atomic<std::uint64_t> next{0};
  std::vector<SweepResult> partial(threads);
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  auto worker = [&](int t) {
    SweepResult res;
    for (std::uint64_t blk = next++; blk < blocks; blk = next++) {
      const std::uint64_t begin = blk * block;
      for (std::uint64_t i = begin + (stride - begin % stride) % stride; i < begin + block; i += stride) {
        const auto b = static_cast<std::uint32_t>(i);
        if ((b & 0x7f800000u) == 0x7f800000u) continue;  // NaN or infinity
        const float x = from_bits(b);
        const double r = reference(x);
        check_one(res, b, ours(x), r);
        if (sym != Symmetry::none) {
          const std::uint32_t nb = b | 0x80000000u;
          check_one(res, nb, ours(from_bits(nb)), sym == Symmetry::odd ? -r : r);
        }
      }
    }
    partial[t] = res;
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t);
  for (auto& th : pool) th.join();
  SweepResult total;
  for (const auto& p : partial) merge(total, p);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  const float xu = from_bits(total.max_ulp_bits);
  std::printf("%-8s %llu inputs (every %llu%s), %.1f s wall, %.1f s cpu: ", name, static_cast<unsigned long long>(total.checked),
              static_cast<unsigned long long>(stride), stride == 1 ? "st: all" : "th", secs, cpu);
  if (total.not_nearest == 0) {
    std::printf("all correctly rounded (equal to glibc's double result rounded to float)");
  } else {
    const float xe = from_bits(total.max_err_bits);
    std::printf("%llu not correctly rounded, max %u ulp at x=%a (0x%08x): f=%a ref=%a; max error %.4f ulp at x=%a",
                static_cast<unsigned long long>(total.not_nearest), total.max_ulp, static_cast<double>(xu),
                total.max_ulp_bits, static_cast<double>(ours(xu)), reference(xu), total.max_err,
                static_cast<double>(xe));
  }
  std::printf("; %llu special mismatches\n", static_cast<unsigned long long>(total.special_mismatch));
  if (total.special_mismatch != 0) {
    const float xs = from_bits(total.first_special_bits);
    std::printf("  first special mismatch at x=%a (0x%08x): f=%a ref=%a\n", static_cast<double>(xs),
                total.first_special_bits, static_cast<double>(ours(xs)), reference(xs));
  }
  std::fflush(stdout);
  return total;
}

// sin(pi x) / cos(pi x) references: x = n/2 + r with |r| <= 1/4 (exact in double), the value from
// glibc's double sin or cos of pi*r, the C23 zero signs. Floats of magnitude >= 2^23 are integers,
// where sin(pi x) = ±0 and cos(pi x) = (-1)^x exactly; those need no library call.
double ref_sincospi(float x, bool want_cos) {
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 0x1p23) {
    if (!want_cos) return std::copysign(0.0, static_cast<double>(x));
    return (a < 0x1p24 && static_cast<std::int64_t>(a) % 2 != 0) ? -1.0 : 1.0;
  }
  const double n = std::nearbyint(2.0 * a);
  const double r = a - 0.5 * n;
  const int q = static_cast<int>((static_cast<std::int64_t>(n) + (want_cos ? 1 : 0)) & 3);
  double v;
  if (r == 0.0 && q % 2 == 0) {
    v = 0.0;
  } else if (q % 2 == 0) {
    v = q == 0 ? std::sin(M_PI * r) : -std::sin(M_PI * r);
  } else {
    v = q == 1 ? std::cos(M_PI * r) : -std::cos(M_PI * r);
  }
  return want_cos || !std::signbit(x) ? v : -v;  // sin(pi x) is odd
}

}  // namespace

TEST_SUITE("math.elementary.exhaustive") {
  TEST_CASE("exp over every finite float") {
    const auto r = sweep("exp", Symmetry::none, [](float x) { return rm::exp(x); },
                         [](float x) { return std::exp(static_cast<double>(x)); });
    CHECK(r.special_mismatch == 0);
    CHECK(r.max_ulp <= 1);
  }

  TEST_CASE("log over every finite float") {
    const auto r = sweep("log", Symmetry::none, [](float x) { return rm::log(x); }, [](float x) {
      // C: the logarithm of a negative number is NaN (no need to ask glibc, whose error path is slow).
      return x < 0.0f ? std::numeric_limits<double>::quiet_NaN() : std::log(static_cast<double>(x));
    });
    CHECK(r.special_mismatch == 0);
    CHECK(r.max_ulp <= 1);
  }

  TEST_CASE("tanh over every finite float") {
    const auto r = sweep("tanh", Symmetry::odd, [](float x) { return rm::tanh(x); },
                         [](float x) { return std::tanh(static_cast<double>(x)); });
    CHECK(r.special_mismatch == 0);
    CHECK(r.max_ulp <= 1);
  }

  TEST_CASE("sigmoid over every finite float") {
    const auto r = sweep("sigmoid", Symmetry::none, [](float x) { return rm::sigmoid(x); },
                         [](float x) {
                           const double xd = x;
                           if (xd >= 0) return 1.0 / (1.0 + std::exp(-xd));
                           const double e = std::exp(xd);
                           return e / (1.0 + e);
                         });
    CHECK(r.special_mismatch == 0);
    CHECK(r.max_ulp <= 1);
  }

  TEST_CASE("sinpi over every finite float") {
    const auto r = sweep("sinpi", Symmetry::odd, [](float x) { return rm::sinpi(x); },
                         [](float x) { return ref_sincospi(x, false); });
    CHECK(r.special_mismatch == 0);
    CHECK(r.max_ulp <= 1);
  }

  TEST_CASE("cospi over every finite float") {
    const auto r = sweep("cospi", Symmetry::even, [](float x) { return rm::cospi(x); },
                         [](float x) { return ref_sincospi(x, true); });
    CHECK(r.special_mismatch == 0);
    CHECK(r.max_ulp <= 1);
  }
}
