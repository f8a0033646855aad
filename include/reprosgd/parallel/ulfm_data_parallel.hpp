// SPDX-License-Identifier: BSD-3-Clause
/// @file UlfmDataParallel: DataParallel whose collectives survive a dead rank (ULFM revoke, agree, shrink).
#pragma once

#include <reprosgd/config.hpp>

#if !REPROSGD_HAS_ULFM
#error "reprosgd/parallel/ulfm_data_parallel.hpp: ShrinkAndContinue needs an MPI with ULFM (MPIX_Comm_shrink in <mpi-ext.h>), e.g. Open MPI 5 run with mpiexec --with-ft ulfm; use RestartFromCheckpoint or Abort"
#endif

#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/concepts/reduction.hpp>
#include <reprosgd/detail/mpi_check.hpp>
#include <reprosgd/detail/ulfm_errors.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/spare_pool.hpp>
#include <reprosgd/reduction/exact.hpp>

#include <Kokkos_Core.hpp>
#include <mpi.h>
#include <mpi-ext.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE


/**
 * Data parallelism that survives the loss of ranks (User-Level Failure Mitigation, MPI 4 draft /
 * Open MPI 5 `--with-ft ulfm`): DataParallel's collectives, plus an agreement after each one,
 * plus recovery by shrinking the communicator to the survivors.
 *
 * **Failure semantics.** A collective can succeed on some ranks and fail on others (a rank that
 * received every contribution it needed before the peer died completes). So a collective's failure
 * is local: the rank that sees it revokes the communicator (every other rank's next operation on
 * it then fails too) and throws process_failure with agreed() == false. What makes the outcome
 * uniform is the agreement that closes each step (step_completed_everywhere, agree): an
 * MPIX_Comm_agree, which ignores dead processes and succeeds or fails *on all survivors alike*.
 * A rank whose collective failed takes part in that same agreement from its handler
 * (abandon_step(), voting "failed"), so every survivor leaves that agreement with process_failure
 * (agreed() == true) and recovers from the same point. Any other MPI error (a bug, not a death)
 * throws comm_error.
 *
 * After process_failure, call recover() on every survivor: it shrinks the communicator; rank(),
 * size() and micro_batch_range() then describe the survivors, so the micro-batches re-map
 * (docs/distributed.md, "The micro-batch map") and, with the Exact reduction, the sums keep their bits (L3).
 *
 * The Trainer's step protocol (docs/fault_tolerance.md):
 * @code
 * for (;;) {
 *   try {
 *     compute micro-batch gradients; red.reduce(par, ...);     // may throw process_failure
 *     par.step_completed_everywhere(true);                      // the agreement, before the update
 *     apply the update; ++step; break;
 *   } catch (const reprosgd::process_failure& e) {
 *     if (!e.agreed()) par.abandon_step();                      // join the agreement the others reach
 *     par.recover();                                            // shrink, re-map, redo the step
 *   }
 * }
 * @endcode
 *
 * Cost: the agreements the caller makes (the Trainer: one before each update, one for its stop
 * vote); the collectives themselves are DataParallel's.
 * Needs `mpiexec --with-ft ulfm` at run time: without it Open MPI ends the whole job when a rank
 * dies, before any of this can run.
 *
 * @tparam ExecSpace Kokkos execution space the kernels run on.
 * @tparam Red How micro-batch gradients are summed across ranks (Exact: rank-independent bits).
 */
template <class ExecSpace = Kokkos::DefaultExecutionSpace, class Red = Exact>
class UlfmDataParallel : public DataParallel<ExecSpace, Red> {
  using base = DataParallel<ExecSpace, Red>;

 public:
  using typename base::execution_space;
  using typename base::reduction_type;

  /**
   * Duplicate `comm` with MPI_ERRORS_RETURN (as DataParallel does) and install the agreeing check.
   * @throws config_error if MPI is not initialised; comm_error if a setup call fails
   * @collective over `comm`
   */
  explicit UlfmDataParallel(MPI_Comm comm = MPI_COMM_WORLD, const ExecSpace& space = ExecSpace())
      : base(comm, space), original_ranks_(static_cast<std::size_t>(this->size())) {
    this->set_collective_check(&check_collective);
    for (int r = 0; r < this->size(); ++r) original_ranks_[static_cast<std::size_t>(r)] = r;
  }

  /**
   * A policy whose job keeps spare ranks (SparePool): the workers train on the pool's workers'
   * communicator; a spare's policy is a group of one (MPI_COMM_SELF) until wait_for_work()
   * recruits it. recover() then grows the group back to the pool's target after each shrink.
   * @collective over the pool's communicator (the pool's constructor was; this is local)
   */
  explicit UlfmDataParallel(std::shared_ptr<SparePool> pool, const ExecSpace& space = ExecSpace())
      : UlfmDataParallel(pool->initial_workers(), space) {
    attach_spares(std::move(pool));
  }

  /// Give the policy a spare pool (see the constructor above); this process's communicator must be
  /// the pool's initial_workers(). Local.
  void attach_spares(std::shared_ptr<SparePool> pool) {
    if (pool->spare()) original_ranks_.assign(1, pool->id());
    pool_ = std::move(pool);
  }

  /// This process's rank in the communicator the policy was created with (it does not change
  /// when recover() shrinks the communicator; rank() does). With a spare pool: the rank in the
  /// pool's communicator (a recruited spare keeps its own).
  [[nodiscard]] int original_rank() const noexcept { return original_ranks_[static_cast<std::size_t>(this->rank())]; }

  // ---- Regrow (a spare pool attached) ----
  /// Whether this process is an idle spare (trains nothing until wait_for_work() recruits it).
  [[nodiscard]] bool spare() const noexcept { return pool_ && pool_->spare(); }
  /// Whether a spare pool is attached.
  [[nodiscard]] bool has_spares() const noexcept { return pool_ != nullptr; }
  /**
   * On a spare: wait until the survivors of a failure recruit it (then this policy is the new
   * group, rank() among its newcomers, and the report names who joined) or the workers release it
   * (nullopt; release_code() says how their run ended).
   * @throws process_failure when every worker died; comm_error
   */
  std::optional<RecoveryReport> wait_for_work() {
    const double start = MPI_Wtime();
    PoolAssignment a = pool_->wait();
    if (!a.workers) return std::nullopt;
    RecoveryReport report;
    report.old_size = 1;
    report.lost_original_ranks = a.lost;  // the failure that made the survivors recruit it
    adopt(std::move(a), report);
    needs_state_ = true;
    report.regrow_seconds = report.seconds = MPI_Wtime() - start;
    return report;
  }
  /// How the workers' run ended, on a released spare (0: completed).
  [[nodiscard]] int release_code() const noexcept { return pool_ ? pool_->release_code() : 0; }
  /// Whether this process joined as a spare and has not yet been given the training state.
  [[nodiscard]] bool needs_state() const noexcept { return needs_state_; }
  /// The training state was installed here (call on every rank after an agreement that it was). Local.
  void state_received() noexcept { needs_state_ = false; }
  /// At the end of the workers' run: the idle spares leave with `code` (0: completed). Idempotent, local.
  void release_spares(int code) noexcept {
    if (pool_) pool_->release(code);
  }

  static constexpr const char* name() noexcept { return "ulfm_data_parallel"; }

  /**
   * Logical AND of `flag` over the live ranks, by MPIX_Comm_agree (fault tolerant). A second bit
   * says "no collective failed here": a rank that calls abandon_step() instead clears it.
   * @throws process_failure (agreed) on every survivor if a rank of the communicator has failed or
   *         abandoned the step
   * @collective @deterministic
   */
  [[nodiscard]] bool agree(bool flag) const { return checked_agree(flag, "reprosgd::UlfmDataParallel::agree"); }

  /**
   * Called in a handler of a process_failure whose agreed() is false (a collective failed here):
   * take part in the agreement that the other survivors reach next — the one closing the step or
   * stage (agree, step_completed_everywhere) — voting "failed", so that they all throw
   * process_failure from it. Never throws; afterwards call recover() like everyone else.
   * @collective (it is the other ranks' next agreement)
   */
  void abandon_step() const noexcept {
    int bits = 0;  // "no collective failed here" cleared
    (void)MPIX_Comm_agree(this->comm(), &bits);
  }

  /**
   * The agreement before a step's update is applied: true iff every rank passed `local_ok` true.
   * A step's collectives can succeed on some ranks and fail on others, and a rank can die after
   * the last one; applying the update only after this agreement means either every survivor
   * applies the step or none does, so their parameters stay identical.
   * @throws process_failure on every survivor if a rank of the communicator has failed (then call
   *         recover() and roll back to agree_min(last completed step))
   * @collective @deterministic
   */
  [[nodiscard]] bool step_completed_everywhere(bool local_ok) const {
    return checked_agree(local_ok, "reprosgd::UlfmDataParallel::step_completed_everywhere");
  }

  /**
   * The smallest `value` over the live ranks (e.g. the last step every survivor completed), by 13
   * fault-tolerant agreements: MPIX_Comm_agree ANDs 32-bit flags, so each round fixes the next 5
   * bits of the minimum (bit v of a rank's flag says "my next 5-bit digit is above v", among the
   * ranks whose higher bits equal the minimum found so far).
   * @throws process_failure on every survivor if a rank has failed
   * @collective @deterministic
   */
  [[nodiscard]] std::uint64_t agree_min(std::uint64_t value) const {
    std::uint64_t prefix = 0;  // the minimum's bits above `shift`, agreed so far
    int shift = 64;
    while (shift > 0) {
      const int width = shift >= 5 ? 5 : shift;
      shift -= width;
      const bool matches = shift + width == 64 || (value >> (shift + width)) == prefix;
      const unsigned digit = static_cast<unsigned>(value >> shift) & ((1u << width) - 1u);
      std::uint32_t bits = 0;
      for (unsigned v = 0; v < 32; ++v)
        if (!matches || digit > v) bits |= 1u << v;
      const std::uint32_t agreed =
          static_cast<std::uint32_t>(agree_bits(static_cast<int>(bits), "reprosgd::UlfmDataParallel::agree_min"));
      // The minimum's digit is the lowest clear bit (the owner of the minimum clears bit `digit`).
      prefix = (prefix << width) | static_cast<std::uint64_t>(std::countr_one(agreed));
    }
    return prefix;
  }

  /**
   * Shrink the communicator to the survivors (MPIX_Comm_shrink, which tolerates further failures
   * while it runs) and continue on it: rank(), size() and micro_batch_range() change. The failed
   * ranks are found by comparing the old and new groups, so every survivor reports the same list.
   * Also valid when nothing failed (the new communicator then has every rank).
   * @throws comm_error if the shrink fails
   * @collective over the survivors
   */
  RecoveryReport recover() {
    const double start = MPI_Wtime();
    RecoveryReport report;
    report.old_rank = this->rank();
    report.old_size = this->size();
    const MPI_Comm old = this->comm();
    MPIX_Comm_revoke(old);  // idempotent; releases any rank still waiting in an old operation
    MPI_Comm shrunk = MPI_COMM_NULL;
    detail::mpi_check(MPIX_Comm_shrink(old, &shrunk), "reprosgd::UlfmDataParallel::recover: MPIX_Comm_shrink");
    detail::CommHandle handle(shrunk);
    detail::mpi_check(MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN),
                      "reprosgd::UlfmDataParallel::recover: MPI_Comm_set_errhandler");
    std::vector<int> kept;  // kept[new rank] = old rank
    report.failed_ranks = gone_ranks(old, shrunk, kept);
    for (int r : report.failed_ranks) report.lost_original_ranks.push_back(original_ranks_[static_cast<std::size_t>(r)]);
    std::vector<int> originals(kept.size());
    for (std::size_t i = 0; i < kept.size(); ++i) originals[i] = original_ranks_[static_cast<std::size_t>(kept[i])];
    this->adopt_communicator(std::move(handle));  // frees the revoked one (a local operation)
    original_ranks_ = std::move(originals);
    if (pool_) {  // grow back: the spares the job lacks join, after the survivors
      const double regrow = MPI_Wtime();
      adopt(pool_->refill(this->rank(), !needs_state_), report);
      report.regrow_seconds = MPI_Wtime() - regrow;
    }
    report.new_rank = this->rank();
    report.new_size = this->size();
    report.seconds = MPI_Wtime() - start;
    return report;
  }

 private:
  // Continue on a rendezvous' new group (the survivors first, then the spares recruited).
  void adopt(PoolAssignment a, RecoveryReport& report) {
    this->adopt_communicator(std::move(a.workers));
    original_ranks_ = std::move(a.ids);
    report.joined_original_ranks = std::move(a.joined);
    report.new_rank = this->rank();
    report.new_size = this->size();
  }

  /// The ranks of `old` that are not in `shrunk`, ascending; `kept[i]` is the old rank of new rank i.
  static std::vector<int> gone_ranks(MPI_Comm old, MPI_Comm shrunk, std::vector<int>& kept) {
    MPI_Group old_group = MPI_GROUP_NULL, new_group = MPI_GROUP_NULL;
    detail::mpi_check(MPI_Comm_group(old, &old_group), "reprosgd::UlfmDataParallel::recover: MPI_Comm_group");
    detail::mpi_check(MPI_Comm_group(shrunk, &new_group), "reprosgd::UlfmDataParallel::recover: MPI_Comm_group");
    int old_size = 0, new_size = 0;
    MPI_Group_size(old_group, &old_size);
    MPI_Group_size(new_group, &new_size);
    std::vector<int> in(static_cast<std::size_t>(new_size)), out(in.size());
    for (int i = 0; i < new_size; ++i) in[static_cast<std::size_t>(i)] = i;
    const int rc = MPI_Group_translate_ranks(new_group, new_size, in.data(), old_group, out.data());
    MPI_Group_free(&old_group);
    MPI_Group_free(&new_group);
    detail::mpi_check(rc, "reprosgd::UlfmDataParallel::recover: MPI_Group_translate_ranks");
    kept = out;
    std::vector<char> alive(static_cast<std::size_t>(old_size), 0);
    for (int r : out)
      if (r >= 0 && r < old_size) alive[static_cast<std::size_t>(r)] = 1;
    std::vector<int> gone;
    for (int r = 0; r < old_size; ++r)
      if (!alive[static_cast<std::size_t>(r)]) gone.push_back(r);
    return gone;
  }

  /// MPIX_Comm_agree of `bits`; any error (uniform across survivors) revokes and throws (agreed).
  int agree_bits(int bits, const char* who) const {
    const int rc = MPIX_Comm_agree(this->comm(), &bits);
    if (rc != MPI_SUCCESS) detail::ulfm_raise(this->comm(), rc, true, who, "MPIX_Comm_agree");
    return bits;
  }

  /// agree() and step_completed_everywhere(): bit 0 the flag, bit 1 "no collective failed here".
  bool checked_agree(bool flag, const char* who) const {
    const int bits = agree_bits((flag ? 1 : 0) | 2, who);
    if ((bits & 2) == 0) detail::ulfm_raise(this->comm(), MPIX_ERR_PROC_FAILED, true, who, "MPIX_Comm_agree");
    return (bits & 1) != 0;
  }

  /**
   * Installed into DataParallel: called after every collective with its return code. No agreement
   * here (that would cost one MPIX_Comm_agree per collective): a failure revokes the communicator
   * and throws process_failure with agreed() == false on this rank; the step's closing agreement
   * makes it uniform (see the class comment).
   */
  static void check_collective(MPI_Comm comm, int rc, const char* who, const char* call) {
    if (rc != MPI_SUCCESS) detail::ulfm_raise(comm, rc, false, who, call);
  }

  std::vector<int> original_ranks_;  ///< original_ranks_[rank] = rank in the communicator given to the constructor
  std::shared_ptr<SparePool> pool_;  ///< regrow: the job's spares (null: none)
  bool needs_state_ = false;         ///< a recruited spare that has not received the training state
};

static_assert(Parallelism<UlfmDataParallel<>>);
static_assert(Reduction<Exact, UlfmDataParallel<>>);
static_assert(RecoverableParallelism<UlfmDataParallel<>>);
static_assert(RegrowableParallelism<UlfmDataParallel<>>);

REPROSGD_END_NAMESPACE
