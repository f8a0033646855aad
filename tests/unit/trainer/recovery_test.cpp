// SPDX-License-Identifier: BSD-3-Clause
// The Trainer's stage machine under failures, without MPI: FakeRecoverable throws process_failure
// at scheduled collectives and "shrinks"; every run must end with the bits of a failure-free run
// (L3 + the agreement before each update), or with the documented error.
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
#include <support/fake_recoverable.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using reprosgd_test::FakeFailure;
using reprosgd_test::FakeRecoverable;

const reprosgd::TrainTest<Kokkos::HostSpace>& data() {
  // Created once and never destroyed: Views must not outlive Kokkos::finalize().
  static const auto* d =
      new reprosgd::TrainTest<Kokkos::HostSpace>(reprosgd::make_synthetic_train_test(7, 512, 96, 64, 10, {.separation = 0.3f}));
  return *d;
}

template <class Mem = Kokkos::DefaultExecutionSpace::memory_space>
auto model() {
  using namespace reprosgd;
  return make_sequential<Mem>(Dense{64, 24}, ReLU{}, Dropout{0.2f}, Dense{24, 10});
}

// 512 / 64 = 8 steps an epoch, 2 epochs; 4 micro-batches a step.
reprosgd::TrainerOptions options() {
  reprosgd::TrainerOptions o;
  o.global_batch = 64;
  o.micro_batch = 16;
  o.epochs = 2;
  o.seed = 3;
  o.eval_micro_batch = 32;
  return o;
}

const reprosgd::Adam adam{{.lr = 3e-3f}};

struct Observed {
  int failures = 0;
  int epochs = 0;
  std::vector<std::uint64_t> steps;
  reprosgd::FailureEvent event;
  reprosgd::EvalMetrics test;
  bool on_step_end(const reprosgd::StepMetrics& m) {
    steps.push_back(m.step);
    return false;
  }
  bool on_epoch_end(const reprosgd::EpochMetrics& m) {
    ++epochs;
    test = m.test;
    return false;
  }
  void on_failure(const reprosgd::FailureEvent& e) {
    ++failures;
    event = e;
  }
};

template <class Space>
reprosgd::Fingerprint failure_free(Observed& seen, const reprosgd::TrainerOptions& o = options()) {
  reprosgd::Trainer<reprosgd::Serial<Space>> trainer(o);
  auto m = model<typename Space::memory_space>();
  auto state = trainer.start(m, adam);
  trainer.fit(m, adam, state, data().train, &data().test, seen);
  return trainer.fingerprint(m, state);
}

template <class Space, class Fault = reprosgd::ShrinkAndContinue>
struct FaultyRun {
  using Par = FakeRecoverable<Space>;
  reprosgd::Trainer<Par, reprosgd::PhiloxStream, reprosgd::PortableBinaryFormat, Fault> trainer;
  decltype(model<typename Space::memory_space>()) m = model<typename Space::memory_space>();
  reprosgd::TrainState<reprosgd::Adam, typename Space::memory_space> state;
  Observed seen;
  reprosgd::FitResult result;

  FaultyRun(int ranks, std::vector<FakeFailure> schedule, const reprosgd::TrainerOptions& o = options())
      : trainer(o, Par(ranks, std::move(schedule))) {
    state = trainer.start(m, adam);
  }
  reprosgd::Fingerprint fit() {
    result = trainer.fit(m, adam, state, data().train, &data().test, seen);
    return trainer.fingerprint(m, state);
  }
};

// The aliases name the common fault-tolerant setups.
using FakePar = FakeRecoverable<Kokkos::DefaultExecutionSpace>;
static_assert(std::is_same_v<reprosgd::FaultTolerantTrainer<FakePar>,
                             reprosgd::Trainer<FakePar, reprosgd::PhiloxStream, reprosgd::PortableBinaryFormat,
                                               reprosgd::ShrinkAndContinue>>);
static_assert(std::is_same_v<reprosgd::RelaunchedTrainer<FakePar, reprosgd::JsonFormat>,
                             reprosgd::Trainer<FakePar, reprosgd::PhiloxStream, reprosgd::JsonFormat,
                                               reprosgd::RestartFromCheckpoint>>);

std::filesystem::path fresh_dir(const char* name) {
  auto d = std::filesystem::temp_directory_path() / (std::string("reprosgd_recovery_") + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d;
}

}  // namespace

TEST_SUITE("trainer recovery (in-process fake of a recoverable policy)") {
  TEST_CASE_TEMPLATE_DEFINE("a failure in each stage of a step: the failure-free bits, one event, every step once", Space,
                            stage_id) {
    Observed clean;
    const auto expected = failure_free<Space>(clean);
    // (collective, occurrence) at step 5, and the stage it interrupts. Step 7 ends epoch 0, so its
    // agreements are: the evaluation's closing agree (1st), the stop vote (2nd).
    struct Case {
      std::uint64_t step;
      const char* op;
      int occurrence;
      const char* stage;
    };
    const Case cases[] = {
        {5, "reduce", 1, "compute: the gradient reduction"},
        {5, "allgather", 1, "compute: the step's metrics"},
        {5, "step_completed", 1, "compute: the agreement before the update"},
        {5, "agree", 1, "stop_vote"},
        {7, "allgather", 3, "epoch_end: the evaluation"},
        {7, "agree", 1, "epoch_end: the agreement closing the evaluation"},
        {7, "agree", 2, "stop_vote after an epoch end"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.stage);
      FaultyRun<Space> run(4, {{c.step, c.op, c.occurrence, 2}});
      CHECK(run.fit() == expected);
      CHECK(run.trainer.parallelism().failures_thrown() == 1);
      CHECK(run.trainer.parallelism().size() == 3);
      REQUIRE(run.result.failures.size() == 1);
      const reprosgd::FailureEvent& e = run.result.failures[0];
      const bool after_update = std::string(c.op) == "agree" || (std::string(c.op) == "allgather" && c.occurrence == 3);
      CHECK(e.step == (after_update ? c.step + 1 : c.step));
      CHECK(e.old_size == 4);
      CHECK(e.new_size == 3);
      CHECK(e.lost_ranks == std::vector<int>{2});
      CHECK(run.seen.failures == 1);
      // Every step's callbacks ran exactly once, in order; the epochs' as many times as epochs.
      CHECK(run.seen.steps == clean.steps);
      CHECK(run.seen.epochs == 2);
      CHECK(run.seen.test.accuracy == clean.test.accuracy);
      CHECK(run.seen.test.loss == clean.test.loss);
      CHECK(run.result.steps == 16);
    }
  }
  TEST_CASE_TEMPLATE_APPLY(stage_id, reprosgd_test::host_spaces);

  TEST_CASE_TEMPLATE_DEFINE("two failures in one step, and a death during the repair", Space, twice_id) {
    Observed clean;
    const auto expected = failure_free<Space>(clean);
    SUBCASE("the redo of a failed reduction fails again") {
      FaultyRun<Space> run(4, {{3, "reduce", 1, 1}, {3, "reduce", 2, 3}});
      CHECK(run.fit() == expected);
      CHECK(run.trainer.parallelism().size() == 2);
      REQUIRE(run.result.failures.size() == 1);  // one event until a step completes
      CHECK(run.result.failures[0].lost_ranks == std::vector<int>{1, 3});
      CHECK(run.result.failures[0].new_size == 2);
      CHECK(run.seen.steps == clean.steps);
    }
    SUBCASE("a failed reduction, then a failed update agreement in the redo") {
      FaultyRun<Space> run(3, {{10, "reduce", 1, 0}, {10, "step_completed", 1, 2}});
      CHECK(run.fit() == expected);
      CHECK(run.trainer.parallelism().size() == 1);
      CHECK(run.seen.steps == clean.steps);
    }
    SUBCASE("another rank dies while the survivors repair") {
      FaultyRun<Space> run(4, {{4, "step_completed", 1, 1}, {4, "recover", 1, 2}});
      CHECK(run.fit() == expected);
      CHECK(run.trainer.parallelism().recoveries() == 1);  // the failed repair is not counted
      CHECK(run.trainer.parallelism().size() == 2);
      REQUIRE(run.result.failures.size() == 1);
      CHECK(run.result.failures[0].lost_ranks == std::vector<int>{1, 2});
    }
    SUBCASE("failures in two different steps are two events") {
      FaultyRun<Space> run(4, {{2, "reduce", 1, 3}, {12, "allgather", 2, 0}});
      CHECK(run.fit() == expected);
      REQUIRE(run.result.failures.size() == 2);
      CHECK(run.result.failures[0].lost_ranks == std::vector<int>{3});
      CHECK(run.result.failures[1].lost_ranks == std::vector<int>{0});
      CHECK(run.result.failures[1].old_size == 3);
      CHECK(run.seen.failures == 2);
    }
  }
  TEST_CASE_TEMPLATE_APPLY(twice_id, reprosgd_test::host_spaces);

  TEST_CASE_TEMPLATE_DEFINE("a failure in fit()'s start stage (its configuration checks): redone on the survivors", Space,
                            start_id) {
    Observed clean;
    const auto expected = failure_free<Space>(clean);
    // Before the first step the fake's step is ~0; the start stage's 1st agreement is the input
    // check, its 1st allreduce_max the configuration hash.
    constexpr auto start = ~std::uint64_t{0};
    for (const char* op : {"agree", "allreduce_max"}) {
      CAPTURE(op);
      FaultyRun<Space> run(3, {{start, op, 1, 2}});
      CHECK(run.fit() == expected);
      REQUIRE(run.result.failures.size() == 1);
      CHECK(run.result.failures[0].step == 0);
      CHECK(run.result.failures[0].lost_ranks == std::vector<int>{2});
      CHECK(run.result.failures[0].new_size == 2);
      CHECK(run.seen.steps == clean.steps);  // every step once
    }
  }
  TEST_CASE_TEMPLATE_APPLY(start_id, reprosgd_test::host_spaces);

  TEST_CASE("a failure while fit() writes a checkpoint: the stage is redone and the files are the failure-free ones") {
    auto o = options();
    o.checkpoint_every = 4;
    const auto clean_dir = fresh_dir("ckpt_clean"), faulty_dir = fresh_dir("ckpt_faulty");
    o.checkpoint_dir = clean_dir.string();
    Observed clean;
    const auto expected = failure_free<Kokkos::DefaultExecutionSpace>(clean, o);
    o.checkpoint_dir = faulty_dir.string();
    // Step 3 completes the 4th step: its agreements are the stop vote (1st) and the save's (2nd).
    FaultyRun<Kokkos::DefaultExecutionSpace> run(2, {{3, "agree", 2, 1}}, o);
    CHECK(run.fit() == expected);
    CHECK(run.trainer.parallelism().failures_thrown() == 1);
    std::vector<std::string> a, b;
    for (const auto& e : std::filesystem::directory_iterator(clean_dir)) a.push_back(e.path().filename().string());
    for (const auto& e : std::filesystem::directory_iterator(faulty_dir)) b.push_back(e.path().filename().string());
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    CHECK(a == b);
    std::filesystem::remove_all(clean_dir);
    std::filesystem::remove_all(faulty_dir);
  }

  TEST_CASE("fewer survivors than min_ranks: the state is checkpointed, the error says where, and resuming it gives the same bits") {
    auto o = options();
    const auto dir = fresh_dir("min_ranks");
    o.checkpoint_dir = dir.string();
    o.min_ranks = 2;
    Observed clean;
    const auto expected = failure_free<Kokkos::DefaultExecutionSpace>(clean, options());
    FaultyRun<Kokkos::DefaultExecutionSpace> run(2, {{6, "reduce", 1, 1}}, o);
    try {
      run.fit();
      FAIL("fit() returned after losing ranks below min_ranks");
    } catch (const reprosgd::process_failure& e) {
      CHECK(std::string(e.what()) ==
            "reprosgd::Trainer::fit: lost rank(s) 1 at step 6; 1 rank(s) survive, fewer than min_ranks 2; the state after "
            "step 6 is checkpointed in " + dir.string());
      CHECK(e.failed_ranks() == std::vector<int>{1});
    }
    // A relaunch on one process resumes from that checkpoint and ends with the failure-free bits.
    auto resumed = options();
    resumed.checkpoint_dir = dir.string();
    reprosgd::Trainer<reprosgd::Serial<>> trainer(resumed);
    auto m = model();
    auto state = trainer.start(m, adam);
    const auto r = trainer.resume(m, adam, state, data().train);
    CHECK(r.resumed);
    CHECK(state.step == 6);
    trainer.fit(m, adam, state, data().train, &data().test);
    CHECK(trainer.fingerprint(m, state) == expected);
    std::filesystem::remove_all(dir);
  }

  TEST_CASE("min_ranks without a checkpoint directory: the error says nothing was saved") {
    auto o = options();
    o.min_ranks = 3;
    FaultyRun<Kokkos::DefaultExecutionSpace> run(3, {{1, "allgather", 1, 0}}, o);
    CHECK_THROWS_WITH_AS(run.fit(),
                         "reprosgd::Trainer::fit: lost rank(s) 0 at step 1; 2 rank(s) survive, fewer than min_ranks 3; "
                         "no checkpoint directory is set",
                         reprosgd::process_failure);
  }

  TEST_CASE("RestartFromCheckpoint stops with exit code 75 and writes nothing; Abort rethrows") {
    auto o = options();
    const auto dir = fresh_dir("restart");
    o.checkpoint_dir = dir.string();
    o.checkpoint_every = 4;
    FaultyRun<Kokkos::DefaultExecutionSpace, reprosgd::RestartFromCheckpoint> restart(4, {{6, "reduce", 1, 2}}, o);
    try {
      restart.fit();
      FAIL("fit() returned after a failure under RestartFromCheckpoint");
    } catch (const reprosgd::restart_required& e) {
      CHECK(e.exit_code() == 75);
      CHECK(std::string(e.what()).find("fake: rank 2 died in reduce at step 6; restart_from_checkpoint: stopping") == 0);
    }
    CHECK(restart.state.step == 6);
    std::size_t files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().filename().string().rfind("ckpt-", 0) == 0) ++files;  // not the writer lock
    CHECK(files == 1);  // the checkpoint of step 4 only
    std::filesystem::remove_all(dir);

    FaultyRun<Kokkos::DefaultExecutionSpace, reprosgd::Abort> abort(4, {{2, "step_completed", 1, 1}});
    CHECK_THROWS_WITH_AS(abort.fit(), "fake: rank 1 died in step_completed at step 2", reprosgd::process_failure);
    CHECK(abort.state.step == 2);
  }

  TEST_CASE("the Trainer reports fit()'s start, every step's start and each checkpoint write to a FailureInjecting policy") {
    auto o = options();
    o.epochs = 1;
    const auto dir = fresh_dir("points");
    o.checkpoint_dir = dir.string();
    o.checkpoint_every = 3;
    FaultyRun<Kokkos::DefaultExecutionSpace> run(2, {}, o);
    run.fit();
    std::vector<std::pair<std::uint64_t, reprosgd::FailurePoint>> expected{{0, reprosgd::FailurePoint::start}};
    for (std::uint64_t s = 0; s < 8; ++s) {
      expected.emplace_back(s, reprosgd::FailurePoint::step);
      if ((s + 1) % 3 == 0 || s == 7) expected.emplace_back(s + 1, reprosgd::FailurePoint::checkpoint);
    }
    CHECK(run.trainer.parallelism().points() == expected);
    std::filesystem::remove_all(dir);
  }
}
