// SPDX-License-Identifier: BSD-3-Clause
/// @file The fault policies Abort, RestartFromCheckpoint and ShrinkAndContinue, and their compatibility check.
#pragma once

#include <reprosgd/concepts/fault_policy.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/config.hpp>

REPROSGD_BEGIN_NAMESPACE

/// The exit code that asks a relauncher to start the job again (EX_TEMPFAIL of <sysexits.h>:
/// "temporary failure, try again"); scripts/relaunch.sh reruns while a job exits with it.
inline constexpr int restart_exit_code = 75;

/// Do nothing special: process_failure propagates and the run ends. Works with any MPI (without
/// ULFM the launcher ends the job as soon as a rank dies; nothing can be caught).
struct Abort {
  static constexpr const char* name() noexcept { return "abort"; }
  static constexpr FailureAction on_process_failure = FailureAction::abort;
  static constexpr bool needs_ulfm = false;
};

/**
 * Stop and be relaunched: on process_failure the survivors write nothing (the newest checkpoint
 * is the state to resume from; a half-done step is never saved) and the program exits with
 * `exit_code`. `scripts/relaunch.sh -n P -- mpiexec -n {ranks} ./prog ...` then reruns it on
 * fewer ranks, and it resumes from the newest valid checkpoint; checkpoints do not depend on P
 * (L4). For MPIs without ULFM, where the launcher itself ends the job, the relauncher can also be
 * told to retry on the launcher's own exit code (`--retry-on`).
 */
struct RestartFromCheckpoint {
  static constexpr const char* name() noexcept { return "restart_from_checkpoint"; }
  static constexpr FailureAction on_process_failure = FailureAction::restart_from_checkpoint;
  static constexpr bool needs_ulfm = false;
  static constexpr int exit_code = restart_exit_code;
};

/**
 * Lose a rank, keep training (ULFM): on process_failure every survivor calls recover() (shrink),
 * agrees on the last step all survivors completed (agree_min), rolls back to it, re-maps the
 * micro-batches over the new size and continues. With the Exact reduction the finished model
 * has the same bits as a run without failures (L3 + the agreement before each update).
 * Needs UlfmDataParallel (reprosgd/parallel/ulfm_data_parallel.hpp) and `mpiexec --with-ft ulfm`.
 */
struct ShrinkAndContinue {
  static constexpr const char* name() noexcept { return "shrink_and_continue"; }
  static constexpr FailureAction on_process_failure = FailureAction::shrink_and_continue;
  static constexpr bool needs_ulfm = true;
};

static_assert(FaultPolicy<Abort>);
static_assert(FaultPolicy<RestartFromCheckpoint>);
static_assert(FaultPolicy<ShrinkAndContinue>);

/**
 * Whether a fault policy can run with a parallelism policy: every policy can, except that one
 * that shrinks needs a RecoverableParallelism. Over MPI that is UlfmDataParallel or UlfmHybrid,
 * which exist only with an MPI that has ULFM; an in-process policy of the user's own (a test
 * double, say) needs no MPI at all. A Trainer calls it in a static_assert-like way, so a wrong
 * combination fails to compile with a message for the user.
 */
template <FaultPolicy Policy, class Par>
consteval bool check_fault_policy() {
  static_assert(!Policy::needs_ulfm || RecoverableParallelism<Par>,
                "reprosgd: ShrinkAndContinue needs a parallelism policy that can recover() from lost ranks: use "
                "reprosgd::UlfmDataParallel (reprosgd/parallel/ulfm_data_parallel.hpp), which needs an MPI with ULFM "
                "(MPIX_Comm_shrink in <mpi-ext.h>, e.g. Open MPI 5 run with mpiexec --with-ft ulfm); or use "
                "RestartFromCheckpoint or Abort");
  return true;
}

REPROSGD_END_NAMESPACE
