// SPDX-License-Identifier: BSD-3-Clause
/// @file PhiloxStream: the default RngStream, Philox4x32-10 keyed by the seed, counter from coordinates.
#pragma once

#include <reprosgd/error.hpp>
#include <reprosgd/rng/philox.hpp>
#include <reprosgd/rng/stream_coordinates.hpp>

#include <cstdint>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/**
 * The default RngStream: Philox4x32-10 whose 64-bit key is the seed and whose 128-bit counter is an
 * injective map of the logical coordinates (docs/rng.md has the table):
 *
 * | counter word | bits  | holds |
 * |---|---|---|
 * | ctr[0] | 0..29  | element block `element / 4` (element < 2^32) |
 * | ctr[0] | 30..31 | layer bits 0..1 |
 * | ctr[1] | 0..27  | layer bits 2..29 (layer < 2^30) |
 * | ctr[1] | 28..31 | purpose (enumerators 0..4; 14 and 15 are reserved for the library) |
 * | ctr[2] | 0..31  | sample (< 2^32) |
 * | ctr[3] | 0..31  | step (< 2^32) |
 *
 * i.e. `lo64 = purpose << 60 | layer << 30 | element / 4`, `ctr = {lo32(lo64), hi32(lo64), sample,
 * step}`. Within these limits distinct coordinates give distinct counters (a bijection onto the
 * counters whose purpose nibble is <= 4), hence independent words. Out-of-range fields are reduced
 * modulo their limit on the device (which cannot throw) and would alias; the host checks them with
 * check_coordinates(). One Philox call yields the four words of elements 4b..4b+3: uint32(c) picks
 * word `element % 4`.
 *
 * The key derivation of substream() uses purpose nibble 15 and KeyedPermutation uses 14, so neither
 * can reproduce a word of a stream with the same seed.
 *
 * **Example**:
 * @code
 * reprosgd::PhiloxStream rng(42);
 * std::uint32_t u = rng.uint32({reprosgd::Purpose::dropout, 2, step, sample, neuron});
 * float x = reprosgd::uniform_float(u);  // in [0, 1)
 * @endcode
 */
class PhiloxStream {
 public:
  static constexpr std::uint64_t layer_limit = std::uint64_t{1} << 30;    ///< layer < 2^30
  static constexpr std::uint64_t step_limit = std::uint64_t{1} << 32;     ///< step < 2^32
  static constexpr std::uint64_t sample_limit = std::uint64_t{1} << 32;   ///< sample < 2^32
  static constexpr std::uint64_t element_limit = std::uint64_t{1} << 32;  ///< element < 2^32
  /// Purpose nibbles the library keeps for itself (never reachable from a Purpose enumerator).
  static constexpr std::uint32_t reserved_purpose_permutation = 14;
  static constexpr std::uint32_t reserved_purpose_substream = 15;

 private:
  std::uint64_t seed_;

 public:
  /// A stream keyed by `seed`. @device
  KOKKOS_INLINE_FUNCTION constexpr explicit PhiloxStream(std::uint64_t seed) noexcept : seed_(seed) {}

  static constexpr const char* name() noexcept { return "philox4x32-10"; }

  /// The seed this stream was built from (the Philox key). @device
  KOKKOS_INLINE_FUNCTION constexpr std::uint64_t seed() const noexcept { return seed_; }

  /// The Philox key: the seed's low and high 32-bit halves. @device
  KOKKOS_INLINE_FUNCTION constexpr Philox4x32Key key() const noexcept {
    return {{static_cast<std::uint32_t>(seed_), static_cast<std::uint32_t>(seed_ >> 32)}};
  }

  /// True when every field of `c` is within the limits of the counter map. @device
  KOKKOS_INLINE_FUNCTION static constexpr bool in_range(const StreamCoordinates& c) noexcept {
    return static_cast<std::uint32_t>(c.purpose) <= static_cast<std::uint32_t>(Purpose::user) &&
           c.layer < layer_limit && c.step < step_limit && c.sample < sample_limit && c.element < element_limit;
  }

  /**
   * Throws config_error naming the first field of `c` that is outside the counter map's limits.
   * @throws config_error "reprosgd::PhiloxStream::check_coordinates: step = 4294967296 is not < 2^32"
   */
  static void check_coordinates(const StreamCoordinates& c) {
    const auto fail = [](const char* field, std::uint64_t value, const char* limit) {
      throw config_error(std::string("reprosgd::PhiloxStream::check_coordinates: ") + field + " = " +
                         std::to_string(value) + " is not " + limit);
    };
    if (static_cast<std::uint32_t>(c.purpose) > static_cast<std::uint32_t>(Purpose::user))
      fail("purpose", static_cast<std::uint32_t>(c.purpose), "a Purpose enumerator (<= 4)");
    if (c.layer >= layer_limit) fail("layer", c.layer, "< 2^30");
    if (c.step >= step_limit) fail("step", c.step, "< 2^32");
    if (c.sample >= sample_limit) fail("sample", c.sample, "< 2^32");
    if (c.element >= element_limit) fail("element", c.element, "< 2^32");
  }

  /// The Philox counter of the block that holds element `c.element` (the table above). @device
  KOKKOS_INLINE_FUNCTION static constexpr Philox4x32Counter counter(const StreamCoordinates& c) noexcept {
    const std::uint64_t lo64 = (std::uint64_t{static_cast<std::uint8_t>(c.purpose) & 0xFu} << 60) |
                               ((std::uint64_t{c.layer} & (layer_limit - 1)) << 30) |
                               ((c.element >> 2) & ((element_limit >> 2) - 1));
    return {{static_cast<std::uint32_t>(lo64), static_cast<std::uint32_t>(lo64 >> 32),
             static_cast<std::uint32_t>(c.sample), static_cast<std::uint32_t>(c.step)}};
  }

  /// The four words of the block holding element `c.element` (elements 4b..4b+3). @device @deterministic
  KOKKOS_INLINE_FUNCTION constexpr Uint32x4 generate(const StreamCoordinates& c) const noexcept {
    return philox4x32<10>(counter(c), key());
  }

  /// The word of element `c.element`: generate(c)[c.element % 4]. @device @deterministic
  KOKKOS_INLINE_FUNCTION constexpr std::uint32_t uint32(const StreamCoordinates& c) const noexcept {
    return generate(c)[static_cast<int>(c.element & 3u)];
  }

  /**
   * A stream keyed by a seed derived from (seed(), id). For a given parent the map id -> new seed is
   * a bijection of 64-bit values (two chained Philox2x32-10 permutations under 32-bit keys drawn
   * from the parent's reserved purpose-15 block), so no two ids of one parent share a key; streams
   * of different parents collide with probability 2^-64. @device @deterministic
   */
  KOKKOS_INLINE_FUNCTION constexpr PhiloxStream substream(std::uint64_t id) const noexcept {
    const Uint32x4 k = philox4x32<10>({{0u, reserved_purpose_substream << 28, 0u, 0u}}, key());
    Philox2x32Counter x{{static_cast<std::uint32_t>(id), static_cast<std::uint32_t>(id >> 32)}};
    x = philox2x32<10>(x, {{k[0]}});
    x = philox2x32<10>(x, {{k[1]}});
    return PhiloxStream((std::uint64_t{x[1]} << 32) | x[0]);
  }
};

REPROSGD_END_NAMESPACE
