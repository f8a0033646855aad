// SPDX-License-Identifier: BSD-3-Clause
/// @file train_mlp: train a multi-layer perceptron and print the fingerprint of the result.
///
/// The last line of standard output is `fingerprint <32 hex digits>`: the same for any --threads,
/// --backend and compiler (and, with MPI, any rank count). On an error: one line on standard error
/// and a non-zero exit code (2 usage/configuration, 3 data, 4 numerics, 5 I/O, 6 checkpoint, 7 ranks
/// lost beyond what the fault policy handles, 75 relaunch me (--fault-tolerance restart), 1 anything else).
#include <reprosgd/reprosgd.hpp>
#include <reprosgd/fault/failure_injection.hpp>
#include <reprosgd/reduction/native.hpp>
#if REPROSGD_HAS_MPI
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/hybrid.hpp>
#include <reprosgd/parallel/mpi_environment.hpp>
#endif
#if REPROSGD_HAS_ULFM
#include <reprosgd/parallel/ulfm_data_parallel.hpp>
#include <reprosgd/parallel/ulfm_hybrid.hpp>
#endif

#include <CLI/CLI.hpp>
#include <build_info.hpp>  // REPROSGD_BUILD_COMPILER, REPROSGD_BUILD_FLAGS (apps/train_mlp/CMakeLists.txt)

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

struct Config {
  std::string data = "fashion-mnist";
  std::string layers = "784,256,128,10";
  std::string activation = "relu";
  float dropout = 0.0f;
  std::string optimizer = "adam";
  float lr = 1e-3f;
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 0.0f;
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
  std::string test_data;
  long train_samples = 0;
  long test_samples = 0;
  long synthetic_train = 12000;
  long synthetic_test = 2000;
  bool quiet = false;
  std::string reduction = "exact";
  std::string checkpoint_dir;
  long checkpoint_every = 0;
  std::size_t keep = 3;
  std::string format = "portable";
  std::string resume;
  long stop_after = 0;
  std::string fault_tolerance = "abort";
  std::string inject_failure;
  int min_ranks = 1;
  std::string parallel = "data";
  std::string grid;
  int feature_chunk = reprosgd::default_feature_chunk;
  long buddy_every = 50;
};

// Set when a peer process died during the run: Open MPI 5.0.x's MPI_Finalize can then hang on
// the survivors (open-mpi/ompi#11404), so main() ends the process without it (after all output
// is flushed; every survivor has passed fit()'s last agreement, so no peer still waits for it).
bool peer_died = false;

// A callback from a std::function: the checkpoint format is chosen at run time without making
// fit() a template of it.
struct StepHook {
  std::function<bool(const reprosgd::StepMetrics&)> f;
  bool on_step_end(const reprosgd::StepMetrics& m) { return f(m); }
};

// This process's rank (0 without MPI): only rank 0 prints progress and the fingerprint.
int world_rank() {
#if REPROSGD_HAS_MPI
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
#else
  return 0;
#endif
}

// The parallelism policy: data-parallel over MPI_COMM_WORLD when built with MPI (one rank is the
// serial case), Serial otherwise. Both give the same bits with the Exact reduction.
#if REPROSGD_HAS_MPI
template <class Space, class Red>
using Policy = reprosgd::DataParallel<Space, Red>;
#else
template <class Space, class Red>
using Policy = reprosgd::Serial<Space, Red>;
#endif

// The policy object for a run: a model-parallel grid from --parallel/--grid, default otherwise.
template <class Par>
Par make_policy(const Config& c) {
#if REPROSGD_HAS_MPI
  if constexpr (std::is_constructible_v<Par, reprosgd::GridShape>) {
    int p = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    const reprosgd::GridShape shape = c.parallel == "model" ? reprosgd::GridShape{1, p}
                                      : c.grid.empty()      ? reprosgd::GridShape::balanced(p)
                                                            : reprosgd::GridShape::parse(c.grid);
    return Par(shape);
  } else
#endif
  {
    (void)c;
    return Par{};
  }
}
// Who prints: rank 0 of the whole job (a model-parallel policy's rank() is its data dimension).
template <class Par>
int printing_rank(const Par& par) {
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
const char* without_prefix(const char* what) {
  const char prefix[] = "train_mlp: ";
  return std::strncmp(what, prefix, sizeof prefix - 1) == 0 ? what + sizeof prefix - 1 : what;
}

int exit_code(const reprosgd::error& e) {
  switch (e.code()) {
    case reprosgd::errc::invalid_configuration: return 2;
    case reprosgd::errc::invalid_data: return 3;
    case reprosgd::errc::numerical_error: return 4;
    case reprosgd::errc::io_error: return 5;
    case reprosgd::errc::checkpoint_invalid: return 6;
    case reprosgd::errc::process_failed: return 7;
    default: return 1;
  }
}

std::vector<int> parse_layers(const std::string& text) {
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

// An MLP with H hidden blocks (Dense, activation, dropout) and an output Dense, as one compile-time
// Sequential type per depth.
template <std::size_t H>
auto make_mlp(const std::vector<int>& w, reprosgd::Activation act, float p, int chunk) {
  using namespace reprosgd;
  const Init init = act == Activation::relu ? Init::he_normal : Init::xavier_uniform;
  auto hidden = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple_cat(std::make_tuple(Dense{w[I], w[I + 1], init, chunk}, ActivationFn{act}, Dropout{p})...);
  }(std::make_index_sequence<H>{});
  auto all = std::tuple_cat(hidden, std::make_tuple(Dense{w[H], w[H + 1], init, chunk}));
  return std::apply([](auto... layers) { return Sequential<decltype(layers)...>(layers...); }, all);
}

reprosgd::TrainTest<Kokkos::HostSpace> load_data(const Config& c, bool say) {
  using namespace reprosgd;
  TrainTest<Kokkos::HostSpace> d;
  const bool csv = c.data.size() > 4 && c.data.compare(c.data.size() - 4, 4, ".csv") == 0;
  if (csv) {
    // Non-finite values are read so that validate_finite can name the sample and feature.
    CsvOptions o;
    o.num_classes = parse_layers(c.layers).back();
    o.allow_non_finite = true;
    d.train = read_csv_dataset(c.data, o);
    d.test = c.test_data.empty() ? d.train : read_csv_dataset(c.test_data, o);
  } else if (c.data == "synthetic" || (c.data == "fashion-mnist" && !fashion_mnist_available())) {
    if (c.data != "synthetic" && say)
      std::printf("Fashion-MNIST not found in %s: using the built-in synthetic data set\n", default_fashion_mnist_dir);
    d = make_synthetic_train_test(c.seed, static_cast<std::size_t>(c.synthetic_train),
                                  static_cast<std::size_t>(c.synthetic_test), 784, 10, {.separation = 0.2f});
  } else {
    d = load_fashion_mnist(c.data == "fashion-mnist" ? std::string(default_fashion_mnist_dir) : c.data);
  }
  auto head = [](Dataset<Kokkos::HostSpace>& ds, long n) {
    if (n > 0 && static_cast<std::size_t>(n) < ds.size()) {
      ds.features = Kokkos::subview(ds.features, Kokkos::make_pair(0L, n), Kokkos::ALL());
      ds.labels = Kokkos::subview(ds.labels, Kokkos::make_pair(0L, n));
    }
  };
  head(d.train, c.train_samples);
  head(d.test, c.test_samples);
  validate_finite(d.train);
  validate_finite(d.test);
  return d;
}

template <class Par, class Fault, class Model, class Opt>
int train_on(const Config& c, Par par, Model model, const Opt& opt, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  TrainerOptions o;
  o.global_batch = c.batch;
  o.micro_batch = c.micro_batch;
  o.epochs = c.epochs;
  o.steps = c.steps;
  o.seed = c.seed;
  if (c.schedule == "step") {
    o.schedule.kind = ScheduleKind::step;
    o.schedule.step_size = c.step_size;
    o.schedule.gamma = c.gamma;
  } else if (c.schedule == "cosine") {
    o.schedule.kind = ScheduleKind::cosine;
    o.schedule.warmup_steps = c.warmup;
  }
  // With a fault policy other than Abort, checkpoints are written by fit() itself (its checkpoint
  // stage survives a lost rank); with Abort by the step hook below, in any --format.
  const bool fit_checkpoints = !std::is_same_v<Fault, Abort>;
  if (fit_checkpoints) {
    o.checkpoint_dir = c.checkpoint_dir;
    o.checkpoint_every = c.checkpoint_every;
    o.keep_last = c.keep;
    o.stop_after = c.stop_after;
  }
  o.min_ranks = c.min_ranks;
  o.buddy_every = c.buddy_every;
  using Space = typename Par::execution_space;
  Trainer<Par, PhiloxStream, PortableBinaryFormat, Fault> trainer(o, std::move(par));
  const int rank = printing_rank(trainer.parallelism());
  auto state = trainer.start(model, opt);
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
  if (c.format == "binary") setup(BinaryFormat{});
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
    return false;
  }};
  ProgressReporter progress(rank, c.quiet ? nullptr : stdout);
  JsonLinesWriter metrics(c.metrics, rank);
  FitResult result;
  try {
    result = trainer.fit(model, opt, state, data.train, &data.test, progress, metrics, hook);
  } catch (const process_failure&) {
    peer_died = true;
    throw;
  }
  peer_died = !result.failures.empty();
  progress.finish();
  if (save_now && saved_at != state.step) save_now();
  const std::string fp = trainer.fingerprint(model, state).hex();
  // The rank may have changed: when rank 0 was lost, the survivor now ranked 0 prints.
  if (printing_rank(trainer.parallelism()) == 0) std::printf("fingerprint %s\n", fp.c_str());
  return 0;
}

// --inject-failure: the Trainer runs on FailureInjection<Par>, which kills this process at the
// scheduled points (identity: the MPI_COMM_WORLD rank); without it, on Par itself.
template <class Par, class Fault, class Model, class Opt>
int train(const Config& c, Model model, const Opt& opt, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  // A job relaunched by scripts/relaunch.sh (REPROSGD_ATTEMPT > 1) does not die again on purpose.
  const char* attempt = std::getenv("REPROSGD_ATTEMPT");
  if (!c.inject_failure.empty() && (!attempt || std::atoi(attempt) <= 1))
    return train_on<FailureInjection<Par>, Fault>(
        c, FailureInjection<Par>(FailureSchedule::parse(c.inject_failure), world_rank(), make_policy<Par>(c)),
        std::move(model), opt, data);
  return train_on<Par, Fault>(c, make_policy<Par>(c), std::move(model), opt, data);
}

template <class Par, class Fault, class Model>
int with_optimizer(const Config& c, Model model, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  if (c.optimizer == "sgd") return train<Par, Fault>(c, std::move(model), Sgd{{c.lr, c.momentum, c.nesterov, c.weight_decay}}, data);
  if (c.optimizer == "adam") return train<Par, Fault>(c, std::move(model), Adam{{.lr = c.lr, .weight_decay = c.weight_decay}}, data);
  return train<Par, Fault>(c, std::move(model), AdamW{{.lr = c.lr, .weight_decay = c.weight_decay}}, data);
}

template <class Par, class Fault = reprosgd::Abort>
int with_policy(const Config& c, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  const std::vector<int> w = parse_layers(c.layers);
  const Activation act = c.activation == "tanh" ? Activation::tanh
                         : c.activation == "sigmoid" ? Activation::sigmoid
                                                     : Activation::relu;
  switch (w.size() - 2) {
    case 0: return with_optimizer<Par, Fault>(c, Sequential<Dense>(Dense{w[0], w[1], Init::he_normal, c.feature_chunk}), data);
    case 1: return with_optimizer<Par, Fault>(c, make_mlp<1>(w, act, c.dropout, c.feature_chunk), data);
    case 2: return with_optimizer<Par, Fault>(c, make_mlp<2>(w, act, c.dropout, c.feature_chunk), data);
    default: return with_optimizer<Par, Fault>(c, make_mlp<3>(w, act, c.dropout, c.feature_chunk), data);
  }
}

// --fault-tolerance shrink|restart: UlfmDataParallel with the Exact reduction (a shrink changes P,
// which only Exact makes invisible in the bits) on the default host backend (instantiated once to
// keep the build time down).
int with_fault_tolerance(const Config& c, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  if (c.reduction != "exact")
    throw config_error("train_mlp: --fault-tolerance " + c.fault_tolerance +
                       " needs --reduction exact (after a shrink the rank count changes, and only exact keeps the bits)");
  if (c.format != "portable")
    throw config_error("train_mlp: --fault-tolerance " + c.fault_tolerance + " writes checkpoints in --format portable");
  if (c.backend != "default" && c.backend != Kokkos::DefaultHostExecutionSpace::name() &&
      !(c.backend == "openmp" && std::string(Kokkos::DefaultHostExecutionSpace::name()) == "OpenMP") &&
      !(c.backend == "threads" && std::string(Kokkos::DefaultHostExecutionSpace::name()) == "Threads"))
    throw config_error("train_mlp: --fault-tolerance " + c.fault_tolerance + " runs on the default backend (" +
                       Kokkos::DefaultHostExecutionSpace::name() + "), not --backend " + c.backend);
#if REPROSGD_HAS_ULFM
  using Par = UlfmDataParallel<Kokkos::DefaultHostExecutionSpace, Exact>;
  if (c.fault_tolerance == "shrink") return with_policy<Par, ShrinkAndContinue>(c, data);
  return with_policy<Par, RestartFromCheckpoint>(c, data);
#else
  (void)data;
  throw config_error("train_mlp: --fault-tolerance " + c.fault_tolerance +
                     " needs an MPI with ULFM (MPIX_Comm_shrink in <mpi-ext.h>, e.g. Open MPI 5 run with mpiexec "
                     "--with-ft ulfm); this build has none: use --fault-tolerance abort");
#endif
}

template <class Space>
int with_space(const Config& c, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  if (c.reduction == "native") return with_policy<Policy<Space, reprosgd::Native>>(c, data);
  return with_policy<Policy<Space, reprosgd::Exact>>(c, data);
}

// --parallel model|hybrid: Hybrid with the Exact reduction on the default host backend.
int with_model_parallel(const Config& c, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  const std::string what = "train_mlp: --parallel " + c.parallel;
  if (c.reduction != "exact") throw config_error(what + " needs --reduction exact");
  if (c.fault_tolerance == "restart")
    throw config_error(what + " supports --fault-tolerance abort or shrink (not restart)");
  if (c.fault_tolerance == "shrink" && c.format != "portable")
    throw config_error(what + " --fault-tolerance shrink writes checkpoints in --format portable");
  if (c.backend != "default" && c.backend != Kokkos::DefaultHostExecutionSpace::name() &&
      !(c.backend == "openmp" && std::string(Kokkos::DefaultHostExecutionSpace::name()) == "OpenMP") &&
      !(c.backend == "threads" && std::string(Kokkos::DefaultHostExecutionSpace::name()) == "Threads"))
    throw config_error(what + " runs on the default backend (" + Kokkos::DefaultHostExecutionSpace::name() +
                       "), not --backend " + c.backend);
  if (c.fault_tolerance == "shrink") {
#if REPROSGD_HAS_ULFM
    return with_policy<UlfmHybrid<Kokkos::DefaultHostExecutionSpace, Exact>, ShrinkAndContinue>(c, data);
#else
    throw config_error(what + " --fault-tolerance shrink needs an MPI with ULFM");
#endif
  }
#if REPROSGD_HAS_MPI
  return with_policy<Hybrid<Kokkos::DefaultHostExecutionSpace, Exact>>(c, data);
#else
  (void)data;
  throw config_error(what + " needs a build with MPI");
#endif
}

int run(const Config& c) {
  using namespace reprosgd;
  check_fp_environment();
  if (!c.grid.empty() && c.parallel != "hybrid")
    throw config_error("train_mlp: --grid " + c.grid + " needs --parallel hybrid (data is " +
                       "P x 1 and model is 1 x P)");
#if REPROSGD_HAS_MPI
  if (!c.grid.empty()) (void)GridShape::parse(c.grid);  // a typo fails before any work
#endif
  if (!c.inject_failure.empty()) (void)FailureSchedule::parse(c.inject_failure);  // a typo fails before any work
  const auto data = load_data(c, !c.quiet && world_rank() == 0);
  if (c.parallel != "data") return with_model_parallel(c, data);
  if (c.fault_tolerance != "abort") return with_fault_tolerance(c, data);
#if defined(KOKKOS_ENABLE_SERIAL)
  if (c.backend == "serial") return with_space<Kokkos::Serial>(c, data);
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  if (c.backend == "openmp" || c.backend == "default") return with_space<Kokkos::OpenMP>(c, data);
#endif
#if defined(KOKKOS_ENABLE_THREADS)
  if (c.backend == "threads" || c.backend == "default") return with_space<Kokkos::Threads>(c, data);
#endif
  throw config_error("train_mlp: --backend " + c.backend + " is not enabled in this Kokkos build (it has " +
                     detail::enabled_backends() + ")");
}

// --version: what this binary was built with and what it runs, one item per line (tests/cli/version.sh
// checks every line). Needs neither MPI_Init nor Kokkos::initialize.
void print_version() {
  using namespace reprosgd;
  std::printf("train_mlp (ReproSGD) %s\n", REPROSGD_VERSION_STRING);
  std::printf("Kokkos %s, backends: %s (default host: %s)\n", detail::version_string().c_str(),
              detail::enabled_backends().c_str(), Kokkos::DefaultHostExecutionSpace::name());
  std::printf("compiler: %s\n", REPROSGD_BUILD_COMPILER);
  // The flags CMake was configured with, and the one the library adds for the determinism contract
  // (target reprosgd, REPROSGD_STRICT_FP, for GCC and Clang).
  std::string flags = REPROSGD_BUILD_FLAGS;
#if REPROSGD_STRICT_FP && (defined(__GNUC__) || defined(__clang__))
  flags += std::string(flags.empty() ? "" : " ") + "-ffp-contract=off";
#endif
  std::printf("flags: %s\n", flags.c_str());
#if REPROSGD_HAS_MPI
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);  // allowed before MPI_Init
  std::string mpi(text, static_cast<std::size_t>(std::max(len, 0)));
  mpi = mpi.substr(0, mpi.find_first_of("\r\n"));
  std::printf("MPI: %s; ULFM: %s\n", mpi.empty() ? "unknown library" : mpi.c_str(), REPROSGD_HAS_ULFM ? "yes" : "no");
#else
  std::printf("MPI: none (built without MPI); ULFM: no\n");
#endif
  std::printf("CPU GEMM kernel: %s\n", host_gemm_kernel_name().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"Train an MLP with ReproSGD; the last line is the fingerprint of the trained model."};
  app.add_option("--data", c.data, "fashion-mnist | synthetic | DIR with IDX files | FILE.csv");
  app.add_option("--test-data", c.test_data, "with --data FILE.csv: the test set's CSV (default: the training file)");
  app.add_option("--layers", c.layers, "widths, input first: 784,256,128,10");
  app.add_option("--activation", c.activation)->check(CLI::IsMember({"relu", "tanh", "sigmoid"}));
  app.add_option("--dropout", c.dropout, "dropout probability after each hidden layer");
  app.add_option("--optimizer", c.optimizer)->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  app.add_option("--lr", c.lr, "base learning rate");
  app.add_option("--momentum", c.momentum, "SGD momentum");
  app.add_flag("--nesterov", c.nesterov, "Nesterov momentum (SGD)");
  app.add_option("--weight-decay", c.weight_decay);
  app.add_option("--schedule", c.schedule)->check(CLI::IsMember({"constant", "step", "cosine"}));
  app.add_option("--warmup", c.warmup, "cosine: warm-up steps");
  app.add_option("--step-size", c.step_size, "step schedule: steps between decays");
  app.add_option("--gamma", c.gamma, "step schedule: decay factor");
  app.add_option("--batch", c.batch, "global batch size B");
  app.add_option("--micro-batch", c.micro_batch, "micro-batch size m (B must be a multiple)");
  auto* epochs = app.add_option("--epochs", c.epochs);
  app.add_option("--steps", c.steps, "total steps (instead of --epochs)")->excludes(epochs);
  app.add_option("--seed", c.seed);
  app.add_option("--backend", c.backend, "serial | openmp | threads (as built)");
  app.add_option("--threads", c.threads, "host threads (0: Kokkos default)");
  app.add_option("--metrics", c.metrics, "write JSON lines of step and epoch metrics to FILE");
  app.add_option("--train-samples", c.train_samples, "use only the first N training samples");
  app.add_option("--test-samples", c.test_samples, "use only the first N test samples");
  app.add_option("--synthetic-train", c.synthetic_train, "synthetic data: training samples");
  app.add_option("--synthetic-test", c.synthetic_test, "synthetic data: test samples");
  app.add_flag("--quiet", c.quiet, "print only the fingerprint");
  app.add_option("--checkpoint-dir", c.checkpoint_dir, "write checkpoints into this directory");
  app.add_option("--checkpoint-every", c.checkpoint_every, "steps between checkpoints (and one at the end)");
  app.add_option("--keep", c.keep, "checkpoints kept in --checkpoint-dir")->check(CLI::PositiveNumber);
  app.add_option("--format", c.format, "checkpoint format")->check(CLI::IsMember({"binary", "portable", "json"}));
  app.add_option("--resume", c.resume, "auto (newest valid checkpoint in --checkpoint-dir) or a checkpoint file");
  app.add_option("--stop-after", c.stop_after, "stop cleanly after this step, as if interrupted");
  app.add_option("--reduction", c.reduction, "exact (rank-independent) | native (float MPI_Allreduce)")
      ->check(CLI::IsMember({"exact", "native"}));
  app.add_option("--fault-tolerance", c.fault_tolerance,
                 "what a lost rank does: abort (end the job) | shrink (ULFM: continue on the survivors, same bits) | "
                 "restart (exit 75 for scripts/relaunch.sh, which resumes from the newest checkpoint)")
      ->check(CLI::IsMember({"abort", "shrink", "restart"}));
  app.add_option("--inject-failure", c.inject_failure,
                 "kill ranks on purpose: RANK@STEP[:step|allreduce|checkpoint][,...] (MPI_COMM_WORLD ranks; "
                 "ignored when relaunched, REPROSGD_ATTEMPT > 1)");
  app.add_option("--parallel", c.parallel,
                 "data (every rank holds the model) | model (every Dense layer's outputs split over all ranks) | "
                 "hybrid (a --grid of data-parallel replicas of model-parallel groups)")
      ->check(CLI::IsMember({"data", "model", "hybrid"}));
  app.add_option("--grid", c.grid, "--parallel hybrid: PDxPM, P_data replicas of P_model ranks (default: as square as P allows)");
  app.add_option("--feature-chunk", c.feature_chunk,
                 "output features per chunk of a Dense layer (the input gradient is an exact sum over chunks; part "
                 "of the model, not of the decomposition)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--buddy-every", c.buddy_every,
                 "--parallel model|hybrid with --fault-tolerance shrink: steps between in-memory buddy snapshots of "
                 "the shards")
      ->check(CLI::PositiveNumber);
  app.add_option("--min-ranks", c.min_ranks, "shrink: end with an error (and a checkpoint) below this many ranks")
      ->check(CLI::PositiveNumber);
  bool version = false;
  app.add_flag("--version", version,
               "print the library, Kokkos (version, backends), compiler, flags, MPI (library, ULFM) and CPU GEMM "
               "kernel, and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "train_mlp: error: %s\n", e.what());
    return 2;
  }
  if (version) {
    print_version();
    return 0;
  }
  int rc = 1;
#if REPROSGD_HAS_MPI
  reprosgd::MpiEnvironment mpi(argc, argv);
#endif
  reprosgd::detail::initialize(c.threads, world_rank() != 0);
  try {
    rc = run(c);
  } catch (const reprosgd::restart_required& e) {
    std::fprintf(stderr, "train_mlp: %s\n", e.what());
    rc = e.exit_code();
  } catch (const reprosgd::error& e) {
    std::fprintf(stderr, "train_mlp: error: %s\n", without_prefix(e.what()));
    rc = exit_code(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_mlp: error: %s\n", without_prefix(e.what()));
    rc = 1;
  }
  Kokkos::finalize();
  if (peer_died) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(rc);
  }
  return rc;
}
