// SPDX-License-Identifier: BSD-3-Clause
/// @file FiberWorld and FiberModelParallel: model parallelism over ranks that are fibers of one
/// thread, with scheduled deaths and ULFM-like shrinking, so that the Trainer's sharded recovery
/// (buddy restore, the fallback to the disk checkpoint, a failure before the first buddy snapshot,
/// replay) is unit-tested without MPI, in seconds, on every host backend.
///
/// Each rank has its own Trainer, model shard and policy, and runs on its own stack (ucontext) in
/// the test's thread: Kokkos host backends keep per-thread state (Kokkos 3.4's OpenMP instance is
/// a __thread variable), so the ranks must all be this thread, taking turns. A rank runs until it
/// waits in a collective. A collective is a rendezvous: every participant deposits its bytes and
/// receives everyone's, in rank order. A rank scheduled to die does so on entering a collective:
/// its fiber ends, and every survivor's collective that waits for it throws process_failure
/// (every survivor in the same call, as ULFM's revoke and agreement make it). recover() is a
/// rendezvous of the survivors that renumbers them.
///
/// The grid is 1 x P (ModelParallel): the model group and the whole grid are the same ranks, the
/// data dimension is the rank alone. The gradient and input-gradient sums are the library's Exact
/// reduction over these groups, so a run must give the bits of the one-process run.
#pragma once

#include <reprosgd/concepts/buddy_exchange.hpp>
#include <reprosgd/concepts/failure_injecting.hpp>
#include <reprosgd/concepts/model_group.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/reduction/exact.hpp>

#include <Kokkos_Core.hpp>
#include <cxxabi.h>
#include <ucontext.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace reprosgd_test {

/// One scheduled death: rank `rank` (numbered as at the start) dies at its `occurrence`-th call
/// (from 1) of collective `op` during step `step`, counted across the redos of the step's stages.
/// Ops: agree, allreduce_max, allreduce_sum, allgather, gather_features, sum_input_gradient,
/// gather_to_root, share, step_completed, agree_min, buddy_words, buddy_ring, buddy_broadcast,
/// recover. Before the first step the step is ~0 (FiberWorld::before_first_step).
struct FiberFailure {
  std::uint64_t step = 0;
  std::string op;
  int occurrence = 1;
  int rank = 1;
};

/// What ends a rank's fiber when it dies (caught by FiberWorld::run, never seen by the library).
struct RankKilled {};

namespace detail {
// libstdc++'s per-thread exception state (the exceptions being handled, the uncaught count): each
// fiber keeps its own, swapped in and out with its stack, since a fiber may yield inside a catch
// handler (the Trainer recovers from inside one) while another fiber throws and catches.
struct EhGlobals {
  void* caught = nullptr;
  unsigned int uncaught = 0;
};
inline EhGlobals* eh_globals() noexcept { return reinterpret_cast<EhGlobals*>(abi::__cxa_get_globals()); }

// A context to run on: its registers, its stack, its exception state.
struct Context {
  ucontext_t registers{};
  std::unique_ptr<char[]> stack;
  EhGlobals eh;
};
// Leave `from` for `to`, keeping each one's exception state with it.
inline void switch_context(Context& from, Context& to) {
  from.eh = *eh_globals();
  *eh_globals() = to.eh;
  swapcontext(&from.registers, &to.registers);
}
}  // namespace detail

/// The ranks, their rendezvous, and the fibers they run on (see the file comment).
class FiberWorld {
 public:
  static constexpr std::uint64_t before_first_step = ~std::uint64_t{0};

  FiberWorld(int ranks, std::vector<FiberFailure> schedule) : schedule_(std::move(schedule)) {
    std::vector<int> all;
    for (int r = 0; r < ranks; ++r) all.push_back(r);
    epoch_members_.push_back(all);
    const auto n = static_cast<std::size_t>(ranks);
    step_.assign(n, before_first_step);
    calls_.resize(n);
    seq_.assign(n, 0);
    epoch_.assign(n, 0);
  }
  FiberWorld(const FiberWorld&) = delete;
  FiberWorld& operator=(const FiberWorld&) = delete;

  /**
   * Run body(rank) for every rank on its own fiber of this thread, switching only when a fiber
   * waits in a collective; returns once every fiber ended (a death ends its fiber). An exception
   * out of body is kept per rank (error()). @throws std::logic_error when every fiber waits for
   * another (the ranks' collectives do not match)
   */
  void run(const std::function<void(int)>& body) {
    const auto n = epoch_members_.front().size();
    errors_.assign(n, nullptr);
    killed_.assign(n, false);
    finished_.assign(n, false);
    fibers_ = std::vector<detail::Context>(n);
    body_ = &body;
    for (std::size_t r = 0; r < n; ++r) {
      detail::Context& f = fibers_[r];
      f.stack = std::make_unique<char[]>(stack_bytes);
      getcontext(&f.registers);
      f.registers.uc_stack.ss_sp = f.stack.get();
      f.registers.uc_stack.ss_size = stack_bytes;
      f.registers.uc_link = nullptr;
      const auto self = reinterpret_cast<std::uintptr_t>(this);
      makecontext(&f.registers, reinterpret_cast<void (*)()>(&FiberWorld::entry), 3, static_cast<unsigned>(self >> 32),
                  static_cast<unsigned>(self & 0xFFFFFFFFu), static_cast<unsigned>(r));
    }
    // Round robin until every fiber ended; a round in which nothing happened is a deadlock.
    for (;;) {
      bool any = false;
      const std::uint64_t before = progress_;
      for (std::size_t r = 0; r < n; ++r)
        if (!finished_[r]) {
          any = true;
          current_ = static_cast<int>(r);
          detail::switch_context(scheduler_, fibers_[r]);
        }
      if (!any) break;
      if (progress_ == before)
        throw std::logic_error("FiberWorld: every rank waits in a collective that another never joins");
    }
    fibers_.clear();
  }
  [[nodiscard]] bool killed(int rank) const { return killed_[static_cast<std::size_t>(rank)]; }
  [[nodiscard]] std::exception_ptr error(int rank) const { return errors_[static_cast<std::size_t>(rank)]; }

  /// The members of `rank`'s current epoch (ranks as numbered at the start, ascending): its grid.
  [[nodiscard]] const std::vector<int>& members_of(int rank) const {
    return epoch_members_.at(epoch_[static_cast<std::size_t>(rank)]);
  }

  /// The step `rank`'s next collectives belong to (a new step resets its call counts).
  void set_step(int rank, std::uint64_t step) {
    auto& s = step_[static_cast<std::size_t>(rank)];
    if (s != step) calls_[static_cast<std::size_t>(rank)].clear();
    s = step;
  }

  /**
   * `me`'s next collective of its epoch: deposit `mine`, receive every participant's bytes in rank
   * order. Participants: the epoch's members (`survivors_only`: those not dead when the
   * rendezvous opens, for recover()). Throws process_failure when a participant is dead, and
   * RankKilled when `me` is scheduled to die here.
   */
  std::vector<std::vector<std::byte>> collective(int me, const char* op, std::span<const std::byte> mine, bool agreement,
                                                 bool survivors_only = false) {
    const auto mi = static_cast<std::size_t>(me);
    const int count = ++calls_[mi][op];
    const Key key{epoch_[mi], seq_[mi]++};
    for (const FiberFailure& f : schedule_)
      if (f.rank == me && f.step == step_[mi] && f.op == op && f.occurrence == count) {
        dead_.push_back(me);
        ++progress_;
        throw RankKilled{};
      }
    auto [it, opened] = slots_.try_emplace(key);
    Slot& slot = it->second;
    if (opened) {
      slot.op = op;
      for (int r : epoch_members_.at(key.epoch))
        if (!survivors_only || !is_dead(r)) slot.participants.push_back(r);
      slot.bytes.resize(slot.participants.size());
    } else if (slot.op != op) {
      throw std::logic_error(std::string("FiberWorld: rank ") + std::to_string(me) + " calls " + op +
                             " where another called " + slot.op + " (collectives out of order)");
    }
    const auto position = static_cast<std::size_t>(
        std::find(slot.participants.begin(), slot.participants.end(), me) - slot.participants.begin());
    slot.bytes[position].assign(mine.begin(), mine.end());
    ++slot.arrived;
    ++progress_;
    while (slot.arrived < slot.participants.size() && lost_participant(slot) < 0) yield();
    const int lost = slot.arrived == slot.participants.size() ? -1 : lost_participant(slot);
    std::vector<std::vector<std::byte>> all;
    if (lost < 0) all = slot.bytes;
    if (++slot.left == slot.arrived) slots_.erase(key);
    if (lost >= 0)
      throw reprosgd::process_failure("FiberWorld: rank " + std::to_string(lost) + " died (" + op + " of rank " +
                                          std::to_string(me) + ")",
                                      {lost}, agreement);
    return all;
  }

  /// recover(): the survivors of `me`'s epoch agree on who is gone and start a new epoch.
  /// Returns the ranks lost since the epoch began. @throws process_failure if one dies meanwhile
  std::vector<int> shrink(int me) {
    (void)collective(me, "recover", {}, true, true);
    const auto mi = static_cast<std::size_t>(me);
    const std::size_t next = epoch_[mi] + 1;
    if (epoch_members_.size() <= next) {  // the first survivor out says who is left
      std::vector<int> alive;
      for (int r : epoch_members_.at(epoch_[mi]))
        if (!is_dead(r)) alive.push_back(r);
      epoch_members_.push_back(alive);
    }
    std::vector<int> lost;
    for (int r : epoch_members_.at(epoch_[mi]))
      if (std::find(epoch_members_[next].begin(), epoch_members_[next].end(), r) == epoch_members_[next].end())
        lost.push_back(r);
    epoch_[mi] = next;
    seq_[mi] = 0;
    return lost;
  }

 private:
  static constexpr std::size_t stack_bytes = std::size_t{8} << 20;

  struct Key {
    std::size_t epoch;
    std::uint64_t seq;
    bool operator<(const Key& o) const { return epoch != o.epoch ? epoch < o.epoch : seq < o.seq; }
  };
  struct Slot {
    std::string op;
    std::vector<int> participants;
    std::vector<std::vector<std::byte>> bytes;
    std::size_t arrived = 0, left = 0;
  };

  // A fiber's first frame: run the body, keep what ended it, hand back to the scheduler for good.
  static void entry(unsigned high, unsigned low, unsigned rank) {
    auto* world = reinterpret_cast<FiberWorld*>((static_cast<std::uintptr_t>(high) << 32) | low);
    const std::size_t r = rank;
    try {
      (*world->body_)(static_cast<int>(r));
    } catch (const RankKilled&) {
      world->killed_[r] = true;
    } catch (...) {
      world->errors_[r] = std::current_exception();
    }
    world->finished_[r] = true;
    ++world->progress_;
    detail::switch_context(world->fibers_[r], world->scheduler_);
  }
  void yield() { detail::switch_context(fibers_[static_cast<std::size_t>(current_)], scheduler_); }
  bool is_dead(int r) const { return std::find(dead_.begin(), dead_.end(), r) != dead_.end(); }
  int lost_participant(const Slot& slot) const {
    for (int r : slot.participants)
      if (is_dead(r)) return r;
    return -1;
  }

  std::vector<std::vector<int>> epoch_members_;  // the members of each epoch (a shrink starts one)
  std::vector<FiberFailure> schedule_;
  std::vector<std::uint64_t> step_;
  std::vector<std::map<std::string, int>> calls_;
  std::vector<std::uint64_t> seq_;
  std::vector<std::size_t> epoch_;
  std::map<Key, Slot> slots_;
  std::vector<int> dead_;
  std::uint64_t progress_ = 0;  // deposits, deaths and ends: what a scheduling round must change
  std::vector<std::exception_ptr> errors_;
  std::vector<bool> killed_, finished_;
  std::vector<detail::Context> fibers_;
  detail::Context scheduler_;
  const std::function<void(int)>* body_ = nullptr;
  int current_ = -1;
};

/// One rank's view of its grid (the whole job): a Parallelism, BuddyExchange and, as the model
/// group's parallelism(), the group of the Exact sums over shards.
template <class ExecSpace>
class FiberGrid {
 public:
  using execution_space = ExecSpace;
  FiberGrid(FiberWorld& world, int me, ExecSpace space) : world_(&world), me_(me), space_(std::move(space)) {}

  static constexpr const char* name() noexcept { return "fiber_grid"; }
  [[nodiscard]] execution_space space() const { return space_; }
  [[nodiscard]] int rank() const {
    const auto& m = world_->members_of(me_);
    return static_cast<int>(std::find(m.begin(), m.end(), me_) - m.begin());
  }
  [[nodiscard]] int size() const { return static_cast<int>(world_->members_of(me_).size()); }
  [[nodiscard]] int original_rank() const noexcept { return me_; }
  [[nodiscard]] reprosgd::MicroBatchRange micro_batch_range(long m) const {
    return reprosgd::micro_batch_range_of(rank(), size(), m);
  }

  void barrier() const { (void)exchange("barrier", static_cast<const int*>(nullptr), 0); }
  [[nodiscard]] bool agree(bool flag) const {
    const int mine = flag ? 1 : 0;
    bool all = true;
    for (const auto& b : exchange("agree", &mine, 1, true)) all = all && as<int>(b)[0] != 0;
    return all;
  }
  template <class V>
  void allreduce_max(const V& values) const {
    using T = typename V::non_const_value_type;
    const auto all = exchange("allreduce_max", values.data(), values.extent(0));
    for (std::size_t i = 0; i < values.extent(0); ++i)
      for (const auto& b : all) values(i) = std::max<T>(values(i), as<T>(b)[i]);
  }
  template <class V>
  void allreduce_sum(const V& values) const {
    using T = typename V::non_const_value_type;
    const auto all = exchange("allreduce_sum", values.data(), values.extent(0));
    for (std::size_t i = 0; i < values.extent(0); ++i) {
      T sum = 0;
      for (const auto& b : all) sum += as<T>(b)[i];
      values(i) = sum;
    }
  }
  template <class In, class Out>
  void allgather_micro_batches(const In& mine, const Out& all, long m) const {
    using T = typename Out::non_const_value_type;
    const auto parts = exchange("allgather", mine.data(), mine.extent(0));
    for (int q = 0; q < static_cast<int>(parts.size()); ++q) {
      const auto range = reprosgd::micro_batch_range_of(q, static_cast<long>(parts.size()), m);
      std::memcpy(all.data() + range.begin, parts[static_cast<std::size_t>(q)].data(), sizeof(T) * static_cast<std::size_t>(range.size()));
    }
  }

  // BuddyExchange
  void allgather_words(std::span<const std::int64_t> mine, std::span<std::int64_t> all) const {
    std::size_t at = 0;
    for (const auto& b : exchange("buddy_words", mine.data(), mine.size())) {
      std::memcpy(all.data() + at, b.data(), b.size());
      at += b.size() / sizeof(std::int64_t);
    }
  }
  void ring_shift_bytes(std::span<const std::byte> mine, std::vector<std::byte>& from_left) const {
    const auto all = exchange("buddy_ring", mine.data(), mine.size());
    const int p = static_cast<int>(all.size()), r = rank();
    from_left = all[static_cast<std::size_t>((r - 1 + p) % p)];
  }
  void broadcast_bytes(std::vector<std::byte>& bytes, int root) const {
    bytes = exchange("buddy_broadcast", bytes.data(), bytes.size())[static_cast<std::size_t>(root)];
  }

  /// Every rank's `n` values of T, in rank order (the rendezvous).
  template <class T>
  std::vector<std::vector<std::byte>> exchange(const char* op, const T* data, std::size_t n, bool agreement = false) const {
    const auto* bytes = reinterpret_cast<const std::byte*>(data);
    return world_->collective(me_, scope_ ? scope_ : op, std::span<const std::byte>(bytes, n * sizeof(T)), agreement);
  }
  /// Count the collectives until the next set_scope(nullptr) as `op` (those inside a model-group
  /// operation built on the grid's, e.g. the Exact sum of sum_input_gradient).
  void set_scope(const char* op) noexcept { scope_ = op; }
  [[nodiscard]] FiberWorld& world() const noexcept { return *world_; }

 private:
  template <class T>
  static const T* as(const std::vector<std::byte>& b) {
    return reinterpret_cast<const T*>(b.data());
  }
  FiberWorld* world_;
  int me_;
  ExecSpace space_;
  const char* scope_ = nullptr;
};

/// The model group: the grid's ranks splitting every layer's output features (a ModelGroup).
template <class ExecSpace>
class FiberModelGroup {
 public:
  explicit FiberModelGroup(FiberGrid<ExecSpace>& grid) : grid_(&grid) {}
  [[nodiscard]] int model_rank() const { return grid_->rank(); }
  [[nodiscard]] int model_size() const { return grid_->size(); }
  [[nodiscard]] FiberGrid<ExecSpace>& parallelism() noexcept { return *grid_; }

  template <class Full>
  void gather_features(const float* local, long rows, std::span<const reprosgd::FeatureRange> ranges, const Full& full) {
    const auto me = static_cast<std::size_t>(model_rank());
    grid_->space().fence();  // `local` is complete before its bytes are deposited
    const auto parts = grid_->exchange("gather_features", local, static_cast<std::size_t>(rows * ranges[me].size()));
    for (std::size_t q = 0; q < parts.size(); ++q) {
      const auto* block = reinterpret_cast<const float*>(parts[q].data());
      const long w = ranges[q].size();
      for (long r = 0; r < rows; ++r)
        for (long j = 0; j < w; ++j) full(r, ranges[q].begin + j) = block[r * w + j];
    }
  }
  template <class Partials, class Sum>
  void sum_input_gradient(const Partials& partials, int chunks, const Sum& sum) {
    struct Scope {
      FiberGrid<ExecSpace>& grid;
      ~Scope() { grid.set_scope(nullptr); }
    } scope{*grid_};
    grid_->set_scope("sum_input_gradient");
    if (!exact_.reduce(*grid_, partials, chunks, sum).finite)
      Kokkos::deep_copy(grid_->space(), sum, std::numeric_limits<float>::quiet_NaN());
  }
  void gather_to_root(const float* local, std::span<const long> counts, float* all) {
    const auto parts = grid_->exchange("gather_to_root", local, static_cast<std::size_t>(counts[static_cast<std::size_t>(model_rank())]));
    if (model_rank() != 0) return;
    for (const auto& b : parts) {
      std::memcpy(all, b.data(), b.size());
      all += b.size() / sizeof(float);
    }
  }
  void share(float* data, long n, int root) {
    const auto parts = grid_->exchange("share", data, static_cast<std::size_t>(n));
    std::memcpy(data, parts[static_cast<std::size_t>(root)].data(), sizeof(float) * static_cast<std::size_t>(n));
  }

 private:
  FiberGrid<ExecSpace>* grid_;
  reprosgd::Exact exact_{};
};

/**
 * Model parallelism (the 1 x P grid) over a FiberWorld, for one rank: a ShardedParallelism,
 * RecoverableParallelism and FailureInjecting policy. As a Parallelism it is the data dimension
 * (this rank alone); agree() and barrier() span the grid, as in BasicHybrid.
 */
template <class ExecSpace>
class FiberModelParallel {
 public:
  using execution_space = ExecSpace;
  using reduction_type = reprosgd::Exact;

  FiberModelParallel(FiberWorld& world, int me, ExecSpace space = ExecSpace())
      : grid_(std::make_unique<FiberGrid<ExecSpace>>(world, me, space)),
        group_(std::make_unique<FiberModelGroup<ExecSpace>>(*grid_)) {}

  static constexpr const char* name() noexcept { return "fiber_model_parallel"; }
  [[nodiscard]] execution_space space() const { return grid_->space(); }
  [[nodiscard]] int rank() const noexcept { return 0; }
  [[nodiscard]] int size() const noexcept { return 1; }
  [[nodiscard]] reprosgd::MicroBatchRange micro_batch_range(long m) const noexcept { return {0, m}; }
  void barrier() { grid_->barrier(); }
  [[nodiscard]] bool agree(bool flag) { return grid_->agree(flag); }
  template <class V>
  void allreduce_max(const V&) const {}  // over the data dimension: this rank alone
  template <class V>
  void allreduce_sum(const V&) const {}
  template <class In, class Out>
  void allgather_micro_batches(const In& mine, const Out& all, long) const {
    Kokkos::deep_copy(all, mine);
  }

  // ShardedParallelism
  [[nodiscard]] FiberModelGroup<ExecSpace>& model_group() noexcept { return *group_; }
  [[nodiscard]] int world_rank() const { return grid_->rank(); }
  [[nodiscard]] FiberGrid<ExecSpace>& world() noexcept { return *grid_; }

  // RecoverableParallelism
  [[nodiscard]] bool step_completed_everywhere(bool ok) const {
    const int mine = ok ? 1 : 0;
    bool all = true;
    for (const auto& b : grid_->exchange("step_completed", &mine, 1, true)) all = all && *reinterpret_cast<const int*>(b.data()) != 0;
    return all;
  }
  void abandon_step() const noexcept { ++abandoned_; }
  [[nodiscard]] std::uint64_t agree_min(std::uint64_t v) const {
    std::uint64_t least = v;
    for (const auto& b : grid_->exchange("agree_min", &v, 1, true)) least = std::min(least, *reinterpret_cast<const std::uint64_t*>(b.data()));
    return least;
  }
  reprosgd::RecoveryReport recover() {
    reprosgd::RecoveryReport r;
    r.old_rank = grid_->rank();
    r.old_size = grid_->size();
    r.failed_ranks = r.lost_original_ranks = grid_->world().shrink(grid_->original_rank());
    r.new_rank = grid_->rank();
    r.new_size = grid_->size();
    ++recoveries_;
    return r;
  }

  // FailureInjecting: the Trainer reports each step's start, which is how the world knows the step.
  // A step's start (or its checkpoint) moves the rank to that step; fit()'s start stage does not:
  // its collectives count as before_first_step.
  void failure_point(std::uint64_t step, reprosgd::FailurePoint point) {
    if (point != reprosgd::FailurePoint::start) grid_->world().set_step(grid_->original_rank(), step);
  }
  [[nodiscard]] bool failure_scheduled(std::uint64_t, reprosgd::FailurePoint) const noexcept { return false; }
  void die_if_scheduled(std::uint64_t, reprosgd::FailurePoint) const noexcept {}

  [[nodiscard]] int recoveries() const noexcept { return recoveries_; }
  [[nodiscard]] int abandoned() const noexcept { return abandoned_; }

 private:
  std::unique_ptr<FiberGrid<ExecSpace>> grid_;          // stable addresses across moves
  std::unique_ptr<FiberModelGroup<ExecSpace>> group_;
  mutable int abandoned_ = 0;
  int recoveries_ = 0;
};

static_assert(reprosgd::BuddyExchange<FiberGrid<Kokkos::DefaultHostExecutionSpace>>);
static_assert(reprosgd::ModelGroup<FiberModelGroup<Kokkos::DefaultHostExecutionSpace>>);
static_assert(reprosgd::ShardedParallelism<FiberModelParallel<Kokkos::DefaultHostExecutionSpace>>);
static_assert(reprosgd::RecoverableParallelism<FiberModelParallel<Kokkos::DefaultHostExecutionSpace>>);
static_assert(reprosgd::FailureInjecting<FiberModelParallel<Kokkos::DefaultHostExecutionSpace>>);

}  // namespace reprosgd_test
