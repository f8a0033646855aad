// SPDX-License-Identifier: BSD-3-Clause
/// @file A small CNN on Fashion-MNIST through the Trainer, for the CNN contract tests
/// (tests/cnn/CMakeLists.txt):
///
///   fashion_mnist_cnn [--epochs 5] [--steps N] [--train-samples N] [--require-accuracy 0.91]
///                     [--stop-at-accuracy 0.91]
///                     [--parallel serial|data|model|hybrid] [--backend host|serial] [--seed 1]
///                     [--batch 32] [--micro-batch 8] [--lr 1e-3] [--no-standardize] [Kokkos options]
///
/// conv(32, 3x3, pad 1) relu maxpool(2) conv(64, 3x3, pad 1) relu maxpool(2) flatten dense(128)
/// relu dropout(0.3) dense(10), Adam 1e-3 with a cosine schedule, global batch 32 in micro-batches
/// of 8, every pixel standardised with the training set's statistics. Prints one line per epoch
/// (test accuracy, seconds) and last `fingerprint <hex>`. --stop-at-accuracy A ends the training
/// after the first epoch whose test accuracy reaches A (the learning-rate schedule still spans
/// --epochs; the stop is the Trainer's agreed one, so every rank stops at the same epoch). --parallel data|model runs the Trainer on DataParallel
/// or ModelParallel over MPI_COMM_WORLD (an MPI build); every one prints the same fingerprint.
/// Exit 0; 1 when the test accuracy is below --require-accuracy; 2 on a bad option; 77 (CTest's
/// skip) when the Fashion-MNIST files are not installed (Debian's dataset-fashion-mnist).
#include <reprosgd/reprosgd.hpp>
#if REPROSGD_HAS_MPI
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/hybrid.hpp>
#include <reprosgd/parallel/mpi_environment.hpp>
#include <mpi.h>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace {

struct Args {
  long epochs = 5, steps = 0, train_samples = 0, batch = 32, micro_batch = 8;
  float lr = 1e-3f;
  bool standardize = true;
  double require_accuracy = 0.0;
  double stop_at_accuracy = 0.0;  // 0: train every epoch
  std::string parallel = "serial";
  std::string backend = "host";
  std::uint64_t seed = 1;
};

template <class Mem>
auto fashion_cnn() {
  using namespace reprosgd;
  return make_sequential<Mem>(Conv2D{{1, 28, 28}, 32, 3, 1, 1}, ReLU{}, MaxPool2D{{32, 28, 28}, 2},  // 32x14x14
                              Conv2D{{32, 14, 14}, 64, 3, 1, 1}, ReLU{}, MaxPool2D{{64, 14, 14}, 2},  // 64x7x7
                              Flatten{{64, 7, 7}}, Dense{64 * 7 * 7, 128}, ReLU{}, Dropout{0.3f}, Dense{128, 10});
}

/// Prints each epoch's test accuracy and time on rank 0; asks the Trainer to stop once the test
/// accuracy reaches `stop_at` (when positive).
struct EpochLog {
  int rank = 0;
  double stop_at = 0.0;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double last_accuracy = 0.0;
  bool on_epoch_end(const reprosgd::EpochMetrics& m) {
    last_accuracy = m.test.accuracy;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rank == 0)
      std::printf("epoch %ld train_loss %.4f test_acc %.4f elapsed %.1f s\n", static_cast<long>(m.epoch + 1),
                  m.train_loss, m.test.accuracy, s);
    std::fflush(stdout);
    return stop_at > 0.0 && m.test.accuracy >= stop_at;
  }
};

template <class Par>
int train(const Args& a, reprosgd::TrainTest<Kokkos::HostSpace>& data, Par par) {
  using namespace reprosgd;
  TrainerOptions o;
  o.global_batch = a.batch;
  o.micro_batch = a.micro_batch;
  o.epochs = a.epochs;
  o.steps = a.steps;
  o.seed = a.seed;
  o.evaluate_each_epoch = a.steps == 0;
  o.schedule = {.kind = ScheduleKind::cosine};
  Trainer<Par> trainer(o, std::move(par));
  auto model = fashion_cnn<typename Trainer<Par>::memory_space>();
  const Adam adam{{.lr = a.lr}};
  auto state = trainer.start(model, adam);
  EpochLog log{trainer.parallelism().rank(), a.stop_at_accuracy};
  trainer.fit(model, adam, state, data.train, &data.test, log);
  const double accuracy = a.steps == 0 ? log.last_accuracy : trainer.evaluate(model, data.test).accuracy;
  const std::string fp = trainer.fingerprint(model, state).hex();  // collective: a sharded model is gathered
  if (trainer.parallelism().rank() == 0) {
    std::printf("test_acc %.4f\nfingerprint %s\n", accuracy, fp.c_str());
    std::fflush(stdout);
  }
  if (accuracy < a.require_accuracy) {
    if (trainer.parallelism().rank() == 0)
      std::fprintf(stderr, "fashion_mnist_cnn: test accuracy %.4f is below the required %.4f\n", accuracy,
                   a.require_accuracy);
    return 1;
  }
  return 0;
}

int run(const Args& a) {
  auto data = reprosgd::load_fashion_mnist();
  if (a.train_samples > 0 && static_cast<std::size_t>(a.train_samples) < data.train.size()) {
    const auto n = static_cast<std::size_t>(a.train_samples);
    auto cut = data.train;
    cut.features = Kokkos::subview(data.train.features, std::make_pair(std::size_t{0}, n), Kokkos::ALL());
    cut.labels = Kokkos::subview(data.train.labels, std::make_pair(std::size_t{0}, n));
    data.train = cut;
  }
  if (a.standardize) {
    // Each pixel standardised with the training set's mean and deviation (docs/data.md).
    const auto stats = reprosgd::compute_normalization(data.train);
    reprosgd::apply_normalization(data.train, stats);
    reprosgd::apply_normalization(data.test, stats);
  }
  using Space = Kokkos::DefaultHostExecutionSpace;
  if (a.backend == "serial" && a.parallel == "serial") return train(a, data, reprosgd::Serial<Kokkos::Serial>{});
  if (a.backend != "host") {
    std::fprintf(stderr, "fashion_mnist_cnn: --backend %s: only host (the default host space) and serial (with "
                 "--parallel serial)\n", a.backend.c_str());
    return 2;
  }
  if (a.parallel == "serial") return train(a, data, reprosgd::Serial<Space>{});
#if REPROSGD_HAS_MPI
  if (a.parallel == "data") return train(a, data, reprosgd::DataParallel<Space>{});
  if (a.parallel == "model") return train(a, data, reprosgd::ModelParallel<Space>{});
  if (a.parallel == "hybrid") {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size % 2 != 0) {
      std::fprintf(stderr, "fashion_mnist_cnn: --parallel hybrid runs a P/2 x 2 grid: it needs an even rank count\n");
      return 2;
    }
    return train(a, data, reprosgd::Hybrid<Space>{reprosgd::GridShape{size / 2, 2}});
  }
#endif
  std::fprintf(stderr, "fashion_mnist_cnn: --parallel %s is not available in this build\n", a.parallel.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
#if REPROSGD_HAS_MPI
  reprosgd::MpiEnvironment mpi(argc, argv);
#endif
  Kokkos::ScopeGuard kokkos(argc, argv);
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fashion_mnist_cnn: %s needs a value\n", s.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (s == "--epochs") a.epochs = std::stol(next());
    else if (s == "--steps") a.steps = std::stol(next());
    else if (s == "--train-samples") a.train_samples = std::stol(next());
    else if (s == "--require-accuracy") a.require_accuracy = std::stod(next());
    else if (s == "--stop-at-accuracy") a.stop_at_accuracy = std::stod(next());
    else if (s == "--parallel") a.parallel = next();
    else if (s == "--backend") a.backend = next();
    else if (s == "--seed") a.seed = std::stoull(next());
    else if (s == "--batch") a.batch = std::stol(next());
    else if (s == "--micro-batch") a.micro_batch = std::stol(next());
    else if (s == "--lr") a.lr = std::stof(next());
    else if (s == "--no-standardize") a.standardize = false;
    else if (s.rfind("--kokkos", 0) == 0) continue;
    else {
      std::fprintf(stderr, "fashion_mnist_cnn: unknown option %s\n", s.c_str());
      return 2;
    }
  }
  try {
    return run(a);
  } catch (const reprosgd::io_error& e) {
    std::fprintf(stderr, "fashion_mnist_cnn: skipped: %s\n", e.what());
    return 77;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist_cnn: error: %s\n", e.what());
    return 1;
  }
}
