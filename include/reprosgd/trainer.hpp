// SPDX-License-Identifier: BSD-3-Clause
/// @file Trainer: the training loop, composed at compile time from a parallelism policy, an RNG
/// stream, a checkpoint format and a fault policy.
///
/// The Trainer is the top of the library and only composes: the arithmetic of a step
/// (trainer/step.hpp), the canonical <-> shard layout (trainer/sharding.hpp), saves and loads
/// (trainer/checkpointing.hpp), recovery after lost ranks (trainer/recovery.hpp), agreement among
/// ranks (trainer/agreement.hpp) and the plain state (trainer/state.hpp). What is left here is the
/// public API and fit()'s stage machine (docs/architecture.md, "The Trainer").
#pragma once

#include <reprosgd/checkpoint/checkpoint_manager.hpp>
#include <reprosgd/checkpoint/formats.hpp>
#include <reprosgd/concepts/checkpoint_format.hpp>
#include <reprosgd/concepts/failure_injecting.hpp>
#include <reprosgd/concepts/fault_policy.hpp>
#include <reprosgd/concepts/optimizer.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/concepts/reduction.hpp>
#include <reprosgd/concepts/rng_stream.hpp>
#include <reprosgd/data/dataset.hpp>
#include <reprosgd/data/keyed_permutation.hpp>
#include <reprosgd/data/sample_stream.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/fault/policies.hpp>
#include <reprosgd/fingerprint.hpp>
#include <reprosgd/nn/layer_traits.hpp>
#include <reprosgd/rng/philox_stream.hpp>
#include <reprosgd/trainer/agreement.hpp>
#include <reprosgd/trainer/callbacks.hpp>
#include <reprosgd/trainer/checkpointing.hpp>
#include <reprosgd/trainer/fit_run.hpp>
#include <reprosgd/trainer/metrics.hpp>
#include <reprosgd/trainer/recovery.hpp>
#include <reprosgd/trainer/sharding.hpp>
#include <reprosgd/trainer/state.hpp>
#include <reprosgd/trainer/step.hpp>
#include <reprosgd/trainer/trace.hpp>
#include <reprosgd/trainer/write_behind.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

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
  static constexpr bool buddy_snapshots = detail::Recovery<Par, Fault>::buddy_snapshots;
  static_assert(Reduction<reduction_type, Par>, "reprosgd::Trainer: Par::reduction_type is not a Reduction for Par");
  /// Whether Model keeps its parameters where this Trainer's kernels run (BasicSequential's MemorySpace).
  template <class Model>
  static constexpr bool in_my_memory = std::is_same_v<typename Model::memory_space, memory_space>;

  explicit Trainer(TrainerOptions options, Par par = Par{}) : options_(std::move(options)), par_(std::move(par)) {
    if (auto ec = check(options_)) throw config_error(check_message(options_));
  }

  /// CUTLASS-style validation before any collective or kernel: an empty error_code when usable.
  [[nodiscard]] static std::error_code check(const TrainerOptions& o) {
    return check_message(o).empty() ? std::error_code{} : make_error_code(errc::invalid_configuration);
  }
  /// The reason check() fails, or "" when it does not.
  [[nodiscard]] static std::string check_message(const TrainerOptions& o) { return detail::options_problem(o); }

  [[nodiscard]] const TrainerOptions& options() const noexcept { return options_; }
  [[nodiscard]] Par& parallelism() noexcept { return par_; }
  [[nodiscard]] const Rng& rng() const noexcept { return rng_; }

  /// Initialise the model's parameters from the seed and return the fresh optimizer state. With
  /// a model-parallel policy the model is first made this rank's shard (it holds its part only).
  template <class Model, Optimizer Opt>
  [[nodiscard]] TrainState<Opt, memory_space> start(Model& model, const Opt& opt) {
    static_assert(in_my_memory<Model>, "reprosgd::Trainer: the model's parameters must live in the memory space of "
                                       "the policy's execution space (make_sequential<memory_space>(layers...))");
    opt.check();
    TrainState<Opt, memory_space> state = draw_start_state(model, opt);
    if constexpr (buddy_snapshots) recovery_.note_started(reprosgd::fingerprint(model, state.optimizer));
    return state;
  }

  /**
   * The fingerprint of the whole model and optimizer state (reprosgd/fingerprint.hpp) — with a
   * model-parallel policy, of the shards collected into the canonical layout, so it is the same
   * for every grid. The same value on every rank. @collective
   */
  template <class Model, Optimizer Opt>
  [[nodiscard]] Fingerprint fingerprint(Model& model, const TrainState<Opt, memory_space>& state) {
    return sharding_.fingerprint(par_, model, state.optimizer);
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
    return detail::describe_run(options_, Rng::name(), reduction_type::name(), model, opt, train);
  }

  /// The number of steps in one epoch of `train` (incomplete last batches are dropped).
  [[nodiscard]] long steps_per_epoch(std::size_t train_size) const noexcept {
    return detail::steps_per_epoch(options_, train_size);
  }
  /// The total number of steps fit() runs for `train`.
  [[nodiscard]] long total_steps(std::size_t train_size) const noexcept {
    return detail::total_steps(options_, train_size);
  }

  /**
   * Train from state.step until the configured number of steps. Collective.
   *
   * @param test  evaluated at the end of every epoch when non-null and evaluate_each_epoch is set
   * @param callbacks objects with on_step_end / on_epoch_end / on_failure hooks (see Callback)
   * @throws config_error bad shapes or options (before any collective), data_error non-finite data,
   *         numerics_error a NaN/Inf gradient or a diverging loss (on every rank at the same step)
   * @collective @deterministic
   */
  template <class Model, Optimizer Opt, class Data, Callback... Callbacks>
  FitResult fit(Model& model, const Opt& opt, TrainState<Opt, memory_space>& state, const Data& train,
                const Data* test, Callbacks&... callbacks) {
    static_assert(in_my_memory<Model>, "reprosgd::Trainer: the model's parameters must live in the memory space of "
                                       "the policy's execution space (make_sequential<memory_space>(layers...))");
    FitRun run = plan_fit(train);
    if constexpr (RegrowableParallelism<Par>)
      if (par_.has_spares()) return fit_with_spares(run, model, opt, state, train, test, callbacks...);
    return run_fit(run, model, opt, state, train, test, callbacks...);
  }
  /// fit() without a test set.
  template <class Model, Optimizer Opt, class Data, Callback... Callbacks>
  FitResult fit(Model& model, const Opt& opt, TrainState<Opt, memory_space>& state, const Data& train,
                Callbacks&... callbacks) {
    return fit(model, opt, state, train, static_cast<const Data*>(nullptr), callbacks...);
  }

  /**
   * Online training: `steps` steps from state.step on, each on a global batch drawn from the
   * stream as it is now (SampleStream::batch_slots: step s's batch depends on s and on the
   * stream's contents, not on how steps are grouped into calls). Call it between simulation steps.
   * Collective, with the same checks, fault handling and trace as fit(); it writes no checkpoints of
   * its own (save one with save_checkpoint(path, model, opt, state, stream, stream): the stream is
   * then the checkpoint's user state, and a restarted run trains to the same bits).
   *
   * @throws data_error when the stream holds fewer samples than a global batch, config_error as
   *         fit() and for a cosine schedule without total_steps (a stream has no end to count to)
   * @collective @deterministic
   */
  template <class Model, Optimizer Opt, class MemorySpace, Callback... Callbacks>
  FitResult train_steps(Model& model, const Opt& opt, TrainState<Opt, memory_space>& state,
                        SampleStream<MemorySpace>& stream, long steps, Callbacks&... callbacks) {
    if (steps < 1)
      throw config_error("reprosgd::Trainer::train_steps: steps must be at least 1, got " + std::to_string(steps));
    if (options_.schedule.kind == ScheduleKind::cosine && options_.schedule.total_steps == 0)
      throw config_error("reprosgd::Trainer::train_steps: a cosine schedule needs total_steps on a stream (it has "
                         "no epochs to count them from)");
    const StreamBatches<MemorySpace> batches =
        stream.batches(batch_space<MemorySpace>(), state.step, steps, options_.global_batch);
    FitRun run;
    run.B = options_.global_batch;
    run.m = options_.micro_batch;
    run.M = run.B / run.m;
    run.steps_per_epoch = steps;
    run.total = static_cast<long>(state.step) + steps;
    run.stream_first = state.step;
    if constexpr (buddy_snapshots) recovery_.forget_snapshot();
    return run_fit(run, model, opt, state, batches, static_cast<const StreamBatches<MemorySpace>*>(nullptr),
                   callbacks...);
  }

 private:
  // fit()'s stages from `run` on (fit() and train_steps() plan it).
  template <class Model, Optimizer Opt, class Data, class... Callbacks>
  FitResult run_fit(detail::FitRun<Ckpt>& run, Model& model, const Opt& opt, TrainState<Opt, memory_space>& state,
                    const Data& train, const Data* test, Callbacks&... callbacks) {
    // A trace line or a checkpoint may be written behind the training thread: fit() returns, or
    // throws, after it. (A checkpoint write that fails while fit() throws for another reason is
    // not reported: that reason is.)
    struct SettleBehind {
      detail::Tracer<Par>& trace;
      detail::WriteBehind& checkpoint;
      ~SettleBehind() {
        trace.settle();
        checkpoint.forget_failure();
      }
    } settle_behind{trace_, behind_};
    // fit() runs in stages: start (the checks every rank agrees on, the first buddy snapshot),
    // then each step's. A failure (process_failure, thrown on every survivor in the same
    // collective) leaves the stage where it was; after a shrink the survivors redo that stage.
    // The update is applied only after every rank agreed the step's collectives completed, so
    // no survivor is ever a step ahead of another (docs/fault_tolerance.md).
    for (;;) {
      try {
        if (run.stage == Stage::start) start_fit(run, model, opt, state, train, test);
        if (run.stage == Stage::compute) {
          if (static_cast<long>(state.step) >= run.total) break;
          compute_step(run, model, opt, state, train, callbacks...);
          if (run.stage == Stage::compute) continue;  // replaying after a rollback
        }
        if (finish_step(run, model, opt, state, train, test, callbacks...)) break;
      } catch (const process_failure& failure) {
        handle_failure(run, failure, model, opt, state, train);
      }
    }
    trace_.finish(par_);
    return run.result;
  }
  // fit() in a job with spare ranks (RegrowableParallelism). A spare waits until the survivors
  // of a failure recruit it — then it takes part in their recovery, receives the state and trains
  // on from their stage — or until the workers' fit() ends. Every worker's fit() releases the idle
  // spares when it returns (code 0, or 2 after a failure) or throws (code 1: a spare then throws
  // too), so no spare outlives the run.
  template <class Model, Optimizer Opt, class Data, class... Callbacks>
  FitResult fit_with_spares(detail::FitRun<Ckpt>& run, Model& model, const Opt& opt, TrainState<Opt, memory_space>& state,
                            const Data& train, const Data* test, Callbacks&... callbacks)
    requires RegrowableParallelism<Par>
  {
    // Refused alike on every rank (the same options), before any release message exists: a spare
    // that throws here never reads one, and an unread message hangs MPI_Finalize.
    if (!options_.trace.empty() || options_.dump_step >= 0)
      throw config_error("reprosgd::Trainer::fit: trace and dump_step are not available in a job with spare ranks (a "
                         "recruited spare joins mid-run, after the trace began); trace the same run without spares: "
                         "the bits are the same");
    // The code the spares are released with: 0 completed, 2 completed after a failure, 1 ended
    // with an exception that is not ReproSGD's, release_error_base + its errc for one that is (a
    // spare then leaves with an error of the same kind: the job's exit status is the same
    // whichever rank ends first).
    struct ReleaseSpares {
      Par& par;
      int code = 1;
      ~ReleaseSpares() { par.release_spares(code); }
    } release{par_};
    if (par_.spare()) {
      if constexpr (requires { par_.set_max_replicas(run.M); }) par_.set_max_replicas(run.M);
      std::optional<RecoveryReport> recruited = par_.wait_for_work();
      if (!recruited) {
        const int code = par_.release_code();
        const std::string what = "reprosgd::Trainer::fit: the workers' fit() ended with an error; this spare rank was "
                                 "not needed and leaves with it";
        if (code > release_error_base) detail::throw_error_of_kind(static_cast<errc>(code - release_error_base), what, -1);
        if (code == 1) throw comm_error(what);
        run.result.idle_spare = true;
        run.result.workers_failed = code == 2;
        return run.result;
      }
      plan_schedule(run, train);
      repair(run, model, opt, state, train, std::move(recruited));
      run.result.steps = state.step;
    }
    FitResult result;
    try {
      result = run_fit(run, model, opt, state, train, test, callbacks...);
    } catch (const error& e) {
      release.code = release_error_base + static_cast<int>(e.code());
      throw;
    }
    release.code = result.failures.empty() ? 0 : 2;  // 2: completed after a failure
    return result;
  }
  static constexpr int release_error_base = 16;

  // Where a stream's batches are gathered: the training space when it can reach the stream's memory.
  template <class MemorySpace>
  auto batch_space() {
    if constexpr (Kokkos::SpaceAccessibility<execution_space, MemorySpace>::accessible)
      return par_.space();
    else
      return typename MemorySpace::execution_space();
  }

 public:

  /**
   * Mean loss and accuracy of `model` on `data`, split into evaluation micro-batches across ranks and
   * combined in micro-batch order, so the numbers do not depend on the rank count. Collective.
   */
  template <class Model, class Data>
  EvalMetrics evaluate(Model& model, const Data& data) {
    detail::check_data_for(model, data, "evaluation", options_.loss);
    return step_.evaluate(par_, rng_, options_.loss, model, data, options_.eval_micro_batch);
  }

  /**
   * Write a checkpoint of the run into `checkpoints` (atomically; the manager keeps the newest K).
   * One rank writes the canonical layout and the others wait for its verdict: a failure throws on
   * every rank. The layout does not depend on ranks, threads or backend.
   * @collective @throws io_error / checkpoint_error
   */
  template <CheckpointFormat F, class Model, Optimizer Opt, class Data, class Extra = detail::NoExtraState>
  std::filesystem::path save_checkpoint(CheckpointManager<F>& checkpoints, const Model& model, const Opt& opt,
                                        const TrainState<Opt, memory_space>& state, const Data& train,
                                        const Extra& extra = {}) {
    return driver().save(checkpoints, snapshot_info(model, opt, state, train), model, state.optimizer, extra);
  }
  /// Write one checkpoint file at `path` (see the overload above). @collective
  template <CheckpointFormat F = Ckpt, class Model, Optimizer Opt, class Data, class Extra = detail::NoExtraState>
  void save_checkpoint(const std::filesystem::path& path, const Model& model, const Opt& opt,
                       const TrainState<Opt, memory_space>& state, const Data& train, const Extra& extra = {}) {
    driver().template save<F>(path, snapshot_info(model, opt, state, train), model, state.optimizer, extra);
  }

  /**
   * Load the checkpoint at `path` into model and state: everything (magic, versions, format,
   * checksums, the configuration field by field against this program's) is verified into staging
   * copies first; the live model and state change only when all of it succeeded, on every rank.
   * `extra`, when given, receives the user's own state saved with save_checkpoint(..., extra).
   * @collective @throws checkpoint_error naming what does not match
   */
  template <CheckpointFormat F = Ckpt, class Model, Optimizer Opt, class Data, class Extra = detail::NoExtraState>
  SnapshotInfo load_checkpoint(const std::filesystem::path& path, Model& model, const Opt& opt,
                               TrainState<Opt, memory_space>& state, const Data& train, Extra&& extra = {}) {
    return driver().template load<F>(path, config_of(model, opt, train), model, opt, state, extra);
  }

  /**
   * Resume from the newest checkpoint in `checkpoints` that verifies, falling back to older ones;
   * the result says which was used and why newer ones were skipped. Nothing usable: the model and
   * state stay as they are (a fresh start). `extra` as in load_checkpoint(). @collective
   */
  template <CheckpointFormat F, class Model, Optimizer Opt, class Data, class Extra = detail::NoExtraState>
  ResumeResult resume(const CheckpointManager<F>& checkpoints, Model& model, const Opt& opt,
                      TrainState<Opt, memory_space>& state, const Data& train, Extra&& extra = {}) {
    return driver().resume(checkpoints, config_of(model, opt, train), model, opt, state, extra);
  }
  /// resume() from the Trainer's checkpoint_dir. @collective
  template <class Model, Optimizer Opt, class Data>
  ResumeResult resume(Model& model, const Opt& opt, TrainState<Opt, memory_space>& state, const Data& train) {
    if (options_.checkpoint_dir.empty()) throw config_error("reprosgd::Trainer::resume: checkpoint_dir is not set");
    return resume(fit_checkpoints(), model, opt, state, train);
  }

 private:
  using Stage = detail::FitStage;
  using FitRun = detail::FitRun<Ckpt>;

  detail::CheckpointDriver<Par> driver() noexcept { return {par_, sharding_}; }
  CheckpointManager<Ckpt> fit_checkpoints() const {
    return CheckpointManager<Ckpt>(options_.checkpoint_dir,
                                   typename CheckpointManager<Ckpt>::Options{
                                       .keep_last = options_.keep_last, .reuse_pruned = options_.checkpoint_reuse});
  }
  template <class Model, Optimizer Opt, class Data>
  ConfigDescription config_of(const Model& model, const Opt& opt, const Data& train) const {
    return ConfigDescription(describe(model, opt, train));
  }
  template <class Model, Optimizer Opt, class Data>
  SnapshotInfo snapshot_info(const Model& model, const Opt& opt, const TrainState<Opt, memory_space>& state,
                             const Data& train) const {
    std::size_t epoch_samples = train.size();
    if constexpr (requires { train.stream_capacity(); }) epoch_samples = 0;  // a stream has no epochs
    return detail::snapshot_info(options_, config_of(model, opt, train), state.step, epoch_samples);
  }

  // fit()'s sizes (local). Any buddy snapshot of an earlier fit() is dropped: this one takes its own.
  template <class Data>
  FitRun plan_fit(const Data& train) {
    FitRun run;
    run.B = options_.global_batch;
    run.m = options_.micro_batch;
    run.M = run.B / run.m;
    run.steps_per_epoch = steps_per_epoch(train.size());
    run.total = total_steps(train.size());
    if (!options_.checkpoint_dir.empty()) run.checkpoints.emplace(fit_checkpoints());
    if constexpr (buddy_snapshots) recovery_.forget_snapshot();
    return run;
  }

  // Stage start: everything fit() checks before its first step — inputs agreed on every rank,
  // the same configuration everywhere, the model this rank's shard, the step's buffers laid out —
  // and the first buddy snapshot. After a failure here the survivors do it all again.
  template <class Model, Optimizer Opt, class Data>
  void start_fit(FitRun& run, Model& model, const Opt& opt, TrainState<Opt, memory_space>& state, const Data& train,
                 const Data* test) {
    if constexpr (FailureInjecting<Par>) par_.failure_point(state.step, FailurePoint::start);
    detail::agreed(par_, "reprosgd::Trainer::fit", [&] {
      detail::check_data_for(model, train, "train", options_.loss);
      if (test) detail::check_data_for(model, *test, "test", options_.loss);
      if (test && test->is_regression() != train.is_regression())
        throw config_error(std::string("reprosgd::Trainer::fit: the train data has ") +
                           (train.is_regression() ? "regression targets" : "class labels") + " but the test data " +
                           (test->is_regression() ? "regression targets" : "class labels"));
      // On the training space when it can read the data, else on the host (host data, device space).
      if constexpr (Kokkos::SpaceAccessibility<execution_space, typename Data::memory_space>::accessible) {
        validate_finite(par_.space(), train);
        if (test) validate_finite(par_.space(), *test);
      } else {
        validate_finite(Kokkos::DefaultHostExecutionSpace(), train);
        if (test) validate_finite(Kokkos::DefaultHostExecutionSpace(), *test);
      }
      opt.check();
    });
    detail::check_same_configuration(par_, describe(model, opt, train), run.total);
    detail::Sharding<Par>::check(par_, model, state.optimizer,
                                 [&](bool ok) { return detail::world_of(par_).agree(ok); });
    if (run.M < par_.size())
      throw config_error("reprosgd::Trainer::fit: " + std::to_string(run.M) + " micro-batches per step (global batch " +
                         std::to_string(run.B) + " / micro-batch " + std::to_string(run.m) + ") but " +
                         std::to_string(par_.size()) + " ranks: every rank needs at least one");
    if (static_cast<long>(train.size()) < run.B)
      throw config_error("reprosgd::Trainer::fit: the training set has " + std::to_string(train.size()) +
                         " samples, fewer than one global batch of " + std::to_string(run.B));
    plan_schedule(run, train);
    lay_out(run, model);
    trace_.start(par_, options_, model, describe(model, opt, train), state.step);
    step_.record_tensors(trace_.records_tensors());
    step_.defer_weight_gradients(options_.defer_weight_gradients);
    dump_ = detail::StepDump(options_.dump_dir, options_.dump_step);
    if (dump_.enabled()) {
      if constexpr (ShardedParallelism<Par>)
        throw config_error("reprosgd::Trainer::fit: dump_step is not available under model parallelism (each rank "
                           "holds a shard; dump the same step from a data-parallel or one-process run: the bits are the same)");
      if (train.is_regression())
        throw config_error("reprosgd::Trainer::fit: dump_step writes class labels; a regression data set's step "
                           "cannot be dumped (compare traces at level tensor instead)");
      if (options_.dump_step < static_cast<long>(state.step) || options_.dump_step >= run.total)
        throw config_error("reprosgd::Trainer::fit: dump_step " + std::to_string(options_.dump_step) +
                           " is not a step this fit() runs (steps " + std::to_string(state.step) + ".." +
                           std::to_string(run.total - 1) + ")");
      detail::agreed(par_, "reprosgd::Trainer::fit", [&] { dump_.prepare(); });
    }
    run.result.steps = state.step;
    if constexpr (buddy_snapshots) {
      recovery_.establish_pristine_start(par_, model, state);
      recovery_.refresh(par_, model, state.optimizer, state.step);
    }
    run.stage = Stage::compute;
  }

  // The start stage's local part: the schedule and the kind of targets (a recruited spare, which
  // joins after the start stage, sets them too).
  template <class Data>
  void plan_schedule(FitRun& run, const Data& train) const {
    run.schedule = options_.schedule;
    if (run.schedule.kind == ScheduleKind::cosine && run.schedule.total_steps == 0) run.schedule.total_steps = run.total;
    run.schedule.check();
    run.regression = train.is_regression();
  }

  // What depends on the rank count; again after a shrink.
  template <class Model>
  void lay_out(const FitRun& run, const Model& model) {
    if constexpr (requires { par_.set_max_replicas(run.M); }) par_.set_max_replicas(run.M);
    step_.lay_out(par_, model, run.M, run.m);
  }

  // Stage compute: this rank's micro-batches, the exact reduction, the metrics, and — once every
  // rank agreed that it completed the step — the update. Then report a recovery, and after a
  // rollback go on replaying (stage compute) or back to the stage the failure interrupted.
  template <class Model, Optimizer Opt, class Data, class... Callbacks>
  void compute_step(FitRun& run, Model& model, const Opt& opt, TrainState<Opt, memory_space>& state,
                    const Data& train, Callbacks&... callbacks) {
    const std::uint64_t step = state.step;
    const auto spe = static_cast<std::uint64_t>(run.steps_per_epoch);
    std::uint64_t epoch = step / spe;
    std::uint64_t position = step % spe;  // the step's batch in the epoch order, or in train_steps()' batches
    if (run.stream_first) {
      if (step < *run.stream_first)  // a rollback past the call's start (its batches are gone)
        throw config_error("reprosgd::Trainer::train_steps: recovery rolled back to step " + std::to_string(step) +
                           ", before this call's first step " + std::to_string(*run.stream_first) +
                           " (keep --buddy-every snapshots within a call)");
      epoch = 0;
      position = step - *run.stream_first;
    }
    if constexpr (FailureInjecting<Par>) par_.failure_point(step, FailurePoint::step);
    if (options_.shuffle && !run.stream_first && (!run.order || run.order->epoch() != epoch))
      run.order.emplace(options_.seed, epoch, static_cast<std::uint64_t>(train.size()));
    step_.compute(par_, rng_, options_.loss, model, train, run.order, step, static_cast<long>(position), run.B, run.m,
                  &dump_);
    trace_.settle();  // the last step's line, computed behind this step's micro-batches, read grad_sum
    const ReductionResult red = step_.reduce(par_, run.M);
    if (dump_.at(step)) {  // the step's files, before its update; a write error ends the run on every rank
      if (detail::Sharding<Par>::writes_checkpoints(par_))
        dump_.finish(model, model.parameters(), step_.grad_sum(), run.M, run.m, step);
      detail::agreed(par_, "reprosgd::Trainer::fit", [&] { dump_.check(); });
    }
    const detail::BatchTotals totals = step_.totals(par_, run.M);
    const StepMetrics sm{step, epoch, spe, static_cast<std::uint64_t>(run.total),
                         totals.loss / static_cast<double>(run.B), totals.correct / static_cast<double>(run.B),
                         run.schedule.lr(opt.base_lr(), step)};
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
    behind_.wait_released();  // a checkpoint written behind this step has read the state it saves
    const execution_space space = par_.space();
    // Running statistics (BatchNorm) are not trained: their new values come from the step's
    // statistics, which the reduced gradient carries, and replace whatever the update writes there.
    constexpr bool statistics = detail::keeps_statistics_v<Model>;
    if constexpr (statistics) model.blend_statistics(space, step_.grad_sum());
    bool updated = false;  // by a step_ranges() that hashed the step's trace fingerprints as it went
    if constexpr (RangedStepOptimizer<Opt> && detail::is_host_space_v<execution_space> && !statistics)
      updated = trace_.update_hashed(par_, model, state.optimizer, step_.grad_sum(), sm.step,
                                     [&](std::span<const ElementRange> ranges, auto after) {
                                       opt.step_ranges(space, state.optimizer, model.parameters(), step_.grad_sum(),
                                                       sm.lr, ranges, after);
                                       space.fence();
                                     });
    if (!updated) opt.step(space, state.optimizer, model.parameters(), step_.grad_sum(), sm.lr);
    if constexpr (statistics) model.commit_statistics(space);
    space.fence();
    ++state.step;
    run.last = sm;
    run.result.steps = state.step;
    run.result.last_step = sm;
    run.epoch_steps.push_back({sm.step, sm.loss, sm.accuracy});
    run.stop = false;
    run.stage = Stage::callbacks;
    if (recovery_.pending()) {
      const FailureEvent event = recovery_.finish(detail::world_rank_of(par_));
      run.result.failures.push_back(event);
      trace_.failure(par_, event);
      (detail::call_kept(run.callback_error, [&] { return detail::call_failure(callbacks, event), false; }), ...);
    }
    if (recovery_.replay_until > 0) {  // a step replayed after a rollback: its other stages ran before the failure
      if (state.step < recovery_.replay_until) {
        run.stage = Stage::compute;
        return;
      }
      recovery_.replay_until = 0;
      run.stage = static_cast<Stage>(recovery_.resume_stage);
    }
  }

  // Stages callbacks, epoch_end, stop_vote and checkpoint of the step just completed. Returns
  // true when fit() stops here.
  template <class Model, Optimizer Opt, class Data, class... Callbacks>
  bool finish_step(FitRun& run, Model& model, const Opt& opt, TrainState<Opt, memory_space>& state, const Data& train,
                   const Data* test, Callbacks&... callbacks) {
    const std::uint64_t done = state.step;  // steps completed, the last one being run.last.step
    const auto spe = static_cast<std::uint64_t>(run.steps_per_epoch);
    if (run.stage == Stage::callbacks) {
      // The step's trace line: written here, once the update is committed on every rank and before
      // anything that can send the survivors of a failure back to an earlier stage, so a replayed
      // step's line appears once.
      if (trace_.enabled()) trace_step(run, model, state);
      ((run.stop = detail::call_kept(run.callback_error, [&] { return detail::call_step_end(callbacks, run.last); }) ||
                   run.stop),
       ...);
      run.stage = Stage::epoch_end;
    }
    if (run.stage == Stage::epoch_end) {
      if (!run.stream_first && run.last.step % spe == spe - 1) end_epoch(run, model, test, callbacks...);
      run.stage = Stage::stop_vote;
    }
    if (run.stage == Stage::stop_vote) {
      // A stop requested on any rank (a callback, e.g. one watching the wall clock, may decide
      // differently on different ranks) stops every rank at the same step — decided before
      // the checkpoint stage, so that all ranks agree on whether this step is checkpointed.
      trace_.check(par_);  // a trace write error ends the run on every rank
      if (options_.stop_after > 0 && static_cast<long>(done) == options_.stop_after) run.stop = true;
      // A callback that threw on some rank stops every rank here. Only a stop costs more
      // agreements: whether a callback threw somewhere, and which kind of error (the smallest).
      const bool threw = run.callback_error != nullptr;
      run.stop = !par_.agree(!(run.stop || threw));
      if (run.stop && run.callback_failure == 0 && !par_.agree(!threw))
        run.callback_failure = detail::agreed_min(par_, callback_failure_kind(run.callback_error), 4);
      run.stage = Stage::checkpoint;
    }
    // run.stage == Stage::checkpoint
    if constexpr (buddy_snapshots)
      if (done % static_cast<std::uint64_t>(options_.buddy_every) == 0) recovery_.refresh(par_, model, state.optimizer, done);
    const bool last = static_cast<long>(done) == run.total;
    const bool due = options_.checkpoint_every > 0 && done % static_cast<std::uint64_t>(options_.checkpoint_every) == 0;
    if (run.checkpoints && (last || run.stop || due))
      save_during_fit(*run.checkpoints, model, opt, state, train, /*wait=*/last || run.stop);
    run.stage = Stage::compute;
    run.result.stopped_early = run.stop;
    // After the checkpoint the stop saved, so that the error loses no training.
    if (run.callback_failure != 0) {
      if (run.callback_error) std::rethrow_exception(run.callback_error);
      const std::string what = "reprosgd::Trainer::fit: a callback failed on another rank after step " +
                               std::to_string(run.last.step) + " (see that rank's message); every rank stops there";
      if (run.callback_failure == callback_failed_other) throw std::runtime_error(what);
      detail::throw_error_of_kind(static_cast<errc>(run.callback_failure), what, static_cast<long long>(run.last.step));
    }
    return run.stop;
  }

  // The kind a callback's error has for agreed_min: its reprosgd::errc, callback_failed_other for
  // any other exception, 15 (above every kind) when there was none.
  static constexpr unsigned callback_failed_other = 14;
  static unsigned callback_failure_kind(const std::exception_ptr& e) {
    if (!e) return 15;
    try {
      std::rethrow_exception(e);
    } catch (const error& known) {
      return static_cast<unsigned>(known.code());
    } catch (...) {
    }
    return callback_failed_other;
  }

  // The epoch's metrics (its steps' mean loss and accuracy, the test set's), then the epoch callbacks.
  template <class Model, class Data, class... Callbacks>
  void end_epoch(FitRun& run, Model& model, const Data* test, Callbacks&... callbacks) {
    EpochMetrics em;
    em.epoch = run.last.epoch;
    em.step = run.last.step + 1;
    std::tie(em.train_loss, em.train_accuracy) = run.epoch_means(run.last.epoch);
    em.regression = run.regression;
    if (test && options_.evaluate_each_epoch) {
      em.evaluated = true;
      em.test = evaluate(model, *test);
      // Close the evaluation's collectives with an agreement before any callback runs.
      if constexpr (RecoverableParallelism<Par>) (void)par_.agree(true);
      trace_.evaluation(par_, em);
    }
    em.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run.epoch_start).count();
    ((run.stop = detail::call_kept(run.callback_error, [&] { return detail::call_epoch_end(callbacks, em); }) || run.stop),
     ...);
    run.result.last_epoch = em;
    run.result.epochs = run.last.epoch + 1;
    run.epoch_steps.clear();
    run.epoch_start = std::chrono::steady_clock::now();
  }

  // The trace line of the step just committed (run.last). Under model parallelism the shards are
  // gathered; with ULFM an agreement closes the gather before the line is written, so survivors
  // that redo this stage after a failure write it once.
  template <class Model, Optimizer Opt>
  void trace_step(const FitRun& run, Model& model, const TrainState<Opt, memory_space>& state) {
    if constexpr (ShardedParallelism<Par> && RecoverableParallelism<Par>) {
      trace_.step(par_, sharding_, model, state.optimizer, step_.grad_sum(), run.last, run.M,
                  step_.first_micro_batch_tensors(), [this] { (void)par_.agree(true); });
    } else {
      trace_.step(par_, sharding_, model, state.optimizer, step_.grad_sum(), run.last, run.M,
                  step_.first_micro_batch_tensors(), [] {});
    }
  }

  // A collective failed in some stage (it may have succeeded elsewhere): act as the fault policy says.
  template <class Model, Optimizer Opt, class Data>
  void handle_failure(FitRun& run, const process_failure& failure, Model& model, const Opt& opt,
                      TrainState<Opt, memory_space>& state, const Data& train) {
    trace_.settle();  // recovery may restore the buffers a trace line is being computed from
    behind_.settle();  // or a checkpoint is being written from, and may read the checkpoint directory
    // Take part in the agreement the others reach next, so all survivors leave the same stage together.
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
      repair(run, model, opt, state, train);
    }
  }

  // ShrinkAndContinue's recovery (trainer/recovery.hpp), on a survivor or on a spare just
  // recruited (`recruited`: its report); then the step's layout for the new group, and after a
  // rollback the steps to replay.
  template <class Model, Optimizer Opt, class Data>
  void repair(FitRun& run, Model& model, const Opt& opt, TrainState<Opt, memory_space>& state, const Data& train,
              std::optional<RecoveryReport> recruited = std::nullopt) {
    const std::string dir = run.checkpoints ? run.checkpoints->directory().string() : std::string();
    auto save = [&]() -> std::string {
      if (!run.checkpoints) return {};
      save_during_fit(*run.checkpoints, model, opt, state, train, /*wait=*/true);
      return dir;
    };
    auto resume_from_disk = [&] { return resume(*run.checkpoints, model, opt, state, train); };
    auto from_seed = [&] { state = draw_start_state(model, opt); };  // on the survivors' grid
    // Newcomers never ran the start stage's configuration check: run it with them.
    auto joined = [&] { detail::check_same_configuration(par_, describe(model, opt, train), run.total); };
    auto stage = static_cast<std::uint64_t>(run.stage);
    const bool rolled_back = recovery_.recover(par_, state.step, stage, options_.min_ranks, model, opt, state, dir, save,
                                               resume_from_disk, from_seed, joined, std::move(recruited));
    run.stage = static_cast<Stage>(stage);
    lay_out(run, model);
    if (rolled_back) {
      run.stage = Stage::compute;
      std::erase_if(run.epoch_steps, [&](const detail::StepRecord& r) { return r.step >= state.step; });
    }
  }

  // start()'s state on the current grid: the model sharded and drawn from the seed (each weight
  // keyed by its place in the whole layer, so the same canonical values on any grid), the
  // optimizer state zero, step 0. Also what a shard lost with every copy comes back from.
  template <class Model, Optimizer Opt>
  TrainState<Opt, memory_space> draw_start_state(Model& model, const Opt& opt) {
    detail::Sharding<Par>::shard(par_, model);
    model.initialize(par_.space(), rng_);
    return {opt.template init<memory_space>(model.parameter_count()), 0};
  }

  // fit()'s own checkpoints: the failure-injection point `checkpoint` fires mid-write. With
  // async_checkpoints the write goes behind training: the previous write's verdict is agreed
  // first (a failure ends the run on every rank here), and with `wait` (fit()'s last checkpoint,
  // the one before an error exit) this one's too, so that it is durable when fit() ends.
  template <class Model, Optimizer Opt, class Data>
  void save_during_fit(CheckpointManager<Ckpt>& checkpoints, const Model& model, const Opt& opt,
                       const TrainState<Opt, memory_space>& state, const Data& train, bool wait) {
    trace_.settle();  // a checkpoint of step s is written after the trace lines of the steps before s
    const std::uint64_t step = state.step;
    if (!options_.async_checkpoints) {
      auto at_write = [this, step] {
        if constexpr (FailureInjecting<Par>) par_.failure_point(step, FailurePoint::checkpoint);
        else (void)this, (void)step;  // used only where a failure can be injected
      };
      (void)driver().save(checkpoints, snapshot_info(model, opt, state, train), model, state.optimizer,
                          detail::NoExtraState{}, at_write);
      return;
    }
    report_write_behind();
    // On the writing rank this runs on the helper thread: die_if_scheduled records nothing.
    auto at_write = [this, step] {
      if constexpr (FailureInjecting<Par>) std::as_const(par_).die_if_scheduled(step, FailurePoint::checkpoint);
      else (void)this, (void)step;  // used only where a failure can be injected
    };
    driver().save_behind(behind_, checkpoints, snapshot_info(model, opt, state, train), model, opt, state.optimizer,
                         at_write);
    if (wait) report_write_behind();
  }

  // The verdict of the checkpoint written behind training, on every rank: the writer's exception
  // where it failed, "another rank found invalid input" elsewhere. @collective
  void report_write_behind() {
    const std::exception_ptr failure = behind_.failure();
    try {
      detail::agreed(par_, "reprosgd::Trainer::save_checkpoint", [&] {
        if (failure) std::rethrow_exception(failure);
      });
    } catch (const process_failure&) {
      throw;  // the stage is redone after the recovery: report it then
    } catch (...) {
      behind_.forget_failure();
      throw;
    }
    behind_.forget_failure();
  }

  static constexpr int restart_code() noexcept {
    if constexpr (requires { Fault::exit_code; })
      return Fault::exit_code;
    else
      return restart_exit_code;
  }

  TrainerOptions options_;
  Par par_;
  Rng rng_{options_.seed};
  detail::StepPipeline<Par, Rng> step_;
  detail::Sharding<Par> sharding_;
  detail::Recovery<Par, Fault> recovery_;
  detail::Tracer<Par> trace_;
  detail::StepDump dump_;
  detail::WriteBehind behind_;  // fit()'s checkpoints written behind training (async_checkpoints)
};

/// A Trainer that continues on the survivors when ranks die (ULFM): the default RNG and
/// checkpoint format with ShrinkAndContinue, e.g. `FaultTolerantTrainer<UlfmDataParallel<>>`.
template <Parallelism Par, CheckpointFormat Ckpt = PortableBinaryFormat>
using FaultTolerantTrainer = Trainer<Par, PhiloxStream, Ckpt, ShrinkAndContinue>;
/// A Trainer that stops with restart_exit_code when ranks die, to be relaunched on the survivors
/// and resume from the newest checkpoint (scripts/relaunch.sh).
template <Parallelism Par, CheckpointFormat Ckpt = PortableBinaryFormat>
using RelaunchedTrainer = Trainer<Par, PhiloxStream, Ckpt, RestartFromCheckpoint>;

REPROSGD_END_NAMESPACE
