// SPDX-License-Identifier: BSD-3-Clause
/// @file The BuddyExchange concept: the data movement of the in-memory buddy snapshots
/// (fault/buddy_store.hpp), as three operations of a group of ranks, so that BuddyStore holds
/// only the bookkeeping of who keeps whose shard and no MPI call.
///
/// - allgather_words(mine, all): every rank's `mine.size()` int64 words to every rank, in rank
///   order into `all` (mine.size() * size() of them).
/// - ring_shift_bytes(mine, from_left): send `mine` to rank+1 and receive rank-1's bytes (mod P)
///   into `from_left`, resized to what arrived.
/// - broadcast_bytes(bytes, root): root's bytes to every rank; the others' `bytes` are resized.
/// All three are collective over the group, in the same order on every rank, and report errors
/// with the group's own semantics (comm_error; under ULFM a dead peer throws process_failure).
/// Models: DataParallel and UlfmDataParallel (over MPI); the tests' in-process thread group.
#pragma once

#include <reprosgd/config.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// A group of ranks that can carry BuddyStore's exchanges (see the file comment).
template <class G>
concept BuddyExchange = requires(G& g, const G& cg, std::span<const std::int64_t> mine, std::span<std::int64_t> all,
                                 std::span<const std::byte> bytes, std::vector<std::byte>& received, int root) {
  { cg.rank() } -> std::convertible_to<int>;
  { cg.size() } -> std::convertible_to<int>;
  g.allgather_words(mine, all);
  g.ring_shift_bytes(bytes, received);
  g.broadcast_bytes(received, root);
};

REPROSGD_END_NAMESPACE
