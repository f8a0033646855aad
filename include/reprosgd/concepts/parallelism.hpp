// SPDX-License-Identifier: BSD-3-Clause
/// @file The Parallelism concept: how a Trainer's work and its collectives are spread over processes;
/// its refinements ShardedParallelism (ranks that split the model) and RecoverableParallelism
/// (continues after ranks die), with the RecoveryReport a recovery returns.
///
/// Semantic requirements a compiler cannot check (docs/concepts/parallelism.md):
/// - Every collective (barrier, agree, allreduce_*, allgather_micro_batches) is called by every
///   rank of the group in the same order, and gives every rank the same result.
/// - Only integer reductions exist here: they are exact and independent of the order in which an
///   MPI implementation combines contributions, which is what the determinism contract (L3) needs.
///   Floating-point sums across ranks go through a Reduction policy built on these.
/// - micro_batch_range(M) is the only place where the rank count enters the numerics: it says
///   which contiguous micro-batches of a global batch this rank owns (docs/distributed.md, "The
///   micro-batch map").
/// - agree(flag) is a logical AND over all ranks; with ULFM it also survives failed ranks.
#pragma once

#include <reprosgd/concepts/model_group.hpp>
#include <reprosgd/config.hpp>

#include <Kokkos_Core.hpp>

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// The contiguous range [begin, end) of micro-batches that a rank owns.
struct MicroBatchRange {
  long begin = 0;
  long end = 0;
  [[nodiscard]] long size() const noexcept { return end - begin; }
  friend bool operator==(const MicroBatchRange&, const MicroBatchRange&) = default;
};

/// The owner map (docs/distributed.md, "The micro-batch map"): micro-batch u of M goes to rank floor(u*P/M). Rank r therefore owns
/// [ceil(r*M/P), ceil((r+1)*M/P)). Requires M >= P so that every rank owns at least one.
constexpr MicroBatchRange micro_batch_range_of(long rank, long ranks, long micro_batches) noexcept {
  auto first_owned = [&](long r) { return (r * micro_batches + ranks - 1) / ranks; };
  return {first_owned(rank), first_owned(rank + 1)};
}

/// A parallelism policy: rank/size, integer collectives, and the micro-batch owner map.
template <class P>
concept Parallelism =
    requires { typename P::execution_space; } &&
    Kokkos::is_execution_space<typename P::execution_space>::value &&
    requires(P& p, const P& cp, bool flag, long m,
             Kokkos::View<std::int64_t*, Kokkos::HostSpace> i64,
             Kokkos::View<std::int32_t*, Kokkos::HostSpace> i32,
             Kokkos::View<double*, Kokkos::HostSpace> f64) {
      { P::name() } -> std::convertible_to<const char*>;
      { cp.space() } -> std::convertible_to<typename P::execution_space>;
      { cp.rank() } -> std::convertible_to<int>;
      { cp.size() } -> std::convertible_to<int>;
      { cp.micro_batch_range(m) } -> std::same_as<MicroBatchRange>;
      p.barrier();
      { p.agree(flag) } -> std::same_as<bool>;  // logical AND over ranks, collective
      p.allreduce_max(i32);                      // in place, elementwise max, collective
      p.allreduce_sum(i64);                      // in place, elementwise exact sum, collective
      // Every rank passes the values of the micro-batches it owns (micro_batch_range(M).size() of
      // them); every rank receives all M in micro-batch order. Used for rank-independent metrics.
      p.allgather_micro_batches(f64, f64, m);
    };

/**
 * A parallelism policy whose ranks split the model (Hybrid, ModelParallel): the Trainer shards
 * the model over model_group(), gathers the shards for checkpoints and fingerprints, reduces
 * gradients over the policy's own (data) dimension and checks configurations over world().
 */
template <class P>
concept ShardedParallelism = Parallelism<P> && requires(P& p) {
  { p.model_group() } -> ModelGroup;
  { p.world_rank() } -> std::convertible_to<int>;
  requires Parallelism<std::remove_cvref_t<decltype(p.world())>>;
  p.model_group().gather_to_root(static_cast<const float*>(nullptr), std::span<const long>(), static_cast<float*>(nullptr));
};

/// What a recovery did, identical on every survivor except the rank fields.
struct RecoveryReport {
  int old_rank = 0;               ///< this process's rank before the shrink
  int old_size = 0;               ///< ranks before the shrink
  int new_rank = 0;               ///< this process's rank in the shrunk communicator
  int new_size = 0;               ///< survivors
  std::vector<int> failed_ranks;  ///< ranks of the old communicator that are gone, ascending
  std::vector<int> lost_original_ranks;  ///< the same processes, numbered as in the communicator
                                         ///< the policy was created with (stable across shrinks)
  double seconds = 0.0;           ///< wall time of recover() on this rank
  /// Regrow (a policy with spare ranks, parallel/spare_pool.hpp): the spares recruited into the
  /// group after the shrink, numbered as lost_original_ranks; they hold no training state yet.
  std::vector<int> joined_original_ranks;
  double regrow_seconds = 0.0;    ///< wall time of the rendezvous with the spares (in `seconds`)
};

/**
 * A Parallelism that can continue after ranks die (docs/fault_tolerance.md): agreements that
 * survive failures and a recovery that shrinks the group to the survivors. All members are
 * collective.
 * - step_completed_everywhere(ok): logical AND over the live ranks; throws process_failure on
 *   every survivor if a rank died.
 * - agree_min(v): the smallest v over the live ranks.
 * - abandon_step(): in a handler of a process_failure that is not agreed(), join the agreement
 *   the other survivors reach next, voting "failed".
 * - recover(): continue on the survivors; rank(), size(), micro_batch_range() change.
 */
template <class P>
concept RecoverableParallelism = Parallelism<P> && requires(P& p, const P& cp, bool flag, std::uint64_t v) {
  { cp.step_completed_everywhere(flag) } -> std::same_as<bool>;
  cp.abandon_step();
  { cp.agree_min(v) } -> std::same_as<std::uint64_t>;
  { p.recover() } -> std::same_as<RecoveryReport>;
};

/**
 * A RecoverableParallelism that can also grow back after a shrink, from spare ranks held idle
 * (parallel/spare_pool.hpp): recover() recruits the spares the group lacks; a spare waits in
 * wait_for_work() until recruited (a report) or released (nullopt); a recruited spare
 * needs_state() until the Trainer gave it the training state and called state_received(); the
 * workers release_spares() when their run ends. Whether a pool is attached: has_spares().
 */
template <class P>
concept RegrowableParallelism = RecoverableParallelism<P> && requires(P& p, const P& cp, int code) {
  { cp.has_spares() } -> std::convertible_to<bool>;
  { cp.spare() } -> std::convertible_to<bool>;
  { p.wait_for_work() } -> std::same_as<std::optional<RecoveryReport>>;
  { cp.release_code() } -> std::convertible_to<int>;
  { cp.needs_state() } -> std::convertible_to<bool>;
  p.state_received();
  p.release_spares(code);
};

REPROSGD_END_NAMESPACE
