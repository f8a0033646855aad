// SPDX-License-Identifier: BSD-3-Clause
/// @file KeyedPermutation: an epoch's sample order as a keyed bijection of [0, N), O(1) memory.
#pragma once

#include <reprosgd/error.hpp>
#include <reprosgd/rng/philox.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <bit>
#include <cstdint>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/**
 * The order of an epoch (docs/rng.md, "The epoch order"): position i of epoch e visits sample `perm(i)`, where perm is a
 * pseudo-random bijection of [0, N) keyed by (seed, epoch). Nothing is stored or communicated:
 * any rank computes any position in O(1) time and memory, so the order does not depend on the rank
 * count and a restarted run needs only (seed, epoch, position) to continue (contract levels L3, L4).
 *
 * Construction: a **balanced Feistel network** over 2h bits, where 2h is the smallest even number
 * >= 2 of bits that holds N - 1 (so the domain 2^(2h) is < 4N), with `rounds` = 6 rounds. Round r
 * maps the halves (hi, lo) to (lo, hi ^ F_r(lo)), with the round function
 * `F_r(x) = Philox4x32-10(ctr = {x, 14 << 28 | r, lo32(epoch), hi32(epoch)}, key = seed)[0] mod 2^h`,
 * i.e. keyed by (seed, epoch, round) in the purpose-14 part of the counter space that PhiloxStream
 * reserves, so it never reuses a word of a PhiloxStream with the same seed. A Feistel network is a
 * bijection of [0, 2^(2h)) whatever its round functions; **cycle walking** (apply it again while the
 * result is >= N) restricts it to a bijection of [0, N). Because the domain is < 4N, a position
 * needs fewer than 4 passes on average.
 *
 * @throws config_error (constructor) when n == 0 or n >= 2^40.
 *
 * **Example**:
 * @code
 * const reprosgd::KeyedPermutation order(seed, epoch, train.size());
 * Kokkos::parallel_for(m, KOKKOS_LAMBDA(int k) { batch(k) = order(first + k); });
 * @endcode
 */
class KeyedPermutation {
 public:
  static constexpr unsigned rounds = 6;                              ///< Feistel rounds
  static constexpr std::uint64_t size_limit = std::uint64_t{1} << 40;  ///< n < 2^40

 private:
  std::uint64_t seed_;
  std::uint64_t epoch_;
  std::uint64_t n_;
  std::uint32_t half_bits_;  // h: each Feistel half has h bits, 1 <= h <= 20
  std::uint32_t half_mask_;  // 2^h - 1

 public:
  /**
   * The order of epoch `epoch` of a data set of `n` samples under `seed`.
   * @throws config_error "reprosgd::KeyedPermutation: n = 0 ..." when n == 0 or n >= 2^40.
   */
  KeyedPermutation(std::uint64_t seed, std::uint64_t epoch, std::uint64_t n)
      : seed_(seed), epoch_(epoch), n_(n), half_bits_(0), half_mask_(0) {
    if (n == 0)
      throw config_error("reprosgd::KeyedPermutation: n = 0; a permutation needs 1 <= n < 2^40");
    if (n >= size_limit)
      throw config_error("reprosgd::KeyedPermutation: n = " + std::to_string(n) +
                         " is not < 2^40 = 1099511627776");
    const auto bits = static_cast<std::uint32_t>(std::bit_width(n - 1));  // bits of the largest index
    half_bits_ = bits <= 2 ? 1u : (bits + 1) / 2;
    half_mask_ = (std::uint32_t{1} << half_bits_) - 1u;
  }

  /// N, the number of positions (and of samples). @device
  KOKKOS_INLINE_FUNCTION constexpr std::uint64_t size() const noexcept { return n_; }
  KOKKOS_INLINE_FUNCTION constexpr std::uint64_t seed() const noexcept { return seed_; }
  KOKKOS_INLINE_FUNCTION constexpr std::uint64_t epoch() const noexcept { return epoch_; }
  /// The number of bits of each Feistel half (the domain is 2^(2h)). @device
  KOKKOS_INLINE_FUNCTION constexpr std::uint32_t half_bits() const noexcept { return half_bits_; }

  /**
   * The sample visited at position `i` (i < size()). A position outside [0, N) is returned
   * unchanged, so a bad index can never hang a kernel. @device @deterministic
   */
  KOKKOS_INLINE_FUNCTION constexpr std::uint64_t operator()(std::uint64_t i) const noexcept {
    if (i >= n_) return i;
    std::uint64_t x = i;
    do {
      x = forward(x);
    } while (x >= n_);  // cycle walking: terminates, as i's cycle in the domain returns to [0, N)
    return x;
  }

  /// Alias of operator(). @device
  KOKKOS_INLINE_FUNCTION constexpr std::uint64_t index(std::uint64_t i) const noexcept { return (*this)(i); }

  /// The position at which sample `j` is visited: inverse(perm(i)) == i. @device @deterministic
  KOKKOS_INLINE_FUNCTION constexpr std::uint64_t inverse(std::uint64_t j) const noexcept {
    if (j >= n_) return j;
    std::uint64_t x = j;
    do {
      x = backward(x);
    } while (x >= n_);
    return x;
  }

 private:
  KOKKOS_INLINE_FUNCTION constexpr std::uint32_t round_function(unsigned r, std::uint32_t x) const noexcept {
    const Philox4x32Counter ctr{{x, (PhiloxStream::reserved_purpose_permutation << 28) | r,
                                 static_cast<std::uint32_t>(epoch_), static_cast<std::uint32_t>(epoch_ >> 32)}};
    const Philox4x32Key key{{static_cast<std::uint32_t>(seed_), static_cast<std::uint32_t>(seed_ >> 32)}};
    return philox4x32<10>(ctr, key)[0] & half_mask_;
  }

  // One pass of the Feistel network over [0, 2^(2h)).
  KOKKOS_INLINE_FUNCTION constexpr std::uint64_t forward(std::uint64_t x) const noexcept {
    auto hi = static_cast<std::uint32_t>(x >> half_bits_);
    auto lo = static_cast<std::uint32_t>(x) & half_mask_;
    for (unsigned r = 0; r < rounds; ++r) {
      const std::uint32_t next_lo = hi ^ round_function(r, lo);
      hi = lo;
      lo = next_lo;
    }
    return (std::uint64_t{hi} << half_bits_) | lo;
  }

  // Its inverse: the rounds in reverse order, each undone.
  KOKKOS_INLINE_FUNCTION constexpr std::uint64_t backward(std::uint64_t x) const noexcept {
    auto hi = static_cast<std::uint32_t>(x >> half_bits_);
    auto lo = static_cast<std::uint32_t>(x) & half_mask_;
    for (unsigned r = rounds; r-- > 0;) {
      const std::uint32_t prev_hi = lo ^ round_function(r, hi);
      lo = hi;
      hi = prev_hi;
    }
    return (std::uint64_t{hi} << half_bits_) | lo;
  }
};

REPROSGD_END_NAMESPACE
