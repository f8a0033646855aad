// SPDX-License-Identifier: BSD-3-Clause
/// @file Test data of the reduction tests: a seeded mixing hash and gradient-like rows whose
/// magnitudes span chosen binades (so the order of a sum is visible in its bits).
#pragma once

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>

namespace reprosgd_test {

using Rows = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using Sum = Kokkos::View<float*, Kokkos::HostSpace>;

/// splitmix64's finaliser: a well-mixed 64-bit word of x.
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/// A value in [-1, 1) times 2^e, e drawn from [lo, hi].
inline float draw(std::uint64_t key, int lo, int hi) {
  const std::uint64_t h = mix(key);
  const float u = static_cast<float>(h >> 40) * 0x1p-24f * 2.0f - 1.0f;
  const int e = lo + static_cast<int>((h >> 8) % static_cast<std::uint64_t>(hi - lo + 1));
  return std::ldexp(u, e);
}
/// m rows of n values drawn with draw(., lo, hi), keyed by `seed`.
inline Rows make_rows(long m, long n, int lo, int hi, std::uint64_t seed) {
  Rows rows("rows", m, n);
  for (long u = 0; u < m; ++u)
    for (long i = 0; i < n; ++i) rows(u, i) = draw(seed * 1000003u + static_cast<std::uint64_t>(u * n + i), lo, hi);
  return rows;
}

}  // namespace reprosgd_test
