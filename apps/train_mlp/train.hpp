// SPDX-License-Identifier: BSD-3-Clause
/// @file train_mlp's training path as templates: the command line's Config, the model and optimizer
/// chosen from it, and train_on() — instantiated once per parallelism and fault policy, each in its
/// own translation unit (policies_*.cpp, the `extern template` list at the end), so that the
/// build compiles them in parallel instead of one 6-minute file.
#pragma once

#include <reprosgd/reprosgd.hpp>
#include <reprosgd/nn/model_spec.hpp>
#include <reprosgd/nn/network.hpp>
#include <reprosgd/optim/any_optimizer.hpp>
#include <reprosgd/fault/failure_injection.hpp>
#include <reprosgd/reduction/native.hpp>
#include "../exit_code.hpp"
#include "save_model.hpp"  // --save-model FILE
#if REPROSGD_HAS_MPI
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/hybrid.hpp>
#include <reprosgd/parallel/mpi_environment.hpp>
#endif
#if REPROSGD_HAS_ULFM
#include <reprosgd/parallel/ulfm_data_parallel.hpp>
#include <reprosgd/parallel/ulfm_hybrid.hpp>
#include <reprosgd/parallel/survive_setup.hpp>
#endif

#include <CLI/CLI.hpp>

#include <unistd.h>  // sysconf: the memory check of --layers

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <cctype>  // std::isspace: report_error
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace train_mlp {

struct Config {
  std::string data = "fashion-mnist";
  std::string layers = "784,256,128,10";
  bool layers_given = false;  // --layers on the command line (it and --model exclude each other)
  std::string model;          // --model SPEC: a network composed at run time (reprosgd::parse_network)
  std::string synthetic_shape;  // --synthetic-shape C,H,W: synthetic samples as images of that shape
  std::string activation = "relu";
  float dropout = 0.0f;
  std::string optimizer = "adam";
  float lr = 1e-3f;
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 0.0f;
  float dampening = 0.0f;            // --dampening (SGD with momentum)
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // --beta1 --beta2 --eps (Adam, AdamW)
  bool dampening_given = false, adam_options_given = false;  // refused with another optimizer
  std::string loss = "cross-entropy";  // --loss cross-entropy|mse
  bool no_shuffle = false;           // --no-shuffle: every epoch in the data set's order
  std::string schedule = "constant";
  long warmup = 0;
  long step_size = 1000;
  double gamma = 0.5;
  long batch = 128;
  long micro_batch = 32;
  long epochs = 1;
  long steps = 0;
  std::uint64_t seed = 42;
  std::string backend = "default";
  int threads = 0;
  std::string metrics;
  std::string trace;                 // --trace FILE: the determinism trace (docs/diagnosis.md)
  std::string trace_level = "step";  // --trace-level step|layer|tensor
  long dump_step = -1;               // --dump-step N DIR: dump step N's tensors to DIR, then stop
  std::string dump_dir;
  std::string test_data;
  std::string targets;       // --targets FILE: --data is then an IDX file of features, FILE its float targets
  std::string test_targets;  // --test-targets FILE: with --targets, the test set's (its features --test-data)
  long train_samples = 0;
  long test_samples = 0;
  long synthetic_train = 12000;
  long synthetic_test = 2000;
  bool quiet = false;
  std::string reduction = "exact";
  std::string checkpoint_dir;
  long checkpoint_every = 0;
  bool checkpoint_async = false;  // --checkpoint-async: fit() writes its checkpoints behind training
  std::size_t keep = 3;
  std::string format = "portable";
  std::string resume;
  long stop_after = 0;
  std::string fault_tolerance = "abort";
  std::string inject_failure;
  int min_ranks = 1;
  int spares = 0;  // --spares: the job's last ranks held idle to replace lost ones (regrow)
  double startup_timeout = 30.0;  // --startup-timeout S: the deadline of MPI_Init_thread (0: none)
  std::string parallel = "data";
  std::string grid;
  int feature_chunk = reprosgd::default_feature_chunk;
  long buddy_every = 50;
  std::string save_model;  // --save-model FILE: the trained model as a model file (docs/surrogates.md)
  std::string save_initial;  // --save-initial FILE: the initial parameters as a model file
  std::string standardize = "none";  // --standardize none|inputs|all
  // What --standardize computed from the training set (set after loading): applied to the data
  // trained and tested on, saved with --save-model / --save-initial, applied and inverted by predict.
  reprosgd::Normalization normalization;
};

// Set when a peer process died during the run: Open MPI 5.0.x's MPI_Finalize can then hang on
// the survivors (open-mpi/ompi#11404), so main() ends the process without it (after all output
// is flushed; every survivor has passed fit()'s last agreement, so no peer still waits for it).
inline bool peer_died = false;
// Set as fit() begins: a process failure before it (the policy's set-up collectives, the set-up
// agreements) is a start-up failure, relaunched like one in MPI_Init (main.cpp).
inline bool fit_started = false;

// A callback from a std::function: the checkpoint format is chosen at run time without making
// fit() a template of it.
struct StepHook {
  std::function<bool(const reprosgd::StepMetrics&)> f;
  bool on_step_end(const reprosgd::StepMetrics& m) { return f(m); }
};

// This process's rank (0 without MPI): only rank 0 prints progress and the fingerprint.
inline int world_rank() {
#if REPROSGD_HAS_MPI
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
#else
  return 0;
#endif
}

// The number of processes of the job (1 without MPI).
inline int world_size() {
#if REPROSGD_HAS_MPI
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
#else
  return 1;
#endif
}

// The communicator a policy is made over: MPI_COMM_WORLD, or the survivors of a failure during the
// set-up (set_up_before_deadline). Without MPI there is none.
#if REPROSGD_HAS_MPI
using JobComm = MPI_Comm;
inline JobComm job_world() { return MPI_COMM_WORLD; }
#else
using JobComm = int;
inline JobComm job_world() { return 0; }
#endif

// The policy object for a run over `comm`: a model-parallel grid from --parallel/--grid, default otherwise.
template <class Par>
Par make_policy(const Config& c, JobComm comm = job_world()) {
#if REPROSGD_HAS_ULFM
  // --spares N: the last N ranks wait idle in a SparePool until a failure needs them.
  using Pool = std::shared_ptr<reprosgd::SparePool>;
  if constexpr (std::is_constructible_v<Par, Pool> || std::is_constructible_v<Par, reprosgd::GridShape, Pool>) {
    if (c.spares > 0) {
      auto pool = std::make_shared<reprosgd::SparePool>(comm, c.spares);
      if constexpr (std::is_constructible_v<Par, reprosgd::GridShape, Pool>) {
        const int p = pool->target();
        const reprosgd::GridShape shape = c.parallel == "model" ? reprosgd::GridShape{1, p}
                                          : c.grid.empty()      ? reprosgd::GridShape::balanced(p)
                                                                : reprosgd::GridShape::parse(c.grid);
        return Par(shape, std::move(pool));
      } else {
        return Par(std::move(pool));
      }
    }
  }
#endif
#if REPROSGD_HAS_MPI
  if constexpr (std::is_constructible_v<Par, reprosgd::GridShape>) {
    int p = 1;
    MPI_Comm_size(comm, &p);
    const reprosgd::GridShape shape = c.parallel == "model" ? reprosgd::GridShape{1, p}
                                      : c.grid.empty()      ? reprosgd::GridShape::balanced(p)
                                                            : reprosgd::GridShape::parse(c.grid);
    return Par(shape, comm);
  } else
#endif
  {
    (void)c;
#if REPROSGD_HAS_MPI
    if constexpr (std::is_constructible_v<Par, MPI_Comm>) return Par(comm);
#endif
    (void)comm;
    return Par{};
  }
}
// Who prints: rank 0 of the whole job (a model-parallel policy's rank() is its data dimension);
// nobody on an idle spare (-1), whose group of one would call it rank 0.
template <class Par>
int printing_rank(const Par& par) {
  if constexpr (requires { par.spare(); })
    if (par.spare()) return -1;
  if constexpr (requires { par.world_rank(); }) return par.world_rank();
  return par.rank();
}
template <class Par>
std::string layout_text(const Par& par) {
  if constexpr (requires { par.grid(); })
    return par.grid().text() + " grid (" + std::to_string(par.grid().data) + " data-parallel replica(s) of " +
           std::to_string(par.grid().model) + " model-parallel rank(s))";
  return std::to_string(par.size()) + " rank(s)";
}

// Exit codes by error kind, so scripts can tell a typo from a diverging run.
// Messages of train_mlp's own checks already start with "train_mlp: "; print that prefix once.
inline const char* without_prefix(const char* what) {
  const char prefix[] = "train_mlp: ";
  return std::strncmp(what, prefix, sizeof prefix - 1) == 0 ? what + sizeof prefix - 1 : what;
}

using reprosgd_apps::exit_code;  // ../exit_code.hpp, shared with predict

// The line train_mlp prints for an error that ends it, and the exit code that goes with it.
inline int report_error(const std::exception& e) {
  if (const auto* restart = dynamic_cast<const reprosgd::restart_required*>(&e)) {
    std::fprintf(stderr, "train_mlp: %s\n", e.what());
    return restart->exit_code();
  }
  // One line: Kokkos appends a notice to its errors (an allocation's), after a blank line.
  std::string what = without_prefix(e.what());
  if (const auto notice = what.find("\n\nTraceback functionality not available"); notice != std::string::npos)
    what.erase(notice);
  while (!what.empty() && std::isspace(static_cast<unsigned char>(what.back()))) what.pop_back();
  std::fprintf(stderr, "train_mlp: error: %s\n", what.c_str());
  if (const auto* known = dynamic_cast<const reprosgd::error*>(&e)) return exit_code(*known);
  return 1;
}

// Whether `e` says that a process of the job is gone (detail::is_process_loss; the set-up calls on
// the user's communicator run under detail::ErrorsReturnScope, so their failures are comm_errors).
inline bool is_lost_process(const std::exception& e) {
#if REPROSGD_HAS_MPI
  return reprosgd::detail::is_process_loss(e);
#else
  return dynamic_cast<const reprosgd::process_failure*>(&e) != nullptr;
#endif
}

// An error already reported by report_error on this rank: main() exits with rc and prints nothing.
struct reported_error {
  int rc;
};

inline std::vector<int> parse_layers(const std::string& text) {
  std::vector<int> widths;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    int w = 0;
    try {
      w = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || w <= 0)
      throw reprosgd::config_error("train_mlp: --layers: '" + item + "' is not a positive integer");
    widths.push_back(w);
  }
  if (widths.size() < 2 || widths.size() > 5)
    throw reprosgd::config_error("train_mlp: --layers needs 2 to 5 widths (input, hidden..., output), got " +
                                 std::to_string(widths.size()));
  return widths;
}

// --layers W0,...,Wn: the MLP of hidden blocks (Dense, activation, dropout) and an output Dense, as a
// Network. A Sequential of a Network is the compile-time Sequential of the same layers: the same
// random-number keys, descriptions (so the same checkpoints and model files), sharding and bits
// (docs/layers.md, tests/unit/nn/network_test.cpp). One model type for every depth and for --model
// means each policy compiles one training path per optimizer instead of five: with a compile-time
// Sequential per depth the policy files took 1.6 times as long to compile (890 CPU-seconds against
// 555), with no gain at run time (the layers' kernels are the same; the run-time dispatch is once
// per layer and micro-batch).
inline reprosgd::Network mlp_network(const std::vector<int>& w, reprosgd::Activation act, float p, int chunk) {
  using namespace reprosgd;
  // Xavier for tanh and sigmoid; a single Dense (no activation) is He-initialised, as it always was.
  const Init init = act == Activation::relu || w.size() == 2 ? Init::he_normal : Init::xavier_uniform;
  std::vector<AnyLayer> layers;
  for (std::size_t i = 0; i + 2 < w.size(); ++i) {
    layers.push_back({Dense{w[i], w[i + 1], init, chunk}});
    layers.push_back({ActivationFn{act}});
    layers.push_back({Dropout{p}});
  }
  layers.push_back({Dense{w[w.size() - 2], w.back(), init, chunk}});
  Network net(std::move(layers));
  net.with_input_width(w.front());
  return net;
}

template <class Par, class Fault, class Model, class Opt>
int train_on(const Config& c, Par par, std::unique_ptr<reprosgd::JsonLinesWriter> metrics_file, Model model,
             const Opt& opt, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  TrainerOptions o;
  o.global_batch = c.batch;
  o.micro_batch = c.micro_batch;
  o.epochs = c.epochs;
  o.steps = c.steps;
  o.seed = c.seed;
  o.shuffle = !c.no_shuffle;
  o.loss = c.loss == "mse" ? LossKind::mse : LossKind::softmax_cross_entropy;
  if (c.schedule == "step") {
    o.schedule.kind = ScheduleKind::step;
    o.schedule.step_size = c.step_size;
    o.schedule.gamma = c.gamma;
  } else if (c.schedule == "cosine") {
    o.schedule.kind = ScheduleKind::cosine;
    o.schedule.warmup_steps = c.warmup;
  }
  // With a fault policy other than Abort, or --checkpoint-async, checkpoints are written by fit()
  // itself (its checkpoint stage survives a lost rank, and can write behind training); otherwise
  // by the step hook below, in any --format.
  const bool fit_checkpoints = !std::is_same_v<Fault, Abort> || c.checkpoint_async;
  if (fit_checkpoints) {
    o.checkpoint_dir = c.checkpoint_dir;
    o.checkpoint_every = c.checkpoint_every;
    o.keep_last = c.keep;
    o.stop_after = c.stop_after;
    o.async_checkpoints = c.checkpoint_async;
  }
  o.min_ranks = c.min_ranks;
  o.buddy_every = c.buddy_every;
  o.trace = c.trace;
  o.trace_level = c.trace_level == "tensor" ? TraceLevel::tensor : c.trace_level == "layer" ? TraceLevel::layer : TraceLevel::step;
  o.dump_step = c.dump_step;
  o.dump_dir = c.dump_dir;
  using Space = typename Par::execution_space;
  Trainer<Par, PhiloxStream, PortableBinaryFormat, Fault> trainer(o, std::move(par));
  const int rank = printing_rank(trainer.parallelism());
  auto state = trainer.start(model, opt);
  // The parameters start() drew from --seed: the same whether or not a checkpoint is loaded next.
  const bool spare = rank < 0;  // an idle spare rank (--spares): it saves, loads and prints nothing
  if (!c.save_initial.empty() && !spare) {  // an MLP: run() refuses --save-initial with --model
    save_model_in_format(trainer, model, state, c.save_initial, c.format, c.normalization);
    if (!c.quiet && rank == 0) std::printf("initial model saved to %s\n", c.save_initial.c_str());
  }
  if (!c.quiet && rank == 0)
    std::printf("model %zu parameters, %s x backend %s with %d threads, %s reduction, %ld steps of batch %ld "
                "(micro-batch %ld)\n",
                model.canonical_parameter_count(), layout_text(trainer.parallelism()).c_str(), Space::name(),
                detail::concurrency(Space()), Par::reduction_type::name(), trainer.total_steps(data.train.size()),
                c.batch, c.micro_batch);
  // Checkpoints: the format is a compile-time policy of the save/load calls, picked here at run time.
  std::function<void()> save_now;
  auto setup = [&]<class F>(F) {
    std::shared_ptr<CheckpointManager<F>> dir;
    if (!c.checkpoint_dir.empty() && !fit_checkpoints) {
      dir = std::make_shared<CheckpointManager<F>>(c.checkpoint_dir, typename CheckpointManager<F>::Options{.keep_last = c.keep});
      save_now = [&, dir] { trainer.save_checkpoint(*dir, model, opt, state, data.train); };
    }
    if (c.resume == "auto" && !dir && !c.checkpoint_dir.empty())  // fit() checkpoints: same directory, portable format
      dir = std::make_shared<CheckpointManager<F>>(c.checkpoint_dir, typename CheckpointManager<F>::Options{.keep_last = c.keep});
    if (c.resume == "auto") {
      if (!dir) throw config_error("train_mlp: --resume auto needs --checkpoint-dir");
      const ResumeResult r = trainer.resume(*dir, model, opt, state, data.train);
      if (rank == 0 && !c.quiet) {
        for (const auto& s : r.skipped) std::printf("skipped checkpoint %s: %s\n", s.path.c_str(), s.reason.c_str());
        if (r.resumed)
          std::printf("resumed from %s at step %llu\n", r.path.c_str(), static_cast<unsigned long long>(r.info.step));
        else
          std::printf("no usable checkpoint in %s: starting from step 0\n", c.checkpoint_dir.c_str());
      }
    } else if (!c.resume.empty()) {
      const SnapshotInfo info = trainer.template load_checkpoint<F>(c.resume, model, opt, state, data.train);
      if (rank == 0 && !c.quiet)
        std::printf("resumed from %s at step %llu\n", c.resume.c_str(), static_cast<unsigned long long>(info.step));
    }
  };
  // A spare receives the state when recruited (resuming alone would only read the files).
  if (spare) {
  } else if (c.format == "binary") setup(BinaryFormat{});
  else if (c.format == "json") setup(JsonFormat{});
  else setup(PortableBinaryFormat{});
  std::uint64_t saved_at = state.step;  // nothing new to save before the first step
  StepHook hook{[&](const StepMetrics& m) {
    const std::uint64_t done = m.step + 1;
    if (save_now && c.checkpoint_every > 0 && done % static_cast<std::uint64_t>(c.checkpoint_every) == 0) {
      save_now();
      saved_at = done;
    }
    if (c.stop_after > 0 && done == static_cast<std::uint64_t>(c.stop_after)) {
      if (save_now && saved_at != done) save_now();
      saved_at = done;
      return true;
    }
    return c.dump_step >= 0 && done == static_cast<std::uint64_t>(c.dump_step) + 1;  // the dumped step was the last
  }};
  ProgressReporter progress(rank, c.quiet ? nullptr : stdout);
  JsonLinesWriter& metrics = *metrics_file;  // opened by set_up(), with the policy
  FitResult result;
  // An error fit() ends with is thrown by every rank from the same point: any error agreed at a
  // stage (a callback's on one rank, a checkpoint's) and, under ShrinkAndContinue, a failure it
  // cannot recover from (shards lost with every copy, fewer than --min-ranks survivors). The
  // first rank to exit non-zero makes the launcher end the job, which could kill a slower rank (one
  // descheduled on a loaded machine) before it said why: each rank prints first, then waits in one
  // last agreement for the others, and only then exits. A released spare threw alone: it just exits.
  // One last agreement, which tolerates failures: another death now changes nothing of the result.
  auto last_agreement = [&] {
    if constexpr (requires { trainer.parallelism().agree(true); }) {
      try {
        (void)trainer.parallelism().agree(true);
      } catch (const process_failure&) {
      }
    }
  };
  auto end_together = [&](const std::exception& e, bool process_lost) {
    if constexpr (!requires { trainer.parallelism().agree(true); }) return;
    if (process_lost && !std::is_same_v<Fault, ShrinkAndContinue>) return;  // nobody to agree with
    if constexpr (requires { trainer.parallelism().spare(); })
      if (trainer.parallelism().spare()) return;  // still idle: the workers' release ended it
    const int rc = report_error(e);
    std::fflush(stderr);
    last_agreement();
    throw reported_error{rc};
  };
  try {
    fit_started = true;
    result = trainer.fit(model, opt, state, data.train, &data.test, progress, metrics, hook);
  } catch (const process_failure& e) {
    peer_died = true;
    end_together(e, true);
    throw;
  } catch (const reprosgd::error& e) {
    end_together(e, false);
    throw;
  }
  if (result.idle_spare) {  // never needed: nothing trained here, nothing to say
    peer_died = peer_died || result.workers_failed;  // the workers end as survivors do (main())
    return 0;
  }
  peer_died = peer_died || !result.failures.empty();  // or a loss in the set-up (set_up_before_deadline)
  progress.finish();
  if (save_now && saved_at != state.step) save_now();
  if (!c.save_model.empty()) {  // an MLP: run() refuses --save-model with --model
    save_model_in_format(trainer, model, state, c.save_model, c.format, c.normalization);
    if (!c.quiet && printing_rank(trainer.parallelism()) == 0) std::printf("model saved to %s\n", c.save_model.c_str());
  }
  const std::string fp = trainer.fingerprint(model, state).hex();
  // The rank may have changed: when rank 0 was lost, the survivor now ranked 0 prints.
  if (printing_rank(trainer.parallelism()) == 0) std::printf("fingerprint %s\n", fp.c_str());
  // After a failure the survivors end without MPI_Finalize (main()). A rank that leaves the
  // fingerprint's last collective first would then look dead to a peer still receiving in it
  // (seen under load on a 2x2 grid): one last agreement, which tolerates failures, comes first.
  if (std::is_same_v<Fault, ShrinkAndContinue> && peer_died) last_agreement();
  return 0;
}

// A policy and the metrics file its rank 0 opened. Rank 0 alone opens the file; its failure must end
// every rank, not leave them waiting in fit()'s first collective (agreed: one line from that rank,
// "another rank found invalid input" from the others, a non-zero exit everywhere). In the same
// agreement the rank that will write --save-model checks that it can (a missing directory used to
// fail only after the whole run, with the trained model lost unless a checkpoint held it). The agreement is
// the last collective before fit() on a data-parallel policy, so it is part of the set-up that
// make_on_survivors repeats over the survivors when a rank is lost (a campaign trial lost rank 0
// just before it and ended with exit 76).
template <class Par>
struct SetUp {
  Par par;
  std::unique_ptr<reprosgd::JsonLinesWriter> metrics;
};
template <class Par>
SetUp<Par> set_up(const Config& c, JobComm comm = job_world()) {
  SetUp<Par> s{make_policy<Par>(c, comm), nullptr};
  reprosgd::detail::agreed(s.par, "train_mlp: --metrics or --save-model", [&] {
    s.metrics = std::make_unique<reprosgd::JsonLinesWriter>(c.metrics, printing_rank(s.par));
    check_model_path_writable(s.par, c.save_model);
  });
  return s;
}

// set_up under the start-up deadline (--startup-timeout): the policy's communicators are made
// by collectives over every rank (MPI_Comm_dup, a grid's splits, a spare pool's), and a rank that
// dies just before or inside them can leave a survivor in a call that never returns: 1 of 72
// random kills in the campaign (kill_campaign.sh, hybrid, 96 ms after launch) hung the job for 60 s
// after one survivor had reported "MPI_Comm_dup failed: MPI_ERR_PROC_FAILED" (where the others
// waited was not captured). So the deadline ends such a rank like a death inside MPI_Init: one
// line, exit 76, relaunch. Not the rest of the set-up (a resume reads files of any size).
// A ULFM policy is made by make_on_survivors: a rank lost before or during those collectives is
// survived in place (the survivors make the policy again over themselves and train on fewer ranks,
// the same bits); the deadline stays for a survivor left inside a collective the others gave up.
template <class Par>
SetUp<Par> set_up_before_deadline(const Config& c) {
#if REPROSGD_HAS_MPI
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  reprosgd::detail::Watchdog deadline(
      ranks > 1 ? c.startup_timeout : 0.0,
      "train_mlp: the ranks did not finish setting up their communicators within " +
          reprosgd::detail::seconds_text(c.startup_timeout) +
          " s (--startup-timeout): a process of the job probably failed while the ranks were setting up; exiting "
          "with " + std::to_string(reprosgd::startup_failure_exit_code) + " so that the job is relaunched",
      reprosgd::startup_failure_exit_code,
      reprosgd::detail::started_by_a_launcher()
          ? "train_mlp: the launcher ended while the ranks set up their communicators; exiting with " +
                std::to_string(reprosgd::startup_failure_exit_code) + " so that the job is relaunched"
          : std::string());
#if REPROSGD_HAS_ULFM
  if constexpr (reprosgd::RecoverableParallelism<Par>) {
    auto made = reprosgd::make_on_survivors(MPI_COMM_WORLD, [&](MPI_Comm comm) { return set_up<Par>(c, comm); });
    if (!made.lost_ranks.empty()) peer_died = true;  // fit() does not know of this loss
    if (!made.lost_ranks.empty() && printing_rank(made.policy.par) == 0) {
      std::printf("failure: lost rank %s while the ranks set up their communicators; %d -> %d ranks before training\n",
                  reprosgd::detail::rank_list(made.lost_ranks).c_str(), ranks,
                  ranks - static_cast<int>(made.lost_ranks.size()));
      std::fflush(stdout);
    }
    return std::move(made.policy);
  }
#endif
#endif
  return set_up<Par>(c);
}

// The Trainer always runs on FailureInjection<Par>, which kills this process at the points
// --inject-failure schedules (identity: the MPI_COMM_WORLD rank). Without a schedule (or in an
// attempt relaunched by scripts/relaunch.sh, REPROSGD_ATTEMPT > 1, which does not die again on
// purpose) no point is ever reached and the run has the bits and the messages of one on Par itself
// (FailureInjection's contract; the fault-tolerance tests compare both). One Trainer type per
// policy instead of two halves the instantiations, and with them train_mlp's compile time, which
// every build and CI variant pays.
template <class Par, class Fault, class Model, class Opt>
int train(const Config& c, Model model, const Opt& opt, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  const char* attempt = std::getenv("REPROSGD_ATTEMPT");
  const bool inject = !c.inject_failure.empty() && (!attempt || std::atoi(attempt) <= 1);
  const FailureSchedule schedule = inject ? FailureSchedule::parse(c.inject_failure) : FailureSchedule();
  // The set-up point: after MPI_Init, before the policy makes its communicators (its collectives
  // are the first the other ranks enter without this one).
  schedule.maybe_fail(world_rank(), 0, FailurePoint::setup);
  SetUp<Par> s = set_up_before_deadline<Par>(c);
  return train_on<FailureInjection<Par>, Fault>(c, FailureInjection<Par>(schedule, world_rank(), std::move(s.par)),
                                                std::move(s.metrics), std::move(model), opt, data);
}

// --optimizer: one of the built-in optimizers, held by an AnyOptimizer (the same descriptions,
// checkpoints and bits as the optimizer itself), so that each policy's training path is compiled
// once rather than once per optimizer.
inline reprosgd::AnyOptimizer optimizer_of(const Config& c) {
  using namespace reprosgd;
  if (c.optimizer == "sgd") return Sgd{{c.lr, c.momentum, c.nesterov, c.weight_decay, c.dampening}};
  if (c.optimizer == "adam")
    return Adam{{.lr = c.lr, .beta1 = c.beta1, .beta2 = c.beta2, .eps = c.eps, .weight_decay = c.weight_decay}};
  return AdamW{{.lr = c.lr, .beta1 = c.beta1, .beta2 = c.beta2, .eps = c.eps, .weight_decay = c.weight_decay}};
}

// --model SPEC: the network for the data's samples (an image shape, or the feature count), its
// output width the data's classes (or regression targets).
inline reprosgd::Network network_of(const Config& c, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  Network net;
  try {
    net = parse_network(c.model, data.train.sample_shape, static_cast<int>(data.train.feature_count()),
                        NetworkSpecOptions{.feature_chunk = c.feature_chunk});
  } catch (const config_error& e) {
    throw config_error("train_mlp: --model: " + std::string(e.what()));
  }
  const int out = net.output_width(net.input_width());
  const long want = data.train.is_regression() ? static_cast<long>(data.train.target_count()) : data.train.num_classes;
  if (out != want)
    throw config_error("train_mlp: --model: the last layer gives " + std::to_string(out) + " outputs but the data has " +
                       std::to_string(want) + (data.train.is_regression() ? " regression targets" : " classes"));
  return net;
}

// The training path of one policy: the model (--layers' MLP or --model's network, one type) and
// the optimizer (AnyOptimizer) chosen at run time.
template <class Par, class Fault = reprosgd::Abort>
int with_policy(const Config& c, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  using Mem = typename Par::execution_space::memory_space;  // the model lives where the policy computes
  if (!c.model.empty()) return train<Par, Fault>(c, make_sequential<Mem>(network_of(c, data)), optimizer_of(c), data);
  const Activation act = c.activation == "tanh" ? Activation::tanh
                         : c.activation == "sigmoid" ? Activation::sigmoid
                                                     : Activation::relu;
  return train<Par, Fault>(c, make_sequential<Mem>(mlp_network(parse_layers(c.layers), act, c.dropout, c.feature_chunk)),
                           optimizer_of(c), data);
}

using Data = reprosgd::TrainTest<Kokkos::HostSpace>;

// The policies train_mlp runs, each instantiated in one translation unit (named after it). The
// data-parallel one is over MPI_COMM_WORLD when built with MPI (one rank is the serial case),
// Serial otherwise; both give the same bits with the Exact reduction.
#if REPROSGD_HAS_MPI
template <class Space, class Red>
using DataPolicy = reprosgd::DataParallel<Space, Red>;
#else
template <class Space, class Red>
using DataPolicy = reprosgd::Serial<Space, Red>;
#endif
// The host backends this train_mlp runs (--backend): every one its Kokkos has, or only the default
// host backend (the first of OpenMP, Threads and Serial the build has) in a variant build for the
// cross-build checks (REPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY).
template <class Space>
inline constexpr bool runs_backend =
    !REPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY || std::is_same_v<Space, Kokkos::DefaultHostExecutionSpace>;
// --reduction native only on the default host backend: it is there to show what Exact prevents, and
// one instantiation of it is enough (none in a variant build for the cross-build checks).
template <class Space>
inline constexpr bool has_native =
    !REPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY && std::is_same_v<Space, Kokkos::DefaultHostExecutionSpace>;
#if REPROSGD_TRAIN_MLP_HOST_BACKENDS
#if defined(KOKKOS_ENABLE_SERIAL)
extern template int with_policy<DataPolicy<Kokkos::Serial, reprosgd::Exact>>(const Config&, const Data&);  // policies_serial.cpp
#if !defined(KOKKOS_ENABLE_OPENMP) && !defined(KOKKOS_ENABLE_THREADS)
extern template int with_policy<DataPolicy<Kokkos::Serial, reprosgd::Native>>(const Config&, const Data&);
#endif
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
extern template int with_policy<DataPolicy<Kokkos::OpenMP, reprosgd::Exact>>(const Config&, const Data&);  // policies_openmp.cpp
extern template int with_policy<DataPolicy<Kokkos::OpenMP, reprosgd::Native>>(const Config&, const Data&);
#endif
#if defined(KOKKOS_ENABLE_THREADS)
extern template int with_policy<DataPolicy<Kokkos::Threads, reprosgd::Exact>>(const Config&, const Data&);  // policies_threads.cpp
#if !defined(KOKKOS_ENABLE_OPENMP)
extern template int with_policy<DataPolicy<Kokkos::Threads, reprosgd::Native>>(const Config&, const Data&);
#endif
#endif
#endif
#if defined(KOKKOS_ENABLE_CUDA)
extern template int with_policy<DataPolicy<Kokkos::Cuda, reprosgd::Exact>>(const Config&, const Data&);  // policies_cuda.cpp
#endif
// The MPI policies (--fault-tolerance shrink|restart, --parallel model|hybrid) on one host backend,
// each with the Exact reduction (a shrink or a regrid changes the rank count, which only Exact makes
// invisible in the bits). The default host backend's are in policies_ulfm.cpp, policies_model.cpp and
// policies_model_restart.cpp; Serial's, where Serial sits beside a parallel default host backend, in
// the policies_serial_*.cpp of the same names.
#if REPROSGD_HAS_ULFM
template <class Space>
using UlfmData = reprosgd::UlfmDataParallel<Space, reprosgd::Exact>;
template <class Space>
using UlfmGrid = reprosgd::UlfmHybrid<Space, reprosgd::Exact>;
#endif
#if REPROSGD_HAS_MPI
template <class Space>
using Grid = reprosgd::Hybrid<Space, reprosgd::Exact>;
#endif
// Serial beside OpenMP or Threads: train_mlp runs the MPI policies on both (not in a variant build for
// the cross-build checks, which runs the default host backend only).
#if defined(KOKKOS_ENABLE_SERIAL) && (defined(KOKKOS_ENABLE_OPENMP) || defined(KOKKOS_ENABLE_THREADS)) && \
    REPROSGD_TRAIN_MLP_HOST_BACKENDS && !REPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY
#define TRAIN_MLP_SERIAL_MPI_POLICIES 1
#else
#define TRAIN_MLP_SERIAL_MPI_POLICIES 0
#endif
#if !REPROSGD_TRAIN_MLP_DATA_PARALLEL_ONLY
#if REPROSGD_HAS_ULFM
extern template int with_policy<UlfmData<Kokkos::DefaultHostExecutionSpace>, reprosgd::ShrinkAndContinue>(const Config&, const Data&);
extern template int with_policy<UlfmData<Kokkos::DefaultHostExecutionSpace>, reprosgd::RestartFromCheckpoint>(const Config&, const Data&);
extern template int with_policy<UlfmGrid<Kokkos::DefaultHostExecutionSpace>, reprosgd::ShrinkAndContinue>(const Config&, const Data&);
extern template int with_policy<UlfmGrid<Kokkos::DefaultHostExecutionSpace>, reprosgd::RestartFromCheckpoint>(const Config&, const Data&);
#if TRAIN_MLP_SERIAL_MPI_POLICIES
extern template int with_policy<UlfmData<Kokkos::Serial>, reprosgd::ShrinkAndContinue>(const Config&, const Data&);
extern template int with_policy<UlfmData<Kokkos::Serial>, reprosgd::RestartFromCheckpoint>(const Config&, const Data&);
extern template int with_policy<UlfmGrid<Kokkos::Serial>, reprosgd::ShrinkAndContinue>(const Config&, const Data&);
extern template int with_policy<UlfmGrid<Kokkos::Serial>, reprosgd::RestartFromCheckpoint>(const Config&, const Data&);
#endif
#endif
#if REPROSGD_HAS_MPI
extern template int with_policy<Grid<Kokkos::DefaultHostExecutionSpace>>(const Config&, const Data&);
#if TRAIN_MLP_SERIAL_MPI_POLICIES
extern template int with_policy<Grid<Kokkos::Serial>>(const Config&, const Data&);
#endif
#endif
#endif

}  // namespace train_mlp
