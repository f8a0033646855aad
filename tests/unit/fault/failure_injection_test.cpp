// SPDX-License-Identifier: BSD-3-Clause
/// @file FailureInjection<Par>: the concepts see through it exactly as through Par; it forwards
/// every operation; it kills the process at the scheduled points and nowhere else.
#include <doctest/doctest.h>

#include <reprosgd/concepts/exchange.hpp>
#include <reprosgd/concepts/failure_injecting.hpp>
#include <reprosgd/concepts/fault_policy.hpp>
#include <reprosgd/fault/failure_injection.hpp>
#include <reprosgd/fault/fault_injection.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/nn/model_group.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/reduction/exact.hpp>
#include <reprosgd/reduction/native.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>

#if REPROSGD_HAS_MPI
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/hybrid.hpp>
#endif
#if REPROSGD_HAS_ULFM
#include <reprosgd/parallel/ulfm_data_parallel.hpp>
#include <reprosgd/parallel/ulfm_hybrid.hpp>
#endif

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <functional>
#include <span>
#include <utility>

namespace {

using reprosgd::FailureInjection;
using reprosgd::FailurePoint;
using reprosgd::FailureSchedule;
using Host = Kokkos::DefaultHostExecutionSpace;

/// A two-rank group that only counts the calls it receives (no data moves): enough to see which
/// operations FailureInjection forwards and which pass the `allreduce` point.
struct Counts {
  int max = 0, sum = 0, runs = 0, ring = 0, gather = 0, agree = 0, recover = 0, chunk_sums = 0;
};
class CountingGroup : public reprosgd::Serial<Host> {
 public:
  explicit CountingGroup(Counts* counts) : counts_(counts) {}
  [[nodiscard]] int size() const noexcept { return 2; }
  template <class View>
  void allreduce_max(const View&) const { ++counts_->max; }
  template <class View>
  void allreduce_sum(const View&) const { ++counts_->sum; }
  void exchange_runs(const float*, long, long, std::span<const long>, std::span<const std::int32_t>, float*) const {
    ++counts_->runs;
  }
  void ring_step(const std::int64_t*, long, std::int64_t*, long) const { ++counts_->ring; }
  [[nodiscard]] bool allgather_runs(float*, std::span<const long>, std::span<const long>, bool ok) const {
    ++counts_->gather;
    return ok;
  }
  Counts* counts_;
};

/// A recoverable policy (an in-process stand-in for UlfmDataParallel).
class FakeRecoverable : public reprosgd::Serial<Host> {
 public:
  explicit FakeRecoverable(Counts* counts) : counts_(counts) {}
  [[nodiscard]] bool step_completed_everywhere(bool ok) const {
    ++counts_->agree;
    return ok;
  }
  void abandon_step() const {}
  [[nodiscard]] std::uint64_t agree_min(std::uint64_t v) const { return v; }
  reprosgd::RecoveryReport recover() {
    ++counts_->recover;
    return {.old_rank = 0, .old_size = 2, .new_rank = 0, .new_size = 1};
  }
  Counts* counts_;
};

/// A model group whose chunk sums exchange through the group they are given (as MpiModelGroup's).
class FakeModelGroup {
 public:
  explicit FakeModelGroup(Counts* counts) : comm_(counts) {}
  [[nodiscard]] int model_rank() const noexcept { return 0; }
  [[nodiscard]] int model_size() const noexcept { return 2; }
  [[nodiscard]] CountingGroup& parallelism() noexcept { return comm_; }
  template <class Ranges, class Full>
  void gather_features(const float*, long, Ranges, const Full&) {}
  template <class Partials, class Sum>
  void sum_input_gradient(const Partials& partials, int chunks, const Sum& sum) {
    sum_input_gradient(comm_, partials, chunks, sum);
  }
  template <class Via, class Partials, class Sum>
  void sum_input_gradient(Via& via, const Partials&, int, const Sum&) {
    ++comm_.counts_->chunk_sums;
    std::int64_t x = 0;
    via.ring_step(&x, 1, &x, 1);  // the exchange an Exact sum over two ranks starts with
  }
  void share(float*, long, int) {}
  void gather_to_root(const float*, std::span<const long>, float*) {}

 private:
  CountingGroup comm_;
};

/// A sharded policy (an in-process stand-in for Hybrid): a data dimension of one, a model group.
class FakeSharded : public reprosgd::Serial<Host> {
 public:
  explicit FakeSharded(Counts* counts) : group_(counts), world_() {}
  [[nodiscard]] FakeModelGroup& model_group() noexcept { return group_; }
  [[nodiscard]] int world_rank() const noexcept { return 0; }
  [[nodiscard]] reprosgd::Serial<Host>& world() noexcept { return world_; }

 private:
  FakeModelGroup group_;
  reprosgd::Serial<Host> world_;
};

/// A policy with the Parallelism members only (no Exchange): Exact all-reduces its int64 sums.
class PlainPolicy {
 public:
  using execution_space = Host;
  using reduction_type = reprosgd::Exact;
  static constexpr const char* name() noexcept { return "plain"; }
  [[nodiscard]] const Host& space() const noexcept { return space_; }
  [[nodiscard]] int rank() const noexcept { return 0; }
  [[nodiscard]] int size() const noexcept { return 1; }
  [[nodiscard]] reprosgd::MicroBatchRange micro_batch_range(long m) const noexcept { return {0, m}; }
  void barrier() const noexcept {}
  [[nodiscard]] bool agree(bool flag) const noexcept { return flag; }
  template <class View>
  void allreduce_max(const View&) const noexcept {}
  template <class View>
  void allreduce_sum(const View&) const noexcept {}
  template <class In, class Out>
  void allgather_micro_batches(const In&, const Out&, long) const noexcept {}

 private:
  Host space_{};
};

/// The wait status of a child process that runs `body`, then exits 0.
int status_of_child(const std::function<void()>& body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return status;
}
bool killed(int status) { return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL; }
bool exited_cleanly(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

template <class P>
constexpr bool sees_through() {
  using W = FailureInjection<P>;
  return reprosgd::Parallelism<W> == reprosgd::Parallelism<P> && reprosgd::Exchange<W> == reprosgd::Exchange<P> &&
         reprosgd::ShardedParallelism<W> == reprosgd::ShardedParallelism<P> &&
         reprosgd::RecoverableParallelism<W> == reprosgd::RecoverableParallelism<P> &&
         reprosgd::Reduction<reprosgd::Exact, W> == reprosgd::Reduction<reprosgd::Exact, P> &&
         reprosgd::FailureInjecting<W> && !reprosgd::FailureInjecting<P>;
}

}  // namespace

// The concepts hold for the wrapper exactly when they hold for the wrapped policy.
static_assert(sees_through<reprosgd::Serial<>>());
static_assert(sees_through<reprosgd::Serial<Host, reprosgd::Native>>());
static_assert(sees_through<CountingGroup>());
static_assert(sees_through<FakeRecoverable>());
static_assert(sees_through<FakeSharded>());
static_assert(sees_through<PlainPolicy>());
static_assert(reprosgd::Exchange<FailureInjection<CountingGroup>>);
static_assert(!reprosgd::Exchange<FailureInjection<PlainPolicy>>);
static_assert(reprosgd::RecoverableParallelism<FailureInjection<FakeRecoverable>>);
static_assert(reprosgd::ShardedParallelism<FailureInjection<FakeSharded>>);
static_assert(!reprosgd::ShardedParallelism<FailureInjection<reprosgd::Serial<>>>);
// const members stay const through the wrapper when the wrapped policy's are.
static_assert(requires(const FailureInjection<reprosgd::Serial<>>& p) {
  p.barrier();
  p.agree(true);
  p.space();
  p.micro_batch_range(4);
});
#if REPROSGD_HAS_MPI
static_assert(sees_through<reprosgd::DataParallel<>>());
static_assert(sees_through<reprosgd::DataParallel<Host, reprosgd::Native>>());
static_assert(sees_through<reprosgd::Hybrid<>>());
static_assert(sees_through<reprosgd::ModelParallel<>>());
static_assert(reprosgd::ShardedParallelism<FailureInjection<reprosgd::Hybrid<>>>);
static_assert(reprosgd::Exchange<FailureInjection<reprosgd::DataParallel<>>>);
#endif
#if REPROSGD_HAS_ULFM
static_assert(sees_through<reprosgd::UlfmDataParallel<>>());
static_assert(sees_through<reprosgd::UlfmHybrid<>>());
static_assert(reprosgd::RecoverableParallelism<FailureInjection<reprosgd::UlfmHybrid<>>>);
#endif

TEST_SUITE("fault/failure_injection") {
  TEST_CASE("failure_scheduled answers for this identity only; failure_point records the step") {
    FailureInjection<reprosgd::Serial<Host>> par(FailureSchedule::parse("1@4:allreduce,1@6:checkpoint,0@9"), 1,
                                                 reprosgd::Serial<Host>());
    CHECK(par.failure_scheduled(4, FailurePoint::allreduce));
    CHECK(par.failure_scheduled(6, FailurePoint::checkpoint));
    CHECK_FALSE(par.failure_scheduled(4, FailurePoint::step));
    CHECK_FALSE(par.failure_scheduled(9, FailurePoint::step));  // identity 0's
    CHECK(par.identity() == 1);
    CHECK(par.schedule().failures().size() == 3);
    par.failure_point(4, FailurePoint::step);  // not scheduled: returns
    par.failure_point(9, FailurePoint::step);
    CHECK(std::string(decltype(par)::name()) == "serial");
  }

  TEST_CASE("failure_point kills the process exactly at a scheduled (identity, step, point)") {
    const FailureSchedule schedule = FailureSchedule::parse("1@4:step,1@5:checkpoint");
    auto at = [&](int identity, std::uint64_t step, FailurePoint point) {
      return status_of_child([&] {
        FailureInjection<reprosgd::Serial<Host>> par(schedule, identity, reprosgd::Serial<Host>());
        par.failure_point(step, point);
      });
    };
    CHECK(killed(at(1, 4, FailurePoint::step)));
    CHECK(killed(at(1, 5, FailurePoint::checkpoint)));
    CHECK(exited_cleanly(at(0, 4, FailurePoint::step)));
    CHECK(exited_cleanly(at(1, 4, FailurePoint::checkpoint)));
    CHECK(exited_cleanly(at(1, 5, FailurePoint::step)));
  }

  TEST_CASE("the allreduce point: the exchange operations of the step last reported, nothing else") {
    const FailureSchedule schedule = FailureSchedule::parse("0@3:allreduce");
    Kokkos::View<std::int32_t*, Kokkos::HostSpace> i32("i32", 1);
    Kokkos::View<std::int64_t*, Kokkos::HostSpace> i64("i64", 1);
    // Step 2: every operation is forwarded, nothing dies.
    Counts counts;
    FailureInjection<CountingGroup> par(schedule, 0, CountingGroup(&counts));
    par.failure_point(2, FailurePoint::step);
    std::int64_t x = 0;
    float f = 0.0f;
    const long offsets[3] = {0, 1, 1};
    const std::int32_t rows_of[2] = {1, 1};
    par.allreduce_max(i32);
    par.allreduce_sum(i64);
    par.exchange_runs(&f, 1, 1, offsets, rows_of, &f);
    par.ring_step(&x, 1, &x, 1);
    CHECK(par.allgather_runs(&f, std::span<const long>(offsets, 2), std::span<const long>(offsets, 2), true));
    CHECK(counts.max == 1);
    CHECK(counts.sum == 1);
    CHECK(counts.runs == 1);
    CHECK(counts.ring == 1);
    CHECK(counts.gather == 1);
    // Step 3: each data-moving exchange operation kills; the exponent MAX and the gather do not.
    auto at_step_3 = [&](const std::function<void(FailureInjection<CountingGroup>&)>& op) {
      return status_of_child([&] {
        Counts c;
        FailureInjection<CountingGroup> p(schedule, 0, CountingGroup(&c));
        p.failure_point(3, FailurePoint::step);
        op(p);
      });
    };
    CHECK(killed(at_step_3([&](auto& p) { p.ring_step(&x, 1, &x, 1); })));
    CHECK(killed(at_step_3([&](auto& p) { p.exchange_runs(&f, 1, 1, offsets, rows_of, &f); })));
    CHECK(killed(at_step_3([&](auto& p) { p.allreduce_sum(i64); })));
    CHECK(exited_cleanly(at_step_3([&](auto& p) { p.allreduce_max(i32); })));
    CHECK(exited_cleanly(at_step_3([&](auto& p) {
      (void)p.allgather_runs(&f, std::span<const long>(offsets, 2), std::span<const long>(offsets, 2), true);
    })));
  }

  TEST_CASE("a sharded policy's model group reaches the allreduce point in its chunk sums") {
    const FailureSchedule schedule = FailureSchedule::parse("0@7:allreduce");
    reprosgd::Matrix<Kokkos::HostSpace> partials("partials", 2, 4);
    Kokkos::View<float*, Kokkos::HostSpace> sum("sum", 4);
    const reprosgd::BufferRef<Kokkos::HostSpace> out(sum.data(), 4);
    Counts counts;
    FailureInjection<FakeSharded> par(schedule, 0, FakeSharded(&counts));
    par.failure_point(6, FailurePoint::step);
    auto& group = par.model_group();
    group.sum_input_gradient(partials, 2, out);
    CHECK(counts.chunk_sums == 1);
    CHECK(counts.ring == 1);  // through the wrapped group
    CHECK(group.model_size() == 2);
    CHECK(&par.world() == &par.wrapped().world());
    const int status = status_of_child([&] {
      Counts c;
      FailureInjection<FakeSharded> p(schedule, 0, FakeSharded(&c));
      p.failure_point(7, FailurePoint::step);
      p.model_group().sum_input_gradient(partials, 2, out);
    });
    CHECK(killed(status));
  }

  TEST_CASE("the recoverable members are the wrapped policy's") {
    Counts counts;
    FailureInjection<FakeRecoverable> par(FailureSchedule(), 0, FakeRecoverable(&counts));
    CHECK(par.step_completed_everywhere(true));
    CHECK(par.agree_min(17) == 17);
    par.abandon_step();
    CHECK(par.recover().old_size == 2);
    CHECK(counts.agree == 1);
    CHECK(counts.recover == 1);
  }

  TEST_CASE("Exact through the wrapper has the wrapped policy's bits") {
    Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> rows("rows", 3, 700);
    for (long u = 0; u < 3; ++u)
      for (long i = 0; i < 700; ++i) rows(u, i) = static_cast<float>((u * 7919 + i * 104729) % 1000) * 0.37f - 150.0f;
    Kokkos::View<float*, Kokkos::HostSpace> a("a", 700), b("b", 700);
    reprosgd::Serial<Host> serial;
    FailureInjection<reprosgd::Serial<Host>> wrapped(FailureSchedule::parse("0@0:allreduce"), 0, reprosgd::Serial<Host>());
    reprosgd::Exact e1, e2;
    CHECK(e1.reduce(serial, rows, 3, a).finite);
    CHECK(e2.reduce(wrapped, rows, 3, b).finite);  // one rank: no exchange, so no allreduce point
    REPROSGD_CHECK_BITWISE_EQUAL(a, b);
  }
}
