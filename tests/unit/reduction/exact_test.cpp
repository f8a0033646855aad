// SPDX-License-Identifier: BSD-3-Clause
/// @file Exact reduction: order-free bits, accuracy against a quad-precision reference, edge cases.
#include <doctest/doctest.h>

#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/reduction/exact.hpp>
#include <reprosgd/reduction/native.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>

#include <support/exec_spaces.hpp>
#include "reduction_test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

// Both reductions model the concept with the one-process policy (the reduction headers do not
// include parallelism policies: parallel/ sits above reduction/).
static_assert(reprosgd::Reduction<reprosgd::Exact, reprosgd::Serial<>>);
static_assert(reprosgd::Reduction<reprosgd::Native, reprosgd::Serial<>>);

namespace {

using reprosgd_test::mix;
using reprosgd_test::draw;
using reprosgd_test::make_rows;
using reprosgd_test::Rows;
using reprosgd_test::Sum;



template <class Space>
Sum reduce(const Rows& rows, bool* finite = nullptr) {
  reprosgd::Serial<Space> par;
  reprosgd::Exact exact;
  Sum sum("sum", rows.extent(1));
  const auto r = exact.reduce(par, rows, static_cast<long>(rows.extent(0)), sum);
  if (finite) *finite = r.finite;
  return sum;
}


Rows permuted(const Rows& rows, const std::vector<long>& perm) {
  Rows out("perm", rows.extent(0), rows.extent(1));
  for (std::size_t u = 0; u < perm.size(); ++u)
    for (std::size_t i = 0; i < rows.extent(1); ++i) out(u, i) = rows(perm[u], i);
  return out;
}

}  // namespace

TEST_SUITE("reduction/exact") {
  TEST_CASE_TEMPLATE_DEFINE("the sum does not depend on the order of the rows", Space, exact_order_id) {
    const Rows rows = make_rows(13, 3000, -40, 40, 1);
    const Sum ref = reduce<Space>(rows);
    std::vector<long> perm(13);
    std::iota(perm.begin(), perm.end(), 0L);
    for (int trial = 0; trial < 5; ++trial) {
      std::rotate(perm.begin(), perm.begin() + 3, perm.end());
      std::swap(perm[trial], perm[12 - trial]);
      REPROSGD_CHECK_BITWISE_EQUAL(reduce<Space>(permuted(rows, perm)), ref);
    }
  }
  TEST_CASE_TEMPLATE_APPLY(exact_order_id, reprosgd_test::spaces);

  TEST_CASE_TEMPLATE_DEFINE("every backend gives the same bits", Space, exact_backend_id) {
    const Rows rows = make_rows(8, 5000, -100, 100, 2);
    REPROSGD_CHECK_BITWISE_EQUAL(reduce<Space>(rows), reduce<Kokkos::Serial>(rows));
  }
  TEST_CASE_TEMPLATE_APPLY(exact_backend_id, reprosgd_test::spaces);

  TEST_CASE("accuracy against a quad-precision reference") {
    // Rows of similar magnitude (a block's values within 2^20 of each other): the result is the
    // correctly rounded sum, up to one ulp from the double step of the conversion back.
    const long m = 16, n = 20000;
    const Rows rows = make_rows(m, n, -10, 10, 3);
    const Sum sum = reduce<Kokkos::Serial>(rows);
    double max_ulps = 0.0;
    for (long i = 0; i < n; ++i) {
      __float128 ref = 0;
      for (long u = 0; u < m; ++u) ref += static_cast<__float128>(rows(u, i));
      const float rf = static_cast<float>(ref);
      const double ulp = std::nextafter(std::fabs(rf), std::numeric_limits<float>::infinity()) - std::fabs(rf);
      const double err = std::fabs(static_cast<double>(sum(i)) - static_cast<double>(ref));
      // Cancellation can make the sum tiny next to the block's largest value: the fixed-point grid
      // (2^-58 of that value for 16 rows) bounds the error then.
      float block_max = 0.0f;
      const long lo = (i / reprosgd::Exact::block_size) * reprosgd::Exact::block_size;
      for (long u = 0; u < m; ++u)
        for (long j = lo; j < std::min(n, lo + reprosgd::Exact::block_size); ++j)
          block_max = std::max(block_max, std::fabs(rows(u, j)));
      CHECK(err <= ulp + std::ldexp(static_cast<double>(block_max), -56));
      if (ulp > 0) max_ulps = std::max(max_ulps, err / ulp);
    }
    MESSAGE("max error of Exact against the quad-precision sum: " << max_ulps << " ulp");
  }

  TEST_CASE("extreme magnitudes, subnormals and zeros") {
    Rows rows("rows", 3, 4);
    // column 0: 1e30 next to 1e-30 in the same block: the tiny value is below the grid and vanishes.
    rows(0, 0) = 1e30f;
    rows(1, 0) = 1e-30f;
    rows(2, 0) = 1e30f;
    // column 1: subnormals only (their block has only tiny values... but shares the block with 1e30).
    rows(0, 1) = std::numeric_limits<float>::denorm_min();
    rows(1, 1) = std::numeric_limits<float>::denorm_min();
    rows(2, 1) = -std::numeric_limits<float>::denorm_min();
    // columns 2, 3: zeros, one negative zero
    rows(0, 2) = -0.0f;
    const Sum s = reduce<Kokkos::Serial>(rows);
    CHECK(s(0) == 2e30f);
    CHECK(s(1) == 0.0f);  // 2^-149 is far below the grid of a block whose largest value is 1e30
    CHECK(s(2) == 0.0f);
    CHECK(!std::signbit(s(2)));  // the integer grid has one zero
    CHECK(s(3) == 0.0f);

    // A block of subnormals alone is summed exactly.
    Rows sub("sub", 4, 1);
    for (long u = 0; u < 4; ++u) sub(u, 0) = std::numeric_limits<float>::denorm_min() * static_cast<float>(u + 1);
    CHECK(reduce<Kokkos::Serial>(sub)(0) == std::numeric_limits<float>::denorm_min() * 10.0f);

    // The largest floats do not overflow the integer grid: headroom bits cover M rows.
    Rows big("big", 4, 1);
    for (long u = 0; u < 4; ++u) big(u, 0) = std::numeric_limits<float>::max() / 8.0f;
    CHECK(reduce<Kokkos::Serial>(big)(0) == std::numeric_limits<float>::max() / 2.0f);
  }

  TEST_CASE("NaN or Inf in any row is reported") {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      Rows rows = make_rows(5, 700, -5, 5, 4);
      rows(3, 611) = bad;
      bool finite = true;
      (void)reduce<Kokkos::Serial>(rows, &finite);
      CHECK_FALSE(finite);
    }
    bool finite = false;
    (void)reduce<Kokkos::Serial>(make_rows(5, 700, -5, 5, 4), &finite);
    CHECK(finite);
  }

  TEST_CASE("a finite sum too large for a float is reported, not turned into Inf") {
    Rows rows("rows", 4, 3);
    for (long u = 0; u < 4; ++u) rows(u, 1) = std::numeric_limits<float>::max();
    bool finite = true;
    (void)reduce<Kokkos::Serial>(rows, &finite);
    CHECK_FALSE(finite);
  }

  TEST_CASE("one Exact object serves vectors of different sizes") {
    reprosgd::Serial<Kokkos::Serial> par;
    reprosgd::Exact exact;
    const Rows big = make_rows(3, 1000, -3, 3, 9), small = make_rows(3, 10, -3, 3, 10);
    Sum s_big("s", 1000), s_small("s", 10);
    CHECK(exact.reduce(par, big, 3, s_big).finite);
    CHECK(exact.reduce(par, small, 3, s_small).finite);
    REPROSGD_CHECK_BITWISE_EQUAL(s_small, reduce<Kokkos::Serial>(small));
    CHECK(exact.reduce(par, big, 3, s_big).finite);
    REPROSGD_CHECK_BITWISE_EQUAL(s_big, reduce<Kokkos::Serial>(big));
  }

  TEST_CASE("shape errors") {
    reprosgd::Serial<Kokkos::Serial> par;
    reprosgd::Exact exact;
    Rows rows("rows", 2, 10);
    Sum sum("sum", 9);
    CHECK_THROWS_WITH_AS(exact.reduce(par, rows, 2, sum), "reprosgd::Exact::reduce: sum has 9 elements, rows have 10",
                         reprosgd::config_error);
  }
}
