// SPDX-License-Identifier: BSD-3-Clause
/// @file Trainer: backend independence, split runs equal whole runs, learning, callbacks, errors.
#include <doctest/doctest.h>

#include <reprosgd/data/synthetic.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/optim/adam.hpp>
#include <reprosgd/optim/sgd.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/fingerprint.hpp>
#include <reprosgd/trainer.hpp>

#include <support/exec_spaces.hpp>

#include <cereal/types/vector.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>
#include <limits>
#include <string>

namespace {

using Data = reprosgd::Dataset<Kokkos::HostSpace>;

const reprosgd::TrainTest<Kokkos::HostSpace>& data() {
  // Created once and deliberately never destroyed: Views must not outlive Kokkos::finalize().
  static const auto* d = new reprosgd::TrainTest<Kokkos::HostSpace>(reprosgd::make_synthetic_train_test(5, 1024, 256, 784, 10, {.separation = 0.2f}));
  return *d;
}

template <class Mem = Kokkos::DefaultExecutionSpace::memory_space>
auto small_model() {
  using namespace reprosgd;
  return make_sequential<Mem>(Dense{784, 32}, ReLU{}, Dropout{0.25f}, Dense{32, 16}, Tanh{}, Dense{16, 10});
}

reprosgd::TrainerOptions small_options() {
  reprosgd::TrainerOptions o;
  o.global_batch = 64;
  o.micro_batch = 16;
  o.steps = 40;
  o.seed = 11;
  o.schedule = {.kind = reprosgd::ScheduleKind::cosine, .warmup_steps = 5};
  return o;
}

template <class Space, class Opt>
reprosgd::Fingerprint train_fingerprint(const Opt& opt, reprosgd::TrainerOptions o = small_options()) {
  reprosgd::Trainer<reprosgd::Serial<Space>> trainer(o);
  auto model = small_model<typename Space::memory_space>();
  auto state = trainer.start(model, opt);
  trainer.fit(model, opt, state, data().train);
  return reprosgd::fingerprint(model, state.optimizer);
}

struct StopAt {
  std::uint64_t step;
  std::uint64_t seen = 0;
  bool on_step_end(const reprosgd::StepMetrics& m) {
    seen = m.step;
    return m.step + 1 == step;
  }
};

struct CountEpochs {
  int epochs = 0;
  double last_accuracy = 0.0;
  bool on_epoch_end(const reprosgd::EpochMetrics& m) {
    ++epochs;
    last_accuracy = m.test.accuracy;
    return false;
  }
};

// A smooth regression with 2 targets of 8 features in [-1, 1) (a fixed hash of the indices).
reprosgd::Dataset<Kokkos::HostSpace> regression_data(std::size_t n, std::uint64_t salt) {
  Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> x("x", n, 8), t("t", n, 2);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < 8; ++j) {
      std::uint64_t h = (salt * 1000003 + i * 8 + j) * 0x9E3779B97F4A7C15ull;
      h ^= h >> 29;
      x(i, j) = static_cast<float>(h >> 40) * 0x1p-23f - 1.0f;
    }
    t(i, 0) = 0.5f * x(i, 0) - x(i, 1) + 0.25f * x(i, 2) * x(i, 3);
    t(i, 1) = x(i, 4) + 0.5f * x(i, 5) * x(i, 5);
  }
  return reprosgd::make_regression_dataset(x, t);
}

template <class Space>
auto regression_fit(std::uint64_t steps, reprosgd::EvalMetrics* before = nullptr, reprosgd::EvalMetrics* after = nullptr) {
  using namespace reprosgd;
  static const auto* train = new Dataset<Kokkos::HostSpace>(regression_data(512, 1));
  static const auto* test = new Dataset<Kokkos::HostSpace>(regression_data(128, 2));
  TrainerOptions o;
  o.global_batch = 64;
  o.micro_batch = 16;
  o.steps = static_cast<long>(steps);
  o.seed = 3;
  o.loss = LossKind::mse;
  Trainer<Serial<Space>> trainer(o);
  auto model = make_sequential<typename Space::memory_space>(Dense{8, 32}, Tanh{}, Dense{32, 2});
  const Sgd sgd{{.lr = 0.1f, .momentum = 0.9f}};
  auto state = trainer.start(model, sgd);
  if (before) *before = trainer.evaluate(model, *test);
  trainer.fit(model, sgd, state, *train, test);
  if (after) *after = trainer.evaluate(model, *test);
  return fingerprint(model, state.optimizer);
}

}  // namespace

TEST_SUITE("trainer") {
  TEST_CASE_TEMPLATE_DEFINE("regression (MSE on float targets) learns and trains the same bits on every backend", Space,
                            regression_id) {
    reprosgd::EvalMetrics before, after;
    const auto fp = regression_fit<Space>(200, &before, &after);
    CHECK(fp == regression_fit<Kokkos::Serial>(200));
    CHECK(after.regression);
    CHECK(after.count == 128);
    CHECK(after.accuracy == 0.0);
    CHECK(after.rmse == std::sqrt(after.loss));
    CHECK(before.r2 < 0.5);
    CHECK(after.r2 > 0.9);
    CHECK(after.loss < 0.2 * before.loss);
  }
  TEST_CASE_TEMPLATE_APPLY(regression_id, reprosgd_test::spaces);

  TEST_CASE("regression metrics: known answer, and the data checks") {
    using namespace reprosgd;
    // A model that outputs 0 (all parameters 0) on targets 1, 2, 3, 4: MSE 7.5, SST 5, R^2 1 - 30/5.
    Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> x("x", 4, 1), t("t", 4, 1);
    for (int i = 0; i < 4; ++i) t(i, 0) = static_cast<float>(i + 1);
    const auto d = make_regression_dataset(x, t);
    TrainerOptions o;
    o.global_batch = 4;
    o.micro_batch = 2;
    o.eval_micro_batch = 3;  // a short last micro-batch
    o.loss = LossKind::mse;
    Trainer<Serial<>> trainer(o);
    Sequential model{Dense{1, 1}};
    const Sgd sgd{{.lr = 0.1f}};
    auto state = trainer.start(model, sgd);
    Kokkos::deep_copy(model.parameters(), 0.0f);
    const EvalMetrics m = trainer.evaluate(model, d);
    CHECK(m.regression);
    CHECK(m.loss == 7.5);
    CHECK(m.rmse == std::sqrt(7.5));
    CHECK(m.r2 == -5.0);
    // Softmax cross-entropy needs labels; the targets must match the outputs.
    Trainer<Serial<>> ce(TrainerOptions{.global_batch = 4, .micro_batch = 2});
    CHECK_THROWS_WITH_AS(ce.fit(model, sgd, state, d),
                         "reprosgd::Trainer: the train data has 1 regression target(s) per sample: train with "
                         "LossKind::mse (softmax cross-entropy needs class labels)",
                         config_error);
    Sequential wide{Dense{1, 3}};
    auto wide_state = trainer.start(wide, sgd);
    CHECK_THROWS_WITH_AS(trainer.fit(wide, sgd, wide_state, d),
                         "reprosgd::Trainer: the train data has 1 target(s) per sample but the model has 3 outputs",
                         config_error);
    // A classification test set for a regression, and a step dump of a regression.
    Kokkos::View<std::int32_t*, Kokkos::HostSpace> y("y", 4);
    const auto labelled = make_dataset(x, y, 1);
    CHECK_THROWS_WITH_AS(trainer.fit(model, sgd, state, d, &labelled),
                         "reprosgd::Trainer::fit: the train data has regression targets but the test data class labels",
                         config_error);
    const auto dir = std::filesystem::temp_directory_path() / ("reprosgd_regression_dump_" + std::to_string(::getpid()));
    TrainerOptions od = o;
    od.dump_step = 0;
    od.dump_dir = dir.string();
    Trainer<Serial<>> dumping(od);
    auto dump_state = dumping.start(model, sgd);
    CHECK_THROWS_WITH_AS(dumping.fit(model, sgd, dump_state, d),
                         "reprosgd::Trainer::fit: dump_step writes class labels; a regression data set's step cannot be "
                         "dumped (compare traces at level tensor instead)",
                         config_error);
    CHECK_FALSE(std::filesystem::exists(dir));
  }

  TEST_CASE_TEMPLATE_DEFINE("every backend trains the same bits (Adam, dropout, cosine, shuffle)", Space, backend_id) {
    const reprosgd::Adam adam{{.lr = 2e-3f}};
    CHECK(train_fingerprint<Space>(adam) == train_fingerprint<Kokkos::Serial>(adam));
    const reprosgd::Sgd sgd{{.lr = 0.05f, .momentum = 0.9f, .nesterov = true, .weight_decay = 1e-4f}};
    CHECK(train_fingerprint<Space>(sgd) == train_fingerprint<Kokkos::Serial>(sgd));
  }
  TEST_CASE_TEMPLATE_APPLY(backend_id, reprosgd_test::spaces);  // the device too: level L5

  TEST_CASE("the same program twice gives the same bits; another seed does not") {
    const reprosgd::AdamW adamw{{.lr = 1e-3f, .weight_decay = 0.01f}};
    const auto a = train_fingerprint<Kokkos::DefaultExecutionSpace>(adamw);
    CHECK(a == train_fingerprint<Kokkos::DefaultExecutionSpace>(adamw));
    auto o = small_options();
    o.seed = 12;
    CHECK_FALSE(a == train_fingerprint<Kokkos::DefaultExecutionSpace>(adamw, o));
  }

  TEST_CASE("stopping and continuing with the same state equals one uninterrupted run") {
    using Space = Kokkos::DefaultExecutionSpace;
    const reprosgd::Adam adam{{.lr = 2e-3f}};
    reprosgd::Trainer<reprosgd::Serial<Space>> trainer(small_options());
    auto model = small_model<typename Space::memory_space>();
    auto state = trainer.start(model, adam);
    StopAt stop{23};
    const auto first = trainer.fit(model, adam, state, data().train, stop);
    CHECK(first.stopped_early);
    CHECK(state.step == 23);
    const auto second = trainer.fit(model, adam, state, data().train);
    CHECK(second.steps == 40);
    CHECK(reprosgd::fingerprint(model, state.optimizer) == train_fingerprint<Space>(adam));
  }

  TEST_CASE("training learns: test accuracy far above chance on the synthetic set") {
    auto o = small_options();
    o.steps = 0;
    o.epochs = 3;
    o.schedule = {};
    reprosgd::Trainer<reprosgd::Serial<>> trainer(o);
    auto model = small_model();
    const reprosgd::Adam adam{{.lr = 2e-3f}};
    auto state = trainer.start(model, adam);
    CountEpochs epochs;
    const auto r = trainer.fit(model, adam, state, data().train, &data().test, epochs);
    CHECK(epochs.epochs == 3);
    CHECK(r.epochs == 3);
    CHECK(r.last_epoch.evaluated);
    MESSAGE("synthetic test accuracy after 3 epochs: " << epochs.last_accuracy);
    CHECK(epochs.last_accuracy > 0.5);
    const auto e = trainer.evaluate(model, data().test);
    CHECK(e.count == 256);
    CHECK(e.accuracy == epochs.last_accuracy);
  }

  TEST_CASE("bad configurations are refused before any work, with the reason") {
    auto o = small_options();
    o.global_batch = 100;
    o.micro_batch = 16;
    auto make = [](const reprosgd::TrainerOptions& opts) { reprosgd::Trainer<reprosgd::Serial<>> t(opts); };
    CHECK_THROWS_WITH_AS(make(o),
                         "reprosgd::Trainer: global batch 100 is not divisible by micro-batch 16", reprosgd::config_error);
    CHECK(reprosgd::Trainer<reprosgd::Serial<>>::check(o) == reprosgd::errc::invalid_configuration);
    CHECK_FALSE(reprosgd::Trainer<reprosgd::Serial<>>::check(small_options()));
    o = small_options();
    o.micro_batch = 0;
    CHECK_THROWS_WITH_AS(make(o), "reprosgd::Trainer: micro_batch must be > 0, got 0",
                         reprosgd::config_error);

    reprosgd::Trainer<reprosgd::Serial<>> trainer(small_options());
    reprosgd::Sequential wrong{reprosgd::Dense{100, 10}};
    const reprosgd::Sgd sgd{{.lr = 0.1f}};
    auto state = trainer.start(wrong, sgd);
    CHECK_THROWS_WITH_AS(trainer.fit(wrong, sgd, state, data().train),
                         "reprosgd::Trainer: the train data has 784 features but the model's first layer expects 100",
                         reprosgd::config_error);
    auto model = small_model();
    const reprosgd::Sgd bad{{.lr = 0.0f}};
    CHECK_THROWS_WITH_AS((void)trainer.start(model, bad), "reprosgd::Sgd: lr must be a finite number > 0, got 0",
                         reprosgd::config_error);
    auto o2 = small_options();
    o2.global_batch = 2048;
    o2.micro_batch = 16;
    reprosgd::Trainer<reprosgd::Serial<>> big(o2);
    auto s2 = big.start(model, sgd);
    CHECK_THROWS_WITH_AS(big.fit(model, sgd, s2, data().train),
                         "reprosgd::Trainer::fit: the training set has 1024 samples, fewer than one global batch of 2048",
                         reprosgd::config_error);
  }

  TEST_CASE("a diverging run stops with the step where it diverged") {
    auto o = small_options();
    o.schedule = {};
    reprosgd::Trainer<reprosgd::Serial<>> trainer(o);
    auto model = small_model();
    const reprosgd::Sgd sgd{{.lr = 1e30f}};
    auto state = trainer.start(model, sgd);
    try {
      trainer.fit(model, sgd, state, data().train);
      FAIL("no numerics_error");
    } catch (const reprosgd::numerics_error& e) {
      const std::string what = e.what();
      CHECK(what.find("reprosgd::Trainer::fit: step " + std::to_string(e.step())) == 0);
      CHECK(what.find("training diverged") != std::string::npos);
      CHECK(e.step() >= 1);
      CHECK(state.step == static_cast<std::uint64_t>(e.step()));  // the bad step was not applied
    }
  }

  TEST_CASE("NaN in the data is refused") {
    auto bad = reprosgd::make_synthetic_classification(5, 128, 784, 10);
    bad.features(17, 3) = std::numeric_limits<float>::quiet_NaN();
    reprosgd::Trainer<reprosgd::Serial<>> trainer(small_options());
    auto model = small_model();
    const reprosgd::Sgd sgd{{.lr = 0.1f}};
    auto state = trainer.start(model, sgd);
    CHECK_THROWS_WITH_AS(trainer.fit(model, sgd, state, bad), "reprosgd::validate_finite: NaN in sample 17, feature 3",
                         reprosgd::data_error);
  }
}

namespace {
// A user's own state, saved in the same checkpoint through an ordinary cereal serialize function.
struct UserState {
  int restarts = 0;
  std::vector<double> history;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(cereal::make_nvp("restarts", restarts), cereal::make_nvp("history", history));
  }
};
}  // namespace

TEST_SUITE("trainer/checkpoint") {
  TEST_CASE_TEMPLATE("save, load into a fresh run, continue: the uninterrupted bits and the user's state", F,
                     reprosgd::PortableBinaryFormat, reprosgd::JsonFormat) {
    using Space = Kokkos::DefaultExecutionSpace;
    const reprosgd::Adam adam{{.lr = 2e-3f}};
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("reprosgd_trainer_ckpt_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    {
      reprosgd::Trainer<reprosgd::Serial<Space>> trainer(small_options());
      auto model = small_model<typename Space::memory_space>();
      auto state = trainer.start(model, adam);
      StopAt stop{17};
      trainer.fit(model, adam, state, data().train, stop);
      const UserState mine{3, {0.5, -1.25, 1e-300}};
      trainer.template save_checkpoint<F>(dir / "a.ckpt", model, adam, state, data().train, mine);
    }
    reprosgd::Trainer<reprosgd::Serial<Space>> trainer(small_options());
    auto model = small_model<typename Space::memory_space>();
    auto state = trainer.start(model, adam);
    UserState restored;
    const auto info = trainer.template load_checkpoint<F>(dir / "a.ckpt", model, adam, state, data().train, restored);
    CHECK(info.step == 17);
    CHECK(state.step == 17);
    CHECK(restored.restarts == 3);
    CHECK(restored.history == std::vector<double>{0.5, -1.25, 1e-300});
    trainer.fit(model, adam, state, data().train);
    CHECK(reprosgd::fingerprint(model, state.optimizer) == train_fingerprint<Space>(adam));

    // Another configuration is refused and leaves the run untouched.
    auto other = small_options();
    other.seed = 99;
    reprosgd::Trainer<reprosgd::Serial<Space>> wrong(other);
    auto m2 = small_model<typename Space::memory_space>();
    auto s2 = wrong.start(m2, adam);
    const auto before = reprosgd::fingerprint(m2, s2.optimizer);
    UserState untouched{7, {}};
    CHECK_THROWS_AS(wrong.template load_checkpoint<F>(dir / "a.ckpt", m2, adam, s2, data().train, untouched),
                    reprosgd::checkpoint_error);
    CHECK(untouched.restarts == 7);
    CHECK(reprosgd::fingerprint(m2, s2.optimizer) == before);
    CHECK(s2.step == 0);
    std::filesystem::remove_all(dir);
  }
}

TEST_SUITE("trainer/checkpoint") {
  TEST_CASE("fit() checkpoints every N steps and at a stop; resume() continues to the uninterrupted bits") {
    using Space = Kokkos::DefaultExecutionSpace;
    const reprosgd::Sgd sgd{{.lr = 0.05f, .momentum = 0.9f}};
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("reprosgd_trainer_fit_ckpt_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    auto o = small_options();
    o.checkpoint_dir = dir.string();
    o.checkpoint_every = 5;
    o.keep_last = 2;
    o.stop_after = 12;
    {
      reprosgd::Trainer<reprosgd::Serial<Space>> trainer(o);
      auto model = small_model<typename Space::memory_space>();
      auto state = trainer.start(model, sgd);
      const auto r = trainer.fit(model, sgd, state, data().train);
      CHECK(r.stopped_early);
      CHECK(state.step == 12);
    }
    // keep_last = 2: the checkpoints of steps 10 and 12 remain (5 was pruned).
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{".reprosgd-writer.lock", "ckpt-000000000010.rsgd", "ckpt-000000000012.rsgd"});

    o.stop_after = 0;
    reprosgd::Trainer<reprosgd::Serial<Space>> trainer(o);
    auto model = small_model<typename Space::memory_space>();
    auto state = trainer.start(model, sgd);
    const auto r = trainer.resume(model, sgd, state, data().train);
    CHECK(r.resumed);
    CHECK(r.info.step == 12);
    CHECK(r.skipped.empty());
    trainer.fit(model, sgd, state, data().train);
    CHECK(state.step == 40);
    CHECK(reprosgd::fingerprint(model, state.optimizer) == train_fingerprint<Space>(sgd));
    CHECK(std::filesystem::exists(dir / "ckpt-000000000040.rsgd"));  // the end of fit() is saved too
    std::filesystem::remove_all(dir);
  }
}
