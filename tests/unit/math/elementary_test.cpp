// SPDX-License-Identifier: BSD-3-Clause
/// @file Special values, known answers, log_sum_exp, double cospi, backend equality and golden hashes of reprosgd/math/elementary.hpp.
#include <doctest/doctest.h>

#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/math/elementary.hpp>
#include <support/exec_spaces.hpp>

// Header-only use of xxhash, as the library headers do (no libxxhash to link).
#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

namespace {

namespace rm = reprosgd::math;

std::uint32_t fbits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
std::uint64_t dbits(double d) {
  std::uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}
float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float denorm_min = 0x1p-149f;

// Exact bit equality, reported as hex floats.
#define CHECK_BITS(expr, expected)                                                              \
  do {                                                                                          \
    const float got_ = (expr);                                                                  \
    const float want_ = (expected);                                                             \
    INFO(#expr, " = ", got_, " (", fbits(got_), "), expected ", want_, " (", fbits(want_), ")"); \
    CHECK(fbits(got_) == fbits(want_));                                                         \
  } while (0)

// The 1,000,000 pinned inputs of the golden hashes: 500,000 bit patterns from a SplitMix64 hash
// (every binade, NaN and infinity included) and 500,000 evenly spaced values in [-24, 24] where
// the functions are neither saturated nor trivial.
std::vector<float> golden_inputs() {
  std::vector<float> in(1000000);
  std::uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 500000; ++i) {
    s += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z = z ^ (z >> 31);
    in[i] = from_bits(static_cast<std::uint32_t>(z >> 32));
  }
  for (int i = 0; i < 500000; ++i) in[500000 + i] = static_cast<float>(-24.0 + 48.0 * i / 500000.0);
  return in;
}

template <class F>
std::uint64_t output_hash(const std::vector<float>& in, F f) {
  std::vector<std::uint32_t> out(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = fbits(f(in[i]));
  return XXH3_64bits(out.data(), out.size() * sizeof(std::uint32_t));
}

// Integer ulp distance between two finite doubles of the same sign.
std::uint64_t ulp_distance(double a, double b) {
  const std::uint64_t x = dbits(a), y = dbits(b);
  return x > y ? x - y : y - x;
}

// cos(pi x) / sin(pi x) in long double (64-bit significand) after the exact reduction x = n/2 + r.
long double ref_sincospi_ld(double x, bool want_cos) {
  const long double a = std::fabs(static_cast<long double>(x));
  const long double n = std::nearbyint(2.0L * a);
  const long double r = a - 0.5L * n;
  const int q = static_cast<int>(std::fmod(n + (want_cos ? 1.0L : 0.0L), 4.0L));
  const long double pi = 3.141592653589793238462643383279502884L;
  const long double s = std::sin(pi * r), c = std::cos(pi * r);
  long double v = q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
  if (r == 0 && q % 2 == 0) v = 0;
  return want_cos || !std::signbit(x) ? v : -v;  // sin(pi x) is odd
}

}  // namespace

TEST_SUITE("math.elementary") {
  TEST_CASE("exp: special values and known answers (correctly rounded)") {
    CHECK_BITS(rm::exp(0.0f), 1.0f);
    CHECK_BITS(rm::exp(-0.0f), 1.0f);
    CHECK_BITS(rm::exp(inf), inf);
    CHECK_BITS(rm::exp(-inf), 0.0f);  // +0, not -0
    CHECK(std::isnan(rm::exp(std::numeric_limits<float>::quiet_NaN())));
    CHECK_BITS(rm::exp(FLT_MAX), inf);
    CHECK_BITS(rm::exp(-FLT_MAX), 0.0f);
    CHECK_BITS(rm::exp(denorm_min), 1.0f);
    CHECK_BITS(rm::exp(-denorm_min), 1.0f);
    CHECK_BITS(rm::exp(0x1p-25f), 1.0f);
    CHECK_BITS(rm::exp(-0x1p-25f), 1.0f);
    CHECK_BITS(rm::exp(0x1p-24f), 0x1.000002p0f);
    CHECK_BITS(rm::exp(-0x1p-24f), 0x1.fffffep-1f);
    CHECK_BITS(rm::exp(1.0f), 0x1.5bf0a8p+1f);
    CHECK_BITS(rm::exp(-1.0f), 0x1.78b564p-2f);
    CHECK_BITS(rm::exp(20.0f), 0x1.ceb088p+28f);
    // Overflow threshold: the largest x with a finite result, and the next float.
    CHECK_BITS(rm::exp(0x1.62e42ep+6f), 0x1.ffff08p+127f);
    CHECK_BITS(rm::exp(0x1.62e430p+6f), inf);
    // Into the subnormal range: last normal result, first subnormal one, last nonzero, first zero.
    CHECK_BITS(rm::exp(-0x1.5d589ep+6f), 0x1.00004cp-126f);
    CHECK_BITS(rm::exp(-0x1.5d58a0p+6f), 0x1.ffff98p-127f);
    CHECK_BITS(rm::exp(-100.0f), 0x1.bp-145f);
    CHECK_BITS(rm::exp(-0x1.9fe368p+6f), denorm_min);
    CHECK_BITS(rm::exp(-0x1.9fe36ap+6f), 0.0f);
  }

  TEST_CASE("log: special values and known answers") {
    CHECK_BITS(rm::log(0.0f), -inf);
    CHECK_BITS(rm::log(-0.0f), -inf);
    CHECK_BITS(rm::log(inf), inf);
    CHECK(std::isnan(rm::log(-inf)));
    CHECK(std::isnan(rm::log(-1.0f)));
    CHECK(std::isnan(rm::log(-denorm_min)));
    CHECK(std::isnan(rm::log(std::numeric_limits<float>::quiet_NaN())));
    CHECK_BITS(rm::log(1.0f), 0.0f);  // +0
    CHECK_BITS(rm::log(2.0f), 0x1.62e43p-1f);
    CHECK_BITS(rm::log(denorm_min), -0x1.9d1dap+6f);
    CHECK_BITS(rm::log(0x1.8p-140f), -0x1.828a62p+6f);
    CHECK_BITS(rm::log(FLT_MIN), -0x1.5d58ap+6f);
    CHECK_BITS(rm::log(FLT_MAX), 0x1.62e43p+6f);
    CHECK_BITS(rm::log(0x1.fffffep-1f), -0x1p-24f);
    CHECK_BITS(rm::log(0x1.000002p0f), 0x1.fffffep-24f);
    CHECK_BITS(rm::log(0x1.5bf0a8p+1f), 0x1.fffffep-1f);
  }

  TEST_CASE("tanh: special values and known answers") {
    CHECK_BITS(rm::tanh(0.0f), 0.0f);
    CHECK_BITS(rm::tanh(-0.0f), -0.0f);
    CHECK_BITS(rm::tanh(inf), 1.0f);
    CHECK_BITS(rm::tanh(-inf), -1.0f);
    CHECK(std::isnan(rm::tanh(std::numeric_limits<float>::quiet_NaN())));
    CHECK_BITS(rm::tanh(denorm_min), denorm_min);
    CHECK_BITS(rm::tanh(-denorm_min), -denorm_min);
    CHECK_BITS(rm::tanh(0x1.2p-12f), 0x1.2p-12f);
    CHECK_BITS(rm::tanh(0.25f), 0x1.f597eap-3f);
    CHECK_BITS(rm::tanh(1.0f), 0x1.85efacp-1f);
    CHECK_BITS(rm::tanh(-1.5f), -0x1.cf6f98p-1f);
    CHECK_BITS(rm::tanh(9.0f), 0x1.fffffep-1f);
    CHECK_BITS(rm::tanh(0x1.20624ep+3f), 1.0f);
    CHECK_BITS(rm::tanh(FLT_MAX), 1.0f);
    CHECK_BITS(rm::tanh(-FLT_MAX), -1.0f);
  }

  TEST_CASE("sigmoid: special values, stability at both ends") {
    CHECK_BITS(rm::sigmoid(0.0f), 0.5f);
    CHECK_BITS(rm::sigmoid(-0.0f), 0.5f);
    CHECK_BITS(rm::sigmoid(inf), 1.0f);
    CHECK_BITS(rm::sigmoid(-inf), 0.0f);
    CHECK(std::isnan(rm::sigmoid(std::numeric_limits<float>::quiet_NaN())));
    CHECK_BITS(rm::sigmoid(FLT_MAX), 1.0f);
    CHECK_BITS(rm::sigmoid(-FLT_MAX), 0.0f);
    CHECK_BITS(rm::sigmoid(1.0f), 0x1.764d5p-1f);
    CHECK_BITS(rm::sigmoid(-1.0f), 0x1.136562p-2f);
    CHECK_BITS(rm::sigmoid(17.0f), 0x1.fffffep-1f);
    CHECK_BITS(rm::sigmoid(18.0f), 1.0f);
    CHECK_BITS(rm::sigmoid(-0x1.5d58a0p+6f), 0x1.ffff98p-127f);  // subnormal, no flush
    CHECK_BITS(rm::sigmoid(-100.0f), 0x1.bp-145f);
    CHECK_BITS(rm::sigmoid(-0x1.9fe368p+6f), denorm_min);
    CHECK_BITS(rm::sigmoid(-104.0f), 0.0f);
  }

  TEST_CASE("sinpi and cospi: exact reduction, C23 zero signs") {
    CHECK_BITS(rm::sinpi(0.0f), 0.0f);
    CHECK_BITS(rm::sinpi(-0.0f), -0.0f);
    CHECK_BITS(rm::sinpi(1.0f), 0.0f);
    CHECK_BITS(rm::sinpi(-1.0f), -0.0f);
    CHECK_BITS(rm::sinpi(2.0f), 0.0f);
    CHECK_BITS(rm::sinpi(-3.0f), -0.0f);
    CHECK_BITS(rm::sinpi(0x1p23f + 1.0f), 0.0f);
    CHECK_BITS(rm::sinpi(-FLT_MAX), -0.0f);
    CHECK_BITS(rm::sinpi(0.5f), 1.0f);
    CHECK_BITS(rm::sinpi(-0.5f), -1.0f);
    CHECK_BITS(rm::sinpi(1.5f), -1.0f);
    CHECK_BITS(rm::sinpi(0.25f), 0x1.6a09e6p-1f);
    CHECK_BITS(rm::sinpi(-0.75f), -0x1.6a09e6p-1f);
    CHECK_BITS(rm::sinpi(0x1.555556p-2f), 0x1.bb67b0p-1f);
    CHECK_BITS(rm::sinpi(0x1.fffffep-1f), 0x1.921fb6p-23f);  // near a zero: no cancellation
    CHECK_BITS(rm::sinpi(0x1.7ffffep+22f), -1.0f);          // 6291455.5
    CHECK_BITS(rm::sinpi(denorm_min), 0x1.8p-148f);          // pi * 2^-149 rounds to 3 * 2^-149
    CHECK(std::isnan(rm::sinpi(inf)));
    CHECK(std::isnan(rm::sinpi(-inf)));
    CHECK(std::isnan(rm::sinpi(std::numeric_limits<float>::quiet_NaN())));

    CHECK_BITS(rm::cospi(0.0f), 1.0f);
    CHECK_BITS(rm::cospi(-0.0f), 1.0f);
    CHECK_BITS(rm::cospi(0.5f), 0.0f);   // +0 at every half-integer
    CHECK_BITS(rm::cospi(-0.5f), 0.0f);
    CHECK_BITS(rm::cospi(1.5f), 0.0f);
    CHECK_BITS(rm::cospi(0x1.7ffffep+22f), 0.0f);
    CHECK_BITS(rm::cospi(1.0f), -1.0f);
    CHECK_BITS(rm::cospi(-3.0f), -1.0f);
    CHECK_BITS(rm::cospi(2.0f), 1.0f);
    CHECK_BITS(rm::cospi(0x1p23f + 1.0f), -1.0f);
    CHECK_BITS(rm::cospi(0x1p24f), 1.0f);
    CHECK_BITS(rm::cospi(FLT_MAX), 1.0f);
    CHECK_BITS(rm::cospi(0.25f), 0x1.6a09e6p-1f);
    CHECK_BITS(rm::cospi(0x1.555556p-2f), 0x1.fffffep-2f);
    CHECK_BITS(rm::cospi(0x1.fffffep-2f), 0x1.921fb6p-24f);
    CHECK_BITS(rm::cospi(0x1.000002p-1f), -0x1.921fb6p-23f);
    CHECK_BITS(rm::cospi(0x1p-12f), 0x1.fffff6p-1f);
    CHECK_BITS(rm::cospi(denorm_min), 1.0f);
    CHECK(std::isnan(rm::cospi(inf)));
    CHECK(std::isnan(rm::cospi(std::numeric_limits<float>::quiet_NaN())));
  }

  TEST_CASE("NaN inputs come back quieted with sign and payload kept") {
    const float snan = from_bits(0xff800123u);  // negative signaling NaN, payload 0x123
    const std::uint32_t quiet = 0xffc00123u;
    CHECK(fbits(rm::exp(snan)) == quiet);
    CHECK(fbits(rm::log(snan)) == quiet);
    CHECK(fbits(rm::tanh(snan)) == quiet);
    CHECK(fbits(rm::sigmoid(snan)) == quiet);
    CHECK(fbits(rm::sinpi(snan)) == quiet);
    CHECK(fbits(rm::cospi(snan)) == quiet);
    CHECK(fbits(rm::log(-2.0f)) == 0x7fc00000u);  // domain error: the canonical quiet NaN
    CHECK(fbits(rm::sinpi(inf)) == 0x7fc00000u);
  }

  TEST_CASE("odd and even symmetry hold bit for bit") {
    for (std::uint32_t b = 0; b < 0x7f800000u; b += 0x1357u) {
      const float x = from_bits(b);
      CHECK(fbits(rm::tanh(-x)) == (fbits(rm::tanh(x)) ^ 0x80000000u));
      CHECK(fbits(rm::sinpi(-x)) == (fbits(rm::sinpi(x)) ^ 0x80000000u));
      CHECK(fbits(rm::cospi(-x)) == fbits(rm::cospi(x)));
    }
  }

  TEST_CASE("log_sum_exp: known answers, infinities, NaN, spread, stride") {
    const float two_zeros[] = {0.0f, 0.0f};
    CHECK_BITS(rm::log_sum_exp(two_zeros, 2), 0x1.62e43p-1f);  // ln 2
    const float one_two_three[] = {1.0f, 2.0f, 3.0f};
    // 3 + ln(1 + e^-1 + e^-2) = 3.40760596444438..., correctly rounded.
    CHECK_BITS(rm::log_sum_exp(one_two_three, 3), static_cast<float>(3.4076059644443806));
    const float single[] = {-7.25f};
    CHECK_BITS(rm::log_sum_exp(single, 1), -7.25f);
    CHECK_BITS(rm::log_sum_exp(single, 0), -inf);  // empty sum

    const float with_minus_inf[] = {-inf, 0.0f, -inf};
    CHECK_BITS(rm::log_sum_exp(with_minus_inf, 3), 0.0f);
    const float all_minus_inf[] = {-inf, -inf, -inf};
    CHECK_BITS(rm::log_sum_exp(all_minus_inf, 3), -inf);
    const float with_plus_inf[] = {1.0f, inf, -inf};
    CHECK_BITS(rm::log_sum_exp(with_plus_inf, 3), inf);
    const float with_nan[] = {1.0f, inf, std::numeric_limits<float>::quiet_NaN()};
    CHECK(std::isnan(rm::log_sum_exp(with_nan, 3)));

    const float spread[] = {-1000.0f, 1000.0f, 0.0f};
    CHECK_BITS(rm::log_sum_exp(spread, 3), 1000.0f);
    const float huge[] = {-FLT_MAX, FLT_MAX};
    CHECK_BITS(rm::log_sum_exp(huge, 2), FLT_MAX);
    const float both_max[] = {FLT_MAX, FLT_MAX};
    CHECK_BITS(rm::log_sum_exp(both_max, 2), FLT_MAX);  // FLT_MAX + ln 2 rounds back to FLT_MAX
    const float tiny[] = {-100.0f, -100.0f};
    CHECK_BITS(rm::log_sum_exp(tiny, 2), static_cast<float>(-100.0 + 0.69314718055994531));

    std::vector<float> many(1000, 5.0f);
    CHECK_BITS(rm::log_sum_exp(many.data(), 1000), static_cast<float>(5.0 + 6.9077552789821368));  // 5 + ln 1000

    // Stride: a 3 x 4 row-major matrix, log-sum-exp of column 1 = {0, 1, 2}.
    const float m[] = {9.0f, 0.0f, 9.0f, 9.0f, 9.0f, 1.0f, 9.0f, 9.0f, 9.0f, 2.0f, 9.0f, 9.0f};
    const float col[] = {0.0f, 1.0f, 2.0f};
    CHECK_BITS(rm::log_sum_exp(m + 1, 3, 4), rm::log_sum_exp(col, 3));

    // Random arrays against a long-double reference: within one ulp of it.
    std::uint32_t s = 12345u;
    for (int trial = 0; trial < 200; ++trial) {
      const int n = 1 + trial % 50;
      std::vector<float> v(n);
      for (auto& e : v) {
        s = s * 1664525u + 1013904223u;
        e = static_cast<float>((static_cast<double>(s >> 8) / 16777216.0 - 0.5) * (1 + trial % 7) * 30.0);
      }
      long double mx = v[0];
      for (float e : v) mx = std::max(mx, static_cast<long double>(e));
      long double sum = 0;
      for (float e : v) sum += std::exp(static_cast<long double>(e) - mx);
      const float want = static_cast<float>(mx + std::log(sum));
      const float got = rm::log_sum_exp(v.data(), n);
      const std::uint32_t gb = fbits(got), wb = fbits(want);
      INFO("trial ", trial, ": got ", got, " want ", want);
      CHECK((gb > wb ? gb - wb : wb - gb) <= 1u);
    }
  }

  TEST_CASE("cospi(double) and sinpi(double): exact points and a dense grid over [0, 1]") {
    CHECK(dbits(rm::cospi(0.0)) == dbits(1.0));
    CHECK(dbits(rm::cospi(-0.0)) == dbits(1.0));
    CHECK(dbits(rm::cospi(0.5)) == dbits(0.0));  // +0
    CHECK(dbits(rm::cospi(-0.5)) == dbits(0.0));
    CHECK(dbits(rm::cospi(1.0)) == dbits(-1.0));
    CHECK(dbits(rm::cospi(2.0)) == dbits(1.0));
    CHECK(dbits(rm::cospi(0x1p52 + 1.0)) == dbits(-1.0));
    CHECK(dbits(rm::cospi(0x1p53)) == dbits(1.0));
    CHECK(dbits(rm::cospi(DBL_MAX)) == dbits(1.0));
    CHECK(dbits(rm::cospi(0.25)) == dbits(0x1.6a09e667f3bcdp-1));  // sqrt(1/2) correctly rounded
    CHECK(dbits(rm::cospi(1.0 / 3.0)) == dbits(static_cast<double>(ref_sincospi_ld(1.0 / 3.0, true))));
    CHECK(std::isnan(rm::cospi(std::numeric_limits<double>::infinity())));
    CHECK(std::isnan(rm::cospi(std::numeric_limits<double>::quiet_NaN())));
    CHECK(dbits(rm::sinpi(1.0)) == dbits(0.0));
    CHECK(dbits(rm::sinpi(-1.0)) == dbits(-0.0));
    CHECK(dbits(rm::sinpi(0.5)) == dbits(1.0));

    // 2,000,001 grid points i / 2e6 and their neighbours one ulp up; integer ulp distance to the
    // long-double reference rounded to double.
    std::uint64_t max_cos = 0, max_sin = 0, off_cos = 0, off_sin = 0;
    double worst_cos = 0, worst_sin = 0;
    constexpr int n = 2000000;
    for (int i = 0; i <= n; ++i) {
      for (int up = 0; up < 2; ++up) {
        double x = static_cast<double>(i) / n;
        if (up) x = std::nextafter(x, 2.0);
        const double c = rm::cospi(x), cr = static_cast<double>(ref_sincospi_ld(x, true));
        const double s = rm::sinpi(x), sr = static_cast<double>(ref_sincospi_ld(x, false));
        REQUIRE(std::signbit(c) == std::signbit(cr));
        const std::uint64_t dc = ulp_distance(c, cr), ds = ulp_distance(s, sr);
        off_cos += dc != 0;
        off_sin += ds != 0;
        if (dc > max_cos) { max_cos = dc; worst_cos = x; }
        if (ds > max_sin) { max_sin = ds; worst_sin = x; }
      }
    }
    std::printf("cospi(double): max %llu ulp (x=%a), %llu of %d not correctly rounded; sinpi(double): max %llu ulp (x=%a), %llu not correctly rounded\n",
                static_cast<unsigned long long>(max_cos), worst_cos, static_cast<unsigned long long>(off_cos), 2 * (n + 1),
                static_cast<unsigned long long>(max_sin), worst_sin, static_cast<unsigned long long>(off_sin));
    CHECK(max_cos <= 1);
    CHECK(max_sin <= 1);
  }

  TEST_CASE("golden hashes over 1,000,000 pinned inputs") {
    // Any change to these bits is a change of the numerics of every model trained with this
    // library: update the constants only on purpose, with the exhaustive test passing.
    const std::vector<float> in = golden_inputs();
    const std::uint64_t h_exp = output_hash(in, [](float x) { return rm::exp(x); });
    const std::uint64_t h_log = output_hash(in, [](float x) { return rm::log(x); });
    const std::uint64_t h_tanh = output_hash(in, [](float x) { return rm::tanh(x); });
    const std::uint64_t h_sigmoid = output_hash(in, [](float x) { return rm::sigmoid(x); });
    const std::uint64_t h_sinpi = output_hash(in, [](float x) { return rm::sinpi(x); });
    const std::uint64_t h_cospi = output_hash(in, [](float x) { return rm::cospi(x); });
    std::printf("golden: exp %016llx log %016llx tanh %016llx sigmoid %016llx sinpi %016llx cospi %016llx\n",
                static_cast<unsigned long long>(h_exp), static_cast<unsigned long long>(h_log),
                static_cast<unsigned long long>(h_tanh), static_cast<unsigned long long>(h_sigmoid),
                static_cast<unsigned long long>(h_sinpi), static_cast<unsigned long long>(h_cospi));
    CHECK(h_exp == 0x4fa88df673b08276ull);
    CHECK(h_log == 0x4c20cc03e7f71936ull);
    CHECK(h_tanh == 0xd6ce0eb7db6d56dbull);
    CHECK(h_sigmoid == 0xf8e900b113eca1eeull);
    CHECK(h_sinpi == 0x8f04b4ef35e4a6c2ull);
    CHECK(h_cospi == 0x1bd4609206d38efcull);

    // log_sum_exp over 50,000 rows of 10 consecutive pinned inputs from the dense part.
    std::vector<std::uint32_t> lse(50000);
    for (int r = 0; r < 50000; ++r) lse[r] = fbits(rm::log_sum_exp(in.data() + 500000 + 10 * r, 10));
    const std::uint64_t h_lse = XXH3_64bits(lse.data(), lse.size() * sizeof(std::uint32_t));
    // cospi(double) on 100,001 points i / 100000 of [0, 1] (the cosine schedule's domain).
    std::vector<std::uint64_t> cd(100001);
    for (int i = 0; i <= 100000; ++i) cd[i] = dbits(rm::cospi(static_cast<double>(i) / 100000));
    const std::uint64_t h_cospi_d = XXH3_64bits(cd.data(), cd.size() * sizeof(std::uint64_t));
    std::printf("golden: log_sum_exp %016llx cospi(double) %016llx\n", static_cast<unsigned long long>(h_lse),
                static_cast<unsigned long long>(h_cospi_d));
    CHECK(h_lse == 0xc42c535b53bdbcf4ull);
    CHECK(h_cospi_d == 0x228930017a37a3d1ull);
  }
}

namespace {

// Each function inside a Kokkos parallel_for on the given backend must give the host loop's bits.
template <class Space>
void check_backend_bits() {
  constexpr int n = 1 << 18;
  using view = Kokkos::View<float*, typename Space::memory_space>;
  view in("in", n), out_exp("exp", n), out_log("log", n), out_tanh("tanh", n), out_sig("sigmoid", n),
      out_sin("sinpi", n), out_cos("cospi", n);
  auto h_in = Kokkos::create_mirror_view(in);
  for (int i = 0; i < n; ++i) {
    // Half bit patterns spread over all binades, half dense values in [-20, 20).
    h_in(i) = i % 2 ? from_bits(static_cast<std::uint32_t>(i) * 16411u) : -20.0f + 40.0f * i / n;
  }
  Kokkos::deep_copy(in, h_in);
  constexpr int rows = 1000, cols = 37;
  using view2 = Kokkos::View<float**, Kokkos::LayoutRight, typename Space::memory_space>;
  view2 logits("logits", rows, cols);
  view lse_row("lse_row", rows), lse_col("lse_col", cols);
  auto h_logits = Kokkos::create_mirror_view(logits);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) h_logits(r, c) = static_cast<float>((r * 31 + c * 17) % 200) * 0.37f - 30.0f;
  Kokkos::deep_copy(logits, h_logits);

  Kokkos::parallel_for(
      "reprosgd::test::math_backend", Kokkos::RangePolicy<Space>(Space(), 0, n), KOKKOS_LAMBDA(const int i) {
        const float x = in(i);
        out_exp(i) = rm::exp(x);
        out_log(i) = rm::log(x);
        out_tanh(i) = rm::tanh(x);
        out_sig(i) = rm::sigmoid(x);
        out_sin(i) = rm::sinpi(x);
        out_cos(i) = rm::cospi(x);
      });
  Kokkos::parallel_for(
      "reprosgd::test::lse_rows", Kokkos::RangePolicy<Space>(Space(), 0, rows),
      KOKKOS_LAMBDA(const int r) { lse_row(r) = rm::log_sum_exp(&logits(r, 0), cols, 1); });
  Kokkos::parallel_for(
      "reprosgd::test::lse_cols", Kokkos::RangePolicy<Space>(Space(), 0, cols),
      KOKKOS_LAMBDA(const int c) { lse_col(c) = rm::log_sum_exp(&logits(0, c), rows, cols); });
  Space().fence();

  auto h_exp = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out_exp);
  auto h_log = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out_log);
  auto h_tanh = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out_tanh);
  auto h_sig = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out_sig);
  auto h_sin = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out_sin);
  auto h_cos = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out_cos);
  auto h_row = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), lse_row);
  auto h_col = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), lse_col);
  int mismatches = 0;
  for (int i = 0; i < n; ++i) {
    const float x = h_in(i);
    mismatches += fbits(h_exp(i)) != fbits(rm::exp(x));
    mismatches += fbits(h_log(i)) != fbits(rm::log(x));
    mismatches += fbits(h_tanh(i)) != fbits(rm::tanh(x));
    mismatches += fbits(h_sig(i)) != fbits(rm::sigmoid(x));
    mismatches += fbits(h_sin(i)) != fbits(rm::sinpi(x));
    mismatches += fbits(h_cos(i)) != fbits(rm::cospi(x));
  }
  for (int r = 0; r < rows; ++r) mismatches += fbits(h_row(r)) != fbits(rm::log_sum_exp(&h_logits(r, 0), cols));
  for (int c = 0; c < cols; ++c) mismatches += fbits(h_col(c)) != fbits(rm::log_sum_exp(&h_logits(0, c), rows, cols));
  INFO("backend ", Space::name(), " concurrency ", reprosgd::detail::concurrency(Space()));
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("math functions give the host's bits inside parallel_for", Space, math_backend_bits) {
  check_backend_bits<Space>();
}
TEST_CASE_TEMPLATE_APPLY(math_backend_bits, reprosgd_test::spaces);
