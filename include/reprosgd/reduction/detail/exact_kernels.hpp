// SPDX-License-Identifier: BSD-3-Clause
/// @file The per-element arithmetic of the Exact reduction (docs/distributed.md): block exponents, quantising
/// a float onto its block's int64 grid and converting a sum back, written so that a compiler can
/// vectorise it (no branches, no per-element powers of two, integer rounding) and so that the same
/// code runs on the host and on a GPU (KOKKOS_INLINE_FUNCTION, no libm, no intrinsics).
///
/// The reference semantics (kept as a plain scalar implementation in
/// tests/unit/reduction/exact_kernels_test.cpp, which checks these functions against it bit for bit):
///   E      the agreed largest biased exponent of a block (over every row of every rank)
///   h      ceil(log2 M), headroom for the sum of M rows
///   shift  188 - h - max(E, 1)
///   n(x)   round_half_even(double(x) * 2^shift)          an int64, |n(x)| < 2^(62-h)
///   sum    float(double(sum of n(x)) * 2^-shift)          (int64 -> double -> float, each to nearest)
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/math/elementary.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

REPROSGD_BEGIN_NAMESPACE

namespace detail::exact {

/// Parameters per shared exponent (Exact::block_size).
inline constexpr long block_size = 256;

/// The raw bits of a float.
KOKKOS_INLINE_FUNCTION std::uint32_t float_bits(float x) { return math::detail::bit_cast<std::uint32_t>(x); }

/// The bits of |x|: as unsigned integers these order like the magnitudes, so the biased exponent
/// of a block's largest magnitude is (max of magnitude_bits) >> 23 (255 for Inf and NaN, whose
/// patterns are the largest). A max over integers: exact, vectorisable, in any order.
KOKKOS_INLINE_FUNCTION std::uint32_t magnitude_bits(float x) { return float_bits(x) & 0x7FFFFFFFu; }

/// The largest biased exponent given the max of magnitude_bits over a block.
KOKKOS_INLINE_FUNCTION std::int32_t exponent_of_magnitude_bits(std::uint32_t max_bits) {
  return static_cast<std::int32_t>(max_bits >> 23);
}

/// The per-block constant of quantise(): 1 + h + max(E, 1), where E is the block's agreed largest
/// biased exponent (0 to 254) and h the headroom bits.
KOKKOS_INLINE_FUNCTION std::int32_t quantise_base(std::int32_t block_exponent, std::int32_t headroom) {
  return 1 + headroom + (block_exponent > 1 ? block_exponent : 1);
}

/**
 * round_half_even(double(x) * 2^(188 - h - max(E,1))) as an int64, in integer arithmetic only, for a
 * finite x of a block whose largest biased exponent is E >= x's (`base` = quantise_base(E, h)).
 *
 * Why this is exactly the reference value, for every such x and independent of the rounding mode:
 * write |x| = m * 2^(ex' - 150) with m the 24-bit significand (implicit bit set when the biased
 * exponent ex > 0; m < 2^24) and ex' = max(ex, 1) (subnormals and zero share the scale of ex = 1).
 * The reference product is exact in double (a power-of-two scaling inside double's range), so it is
 * the rational  m * 2^(ex' - 150 + 188 - h - max(E,1)) = w / 2^s  with  w = m * 2^39 (< 2^63) and
 * s = 1 + h + max(E,1) - ex' = base - ex' >= 1 (as ex' <= max(E,1)).
 * Rounding w / 2^s half to even: t = w >> (s-1) is 2q + g, with q = floor(w / 2^s) and g the
 * half bit; `sticky` says whether any of the s-1 bits below g are set (shifting t back loses
 * exactly those). The result is q + 1 exactly when g = 1 and (sticky or q odd), i.e.
 * (t + ((sticky | q) & 1)) >> 1: with g = 0 the added bit cannot carry out of bit 0 of t; with
 * g = 1 it does exactly when it is 1. No overflow: t < 2^63. For s >= 64 the true value
 * w / 2^s < 2^63 / 2^64 = 1/2 rounds to 0; s is clamped to 64, where t = w >> 63 = 0 and the
 * result is (0 + (sticky & 1)) >> 1 = 0 as well. Ties to even are symmetric, so the sign is
 * applied last (two's complement negation), and -0 gives 0 like the reference. (No
 * magic-constant float rounding: nothing here depends on the rounding mode, and no
 * double -> int64 conversion, which AVX2 lacks.)
 *
 * Written for GCC's vectoriser on AVX2: the exponent arithmetic in 32-bit lanes, the 64-bit
 * shifts by a variable count of the shifted value's own width (a `1 << s` of a constant gets its
 * count narrowed to 32 bits, which the vectoriser then cannot use). About 1 ns per element.
 */
KOKKOS_INLINE_FUNCTION std::int64_t quantise(float x, std::int32_t base) {
  const std::uint32_t u = float_bits(x);
  const std::uint32_t ex = (u >> 23) & 0xFFu;
  const std::uint32_t m = (u & 0x7FFFFFu) | (ex != 0u ? 0x800000u : 0u);
  const std::int32_t s = base - static_cast<std::int32_t>(ex != 0u ? ex : 1u);  // >= 1
  const std::uint64_t g = static_cast<std::uint32_t>(s < 64 ? s : 64) - 1u;     // s - 1, at most 63
  const std::uint64_t w = static_cast<std::uint64_t>(m) << 39;
  const std::uint64_t t = w >> g;                        // 2q + half bit
  const std::uint64_t sticky = (t << g) != w ? 1u : 0u;  // any bit below the half bit
  const std::uint64_t q = (t + ((sticky | (t >> 1)) & 1u)) >> 1;
  const std::uint64_t neg = std::uint64_t{0} - static_cast<std::uint64_t>(u >> 31);  // all ones if x < 0
  return static_cast<std::int64_t>((q ^ neg) - neg);
}

/// 2^p as a double, exactly, for -1022 <= p <= 1023 (the bits built directly: no libm).
KOKKOS_INLINE_FUNCTION double pow2(int p) {
  return math::detail::bit_cast<double>(static_cast<std::uint64_t>(1023 + p) << 52);
}

/// The per-block factor of dequantise(): 2^-(188 - h - max(E,1)) (between 2^-187 and 2^86).
KOKKOS_INLINE_FUNCTION double dequantise_scale(std::int32_t block_exponent, std::int32_t headroom) {
  return pow2(-(188 - headroom - (block_exponent > 1 ? block_exponent : 1)));
}

/// The bits of 0x1.ffffffp127 = 3.4028235677973366e38, halfway between FLT_MAX and 2^128: a double
/// of at least this magnitude rounds to an infinite float (the tie too: FLT_MAX's significand is odd).
inline constexpr std::uint64_t float_overflow_limit_bits = 0x47EFFFFFF0000000ull;

/**
 * double(n) to nearest, ties to even, for any int64: the value static_cast<double>(n) has in the
 * round-to-nearest mode (which check_fp_environment() requires), but written with operations that
 * AVX2 has (it lacks an int64 -> double conversion, so the cast would stay scalar).
 * n = hi * 2^32 + lo with hi = n >> 32 (signed) and lo the low 32 bits (unsigned). Both parts are
 * made exact doubles by placing their bits in a double's significand: 2^52 + lo and
 * 2^84 + (hi + 2^31) * 2^32 (hi + 2^31 < 2^32, so at 2^84's ulp of 2^32 it is exact); subtracting
 * 2^52 and 2^84 + 2^63 is exact (the differences, lo and hi * 2^32, are representable). The one
 * rounding is the final addition of the two exact parts, whose exact sum is n: so the result is n
 * rounded to nearest, ties to even, exactly like the cast.
 */
KOKKOS_INLINE_FUNCTION double int64_to_double(std::int64_t n) {
  const std::uint64_t un = static_cast<std::uint64_t>(n);
  const std::uint64_t lo_bits = 0x4330000000000000ull | (un & 0xFFFFFFFFull);               // 2^52 + lo
  const std::uint64_t hi_bits = 0x4530000000000000ull | ((un >> 32) ^ 0x80000000ull);       // 2^84 + (hi+2^31)*2^32
  const double lo = math::detail::bit_cast<double>(lo_bits), hi = math::detail::bit_cast<double>(hi_bits);
  return (hi - 0x1.000008p84) + (lo - 0x1p52);  // 0x1.000008p84 = 2^84 + 2^63
}

/// The float nearest the double v, and whether it overflowed a float (then +0 is returned: the
/// caller reports it; converting it would be UB). The overflow test and the zeroing work on the
/// double's bits (|v| >= limit as integers, exact for finite v) so that a loop over it has no
/// branch and vectorises.
KOKKOS_INLINE_FUNCTION float to_float_checked(double v, int& overflowed) {
  std::uint64_t vb = math::detail::bit_cast<std::uint64_t>(v);
  const std::uint64_t over = (vb & 0x7FFFFFFFFFFFFFFFull) >= float_overflow_limit_bits ? 1u : 0u;
  overflowed = static_cast<int>(over);
  vb &= over - 1u;  // +0 when over
  return static_cast<float>(math::detail::bit_cast<double>(vb));
}

/// The float of an integer block sum `n` (scale = dequantise_scale(E, h)), and whether it
/// overflowed a float (then +0 is returned: the caller reports it; converting it would be UB).
/// The scaling by a power of two is exact (|n| <= 2^63 and scale >= 2^-187 keep it a normal double),
/// so the value is the reference float(double(n) * 2^-shift).
KOKKOS_INLINE_FUNCTION float dequantise(std::int64_t n, double scale, int& overflowed) {
  return to_float_checked(int64_to_double(n) * scale, overflowed);
}

/**
 * The largest exponent distance within a block for which a plain double sum gives the reference
 * bits, without the integer grid: max(E,1) - max(e_min,1) <= exact_double_span(h), where e_min is
 * the smallest biased exponent of a non-zero value of the block (over every row) and h the
 * headroom (at most 2^h rows are added).
 *
 * Why: every value is a multiple of 2^(max(e_min,1) - 150) and below 2^(max(E,1) - 126) in
 * magnitude, so every partial sum of at most 2^h of them is a multiple of that unit below
 * 2^(h + max(E,1) - 126): at most h + span + 24 significant bits, which is <= 53 for
 * span <= 29 - h. A double sum from +0.0 is then exact in any order: it is the exact sum S. The
 * reference is exact too under that condition: quantise() loses nothing when a value's exponent
 * is within 38 - h of E (its grid step is 2^(max(E,1) + h - 188) and its last bit weighs
 * 2^(max(e,1) - 150)), so the integer total is S * 2^shift, which has at most 53 significant bits
 * as well: int64 -> double is exact, the scaling is exact, and the one rounding of both is
 * float(S), with the same overflow limit. Signs of zero agree: an exact zero total is +0 in the
 * reference, and a double sum starting from +0.0 can only reach -0 from -0 + -0.
 */
KOKKOS_INLINE_FUNCTION std::int32_t exact_double_span(std::int32_t headroom) { return 29 - headroom; }

}  // namespace detail::exact

REPROSGD_END_NAMESPACE
