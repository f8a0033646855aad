// SPDX-License-Identifier: BSD-3-Clause
/// @file What the benches share: the step clock and the rates of timed segments, medians, the peak
/// RSS, the job's rank and size, reading the command line, and the run context of their JSON lines.
///
/// Only helpers that leave every bench's JSON fields as bench/README.md documents them: each
/// bench still prints its own line, in its own field order.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/trainer/metrics.hpp>

#if REPROSGD_HAS_MPI
#include <mpi.h>
#endif

#include <Kokkos_Core.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#ifndef REPROSGD_GIT_SHA
#define REPROSGD_GIT_SHA "unknown"
#endif

namespace reprosgd_bench {

/// Seconds on the steady clock (for differences only).
inline double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// A Trainer callback that records the wall time at the end of every step.
struct StepClock {
  std::vector<double> t;
  bool on_step_end(const reprosgd::StepMetrics&) {
    t.push_back(seconds_now());
    return false;
  }
};

/// The median of `v`: the mean of the two middle values when the count is even; 0 when empty.
inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// The value at position n/2 of the sorted `v` (the upper of the two middle values when the count
/// is even): the "median" train_bench, parallel_bench and checkpoint_bench have always reported.
inline double upper_median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The samples/s of timed segments: after `warmup` steps, `repeats` segments of `steps` steps of
/// `samples_per_step` samples each; segment r runs from the clock's entry warmup-1+r*steps to
/// warmup-1+(r+1)*steps. `median` is upper_median_of the rates, `best` the highest.
struct SegmentRates {
  std::vector<double> rates;  // in segment order
  double median = 0.0, best = 0.0;
};
inline SegmentRates segment_rates(const StepClock& clock, long warmup, long steps, int repeats, long samples_per_step) {
  SegmentRates s;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = clock.t[static_cast<std::size_t>(warmup - 1 + r * steps)];
    const double t1 = clock.t[static_cast<std::size_t>(warmup - 1 + (r + 1) * steps)];
    s.rates.push_back(static_cast<double>(steps * samples_per_step) / (t1 - t0));
  }
  s.median = upper_median_of(s.rates);
  s.best = *std::max_element(s.rates.begin(), s.rates.end());
  return s;
}

/// The peak resident set size of this process so far (getrusage's ru_maxrss), in KiB and MiB.
inline long long peak_rss_kib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<long long>(ru.ru_maxrss);
}
inline double kib_to_mib(long long kib) { return static_cast<double>(kib) / 1024.0; }
inline double peak_rss_mib() { return kib_to_mib(peak_rss_kib()); }

/// This process's rank in MPI_COMM_WORLD and the number of ranks (0 and 1 without MPI).
inline int world_rank() {
#if REPROSGD_HAS_MPI
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
#else
  return 0;
#endif
}
inline int world_size() {
#if REPROSGD_HAS_MPI
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
#else
  return 1;
#endif
}

/// The context fields of a JSON line: "backend" (the execution space), "threads" (its
/// concurrency), "ranks" and "git" (the commit the bench was built from).
struct RunContext {
  const char* backend;
  int threads;
  int ranks;
  const char* git;
};
template <class Space>
RunContext run_context(int ranks) {
  return {Space::name(), reprosgd::detail::concurrency(Space()), ranks, REPROSGD_GIT_SHA};
}

/**
 * A bench's command line, one argument at a time; an option's value is the next argument ("" when
 * there is none, and a number option then reads 0, as std::atol does).
 * @code
 * for (reprosgd_bench::CommandLine cl(argc, argv); cl.next();) {
 *   if (cl.arg() == "--steps") a.steps = cl.long_value();
 *   else if (!cl.kokkos_option()) return unknown(cl.arg());
 * }
 * @endcode
 */
class CommandLine {
 public:
  CommandLine(int argc, char** argv) : argc_(argc), argv_(argv) {}
  /// Move to the next argument; false after the last.
  bool next() {
    if (++i_ >= argc_) return false;
    arg_ = argv_[i_];
    return true;
  }
  [[nodiscard]] const std::string& arg() const noexcept { return arg_; }
  /// The current option's value (consumes it).
  std::string value() { return i_ + 1 < argc_ ? argv_[++i_] : ""; }
  long long_value() { return std::atol(value().c_str()); }
  int int_value() { return std::atoi(value().c_str()); }
  /// A --kokkos-* option (left to Kokkos::ScopeGuard).
  [[nodiscard]] bool kokkos_option() const { return arg_.rfind("--kokkos", 0) == 0; }

 private:
  int argc_;
  char** argv_;
  int i_ = 0;
  std::string arg_;
};

}  // namespace reprosgd_bench
