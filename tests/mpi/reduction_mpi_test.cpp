// SPDX-License-Identifier: BSD-3-Clause
/// @file Exact and Native gradient reductions across MPI ranks: rank independence, NaN/Inf, accuracy.
#include <doctest/doctest.h>

#include "gradient_rows.hpp"

#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/reduction/exact.hpp>
#include <reprosgd/reduction/native.hpp>
#include <support/exec_spaces.hpp>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace {

using reprosgd_test::bits_of;
using HostRows = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using HostSum = Kokkos::View<float*, Kokkos::HostSpace>;

static_assert(reprosgd::Reduction<reprosgd::Exact, reprosgd::DataParallel<>>);
static_assert(reprosgd::Reduction<reprosgd::Native, reprosgd::DataParallel<>>);
static_assert(reprosgd::Reduction<reprosgd::Native, reprosgd::Serial<>>);
static_assert(reprosgd::Exact::rank_independent && !reprosgd::Native::rank_independent);

constexpr long n_elements = 7 * 256 + 13;  // not a multiple of Exact's block size

/// Reduce the rows this rank owns out of `all` (M rows) with `red` under `par`; a host copy of the sum.
template <class Space, class Red, class Par>
HostSum reduce_owned(Red& red, Par& par, const HostRows& all, reprosgd::ReductionResult* result = nullptr) {
  using Mem = typename Space::memory_space;
  const long m = static_cast<long>(all.extent(0));
  const reprosgd::MicroBatchRange mine = par.micro_batch_range(m);
  auto rows = reprosgd_test::copy_rows<Mem>(all, mine.begin, mine.end);
  Kokkos::View<float*, Mem> sum("sum", all.extent(1));
  const reprosgd::ReductionResult r = red.reduce(par, rows, m, sum);
  if (result) *result = r;
  HostSum out("sum host", all.extent(1));
  Kokkos::deep_copy(out, sum);
  return out;
}

/// How many elements of a and b differ in their bits.
long bit_mismatches(const HostSum& a, const HostSum& b) {
  long bad = 0;
  for (std::size_t i = 0; i < a.extent(0); ++i) bad += bits_of(a(i)) != bits_of(b(i));
  return bad;
}

/// Distance in units in the last place between two finite floats (0 for +0 and -0).
long ulp_distance(float a, float b) {
  auto ordered = [](float x) {
    const std::int64_t u = bits_of(x);
    return (u & 0x80000000) ? -(u & 0x7FFFFFFF) : u;
  };
  const std::int64_t d = ordered(a) - ordered(b);
  return static_cast<long>(d < 0 ? -d : d);
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

/// Every rank's value of x, gathered in rank order.
std::vector<std::uint64_t> gather_all(MPI_Comm comm, std::uint64_t x) {
  int p = 0;
  MPI_Comm_size(comm, &p);
  std::vector<std::uint64_t> all(static_cast<std::size_t>(p));
  MPI_Allgather(&x, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm);
  return all;
}

}  // namespace

TEST_SUITE("reduction/exact across ranks") {
  TEST_CASE_TEMPLATE_DEFINE("Exact on P ranks gives the bits of the single-process Exact sum", Space, exact_ranks) {
    reprosgd::DataParallel<Space> par;
    reprosgd::Serial<Space> serial;
    INFO("rank " << par.rank() << " of " << par.size() << ", space " << std::string(Space::name()));
    // M below P (ranks without rows), not divisible by P, and a multiple of several P.
    for (const long m : {1L, 2L, 5L, 12L, 23L, 60L}) {
      for (const std::uint64_t seed : {1ull, 0xC0FFEEull}) {
        INFO("M = " << m << ", seed " << seed);
        const HostRows all = reprosgd_test::make_rows(seed, m, n_elements);
        reprosgd::Exact reference, distributed;
        const HostSum expected = reduce_owned<Space>(reference, serial, all);
        reprosgd::ReductionResult result;
        const HostSum got = reduce_owned<Space>(distributed, par, all, &result);
        CHECK(result.finite);
        CHECK(bit_mismatches(got, expected) == 0);
        // A second call reuses the workspace and must not depend on what it held.
        const HostSum again = reduce_owned<Space>(distributed, par, all, &result);
        CHECK(bit_mismatches(again, expected) == 0);
        if (par.rank() == 0 && seed == 1 && m == 23)
          std::printf("exact: P=%d M=%ld n=%ld space=%s fingerprint=%016llx\n", par.size(), m, n_elements,
                      Space::name(), static_cast<unsigned long long>(reprosgd_test::fingerprint(got)));
      }
    }
  }
  TEST_CASE_TEMPLATE_APPLY(exact_ranks, reprosgd_test::host_spaces);

  TEST_CASE("Exact: any order of the rows gives the same bits (one process)") {
    using Space = Kokkos::DefaultHostExecutionSpace;
    reprosgd::Serial<Space> serial;
    const long m = 23;
    const HostRows all = reprosgd_test::make_rows(7, m, n_elements);
    reprosgd::Exact exact;
    const HostSum expected = reduce_owned<Space>(exact, serial, all);
    std::vector<long> order(static_cast<std::size_t>(m));
    std::iota(order.begin(), order.end(), 0L);
    for (int trial = 0; trial < 8; ++trial) {
      INFO("permutation " << trial);
      if (trial == 0) {
        std::reverse(order.begin(), order.end());
      } else {  // Fisher-Yates driven by the test's own hash: the same permutations every run
        for (long i = m - 1; i > 0; --i)
          std::swap(order[static_cast<std::size_t>(i)],
                    order[static_cast<std::size_t>(reprosgd_test::mix64(static_cast<std::uint64_t>(trial * 1000 + i)) %
                                                   static_cast<std::uint64_t>(i + 1))]);
      }
      HostRows permuted("permuted", m, n_elements);
      for (long u = 0; u < m; ++u)
        for (long i = 0; i < n_elements; ++i) permuted(u, i) = all(order[static_cast<std::size_t>(u)], i);
      CHECK(bit_mismatches(reduce_owned<Space>(exact, serial, permuted), expected) == 0);
    }
  }

  TEST_CASE("Exact and Native: a NaN or Inf in one rank's row gives finite == false on every rank") {
    using Space = Kokkos::DefaultHostExecutionSpace;
    reprosgd::DataParallel<Space> par;
    // 2P + 1 rows: some rank holds 3, and the sums travel as the ring's integers after an exponent
    // agreement that sees the 255; P rows: one each, the rows themselves travel and the rank that
    // sums the block finds the 255 (the bad value in the first block, summed by rank 0, or in the
    // last, partial block, summed by rank P-1).
    for (const long m : {2L * par.size() + 1, static_cast<long>(par.size())}) {
      for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()}) {
        for (const int culprit : {0, par.size() - 1}) {
          for (const long at : {3L, n_elements - 5}) {
            INFO("rank " << par.rank() << " of " << par.size() << ", M = " << m << ", bad value " << bad << " on rank "
                         << culprit << " at element " << at);
            HostRows all = reprosgd_test::make_rows(3, m, n_elements, false);
            const reprosgd::MicroBatchRange theirs = reprosgd::micro_batch_range_of(culprit, par.size(), m);
            all(theirs.end - 1, at) = bad;
            reprosgd::ReductionResult result;
            reprosgd::Exact exact;
            reduce_owned<Space>(exact, par, all, &result);
            CHECK_FALSE(result.finite);
            reprosgd::Native native;
            reduce_owned<Space>(native, par, all, &result);
            CHECK_FALSE(result.finite);
            // The group is still in step: a clean reduction afterwards is finite everywhere.
            all(theirs.end - 1, at) = 1.0f;
            reduce_owned<Space>(exact, par, all, &result);
            CHECK(result.finite);
          }
        }
      }
    }
  }

  TEST_CASE("Exact: zeros (of either sign) sum to +0") {
    using Space = Kokkos::DefaultHostExecutionSpace;
    reprosgd::DataParallel<Space> par;
    INFO("rank " << par.rank());
    const long m = 7;
    HostRows all("zeros", m, n_elements);
    for (long u = 0; u < m; ++u)
      for (long i = 0; i < n_elements; ++i) all(u, i) = (u + i) % 3 == 0 ? -0.0f : 0.0f;
    reprosgd::Exact exact;
    reprosgd::ReductionResult result;
    const HostSum sum = reduce_owned<Space>(exact, par, all, &result);
    CHECK(result.finite);
    long nonzero = 0;
    for (long i = 0; i < n_elements; ++i) nonzero += bits_of(sum(i)) != 0u;
    CHECK(nonzero == 0);
  }

  TEST_CASE("Exact: the error against a double-double reference stays within the documented bound") {
    using Space = Kokkos::DefaultHostExecutionSpace;
    reprosgd::Serial<Space> serial;
    const long m = 23;
    const int headroom = std::bit_width(static_cast<unsigned long>(m - 1));
    for (const bool outliers : {false, true}) {
      INFO("outliers " << outliers);
      const HostRows all = reprosgd_test::make_rows(11, m, n_elements, outliers);
      reprosgd::Exact exact;
      reprosgd::Native native;
      const HostSum sum = reduce_owned<Space>(exact, serial, all);
      const HostSum plain = reduce_owned<Space>(native, serial, all);
      const std::vector<reprosgd_test::DoubleDouble> ref = reprosgd_test::reference_sums(all);
      long worst_ulp = 0, worst_native_ulp = 0, not_nearest = 0, native_not_nearest = 0, over_bound = 0;
      double worst_ratio = 0.0;
      for (long b = 0; b * reprosgd::Exact::block_size < n_elements; ++b) {
        const long lo = b * reprosgd::Exact::block_size;
        const long hi = std::min(lo + reprosgd::Exact::block_size, n_elements);
        int e = 0;  // the block's largest biased exponent, as Exact computes it
        for (long u = 0; u < m; ++u)
          for (long i = lo; i < hi; ++i) e = std::max(e, static_cast<int>((bits_of(all(u, i)) >> 23) & 0xFF));
        // Grid of the block: 2^-(188 - h - max(e, 1)); rounding each of the M values costs half of it.
        const long double quantum = std::ldexp(1.0L, std::max(e, 1) - 188 + headroom);
        for (long i = lo; i < hi; ++i) {
          const reprosgd_test::DoubleDouble r = ref[static_cast<std::size_t>(i)];
          const long double exact_sum = static_cast<long double>(r.hi) + static_cast<long double>(r.lo);
          const float nearest = static_cast<float>(exact_sum);
          const long double err = std::fabs(static_cast<long double>(sum(i)) - exact_sum);
          // Quantisation (M half-quanta) plus the final rounding to float (one ulp, allowing
          // for the int64 -> double -> float double rounding).
          const long double ulp = std::ldexp(1.0L, std::max(static_cast<int>((bits_of(sum(i)) >> 23) & 0xFF), 1) - 150);
          const long double bound = static_cast<long double>(m) * quantum / 2 + ulp;
          over_bound += err > bound;
          worst_ratio = std::max(worst_ratio, static_cast<double>(err / bound));
          worst_ulp = std::max(worst_ulp, ulp_distance(sum(i), nearest));
          worst_native_ulp = std::max(worst_native_ulp, ulp_distance(plain(i), nearest));
          not_nearest += bits_of(sum(i)) != bits_of(nearest) && !(sum(i) == 0.0f && nearest == 0.0f);
          native_not_nearest += bits_of(plain(i)) != bits_of(nearest) && !(plain(i) == 0.0f && nearest == 0.0f);
        }
      }
      CHECK(over_bound == 0);
      // Without outliers every value keeps all its bits on the block's grid, so the sum is the
      // exact sum rounded to float (up to the rare double-rounding tie): at most one ulp away.
      if (!outliers) CHECK(worst_ulp <= 1);
      if (world_rank() == 0)
        std::printf("exact accuracy (M=%ld, n=%ld, %s): max error/bound %.3g, max %ld ulp from the correctly "
                    "rounded sum, %ld/%ld not correctly rounded; native float sum: max %ld ulp, %ld/%ld not "
                    "correctly rounded\n",
                    m, n_elements, outliers ? "with 1/32 outliers over 1e-30..1e30" : "blocks spanning 12 binades",
                    worst_ratio, worst_ulp, not_nearest, n_elements, worst_native_ulp, native_not_nearest, n_elements);
    }
  }
}

TEST_SUITE("reduction/native across ranks") {
  TEST_CASE("Native: the same rank count gives the same bits twice, on every rank") {
    using Space = Kokkos::DefaultHostExecutionSpace;
    reprosgd::DataParallel<Space> par;
    INFO("rank " << par.rank() << " of " << par.size());
    const long m = 23;
    const HostRows all = reprosgd_test::make_rows(5, m, n_elements, false);
    reprosgd::Native native;
    reprosgd::ReductionResult result;
    const HostSum first = reduce_owned<Space>(native, par, all, &result);
    CHECK(result.finite);
    const HostSum second = reduce_owned<Space>(native, par, all, &result);
    CHECK(bit_mismatches(first, second) == 0);
    const std::vector<std::uint64_t> prints = gather_all(par.comm(), reprosgd_test::fingerprint(first));
    for (const std::uint64_t f : prints) CHECK(f == prints[0]);
    // Not asserted (documented instead): that these bits are the same for another P. Printed so
    // runs at different P can be compared.
    reprosgd::Exact exact;
    const HostSum exact_sum = reduce_owned<Space>(exact, par, all);
    if (par.rank() == 0)
      std::printf("native: P=%d M=%ld fingerprint=%016llx (exact %016llx), %ld/%ld elements differ from exact\n",
                  par.size(), m, static_cast<unsigned long long>(prints[0]),
                  static_cast<unsigned long long>(reprosgd_test::fingerprint(exact_sum)),
                  bit_mismatches(first, exact_sum), n_elements);
  }

  TEST_CASE("Native under Serial is the ascending-order float sum of the rows") {
    using Space = Kokkos::DefaultHostExecutionSpace;
    reprosgd::Serial<Space> serial;
    const long m = 9;
    const HostRows all = reprosgd_test::make_rows(9, m, n_elements, false);
    reprosgd::Native native;
    reprosgd::ReductionResult result;
    const HostSum sum = reduce_owned<Space>(native, serial, all, &result);
    CHECK(result.finite);
    long bad = 0;
    for (long i = 0; i < n_elements; ++i) {
      float s = 0.0f;
      for (long u = 0; u < m; ++u) s = s + all(u, i);
      bad += bits_of(s) != bits_of(sum(i));
    }
    CHECK(bad == 0);
    Kokkos::View<float*, Kokkos::HostSpace> wrong("wrong", n_elements + 1);
    Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> rows("rows", m, n_elements);
    CHECK_THROWS_WITH_AS(native.reduce(serial, rows, m, wrong),
                         ("reprosgd::Native::reduce: sum has " + std::to_string(n_elements + 1) + " elements, rows have " +
                          std::to_string(n_elements))
                             .c_str(),
                         reprosgd::config_error);
  }
}
