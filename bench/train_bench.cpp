// SPDX-License-Identifier: BSD-3-Clause
/// @file End-to-end training throughput (samples/s) of a 784-512-512-10 ReLU MLP, batch 128, SGD
/// with momentum, and the peak memory of the process; JSON lines.
///
///   build/bench/train_bench [--micro-batch 128] [--steps 20] [--repeats 7] [--reduction exact|native]
///                           [--feature-chunk 64] [--trace off|step|layer|interleaved]
///                           [--checkpoint off|sync|async|interleaved] [--checkpoint-every 10]
///                           [--checkpoint-dir DIR] [--checkpoint-reuse on|off] [--defer-weight-gradients on|off]
///                           [--kokkos-threads=N] (under mpiexec -n P with MPI)
///
/// --feature-chunk sets the Dense layers' feature chunk: the input gradient is an Exact sum over
/// chunks, so 64 (the default) costs 8 chunk GEMMs and grid passes per 512-wide layer, 512 one
/// plain GEMM (a different model numerically: the chunk width is part of the model).
/// --trace step|layer writes the determinism trace (TrainerOptions::trace) to a temporary file,
/// removed at the end: the step times then include its fingerprints (docs/diagnosis.md).
/// --trace interleaved runs all three (off, step, layer) in one process: three trainers take turns,
/// a segment each, the order rotating every round, and a line per level is printed. The traced
/// lines add "x_untraced", the median over rounds of the time per step traced / untraced in the
/// same round. Between processes a 2-core VM's rates at 2 threads differ by up to half; the
/// segments of one round share the process and the same few seconds, so their ratio resolves a
/// few percent.
/// --checkpoint sync|async makes fit() checkpoint every --checkpoint-every steps into a fresh
/// directory under --checkpoint-dir (default: the temporary directory; it must be on the file
/// system whose fsync you want to pay), synchronously or behind training
/// (TrainerOptions::async_checkpoints); --checkpoint interleaved runs off, sync and async the way
/// --trace interleaved runs the trace levels, and the checkpointed lines add "x_uncheckpointed".
/// --checkpoint-reuse off writes every checkpoint into a new file and deletes the pruned one after
/// it (TrainerOptions::checkpoint_reuse; on, the default, writes over the pruned one).
/// --defer-weight-gradients off computes each micro-batch's weight gradients in its backward and
/// sums the gradient rows afterwards (TrainerOptions::defer_weight_gradients; on, the default, on
/// one rank: after the micro-batches, panel by panel; the same bits).
/// Every timed segment of 20 steps holds the same number of checkpoints (2 at every 10); the one
/// fit() writes when a segment stops is after the segment's clock.
#include <reprosgd/reprosgd.hpp>
#include <reprosgd/reduction/native.hpp>
#if REPROSGD_HAS_MPI
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/mpi_environment.hpp>
#endif


#include "bench_common.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>
#include <unistd.h>

namespace {

using reprosgd_bench::StepClock;

struct Args {
  long micro_batch = 128;
  long steps = 20;
  int repeats = 7;
  std::string reduction = "exact";
  int feature_chunk = reprosgd::default_feature_chunk;
  std::string trace = "off";
  std::string checkpoint = "off";
  long checkpoint_every = 10;
  bool checkpoint_reuse = true;
  bool defer_weight_gradients = true;
  std::string checkpoint_dir = std::filesystem::temp_directory_path().string();
  bool smoke = false;
};

/// What one trainer of the bench does besides training: its trace level and its checkpoints.
struct Variant {
  std::string trace = "off";       ///< off, step or layer
  std::string checkpoint = "off";  ///< off, sync or async
};

using Mlp = reprosgd::Sequential<reprosgd::Dense, reprosgd::ReLU, reprosgd::Dense, reprosgd::ReLU, reprosgd::Dense>;

/// What every run of the bench shares: the sizes, the data, the model, the optimizer and the
/// trainer's options.
struct Setup {
  long batch, mb, steps, warmup, checkpoint_every;
  bool checkpoint_reuse, defer_weight_gradients;
  int repeats, hidden, feature_chunk;
  std::string checkpoint_dir;
  reprosgd::Dataset<Kokkos::HostSpace> data;
  reprosgd::Sgd sgd{{.lr = 0.01f, .momentum = 0.9f}};
  explicit Setup(const Args& a)
      : batch(a.smoke ? 16 : 128), mb(a.smoke ? 8 : a.micro_batch), steps(a.smoke ? 2 : a.steps),
        warmup(a.smoke ? 1 : 3), repeats(a.smoke ? 1 : a.repeats), hidden(a.smoke ? 32 : 512),
        checkpoint_every(a.checkpoint_every), checkpoint_reuse(a.checkpoint_reuse),
        defer_weight_gradients(a.defer_weight_gradients), feature_chunk(a.feature_chunk), checkpoint_dir(a.checkpoint_dir),
        data(reprosgd::make_synthetic_classification(1, static_cast<std::size_t>(batch * 50), 784, 10,
                                                     {.separation = 0.2f})) {}
  /// A trace goes to a temporary file of this process, checkpoints to a directory of its own.
  reprosgd::TrainerOptions options(const Variant& v, long total) const {
    using namespace reprosgd;
    TrainerOptions o;
    o.global_batch = batch;
    o.micro_batch = mb;
    o.steps = total;
    o.seed = 1;
    o.evaluate_each_epoch = false;
    o.defer_weight_gradients = defer_weight_gradients;
    const std::string tag = "reprosgd_train_bench_" + std::to_string(::getpid()) + "_";
    if (v.trace != "off") {
      o.trace = (std::filesystem::temp_directory_path() / (tag + v.trace + ".trace")).string();
      o.trace_level = v.trace == "layer" ? TraceLevel::layer : TraceLevel::step;
    }
    if (v.checkpoint != "off") {
      o.checkpoint_dir = (std::filesystem::path(checkpoint_dir) / (tag + v.checkpoint + "_checkpoints")).string();
      o.checkpoint_every = checkpoint_every;
      o.keep_last = 2;
      o.async_checkpoints = v.checkpoint == "async";
      o.checkpoint_reuse = checkpoint_reuse;
    }
    return o;
  }
  /// Remove what a trainer with these options wrote (on the rank that wrote it).
  static void clean_up(const reprosgd::TrainerOptions& o, int rank) {
    if (rank != 0) return;
    if (!o.trace.empty()) std::filesystem::remove(o.trace);
    if (!o.checkpoint_dir.empty()) std::filesystem::remove_all(o.checkpoint_dir);
  }
  Mlp model() const {
    using namespace reprosgd;
    const int h = hidden, fc = feature_chunk;
    return Mlp{Dense{784, h, Init::he_normal, fc}, ReLU{}, Dense{h, h, Init::he_normal, fc}, ReLU{},
               Dense{h, 10, Init::he_normal, fc}};
  }
};

/// One JSON line. `ratio` (the time per step of this variant / the plain one's, as `ratio_key`)
/// is left out when negative.
template <class Par>
void print_line(const Par& par, const Args& a, const Setup& s, const Variant& v, double median, double best,
                const char* ratio_key = "", double ratio = -1.0) {
  if (par.rank() != 0) return;
  const auto ctx = reprosgd_bench::run_context<typename Par::execution_space>(par.size());
  // With sleeping OpenMP workers every kernel pays for waking them: 2 threads ran slower than one
  // (docs/getting_started.md, "Threads"), so a line says which policy it was measured under.
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  if (!wait_policy || !*wait_policy) wait_policy = "unset";
  char extra[192] = "";
  if (!s.defer_weight_gradients) std::snprintf(extra, sizeof extra, "\"defer_weight_gradients\":false,");
  if (v.checkpoint != "off")
    std::snprintf(extra + std::strlen(extra), sizeof extra - std::strlen(extra),
                  "\"checkpoint_every\":%ld,\"checkpoint_reuse\":%s,", s.checkpoint_every,
                  s.checkpoint_reuse ? "true" : "false");
  if (ratio >= 0.0) {
    const std::size_t n = std::strlen(extra);
    std::snprintf(extra + n, sizeof extra - n, "\"%s\":%.4f,", ratio_key, ratio);
  }
  std::printf(
      "{\"bench\":\"train\",\"model\":\"%s\",\"batch\":%ld,\"micro_batch\":%ld,\"optimizer\":\"sgd-momentum\","
      "\"backend\":\"%s\",\"threads\":%d,\"omp_wait_policy\":\"%s\",\"ranks\":%d,\"reduction\":\"%s\",\"feature_chunk\":%d,\"trace\":\"%s\","
      "\"checkpoint\":\"%s\",%s\"samples_per_s\":%.1f,\"samples_per_s_best\":%.1f,\"repeats\":%d,"
      "\"steps_per_repeat\":%ld,\"peak_rss_mib\":%.1f,\"git\":\"%s\"}\n",
      a.smoke ? "784-32-32-10" : "784-512-512-10", s.batch, s.mb, ctx.backend, ctx.threads, wait_policy, ctx.ranks,
      Par::reduction_type::name(), s.feature_chunk, v.trace.c_str(), v.checkpoint.c_str(), extra, median, best,
      s.repeats, s.steps, reprosgd_bench::peak_rss_mib(), ctx.git);
}

/// One trainer, fit in one go: warmup steps, then `repeats` timed segments.
template <class Par>
int run(const Args& a, const Setup& s) {
  using namespace reprosgd;
  const Variant v{a.trace, a.checkpoint};
  const auto o = s.options(v, s.warmup + s.steps * s.repeats);
  Trainer<Par> trainer(o);
  auto model = s.model();
  auto state = trainer.start(model, s.sgd);
  StepClock clock;
  trainer.fit(model, s.sgd, state, s.data, clock);
  const auto rates = reprosgd_bench::segment_rates(clock, s.warmup, s.steps, s.repeats, s.batch);
  Setup::clean_up(o, trainer.parallelism().rank());
  print_line(trainer.parallelism(), a, s, v, rates.median, rates.best);
  return 0;
}

/// A callback that stops fit() once step `last` (0-based) has run.
struct StopAfter {
  std::uint64_t last;
  bool on_step_end(const reprosgd::StepMetrics& m) const { return m.step >= last; }
};

/// A trainer of its own for one variant, resumed a segment at a time.
template <class Par>
struct Contender {
  Variant variant;
  reprosgd::TrainerOptions options;
  reprosgd::Trainer<Par> trainer;
  Mlp model;
  reprosgd::TrainState<reprosgd::Sgd, typename reprosgd::Trainer<Par>::memory_space> state;
  std::vector<double> rates;  // samples/s of each round's segment
  Contender(const Setup& s, Variant v, long total)
      : variant(std::move(v)), options(s.options(variant, total)), trainer(options), model(s.model()),
        state(trainer.start(model, s.sgd)) {}
  // Run `steps` timed steps after `lead` untimed ones: the first step of a fit() call ends after
  // its start-up checks (and, traced, after the trace file is reopened), so it is never timed.
  void segment(const Setup& s, long lead) {
    StepClock clock;
    StopAfter stop{state.step + static_cast<std::uint64_t>(lead + s.steps) - 1};
    trainer.fit(model, s.sgd, state, s.data, clock, stop);
    const double t = clock.t.back() - clock.t[clock.t.size() - 1 - static_cast<std::size_t>(s.steps)];
    rates.push_back(static_cast<double>(s.steps * s.batch) / t);
  }
};

/// The variants in one process, a segment each per round, in their order shifted by one every
/// round (so no variant always follows the same one). The first is the plain one: the others'
/// lines add `ratio_key`, the median over rounds of their time per step / its time per step.
template <class Par>
int run_interleaved(const Args& a, const Setup& s, const std::vector<Variant>& variants, const char* ratio_key) {
  const long total = s.warmup + 1 + (s.steps + 1) * s.repeats;
  const std::size_t n = variants.size();
  std::vector<std::unique_ptr<Contender<Par>>> c;
  for (const Variant& v : variants) c.push_back(std::make_unique<Contender<Par>>(s, v, total));
  for (int r = 0; r < s.repeats; ++r)
    for (std::size_t k = 0; k < n; ++k) {
      auto& x = *c[(static_cast<std::size_t>(r) + k) % n];
      x.segment(s, r == 0 ? s.warmup + 1 : 1);
    }
  for (std::size_t i = 0; i < n; ++i) {
    auto& x = *c[i];
    std::vector<double> ratios;
    for (std::size_t r = 0; r < x.rates.size(); ++r) ratios.push_back(c[0]->rates[r] / x.rates[r]);
    print_line(x.trainer.parallelism(), a, s, x.variant, reprosgd_bench::upper_median_of(x.rates),
               *std::max_element(x.rates.begin(), x.rates.end()), ratio_key,
               i == 0 ? -1.0 : reprosgd_bench::median_of(ratios));
    Setup::clean_up(x.options, x.trainer.parallelism().rank());
  }
  return 0;
}

template <class Par>
int run_mode(const Args& a) {
  const Setup s(a);
  if (a.trace == "interleaved") return run_interleaved<Par>(a, s, {{"off"}, {"step"}, {"layer"}}, "x_untraced");
  if (a.checkpoint == "interleaved")
    return run_interleaved<Par>(a, s, {{"off", "off"}, {"off", "sync"}, {"off", "async"}}, "x_uncheckpointed");
  return run<Par>(a, s);
}

}  // namespace

int main(int argc, char** argv) {
#if REPROSGD_HAS_MPI
  reprosgd::MpiEnvironment mpi(argc, argv);
#endif
  Kokkos::ScopeGuard kokkos(argc, argv);
  Args a;
  for (reprosgd_bench::CommandLine cl(argc, argv); cl.next();) {
    const std::string& s = cl.arg();
    if (s == "--smoke") a.smoke = true;
    else if (s == "--micro-batch") a.micro_batch = cl.long_value();
    else if (s == "--steps") a.steps = cl.long_value();
    else if (s == "--repeats") a.repeats = cl.int_value();
    else if (s == "--reduction") a.reduction = cl.value();
    else if (s == "--feature-chunk") a.feature_chunk = cl.int_value();
    else if (s == "--trace") a.trace = cl.value();
    else if (s == "--checkpoint") a.checkpoint = cl.value();
    else if (s == "--checkpoint-every") a.checkpoint_every = cl.long_value();
    else if (s == "--checkpoint-dir") a.checkpoint_dir = cl.value();
    else if (s == "--checkpoint-reuse" || s == "--defer-weight-gradients") {
      const std::string v = cl.value();
      if (v != "on" && v != "off") {
        std::fprintf(stderr, "train_bench: %s takes on or off, not '%s'\n", s.c_str(), v.c_str());
        return 2;
      }
      (s == "--checkpoint-reuse" ? a.checkpoint_reuse : a.defer_weight_gradients) = v == "on";
    }
    else if (!cl.kokkos_option()) {
      std::fprintf(stderr, "train_bench: unknown option %s\n", s.c_str());
      return 2;
    }
  }
  if (a.feature_chunk <= 0) {
    std::fprintf(stderr, "train_bench: --feature-chunk must be a positive integer\n");
    return 2;
  }
  if (a.trace != "off" && a.trace != "step" && a.trace != "layer" && a.trace != "interleaved") {
    std::fprintf(stderr, "train_bench: --trace must be off, step, layer or interleaved\n");
    return 2;
  }
  if (a.checkpoint != "off" && a.checkpoint != "sync" && a.checkpoint != "async" && a.checkpoint != "interleaved") {
    std::fprintf(stderr, "train_bench: --checkpoint must be off, sync, async or interleaved\n");
    return 2;
  }
  if (a.checkpoint_every <= 0) {
    std::fprintf(stderr, "train_bench: --checkpoint-every must be a positive integer\n");
    return 2;
  }
  if (a.trace == "interleaved" && a.checkpoint != "off") {
    std::fprintf(stderr, "train_bench: --trace interleaved compares trace levels without checkpoints\n");
    return 2;
  }
  if (a.checkpoint == "interleaved" && a.trace != "off") {
    std::fprintf(stderr, "train_bench: --checkpoint interleaved compares checkpoint modes without a trace\n");
    return 2;
  }
  using Space = Kokkos::DefaultExecutionSpace;
#if REPROSGD_HAS_MPI
  if (a.reduction == "native") return run_mode<reprosgd::DataParallel<Space, reprosgd::Native>>(a);
  return run_mode<reprosgd::DataParallel<Space, reprosgd::Exact>>(a);
#else
  if (a.reduction == "native") return run_mode<reprosgd::Serial<Space, reprosgd::Native>>(a);
  return run_mode<reprosgd::Serial<Space, reprosgd::Exact>>(a);
#endif
}
