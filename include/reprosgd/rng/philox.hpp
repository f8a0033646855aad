// SPDX-License-Identifier: BSD-3-Clause
/// @file The Philox counter-based generators (Philox2x32, 4x32, 2x64, 4x64 with R rounds).
///
/// Implemented from the definition in the paper:
/// @code
/// @inproceedings{salmon2011random123,
///   title     = {Parallel random numbers: as easy as 1, 2, 3},
///   author    = {Salmon, John K. and Moraes, Mark A. and Dror, Ron O. and Shaw, David E.},
///   booktitle = {Proceedings of the International Conference for High Performance Computing,
///                Networking, Storage and Analysis (SC'11)},
///   year      = {2011}, doi = {10.1145/2063384.2063405}
/// }
/// @endcode
/// Each generator is a pure function of (counter, key): no state, no side effects, the same bits on
/// every compiler and device (only integer multiplies, xors and adds, all exact). The published
/// Random123 known-answer vectors are checked on every backend by tests/unit/rng/philox_kat_test.cpp.
#pragma once

#include <reprosgd/rng/word_array.hpp>

#include <cstdint>

REPROSGD_BEGIN_NAMESPACE

using Philox2x32Counter = WordArray<std::uint32_t, 2>;  ///< counter of Philox2x32
using Philox2x32Key = WordArray<std::uint32_t, 1>;      ///< key of Philox2x32
using Philox4x32Counter = WordArray<std::uint32_t, 4>;  ///< counter (and output) of Philox4x32
using Philox4x32Key = WordArray<std::uint32_t, 2>;      ///< key of Philox4x32
using Philox2x64Counter = WordArray<std::uint64_t, 2>;  ///< counter of Philox2x64
using Philox2x64Key = WordArray<std::uint64_t, 1>;      ///< key of Philox2x64
using Philox4x64Counter = WordArray<std::uint64_t, 4>;  ///< counter of Philox4x64
using Philox4x64Key = WordArray<std::uint64_t, 2>;      ///< key of Philox4x64

namespace detail {

/// The high 32 bits of the 64-bit product a*b (exact on every platform).
KOKKOS_INLINE_FUNCTION constexpr std::uint32_t mulhi(std::uint32_t a, std::uint32_t b) noexcept {
  return static_cast<std::uint32_t>((static_cast<std::uint64_t>(a) * b) >> 32);
}

/// The high 64 bits of the 128-bit product a*b from 32-bit halves (Hacker's Delight 8-2), for
/// compilers without a 128-bit integer type. No intermediate sum can overflow.
KOKKOS_INLINE_FUNCTION constexpr std::uint64_t mulhi_portable(std::uint64_t a, std::uint64_t b) noexcept {
  const std::uint64_t a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32;
  const std::uint64_t b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
  const std::uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  const std::uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFu) + lo_hi;  // <= 2^64 - 1
  return (hi_lo >> 32) + (cross >> 32) + hi_hi;
}

/// The high 64 bits of the 128-bit product a*b.
KOKKOS_INLINE_FUNCTION constexpr std::uint64_t mulhi(std::uint64_t a, std::uint64_t b) noexcept {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  // The device has a native instruction for it; unsigned __int128 does not exist there. In a
  // constant expression (the known-answer tests' static_asserts) the intrinsic cannot be called:
  // the portable form gives the same value.
  if (__builtin_is_constant_evaluated()) return mulhi_portable(a, b);
  return __umul64hi(a, b);
#elif defined(__SIZEOF_INT128__)
  __extension__ typedef unsigned __int128 u128;  // __extension__: no -Wpedantic warning
  return static_cast<std::uint64_t>((static_cast<u128>(a) * b) >> 64);
#else
  return mulhi_portable(a, b);
#endif
}

// The multipliers and Weyl key increments of the paper (Random123's PHILOX_M*/PHILOX_W*).
// The increments are the golden ratio and sqrt(3) - 1 as fixed-point fractions.
template <class T>
struct PhiloxConstants;
template <>
struct PhiloxConstants<std::uint32_t> {
  static constexpr std::uint32_t m2_0 = 0xD256D193u;
  static constexpr std::uint32_t m4_0 = 0xD2511F53u;
  static constexpr std::uint32_t m4_1 = 0xCD9E8D57u;
  static constexpr std::uint32_t w_0 = 0x9E3779B9u;
  static constexpr std::uint32_t w_1 = 0xBB67AE85u;
};
template <>
struct PhiloxConstants<std::uint64_t> {
  static constexpr std::uint64_t m2_0 = 0xD2B74407B1CE6E93u;
  static constexpr std::uint64_t m4_0 = 0xD2E7470EE14C6C93u;
  static constexpr std::uint64_t m4_1 = 0xCA5A826395121157u;
  static constexpr std::uint64_t w_0 = 0x9E3779B97F4A7C15u;
  static constexpr std::uint64_t w_1 = 0xBB67AE8584CAA73Bu;
};

/// One Philox2xW round: (x0, x1) -> (hi(M*x0) ^ k ^ x1, lo(M*x0)).
template <class T>
KOKKOS_INLINE_FUNCTION constexpr WordArray<T, 2> philox2_round(WordArray<T, 2> x, T k) noexcept {
  constexpr T m = PhiloxConstants<T>::m2_0;
  const T hi = mulhi(x[0], m);
  const T lo = static_cast<T>(x[0] * m);  // the low half is the wrapped product
  return {{static_cast<T>(hi ^ k ^ x[1]), lo}};
}

/// One Philox4xW round: the S-box pair on words 0 and 2, then the permutation (2, 1, 0, 3).
template <class T>
KOKKOS_INLINE_FUNCTION constexpr WordArray<T, 4> philox4_round(WordArray<T, 4> x, WordArray<T, 2> k) noexcept {
  constexpr T m0 = PhiloxConstants<T>::m4_0;
  constexpr T m1 = PhiloxConstants<T>::m4_1;
  const T hi0 = mulhi(x[0], m0);
  const T lo0 = static_cast<T>(x[0] * m0);
  const T hi1 = mulhi(x[2], m1);
  const T lo1 = static_cast<T>(x[2] * m1);
  return {{static_cast<T>(hi1 ^ x[1] ^ k[0]), lo1, static_cast<T>(hi0 ^ x[3] ^ k[1]), lo0}};
}

template <unsigned Rounds, class T>
KOKKOS_INLINE_FUNCTION constexpr WordArray<T, 2> philox2(WordArray<T, 2> ctr, WordArray<T, 1> key) noexcept {
  T k = key[0];
  for (unsigned r = 0; r < Rounds; ++r) {
    if (r > 0) k = static_cast<T>(k + PhiloxConstants<T>::w_0);  // Weyl key schedule
    ctr = philox2_round(ctr, k);
  }
  return ctr;
}

template <unsigned Rounds, class T>
KOKKOS_INLINE_FUNCTION constexpr WordArray<T, 4> philox4(WordArray<T, 4> ctr, WordArray<T, 2> key) noexcept {
  for (unsigned r = 0; r < Rounds; ++r) {
    if (r > 0) {
      key[0] = static_cast<T>(key[0] + PhiloxConstants<T>::w_0);
      key[1] = static_cast<T>(key[1] + PhiloxConstants<T>::w_1);
    }
    ctr = philox4_round(ctr, key);
  }
  return ctr;
}

}  // namespace detail

/**
 * Philox2x32-R: maps a 64-bit counter under a 32-bit key to 64 random bits.
 *
 * @tparam Rounds number of rounds; 10 is the standard (Crush-resistant with margin), 7 the minimum
 *         the paper found Crush-resistant.
 * @returns the output block, a pure function of (ctr, key). @device @deterministic
 *
 * **Example**: `auto out = reprosgd::philox2x32<10>({{0, 0}}, {{0}});  // {0xff1dae59, 0x6cd10df2}`
 */
template <unsigned Rounds = 10>
KOKKOS_INLINE_FUNCTION constexpr Philox2x32Counter philox2x32(Philox2x32Counter ctr, Philox2x32Key key) noexcept {
  return detail::philox2<Rounds>(ctr, key);
}

/// Philox4x32-R: maps a 128-bit counter under a 64-bit key to 128 random bits. @device @deterministic
template <unsigned Rounds = 10>
KOKKOS_INLINE_FUNCTION constexpr Philox4x32Counter philox4x32(Philox4x32Counter ctr, Philox4x32Key key) noexcept {
  return detail::philox4<Rounds>(ctr, key);
}

/// Philox2x64-R: maps a 128-bit counter under a 64-bit key to 128 random bits. @device @deterministic
template <unsigned Rounds = 10>
KOKKOS_INLINE_FUNCTION constexpr Philox2x64Counter philox2x64(Philox2x64Counter ctr, Philox2x64Key key) noexcept {
  return detail::philox2<Rounds>(ctr, key);
}

/// Philox4x64-R: maps a 256-bit counter under a 128-bit key to 256 random bits. @device @deterministic
template <unsigned Rounds = 10>
KOKKOS_INLINE_FUNCTION constexpr Philox4x64Counter philox4x64(Philox4x64Counter ctr, Philox4x64Key key) noexcept {
  return detail::philox4<Rounds>(ctr, key);
}

REPROSGD_END_NAMESPACE
