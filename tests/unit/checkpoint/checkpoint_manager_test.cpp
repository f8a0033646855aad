// SPDX-License-Identifier: BSD-3-Clause
// CheckpointManager: naming, keep-last-K, resume from the newest good checkpoint with fallback.
#include "checkpoint_test_support.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace {
std::vector<std::uint64_t> steps_of(const std::vector<reprosgd::CheckpointFile>& files) {
  std::vector<std::uint64_t> s;
  for (const auto& f : files) s.push_back(f.step);
  return s;
}
ino_t inode_of(const std::filesystem::path& p) {
  struct ::stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_ino;
}
/// A payload whose serialisation fails half-way (after writing a state).
struct FailingPayload {
  template <class Archive>
  void serialize(Archive& ar) {
    ar(cereal::make_nvp("state", ckpt_test::make_state(1, 40, 40)));
    throw std::runtime_error("out of paper");
  }
};
}  // namespace

TEST_SUITE("checkpoint.manager") {
  TEST_CASE_TEMPLATE_DEFINE("save keeps the last K, resume picks the newest", F, manager_basic) {
    ckpt_test::TempDir dir;
    reprosgd::CheckpointManager<F> mgr(dir / "run", {.keep_last = 2});
    CHECK(mgr.path_for(1234).filename() == "ckpt-000000001234.rsgd");

    ckpt_test::State staging = ckpt_test::shaped_like(ckpt_test::make_state(0));
    const reprosgd::ResumeResult none = mgr.resume_auto(ckpt_test::test_config(), staging);
    CHECK_FALSE(none);
    CHECK(none.skipped.empty());
    CHECK(none.path.empty());

    for (std::uint64_t step : {10, 20, 30, 40}) {
      CHECK(mgr.save(ckpt_test::test_info(step), ckpt_test::make_state(step)) == mgr.path_for(step));
    }
    CHECK(steps_of(mgr.list()) == std::vector<std::uint64_t>{30, 40});
    const reprosgd::ResumeResult r = mgr.resume_auto(ckpt_test::test_config(), staging);
    REQUIRE(r);
    CHECK(r.path == mgr.path_for(40));
    CHECK(r.info.step == 40);
    CHECK(r.skipped.empty());
    CHECK(ckpt_test::same_bits(staging, ckpt_test::make_state(40)));
  }
  TEST_CASE_TEMPLATE_APPLY(manager_basic, ckpt_test::all_formats);

  TEST_CASE("a damaged newest checkpoint falls back to the older one and says why") {
    ckpt_test::TempDir dir;
    reprosgd::CheckpointManager<> mgr(dir.path(), {.keep_last = 3});
    for (std::uint64_t step : {1, 2, 3}) mgr.save(ckpt_test::test_info(step), ckpt_test::make_state(step));
    // Step 3: truncated. Step 2: one flipped payload byte.
    auto b3 = ckpt_test::read_bytes(mgr.path_for(3));
    b3.resize(b3.size() / 2);
    ckpt_test::write_bytes(mgr.path_for(3), b3);
    auto b2 = ckpt_test::read_bytes(mgr.path_for(2));
    b2[b2.size() - 3] ^= 0x10;
    ckpt_test::write_bytes(mgr.path_for(2), b2);
    // Files that are not checkpoints of this manager are ignored.
    ckpt_test::write_bytes(dir / "notes.txt", {'x'});
    ckpt_test::write_bytes(dir / "ckpt-abc.rsgd", {'x'});

    ckpt_test::State staging = ckpt_test::shaped_like(ckpt_test::make_state(0));
    const auto r = mgr.resume_auto(ckpt_test::test_config(), staging);
    REQUIRE(r);
    CHECK(r.info.step == 1);
    CHECK(ckpt_test::same_bits(staging, ckpt_test::make_state(1)));
    REQUIRE(r.skipped.size() == 2);
    CHECK(r.skipped[0].path == mgr.path_for(3));
    CHECK(r.skipped[0].reason.rfind("reprosgd::load_snapshot: " + mgr.path_for(3).string() + ": truncated: ", 0) == 0);
    CHECK(r.skipped[1].path == mgr.path_for(2));
    CHECK(r.skipped[1].reason.find("payload checksum mismatch") != std::string::npos);

    // Saving the next step after resuming from step 1 removes the abandoned (damaged) later files.
    mgr.save(ckpt_test::test_info(2), ckpt_test::make_state(2));
    CHECK(steps_of(mgr.list()) == std::vector<std::uint64_t>{1, 2});
    const auto again = mgr.resume_auto(ckpt_test::test_config(), staging);
    CHECK(again.info.step == 2);
    CHECK(again.skipped.empty());
  }

  TEST_CASE("a directory of another configuration is refused by resume and by save, and left as it was") {
    ckpt_test::TempDir dir;
    reprosgd::CheckpointManager<> mgr(dir.path());
    for (std::uint64_t step : {10, 20, 30}) mgr.save(ckpt_test::test_info(step), ckpt_test::make_state(step));
    std::vector<std::vector<unsigned char>> before;
    for (std::uint64_t step : {10, 20, 30}) before.push_back(ckpt_test::read_bytes(mgr.path_for(step)));
    auto other = ckpt_test::test_config().entries();
    other[5].second = "43";
    const reprosgd::ConfigDescription other_config(other);
    const std::string refusal = "reprosgd::CheckpointManager: " + dir.path().string() +
                                " holds checkpoints of another configuration (ckpt-000000000010.rsgd: seed is 42 in "
                                "checkpoint, 43 in program); give this run a directory of its own";
    ckpt_test::State staging = ckpt_test::shaped_like(ckpt_test::make_state(0));
    // Not "start fresh": the next save would have pruned the other run's files.
    CHECK_THROWS_WITH_AS((void)mgr.resume_auto(other_config, staging), refusal.c_str(), reprosgd::checkpoint_error);
    reprosgd::CheckpointManager<> second(dir.path(), {.keep_last = 1});
    reprosgd::SnapshotInfo info = ckpt_test::test_info(40);
    info.config = other_config;
    CHECK_THROWS_WITH_AS(second.save(info, ckpt_test::make_state(40)), refusal.c_str(), reprosgd::checkpoint_error);
    CHECK(steps_of(mgr.list()) == std::vector<std::uint64_t>{10, 20, 30});
    for (std::size_t i = 0; i < 3; ++i) CHECK(ckpt_test::read_bytes(mgr.path_for(10 * (i + 1))) == before[i]);
    // A file whose header does not parse is not judged: it may be this run's, damaged.
    ckpt_test::TempDir mine;
    reprosgd::CheckpointManager<> own(mine.path());
    own.save(ckpt_test::test_info(5), ckpt_test::make_state(5));
    ckpt_test::write_bytes(own.path_for(9), {'x', 'y'});
    const auto r = own.resume_auto(ckpt_test::test_config(), staging);
    REQUIRE(r);
    CHECK(r.info.step == 5);
    REQUIRE(r.skipped.size() == 1);
    CHECK(r.skipped[0].path == own.path_for(9));
  }

  TEST_CASE("one writing process per directory: another process's save is refused while it holds the lock") {
    ckpt_test::TempDir dir;
    int ready[2], done[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(done) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // the other run's writer: takes the lock (no Kokkos after fork), waits to be told to end
      int rc = 0;
      reprosgd::WriterLock lock;
      try {
        lock.acquire(dir.path());
      } catch (...) {
        rc = 1;
      }
      char c = static_cast<char>('0' + rc);
      (void)!::write(ready[1], &c, 1);
      (void)!::read(done[0], &c, 1);
      ::_exit(rc);
    }
    char c = 0;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    REQUIRE(c == '0');
    reprosgd::CheckpointManager<> mgr(dir.path());
    const std::string busy = "reprosgd::CheckpointManager: " + dir.path().string() +
                             " is being written by another process (pid " + std::to_string(child) +
                             "); one writer per directory: give each run a checkpoint directory of its own";
    CHECK_THROWS_WITH_AS(mgr.save(ckpt_test::test_info(1), ckpt_test::make_state(1)), busy.c_str(),
                         reprosgd::checkpoint_error);
    CHECK(mgr.list().empty());
    REQUIRE(::write(done[1], &c, 1) == 1);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    // The writer has ended (as a killed one would): its lock is gone, this process writes.
    CHECK(mgr.save(ckpt_test::test_info(1), ckpt_test::make_state(1)) == mgr.path_for(1));
    CHECK(mgr.save(ckpt_test::test_info(2), ckpt_test::make_state(2)) == mgr.path_for(2));
    CHECK(steps_of(mgr.list()) == std::vector<std::uint64_t>{1, 2});
    for (int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
  }

  TEST_CASE("a file whose name and header disagree on the step is skipped") {
    ckpt_test::TempDir dir;
    reprosgd::CheckpointManager<> mgr(dir.path());
    mgr.save(ckpt_test::test_info(5), ckpt_test::make_state(5));
    std::filesystem::copy_file(mgr.path_for(5), mgr.path_for(9));
    ckpt_test::State staging = ckpt_test::shaped_like(ckpt_test::make_state(0));
    const auto r = mgr.resume_auto(ckpt_test::test_config(), staging);
    REQUIRE(r);
    CHECK(r.info.step == 5);
    REQUIRE(r.skipped.size() == 1);
    CHECK(r.skipped[0].reason == "reprosgd::CheckpointManager::resume_auto: " + mgr.path_for(9).string() +
                                     ": the name says step 9, the header says 5");
  }

  TEST_CASE("stale temporaries of a crashed writer are removed by the next save") {
    ckpt_test::TempDir dir;
    reprosgd::CheckpointManager<> mgr(dir.path());
    const auto stale = dir / ".ckpt-000000000007.rsgd.tmp.999.123";
    ckpt_test::write_bytes(stale, {'x'});
    const auto foreign = dir / ".other.tmp.1.2";
    ckpt_test::write_bytes(foreign, {'x'});
    mgr.save(ckpt_test::test_info(8), ckpt_test::make_state(8));
    CHECK_FALSE(std::filesystem::exists(stale));
    CHECK(std::filesystem::exists(foreign));
  }

  TEST_CASE("options are checked") {
    ckpt_test::TempDir dir;
    CHECK_THROWS_WITH_AS(reprosgd::CheckpointManager<>(dir.path(), {.keep_last = 0}),
                         "reprosgd::CheckpointManager: keep_last must be at least 1", reprosgd::config_error);
  }

  TEST_CASE("reuse_pruned: the checkpoint keep-last-K prunes is written over, cut to size, and the rest stay") {
    ckpt_test::TempDir dir;
    reprosgd::CheckpointManager<> mgr(dir.path(), {.keep_last = 3});
    CHECK(mgr.options().reuse_pruned);
    // Steps 10-30 are larger than the later ones: a reused file must be cut to the new size.
    for (std::uint64_t step : {10, 20, 30}) mgr.save(ckpt_test::test_info(step), ckpt_test::make_state(step, 30, 50));
    for (std::uint64_t step : {40, 50, 60, 70}) {
      INFO("step " << step);
      const auto files = mgr.list();
      const ino_t oldest = inode_of(files.front().path);
      mgr.save(ckpt_test::test_info(step), ckpt_test::make_state(step));
      CHECK(inode_of(mgr.path_for(step)) == oldest);
      CHECK(steps_of(mgr.list()) == std::vector<std::uint64_t>{step - 20, step - 10, step});
      for (const auto& f : mgr.list()) {
        const int rows = f.step <= 30 ? 30 : 3, cols = f.step <= 30 ? 50 : 5;
        ckpt_test::State staging = ckpt_test::shaped_like(ckpt_test::make_state(f.step, rows, cols));
        reprosgd::load_snapshot<reprosgd::DefaultCheckpointFormat>(f.path, ckpt_test::test_config(), staging);
        CHECK(ckpt_test::same_bits(staging, ckpt_test::make_state(f.step, rows, cols)));
      }
    }
    // The same bytes as a file written fresh.
    ckpt_test::TempDir fresh;
    reprosgd::save_snapshot<reprosgd::DefaultCheckpointFormat>(fresh / "70.rsgd", ckpt_test::test_info(70),
                                                               ckpt_test::make_state(70));
    CHECK(ckpt_test::read_bytes(mgr.path_for(70)) == ckpt_test::read_bytes(fresh / "70.rsgd"));
  }

  TEST_CASE("reuse_pruned: never with keep_last 1, nor when turned off, nor before keep_last files exist") {
    ckpt_test::TempDir dir;
    reprosgd::CheckpointManager<> one(dir / "one", {.keep_last = 1});
    reprosgd::CheckpointManager<> off(dir / "off", {.keep_last = 2, .reuse_pruned = false});
    for (auto* mgr : {&one, &off}) {
      mgr->save(ckpt_test::test_info(1), ckpt_test::make_state(1));
      mgr->save(ckpt_test::test_info(2), ckpt_test::make_state(2));
      for (std::uint64_t step : {3, 4}) {
        const ino_t oldest = inode_of(mgr->list().front().path);
        mgr->save(ckpt_test::test_info(step), ckpt_test::make_state(step));
        // A new file, made while the old one still existed: never the same inode.
        CHECK(inode_of(mgr->path_for(step)) != oldest);
      }
    }
    CHECK(steps_of(one.list()) == std::vector<std::uint64_t>{4});
    CHECK(steps_of(off.list()) == std::vector<std::uint64_t>{3, 4});
  }

  TEST_CASE("reuse_pruned: a save behind an abandoned timeline consumes nothing it keeps") {
    ckpt_test::TempDir dir;
    reprosgd::CheckpointManager<> mgr(dir.path(), {.keep_last = 3});
    for (std::uint64_t step : {10, 30, 40}) mgr.save(ckpt_test::test_info(step), ckpt_test::make_state(step));
    // Resumed from step 10 (30 and 40 damaged, say): step 20 deletes the later ones and keeps 10.
    mgr.save(ckpt_test::test_info(20), ckpt_test::make_state(20));
    CHECK(steps_of(mgr.list()) == std::vector<std::uint64_t>{10, 20});
  }

  TEST_CASE("reuse_pruned: a save that fails consumes the oldest checkpoint only; the others and the next save are fine") {
    ckpt_test::TempDir dir;
    reprosgd::CheckpointManager<> mgr(dir.path(), {.keep_last = 3});
    for (std::uint64_t step : {1, 2, 3}) mgr.save(ckpt_test::test_info(step), ckpt_test::make_state(step));
    CHECK(ckpt_test::checkpoint_error_of([&] { mgr.save(ckpt_test::test_info(4), FailingPayload{}); })
              .find(": cannot serialise the payload: out of paper") != std::string::npos);
    CHECK(steps_of(mgr.list()) == std::vector<std::uint64_t>{2, 3});
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
    CHECK(entries == 2 + 1);  // and the writer's lock file, no temporary
    ckpt_test::State staging = ckpt_test::shaped_like(ckpt_test::make_state(0));
    const auto r = mgr.resume_auto(ckpt_test::test_config(), staging);
    REQUIRE(r);
    CHECK(r.info.step == 3);
    mgr.save(ckpt_test::test_info(4), ckpt_test::make_state(4));
    CHECK(steps_of(mgr.list()) == std::vector<std::uint64_t>{2, 3, 4});
  }
}
