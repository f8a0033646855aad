// SPDX-License-Identifier: BSD-3-Clause
/// @file The determinism trace (trainer/trace.hpp): every step's line, the layer fingerprints
/// against a direct computation on the trained state, the same bytes on every backend and for a
/// run split by a stop and a second fit(), what a resumed run keeps of an older file, and — without
/// MPI, with the in-process fakes of recovery_test and sharded_recovery_test — the same bytes (less
/// one failure line) after a failure in each stage of a step, and for a model split over ranks that
/// lose a shard, the trace's writer, or a rank in the trace's own gather.
#include <doctest/doctest.h>

#include <reprosgd/data/synthetic.hpp>
#include <reprosgd/fingerprint.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/optim/adam.hpp>
#include <reprosgd/optim/sgd.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/trainer.hpp>
#include <reprosgd/trainer/trace.hpp>

#include <support/exec_spaces.hpp>
#include <support/fake_recoverable.hpp>
#include <support/fiber_world.hpp>

#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <algorithm>
#include <cmath>

namespace {

namespace fs = std::filesystem;

const reprosgd::TrainTest<Kokkos::HostSpace>& data() {
  // Created once and never destroyed: Views must not outlive Kokkos::finalize().
  static const auto* d =
      new reprosgd::TrainTest<Kokkos::HostSpace>(reprosgd::make_synthetic_train_test(7, 512, 96, 784, 10, {.separation = 0.2f}));
  return *d;
}

template <class Mem>
auto small_model() {
  using namespace reprosgd;
  return make_sequential<Mem>(Dense{784, 24}, ReLU{}, Dropout{0.2f}, Dense{24, 16}, Tanh{}, Dense{16, 10});
}

// The trace fingerprint's tree (trainer/trace_fingerprints.hpp), written out from its definition:
// XXH3-128 of each 64 KiB chunk of a tensor's bytes, and of the chunks' canonical digests.
XXH128_hash_t tree_of(const float* data, std::size_t count) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(data);
  const std::size_t n = count * sizeof(float), chunk = 65536;
  std::vector<XXH128_canonical_t> digests;
  for (std::size_t at = 0; at < n; at += chunk) {
    digests.emplace_back();
    XXH128_canonicalFromHash(&digests.back(), XXH3_128bits(bytes + at, std::min(chunk, n - at)));
  }
  return XXH3_128bits(digests.data(), digests.size() * sizeof(XXH128_canonical_t));
}
std::string hex_of(XXH128_hash_t h) { return reprosgd::Fingerprint{h.high64, h.low64}.hex(); }

// The whole state's trace fingerprint from its definition: the parameters' layer tensors, then
// each optimizer buffer's layer tensors or a scalar's bytes, in visit() order.
template <class Model, class State>
std::string reference_state(const Model& model, const State& state) {
  XXH3_state_t whole;
  XXH3_128bits_reset(&whole);
  auto tensors = [&](const auto& v) {
    const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    for (std::size_t l = 0; l < Model::depth; ++l) {
      const std::size_t b = model.canonical_parameter_offset(l), e = model.canonical_parameter_offset(l + 1);
      if (b == e) continue;
      XXH128_canonical_t c;
      XXH128_canonicalFromHash(&c, tree_of(host.data() + b, e - b));
      XXH3_128bits_update(&whole, &c, sizeof c);
    }
  };
  tensors(model.parameters());
  state.visit([&](const char*, const auto& x) {
    if constexpr (Kokkos::is_view<std::remove_cvref_t<decltype(x)>>::value) {
      if (x.extent(0) > 0) tensors(x);
    } else {
      XXH3_128bits_update(&whole, &x, sizeof x);
    }
  });
  return hex_of(XXH3_128bits_digest(&whole));
}

reprosgd::TrainerOptions options(const std::string& trace, reprosgd::TraceLevel level) {
  reprosgd::TrainerOptions o;
  o.global_batch = 64;
  o.micro_batch = 16;
  o.epochs = 2;  // 8 steps per epoch
  o.seed = 5;
  o.trace = trace;
  o.trace_level = level;
  return o;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}
// The text of "key":"value" in a line (the value of the first such key).
std::string string_field(const std::string& line, const std::string& key) {
  const std::string k = "\"" + key + "\":\"";
  const auto at = line.find(k);
  if (at == std::string::npos) return {};
  const auto end = line.find('"', at + k.size());
  return line.substr(at + k.size(), end - at - k.size());
}
// The part of a step line that belongs to layer `l` ({"layer":l,...}).
std::string layer_part(const std::string& line, std::size_t l) {
  const std::string k = "{\"layer\":" + std::to_string(l) + ",";
  const auto at = line.find(k);
  if (at == std::string::npos) return {};
  return line.substr(at, line.find("}}", at) + 2 - at);
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("reprosgd_trace_test_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// An optimizer that keeps a copy of the gradient it was given (and applies plain SGD): the
/// reduced gradient of the last step, to compare the trace's gradient fingerprints with.
struct GradientKeeper {
  float lr = 0.05f;
  template <class MemSpace>
  struct state_type {
    reprosgd::Buffer<MemSpace> kept;
    std::uint64_t steps = 0;
    template <class F>
    void visit(F&& f) const {
      f("kept", kept);
      f("steps", steps);
    }
    template <class F>
    void visit(F&& f) {
      f("kept", kept);
      f("steps", steps);
    }
  };
  static constexpr const char* name() noexcept { return "gradient_keeper"; }
  [[nodiscard]] float base_lr() const noexcept { return lr; }
  [[nodiscard]] std::string describe() const { return "gradient_keeper"; }
  void check() const {}
  template <class MemSpace>
  [[nodiscard]] state_type<MemSpace> init(std::size_t n) const {
    return {reprosgd::Buffer<MemSpace>("kept", n), 0};
  }
  template <class ExecSpace, class MemSpace, class P, class G>
  void step(const ExecSpace& space, state_type<MemSpace>& state, const P& params, const G& grads, float rate) const {
    // Host memory only (the tests below train on host spaces): a plain loop, no device lambda.
    static_assert(Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible);
    Kokkos::deep_copy(space, state.kept, grads);
    space.fence();
    float* p = params.data();
    const float* g = grads.data();
    for (long i = 0; i < static_cast<long>(params.extent(0)); ++i) p[i] = p[i] - rate * g[i];
    ++state.steps;
  }
};

// The trace less its failure lines, and how many there were.
std::pair<std::string, int> without_failures(const std::string& trace) {
  std::string out;
  int failures = 0;
  for (const std::string& l : lines_of(trace)) {
    if (l.rfind("{\"event\":\"failure\",", 0) == 0) {
      ++failures;
      continue;
    }
    out += l + "\n";
  }
  return {out, failures};
}

// The sharded runs: 32 features, feature chunks of 4 (every Dense layer splits over up to 6 ranks),
// 8 steps an epoch, buddy snapshots every 4 steps (sharded_recovery_test's setup).
const reprosgd::TrainTest<Kokkos::HostSpace>& narrow_data() {
  static const auto* d =
      new reprosgd::TrainTest<Kokkos::HostSpace>(reprosgd::make_synthetic_train_test(11, 512, 96, 32, 10, {.separation = 0.3f}));
  return *d;
}
template <class Mem>
auto chunked_model() {
  using namespace reprosgd;
  return make_sequential<Mem>(Dense{32, 24, Init::he_normal, 4}, ReLU{}, Dropout{0.2f}, Dense{24, 10, Init::xavier_uniform, 4});
}
reprosgd::TrainerOptions sharded_options(const std::string& trace) {
  auto o = options(trace, reprosgd::TraceLevel::layer);
  o.eval_micro_batch = 32;
  o.buddy_every = 4;
  return o;
}

}  // namespace

TEST_SUITE("trainer/trace") {
  TEST_CASE("layer level: each layer's fingerprints are those of its slices of the trained state") {
    using Space = Kokkos::DefaultHostExecutionSpace;
    TempDir tmp;
    const auto trace = (tmp.path / "adam.trace").string();
    reprosgd::Trainer<reprosgd::Serial<Space>> trainer(options(trace, reprosgd::TraceLevel::layer));
    auto model = small_model<Space::memory_space>();
    reprosgd::Adam adam{{.lr = 2e-3f}};
    auto state = trainer.start(model, adam);
    trainer.fit(model, adam, state, data().train, &data().test);
    const auto lines = lines_of(read_file(trace));
    REQUIRE(lines.size() == 1 + 16 + 2);  // the header, 16 steps, an evaluation after each epoch
    CHECK(lines[0].rfind("{\"trace\":\"reprosgd\",\"version\":2,\"level\":\"layer\",\"layers\":[{\"layer\":0,"
                         "\"description\":\"dense(784,24,he)\",\"parameters\":18840}",
                         0) == 0);
    CHECK(lines[0].find("\"config\":{\"layer.0\":\"dense(784,24,he)\"") != std::string::npos);
    CHECK(lines[1].rfind("{\"event\":\"step\",\"step\":0,\"epoch\":0,\"micro_batches\":[0,4],\"loss_bits\":\"", 0) == 0);
    CHECK(lines[9].rfind("{\"event\":\"evaluation\",\"step\":7,\"epoch\":0,\"samples\":96,", 0) == 0);
    const std::string last = lines[17];
    CHECK(last.rfind("{\"event\":\"step\",\"step\":15,\"epoch\":1,\"micro_batches\":[60,64],", 0) == 0);
    CHECK(lines[18].rfind("{\"event\":\"evaluation\",\"step\":15,\"epoch\":1,", 0) == 0);
    // The whole state: its trace fingerprint, as defined and as the library computes it; not
    // Trainer::fingerprint, a sequential XXH3 of the same bytes.
    CHECK(string_field(last, "state") == reference_state(model, state.optimizer));
    CHECK(string_field(last, "state") == reprosgd::trace_state_fingerprint(model, state.optimizer).hex());
    CHECK(string_field(last, "state") != trainer.fingerprint(model, state).hex());
    // Each layer with parameters: its slices of the parameters and of Adam's m and v.
    std::size_t traced = 0;
    for (std::size_t l = 0; l < decltype(model)::depth; ++l) {
      const std::size_t b = model.canonical_parameter_offset(l), e = model.canonical_parameter_offset(l + 1);
      const std::string part = layer_part(last, l);
      if (b == e) {
        CHECK(part.empty());
        continue;
      }
      ++traced;
      REQUIRE_FALSE(part.empty());
      auto slice = [&](const auto& v) {
        const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
        return hex_of(tree_of(host.data() + b, e - b));
      };
      CHECK(string_field(part, "parameters") == slice(model.parameters()));
      CHECK(string_field(part, "m") == slice(state.optimizer.m));
      CHECK(string_field(part, "v") == slice(state.optimizer.v));
    }
    CHECK(traced == 3);
  }

  TEST_CASE("layer level: the gradient fingerprints are those of the reduced gradient the optimizer was given") {
    using Space = Kokkos::DefaultHostExecutionSpace;
    TempDir tmp;
    const auto trace = (tmp.path / "keeper.trace").string();
    auto o = options(trace, reprosgd::TraceLevel::layer);
    o.epochs = 1;
    reprosgd::Trainer<reprosgd::Serial<Space>> trainer(o);
    auto model = small_model<Space::memory_space>();
    GradientKeeper keeper;
    auto state = trainer.start(model, keeper);
    trainer.fit(model, keeper, state, data().train);
    const auto lines = lines_of(read_file(trace));
    REQUIRE(lines.size() == 1 + 8);
    const std::string last = lines.back();
    std::size_t checked = 0;
    for (std::size_t l = 0; l < decltype(model)::depth; ++l) {
      const std::size_t b = model.canonical_parameter_offset(l), e = model.canonical_parameter_offset(l + 1);
      if (b == e) continue;
      const std::string part = layer_part(last, l);
      const std::string direct = hex_of(tree_of(state.optimizer.kept.data() + b, e - b));
      CHECK(string_field(part, "gradient") == direct);
      CHECK(string_field(part, "kept") == direct);
      // A gradient is not the parameters: the two fingerprints are of different bytes.
      CHECK(string_field(part, "parameters") != direct);
      ++checked;
    }
    CHECK(checked == 3);
  }

  TEST_CASE_TEMPLATE_DEFINE("the same trace bytes on every host backend and for a run split by a stop", Space, trace_backends) {
    TempDir tmp;
    auto run = [&](const std::string& name, auto&& space_tag, long stop_at) {
      using S = std::remove_cvref_t<decltype(space_tag)>;
      const auto trace = (tmp.path / name).string();
      auto o = options(trace, reprosgd::TraceLevel::layer);
      o.stop_after = stop_at;
      reprosgd::Trainer<reprosgd::Serial<S>> trainer(o);
      auto model = small_model<typename S::memory_space>();
      reprosgd::Adam adam{{.lr = 2e-3f}};
      auto state = trainer.start(model, adam);
      trainer.fit(model, adam, state, data().train, &data().test);
      if (stop_at > 0) {
        // A second Trainer continues the same state: it appends from step stop_at.
        auto o2 = o;
        o2.stop_after = 0;
        reprosgd::Trainer<reprosgd::Serial<S>> again(o2);
        again.fit(model, adam, state, data().train, &data().test);
      }
      return read_file(trace);
    };
    const std::string reference = run("serial.trace", Kokkos::Serial{}, 0);
    CHECK(lines_of(reference).size() == 19);
    CHECK(run("backend.trace", Space{}, 0) == reference);
    CHECK(run("split.trace", Space{}, 5) == reference);
    CHECK(run("split_at_epoch.trace", Space{}, 8) == reference);
  }
  TEST_CASE_TEMPLATE_APPLY(trace_backends, reprosgd_test::host_spaces);

  TEST_CASE("fingerprints hashed inside the optimizer's update when no CPU is free: the bytes of those hashed behind it") {
    // Kokkos::Serial trains on one thread. With a second CPU in this thread's affinity mask the
    // trace's helper thread hashes each step's state behind the training; with the mask narrowed
    // to one CPU none is free, so the update (step_ranges) hashes each chunk as it writes it. On a
    // one-CPU machine both runs take the second way and the test still checks it against the
    // definition.
    struct OneCpu {  // narrows this thread's affinity mask to its first CPU, for its lifetime
      cpu_set_t saved;
      OneCpu() {
        REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0);
        cpu_set_t one;
        CPU_ZERO(&one);
        for (int c = 0; c < CPU_SETSIZE; ++c)
          if (CPU_ISSET(c, &saved)) {
            CPU_SET(c, &one);
            break;
          }
        REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
      }
      ~OneCpu() { sched_setaffinity(0, sizeof saved, &saved); }
    };
    auto run = [](const std::string& trace, reprosgd::TraceLevel level, const auto& opt, bool one_cpu) {
      std::optional<OneCpu> narrowed;
      if (one_cpu) {
        narrowed.emplace();
        REQUIRE(reprosgd::detail::available_cpus() == 1);
      }
      reprosgd::Trainer<reprosgd::Serial<Kokkos::Serial>> trainer(options(trace, level));
      auto model = small_model<Kokkos::HostSpace>();
      auto state = trainer.start(model, opt);
      trainer.fit(model, opt, state, data().train, &data().test);
      CHECK(string_field(lines_of(read_file(trace)).end()[-2], "state") == reference_state(model, state.optimizer));
      return read_file(trace);
    };
    auto both_ways = [&](const auto& opt) {
      for (const auto level : {reprosgd::TraceLevel::step, reprosgd::TraceLevel::layer}) {
        CAPTURE(static_cast<int>(level));
        TempDir tmp;
        const std::string behind = run((tmp.path / "behind.trace").string(), level, opt, false);
        const std::string inside = run((tmp.path / "inside.trace").string(), level, opt, true);
        CHECK(lines_of(inside).size() == 19);  // the header, 16 steps, 2 evaluations
        CHECK(inside == behind);
      }
    };
    both_ways(reprosgd::Sgd{{.lr = 0.05f, .momentum = 0.9f, .dampening = 0.25f}});  // the first step differs
    both_ways(reprosgd::Adam{{.lr = 2e-3f, .weight_decay = 1e-4f}});
  }

  TEST_CASE("trace fingerprints: the same bits hashed on the calling thread, on Serial and on every host thread") {
    // A layer of 18,840 floats spans two 64 KiB chunks, the second partial; Adam adds two buffers
    // and a scalar. Every way of hashing the chunks gives the same state and layer fingerprints.
    auto model = small_model<Kokkos::HostSpace>();
    reprosgd::Trainer<reprosgd::Serial<Kokkos::DefaultHostExecutionSpace>> trainer(options("", reprosgd::TraceLevel::step));
    reprosgd::Adam adam{{.lr = 2e-3f}};
    auto state = trainer.start(model, adam);
    Kokkos::View<float*, Kokkos::HostSpace> gradient("gradient", model.parameter_count());
    Kokkos::deep_copy(gradient, 0.25f);
    auto plan = [&] {
      reprosgd::detail::TraceFingerprintPlan p(model);
      p.add_parameters(model.parameters());
      p.add_gradient(gradient);
      p.add_optimizer_state(state.optimizer);
      return p;
    };
    auto here = plan(), serial = plan(), team = plan();
    here.hash();
    serial.hash(Kokkos::Serial{});
    team.hash(Kokkos::DefaultHostExecutionSpace{});
    team.drop_buffers();  // the results need the digests only
    CHECK(here.state() == serial.state());
    CHECK(here.state() == team.state());
    CHECK(here.state().hex() == reference_state(model, state.optimizer));
    const auto a = here.layers(), b = team.layers();
    REQUIRE(a.size() == 3);
    REQUIRE(b.size() == 3);
    for (std::size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].layer == b[i].layer);
      CHECK(a[i].parameters == b[i].parameters);
      CHECK(a[i].gradient == b[i].gradient);
      REQUIRE(a[i].optimizer.size() == 2);
      CHECK(a[i].optimizer == b[i].optimizer);
    }
    // One bit of one parameter in the second, partial chunk of layer 0 changes the state and that
    // layer's parameters only.
    model.parameters()(18000) = std::nextafter(model.parameters()(18000), 1.0f);
    auto flipped = plan();
    flipped.hash();
    CHECK(flipped.state() != here.state());
    const auto c = flipped.layers();
    CHECK(c[0].parameters != a[0].parameters);
    CHECK(c[1].parameters == a[1].parameters);
    CHECK(c[0].gradient == a[0].gradient);
  }

  TEST_CASE("step level: one line per step with the whole state's fingerprint, no layers") {
    using Space = Kokkos::DefaultHostExecutionSpace;
    TempDir tmp;
    const auto trace = (tmp.path / "step.trace").string();
    reprosgd::Trainer<reprosgd::Serial<Space>> trainer(options(trace, reprosgd::TraceLevel::step));
    auto model = small_model<Space::memory_space>();
    reprosgd::Sgd sgd{{.lr = 0.05f, .momentum = 0.9f}};
    auto state = trainer.start(model, sgd);
    trainer.fit(model, sgd, state, data().train);
    const auto lines = lines_of(read_file(trace));
    REQUIRE(lines.size() == 17);
    CHECK(lines[0].find("\"level\":\"step\"") != std::string::npos);
    for (std::size_t i = 1; i < lines.size(); ++i) CHECK(lines[i].find("\"layers\"") == std::string::npos);
    CHECK(string_field(lines.back(), "state") == reference_state(model, state.optimizer));
  }

  TEST_CASE("lines written behind the training thread are on disk when fit() returns or throws") {
    // Serial<> has no rank failures, so its lines are hashed and written by the trace's helper
    // thread while the next step runs; fit() waits for them on every way out, an exception too.
    using Space = Kokkos::DefaultHostExecutionSpace;
    struct ThrowAfter {
      std::uint64_t step;
      bool on_step_end(const reprosgd::StepMetrics& m) {
        if (m.step == step) throw std::runtime_error("the user's callback gives up");
        return false;
      }
    };
    for (const auto level : {reprosgd::TraceLevel::step, reprosgd::TraceLevel::layer}) {
      CAPTURE(static_cast<int>(level));
      TempDir tmp;
      const auto trace = (tmp.path / "thrown.trace").string();
      reprosgd::Trainer<reprosgd::Serial<Space>> trainer(options(trace, level));
      auto model = small_model<Space::memory_space>();
      reprosgd::Sgd sgd{{.lr = 0.05f, .momentum = 0.9f}};
      auto state = trainer.start(model, sgd);
      ThrowAfter callback{3};
      CHECK_THROWS_WITH_AS(trainer.fit(model, sgd, state, data().train, callback), "the user's callback gives up",
                           std::runtime_error);
      // The header and the lines of steps 0..3 (each written before its callbacks ran), whole,
      // the last one that of the state fit() left.
      const auto lines = lines_of(read_file(trace));
      REQUIRE(lines.size() == 5);
      CHECK(state.step == 4);
      CHECK(lines.back().find("\"step\":3,") != std::string::npos);
      CHECK(string_field(lines.back(), "state") == reference_state(model, state.optimizer));
    }
  }

  TEST_CASE("a resumed trace keeps the steps before the resume and drops later and torn lines") {
    TempDir tmp;
    const auto path = (tmp.path / "t.trace").string();
    const std::string header = "{\"trace\":\"reprosgd\",\"version\":2,\"level\":\"step\",\"layers\":[],\"config\":{}}\n";
    {
      std::ofstream out(path, std::ios::binary);
      out << header << "{\"event\":\"step\",\"step\":0,\"x\":1}\n{\"event\":\"step\",\"step\":1,\"x\":1}\n"
          << "{\"event\":\"evaluation\",\"step\":1,\"x\":1}\n{\"event\":\"step\",\"step\":2,\"x\":1}\n{\"event\":\"st";
    }
    {
      reprosgd::detail::TraceFile f;
      f.open(path, header, 2);
      f.append("{\"event\":\"step\",\"step\":2,\"x\":2}\n");
      CHECK(f.error().empty());
    }
    CHECK(read_file(path) == header +
                                 "{\"event\":\"step\",\"step\":0,\"x\":1}\n{\"event\":\"step\",\"step\":1,\"x\":1}\n"
                                 "{\"event\":\"evaluation\",\"step\":1,\"x\":1}\n{\"event\":\"step\",\"step\":2,\"x\":2}\n");
    // A fresh run (step 0) replaces the file.
    {
      reprosgd::detail::TraceFile f;
      f.open(path, header, 0);
    }
    CHECK(read_file(path) == header);
    // Another configuration's trace is not continued.
    reprosgd::detail::TraceFile f;
    const std::string other = "{\"trace\":\"reprosgd\",\"version\":2,\"level\":\"layer\",\"layers\":[],\"config\":{}}\n";
    CHECK_THROWS_AS(f.open(path, other, 3), reprosgd::config_error);
    // A trace that cannot be written is an io_error.
    CHECK_THROWS_AS(f.open((tmp.path / "no" / "such" / "dir.trace").string(), header, 0), reprosgd::io_error);
  }

  TEST_CASE("TrainerOptions: a trace level that is not one is refused") {
    auto o = options("", static_cast<reprosgd::TraceLevel>(7));
    CHECK(reprosgd::Trainer<reprosgd::Serial<>>::check_message(o) ==
          "reprosgd::Trainer: trace_level 7 is not a TraceLevel");
    o.trace_level = reprosgd::TraceLevel::tensor;
    CHECK(reprosgd::Trainer<reprosgd::Serial<>>::check_message(o).empty());
  }

  TEST_CASE("TrainerOptions: a step dump needs a step >= 0 and a directory") {
    auto o = options("", reprosgd::TraceLevel::step);
    o.dump_step = -2;
    CHECK(reprosgd::Trainer<reprosgd::Serial<>>::check_message(o) ==
          "reprosgd::Trainer: dump_step must be >= 0 (or -1: no dump), got -2");
    o.dump_step = 3;
    CHECK(reprosgd::Trainer<reprosgd::Serial<>>::check_message(o) == "reprosgd::Trainer: dump_step 3 needs a dump_dir");
    o.dump_dir = "dump";
    CHECK(reprosgd::Trainer<reprosgd::Serial<>>::check_message(o).empty());
  }

  TEST_CASE_TEMPLATE_DEFINE("a failure in each stage of a step: every step's line once, and one failure line", Space,
                            trace_failure_id) {
    using Par = reprosgd_test::FakeRecoverable<Space>;
    TempDir tmp;
    const auto clean_path = (tmp.path / "clean.trace").string();
    {
      reprosgd::Trainer<reprosgd::Serial<Space>> trainer(options(clean_path, reprosgd::TraceLevel::layer));
      auto model = small_model<typename Space::memory_space>();
      reprosgd::Adam adam{{.lr = 2e-3f}};
      auto state = trainer.start(model, adam);
      trainer.fit(model, adam, state, data().train, &data().test);
    }
    const std::string clean = read_file(clean_path);
    // (collective, occurrence) at step 5, or at step 7 (the end of epoch 0). With a trace, the stop
    // vote stage starts with the agreement on the trace's writes: agree 1 at a plain step, agree 2
    // after the evaluation's closing agree at an epoch end.
    const reprosgd_test::FakeFailure cases[] = {
        {5, "reduce", 1, 2}, {5, "allgather", 1, 2}, {5, "step_completed", 1, 2}, {5, "agree", 1, 2},
        {5, "agree", 2, 2},  {7, "allgather", 3, 2}, {7, "agree", 1, 2},          {7, "agree", 2, 2},
        {7, "agree", 3, 2}};
    for (const auto& f : cases) {
      CAPTURE(f.step);
      CAPTURE(f.op);
      CAPTURE(f.occurrence);
      const auto path = (tmp.path / "faulty.trace").string();
      reprosgd::Trainer<Par, reprosgd::PhiloxStream, reprosgd::PortableBinaryFormat, reprosgd::ShrinkAndContinue> trainer(
          options(path, reprosgd::TraceLevel::layer), Par(4, {f}));
      auto model = small_model<typename Space::memory_space>();
      reprosgd::Adam adam{{.lr = 2e-3f}};
      auto state = trainer.start(model, adam);
      const auto result = trainer.fit(model, adam, state, data().train, &data().test);
      CHECK(trainer.parallelism().failures_thrown() == 1);
      REQUIRE(result.failures.size() == 1);
      const auto [rest, failures] = without_failures(read_file(path));
      CHECK(failures == 1);
      CHECK(rest == clean);
      CHECK(read_file(path).find("{\"event\":\"failure\",\"step\":" + std::to_string(result.failures[0].step) +
                                 ",\"lost_ranks\":[2],\"ranks_before\":4,\"ranks_after\":3,\"restored_from\":\"\","
                                 "\"resumed_from\":0}\n") != std::string::npos);
    }
  }
  TEST_CASE_TEMPLATE_APPLY(trace_failure_id, reprosgd_test::host_spaces);

  TEST_CASE_TEMPLATE_DEFINE("a model split over ranks: the one-process trace, through lost shards, a lost writer and a death in the trace's gather",
                            Space, trace_sharded_id) {
    using Par = reprosgd_test::FiberModelParallel<Space>;
    TempDir tmp;
    const auto one_path = (tmp.path / "one.trace").string();
    {
      reprosgd::Trainer<reprosgd::Serial<Space>> trainer(sharded_options(one_path));
      auto model = chunked_model<typename Space::memory_space>();
      reprosgd::Adam adam{{.lr = 3e-3f}};
      auto state = trainer.start(model, adam);
      trainer.fit(model, adam, state, narrow_data().train, &narrow_data().test);
    }
    const std::string one = read_file(one_path);
    REQUIRE(lines_of(one).size() == 1 + 16 + 2);
    struct Case {
      std::vector<reprosgd_test::FiberFailure> deaths;
      const char* what;
    };
    const Case cases[] = {
        {{}, "no failure"},
        {{{6, "sum_input_gradient", 2, 1}}, "rank 1 in step 6's backward: steps 4 and 5 replayed from the buddy snapshot"},
        {{{6, "gather_features", 2, 0}}, "rank 0, the trace's writer, in step 6: its successor appends"},
        {{{6, "gather_to_root", 2, 2}}, "rank 2 in the gather of step 6's trace line: the stage is redone"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.what);
      const auto path = (tmp.path / "sharded.trace").string();
      reprosgd_test::FiberWorld world(3, c.deaths);
      world.run([&](int r) {
        reprosgd::FaultTolerantTrainer<Par> trainer(sharded_options(path), Par(world, r));
        auto model = chunked_model<typename Space::memory_space>();
        reprosgd::Adam adam{{.lr = 3e-3f}};
        auto state = trainer.start(model, adam);
        trainer.fit(model, adam, state, narrow_data().train, &narrow_data().test);
      });
      for (int r = 0; r < 3; ++r)
        if (c.deaths.empty() || r != c.deaths[0].rank) CHECK(world.error(r) == nullptr);
      const auto [rest, failures] = without_failures(read_file(path));
      CHECK(failures == (c.deaths.empty() ? 0 : 1));
      CHECK(rest == one);
    }
  }
  TEST_CASE_TEMPLATE_APPLY(trace_sharded_id, reprosgd_test::host_spaces);
}
