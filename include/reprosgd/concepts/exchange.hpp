// SPDX-License-Identifier: BSD-3-Clause
/// @file The Exchange concept: the data movement of the Exact reduction, as operations of a group
/// of ranks (a parallelism policy, or a model group's), so that reduction/ holds only arithmetic.
///
/// Exact asks every group for rank(), size(), space() and the integer all-reduces of Parallelism
/// (allreduce_max for the block exponents, allreduce_sum for the int64 sums). A group that also
/// models Exchange, on host memory, gets the cheaper exchange (docs/distributed.md, "The Exact
/// reduction"): Exact cuts the blocks into one run per rank and calls
/// - exchange_runs(rows, k, row_stride, offsets, rows_of, received): every rank sends each other
///   rank q the elements [offsets[q], offsets[q+1]) of each of its k rows (row u at
///   rows + u * row_stride) and receives, from the ranks rank-1, rank-2, ... (mod P) in that order,
///   each of their rows_of[src] rows' elements of its own run, one after the other into `received`
///   (row stride: its run's length). Used when no rank holds more than 2 rows.
/// - ring_step(send, send_count, recv, recv_count): send int64s to rank+1 and receive from
///   rank-1 (mod P) at once: one step of the ring reduce-scatter (P-1 of them per reduction).
/// - allgather_runs(data, counts, displs, ok) -> bool: every rank's run of floats
///   (counts[q] at data + displs[q]) to every rank, in place; the AND of every rank's `ok` is
///   agreed during the gather (overlapped with it, no extra round trip) and returned.
/// All three are collective over the group, in the same order on every rank; counts are at most
/// 2^30 (Exact cuts longer vectors into segments). An error is reported with the group's own
/// semantics (comm_error; under ULFM a dead peer revokes and throws process_failure).
#pragma once

#include <reprosgd/config.hpp>

#include <concepts>
#include <cstdint>
#include <span>

REPROSGD_BEGIN_NAMESPACE

/// A group of ranks that can carry the Exact reduction's exchange (see the file comment).
template <class G>
concept Exchange = requires(G& g, const G& cg, const float* rows, float* floats, const std::int64_t* send,
                            std::int64_t* recv, long count, std::span<const long> offsets,
                            std::span<const std::int32_t> rows_of, bool ok) {
  { cg.rank() } -> std::convertible_to<int>;
  { cg.size() } -> std::convertible_to<int>;
  g.exchange_runs(rows, count, count, offsets, rows_of, floats);
  g.ring_step(send, count, recv, count);
  { g.allgather_runs(floats, offsets, offsets, ok) } -> std::same_as<bool>;
};

REPROSGD_END_NAMESPACE
