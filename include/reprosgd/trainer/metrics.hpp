// SPDX-License-Identifier: BSD-3-Clause
/// @file What a Trainer reports: per-step and per-epoch metrics, identical on every rank.
#pragma once

#include <reprosgd/config.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

namespace detail {
/// The value of "step" in a JSON line this library wrote (a metrics line, a trace line), or -1 for
/// a line without one (the trace's header, a user's line).
inline long long json_line_step(std::string_view line) {
  constexpr std::string_view key = "\"step\":";
  const auto at = line.find(key);
  if (at == std::string_view::npos) return -1;
  long long v = 0;
  std::size_t i = at + key.size();
  if (i >= line.size() || line[i] < '0' || line[i] > '9') return -1;
  for (; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i) v = v * 10 + (line[i] - '0');
  return v;
}
}  // namespace detail

/// Metrics of one optimisation step. The loss is the mean over the global batch, summed per
/// micro-batch in sample order and then over micro-batches in order, so it does not depend on the
/// rank count either.
struct StepMetrics {
  std::uint64_t step = 0;       ///< the step just completed (0-based)
  std::uint64_t epoch = 0;      ///< its epoch
  std::uint64_t steps_per_epoch = 0;
  std::uint64_t total_steps = 0;
  double loss = 0.0;            ///< mean training loss of the global batch (before the update)
  double accuracy = 0.0;        ///< fraction of the global batch classified correctly
  float lr = 0.0f;              ///< learning rate applied at this step
};

/// Result of evaluating a model on a data set.
struct EvalMetrics {
  double loss = 0.0;            ///< mean loss per sample (regression: the MSE over all n x T values)
  double accuracy = 0.0;        ///< classification: fraction classified correctly (0 for regression)
  std::uint64_t correct = 0;
  std::uint64_t count = 0;
  bool regression = false;      ///< the data set had regression targets: rmse and r2 are set
  double rmse = 0.0;            ///< regression: sqrt(loss)
  double r2 = 0.0;              ///< regression: 1 - SSE / SST, the T targets pooled (variance-weighted)
};

/// Metrics at the end of an epoch.
struct EpochMetrics {
  std::uint64_t epoch = 0;
  std::uint64_t step = 0;       ///< steps completed so far
  double train_loss = 0.0;      ///< mean of the epoch's step losses (summed in step order)
  double train_accuracy = 0.0;
  bool regression = false;      ///< trained on regression targets (train_accuracy is then 0)
  bool evaluated = false;
  EvalMetrics test{};
  double seconds = 0.0;         ///< wall time of the epoch (informational, never feeds numerics)
};

/**
 * A lost rank and the recovery from it (ShrinkAndContinue), reported to callbacks once the first
 * step after the recovery has completed — so that the recovery time is known — and kept in
 * FitResult::failures. The same on every survivor except `new_rank`.
 */
struct FailureEvent {
  std::uint64_t step = 0;              ///< the step that was in progress (0-based); it was redone
  std::vector<int> lost_ranks;         ///< the lost ranks, numbered as in the communicator the
                                       ///< parallelism policy was created with (e.g. MPI_COMM_WORLD)
  int old_size = 0;                    ///< ranks before the failure
  int new_size = 0;                    ///< ranks training continues on
  int new_rank = 0;                    ///< this process's rank from now on
  /// Wall time of the repair: the communicator's (revoke, shrink, agree) and, for sharded state
  /// (model and hybrid parallelism), also restoring the lost shards (from buddy copies, another
  /// replica or the newest disk checkpoint), re-sharding over the survivors and the new buddy
  /// snapshot. It includes the repeated repairs when more ranks die before training continues.
  double shrink_seconds = 0.0;
  double recovery_seconds = 0.0;       ///< from the failure's detection to the first completed step after it
  /// Model parallelism: where the lost ranks' shards came from — "" (no sharded state: data
  /// parallelism), "buddy" (in-memory buddy copies), "replica" (a shard and its buddy copy were
  /// both lost, another replica held the same shard), "checkpoint" (no copy left: the newest
  /// disk checkpoint) or "seed" (no copy and no checkpoint, but fit() began from start()'s
  /// untouched state: drawn again from the seed, resumed_from 0) — and the step training rolled back to; steps [resumed_from, step) were
  /// replayed (same bits by determinism).
  std::string restored_from;
  std::uint64_t resumed_from = 0;
  /// Regrow (a policy with spare ranks): the spares recruited after the shrink, numbered as
  /// lost_ranks (new_size counts them), and the wall time of their recruitment and of sending
  /// them the training state (included in shrink_seconds).
  std::vector<int> joined_ranks;
  double regrow_seconds = 0.0;
};

/// What fit() did.
struct FitResult {
  std::uint64_t steps = 0;       ///< steps completed in total (including before a resume)
  std::uint64_t epochs = 0;      ///< epochs completed
  bool stopped_early = false;    ///< a callback asked to stop
  bool idle_spare = false;       ///< this process was a spare rank never needed: it trained nothing
  bool workers_failed = false;   ///< on an idle spare: the workers lost ranks during the run (and recovered)
  StepMetrics last_step{};
  EpochMetrics last_epoch{};
  std::vector<FailureEvent> failures;  ///< ranks lost and recovered from during this fit()
};

REPROSGD_END_NAMESPACE
