// SPDX-License-Identifier: BSD-3-Clause
/// @file Trainer::train_steps on a SampleStream: steps interleaved with appends give the same bits on
/// every host backend and however the steps are grouped, a stop and restart equals no stop, errors.
#include <doctest/doctest.h>

#include <reprosgd/data/sample_stream.hpp>
#include <reprosgd/fingerprint.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/optim/adam.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/trainer.hpp>

#include <support/exec_spaces.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace {

using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;

constexpr std::uint64_t cells = 48;  // the "simulation": one sample per cell per time step

// Cell c's state at time step t: features (position, time, a field) and the expensive term to learn.
void cell_sample(std::uint64_t t, std::uint64_t c, float* x, float* y) {
  const float p = static_cast<float>(c) / cells, tau = 0.05f * static_cast<float>(t);
  x[0] = p;
  x[1] = std::sin(tau);
  x[2] = std::cos(6.0f * p + tau);
  y[0] = std::tanh(2.0f * x[2]) * (0.5f + 0.5f * x[1]);
}

reprosgd::TrainerOptions online_options() {
  reprosgd::TrainerOptions o;
  o.global_batch = 32;
  o.micro_batch = 8;
  o.seed = 5;
  o.loss = reprosgd::LossKind::mse;
  return o;
}

auto surrogate() {
  using namespace reprosgd;
  return make_sequential<Kokkos::HostSpace>(Dense{3, 16}, Tanh{}, Dense{16, 1});
}

reprosgd::SampleStream<Kokkos::HostSpace> make_stream() {
  return reprosgd::SampleStream<Kokkos::HostSpace>(
      {.capacity = 200, .features = 3, .targets = 1, .replacement = reprosgd::Replacement::reservoir, .seed = 9});
}

// Time step t's samples, offered in the order `rotate` says (a different decomposition each time).
template <class Space>
void simulate_step(reprosgd::SampleStream<Kokkos::HostSpace>& stream, std::uint64_t t, std::uint64_t rotate) {
  Kokkos::View<std::uint64_t*, Kokkos::HostSpace> ids("ids", cells);
  Matrix x("x", cells, 3), y("y", cells, 1);
  for (std::uint64_t i = 0; i < cells; ++i) {
    const std::uint64_t c = (i + rotate) % cells;
    ids(i) = t * cells + c;
    cell_sample(t, c, &x(i, 0), &y(i, 0));
  }
  stream.append(Space(), ids, x, y);
}

// A run of `time_steps` simulation steps, training `k` steps after each from time step 2 on.
// With `restart_at`, the run is stopped after that time step (trainer, model and stream saved)
// and continued by fresh objects loaded from the checkpoint.
template <class Space>
reprosgd::Fingerprint online_run(std::uint64_t time_steps, long k, std::uint64_t rotate, std::uint64_t restart_at = 0) {
  using namespace reprosgd;
  const Adam adam{{.lr = 3e-3f}};
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("reprosgd_online_" + std::to_string(::getpid()) + ".ckpt");
  std::optional<Trainer<Serial<Space>>> trainer(std::in_place, online_options());
  auto model = surrogate();
  auto state = trainer->start(model, adam);
  auto stream = make_stream();
  for (std::uint64_t t = 0; t < time_steps; ++t) {
    simulate_step<Space>(stream, t, rotate * t);
    if (t >= 2) trainer->train_steps(model, adam, state, stream, k);
    if (restart_at != 0 && t == restart_at) {  // the job ends here; a new one starts from the file
      trainer->save_checkpoint(file, model, adam, state, stream, stream);
      const std::uint64_t saved_step = state.step;
      const std::vector<std::uint64_t> saved_ids = stream.ids();
      trainer.emplace(online_options());
      model = surrogate();
      state = trainer->start(model, adam);
      stream = make_stream();
      const SnapshotInfo info = trainer->load_checkpoint(file, model, adam, state, stream, stream);
      CHECK(info.step == saved_step);
      CHECK(state.step == saved_step);
      CHECK(stream.ids() == saved_ids);
      std::filesystem::remove(file);
    }
  }
  return fingerprint(model, state.optimizer);
}

}  // namespace

TEST_SUITE("trainer") {
  TEST_CASE_TEMPLATE_DEFINE("train_steps on a stream: the same bits on every host backend, in any row order, "
                            "and after a stop and restart",
                            Space, online_id) {
    const auto reference = online_run<Kokkos::DefaultHostExecutionSpace>(12, 3, 0);
    CHECK(online_run<Space>(12, 3, 0) == reference);
    CHECK(online_run<Space>(12, 3, 17) == reference);     // each time step's cells offered in another order
    CHECK(online_run<Space>(12, 3, 5, 6) == reference);   // stopped after time step 6 and restarted
    CHECK(online_run<Space>(12, 2, 0) != reference);      // fewer steps per time step: another run
  }
  TEST_CASE_TEMPLATE_APPLY(online_id, reprosgd_test::host_spaces);

  TEST_CASE("train_steps: how steps are grouped into calls does not matter; the surrogate learns") {
    using namespace reprosgd;
    using Space = Kokkos::DefaultHostExecutionSpace;
    const Adam adam{{.lr = 3e-3f}};
    auto run = [&](std::vector<long> calls, EvalMetrics* before, EvalMetrics* after) {
      Trainer<Serial<Space>> trainer(online_options());
      auto model = surrogate();
      auto state = trainer.start(model, adam);
      auto stream = make_stream();
      for (std::uint64_t t = 0; t < 8; ++t) simulate_step<Space>(stream, t, 0);
      // Fresh samples the stream never held: time step 50.
      auto fresh = make_stream();
      simulate_step<Space>(fresh, 50, 0);
      if (before) *before = trainer.evaluate(model, fresh.contents());
      for (long k : calls) trainer.train_steps(model, adam, state, stream, k);
      if (after) *after = trainer.evaluate(model, fresh.contents());
      CHECK(state.step == 400);
      return fingerprint(model, state.optimizer);
    };
    EvalMetrics before, after;
    const auto whole = run({400}, &before, &after);
    CHECK(run({1, 99, 150, 150}, nullptr, nullptr) == whole);
    CHECK(after.regression);
    CHECK(after.loss < 0.2 * before.loss);
  }

  TEST_CASE("train_steps: too few samples, a bad step count and a cosine schedule without an end are refused") {
    using namespace reprosgd;
    using Space = Kokkos::DefaultHostExecutionSpace;
    const Adam adam{{.lr = 3e-3f}};
    Trainer<Serial<Space>> trainer(online_options());
    auto model = surrogate();
    auto state = trainer.start(model, adam);
    auto stream = make_stream();
    const auto untouched = fingerprint(model, state.optimizer);
    CHECK_THROWS_WITH_AS(trainer.train_steps(model, adam, state, stream, 1),
                         "reprosgd::SampleStream: a step needs 32 samples but the stream holds 0 (of capacity 200); "
                         "append more before training",
                         data_error);
    simulate_step<Space>(stream, 0, 0);
    CHECK_THROWS_WITH_AS(trainer.train_steps(model, adam, state, stream, 0),
                         "reprosgd::Trainer::train_steps: steps must be at least 1, got 0", config_error);
    auto cosine = online_options();
    cosine.schedule = {.kind = ScheduleKind::cosine};
    Trainer<Serial<Space>> endless(cosine);
    CHECK_THROWS_WITH_AS(endless.train_steps(model, adam, state, stream, 5),
                         "reprosgd::Trainer::train_steps: a cosine schedule needs total_steps on a stream (it has no "
                         "epochs to count them from)",
                         config_error);
    CHECK(fingerprint(model, state.optimizer) == untouched);
    CHECK(state.step == 0);
    // A checkpoint of an online run names the stream's capacity, not a data set's size.
    const auto d = trainer.describe(model, adam, stream);
    CHECK(std::find(d.begin(), d.end(), std::pair<std::string, std::string>{"stream_capacity", "200"}) != d.end());
  }
}
