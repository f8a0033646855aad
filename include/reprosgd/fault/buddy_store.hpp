// SPDX-License-Identifier: BSD-3-Clause
/// @file BuddyStore: in-memory copies of a neighbour's shard, to rebuild sharded state after a lost
/// rank. The bookkeeping only: the bytes travel through the group's BuddyExchange operations
/// (concepts/buddy_exchange.hpp), MPI's or the tests' in-process group.
#pragma once

#include <reprosgd/concepts/buddy_exchange.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// What BuddyStore::recover() rebuilt: every shard of the old group at the snapshot's step, or
/// the ids of the shards that were lost with both their owner and its buddy.
struct BuddyRecovery {
  std::uint64_t step = 0;                       ///< the step of the snapshot (the rollback target)
  std::vector<std::vector<std::byte>> shards;   ///< shards[id]: the shard of old member `id` (empty when missing)
  std::vector<int> missing;                     ///< ids whose owner and buddy are both gone, ascending
  [[nodiscard]] bool complete() const noexcept { return missing.empty(); }
};

/**
 * Checkpointing of critical data structures in memory (Amatya et al., EuroMPI 2017): when state is
 * sharded (model parallelism: each rank holds part of the parameters and optimizer state), a dead
 * rank takes its shard with it. Every `refresh()` (collective, e.g. every N steps) each member
 * keeps a copy of its own shard and of its buddy's — member id-1's, cyclically — so that after any
 * set of failures in which no member and its buddy-holder (id+1) die together, every shard of the
 * snapshot survives somewhere. `recover()` (collective over the survivors) finds them and gives
 * every survivor all shards of the snapshot, to re-partition over the survivors and replay from the
 * snapshot's step; deterministic replay then reproduces the failure-free run. Shards lost with
 * their holder are listed in `missing`: the caller falls back to the newest disk checkpoint.
 *
 * The group passed to refresh() and recover() is any BuddyExchange (DataParallel over MPI, a
 * UlfmDataParallel whose errors are process failures, or an in-process group in tests); errors
 * are the group's. Ids are the members' ranks in the group given to refresh() (stable across a
 * shrink: the survivors' group may renumber them). Memory: two shards per member (its own copy
 * and its buddy's); four from prepare() to commit(), which frees the replaced snapshot. A caller
 * that serialises its shard can write it straight into staging() and call prepare_staged(),
 * saving the copy into the store.
 *
 * **Transactions.** A member may die during a refresh, after some members received their new
 * copies and before others did. prepare() exchanges the new copies without touching the current
 * snapshot; the caller agrees that every member succeeded (e.g. an MPIX_Comm_agree) and only then
 * calls commit() everywhere. A failed refresh therefore leaves every survivor with the previous
 * snapshot, all of the same step.
 *
 * **Example**:
 * @code
 * reprosgd::BuddyStore store;
 * store.refresh(grid, my_shard_bytes, step);     // every N steps (grid: a DataParallel)
 * // ... a rank died, the group was shrunk to the survivors ...
 * auto rec = store.recover(grid);                // all old shards, or `missing`
 * @endcode
 */
class BuddyStore {
 public:
  /**
   * Keep a copy of `mine` and exchange copies around the ring: send `mine` to member (r+1) % P,
   * receive member (r-1+P) % P's. Every member must call it with the same `step`.
   * @collective over `group` @throws config_error if the steps differ between members; the group's errors
   */
  template <BuddyExchange G>
  void refresh(G& group, std::span<const std::byte> mine, std::uint64_t step) {
    prepare(group, mine, step);
    commit();
  }

  /// The exchange of refresh() into a pending snapshot; the current one stays until commit().
  /// @collective over `group`
  template <BuddyExchange G>
  void prepare(G& group, std::span<const std::byte> mine, std::uint64_t step) {
    if (mine.data() != pending_own_.data() || mine.size() != pending_own_.size())
      pending_own_.assign(mine.begin(), mine.end());
    prepare_staged(group, step);
  }

  /// Where the caller may serialise its next shard (resize it, fill it) before prepare_staged():
  /// the pending own copy, which commit() makes current without another copy. Not collective.
  [[nodiscard]] std::vector<std::byte>& staging() noexcept { return pending_own_; }

  /// prepare() of the bytes in staging(). @collective over `group`
  template <BuddyExchange G>
  void prepare_staged(G& group, std::uint64_t step) {
    const int rank = group.rank(), size = group.size();
    // Every member must snapshot the same step.
    const auto mine = static_cast<std::int64_t>(step);
    std::vector<std::int64_t> steps(static_cast<std::size_t>(size));
    group.allgather_words(std::span<const std::int64_t>(&mine, 1), std::span<std::int64_t>(steps));
    if (std::any_of(steps.begin(), steps.end(), [&](std::int64_t s) { return s != mine; }))
      throw config_error("reprosgd::BuddyStore::refresh: the members snapshot different steps (this one " +
                         std::to_string(step) + ")");
    group.ring_shift_bytes(std::span<const std::byte>(pending_own_), pending_buddy_);
    pending_ = Meta{rank, (rank - 1 + size) % size, size, step, true};
  }

  /// Make the prepared snapshot current and free the one it replaces (local; call it on every
  /// member once all prepared).
  void commit() {
    if (!pending_.valid) throw config_error("reprosgd::BuddyStore::commit: nothing prepared");
    own_.swap(pending_own_);
    buddy_.swap(pending_buddy_);
    // The swap left the previous snapshot in the pending buffers: release it, so that between
    // refreshes the store holds one snapshot (own and buddy copy), not two.
    pending_own_ = std::vector<std::byte>();
    pending_buddy_ = std::vector<std::byte>();
    id_ = pending_.id;
    buddy_id_ = pending_.buddy_id;
    members_ = pending_.members;
    step_ = pending_.step;
    valid_ = true;
    pending_ = Meta{};
  }

  /// Forget every snapshot, committed or pending (local): a later recover() then finds none.
  void clear() noexcept { *this = BuddyStore(); }

  [[nodiscard]] bool has_snapshot() const noexcept { return valid_; }
  [[nodiscard]] std::uint64_t step() const noexcept { return step_; }
  /// This member's id at the last refresh, and the id whose shard it holds as the buddy.
  [[nodiscard]] int id() const noexcept { return id_; }
  [[nodiscard]] int buddy_id() const noexcept { return buddy_id_; }
  [[nodiscard]] std::span<const std::byte> own_copy() const noexcept { return own_; }
  [[nodiscard]] std::span<const std::byte> buddy_copy() const noexcept { return buddy_; }

  /**
   * Rebuild the snapshot on the survivors: every survivor ends with every old member's shard (its
   * own copy for survivors, the buddy's copy for lost members), or with `missing` naming the
   * members whose shard is gone. Survivors may be renumbered (e.g. MPIX_Comm_shrink); ids are
   * those of the last refresh().
   * @collective over `survivors` (each holding a snapshot of the same step, or none: a newcomer)
   * @throws config_error if no survivor has a snapshot or the snapshots' steps differ; the group's errors
   */
  template <BuddyExchange G>
  [[nodiscard]] BuddyRecovery recover(G& survivors) const {
    const int n = survivors.size();
    // Each survivor announces: whether it has a snapshot, its step, its id, its buddy's id, members.
    const std::int64_t mine[5] = {valid_ ? 1 : 0, static_cast<std::int64_t>(step_), id_, buddy_id_, members_};
    std::vector<std::int64_t> all(static_cast<std::size_t>(5 * n));
    survivors.allgather_words(std::span<const std::int64_t>(mine, 5), std::span<std::int64_t>(all));
    auto at = [&](int s, int f) { return all[static_cast<std::size_t>(5 * s + f)]; };
    // A member without a snapshot is a newcomer (a spare that joined after the shrink): it holds
    // no copy and receives every shard like the others.
    int first = -1;
    for (int s = 0; s < n; ++s) {
      if (at(s, 0) == 0) continue;
      if (first < 0) first = s;
      if (at(s, 1) != at(first, 1) || at(s, 4) != at(first, 4))
        throw config_error("reprosgd::BuddyStore::recover: the survivors' snapshots are of different steps or groups");
    }
    if (first < 0) throw config_error("reprosgd::BuddyStore::recover: no survivor has a snapshot (call refresh() first)");
    BuddyRecovery rec;
    rec.step = static_cast<std::uint64_t>(at(first, 1));
    const int members = static_cast<int>(at(first, 4));
    rec.shards.resize(static_cast<std::size_t>(members));
    // For every old member: which survivor sends its shard (its owner if alive, else its buddy-holder).
    std::vector<int> source(static_cast<std::size_t>(members), -1), from_buddy(static_cast<std::size_t>(members), 0);
    for (int s = 0; s < n; ++s)
      if (at(s, 0) != 0) source[static_cast<std::size_t>(at(s, 2))] = s;
    for (int s = 0; s < n; ++s) {
      if (at(s, 0) == 0) continue;
      const auto b = static_cast<std::size_t>(at(s, 3));
      if (source[b] < 0) {
        source[b] = s;
        from_buddy[b] = 1;
      }
    }
    const int me = survivors.rank();
    for (int id = 0; id < members; ++id) {
      const int src = source[static_cast<std::size_t>(id)];
      if (src < 0) {
        rec.missing.push_back(id);
        continue;
      }
      std::vector<std::byte>& out = rec.shards[static_cast<std::size_t>(id)];
      if (me == src) {
        const std::vector<std::byte>& copy = from_buddy[static_cast<std::size_t>(id)] ? buddy_ : own_;
        out.assign(copy.begin(), copy.end());
      }
      survivors.broadcast_bytes(out, src);
    }
    return rec;
  }

 private:
  struct Meta {
    int id = 0, buddy_id = 0, members = 0;
    std::uint64_t step = 0;
    bool valid = false;
  };
  std::vector<std::byte> own_, buddy_, pending_own_, pending_buddy_;
  Meta pending_;
  int id_ = 0, buddy_id_ = 0, members_ = 0;
  std::uint64_t step_ = 0;
  bool valid_ = false;
};

REPROSGD_END_NAMESPACE
