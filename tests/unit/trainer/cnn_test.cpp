// SPDX-License-Identifier: BSD-3-Clause
/// @file A convolutional network through the Trainer: the same bits on every backend (the device's
/// too where the build has one) and against a pinned golden (other compilers, flags and Kokkos
/// versions run this test in their builds), stop-and-continue and checkpoint-and-resume equal the
/// uninterrupted run, and it learns.
#include <doctest/doctest.h>

#include <reprosgd/data/synthetic.hpp>
#include <reprosgd/fingerprint.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/conv2d.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>
#include <reprosgd/nn/flatten.hpp>
#include <reprosgd/nn/pool2d.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/optim/adam.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>
#include <reprosgd/trainer.hpp>

#include <support/exec_spaces.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>

namespace {

// 1x10x9 "images" (90 features of the synthetic set): a height and width the pools do not divide.
const reprosgd::TrainTest<Kokkos::HostSpace>& images() {
  // Created once and deliberately never destroyed: Views must not outlive Kokkos::finalize().
  static const auto* d = new reprosgd::TrainTest<Kokkos::HostSpace>(
      reprosgd::make_synthetic_train_test(7, 512, 128, 90, 10, {.separation = 0.5f}));
  return *d;
}

// conv, max pool, a 1x1 convolution, a strided padded convolution, average pool, global average
// pool, dropout, dense: every image layer, odd sizes throughout.
template <class Mem>
auto cnn() {
  using namespace reprosgd;
  return make_sequential<Mem>(Conv2D{{1, 10, 9}, 6, 3, 1, 1}, ReLU{}, MaxPool2D{{6, 10, 9}, 2},  // 6x5x4
                              Conv2D{{6, 5, 4}, 5, 1}, Tanh{},                                    // 5x5x4
                              Conv2D{{5, 5, 4}, 7, 3, 2, 1}, ReLU{},                              // 7x3x2
                              AvgPool2D{{7, 3, 2}, 2, 1, 1}, Flatten{{7, 4, 3}}, Dropout{0.2f},   // 84
                              Dense{84, 10});
}

reprosgd::TrainerOptions cnn_options() {
  reprosgd::TrainerOptions o;
  o.global_batch = 32;
  o.micro_batch = 8;
  o.steps = 24;
  o.seed = 21;
  return o;
}

template <class Space>
reprosgd::Fingerprint cnn_fingerprint(reprosgd::TrainerOptions o = cnn_options()) {
  reprosgd::Trainer<reprosgd::Serial<Space>> trainer(o);
  auto model = cnn<typename Space::memory_space>();
  const reprosgd::Adam adam{{.lr = 3e-3f}};
  auto state = trainer.start(model, adam);
  trainer.fit(model, adam, state, images().train);
  return reprosgd::fingerprint(model, state.optimizer);
}

struct StopAt {
  std::uint64_t step;
  bool on_step_end(const reprosgd::StepMetrics& m) const { return m.step + 1 == step; }
};

// Pinned on g++ 12 -O1 and -O3 -march=native, Kokkos 3.4.1 OpenMP and Serial (x86-64, Zen 4).
constexpr const char* cnn_golden = "ef497c63774d95e7a166de33d8a7d359";

}  // namespace

TEST_SUITE("trainer/cnn") {
  TEST_CASE_TEMPLATE_DEFINE("a CNN trains the same bits on every backend, and the pinned golden", Space, cnn_backend_id) {
    const auto fp = cnn_fingerprint<Space>();
    CHECK(fp == cnn_fingerprint<Kokkos::Serial>());
    REPROSGD_CHECK_FINGERPRINT(fp, cnn_golden);
  }
  TEST_CASE_TEMPLATE_APPLY(cnn_backend_id, reprosgd_test::spaces);  // the device too: level L5

  TEST_CASE("a CNN stopped and continued, or checkpointed and resumed, equals the uninterrupted run") {
    using Space = Kokkos::DefaultExecutionSpace;
    using Mem = Space::memory_space;
    const reprosgd::Adam adam{{.lr = 3e-3f}};
    const auto whole = cnn_fingerprint<Space>();
    {
      reprosgd::Trainer<reprosgd::Serial<Space>> trainer(cnn_options());
      auto model = cnn<Mem>();
      auto state = trainer.start(model, adam);
      StopAt stop{11};
      CHECK(trainer.fit(model, adam, state, images().train, stop).stopped_early);
      trainer.fit(model, adam, state, images().train);
      CHECK(reprosgd::fingerprint(model, state.optimizer) == whole);
    }
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("reprosgd_cnn_ckpt_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    auto o = cnn_options();
    o.checkpoint_dir = dir.string();
    o.checkpoint_every = 5;
    o.stop_after = 13;
    {
      reprosgd::Trainer<reprosgd::Serial<Space>> trainer(o);
      auto model = cnn<Mem>();
      auto state = trainer.start(model, adam);
      CHECK(trainer.fit(model, adam, state, images().train).stopped_early);
    }
    o.stop_after = 0;
    reprosgd::Trainer<reprosgd::Serial<Space>> trainer(o);
    auto model = cnn<Mem>();
    auto state = trainer.start(model, adam);
    const auto r = trainer.resume(model, adam, state, images().train);
    CHECK(r.resumed);
    CHECK(r.info.step == 13);
    trainer.fit(model, adam, state, images().train);
    CHECK(reprosgd::fingerprint(model, state.optimizer) == whole);
    std::filesystem::remove_all(dir);
  }

  TEST_CASE("an image data set of another shape is refused with one line naming the layer and both shapes") {
    using Mem = Kokkos::DefaultExecutionSpace::memory_space;
    reprosgd::Trainer<reprosgd::Serial<>> trainer(cnn_options());
    auto model = cnn<Mem>();
    const reprosgd::Adam adam{{.lr = 3e-3f}};
    auto state = trainer.start(model, adam);
    auto transposed = images().train;  // the same 90 floats a sample, declared 1x9x10
    transposed.sample_shape = {1, 9, 10};
    CHECK_THROWS_WITH_AS(trainer.fit(model, adam, state, transposed),
                         "reprosgd::Trainer: the train data's samples are 1x9x10 images but the model's first layer, "
                         "conv2d(1x10x9,6,k3,s1,p1,he), expects 1x10x9",
                         reprosgd::config_error);
    CHECK(state.step == 0);  // refused before any work
    transposed.sample_shape = {1, 10, 9};  // the shape it expects
    auto o = cnn_options();
    o.steps = 1;
    reprosgd::Trainer<reprosgd::Serial<>> one(o);
    CHECK(one.fit(model, adam, state, transposed).steps == 1);
  }

  TEST_CASE("a CNN learns: test accuracy far above chance on the synthetic images") {
    auto o = cnn_options();
    o.steps = 0;
    o.epochs = 6;
    reprosgd::Trainer<reprosgd::Serial<>> trainer(o);
    auto model = cnn<Kokkos::DefaultExecutionSpace::memory_space>();
    const reprosgd::Adam adam{{.lr = 3e-3f}};
    auto state = trainer.start(model, adam);
    const auto r = trainer.fit(model, adam, state, images().train, &images().test);
    MESSAGE("synthetic image test accuracy after 6 epochs: " << r.last_epoch.test.accuracy);
    CHECK(r.last_epoch.test.accuracy > 0.5);
  }
}
