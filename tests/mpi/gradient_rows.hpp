// SPDX-License-Identifier: BSD-3-Clause
/// @file Deterministic micro-batch gradient rows for reduction tests, and an accurate reference sum.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

namespace reprosgd_test {

/// SplitMix64's finaliser: a bijective 64-bit mixer.
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline float float_from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/**
 * Gradient element (row, col) of a synthetic global batch: a pure function of (seed, row, col).
 *
 * Each block of 256 columns (the Exact block size) gets a base binary exponent between 2^-100 and
 * 2^100 (about 1e-30 .. 1e30) and one block in seven sits at the bottom of the float range, so
 * that its sums are subnormal. Within a block, values spread over 12 binades around the base,
 * with random signs and mantissas; 1 in 16 is +0 or -0, 1 in 16 a subnormal, and 1 in 32 an
 * outlier anywhere in 1e-30 .. 1e30, which the shared exponent has to absorb (`outliers` false
 * leaves those out: every block then spans 12 binades plus zeros and subnormals).
 */
inline float gradient_value(std::uint64_t seed, long row, long col, bool outliers = true) {
  const std::uint64_t h = mix64(seed ^ mix64(static_cast<std::uint64_t>(row) * 0x100000001B3ull ^
                                             (static_cast<std::uint64_t>(col) << 20)));
  const std::uint64_t b = mix64(seed * 31 + static_cast<std::uint64_t>(col / 256));
  const std::uint32_t sign = static_cast<std::uint32_t>(h >> 63) << 31;
  const std::uint32_t mantissa = static_cast<std::uint32_t>(h >> 8) & 0x7FFFFFu;
  const unsigned kind = static_cast<unsigned>(h & 63u);
  if (kind < 4) return float_from_bits(sign);                                   // +-0
  if (kind < 8) return float_from_bits(sign | (mantissa ? mantissa : 1u));      // subnormal
  std::uint32_t exponent;                                                       // biased
  if (kind < 10 && outliers) {
    exponent = 27 + static_cast<std::uint32_t>((h >> 40) % 201);               // outlier, 2^-100..2^100
  } else if ((col / 256) % 7 == 3) {
    exponent = 1 + static_cast<std::uint32_t>((h >> 40) % 3);                  // bottom of the normals
  } else {
    exponent = 27 + static_cast<std::uint32_t>(b % 189) + static_cast<std::uint32_t>((h >> 40) % 12);
  }
  return float_from_bits(sign | (exponent << 23) | mantissa);
}

/// All M rows of n gradient elements, as a host View (LayoutRight: one micro-batch per row).
inline Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> make_rows(std::uint64_t seed, long m, long n,
                                                                               bool outliers = true) {
  Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> rows("rows", m, n);
  for (long u = 0; u < m; ++u)
    for (long i = 0; i < n; ++i) rows(u, i) = gradient_value(seed, u, i, outliers);
  return rows;
}

/// Rows [begin, end) of `all`, copied into a View of their own (as a rank would hold them).
template <class Mem, class All>
Kokkos::View<float**, Kokkos::LayoutRight, Mem> copy_rows(const All& all, long begin, long end) {
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> mine("my rows", end - begin, all.extent(1));
  auto host = Kokkos::create_mirror_view(mine);
  for (long u = begin; u < end; ++u)
    for (long i = 0; i < static_cast<long>(all.extent(1)); ++i) host(u - begin, i) = all(u, i);
  Kokkos::deep_copy(mine, host);
  return mine;
}

/// A double-double number hi + lo (|lo| <= ulp(hi)/2).
struct DoubleDouble {
  double hi = 0.0;
  double lo = 0.0;
};

/// Error-free addition of a double to a double-double (Knuth's TwoSum; exact with
/// -ffp-contract=off, which the library target sets). About 106 significant bits: as a reference
/// for float sums this is exact for every practical purpose.
inline DoubleDouble add(DoubleDouble a, double b) {
  const double s = a.hi + b;
  const double bb = s - a.hi;
  const double err = (a.hi - (s - bb)) + (b - bb);
  const double lo = a.lo + err;
  const double hi = s + lo;
  return {hi, lo - (hi - s)};
}

/// Column sums of all rows in double-double.
template <class Rows>
std::vector<DoubleDouble> reference_sums(const Rows& rows) {
  std::vector<DoubleDouble> out(rows.extent(1));
  for (long u = 0; u < static_cast<long>(rows.extent(0)); ++u)
    for (long i = 0; i < static_cast<long>(rows.extent(1)); ++i)
      out[static_cast<std::size_t>(i)] = add(out[static_cast<std::size_t>(i)], static_cast<double>(rows(u, i)));
  return out;
}

/// FNV-1a over the bytes of a float View, a fingerprint printed so runs can be compared by eye.
template <class View>
std::uint64_t fingerprint(const View& v) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < v.extent(0); ++i) {
    const std::uint32_t u = bits_of(v(i));
    for (int b = 0; b < 4; ++b) {
      h ^= (u >> (8 * b)) & 0xFFu;
      h *= 1099511628211ull;
    }
  }
  return h;
}

}  // namespace reprosgd_test
