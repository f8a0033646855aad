// SPDX-License-Identifier: BSD-3-Clause
// The Trainer's recovery of sharded state, without MPI: ranks are fibers of one thread (FiberWorld),
// the model is split over them (FiberModelParallel, the 1 x P grid), and scheduled deaths shrink the grid.
// Every run must end with the bits of the one-process run, restored from the buddy copies or the
// disk checkpoint or (from start()'s untouched state) the seed, or with the documented error on
// every survivor.
#include <doctest/doctest.h>

#include <reprosgd/data/synthetic.hpp>
#include <reprosgd/fingerprint.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/optim/adam.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/trainer.hpp>

#include <support/exec_spaces.hpp>
#include <support/fiber_world.hpp>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using reprosgd_test::FiberFailure;
using reprosgd_test::FiberModelParallel;
using reprosgd_test::FiberWorld;

const reprosgd::TrainTest<Kokkos::HostSpace>& data() {
  // Created once and never destroyed: Views must not outlive Kokkos::finalize().
  static const auto* d =
      new reprosgd::TrainTest<Kokkos::HostSpace>(reprosgd::make_synthetic_train_test(11, 512, 96, 32, 10, {.separation = 0.3f}));
  return *d;
}

// Feature chunks of 4, so that every layer splits over up to 6 ranks.
template <class Mem>
auto model() {
  using namespace reprosgd;
  return make_sequential<Mem>(Dense{32, 24, Init::he_normal, 4}, ReLU{}, Dropout{0.2f},
                              Dense{24, 10, Init::xavier_uniform, 4});
}

// 512 / 64 = 8 steps an epoch, 2 epochs; buddy snapshots every 4 steps.
reprosgd::TrainerOptions options() {
  reprosgd::TrainerOptions o;
  o.global_batch = 64;
  o.micro_batch = 16;
  o.epochs = 2;
  o.seed = 5;
  o.eval_micro_batch = 32;
  o.buddy_every = 4;
  return o;
}

const reprosgd::Adam adam{{.lr = 3e-3f}};

template <class Space>
reprosgd::Fingerprint one_process() {
  reprosgd::Trainer<reprosgd::Serial<Space>> trainer(options());
  auto m = model<typename Space::memory_space>();
  auto state = trainer.start(m, adam);
  trainer.fit(m, adam, state, data().train, &data().test);
  return trainer.fingerprint(m, state);
}

// What one rank ended with.
struct RankResult {
  std::optional<reprosgd::Fingerprint> fingerprint;
  reprosgd::FitResult fit;
  int recoveries = 0;
};

// `ranks` ranks train the model split over them with `schedule`'s deaths; `resume` first
// resumes from the newest checkpoint in options.checkpoint_dir.
// Halves every element of a (host) parameter View: a stand-in for loading other weights.
template <class View>
void halve_all(const View& v) {
  for (std::size_t i = 0; i < v.extent(0); ++i) v(i) *= 0.5f;
}

struct NoChange {
  template <class Model>
  void operator()(Model&) const {}
};

template <class Space, class AfterStart = NoChange>
std::vector<RankResult> sharded_run(FiberWorld& world, int ranks, const reprosgd::TrainerOptions& o,
                                    bool resume = false, AfterStart after_start = {}) {
  std::vector<RankResult> results(static_cast<std::size_t>(ranks));
  world.run([&](int r) {
    using Par = FiberModelParallel<Space>;
    reprosgd::FaultTolerantTrainer<Par> trainer(o, Par(world, r));
    auto m = model<typename Space::memory_space>();
    auto state = trainer.start(m, adam);
    after_start(m);
    if (resume) REQUIRE(trainer.resume(m, adam, state, data().train).resumed);
    auto& out = results[static_cast<std::size_t>(r)];
    out.fit = trainer.fit(m, adam, state, data().train, &data().test);
    out.recoveries = trainer.parallelism().recoveries();
    out.fingerprint = trainer.fingerprint(m, state);
  });
  return results;
}

std::filesystem::path fresh_dir(const char* name) {
  auto d = std::filesystem::temp_directory_path() /
           (std::string("reprosgd_sharded_recovery_") + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d;
}

// The message a rank's exception carried ("" when none).
std::string message_of(std::exception_ptr e) {
  if (!e) return {};
  try {
    std::rethrow_exception(e);
  } catch (const reprosgd::process_failure& f) {
    return std::string("process_failure: ") + f.what();
  } catch (const std::exception& x) {
    return std::string("other: ") + x.what();
  }
}

// Survivor r ended without an error, with the one-process bits and one failure event, which it returns.
reprosgd::FailureEvent survived(const FiberWorld& world, const std::vector<RankResult>& results, int r,
                                const reprosgd::Fingerprint& expected) {
  CAPTURE(r);
  const auto& out = results[static_cast<std::size_t>(r)];
  CHECK(message_of(world.error(r)) == "");
  REQUIRE(out.fingerprint);
  CHECK(*out.fingerprint == expected);
  REQUIRE(out.fit.failures.size() == 1);
  return out.fit.failures[0];
}

}  // namespace

// A survivor of a run left with 2 ranks whose lost shards came back from the seed: the one-process
// bits, and an event that says so.
template <class Results, class Expected>
void from_seed_on_two(const FiberWorld& world, const Results& results, int r, const Expected& expected) {
  const reprosgd::FailureEvent e = survived(world, results, r, expected);
  CHECK(e.restored_from == "seed");
  CHECK(e.resumed_from == 0);
  CHECK(e.new_size == 2);
}

TEST_SUITE("trainer recovery of sharded state (ranks as fibers)") {
  TEST_CASE_TEMPLATE_DEFINE("without failures, 3 ranks splitting the model train the one-process bits", Space, clean_id) {
    const auto expected = one_process<Space>();
    FiberWorld world(3, {});
    const auto results = sharded_run<Space>(world, 3, options());
    for (int r = 0; r < 3; ++r) {
      CAPTURE(r);
      CHECK(message_of(world.error(r)) == "");
      REQUIRE(results[static_cast<std::size_t>(r)].fingerprint);
      CHECK(*results[static_cast<std::size_t>(r)].fingerprint == expected);
      CHECK(results[static_cast<std::size_t>(r)].fit.failures.empty());
    }
  }
  TEST_CASE_TEMPLATE_APPLY(clean_id, reprosgd_test::host_spaces);

  TEST_CASE_TEMPLATE_DEFINE("a rank lost mid-step: its shard from its buddy, the steps since the snapshot replayed",
                            Space, buddy_id) {
    const auto expected = one_process<Space>();
    // Rank 1 dies in the input-gradient sum of step 6 (the snapshot is of step 4), in the
    // gradient reduction of step 6, or in the epoch-end evaluation after step 7 (its 9th
    // activation gather; the event then counts the 8 steps completed).
    struct Case {
      FiberFailure failure;
      std::uint64_t event_step;
    };
    const Case cases[] = {{{6, "sum_input_gradient", 2, 1}, 6}, {{6, "allreduce_max", 1, 1}, 6}, {{7, "gather_features", 9, 1}, 8}};
    for (const Case& c : cases) {
      // Not a structured binding: CAPTURE's lambda captures f, which clang 15 (the HIP build's) refuses
      // for a binding.
      const FiberFailure& f = c.failure;
      const std::uint64_t event_step = c.event_step;
      CAPTURE(f.op);
      FiberWorld world(3, {f});
      const auto results = sharded_run<Space>(world, 3, options());
      CHECK(world.killed(1));
      for (int r : {0, 2}) {
        const reprosgd::FailureEvent e = survived(world, results, r, expected);
        CHECK(e.step == event_step);
        CHECK(e.lost_ranks == std::vector<int>{1});
        CHECK(e.old_size == 3);
        CHECK(e.new_size == 2);
        CHECK(e.restored_from == "buddy");
        CHECK(e.resumed_from == 4);
        CHECK(results[static_cast<std::size_t>(r)].recoveries == 1);
      }
    }
  }
  TEST_CASE_TEMPLATE_APPLY(buddy_id, reprosgd_test::host_spaces);

  TEST_CASE_TEMPLATE_DEFINE("two ranks lost one after the other, and one during the repair after another", Space,
                            twice_id) {
    const auto expected = one_process<Space>();
    SUBCASE("4 -> 3 -> 2: rank 3 at step 2, rank 0 at step 9; each shard from the buddy of the grid it lived in") {
      FiberWorld world(4, {{2, "gather_features", 1, 3}, {9, "sum_input_gradient", 1, 0}});
      const auto results = sharded_run<Space>(world, 4, options());
      for (int r : {1, 2}) {
        CAPTURE(r);
        const auto& out = results[static_cast<std::size_t>(r)];
        CHECK(message_of(world.error(r)) == "");
        REQUIRE(out.fingerprint);
        CHECK(*out.fingerprint == expected);
        REQUIRE(out.fit.failures.size() == 2);
        CHECK(out.fit.failures[0].lost_ranks == std::vector<int>{3});
        CHECK(out.fit.failures[0].resumed_from == 0);
        CHECK(out.fit.failures[0].new_size == 3);
        CHECK(out.fit.failures[1].lost_ranks == std::vector<int>{0});
        CHECK(out.fit.failures[1].resumed_from == 8);
        CHECK(out.fit.failures[1].new_size == 2);
        for (const auto& e : out.fit.failures) CHECK(e.restored_from == "buddy");
      }
    }
    SUBCASE("rank 1 in step 6, rank 3 in the repair: one event, both shards from their buddies") {
      FiberWorld world(4, {{6, "gather_features", 2, 1}, {6, "recover", 1, 3}});
      const auto results = sharded_run<Space>(world, 4, options());
      for (int r : {0, 2}) {
        const reprosgd::FailureEvent e = survived(world, results, r, expected);
        CHECK(e.lost_ranks == std::vector<int>{1, 3});
        CHECK(e.old_size == 4);
        CHECK(e.new_size == 2);
        CHECK(e.restored_from == "buddy");
        CHECK(e.resumed_from == 4);
      }
    }
  }
  TEST_CASE_TEMPLATE_APPLY(twice_id, reprosgd_test::host_spaces);

  TEST_CASE_TEMPLATE_DEFINE("a rank and its buddy lost together: the disk checkpoint, the seed, or the documented error",
                            Space, pair_id) {
    const auto expected = one_process<Space>();
    // Ranks 1 and 2 of 4 die in the same collective of step 10: rank 2 held rank 1's copy.
    const std::vector<FiberFailure> both = {{10, "gather_features", 3, 1}, {10, "gather_features", 3, 2}};
    SUBCASE("with checkpoints every 3 steps: resumed from step 9, the failure-free bits") {
      auto o = options();
      o.checkpoint_dir = fresh_dir("pair").string();
      o.checkpoint_every = 3;
      FiberWorld world(4, both);
      const auto results = sharded_run<Space>(world, 4, o);
      for (int r : {0, 3}) {
        const reprosgd::FailureEvent e = survived(world, results, r, expected);
        CHECK(e.lost_ranks == std::vector<int>{1, 2});
        CHECK(e.restored_from == "checkpoint");
        CHECK(e.resumed_from == 9);
        CHECK(e.new_size == 2);
      }
      std::filesystem::remove_all(o.checkpoint_dir);
    }
    SUBCASE("before the first disk checkpoint exists: drawn again from the seed, steps 0..10 replayed") {
      auto o = options();
      o.checkpoint_dir = fresh_dir("pair_empty").string();
      o.checkpoint_every = 12;  // the first would come after step 12
      FiberWorld world(4, both);
      const auto results = sharded_run<Space>(world, 4, o);
      for (int r : {0, 3}) from_seed_on_two(world, results, r, expected);
      std::filesystem::remove_all(o.checkpoint_dir);
    }
    SUBCASE("without a checkpoint directory: drawn again from the seed on the 2 survivors, the failure-free bits") {
      FiberWorld world(4, both);
      const auto results = sharded_run<Space>(world, 4, options());
      for (int r : {0, 3}) {
        const reprosgd::FailureEvent e = survived(world, results, r, expected);
        CHECK(e.lost_ranks == std::vector<int>{1, 2});
        CHECK(e.restored_from == "seed");
        CHECK(e.resumed_from == 0);
        CHECK(e.step == 10);
      }
    }
    SUBCASE("fit() began from a changed state (not start()'s): the seed cannot give it back, the documented error") {
      FiberWorld world(4, both);
      // Every rank scales its shard after start(), as loading other weights would.
      (void)sharded_run<Space>(world, 4, options(), false, [](auto& m) { halve_all(m.parameters()); });
      for (int r : {0, 3})
        CHECK(message_of(world.error(r)) ==
              "process_failure: reprosgd::Trainer::fit: the shards of rank(s) 1 were lost together with their "
              "buddies' copies and no checkpoint directory is set to fall back to");
    }
  }
  TEST_CASE_TEMPLATE_APPLY(pair_id, reprosgd_test::host_spaces);

  TEST_CASE_TEMPLATE_DEFINE("a failure before the first buddy snapshot: the disk checkpoint, or the seed",
                            Space, first_id) {
    const auto expected = one_process<Space>();
    constexpr auto start = FiberWorld::before_first_step;
    SUBCASE("a fresh run, rank 2 lost in the configuration check, before the ranks agreed that their state is "
            "start()'s: the survivors agree on it in the recovery; drawn again from the seed, the failure-free bits") {
      FiberWorld world(3, {{start, "allreduce_max", 1, 2}});
      const auto results = sharded_run<Space>(world, 3, options());
      CHECK(world.killed(2));
      for (int r : {0, 1}) from_seed_on_two(world, results, r, expected);
    }
    SUBCASE("fit() began from a changed state, rank 2 lost in the configuration check: nothing to restore from, the "
            "documented error") {
      FiberWorld world(3, {{start, "allreduce_max", 1, 2}});
      (void)sharded_run<Space>(world, 3, options(), false, [](auto& m) { halve_all(m.parameters()); });
      CHECK(world.killed(2));
      for (int r : {0, 1})
        CHECK(message_of(world.error(r)) ==
              "process_failure: reprosgd::Trainer::fit: lost rank(s) 2 before fit() took its first buddy snapshot, so "
              "their shards have no copy and no checkpoint directory is set to fall back to");
    }
    SUBCASE("a fresh run, rank 0 lost in the first snapshot's exchange: drawn again from the seed, the failure-free bits") {
      FiberWorld world(3, {{start, "buddy_ring", 1, 0}});
      const auto results = sharded_run<Space>(world, 3, options());
      CHECK(world.killed(0));
      for (int r : {1, 2}) from_seed_on_two(world, results, r, expected);
    }
    SUBCASE("a resumed run, rank 0 lost in the first snapshot's exchange: the checkpoint again, the failure-free bits") {
      auto o = options();
      o.checkpoint_dir = fresh_dir("first").string();
      o.checkpoint_every = 5;
      o.stop_after = 5;  // the first run stops after step 5, checkpointed
      {
        FiberWorld world(3, {});
        (void)sharded_run<Space>(world, 3, o);
        for (int r = 0; r < 3; ++r) CHECK(message_of(world.error(r)) == "");
      }
      o.stop_after = 0;
      FiberWorld world(3, {{start, "buddy_ring", 1, 0}});
      const auto results = sharded_run<Space>(world, 3, o, /*resume=*/true);
      CHECK(world.killed(0));
      for (int r : {1, 2}) {
        const reprosgd::FailureEvent e = survived(world, results, r, expected);
        CHECK(e.step == 5);
        CHECK(e.restored_from == "checkpoint");
        CHECK(e.resumed_from == 5);
      }
      std::filesystem::remove_all(o.checkpoint_dir);
    }
  }
  TEST_CASE_TEMPLATE_APPLY(first_id, reprosgd_test::host_spaces);
}

namespace {

// A callback that throws `error` on rank `rank` after step `step` (a full disk under the metrics
// file, a user's check): the other ranks' callbacks do not throw.
struct ThrowsOnOneRank {
  int me, rank;
  std::uint64_t step;
  std::function<void()> error;
  bool on_step_end(const reprosgd::StepMetrics& m) {
    if (me == rank && m.step == step) error();
    return false;
  }
};

// Each rank's exception, as "<kind>: <message>" (kind: the reprosgd::errc value, or "std").
std::string kind_and_message(std::exception_ptr e) {
  if (!e) return "none";
  try {
    std::rethrow_exception(e);
  } catch (const reprosgd::error& x) {
    return std::to_string(static_cast<int>(x.code())) + ": " + x.what();
  } catch (const std::exception& x) {
    return std::string("std: ") + x.what();
  }
}

// 3 ranks train with one ThrowsOnOneRank per failing rank; returns each rank's kind_and_message.
std::vector<std::string> run_with_failing_callbacks(const reprosgd::TrainerOptions& o,
                                                    std::vector<std::pair<int, std::function<void()>>> failing,
                                                    std::uint64_t step) {
  using Space = Kokkos::DefaultHostExecutionSpace;
  using Par = FiberModelParallel<Space>;
  FiberWorld world(3, {});
  world.run([&](int r) {
    reprosgd::FaultTolerantTrainer<Par> trainer(o, Par(world, r));
    auto m = model<Space::memory_space>();
    auto state = trainer.start(m, adam);
    ThrowsOnOneRank a{r, failing[0].first, step, failing[0].second};
    ThrowsOnOneRank b{r, failing.size() > 1 ? failing[1].first : -1, step, failing.size() > 1 ? failing[1].second : nullptr};
    trainer.fit(m, adam, state, data().train, &data().test, a, b);
  });
  std::vector<std::string> out;
  for (int r = 0; r < 3; ++r) out.push_back(kind_and_message(world.error(r)));
  return out;
}

}  // namespace

TEST_SUITE("trainer: a callback that fails on one rank") {
  TEST_CASE("every rank stops after that step, with its own error or one of the same kind, checkpointed") {
    const std::string elsewhere =
        "reprosgd::Trainer::fit: a callback failed on another rank after step 5 (see that rank's message); every rank "
        "stops there";
    SUBCASE("an io_error on rank 0: the others throw an io_error too; the checkpoint of step 6 resumes to the bits") {
      auto o = options();
      o.checkpoint_dir = fresh_dir("callback").string();
      o.checkpoint_every = 100;  // only the stop's checkpoint
      const auto got = run_with_failing_callbacks(
          o, {{0, [] { throw reprosgd::io_error("test: cannot write m.jsonl: No space left on device"); }}}, 5);
      const std::string io = std::to_string(static_cast<int>(reprosgd::errc::io_error)) + ": ";
      CHECK(got[0] == io + "test: cannot write m.jsonl: No space left on device");
      CHECK(got[1] == io + elsewhere);
      CHECK(got[2] == io + elsewhere);
      // Nothing trained is lost: the stop saved step 6, and resuming from it gives the uninterrupted bits.
      o.checkpoint_every = 0;
      FiberWorld world(3, {});
      const auto results = sharded_run<Kokkos::DefaultHostExecutionSpace>(world, 3, o, /*resume=*/true);
      for (int r = 0; r < 3; ++r) {
        CAPTURE(r);
        CHECK(message_of(world.error(r)) == "");
        REQUIRE(results[static_cast<std::size_t>(r)].fingerprint);
        CHECK(*results[static_cast<std::size_t>(r)].fingerprint == one_process<Kokkos::DefaultHostExecutionSpace>());
      }
      std::filesystem::remove_all(o.checkpoint_dir);
    }
    SUBCASE("two kinds on two ranks: the third rank reports the smaller kind (data before I/O)") {
      const auto got = run_with_failing_callbacks(options(),
                                                  {{2, [] { throw reprosgd::io_error("test: I/O"); }},
                                                   {1, [] { throw reprosgd::data_error("test: data"); }}},
                                                  5);
      CHECK(got[2] == std::to_string(static_cast<int>(reprosgd::errc::io_error)) + ": test: I/O");
      CHECK(got[1] == std::to_string(static_cast<int>(reprosgd::errc::invalid_data)) + ": test: data");
      CHECK(got[0] == std::to_string(static_cast<int>(reprosgd::errc::invalid_data)) + ": " + elsewhere);
    }
    SUBCASE("an exception that is not ReproSGD's: std::runtime_error elsewhere") {
      const auto got = run_with_failing_callbacks(options(), {{1, [] { throw std::out_of_range("test: user"); }}}, 5);
      CHECK(got[1] == "std: test: user");
      CHECK(got[0] == "std: " + elsewhere);
      CHECK(got[2] == "std: " + elsewhere);
    }
  }
}
