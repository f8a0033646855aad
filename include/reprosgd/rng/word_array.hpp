// SPDX-License-Identifier: BSD-3-Clause
/// @file WordArray: the fixed-size counter, key and output blocks of the counter-based generators.
#pragma once

#include <reprosgd/version.hpp>

// Only the function-space macros are needed here, not the whole of Kokkos. A translation unit that
// is compiled without Kokkos (e.g. the standalone CUDA check tests/cuda/l5_check.cu) defines
// KOKKOS_INLINE_FUNCTION itself before including this header.
#ifndef KOKKOS_INLINE_FUNCTION
#include <Kokkos_Macros.hpp>
#endif

#include <cstdint>

REPROSGD_BEGIN_NAMESPACE

/**
 * N words of type T: a counter, a key or an output block of a counter-based generator.
 *
 * An aggregate (brace-initialise it: `Uint32x4{{1, 2, 3, 4}}`), trivially copyable, usable on the
 * device. Kokkos::Array would do as well, but this keeps the generators free of Kokkos_Core.hpp so
 * that they compile in a plain CUDA/HIP translation unit.
 *
 * @tparam T the word type (std::uint32_t or std::uint64_t).
 * @tparam N the number of words.
 */
template <class T, int N>
struct WordArray {
  using value_type = T;
  T v[N];

  KOKKOS_INLINE_FUNCTION static constexpr int size() noexcept { return N; }
  KOKKOS_INLINE_FUNCTION constexpr T& operator[](int i) noexcept { return v[i]; }
  KOKKOS_INLINE_FUNCTION constexpr const T& operator[](int i) const noexcept { return v[i]; }

  friend KOKKOS_INLINE_FUNCTION constexpr bool operator==(const WordArray& a, const WordArray& b) noexcept {
    for (int i = 0; i < N; ++i)
      if (a.v[i] != b.v[i]) return false;
    return true;
  }
  friend KOKKOS_INLINE_FUNCTION constexpr bool operator!=(const WordArray& a, const WordArray& b) noexcept {
    return !(a == b);
  }
};

/// Four 32-bit words: the output block of Philox4x32 and of every RngStream.
using Uint32x4 = WordArray<std::uint32_t, 4>;

REPROSGD_END_NAMESPACE
