// SPDX-License-Identifier: BSD-3-Clause
/// @file FakeRecoverable: an in-process stand-in for a recoverable parallelism policy, so that the
/// Trainer's stage machine under ShrinkAndContinue (redo a stage, two failures in one step, a
/// failure during the epoch-end evaluation or during the repair itself, min_ranks) is unit-tested
/// without MPI, in seconds, on every backend.
///
/// It plays a group of `ranks` processes in one: micro_batch_range() gives this process every
/// micro-batch (the bits do not depend on who computes which, L3), and a "death" is a
/// process_failure thrown by a scheduled collective, on "every survivor" at once as ULFM's
/// agreement makes it. recover() shrinks the pretended group by the ranks lost. The gradient
/// reduction is the Exact sum of the rows on one process (LocalExactSum), so a run with failures
/// must end with the bits of a Serial run without any.
#pragma once

#include <reprosgd/concepts/failure_injecting.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/concepts/reduction.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/reduction/exact.hpp>
#include <reprosgd/reduction/local_sum.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace reprosgd_test {

/// One scheduled death: the `occurrence`-th call (from 1) of collective `op` during step `step`
/// (counted across the redos of the step's stages) kills the pretended rank `lost_rank`. op
/// "recover" fails the repair that follows a failure.
struct FakeFailure {
  std::uint64_t step = 0;
  std::string op;  ///< reduce, allgather, agree, step_completed, allreduce_max, recover
  int occurrence = 1;
  int lost_rank = 1;
};

template <class ExecSpace>
class FakeRecoverable {
 public:
  using execution_space = ExecSpace;

  /// The Exact reduction of the rows this process holds, preceded by the collective "reduce".
  struct reduction_type {
    static constexpr const char* name() noexcept { return reprosgd::Exact::name(); }
    static constexpr bool rank_independent = true;
    template <class Rows, class Sum>
    reprosgd::ReductionResult reduce(FakeRecoverable& par, const Rows& rows, long M, const Sum& sum) {
      par.collective("reduce", false);
      return local_.sum(par.space(), rows, M, sum);
    }
    reprosgd::LocalExactSum<ExecSpace> local_;
  };

  FakeRecoverable(int ranks, std::vector<FakeFailure> schedule, ExecSpace space = ExecSpace())
      : space_(std::move(space)), size_(ranks), schedule_(std::move(schedule)) {
    for (int r = 0; r < ranks; ++r) alive_.push_back(r);
  }

  static constexpr const char* name() noexcept { return "fake_recoverable"; }
  [[nodiscard]] execution_space space() const { return space_; }
  [[nodiscard]] int rank() const noexcept { return 0; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] reprosgd::MicroBatchRange micro_batch_range(long M) const noexcept { return {0, M}; }

  void barrier() { collective("barrier", false); }
  [[nodiscard]] bool agree(bool flag) {
    collective("agree", true);
    return flag;
  }
  template <class V>
  void allreduce_max(const V&) {
    collective("allreduce_max", false);
  }
  template <class V>
  void allreduce_sum(const V&) {
    collective("allreduce_sum", false);
  }
  template <class In, class Out>
  void allgather_micro_batches(const In& mine, const Out& all, long) {
    collective("allgather", false);
    Kokkos::deep_copy(all, mine);
  }

  // RecoverableParallelism
  [[nodiscard]] bool step_completed_everywhere(bool ok) const {
    collective("step_completed", true);
    return ok;
  }
  void abandon_step() const noexcept { ++abandoned_; }
  [[nodiscard]] std::uint64_t agree_min(std::uint64_t v) const noexcept { return v; }
  reprosgd::RecoveryReport recover() {
    collective("recover", true);  // another death during the repair: recover() again
    reprosgd::RecoveryReport r;
    r.old_size = size_;
    r.failed_ranks = r.lost_original_ranks = lost_since_recovery_;
    for (int lost : lost_since_recovery_) std::erase(alive_, lost);
    size_ = static_cast<int>(alive_.size());
    lost_since_recovery_.clear();
    r.new_size = size_;
    ++recoveries_;
    return r;
  }

  // FailureInjecting: the Trainer reports each step's start, which is how the fake knows the step.
  void failure_point(std::uint64_t step, reprosgd::FailurePoint point) {
    // Calls are counted per step, across the redos of its stages after a failure.
    if (point == reprosgd::FailurePoint::step && step != step_) {
      step_ = step;
      calls_.clear();
    }
    points_.emplace_back(step, point);
  }
  [[nodiscard]] bool failure_scheduled(std::uint64_t, reprosgd::FailurePoint) const noexcept { return false; }
  void die_if_scheduled(std::uint64_t, reprosgd::FailurePoint) const noexcept {}

  [[nodiscard]] int failures_thrown() const noexcept { return thrown_; }
  [[nodiscard]] int recoveries() const noexcept { return recoveries_; }
  [[nodiscard]] int abandoned() const noexcept { return abandoned_; }
  [[nodiscard]] const std::vector<std::pair<std::uint64_t, reprosgd::FailurePoint>>& points() const noexcept { return points_; }

  /// Count a call of collective `op`; throw process_failure if a death is scheduled at it.
  /// `agreement`: whether every survivor learns of it in the same call (agreed()).
  void collective(const char* op, bool agreement) const {
    int& n = calls_[op];
    ++n;
    for (const FakeFailure& f : schedule_)
      if (f.step == step_ && f.op == op && f.occurrence == n) {
        ++thrown_;
        lost_since_recovery_.push_back(f.lost_rank);
        throw reprosgd::process_failure(std::string("fake: rank ") + std::to_string(f.lost_rank) + " died in " + op +
                                            " at step " + std::to_string(step_),
                                        {f.lost_rank}, agreement);
      }
  }

 private:
  ExecSpace space_;
  int size_;
  std::vector<int> alive_;
  std::vector<FakeFailure> schedule_;
  std::uint64_t step_ = ~std::uint64_t{0};  // before the first step
  mutable std::map<std::string, int> calls_;  // calls of each collective in the current step
  mutable std::vector<int> lost_since_recovery_;
  mutable int thrown_ = 0;
  mutable int abandoned_ = 0;
  int recoveries_ = 0;
  std::vector<std::pair<std::uint64_t, reprosgd::FailurePoint>> points_;
};

static_assert(reprosgd::RecoverableParallelism<FakeRecoverable<Kokkos::DefaultHostExecutionSpace>>);
static_assert(reprosgd::FailureInjecting<FakeRecoverable<Kokkos::DefaultHostExecutionSpace>>);

}  // namespace reprosgd_test
