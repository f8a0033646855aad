// SPDX-License-Identifier: BSD-3-Clause
/// @file gemv_bias: the bits of gemm_nn_bias for every small row count, inner and outer size
/// (whole and partial 64-column blocks), on every host backend; and its shape errors.
#include <doctest/doctest.h>

#include <reprosgd/kernels/gemm.hpp>
#include <reprosgd/kernels/gemv.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>

#include <support/exec_spaces.hpp>

#include <cstdint>
#include <string>

namespace {
using HostM = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using HostB = Kokkos::View<float*, Kokkos::HostSpace>;

float value(std::uint64_t i, std::uint64_t salt) {
  std::uint64_t x = i * 0x9E3779B97F4A7C15ull + salt;
  x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  // Mixed magnitudes, so roundings differ between summation orders.
  return (static_cast<float>(x >> 40) * 0x1p-24f * 2.0f - 1.0f) * static_cast<float>(1 << ((x >> 8) % 12));
}
}  // namespace

TEST_SUITE("inference/gemv") {
  TEST_CASE_TEMPLATE_DEFINE("gemv_bias has gemm_nn_bias's bits", Space, gemv_bits) {
    const Space space;
    for (long m : {1L, 2L, 3L, 4L, 5L, 8L, 9L})
      for (long k : {1L, 7L, 100L, 784L})
        for (long n : {1L, 10L, 63L, 64L, 65L, 130L, 512L}) {
          HostM a("a", m, k), b("b", k, n), c1("c1", m, n), c2("c2", m, n);
          HostB bias("bias", n);
          for (long i = 0; i < m * k; ++i) a.data()[i] = value(static_cast<std::uint64_t>(i), 1);
          for (long i = 0; i < k * n; ++i) b.data()[i] = value(static_cast<std::uint64_t>(i), 2);
          for (long i = 0; i < n; ++i) bias(i) = value(static_cast<std::uint64_t>(i), 3);
          reprosgd::gemm_nn_bias(space, a, b, bias, c1);
          reprosgd::gemv_bias(space, a, b, bias, c2);
          space.fence();
          INFO(Space::name() << " m " << m << " k " << k << " n " << n);
          REPROSGD_REQUIRE_BITWISE_EQUAL(c1, c2);
        }
  }
  TEST_CASE_TEMPLATE_APPLY(gemv_bits, reprosgd_test::host_spaces);

  TEST_CASE("gemv_bias: shape errors") {
    HostM a("a", 2, 3), b("b", 4, 5), c("c", 2, 5);
    HostB bias("bias", 5), short_bias("bias", 4);
    std::string msg;
    try {
      reprosgd::gemv_bias(Kokkos::DefaultHostExecutionSpace(), a, b, bias, c);
    } catch (const reprosgd::config_error& e) {
      msg = e.what();
    }
    CHECK(msg == "reprosgd::gemv_bias: A is 2x3 but B is 4x5 (inner dimensions differ)");
    HostM b3("b", 3, 5);
    msg.clear();
    try {
      reprosgd::gemv_bias(Kokkos::DefaultHostExecutionSpace(), a, b3, short_bias, c);
    } catch (const reprosgd::config_error& e) {
      msg = e.what();
    }
    CHECK(msg == "reprosgd::gemv_bias: B is 3x5 but the bias has 4 elements");
  }
}
