// SPDX-License-Identifier: BSD-3-Clause
/// @file Deferred weight gradients (trainer/deferred_weight_gradients.hpp): the Dense layers' dW of
/// a step computed after its micro-batches and summed panel by panel give the bits of gemm_tn into
/// the gradient rows followed by Exact::reduce, in the reduction itself and in training.
#include <doctest/doctest.h>

#include <reprosgd/data/synthetic.hpp>
#include <reprosgd/fingerprint.hpp>
#include <reprosgd/kernels/gemm.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/optim/sgd.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/reduction/exact.hpp>
#include <reprosgd/trainer.hpp>
#include <reprosgd/trainer/deferred_weight_gradients.hpp>

#include <support/exec_spaces.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using HostMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using HostBuffer = Kokkos::View<float*, Kokkos::HostSpace>;
using WRef = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A value in [-1, 1) times 2^-(0..spread-1): gradient-like, with blocks whose magnitudes span
/// more binades than a double sum holds exactly when spread is large (the integer grid's path).
float value(std::uint64_t key, int spread) {
  const std::uint64_t r = mix(key);
  const float x = static_cast<float>(static_cast<std::int64_t>(r >> 40) - (1LL << 23)) * 0x1p-23f;
  return std::ldexp(x, -static_cast<int>((r >> 8) % static_cast<std::uint64_t>(spread)));
}

struct DenseShape {
  long offset, in, out;
};

/// M micro-batches of k rows through two Dense-shaped weight gradients at unaligned offsets of an
/// n-element gradient (the other elements: biases and the like, written into the rows directly).
struct Case {
  long M = 4, k = 5;
  std::vector<DenseShape> layers{{37, 300, 257}, {37 + 300 * 257 + 257, 512, 10}};
  long n = 37 + 300 * 257 + 257 + 512 * 10 + 10 + 3;
  int spread = 20;
  std::vector<std::vector<HostMatrix>> x, gy;  // [layer][u]
  HostMatrix other;                             // M x n: the elements outside every dW
  explicit Case(int spread_ = 20, std::uint64_t seed = 1) : spread(spread_), other("other", M, n) {
    for (std::size_t l = 0; l < layers.size(); ++l) {
      x.emplace_back();
      gy.emplace_back();
      for (long u = 0; u < M; ++u) {
        HostMatrix xu("x", k, layers[l].in), gu("gy", k, layers[l].out);
        for (long i = 0; i < k * layers[l].in; ++i) xu.data()[i] = value(seed * 7919 + l * 1000003 + u * 65537 + i, 4);
        for (long i = 0; i < k * layers[l].out; ++i)
          gu.data()[i] = value(seed * 104729 + l * 999983 + u * 131071 + i, spread);
        x[l].push_back(xu);
        gy[l].push_back(gu);
      }
    }
    for (long u = 0; u < M; ++u)
      for (long i = 0; i < n; ++i) other(u, i) = value(seed * 31 + u * n + i, 8);
  }
};

template <class Space>
bool reduce_plain(const Case& c, HostBuffer& sum) {
  const Space space;
  HostMatrix rows("rows", c.M, c.n);
  Kokkos::deep_copy(rows, c.other);
  for (std::size_t l = 0; l < c.layers.size(); ++l)
    for (long u = 0; u < c.M; ++u) {
      const DenseShape& d = c.layers[l];
      reprosgd::gemm_tn(space, c.x[l][static_cast<std::size_t>(u)], c.gy[l][static_cast<std::size_t>(u)],
                        WRef(&rows(u, d.offset), d.in, d.out));
    }
  space.fence();
  reprosgd::Serial<Space> par(space);
  reprosgd::Exact exact;
  return exact.reduce(par, rows, c.M, sum).finite;
}

template <class Space>
bool reduce_deferred(const Case& c, HostBuffer& sum, HostMatrix* rows_out = nullptr) {
  const Space space;
  // Rows of odd stride, and NaN where a dW lies: the presummed blocks must never be read from them.
  HostMatrix padded("rows", c.M, c.n + 5);
  const HostMatrix rows = Kokkos::subview(padded, Kokkos::ALL(), std::make_pair(0L, c.n));
  Kokkos::deep_copy(padded, std::nanf(""));
  for (long u = 0; u < c.M; ++u)
    for (long i = 0; i < c.n; ++i) rows(u, i) = c.other(u, i);
  for (const DenseShape& d : c.layers)
    for (long u = 0; u < c.M; ++u)
      for (long i = d.offset; i < d.offset + d.in * d.out; ++i) rows(u, i) = std::nanf("");
  reprosgd::detail::DeferredWeightGradients<Space> deferred;
  deferred.begin_step(c.M, rows.data(), static_cast<long>(rows.stride(0)));
  for (long u = 0; u < c.M; ++u) {
    deferred.begin_micro_batch(u);
    for (std::size_t l = 0; l < c.layers.size(); ++l) {
      const DenseShape& d = c.layers[l];
      deferred.record(space, c.x[l][static_cast<std::size_t>(u)], c.gy[l][static_cast<std::size_t>(u)],
                      WRef(&rows(u, d.offset), d.in, d.out));
    }
  }
  reprosgd::Serial<Space> par(space);
  reprosgd::Exact exact;
  const reprosgd::Exact::Presummed slots = exact.presummed(c.n);
  deferred.run(space, rows, sum, slots);
  const bool finite = exact.reduce_presummed(par, rows, c.M, sum).finite;
  if (rows_out) {
    *rows_out = HostMatrix("rows_out", c.M, c.n);
    Kokkos::deep_copy(*rows_out, rows);
  }
  return finite;
}

long bit_differences(const HostBuffer& a, const HostBuffer& b) {
  long d = 0;
  for (std::size_t i = 0; i < a.extent(0); ++i) d += std::bit_cast<std::uint32_t>(a(i)) != std::bit_cast<std::uint32_t>(b(i));
  return d;
}

}  // namespace

TEST_SUITE("trainer/deferred_weight_gradients") {
  TEST_CASE_TEMPLATE_DEFINE("dW computed and summed panel by panel has the bits of the rows' Exact sum", Space, bits_id) {
    // Two shapes: several panels with blocks across their ends (out = 257, at offset 37) and one
    // narrow layer (out = 10); gradients spanning 2 binades (double sums) and 40 (integer grid).
    for (const int spread : {2, 40}) {
      CAPTURE(spread);
      const Case c(spread);
      HostBuffer want("want", c.n), got("got", c.n);
      CHECK(reduce_plain<Space>(c, want));
      HostMatrix rows;
      CHECK(reduce_deferred<Space>(c, got, &rows));
      CHECK(bit_differences(want, got) == 0);
      // Most of a dW never reaches the rows: every block inside a panel was summed from the panel.
      long untouched = 0;
      for (const DenseShape& d : c.layers)
        for (long i = d.offset; i < d.offset + d.in * d.out; ++i) untouched += std::isnan(rows(0, i)) ? 1 : 0;
      CHECK(untouched > (300 * 257) * 9 / 10);
    }
  }
  TEST_CASE_TEMPLATE_APPLY(bits_id, reprosgd_test::host_spaces);

  TEST_CASE("an Inf or NaN in a micro-batch's dW makes both sums not finite") {
    Case c(8);
    c.gy[0][2](1, 100) = std::numeric_limits<float>::infinity();
    HostBuffer want("want", c.n), got("got", c.n);
    CHECK_FALSE(reduce_plain<Kokkos::DefaultHostExecutionSpace>(c, want));
    CHECK_FALSE(reduce_deferred<Kokkos::DefaultHostExecutionSpace>(c, got));
  }

  TEST_CASE("errors: a step whose micro-batches record other layers, reduce_presummed without presummed") {
    using Space = Kokkos::DefaultHostExecutionSpace;
    const Space space;
    HostMatrix rows("rows", 2, 100), x("x", 3, 4), g("g", 3, 5), g2("g2", 3, 6);
    reprosgd::detail::DeferredWeightGradients<Space> deferred;
    deferred.begin_step(2, rows.data(), 100);
    deferred.begin_micro_batch(0);
    deferred.record(space, x, g, WRef(&rows(0, 3), 4, 5));
    deferred.begin_micro_batch(1);
    CHECK_THROWS_WITH_AS(deferred.record(space, x, g2, WRef(&rows(1, 3), 4, 6)),
                         "reprosgd::DeferredWeightGradients: micro-batch 1 records another layer than micro-batch 0 did",
                         reprosgd::config_error);
    HostBuffer sum("sum", 100);
    reprosgd::Exact exact;
    {  // more layers in a later micro-batch, and fewer
      reprosgd::detail::DeferredWeightGradients<Space> more;
      more.begin_step(2, rows.data(), 100);
      more.begin_micro_batch(0);
      more.record(space, x, g, WRef(&rows(0, 3), 4, 5));
      more.begin_micro_batch(1);
      more.record(space, x, g, WRef(&rows(1, 3), 4, 5));
      CHECK_THROWS_WITH_AS(more.record(space, x, g, WRef(&rows(1, 30), 4, 5)),
                           "reprosgd::DeferredWeightGradients: micro-batch 1 records more layers than micro-batch 0 did",
                           reprosgd::config_error);
      reprosgd::detail::DeferredWeightGradients<Space> fewer;
      fewer.begin_step(2, rows.data(), 100);
      fewer.begin_micro_batch(0);
      fewer.record(space, x, g, WRef(&rows(0, 3), 4, 5));
      fewer.record(space, x, g, WRef(&rows(0, 30), 4, 5));
      fewer.begin_micro_batch(1);
      fewer.record(space, x, g, WRef(&rows(1, 3), 4, 5));
      CHECK_THROWS_WITH_AS(fewer.run(space, rows, sum, exact.presummed(100)),
                           "reprosgd::DeferredWeightGradients: the last micro-batch recorded 1 layers, the first 2",
                           reprosgd::config_error);
    }
    reprosgd::Serial<Space> par(space);
    reprosgd::Exact fresh;
    CHECK_THROWS_WITH_AS(fresh.reduce_presummed(par, rows, 2, sum),
                         "reprosgd::Exact::reduce_presummed: presummed(n) was not called for this vector",
                         reprosgd::config_error);
  }

  TEST_CASE_TEMPLATE_DEFINE("training with deferred weight gradients has the bits of training without", Space, train_id) {
    using namespace reprosgd;
    static const auto* data = new TrainTest<Kokkos::HostSpace>(make_synthetic_train_test(3, 512, 64, 300, 10, {.separation = 0.2f}));
    const auto run = [&](bool defer, long micro_batch) {
      TrainerOptions o;
      o.global_batch = 64;
      o.micro_batch = micro_batch;
      o.steps = 12;
      o.seed = 5;
      o.defer_weight_gradients = defer;
      Trainer<Serial<Space>> trainer(o);
      // 300 x 257 and 257 x 10: dW regions at unaligned offsets, blocks across panel ends.
      auto model = make_sequential<typename Space::memory_space>(Dense{300, 257}, ReLU{}, Dense{257, 10});
      Sgd sgd{{.lr = 0.05f, .momentum = 0.9f}};
      auto state = trainer.start(model, sgd);
      trainer.fit(model, sgd, state, data->train);
      return fingerprint(model, state.optimizer);
    };
    for (const long m : {8L, 16L, 32L}) {
      CAPTURE(m);
      CHECK(run(true, m) == run(false, m));
    }
  }
  TEST_CASE_TEMPLATE_APPLY(train_id, reprosgd_test::host_spaces);
}
