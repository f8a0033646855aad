// SPDX-License-Identifier: BSD-3-Clause
/// @file train_mlp: train a multi-layer perceptron and print the fingerprint of the result.
///
/// The last line of standard output is `fingerprint <32 hex digits>`: the same for any --threads,
/// --backend and compiler (and, with MPI, any rank count). On an error: one line on standard error
/// and a non-zero exit code (2 usage/configuration, 3 data, 4 numerics, 5 I/O, 6 checkpoint, 7 ranks
/// lost beyond what the fault policy handles, 75 relaunch me (--fault-tolerance restart), 1 anything else).
#include "train.hpp"

#include <cctype>

#include <build_info.hpp>  // REPROSGD_BUILD_COMPILER, REPROSGD_BUILD_FLAGS (apps/train_mlp/CMakeLists.txt)

namespace train_mlp {

// The most --threads this machine runs: 4 per hardware thread, and at least 64 (so that the
// determinism checks' 4 threads run on any machine). libgomp crashed (SIGSEGV) at --threads 10000.
inline int max_threads() {
  return static_cast<int>(std::max(64u, 4u * std::max(1u, std::thread::hardware_concurrency())));
}

// Refuses, before any allocation, a model whose parameters, gradients and optimizer state alone do
// not fit in this machine's memory (a Kokkos allocation failure at --layers 784,2000000000,10,
// exit 1, was what a user got). Under model parallelism each rank holds 1/P_model of them. A lower
// bound: activations, micro-batch partials and buffers come on top.
void check_model_fits(const Config& c) {
  const std::vector<int> w = parse_layers(c.layers);
  long double parameters = 0;
  for (std::size_t i = 0; i + 1 < w.size(); ++i)
    parameters += static_cast<long double>(w[i]) * w[i + 1] + w[i + 1];
  int model_ranks = 1;
#if REPROSGD_HAS_MPI
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  if (c.parallel == "model") model_ranks = p;
  if (c.parallel == "hybrid") model_ranks = (c.grid.empty() ? reprosgd::GridShape::balanced(p) : reprosgd::GridShape::parse(c.grid)).model;
#endif
  const int state_copies = c.optimizer == "sgd" ? (c.momentum != 0.0f ? 1 : 0) : 2;  // velocity; Adam's m and v
  const long double bytes = parameters / model_ranks * (2 + state_copies) * sizeof(float);  // + gradients
  const long double memory = static_cast<long double>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE);
  if (memory > 0 && bytes > memory) {
    const auto gib = [](long double b) {
      char text[64];
      std::snprintf(text, sizeof text, "%.1Lf GiB", b / (1024.0L * 1024.0L * 1024.0L));
      return std::string(text);
    };
    char count[64];
    std::snprintf(count, sizeof count, "%.0Lf", parameters);
    throw reprosgd::config_error("train_mlp: --layers " + c.layers + ": the model's " + count +
                                 " parameters, their gradients and optimizer state need at least " + gib(bytes) +
                                 (model_ranks > 1 ? " per rank (" + std::to_string(model_ranks) + " model ranks)" : std::string()) +
                                 ", more than this machine's " + gib(memory) + " of memory");
  }
}

// --synthetic-shape C,H,W (with --model and none given: 1,28,28); 0x0x0 when samples are features.
reprosgd::ImageShape synthetic_shape(const Config& c) {
  if (c.synthetic_shape.empty()) return c.model.empty() ? reprosgd::ImageShape{} : reprosgd::ImageShape{1, 28, 28};
  std::vector<int> v;
  std::stringstream ss(c.synthetic_shape);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || n <= 0 || n > 65536) v.clear(), v.push_back(-1);
    else v.push_back(n);
    if (v.back() < 0) break;
  }
  if (v.size() != 3 || v[0] < 0)
    throw reprosgd::config_error("train_mlp: --synthetic-shape " + c.synthetic_shape +
                                 ": expected C,H,W, three positive integers (e.g. 1,28,28)");
  return {v[0], v[1], v[2]};
}

reprosgd::TrainTest<Kokkos::HostSpace> load_data(const Config& c, bool say) {
  using namespace reprosgd;
  TrainTest<Kokkos::HostSpace> d;
  const bool csv = c.data.size() > 4 && c.data.compare(c.data.size() - 4, 4, ".csv") == 0;
  if (!c.targets.empty()) {
    // IDX regression: features (bytes or floats) and float targets, each file's first dimension
    // the sample count.
    d.train = read_idx_regression_dataset(c.data, c.targets);
    d.test = c.test_data.empty() ? d.train : read_idx_regression_dataset(c.test_data, c.test_targets);
  } else if (csv) {
    // Non-finite values are read so that validate_finite can name the sample and feature.
    // --loss mse: the last (output width) columns are the regression targets; else the last column
    // is the class label.
    CsvOptions o;
    if (c.loss == "mse") o.targets = parse_layers(c.layers).back();
    else o.num_classes = parse_layers(c.layers).back();
    o.allow_non_finite = true;
    d.train = read_csv_dataset(c.data, o);
    d.test = c.test_data.empty() ? d.train : read_csv_dataset(c.test_data, o);
  } else if (c.data == "synthetic" || (c.data == "fashion-mnist" && !fashion_mnist_available())) {
    if (c.data != "synthetic" && say)
      std::printf("Fashion-MNIST not found in %s: using the built-in synthetic data set\n", default_fashion_mnist_dir);
    // Features: --synthetic-shape's C x H x W, else --layers' first width (a --model network's
    // default is a 1 x 28 x 28 image, Fashion-MNIST's shape).
    const ImageShape shape = synthetic_shape(c);
    const int features = shape.size() != 0 ? static_cast<int>(shape.size()) : parse_layers(c.layers).front();
    d = make_synthetic_train_test(c.seed, static_cast<std::size_t>(c.synthetic_train),
                                  static_cast<std::size_t>(c.synthetic_test), features, 10, {.separation = 0.2f});
    d.train.sample_shape = d.test.sample_shape = shape;
  } else {
    d = load_fashion_mnist(c.data == "fashion-mnist" ? std::string(default_fashion_mnist_dir) : c.data);
  }
  auto head = [](Dataset<Kokkos::HostSpace>& ds, long n) {
    if (n > 0 && static_cast<std::size_t>(n) < ds.size()) {
      ds.features = Kokkos::subview(ds.features, Kokkos::make_pair(0L, n), Kokkos::ALL());
      if (ds.is_regression())
        ds.targets = Kokkos::subview(ds.targets, Kokkos::make_pair(0L, n), Kokkos::ALL());
      else
        ds.labels = Kokkos::subview(ds.labels, Kokkos::make_pair(0L, n));
    }
  };
  head(d.train, c.train_samples);
  head(d.test, c.test_samples);
  validate_finite(d.train);
  validate_finite(d.test);
  return d;
}

// --standardize inputs|all: the training set's per-column mean and standard deviation
// (compute_normalization: deterministic, the same on every rank) of the features and, with `all`
// and --loss mse, of the targets, applied to the training and test data in place and kept in
// c.normalization for the model file.
void standardize(Config& c, reprosgd::TrainTest<Kokkos::HostSpace>& d, bool say) {
  using namespace reprosgd;
  if (c.standardize == "none") return;
  const bool same_test = d.test.features.data() == d.train.features.data();  // no --test-data: one set
  c.normalization.inputs = compute_normalization(d.train.features);
  apply_normalization(d.train, c.normalization.inputs);
  if (!same_test) apply_normalization(d.test, c.normalization.inputs);
  const bool targets = c.standardize == "all" && d.train.is_regression();
  if (targets) {
    c.normalization.outputs = compute_normalization(d.train.targets);
    auto as_columns = [](const Dataset<Kokkos::HostSpace>& ds) {  // the targets, standardised like features
      Dataset<Kokkos::HostSpace> t;
      t.features = ds.targets;
      return t;
    };
    apply_normalization(as_columns(d.train), c.normalization.outputs);
    if (!same_test) apply_normalization(as_columns(d.test), c.normalization.outputs);
  }
  if (say)
    std::printf("standardized %zu input features%s with the training set's mean and standard deviation (saved with "
                "the model: predict applies them%s)%s\n",
                c.normalization.inputs.size(),
                targets ? (" and " + std::to_string(c.normalization.outputs.size()) + " targets").c_str() : "",
                targets ? " and inverts the targets'" : "",
                targets ? "; the epoch lines' loss and RMSE are in standardized units" : "");
}

// What a variant build for the cross-build checks leaves out says so (REPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY).
[[noreturn]] inline void not_in_default_backend_only(const std::string& option) {
  throw reprosgd::config_error("train_mlp: " + option +
                               " is not built into this train_mlp (REPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY, a variant "
                               "build for the cross-build checks)");
}

template <class Space>
int with_space(const Config& c, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  if constexpr (!runs_backend<Space>) {
    (void)data;
    not_in_default_backend_only("--backend " + c.backend);
  } else {
    if (c.reduction != "native") return with_policy<DataPolicy<Space, reprosgd::Exact>>(c, data);
    if constexpr (has_native<Space>) return with_policy<DataPolicy<Space, reprosgd::Native>>(c, data);
    if (REPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY) not_in_default_backend_only("--reduction native");
    throw reprosgd::config_error(std::string("train_mlp: --reduction native runs on the default backend (") +
                                 Kokkos::DefaultHostExecutionSpace::name() + "), not --backend " + c.backend);
  }
}

#if !REPROSGD_TRAIN_MLP_DATA_PARALLEL_ONLY
// --fault-tolerance shrink|restart: UlfmDataParallel on Space (train.hpp's MPI policies).
template <class Space>
int with_fault_tolerance(const Config& c, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  if (c.reduction != "exact")
    throw config_error("train_mlp: --fault-tolerance " + c.fault_tolerance +
                       " needs --reduction exact (after a shrink the rank count changes, and only exact keeps the bits)");
  if (c.format != "portable")
    throw config_error("train_mlp: --fault-tolerance " + c.fault_tolerance + " writes checkpoints in --format portable");
#if REPROSGD_HAS_ULFM
  if (c.fault_tolerance == "shrink") return with_policy<UlfmData<Space>, ShrinkAndContinue>(c, data);
  return with_policy<UlfmData<Space>, RestartFromCheckpoint>(c, data);
#else
  (void)data;
  throw config_error("train_mlp: --fault-tolerance " + c.fault_tolerance +
                     " needs an MPI with ULFM (MPIX_Comm_shrink in <mpi-ext.h>, e.g. Open MPI 5 run with mpiexec "
                     "--with-ft ulfm); this build has none: use --fault-tolerance abort");
#endif
}

// --parallel model|hybrid: Hybrid on Space, or UlfmHybrid under a fault policy (train.hpp's MPI policies).
template <class Space>
int with_model_parallel(const Config& c, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  const std::string what = "train_mlp: --parallel " + c.parallel;
  if (c.reduction != "exact") throw config_error(what + " needs --reduction exact");
  if (c.fault_tolerance != "abort" && c.format != "portable")
    throw config_error(what + " --fault-tolerance " + c.fault_tolerance + " writes checkpoints in --format portable");
  // restart: the survivors of a failure stop with exit 75 and the relaunch resumes from the newest
  // checkpoint on fewer ranks (a sharded checkpoint does not depend on the grid; without --grid the
  // relaunch takes the most square grid of its rank count). UlfmHybrid, so that a failure reaches
  // every survivor as an error instead of ending the job.
  if (c.fault_tolerance != "abort") {
#if REPROSGD_HAS_ULFM
    if (c.fault_tolerance == "shrink") return with_policy<UlfmGrid<Space>, ShrinkAndContinue>(c, data);
    return with_policy<UlfmGrid<Space>, RestartFromCheckpoint>(c, data);
#else
    throw config_error(what + " --fault-tolerance " + c.fault_tolerance + " needs an MPI with ULFM");
#endif
  }
#if REPROSGD_HAS_MPI
  return with_policy<Grid<Space>>(c, data);
#else
  (void)data;
  throw config_error(what + " needs a build with MPI");
#endif
}

// The MPI policies (--parallel model|hybrid, --fault-tolerance shrink|restart) on the host backend
// --backend names: the default host backend and, beside it, Serial (TRAIN_MLP_SERIAL_MPI_POLICIES).
// A device backend runs the data-parallel policy without a fault policy only.
int with_mpi_policies(const Config& c, const reprosgd::TrainTest<Kokkos::HostSpace>& data) {
  using Default = Kokkos::DefaultHostExecutionSpace;
  const auto on = [&]<class Space>() {
    return c.parallel != "data" ? with_model_parallel<Space>(c, data) : with_fault_tolerance<Space>(c, data);
  };
  std::string default_name = Default::name();
  std::transform(default_name.begin(), default_name.end(), default_name.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (c.backend == "default" || c.backend == default_name) return on.template operator()<Default>();
  std::string hosts = default_name;
#if TRAIN_MLP_SERIAL_MPI_POLICIES
  if (c.backend == "serial") return on.template operator()<Kokkos::Serial>();
  hosts += ", serial";
#endif
  const std::string what = c.parallel != "data" ? "--parallel " + c.parallel : "--fault-tolerance " + c.fault_tolerance;
#if defined(KOKKOS_ENABLE_SERIAL)
  if (REPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY && c.backend == "serial") not_in_default_backend_only("--backend serial");
#endif
  throw reprosgd::config_error("train_mlp: " + what + " runs on the host backends of this build (" + hosts +
                               "), not --backend " + c.backend);
}
#endif

int run(Config c) {  // a copy: standardize() adds the statistics it computed
  using namespace reprosgd;
  check_fp_environment();
  if (!c.grid.empty() && c.parallel != "hybrid")
    throw config_error("train_mlp: --grid " + c.grid + " needs --parallel hybrid (data is " +
                       "P x 1 and model is 1 x P)");
#if REPROSGD_HAS_MPI
  if (!c.grid.empty()) (void)GridShape::parse(c.grid);  // a typo fails before any work
#endif
  if (!c.inject_failure.empty()) (void)FailureSchedule::parse(c.inject_failure);  // a typo fails before any work
  if (c.spares > 0 && c.fault_tolerance != "shrink")
    throw config_error("train_mlp: --spares " + std::to_string(c.spares) +
                       " needs --fault-tolerance shrink (spares replace the ranks a shrink lost)");
  if (!c.model.empty()) {
    if (c.layers_given) throw config_error("train_mlp: --model and --layers exclude each other (--layers is the MLP shorthand)");
    if (!c.save_model.empty() || !c.save_initial.empty())
      throw config_error("train_mlp: --save-model and --save-initial write MLPs (--layers): a --model network has no "
                         "model-file form");
    const bool csv = c.data.size() > 4 && c.data.compare(c.data.size() - 4, 4, ".csv") == 0;
    if (csv) throw config_error("train_mlp: --model takes its input shape from the data: use IDX, Fashion-MNIST or synthetic data, not CSV");
  } else {
    check_model_fits(c);
  }
  if (!c.synthetic_shape.empty()) {
    if (c.data != "synthetic") throw config_error("train_mlp: --synthetic-shape needs --data synthetic");
    (void)synthetic_shape(c);  // a typo fails before any work
  }
  if (c.optimizer != "sgd" && c.dampening_given)
    throw config_error("train_mlp: --dampening is SGD's (--optimizer sgd), not " + c.optimizer + "'s");
  if (c.optimizer == "sgd" && c.adam_options_given)
    throw config_error("train_mlp: --beta1, --beta2 and --eps are Adam's and AdamW's, not sgd's");
  if (c.checkpoint_async && c.checkpoint_dir.empty())
    throw config_error("train_mlp: --checkpoint-async needs --checkpoint-dir");
  if (c.checkpoint_async && c.format != "portable")
    throw config_error("train_mlp: --checkpoint-async writes checkpoints in --format portable (fit()'s own format)");
  if (!c.targets.empty() && c.loss != "mse")
    throw config_error("train_mlp: --targets FILE (IDX regression targets) needs --loss mse");
  if (c.targets.empty() && !c.test_targets.empty())
    throw config_error("train_mlp: --test-targets needs --targets (and --data, --test-data: the IDX features)");
  if (!c.targets.empty() && c.test_data.empty() != c.test_targets.empty())
    throw config_error("train_mlp: with --targets, --test-data and --test-targets come together (the test set's IDX "
                       "features and targets; without both the training set is the test set)");
#if REPROSGD_TRAIN_MLP_DATA_PARALLEL_ONLY
  if (c.parallel != "data" || c.fault_tolerance != "abort")
    throw config_error(std::string("train_mlp: ") + (c.parallel != "data" ? "--parallel " + c.parallel : "--fault-tolerance " + c.fault_tolerance) +
                       " is not built into this train_mlp (REPROSGD_TRAIN_MLP_DATA_PARALLEL_ONLY, a variant build for "
                       "the cross-build checks)");
#endif
#if REPROSGD_HAS_MPI
  // Without it ShrinkAndContinue never runs: Open MPI ends the whole job when a rank dies. Said,
  // not refused: a failure-free run is still correct, and bench/recovery_bench.sh measures it.
  if (c.fault_tolerance == "shrink" && world_rank() == 0 && world_size() > 1 && !mpi_fault_tolerance_enabled())
    std::fprintf(stderr,
                 "train_mlp: warning: --fault-tolerance shrink without mpiexec --with-ft ulfm: MPI's tolerance of "
                 "failures is off, so a lost rank ends the job\n");
#endif
  auto data = load_data(c, !c.quiet && world_rank() == 0);
  standardize(c, data, !c.quiet && world_rank() == 0);
#if !REPROSGD_TRAIN_MLP_DATA_PARALLEL_ONLY
  if (c.parallel != "data" || c.fault_tolerance != "abort") return with_mpi_policies(c, data);
#endif
#if REPROSGD_TRAIN_MLP_HOST_BACKENDS
#if defined(KOKKOS_ENABLE_SERIAL)
  if (c.backend == "serial") return with_space<Kokkos::Serial>(c, data);
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  if (c.backend == "openmp" || c.backend == "default") return with_space<Kokkos::OpenMP>(c, data);
#endif
#if defined(KOKKOS_ENABLE_THREADS)
  if (c.backend == "threads" || c.backend == "default") return with_space<Kokkos::Threads>(c, data);
#endif
#else
  if (c.backend != "cuda")
    throw config_error("train_mlp: --backend " + c.backend +
                       " is not built into this train_mlp (REPROSGD_TRAIN_MLP_HOST_BACKENDS off, a device "
                       "variant build: it runs --backend cuda)");
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  if (c.backend == "cuda") {
    // The device runs the Exact reduction only (Native is there to show the host's difference).
    if (c.reduction != "exact") throw config_error("train_mlp: --backend cuda runs --reduction exact");
    return with_policy<DataPolicy<Kokkos::Cuda, reprosgd::Exact>>(c, data);
  }
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
#if REPROSGD_STRICT_FP && defined(KOKKOS_ENABLE_CUDA)
  flags += " --fmad=false";  // device code: CMakeLists.txt
#endif
  std::printf("flags: %s\n", flags.c_str());
#if REPROSGD_HAS_MPI
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);  // allowed before MPI_Init
  std::string mpi(text, static_cast<std::size_t>(std::max(len, 0)));
  mpi = mpi.substr(0, mpi.find_first_of("\r\n"));
  // Whether device buffers may go to MPI (train_mlp --backend cuda stages through host memory when
  // not): the library's own answer, parallel/mpi_device_memory.hpp.
  std::printf("MPI: %s; ULFM: %s; %s\n", mpi.empty() ? "unknown library" : mpi.c_str(), REPROSGD_HAS_ULFM ? "yes" : "no",
              describe(mpi_device_support()).c_str());
#else
  std::printf("MPI: none (built without MPI); ULFM: no\n");
#endif
  std::printf("CPU GEMM kernel: %s\n", host_gemm_kernel_name().c_str());
}

}  // namespace train_mlp

using namespace train_mlp;

// How long a rank that ended with an error waits in MPI_Finalize for the others (main()): an
// orderly finalize takes well under a second.
constexpr double finalize_seconds = 5.0;

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"Train an MLP with ReproSGD; the last line is the fingerprint of the trained model."};
  app.add_option("--data", c.data, "fashion-mnist | synthetic | DIR with IDX files | FILE.csv | FILE.idx (with --targets)");
  app.add_option("--test-data", c.test_data,
                 "with --data FILE.csv: the test set's CSV; with --targets: the test set's IDX features (default: the "
                 "training set)");
  app.add_option("--targets", c.targets,
                 "IDX file of float regression targets (type 0x0D, N or N x T); --data is then the IDX file of "
                 "features (N x ..., bytes or floats); needs --loss mse");
  app.add_option("--test-targets", c.test_targets, "with --targets: the test set's IDX targets (with --test-data)");
  CLI::Option* layers_option = app.add_option("--layers", c.layers, "widths, input first: 784,256,128,10");
  app.add_option("--model", c.model,
                 "layers composed at run time instead of --layers, sizes from the data: "
                 "\"conv(32,3,p1),bn,relu,maxpool(2),res(conv(32,3,p1),bn,relu),flatten,dense(128),relu,dense(10)\" "
                 "(docs/layers.md)");
  app.add_option("--activation", c.activation)->check(CLI::IsMember({"relu", "tanh", "sigmoid"}));
  app.add_option("--dropout", c.dropout, "dropout probability after each hidden layer");
  app.add_option("--optimizer", c.optimizer)->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  app.add_option("--lr", c.lr, "base learning rate");
  app.add_option("--momentum", c.momentum, "SGD momentum");
  app.add_flag("--nesterov", c.nesterov, "Nesterov momentum (SGD)");
  app.add_option("--weight-decay", c.weight_decay, "L2 (SGD, Adam) or decoupled (AdamW) weight decay, biases included");
  auto* dampening = app.add_option("--dampening", c.dampening, "SGD: momentum dampening in [0, 1] (torch.optim.SGD's; not with --nesterov)");
  const CLI::Option* adam_options[] = {app.add_option("--beta1", c.beta1, "Adam, AdamW: first-moment decay"),
                                       app.add_option("--beta2", c.beta2, "Adam, AdamW: second-moment decay"),
                                       app.add_option("--eps", c.eps, "Adam, AdamW: epsilon added to sqrt(v_hat)")};
  app.add_option("--loss", c.loss,
                 "cross-entropy (softmax; class labels) | mse (mean squared error: regression targets, the last "
                 "output-width columns of --data FILE.csv, RMSE and R^2 reported; or one-hot class labels)")
      ->check(CLI::IsMember({"cross-entropy", "mse"}));
  app.add_flag("--no-shuffle", c.no_shuffle, "train every epoch in the data set's order (default: a keyed shuffle per epoch)");
  app.add_option("--schedule", c.schedule)->check(CLI::IsMember({"constant", "step", "cosine"}));
  app.add_option("--warmup", c.warmup, "cosine: warm-up steps");
  app.add_option("--step-size", c.step_size, "step schedule: steps between decays");
  app.add_option("--gamma", c.gamma, "step schedule: decay factor");
  app.add_option("--batch", c.batch, "global batch size B");
  app.add_option("--micro-batch", c.micro_batch, "micro-batch size m (B must be a multiple)");
  auto* epochs = app.add_option("--epochs", c.epochs);
  app.add_option("--steps", c.steps, "total steps (instead of --epochs)")->excludes(epochs);
  app.add_option("--seed", c.seed);
  app.add_option("--backend", c.backend, "serial | openmp | threads | cuda (as built)");
  app.add_option("--threads", c.threads, "host threads (0: Kokkos default)");
  app.add_option("--metrics", c.metrics, "write JSON lines of step and epoch metrics to FILE");
  app.add_option("--trace", c.trace,
                 "write a determinism trace to FILE: a JSON line per step and evaluation with the loss bits and "
                 "fingerprints, the same bytes for any threads, backend and rank count; compare two with "
                 "reprosgd_diff (docs/diagnosis.md)");
  app.add_option("--trace-level", c.trace_level,
                 "step (the whole state's fingerprint) | layer (also each layer's parameters, reduced gradient and "
                 "optimizer state) | tensor (also each layer's forward output and input gradient for the step's first "
                 "micro-batch)")
      ->check(CLI::IsMember({"step", "layer", "tensor"}));
  std::vector<std::string> dump;
  app.add_option("--dump-step", dump,
                 "N DIR: run to step N (from --resume's checkpoint, or from the start), write everything step N "
                 "computes as NumPy .npy files in DIR (parameters, each micro-batch's input, activations and "
                 "gradients, the reduced gradient), then stop; compare two dumps with reprosgd_diff")
      ->expected(2);
  app.add_option("--train-samples", c.train_samples, "use only the first N training samples");
  app.add_option("--test-samples", c.test_samples, "use only the first N test samples");
  app.add_option("--synthetic-train", c.synthetic_train, "synthetic data: training samples");
  app.add_option("--synthetic-test", c.synthetic_test, "synthetic data: test samples");
  app.add_option("--synthetic-shape", c.synthetic_shape,
                 "synthetic data: samples as C,H,W images (default: --layers' first width features; with --model 1,28,28)");
  app.add_flag("--quiet", c.quiet, "print only the fingerprint");
  app.add_option("--checkpoint-dir", c.checkpoint_dir, "write checkpoints into this directory");
  app.add_option("--checkpoint-every", c.checkpoint_every, "steps between checkpoints (and one at the end)");
  app.add_flag("--checkpoint-async", c.checkpoint_async,
               "write each checkpoint on a helper thread while the next steps train (the same files; the last "
               "one is waited for; a failed write ends the run at the next checkpoint)");
  app.add_option("--keep", c.keep, "checkpoints kept in --checkpoint-dir")->check(CLI::PositiveNumber);
  app.add_option("--format", c.format, "checkpoint (and --save-model) format")
      ->check(CLI::IsMember({"binary", "portable", "json"}));
  app.add_option("--save-model", c.save_model,
                 "at the end, write the trained model (architecture and parameters, no optimizer state) to FILE, "
                 "for predict and reprosgd::load_model");
  app.add_option("--standardize", c.standardize,
                 "none | inputs (each feature to mean 0, std 1 with the training set's statistics) | all (and, "
                 "with --loss mse, each target); saved with --save-model, applied and inverted by predict")
      ->check(CLI::IsMember({"none", "inputs", "all"}));
  app.add_option("--save-initial", c.save_initial,
                 "before the first step, write the initial parameters (drawn from --seed) as a model file to FILE");
  app.add_option("--resume", c.resume, "auto (newest valid checkpoint in --checkpoint-dir) or a checkpoint file");
  app.add_option("--stop-after", c.stop_after, "stop cleanly after this step, as if interrupted");
  app.add_option("--reduction", c.reduction, "exact (rank-independent) | native (float MPI_Allreduce)")
      ->check(CLI::IsMember({"exact", "native"}));
  app.add_option("--fault-tolerance", c.fault_tolerance,
                 "what a lost rank does: abort (end the job) | shrink (ULFM: continue on the survivors, same bits) | "
                 "restart (exit 75 for scripts/relaunch.sh, which resumes from the newest checkpoint)")
      ->check(CLI::IsMember({"abort", "shrink", "restart"}));
  app.add_option("--inject-failure", c.inject_failure,
                 "kill ranks on purpose: RANK@STEP[:step|allreduce|checkpoint|setup|start|regrow][,...] (MPI_COMM_WORLD ranks; "
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
  app.add_option("--startup-timeout", c.startup_timeout,
                 "seconds MPI's start-up may take before this process ends with exit 76 (a rank that dies while the "
                 "job starts leaves the others waiting in MPI_Init for ever); 0: no limit")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--min-ranks", c.min_ranks, "shrink: end with an error (and a checkpoint) below this many ranks")
      ->check(CLI::PositiveNumber);
  app.add_option("--spares", c.spares,
                 "shrink: the job's last N ranks are spares, held idle and recruited after a failure so that the job "
                 "grows back to its size with the same bits (regrow); 0: none")
      ->check(CLI::NonNegativeNumber);
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
  c.dampening_given = dampening->count() > 0;
  c.layers_given = layers_option->count() > 0;
  for (const CLI::Option* o : adam_options) c.adam_options_given = c.adam_options_given || o->count() > 0;
  if (version) {
    print_version();
    return 0;
  }
  if (!dump.empty()) {
    std::size_t used = 0;
    try {
      c.dump_step = std::stol(dump[0], &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != dump[0].size() || c.dump_step < 0) {
      std::fprintf(stderr, "train_mlp: error: --dump-step: '%s' is not a step number (want --dump-step N DIR)\n",
                   dump[0].c_str());
      return 2;
    }
    c.dump_dir = dump[1];
  }
  if (c.threads < 0 || c.threads > max_threads()) {
    std::fprintf(stderr,
                 "train_mlp: error: --threads %d: at most %d on this machine (4 per hardware thread, %u here, and at "
                 "least 64)\n",
                 c.threads, max_threads(), std::max(1u, std::thread::hardware_concurrency()));
    return 2;
  }
  int rc = 1;
#if REPROSGD_HAS_MPI
  reprosgd::MpiEnvironment mpi(
      argc, argv, reprosgd::MpiStartOptions{.init_timeout = c.startup_timeout, .finalize_timeout = finalize_seconds});
#endif
  reprosgd::detail::initialize(c.threads, world_rank() != 0);
  try {
    rc = run(c);
  } catch (const reported_error& e) {
    rc = e.rc;
  } catch (const std::exception& e) {
#if REPROSGD_HAS_MPI
    if (!fit_started && is_lost_process(e)) {
      // A rank died while the ranks were setting up, after MPI_Init and before training: the
      // same verdict and exit code as a death inside MPI_Init (relaunch.sh relaunches on it).
      std::fprintf(stderr,
                   "train_mlp: a process of the job failed while the ranks were setting up (%s); exiting with %d so "
                   "that the job is relaunched\n",
                   e.what(), reprosgd::startup_failure_exit_code);
      rc = reprosgd::startup_failure_exit_code;
      peer_died = true;
    } else {
      rc = report_error(e);
    }
#else
    rc = report_error(e);
#endif
  }
#if REPROSGD_HAS_ULFM
  // A run that ends with an error after a rank died earlier (a shrink, then a full disk) knows
  // of the death only through MPI: its MPI_Finalize could hang as well.
  if (!peer_died && rc != 0 && mpi.owner() && !reprosgd::detail::known_failed_ranks(MPI_COMM_WORLD).empty())
    peer_died = true;
#endif
#if REPROSGD_HAS_MPI
  // An error on this rank alone, before any agreement (an allocation that failed here only) leaves
  // the other ranks waiting for this one in a collective, and MPI_Finalize waits for them: the job
  // hung until an outside timeout. After an agreed error every rank reaches MPI_Finalize at once;
  // otherwise mpi's destructor ends this rank without it after a few seconds: under ULFM by
  // SIGKILL, a death the others survive (shrink) or report (abort), elsewhere with rc, and the
  // launcher then ends the job (MpiEnvironment::ending_with_error).
  if (rc != 0 && !peer_died) mpi.ending_with_error(rc);
#endif
  Kokkos::finalize();
  if (peer_died) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(rc);
  }
  return rc;
}
