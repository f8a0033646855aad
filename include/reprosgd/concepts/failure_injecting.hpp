// SPDX-License-Identifier: BSD-3-Clause
/// @file FailureInjecting: a parallelism policy that kills its process at scheduled points, for
/// fault-tolerance tests; and FailurePoint, the points of a step where that can happen.
///
/// The Trainer reports the points only a Trainer knows (the start of a step, a checkpoint being
/// written) through failure_point(); the point inside the gradient exchange is the policy's own
/// (fault/failure_injection.hpp: FailureInjection<Par> wraps any policy and is the one model).
/// Production policies do not model this concept: they carry no test hooks.
#pragma once

#include <reprosgd/config.hpp>

#include <concepts>
#include <cstdint>

REPROSGD_BEGIN_NAMESPACE

/// Where in a training step a scheduled failure happens.
enum class FailurePoint {
  step,        ///< at the start of the step, before any collective
  allreduce,   ///< inside the gradient exchange (after the block-exponent MAX, before the sums travel)
  checkpoint,  ///< while a checkpoint is being written
  setup,       ///< while the ranks set up, after MPI_Init and before the policy's first collective
               ///< (train_mlp reaches it once, as step 0, before it makes the policy's communicators)
  start,       ///< at fit()'s start stage, before its agreements on the inputs and its first buddy
               ///< snapshot (at the step fit() begins from)
  regrow,      ///< during a regrow: the spares were recruited, the state not yet sent to them (at the
               ///< step the failure interrupted; survivors and newcomers alike)
};

/// The spelling of a point in a schedule ("step", "allreduce", "checkpoint", "setup", "start", "regrow").
constexpr const char* to_string(FailurePoint p) noexcept {
  switch (p) {
    case FailurePoint::step: return "step";
    case FailurePoint::allreduce: return "allreduce";
    case FailurePoint::checkpoint: return "checkpoint";
    case FailurePoint::setup: return "setup";
    case FailurePoint::start: return "start";
    case FailurePoint::regrow: return "regrow";
  }
  return "unknown";
}

/**
 * A parallelism policy with scheduled process deaths.
 * - failure_point(step, point): not collective. Records `step` as the step the following
 *   collectives belong to (the `allreduce` point inside the gradient exchange uses it) and kills
 *   the process (SIGKILL) if this process is scheduled to die at (step, point). The Trainer calls
 *   it with FailurePoint::step at the start of each step, and with FailurePoint::checkpoint while
 *   a checkpoint is saved (the writing rank once the parameters are in the temporary file, the
 *   others as the save begins).
 * - failure_scheduled(step, point): whether this process is scheduled to die there (no effect).
 * - die_if_scheduled(step, point): kills the process if it is scheduled to die there, and changes
 *   nothing else, so another thread may call it while the training thread goes on (the writing
 *   rank's `checkpoint` point of a checkpoint written behind training).
 */
template <class P>
concept FailureInjecting = requires(P& p, const P& cp, std::uint64_t step, FailurePoint point) {
  p.failure_point(step, point);
  { cp.failure_scheduled(step, point) } -> std::same_as<bool>;
  cp.die_if_scheduled(step, point);
};

REPROSGD_END_NAMESPACE
