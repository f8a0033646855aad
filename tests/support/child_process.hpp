// SPDX-License-Identifier: BSD-3-Clause
/// @file in_child(): run a piece of a test in a forked child process and report how it ended, for
/// the code that ends processes on purpose (detail::Watchdog, detail::SignalExit).
#pragma once

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace reprosgd_test {

/// How a child process ended.
struct ChildEnd {
  int exit_code = -1;    ///< its exit status; -1 when it did not exit normally
  int signal = 0;        ///< the signal that ended it; 0 when none did
  std::string err;       ///< what it wrote to standard error
  double seconds = 0.0;  ///< from the fork to its end
};

/// Runs body() in a child process whose standard error goes to a pipe; the child exits 0 after it.
template <class Body>
ChildEnd in_child(Body body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    body();
    std::_Exit(0);
  }
  ::close(fds[1]);
  ChildEnd r;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) r.err.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

}  // namespace reprosgd_test
