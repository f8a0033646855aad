// SPDX-License-Identifier: BSD-3-Clause
/// @file Tests of reprosgd/detail/watchdog.hpp, the deadline behind MpiEnvironment's init_timeout:
/// a child process whose watchdog expires ends with the chosen exit code and exactly its one line on
/// standard error; one disarmed in time goes on; 0 arms nothing; a bad deadline is refused.
#include <reprosgd/detail/watchdog.hpp>

#include <doctest/doctest.h>
#include <support/child_process.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
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
