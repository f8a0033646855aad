// SPDX-License-Identifier: BSD-3-Clause
/// @file SparePool: processes started with the job and held idle, which replace lost workers so
/// that a job shrunk by a failure grows back to its size (ULFM).
#pragma once

#include <reprosgd/config.hpp>

#if !REPROSGD_HAS_ULFM
#error "reprosgd/parallel/spare_pool.hpp needs an MPI with ULFM (MPIX_Comm_shrink in <mpi-ext.h>), e.g. Open MPI 5 run with mpiexec --with-ft ulfm"
#endif

#include <reprosgd/detail/mpi_check.hpp>
#include <reprosgd/detail/ulfm_errors.hpp>
#include <reprosgd/error.hpp>

#include <mpi.h>
#include <mpi-ext.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// What a rendezvous of the pool decided for one process (SparePool::refill, SparePool::wait).
struct PoolAssignment {
  detail::CommHandle workers;   ///< the new workers' communicator (MPI_COMM_NULL: still a spare)
  std::vector<int> ids;         ///< ids[rank in `workers`]: that process's id (rank in the job's communicator)
  std::vector<int> joined;      ///< ids of the spares recruited by this rendezvous, ascending
  std::vector<int> lost;        ///< ids of the workers of the previous rendezvous (or the start) gone since, ascending
};

/**
 * Spare processes for regrow. The job starts with P ranks; the last S of them are spares and the
 * first P - S the workers, which train on a communicator of their own. A spare waits (polling,
 * without burning a core) until one of two things happens:
 *
 * - **Recruitment.** Workers died and the survivors shrank their communicator. Every survivor then
 *   calls refill(): it revokes the pool's communicator, which wakes every spare; all live members
 *   of the pool shrink it and meet in one rendezvous (an allgather of who is what, a split, and an
 *   agreement that both succeeded). The new workers' communicator holds the survivors first, in
 *   their order (those that hold the training state before newcomers that do not yet), then as
 *   many spares, lowest id first, as the job lacks to reach P - S. The others stay spares and wait
 *   again. A process that dies during the rendezvous makes the agreement fail on everyone: they
 *   shrink again and redo it without it, so a failure during the regrow itself is survived.
 * - **Release.** The workers' run ended: each worker sends every spare it knows a release code
 *   (0: done, anything else: the run failed); a spare leaves once it heard from every worker
 *   or saw it die, with the largest code.
 *
 * A spare that sees every worker dead (no one left to recruit it) throws process_failure instead
 * of waiting forever. The state a newcomer needs is not the pool's business: the Trainer sends it
 * (trainer/recovery.hpp). Ids are ranks in the communicator the pool was made from (stable).
 *
 * Not thread safe; one pool per job. Copies share nothing: hold it through the policy (one owner).
 */
class SparePool {
 public:
  /// Tag of the release messages on the pool's communicator (nothing else is sent point to point there).
  static constexpr int release_tag = 0x5EE1;

  /**
   * Split `comm` into workers (its first size - spares ranks) and spares (the last `spares`).
   * @throws config_error (on every rank alike) when spares is negative or leaves no worker;
   *         comm_error when a setup call fails
   * @collective over `comm`
   */
  SparePool(MPI_Comm comm, int spares) {
    int rank = 0, size = 1;
    detail::mpi_check(MPI_Comm_rank(comm, &rank), "reprosgd::SparePool: MPI_Comm_rank");
    detail::mpi_check(MPI_Comm_size(comm, &size), "reprosgd::SparePool: MPI_Comm_size");
    if (spares < 0 || spares >= size)
      throw config_error("reprosgd::SparePool: " + std::to_string(spares) + " spare(s) among " + std::to_string(size) +
                         " rank(s): the spares must be at least 0 and leave at least one worker");
    MPI_Comm dup = MPI_COMM_NULL;
    detail::mpi_check(MPI_Comm_dup(comm, &dup), "reprosgd::SparePool: MPI_Comm_dup");
    pool_ = detail::CommHandle(dup);
    detail::mpi_check(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "reprosgd::SparePool: MPI_Comm_set_errhandler");
    id_ = rank;
    target_ = size - spares;
    spare_ = rank >= target_;
    MPI_Comm part = MPI_COMM_NULL;
    detail::mpi_check(MPI_Comm_split(dup, spare_ ? MPI_UNDEFINED : 0, rank, &part), "reprosgd::SparePool: MPI_Comm_split");
    initial_ = detail::CommHandle(part);
    for (int r = 0; r < size; ++r) (r < target_ ? workers_ : spares_).push_back(r);
    worker_ids_ = workers_;  // pool ranks are ids until the first shrink
  }

  /// Whether this process is (still) an idle spare.
  [[nodiscard]] bool spare() const noexcept { return spare_; }
  /// The workers the job is meant to have (the pool's size minus the spares it started with).
  [[nodiscard]] int target() const noexcept { return target_; }
  /// This process's id: its rank in the communicator the pool was made from.
  [[nodiscard]] int id() const noexcept { return id_; }
  /// The workers' communicator the job started with (MPI_COMM_SELF on a spare, which trains on
  /// nothing until recruited). Owned by the pool: duplicate it.
  [[nodiscard]] MPI_Comm initial_workers() const noexcept { return spare_ ? MPI_COMM_SELF : initial_.get(); }

  /**
   * On a worker, after its workers' communicator was shrunk to `rank` of the survivors: wake the
   * spares and recruit as many as the job lacks. `has_state`: this worker holds the training
   * state (a newcomer whose state transfer was interrupted does not).
   * @return the new workers' communicator (this process's order among the survivors kept,
   *         newcomers last) and who is who
   * @throws comm_error when the pool cannot be shrunk
   * @collective over the live members of the pool (the spares join from wait())
   */
  PoolAssignment refill(int rank, bool has_state) { return rendezvous(has_state ? 0 : 1, rank); }

  /**
   * On a spare: wait until recruited (the assignment's communicator is set) or released (it is
   * MPI_COMM_NULL; release_code() says how the run ended).
   * @throws process_failure when every worker died (no one is left to recruit or release it);
   *         comm_error when MPI fails otherwise
   */
  PoolAssignment wait() {
    for (;;) {
      // One receive per worker: each sends its release code when its run ends, and a dead
      // worker's receive completes with an error. Every message is matched (an unmatched one
      // would hang MPI_Finalize's barrier).
      const std::size_t n = workers_.size();
      std::vector<int> codes(n, 0);
      std::vector<MPI_Request> requests(n, MPI_REQUEST_NULL);
      for (std::size_t i = 0; i < n; ++i)
        detail::mpi_check(MPI_Irecv(&codes[i], 1, MPI_INT, workers_[i], release_tag, pool_.get(), &requests[i]),
                          "reprosgd::SparePool::wait: MPI_Irecv");
      std::vector<char> received(n, 0);
      std::size_t open = n;
      bool revoked = false;
      while (open > 0 && !revoked) {
        bool progressed = false;
        for (std::size_t i = 0; i < n && !revoked; ++i) {
          if (requests[i] == MPI_REQUEST_NULL) continue;
          int done = 0;
          MPI_Status status;
          const int rc = MPI_Test(&requests[i], &done, &status);
          if (rc == MPI_SUCCESS && !done) continue;
          if (rc != MPI_SUCCESS && detail::mpi_error_class(rc) == MPIX_ERR_REVOKED) {
            revoked = true;
            break;
          }
          if (rc != MPI_SUCCESS && !detail::is_process_failure(rc))
            detail::mpi_check(rc, "reprosgd::SparePool::wait: MPI_Test");
          received[i] = rc == MPI_SUCCESS;  // else: that worker died (its receive completed with the error)
          requests[i] = MPI_REQUEST_NULL;
          --open;
          progressed = true;
        }
        // Polled, not a blocking wait: Open MPI's would spin on a core the workers need.
        if (!progressed && !revoked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (!revoked) {
        int code = -1;
        for (std::size_t i = 0; i < n; ++i)
          if (received[i]) code = std::max(code, codes[i]);
        if (code < 0)
          throw process_failure("reprosgd::SparePool::wait: every worker of the job died; no one is left to recruit "
                                "this spare (id " + std::to_string(id_) + ")",
                                detail::known_failed_ranks(pool_.get()));
        release_code_ = code;
        return {};
      }
      for (MPI_Request& r : requests) cancel(r);
      PoolAssignment a = rendezvous(2, id_);
      if (a.workers) return a;
    }
  }

  /// How the workers' run ended, on a released spare (0: done).
  [[nodiscard]] int release_code() const noexcept { return release_code_; }

  /**
   * On a worker at the end of its run: tell every spare it knows to leave with `code`. Every
   * worker sends, and a spare waits for every worker's message or death (it leaves with the
   * largest code), so a worker that dies at the very end leaves no spare waiting. Errors (a spare
   * that died meanwhile) are ignored. Idempotent.
   */
  void release(int code) noexcept {
    if (spare_ || released_) return;
    released_ = true;
    for (int s : spares_) (void)MPI_Send(&code, 1, MPI_INT, s, release_tag, pool_.get());
  }

 private:
  static void cancel(MPI_Request& request) noexcept {
    if (request == MPI_REQUEST_NULL) return;
    (void)MPI_Cancel(&request);
    (void)MPI_Request_free(&request);
  }

  // The rendezvous of every live member: role 0 a worker with the state, 1 a worker without it,
  // 2 a spare; `key` orders workers (their rank among the survivors) and spares (their id).
  PoolAssignment rendezvous(int role, int key) {
    for (;;) {
      MPIX_Comm_revoke(pool_.get());  // wakes the spares; idempotent
      MPI_Comm shrunk = MPI_COMM_NULL;
      detail::mpi_check(MPIX_Comm_shrink(pool_.get(), &shrunk), "reprosgd::SparePool: MPIX_Comm_shrink");
      pool_ = detail::CommHandle(shrunk);
      detail::mpi_check(MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN), "reprosgd::SparePool: MPI_Comm_set_errhandler");
      int n = 0, me = 0;
      MPI_Comm_size(shrunk, &n);
      MPI_Comm_rank(shrunk, &me);
      const int mine[3] = {role, key, id_};
      std::vector<int> all(static_cast<std::size_t>(3 * n));
      bool ok = MPI_Allgather(mine, 3, MPI_INT, all.data(), 3, MPI_INT, shrunk) == MPI_SUCCESS;
      // order: pool ranks of the new workers, in their new rank order; idle: the spares left.
      std::vector<int> order, idle;
      PoolAssignment a;
      if (ok) {
        auto at = [&](int r, int f) { return all[static_cast<std::size_t>(3 * r + f)]; };
        for (int want = 0; want <= 1; ++want) {
          std::vector<int> group;
          for (int r = 0; r < n; ++r)
            if (at(r, 0) == want) group.push_back(r);
          std::sort(group.begin(), group.end(), [&](int x, int y) { return at(x, 1) < at(y, 1); });
          order.insert(order.end(), group.begin(), group.end());
        }
        std::vector<int> spares;
        for (int r = 0; r < n; ++r)
          if (at(r, 0) == 2) spares.push_back(r);
        std::sort(spares.begin(), spares.end(), [&](int x, int y) { return at(x, 1) < at(y, 1); });
        const std::size_t lacking =
            order.size() >= static_cast<std::size_t>(target_) ? 0 : static_cast<std::size_t>(target_) - order.size();
        for (std::size_t i = 0; i < spares.size(); ++i) {
          if (i < lacking) {
            order.push_back(spares[i]);
            a.joined.push_back(at(spares[i], 2));
          } else {
            idle.push_back(spares[i]);
          }
        }
        std::sort(a.joined.begin(), a.joined.end());
        // The workers lost since the last rendezvous: what a newcomer's report names (it took no
        // part in the survivors' shrink).
        std::vector<int> live;
        for (int r = 0; r < n; ++r) live.push_back(at(r, 2));
        for (int w : worker_ids_)
          if (std::find(live.begin(), live.end(), w) == live.end()) a.lost.push_back(w);
        std::sort(a.lost.begin(), a.lost.end());
        const auto pos = std::find(order.begin(), order.end(), me);
        const bool working = pos != order.end();
        MPI_Comm next = MPI_COMM_NULL;
        ok = MPI_Comm_split(shrunk, working ? 0 : MPI_UNDEFINED, static_cast<int>(pos - order.begin()), &next) ==
             MPI_SUCCESS;
        a.workers = detail::CommHandle(next);
        for (int r : order) a.ids.push_back(at(r, 2));
      }
      // Uniform verdict: a death anywhere in the above fails the agreement on every member.
      int flag = ok ? 1 : 0;
      const int rc = MPIX_Comm_agree(shrunk, &flag);
      if (rc != MPI_SUCCESS || flag == 0) continue;  // shrink again, without the dead
      if (a.workers) detail::mpi_check(MPI_Comm_set_errhandler(a.workers.get(), MPI_ERRORS_RETURN),
                                       "reprosgd::SparePool: MPI_Comm_set_errhandler");
      workers_ = order;
      worker_ids_ = a.ids;
      spares_ = idle;
      spare_ = !a.workers;
      if (spare_) a.ids.clear();
      return a;
    }
  }

  detail::CommHandle pool_;     // every live member: workers and spares (MPI_ERRORS_RETURN)
  detail::CommHandle initial_;  // the workers' communicator at construction (null on a spare)
  std::vector<int> workers_;    // pool ranks of the workers (as of the last rendezvous)
  std::vector<int> spares_;     // pool ranks of the idle spares
  std::vector<int> worker_ids_;  // ids of the workers (as of the last rendezvous)
  int id_ = 0;
  int target_ = 1;
  int release_code_ = 0;
  bool spare_ = false;
  bool released_ = false;
};

REPROSGD_END_NAMESPACE
