// SPDX-License-Identifier: BSD-3-Clause
/// @file A layer you write yourself: LearnedScale and Gelu (custom_layers.hpp), plugged into a
/// Sequential through the Layer concept, in three steps:
///
///  1. reprosgd::testing::check_gradients compares each layer's backward with central differences
///     (every parameter and input gradient); one line per layer.
///  2. reprosgd::testing::find_nondeterminism trains a model holding them for a few steps on
///     Kokkos::Serial, on the default host space (2 threads or more: `--kokkos-threads=2`) and on
///     the GPU in a GPU build, and checks that every layer gives the same bits in all of them.
///  3. A Trainer trains Dense -> LearnedScale -> Gelu -> Dense on a synthetic problem and prints
///     `fingerprint <32 hex>` of the model and optimizer state: the same on 1 and 2 threads
///     (tests/examples runs both) and with the whole run on Kokkos::Serial, which the example
///     checks itself when the build has Serial besides its default host backend.
///  4. The same training stopped at step 20, checkpointed, loaded into a new model and finished:
///     the same fingerprint (a user layer's parameters are checkpointed like the library's).
///     Model files (save_model) cannot hold it: they know only the library's layers.
///
/// Exits 0 when all of it holds, 1 otherwise.
#include "custom_layers.hpp"

#include <reprosgd/reprosgd.hpp>
#include <reprosgd/testing/find_nondeterminism.hpp>
#include <reprosgd/testing/gradient_check.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <random>
#include <string>
#include <type_traits>

namespace {

using custom_layers::Gelu;
using custom_layers::LearnedScale;

// 1. One line per layer; false when the check fails.
template <class L>
bool gradient_check(const char* name, const L& layer, const reprosgd::testing::GradientCheckOptions& options) {
  const auto r = reprosgd::testing::check_gradients(layer, /*in_width=*/8, options);
  if (!r.passed) {
    std::printf("gradient check %s: FAILED\n%s\n", name, r.describe().c_str());
    return false;
  }
  std::printf("gradient check %s: ok (worst relative error %.1e, %s %zu)\n", name, r.worst.error, r.worst.kind.c_str(),
              r.worst.index);
  return true;
}

// 2. The model find_nondeterminism trains, made in each variant's memory space. A named function
// object rather than a lambda: nvcc cannot name a lambda held in a variable template.
struct MakeModel {
  template <class Space>
  auto operator()(const Space&) const {
    return reprosgd::make_sequential<typename Space::memory_space>(reprosgd::Dense{12, 16}, LearnedScale{}, Gelu{},
                                                                   reprosgd::Dense{16, 5});
  }
};

bool deterministic() {
  const reprosgd::testing::NondeterminismOptions options{.rows = 32, .micro_batches = 2, .steps = 3, .seed = 7};
  const auto report = reprosgd::testing::find_nondeterminism_on_every_space(MakeModel{}, options);
  std::printf("%s\n", report.message().c_str());
  return report.deterministic();
}

// 3. Train on Space: 20 features, 4 classes; 64 samples a step in micro-batches of 16, Adam.
template <class Space>
auto make_model() {
  return reprosgd::make_sequential<typename Space::memory_space>(reprosgd::Dense{20, 32}, LearnedScale{}, Gelu{},
                                                                 reprosgd::Dense{32, 4});
}
template <class Space>
reprosgd::Trainer<reprosgd::Serial<Space>> make_trainer(long steps) {
  return reprosgd::Trainer<reprosgd::Serial<Space>>({.global_batch = 64, .micro_batch = 16, .steps = steps, .seed = 42});
}
const reprosgd::Adam adam{{.lr = 1e-2f}};

// 40 steps; the fingerprint of the model and optimizer state.
template <class Space>
reprosgd::Fingerprint train(const reprosgd::TrainTest<>& data, bool report) {
  auto trainer = make_trainer<Space>(40);
  auto model = make_model<Space>();
  auto state = trainer.start(model, adam);
  trainer.fit(model, adam, state, data.train);
  if (report) {
    const reprosgd::EvalMetrics test = trainer.evaluate(model, data.test);
    std::printf("trained %s: test loss %.4f, accuracy %.3f\n", Space::name(), test.loss, test.accuracy);
  }
  return reprosgd::fingerprint(model, state.optimizer);
}

// 4. A checkpoint holds LearnedScale's parameters (and their Adam state) like any others: 20 steps,
// save, load into a new model, the other 20 steps: the fingerprint of the uninterrupted run.
template <class Space>
reprosgd::Fingerprint train_with_restart(const reprosgd::TrainTest<>& data, const std::filesystem::path& file) {
  {
    auto first = make_trainer<Space>(20);
    auto model = make_model<Space>();
    auto state = first.start(model, adam);
    first.fit(model, adam, state, data.train);
    first.save_checkpoint(file, model, adam, state, data.train);
  }
  auto trainer = make_trainer<Space>(40);
  auto model = make_model<Space>();
  auto state = trainer.start(model, adam);
  trainer.load_checkpoint(file, model, adam, state, data.train);
  trainer.fit(model, adam, state, data.train);  // from step 20 to 40
  return reprosgd::fingerprint(model, state.optimizer);
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);  // Kokkos reads --kokkos-threads=N here
  try {
    reprosgd::check_fp_environment();

    // Gelu on inputs in [-3, 3), where it bends (outside it is close to 0 or to x). Both checks
    // run and print, whatever the first says.
    const bool scale_ok = gradient_check("LearnedScale", LearnedScale{}, {});
    const bool gelu_ok = gradient_check("Gelu", Gelu{}, {.input_scale = 3.0f});
    if (!deterministic() || !scale_ok || !gelu_ok) return 1;

    const auto data = reprosgd::make_synthetic_train_test(/*seed=*/42, 512, 128, /*features=*/20, /*classes=*/4,
                                                          {.separation = 0.2f});
    const reprosgd::Fingerprint fp = train<Kokkos::DefaultHostExecutionSpace>(data, true);
#if defined(KOKKOS_ENABLE_SERIAL)
    if constexpr (!std::is_same_v<Kokkos::DefaultHostExecutionSpace, Kokkos::Serial>) {
      const reprosgd::Fingerprint serial = train<Kokkos::Serial>(data, false);
      if (serial != fp) {
        std::fprintf(stderr, "custom_layer: Kokkos::Serial trained %s, %s trained %s\n", serial.hex().c_str(),
                     Kokkos::DefaultHostExecutionSpace::name(), fp.hex().c_str());
        return 1;
      }
      std::printf("Kokkos::Serial: the same fingerprint\n");
    }
#endif
    // The checkpoint goes to a directory of its own (runs may be concurrent), removed afterwards.
    const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                      ("reprosgd_custom_layer_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir);
    const reprosgd::Fingerprint restarted = train_with_restart<Kokkos::DefaultHostExecutionSpace>(data, dir / "step20.ckpt");
    std::filesystem::remove_all(dir);
    if (restarted != fp) {
      std::fprintf(stderr, "custom_layer: stopped at step 20 and resumed: %s, uninterrupted: %s\n",
                   restarted.hex().c_str(), fp.hex().c_str());
      return 1;
    }
    std::printf("checkpoint at step 20, resumed: the same fingerprint\n");
    std::printf("fingerprint %s\n", fp.hex().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_layer: error: %s\n", e.what());
    return 1;
  }
}
