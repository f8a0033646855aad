// SPDX-License-Identifier: BSD-3-Clause
/// @file Tests of reprosgd/kernels/elementwise.hpp: the row-wise host paths give the bits of the
/// plain per-element expressions, on every host backend, for row-major and other layouts.
#include <reprosgd/kernels/elementwise.hpp>

#include <doctest/doctest.h>
#include <support/exec_spaces.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

namespace {

template <class Space, class Layout = Kokkos::LayoutRight>
using matrix = Kokkos::View<float**, Layout, typename Space::memory_space>;
using host_matrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;

// Values with random signs and exponents, plus the special cases an activation must pass through
// unchanged in bits: +-0, +-inf, NaN, subnormals.
void fill(const host_matrix& v, std::uint64_t seed) {
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::denorm_min(), -1e-40f};
  for (std::size_t i = 0; i < v.extent(0); ++i)
    for (std::size_t j = 0; j < v.extent(1); ++j) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      const std::uint64_t r = s >> 11;
      if (r % 23 == 0) {
        v(i, j) = specials[(r >> 8) % 7];
      } else {
        const float mantissa = 1.0f + static_cast<float>(r & 0x7FFFFF) * 0x1p-23f;
        v(i, j) = ((r >> 23) & 1 ? -1.0f : 1.0f) * std::ldexp(mantissa, static_cast<int>((r >> 24) % 40) - 20);
      }
    }
}

// Bitwise comparison that treats every NaN as equal (payloads are not specified).
bool same_bits(float x, float y) {
  if (std::isnan(x) && std::isnan(y)) return true;
  return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
}

std::size_t differences(const host_matrix& x, const host_matrix& y) {
  std::size_t d = 0;
  for (std::size_t i = 0; i < x.extent(0); ++i)
    for (std::size_t j = 0; j < x.extent(1); ++j) d += !same_bits(x(i, j), y(i, j));
  return d;
}

template <class Space, class Layout>
void check_all(int rows, int cols, std::uint64_t seed) {
  CAPTURE(rows);
  CAPTURE(cols);
  host_matrix hx("x", rows, cols), hg("g", rows, cols), hb("b", 1, cols);
  fill(hx, seed);
  fill(hg, seed + 1);
  fill(hb, seed + 2);
  Space space;
  matrix<Space, Layout> x("x", rows, cols), y("y", rows, cols), g("g", rows, cols), gi("gi", rows, cols);
  Kokkos::View<float*, typename Space::memory_space> b("b", cols), db("db", cols);
  auto mx = Kokkos::create_mirror_view(x);
  auto mg = Kokkos::create_mirror_view(g);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      mx(i, j) = hx(i, j);
      mg(i, j) = hg(i, j);
    }
  Kokkos::deep_copy(x, mx);
  Kokkos::deep_copy(g, mg);
  Kokkos::deep_copy(b, Kokkos::subview(hb, 0, Kokkos::ALL()));
  auto to_host = [&](const matrix<Space, Layout>& v) {
    auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    host_matrix h("h", rows, cols);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) h(i, j) = m(i, j);
    return h;
  };

  for (const auto a : {reprosgd::Activation::relu, reprosgd::Activation::tanh, reprosgd::Activation::sigmoid}) {
    CAPTURE(static_cast<int>(a));
    reprosgd::activation_forward(space, a, x, y);
    space.fence();
    host_matrix want("want", rows, cols);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) want(i, j) = reprosgd::activate(a, hx(i, j));
    const host_matrix hy = to_host(y);
    CHECK(differences(hy, want) == 0);

    reprosgd::activation_backward(space, a, y, g, gi);
    space.fence();
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) want(i, j) = hg(i, j) * reprosgd::activation_derivative(a, hy(i, j));
    CHECK(differences(to_host(gi), want) == 0);
  }

  reprosgd::add_bias(space, x, b);
  space.fence();
  host_matrix want("want", rows, cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) want(i, j) = hx(i, j) + hb(0, j);
  CHECK(differences(to_host(x), want) == 0);

  reprosgd::bias_gradient(space, g, db);
  space.fence();
  auto hdb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), db);
  std::size_t bad = 0;
  for (int j = 0; j < cols; ++j) {
    float acc = 0.0f;
    for (int i = 0; i < rows; ++i) acc = acc + hg(i, j);
    bad += !same_bits(hdb(j), acc);
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_SUITE("kernels/elementwise") {

TEST_CASE_TEMPLATE_DEFINE("activations, bias and bias gradient give the per-element bits", Space,
                          elementwise_test) {
  std::uint64_t seed = 1;
  const std::pair<int, int> shapes[] = {{1, 1}, {3, 7}, {128, 512}, {128, 10}, {16, 513}, {5, 64}, {0, 9},
                                        {9, 0}, {37, 129}};
  for (const auto& [rows, cols] : shapes) {
    check_all<Space, Kokkos::LayoutRight>(rows, cols, seed += 3);
    check_all<Space, Kokkos::LayoutLeft>(rows, cols, seed += 3);
  }
}
TEST_CASE_TEMPLATE_APPLY(elementwise_test, reprosgd_test::spaces);

}  // TEST_SUITE
