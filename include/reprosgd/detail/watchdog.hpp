// SPDX-License-Identifier: BSD-3-Clause
/// @file Watchdog: end the process with one line and a chosen exit code unless disarmed in time.
///
/// For the calls that offer no failure notification of their own: a process that dies while MPI
/// starts (MPI_Init_thread) leaves the others waiting inside the start-up exchange for ever, since
/// ULFM's promise that no call blocks after a failure begins only once MPI is initialised. A
/// deadline on such a call turns that hang into a prompt, distinct exit a relauncher can act on.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

REPROSGD_BEGIN_NAMESPACE

namespace detail {

/// Seconds as a person writes them: "30", "2.5" (at most 3 decimals, trailing zeros dropped).
inline std::string seconds_text(double s) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3f", s);
  std::string t = text;
  while (!t.empty() && t.back() == '0') t.pop_back();
  if (!t.empty() && t.back() == '.') t.pop_back();
  return t;
}

/// Whether an MPI launcher started this process (Open MPI's, or any PMIx or PMI one: srun, Hydra),
/// so that its parent process is the launcher (or the launcher's daemon), not a user's shell.
inline bool started_by_a_launcher() {
  return std::getenv("PMIX_RANK") != nullptr || std::getenv("OMPI_COMM_WORLD_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

/// The exit code that makes an expired Watchdog end its process with SIGKILL instead of an exit:
/// the one way to end that MPI's fault tolerance reports to the other processes as a failure (Open
/// MPI 5 under `--with-ft ulfm` does not report a process that exits without MPI_Finalize).
inline constexpr int end_by_sigkill = -SIGKILL;

/**
 * A thread that waits `seconds`; unless disarm() (or the destructor) comes first, it writes
 * `message` and a newline to standard error with one write(2) and ends the process with
 * std::_Exit(exit_code), or with SIGKILL when exit_code is end_by_sigkill: no destructors, no
 * atexit handlers, no MPI call (MPI may be the thing that hangs). `seconds` = 0 arms nothing.
 *
 * With a `parent_gone` message, it also ends the process that way, with that line, as soon as the
 * process's parent ends (it is re-parented; checked every 50 ms): under an MPI launcher the parent
 * is the launcher, and once it has ended (it ends the job when a process dies inside MPI_Init)
 * nothing will ever answer the call being waited on. A start-up campaign trial left one rank inside
 * MPI_Init for its deadline after the launcher had exited 76.
 *
 * @throws config_error when seconds is negative, NaN or infinite.
 */
class Watchdog {
 public:
  Watchdog(double seconds, std::string message, int exit_code, std::string parent_gone = {})
      : message_(std::move(message) + "\n"),
        parent_gone_(parent_gone.empty() ? std::string() : std::move(parent_gone) + "\n"),
        code_(exit_code) {
    if (!std::isfinite(seconds) || seconds < 0.0) {
      char got[32];
      std::snprintf(got, sizeof got, "%g", seconds);
      throw config_error(std::string("reprosgd::Watchdog: the deadline must be a finite number of seconds >= 0 (0: none), got ") +
                         got);
    }
    if (seconds == 0.0) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    const pid_t parent = ::getppid();
    thread_ = std::thread([this, deadline, parent] {
      std::unique_lock<std::mutex> lock(mutex_);
      // Without a parent to watch, one wait until the deadline; with one, waits of 50 ms.
      const bool watch = !parent_gone_.empty();
      const std::string* why = &message_;
      for (;;) {
        const auto next = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
        if (wake_.wait_until(lock, watch && next < deadline ? next : deadline, [this] { return disarmed_; })) return;
        if (watch && ::getppid() != parent) {
          why = &parent_gone_;
          break;
        }
        if (std::chrono::steady_clock::now() >= deadline) break;
      }
      [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, why->data(), why->size());
      if (code_ == end_by_sigkill) ::kill(::getpid(), SIGKILL);
      std::_Exit(code_);
    });
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() { disarm(); }

  /// Stops the countdown; the process goes on. Idempotent.
  void disarm() noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      disarmed_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  /// Whether a countdown is running.
  [[nodiscard]] bool armed() const noexcept { return thread_.joinable(); }

 private:
  std::string message_;
  std::string parent_gone_;  // empty: the parent is not watched
  int code_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool disarmed_ = false;
  std::thread thread_;  // last: started once everything it reads is constructed
};

}  // namespace detail

REPROSGD_END_NAMESPACE
