// SPDX-License-Identifier: BSD-3-Clause
/// @file SignalExit: while it lives, a crash signal ends the process with one line and a chosen exit code.
///
/// The Watchdog's sibling, for the other way a call with no failure notification of its own can
/// end: Open MPI 5's MPI_Init_thread, when a process of the job dies at the end of the start-up
/// exchange, can crash a survivor (SIGSEGV, seen in CI and reproduced) instead of returning an
/// error. Under ULFM the launcher counts a rank killed by a signal as a tolerated failure, so a
/// survivor crashing that way ended a job with exit 0 and no result. Inside the guarded call the
/// crash has the same meaning as the deadline expiring, and gets the same exit.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <string>

REPROSGD_BEGIN_NAMESPACE

namespace detail {

/**
 * Installs, for its lifetime, a handler for SIGSEGV, SIGBUS, SIGFPE and SIGABRT that writes
 * `head + " (signal N, SIGNAME)" + tail` and a newline to standard error with one write(2) and
 * ends the process with _exit(exit_code); the destructor restores what was there. A signal that
 * already has a handler of the program's is left to it (SignalExit only fills the default). One
 * SignalExit at a time per process.
 *
 * The guarded call must be one whose crash means what `exit_code` says (MpiEnvironment: a
 * process of the job died while MPI started). Side effect worth knowing: Open MPI installs its own
 * stack-trace handlers in MPI_Init only where none is installed yet (MCA parameter opal_signal), so
 * after an MPI_Init_thread guarded this way those signals keep the system's default action.
 *
 * @throws config_error when another SignalExit is alive.
 */
class SignalExit {
 public:
  SignalExit(const std::string& head, const std::string& tail, int exit_code) {
    bool expected = false;
    if (!active().compare_exchange_strong(expected, true))
      throw config_error("reprosgd::detail::SignalExit: another one is already installed in this process");
    code() = exit_code;
    for (std::size_t i = 0; i < signals.size(); ++i) {
      messages()[i] = head + " (signal " + std::to_string(signals[i].number) + ", " + signals[i].name + ")" + tail + "\n";
      struct sigaction previous{};
      ::sigaction(signals[i].number, nullptr, &previous);
      installed_[i] = previous.sa_handler == SIG_DFL && !(previous.sa_flags & SA_SIGINFO);
      if (!installed_[i]) continue;
      struct sigaction action{};
      action.sa_handler = &SignalExit::handle;
      ::sigemptyset(&action.sa_mask);
      action.sa_flags = 0;
      ::sigaction(signals[i].number, &action, &previous_[i]);
    }
  }
  SignalExit(const SignalExit&) = delete;
  SignalExit& operator=(const SignalExit&) = delete;

  /// Restores the dispositions it replaced. Idempotent.
  void release() noexcept {
    if (released_) return;
    released_ = true;
    for (std::size_t i = 0; i < signals.size(); ++i)
      if (installed_[i]) ::sigaction(signals[i].number, &previous_[i], nullptr);
    active().store(false);
  }
  ~SignalExit() { release(); }

  /// The signals it guards, with the names its line gives them.
  struct Signal {
    int number;
    const char* name;
  };
  static constexpr std::array<Signal, 4> signals{{{SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"}, {SIGABRT, "SIGABRT"}}};

 private:
  // Only async-signal-safe calls: write(2) of a line composed beforehand, and _exit.
  static void handle(int number) {
    for (std::size_t i = 0; i < signals.size(); ++i) {
      if (signals[i].number != number) continue;
      const std::string& line = messages()[i];
      [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
    }
    ::_exit(code());
  }
  static std::atomic<bool>& active() {
    static std::atomic<bool> flag{false};
    return flag;
  }
  static int& code() {
    static int c = 1;
    return c;
  }
  static std::array<std::string, signals.size()>& messages() {
    static std::array<std::string, signals.size()> m;
    return m;
  }

  std::array<struct sigaction, signals.size()> previous_{};
  std::array<bool, signals.size()> installed_{};
  bool released_ = false;
};

}  // namespace detail

REPROSGD_END_NAMESPACE
