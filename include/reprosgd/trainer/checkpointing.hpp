// SPDX-License-Identifier: BSD-3-Clause
/// @file CheckpointDriver: the one path by which a Trainer saves, loads and resumes a run —
/// save_checkpoint(), load_checkpoint(), resume() and fit()'s own checkpoints all go through it.
///
/// Saving: the canonical parameters and optimizer state (Sharding::collect) are written by one
/// rank, atomically, and every rank learns the verdict. Loading: everything (magic, versions,
/// format, checksums, the configuration field by field) is verified into canonical staging first;
/// the live model and state change only when all of it succeeded on every rank
/// (docs/checkpoints.md). The configuration and the header's step and position are the Trainer's
/// to compute; the driver only moves bytes between the model, the state and a file.
#pragma once

#include <reprosgd/checkpoint/checkpoint_manager.hpp>
#include <reprosgd/checkpoint/snapshot.hpp>
#include <reprosgd/checkpoint/view_serialization.hpp>
#include <reprosgd/concepts/checkpoint_format.hpp>
#include <reprosgd/concepts/optimizer.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/trainer/agreement.hpp>
#include <reprosgd/trainer/sharding.hpp>
#include <reprosgd/trainer/state.hpp>
#include <reprosgd/trainer/write_behind.hpp>

#include <cstdint>
#include <filesystem>
#include <type_traits>
#include <utility>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/// The absence of user state in a checkpoint.
struct NoExtraState {
  template <class Archive>
  void serialize(Archive&) {}
};

/// Nothing to do at a point of a checkpoint write.
struct NoWriteHook {
  void operator()() const noexcept {}
};

/**
 * What a checkpoint's payload holds: the parameters, then every optimizer state element in its
 * visit() order, each under its own name (readable in JSON), then the user's own state. Loading
 * writes into the referenced buffers, which are staging copies. `after_parameters` runs mid-write,
 * once the parameters are in the file (a failure-injection point; nothing by default);
 * `after_payload` once everything has been serialised (the buffers are no longer read: a write
 * behind training releases them, WriteBehind).
 */
template <class Params, class State, class Extra = NoExtraState, class Hook = NoWriteHook, class Done = NoWriteHook>
struct TrainingPayload {
  Params* params;
  State* state;
  Extra* extra = nullptr;  ///< the user's own state (any cereal-serializable type), saved last
  Hook after_parameters{};
  Done after_payload{};
  template <class Archive>
  void save(Archive& ar) const {
    ar(cereal::make_nvp("parameters", *params));
    after_parameters();
    state->visit([&](const char* name, const auto& x) { ar(cereal::make_nvp(name, x)); });
    if constexpr (!std::is_same_v<Extra, NoExtraState>) ar(cereal::make_nvp("user", *extra));
    after_payload();
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(cereal::make_nvp("parameters", *params));
    state->visit([&](const char* name, auto& x) { ar(cereal::make_nvp(name, x)); });
    if constexpr (!std::is_same_v<Extra, NoExtraState>) ar(cereal::make_nvp("user", *extra));
  }
};

/// Parameters and optimizer state (a Sharding::Canonical, any memory space) copied into host
/// memory: what a checkpoint written behind training from device memory reads.
template <class Canonical, Optimizer Opt>
auto host_snapshot(const Canonical& canonical, const Opt& opt) {
  using Space = typename std::remove_cvref_t<decltype(canonical.params)>::memory_space;
  struct HostSnapshot {
    Buffer<Kokkos::HostSpace> params;
    typename Opt::template state_type<Kokkos::HostSpace> state;
  } host{Buffer<Kokkos::HostSpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Trainer::host_params"),
                                   canonical.params.extent(0)),
         opt.template init<Kokkos::HostSpace>(0)};
  Kokkos::deep_copy(host.params, canonical.params);
  visit_pair<Space>(host.state, canonical.state, [](auto& h, const auto& d) {
    if constexpr (is_buffer_v<decltype(d)>) {
      h = std::remove_cvref_t<decltype(h)>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Trainer::host_state"),
                                           d.extent(0));
      Kokkos::deep_copy(h, d);
    } else {
      h = d;
    }
  });
  return host;
}

/// Saves, loads and resumes for one Trainer: its policy and its Sharding, by reference, for the
/// duration of one call. Every member is @collective.
template <Parallelism Par>
class CheckpointDriver {
 public:
  using memory_space = typename Par::execution_space::memory_space;

  CheckpointDriver(Par& par, Sharding<Par>& sharding) noexcept : par_(par), sharding_(sharding) {}

  /**
   * Write a checkpoint into `checkpoints` (atomically; the manager keeps the newest K). The
   * writing rank runs `at_write()` once the parameters are in the file, every other rank as the
   * save begins. @throws io_error / checkpoint_error on every rank
   */
  template <CheckpointFormat F, class Model, class State, class Extra, class Hook = NoWriteHook>
  std::filesystem::path save(CheckpointManager<F>& checkpoints, const SnapshotInfo& info, const Model& model,
                             const State& optimizer_state, const Extra& extra, Hook at_write = {}) {
    const auto canonical = sharding_.collect(par_, model, optimizer_state);
    std::filesystem::path written;
    agreed(par_, "reprosgd::Trainer::save_checkpoint", [&] {
      if (!Sharding<Par>::writes_checkpoints(par_)) {
        at_write();
        return;
      }
      written = checkpoints.save(info, payload(canonical, extra, at_write));
    });
    return written;
  }

  /**
   * Hand a checkpoint to `behind`'s helper thread and return (TrainerOptions::async_checkpoints).
   * The canonical state is collected here (a collective under model parallelism); the writing rank
   * posts the write, which reads the live buffers until it releases them (call
   * behind.wait_released() before changing the parameters or the optimizer state) and keeps its
   * failure in `behind`. In a memory space the host cannot read, the state is first copied to the
   * host on this thread, so the helper never touches the device. `at_write` runs as in save(),
   * on the helper thread on the writing rank: it must be safe there. `checkpoints` must outlive
   * the write (behind.settle()).
   */
  template <CheckpointFormat F, class Model, Optimizer Opt, class State, class Hook = NoWriteHook>
  void save_behind(WriteBehind& behind, CheckpointManager<F>& checkpoints, const SnapshotInfo& info,
                   const Model& model, const Opt& opt, const State& optimizer_state, Hook at_write = {}) {
    auto canonical = sharding_.collect(par_, model, optimizer_state);
    if (!Sharding<Par>::writes_checkpoints(par_)) {
      at_write();
      return;
    }
    auto post = [&](auto snapshot) {
      behind.post([&checkpoints, info, snapshot = std::move(snapshot), at_write](WriteBehind::Release release) {
        (void)checkpoints.save(info, payload(snapshot, NoExtraState{}, at_write, release));
      });
    };
    if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, memory_space>::accessible) {
      post(std::move(canonical));
    } else {
      post(host_snapshot(canonical, opt));
    }
  }

  /// Write one checkpoint file at `path`.
  template <CheckpointFormat F, class Model, class State, class Extra>
  void save(const std::filesystem::path& path, const SnapshotInfo& info, const Model& model,
            const State& optimizer_state, const Extra& extra) {
    const auto canonical = sharding_.collect(par_, model, optimizer_state);
    agreed(par_, "reprosgd::Trainer::save_checkpoint", [&] {
      if (Sharding<Par>::writes_checkpoints(par_)) save_snapshot<F>(path, info, payload(canonical, extra, NoWriteHook{}));
    });
  }

  /// Load the checkpoint at `path` (verified against `config`) into model, state and `extra`.
  template <CheckpointFormat F, class Model, Optimizer Opt, class Extra>
  SnapshotInfo load(const std::filesystem::path& path, const ConfigDescription& config, Model& model, const Opt& opt,
                    TrainState<Opt, memory_space>& state, Extra& extra) {
    SnapshotInfo info;
    auto staged = stage("reprosgd::Trainer::load_checkpoint", model, opt, extra,
                        [&](auto& payload) { info = load_snapshot<F>(path, config, payload); });
    Sharding<Par>::install(staged.staging, info.step, model, opt, state);
    extra = std::move(staged.extra);
    return info;
  }

  /// Resume from the newest checkpoint in `checkpoints` that verifies against `config`, falling
  /// back to older ones; nothing usable leaves model and state as they are (a fresh start).
  template <CheckpointFormat F, class Model, Optimizer Opt, class Extra>
  ResumeResult resume(const CheckpointManager<F>& checkpoints, const ConfigDescription& config, Model& model,
                      const Opt& opt, TrainState<Opt, memory_space>& state, Extra& extra) {
    ResumeResult r;
    auto staged = stage("reprosgd::Trainer::resume", model, opt, extra,
                        [&](auto& payload) { r = checkpoints.resume_auto(config, payload); });
    // Every rank must continue from the same step (a rank on another file system could differ).
    if (!same_on_all_ranks(par_, r.resumed ? r.info.step + 1 : 0))
      throw checkpoint_error("reprosgd::Trainer::resume: the ranks found different checkpoints in " +
                             checkpoints.directory().string());
    if (r.resumed) {
      Sharding<Par>::install(staged.staging, r.info.step, model, opt, state);
      extra = std::move(staged.extra);
    }
    return r;
  }

 private:
  // Canonical values and the user's state read into copies, not yet installed.
  template <Optimizer Opt, class Extra>
  struct Staged {
    typename Sharding<Par>::template Staging<Opt> staging;
    Extra extra;
  };
  // Make the model this rank's shard, then let `read` fill staging copies on every rank; throws
  // on every rank unless all of them read and verified everything.
  template <class Model, Optimizer Opt, class Extra, class Read>
  Staged<Opt, Extra> stage(const char* who, Model& model, const Opt& opt, const Extra& extra, Read&& read) {
    Sharding<Par>::shard(par_, model);
    Staged<Opt, Extra> staged{{model, opt}, extra};
    agreed(par_, who, [&] {
      TrainingPayload<Buffer<memory_space>, decltype(staged.staging.state), Extra> payload{
          &staged.staging.params, &staged.staging.state, &staged.extra};
      read(payload);
    });
    return staged;
  }
  // Saving only reads through these pointers (TrainingPayload::save is const).
  template <class C, class Extra, class Hook, class Done = NoWriteHook>
  static auto payload(const C& canonical, const Extra& extra, Hook hook, Done done = {}) {
    using P = std::remove_cvref_t<decltype(canonical.params)>;
    using S = std::remove_cvref_t<decltype(canonical.state)>;
    return TrainingPayload<P, S, Extra, Hook, Done>{const_cast<P*>(&canonical.params), const_cast<S*>(&canonical.state),
                                                    const_cast<Extra*>(&extra), std::move(hook), std::move(done)};
  }

  Par& par_;
  Sharding<Par>& sharding_;
};

}  // namespace detail
REPROSGD_END_NAMESPACE
