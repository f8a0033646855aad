// SPDX-License-Identifier: BSD-3-Clause
/// @file The FaultPolicy concept: what a Trainer does when a peer process dies.
///
/// Semantic requirements a compiler cannot check (docs/fault_tolerance.md):
/// - A policy is a stateless type; `on_process_failure` tells the Trainer what to do when a
///   collective throws reprosgd::process_failure (which happens on every survivor in the same
///   call, see UlfmDataParallel):
///   - FailureAction::abort: let the exception propagate; the run ends (the launcher ends the job).
///   - FailureAction::restart_from_checkpoint: stop without writing anything and make the process
///     exit with `P::exit_code` (restart_exit_code, 75); a relauncher (scripts/relaunch.sh) starts
///     the job again with fewer ranks, and it resumes from the newest valid checkpoint (L4).
///   - FailureAction::shrink_and_continue: recover() to the survivors, roll back to the last step
///     every survivor completed (agree_min), re-map the micro-batches, continue. Needs a
///     RecoverableParallelism (UlfmDataParallel) and an MPI with ULFM.
/// - `needs_ulfm` is true exactly when the policy can only work with ULFM.
#pragma once

#include <reprosgd/concepts/parallelism.hpp>

#include <concepts>
#include <cstdint>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// What a Trainer does when a peer process has died.
enum class FailureAction {
  abort,                    ///< rethrow process_failure: the run ends
  restart_from_checkpoint,  ///< exit with the policy's exit_code; the job is relaunched and resumes
  shrink_and_continue,      ///< recover() to the survivors, roll back one step, continue
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
};

/// A policy for process failures: Abort, RestartFromCheckpoint or ShrinkAndContinue
/// (reprosgd/fault/policies.hpp), or a user's own type with the same members.
template <class P>
concept FaultPolicy = requires {
  { P::name() } -> std::convertible_to<const char*>;
  { P::on_process_failure } -> std::convertible_to<FailureAction>;
  { P::needs_ulfm } -> std::convertible_to<bool>;
};

/**
 * A Parallelism that can continue after ranks die: agreements that survive failures and a
 * recovery that shrinks the group to the survivors. All members are collective.
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

REPROSGD_END_NAMESPACE
