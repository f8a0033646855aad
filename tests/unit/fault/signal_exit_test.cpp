// SPDX-License-Identifier: BSD-3-Clause
/// @file Tests of reprosgd/detail/signal_exit.hpp, the crash half of MpiEnvironment's start-up
/// guard: a child process that crashes (SIGSEGV, SIGBUS, SIGFPE, SIGABRT) while a SignalExit lives
/// ends with the chosen exit code and exactly its one line; once released, a crash is the system's
/// again; a handler the program installed itself is left alone; two at once are refused.
#include <reprosgd/detail/signal_exit.hpp>

#include <doctest/doctest.h>
#include <support/child_process.hpp>

#include <signal.h>

#include <cstdlib>
#include <string>

namespace {

using reprosgd_test::ChildEnd;

// Body run in a child with the guarded signals at their default first: doctest's crash handlers,
// inherited from the test runner, would otherwise be the program's handlers that SignalExit leaves
// alone.
template <class Body>
ChildEnd in_child(Body body) {
  return reprosgd_test::in_child([&] {
    for (const auto& s : reprosgd::detail::SignalExit::signals) ::signal(s.number, SIG_DFL);
    body();
  });
}

void no_handler(int) {}

}  // namespace

TEST_SUITE("fault/signal_exit") {
  TEST_CASE("a crash while it lives ends the process with its exit code and one line naming the signal") {
    for (const auto& s : reprosgd::detail::SignalExit::signals) {
      CAPTURE(s.name);
      const ChildEnd r = in_child([&] {
        reprosgd::detail::SignalExit guard("MPI_Init_thread crashed", "; exiting with 76", 76);
        ::raise(s.number);
      });
      CHECK(r.exit_code == 76);
      CHECK(r.signal == 0);
      CHECK(r.err == "MPI_Init_thread crashed (signal " + std::to_string(s.number) + ", " + s.name + "); exiting with 76\n");
    }
    // A real fault, not a raised signal: a write through a null pointer.
    const ChildEnd fault = in_child([] {
      reprosgd::detail::SignalExit guard("crashed", "", 76);
      volatile int* p = nullptr;
      *p = 1;
    });
    CHECK(fault.exit_code == 76);
    CHECK(fault.err == "crashed (signal " + std::to_string(SIGSEGV) + ", SIGSEGV)\n");
  }

  TEST_CASE("released, or destroyed, it restores the default: a crash then ends the process by its signal") {
    const ChildEnd released = in_child([] {
      reprosgd::detail::SignalExit guard("crashed", "", 76);
      guard.release();
      guard.release();  // idempotent
      ::raise(SIGSEGV);
    });
    CHECK(released.signal == SIGSEGV);
    CHECK(released.err.empty());
    const ChildEnd scoped = in_child([] {
      { reprosgd::detail::SignalExit guard("crashed", "", 76); }
      ::raise(SIGBUS);
    });
    CHECK(scoped.signal == SIGBUS);
    CHECK(scoped.err.empty());
  }

  TEST_CASE("a handler the program installed is left to it; a second SignalExit at once is refused") {
    const ChildEnd kept = in_child([] {
      struct sigaction own{};
      own.sa_handler = &no_handler;
      ::sigemptyset(&own.sa_mask);
      ::sigaction(SIGFPE, &own, nullptr);
      reprosgd::detail::SignalExit guard("crashed", "", 76);
      ::raise(SIGFPE);  // the program's handler returns: the process goes on to exit 0
      struct sigaction now{};
      ::sigaction(SIGFPE, nullptr, &now);
      if (now.sa_handler != &no_handler) std::_Exit(3);
    });
    CHECK(kept.exit_code == 0);
    CHECK(kept.err.empty());

    reprosgd::detail::SignalExit first("crashed", "", 76);
    CHECK_THROWS_WITH_AS(reprosgd::detail::SignalExit("again", "", 76),
                         "reprosgd::detail::SignalExit: another one is already installed in this process",
                         reprosgd::config_error);
    first.release();
    reprosgd::detail::SignalExit after("crashed", "", 76);  // one at a time, not one per process
    CHECK_NOTHROW(after.release());
  }
}
