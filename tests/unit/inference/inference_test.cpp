// SPDX-License-Identifier: BSD-3-Clause
/// @file Inference: the bits of training's forward pass (Sequential::forward in evaluation, and in
/// training mode without dropout) for every row, on every host backend, for every batch, slicing
/// and layout; the scalar reference loop; normalisation applied and inverted with the documented
/// operations; no allocation per call; the shape errors.
#include <doctest/doctest.h>

#include <reprosgd/data/normalize.hpp>
#include <reprosgd/inference/predict.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/rng/philox_stream.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>

#include <support/exec_spaces.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using reprosgd::Dense;
using reprosgd::Init;
using Host = Kokkos::DefaultHostExecutionSpace;
using HostM = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;

// Two feature chunks in the first layer, every activation kind, a dropout in the middle and one at
// the end (so the last computing layer is not the last layer). In memory space Mem (host: the
// reference computations; a device's: the device run).
template <class Mem = Kokkos::HostSpace>
auto make_model() {
  return reprosgd::make_sequential<Mem>(Dense{13, 40, Init::he_normal, 16}, reprosgd::ReLU{}, reprosgd::Dropout{0.25f},
                                        Dense{40, 24, Init::xavier_uniform}, reprosgd::Tanh{}, Dense{24, 6},
                                        reprosgd::Sigmoid{}, reprosgd::Dropout{0.5f});
}
using Model = decltype(make_model());

float value(std::uint64_t i, float scale, std::uint64_t salt = 99) {
  std::uint64_t x = i * 0x9E3779B97F4A7C15ull + salt;
  x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return (static_cast<float>(x >> 40) * 0x1p-24f * 2.0f - 1.0f) * scale;
}

Model trained_model() {
  Model m = make_model();
  m.initialize(Host(), reprosgd::PhiloxStream(7));
  // Non-zero biases, so the bias add is exercised.
  auto p = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m.parameters());
  for (std::size_t i = 0; i < p.extent(0); ++i) p(i) = p(i) + value(i, 0.05f, 3);
  Kokkos::deep_copy(m.parameters(), p);
  return m;
}

HostM inputs(long rows, int cols, float scale = 2.0f) {
  HostM x("x", rows, cols);
  for (long i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) x(i, j) = value(static_cast<std::uint64_t>(i * cols + j), scale);
  return x;
}

/// Training's forward pass over `x` (Sequential::forward in micro-batches of `m` rows, as
/// Trainer::evaluate runs it), `training` set as given, on the host.
template <class M>
HostM training_forward(const M& model, const HostM& x, long m, bool training) {
  const long n = static_cast<long>(x.extent(0));
  auto ws = model.make_workspace(m);
  HostM y("y", n, model.output_width());
  using Exec = Host;
  for (long r0 = 0; r0 < n; r0 += m) {
    const long rows = n - r0 < m ? n - r0 : m;
    auto dst = Kokkos::subview(ws.act.front(), std::make_pair(0L, rows), Kokkos::ALL());
    Kokkos::deep_copy(dst, Kokkos::subview(x, std::make_pair(r0, r0 + rows), Kokkos::ALL()));
    reprosgd::LayerContext<Exec, reprosgd::PhiloxStream> ctx{Exec(), reprosgd::PhiloxStream(7), 0, 3, 0, training};
    model.forward(ctx, ws, rows);
    Exec().fence();
    Kokkos::deep_copy(Kokkos::subview(y, std::make_pair(r0, r0 + rows), Kokkos::ALL()),
                      Kokkos::subview(ws.act.back(), std::make_pair(0L, rows), Kokkos::ALL()));
  }
  return y;
}

/// The reference semantics, one row at a time in plain scalar code: k ascending with one fused
/// multiply-add per step from +0, then + bias; activations from math/; dropout the identity.
HostM reference_forward(const Model& model, const HostM& x) {
  auto p = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model.parameters());
  const long n = static_cast<long>(x.extent(0));
  HostM y("ref", n, model.output_width());
  for (long i = 0; i < n; ++i) {
    std::vector<float> a(x.extent(1));
    for (std::size_t j = 0; j < a.size(); ++j) a[j] = x(i, j);
    const auto dense = [&](std::size_t layer, int in, int out) {
      const float* w = p.data() + model.parameter_offset(layer);
      std::vector<float> o(static_cast<std::size_t>(out));
      for (int j = 0; j < out; ++j) {
        float acc = 0.0f;
        for (int k = 0; k < in; ++k) acc = std::fma(a[static_cast<std::size_t>(k)], w[k * out + j], acc);
        o[static_cast<std::size_t>(j)] = acc + w[in * out + j];
      }
      a = o;
    };
    const auto act = [&](reprosgd::Activation kind) {
      for (float& v : a) v = reprosgd::activate(kind, v);
    };
    dense(0, 13, 40);
    act(reprosgd::Activation::relu);
    dense(3, 40, 24);
    act(reprosgd::Activation::tanh);
    dense(5, 24, 6);
    act(reprosgd::Activation::sigmoid);
    for (int j = 0; j < 6; ++j) y(i, j) = a[static_cast<std::size_t>(j)];
  }
  return y;
}

template <class V>
HostM to_host_right(const V& v) {
  HostM h("h", v.extent(0), v.extent(1));
  auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  for (std::size_t i = 0; i < v.extent(0); ++i)
    for (std::size_t j = 0; j < v.extent(1); ++j) h(i, j) = m(i, j);
  return h;
}

}  // namespace

TEST_SUITE("inference/predict") {
  TEST_CASE("training's forward pass: evaluation mode and training mode without dropout, every micro-batch size") {
    const Model model = trained_model();
    const HostM x = inputs(53, 13);
    const HostM ref = reference_forward(model, x);
    reprosgd::Inference<Model, Host> inference(model);
    HostM y("y", 53, 6);
    inference.predict(x, y);
    Kokkos::fence();
    REPROSGD_CHECK_BITWISE_EQUAL(y, ref);
    for (long m : {1L, 7L, 32L, 53L}) {
      INFO("micro-batch " << m);
      REPROSGD_CHECK_BITWISE_EQUAL(training_forward(model, x, m, false), y);
    }
    // Training mode with dropout p = 0 everywhere: the same bits as inference.
    auto no_dropout = reprosgd::make_sequential<Kokkos::HostSpace>(
        Dense{13, 40, Init::he_normal, 16}, reprosgd::ReLU{}, reprosgd::Dropout{0.0f}, Dense{40, 24, Init::xavier_uniform},
        reprosgd::Tanh{}, Dense{24, 6}, reprosgd::Sigmoid{}, reprosgd::Dropout{0.0f});
    Kokkos::deep_copy(no_dropout.parameters(), model.parameters());
    const HostM t = training_forward(no_dropout, x, 16, true);
    REPROSGD_CHECK_BITWISE_EQUAL(t, y);
    // Training mode with dropout active differs (the test would be vacuous otherwise).
    CHECK_FALSE(reprosgd::first_bitwise_difference(training_forward(model, x, 16, true), y).empty());
  }

  TEST_CASE_TEMPLATE_DEFINE("the same bits on every backend, batch, slicing and layout", Space, every_backend) {
    using Mem = typename Space::memory_space;
    using M = Kokkos::View<float**, Kokkos::LayoutRight, Mem>;
    const Model host_model = trained_model();
    auto model = make_model<Mem>();  // the same parameters, where Space computes
    Kokkos::deep_copy(model.parameters(), host_model.parameters());
    using SpaceModel = decltype(model);
    const HostM xh = inputs(71, 13);
    const HostM ref = reference_forward(host_model, xh);
    const auto x = Kokkos::create_mirror_view_and_copy(Mem(), xh);
    const Space space;
    INFO("backend " << Space::name() << ", concurrency " << reprosgd::detail::concurrency(space));
    for (long batch : {1L, 3L, 5L, 64L, 71L, 200L}) {
      for (bool grow : {true, false}) {
        INFO("batch " << batch << ", grow " << grow);
        reprosgd::Inference<SpaceModel, Space> inference(model, {}, {.batch = batch, .grow = grow});
        M y("y", 71, 6);
        inference.predict(space, x, y);
        space.fence();
        REPROSGD_CHECK_BITWISE_EQUAL(to_host_right(y), ref);
        CHECK(inference.capacity() == (grow && batch < 71 ? 71 : batch));
      }
    }
    // LayoutLeft in and out, a column range of a wider input: through the workspace.
    Kokkos::View<float**, Kokkos::LayoutLeft, Mem> xl("xl", 71, 13), yl("yl", 71, 6);
    Kokkos::deep_copy(xl, x);
    reprosgd::Inference<SpaceModel, Space> inference(model, {}, {.batch = 16, .grow = false});
    inference.predict(space, xl, yl);
    space.fence();
    REPROSGD_CHECK_BITWISE_EQUAL(to_host_right(yl), ref);
    M wide("wide", 71, 20);
    Kokkos::deep_copy(Kokkos::subview(wide, Kokkos::ALL(), std::make_pair(3, 16)), x);
    M y2("y2", 71, 6);
    inference.predict(space, Kokkos::subview(wide, Kokkos::ALL(), std::make_pair(3, 16)), y2);
    space.fence();
    REPROSGD_CHECK_BITWISE_EQUAL(to_host_right(y2), ref);
    // The convenience function.
    M y3("y3", 71, 6);
    reprosgd::predict(space, model, x, y3);
    REPROSGD_CHECK_BITWISE_EQUAL(to_host_right(y3), ref);
  }
  TEST_CASE_TEMPLATE_APPLY(every_backend, reprosgd_test::spaces);

  TEST_CASE("normalisation: inputs as apply_normalization does, outputs inverted with a multiply then an add") {
    const Model model = trained_model();
    const long n = 40;
    HostM raw = inputs(n, 13, 50.0f);
    for (long i = 0; i < n; ++i) raw(i, 4) = 3.0f;  // a constant feature: std 0, only centred
    reprosgd::Normalization norm;
    norm.inputs = reprosgd::compute_normalization(raw);
    CHECK(norm.inputs.std_dev[4] == 0.0f);
    norm.outputs.mean = {1.0f, -2.0f, 0.5f, 0.0f, 10.0f, 3.0f};
    norm.outputs.std_dev = {2.0f, 0.0f, 0.1f, 1.0f, 7.0f, 0.3f};
    // What training saw: the data standardised by apply_normalization.
    Kokkos::View<std::int32_t*, Kokkos::HostSpace> labels("labels", n);
    HostM standardised("std", n, 13);
    Kokkos::deep_copy(standardised, raw);
    reprosgd::apply_normalization(reprosgd::make_dataset(standardised, labels, 1), norm.inputs);
    const HostM model_out = training_forward(model, standardised, 8, false);
    HostM y("y", n, 6);
    reprosgd::Inference<Model, Host> inference(model, norm);
    inference.predict(raw, y);
    Kokkos::fence();
    for (long i = 0; i < n; ++i)
      for (int j = 0; j < 6; ++j) {
        const float d = norm.outputs.std_dev[static_cast<std::size_t>(j)] > 0.0f ? norm.outputs.std_dev[static_cast<std::size_t>(j)] : 1.0f;
        const float scaled = model_out(i, j) * d;
        const float expected = scaled + norm.outputs.mean[static_cast<std::size_t>(j)];
        REQUIRE(std::memcmp(&expected, &y(i, j), sizeof(float)) == 0);
      }
  }

  TEST_CASE("no Kokkos allocation in predict() after the first call (Kokkos Tools' allocation hook)") {
    const Model model = trained_model();
    const HostM x = inputs(30, 13);
    HostM y("y", 30, 6);
    Kokkos::View<float**, Kokkos::LayoutLeft, Kokkos::HostSpace> xl("xl", 30, 13);
    Kokkos::deep_copy(xl, x);
    reprosgd::Inference<Model, Host> inference(model, {}, {.batch = 30});
    inference.predict(x, y);  // first calls: a backend may size its per-thread scratch once
    inference.predict(xl, y);
    inference.predict(Kokkos::subview(x, std::make_pair(0, 1), Kokkos::ALL()), Kokkos::subview(y, std::make_pair(0, 1), Kokkos::ALL()));
    Kokkos::fence();
    static int allocations = 0;
    allocations = 0;
    Kokkos::Tools::Experimental::set_allocate_data_callback(
        [](const Kokkos_Profiling_SpaceHandle, const char*, const void*, const std::uint64_t) { ++allocations; });
    for (int k = 0; k < 5; ++k) {
      inference.predict(x, y);                                      // GEMM path, in place
      inference.predict(xl, y);                                     // through the workspace
      inference.predict(Kokkos::subview(x, std::make_pair(0, 3), Kokkos::ALL()),
                        Kokkos::subview(y, std::make_pair(0, 3), Kokkos::ALL()));  // gemv path
    }
    Kokkos::fence();
    const int during_predict = allocations;
    inference.reserve(100);  // an allocation the hook must see (it works)
    const int during_reserve = allocations - during_predict;
    Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
    CHECK(during_predict == 0);
    CHECK(during_reserve == 2);
  }

  TEST_CASE("no allocation per call once the workspace holds the batch") {
    const Model model = trained_model();
    const HostM x = inputs(30, 13);
    HostM y("y", 30, 6);
    reprosgd::Inference<Model, Host> inference(model, {}, {.batch = 30});
    const std::size_t bytes = inference.workspace_bytes();
    inference.predict(x, y);
    for (int k = 0; k < 3; ++k) inference.predict(Kokkos::subview(x, std::make_pair(0, 10 + k), Kokkos::ALL()),
                                                  Kokkos::subview(y, std::make_pair(0, 10 + k), Kokkos::ALL()));
    CHECK(inference.workspace_bytes() == bytes);
    CHECK(inference.capacity() == 30);
    inference.reserve(100);  // grows once
    CHECK(inference.capacity() == 100);
    CHECK(inference.workspace_bytes() == bytes / 30 * 100);
  }

  TEST_CASE("errors: wrong widths and rows, a shard, a normalisation of the wrong size") {
    Model model = trained_model();
    reprosgd::Inference<Model, Host> inference(model);
    HostM y("y", 4, 6);
    const auto message = [](auto&& f) {
      try {
        f();
      } catch (const reprosgd::config_error& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    CHECK(message([&] { inference.predict(HostM("x", 4, 12), y); }) ==
          "reprosgd::Inference::predict: the input has 12 columns, the model expects 13 inputs");
    CHECK(message([&] { inference.predict(HostM("x", 4, 13), HostM("y", 4, 7)); }) ==
          "reprosgd::Inference::predict: the output has 7 columns, the model gives 6 outputs");
    CHECK(message([&] { inference.predict(HostM("x", 5, 13), y); }) ==
          "reprosgd::Inference::predict: the input has 5 rows, the output 4");
    reprosgd::Normalization bad;
    bad.inputs.mean.assign(12, 0.0f);
    bad.inputs.std_dev.assign(12, 1.0f);
    CHECK(message([&] { reprosgd::Inference<Model, Host> i(model, bad); }) ==
          "reprosgd::Inference: the input normalisation has 12 means and 12 standard deviations, the model has 13 inputs");
    bad.inputs.mean.assign(13, 0.0f);
    bad.inputs.std_dev.assign(13, 1.0f);
    bad.inputs.std_dev[2] = -1.0f;
    CHECK(message([&] { reprosgd::Inference<Model, Host> i(model, bad); }) ==
          "reprosgd::Inference: the input normalisation has a standard deviation at 2 that is not a finite number >= 0");
    CHECK(message([&] { reprosgd::Inference<Model, Host> i(model, {}, {.batch = 0}); }) ==
          "reprosgd::Inference: Options::batch must be at least 1, got 0");
    model.shard(0, 2);
    CHECK(message([&] { reprosgd::Inference<Model, Host> i(model); }).starts_with(
        "reprosgd::Inference: the model is a shard of a model group of 2"));
  }

  TEST_CASE("predicted_classes: the first maximum, as the training accuracy counts") {
    HostM y("y", 3, 4);
    const float v[3][4] = {{1, 3, 3, 2}, {-1, -1, -1, -1}, {0, NAN, 5, 5}};
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) y(i, j) = v[i][j];
    Kokkos::View<int*, Kokkos::HostSpace> c("c", 3);
    reprosgd::predicted_classes(Kokkos::DefaultHostExecutionSpace(), y, c);
    Kokkos::fence();
    CHECK(c(0) == 1);
    CHECK(c(1) == 0);
    CHECK(c(2) == 2);
  }
}
