// SPDX-License-Identifier: BSD-3-Clause
/// @file Trainer: the training loop, composed at compile time from a parallelism policy and an RNG stream.
#pragma once

#include <reprosgd/checkpoint/checkpoint_manager.hpp>
#include <reprosgd/checkpoint/formats.hpp>
#include <reprosgd/checkpoint/snapshot.hpp>
#include <reprosgd/checkpoint/view_serialization.hpp>
#include <reprosgd/concepts/checkpoint_format.hpp>
#include <reprosgd/concepts/fault_policy.hpp>
#include <reprosgd/concepts/layer_context.hpp>
#include <reprosgd/concepts/optimizer.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/concepts/reduction.hpp>
#include <reprosgd/concepts/rng_stream.hpp>
#include <reprosgd/data/dataset.hpp>
#include <reprosgd/data/keyed_permutation.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/fault/fault_injection.hpp>
#if REPROSGD_HAS_MPI
#include <reprosgd/fault/buddy_store.hpp>
#endif
#include <reprosgd/fault/policies.hpp>
#include <reprosgd/kernels/loss.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/nn/model_group.hpp>
#include <reprosgd/optim/schedule.hpp>
#include <reprosgd/reduction/canonical_blocks.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/rng/philox_stream.hpp>
#include <reprosgd/trainer/callbacks.hpp>
#include <reprosgd/trainer/metrics.hpp>

#include <Kokkos_Core.hpp>

#include <reprosgd/fingerprint.hpp>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <span>
#include <exception>
#include <functional>
#include <utility>
#include <memory>
#include <type_traits>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <algorithm>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// The per-run state of training: the optimizer's state and the number of steps taken. With the
/// model's parameters this is everything a run is (the RNG is counter-based: seed and step suffice).
template <Optimizer Opt, class MemSpace = Kokkos::DefaultExecutionSpace::memory_space>
struct TrainState {
  typename Opt::template state_type<MemSpace> optimizer;
  std::uint64_t step = 0;  ///< global steps completed
};

namespace detail {
/// What a checkpoint's payload holds: the parameters, then every optimizer state element in its
/// visit() order, each under its own name (readable in JSON). Loading writes into the referenced
/// buffers, which are staging copies: the live model is only touched after everything verified.
/// The absence of user state in a checkpoint.
struct NoExtraState {
  template <class Archive>
  void serialize(Archive&) {}
};

template <class Params, class State, class Extra = NoExtraState>
struct TrainingPayload {
  Params* params;
  State* state;
  Extra* extra = nullptr;  ///< the user's own state (any cereal-serializable type), saved last
  std::function<void()> after_parameters;  ///< called mid-write (fault injection), when set
  template <class Archive>
  void save(Archive& ar) const {
    ar(cereal::make_nvp("parameters", *params));
    if (after_parameters) after_parameters();
    state->visit([&](const char* name, const auto& x) { ar(cereal::make_nvp(name, x)); });
    if constexpr (!std::is_same_v<Extra, NoExtraState>) ar(cereal::make_nvp("user", *extra));
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(cereal::make_nvp("parameters", *params));
    state->visit([&](const char* name, auto& x) { ar(cereal::make_nvp(name, x)); });
    if constexpr (!std::is_same_v<Extra, NoExtraState>) ar(cereal::make_nvp("user", *extra));
  }
};
}  // namespace detail

/// Options of a Trainer (aggregate: use designated initialisers).
struct TrainerOptions {
  long global_batch = 128;   ///< B: samples per optimisation step (the same for any rank count)
  long micro_batch = 32;     ///< m: fixed unit of work; B must be a multiple of m (DESIGN §4)
  long epochs = 1;           ///< used when steps == 0
  long steps = 0;            ///< total steps; 0 means epochs * (N / B)
  std::uint64_t seed = 0;    ///< keys initialisation, shuffling and dropout
  bool shuffle = true;       ///< keyed per-epoch permutation; false keeps the data set's order
  LossKind loss = LossKind::softmax_cross_entropy;
  Schedule schedule{};       ///< multiplies the optimizer's base learning rate
  long eval_micro_batch = 256;  ///< rows per evaluation micro-batch (does not affect results)
  bool evaluate_each_epoch = true;
  double max_loss = 1e30;    ///< a step loss above this (or NaN/Inf) is reported as divergence
  std::string checkpoint_dir;   ///< when set, fit() checkpoints there (format: the Trainer's Ckpt)
  long checkpoint_every = 0;    ///< steps between checkpoints (0: only at the end of fit)
  std::size_t keep_last = 3;    ///< checkpoints kept in checkpoint_dir
  long stop_after = 0;          ///< stop cleanly after this global step (as if interrupted); 0: never
  int min_ranks = 1;            ///< ShrinkAndContinue: fewer survivors than this end the run (with a checkpoint)
  /// ShrinkAndContinue with a model-parallel policy: steps between the in-memory buddy snapshots
  /// of every rank's shard (a lost rank's shard is restored from its buddy and the steps since
  /// the snapshot are replayed; docs/parallelism.md).
  long buddy_every = 50;
};

/**
 * Trains a Sequential model with SGD-family optimizers so that the trained parameters are the same
 * bits whatever the thread count, backend, compiler and (with a data-parallel policy) rank count.
 *
 * A step of global batch B: the B samples at positions [s*B, (s+1)*B) of the epoch's keyed
 * permutation are cut into M = B/m micro-batches; each rank runs the micro-batches the policy gives
 * it (forward, loss scaled by 1/B, backward into its own gradient row); the Reduction sums the M rows
 * exactly; the optimizer updates the parameters; metrics are gathered in micro-batch order.
 *
 * @tparam Par a model of Parallelism (Serial, DataParallel, …), which also names the Reduction.
 * @tparam Rng a model of RngStream.
 * @tparam Ckpt the CheckpointFormat of the checkpoints fit() writes (save/load also take others).
 * @tparam Fault what happens when a peer process dies (Abort, RestartFromCheckpoint,
 *         ShrinkAndContinue; reprosgd/fault/policies.hpp and docs/fault_tolerance.md).
 *
 * **Example**:
 * @code
 * reprosgd::Trainer<reprosgd::Serial<>> trainer({.global_batch = 128, .micro_batch = 32, .epochs = 3});
 * reprosgd::Sequential model{reprosgd::Dense{784, 256}, reprosgd::ReLU{}, reprosgd::Dense{256, 10}};
 * reprosgd::Adam adam{{.lr = 1e-3f}};
 * auto state = trainer.start(model, adam);
 * trainer.fit(model, adam, state, data.train, &data.test, reporter);
 * @endcode
 */
template <Parallelism Par, RngStream Rng = PhiloxStream, CheckpointFormat Ckpt = PortableBinaryFormat,
          FaultPolicy Fault = Abort>
class Trainer {
 public:
  using parallelism_type = Par;
  using execution_space = typename Par::execution_space;
  using memory_space = typename execution_space::memory_space;
  using reduction_type = typename Par::reduction_type;
  using rng_type = Rng;
  using options_type = TrainerOptions;
  using checkpoint_format = Ckpt;
  using fault_policy = Fault;
  static_assert(check_fault_policy<Fault, Par>());
  /// Model parallelism under ShrinkAndContinue: shards are snapshotted to buddies every
  /// options().buddy_every steps, restored from them after a failure, and the steps since replayed.
  static constexpr bool buddy_snapshots = ShardedParallelism<Par> && RecoverableParallelism<Par> &&
                                          Fault::on_process_failure == FailureAction::shrink_and_continue;
  static_assert(Reduction<reduction_type, Par>, "reprosgd::Trainer: Par::reduction_type is not a Reduction for Par");
  static_assert(std::is_same_v<memory_space, Kokkos::DefaultExecutionSpace::memory_space>,
                "reprosgd::Trainer: the parallelism policy's execution space must use the default memory space "
                "(where Sequential keeps its parameters)");

  explicit Trainer(TrainerOptions options, Par par = Par{}) : options_(options), par_(std::move(par)) {
    if (auto ec = check(options_)) throw config_error(check_message(options_));
  }

  /// CUTLASS-style validation before any collective or kernel: an empty error_code when usable.
  [[nodiscard]] static std::error_code check(const TrainerOptions& o) {
    return check_message(o).empty() ? std::error_code{} : make_error_code(errc::invalid_configuration);
  }
  /// The reason check() fails, or "" when it does not.
  [[nodiscard]] static std::string check_message(const TrainerOptions& o) {
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
    return {};
  }

  [[nodiscard]] const TrainerOptions& options() const noexcept { return options_; }
  [[nodiscard]] Par& parallelism() noexcept { return par_; }
  [[nodiscard]] const Rng& rng() const noexcept { return rng_; }

  /**
   * Fault injection for tests and demos: this process kills itself (SIGKILL) where `schedule`
   * lists (identity, step, point) — at the start of the step (FailurePoint::step), inside the
   * gradient all-reduce (allreduce, when the parallelism policy supports it) or while fit() writes
   * the checkpoint of `step` completed steps (checkpoint: the writing rank dies after the
   * parameters went into the temporary file, the others as the save begins). `identity` is the
   * process's stable name, typically its MPI_COMM_WORLD rank. Not collective.
   */
  void inject_failures(FailureSchedule schedule, int identity) {
    failures_ = std::make_shared<const FailureSchedule>(std::move(schedule));
    failure_identity_ = identity;
    if constexpr (requires { par_.inject_failures(failures_.get(), identity); })
      par_.inject_failures(failures_.get(), identity);
  }

  /// Initialise the model's parameters from the seed and return the fresh optimizer state. With
  /// a model-parallel policy the model is first made this rank's shard (it holds its part only).
  template <class Model, Optimizer Opt>
  [[nodiscard]] TrainState<Opt, memory_space> start(Model& model, const Opt& opt) {
    opt.check();
    shard(model);
    model.initialize(par_.space(), rng_);
    return {opt.template init<memory_space>(model.parameter_count()), 0};
  }

  /**
   * The fingerprint of the whole model and optimizer state (testing/fingerprint.hpp) — with a
   * model-parallel policy, of the shards gathered into the one-process layout, so it is the same
   * for every grid. The same value on every rank. @collective
   */
  template <class Model, Optimizer Opt>
  [[nodiscard]] Fingerprint fingerprint(Model& model, const TrainState<Opt, memory_space>& state) {
    const auto whole = canonical(model, state);
    Fingerprint f{};
    if (holds_canonical(model)) {
      FingerprintBuilder b;
      b.add(whole.params);
      whole.state.visit([&](const char*, const auto& x) { b.add(x); });
      f = b.finish();
    }
    if constexpr (ShardedParallelism<Par>) {
      float words[4];
      static_assert(sizeof words == sizeof f);
      std::memcpy(words, &f, sizeof f);
      par_.model_group().share(words, 4, 0);
      std::memcpy(&f, words, sizeof f);
    }
    return f;
  }

  /**
   * The configuration that determines the trained bits, as ordered (key, value) text: every layer,
   * the optimizer's hyperparameters, B, m, seed, shuffling, loss, schedule and the data's shape.
   * Checkpoints store it and compare it field by field; ranks compare its hash at the start of fit().
   * The number of steps is not part of it: a run may be continued for longer.
   */
  template <class Model, Optimizer Opt, class Data>
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> describe(const Model& model, const Opt& opt,
                                                                         const Data& train) const {
    std::vector<std::pair<std::string, std::string>> d;
    const auto layers = model.describe();
    for (std::size_t i = 0; i < layers.size(); ++i) d.emplace_back("layer." + std::to_string(i), layers[i]);
    d.emplace_back("optimizer", opt.describe());
    d.emplace_back("global_batch", std::to_string(options_.global_batch));
    d.emplace_back("micro_batch", std::to_string(options_.micro_batch));
    d.emplace_back("seed", std::to_string(options_.seed));
    d.emplace_back("shuffle", options_.shuffle ? "1" : "0");
    d.emplace_back("loss", options_.loss == LossKind::softmax_cross_entropy ? "softmax_cross_entropy" : "mse");
    d.emplace_back("schedule", options_.schedule.describe());
    d.emplace_back("rng", Rng::name());
    d.emplace_back("reduction", reduction_type::name());
    d.emplace_back("train_samples", std::to_string(train.size()));
    d.emplace_back("features", std::to_string(train.feature_count()));
    return d;
  }

  /// The number of steps in one epoch of `train` (incomplete last batches are dropped).
  [[nodiscard]] long steps_per_epoch(std::size_t train_size) const noexcept {
    return static_cast<long>(train_size) / options_.global_batch;
  }
  /// The total number of steps fit() runs for `train`.
  [[nodiscard]] long total_steps(std::size_t train_size) const noexcept {
    return options_.steps > 0 ? options_.steps : options_.epochs * steps_per_epoch(train_size);
  }

  /**
   * Train from state.step until the configured number of steps. Collective.
   *
   * @param test  evaluated at the end of every epoch when non-null and evaluate_each_epoch is set
   * @param callbacks objects with on_step_end / on_epoch_end hooks (see Callback)
   * @throws config_error bad shapes or options (before any collective), data_error non-finite data,
   *         numerics_error a NaN/Inf gradient or a diverging loss (on every rank at the same step)
   * @collective @deterministic
   */
  template <class Model, Optimizer Opt, class Data, Callback... Callbacks>
  FitResult fit(Model& model, const Opt& opt, TrainState<Opt, memory_space>& state, const Data& train,
                const Data* test, Callbacks&... callbacks) {
    const long n_samples = static_cast<long>(train.size());
    // Checks that can fail on some ranks only are agreed before anyone throws (a rank that threw
    // alone would leave the others waiting in the next collective).
    agreed("reprosgd::Trainer::fit", [&] {
      validate_for(model, train, "train");
      if (test) validate_for(model, *test, "test");
      validate_finite(par_.space(), train);
      if (test) validate_finite(par_.space(), *test);
      opt.check();
    });
    check_same_configuration(describe(model, opt, train), total_steps(train.size()));
    check_sharded(model, state);
    const long B = options_.global_batch, m = options_.micro_batch, M = B / m;
    if (M < par_.size())
      throw config_error("reprosgd::Trainer::fit: " + std::to_string(M) + " micro-batches per step (global batch " +
                         std::to_string(B) + " / micro-batch " + std::to_string(m) + ") but " +
                         std::to_string(par_.size()) + " ranks: every rank needs at least one");
    if (n_samples < B)
      throw config_error("reprosgd::Trainer::fit: the training set has " + std::to_string(n_samples) +
                         " samples, fewer than one global batch of " + std::to_string(B));
    const long spe = steps_per_epoch(train.size());
    const long total = total_steps(train.size());
    Schedule schedule = options_.schedule;
    if (schedule.kind == ScheduleKind::cosine && schedule.total_steps == 0) schedule.total_steps = total;
    schedule.check();

    long n_params = 0;  // this rank's parameters (its shard's: set again when a shrink re-shards)
    const execution_space space = par_.space();

    // What depends on the rank count; computed again after a shrink (ShrinkAndContinue).
    MicroBatchRange mine{};
    Kokkos::View<double*, Kokkos::HostSpace> mb_loss, mb_correct;
    auto lay_out = [&] {
      if constexpr (requires { par_.set_max_replicas(M); }) par_.set_max_replicas(M);
      // The shard may have changed (a shrink re-shards). Only a model-parallel policy shards: under
      // any other, check_sharded() above has agreed that the model is whole.
      if constexpr (ShardedParallelism<Par>) workspace_.reset(), eval_workspace_.reset();
      mine = par_.micro_batch_range(M);
      n_params = static_cast<long>(model.parameter_count());
      ensure_step_buffers(model, mine.size(), n_params, m);
      if constexpr (ShardedParallelism<Par>) grad_blocks_ = gradient_blocks(model);
      mb_loss = Kokkos::View<double*, Kokkos::HostSpace>("reprosgd::mb_loss", mine.size());
      mb_correct = Kokkos::View<double*, Kokkos::HostSpace>("reprosgd::mb_correct", mine.size());
    };
    lay_out();

    std::optional<CheckpointManager<Ckpt>> checkpoints;
    if (!options_.checkpoint_dir.empty())
      checkpoints.emplace(options_.checkpoint_dir, typename CheckpointManager<Ckpt>::Options{.keep_last = options_.keep_last});
    FitResult result;
    result.steps = state.step;
    std::optional<KeyedPermutation> order;
    // (step, loss, accuracy) of the steps completed in this epoch (a rollback drops the later ones).
    std::vector<StepRecord> epoch_steps;
    auto epoch_start = std::chrono::steady_clock::now();
    Kokkos::View<double*, Kokkos::HostSpace> all_loss("reprosgd::all_loss", M), all_correct("reprosgd::all_correct", M);

    // A step runs in stages. A failure (process_failure, thrown on every survivor in the same
    // collective) leaves the stage where it was; after a shrink the survivors redo that stage.
    // The update is applied only after every rank agreed the step's collectives completed, so
    // no survivor is ever a step ahead of another (docs/fault_tolerance.md).
    enum class Stage : std::uint64_t { compute, callbacks, epoch_end, stop_vote, checkpoint };
    Stage stage = Stage::compute;
    bool stop = false;
    StepMetrics sm;
    std::optional<Recovery> recovery;  // a failure recovered from, reported after the next completed step
    std::uint64_t replay_until = 0;    // after a rollback: the steps completed before the failure
    Stage resume_stage = Stage::compute;  // ... and the stage it interrupted
    if constexpr (buddy_snapshots) refresh_buddies(model, state);

    for (;;) {
      try {
        if (stage == Stage::compute) {
          if (static_cast<long>(state.step) >= total) break;
          const std::uint64_t step = state.step;
          const std::uint64_t epoch = step / static_cast<std::uint64_t>(spe);
          const long position = static_cast<long>(step % static_cast<std::uint64_t>(spe));
          if (failures_) failures_->maybe_fail(failure_identity_, step, FailurePoint::step);
          if constexpr (requires { par_.set_failure_step(step); }) par_.set_failure_step(step);
          if (options_.shuffle && (!order || order->epoch() != epoch))
            order.emplace(options_.seed, epoch, static_cast<std::uint64_t>(n_samples));

          auto& ws = model_ws<Model>(*workspace_);
          for (long u = mine.begin; u < mine.end; ++u) {
            const long first = position * B + u * m;  // position of the micro-batch's row 0 in the epoch order
            gather(train, order, first, m);
            LayerContext<execution_space, Rng> ctx{space, rng_, 0, step, static_cast<std::uint64_t>(u * m), true};
            forward(model, ctx, ws, m);
            compute_loss(m, 1.0f / static_cast<float>(B), true);
            BufferRef<memory_space> row(grads_.data() + (u - mine.begin) * n_params, n_params);
            backward(model, ctx, ws, m, row);
            sum_rows(m, mb_loss(u - mine.begin), mb_correct(u - mine.begin));
          }
          const ReductionResult red = reduce_gradients(M);
          par_.allgather_micro_batches(mb_loss, all_loss, M);
          par_.allgather_micro_batches(mb_correct, all_correct, M);
          double loss_sum = 0.0, correct = 0.0;
          for (long u = 0; u < M; ++u) {
            loss_sum += all_loss(u);
            correct += all_correct(u);
          }
          sm = StepMetrics{step, epoch, static_cast<std::uint64_t>(spe), static_cast<std::uint64_t>(total),
                           loss_sum / static_cast<double>(B), correct / static_cast<double>(B),
                           schedule.lr(opt.base_lr(), step)};
          // Every rank holds the same reduced gradient and gathered loss, so every rank throws here together.
          if (!red.finite)
            throw numerics_error("reprosgd::Trainer::fit: step " + std::to_string(step) +
                                     ": the gradient contains NaN or Inf (training diverged; lower the learning rate)",
                                 static_cast<long long>(step));
          if (!(sm.loss <= options_.max_loss))
            throw numerics_error("reprosgd::Trainer::fit: step " + std::to_string(step) + ": loss is " +
                                     detail::number_text(sm.loss) + " (training diverged; lower the learning rate)",
                                 static_cast<long long>(step));
          // Apply the step only once every rank completed it: either every survivor applies it or none does.
          if constexpr (RecoverableParallelism<Par>) (void)par_.step_completed_everywhere(true);  // throws if not
          opt.step(space, state.optimizer, model.parameters(), grad_sum_, sm.lr);
          space.fence();
          ++state.step;
          result.steps = state.step;
          result.last_step = sm;
          epoch_steps.push_back({sm.step, sm.loss, sm.accuracy});
          stop = false;
          stage = Stage::callbacks;
          if (recovery) {
            FailureEvent event = recovery->event;
            event.recovery_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - recovery->detected).count();
            event.new_rank = world_rank();
            recovery.reset();
            result.failures.push_back(event);
            (call_failure(callbacks, event), ...);
          }
          if (replay_until > 0) {
            // A step replayed after a rollback: its other stages ran before the failure.
            if (state.step < replay_until) {
              stage = Stage::compute;
              continue;
            }
            replay_until = 0;
            stage = resume_stage;
            if (stage == Stage::compute) continue;
          }
        }
        const std::uint64_t done = state.step;  // steps completed, the last one being sm.step
        if (stage == Stage::callbacks) {
          ((stop = call_step(callbacks, sm) || stop), ...);
          stage = Stage::epoch_end;
        }
        if (stage == Stage::epoch_end) {
          if (static_cast<long>(sm.step % static_cast<std::uint64_t>(spe)) == spe - 1) {
            EpochMetrics em;
            em.epoch = sm.epoch;
            em.step = done;
            double loss_sum = 0.0, acc_sum = 0.0, counted = 0.0;
            for (const StepRecord& r : epoch_steps)
              if (r.step / static_cast<std::uint64_t>(spe) == sm.epoch) {
                loss_sum += r.loss;
                acc_sum += r.accuracy;
                counted += 1.0;
              }
            em.train_loss = loss_sum / counted;
            em.train_accuracy = acc_sum / counted;
            if (test && options_.evaluate_each_epoch) {
              em.evaluated = true;
              em.test = evaluate(model, *test);
              // Close the evaluation's collectives with an agreement before any callback runs.
              if constexpr (RecoverableParallelism<Par>) (void)par_.agree(true);
            }
            em.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
            ((stop = call_epoch(callbacks, em) || stop), ...);
            result.last_epoch = em;
            result.epochs = sm.epoch + 1;
            epoch_steps.clear();
            epoch_start = std::chrono::steady_clock::now();
          }
          stage = Stage::stop_vote;
        }
        if (stage == Stage::stop_vote) {
          // A stop requested on any rank (a callback, e.g. one watching the wall clock, may decide
          // differently on different ranks) stops every rank at the same step — decided before
          // the checkpoint stage, so that all ranks agree on whether this step is checkpointed.
          if (options_.stop_after > 0 && static_cast<long>(done) == options_.stop_after) stop = true;
          stop = !par_.agree(!stop);
          stage = Stage::checkpoint;
        }
        // stage == Stage::checkpoint
        if constexpr (buddy_snapshots)
          if (done % static_cast<std::uint64_t>(options_.buddy_every) == 0) refresh_buddies(model, state);
        const bool last = static_cast<long>(done) == total;
        if (checkpoints && (last || stop ||
                            (options_.checkpoint_every > 0 && done % static_cast<std::uint64_t>(options_.checkpoint_every) == 0)))
          save_during_fit(*checkpoints, model, opt, state, train);
        stage = Stage::compute;
        if (stop) {
          result.stopped_early = true;
          break;
        }
      } catch (const process_failure& failure) {
        // A collective failed here (it may have succeeded elsewhere): take part in the agreement
        // the others reach next, so that all survivors leave the same stage together.
        if constexpr (Fault::on_process_failure != FailureAction::abort && RecoverableParallelism<Par>)
          if (!failure.agreed()) par_.abandon_step();
        if constexpr (Fault::on_process_failure == FailureAction::abort) {
          throw;
        } else if constexpr (Fault::on_process_failure == FailureAction::restart_from_checkpoint) {
          throw restart_required(std::string(failure.what()) + "; " + Fault::name() +
                                     ": stopping so that the job is relaunched on the survivors and resumes from "
                                     "the newest checkpoint (exit code " + std::to_string(restart_code()) + ")",
                                 failure.failed_ranks(), restart_code());
        } else {
          if (!recovery) recovery.emplace(Recovery{std::chrono::steady_clock::now(), {}});
          const std::uint64_t completed = state.step;
          recover_from_failure(*recovery, state.step, static_cast<std::uint64_t>(stage), checkpoints, model, opt, state, train);
          lay_out();
          if (state.step != completed) {
            // Shards were restored from an older step: replay up to where the failure struck.
            if (replay_until == 0) {
              replay_until = completed;
              resume_stage = stage;
            }
            stage = Stage::compute;
            std::erase_if(epoch_steps, [&](const StepRecord& r) { return r.step >= state.step; });
          }
        }
      }
    }
    return result;
  }

  /**
   * Write a checkpoint of the run into `checkpoints` (atomically; the manager keeps the newest K).
   * Every rank holds the same parameters and state, so rank 0 writes and the others wait for its
   * verdict: a failure throws on every rank. The layout does not depend on ranks, threads or
   * backend. @collective @throws io_error / checkpoint_error
   */
  template <CheckpointFormat F, class Model, Optimizer Opt, class Data, class Extra = detail::NoExtraState>
  std::filesystem::path save_checkpoint(CheckpointManager<F>& checkpoints, const Model& model, const Opt& opt,
                                        const TrainState<Opt, memory_space>& state, const Data& train,
                                        const Extra& extra = {}) {
    return write_checkpoint(checkpoints, model, opt, state, train, extra, false);
  }
  /// Write one checkpoint file at `path` (see the overload above). @collective
  template <CheckpointFormat F = Ckpt, class Model, Optimizer Opt, class Data, class Extra = detail::NoExtraState>
  void save_checkpoint(const std::filesystem::path& path, const Model& model, const Opt& opt,
                       const TrainState<Opt, memory_space>& state, const Data& train, const Extra& extra = {}) {
    const auto whole = canonical(model, state);
    agreed("reprosgd::Trainer::save_checkpoint", [&] {
      if (writes_checkpoints())
        save_snapshot<F>(path, snapshot_info(model, opt, state, train), payload_of(whole, extra));
    });
  }

  /**
   * Load the checkpoint at `path` into model and state: everything (magic, versions, format,
   * checksums, the configuration field by field against this program's) is verified into staging
   * copies first; the live model and state change only when all of it succeeded, on every rank.
   * @collective @throws checkpoint_error naming what does not match
   */
  template <CheckpointFormat F = Ckpt, class Model, Optimizer Opt, class Data>
  SnapshotInfo load_checkpoint(const std::filesystem::path& path, Model& model, const Opt& opt,
                               TrainState<Opt, memory_space>& state, const Data& train) {
    detail::NoExtraState none;
    return load_checkpoint<F>(path, model, opt, state, train, none);
  }
  /// load_checkpoint() that also restores the user's own state saved with save_checkpoint(..., extra)
  /// (loaded into a copy, assigned only when everything verified). @collective
  template <CheckpointFormat F = Ckpt, class Model, Optimizer Opt, class Data, class Extra>
  SnapshotInfo load_checkpoint(const std::filesystem::path& path, Model& model, const Opt& opt,
                               TrainState<Opt, memory_space>& state, const Data& train, Extra& extra) {
    shard(model);
    Staging<Opt> staging(model, opt);
    Extra staged_extra = extra;
    SnapshotInfo info;
    agreed("reprosgd::Trainer::load_checkpoint", [&] {
      auto payload = staging.payload(staged_extra);
      info = load_snapshot<F>(path, config_of(model, opt, train), payload);
    });
    commit(staging, info.step, model, opt, state);
    extra = std::move(staged_extra);
    return info;
  }

  /**
   * Resume from the newest checkpoint in `checkpoints` that verifies, falling back to older ones;
   * the result says which was used and why newer ones were skipped. Nothing usable: the model and
   * state stay as they are (a fresh start). @collective
   */
  template <CheckpointFormat F, class Model, Optimizer Opt, class Data>
  ResumeResult resume(const CheckpointManager<F>& checkpoints, Model& model, const Opt& opt,
                      TrainState<Opt, memory_space>& state, const Data& train) {
    detail::NoExtraState none;
    return resume(checkpoints, model, opt, state, train, none);
  }
  /// resume() that also restores the user's own state (see load_checkpoint). @collective
  template <CheckpointFormat F, class Model, Optimizer Opt, class Data, class Extra>
  ResumeResult resume(const CheckpointManager<F>& checkpoints, Model& model, const Opt& opt,
                      TrainState<Opt, memory_space>& state, const Data& train, Extra& extra) {
    shard(model);
    Staging<Opt> staging(model, opt);
    Extra staged_extra = extra;
    ResumeResult r;
    agreed("reprosgd::Trainer::resume", [&] {
      auto payload = staging.payload(staged_extra);
      r = checkpoints.resume_auto(config_of(model, opt, train), payload);
    });
    // Every rank must continue from the same step (a rank on another file system could differ).
    if (!same_on_all_ranks(r.resumed ? r.info.step + 1 : 0))
      throw checkpoint_error("reprosgd::Trainer::resume: the ranks found different checkpoints in " +
                             checkpoints.directory().string());
    if (r.resumed) {
      commit(staging, r.info.step, model, opt, state);
      extra = std::move(staged_extra);
    }
    return r;
  }
  /// resume() from the Trainer's checkpoint_dir. @collective
  template <class Model, Optimizer Opt, class Data>
  ResumeResult resume(Model& model, const Opt& opt, TrainState<Opt, memory_space>& state, const Data& train) {
    if (options_.checkpoint_dir.empty()) throw config_error("reprosgd::Trainer::resume: checkpoint_dir is not set");
    const CheckpointManager<Ckpt> checkpoints(options_.checkpoint_dir,
                                              typename CheckpointManager<Ckpt>::Options{.keep_last = options_.keep_last});
    return resume(checkpoints, model, opt, state, train);
  }

  /// fit() without a test set.
  template <class Model, Optimizer Opt, class Data, Callback... Callbacks>
  FitResult fit(Model& model, const Opt& opt, TrainState<Opt, memory_space>& state, const Data& train,
                Callbacks&... callbacks) {
    return fit(model, opt, state, train, static_cast<const Data*>(nullptr), callbacks...);
  }

  /**
   * Mean loss and accuracy of `model` on `data`, split into evaluation micro-batches across ranks and
   * combined in micro-batch order, so the numbers do not depend on the rank count. Collective.
   */
  template <class Model, class Data>
  EvalMetrics evaluate(Model& model, const Data& data) {
    validate_for(model, data, "evaluation");
    const long n = static_cast<long>(data.size());
    const long m = options_.eval_micro_batch;
    const long M = (n + m - 1) / m;  // ranks beyond M own no evaluation micro-batch
    ensure_eval_buffers(model, m);
    const MicroBatchRange mine = par_.micro_batch_range(M);
    Kokkos::View<double*, Kokkos::HostSpace> loss("reprosgd::eval_loss", mine.size()), corr("reprosgd::eval_correct", mine.size());
    Kokkos::View<double*, Kokkos::HostSpace> all_loss("reprosgd::eval_all_loss", M), all_corr("reprosgd::eval_all_correct", M);
    auto& ws = model_ws<Model>(*eval_workspace_);
    std::swap(workspace_, eval_workspace_);  // gather()/compute_loss() use workspace_
    for (long u = mine.begin; u < mine.end; ++u) {
      const long rows = (u + 1) * m <= n ? m : n - u * m;
      gather(data, std::nullopt, u * m, rows);
      LayerContext<execution_space, Rng> ctx{par_.space(), rng_, 0, 0, static_cast<std::uint64_t>(u * m), false};
      forward(model, ctx, ws, rows);
      compute_loss(rows, 0.0f, false);
      sum_rows(rows, loss(u - mine.begin), corr(u - mine.begin));
    }
    std::swap(workspace_, eval_workspace_);
    par_.allgather_micro_batches(loss, all_loss, M);
    par_.allgather_micro_batches(corr, all_corr, M);
    EvalMetrics em;
    double loss_sum = 0.0, correct = 0.0;
    for (long u = 0; u < M; ++u) {
      loss_sum += all_loss(u);
      correct += all_corr(u);
    }
    em.count = static_cast<std::uint64_t>(n);
    em.correct = static_cast<std::uint64_t>(correct);
    em.loss = loss_sum / static_cast<double>(n);
    em.accuracy = correct / static_cast<double>(n);
    return em;
  }

 private:
  // Type-erased holder of the model's workspace so the Trainer is not templated on the model.
  struct WorkspaceBase {
    virtual ~WorkspaceBase() = default;
    Matrix<memory_space> input;
    Kokkos::View<std::int32_t*, memory_space> labels;
    Kokkos::View<float*, memory_space> row_loss;
    Kokkos::View<std::int32_t*, memory_space> row_correct;
    Matrix<memory_space> output, grad_out;
    long rows = 0;
    long params = 0;
  };
  template <class Model>
  struct ModelWorkspace final : WorkspaceBase {
    typename Model::Workspace model;
  };

  template <class Model>
  static std::unique_ptr<WorkspaceBase> make_workspace(const Model& model, long rows) {
    auto w = std::make_unique<ModelWorkspace<Model>>();
    w->model = model.make_workspace(rows);
    w->input = w->model.act.front();
    w->output = w->model.act.back();
    w->grad_out = w->model.grad_out;
    w->labels = Kokkos::View<std::int32_t*, memory_space>("reprosgd::labels", rows);
    w->row_loss = Kokkos::View<float*, memory_space>("reprosgd::row_loss", rows);
    w->row_correct = Kokkos::View<std::int32_t*, memory_space>("reprosgd::row_correct", rows);
    w->rows = rows;
    w->params = static_cast<long>(model.parameter_count());
    return w;
  }

  // The step's gradient sum. A shard's rows are reduced over the blocks of the whole model's
  // parameter vector (grad_blocks_), never over the shard's own buffer: which elements share a
  // block exponent, and so every rounding, is then the one-process run's on every grid
  // (docs/reproducibility.md, "Every reduction over the canonical layout").
  ReductionResult reduce_gradients(long M) {
    if constexpr (ShardedParallelism<Par> && requires {
                    reduction_.reduce(par_, grads_, M, grad_sum_, grad_blocks_, par_.model_group().parallelism());
                  }) {
      return reduction_.reduce(par_, grads_, M, grad_sum_, grad_blocks_, par_.model_group().parallelism());
    } else {
      static_assert(!ShardedParallelism<Par> || !reduction_type::rank_independent,
                    "reprosgd::Trainer: a rank-independent reduction under model parallelism must reduce a shard "
                    "over the whole model's blocks (reduce(par, rows, M, sum, CanonicalBlocks, group), as Exact does)");
      return reduction_.reduce(par_, grads_, M, grad_sum_);
    }
  }
  // Where this rank's parameters lie in the whole model's vector (one run for a whole model).
  template <class Model>
  static CanonicalBlocks<memory_space> gradient_blocks(const Model& model) {
    if constexpr (requires { model.canonical_runs(model.model_rank()); }) {
      const auto runs = model.canonical_runs(model.model_rank());
      return {std::span<const CanonicalRun>(runs), model.canonical_parameter_count()};
    } else {
      const CanonicalRun whole{0, 0, model.parameter_count()};
      return {std::span<const CanonicalRun>(&whole, 1), model.parameter_count()};
    }
  }

  template <class Model>
  void ensure_step_buffers(const Model& model, long k, long n_params, long m) {
    if (!workspace_ || workspace_->rows != m || workspace_->params != n_params ||
        !dynamic_cast<ModelWorkspace<Model>*>(workspace_.get()))
      workspace_ = make_workspace(model, m);
    if (static_cast<long>(grads_.extent(0)) != k || static_cast<long>(grads_.extent(1)) != n_params) {
      grads_ = Matrix<memory_space>();
      grads_ = Matrix<memory_space>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::grads"), k, n_params);
      grad_sum_ = Buffer<memory_space>("reprosgd::grad_sum", n_params);
    }
  }
  template <class Model>
  void ensure_eval_buffers(const Model& model, long m) {
    if (!eval_workspace_ || eval_workspace_->rows != m ||
        eval_workspace_->params != static_cast<long>(model.parameter_count()) ||
        !dynamic_cast<ModelWorkspace<Model>*>(eval_workspace_.get()))
      eval_workspace_ = make_workspace(model, m);
  }

  template <class Model>
  static typename Model::Workspace& model_ws(WorkspaceBase& w) {
    return static_cast<ModelWorkspace<Model>&>(w).model;
  }

  template <class Model, class Data>
  void validate_for(const Model& model, const Data& data, const char* what) const {
    if (data.feature_count() != model.input_width())
      throw config_error(std::string("reprosgd::Trainer: the ") + what + " data has " +
                         std::to_string(data.feature_count()) + " features but the model's first layer expects " +
                         std::to_string(model.input_width()));
    if (data.num_classes > model.output_width())
      throw config_error(std::string("reprosgd::Trainer: the ") + what + " data has " +
                         std::to_string(data.num_classes) + " classes but the model has " +
                         std::to_string(model.output_width()) + " outputs");
    if (data.size() == 0) throw config_error(std::string("reprosgd::Trainer: the ") + what + " data set is empty");
  }

  // Copy rows [first, first+rows) of the epoch order into the input micro-batch.
  template <class Data>
  void gather(const Data& data, const std::optional<KeyedPermutation>& order, long first, long rows) {
    const auto x = data.features;
    const auto y = data.labels;
    const auto in = workspace_->input;
    const auto lab = workspace_->labels;
    const long f = static_cast<long>(x.extent(1));
    const bool shuffled = order.has_value();
    const KeyedPermutation perm = shuffled ? *order : KeyedPermutation(0, 0, 1);
    // One thread per row: the permutation (a few Philox calls) is evaluated once per sample.
    Kokkos::parallel_for(
        "reprosgd::Trainer::gather", Kokkos::RangePolicy<execution_space>(par_.space(), 0, rows), KOKKOS_LAMBDA(const long r) {
          const long idx = shuffled ? static_cast<long>(perm(static_cast<std::uint64_t>(first + r))) : first + r;
          for (long j = 0; j < f; ++j) in(r, j) = x(idx, j);
          lab(r) = y(idx);
        });
  }

  void compute_loss(long rows, float scale, bool want_grad) {
    auto& w = *workspace_;
    const MatrixRef<memory_space> out(w.output.data(), rows, w.output.extent(1));
    const MatrixRef<memory_space> grad(w.grad_out.data(), want_grad ? rows : 0, w.grad_out.extent(1));
    if (options_.loss == LossKind::softmax_cross_entropy)
      softmax_cross_entropy(par_.space(), out, w.labels, rows, scale, grad, w.row_loss, w.row_correct);
    else
      mse_one_hot(par_.space(), out, w.labels, rows, scale, grad, w.row_loss, w.row_correct);
  }

  // Loss and correct count of a micro-batch, summed on the host in row order.
  void sum_rows(long rows, double& loss, double& correct) {
    auto& w = *workspace_;
    if (static_cast<long>(host_loss_.extent(0)) < w.rows) {
      host_loss_ = Kokkos::View<float*, Kokkos::HostSpace>("reprosgd::host_loss", w.rows);
      host_correct_ = Kokkos::View<std::int32_t*, Kokkos::HostSpace>("reprosgd::host_correct", w.rows);
    }
    Kokkos::deep_copy(Kokkos::subview(host_loss_, Kokkos::make_pair(0L, w.rows)), w.row_loss);
    Kokkos::deep_copy(Kokkos::subview(host_correct_, Kokkos::make_pair(0L, w.rows)), w.row_correct);
    double l = 0.0, c = 0.0;
    for (long i = 0; i < rows; ++i) {
      l += static_cast<double>(host_loss_(i));
      c += host_correct_(i);
    }
    loss = l;
    correct = c;
  }

  template <Optimizer Opt>
  struct Staging {
    Buffer<memory_space> params;
    typename Opt::template state_type<memory_space> state;
    template <class Model>
    Staging(const Model& model, const Opt& opt)
        : params("reprosgd::Trainer::staging_params", canonical_count(model)),
          state(opt.template init<memory_space>(canonical_count(model))) {}
    template <class Extra>
    auto payload(Extra& extra) {
      return detail::TrainingPayload<Buffer<memory_space>, decltype(state), Extra>{&params, &state, &extra, {}};
    }
  };
  // Install verified whole-model values: a shard takes its own runs of them.
  template <Optimizer Opt, class Model>
  static void commit(Staging<Opt>& staging, std::uint64_t step, Model& model, const Opt& opt,
                     TrainState<Opt, memory_space>& state) {
    if (!is_shard(model)) {
      Kokkos::deep_copy(model.parameters(), staging.params);
      state.optimizer = std::move(staging.state);
    } else {
      auto local = opt.template init<memory_space>(model.parameter_count());
      const auto runs = model.canonical_runs(model.model_rank());
      take_shard(runs, staging.params, model.parameters());
      visit_pair(local, staging.state, [&](auto& mine, const auto& whole) {
        if constexpr (Kokkos::is_view<std::remove_cvref_t<decltype(mine)>>::value) {
          if (mine.extent(0) > 0) take_shard(runs, whole, mine);
        } else {
          mine = whole;
        }
      });
      state.optimizer = std::move(local);
    }
    state.step = step;
  }

  // The parameters and optimizer state of the whole model: views of the live ones for a whole
  // model, gathered from the model group's shards otherwise (valid on model rank 0).
  template <class State>
  struct Whole {
    Buffer<memory_space> params;
    State state;
  };
  template <class Model, Optimizer Opt>
  Whole<typename Opt::template state_type<memory_space>> canonical(const Model& model, const TrainState<Opt, memory_space>& state) {
    if (!is_shard(model)) return {model.parameters(), state.optimizer};
    if constexpr (ShardedParallelism<Par>) {
      auto& group = par_.model_group();
      const int p = model.model_size();
      std::vector<std::vector<typename Model::Run>> runs(static_cast<std::size_t>(p));
      std::vector<long> counts(static_cast<std::size_t>(p), 0);
      for (int q = 0; q < p; ++q) {
        runs[static_cast<std::size_t>(q)] = model.canonical_runs(q);
        for (const auto& r : runs[static_cast<std::size_t>(q)]) counts[static_cast<std::size_t>(q)] += static_cast<long>(r.length);
      }
      long total = 0;
      for (long c : counts) total += c;
      const std::size_t n = model.canonical_parameter_count();
      const bool root = group.model_rank() == 0;
      // The receive buffer of the gathers, kept for the next checkpoint or fingerprint (model
      // rank 0 only; its size, the whole model's parameter count, changes with the model only).
      const long need = root ? total : 0;
      if (static_cast<long>(gathered_.extent(0)) != need)
        gathered_ = Kokkos::View<float*, Kokkos::HostSpace>("reprosgd::Trainer::gathered", need);
      const auto all = gathered_;
      auto gather = [&](const auto& local, const auto& whole) {
        Kokkos::fence();
        group.gather_to_root(local.data(), std::span<const long>(counts), all.data());
        if (!root) return;
        long at = 0;
        for (int q = 0; q < p; ++q) {
          for (const auto& r : runs[static_cast<std::size_t>(q)])
            for (std::size_t e = 0; e < r.length; ++e) whole(r.canonical + e) = all(at + static_cast<long>(r.local + e));
          at += counts[static_cast<std::size_t>(q)];
        }
      };
      Whole<typename Opt::template state_type<memory_space>> w{Buffer<memory_space>("reprosgd::Trainer::whole", n),
                                                                state.optimizer};
      gather(model.parameters(), w.params);
      visit_pair(w.state, state.optimizer, [&](auto& whole, const auto& mine) {
        if constexpr (Kokkos::is_view<std::remove_cvref_t<decltype(mine)>>::value) {
          if (mine.extent(0) == 0) return;
          whole = std::remove_cvref_t<decltype(whole)>("reprosgd::Trainer::whole_state", n);
          gather(mine, whole);
        }
      });
      return w;
    } else {
      throw config_error("reprosgd::Trainer: the model is sharded but the parallelism policy is not model-parallel");
    }
  }
  // Whether this rank's canonical() result is valid (it writes checkpoints and fingerprints).
  template <class Model>
  bool holds_canonical(const Model& model) const {
    if constexpr (ShardedParallelism<Par>) return !is_shard(model) || model.model_rank() == 0;
    return true;
  }
  bool writes_checkpoints() {
    if constexpr (ShardedParallelism<Par>) return par_.world_rank() == 0;
    return par_.rank() == 0;
  }
  // Make the model this rank's shard under a model-parallel policy (nothing otherwise). Not collective.
  template <class Model>
  void shard(Model& model) {
    if constexpr (ShardedParallelism<Par>) {
      const int q = par_.model_group().model_rank(), p = par_.model_group().model_size();
      if (model.model_rank() != q || model.model_size() != p) model.shard(q, p);
    }
  }
  template <class Model, Optimizer Opt>
  void check_sharded(Model& model, const TrainState<Opt, memory_space>& state) {
    int q = 0, p = 1;
    if constexpr (ShardedParallelism<Par>) {
      q = par_.model_group().model_rank();
      p = par_.model_group().model_size();
    }
    bool ok = true;
    if constexpr (requires { model.model_size(); }) ok = model.model_rank() == q && model.model_size() == p;
    bool state_ok = true;
    state.optimizer.visit([&](const char*, const auto& x) {
      if constexpr (Kokkos::is_view<std::remove_cvref_t<decltype(x)>>::value)
        state_ok = state_ok && (x.extent(0) == 0 || x.extent(0) == model.parameter_count());
    });
    if (!agree_everywhere(ok && state_ok))
      throw config_error(std::string("reprosgd::Trainer::fit: ") +
                         (!ok ? "the model is not this rank's shard of the model group (create the state with "
                                "start(), resume() or load_checkpoint() of this Trainer)"
                              : !state_ok ? "the optimizer state does not match the model's parameters (create it "
                                            "with start(), resume() or load_checkpoint() of this Trainer)"
                                          : "another rank's model or optimizer state is not its shard"));
  }
  template <class Model>
  static bool is_shard(const Model& model) {
    if constexpr (requires { model.model_size(); }) return model.model_size() > 1;
    return false;
  }
  template <class Model>
  static std::size_t canonical_count(const Model& model) {
    if constexpr (requires { model.canonical_parameter_count(); }) return model.canonical_parameter_count();
    return model.parameter_count();
  }
  // Copy a shard's runs out of a whole-model buffer (host-accessible memory).
  template <class Runs, class Whole, class Local>
  static void take_shard(const Runs& runs, const Whole& whole, const Local& local) {
    Kokkos::fence();
    for (const auto& r : runs)
      for (std::size_t e = 0; e < r.length; ++e) local(r.local + e) = whole(r.canonical + e);
  }
  // Visit two states of one type element by element (same order and types by construction).
  template <class S, class F>
  static void visit_pair(S& a, const S& b, F&& f) {
    std::vector<const void*> elements;
    b.visit([&](const char*, const auto& x) { elements.push_back(&x); });
    std::size_t i = 0;
    a.visit([&](const char*, auto& x) { f(x, *static_cast<const std::remove_cvref_t<decltype(x)>*>(elements[i++])); });
  }

  template <class Model, class Ctx, class Ws>
  void forward(const Model& model, const Ctx& ctx, Ws& ws, long rows) {
    if constexpr (ShardedParallelism<Par>)
      model.forward(ctx, ws, rows, par_.model_group());
    else
      model.forward(ctx, ws, rows);
  }
  template <class Model, class Ctx, class Ws, class Row>
  void backward(const Model& model, const Ctx& ctx, Ws& ws, long rows, const Row& row) {
    if constexpr (ShardedParallelism<Par>)
      model.backward(ctx, ws, rows, row, par_.model_group());
    else
      model.backward(ctx, ws, rows, row);
  }

  // Saving only reads through these pointers (TrainingPayload::save is const).
  template <class W, class Extra>
  static auto payload_of(const W& whole, const Extra& extra) {
    using P = std::remove_cvref_t<decltype(whole.params)>;
    using S = std::remove_cvref_t<decltype(whole.state)>;
    return detail::TrainingPayload<P, S, Extra>{const_cast<P*>(&whole.params), const_cast<S*>(&whole.state),
                                                const_cast<Extra*>(&extra), {}};
  }
  template <class Model, Optimizer Opt, class Data>
  ConfigDescription config_of(const Model& model, const Opt& opt, const Data& train) const {
    return ConfigDescription(describe(model, opt, train));
  }
  template <class Model, Optimizer Opt, class Data>
  SnapshotInfo snapshot_info(const Model& model, const Opt& opt, const TrainState<Opt, memory_space>& state,
                             const Data& train) const {
    SnapshotInfo info;
    info.config = config_of(model, opt, train);
    info.step = state.step;
    const long spe = steps_per_epoch(train.size());
    info.epoch = spe > 0 ? state.step / static_cast<std::uint64_t>(spe) : 0;
    info.position_in_epoch = spe > 0 ? (state.step % static_cast<std::uint64_t>(spe)) * static_cast<std::uint64_t>(options_.global_batch) : 0;
    return info;
  }

  // True when `value` is the same on every rank (one integer max all-reduce of 16-bit pieces and
  // their negations).
  bool same_on_all_ranks(std::uint64_t value) {
    auto& all = world();
    if (all.size() == 1) return true;
    Kokkos::View<std::int32_t*, Kokkos::HostSpace> pieces("reprosgd::same_on_all_ranks", 8);
    for (int i = 0; i < 4; ++i) {
      pieces(i) = static_cast<std::int32_t>((value >> (16 * i)) & 0xFFFFu);
      pieces(4 + i) = -pieces(i);
    }
    all.allreduce_max(pieces);
    bool same = true;
    for (int i = 0; i < 4; ++i) same = same && pieces(i) == -pieces(4 + i);
    return same;
  }

  // Every rank of the job: the policy itself, or a model-parallel policy's whole grid.
  auto& world() {
    if constexpr (ShardedParallelism<Par>)
      return par_.world();
    else
      return par_;
  }
  bool agree_everywhere(bool flag) { return world().agree(flag); }

  // Run a local check on every rank; if it failed anywhere, throw on every rank: the local error
  // where it failed, a config_error naming the cause elsewhere.
  template <class F>
  void agreed(const char* who, F&& check) {
    std::exception_ptr local;
    try {
      check();
    } catch (...) {
      local = std::current_exception();
    }
    if (par_.agree(!local)) return;
    if (local) std::rethrow_exception(local);
    throw config_error(std::string(who) + ": another rank found invalid input (see its message)");
  }

  // All ranks must train the same configuration: compare a 64-bit hash of its description with
  // one integer max all-reduce (the hash and its negation, in 16-bit pieces so negation is exact).
  void check_same_configuration(const std::vector<std::pair<std::string, std::string>>& config, long total) {
    if (world().size() == 1) return;
    std::string text;
    for (const auto& [k, v] : config) text += k + "=" + v + "\n";
    text += "total_steps=" + std::to_string(total) + "\n";
    const std::uint64_t h = XXH3_64bits(text.data(), text.size());
    const bool same = same_on_all_ranks(h);
    if (!same) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
      throw config_error("reprosgd::Trainer::fit: the ranks do not train the same configuration (layers, optimizer, "
                         "batch sizes, seed, schedule, data shape or step count differ); this rank's configuration "
                         "hash is " + std::string(buf) + " (rank " + std::to_string(par_.rank()) + ")");
    }
  }

  struct StepRecord {
    std::uint64_t step;
    double loss, accuracy;
  };

  // A failure being recovered from: when it was detected and what is known of it so far.
  struct Recovery {
    std::chrono::steady_clock::time_point detected;
    FailureEvent event;
  };

  static constexpr int restart_code() noexcept {
    if constexpr (requires { Fault::exit_code; })
      return Fault::exit_code;
    else
      return restart_exit_code;
  }

  /**
   * ShrinkAndContinue after process_failure, on every survivor: shrink to the survivors (again if
   * more ranks die meanwhile), then check that every survivor stands at the same step and stage —
   * true by construction, since an update is applied only after an agreement and every collective
   * fails on all survivors together; a violation is a bug and is reported, never trained through.
   * Fewer survivors than options().min_ranks: save a checkpoint of the (consistent) state, if a
   * checkpoint directory is set, and end with process_failure.
   */
  template <class Model, Optimizer Opt, class Data>
  void recover_from_failure(Recovery& recovery, std::uint64_t step, std::uint64_t stage,
                            std::optional<CheckpointManager<Ckpt>>& checkpoints, Model& model, const Opt& opt,
                            TrainState<Opt, memory_space>& state, const Data& train)
    requires RecoverableParallelism<Par>
  {
    FailureEvent& event = recovery.event;
    if (event.old_size == 0) {
      event.old_size = world().size();
      event.step = step;
    }
    const auto repair_start = std::chrono::steady_clock::now();
    for (;;) {
      try {
        const RecoveryReport report = par_.recover();
        event.lost_ranks.insert(event.lost_ranks.end(), report.lost_original_ranks.begin(),
                                report.lost_original_ranks.end());
        const std::uint64_t where = step * 8 + stage;
        const std::uint64_t lowest = par_.agree_min(where), highest = ~par_.agree_min(~where);
        if (lowest != where || highest != where)
          throw comm_error("reprosgd::Trainer::fit: after losing ranks the survivors stand at different steps (" +
                           std::to_string(lowest / 8) + " to " + std::to_string(highest / 8) +
                           "); this is a bug in the fault-tolerance protocol: the run cannot continue reproducibly");
        if constexpr (buddy_snapshots) restore_shards(event, step, checkpoints, model, opt, state, train);
        break;
      } catch (const process_failure&) {
        continue;  // another rank died during the repair: repair again
      }
    }
    std::sort(event.lost_ranks.begin(), event.lost_ranks.end());
    event.new_size = world().size();
    event.new_rank = world_rank();
    event.shrink_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - repair_start).count();
    if (world().size() < options_.min_ranks) {
      std::string saved = "no checkpoint directory is set";
      if (checkpoints) {
        save_during_fit(*checkpoints, model, opt, state, train);
        saved = "the state after step " + std::to_string(state.step) + " is checkpointed in " +
                checkpoints->directory().string();
      }
      throw process_failure("reprosgd::Trainer::fit: lost rank(s) " + detail::rank_list(event.lost_ranks) + " at step " +
                                std::to_string(step) + "; " + std::to_string(world().size()) +
                                " rank(s) survive, fewer than min_ranks " + std::to_string(options_.min_ranks) + "; " +
                                saved,
                            event.lost_ranks);
    }
  }

  int world_rank() {
    if constexpr (ShardedParallelism<Par>)
      return par_.world_rank();
    else
      return par_.rank();
  }

  // This rank's shard as bytes, into `out` (resized to fit, written in place): its parameters,
  // then every optimizer state element in visit() order (buffers' floats, scalars' bytes).
  // Host-accessible memory.
  template <class Model, Optimizer Opt>
  static void shard_bytes(const Model& model, const TrainState<Opt, memory_space>& state, std::vector<std::byte>& out) {
    Kokkos::fence();
    std::size_t bytes = model.parameter_count() * sizeof(float);
    state.optimizer.visit([&](const char*, const auto& x) {
      if constexpr (Kokkos::is_view<std::remove_cvref_t<decltype(x)>>::value)
        bytes += x.extent(0) * sizeof(float);
      else
        bytes += sizeof x;
    });
    out.resize(bytes);
    std::size_t at = 0;
    auto put = [&](const void* p, std::size_t n) {
      if (n > 0) std::memcpy(out.data() + at, p, n);
      at += n;
    };
    put(model.parameters().data(), model.parameter_count() * sizeof(float));
    state.optimizer.visit([&](const char*, const auto& x) {
      if constexpr (Kokkos::is_view<std::remove_cvref_t<decltype(x)>>::value)
        put(x.data(), x.extent(0) * sizeof(float));
      else
        put(&x, sizeof x);
    });
  }

  // Place the shard bytes of model rank q (runs: its canonical_runs) into whole-model staging.
  template <class Runs, class StagingT>
  static void place_shard(const std::vector<std::byte>& bytes, const Runs& runs, StagingT& staging) {
    std::size_t n_local = 0, at = 0;
    for (const auto& r : runs) n_local += r.length;
    auto floats = [&](const auto& whole) {
      if (at + n_local * sizeof(float) > bytes.size()) throw comm_error("reprosgd::Trainer: a buddy snapshot is truncated");
      for (const auto& r : runs) std::memcpy(whole.data() + r.canonical, bytes.data() + at + r.local * sizeof(float), r.length * sizeof(float));
      at += n_local * sizeof(float);
    };
    floats(staging.params);
    staging.state.visit([&](const char*, auto& x) {
      if constexpr (Kokkos::is_view<std::remove_cvref_t<decltype(x)>>::value) {
        if (x.extent(0) > 0) floats(x);
      } else {
        if (at + sizeof x > bytes.size()) throw comm_error("reprosgd::Trainer: a buddy snapshot is truncated");
        std::memcpy(&x, bytes.data() + at, sizeof x);
        at += sizeof x;
      }
    });
    if (at != bytes.size()) throw comm_error("reprosgd::Trainer: a buddy snapshot has an unexpected size");
  }

#if REPROSGD_HAS_MPI
  // Snapshot every rank's shard to its buddy (collective over the whole grid). The new copies
  // replace the old ones only once every rank has them (an agreement), so a failure during the
  // refresh leaves every survivor with the previous snapshot, all of one step. The shard is
  // serialised straight into the store's pending copy (no temporary); the commit frees the
  // replaced snapshot.
  template <class Model, Optimizer Opt>
  void refresh_buddies(const Model& model, const TrainState<Opt, memory_space>& state) {
    auto& w = world();
    shard_bytes(model, state, buddies_.staging());
    buddies_.prepare_staged(w.comm(), state.step,
                            [&w](int rc, const char* who, const char* call) { w.check(rc, who, call); });
    (void)par_.step_completed_everywhere(true);  // throws on every rank unless all prepared
    buddies_.commit();
    buddy_model_size_ = model.model_size();
  }

  // After a shrink: rebuild the whole model at the buddy snapshot's step from the survivors'
  // copies (a lost shard from its buddy, or from another replica at the same model position),
  // re-shard it over the new grid, and snapshot again; when a shard and all its copies are
  // gone, resume from the newest disk checkpoint instead, and say so.
  template <class Model, Optimizer Opt, class Data>
  void restore_shards(FailureEvent& event, std::uint64_t step, std::optional<CheckpointManager<Ckpt>>& checkpoints,
                      Model& model, const Opt& opt, TrainState<Opt, memory_space>& state, const Data& train) {
    auto& w = world();
    BuddyRecovery rec = buddies_.recover(w.comm(), [&w](int rc, const char* who, const char* call) { w.check(rc, who, call); });
    const int members = static_cast<int>(rec.shards.size()), pm = buddy_model_size_;
    bool complete = rec.missing.empty();
    const bool from_replicas = !complete;
    if (!complete) {
      complete = true;
      for (int id : rec.missing) {
        for (int other = id % pm; other < members; other += pm)
          if (!rec.shards[static_cast<std::size_t>(other)].empty()) {
            rec.shards[static_cast<std::size_t>(id)] = rec.shards[static_cast<std::size_t>(other)];
            break;
          }
        complete = complete && !rec.shards[static_cast<std::size_t>(id)].empty();
      }
    }
    if (complete) {
      Staging<Opt> staging(model, opt);
      for (int q = 0; q < pm; ++q) place_shard(rec.shards[static_cast<std::size_t>(q)], model.canonical_runs(q, pm), staging);
      shard(model);
      commit(staging, rec.step, model, opt, state);
      event.restored_from = from_replicas ? "replica" : "buddy";
    } else {
      std::string lost;
      for (int id : rec.missing)
        if (rec.shards[static_cast<std::size_t>(id)].empty()) lost += (lost.empty() ? "" : ",") + std::to_string(id);
      const std::string why = "reprosgd::Trainer::fit: the shards of rank(s) " + lost + " were lost together with their buddies' copies";
      if (!checkpoints) throw process_failure(why + " and no checkpoint directory is set to fall back to", event.lost_ranks);
      const ResumeResult r = resume(*checkpoints, model, opt, state, train);
      if (!r.resumed)
        throw process_failure(why + " and " + checkpoints->directory().string() + " holds no usable checkpoint", event.lost_ranks);
      event.restored_from = "checkpoint";
    }
    if (state.step > step) throw comm_error("reprosgd::Trainer::fit: restored a state newer than the failure");
    event.resumed_from = state.step;
    refresh_buddies(model, state);
  }
#endif

  // Write a checkpoint into the manager (save_checkpoint, and fit()'s own with the checkpoint
  // fault-injection point): gather the whole model (model parallel), then rank 0 writes and every
  // rank learns the verdict.
  template <CheckpointFormat F, class Model, Optimizer Opt, class Data, class Extra>
  std::filesystem::path write_checkpoint(CheckpointManager<F>& checkpoints, const Model& model, const Opt& opt,
                                         const TrainState<Opt, memory_space>& state, const Data& train,
                                         const Extra& extra, bool injection_point) {
    const std::uint64_t step = state.step;
    const bool inject =
        injection_point && failures_ && failures_->scheduled(failure_identity_, step, FailurePoint::checkpoint);
    const auto whole = canonical(model, state);
    std::filesystem::path written;
    agreed("reprosgd::Trainer::save_checkpoint", [&] {
      if (!writes_checkpoints()) {
        if (inject) failures_->maybe_fail(failure_identity_, step, FailurePoint::checkpoint);
        return;
      }
      auto payload = payload_of(whole, extra);
      if (inject) payload.after_parameters = [&] { failures_->maybe_fail(failure_identity_, step, FailurePoint::checkpoint); };
      written = checkpoints.save(snapshot_info(model, opt, state, train), payload);
    });
    return written;
  }
  template <class Model, Optimizer Opt, class Data>
  void save_during_fit(CheckpointManager<Ckpt>& checkpoints, const Model& model, const Opt& opt,
                       const TrainState<Opt, memory_space>& state, const Data& train) {
    (void)write_checkpoint(checkpoints, model, opt, state, train, detail::NoExtraState{}, true);
  }

  template <class C>
  static void call_failure(C& c, const FailureEvent& e) {
    if constexpr (FailureCallback<C>) c.on_failure(e);
  }
  template <class C>
  static bool call_step(C& c, const StepMetrics& m) {
    if constexpr (StepCallback<C>) return c.on_step_end(m);
    return false;
  }
  template <class C>
  static bool call_epoch(C& c, const EpochMetrics& m) {
    if constexpr (EpochCallback<C>) return c.on_epoch_end(m);
    return false;
  }

  TrainerOptions options_;
  Par par_;
  Rng rng_{options_.seed};
  reduction_type reduction_{};
  std::shared_ptr<const FailureSchedule> failures_;  // fault injection (tests, demos); null: none
  int failure_identity_ = 0;
  std::unique_ptr<WorkspaceBase> workspace_, eval_workspace_;
#if REPROSGD_HAS_MPI
  BuddyStore buddies_;        // model parallelism under ShrinkAndContinue: the shards' in-memory copies
  int buddy_model_size_ = 1;  // P_model when they were taken
#endif
  Matrix<memory_space> grads_;
  Buffer<memory_space> grad_sum_;
  CanonicalBlocks<memory_space> grad_blocks_;  // sharded models: the reduction's blocks over this rank's shard
  Kokkos::View<float*, Kokkos::HostSpace> gathered_;  // canonical()'s gather buffer (sharded models)
  Kokkos::View<float*, Kokkos::HostSpace> host_loss_;
  Kokkos::View<std::int32_t*, Kokkos::HostSpace> host_correct_;
};

REPROSGD_END_NAMESPACE
