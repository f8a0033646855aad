// SPDX-License-Identifier: BSD-3-Clause
/// @file LocalExactSum: the bits of Exact::reduce with a Serial policy, without a policy.
#include <doctest/doctest.h>

#include <reprosgd/kernels/views.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/reduction/exact.hpp>
#include <reprosgd/reduction/local_sum.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>

#include <support/exec_spaces.hpp>
#include "reduction_test_support.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

namespace {

using reprosgd_test::mix;
using reprosgd_test::draw;
using reprosgd_test::make_rows;
using reprosgd_test::Rows;
using reprosgd_test::Sum;



/// Exact::reduce with a Serial policy over the first m rows (a copy of them, so that nothing of
/// the sum under test is shared).
template <class Space>
Sum reference(const Rows& rows, long m, bool& finite) {
  Rows first("first", m, rows.extent(1));
  for (long u = 0; u < m; ++u)
    for (long i = 0; i < static_cast<long>(rows.extent(1)); ++i) first(u, i) = rows(u, i);
  reprosgd::Serial<Space> par;
  reprosgd::Exact exact;
  Sum sum("reference", rows.extent(1));
  finite = exact.reduce(par, first, m, sum).finite;
  return sum;
}

}  // namespace

TEST_SUITE("reduction/local_sum") {
  TEST_CASE_TEMPLATE_DEFINE("the bits of Exact with Serial, for every row count and span", Space, local_sum_bits_id) {
    reprosgd::LocalExactSum<Space> local;  // one object for every case: its workspace is reused
    const Space space;
    struct Case {
      long m, n;
      int lo, hi;
    };
    // Narrow spans (the double sum), wide spans (the integer grid), one row, partial blocks.
    const Case cases[] = {{1, 1000, -3, 3},  {2, 257, -10, 10},   {3, 256, 0, 0},      {7, 1031, -40, 40},
                          {16, 5000, -5, 5}, {33, 700, -100, 90}, {64, 300, -126, 127}, {5, 1, -20, 20}};
    std::uint64_t seed = 1;
    for (const Case& c : cases) {
      CAPTURE(c.m);
      CAPTURE(c.n);
      const Rows rows = make_rows(c.m + 3, c.n, c.lo, c.hi, seed++);  // 3 extra rows the sum must ignore
      bool finite_ref = false;
      const Sum expected = reference<Space>(rows, c.m, finite_ref);
      // The rows and the sum in Space's memory (a device's too), the result compared on the host.
      using Mem = typename Space::memory_space;
      const auto rows_in_space = Kokkos::create_mirror_view_and_copy(Mem(), rows);
      Kokkos::View<float*, Mem> got_in_space("got", c.n);
      const bool finite = local.sum(space, rows_in_space, c.m, got_in_space).finite;
      Sum got("got", c.n);
      Kokkos::deep_copy(got, got_in_space);
      CHECK(finite == finite_ref);
      REPROSGD_CHECK_BITWISE_EQUAL(got, expected);
    }
  }
  TEST_CASE_TEMPLATE_APPLY(local_sum_bits_id, reprosgd_test::spaces);

  TEST_CASE("unmanaged Views (MatrixRef, BufferRef) are accepted") {
    const Rows rows = make_rows(4, 600, -30, 30, 99);
    bool finite_ref = false;
    const Sum expected = reference<Kokkos::DefaultHostExecutionSpace>(rows, 4, finite_ref);
    Sum got("got", 600);
    reprosgd::LocalExactSum<Kokkos::DefaultHostExecutionSpace> local;
    const reprosgd::MatrixRef<Kokkos::HostSpace> ref(rows.data(), 4, 600);
    const reprosgd::BufferRef<Kokkos::HostSpace> out(got.data(), 600);
    CHECK(local.sum(Kokkos::DefaultHostExecutionSpace(), ref, 4, out).finite);
    CHECK(finite_ref);
    REPROSGD_CHECK_BITWISE_EQUAL(got, expected);
  }

  TEST_CASE("NaN, Inf and overflow are reported as Exact reports them") {
    reprosgd::LocalExactSum<Kokkos::DefaultHostExecutionSpace> local;
    const Kokkos::DefaultHostExecutionSpace space;
    Rows rows = make_rows(3, 300, -5, 5, 7);
    Sum got("got", 300);
    rows(1, 17) = std::numeric_limits<float>::quiet_NaN();
    CHECK_FALSE(local.sum(space, rows, 3, got).finite);
    rows(1, 17) = std::numeric_limits<float>::infinity();
    CHECK_FALSE(local.sum(space, rows, 3, got).finite);
    rows(1, 17) = std::numeric_limits<float>::max();
    rows(2, 17) = std::numeric_limits<float>::max();
    CHECK_FALSE(local.sum(space, rows, 3, got).finite);
    CHECK(local.sum(space, rows, 1, got).finite);  // row 0 alone is finite
  }

  TEST_CASE("shape errors") {
    reprosgd::LocalExactSum<Kokkos::DefaultHostExecutionSpace> local;
    const Kokkos::DefaultHostExecutionSpace space;
    Rows rows("rows", 2, 10);
    Sum wrong("wrong", 9), right("right", 10);
    CHECK_THROWS_AS(local.sum(space, rows, 0, right), reprosgd::config_error);
    CHECK_THROWS_AS(local.sum(space, rows, 3, right), reprosgd::config_error);
    CHECK_THROWS_AS(local.sum(space, rows, 2, wrong), reprosgd::config_error);
  }
}
