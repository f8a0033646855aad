// SPDX-License-Identifier: BSD-3-Clause
// Crash safety: SIGKILL a checkpoint writer at 60 pseudo-random moments (fixed seed); after each
// kill every file under a final name verifies, the newest holds the payload of its step, and the
// run never goes backwards.
#include "crash_payload.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

TEST_CASE("checkpoint.crash_safety: SIGKILL at random moments never leaves a bad checkpoint") {
  std::string tmpl = (std::filesystem::temp_directory_path() / "reprosgd-crash-XXXXXX").string();
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  const std::filesystem::path dir = tmpl;
  crash_test::Manager mgr(dir, {.keep_last = crash_test::keep_last});

  std::mt19937_64 gen(20240611);  // the kill moments are fixed by this seed
  std::uniform_int_distribution<int> delay_us(2000, 60000);
  constexpr int kills = 60;
  std::uint64_t newest = 0;
  int with_temporary = 0;
  int progressed = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < kills; ++k) {
    pid_t pid = 0;
    const std::string dir_arg = dir.string();
    char* argv[] = {const_cast<char*>(REPROSGD_CRASH_WRITER), const_cast<char*>(dir_arg.c_str()), nullptr};
    REQUIRE(::posix_spawn(&pid, REPROSGD_CRASH_WRITER, nullptr, nullptr, argv, environ) == 0);
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(gen)));
    REQUIRE(::kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    INFO("kill #" << k);
    // A writer that exited by itself (an error) would not have been killed.
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);

    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().filename().string().find(".tmp.") != std::string::npos) ++with_temporary;
    }
    // Every file under a final name is complete and holds its step's payload.
    const auto files = mgr.list();
    CHECK(files.size() <= crash_test::keep_last + 1);  // +1: killed between rename and pruning
    for (const auto& f : files) {
      crash_test::Payload p;
      std::string error;
      try {
        const auto info = reprosgd::load_snapshot<reprosgd::PortableBinaryFormat>(f.path, crash_test::config(), p);
        CHECK(info.step == f.step);
      } catch (const std::exception& ex) {
        error = ex.what();
      }
      CHECK_MESSAGE(error.empty(), error);
      const crash_test::Payload expected = crash_test::payload_for(f.step);
      CHECK(p.step == f.step);
      CHECK(p.values.size() == expected.values.size());
      CHECK((p.values.size() == expected.values.size() &&
             std::memcmp(p.values.data(), expected.values.data(), p.values.size() * sizeof(float)) == 0));
    }
    crash_test::Payload staging;
    const auto r = mgr.resume_auto(crash_test::config(), staging);
    CHECK(r.skipped.empty());
    if (r) {
      CHECK(r.info.step == files.back().step);
      CHECK(staging.step == r.info.step);
      CHECK(r.info.step >= newest);  // never goes backwards
      progressed += r.info.step > newest;
      newest = r.info.step;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE(kills << " kills in " << seconds << " s; newest step " << newest << "; " << progressed
                << " kills after progress; " << with_temporary << " left a temporary (killed mid-write)");
  CHECK(newest > 0);
  CHECK(with_temporary > 0);  // some kills did land inside a write
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}
