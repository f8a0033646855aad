// SPDX-License-Identifier: BSD-3-Clause
/// @file BackgroundWriter: one helper thread that runs a trace's jobs (hash a step's state, write
/// its line) one at a time, in the order they were posted, while the training thread goes on with
/// the next step — the trace's hashing then overlaps the next step's forward and backward passes
/// instead of adding to the step (docs/diagnosis.md, "What a trace costs").
/// WriteBehind runs fit()'s checkpoint writes on one of its own the same way (it keeps a write's
/// exception itself, so its jobs never report through error()).
///
/// Which jobs may run behind the training thread is the caller's decision (the Tracer): a job
/// reads buffers that the next update overwrites, so the caller settle()s before it changes them.
/// A writer made `inline` runs every job on the calling thread at post() (the same order and the
/// same results, nothing overlapped). Errors are kept, the first one sticky, for error().
#pragma once

#include <reprosgd/config.hpp>

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

class BackgroundWriter {
 public:
  /// A job: does its work and returns "" or why it failed (it must not throw).
  using Job = std::function<std::string()>;

  explicit BackgroundWriter(bool inline_jobs = true) : inline_(inline_jobs) {}
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;
  ~BackgroundWriter() {
    settle();
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    ready_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  /// Whether jobs run on the calling thread (at post) rather than behind it.
  [[nodiscard]] bool runs_inline() const noexcept { return inline_; }
  /// Run jobs on the calling thread from now on (after the one in flight, if any).
  void set_inline(bool inline_jobs) {
    settle();
    inline_ = inline_jobs;
  }

  /// Run `job` after every job posted before it: now, on this thread, when inline; else on the
  /// helper thread, once the previous job is done (at most one job in flight).
  void post(Job job) {
    if (inline_) {
      keep(run_guarded(job));
      return;
    }
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return !busy_; });
    if (!thread_.joinable()) thread_ = std::thread([this] { serve(); });
    job_ = std::move(job);
    busy_ = true;
    ready_.notify_all();
  }

  /// Wait until no job is in flight (every job posted so far has run).
  void settle() {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return !busy_; });
  }

  /// The first error a job reported ("" when none), of the jobs that have finished.
  [[nodiscard]] std::string error() const {
    std::lock_guard lock(mutex_);
    return error_;
  }
  /// Forget the errors (a new trace starts).
  void clear_error() {
    settle();
    std::lock_guard lock(mutex_);
    error_.clear();
  }

 private:
  static std::string run_guarded(Job& job) {
    try {
      return job();
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "reprosgd: a trace job failed with an unknown exception";
    }
  }
  void keep(std::string why) {
    std::lock_guard lock(mutex_);
    if (error_.empty()) error_ = std::move(why);
  }
  void serve() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ready_.wait(lock, [&] { return busy_ || quit_; });
      if (!busy_) return;  // quit, nothing left to run
      Job job = std::move(job_);
      lock.unlock();
      std::string why = run_guarded(job);
      lock.lock();
      if (error_.empty()) error_ = std::move(why);
      busy_ = false;
      done_.notify_all();
    }
  }

  bool inline_;
  mutable std::mutex mutex_;
  std::condition_variable ready_, done_;
  std::thread thread_;
  Job job_;
  bool busy_ = false, quit_ = false;
  std::string error_;
};

}  // namespace detail
REPROSGD_END_NAMESPACE
