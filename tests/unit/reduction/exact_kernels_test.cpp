// SPDX-License-Identifier: BSD-3-Clause
/// @file Exact's vectorised per-element arithmetic (detail/exact_kernels.hpp) and its fused passes
/// against a plain scalar reference of the semantics, bit for bit, on adversarial inputs: ties on
/// the grid (both parities, both signs), values whose scaled magnitude is near 2^51..2^62, every
/// exponent below a block's, subnormals, zeros, shifts beyond 63, and mixed magnitudes 1e-30..1e30.
#include <doctest/doctest.h>

#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/reduction/detail/exact_kernels.hpp>
#include <reprosgd/reduction/exact.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>

#include <support/exec_spaces.hpp>
#include "reduction_test_support.hpp"

#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

using reprosgd_test::mix;

namespace ex = reprosgd::detail::exact;

// ---- The reference: the semantics written the plain way (the implementation before it was
// vectorised), kept here so the fast code is always checked against it. -----------------------

std::int32_t ref_biased_exponent(float x) { return static_cast<std::int32_t>((std::bit_cast<std::uint32_t>(x) >> 23) & 0xFFu); }
int ref_shift(std::int32_t e, int h) { return 188 - h - (e > 0 ? e : 1); }
std::int64_t ref_round_half_even(double d) {
  const std::int64_t t = static_cast<std::int64_t>(d);  // truncation toward zero, exact
  const double frac = d - static_cast<double>(t);       // exact
  if (frac > 0.5 || (frac == 0.5 && (t & 1))) return t + 1;
  if (frac < -0.5 || (frac == -0.5 && (t & 1))) return t - 1;
  return t;
}
std::int64_t ref_quantise(float x, std::int32_t e, int h) {
  return ref_round_half_even(static_cast<double>(x) * std::ldexp(1.0, ref_shift(e, h)));
}
/// The float of an integer total, or nothing (overflowed) when it is too large for a float.
bool ref_dequantise(std::int64_t total, std::int32_t e, int h, float& out) {
  const double v = static_cast<double>(total) * std::ldexp(1.0, -ref_shift(e, h));
  if (v >= 3.4028235677973366e38 || v <= -3.4028235677973366e38) {
    out = 0.0f;
    return false;
  }
  out = static_cast<float>(v);
  return true;
}

/// The reference reduction of all of `rows` (one row per micro-batch), scalar, in the plain
/// order, into `want`; false when a sum overflowed a float.
template <class Rows, class Sum>
bool ref_reduce(const Rows& rows, const Sum& want) {
  const long m = static_cast<long>(rows.extent(0)), n = static_cast<long>(rows.extent(1));
  const int h = static_cast<int>(std::bit_width(static_cast<unsigned long>(m - 1)));
  bool finite = true;
  for (long b = 0; b * 256 < n; ++b) {
    std::int32_t e = 0;
    for (long u = 0; u < m; ++u)
      for (long i = b * 256; i < std::min(n, (b + 1) * 256); ++i) e = std::max(e, ref_biased_exponent(rows(u, i)));
    for (long i = b * 256; i < std::min(n, (b + 1) * 256); ++i) {
      std::int64_t total = 0;
      for (long u = 0; u < m; ++u) total += ref_quantise(rows(u, i), e, h);
      finite = ref_dequantise(total, e, h, want(i)) && finite;
    }
  }
  return finite;
}

float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }

/// Significands to try for a value whose grid step falls `r` bits into its significand (r <= 0:
/// no rounding): edges, randoms, and for r >= 1 exact ties with an even and an odd quotient and
/// the neighbours of a tie.
std::vector<std::uint32_t> significands(int r, std::uint64_t seed) {
  std::vector<std::uint32_t> out = {0u, 1u, 2u, 3u, 0x400000u, 0x7FFFFFu, 0x7FFFFEu, 0x555555u, 0x2AAAAAu};
  for (int i = 0; i < 6; ++i) out.push_back(static_cast<std::uint32_t>(mix(seed + static_cast<std::uint64_t>(i))) & 0x7FFFFFu);
  if (r >= 1 && r <= 24) {
    const std::uint32_t half = 1u << (r - 1);
    for (std::uint32_t q : {0u, 1u, 2u, 3u, 0x1234u, 0x1235u}) {
      const std::uint64_t base = static_cast<std::uint64_t>(q) << r;
      for (std::int64_t delta : {-1, 0, 1}) {
        const std::int64_t mm = static_cast<std::int64_t>(base + half) + delta;
        if (mm >= 0 && mm < (1 << 24)) out.push_back(static_cast<std::uint32_t>(mm) & 0x7FFFFFu);
      }
    }
  }
  return out;
}

}  // namespace

TEST_SUITE("reduction/exact_kernels") {
  TEST_CASE("quantise equals round_half_even(x * 2^shift) for every exponent up to the block's") {
    REQUIRE(std::fegetround() == FE_TONEAREST);
    long checked = 0, mismatches = 0, ties = 0;
    for (std::int32_t e : {0, 1, 2, 3, 24, 50, 100, 126, 127, 128, 150, 200, 230, 253, 254}) {
      for (int h : {0, 1, 2, 5, 13, 20}) {
        const std::int32_t base = ex::quantise_base(e, h);
        for (std::int32_t xe = 0; xe <= e; ++xe) {
          // Grid step falls r bits into the 24-bit significand: rounding happens for r >= 1.
          const int s = base - (xe > 0 ? xe : 1);
          const int r = s - 39;
          for (std::uint32_t mant : significands(r, static_cast<std::uint64_t>(e * 1000 + h * 300 + xe))) {
            for (std::uint32_t sign : {0u, 1u}) {
              const float x = from_bits((sign << 31) | (static_cast<std::uint32_t>(xe) << 23) | mant);
              const std::int64_t want = ref_quantise(x, e, h), got = ex::quantise(x, base);
              ++checked;
              if (r >= 1 && r <= 24 && ((mant | (xe > 0 ? 0x800000u : 0u)) & ((1u << r) - 1u)) == (1u << (r - 1))) ++ties;
              if (want != got) {
                if (++mismatches <= 10)
                  FAIL_CHECK("x=" << x << " (bits " << std::bit_cast<std::uint32_t>(x) << ") E=" << e << " h=" << h
                                  << ": reference " << want << ", quantise " << got);
              }
            }
          }
        }
      }
    }
    CHECK(mismatches == 0);
    CHECK(ties > 1000);  // the tie cases were really exercised
    MESSAGE(checked << " values checked, " << ties << " of them exact ties on the grid");
  }

  TEST_CASE("quantise: magnitudes at the top of the grid, zeros and subnormals") {
    // The block's largest value lands just below 2^(62-h); values of the same exponent are exact.
    for (int h : {0, 1, 20}) {
      for (std::int32_t e : {1, 127, 254}) {
        const std::int32_t base = ex::quantise_base(e, h);
        const float top = from_bits((static_cast<std::uint32_t>(e) << 23) | 0x7FFFFFu);
        CHECK(ex::quantise(top, base) == ref_quantise(top, e, h));
        CHECK(ex::quantise(-top, base) == -ref_quantise(top, e, h));
        CHECK(std::abs(static_cast<double>(ex::quantise(top, base))) < std::ldexp(1.0, 62 - h));
        CHECK(ex::quantise(0.0f, base) == 0);
        CHECK(ex::quantise(-0.0f, base) == 0);
        const float dmin = std::numeric_limits<float>::denorm_min();
        CHECK(ex::quantise(dmin, base) == ref_quantise(dmin, e, h));
        CHECK(ex::quantise(-dmin, base) == ref_quantise(-dmin, e, h));
      }
    }
    // A block of subnormals alone (E = 0): every subnormal is on the grid.
    for (std::uint32_t m : {1u, 2u, 3u, 0x400000u, 0x7FFFFFu})
      CHECK(ex::quantise(from_bits(m), ex::quantise_base(0, 3)) == ref_quantise(from_bits(m), 0, 3));
  }

  TEST_CASE("int64_to_double equals the cast (round to nearest, ties to even) for every magnitude") {
    REQUIRE(std::fegetround() == FE_TONEAREST);
    std::vector<std::int64_t> values = {0,
                                        1,
                                        -1,
                                        std::numeric_limits<std::int64_t>::max(),
                                        std::numeric_limits<std::int64_t>::min(),
                                        std::numeric_limits<std::int64_t>::min() + 1,
                                        0xFFFFFFFFll,
                                        0x100000000ll,
                                        -0x100000000ll,
                                        -0xFFFFFFFFll};
    for (int b = 52; b <= 62; ++b) {
      const std::int64_t p = std::int64_t{1} << b;
      const std::int64_t half_ulp = std::int64_t{1} << (b - 53 >= 0 ? b - 53 : 0);
      for (std::int64_t d : {-2, -1, 0, 1, 2}) {
        values.push_back(p + d);
        values.push_back(-(p + d));
        // ties: p + (odd or even multiple of the ulp) + half an ulp
        values.push_back(p + half_ulp + d);
        values.push_back(p + 3 * half_ulp + d);
        values.push_back(-(p + 3 * half_ulp + d));
      }
    }
    for (std::uint64_t i = 0; i < 200000; ++i) {
      const std::uint64_t h = mix(i);
      values.push_back(static_cast<std::int64_t>(h >> (h & 63)) * ((h & 64) ? -1 : 1));
    }
    long mismatches = 0;
    for (std::int64_t v : values) {
      const double want = static_cast<double>(v), got = ex::int64_to_double(v);
      if (std::bit_cast<std::uint64_t>(want) != std::bit_cast<std::uint64_t>(got) && ++mismatches <= 10)
        FAIL_CHECK("n=" << v << ": cast " << want << ", int64_to_double " << got);
    }
    CHECK(mismatches == 0);
  }

  TEST_CASE("dequantise equals the reference, overflow boundary included") {
    long mismatches = 0;
    auto check_one = [&](std::int64_t total, std::int32_t e, int h) {
      float want, got;
      const bool ok = ref_dequantise(total, e, h, want);
      int over = -1;
      got = ex::dequantise(total, ex::dequantise_scale(e, h), over);
      if (ok != (over == 0) || std::bit_cast<std::uint32_t>(want) != std::bit_cast<std::uint32_t>(got)) {
        if (++mismatches <= 10)
          FAIL_CHECK("total=" << total << " E=" << e << " h=" << h << ": reference " << want << (ok ? "" : " (overflow)")
                              << ", dequantise " << got << (over ? " (overflow)" : ""));
      }
    };
    for (std::int32_t e : {0, 1, 100, 127, 200, 254})
      for (int h : {0, 1, 7, 20})
        for (std::uint64_t i = 0; i < 3000; ++i) {
          const std::uint64_t r = mix(i * 977 + static_cast<std::uint64_t>(e * 31 + h));
          const std::int64_t t = static_cast<std::int64_t>(r >> (1 + (r & 63)));
          check_one((r & 128) ? -t : t, e, h);
        }
    // Around FLT_MAX at the largest grid (E = 254): the halfway point to 2^128 must report, just
    // below it must give FLT_MAX. With h = 0 the grid step is 2^(254-188) = 2^66... use exact totals.
    for (int h : {0, 1, 2}) {
      const int shift = ref_shift(254, h);  // negative: total * 2^-shift
      const double step = std::ldexp(1.0, -shift);
      const double limit = 3.4028235677973366e38;
      const std::int64_t at = static_cast<std::int64_t>(limit / step);
      for (std::int64_t d = -3; d <= 3; ++d) {
        check_one(at + d, 254, h);
        check_one(-(at + d), 254, h);
      }
      const std::int64_t fmax = static_cast<std::int64_t>(static_cast<double>(std::numeric_limits<float>::max()) / step);
      for (std::int64_t d = -3; d <= 3; ++d) check_one(fmax + d, 254, h);
    }
    CHECK(mismatches == 0);
  }

  TEST_CASE_TEMPLATE_DEFINE("Exact::reduce equals the scalar reference of the whole reduction", Space, exact_ref_id) {
    // Rows mixing magnitudes 1e-30..1e30, subnormals, zeros, and values built to be exact ties on
    // their block's grid; n not a multiple of the block size; M from 1 (no headroom) to 9.
    using Rows = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
    using Sum = Kokkos::View<float*, Kokkos::HostSpace>;
    const long n = 5 * 256 + 77;
    for (long m : {1L, 2L, 3L, 4L, 9L}) {
      Rows rows("rows", m, n);
      for (long u = 0; u < m; ++u)
        for (long i = 0; i < n; ++i) {
          const std::uint64_t r = mix(static_cast<std::uint64_t>(m * 1000003 + u * n + i));
          const long block = i / 256;
          float x;
          switch (block) {
            case 0:  // 1e-30 .. 1e30
              x = static_cast<float>(std::pow(10.0, -30.0 + 60.0 * static_cast<double>(r >> 11) * 0x1p-53));
              break;
            case 1:  // one huge value per block, the rest tiny ties on its grid: 2^k * (odd + 0.5) * step
            {
              const int h = static_cast<int>(std::bit_width(static_cast<unsigned long>(m - 1)));
              const double step = std::ldexp(1.0, -ref_shift(127 + 20, h));
              x = (i == 256 && u == 0) ? 0x1.8p20f : static_cast<float>(step * (static_cast<double>(r % 64) + 0.5));
              break;
            }
            case 2:  // subnormals and zeros
              x = (r & 3) == 0 ? 0.0f : from_bits(static_cast<std::uint32_t>(r >> 40) & 0x7FFFFFu);
              break;
            case 3:  // gradient-like
              x = std::ldexp(static_cast<float>(r >> 40) * 0x1p-24f, -static_cast<int>((r >> 8) % 20));
              break;
            default:  // near the top of the float range, and small ones sharing their block
              x = (r & 1) ? std::numeric_limits<float>::max() / 16.0f : 1e-3f;
              break;
          }
          rows(u, i) = (r >> 63) ? -x : x;
        }
      Sum want("want", n);
      const bool want_finite = ref_reduce(rows, want);
      reprosgd::Serial<Space> par;
      reprosgd::Exact exact;
      Sum got("got", n);
      const bool finite = exact.reduce(par, rows, m, got).finite;
      CHECK(finite == want_finite);
      REPROSGD_CHECK_BITWISE_EQUAL(got, want);
    }
  }
  TEST_CASE_TEMPLATE_APPLY(exact_ref_id, reprosgd_test::spaces);

  TEST_CASE_TEMPLATE_DEFINE("Exact::reduce on one rank: the double-sum blocks give the reference bits", Space,
                            exact_span_id) {
    // One rank takes a plain double sum for blocks whose exponent span is at most 29 - h
    // (exact_double_span) and the integer grid otherwise. Every block here sits at, just below or
    // just above that limit (and at the grid's own limit 38 - h), with the smallest value placed
    // in any row, full 24-bit significands (so a lost bit would show), exact cancellations,
    // -0 in every row, subnormals, and sums at the float overflow limit.
    using Rows = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
    using Sum = Kokkos::View<float*, Kokkos::HostSpace>;
    const int spans[] = {0, 1, 20, 25, 26, 27, 28, 29, 30, 31, 35, 36, 37, 38, 39, 40, 60};
    const long nspans = static_cast<long>(std::size(spans));
    const long n = (nspans + 4) * 256 + 13;
    for (long m : {1L, 2L, 3L, 4L, 5L, 8L, 9L}) {
      Rows rows("rows", m, n);
      for (long u = 0; u < m; ++u)
        for (long i = 0; i < n; ++i) {
          const std::uint64_t r = mix(static_cast<std::uint64_t>(m * 7919 + u * n + i) ^ 0x5EED);
          const long block = i / 256, j = i % 256;
          const float sig = 1.0f + static_cast<float>(r >> 41) * 0x1p-23f;  // 24-bit significand
          float x;
          if (block < nspans) {
            // Exponents in [top - span, top]: the block's top value in row 0, its smallest in
            // row m-1 (so both extremes are present whatever the span), the rest in between.
            const int span = spans[block], top = 10 + static_cast<int>(block % 3) * 40;
            const int ex = (u == 0 && j == 0) ? top : (u == m - 1 && j == 1) ? top - span
                                                                              : top - static_cast<int>((r >> 8) % static_cast<std::uint64_t>(span + 1));
            x = std::ldexp(sig, ex - 127);
            if (j == 2) x = (u % 2 == 0) ? x : -rows(u - 1, i);  // exact cancellations in pairs
          } else if (block == nspans) {
            x = -0.0f;  // a block of -0 in every row: the sum is +0
          } else if (block == nspans + 1) {
            // subnormals next to small normals (span within the double-sum limit)
            x = (r & 1) ? from_bits(static_cast<std::uint32_t>(r >> 40) & 0x7FFFFFu) : std::ldexp(sig, -120);
          } else if (block == nspans + 2) {
            // at the overflow limit: FLT_MAX in every row overflows for m >= 2, FLT_MAX/2 + FLT_MAX/2 does not
            x = (j % 2 == 0) ? std::numeric_limits<float>::max() : std::numeric_limits<float>::max() / static_cast<float>(m);
          } else {
            x = (r & 3) == 0 ? 0.0f : std::ldexp(sig, -static_cast<int>((r >> 8) % 20));  // gradient-like
          }
          rows(u, i) = (r >> 63) && j != 2 ? -x : x;
        }
      Sum want("want", n), got("got", n);
      const bool want_finite = ref_reduce(rows, want);
      reprosgd::Serial<Space> par;
      reprosgd::Exact exact;
      CHECK(exact.reduce(par, rows, m, got).finite == want_finite);
      REPROSGD_CHECK_BITWISE_EQUAL(got, want);
      // Inf or NaN anywhere: reported, never converted.
      for (const float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
        Rows copy("copy", m, n);
        Kokkos::deep_copy(copy, rows);
        copy(m - 1, 3 * 256 + 7) = bad;
        CHECK_FALSE(exact.reduce(par, copy, m, got).finite);
      }
    }
  }
  TEST_CASE_TEMPLATE_APPLY(exact_span_id, reprosgd_test::spaces);
}
