// SPDX-License-Identifier: BSD-3-Clause
/// @file FailureSchedule: which rank kills itself at which step and point, for fault-tolerance tests.
///
/// A schedule is written "RANK@STEP[:POINT][,RANK@STEP[:POINT]...]", e.g. "2@17:allreduce,0@40"
/// (POINT is step, allreduce, checkpoint, setup, start or regrow; step when omitted). RANK is the process's identity
/// as the caller defines it — the fault-tolerance tests pass the MPI_COMM_WORLD rank, which does
/// not change when a communicator shrinks. Needs neither MPI nor Kokkos. FailureInjection
/// (failure_injection.hpp) applies a schedule to a parallelism policy.
#pragma once

#include <reprosgd/concepts/failure_injecting.hpp>  // FailurePoint
#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// One entry of a schedule: `rank` dies at `step`, at `point`.
struct ScheduledFailure {
  int rank = 0;
  std::uint64_t step = 0;
  FailurePoint point = FailurePoint::step;
  friend bool operator==(const ScheduledFailure&, const ScheduledFailure&) = default;
};

/**
 * A list of deliberate process deaths: maybe_fail(rank, step, point) kills the calling process
 * with SIGKILL when (rank, step, point) is scheduled — the hardest kind of failure, with no
 * chance to clean up, flush or say goodbye to MPI.
 *
 * **Example**:
 * @code
 * const auto schedule = reprosgd::FailureSchedule::parse("2@17:allreduce");
 * schedule.maybe_fail(world_rank, step, reprosgd::FailurePoint::allreduce);
 * @endcode
 */
class FailureSchedule {
 public:
  FailureSchedule() = default;
  /// @throws config_error on a negative rank or a duplicate entry
  explicit FailureSchedule(std::vector<ScheduledFailure> failures) : failures_(std::move(failures)) {
    for (std::size_t i = 0; i < failures_.size(); ++i) {
      if (failures_[i].rank < 0)
        throw config_error("reprosgd::FailureSchedule: rank " + std::to_string(failures_[i].rank) + " is negative");
      for (std::size_t j = 0; j < i; ++j)
        if (failures_[j] == failures_[i]) throw config_error("reprosgd::FailureSchedule: duplicate entry " + spell(failures_[i]));
    }
  }

  /**
   * Parse "RANK@STEP[:POINT][,...]"; the empty string is the empty schedule. No spaces.
   * @throws config_error "reprosgd::FailureSchedule::parse: <problem> in entry "<token>" of "<spec>"
   *         (expected RANK@STEP[:step|allreduce|checkpoint|setup|start|regrow], e.g. 2@17:allreduce)"
   */
  static FailureSchedule parse(std::string_view spec) {
    std::vector<ScheduledFailure> out;
    if (spec.empty()) return FailureSchedule();
    std::size_t pos = 0;
    for (;;) {
      const std::size_t comma = spec.find(',', pos);
      const std::string_view token = spec.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
      out.push_back(parse_entry(token, spec));
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
    for (std::size_t i = 0; i < out.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (out[j] == out[i])
          throw config_error("reprosgd::FailureSchedule::parse: duplicate entry \"" + spell(out[i]) + "\" in \"" +
                             std::string(spec) + "\"");
    return FailureSchedule(std::move(out));
  }

  [[nodiscard]] const std::vector<ScheduledFailure>& failures() const noexcept { return failures_; }
  [[nodiscard]] bool empty() const noexcept { return failures_.empty(); }

  /// Whether `rank` is scheduled to die at (`step`, `point`).
  [[nodiscard]] bool scheduled(int rank, std::uint64_t step, FailurePoint point) const noexcept {
    for (const ScheduledFailure& f : failures_)
      if (f.rank == rank && f.step == step && f.point == point) return true;
    return false;
  }

  /**
   * Kill this process with SIGKILL if (rank, step, point) is scheduled; otherwise return.
   * Before dying it writes one line to stderr with write(2) (no allocation, no stdio lock, so it
   * is safe even in a forked child of a multithreaded process).
   */
  void maybe_fail(int rank, std::uint64_t step, FailurePoint point) const noexcept {
    if (!scheduled(rank, step, point)) return;
    char line[200];
    std::size_t n = 0;
    auto put = [&](const char* s) {
      while (*s && n < sizeof line - 1) line[n++] = *s++;
    };
    auto put_number = [&](std::uint64_t v) {
      char digits[24];
      int k = 0;
      do {
        digits[k++] = static_cast<char>('0' + v % 10);
        v /= 10;
      } while (v != 0);
      while (k > 0 && n < sizeof line - 1) line[n++] = digits[--k];
    };
    put("reprosgd::FailureSchedule::maybe_fail: rank ");
    put_number(static_cast<std::uint64_t>(rank));
    put(" kills itself (SIGKILL) at step ");
    put_number(step);
    put(", point ");
    put(to_string(point));
    // The wall-clock time of death, for recovery-time measurements (bench/recovery_bench.sh).
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    put(", wall time ");
    put_number(static_cast<std::uint64_t>(now.tv_sec));
    put(".");
    char micro[7];
    std::uint64_t us = static_cast<std::uint64_t>(now.tv_nsec) / 1000;
    for (int d = 5; d >= 0; --d, us /= 10) micro[d] = static_cast<char>('0' + us % 10);
    micro[6] = '\0';
    put(micro);
    line[n++] = '\n';
    [[maybe_unused]] const ssize_t written = ::write(2, line, n);
    ::kill(::getpid(), SIGKILL);
    for (;;) ::pause();  // SIGKILL cannot be caught or ignored: never reached
  }

  /// Overload taking the point's spelling ("step", "allreduce", "checkpoint", "setup", "start", "regrow").
  /// @throws config_error on an unknown point
  void maybe_fail(int rank, std::uint64_t step, std::string_view point) const {
    maybe_fail(rank, step, parse_point(point, "reprosgd::FailureSchedule::maybe_fail: unknown point \"" +
                                                  std::string(point) + "\" (expected step, allreduce, checkpoint, setup, start or regrow)"));
  }

 private:
  static std::string spell(const ScheduledFailure& f) {
    return std::to_string(f.rank) + "@" + std::to_string(f.step) + ":" + to_string(f.point);
  }

  static FailurePoint parse_point(std::string_view s, const std::string& error) {
    if (s == "step") return FailurePoint::step;
    if (s == "allreduce") return FailurePoint::allreduce;
    if (s == "checkpoint") return FailurePoint::checkpoint;
    if (s == "setup") return FailurePoint::setup;
    if (s == "start") return FailurePoint::start;
    if (s == "regrow") return FailurePoint::regrow;
    throw config_error(error);
  }

  static ScheduledFailure parse_entry(std::string_view token, std::string_view spec) {
    auto fail = [&](const std::string& problem) -> config_error {
      return config_error("reprosgd::FailureSchedule::parse: " + problem + " in entry \"" + std::string(token) +
                          "\" of \"" + std::string(spec) +
                          "\" (expected RANK@STEP[:step|allreduce|checkpoint|setup|start|regrow], e.g. 2@17:allreduce)");
    };
    if (token.empty()) throw fail("empty entry");
    const std::size_t at = token.find('@');
    if (at == std::string_view::npos) throw fail("no '@'");
    const std::size_t colon = token.find(':', at);
    const std::string_view rank_text = token.substr(0, at);
    const std::string_view step_text =
        token.substr(at + 1, colon == std::string_view::npos ? std::string_view::npos : colon - at - 1);
    ScheduledFailure f;
    if (!parse_unsigned(rank_text, f.rank)) throw fail("rank \"" + std::string(rank_text) + "\" is not an integer >= 0");
    if (!parse_unsigned(step_text, f.step)) throw fail("step \"" + std::string(step_text) + "\" is not an integer >= 0");
    if (colon != std::string_view::npos) {
      const std::string_view point = token.substr(colon + 1);
      f.point = parse_point(point, fail("unknown point \"" + std::string(point) + "\"").what());
    }
    return f;
  }

  /// Decimal digits only (no sign, no spaces), the whole text, in range.
  template <class T>
  static bool parse_unsigned(std::string_view text, T& value) {
    if (text.empty() || text.front() < '0' || text.front() > '9') return false;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc() && end == text.data() + text.size();
  }

  std::vector<ScheduledFailure> failures_;
};

REPROSGD_END_NAMESPACE
