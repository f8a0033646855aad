// SPDX-License-Identifier: BSD-3-Clause
/// @file Model files: the round trip is bitwise in every format, the bytes are a function of the
/// values, with_mlp() builds a file's architecture, a checkpoint's model is extracted with its
/// exact parameters; and every bad file (truncated, flipped, forged sizes, another architecture,
/// a newer version, a checkpoint) is refused with its message, the model untouched.
#include <doctest/doctest.h>

#include <reprosgd/checkpoint/formats.hpp>
#include <reprosgd/data/synthetic.hpp>
#include <reprosgd/inference/architecture.hpp>
#include <reprosgd/inference/model_file.hpp>
#include <reprosgd/inference/predict.hpp>
#include <reprosgd/inference/save_trained.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/optim/adam.hpp>
#include <reprosgd/optim/sgd.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>
#include <reprosgd/trainer.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using reprosgd::Dense;
using reprosgd::Init;
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("reprosgd_model_file_test_" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::vector<unsigned char> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_bytes(const fs::path& p, const std::vector<unsigned char>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

using Host = Kokkos::DefaultHostExecutionSpace;

// train_mlp's shape: Dense, activation, dropout, Dense; in host memory (model files are read and
// written on the host whatever the model's space).
auto make_mlp() {
  return reprosgd::make_sequential<Kokkos::HostSpace>(Dense{9, 20, Init::he_normal, 8},
                                                      reprosgd::ActivationFn{reprosgd::Activation::tanh},
                                                      reprosgd::Dropout{0.1f}, Dense{20, 4, Init::xavier_uniform});
}
using Mlp = decltype(make_mlp());

Mlp trained_mlp() {
  Mlp m = make_mlp();
  m.initialize(Host(), reprosgd::PhiloxStream(11));
  return m;
}

reprosgd::Normalization some_normalization() {
  reprosgd::Normalization n;
  for (int j = 0; j < 9; ++j) {
    n.inputs.mean.push_back(0.25f * static_cast<float>(j) - 1.0f);
    n.inputs.std_dev.push_back(j == 3 ? 0.0f : 0.5f + static_cast<float>(j));
  }
  n.outputs.mean = {1.0f, 2.0f, -3.0f, 0.1f};
  n.outputs.std_dev = {0.5f, 4.0f, 1e-3f, 0.0f};
  return n;
}

using all_formats = std::tuple<reprosgd::PortableBinaryFormat, reprosgd::BinaryFormat, reprosgd::JsonFormat>;

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const reprosgd::error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a reprosgd::error: ") + e.what();
  }
  return "no error";
}

/// A snapshot header holding `config` (set field by field: -Wextra warns on partial designated initialisers).
reprosgd::SnapshotInfo info_of(reprosgd::ConfigDescription config) {
  reprosgd::SnapshotInfo info;
  info.config = std::move(config);
  return info;
}

/// A payload that claims a parameter View of `count` elements and holds `padding` bytes instead.
struct ForgedPayload {
  std::uint64_t count;
  std::size_t padding = 0;
  template <class Archive>
  void save(Archive& ar) const {
    reprosgd::detail::ViewShape shape;
    shape.rank = 1;
    shape.extents[0] = count;
    ar(cereal::make_nvp("parameters", shape));
    const std::vector<unsigned char> pad(padding, 0);
    if (padding > 0) ar(cereal::binary_data(pad.data(), pad.size()));
  }
};

}  // namespace

TEST_SUITE("inference/model_file") {
  TEST_CASE_TEMPLATE_DEFINE("round trip: bitwise, in every format, and the same bytes twice", F, round_trip) {
    TempDir dir;
    const Mlp model = trained_mlp();
    const reprosgd::Normalization norm = some_normalization();
    const fs::path path = dir / "model.rsgdm";
    reprosgd::save_model<F>(path, model, norm, 77);
    reprosgd::save_model<F>(dir / "again.rsgdm", model, norm, 77);
    CHECK(read_bytes(path) == read_bytes(dir / "again.rsgdm"));

    Mlp loaded = make_mlp();  // zero parameters
    const reprosgd::Normalization back = reprosgd::load_model(path, loaded);
    REPROSGD_CHECK_BITWISE_EQUAL(loaded.parameters(), model.parameters());
    CHECK(back == norm);

    const reprosgd::ModelInfo info = reprosgd::read_model_info(path);
    CHECK(info.snapshot.format_name == std::string(F::name));
    CHECK(info.snapshot.step == 77);
    CHECK(info.version == reprosgd::model_file_version);
    CHECK(info.layers == model.describe());
    CHECK(info.architecture.input_width == 9);
    CHECK(info.architecture.output_width == 4);
    CHECK(info.architecture.parameter_count == model.parameter_count());
    CHECK(info.input_normalization);
    CHECK(info.output_normalization);

    const reprosgd::ModelFile file = reprosgd::read_model_file(path);
    CHECK(file.layers == model.describe());
    CHECK(file.step == 77);
    CHECK(file.normalization == norm);
    REPROSGD_CHECK_BITWISE_EQUAL(file.parameters, model.parameters());
    // Written again from what was read: the same bytes.
    reprosgd::write_model_file<F>(dir / "copy.rsgdm", file);
    CHECK(read_bytes(dir / "copy.rsgdm") == read_bytes(path));

    // No normalisation at all.
    reprosgd::save_model<F>(dir / "plain.rsgdm", model);
    Mlp plain = make_mlp();
    const reprosgd::Normalization none = reprosgd::load_model(dir / "plain.rsgdm", plain);
    CHECK_FALSE(none.has_inputs());
    CHECK_FALSE(none.has_outputs());
    REPROSGD_CHECK_BITWISE_EQUAL(plain.parameters(), model.parameters());
  }
  TEST_CASE_TEMPLATE_APPLY(round_trip, all_formats);

  TEST_CASE("with_mlp builds the file's architecture; its predictions are the original model's bits") {
    TempDir dir;
    const Mlp model = trained_mlp();
    const reprosgd::Normalization norm = some_normalization();
    reprosgd::save_model(dir / "m.rsgdm", model, norm);
    Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> x("x", 17, 9), want("want", 17, 4), got("got", 17, 4);
    for (int i = 0; i < 17; ++i)
      for (int j = 0; j < 9; ++j) x(i, j) = static_cast<float>((i * 7 + j * 3) % 11) - 5.0f;
    reprosgd::predict(Host(), model, x, want, norm);
    const reprosgd::ModelInfo info = reprosgd::read_model_info(dir / "m.rsgdm");
    const int depth = reprosgd::with_mlp<Kokkos::HostSpace>(info.architecture, [&](auto built) {
      const reprosgd::Normalization n = reprosgd::load_model(dir / "m.rsgdm", built);
      reprosgd::predict(Host(), built, x, got, n);
      return static_cast<int>(decltype(built)::depth);
    });
    CHECK(depth == 4);
    REPROSGD_CHECK_BITWISE_EQUAL(got, want);
    // An architecture with_mlp does not build.
    reprosgd::ModelArchitecture odd = reprosgd::ModelArchitecture::parse({"dense(3,3,he)", "relu", "relu", "dense(3,2,he)"}, "test");
    CHECK(error_of([&] { reprosgd::with_mlp(odd, [](auto) {}); }).starts_with(
        "reprosgd::with_mlp: the architecture [dense(3,3,he), relu, relu, dense(3,2,he)] is not one it builds"));
  }

  TEST_CASE("every truncation and every flipped byte is refused; the model is untouched") {
    TempDir dir;
    auto model = reprosgd::make_sequential<Kokkos::HostSpace>(Dense{3, 2});
    model.initialize(Host(), reprosgd::PhiloxStream(5));
    reprosgd::Normalization norm;
    norm.inputs.mean = {1, 2, 3};
    norm.inputs.std_dev = {1, 1, 2};
    const fs::path good = dir / "good.rsgdm", bad = dir / "bad.rsgdm";
    reprosgd::save_model(good, model, norm);
    const auto bytes = read_bytes(good);
    auto target = reprosgd::make_sequential<Kokkos::HostSpace>(Dense{3, 2});
    const auto refused = [&](const std::string& what) {
      Kokkos::deep_copy(target.parameters(), 42.0f);
      const std::string msg = error_of([&] { (void)reprosgd::load_model(bad, target); });
      INFO(what << ": " << msg);
      CHECK(msg.starts_with("reprosgd::load_model: " + bad.string() + ": "));
      auto p = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), target.parameters());
      for (std::size_t i = 0; i < p.extent(0); ++i) REQUIRE(p(i) == 42.0f);
    };
    for (std::size_t len = 0; len < bytes.size(); ++len) {
      write_bytes(bad, std::vector<unsigned char>(bytes.begin(), bytes.begin() + static_cast<long>(len)));
      refused("truncated to " + std::to_string(len));
    }
    for (std::size_t i = 0; i < bytes.size(); ++i)
      for (const unsigned char mask : {0x01, 0x80}) {
        auto flipped = bytes;
        flipped[i] ^= mask;
        write_bytes(bad, flipped);
        refused("byte " + std::to_string(i) + " xor " + std::to_string(mask));
      }
    // Exact messages of the common cases.
    write_bytes(bad, std::vector<unsigned char>(bytes.begin(), bytes.end() - 5));
    const std::string payload = std::to_string(bytes.size() - reprosgd::read_model_info(good).snapshot.header_bytes);
    CHECK(error_of([&] { (void)reprosgd::load_model(bad, target); }) ==
          "reprosgd::load_model: " + bad.string() + ": truncated: the header announces " + payload +
              " payload bytes, the file holds " + std::to_string(std::stoul(payload) - 5));
    auto flipped = bytes;
    flipped.back() ^= 0x01;
    write_bytes(bad, flipped);
    CHECK(error_of([&] { (void)reprosgd::load_model(bad, target); }).find(
              "payload checksum mismatch") != std::string::npos);
  }

  TEST_CASE("forged sizes, another architecture, a newer version, a checkpoint: clear errors, nothing loaded") {
    TempDir dir;
    const Mlp model = trained_mlp();
    const fs::path path = dir / "m.rsgdm", bad = dir / "bad.rsgdm";
    reprosgd::save_model(path, model);
    Mlp target = make_mlp();
    Kokkos::deep_copy(target.parameters(), 42.0f);
    const auto untouched = [&] {
      auto p = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), target.parameters());
      for (std::size_t i = 0; i < p.extent(0); ++i)
        if (p(i) != 42.0f) return false;
      return true;
    };
    const std::string at = bad.string() + ": ";

    // A valid envelope whose header claims a huge architecture over a tiny payload.
    {
      auto config = reprosgd::detail::model_config({"dense(100000,100000,he)"}, 100000, 100000, false, false);
      reprosgd::save_snapshot<reprosgd::PortableBinaryFormat>(bad, info_of(config), ForgedPayload{8});
      CHECK(error_of([&] { (void)reprosgd::read_model_info(bad); }) ==
            "reprosgd::read_model_info: " + at +
                "the architecture needs 10000100000 floats but the 17-byte payload cannot hold them (a damaged or "
                "forged header; nothing was allocated)");
    }
    // The right architecture, but a parameter View that claims 2^40 elements.
    {
      auto config = reprosgd::detail::model_config(model.describe(), 9, 4, false, false);
      reprosgd::save_snapshot<reprosgd::PortableBinaryFormat>(bad, info_of(config), ForgedPayload{std::uint64_t{1} << 40, 284 * 4});
      const std::string msg = error_of([&] { (void)reprosgd::load_model(bad, target); });
      CHECK(msg.starts_with("reprosgd::load_model: " + at));
      CHECK(msg.find("the checkpoint holds extents 1099511627776, the destination has 284") != std::string::npos);
      CHECK(untouched());
      CHECK(error_of([&] { (void)reprosgd::read_model_file(bad); }).find("extents 1099511627776") != std::string::npos);
    }
    // Another architecture.
    {
      auto other = reprosgd::make_sequential<Kokkos::HostSpace>(Dense{9, 20, Init::he_normal, 8},
                                                                reprosgd::ActivationFn{reprosgd::Activation::tanh},
                                                                reprosgd::Dropout{0.1f}, Dense{20, 5, Init::xavier_uniform});
      CHECK(error_of([&] { (void)reprosgd::load_model(path, other); }) ==
            "reprosgd::load_model: " + path.string() +
                ": the file holds another architecture: layer.3 is dense(20,4,xavier) in the file, dense(20,5,xavier) "
                "in the program");
      auto shorter = reprosgd::make_sequential<Kokkos::HostSpace>(
          Dense{9, 20, Init::he_normal, 8}, reprosgd::ActivationFn{reprosgd::Activation::tanh}, reprosgd::Dropout{0.1f});
      CHECK(error_of([&] { (void)reprosgd::load_model(path, shorter); }) ==
            "reprosgd::load_model: " + path.string() +
                ": the file holds another architecture: layer.3 is dense(20,4,xavier) in the file, absent in the program");
    }
    // A newer model file version.
    {
      reprosgd::ConfigDescription config;
      const reprosgd::ConfigDescription current = reprosgd::detail::model_config(model.describe(), 9, 4, false, false);
      for (const auto& [k, v] : current.entries())
        config.add(k, k == "model_version" ? "2" : v);
      reprosgd::save_snapshot<reprosgd::PortableBinaryFormat>(bad, info_of(config), ForgedPayload{0});
      CHECK(error_of([&] { (void)reprosgd::load_model(bad, target); }) ==
            "reprosgd::load_model: " + at + "written by a newer ReproSGD (model file version 2, this build reads up to 1)");
      CHECK(untouched());
    }
    // Not a model file: a training checkpoint, and a snapshot of something else.
    {
      reprosgd::save_snapshot<reprosgd::PortableBinaryFormat>(
          bad, info_of(reprosgd::ConfigDescription{{"layer.0", "dense(9,20,he)"}, {"optimizer", "sgd(lr=0x1p-2)"}}),
          ForgedPayload{0});
      CHECK(error_of([&] { (void)reprosgd::load_model(bad, target); }) ==
            "reprosgd::load_model: " + at +
                "a training checkpoint, not a model file (extract its model with reprosgd::extract_model, or "
                "`predict --model CHECKPOINT --save-model FILE`)");
      reprosgd::save_snapshot<reprosgd::PortableBinaryFormat>(bad, info_of(reprosgd::ConfigDescription{{"a", "b"}}),
                                                              ForgedPayload{0});
      CHECK(error_of([&] { (void)reprosgd::read_model_info(bad); }) ==
            "reprosgd::read_model_info: " + at + "not a model file (its header has no \"kind\" entry)");
      CHECK(untouched());
    }
    // No such file; a layer this build does not know.
    CHECK(error_of([&] { (void)reprosgd::load_model(dir / "none.rsgdm", target); }) ==
          "reprosgd::load_model: " + (dir / "none.rsgdm").string() + ": no such file");
    {
      auto config = reprosgd::detail::model_config({"dense(9,20,he)", "gelu", "dense(20,4,he)"}, 9, 4, false, false);
      reprosgd::save_snapshot<reprosgd::PortableBinaryFormat>(bad, info_of(config), ForgedPayload{0});
      CHECK(error_of([&] { (void)reprosgd::read_model_info(bad); }) ==
            "reprosgd::read_model_info: " + at + "layer.1 is \"gelu\", not a layer this build knows");
    }
    // Saving: a normalisation of the wrong width, a shard.
    reprosgd::Normalization wrong;
    wrong.outputs.mean = {0, 0};
    wrong.outputs.std_dev = {1, 1};
    CHECK(error_of([&] { reprosgd::save_model(bad, model, wrong); }) ==
          "reprosgd::save_model: the output normalisation has 2 means and 2 standard deviations, the model has 4 outputs");
    Mlp shard = make_mlp();
    shard.shard(1, 2);
    CHECK(error_of([&] { reprosgd::save_model(bad, shard); }).starts_with("reprosgd::save_model: the model is shard 1 of 2"));
  }

  TEST_CASE_TEMPLATE_DEFINE("extract_model: a checkpoint's parameters, bit for bit, for every optimizer and format", F,
                            extract) {
    TempDir dir;
    const auto data = reprosgd::make_synthetic_train_test(3, 256, 64, 9, 4);
    reprosgd::TrainerOptions options;
    options.global_batch = 32;
    options.micro_batch = 16;
    options.steps = 5;
    options.seed = 9;
    reprosgd::Trainer<reprosgd::Serial<Host>> trainer(options);
    const auto run = [&](const auto& opt) {
      Mlp model = make_mlp();
      auto state = trainer.start(model, opt);
      trainer.fit(model, opt, state, data.train);
      const fs::path ckpt = dir / "ckpt.rsgd";
      trainer.template save_checkpoint<F>(ckpt, model, opt, state, data.train);
      const reprosgd::ModelFile m = reprosgd::extract_model(ckpt);
      CHECK(m.layers == model.describe());
      CHECK(m.step == 5);
      CHECK_FALSE(m.normalization.has_inputs());
      REPROSGD_CHECK_BITWISE_EQUAL(m.parameters, model.parameters());
      reprosgd::write_model_file(dir / "m.rsgdm", m);
      Mlp loaded = make_mlp();
      (void)reprosgd::load_model(dir / "m.rsgdm", loaded);
      REPROSGD_CHECK_BITWISE_EQUAL(loaded.parameters(), model.parameters());
      // A model file is its own model.
      REPROSGD_CHECK_BITWISE_EQUAL(reprosgd::extract_model(dir / "m.rsgdm").parameters, model.parameters());
      // A truncated checkpoint is refused.
      auto bytes = read_bytes(ckpt);
      bytes.resize(bytes.size() - 1);
      write_bytes(dir / "cut.rsgd", bytes);
      CHECK(error_of([&] { (void)reprosgd::extract_model(dir / "cut.rsgd"); })
                .starts_with("reprosgd::extract_model: " + (dir / "cut.rsgd").string() + ": truncated"));
    };
    run(reprosgd::Adam{{.lr = 1e-2f}});
    run(reprosgd::AdamW{{.lr = 1e-2f, .weight_decay = 0.01f}});
    run(reprosgd::Sgd{{.lr = 0.05f, .momentum = 0.9f}});
    run(reprosgd::Sgd{{.lr = 0.05f}});
  }
  TEST_CASE_TEMPLATE_APPLY(extract, all_formats);

  TEST_CASE_TEMPLATE_DEFINE("save_trained_model: the trained parameters and step, the bytes of save_model", F,
                            save_trained) {
    TempDir dir;
    const auto data = reprosgd::make_synthetic_train_test(4, 256, 64, 9, 4);
    reprosgd::TrainerOptions options;
    options.global_batch = 32;
    options.micro_batch = 16;
    options.steps = 6;
    options.seed = 21;
    reprosgd::Trainer<reprosgd::Serial<Host>> trainer(options);
    const reprosgd::Adam adam{{.lr = 1e-2f}};
    Mlp model = make_mlp();
    auto state = trainer.start(model, adam);
    trainer.fit(model, adam, state, data.train);
    reprosgd::save_trained_model<F>(trainer, dir / "trained.rsgdm", model, state);
    CHECK(reprosgd::read_model_info(dir / "trained.rsgdm").snapshot.step == 6);
    Mlp loaded = make_mlp();
    (void)reprosgd::load_model(dir / "trained.rsgdm", loaded);
    REPROSGD_CHECK_BITWISE_EQUAL(loaded.parameters(), model.parameters());
    // One process: the same bytes as save_model of the model itself at that step.
    reprosgd::save_model<F>(dir / "direct.rsgdm", model, reprosgd::Normalization{}, 6);
    CHECK(read_bytes(dir / "trained.rsgdm") == read_bytes(dir / "direct.rsgdm"));
    // An unwritable path fails on the (only) rank with the atomic writer's error, nothing written.
    CHECK_THROWS_AS(reprosgd::save_trained_model<F>(trainer, dir / "no" / "such" / "dir" / "m.rsgdm", model, state),
                    reprosgd::io_error);
  }
  TEST_CASE_TEMPLATE_APPLY(save_trained, all_formats);
}
