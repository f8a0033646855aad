// SPDX-License-Identifier: BSD-3-Clause
/// @file UlfmHybrid: hybrid (and model) parallelism that survives lost ranks with ULFM.
#pragma once

#include <reprosgd/config.hpp>

#if !REPROSGD_HAS_ULFM
#error "reprosgd/parallel/ulfm_hybrid.hpp needs an MPI with ULFM (MPIX_Comm_shrink in <mpi-ext.h>), e.g. Open MPI 5 run with mpiexec --with-ft ulfm"
#endif

#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/parallel/hybrid.hpp>
#include <reprosgd/parallel/ulfm_data_parallel.hpp>

#include <mpi.h>
#include <mpi-ext.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

REPROSGD_BEGIN_NAMESPACE

/**
 * Hybrid parallelism (a P_data x P_model grid, see BasicHybrid) whose three communicators —
 * the whole grid, the replica's model group, the data dimension — all have ULFM semantics: a
 * collective that meets a dead peer revokes its communicator and throws process_failure.
 *
 * A process that fails in one communicator may leave peers waiting in another, so
 * abandon_step() revokes all three before joining the grid-wide agreement: every survivor is
 * released, whichever collective it waits in. recover() shrinks the whole grid's communicator
 * and splits it again as the grid nearest the old one: the largest model dimension that divides
 * the survivors, is at most the old P_model, and leaves at most set_max_replicas() replicas (the
 * micro-batches per step). The Trainer then restores the lost shards (BuddyStore, or the newest
 * disk checkpoint) and re-partitions the layers (docs/parallelism.md, fault tolerance).
 */
template <class ExecSpace = Kokkos::DefaultHostExecutionSpace, class Red = Exact>
class UlfmHybrid : public BasicHybrid<ExecSpace, Red, UlfmDataParallel> {
  using hybrid = BasicHybrid<ExecSpace, Red, UlfmDataParallel>;

 public:
  using BasicHybrid<ExecSpace, Red, UlfmDataParallel>::BasicHybrid;

  /**
   * The grid `shape` over the workers of a job with spare ranks (SparePool): a spare is a 1 x 1
   * grid of its own until wait_for_work() recruits it. After a shrink the grid grows back to the
   * pool's target, with at most shape.model ranks per replica.
   * @collective over the pool's workers (the pool's constructor was over all of its ranks)
   */
  UlfmHybrid(GridShape shape, std::shared_ptr<SparePool> pool, const ExecSpace& space = ExecSpace())
      : hybrid(pool->spare() ? GridShape{1, 1} : shape, pool->initial_workers(), space), model_cap_(shape.model) {
    this->world().attach_spares(std::move(pool));
  }

  static constexpr const char* name() noexcept { return "ulfm_hybrid"; }

  /// Rank in the communicator the policy was created with (stable across shrinks).
  [[nodiscard]] int original_rank() const noexcept { return this->world_policy().original_rank(); }
  /// After a shrink, the new grid has at most this many replicas (set it to the micro-batches per step).
  void set_max_replicas(long replicas) noexcept { max_replicas_ = replicas; }

  [[nodiscard]] bool step_completed_everywhere(bool ok) const { return this->world_policy().step_completed_everywhere(ok); }
  [[nodiscard]] std::uint64_t agree_min(std::uint64_t v) const { return this->world_policy().agree_min(v); }

  /// Leave a step whose collective failed here: release every peer, then join the agreement.
  void abandon_step() const {
    revoke_all();
    this->world_policy().abandon_step();
  }

  /**
   * Shrink the grid to the survivors and split it again (see the class comment).
   * @collective over the survivors @throws process_failure if more ranks die meanwhile (call
   *         again); config_error if no grid fits the survivors
   */
  RecoveryReport recover() {
    revoke_all();
    RecoveryReport report = this->world().recover();
    split_grid("reprosgd::UlfmHybrid::recover");
    return report;
  }

  // ---- Regrow (see UlfmDataParallel): the grid of the group the spare joins ----
  [[nodiscard]] bool spare() const noexcept { return this->world_policy().spare(); }
  [[nodiscard]] bool has_spares() const noexcept { return this->world_policy().has_spares(); }
  std::optional<RecoveryReport> wait_for_work() {
    std::optional<RecoveryReport> report = this->world().wait_for_work();
    if (report) split_grid("reprosgd::UlfmHybrid::wait_for_work");
    return report;
  }
  [[nodiscard]] int release_code() const noexcept { return this->world_policy().release_code(); }
  [[nodiscard]] bool needs_state() const noexcept { return this->world_policy().needs_state(); }
  void state_received() noexcept { this->world().state_received(); }
  void release_spares(int code) noexcept { this->world().release_spares(code); }

 private:
  // Split the (shrunk or regrown) world as the grid nearest the old one: the largest model
  // dimension that divides the ranks, is at most the old one (with spares: the job's first), and
  // leaves at most max_replicas_ replicas. The survivors and the newcomers call it together.
  void split_grid(const char* who) {
    const int p = this->world().size(), old_model = this->has_spares() ? model_cap_ : this->grid().model;
    int model = 0;
    for (int m = old_model < p ? old_model : p; m >= 1 && model == 0; --m)
      if (p % m == 0 && p / m <= max_replicas_) model = m;
    if (model == 0)
      throw config_error(std::string(who) + ": no grid of at most " + std::to_string(max_replicas_) +
                         " replicas fits the " + std::to_string(p) + " surviving ranks");
    try {
      this->regrid(GridShape{p / model, model});
    } catch (const comm_error& e) {
      // A rank died while the grid was being split: the caller repairs again.
      MPIX_Comm_revoke(this->world().comm());
      throw process_failure(std::string(who) + ": " + e.what(), {}, false);
    }
  }

  void revoke_all() const {
    MPIX_Comm_revoke(this->world_policy().comm());
    MPIX_Comm_revoke(this->comm());
    MPIX_Comm_revoke(this->model_group().comm());
  }
  long max_replicas_ = INT_MAX;
  int model_cap_ = INT_MAX;  // with spares: the model dimension the job started with
};

static_assert(Parallelism<UlfmHybrid<>>);
static_assert(ShardedParallelism<UlfmHybrid<>>);
static_assert(RecoverableParallelism<UlfmHybrid<>>);
static_assert(RegrowableParallelism<UlfmHybrid<>>);

REPROSGD_END_NAMESPACE
