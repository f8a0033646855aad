// SPDX-License-Identifier: BSD-3-Clause
/// @file BuddyStore: in-memory copies of a neighbour's shard, to rebuild sharded state after a lost rank.
#pragma once

#include <reprosgd/config.hpp>

#if !REPROSGD_HAS_MPI
#error "reprosgd/fault/buddy_store.hpp needs MPI: build with REPROSGD_ENABLE_MPI=ON and link ReproSGD::reprosgd (it defines REPROSGD_HAS_MPI=1)."
#endif

#include <reprosgd/detail/mpi_check.hpp>
#include <reprosgd/error.hpp>

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

namespace detail {
/// BuddyStore's MPI error handling unless the caller passes its own: comm_error.
inline void buddy_default_check(int rc, const char* who, const char* call) {
  if (rc != MPI_SUCCESS) mpi_check(rc, (std::string(who) + ": " + call).c_str());
}
}  // namespace detail

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
 * Ids are the members' ranks in the communicator given to refresh() (stable across a shrink:
 * pass them as `my_id` to recover()). Memory: two shards per member (its own copy and its
 * buddy's); four from prepare() to commit(), which frees the replaced snapshot. A caller that
 * serialises its shard can write it straight into staging() and call prepare_staged(), saving
 * the copy into the store. Errors: comm_error, or whatever the optional `check` throws (a
 * fault-tolerant policy passes its own, which turns a dead peer into process_failure).
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
 * store.refresh(model_comm, my_shard_bytes, step);            // every N steps
 * // ... a rank died, the communicator was shrunk to `survivors` ...
 * auto rec = store.recover(survivors);                         // all old shards, or `missing`
 * @endcode
 */
class BuddyStore {
 public:
  /**
   * Keep a copy of `mine` and exchange copies around the ring: send `mine` to member (r+1) % P,
   * receive member (r-1+P) % P's. Every member must call it with the same `step`.
   * @collective over `comm` @throws comm_error; config_error if the steps differ between members
   */
  void refresh(MPI_Comm comm, std::span<const std::byte> mine, std::uint64_t step) {
    prepare(comm, mine, step);
    commit();
  }

  /// The exchange of refresh() into a pending snapshot; the current one stays until commit().
  /// `check(rc, who, call)` receives the return code of every MPI call. @collective over `comm`
  template <class Check = decltype(&detail::buddy_default_check)>
  void prepare(MPI_Comm comm, std::span<const std::byte> mine, std::uint64_t step, Check check = &detail::buddy_default_check) {
    if (mine.data() != pending_own_.data() || mine.size() != pending_own_.size())
      pending_own_.assign(mine.begin(), mine.end());
    prepare_staged(comm, step, check);
  }

  /// Where the caller may serialise its next shard (resize it, fill it) before prepare_staged():
  /// the pending own copy, which commit() makes current without another copy. Not collective.
  [[nodiscard]] std::vector<std::byte>& staging() noexcept { return pending_own_; }

  /// prepare() of the bytes in staging(). @collective over `comm`
  template <class Check = decltype(&detail::buddy_default_check)>
  void prepare_staged(MPI_Comm comm, std::uint64_t step, Check check = &detail::buddy_default_check) {
    const std::span<const std::byte> mine(pending_own_);
    int rank = 0, size = 1;
    detail::mpi_check(MPI_Comm_rank(comm, &rank), "reprosgd::BuddyStore::refresh: MPI_Comm_rank");
    detail::mpi_check(MPI_Comm_size(comm, &size), "reprosgd::BuddyStore::refresh: MPI_Comm_size");
    if (mine.size() > static_cast<std::size_t>(INT_MAX))
      throw config_error("reprosgd::BuddyStore::refresh: a shard of " + std::to_string(mine.size()) +
                         " bytes is larger than one MPI message (2^31-1 bytes)");
    // Every member must snapshot the same step: compare min and max in one MAX all-reduce.
    long long steps[2] = {static_cast<long long>(step), -static_cast<long long>(step)}, agreed[2] = {0, 0};
    check(MPI_Allreduce(steps, agreed, 2, MPI_LONG_LONG, MPI_MAX, comm), "reprosgd::BuddyStore::refresh",
          "MPI_Allreduce");
    if (agreed[0] != -agreed[1])
      throw config_error("reprosgd::BuddyStore::refresh: the members snapshot different steps (this one " +
                         std::to_string(step) + ")");
    const int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    long long my_bytes = static_cast<long long>(mine.size()), buddy_bytes = 0;
    check(MPI_Sendrecv(&my_bytes, 1, MPI_LONG_LONG, next, tag, &buddy_bytes, 1, MPI_LONG_LONG, prev, tag, comm,
                       MPI_STATUS_IGNORE),
          "reprosgd::BuddyStore::refresh", "MPI_Sendrecv (sizes)");
    pending_buddy_.assign(static_cast<std::size_t>(buddy_bytes), std::byte{0});
    check(MPI_Sendrecv(pending_own_.data(), static_cast<int>(my_bytes), MPI_BYTE, next, tag + 1, pending_buddy_.data(),
                       static_cast<int>(buddy_bytes), MPI_BYTE, prev, tag + 1, comm, MPI_STATUS_IGNORE),
          "reprosgd::BuddyStore::refresh", "MPI_Sendrecv (shards)");
    pending_ = Meta{rank, prev, size, step, true};
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
   * @collective over `survivors` (each must hold a snapshot of the same step)
   * @throws config_error if a survivor has no snapshot or the snapshots' steps differ; comm_error
   */
  template <class Check = decltype(&detail::buddy_default_check)>
  [[nodiscard]] BuddyRecovery recover(MPI_Comm survivors, Check check = &detail::buddy_default_check) const {
    int n = 0;
    detail::mpi_check(MPI_Comm_size(survivors, &n), "reprosgd::BuddyStore::recover: MPI_Comm_size");
    // Each survivor announces: whether it has a snapshot, its step, its id, its buddy's id, members.
    long long mine[5] = {valid_ ? 1 : 0, static_cast<long long>(step_), id_, buddy_id_, members_};
    std::vector<long long> all(static_cast<std::size_t>(5 * n));
    check(MPI_Allgather(mine, 5, MPI_LONG_LONG, all.data(), 5, MPI_LONG_LONG, survivors), "reprosgd::BuddyStore::recover",
          "MPI_Allgather");
    auto at = [&](int s, int f) { return all[static_cast<std::size_t>(5 * s + f)]; };
    for (int s = 0; s < n; ++s) {
      if (at(s, 0) == 0) throw config_error("reprosgd::BuddyStore::recover: a survivor has no snapshot (call refresh() first)");
      if (at(s, 1) != at(0, 1) || at(s, 4) != at(0, 4))
        throw config_error("reprosgd::BuddyStore::recover: the survivors' snapshots are of different steps or groups");
    }
    BuddyRecovery rec;
    rec.step = static_cast<std::uint64_t>(at(0, 1));
    const int members = static_cast<int>(at(0, 4));
    rec.shards.resize(static_cast<std::size_t>(members));
    // For every old member: which survivor sends its shard (its owner if alive, else its buddy-holder).
    std::vector<int> source(static_cast<std::size_t>(members), -1), from_buddy(static_cast<std::size_t>(members), 0);
    for (int s = 0; s < n; ++s) source[static_cast<std::size_t>(at(s, 2))] = s;
    for (int s = 0; s < n; ++s) {
      const auto b = static_cast<std::size_t>(at(s, 3));
      if (source[b] < 0) {
        source[b] = s;
        from_buddy[b] = 1;
      }
    }
    int me = 0;
    detail::mpi_check(MPI_Comm_rank(survivors, &me), "reprosgd::BuddyStore::recover: MPI_Comm_rank");
    for (int id = 0; id < members; ++id) {
      const int src = source[static_cast<std::size_t>(id)];
      if (src < 0) {
        rec.missing.push_back(id);
        continue;
      }
      const std::vector<std::byte>& copy = from_buddy[static_cast<std::size_t>(id)] ? buddy_ : own_;
      long long bytes = me == src ? static_cast<long long>(copy.size()) : 0;
      check(MPI_Bcast(&bytes, 1, MPI_LONG_LONG, src, survivors), "reprosgd::BuddyStore::recover", "MPI_Bcast");
      std::vector<std::byte>& out = rec.shards[static_cast<std::size_t>(id)];
      out.resize(static_cast<std::size_t>(bytes));
      if (me == src) std::memcpy(out.data(), copy.data(), copy.size());
      check(MPI_Bcast(out.data(), static_cast<int>(bytes), MPI_BYTE, src, survivors), "reprosgd::BuddyStore::recover",
            "MPI_Bcast");
    }
    return rec;
  }

 private:
  struct Meta {
    int id = 0, buddy_id = 0, members = 0;
    std::uint64_t step = 0;
    bool valid = false;
  };
  static constexpr int tag = 0x5b0d;
  std::vector<std::byte> own_, buddy_, pending_own_, pending_buddy_;
  Meta pending_;
  int id_ = 0, buddy_id_ = 0, members_ = 0;
  std::uint64_t step_ = 0;
  bool valid_ = false;
};

REPROSGD_END_NAMESPACE
