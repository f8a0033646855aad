// SPDX-License-Identifier: BSD-3-Clause
/// @file Checkpoints written behind training (TrainerOptions::async_checkpoints, WriteBehind):
/// the helper releases the buffers before the write ends and the training thread waits for that
/// release only; one write in flight; a failure is kept until reported. fit() with asynchronous
/// checkpoints writes the same bytes as with synchronous ones, a resume from any of them reaches
/// the uninterrupted bits, the last one is durable when fit() returns, and a failed write ends the
/// run on the next checkpoint with the synchronous mode's exception and message.
#include <doctest/doctest.h>

#include <reprosgd/data/synthetic.hpp>
#include <reprosgd/fingerprint.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/optim/adam.hpp>
#include <reprosgd/optim/sgd.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/trainer.hpp>
#include <reprosgd/trainer/write_behind.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

using reprosgd::detail::WriteBehind;

TEST_SUITE("trainer/write_behind") {
  TEST_CASE("WriteBehind: the caller waits for the release, not for the end of the write") {
    WriteBehind behind;
    std::promise<void> may_finish;
    std::atomic<bool> finished{false};
    behind.post([&](WriteBehind::Release release) {
      release();
      may_finish.get_future().wait();  // the write goes on after its release
      finished = true;
    });
    behind.wait_released();  // would never return if it waited for the whole write
    CHECK_FALSE(finished.load());
    may_finish.set_value();
    behind.settle();
    CHECK(finished.load());
    CHECK_FALSE(behind.failure());
  }

  TEST_CASE("WriteBehind: one write in flight, in posting order; a write that never releases releases when it ends") {
    WriteBehind behind;
    std::vector<int> events;  // written by one write at a time, read after settle()
    std::atomic<int> running{0}, most{0};
    for (int i = 0; i < 20; ++i) {
      behind.post([&, i](WriteBehind::Release) {
        most = std::max(most.load(), ++running);
        events.push_back(i);
        --running;
      });
      behind.wait_released();  // returns once write i has ended (it never called release)
      CHECK(static_cast<int>(events.size()) == i + 1);
    }
    behind.settle();
    CHECK(most.load() == 1);
    for (int i = 0; i < 20; ++i) CHECK(events[static_cast<std::size_t>(i)] == i);
  }

  TEST_CASE("WriteBehind: a failed write is kept until forgotten; the next write still runs") {
    WriteBehind behind;
    behind.post([](WriteBehind::Release) { throw reprosgd::io_error("disk full"); });
    const std::exception_ptr failure = behind.failure();
    REQUIRE(failure);
    CHECK_THROWS_WITH_AS(std::rethrow_exception(failure), "disk full", reprosgd::io_error);
    CHECK(behind.failure() == failure);  // still there: not reported yet
    bool ran = false;
    behind.post([&](WriteBehind::Release) { ran = true; });
    behind.settle();
    CHECK(ran);
    CHECK(behind.failure() == failure);  // a later success does not hide it
    behind.forget_failure();
    CHECK_FALSE(behind.failure());
  }

  TEST_CASE("host_snapshot copies the parameters and every optimizer state member, detached from the originals") {
    using Mem = Kokkos::DefaultHostExecutionSpace::memory_space;
    const reprosgd::Adam adam{{.lr = 1e-3f}};
    struct Canonical {
      reprosgd::Buffer<Mem> params;
      reprosgd::Adam::state_type<Mem> state;
    } c{reprosgd::Buffer<Mem>("p", 5), adam.init<Mem>(5)};
    for (int i = 0; i < 5; ++i) {
      c.params(i) = 0.5f * static_cast<float>(i);
      c.state.m(i) = -1.0f * static_cast<float>(i);
      c.state.v(i) = 2.0f + static_cast<float>(i);
    }
    c.state.steps = 7;
    c.state.beta1_power = 0.25;
    c.state.beta2_power = 0.125;
    const auto host = reprosgd::detail::host_snapshot(c, adam);
    c.params(2) = 100.0f;  // the copy does not follow the originals
    c.state.m(3) = 100.0f;
    c.state.steps = 8;
    REQUIRE(host.params.extent(0) == 5);
    REQUIRE(host.state.m.extent(0) == 5);
    REQUIRE(host.state.v.extent(0) == 5);
    CHECK(host.params.data() != c.params.data());
    for (int i = 0; i < 5; ++i) {
      CHECK(host.params(i) == 0.5f * static_cast<float>(i));
      CHECK(host.state.m(i) == -1.0f * static_cast<float>(i));
      CHECK(host.state.v(i) == 2.0f + static_cast<float>(i));
    }
    CHECK(host.state.steps == 7);
    CHECK(host.state.beta1_power == 0.25);
    CHECK(host.state.beta2_power == 0.125);
    const reprosgd::Sgd plain{{.lr = 0.1f}};  // no momentum: an empty velocity stays empty
    struct Plain {
      reprosgd::Buffer<Mem> params;
      reprosgd::Sgd::state_type<Mem> state;
    } p{reprosgd::Buffer<Mem>("p", 3), plain.init<Mem>(3)};
    CHECK(reprosgd::detail::host_snapshot(p, plain).state.velocity.extent(0) == 0);
  }
}

namespace {

const reprosgd::TrainTest<Kokkos::HostSpace>& data() {
  // Created once and deliberately never destroyed: Views must not outlive Kokkos::finalize().
  static const auto* d = new reprosgd::TrainTest<Kokkos::HostSpace>(
      reprosgd::make_synthetic_train_test(5, 512, 64, 784, 10, {.separation = 0.2f}));
  return *d;
}

auto small_model() {
  using namespace reprosgd;
  return make_sequential<Kokkos::DefaultExecutionSpace::memory_space>(Dense{784, 32}, ReLU{}, Dropout{0.25f},
                                                                      Dense{32, 10});
}

reprosgd::TrainerOptions options(const std::filesystem::path& dir, bool async) {
  reprosgd::TrainerOptions o;
  o.global_batch = 64;
  o.micro_batch = 16;
  o.steps = 20;
  o.seed = 11;
  o.checkpoint_dir = dir.string();
  o.checkpoint_every = 3;
  o.keep_last = 100;
  o.async_checkpoints = async;
  return o;
}

std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

std::map<std::string, std::string> checkpoint_bytes(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ckpt-", 0) != 0) continue;
    std::ifstream in(e.path(), std::ios::binary);
    files[name] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  return files;
}

using Trainer = reprosgd::Trainer<reprosgd::Serial<>>;

// A callback that replaces the checkpoint directory by a regular file after step `at` (0-based),
// so that every later checkpoint write fails.
struct BreakDirectory {
  std::filesystem::path dir;
  std::uint64_t at;
  bool on_step_end(const reprosgd::StepMetrics& m) const {
    if (m.step != at) return false;
    std::filesystem::remove_all(dir);
    std::ofstream(dir) << "not a directory\n";
    return false;
  }
};

}  // namespace

TEST_SUITE("trainer/write_behind") {
  TEST_CASE("fit() with async_checkpoints: the synchronous mode's files, resumable to the uninterrupted bits") {
    const reprosgd::Adam adam{{.lr = 2e-3f}};
    std::map<std::string, std::string> files[2];
    reprosgd::Fingerprint end[2];
    for (const bool async : {false, true}) {
      CAPTURE(async);
      const auto dir = fresh_dir(async ? "reprosgd_write_behind_async" : "reprosgd_write_behind_sync");
      Trainer trainer(options(dir, async));
      auto model = small_model();
      auto state = trainer.start(model, adam);
      trainer.fit(model, adam, state, data().train);
      files[async] = checkpoint_bytes(dir);  // read as fit() returns: its last checkpoint is durable
      end[async] = reprosgd::fingerprint(model, state.optimizer);
      std::filesystem::remove_all(dir);
    }
    CHECK(end[0] == end[1]);
    REQUIRE(files[1].size() == 7);  // steps 3, 6, ..., 18 and the end, 20
    CHECK(files[1].count("ckpt-000000000020.rsgd") == 1);
    CHECK(files[0] == files[1]);  // byte for byte

    // Each checkpoint of the asynchronous run resumes to the uninterrupted bits.
    const auto dir = fresh_dir("reprosgd_write_behind_resume");
    for (const auto& entry : files[1]) {
      // Not a structured binding: CAPTURE's lambda cannot capture one in clang 15 (hipcc).
      const std::string& name = entry.first;
      const auto& bytes = entry.second;
      CAPTURE(name);
      std::filesystem::create_directories(dir);
      std::ofstream(dir / name, std::ios::binary) << bytes;
      auto o = options(dir, true);
      Trainer trainer(o);
      auto model = small_model();
      auto state = trainer.start(model, adam);
      const auto r = trainer.resume(model, adam, state, data().train);
      REQUIRE(r.resumed);
      trainer.fit(model, adam, state, data().train);
      CHECK(reprosgd::fingerprint(model, state.optimizer) == end[1]);
      std::filesystem::remove_all(dir);
    }
  }

  TEST_CASE("fit() with async_checkpoints stopped early: its last checkpoint is written when fit() returns") {
    const reprosgd::Sgd sgd{{.lr = 0.05f, .momentum = 0.9f}};
    const auto dir = fresh_dir("reprosgd_write_behind_stop");
    auto o = options(dir, true);
    o.stop_after = 7;
    o.keep_last = 2;
    Trainer trainer(o);
    auto model = small_model();
    auto state = trainer.start(model, sgd);
    const auto r = trainer.fit(model, sgd, state, data().train);
    CHECK(r.stopped_early);
    const auto files = checkpoint_bytes(dir);
    std::vector<std::string> names;
    for (const auto& [name, bytes] : files) names.push_back(name);
    CHECK(names == std::vector<std::string>{"ckpt-000000000006.rsgd", "ckpt-000000000007.rsgd"});
    std::filesystem::remove_all(dir);
  }

  TEST_CASE("a failed asynchronous write ends fit() at the next checkpoint with the synchronous mode's error") {
    const reprosgd::Sgd sgd{{.lr = 0.05f, .momentum = 0.9f}};
    std::string message[2], type[2];
    std::uint64_t stopped_at[2] = {0, 0};
    for (const bool async : {false, true}) {
      CAPTURE(async);
      const auto dir = fresh_dir("reprosgd_write_behind_broken");
      Trainer trainer(options(dir, async));
      auto model = small_model();
      auto state = trainer.start(model, sgd);
      // Broken before the first checkpoint (none is in flight then): the write of step 3 fails.
      BreakDirectory breaker{dir, 1};
      try {
        trainer.fit(model, sgd, state, data().train, breaker);
        FAIL("fit() did not report the failed checkpoint write");
      } catch (const reprosgd::error& e) {
        message[async] = e.what();
        type[async] = typeid(e).name();
      }
      stopped_at[async] = state.step;
      std::filesystem::remove_all(dir);
    }
    CHECK(message[0].find("reprosgd_write_behind_broken") != std::string::npos);
    CHECK(message[1] == message[0]);
    CHECK(type[1] == type[0]);
    CHECK(stopped_at[0] == 3);  // synchronous: at the write itself
    CHECK(stopped_at[1] == 6);  // asynchronous: reported at the next checkpoint
  }
}
