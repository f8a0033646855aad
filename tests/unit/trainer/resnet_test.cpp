// SPDX-License-Identifier: BSD-3-Clause
/// @file A ResNet-style network (batch norm, layer norm, residual blocks, dropout, Adam) through
/// the Trainer: the same bits on every backend and against a pinned golden (other compilers,
/// flags and Kokkos versions run this test in their builds); stop-and-continue and
/// checkpoint-and-resume in every format, running statistics included, equal the uninterrupted
/// run; the running statistics follow their rule, not the optimizer's; it learns.
#include <doctest/doctest.h>

#include <reprosgd/checkpoint/formats.hpp>
#include <reprosgd/fingerprint.hpp>
#include <reprosgd/optim/sgd.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>

#include <support/exec_spaces.hpp>
#include <support/resnet_model.hpp>

#include <unistd.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <string>

namespace {

using reprosgd_test::resnet;
using reprosgd_test::resnet_images;
using reprosgd_test::resnet_optimizer;
using reprosgd_test::resnet_options;

template <class Space>
reprosgd::Fingerprint resnet_fingerprint(reprosgd::TrainerOptions o = resnet_options()) {
  reprosgd::Trainer<reprosgd::Serial<Space>> trainer(o);
  auto model = resnet<typename Space::memory_space>();
  const auto adam = resnet_optimizer();
  auto state = trainer.start(model, adam);
  trainer.fit(model, adam, state, resnet_images().train);
  return reprosgd::fingerprint(model, state.optimizer);
}

struct StopAt {
  std::uint64_t step;
  bool on_step_end(const reprosgd::StepMetrics& m) const { return m.step + 1 == step; }
};

template <class Format>
void resume_in_format(const reprosgd::Fingerprint& whole) {
  using Space = Kokkos::DefaultExecutionSpace;
  using Mem = Space::memory_space;
  const std::string name(Format::name);
  CAPTURE(name);
  const auto adam = resnet_optimizer();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("reprosgd_resnet_ckpt_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto o = resnet_options();
  o.checkpoint_dir = dir.string();
  o.checkpoint_every = 4;
  o.stop_after = 9;
  {
    reprosgd::Trainer<reprosgd::Serial<Space>, reprosgd::PhiloxStream, Format> trainer(o);
    auto model = resnet<Mem>();
    auto state = trainer.start(model, adam);
    CHECK(trainer.fit(model, adam, state, resnet_images().train).stopped_early);
  }
  o.stop_after = 0;
  reprosgd::Trainer<reprosgd::Serial<Space>, reprosgd::PhiloxStream, Format> trainer(o);
  auto model = resnet<Mem>();
  auto state = trainer.start(model, adam);
  const auto r = trainer.resume(model, adam, state, resnet_images().train);
  CHECK(r.resumed);
  CHECK(r.info.step == 9);
  trainer.fit(model, adam, state, resnet_images().train);
  CHECK(reprosgd::fingerprint(model, state.optimizer) == whole);
  std::filesystem::remove_all(dir);
}

}  // namespace

TEST_SUITE("trainer/resnet") {
  TEST_CASE_TEMPLATE_DEFINE("a ResNet-style network trains the same bits on every backend, and the pinned golden", Space,
                            resnet_backend_id) {
    const auto fp = resnet_fingerprint<Space>();
    CHECK(fp == resnet_fingerprint<Kokkos::Serial>());
    REPROSGD_CHECK_FINGERPRINT(fp, reprosgd_test::resnet_golden);
  }
  TEST_CASE_TEMPLATE_APPLY(resnet_backend_id, reprosgd_test::spaces);  // the device too: level L5

  TEST_CASE("stopped and continued, or checkpointed and resumed in every format, it equals the uninterrupted run") {
    using Space = Kokkos::DefaultExecutionSpace;
    const auto whole = resnet_fingerprint<Space>();
    {
      reprosgd::Trainer<reprosgd::Serial<Space>> trainer(resnet_options());
      auto model = resnet<Space::memory_space>();
      const auto adam = resnet_optimizer();
      auto state = trainer.start(model, adam);
      StopAt stop{7};
      CHECK(trainer.fit(model, adam, state, resnet_images().train, stop).stopped_early);
      trainer.fit(model, adam, state, resnet_images().train);
      CHECK(reprosgd::fingerprint(model, state.optimizer) == whole);
    }
    resume_in_format<reprosgd::PortableBinaryFormat>(whole);
    resume_in_format<reprosgd::BinaryFormat>(whole);
    resume_in_format<reprosgd::JsonFormat>(whole);
  }

  TEST_CASE("the running statistics follow their own rule, not the optimizer's") {
    // One step from the same start: every BatchNorm's batch statistics come from the initial
    // parameters, so its running statistics afterwards must be the same bits whatever the
    // optimizer (Adam with L2 decay, or SGD with a large decay and momentum) did to the other
    // slots, and moved from the initial 0 and 1.
    using Mem = Kokkos::HostSpace;
    auto o = resnet_options();
    o.steps = 1;
    auto one_step = [&](const auto& opt) {
      reprosgd::Trainer<reprosgd::Serial<Kokkos::DefaultHostExecutionSpace>> trainer(o);
      auto model = resnet<Mem>();
      auto state = trainer.start(model, opt);
      trainer.fit(model, opt, state, resnet_images().train);
      return model;
    };
    const auto a = one_step(resnet_optimizer());
    const auto b = one_step(reprosgd::Sgd{{.lr = 0.5f, .momentum = 0.9f, .weight_decay = 0.5f}});
    const auto runs = a.statistics_runs();
    REQUIRE(runs.size() == 5);  // three BatchNorm2D (two in the blocks), the projected block's, a BatchNorm1D
    std::size_t moved = 0, checked = 0;
    for (const auto& r : runs) {
      const std::size_t c = r.count / 2;
      for (std::size_t k = 0; k < r.count; ++k) {
        CHECK(std::bit_cast<std::uint32_t>(a.parameters()(r.offset + k)) ==
              std::bit_cast<std::uint32_t>(b.parameters()(r.offset + k)));
        moved += a.parameters()(r.offset + k) != (k < c ? 0.0f : 1.0f);
        ++checked;
      }
    }
    CHECK(moved == checked);
    CHECK(a.parameters()(0) != b.parameters()(0));  // a trained weight: the optimizers differ
  }

  TEST_CASE("a ResNet-style network learns: test accuracy far above chance on the synthetic images") {
    auto o = resnet_options();
    o.steps = 0;
    o.epochs = 5;
    reprosgd::Trainer<reprosgd::Serial<>> trainer(o);
    auto model = resnet<Kokkos::DefaultExecutionSpace::memory_space>();
    const auto adam = resnet_optimizer();
    auto state = trainer.start(model, adam);
    const auto r = trainer.fit(model, adam, state, resnet_images().train, &resnet_images().test);
    MESSAGE("synthetic image test accuracy after 5 epochs (evaluated with the running statistics): "
            << r.last_epoch.test.accuracy);
    CHECK(r.last_epoch.test.accuracy > 0.5);
  }
}
