// SPDX-License-Identifier: BSD-3-Clause
/// @file Deterministic elementary functions (exp, log, tanh, sigmoid, sinpi, cospi, log-sum-exp) built only from IEEE + - * / in a fixed order, callable in device code.
#pragma once

// Only the macros: this header must stay usable in device code and cheap to include. A translation
// unit that defines KOKKOS_INLINE_FUNCTION itself (the standalone CUDA check in
// tests/unit/math/cuda/) can use the functions without a Kokkos build for its device.
#ifndef KOKKOS_INLINE_FUNCTION
#include <Kokkos_Macros.hpp>
#endif

#include <reprosgd/config.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

// Why not <cmath>: glibc, CUDA's libdevice and ROCm's ocml return different bits for the same
// input (glibc even picks a different code path per CPU), so a model trained with std::exp is not
// bitwise reproducible across machines. Every function here is a fixed sequence of correctly
// rounded IEEE-754 operations (+ - * /, conversions, exact power-of-two scaling through the
// exponent bits), so it gives the same bits wherever round-to-nearest, no FTZ/DAZ and no FMA
// contraction hold (checked by reprosgd::check_fp_environment()).
//
// The float functions evaluate in double and round once to float at the end. The double
// evaluation is accurate to about 1e-16, far more than float needs: the exhaustive test found every
// float result of exp, log, tanh, sigmoid, sinpi and cospi correctly rounded (docs/math.md has the
// figures and the algorithms).

REPROSGD_BEGIN_NAMESPACE
namespace math {
namespace detail {

/// Bit copy between equally sized trivially copyable types. Kokkos 3.4 has no Kokkos::bit_cast and
/// std::bit_cast is not usable in nvcc device code; memcpy is, and compiles to a register move. In
/// HIP device code std::memcpy is glibc's host function (clang refuses the call), so the device side
/// of a HIP build uses the compiler's builtin, the same copy.
template <class To, class From>
KOKKOS_INLINE_FUNCTION To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From), "reprosgd::math::detail::bit_cast: sizes differ");
  static_assert(std::is_trivially_copyable_v<To> && std::is_trivially_copyable_v<From>,
                "reprosgd::math::detail::bit_cast: types must be trivially copyable");
  To to;
#if defined(__HIP_DEVICE_COMPILE__)
  __builtin_memcpy(&to, &from, sizeof(To));
#else
  std::memcpy(&to, &from, sizeof(To));
#endif
  return to;
}

KOKKOS_INLINE_FUNCTION std::uint32_t bits(float x) noexcept { return bit_cast<std::uint32_t>(x); }
KOKKOS_INLINE_FUNCTION std::uint64_t bits(double x) noexcept { return bit_cast<std::uint64_t>(x); }
KOKKOS_INLINE_FUNCTION float float_from_bits(std::uint32_t b) noexcept { return bit_cast<float>(b); }
KOKKOS_INLINE_FUNCTION double double_from_bits(std::uint64_t b) noexcept { return bit_cast<double>(b); }

inline constexpr std::uint32_t float_sign_mask = 0x80000000u;
inline constexpr std::uint32_t float_inf_bits = 0x7f800000u;
inline constexpr std::uint32_t float_quiet_nan_bits = 0x7fc00000u;

KOKKOS_INLINE_FUNCTION float float_inf() noexcept { return float_from_bits(float_inf_bits); }
KOKKOS_INLINE_FUNCTION double double_inf() noexcept { return double_from_bits(0x7ff0000000000000ull); }
/// The canonical quiet NaN, returned for domain errors (log of a negative number, sinpi(inf)).
KOKKOS_INLINE_FUNCTION float float_nan() noexcept { return float_from_bits(float_quiet_nan_bits); }
KOKKOS_INLINE_FUNCTION double double_nan() noexcept { return double_from_bits(0x7ff8000000000000ull); }

KOKKOS_INLINE_FUNCTION bool is_nan(float x) noexcept { return (bits(x) & ~float_sign_mask) > float_inf_bits; }
KOKKOS_INLINE_FUNCTION bool is_nan(double x) noexcept {
  return (bits(x) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}

/// A NaN input comes back with its sign and payload and the quiet bit set. Done on the bits, not as
/// x + x: CUDA replaces NaN operands by its canonical NaN while x86 keeps the payload, so arithmetic
/// on a NaN would give different bits on the device and the host.
KOKKOS_INLINE_FUNCTION float quiet(float x) noexcept { return float_from_bits(bits(x) | 0x00400000u); }
KOKKOS_INLINE_FUNCTION double quiet(double x) noexcept {
  return double_from_bits(bits(x) | 0x0008000000000000ull);
}

/// |x| with the sign bit cleared (exact; also for NaN and -0).
KOKKOS_INLINE_FUNCTION float abs_bits(float x) noexcept { return float_from_bits(bits(x) & ~float_sign_mask); }
KOKKOS_INLINE_FUNCTION double abs_bits(double x) noexcept {
  return double_from_bits(bits(x) & 0x7fffffffffffffffull);
}
/// x with its sign flipped when `sgn` is negative (sign bits XORed): x * sign(sgn), exact, also for ±0.
KOKKOS_INLINE_FUNCTION float mul_sign(float x, float sgn) noexcept {
  return float_from_bits(bits(x) ^ (bits(sgn) & float_sign_mask));
}
KOKKOS_INLINE_FUNCTION double mul_sign(double x, double sgn) noexcept {
  return double_from_bits(bits(x) ^ (bits(sgn) & 0x8000000000000000ull));
}
/// magnitude of `mag` with the sign of `sgn`.
KOKKOS_INLINE_FUNCTION float copy_sign(float mag, float sgn) noexcept {
  return float_from_bits((bits(mag) & ~float_sign_mask) | (bits(sgn) & float_sign_mask));
}
KOKKOS_INLINE_FUNCTION double copy_sign(double mag, double sgn) noexcept {
  return double_from_bits((bits(mag) & 0x7fffffffffffffffull) | (bits(sgn) & 0x8000000000000000ull));
}

/// 2^k as a double for -1022 <= k <= 1023, built from the exponent bits (exact).
KOKKOS_INLINE_FUNCTION double pow2(int k) noexcept {
  return double_from_bits(static_cast<std::uint64_t>(k + 1023) << 52);
}

/// Round a double to the nearest integer, ties to even, for |t| < 2^51. Adding and subtracting
/// 1.5 * 2^52 forces the rounding at the units place; exact because the sum lies in [2^52, 2^53).
KOKKOS_INLINE_FUNCTION double round_to_int(double t) noexcept {
  constexpr double shifter = 0x1.8p52;
  return (t + shifter) - shifter;
}

/// e^y in double for -745 < y < 709.7 (the caller clamps), relative error about 1e-16.
///
/// Cody-Waite reduction y = k*ln2 + r, |r| <= ln2/2, with ln2 split so that k*ln2_hi is exact
/// (ln2_hi has 32 significant bits, |k| < 2^11) and y - k*ln2_hi is exact for float y. Then the
/// Taylor polynomial of degree 13 (truncation error < 5e-18 on |r| <= 0.347) by Horner's rule,
/// and the exact scaling by 2^k split in two factors so that k may reach the subnormal range.
KOKKOS_INLINE_FUNCTION double exp_core(double y) noexcept {
  constexpr double log2e = 0x1.71547652b82fep+0;
  constexpr double ln2_hi = 0x1.62e42fee00000p-1;
  constexpr double ln2_lo = 0x1.a39ef35793c76p-33;
  const double kd = round_to_int(y * log2e);
  const double r = (y - kd * ln2_hi) - kd * ln2_lo;
  double p = 0x1.6124613a86d09p-33;  // 1/13!
  p = 0x1.1eed8eff8d898p-29 + r * p;  // 1/12!
  p = 0x1.ae64567f544e4p-26 + r * p;  // 1/11!
  p = 0x1.27e4fb7789f5cp-22 + r * p;  // 1/10!
  p = 0x1.71de3a556c734p-19 + r * p;  // 1/9!
  p = 0x1.a01a01a01a01ap-16 + r * p;  // 1/8!
  p = 0x1.a01a01a01a01ap-13 + r * p;  // 1/7!
  p = 0x1.6c16c16c16c17p-10 + r * p;  // 1/6!
  p = 0x1.1111111111111p-7 + r * p;   // 1/5!
  p = 0x1.5555555555555p-5 + r * p;   // 1/4!
  p = 0x1.5555555555555p-3 + r * p;   // 1/3!
  p = 0.5 + r * p;
  p = 1.0 + r * p;
  p = 1.0 + r * p;
  const int k = static_cast<int>(kd);
  // Two exact scalings: 2^k alone is not a normal double for k < -1022.
  const int k1 = k / 2;
  return (p * pow2(k1)) * pow2(k - k1);
}

/// e^y - 1 in double for 0 <= y <= 50, with small relative error also for tiny y (no
/// cancellation): Taylor series of degree 14 below ln2/2, exp_core(y) - 1 above (there the
/// subtraction loses less than two bits of 53).
KOKKOS_INLINE_FUNCTION double expm1_core(double y) noexcept {
  if (y >= 0x1.62e42fefa39efp-2) return exp_core(y) - 1.0;
  double p = 0x1.93974a8c07c9dp-37;  // 1/14!
  p = 0x1.6124613a86d09p-33 + y * p;
  p = 0x1.1eed8eff8d898p-29 + y * p;
  p = 0x1.ae64567f544e4p-26 + y * p;
  p = 0x1.27e4fb7789f5cp-22 + y * p;
  p = 0x1.71de3a556c734p-19 + y * p;
  p = 0x1.a01a01a01a01ap-16 + y * p;
  p = 0x1.a01a01a01a01ap-13 + y * p;
  p = 0x1.6c16c16c16c17p-10 + y * p;
  p = 0x1.1111111111111p-7 + y * p;
  p = 0x1.5555555555555p-5 + y * p;
  p = 0x1.5555555555555p-3 + y * p;
  p = 0.5 + y * p;
  p = 1.0 + y * p;
  return y * p;
}

/// ln(y) in double for positive, finite, normal y; relative error about 2e-16 (absolute near y=1).
///
/// y = 2^e * m with m in [sqrt(1/2), sqrt(2)) taken from the bits; ln(m) = 2 atanh(s) with
/// s = (m-1)/(m+1), |s| < 0.1716, summed as 2s + 2s*z*(1/3 + z/5 + ... + z^9/21), z = s^2
/// (truncation < 1e-17). m - 1 is exact (Sterbenz); e*ln2 is added in two parts.
KOKKOS_INLINE_FUNCTION double log_core(double y) noexcept {
  const std::uint64_t b = bits(y);
  int e = static_cast<int>(b >> 52) - 1023;
  double m = double_from_bits((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  if (m > 0x1.6a09e667f3bcdp+0) {  // sqrt(2)
    m = 0.5 * m;
    e = e + 1;
  }
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  double p = 0x1.8618618618618p-5;  // 1/21
  p = 0x1.af286bca1af28p-5 + z * p;  // 1/19
  p = 0x1.e1e1e1e1e1e1ep-5 + z * p;  // 1/17
  p = 0x1.1111111111111p-4 + z * p;  // 1/15
  p = 0x1.3b13b13b13b14p-4 + z * p;  // 1/13
  p = 0x1.745d1745d1746p-4 + z * p;  // 1/11
  p = 0x1.c71c71c71c71cp-4 + z * p;  // 1/9
  p = 0x1.2492492492492p-3 + z * p;  // 1/7
  p = 0x1.999999999999ap-3 + z * p;  // 1/5
  p = 0x1.5555555555555p-2 + z * p;  // 1/3
  const double two_s = 2.0 * s;
  const double log_m = two_s + two_s * (z * p);
  const double ed = static_cast<double>(e);
  constexpr double ln2_hi = 0x1.62e42fee00000p-1;  // e * ln2_hi is exact for |e| < 2^21
  constexpr double ln2_lo = 0x1.a39ef35793c76p-33;
  return ed * ln2_hi + (ed * ln2_lo + log_m);
}

/// sin(pi r) for |r| <= 1/4: r * (pi + r^2 P(r^2)), Taylor coefficients (-1)^n pi^(2n+1)/(2n+1)!
/// up to n = 8 (truncation < 1e-18 relative).
KOKKOS_INLINE_FUNCTION double sinpi_tail(double z) noexcept {
  // Returns (sin(pi r) - pi r) / r^3 as a polynomial in z = r^2, so that callers can add the
  // leading term pi * r with more care.
  double p = 0x1.aaec32af93359p-21;
  p = -0x1.6fadb9f155744p-16 + z * p;
  p = 0x1.e8f434d018d63p-12 + z * p;
  p = -0x1.e3074fde8871fp-8 + z * p;
  p = 0x1.50783487ee782p-4 + z * p;
  p = -0x1.32d2cce62bd86p-1 + z * p;
  p = 0x1.466bc6775aae2p+1 + z * p;
  p = -0x1.4abbce625be53p+2 + z * p;
  return p;
}

/// cos(pi r) - 1 for |r| <= 1/4 as z * Q(z), z = r^2, Taylor coefficients (-1)^n pi^(2n)/(2n)! up
/// to n = 9 (truncation < 1e-19).
KOKKOS_INLINE_FUNCTION double cospi_minus_one(double z) noexcept {
  double p = -0x1.2a0c591af8314p-23;
  p = 0x1.20c62c2f2d7f5p-18 + z * p;
  p = -0x1.b6e24f44b128fp-14 + z * p;
  p = 0x1.f9d38a3763cc3p-10 + z * p;
  p = -0x1.a6d1f2a204a8cp-6 + z * p;
  p = 0x1.e1f506891babbp-3 + z * p;
  p = -0x1.55d3c7e3cbffap+0 + z * p;
  p = 0x1.03c1f081b5ac4p+2 + z * p;
  p = -0x1.3bd3cc9be45dep+2 + z * p;
  return z * p;
}

/// sin(pi r) for |r| <= 1/4 with the leading product pi*r formed exactly (Dekker's product with
/// Veltkamp splitting, no FMA needed) so that the double result is within about one ulp.
KOKKOS_INLINE_FUNCTION double sinpi_kernel(double r) noexcept {
  constexpr double pi_hi = 0x1.921fb54442d18p+1;
  constexpr double pi_lo = 0x1.1a62633145c07p-53;
  constexpr double pi_hi_h = 0x1.921fb58000000p+1;  // pi_hi split in two 26-bit halves
  constexpr double pi_hi_l = -0x1.dde9740000000p-26;
  constexpr double splitter = 0x1.0000002p+27;  // 2^27 + 1
  const double c = splitter * r;
  const double r_h = c - (c - r);
  const double r_l = r - r_h;
  const double p = r * pi_hi;
  const double p_err = (((r_h * pi_hi_h - p) + r_h * pi_hi_l) + r_l * pi_hi_h) + r_l * pi_hi_l;
  const double z = r * r;
  const double tail = (r * z) * sinpi_tail(z);
  return p + ((p_err + r * pi_lo) + tail);
}

/// cos(pi r) for |r| <= 1/4.
KOKKOS_INLINE_FUNCTION double cospi_kernel(double r) noexcept { return 1.0 + cospi_minus_one(r * r); }

/// Exact reduction of a >= 0 (a < 2^52) to a = k/2 + r with integer k and |r| <= 1/4. Every step is
/// exact: 2a is a doubling, the truncation to an integer is exact below 2^53, a - k/2 keeps the low
/// bits of a, and r - 1/2 is exact by Sterbenz's lemma.
KOKKOS_INLINE_FUNCTION void reduce_half(double a, std::int64_t& k, double& r) noexcept {
  k = static_cast<std::int64_t>(2.0 * a);
  r = a - 0.5 * static_cast<double>(k);
  if (r > 0.25) {
    k = k + 1;
    r = r - 0.5;
  }
}

/// sin(pi a) (want_cos = false) or cos(pi a) (want_cos = true) for 0 <= a < 2^52, in double. Zeros
/// are returned as +0; the callers apply the sign of sinpi's argument.
KOKKOS_INLINE_FUNCTION double sincospi_nonneg(double a, bool want_cos) noexcept {
  std::int64_t k;
  double r;
  reduce_half(a, k, r);
  // cos(pi x) = sin(pi (x + 1/2)): one quadrant further.
  const int q = static_cast<int>((k + (want_cos ? 1 : 0)) & 3);
  if (r == 0.0 && (q & 1) == 0) return 0.0;  // exact zero of the sine: +0 (C23 sinpi/cospi)
  switch (q) {
    case 0: return sinpi_kernel(r);
    case 1: return cospi_kernel(r);
    case 2: return -sinpi_kernel(r);
    default: return -cospi_kernel(r);
  }
}

/// Parity of an integer-valued double a >= 2^52, for cos(pi a) = (-1)^a.
KOKKOS_INLINE_FUNCTION bool is_odd_integer_large(double a) noexcept {
  // a in [2^52, 2^53): the last significand bit is the units bit. a >= 2^53: always even.
  return a < 0x1p53 && (bits(a) & 1u) != 0;
}

/// exp(d) for d <= 0 (possibly -inf or below the double range), used by log_sum_exp.
KOKKOS_INLINE_FUNCTION double exp_nonpositive(double d) noexcept {
  if (d < -745.0) return 0.0;  // e^-745 < 2^-1075: rounds to +0 (this also catches -inf)
  return exp_core(d);
}

}  // namespace detail

/**
 * e^x, deterministic (same bits on every compiler, flag set and device).
 *
 * Special values: exp(NaN) = NaN (quieted, payload kept), exp(+inf) = +inf, exp(-inf) = +0,
 * exp(±0) = 1, overflow to +inf for x > 88.7228, subnormal results for -103.97 < x < -87.34 and +0
 * below. Correctly rounded for every float x (exhaustive test).
 * @device @deterministic
 *
 * **Example**: `float y = reprosgd::math::exp(1.0f); // 0x1.5bf0a8p+1`
 */
KOKKOS_INLINE_FUNCTION float exp(float x) noexcept {
  if (detail::is_nan(x)) return detail::quiet(x);
  if (x > 89.0f) return detail::float_inf();  // e^89 > FLT_MAX; also x = +inf
  if (x < -104.0f) return 0.0f;                // e^-104 < 2^-150 rounds to +0; also x = -inf
  // One rounding from double to float; subnormal results are rounded correctly by the conversion.
  return static_cast<float>(detail::exp_core(static_cast<double>(x)));
}

/**
 * Natural logarithm, deterministic.
 *
 * Special values: log(NaN) = NaN, log(x < 0) = NaN, log(-inf) = NaN, log(±0) = -inf,
 * log(+inf) = +inf, log(1) = +0. Subnormal inputs are exact in double, so need no special path.
 * @device @deterministic
 */
KOKKOS_INLINE_FUNCTION float log(float x) noexcept {
  if (detail::is_nan(x)) return detail::quiet(x);
  if (x == 0.0f) return -detail::float_inf();
  if (x < 0.0f) return detail::float_nan();
  if (x == detail::float_inf()) return x;
  return static_cast<float>(detail::log_core(static_cast<double>(x)));
}

/**
 * Hyperbolic tangent, deterministic: tanh(|x|) = expm1(2|x|) / (expm1(2|x|) + 2) with the sign of x.
 *
 * Special values: tanh(NaN) = NaN, tanh(±inf) = ±1, tanh(±0) = ±0, tanh(-x) = -tanh(x) exactly.
 * @device @deterministic
 */
KOKKOS_INLINE_FUNCTION float tanh(float x) noexcept {
  if (detail::is_nan(x)) return detail::quiet(x);
  const float a = detail::abs_bits(x);
  // 1 - tanh(a) < 2^-25 (half an ulp below 1) for a > 9.011: the result rounds to 1.
  if (a > 10.0f) return detail::copy_sign(1.0f, x);
  const double e = detail::expm1_core(2.0 * static_cast<double>(a));
  const float t = static_cast<float>(e / (e + 2.0));
  return detail::copy_sign(t, x);
}

/**
 * The logistic function 1 / (1 + e^-x), deterministic and stable for all x (no overflow, no
 * cancellation): e^-x is only formed for x >= 0 and e^x / (1 + e^x) is used for x < 0.
 *
 * Special values: sigmoid(NaN) = NaN, sigmoid(+inf) = 1, sigmoid(-inf) = +0, sigmoid(±0) = 0.5,
 * subnormal results for -103.97 < x < -87.34.
 * @device @deterministic
 */
KOKKOS_INLINE_FUNCTION float sigmoid(float x) noexcept {
  if (detail::is_nan(x)) return detail::quiet(x);
  if (x > 20.0f) return 1.0f;    // 1 - sigmoid(x) < e^-20 < 2^-25: rounds to 1; also +inf
  if (x < -110.0f) return 0.0f;  // sigmoid(x) < e^x < 2^-150: rounds to +0; also -inf
  const double xd = static_cast<double>(x);
  if (x >= 0.0f) return static_cast<float>(1.0 / (1.0 + detail::exp_core(-xd)));
  const double e = detail::exp_core(xd);
  return static_cast<float>(e / (1.0 + e));
}

/**
 * sin(pi x) with an exact argument reduction (no error from a rounded pi*x for large x).
 *
 * Special values (C23): sinpi(NaN) = NaN, sinpi(±inf) = NaN, sinpi(±0) = ±0, sinpi(n) = +0 for
 * integers n > 0 and -0 for n < 0; sinpi(-x) = -sinpi(x) exactly. Every float of magnitude >= 2^23
 * is an integer.
 * @device @deterministic
 */
KOKKOS_INLINE_FUNCTION float sinpi(float x) noexcept {
  if (detail::is_nan(x)) return detail::quiet(x);
  const float a = detail::abs_bits(x);
  if (a == detail::float_inf()) return detail::float_nan();
  if (a >= 0x1p23f) return detail::copy_sign(0.0f, x);
  // sinpi is odd: the value at |x| (either sign) times the sign of x.
  const float s = static_cast<float>(detail::sincospi_nonneg(static_cast<double>(a), false));
  return detail::mul_sign(s, x);
}

/**
 * cos(pi x) with an exact argument reduction.
 *
 * Special values (C23): cospi(NaN) = NaN, cospi(±inf) = NaN, cospi(±0) = 1, cospi(n + 1/2) = +0,
 * cospi(n) = (-1)^n; cospi(-x) = cospi(x) exactly.
 * @device @deterministic
 */
KOKKOS_INLINE_FUNCTION float cospi(float x) noexcept {
  if (detail::is_nan(x)) return detail::quiet(x);
  const float a = detail::abs_bits(x);
  if (a == detail::float_inf()) return detail::float_nan();
  if (a >= 0x1p23f) {
    // An integer: its parity is the last significand bit when a < 2^24, even above.
    const bool odd = a < 0x1p24f && (detail::bits(a) & 1u) != 0;
    return odd ? -1.0f : 1.0f;
  }
  return static_cast<float>(detail::sincospi_nonneg(static_cast<double>(a), true));
}

/**
 * cos(pi x) in double (for cosine learning-rate schedules on the host; also device-callable).
 *
 * Exact reduction to |r| <= 1/4, then a polynomial in r with the leading term pi*r of the sine
 * branch formed exactly. Error within about one ulp (measured in the unit tests on a dense grid).
 * Special values as for the float overload.
 * @device @deterministic
 */
KOKKOS_INLINE_FUNCTION double cospi(double x) noexcept {
  if (detail::is_nan(x)) return detail::quiet(x);
  const double a = detail::abs_bits(x);
  if (a == detail::double_inf()) return detail::double_nan();
  if (a >= 0x1p52) return detail::is_odd_integer_large(a) ? -1.0 : 1.0;
  return detail::sincospi_nonneg(a, true);
}

/**
 * sin(pi x) in double, the companion of cospi(double); same conventions as sinpi(float).
 * @device @deterministic
 */
KOKKOS_INLINE_FUNCTION double sinpi(double x) noexcept {
  if (detail::is_nan(x)) return detail::quiet(x);
  const double a = detail::abs_bits(x);
  if (a == detail::double_inf()) return detail::double_nan();
  if (a >= 0x1p52) return detail::copy_sign(0.0, x);
  return detail::mul_sign(detail::sincospi_nonneg(a, false), x);
}

/**
 * log(sum_i exp(x[i * stride])) for i = 0 .. n-1, computed as m + log(sum exp(x_i - m)) with
 * m = max x_i. The sum runs in double in ascending index order; the result is rounded once to float.
 *
 * Special cases: n <= 0 gives -inf (empty sum); the first NaN in index order is returned (quieted);
 * all entries -inf gives -inf; any +inf entry (and no NaN) gives +inf. -inf entries contribute 0.
 * @param x first element; element i is x[i * stride]
 * @param n number of elements
 * @param stride distance between elements, in floats
 * @device @deterministic
 */
KOKKOS_INLINE_FUNCTION float log_sum_exp(const float* x, int n, int stride = 1) noexcept {
  if (n <= 0) return -detail::float_inf();
  const std::ptrdiff_t st = stride;
  float m = x[0];
  for (int i = 0; i < n; ++i) {
    const float v = x[static_cast<std::ptrdiff_t>(i) * st];
    if (detail::is_nan(v)) return detail::quiet(v);
    if (v > m) m = v;
  }
  if (m == -detail::float_inf() || m == detail::float_inf()) return m;
  const double md = static_cast<double>(m);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    // The difference of two floats is exact in double unless the term is negligible anyway.
    sum = sum + detail::exp_nonpositive(static_cast<double>(x[static_cast<std::ptrdiff_t>(i) * st]) - md);
  }
  // sum >= 1 (the maximum contributes exactly e^0 = 1), so log_core gets a normal argument.
  return static_cast<float>(md + detail::log_core(sum));
}

}  // namespace math
REPROSGD_END_NAMESPACE
