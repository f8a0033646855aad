// SPDX-License-Identifier: BSD-3-Clause
/// @file Sequential's model-parallel shards: canonical_runs tile the whole model's buffer once, a
/// shard initialises to exactly the whole model's bits there, the one-process backward equals the
/// layers' own (chunked input gradients included), and misuse is a config_error.
#include <doctest/doctest.h>

#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/model_group.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/reduction/local_sum.hpp>
#include <reprosgd/rng/philox_stream.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>

#include <support/exec_spaces.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace {

using reprosgd::Dense;
using reprosgd::Init;
using reprosgd::ReLU;
using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using M = reprosgd::Matrix<Mem>;
using B = reprosgd::Buffer<Mem>;
using BRef = reprosgd::BufferRef<Mem>;
using Ctx = reprosgd::LayerContext<Exec, reprosgd::PhiloxStream>;

// Both Dense layers have 3 chunks (8+8+4 and 4+4+1 features): with 4 or more model ranks some own
// nothing of a layer.
auto make_model() { return reprosgd::Sequential{Dense{7, 20, Init::he_normal, 8}, ReLU{}, Dense{20, 9, Init::he_normal, 4}}; }
using Model = decltype(make_model());
using Run = Model::Run;
constexpr std::size_t whole_count = (7 + 1) * 20 + (20 + 1) * 9;  // 349

float value(std::uint64_t i, float scale) {
  std::uint64_t x = i * 0x9E3779B97F4A7C15ull + 4242;
  x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return (static_cast<float>(x >> 40) * 0x1p-24f * 2.0f - 1.0f) * scale;
}

BRef slice(const B& b, std::size_t begin, std::size_t end) { return BRef(b.data() + begin, end - begin); }

}  // namespace

TEST_SUITE("nn/sequential") {
  TEST_CASE("canonical_runs: known answers") {
    Model m = make_model();
    CHECK(m.model_rank() == 0);
    CHECK(m.model_size() == 1);
    CHECK(m.parameter_count() == whole_count);
    CHECK(m.canonical_parameter_count() == whole_count);
    // The whole model: one run per row of W and one for b, each at its own place.
    for (const Run& r : m.canonical_runs(0)) CHECK(r.local == r.canonical);

    m.shard(1, 2);  // features [16, 20) of the first Dense, [8, 9) of the second
    CHECK(m.parameter_count() == (7 + 1) * 4 + (20 + 1) * 1);
    CHECK(m.canonical_parameter_count() == whole_count);
    const std::vector<Run> runs = m.canonical_runs(1);
    REQUIRE(runs.size() == 8 + 21);
    CHECK(runs[0] == Run{16, 0, 4});
    CHECK(runs[6] == Run{6 * 20 + 16, 24, 4});
    CHECK(runs[7] == Run{140 + 16, 28, 4});  // b
    CHECK(runs[8] == Run{160 + 8, 32, 1});
    CHECK(runs[27] == Run{160 + 19 * 9 + 8, 51, 1});
    CHECK(runs[28] == Run{160 + 180 + 8, 52, 1});  // b

    m.shard(3, 4);  // 3 chunks per layer over 4 ranks: rank 3 holds nothing
    CHECK(m.parameter_count() == 0u);
    CHECK(m.canonical_runs(3).empty());

    m.shard(0, 1);
    CHECK(m.parameter_count() == whole_count);
    CHECK(m.parameters().extent(0) == whole_count);
  }

  TEST_CASE_TEMPLATE_DEFINE("canonical_runs of all model ranks tile the whole model once, and each shard holds the "
                            "whole model's initial bits there",
                            Space, sequential_runs_id) {
    Model whole = make_model();
    const reprosgd::PhiloxStream rng(2026);
    whole.initialize(Kokkos::Serial(), rng);
    for (int p = 1; p <= 5; ++p) {
      CAPTURE(p);
      std::vector<int> covered(whole_count, 0);
      B assembled("assembled", whole_count);
      Kokkos::deep_copy(assembled, std::numeric_limits<float>::quiet_NaN());
      std::size_t total = 0;
      for (int q = 0; q < p; ++q) {
        CAPTURE(q);
        Model m = make_model();
        m.shard(q, p);
        CHECK(m.model_rank() == q);
        CHECK(m.model_size() == p);
        CHECK(m.canonical_parameter_count() == whole_count);
        m.initialize(Space(), rng);
        Kokkos::fence();
        std::size_t local = 0;
        for (const Run& r : m.canonical_runs(q)) {
          CHECK(r.local == local);  // in shard order, back to back
          CHECK(r.length > 0u);
          REQUIRE(r.canonical + r.length <= whole_count);
          for (std::size_t k = 0; k < r.length; ++k) {
            ++covered[r.canonical + k];
            assembled(r.canonical + k) = m.parameters()(r.local + k);
          }
          // Every run holds the whole model's bits at its canonical place.
          REPROSGD_CHECK_BITWISE_EQUAL(slice(m.parameters(), r.local, r.local + r.length),
                                       slice(whole.parameters(), r.canonical, r.canonical + r.length));
          local += r.length;
        }
        CHECK(local == m.parameter_count());
        total += m.parameter_count();
      }
      CHECK(total == whole_count);
      int not_once = 0;
      for (int c : covered) not_once += c == 1 ? 0 : 1;
      CHECK(not_once == 0);
      REPROSGD_CHECK_BITWISE_EQUAL(assembled, whole.parameters());
    }
  }
  TEST_CASE_TEMPLATE_APPLY(sequential_runs_id, reprosgd_test::host_spaces);  // host buffers; Dense and Sequential run on the device in unit_trainer

  TEST_CASE("one-process forward and backward equal the layers' own, chunked input gradient included") {
    Model m = make_model();
    const reprosgd::PhiloxStream rng(3);
    m.initialize(Exec(), rng);
    const long rows = 6;
    auto ws = m.make_workspace(rows);
    for (long i = 0; i < rows; ++i)
      for (int j = 0; j < 7; ++j) ws.act[0](i, j) = value(static_cast<std::uint64_t>(i * 100 + j), 1.0f);
    const Ctx ctx{Exec(), rng, 0, 4, 0, true};
    m.forward(ctx, ws, rows);
    for (long i = 0; i < rows; ++i)
      for (int j = 0; j < 9; ++j) ws.grad_out(i, j) = value(static_cast<std::uint64_t>(7000 + i * 100 + j), 1.0f);
    B grads("grads", m.parameter_count());
    m.backward(ctx, ws, rows, grads);
    Exec().fence();

    const Dense& d0 = m.layer<0>();
    const Dense& d2 = m.layer<2>();
    REQUIRE(d2.chunks() == 3);
    const std::size_t o1 = m.parameter_offset(1), o3 = m.parameter_offset(3);
    const BRef p0 = slice(m.parameters(), 0, o1), p2 = slice(m.parameters(), o1, o3);
    const B none("none", 0);
    M y0("y0", rows, 20), a1("a1", rows, 20), y2("y2", rows, 9), g1("g1", rows, 20), g0("g0", rows, 20),
        gx("gx", 0, 7);
    B gp0("gp0", o1), gp2("gp2", o3 - o1);
    d0.forward(ctx, p0, ws.act[0], y0);
    ReLU{}.forward(ctx, none, y0, a1);
    d2.forward(ctx, p2, a1, y2);
    d2.backward(ctx, p2, a1, y2, ws.grad_out, g1, gp2);
    ReLU{}.backward(ctx, none, y0, a1, g1, g0, none);
    d0.backward(ctx, p0, ws.act[0], y0, g0, gx, gp0);
    Exec().fence();
    REPROSGD_CHECK_BITWISE_EQUAL(ws.act[3], y2);
    REPROSGD_CHECK_BITWISE_EQUAL(slice(grads, o1, o3), gp2);
    REPROSGD_CHECK_BITWISE_EQUAL(slice(grads, 0, o1), gp0);
  }

  TEST_CASE("shard and group misuse is a config_error") {
    Model m = make_model();
    for (const std::pair<int, int>& bad : {std::pair{0, 0}, std::pair{-1, 2}, std::pair{2, 2}, std::pair{5, 3}}) {
      const int q = bad.first, p = bad.second;
      CAPTURE(q);
      CAPTURE(p);
      CHECK_THROWS_WITH_AS(m.shard(q, p),
                           ("reprosgd::Sequential::shard: model rank " + std::to_string(q) + " of " +
                            std::to_string(p) + " (need 0 <= rank < size)")
                               .c_str(),
                           reprosgd::config_error);
      CHECK(m.model_size() == 1);  // unchanged
      CHECK(m.parameter_count() == whole_count);
    }

    const Ctx ctx{Exec(), reprosgd::PhiloxStream(1), 0, 0, 0, false};
    const long rows = 4;
    reprosgd::LocalExactSum<Exec> sum;
    reprosgd::LocalModelGroup<Exec> group(Exec(), sum);
    m.shard(1, 2);
    m.initialize(Exec(), reprosgd::PhiloxStream(1));
    auto ws = m.make_workspace(rows);
    B grads("grads", m.parameter_count());
    const char* mismatch =
        "reprosgd::Sequential: the model is shard 1 of 2 but the model group says rank 0 of 1 (call shard() with "
        "the group's rank and size)";
    CHECK_THROWS_WITH_AS(m.forward(ctx, ws, rows), mismatch, reprosgd::config_error);
    CHECK_THROWS_WITH_AS(m.forward(ctx, ws, rows, group), mismatch, reprosgd::config_error);
    CHECK_THROWS_WITH_AS(m.backward(ctx, ws, rows, grads), mismatch, reprosgd::config_error);
    CHECK_THROWS_WITH_AS(m.backward(ctx, ws, rows, grads, group), mismatch, reprosgd::config_error);
    m.shard(0, 2);  // the rank matches, the size does not
    CHECK_THROWS_WITH_AS(m.forward(ctx, ws, rows, group),
                         "reprosgd::Sequential: the model is shard 0 of 2 but the model group says rank 0 of 1 (call "
                         "shard() with the group's rank and size)",
                         reprosgd::config_error);
  }
}
