// SPDX-License-Identifier: BSD-3-Clause
/// @file Recovery: what a Trainer under ShrinkAndContinue does after ranks die — shrink to the
/// survivors, prove they stand at the same step and stage, restore lost model shards from the
/// in-memory buddy copies (or the newest disk checkpoint), and say which steps to replay.
///
/// It owns the buddy store of a model-parallel run and the bookkeeping of one failure (the event
/// reported to callbacks, the steps to replay and the stage to go back to); the step itself and
/// the checkpoints stay with their own parts, reached through the callables recover() is given.
/// docs/fault_tolerance.md states the protocol; docs/parallelism.md the buddy copies.
#pragma once

#include <reprosgd/checkpoint/checkpoint_manager.hpp>
#include <reprosgd/concepts/buddy_exchange.hpp>
#include <reprosgd/concepts/failure_injecting.hpp>
#include <reprosgd/concepts/fault_policy.hpp>
#include <reprosgd/concepts/optimizer.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/fault/buddy_store.hpp>
#include <reprosgd/fingerprint.hpp>
#include <reprosgd/reduction/canonical_blocks.hpp>
#include <reprosgd/trainer/agreement.hpp>
#include <reprosgd/trainer/callbacks.hpp>
#include <reprosgd/trainer/metrics.hpp>
#include <reprosgd/trainer/sharding.hpp>
#include <reprosgd/trainer/state.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/// Recovery of a run under the policy Par with the fault policy Fault.
template <Parallelism Par, FaultPolicy Fault>
class Recovery {
 public:
  using memory_space = typename Par::execution_space::memory_space;
  /// Model parallelism under ShrinkAndContinue: shards are snapshotted to buddies every
  /// options().buddy_every steps, restored from them after a failure, and the steps since replayed.
  static constexpr bool buddy_snapshots = ShardedParallelism<Par> && RecoverableParallelism<Par> &&
                                          Fault::on_process_failure == FailureAction::shrink_and_continue;

  /// Whether a failure is being recovered from (reported after the next completed step).
  [[nodiscard]] bool pending() const noexcept { return pending_.has_value(); }

  /// The event of the failure recovered from, completed once the first step after it is done.
  FailureEvent finish(int new_rank) {
    FailureEvent event = pending_->event;
    event.recovery_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - pending_->detected).count();
    event.new_rank = new_rank;
    pending_.reset();
    return event;
  }

  /// Steps to replay after a rollback to an older snapshot: the step count reached before the
  /// failure (0: none), and the stage of the step it interrupted.
  std::uint64_t replay_until = 0;
  std::uint64_t resume_stage = 0;

  /**
   * Snapshot every rank's shard to its buddy (collective over the whole grid). The new copies
   * replace the old ones only once every rank has them (an agreement), so a failure during the
   * refresh leaves every survivor with the previous snapshot, all of one step. The shard is
   * serialised straight into the store's pending copy; the commit frees the replaced snapshot.
   */
  template <class Model, class State>
  void refresh(Par& par, const Model& model, const State& optimizer_state, std::uint64_t step) {
    static_assert(BuddyExchange<std::remove_cvref_t<decltype(world_of(par))>>,
                  "reprosgd::Trainer: buddy snapshots need a world() that models BuddyExchange "
                  "(concepts/buddy_exchange.hpp), as DataParallel does");
    Sharding<Par>::shard_bytes(model, optimizer_state, buddies_.staging());
    buddies_.prepare_staged(world_of(par), step);
    (void)par.step_completed_everywhere(true);  // throws on every rank unless all prepared
    buddies_.commit();
    buddy_model_size_ = model.model_size();
  }

  /// Drop the buddy snapshot (local, on every rank at the start of fit()): until fit() takes its
  /// first one, a lost shard can only come back from the disk checkpoint (or, from a pristine
  /// start, the seed).
  void forget_snapshot() noexcept {
    buddies_.clear();
    pristine_start_ = false;
  }

  /// Trainer::start(): the fingerprint of this rank's shard (parameters and optimizer state) as
  /// start() drew it from the seed. Local.
  void note_started(const Fingerprint& shard) noexcept { started_shard_ = shard; }

  /**
   * fit()'s start stage, at step 0: whether every rank's shard is still the one start() drew
   * (nothing was loaded or changed in between), agreed over the whole grid. Once true for a fit(),
   * a shard lost with every copy of it can be drawn again from the seed on any grid (the
   * initialisation is keyed by each weight's place in the whole layer) and the steps replayed from
   * 0. Established once per fit(): a start stage redone after a shrink keeps the verdict.
   */
  template <class Model, class State>
  void establish_pristine_start(Par& par, const Model& model, const State& state) {
    if (pristine_start_) return;
    const bool mine = state.step == 0 && started_shard_ && fingerprint(model, state.optimizer) == *started_shard_;
    pristine_start_ = world_of(par).agree(mine);
  }

  /**
   * After process_failure, on every survivor: shrink to the survivors (again if more ranks die
   * meanwhile), then check that every survivor stands at the same step and stage — true by
   * construction, since an update is applied only after an agreement and every collective fails
   * on all survivors together; a violation is a bug and is reported, never trained through. With
   * buddy snapshots the shards are then restored (state.step may go back: replay_until says to
   * where). Fewer survivors than `min_ranks`: `save()` the consistent state (it returns where,
   * or "" when no checkpoint directory is set) and end with process_failure.
   *
   * Regrow (a RegrowableParallelism with spares): the shrink recruits spares, which hold no state.
   * They learn the step and `stage` from the survivors' agreement (their votes are neutral), then
   * receive the state — the whole model from rank 0 (a survivor) under data parallelism; under
   * model parallelism every shard through the buddy restore, as a lost rank's — and `joined()`
   * checks their configuration. A death anywhere in this repairs and regrows again.
   *
   * @param checkpoint_dir  where fit() checkpoints ("" when nowhere)
   * @param resume  loads the newest checkpoint there (returns a ResumeResult), when a shard and
   *                every copy of it are gone
   * @param stage  the stage the failure interrupted; on a recruited spare, set to the survivors'
   * @param recruited  on a spare just recruited: its report (the shrink already happened)
   * @return whether the state went back to an older step (the steps up to replay_until replay)
   */
  template <class Model, Optimizer Opt, class Save, class Resume, class FromSeed, class Joined>
  bool recover(Par& par, std::uint64_t step, std::uint64_t& stage, int min_ranks, Model& model, const Opt& opt,
               TrainState<Opt, memory_space>& state, const std::string& checkpoint_dir, Save&& save, Resume&& resume,
               FromSeed&& from_seed, Joined&& joined, std::optional<RecoveryReport> recruited = std::nullopt)
    requires RecoverableParallelism<Par>
  {
    if (!pending_) pending_.emplace(Pending{std::chrono::steady_clock::now(), {}});
    FailureEvent& event = pending_->event;
    if (event.old_size == 0) {
      event.old_size = world_of(par).size();
      event.step = step;
    }
    std::uint64_t completed = state.step;
    const auto repair_start = std::chrono::steady_clock::now();
    std::string unrecoverable;  // the verdict when shards are gone for good (not retried)
    for (;;) {
      try {
        RecoveryReport report;
        if (recruited) {
          report = std::move(*recruited);
          recruited.reset();
        } else {
          report = par.recover();
        }
        event.lost_ranks.insert(event.lost_ranks.end(), report.lost_original_ranks.begin(),
                                report.lost_original_ranks.end());
        event.joined_ranks.insert(event.joined_ranks.end(), report.joined_original_ranks.begin(),
                                  report.joined_original_ranks.end());
        event.regrow_seconds += report.regrow_seconds;
        const bool fresh = needs_state(par);  // a recruited spare: no state, no vote on where we stand
        const std::uint64_t none = ~std::uint64_t{0};
        const std::uint64_t where = step * 8 + stage;
        const std::uint64_t lowest = par.agree_min(fresh ? none : where), highest = ~par.agree_min(fresh ? none : ~where);
        if (lowest == none) {
          unrecoverable = "reprosgd::Trainer::fit: every rank that held the training state was lost (lost rank(s) " +
                          detail::rank_list(event.lost_ranks) + "); the spares that joined have nothing to start from";
          break;
        }
        if (fresh) {  // take the survivors' place in the run
          event.step = step = completed = lowest / 8;
          stage = lowest % 8;
        } else if (lowest != where || highest != where) {
          throw comm_error("reprosgd::Trainer::fit: after losing ranks the survivors stand at different steps (" +
                           std::to_string(lowest / 8) + " to " + std::to_string(highest / 8) +
                           "); this is a bug in the fault-tolerance protocol: the run cannot continue reproducibly");
        }
        const auto regrow_start = std::chrono::steady_clock::now();
        const bool grown = regrows(par) && !world_of(par).agree(!fresh);
        if (grown) {
          if constexpr (FailureInjecting<Par>) par.failure_point(step, FailurePoint::regrow);
          if constexpr (buddy_snapshots) {  // the newcomers cannot vote: the survivors' verdicts stand
            pristine_start_ = world_of(par).agree(fresh || pristine_start_);
            buddy_model_size_ = static_cast<int>(par.agree_min(fresh ? none : static_cast<std::uint64_t>(buddy_model_size_)));
          } else if constexpr (RegrowableParallelism<Par>) {
            send_state(par, fresh, model, opt, state);
          }
        }
        if constexpr (buddy_snapshots)
          unrecoverable = restore_shards(par, fresh, event, step, model, opt, state, checkpoint_dir, resume, from_seed);
        if (grown && unrecoverable.empty()) {
          joined();  // the same configuration on the newcomers (agreed: throws on every rank alike)
          if constexpr (RegrowableParallelism<Par>) par.state_received();
          event.regrow_seconds +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() - regrow_start).count();
        }
        break;
      } catch (const process_failure& again) {
        // Another rank died during the repair: repair again. A collective that failed here may
        // have completed elsewhere, and those ranks now wait in the repair's next agreement (a
        // refresh's commit, a regrow's): join it, voting "failed", as the step protocol does —
        // going straight into the shrink would pair its internal agreement with theirs and hang.
        if (!again.agreed()) par.abandon_step();
        continue;
      }
    }
    std::sort(event.lost_ranks.begin(), event.lost_ranks.end());
    std::sort(event.joined_ranks.begin(), event.joined_ranks.end());
    if (!unrecoverable.empty()) throw process_failure(unrecoverable, event.lost_ranks);
    event.new_size = world_of(par).size();
    event.new_rank = world_rank_of(par);
    event.shrink_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - repair_start).count();
    if (world_of(par).size() < min_ranks) {
      const std::string where = save();
      const std::string saved = where.empty() ? "no checkpoint directory is set"
                                              : "the state after step " + std::to_string(state.step) +
                                                    " is checkpointed in " + where;
      throw process_failure("reprosgd::Trainer::fit: lost rank(s) " + detail::rank_list(event.lost_ranks) + " at step " +
                                std::to_string(step) + "; " + std::to_string(world_of(par).size()) +
                                " rank(s) survive, fewer than min_ranks " + std::to_string(min_ranks) + "; " + saved,
                            event.lost_ranks);
    }
    if (state.step == completed) return false;
    // Shards restored from an older step: replay up to where the failure struck.
    if (replay_until == 0) {
      replay_until = completed;
      resume_stage = stage;
    }
    return true;
  }

 private:
  // Whether this process is a recruited spare still without the training state.
  static bool needs_state(Par& par) {
    if constexpr (RegrowableParallelism<Par>)
      return par.needs_state();
    else
      return (void)par, false;
  }
  // Whether the policy regrows (has spares; the same on every rank).
  static bool regrows(Par& par) {
    if constexpr (RegrowableParallelism<Par>)
      return par.has_spares();
    else
      return (void)par, false;
  }

  // Regrow under data parallelism: rank 0 (a survivor: they come first) sends the whole model,
  // optimizer state and step; the newcomers install it. The agreement after it is the commit:
  // until every rank has it, a newcomer keeps needing it.
  template <class Model, Optimizer Opt>
  void send_state(Par& par, bool fresh, Model& model, const Opt& opt, TrainState<Opt, memory_space>& state) {
    auto& group = world_of(par);
    std::vector<std::byte> bytes;
    if (group.rank() == 0) {
      if (fresh) throw comm_error("reprosgd::Trainer::fit: a regrow put a newcomer at rank 0; this is a bug");
      Sharding<Par>::shard_bytes(model, state.optimizer, bytes);
      const std::uint64_t at = state.step;
      const auto* p = reinterpret_cast<const std::byte*>(&at);
      bytes.insert(bytes.end(), p, p + sizeof at);
    }
    group.broadcast_bytes(bytes, 0);
    if (fresh) {
      std::uint64_t at = 0;
      if (bytes.size() < sizeof at) throw comm_error("reprosgd::Trainer::fit: the state sent to a newcomer is truncated");
      std::memcpy(&at, bytes.data() + bytes.size() - sizeof at, sizeof at);
      bytes.resize(bytes.size() - sizeof at);
      typename Sharding<Par>::template Staging<Opt> staging(model, opt);
      const CanonicalRun whole{0, 0, model.parameter_count()};
      Sharding<Par>::place_shard(bytes, std::span<const CanonicalRun>(&whole, 1), staging);
      Sharding<Par>::install(staging, at, model, opt, state);
    }
    (void)par.step_completed_everywhere(true);  // throws on every rank unless all have it
  }

  // A failure being recovered from: when it was detected and what is known of it so far.
  struct Pending {
    std::chrono::steady_clock::time_point detected;
    FailureEvent event;
  };

  // After a shrink: rebuild the whole model at the buddy snapshot's step from the survivors'
  // copies (a lost shard from its buddy, or from another replica at the same model position),
  // re-shard it over the new grid, and snapshot again; when a shard and all its copies are
  // gone, or no snapshot was taken yet, resume from the newest disk checkpoint instead, or (none
  // there, and fit() began from start()'s untouched state) draw the start state again from the
  // seed and replay from step 0, and say so. Returns why the run cannot go on when that fails
  // too ("" once restored); a process_failure out of here is another death during the repair,
  // which recover() repairs again.
  template <class Model, Optimizer Opt, class Resume, class FromSeed>
  std::string restore_shards(Par& par, bool fresh, FailureEvent& event, std::uint64_t step, Model& model, const Opt& opt,
                             TrainState<Opt, memory_space>& state, const std::string& checkpoint_dir, Resume& resume,
                             FromSeed& from_seed) {
    // Snapshots are committed after an agreement, so every survivor holds one or none does (a
    // newcomer holds none and does not vote: BuddyStore::recover sends it every shard).
    const bool snapshot = par.agree_min(fresh || buddies_.has_snapshot() ? 1 : 0) == 1;
    std::string why;
    if (snapshot) {
      BuddyRecovery rec = buddies_.recover(world_of(par));
      const int members = static_cast<int>(rec.shards.size()), pm = buddy_model_size_;
      const bool from_replicas = !rec.missing.empty();
      bool complete = true;
      for (int id : rec.missing) {
        for (int other = id % pm; other < members; other += pm)
          if (!rec.shards[static_cast<std::size_t>(other)].empty()) {
            rec.shards[static_cast<std::size_t>(id)] = rec.shards[static_cast<std::size_t>(other)];
            break;
          }
        complete = complete && !rec.shards[static_cast<std::size_t>(id)].empty();
      }
      if (complete) {
        typename Sharding<Par>::template Staging<Opt> staging(model, opt);
        for (int q = 0; q < pm; ++q)
          Sharding<Par>::place_shard(rec.shards[static_cast<std::size_t>(q)], model.canonical_runs(q, pm), staging);
        Sharding<Par>::shard(par, model);
        Sharding<Par>::install(staging, rec.step, model, opt, state);
        event.restored_from = from_replicas ? "replica" : "buddy";
      } else {
        std::string lost;
        for (int id : rec.missing)
          if (rec.shards[static_cast<std::size_t>(id)].empty()) lost += (lost.empty() ? "" : ",") + std::to_string(id);
        why = "reprosgd::Trainer::fit: the shards of rank(s) " + lost + " were lost together with their buddies' copies";
      }
    } else {
      why = "reprosgd::Trainer::fit: lost rank(s) " + detail::rank_list(event.lost_ranks) +
            " before fit() took its first buddy snapshot, so their shards have no copy";
    }
    // A failure in fit()'s start stage can strike before the ranks agreed that the state is
    // start()'s; the survivors agree on it now. Their shards speak for the lost ones: every way to
    // change a shard between start() and fit() (a resume, a load) is collective, so a lost shard
    // is start()'s whenever every surviving one is. The agreement fails alike on every survivor if
    // yet another rank dies (recover() then repairs again).
    if (!snapshot && !pristine_start_) establish_pristine_start(par, model, state);
    if (!why.empty()) {
      // pristine_start_ is agreed, so every survivor takes the same branch.
      const bool resumed = !checkpoint_dir.empty() && resume().resumed;
      if (resumed) {
        event.restored_from = "checkpoint";
      } else if (pristine_start_) {
        from_seed();  // re-shard over the survivors, draw the parameters, zero the optimizer state, step 0
        event.restored_from = "seed";
      } else {
        return why + (checkpoint_dir.empty() ? std::string(" and no checkpoint directory is set to fall back to")
                                             : " and " + checkpoint_dir + " holds no usable checkpoint");
      }
    }
    if (state.step > step) throw comm_error("reprosgd::Trainer::fit: restored a state newer than the failure");
    event.resumed_from = state.step;
    refresh(par, model, state.optimizer, state.step);
    return {};
  }

  BuddyStore buddies_;        // the shards' in-memory copies
  std::optional<Fingerprint> started_shard_;  // this rank's shard as start() drew it
  bool pristine_start_ = false;  // fit() began from start()'s state on every rank (agreed)
  int buddy_model_size_ = 1;  // P_model when they were taken
  std::optional<Pending> pending_;
};

}  // namespace detail
REPROSGD_END_NAMESPACE
