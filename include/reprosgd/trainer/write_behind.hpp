// SPDX-License-Identifier: BSD-3-Clause
/// @file WriteBehind: fit()'s checkpoint writes on a helper thread while training goes on
/// (TrainerOptions::async_checkpoints, docs/checkpoints.md "Asynchronous checkpoints").
///
/// A write reads the training buffers it saves (the live parameters and optimizer state, not a
/// copy: copying them would cost the training thread as much as a large part of the write). They
/// change only at the next update, so the write runs behind the next step's micro-batches and
/// calls release() once its serialiser has read everything; the training thread calls
/// wait_released() before it updates. What remains of the write after release — fsync, rename,
/// directory fsync, pruning — touches the file system only. Hence the state a write saves is
/// exactly the state of its step, whatever the timing.
///
/// At most one write is in flight: post() first waits for the previous one to end (the policy when
/// the next checkpoint is due before the last is durable: that step waits; no checkpoint is ever
/// skipped or reordered). A failed write keeps its exception until the caller has reported it.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/trainer/background_writer.hpp>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <utility>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

class WriteBehind {
 public:
  /// What a write calls once it no longer reads the training buffers (more calls do nothing).
  class Release {
   public:
    explicit Release(WriteBehind& w) noexcept : w_(&w) {}
    void operator()() const { w_->release(); }

   private:
    WriteBehind* w_;
  };

  WriteBehind() : helper_(/*inline_jobs=*/false) {}
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;
  ~WriteBehind() { settle(); }

  /**
   * Run `write(release)` on the helper thread, after the write in flight (if any) has ended.
   * `write` throws on failure; whatever it throws is kept for failure(). The buffers are taken as
   * released when `write` returns or throws, even if it never called release.
   */
  template <class Write>
  void post(Write write) {
    helper_.settle();
    {
      std::lock_guard lock(mutex_);
      released_ = false;
    }
    helper_.post([this, write = std::move(write)]() mutable -> std::string {
      try {
        write(Release(*this));
      } catch (...) {
        failure_ = std::current_exception();  // read only after settle(): ordered by the helper's mutex
      }
      release();
      return {};
    });
  }

  /// Wait until the write in flight no longer reads the training buffers (at once when none is).
  void wait_released() {
    std::unique_lock lock(mutex_);
    released_cv_.wait(lock, [&] { return released_; });
  }

  /// Wait until no write is in flight.
  void settle() { helper_.settle(); }

  /// The exception of the last write that failed and was not forgotten (null when none); settles first.
  [[nodiscard]] std::exception_ptr failure() {
    settle();
    return failure_;
  }
  /// The failure was reported: forget it.
  void forget_failure() {
    settle();
    failure_ = nullptr;
  }

 private:
  void release() {
    {
      std::lock_guard lock(mutex_);
      released_ = true;
    }
    released_cv_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable released_cv_;
  bool released_ = true;
  std::exception_ptr failure_;
  BackgroundWriter helper_;  // last: destroyed (joined) first, while the members above still exist
};

}  // namespace detail
REPROSGD_END_NAMESPACE
