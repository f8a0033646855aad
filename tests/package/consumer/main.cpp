// SPDX-License-Identifier: BSD-3-Clause
/// @file A user's program: trains a tiny model through the public API and prints its fingerprint.
#include <reprosgd/reprosgd.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  reprosgd::check_fp_environment();
  const auto data = reprosgd::make_synthetic_train_test(3, 256, 64, 20, 4, {.separation = 0.2f});
  reprosgd::Trainer<reprosgd::Serial<>> trainer({.global_batch = 32, .micro_batch = 8, .steps = 20, .seed = 3});
  reprosgd::Sequential model{reprosgd::Dense{20, 8}, reprosgd::ReLU{}, reprosgd::Dense{8, 4}};
  const reprosgd::Adam adam{{.lr = 1e-2f}};
  auto state = trainer.start(model, adam);
  trainer.fit(model, adam, state, data.train);
  std::printf("fingerprint %s\n", reprosgd::fingerprint(model, state.optimizer).hex().c_str());
  return 0;
}
