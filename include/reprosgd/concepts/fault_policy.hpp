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
///     RecoverableParallelism (concepts/parallelism.hpp; UlfmDataParallel) and an MPI with ULFM.
/// - `needs_ulfm` is true exactly when the policy can only work with ULFM.
#pragma once

#include <reprosgd/config.hpp>

#include <concepts>

REPROSGD_BEGIN_NAMESPACE

/// What a Trainer does when a peer process has died.
enum class FailureAction {
  abort,                    ///< rethrow process_failure: the run ends
  restart_from_checkpoint,  ///< exit with the policy's exit_code; the job is relaunched and resumes
  shrink_and_continue,      ///< recover() to the survivors, roll back one step, continue
};

/// A policy for process failures: Abort, RestartFromCheckpoint or ShrinkAndContinue
/// (reprosgd/fault/policies.hpp), or a user's own type with the same members.
template <class P>
concept FaultPolicy = requires {
  { P::name() } -> std::convertible_to<const char*>;
  { P::on_process_failure } -> std::convertible_to<FailureAction>;
  { P::needs_ulfm } -> std::convertible_to<bool>;
};

REPROSGD_END_NAMESPACE
