// SPDX-License-Identifier: BSD-3-Clause
/// @file A splitmix64 integer hash of logical coordinates, used by the synthetic data generator.
#pragma once

#include <reprosgd/config.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/// The splitmix64 finaliser (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014; constants from Vigna's reference code). Integer operations only, so the result is
/// the same on every compiler, machine and device.
KOKKOS_INLINE_FUNCTION constexpr std::uint64_t splitmix64(std::uint64_t z) noexcept {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// A hash of (seed, purpose, a, b): each coordinate is folded in through a full splitmix64 round,
/// so neighbouring coordinates give unrelated outputs. A pure function: no generator state exists.
KOKKOS_INLINE_FUNCTION constexpr std::uint64_t hash_coordinates(std::uint64_t seed, std::uint64_t purpose,
                                                                std::uint64_t a, std::uint64_t b) noexcept {
  return splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ purpose) ^ a) ^ b);
}

}  // namespace detail
REPROSGD_END_NAMESPACE
