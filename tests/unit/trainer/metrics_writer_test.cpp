// SPDX-License-Identifier: BSD-3-Clause
/// @file JsonLinesWriter across a lost rank 0: the survivor that takes the file over writes the
/// lines the lost writer had not written (a step every rank completed, its epoch), drops a line
/// torn by the writer's death, and writes nothing twice — so the metrics file holds every completed
/// step's line once, in order, then the failure's.
#include <doctest/doctest.h>

#include <reprosgd/trainer/callbacks.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>
#include <unistd.h>

namespace {

using reprosgd::JsonLinesWriter;

// A folder of this process's own, removed at exit.
struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("reprosgd_metrics_writer_" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

std::string temp_path(const std::string& name) {
  static const TempDir dir;
  return (dir.path / name).string();
}

reprosgd::StepMetrics step(std::uint64_t s) {
  return {s, s / 4, 4, 8, 1.0 / static_cast<double>(s + 1), 0.5, 0.01f};
}
reprosgd::EpochMetrics epoch_end(std::uint64_t e) {
  reprosgd::EpochMetrics m;
  m.epoch = e;
  m.step = 4 * (e + 1);
  m.train_loss = 0.25;
  return m;
}
reprosgd::FailureEvent failure(int new_rank) {
  reprosgd::FailureEvent e;
  e.step = 4;
  e.lost_ranks = {0};
  e.old_size = 3;
  e.new_size = 2;
  e.new_rank = new_rank;
  return e;
}

// "event:step" for each line ("torn" for a line that is not a whole JSON object).
std::vector<std::string> events(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() != '{' || line.back() != '}') {
      out.push_back("torn");
      continue;
    }
    const auto kind = line.substr(10, line.find('"', 10) - 10);
    const auto at = line.find("\"step\":") + 7;
    out.push_back(kind + ":" + line.substr(at, line.find_first_of(",}", at) - at));
  }
  return out;
}

// Three ranks; rank 0 (the writer) completes steps 0 to `writer_steps` - 1, the others steps 0 to 3
// and epoch 0; then rank 0 is lost, `damage` runs on the file, rank 1 takes over and steps 4 and 5
// follow on two ranks.
std::vector<std::string> run(const std::string& path, std::uint64_t writer_steps, bool writer_ends_epoch,
                             void (*damage)(const std::string&) = nullptr) {
  auto w0 = std::make_unique<JsonLinesWriter>(path, 0);
  JsonLinesWriter w1(path, 1), w2(path, 2);
  for (std::uint64_t s = 0; s < 4; ++s) {
    if (s < writer_steps) w0->on_step_end(step(s));
    w1.on_step_end(step(s));
    w2.on_step_end(step(s));
  }
  if (writer_ends_epoch) w0->on_epoch_end(epoch_end(0));
  w1.on_epoch_end(epoch_end(0));
  w2.on_epoch_end(epoch_end(0));
  w0.reset();  // lost
  if (damage) damage(path);
  w1.on_failure(failure(0));
  w2.on_failure(failure(1));
  for (std::uint64_t s = 4; s < 6; ++s) {
    w1.on_step_end(step(s));
    w2.on_step_end(step(s));
  }
  return events(path);
}

const std::vector<std::string> whole = {"step:0", "step:1", "step:2", "step:3",  "epoch:4",
                                        "failure:4", "step:4", "step:5"};

}  // namespace

TEST_SUITE("trainer/metrics_writer") {
  TEST_CASE("rank 0 lost after every rank completed a step but before it wrote the line: the new writer writes it") {
    CHECK(run(temp_path("behind_step.jsonl"), 3, false) == whole);
    CHECK(run(temp_path("behind_two.jsonl"), 2, false) == whole);
  }
  TEST_CASE("rank 0 lost after its step's line, before the epoch's: the epoch's line once") {
    CHECK(run(temp_path("behind_epoch.jsonl"), 4, false) == whole);
  }
  TEST_CASE("rank 0 lost after all its lines: nothing written twice") {
    CHECK(run(temp_path("caught_up.jsonl"), 4, true) == whole);
  }
  TEST_CASE("a line torn by the writer's death is dropped, and the lines from it on are written") {
    const auto tear = [](const std::string& path) {
      std::FILE* f = std::fopen(path.c_str(), "a");
      std::fputs("{\"event\":\"step\",\"step\":3,\"ep", f);
      std::fclose(f);
    };
    CHECK(run(temp_path("torn.jsonl"), 3, false, tear) == whole);
  }
  TEST_CASE("a writer lost before it created the file: the new writer starts it with the lines it kept") {
    const auto remove = [](const std::string& path) { std::filesystem::remove(path); };
    // It keeps the last kept_lines lines: all five here.
    CHECK(run(temp_path("never_created.jsonl"), 4, true, remove) == whole);
  }
}
