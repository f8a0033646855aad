// SPDX-License-Identifier: BSD-3-Clause
/// @file The RngStream concept: a stateless, counter-based random stream addressed by logical coordinates.
///
/// Semantic requirements a compiler cannot check (docs/concepts/rng_stream.md):
/// - **Pure.** `generate(c)` is a function of (the stream's key, c) only: no hidden state, no
///   dependence on the thread, team, rank, backend, compiler or call order. Two calls with equal
///   arguments give equal bits, on the host and on every device (contract levels L1, L2, L4, L5).
/// - **Counter-based.** The stream is keyed by a 64-bit seed; `R(seed)` builds it and `seed()`
///   returns that seed unchanged, so a checkpoint needs to store the seed and nothing else.
/// - **Blocks of four.** `generate(c)` returns the four 32-bit words of the block that contains
///   element `c.element`: elements 4b, 4b+1, 4b+2, 4b+3 share block b, so `generate(c)` does not
///   depend on `c.element % 4`. `uint32(c) == generate(c)[c.element % 4]`.
/// - **Injective within limits.** Distinct in-range coordinates address distinct blocks (a model
///   documents its limits; `PhiloxStream`'s are in docs/rng.md), and the words of distinct blocks
///   are statistically independent.
/// - **Substreams.** `substream(id)` returns a stream of the same type with a key derived from
///   (seed, id), statistically independent of the parent and of other ids.
/// - **Device-callable.** `generate`, `uint32`, `seed` and `substream` are KOKKOS_INLINE_FUNCTION,
///   never throw, and the type is trivially copyable so that it can be captured by value in a
///   kernel. `R::name()` is a host-side string recorded in checkpoints.
#pragma once

#include <reprosgd/rng/philox_stream.hpp>
#include <reprosgd/rng/stream_coordinates.hpp>
#include <reprosgd/rng/word_array.hpp>

#include <concepts>
#include <cstdint>
#include <type_traits>

REPROSGD_BEGIN_NAMESPACE

/**
 * A stateless, counter-based random stream, keyed by a 64-bit seed and addressed by
 * StreamCoordinates. See the file comment for the semantic requirements and
 * docs/concepts/rng_stream.md for a skeleton model.
 *
 * **Example**:
 * @code
 * template <reprosgd::RngStream Rng>
 * KOKKOS_INLINE_FUNCTION bool keep(const Rng& rng, std::uint64_t step, std::uint64_t sample,
 *                                  std::uint64_t neuron, std::uint32_t threshold) {
 *   return rng.uint32({reprosgd::Purpose::dropout, 1, step, sample, neuron}) >= threshold;
 * }
 * @endcode
 */
template <class R>
concept RngStream =
    std::is_trivially_copyable_v<R> && std::constructible_from<R, std::uint64_t> &&
    requires(const R r, const StreamCoordinates& c, std::uint64_t id) {
      { R::name() } -> std::convertible_to<const char*>;
      { r.seed() } -> std::same_as<std::uint64_t>;        // the key it was built from
      { r.generate(c) } -> std::same_as<Uint32x4>;         // pure function of (seed, c)
      { r.uint32(c) } -> std::same_as<std::uint32_t>;      // == generate(c)[c.element % 4]
      { r.substream(id) } -> std::same_as<R>;              // independent stream keyed by (seed, id)
    };

/// The default model, checked where the concept is (rng/ sits below concepts/).
static_assert(RngStream<PhiloxStream>);

REPROSGD_END_NAMESPACE
