// SPDX-License-Identifier: BSD-3-Clause
/// @file Conversions of random 32-bit words to uniform and normal floats and to dropout masks, bit-exact everywhere.
///
/// Every conversion is defined by integer operations and correctly rounded IEEE float operations
/// (or reprosgd::math functions, themselves built from those), so its result is the same bits on
/// every compiler, flag set and device (contract levels L2, L5). No <cmath> transcendental is used.
#pragma once

#include <reprosgd/error.hpp>
#include <reprosgd/math/elementary.hpp>
#include <reprosgd/rng/word_array.hpp>

#include <cmath>
#include <cstdint>
#include <string>

REPROSGD_BEGIN_NAMESPACE

namespace detail {
/// The correctly rounded square root (IEEE 754 requires it; the device intrinsic says so explicitly,
/// so nvcc's -prec-sqrt setting cannot change it).
KOKKOS_INLINE_FUNCTION float sqrt_rn(float x) noexcept {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __fsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}
inline constexpr float two_pow_minus_24 = 0x1p-24f;
}  // namespace detail

/**
 * A uniform float in [0, 1): the top 24 bits of `u` times 2^-24. Exact (no rounding happens), so
 * the 2^24 possible values are equally likely and equally spaced; 0 is possible, 1 is not.
 * `uniform_float(0) == 0`, `uniform_float(0xFFFFFFFF) == 1 - 2^-24`. @device @deterministic
 */
KOKKOS_INLINE_FUNCTION constexpr float uniform_float(std::uint32_t u) noexcept {
  return static_cast<float>(u >> 8) * detail::two_pow_minus_24;
}

/**
 * A uniform float in (0, 1]: (top 24 bits of `u` + 1) times 2^-24. Exact; never 0, so its
 * logarithm is finite. `uniform_float_open0(0) == 2^-24`, `uniform_float_open0(0xFFFFFFFF) == 1`.
 * @device @deterministic
 */
KOKKOS_INLINE_FUNCTION constexpr float uniform_float_open0(std::uint32_t u) noexcept {
  return static_cast<float>((u >> 8) + 1u) * detail::two_pow_minus_24;
}

/**
 * A standard normal float from two random words (Box–Muller, cosine branch):
 * `sqrt(-2 log(uniform_float_open0(u1))) * cospi(2 * uniform_float(u2))`, evaluated in exactly this
 * order with reprosgd::math::log and reprosgd::math::cospi and a correctly rounded sqrt. The
 * magnitude is bounded by sqrt(-2 log 2^-24) ≈ 5.77 (the tails beyond are cut, probability 2^-24).
 * @device @deterministic
 */
KOKKOS_INLINE_FUNCTION float normal_float(std::uint32_t u1, std::uint32_t u2) noexcept {
  const float radius_sq = -2.0f * reprosgd::math::log(uniform_float_open0(u1));
  const float radius = detail::sqrt_rn(radius_sq);
  return radius * reprosgd::math::cospi(2.0f * uniform_float(u2));
}

/**
 * The integer threshold for dropping with probability `p`: round(p * 2^32), to nearest, ties to
 * even, computed exactly. A word u is then kept when u >= threshold, which happens with
 * probability 1 - threshold / 2^32, i.e. 1 - p up to that rounding (at most 2^-33). p = 0 gives 0
 * (nothing is ever dropped). For a float p < 1 the threshold is at most 2^32 - 2^8, so it always
 * fits in 32 bits and no saturation is needed.
 *
 * @throws config_error "reprosgd::dropout_threshold: p = 1.000000 is not in [0, 1)" for p < 0,
 *         p >= 1 or NaN. Host only.
 */
inline std::uint32_t dropout_threshold(float p) {
  if (!(p >= 0.0f && p < 1.0f))  // also rejects NaN
    throw config_error("reprosgd::dropout_threshold: p = " + std::to_string(p) + " is not in [0, 1)");
  const double scaled = static_cast<double>(p) * 4294967296.0;  // exact: a power-of-two scaling
  const auto whole = static_cast<std::uint64_t>(scaled);        // truncation, exact (scaled < 2^32)
  const double frac = scaled - static_cast<double>(whole);      // exact (Sterbenz, or whole == 0)
  std::uint64_t t = whole;
  if (frac > 0.5 || (frac == 0.5 && (whole & 1u) != 0)) ++t;
  return static_cast<std::uint32_t>(t);  // <= 2^32 - 2^8 for p < 1 (see above)
}

/// Whether the element whose random word is `u` survives dropout: u >= threshold. An integer
/// compare, so the mask is the same bits on every device. @device @deterministic
KOKKOS_INLINE_FUNCTION constexpr bool dropout_keep(std::uint32_t u, std::uint32_t threshold) noexcept {
  return u >= threshold;
}

REPROSGD_END_NAMESPACE
