// SPDX-License-Identifier: BSD-3-Clause
/// @file The determinism trace (TrainerOptions::trace): one JSON line per committed step, per
/// evaluation and per recovered failure, after a header line with the run's configuration, so
/// that two runs which should agree can be compared line by line and the first step, layer and
/// tensor where they part found (apps/reprosgd_diff, docs/diagnosis.md).
///
/// Everything in a trace is a function of the configuration and the bits of the run: no time, no
/// rank count, no host name. Fingerprints are taken in the canonical (one-process) layout — under
/// model parallelism the shards are gathered as for a checkpoint — so the file does not depend on
/// threads, backend, rank count or grid. One rank writes it (the one that writes checkpoints); each
/// line is one write(2) on a file opened for appending, so a process killed between lines leaves
/// whole lines, and the survivor that takes over after a lost rank appends to the same file.
#pragma once

#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/fingerprint.hpp>
#include <reprosgd/trainer/agreement.hpp>
#include <reprosgd/trainer/background_writer.hpp>
#include <reprosgd/trainer/metrics.hpp>
#include <reprosgd/trainer/sharding.hpp>
#include <reprosgd/trainer/state.hpp>
#include <reprosgd/trainer/trace_fingerprints.hpp>

#include <Kokkos_Core.hpp>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <type_traits>
#include <unistd.h>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// The version of the trace format written in every header line (docs/diagnosis.md).
inline constexpr int trace_format_version = 2;

/// "step", "layer" or "tensor": the name of a TraceLevel in a trace's header and on train_mlp's command line.
[[nodiscard]] inline const char* trace_level_name(TraceLevel level) noexcept {
  return level == TraceLevel::tensor ? "tensor" : level == TraceLevel::layer ? "layer" : "step";
}

/// The fingerprints of one layer's activations for the step's first micro-batch (a trace's
/// `tensor` level): what forward wrote and what backward computed, before any reduction.
struct TensorFingerprints {
  std::size_t layer = 0;  ///< index in the Sequential (every layer, with parameters or not)
  Fingerprint output;     ///< the layer's forward output (micro-batch rows x output width)
  /// The gradient of the loss with respect to the layer's input (rows x input width); none for
  /// layer 0, whose input gradient nobody needs and backward does not compute.
  std::optional<Fingerprint> input_gradient;
};

namespace detail {

/// XXH3-128 of the bytes of the first `rows` rows of a row-major matrix (copied to the host first
/// when it lives elsewhere).
template <class Matrix>
Fingerprint rows_fingerprint(const Matrix& m, long rows) {
  const auto top = Kokkos::subview(m, Kokkos::make_pair(0L, rows), Kokkos::ALL);
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), top);
  const XXH128_hash_t h =
      XXH3_128bits(host.data(), static_cast<std::size_t>(rows) * host.extent(1) * sizeof(*host.data()));
  return {h.high64, h.low64};
}

}  // namespace detail

/**
 * Every layer's forward output and input gradient of the micro-batch of `rows` rows that a
 * Sequential's forward and backward just ran through `ws` (a workspace whose input gradients
 * backward kept: BasicSequential::keep_input_gradients). Local; copies device buffers to the host.
 */
template <class Workspace>
[[nodiscard]] std::vector<TensorFingerprints> tensor_fingerprints(const Workspace& ws, long rows) {
  std::vector<TensorFingerprints> out;
  for (std::size_t l = 0; l + 1 < ws.act.size(); ++l) {
    TensorFingerprints t;
    t.layer = l;
    t.output = detail::rows_fingerprint(ws.act[l + 1], rows);
    if (l > 0 && l < ws.input_gradients.size()) t.input_gradient = detail::rows_fingerprint(ws.input_gradients[l], rows);
    out.push_back(t);
  }
  return out;
}

namespace detail {

/// `s` as a JSON string literal (quotes, backslashes and control characters escaped).
inline std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// The 64 bits of `v` as 16 lowercase hex digits.
inline std::string double_bits(double v) {
  std::uint64_t u;
  std::memcpy(&u, &v, sizeof u);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(u));
  return buf;
}

/// `v` with enough digits to read back the same double (null for NaN and infinities).
inline std::string exact_number(double v) {
  if (v != v || v > 1.7976931348623157e308 || v < -1.7976931348623157e308) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// The header line of a trace: format version, level, the layers (index, description, parameter
/// count) and the configuration that determines the bits (Trainer::describe), all in the order given.
inline std::string trace_header(TraceLevel level, const std::vector<std::string>& layers,
                                const std::vector<std::size_t>& layer_parameters,
                                const std::vector<std::pair<std::string, std::string>>& config) {
  std::string s = "{\"trace\":\"reprosgd\",\"version\":" + std::to_string(trace_format_version) + ",\"level\":\"" +
                  trace_level_name(level) + "\",\"layers\":[";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (i > 0) s += ',';
    s += "{\"layer\":" + std::to_string(i) + ",\"description\":" + json_string(layers[i]) +
         ",\"parameters\":" + std::to_string(layer_parameters[i]) + "}";
  }
  s += "],\"config\":{";
  for (std::size_t i = 0; i < config.size(); ++i) {
    if (i > 0) s += ',';
    s += json_string(config[i].first) + ":" + json_string(config[i].second);
  }
  return s + "}}\n";
}

/// A step line: the step, its epoch, its global micro-batch ids [step*M, (step+1)*M), the loss
/// (bits and value), the whole state's fingerprint, at layer level the layers' fingerprints and at
/// tensor level the first micro-batch's activations.
inline std::string trace_step_line(const StepMetrics& m, long M, const Fingerprint& state,
                                   const std::vector<LayerFingerprints>* layers,
                                   const std::vector<TensorFingerprints>* tensors = nullptr) {
  const auto first = m.step * static_cast<std::uint64_t>(M);
  std::string s = "{\"event\":\"step\",\"step\":" + std::to_string(m.step) + ",\"epoch\":" + std::to_string(m.epoch) +
                  ",\"micro_batches\":[" + std::to_string(first) + "," + std::to_string(first + static_cast<std::uint64_t>(M)) +
                  "],\"loss_bits\":\"" + double_bits(m.loss) + "\",\"loss\":" + exact_number(m.loss) + ",\"state\":\"" +
                  state.hex() + "\"";
  if (layers) {
    s += ",\"layers\":[";
    for (std::size_t i = 0; i < layers->size(); ++i) {
      const LayerFingerprints& f = (*layers)[i];
      if (i > 0) s += ',';
      s += "{\"layer\":" + std::to_string(f.layer) + ",\"parameters\":\"" + f.parameters.hex() + "\",\"gradient\":\"" +
           f.gradient.hex() + "\",\"optimizer\":{";
      for (std::size_t j = 0; j < f.optimizer.size(); ++j) {
        if (j > 0) s += ',';
        s += json_string(f.optimizer[j].first) + ":\"" + f.optimizer[j].second.hex() + "\"";
      }
      s += "}}";
    }
    s += "]";
  }
  if (tensors) {
    s += ",\"tensors\":[";
    for (std::size_t i = 0; i < tensors->size(); ++i) {
      const TensorFingerprints& t = (*tensors)[i];
      if (i > 0) s += ',';
      s += "{\"layer\":" + std::to_string(t.layer) + ",\"output\":\"" + t.output.hex() + "\"";
      if (t.input_gradient) s += ",\"input_gradient\":\"" + t.input_gradient->hex() + "\"";
      s += "}";
    }
    s += "]";
  }
  return s + "}\n";
}

/// An evaluation line: after step `m.step - 1`, the test set's size, correct count and loss.
inline std::string trace_evaluation_line(const EpochMetrics& m) {
  return "{\"event\":\"evaluation\",\"step\":" + std::to_string(m.step - 1) + ",\"epoch\":" + std::to_string(m.epoch) +
         ",\"samples\":" + std::to_string(m.test.count) + ",\"correct\":" + std::to_string(m.test.correct) +
         ",\"loss_bits\":\"" + double_bits(m.test.loss) + "\",\"loss\":" + exact_number(m.test.loss) + "}\n";
}

/// A failure line: the step that was in progress, who was lost, and from where the state came back.
/// Informational: the diff tool skips failure lines (a run with a failure equals one without).
inline std::string trace_failure_line(const FailureEvent& e) {
  std::string ranks;
  for (const int r : e.lost_ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
  return "{\"event\":\"failure\",\"step\":" + std::to_string(e.step) + ",\"lost_ranks\":[" + ranks +
         "],\"ranks_before\":" + std::to_string(e.old_size) + ",\"ranks_after\":" + std::to_string(e.new_size) +
         ",\"restored_from\":" + json_string(e.restored_from) + ",\"resumed_from\":" + std::to_string(e.resumed_from) +
         "}\n";
}

/**
 * The trace file on the rank that writes it. open() starts a run's trace: a fresh one (step 0)
 * replaces the file with the header; a resumed one (step R > 0) keeps the header and the lines
 * of steps before R, drops the rest (steps a killed run wrote after its last checkpoint, or a
 * torn last line), and appends from there. append() writes one whole line with one write(2)
 * (opening the file for appending first on a rank that takes over after a lost rank 0); an error
 * is kept for check(), which the Trainer runs inside an agreement.
 */
class TraceFile {
 public:
  TraceFile() = default;
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;
  TraceFile(TraceFile&& o) noexcept : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)), error_(std::move(o.error_)) {}
  TraceFile& operator=(TraceFile&& o) noexcept {
    if (this != &o) {
      close();
      path_ = std::move(o.path_);
      fd_ = std::exchange(o.fd_, -1);
      error_ = std::move(o.error_);
    }
    return *this;
  }
  ~TraceFile() { close(); }

  /// Start the trace at `path` for a run at step `step` with this `header` line.
  /// @throws io_error (cannot read or write) / config_error (the file is another run's trace)
  void open(const std::string& path, const std::string& header, std::uint64_t step) {
    close();
    path_ = path;
    error_.clear();
    std::string keep = header;
    if (step > 0) {
      std::string old;
      if (read_all(path, old) && !old.empty()) {
        const auto end_of_header = old.find('\n');
        if (end_of_header == std::string::npos || std::string_view(old).substr(0, end_of_header + 1) != header)
          throw config_error("reprosgd::Trainer::fit: the trace " + path +
                             " was written by another configuration or trace level (its header differs); resuming "
                             "would mix two runs in one trace: remove it or choose another path");
        std::size_t at = end_of_header + 1;
        while (at < old.size()) {
          const auto nl = old.find('\n', at);
          if (nl == std::string::npos) break;  // a torn last line
          const long long s = json_line_step(std::string_view(old).substr(at, nl - at));
          if (s < 0 || static_cast<std::uint64_t>(s) >= step) break;
          at = nl + 1;
        }
        keep = old.substr(0, at);
      }
    }
    // Replace the file's contents with what is kept (a fresh run: the header alone).
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw io_error("reprosgd::Trainer::fit: cannot open the trace " + path + ": " + std::strerror(errno));
    if (!write_all(keep)) {
      const std::string why = std::strerror(errno);
      close();
      throw io_error("reprosgd::Trainer::fit: cannot write the trace " + path + ": " + why);
    }
    close();
    reopen();
    if (fd_ < 0) throw io_error("reprosgd::Trainer::fit: cannot open the trace " + path + ": " + std::strerror(errno));
  }

  /// Append one line (ending in '\n'); on a rank that takes over, open the file for appending first.
  void append(const std::string& line) {
    if (!error_.empty()) return;
    if (fd_ < 0) reopen();
    if (fd_ < 0 || !write_all(line))
      error_ = "reprosgd::Trainer::fit: cannot write the trace " + path_ + ": " + std::strerror(errno);
  }
  /// Record an error for check() (nothing more is written).
  void fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }
  /// Set the path a rank that takes over appends to (every rank knows it, only the writer opens it).
  void set_path(const std::string& path) { path_ = path; }

  /// Why a line could not be written (or what fail() was given); "" when every line was.
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  void reopen() { fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644); }
  void close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool write_all(std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = ::write(fd_, s.data(), s.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      s.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }
  static bool read_all(const std::string& path, std::string& out) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return false;
      throw io_error("reprosgd::Trainer::fit: cannot read the trace " + path + ": " + std::strerror(errno));
    }
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        throw io_error("reprosgd::Trainer::fit: cannot read the trace " + path + ": " + why);
      }
      if (n == 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return true;
  }

  std::string path_;
  int fd_ = -1;
  std::string error_;
};

/**
 * The Trainer's side of the trace: what to record at each point of fit(), on which rank, in the
 * canonical layout. Every member does nothing when no trace is configured. Members that gather
 * shards are @collective over the model group (model parallelism); none is otherwise.
 */
template <Parallelism Par>
class Tracer {
 public:
  [[nodiscard]] bool enabled() const noexcept { return !path_.empty(); }

  /// Start a trace for fit() at `step` (the file is rewritten on the writing rank; its errors are
  /// agreed, so every rank throws together). @collective
  template <class Model>
  void start(Par& par, const TrainerOptions& o, const Model& model,
             const std::vector<std::pair<std::string, std::string>>& config, std::uint64_t step) {
    writer_.settle();  // a line of an earlier fit() still being written
    hashed_.reset();
    path_ = o.trace;
    level_ = o.trace_level;
    if (!enabled()) return;
    // Lines are written behind the training thread only with a CPU to spare: when every CPU this
    // process may use has a training thread, the helper thread would take its time from one of
    // them (even only to format and write a line), and the barriers of the others wait for it.
    writer_.set_inline(!behind_training || concurrency(par.space()) >= available_cpus());
    writer_.clear_error();
    file_.set_path(path_);
    agreed(par, "reprosgd::Trainer::fit", [&] {
      if (!writes(par, model)) return;
      std::vector<std::size_t> counts;
      for (std::size_t l = 0; l < model.layer_count(); ++l)
        counts.push_back(model.canonical_parameter_offset(l + 1) - model.canonical_parameter_offset(l));
      file_.open(path_, trace_header(level_, model.describe(), counts, config), step);
    });
  }

  /**
   * Run a step's update with this trace's hashing inside it: `launch(ranges, after)` must run the
   * optimizer's step_ranges() with these arguments, which hashes each chunk of the parameters,
   * the reduced `gradient` (layer level) and the optimizer state right after the update wrote it,
   * from the updating core's cache (hashed after the update, the 5.4 MB state of bench/'s MLP
   * comes back from memory: 0.12-0.22 ms on 2 Zen 5 threads, against 0.05 ms from cache).
   * step() then writes the line of step `step` from these digests. Done on the rank that writes
   * the line, when its training team hashes (start() decided that no CPU is free for the helper
   * thread) and the state is in host memory, not sharded; otherwise it returns false, having run
   * nothing, and the caller runs the plain update. Local.
   */
  template <class Model, class State, class Grad, class Launch>
  bool update_hashed(Par& par, const Model& model, const State& optimizer_state, const Grad& gradient,
                     std::uint64_t step, Launch&& launch) {
    if constexpr (ShardedParallelism<Par> ||
                  !std::is_same_v<typename Par::execution_space::memory_space, Kokkos::HostSpace>) {
      return false;
    } else {
      if (!enabled() || !writer_.runs_inline() || !writes(par, model)) return false;
      TraceFingerprintPlan plan(model);
      plan.add_parameters(model.parameters());
      if (level_ >= TraceLevel::layer) plan.add_gradient(gradient);
      plan.add_optimizer_state(optimizer_state);
      if (!plan.hashable_within(model)) return false;
      plan.hash_within(optimizer_state, std::forward<Launch>(launch));
      plan.drop_buffers();
      hashed_.emplace(step, std::move(plan));
      return true;
    }
  }

  /// Whether steps must record their first micro-batch's activations (tensor level).
  [[nodiscard]] bool records_tensors() const noexcept { return enabled() && level_ >= TraceLevel::tensor; }

  /// The line of a committed step: `m` its metrics, M its micro-batch count, `gradient` this
  /// rank's reduced gradient (the shard's under model parallelism), `tensors` the first
  /// micro-batch's activations at tensor level (recorded by the rank that ran it: data rank 0,
  /// which writes). `gathered()` runs on every rank once the shards are gathered, before the line
  /// is written (the Trainer closes the gather with an agreement there under ULFM). @collective
  /// over the model group
  template <class Model, class State, class Grad, class Gathered>
  void step(Par& par, Sharding<Par>& sharding, const Model& model, const State& optimizer_state, const Grad& gradient,
            const StepMetrics& m, long M, const std::vector<TensorFingerprints>& tensors, Gathered&& gathered) {
    if (!enabled()) return;
    const bool writer = writes(par, model);
    if (level_ >= TraceLevel::layer) {
      WithGradient<Grad, State> both{gradient, optimizer_state};
      auto canonical = sharding.collect(par, model, both);
      gathered();
      if (!writer) return;
      if (level_ >= TraceLevel::tensor && tensors.empty()) {  // check() ends the run on every rank
        post_error("reprosgd::Trainer::fit: the rank that writes the trace ran none of the step's first micro-batch, "
                   "whose activations a tensor-level trace records");
        return;
      }
      std::optional<std::vector<TensorFingerprints>> kept;
      if (level_ >= TraceLevel::tensor) kept = tensors;
      TraceFingerprintPlan plan = plan_of(m.step, model);
      if (!plan.hashed()) {
        plan.add_parameters(canonical.params);
        plan.add_gradient(canonical.state.gradient);
        plan.add_optimizer_state(canonical.state.optimizer);
      }
      post_fingerprints(par, std::move(plan), [m, M, kept = std::move(kept)](const TraceFingerprintPlan& p) {
        const auto layers = p.layers();
        return trace_step_line(m, M, p.state(), &layers, kept ? &*kept : nullptr);
      });
    } else {
      TraceFingerprintPlan plan = plan_of(m.step, model);
      if (plan.hashed()) {
        gathered();
      } else if (Sharding<Par>::is_shard(model)) {
        auto canonical = sharding.collect(par, model, optimizer_state);
        gathered();
        if (!writer) return;
        plan.add_parameters(canonical.params);
        plan.add_optimizer_state(canonical.state);
      } else {
        gathered();
        if (!writer) return;
        plan.add_parameters(model.parameters());
        plan.add_optimizer_state(optimizer_state);
      }
      post_fingerprints(par, std::move(plan), [m, M](const TraceFingerprintPlan& p) {
        return trace_step_line(m, M, p.state(), nullptr);
      });
    }
  }

  /// The line of an evaluation at the end of an epoch (written by the rank that wrote the last step line).
  void evaluation(Par& par, const EpochMetrics& m) {
    if (enabled() && m.evaluated && writes_now(par)) post_line([m] { return trace_evaluation_line(m); });
  }
  /// The line of a failure recovered from (after the first step that followed it).
  void failure(Par& par, const FailureEvent& e) {
    if (enabled() && writes_now(par)) post_line([e] { return trace_failure_line(e); });
  }
  /// A write error on the writing rank throws io_error on every rank: the errors of the lines
  /// written so far (a line still being written behind the training thread is checked at the next
  /// check() or at finish()). @collective (when tracing)
  void check(Par& par) {
    if (!enabled()) return;
    const std::string why = writer_.error();
    agreed(par, "reprosgd::Trainer::fit", [&] {
      if (!why.empty()) throw io_error(why);
    });
  }
  /// Wait for the line being written behind the training thread, if any: before anything
  /// overwrites the buffers it reads (the next step's reduction and update, a recovery, a load),
  /// and before fit() returns. Local.
  void settle() { writer_.settle(); }
  /// The end of fit(): every line written, and a write error thrown on every rank. @collective (when tracing)
  void finish(Par& par) {
    settle();
    if constexpr (behind_training) check(par);  // on the training thread, stop_vote checked every line
  }

 private:
  // Whether lines are computed and written behind the training thread: for host memory (the
  // hashing reads the live buffers in place) and policies without rank failures (under ULFM a
  // step's line is on disk before the step's closing agreement, so a survivor that takes over
  // knows what the lost writer wrote); elsewhere on the training thread, in the same order.
  static constexpr bool behind_training =
      std::is_same_v<typename Par::execution_space::memory_space, Kokkos::HostSpace> &&
      !RecoverableParallelism<Par> && !ShardedParallelism<Par>;

  // Post the line of a step whose fingerprints `plan` holds. The chunks are hashed on the training
  // thread's own team when the line is written inline (start() says when), otherwise on the helper
  // thread behind the training. The same bits either way (trace_fingerprints.hpp).
  template <class MakeLine>
  void post_fingerprints(Par& par, TraceFingerprintPlan plan, MakeLine make_line) {
    if (writer_.runs_inline() && !plan.hashed()) {
      if constexpr (is_host_space_v<typename Par::execution_space>)
        plan.hash(par.space());
      else
        plan.hash(Kokkos::DefaultHostExecutionSpace{});
      plan.drop_buffers();
    }
    post_line([plan = std::move(plan), make_line = std::move(make_line)]() mutable {
      if (!plan.hashed()) plan.hash();
      return make_line(plan);
    });
  }

  // Post the job that computes a line and appends it to the file (in posting order).
  template <class MakeLine>
  void post_line(MakeLine make_line) {
    writer_.post([this, make_line = std::move(make_line)]() mutable -> std::string {
      file_.append(make_line());
      return file_.error();
    });
  }
  void post_error(std::string why) {
    writer_.post([this, why = std::move(why)] {
      file_.fail(why);  // nothing more is written
      return why;
    });
  }
  // The reduced gradient beside the optimizer state, so that one Sharding::collect gathers both.
  template <class Grad, class State>
  struct WithGradient {
    Grad gradient;
    State optimizer;
    template <class F>
    void visit(F&& f) const {
      f("gradient", gradient);
      optimizer.visit(f);
    }
    template <class F>
    void visit(F&& f) {
      f("gradient", gradient);
      optimizer.visit(f);
    }
  };

  // The plan of step `step`'s line: the one update_hashed() hashed for it, or a new one to fill.
  template <class Model>
  TraceFingerprintPlan plan_of(std::uint64_t step, const Model& model) {
    std::optional<std::pair<std::uint64_t, TraceFingerprintPlan>> h = std::exchange(hashed_, std::nullopt);
    if (h && h->first == step) return std::move(h->second);
    return TraceFingerprintPlan(model);
  }

  // The rank that writes: the one that writes checkpoints, which holds the canonical state.
  template <class Model>
  static bool writes(Par& par, const Model& model) {
    return Sharding<Par>::writes_checkpoints(par) && Sharding<Par>::holds_canonical(model);
  }
  static bool writes_now(Par& par) { return Sharding<Par>::writes_checkpoints(par); }

  std::string path_;
  TraceLevel level_ = TraceLevel::step;
  std::optional<std::pair<std::uint64_t, TraceFingerprintPlan>> hashed_;  // update_hashed()'s step and plan
  TraceFile file_;             // written only by writer_'s jobs once the trace has started
  BackgroundWriter writer_{};  // declared last: destroyed (its last job run) before file_ closes
};

}  // namespace detail
REPROSGD_END_NAMESPACE
