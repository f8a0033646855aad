// SPDX-License-Identifier: BSD-3-Clause
/// @file Callback hooks (detected by concepts) and the built-in progress and JSON-lines reporters.
#pragma once

#include <reprosgd/error.hpp>
#include <reprosgd/trainer/metrics.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>
#include <unistd.h>

REPROSGD_BEGIN_NAMESPACE

/// A callback with an on_step_end hook; returning true asks the Trainer to stop (agreed across ranks).
template <class C>
concept StepCallback = requires(C& c, const StepMetrics& m) {
  { c.on_step_end(m) } -> std::convertible_to<bool>;
};
/// A callback with an on_epoch_end hook; returning true asks the Trainer to stop.
template <class C>
concept EpochCallback = requires(C& c, const EpochMetrics& m) {
  { c.on_epoch_end(m) } -> std::convertible_to<bool>;
};
/// A callback told about lost ranks (ShrinkAndContinue), after the first step that followed the
/// recovery. Its return value is ignored (a failure is not a reason to stop).
template <class C>
concept FailureCallback = requires(C& c, const FailureEvent& e) { c.on_failure(e); };
/// Anything with at least one hook.
template <class C>
concept Callback = StepCallback<C> || EpochCallback<C> || FailureCallback<C>;

namespace detail {
/// Call a callback's hook when it has one; a hook it lacks asks for no stop.
template <class C>
bool call_step_end(C& c, const StepMetrics& m) {
  if constexpr (StepCallback<C>) return c.on_step_end(m);
  return false;
}
template <class C>
bool call_epoch_end(C& c, const EpochMetrics& m) {
  if constexpr (EpochCallback<C>) return c.on_epoch_end(m);
  return false;
}
template <class C>
void call_failure(C& c, const FailureEvent& e) {
  if constexpr (FailureCallback<C>) c.on_failure(e);
}
/// Call a hook, keeping what it throws in `kept` (the first one) instead of throwing: a callback
/// can fail on one rank only (rank 0 writes the metrics file), and that rank must go on calling
/// the same hooks and collectives as the others (a hook may save a checkpoint) until the step's
/// stop vote ends the run on every rank (Trainer::fit). A process failure is thrown as before:
/// the fault policy handles it. Returns the hook's stop request, false when it threw.
template <class F>
bool call_kept(std::exception_ptr& kept, F&& hook) {
  try {
    return hook();
  } catch (const process_failure&) {
    throw;
  } catch (...) {
    if (!kept) kept = std::current_exception();
    return false;
  }
}
inline std::string json_number(double v) {
  if (v != v || v > 1.7976931348623157e308 || v < -1.7976931348623157e308) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

/// Seconds since the Unix epoch (informational: timestamps in metrics, never in numerics).
inline double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// "2,3" for {2, 3}.
inline std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) {
    if (!s.empty()) s += ',';
    s += std::to_string(r);
  }
  return s;
}

}  // namespace detail

/**
 * Prints progress on rank 0: a progress bar redrawn in place when the stream is a terminal, and one
 * plain line per epoch otherwise (logs, CI). Other ranks print nothing. When rank 0 is lost, the
 * survivor that becomes rank 0 takes over (on_failure), so progress continues on it.
 */
class ProgressReporter {
 public:
  /// `out` nullptr: print nothing at all (not even after taking over from a lost rank 0).
  explicit ProgressReporter(int rank = 0, std::FILE* out = stdout)
      : out_(out), enabled_(rank == 0 && out != nullptr), tty_(out != nullptr && isatty(fileno(out)) != 0) {}

  bool on_step_end(const StepMetrics& m) {
    if (!enabled_ || !tty_) return false;
    const std::uint64_t in_epoch = m.step % m.steps_per_epoch + 1;
    if (in_epoch % 10 != 0 && in_epoch != m.steps_per_epoch) return false;
    const int width = 30;
    const int filled = static_cast<int>(width * in_epoch / m.steps_per_epoch);
    std::fprintf(out_, "\repoch %llu [%.*s%*s] %llu/%llu loss %.4f", static_cast<unsigned long long>(m.epoch + 1),
                 filled, "##############################", width - filled, "",
                 static_cast<unsigned long long>(in_epoch), static_cast<unsigned long long>(m.steps_per_epoch), m.loss);
    std::fflush(out_);
    bar_shown_ = true;
    return false;
  }
  /// End a progress bar still on the line, so that what follows starts a line of its own (call
  /// after fit(), before printing anything else). A newline, not an erase: stdout may be a pty
  /// that a launcher copies into a file, where "\r" does not start a line.
  void finish() {
    if (!bar_shown_) return;
    std::fputc('\n', out_);
    std::fflush(out_);
    bar_shown_ = false;
  }
  bool on_epoch_end(const EpochMetrics& m) {
    if (!enabled_) return false;
    finish();
    std::fprintf(out_, "epoch %llu  step %llu  train_loss %.6f", static_cast<unsigned long long>(m.epoch + 1),
                 static_cast<unsigned long long>(m.step), m.train_loss);
    if (!m.regression) std::fprintf(out_, "  train_acc %.4f", m.train_accuracy);
    if (m.evaluated && m.test.regression)
      std::fprintf(out_, "  test_loss %.6f  test_rmse %.6f  test_r2 %.4f", m.test.loss, m.test.rmse, m.test.r2);
    else if (m.evaluated)
      std::fprintf(out_, "  test_loss %.6f  test_acc %.4f", m.test.loss, m.test.accuracy);
    std::fprintf(out_, "  (%.2f s)\n", m.seconds);
    std::fflush(out_);
    return false;
  }
  void on_failure(const FailureEvent& e) {
    enabled_ = e.new_rank == 0 && out_ != nullptr;
    if (!enabled_) return;
    finish();
    std::fprintf(out_,
                 "failure: lost rank %s at step %llu; %d -> %d ranks; communicator repaired in %.3f s, first step "
                 "after it done %.3f s after the failure was detected\n",
                 detail::rank_list(e.lost_ranks).c_str(), static_cast<unsigned long long>(e.step), e.old_size, e.new_size,
                 e.shrink_seconds, e.recovery_seconds);
    if (!e.joined_ranks.empty())
      std::fprintf(out_, "failure: spare rank(s) %s joined and received the state in %.3f s; back to %d ranks\n",
                   detail::rank_list(e.joined_ranks).c_str(), e.regrow_seconds, e.new_size);
    if (e.restored_from == "buddy")
      std::fprintf(out_, "failure: the lost shards were restored from their buddies' copies of step %llu; steps %llu..%llu replayed\n",
                   static_cast<unsigned long long>(e.resumed_from), static_cast<unsigned long long>(e.resumed_from),
                   static_cast<unsigned long long>(e.step));
    else if (e.restored_from == "replica")
      std::fprintf(out_, "failure: the lost shards were restored from another replica's copies of step %llu; steps %llu..%llu replayed\n",
                   static_cast<unsigned long long>(e.resumed_from), static_cast<unsigned long long>(e.resumed_from),
                   static_cast<unsigned long long>(e.step));
    else if (e.restored_from == "checkpoint")
      std::fprintf(out_,
                   "failure: a lost shard's buddy was lost too: fell back to the newest disk checkpoint (step %llu); "
                   "steps %llu..%llu replayed\n",
                   static_cast<unsigned long long>(e.resumed_from), static_cast<unsigned long long>(e.resumed_from),
                   static_cast<unsigned long long>(e.step));
    else if (e.restored_from == "seed")
      std::fprintf(out_,
                   "failure: a lost shard had no copy left and no checkpoint holds it: the state fit() started from "
                   "was drawn again from the seed; steps 0..%llu replayed\n",
                   static_cast<unsigned long long>(e.step));
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  bool enabled_;
  bool tty_;
  bool bar_shown_ = false;  // a bar is drawn on the current line
};

/**
 * Writes one JSON object per step, per epoch and per recovered failure to a file, on rank 0 only,
 * each line flushed when written. When rank 0 is lost, the survivor that becomes rank 0 takes over
 * the file (on a file system all ranks share): rank 0 may have died after every rank completed a
 * step but before it wrote that step's line, so every rank keeps its last lines (the same ones:
 * the metrics are agreed), and the new writer reads the file's last whole line, drops a torn one
 * after it, and writes the lines that follow it before the failure's. The lines of completed steps
 * are then all there, once each, in order. @throws io_error
 */
class JsonLinesWriter {
 public:
  JsonLinesWriter(const std::string& path, int rank = 0) : path_(path) {
    if (rank == 0) open("w");
  }
  JsonLinesWriter(const JsonLinesWriter&) = delete;
  JsonLinesWriter& operator=(const JsonLinesWriter&) = delete;
  ~JsonLinesWriter() {
    if (f_) std::fclose(f_);
  }

  bool on_step_end(const StepMetrics& m) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "{\"event\":\"step\",\"step\":%llu,\"epoch\":%llu,\"loss\":%s,\"accuracy\":%s,\"lr\":%s,"
                  "\"wall_time\":%.6f}\n",
                  static_cast<unsigned long long>(m.step), static_cast<unsigned long long>(m.epoch),
                  detail::json_number(m.loss).c_str(), detail::json_number(m.accuracy).c_str(),
                  detail::json_number(m.lr).c_str(), detail::wall_time());
    emit(line_order(m.step, kind_step), line);
    return false;
  }
  bool on_epoch_end(const EpochMetrics& m) {
    std::string line = "{\"event\":\"epoch\",\"epoch\":" + std::to_string(m.epoch) + ",\"step\":" + std::to_string(m.step) +
                       ",\"train_loss\":" + detail::json_number(m.train_loss) +
                       ",\"train_accuracy\":" + detail::json_number(m.train_accuracy);
    if (m.evaluated)
      line += ",\"test_loss\":" + detail::json_number(m.test.loss) + ",\"test_accuracy\":" + detail::json_number(m.test.accuracy);
    if (m.evaluated && m.test.regression)
      line += ",\"test_rmse\":" + detail::json_number(m.test.rmse) + ",\"test_r2\":" + detail::json_number(m.test.r2);
    line += ",\"seconds\":" + detail::json_number(m.seconds) + "}\n";
    // m.step counts the steps completed: the epoch's line follows its last step's (m.step - 1).
    emit(line_order(m.step > 0 ? m.step - 1 : 0, kind_epoch), line);
    return false;
  }
  void on_failure(const FailureEvent& e) {
    if (e.new_rank == 0 && !f_) take_over();
    if (!f_) return;
    errno = 0;
    const int written = std::fprintf(f_,
                 "{\"event\":\"failure\",\"step\":%llu,\"lost_ranks\":[%s],\"old_size\":%d,\"new_size\":%d,"
                 "\"shrink_seconds\":%s,\"recovery_seconds\":%s,\"joined_ranks\":[%s],\"regrow_seconds\":%s,"
                 "\"restored_from\":\"%s\",\"resumed_from\":%llu}\n",
                 static_cast<unsigned long long>(e.step), detail::rank_list(e.lost_ranks).c_str(), e.old_size, e.new_size,
                 detail::json_number(e.shrink_seconds).c_str(), detail::json_number(e.recovery_seconds).c_str(),
                 detail::rank_list(e.joined_ranks).c_str(), detail::json_number(e.regrow_seconds).c_str(),
                 e.restored_from.c_str(), static_cast<unsigned long long>(e.resumed_from));
    flush(written >= 0);
  }

  /// The lines every rank keeps for a takeover: more than a lost writer can be behind (it writes
  /// each line before its rank can join the next step's collectives, so at most a step and its epoch).
  static constexpr std::size_t kept_lines = 8;

 private:
  // Lines in file order: a failure's line (its step was redone) comes before that step's line,
  // which comes before the line of the epoch it ends.
  static constexpr unsigned kind_failure = 0, kind_step = 1, kind_epoch = 2;
  static std::uint64_t line_order(std::uint64_t step, unsigned kind) { return step * 3 + kind; }

  void emit(std::uint64_t order, const std::string& line) {
    if (recent_.size() == kept_lines) recent_.erase(recent_.begin());
    recent_.push_back({order, line});
    if (f_) {
      errno = 0;
      flush(std::fputs(line.c_str(), f_) >= 0);
    }
  }
  // Push what was written to the file; a write that failed (`written` false: a full disk, a quota,
  // an I/O error) throws. A line only half written stays in the file: a resumed run continuing
  // it drops a torn last line (docs/diagnosis.md).
  void flush(bool written) {
    if (written && std::fflush(f_) == 0) return;
    const int why = errno != 0 ? errno : EIO;
    std::clearerr(f_);
    throw io_error("reprosgd::JsonLinesWriter: cannot write " + path_ + ": " + std::strerror(why));
  }
  // The order of a line this writer writes (-1: not one of them, e.g. a user's).
  static long long order_of(const std::string& line) {
    const long long step = detail::json_line_step(line);
    if (step < 0) return -1;
    const auto s = static_cast<std::uint64_t>(step);
    if (line.rfind("{\"event\":\"step\"", 0) == 0) return static_cast<long long>(line_order(s, kind_step));
    if (line.rfind("{\"event\":\"epoch\"", 0) == 0 && s > 0) return static_cast<long long>(line_order(s - 1, kind_epoch));
    if (line.rfind("{\"event\":\"failure\"", 0) == 0) return static_cast<long long>(line_order(s, kind_failure));
    return -1;
  }
  // This rank becomes the writer: keep the file up to its last whole line, then write the kept
  // lines that come after that line.
  void take_over() {
    if (path_.empty()) return;
    long long last = -1;  // the order of the file's last whole line (-1: none, or not one of ours)
    if (std::FILE* f = std::fopen(path_.c_str(), "r+")) {  // else the lost writer never created it
      std::string tail;
      long size = 0;
      if (std::fseek(f, 0, SEEK_END) == 0) size = std::ftell(f);
      const long from = size > 65536 ? size - 65536 : 0;
      tail.resize(static_cast<std::size_t>(size - from));
      const bool read = std::fseek(f, from, SEEK_SET) == 0 && std::fread(tail.data(), 1, tail.size(), f) == tail.size();
      std::fclose(f);
      if (!read) throw io_error("reprosgd::JsonLinesWriter: cannot read " + path_ + ": " + std::strerror(errno));
      const auto end = tail.rfind('\n');
      const long whole = end == std::string::npos ? from : from + static_cast<long>(end) + 1;
      if (whole < size && ::truncate(path_.c_str(), whole) != 0)  // a line torn by the writer's death
        throw io_error("reprosgd::JsonLinesWriter: cannot truncate " + path_ + ": " + std::strerror(errno));
      if (end != std::string::npos) {
        std::size_t begin = 0;
        if (end > 0) {
          const auto previous = tail.rfind('\n', end - 1);
          begin = previous == std::string::npos ? 0 : previous + 1;
        }
        last = order_of(tail.substr(begin, end - begin));
      }
    }
    open("a");
    errno = 0;
    bool written = true;
    for (const auto& [order, line] : recent_)
      if (static_cast<long long>(order) > last) written = std::fputs(line.c_str(), f_) >= 0 && written;
    flush(written);
  }
  void open(const char* mode) {
    if (path_.empty()) return;
    f_ = std::fopen(path_.c_str(), mode);
    if (!f_) throw io_error("reprosgd::JsonLinesWriter: cannot open " + path_ + ": " + std::strerror(errno));
  }

  std::string path_;
  std::FILE* f_ = nullptr;
  std::vector<std::pair<std::uint64_t, std::string>> recent_;  // the last kept_lines lines, on every rank
};

static_assert(Callback<ProgressReporter> && Callback<JsonLinesWriter>);
static_assert(FailureCallback<ProgressReporter> && FailureCallback<JsonLinesWriter>);

REPROSGD_END_NAMESPACE
