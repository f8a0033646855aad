// SPDX-License-Identifier: BSD-3-Clause
/// @file KeyedPermutation: a bijection of [0, N), keyed by (seed, epoch), pinned, the same on every backend.
// (Lives with the rng tests: it is built from Philox, and the rng area is compiled in variant builds.)
#include <doctest/doctest.h>

#include <reprosgd/data/keyed_permutation.hpp>

#include <Kokkos_Core.hpp>

#include <support/exec_spaces.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

using reprosgd::KeyedPermutation;

namespace {

std::vector<std::uint64_t> order(const KeyedPermutation& p) {
  std::vector<std::uint64_t> out(p.size());
  for (std::uint64_t i = 0; i < p.size(); ++i) out[i] = p(i);
  return out;
}

std::string construction_error(std::uint64_t n) {
  try {
    KeyedPermutation p(1, 0, n);
  } catch (const reprosgd::config_error& e) {
    return e.what();
  }
  return "no exception";
}

}  // namespace

TEST_SUITE("data/keyed_permutation") {

TEST_CASE("a bijection of [0, N), inverted by inverse(), for small, odd and power-of-two N") {
  for (std::uint64_t n : {1, 2, 3, 4, 5, 7, 64, 1000, 60000, 65536, 65537}) {
    CAPTURE(n);
    for (std::uint64_t epoch : {0, 1, 12345}) {
      const KeyedPermutation p(42, epoch, n);
      std::vector<char> seen(n, 0);
      bool in_range = true, inverted = true;
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t j = p(i);
        if (j >= n) {
          in_range = false;
          continue;
        }
        seen[j] += 1;
        inverted &= p.inverse(j) == i;
      }
      CHECK(in_range);
      CHECK(inverted);
      CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(n));
    }
  }
}

TEST_CASE("the Feistel width: smallest even number of bits >= 2 holding N - 1") {
  CHECK(KeyedPermutation(0, 0, 1).half_bits() == 1);
  CHECK(KeyedPermutation(0, 0, 4).half_bits() == 1);
  CHECK(KeyedPermutation(0, 0, 5).half_bits() == 2);
  CHECK(KeyedPermutation(0, 0, 60000).half_bits() == 8);
  CHECK(KeyedPermutation(0, 0, 65536).half_bits() == 8);
  CHECK(KeyedPermutation(0, 0, 65537).half_bits() == 9);
  CHECK(KeyedPermutation(0, 0, (1ull << 40) - 1).half_bits() == 20);
}

TEST_CASE("pinned golden prefix for (seed 42, epoch 0, N 60000)") {
  const KeyedPermutation p(42, 0, 60000);
  const std::uint64_t golden[16] = {20845, 9474,  58765, 3106,  55514, 47735, 26615, 56122,
                                    11375, 29244, 39612, 40589, 24653, 47889, 9250,  24648};
  for (int i = 0; i < 16; ++i) {
    CAPTURE(i);
    CHECK(p(i) == golden[i]);
    CHECK(p.index(i) == golden[i]);
  }
}

TEST_CASE("different epochs and seeds give different orders; the same key the same order") {
  const std::uint64_t n = 60000;
  const auto e0 = order(KeyedPermutation(42, 0, n));
  CHECK(order(KeyedPermutation(42, 0, n)) == e0);
  for (auto other : {order(KeyedPermutation(42, 1, n)), order(KeyedPermutation(43, 0, n)),
                     order(KeyedPermutation(42, 1ull << 32, n))}) {
    long same = 0;
    for (std::uint64_t i = 0; i < n; ++i) same += other[i] == e0[i];
    CHECK(same < 20);  // about 1 expected for independent orders
  }
}

TEST_CASE("the order looks shuffled: few fixed points, no correlation of i and perm(i)") {
  for (std::uint64_t n : {1000, 60000, 65537}) {
    CAPTURE(n);
    const KeyedPermutation p(7, 3, n);
    long fixed = 0;
    double si = 0, sj = 0, sii = 0, sjj = 0, sij = 0, s_adjacent = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const double x = double(i), y = double(p(i));
      fixed += p(i) == i;
      si += x, sj += y, sii += x * x, sjj += y * y, sij += x * y;
      if (i + 1 < n) s_adjacent += std::abs(double(p(i + 1)) - y);
    }
    const double cov = sij / n - (si / n) * (sj / n);
    const double r = cov / std::sqrt((sii / n - (si / n) * (si / n)) * (sjj / n - (sj / n) * (sj / n)));
    CHECK(fixed < 10);                          // Poisson(1) for a random permutation
    CHECK(std::abs(r) < 5.0 / std::sqrt(n));    // sigma of r is 1/sqrt(n)
    // Neighbours land about n/3 apart on average (the mean |U - V| of two uniforms), not close.
    CHECK(std::abs(s_adjacent / (n - 1) / n - 1.0 / 3.0) < 0.04);
  }
}

TEST_CASE("the largest N: values stay in range and invert") {
  const std::uint64_t n = (1ull << 40) - 1;
  const KeyedPermutation p(5, 9, n);
  for (std::uint64_t i : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{123456789}, n - 2, n - 1}) {
    CAPTURE(i);
    const std::uint64_t j = p(i);
    CHECK(j < n);
    CHECK(p.inverse(j) == i);
  }
  CHECK(p(n) == n);  // out-of-range positions come back unchanged (a kernel can never hang)
  CHECK(p.inverse(n + 5) == n + 5);
}

TEST_CASE("n == 0 and n >= 2^40 are config_errors with exact messages") {
  CHECK(construction_error(0) == "reprosgd::KeyedPermutation: n = 0; a permutation needs 1 <= n < 2^40");
  CHECK(construction_error(1ull << 40) ==
        "reprosgd::KeyedPermutation: n = 1099511627776 is not < 2^40 = 1099511627776");
  CHECK(construction_error(~0ull) ==
        "reprosgd::KeyedPermutation: n = 18446744073709551615 is not < 2^40 = 1099511627776");
  CHECK(construction_error((1ull << 40) - 1) == "no exception");
  static_assert(std::is_trivially_copyable_v<KeyedPermutation>);
}

TEST_CASE_TEMPLATE_DEFINE("same (seed, epoch), same order on every backend", Space, keyed_permutation_backend) {
  const std::uint64_t n = 60000;
  const KeyedPermutation p(42, 0, n);
  using MemSpace = typename Space::memory_space;
  Kokkos::View<std::uint64_t*, MemSpace> out("perm", n), inv("inv", n);
  Kokkos::parallel_for(
      "keyed_permutation", Kokkos::RangePolicy<Space>(Space(), 0, n), KOKKOS_LAMBDA(std::uint64_t i) {
        out(i) = p(i);
        inv(i) = p.inverse(i);
      });
  Space().fence();
  auto out_h = Kokkos::create_mirror_view(out);
  auto inv_h = Kokkos::create_mirror_view(inv);
  Kokkos::deep_copy(out_h, out);
  Kokkos::deep_copy(inv_h, inv);
  long mismatches = 0;
  for (std::uint64_t i = 0; i < n; ++i) mismatches += (out_h(i) != p(i)) + (inv_h(i) != p.inverse(i));
  CHECK(mismatches == 0);
  CHECK(out_h(0) == 20845u);
}
TEST_CASE_TEMPLATE_APPLY(keyed_permutation_backend, reprosgd_test::spaces);

}  // TEST_SUITE
