// SPDX-License-Identifier: BSD-3-Clause
/// @file Tests of reprosgd/detail/watchdog.hpp, the deadline behind MpiEnvironment's init_timeout:
/// a child process whose watchdog expires ends with the chosen exit code and exactly its one line on
/// standard error; one disarmed in time goes on; one watching its parent ends with its other line
/// as soon as the parent ends; 0 arms nothing; a bad deadline is refused.
#include <reprosgd/detail/watchdog.hpp>

#include <doctest/doctest.h>
#include <support/child_process.hpp>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>

using reprosgd_test::ChildEnd;
using reprosgd_test::in_child;

TEST_SUITE("fault/watchdog") {
  TEST_CASE("an expired deadline ends the process with its exit code and one line, without waiting for the call") {
    const ChildEnd r = in_child([] {
      reprosgd::detail::Watchdog w(0.2, "the call did not finish within 0.2 s", 76);
      std::this_thread::sleep_for(std::chrono::seconds(30));  // the call that hangs
    });
    CHECK(r.exit_code == 76);
    CHECK(r.err == "the call did not finish within 0.2 s\n");
    CHECK(r.seconds < 20.0);  // ended by the watchdog, not by the 30 s sleep
  }

  TEST_CASE("with end_by_sigkill an expired deadline ends the process with SIGKILL after its line") {
    // The one ending that MPI's fault tolerance reports to the other processes as a failure.
    const ChildEnd r = in_child([] {
      reprosgd::detail::Watchdog w(0.2, "killed after 0.2 s", reprosgd::detail::end_by_sigkill);
      std::this_thread::sleep_for(std::chrono::seconds(30));
    });
    CHECK(r.signal == SIGKILL);
    CHECK(r.exit_code == -1);
    CHECK(r.err == "killed after 0.2 s\n");
    CHECK(r.seconds < 20.0);
  }

  TEST_CASE("disarmed in time, or by its destructor: the process goes on and writes nothing") {
    const ChildEnd disarmed = in_child([] {
      reprosgd::detail::Watchdog w(0.3, "expired", 76);
      if (!w.armed()) std::_Exit(3);
      w.disarm();
      if (w.armed()) std::_Exit(4);
      w.disarm();  // idempotent
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
    });
    CHECK(disarmed.exit_code == 0);
    CHECK(disarmed.err.empty());
    const ChildEnd scoped = in_child([] {
      { reprosgd::detail::Watchdog w(0.3, "expired", 76); }
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
    });
    CHECK(scoped.exit_code == 0);
    CHECK(scoped.err.empty());
  }

  TEST_CASE("with a parent_gone line: the process ends with it as soon as its parent ends, not at the deadline") {
    // The child (the launcher) forks a grandchild (a rank) that arms a 30 s watchdog watching its
    // parent, then exits. This process is made a subreaper, so the grandchild is re-parented here
    // and its end can be waited for. in_child reads standard error until every writer is gone: it
    // returns once the grandchild has ended too.
    REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
    int pids[2];
    REQUIRE(::pipe(pids) == 0);
    const ChildEnd r = in_child([&] {
      ::close(pids[0]);
      const pid_t rank = ::fork();
      if (rank == 0) {
        reprosgd::detail::Watchdog w(30.0, "expired", 76, "the launcher is gone");
        std::this_thread::sleep_for(std::chrono::seconds(30));  // the call that never returns
        std::_Exit(0);
      }
      [[maybe_unused]] const ssize_t n = ::write(pids[1], &rank, sizeof rank);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // then the launcher ends
    });
    ::close(pids[1]);
    pid_t rank = -1;
    CHECK(::read(pids[0], &rank, sizeof rank) == static_cast<ssize_t>(sizeof rank));
    ::close(pids[0]);
    int status = 0;
    const bool reaped = rank > 0 && ::waitpid(rank, &status, 0) == rank;
    ::prctl(PR_SET_CHILD_SUBREAPER, 0);
    REQUIRE(reaped);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 76);
    CHECK(r.exit_code == 0);
    CHECK(r.err == "the launcher is gone\n");
    CHECK(r.seconds < 10.0);  // ended by its parent's end, not by the 30 s deadline or sleep
  }

  TEST_CASE("started_by_a_launcher: one of the rank variables an MPI launcher sets") {
    const ChildEnd r = in_child([] {
      for (const char* v : {"PMIX_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) ::unsetenv(v);
      if (reprosgd::detail::started_by_a_launcher()) std::_Exit(1);
      int code = 2;
      for (const char* v : {"PMIX_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
        ::setenv(v, "0", 1);
        if (!reprosgd::detail::started_by_a_launcher()) std::_Exit(code);
        ::unsetenv(v);
        ++code;
      }
    });
    CHECK(r.exit_code == 0);
  }

  TEST_CASE("0 seconds arms nothing; a negative, NaN or infinite deadline is a config_error") {
    reprosgd::detail::Watchdog none(0.0, "never", 76);
    CHECK_FALSE(none.armed());
    CHECK_THROWS_WITH_AS(reprosgd::detail::Watchdog(-1.0, "x", 76),
                         "reprosgd::Watchdog: the deadline must be a finite number of seconds >= 0 (0: none), got -1",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS(reprosgd::detail::Watchdog(std::numeric_limits<double>::quiet_NaN(), "x", 76),
                         "reprosgd::Watchdog: the deadline must be a finite number of seconds >= 0 (0: none), got nan",
                         reprosgd::config_error);
    CHECK_THROWS_AS(reprosgd::detail::Watchdog(std::numeric_limits<double>::infinity(), "x", 76), reprosgd::config_error);
    CHECK(reprosgd::detail::seconds_text(30.0) == "30");
    CHECK(reprosgd::detail::seconds_text(2.5) == "2.5");
    CHECK(reprosgd::detail::seconds_text(0.125) == "0.125");
  }
}
