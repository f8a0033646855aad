// SPDX-License-Identifier: BSD-3-Clause
/// @file FitRun: what Trainer::fit() carries from stage to stage — the sizes of a step, the stage
/// it stands at (a failure redoes that stage), the current epoch's permutation and step records,
/// and the result being built (docs/architecture.md, "The Trainer").
#pragma once

#include <reprosgd/checkpoint/checkpoint_manager.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/data/keyed_permutation.hpp>
#include <reprosgd/optim/schedule.hpp>
#include <reprosgd/trainer/metrics.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/// The stages of fit() and of each of its steps, in order; a failure redoes the stage it interrupted.
enum class FitStage : std::uint64_t { start, compute, callbacks, epoch_end, stop_vote, checkpoint };

/// (step, loss, accuracy) of a step completed in the current epoch (a rollback drops the later ones).
struct StepRecord {
  std::uint64_t step;
  double loss, accuracy;
};

/// fit()'s state between stages, for checkpoints in the format Ckpt.
template <class Ckpt>
struct FitRun {
  long B = 0, m = 0, M = 0;  // global batch, micro-batch, micro-batches per step
  long steps_per_epoch = 0, total = 0;
  Schedule schedule;
  std::optional<CheckpointManager<Ckpt>> checkpoints;
  std::optional<KeyedPermutation> order;  // the current epoch's permutation
  // train_steps(): the step the call started at; step s trains on the batches' rows of batch s -
  // *stream_first (no epochs: no shuffle, no epoch end, no checkpoints of fit()'s own).
  std::optional<std::uint64_t> stream_first;
  std::vector<StepRecord> epoch_steps;
  std::chrono::steady_clock::time_point epoch_start = std::chrono::steady_clock::now();
  FitStage stage = FitStage::start;
  bool stop = false;
  // The first exception a callback threw on this rank (detail::call_kept), and, once the stop
  // vote found one on some rank, its kind there (a reprosgd::errc value, callback_failed_other
  // for any other exception; 0: none): the run stops at that step on every rank.
  std::exception_ptr callback_error;
  unsigned callback_failure = 0;
  bool regression = false;  // the training set has regression targets (EpochMetrics::regression)
  StepMetrics last{};  // the step completed last
  FitResult result;

  /// The mean training loss and accuracy of `epoch`'s recorded steps.
  [[nodiscard]] std::pair<double, double> epoch_means(std::uint64_t epoch) const {
    double loss = 0.0, accuracy = 0.0, counted = 0.0;
    for (const StepRecord& r : epoch_steps)
      if (r.step / static_cast<std::uint64_t>(steps_per_epoch) == epoch) {
        loss += r.loss;
        accuracy += r.accuracy;
        counted += 1.0;
      }
    return {loss / counted, accuracy / counted};
  }
};

}  // namespace detail
REPROSGD_END_NAMESPACE
