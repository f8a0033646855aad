// SPDX-License-Identifier: BSD-3-Clause
/// @file Quick start: the README's code snippet as a whole program.
///
/// Trains a small MLP (20 -> 32 -> 4, ReLU, dropout, Adam) on a synthetic classification problem
/// for a few steps with the Serial<> parallelism (one process, Kokkos's default execution space on
/// as many threads as Kokkos was given) and prints `fingerprint <32 hex digits>`: a hash of the
/// parameters and the optimizer state. Run it with any thread count
/// (`quick_start --kokkos-threads=1`, `--kokkos-threads=2`, ...): the fingerprint is the same.
#include <reprosgd/reprosgd.hpp>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);  // Kokkos reads --kokkos-threads=N here
  try {
    // Refuse a floating-point environment that would change bits (FTZ/DAZ, contraction, x87).
    reprosgd::check_fp_environment();

    // 512 training and 128 test samples, 20 features, 4 classes: the same bits on every machine.
    const auto data = reprosgd::make_synthetic_train_test(/*seed=*/42, 512, 128, /*features=*/20,
                                                          /*classes=*/4, {.separation = 0.2f});

    // 40 steps of 64 samples, each step summed over micro-batches of 16 in a fixed order.
    reprosgd::Trainer<reprosgd::Serial<>> trainer({.global_batch = 64, .micro_batch = 16, .steps = 40, .seed = 42});
    reprosgd::Sequential model{reprosgd::Dense{20, 32}, reprosgd::ReLU{}, reprosgd::Dropout{0.1f},
                               reprosgd::Dense{32, 4}};
    reprosgd::Adam adam{{.lr = 1e-2f}};
    auto state = trainer.start(model, adam);  // parameters drawn from the seed
    trainer.fit(model, adam, state, data.train, &data.test);  // any threads, any backend: same bits

    const reprosgd::EvalMetrics test = trainer.evaluate(model, data.test);
    std::printf("test loss %.4f, accuracy %.3f\n", test.loss, test.accuracy);
    std::printf("fingerprint %s\n", reprosgd::fingerprint(model, state.optimizer).hex().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quick_start: error: %s\n", e.what());
    return 1;
  }
}
