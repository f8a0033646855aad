// SPDX-License-Identifier: BSD-3-Clause
/// @file FailureInjection<Par>: any parallelism policy, plus deliberate process deaths at the
/// points a FailureSchedule lists — the one place where the fault-tolerance tests' kills live, so
/// that production policies carry no test hooks.
///
/// It forwards every member of the wrapped policy, the optional ones (model_group(), world(),
/// recover(), the Exchange operations, ...) only when the wrapped type has them, so that
/// Parallelism, ShardedParallelism, RecoverableParallelism and Exchange hold for
/// FailureInjection<P> exactly when they hold for P. It models FailureInjecting
/// (concepts/failure_injecting.hpp): the Trainer reports the `step` and `checkpoint` points; the
/// `allreduce` point is the wrapper's own, inside the gradient exchange (below).
#pragma once

#include <reprosgd/concepts/exchange.hpp>
#include <reprosgd/concepts/failure_injecting.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/fault/fault_injection.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

namespace detail::injection {

/// The schedule, this process's identity in it, and the step the current collectives belong to.
struct State {
  FailureSchedule schedule;
  int identity = 0;
  std::uint64_t step = 0;
  /// Kill the process if (identity, step, point) is scheduled.
  void reach(FailurePoint point) const noexcept { schedule.maybe_fail(identity, step, point); }
};

/**
 * A group of ranks (a policy, or a model group's parallelism) seen through an injection: every
 * operation Exact uses is forwarded; the ones that move the gradient's data between ranks
 * (exchange_runs, ring_step, and allreduce_sum where a group has no Exchange) first pass the
 * `allreduce` point — after the block-exponent MAX, so the other ranks are left waiting inside
 * the reduction.
 */
template <class G>
class Exchanging {
 public:
  using execution_space = typename G::execution_space;

  Exchanging(G& group, const State& state) noexcept : group_(&group), state_(&state) {}

  [[nodiscard]] decltype(auto) space() const noexcept { return group_->space(); }
  [[nodiscard]] int rank() const noexcept { return group_->rank(); }
  [[nodiscard]] int size() const noexcept { return group_->size(); }
  template <class View>
  void allreduce_max(const View& values) {
    group_->allreduce_max(values);
  }
  template <class View>
  void allreduce_sum(const View& values) {
    state_->reach(FailurePoint::allreduce);
    group_->allreduce_sum(values);
  }
  void exchange_runs(const float* rows, long k, long row_stride, std::span<const long> offsets,
                     std::span<const std::int32_t> rows_of, float* received)
    requires Exchange<G>
  {
    state_->reach(FailurePoint::allreduce);
    group_->exchange_runs(rows, k, row_stride, offsets, rows_of, received);
  }
  void ring_step(const std::int64_t* send, long send_count, std::int64_t* recv, long recv_count)
    requires Exchange<G>
  {
    state_->reach(FailurePoint::allreduce);
    group_->ring_step(send, send_count, recv, recv_count);
  }
  [[nodiscard]] bool allgather_runs(float* data, std::span<const long> counts, std::span<const long> displs, bool ok)
    requires Exchange<G>
  {
    return group_->allgather_runs(data, counts, displs, ok);
  }

 private:
  G* group_;
  const State* state_;
};

/**
 * A model group (ModelGroup, of a sharded policy) seen through an injection: its input-gradient
 * chunk sums exchange through Exchanging (the `allreduce` point, as a model group's Exact sums
 * reached it before); everything else is forwarded as it is.
 */
template <class Group>
class ModelGroupView {
 public:
  void bind(Group& group, const State& state) noexcept {
    group_ = &group;
    state_ = &state;
  }

  [[nodiscard]] int model_rank() const noexcept { return group_->model_rank(); }
  [[nodiscard]] int model_size() const noexcept { return group_->model_size(); }
  [[nodiscard]] decltype(auto) space() const noexcept
    requires requires(const Group& g) { g.space(); }
  {
    return group_->space();
  }
  [[nodiscard]] decltype(auto) comm() const noexcept
    requires requires(const Group& g) { g.comm(); }
  {
    return group_->comm();
  }
  /// The group as a Parallelism, as the wrapped group gives it (its block-exponent MAX under a
  /// sharded Exact reduction is not an injection point).
  [[nodiscard]] decltype(auto) parallelism() noexcept
    requires requires(Group& g) { g.parallelism(); }
  {
    return group_->parallelism();
  }

  template <class Ranges, class Full>
  void gather_features(const float* local, long rows, Ranges ranges, const Full& full) {
    group_->gather_features(local, rows, ranges, full);
  }
  template <class Partials, class Sum>
  void sum_input_gradient(const Partials& partials, int chunks, const Sum& sum) {
    if constexpr (requires(Group& g) { g.parallelism(); }) {
      using Via = Exchanging<std::remove_reference_t<decltype(group_->parallelism())>>;
      if constexpr (requires(Group& g, Via& via) { g.sum_input_gradient(via, partials, chunks, sum); }) {
        Via via(group_->parallelism(), *state_);
        group_->sum_input_gradient(via, partials, chunks, sum);
        return;
      }
    }
    group_->sum_input_gradient(partials, chunks, sum);
  }
  void share(float* data, long n, int root) { group_->share(data, n, root); }
  void gather_to_root(const float* local, std::span<const long> counts, float* all)
    requires requires(Group& g) { g.gather_to_root(local, counts, all); }
  {
    group_->gather_to_root(local, counts, all);
  }

 private:
  Group* group_ = nullptr;
  const State* state_ = nullptr;
};

/// The model-group view a FailureInjection<P> keeps: none when P has no model group.
template <class P>
struct GroupOf {
  struct type {};
};
template <class P>
  requires requires(P& p) { p.model_group(); }
struct GroupOf<P> {
  using type = ModelGroupView<std::remove_reference_t<decltype(std::declval<P&>().model_group())>>;
};

}  // namespace detail::injection

/**
 * A parallelism policy `Par` whose process kills itself (SIGKILL, FailureSchedule::maybe_fail) at
 * the points `schedule` lists for `identity`:
 * - FailurePoint::step and FailurePoint::checkpoint when the Trainer reports them
 *   (failure_point());
 * - FailurePoint::allreduce inside the gradient exchange of the step last reported: when the
 *   Exact reduction starts moving data (exchange_runs, the first ring_step, or allreduce_sum
 *   where the policy has no Exchange operations), after the block-exponent MAX; under a sharded
 *   policy (Hybrid, ModelParallel) also when a model group's input-gradient sum does.
 * Everything else is the wrapped policy's, unchanged: a run that reaches no scheduled point has
 * the bits and the messages of a run on `Par` itself.
 *
 * **Example** (what train_mlp --inject-failure 2@17:allreduce does):
 * @code
 * using Par = reprosgd::UlfmDataParallel<>;
 * reprosgd::FailureInjection<Par> par(reprosgd::FailureSchedule::parse("2@17:allreduce"), world_rank, Par());
 * reprosgd::Trainer<reprosgd::FailureInjection<Par>, ...> trainer(options, std::move(par));
 * @endcode
 */
template <class Par>
class FailureInjection {
  using State = detail::injection::State;

 public:
  using wrapped_type = Par;
  using execution_space = typename Par::execution_space;
  using reduction_type = typename Par::reduction_type;

  /// @param identity this process's name in `schedule` (the MPI_COMM_WORLD rank, which does not
  ///        change when a communicator shrinks)
  FailureInjection(FailureSchedule schedule, int identity, Par inner)
      : inner_(std::move(inner)), state_{std::move(schedule), identity, 0} {}

  // ---- FailureInjecting ----
  /// Record `step` for the collectives that follow, and die if (identity, step, point) is
  /// scheduled. Not collective.
  void failure_point(std::uint64_t step, FailurePoint point) noexcept {
    state_.step = step;
    state_.reach(point);
  }
  /// Whether this process is scheduled to die at (step, point). Not collective.
  /// Die if (identity, step, point) is scheduled; records nothing (safe on another thread).
  void die_if_scheduled(std::uint64_t step, FailurePoint point) const noexcept {
    state_.schedule.maybe_fail(state_.identity, step, point);
  }
  [[nodiscard]] bool failure_scheduled(std::uint64_t step, FailurePoint point) const noexcept {
    return state_.schedule.scheduled(state_.identity, step, point);
  }
  [[nodiscard]] const FailureSchedule& schedule() const noexcept { return state_.schedule; }
  [[nodiscard]] int identity() const noexcept { return state_.identity; }

  /// The wrapped policy.
  [[nodiscard]] Par& wrapped() noexcept { return inner_; }
  [[nodiscard]] const Par& wrapped() const noexcept { return inner_; }

  // ---- Parallelism ----
  static constexpr const char* name() noexcept { return Par::name(); }
  [[nodiscard]] decltype(auto) space() const noexcept { return inner_.space(); }
  [[nodiscard]] int rank() const noexcept { return inner_.rank(); }
  [[nodiscard]] int size() const noexcept { return inner_.size(); }
  [[nodiscard]] MicroBatchRange micro_batch_range(long micro_batches) const {
    return inner_.micro_batch_range(micro_batches);
  }
  void barrier() { inner_.barrier(); }
  void barrier() const
    requires requires(const Par& p) { p.barrier(); }
  {
    inner_.barrier();
  }
  [[nodiscard]] bool agree(bool flag) { return inner_.agree(flag); }
  [[nodiscard]] bool agree(bool flag) const
    requires requires(const Par& p) { p.agree(flag); }
  {
    return inner_.agree(flag);
  }
  template <class View>
  void allreduce_max(const View& values) {
    inner_.allreduce_max(values);
  }
  template <class View>
  void allreduce_sum(const View& values) {
    exchanging().allreduce_sum(values);
  }
  template <class Local, class All>
  void allgather_micro_batches(const Local& local, const All& all, long micro_batches) {
    inner_.allgather_micro_batches(local, all, micro_batches);
  }

  // ---- Exchange (concepts/exchange.hpp), when Par has it ----
  void exchange_runs(const float* rows, long k, long row_stride, std::span<const long> offsets,
                     std::span<const std::int32_t> rows_of, float* received)
    requires Exchange<Par>
  {
    exchanging().exchange_runs(rows, k, row_stride, offsets, rows_of, received);
  }
  void ring_step(const std::int64_t* send, long send_count, std::int64_t* recv, long recv_count)
    requires Exchange<Par>
  {
    exchanging().ring_step(send, send_count, recv, recv_count);
  }
  [[nodiscard]] bool allgather_runs(float* data, std::span<const long> counts, std::span<const long> displs, bool ok)
    requires Exchange<Par>
  {
    return inner_.allgather_runs(data, counts, displs, ok);
  }
  /// Native's float all-reduce: not an injection point (it never was).
  void float_allreduce_sum(float* data, long n)
    requires requires(Par& p) { p.float_allreduce_sum(data, n); }
  {
    inner_.float_allreduce_sum(data, n);
  }

  // ---- MPI policies ----
  [[nodiscard]] decltype(auto) comm() const noexcept
    requires requires(const Par& p) { p.comm(); }
  {
    return inner_.comm();
  }
  void check(int rc, const char* who, const char* call) const
    requires requires(const Par& p) { p.check(rc, who, call); }
  {
    inner_.check(rc, who, call);
  }

  // ---- ShardedParallelism (Hybrid, ModelParallel, UlfmHybrid) ----
  /// The wrapped policy's model group, its input-gradient sums passing the `allreduce` point.
  [[nodiscard]] auto& model_group() noexcept
    requires requires(Par& p) { p.model_group(); }
  {
    group_.bind(inner_.model_group(), state_);
    return group_;
  }
  [[nodiscard]] decltype(auto) world() noexcept
    requires requires(Par& p) { p.world(); }
  {
    return inner_.world();
  }
  [[nodiscard]] decltype(auto) world() const noexcept
    requires requires(const Par& p) { p.world(); }
  {
    return inner_.world();
  }
  [[nodiscard]] int world_rank() const noexcept
    requires requires(const Par& p) { p.world_rank(); }
  {
    return inner_.world_rank();
  }
  [[nodiscard]] int world_size() const noexcept
    requires requires(const Par& p) { p.world_size(); }
  {
    return inner_.world_size();
  }
  [[nodiscard]] decltype(auto) grid() const noexcept
    requires requires(const Par& p) { p.grid(); }
  {
    return inner_.grid();
  }

  // ---- RecoverableParallelism (UlfmDataParallel, UlfmHybrid) ----
  [[nodiscard]] bool step_completed_everywhere(bool ok) const
    requires requires(const Par& p) { p.step_completed_everywhere(ok); }
  {
    return inner_.step_completed_everywhere(ok);
  }
  [[nodiscard]] std::uint64_t agree_min(std::uint64_t value) const
    requires requires(const Par& p) { p.agree_min(value); }
  {
    return inner_.agree_min(value);
  }
  void abandon_step() const
    requires requires(const Par& p) { p.abandon_step(); }
  {
    inner_.abandon_step();
  }
  decltype(auto) recover()
    requires requires(Par& p) { p.recover(); }
  {
    return inner_.recover();
  }
  [[nodiscard]] int original_rank() const noexcept
    requires requires(const Par& p) { p.original_rank(); }
  {
    return inner_.original_rank();
  }
  void set_max_replicas(long replicas) noexcept
    requires requires(Par& p) { p.set_max_replicas(replicas); }
  {
    inner_.set_max_replicas(replicas);
  }
  /// BuddyExchange's broadcast (a regrow sends the state to the newcomers with it).
  void broadcast_bytes(std::vector<std::byte>& bytes, int root) const
    requires requires(const Par& p) { p.broadcast_bytes(bytes, root); }
  {
    inner_.broadcast_bytes(bytes, root);
  }
  // Regrow (a spare pool): forwarded as they are.
  [[nodiscard]] bool spare() const noexcept
    requires requires(const Par& p) { p.spare(); }
  {
    return inner_.spare();
  }
  [[nodiscard]] bool has_spares() const noexcept
    requires requires(const Par& p) { p.has_spares(); }
  {
    return inner_.has_spares();
  }
  decltype(auto) wait_for_work()
    requires requires(Par& p) { p.wait_for_work(); }
  {
    return inner_.wait_for_work();
  }
  [[nodiscard]] int release_code() const noexcept
    requires requires(const Par& p) { p.release_code(); }
  {
    return inner_.release_code();
  }
  [[nodiscard]] bool needs_state() const noexcept
    requires requires(const Par& p) { p.needs_state(); }
  {
    return inner_.needs_state();
  }
  void state_received() noexcept
    requires requires(Par& p) { p.state_received(); }
  {
    inner_.state_received();
  }
  void release_spares(int code) noexcept
    requires requires(Par& p) { p.release_spares(code); }
  {
    inner_.release_spares(code);
  }

 private:
  detail::injection::Exchanging<Par> exchanging() noexcept { return {inner_, state_}; }

  Par inner_;
  State state_;
  typename detail::injection::GroupOf<Par>::type group_{};  // model_group(): re-bound on every call (moves, regrids)
};

REPROSGD_END_NAMESPACE
