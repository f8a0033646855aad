// SPDX-License-Identifier: BSD-3-Clause
/// @file The state of a training run as plain data: TrainerOptions and their check, TrainState,
/// the shape checks of a data set against a model, and the configuration description that
/// checkpoints store and ranks compare.
///
/// Everything here is a pure function of its arguments: no collective, no kernel, no member of
/// the Trainer. The Trainer (reprosgd/trainer.hpp) composes these with the agreement, step,
/// sharding, checkpointing and recovery parts beside this file (docs/architecture.md).
#pragma once

#include <reprosgd/checkpoint/snapshot.hpp>
#include <reprosgd/concepts/optimizer.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/image.hpp>
#include <reprosgd/kernels/loss.hpp>
#include <reprosgd/optim/schedule.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// The per-run state of training: the optimizer's state and the number of steps taken. With the
/// model's parameters this is everything a run is (the RNG is counter-based: seed and step suffice).
template <Optimizer Opt, class MemSpace = Kokkos::DefaultExecutionSpace::memory_space>
struct TrainState {
  typename Opt::template state_type<MemSpace> optimizer;
  std::uint64_t step = 0;  ///< global steps completed
};

/**
 * How much a trace (TrainerOptions::trace) records per step (docs/diagnosis.md). Each level
 * records everything the levels before it do; the order is what `>=` compares.
 */
enum class TraceLevel : int {
  step = 0,   ///< the step's micro-batches, loss bits and the fingerprint of the whole state
  layer = 1,  ///< also, per layer, the fingerprints of its parameters, reduced gradient and optimizer state
  tensor = 2, ///< also, for the step's first micro-batch, every layer's forward output and input gradient
};

/// Options of a Trainer (aggregate: use designated initialisers).
struct TrainerOptions {
  long global_batch = 128;   ///< B: samples per optimisation step (the same for any rank count)
  long micro_batch = 32;     ///< m: fixed unit of work; B must be a multiple of m (docs/reproducibility.md)
  long epochs = 1;           ///< used when steps == 0
  long steps = 0;            ///< total steps; 0 means epochs * (N / B)
  std::uint64_t seed = 0;    ///< keys initialisation, shuffling and dropout
  bool shuffle = true;       ///< keyed per-epoch permutation; false keeps the data set's order
  LossKind loss = LossKind::softmax_cross_entropy;
  Schedule schedule{};       ///< multiplies the optimizer's base learning rate
  long eval_micro_batch = 256;  ///< rows per evaluation micro-batch (does not affect results)
  bool evaluate_each_epoch = true;
  double max_loss = 1e30;    ///< a step loss above this (or NaN/Inf) is reported as divergence
  std::string checkpoint_dir{}; ///< when set, fit() checkpoints there (format: the Trainer's Ckpt)
  long checkpoint_every = 0;    ///< steps between checkpoints (0: only at the end of fit)
  std::size_t keep_last = 3;    ///< checkpoints kept in checkpoint_dir
  /// Each new checkpoint written over the one keep_last prunes after it (CheckpointManager's
  /// Options::reuse_pruned: less of the writer's CPU; keep_last − 1 complete ones during a write)
  bool checkpoint_reuse = true;
  /// fit()'s checkpoints written by a helper thread while the next steps train (the same files;
  /// a failed write is reported at the next checkpoint, fit()'s last one is waited for; see
  /// docs/checkpoints.md, "Asynchronous checkpoints")
  bool async_checkpoints = false;
  /// One process (data parallelism on one rank, or Serial) with the Exact reduction on a host
  /// space: the Dense layers' weight gradients of a step are computed after its micro-batches and
  /// summed panel by panel while in cache (trainer/deferred_weight_gradients.hpp). The same bits
  /// either way; off only to measure it.
  bool defer_weight_gradients = true;
  long stop_after = 0;          ///< stop cleanly after this global step (as if interrupted); 0: never
  int min_ranks = 1;            ///< ShrinkAndContinue: fewer survivors than this end the run (with a checkpoint)
  /// ShrinkAndContinue with a model-parallel policy: steps between the in-memory buddy snapshots
  /// of every rank's shard (a lost rank's shard is restored from its buddy and the steps since
  /// the snapshot are replayed; docs/parallelism.md).
  long buddy_every = 50;
  /// When set, fit() writes a determinism trace there (JSON lines, one rank writes; appended to
  /// after a resume): the same bytes for any threads, backend and rank count (docs/diagnosis.md).
  /// Empty: no trace, nothing computed.
  std::string trace{};
  TraceLevel trace_level = TraceLevel::step;  ///< what each line of the trace records
  /// When >= 0, fit() writes everything global step `dump_step` computes — the parameters it used,
  /// each micro-batch's input, labels, activations and gradients, the reduced gradient — as NumPy
  /// .npy files with a manifest in `dump_dir` (docs/diagnosis.md, "Replay one step"). Not under
  /// model parallelism. -1: no dump.
  long dump_step = -1;
  std::string dump_dir{};  ///< where the step dump goes (created if missing)
};

namespace detail {

/// Why `o` cannot be used ("reprosgd::Trainer: ..."), or "" when it can.
inline std::string options_problem(const TrainerOptions& o) {
  const std::string who = "reprosgd::Trainer: ";
  if (o.micro_batch <= 0) return who + "micro_batch must be > 0, got " + std::to_string(o.micro_batch);
  if (o.global_batch <= 0) return who + "global_batch must be > 0, got " + std::to_string(o.global_batch);
  if (o.global_batch % o.micro_batch != 0)
    return who + "global batch " + std::to_string(o.global_batch) + " is not divisible by micro-batch " +
           std::to_string(o.micro_batch);
  if (o.global_batch / o.micro_batch > (1L << 20)) return who + "more than 2^20 micro-batches per step";
  if (o.steps < 0) return who + "steps must be >= 0";
  if (o.steps == 0 && o.epochs <= 0) return who + "epochs must be > 0 when steps is 0";
  if (o.eval_micro_batch <= 0) return who + "eval_micro_batch must be > 0";
  if (!(o.max_loss > 0.0)) return who + "max_loss must be > 0";
  if (o.checkpoint_every < 0) return who + "checkpoint_every must be >= 0";
  if (o.keep_last < 1) return who + "keep_last must be >= 1";
  if (o.stop_after < 0) return who + "stop_after must be >= 0";
  if (o.min_ranks < 1) return who + "min_ranks must be >= 1, got " + std::to_string(o.min_ranks);
  if (o.buddy_every < 1) return who + "buddy_every must be >= 1, got " + std::to_string(o.buddy_every);
  if (o.trace_level != TraceLevel::step && o.trace_level != TraceLevel::layer && o.trace_level != TraceLevel::tensor)
    return who + "trace_level " + std::to_string(static_cast<int>(o.trace_level)) + " is not a TraceLevel";
  if (o.dump_step < -1) return who + "dump_step must be >= 0 (or -1: no dump), got " + std::to_string(o.dump_step);
  if (o.dump_step >= 0 && o.dump_dir.empty()) return who + "dump_step " + std::to_string(o.dump_step) + " needs a dump_dir";
  return {};
}

/// Steps in one epoch of `train_size` samples (an incomplete last batch is dropped).
inline long steps_per_epoch(const TrainerOptions& o, std::size_t train_size) noexcept {
  return static_cast<long>(train_size) / o.global_batch;
}
/// The steps fit() runs in all.
inline long total_steps(const TrainerOptions& o, std::size_t train_size) noexcept {
  return o.steps > 0 ? o.steps : o.epochs * steps_per_epoch(o, train_size);
}

/// Throws config_error unless `data` fits `model` (features, classes or targets, not empty) and
/// the loss (regression targets need LossKind::mse). Local.
template <class Model, class Data>
void check_data_for(const Model& model, const Data& data, const char* what, LossKind loss) {
  if (data.feature_count() != model.input_width())
    throw config_error(std::string("reprosgd::Trainer: the ") + what + " data has " +
                       std::to_string(data.feature_count()) + " features but the model's first layer expects " +
                       std::to_string(model.input_width()));
  if constexpr (requires { model.input_shape(); }) {
    // The same width can be another image (1x28x28 and 28x28x1, 3x16x16 and 12x8x8): the shapes
    // must agree where both are known.
    const ImageShape want = model.input_shape();
    if (want.size() != 0 && data.sample_shape.size() != 0 && !(want == data.sample_shape))
      throw config_error(std::string("reprosgd::Trainer: the ") + what + " data's samples are " +
                         data.sample_shape.text() + " images but the model's first layer, " + model.describe().front() +
                         ", expects " + want.text());
  }
  if (data.is_regression() && loss != LossKind::mse)
    throw config_error(std::string("reprosgd::Trainer: the ") + what + " data has " +
                       std::to_string(data.target_count()) +
                       " regression target(s) per sample: train with LossKind::mse (softmax cross-entropy needs class labels)");
  if (data.is_regression() && data.target_count() != model.output_width())
    throw config_error(std::string("reprosgd::Trainer: the ") + what + " data has " +
                       std::to_string(data.target_count()) + " target(s) per sample but the model has " +
                       std::to_string(model.output_width()) + " outputs");
  if (data.num_classes > model.output_width())
    throw config_error(std::string("reprosgd::Trainer: the ") + what + " data has " +
                       std::to_string(data.num_classes) + " classes but the model has " +
                       std::to_string(model.output_width()) + " outputs");
  if (data.size() == 0) throw config_error(std::string("reprosgd::Trainer: the ") + what + " data set is empty");
}

/// The configuration that determines the trained bits, as ordered (key, value) text (see
/// Trainer::describe). `rng` and `reduction` are the policies' names.
template <class Model, Optimizer Opt, class Data>
std::vector<std::pair<std::string, std::string>> describe_run(const TrainerOptions& o, const char* rng,
                                                              const char* reduction, const Model& model,
                                                              const Opt& opt, const Data& train) {
  std::vector<std::pair<std::string, std::string>> d;
  const auto layers = model.describe();
  for (std::size_t i = 0; i < layers.size(); ++i) d.emplace_back("layer." + std::to_string(i), layers[i]);
  d.emplace_back("optimizer", opt.describe());
  d.emplace_back("global_batch", std::to_string(o.global_batch));
  d.emplace_back("micro_batch", std::to_string(o.micro_batch));
  d.emplace_back("seed", std::to_string(o.seed));
  d.emplace_back("shuffle", o.shuffle ? "1" : "0");
  d.emplace_back("loss", o.loss == LossKind::softmax_cross_entropy ? "softmax_cross_entropy" : "mse");
  d.emplace_back("schedule", o.schedule.describe());
  d.emplace_back("rng", rng);
  d.emplace_back("reduction", reduction);
  // A stream (SampleStream, StreamBatches) is described by its capacity: an online run's
  // configuration does not change as the stream fills or with how many steps a call runs.
  if constexpr (requires { train.stream_capacity(); })
    d.emplace_back("stream_capacity", std::to_string(train.stream_capacity()));
  else
    d.emplace_back("train_samples", std::to_string(train.size()));
  d.emplace_back("features", std::to_string(train.feature_count()));
  // Only for regression data, so that the descriptions (and checkpoints) of classification runs
  // are the ones they were before regression data existed.
  if (train.is_regression()) d.emplace_back("targets", std::to_string(train.target_count()));
  return d;
}

/// The header of a checkpoint of the state after `step` completed steps.
inline SnapshotInfo snapshot_info(const TrainerOptions& o, ConfigDescription config, std::uint64_t step,
                                  std::size_t train_size) {
  SnapshotInfo info;
  info.config = std::move(config);
  info.step = step;
  const long spe = steps_per_epoch(o, train_size);
  info.epoch = spe > 0 ? step / static_cast<std::uint64_t>(spe) : 0;
  info.position_in_epoch =
      spe > 0 ? (step % static_cast<std::uint64_t>(spe)) * static_cast<std::uint64_t>(o.global_batch) : 0;
  return info;
}

}  // namespace detail

REPROSGD_END_NAMESPACE
