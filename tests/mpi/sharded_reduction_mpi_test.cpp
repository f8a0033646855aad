// SPDX-License-Identifier: BSD-3-Clause
/// @file The Exact gradient reduction of a sharded model (issue 13): for every P_data x P_model grid
/// that fits the world and for random shardings of one canonical vector (values spread over 12
/// binades with outliers, or ramping over 40 binades across each block), every element's sum has
/// the bits of the one-process sum of the canonical vector; NaN, Inf and overflow are agreed on
/// every rank, whichever rank holds them.
#include <doctest/doctest.h>

#include "gradient_rows.hpp"
#include "world.hpp"

#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/parallel/hybrid.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/reduction/canonical_blocks.hpp>
#include <reprosgd/reduction/exact.hpp>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using reprosgd_test::bits_of;
using Space = Kokkos::DefaultHostExecutionSpace;
using HostRows = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using HostSum = Kokkos::View<float*, Kokkos::HostSpace>;
using Blocks = reprosgd::CanonicalBlocks<Kokkos::HostSpace>;
using Runs = std::vector<reprosgd::CanonicalRun>;

/// Every grid PD x PM with PD * PM == P.
std::vector<reprosgd::GridShape> grids_of(int p) {
  std::vector<reprosgd::GridShape> out;
  for (int pm = 1; pm <= p; ++pm)
    if (p % pm == 0) out.push_back({p / pm, pm});
  return out;
}

/// A random sharding of [0, n) over `pm` owners: pieces of 1 to 300 elements (so they cut blocks
/// anywhere), each owned by a rank drawn from (seed, piece). Rank q's runs, in canonical order.
Runs random_runs(std::uint64_t seed, long n, int pm, int q) {
  Runs runs;
  std::size_t local = 0;
  long piece = 0;
  for (long at = 0; at < n; ++piece) {
    const std::uint64_t h = reprosgd_test::mix64(seed * 0x9E37ull + static_cast<std::uint64_t>(piece));
    const long len = std::min(n - at, 1 + static_cast<long>(h % 300));
    if (static_cast<int>((h >> 32) % static_cast<std::uint64_t>(pm)) == q) {
      runs.push_back({static_cast<std::size_t>(at), local, static_cast<std::size_t>(len)});
      local += static_cast<std::size_t>(len);
    }
    at += len;
  }
  return runs;
}

/// Rows whose magnitude ramps over 40 binades across each block of 256 columns, with random
/// mantissas and signs and at most 3 binades between the rows of one column: a shard's piece of a
/// block often spans few binades (its double sum is exact) while the whole block's exponent is far
/// above it (it is not on the block's grid): the case a model rank's speculative sum must redo.
HostRows ramp_rows(std::uint64_t seed, long m, long n) {
  HostRows rows("ramp rows", m, n);
  for (long u = 0; u < m; ++u)
    for (long i = 0; i < n; ++i) {
      const std::uint64_t h = reprosgd_test::mix64(seed ^ (static_cast<std::uint64_t>(u) << 40) ^ static_cast<std::uint64_t>(i));
      const std::uint32_t exponent = 90u + static_cast<std::uint32_t>((i % 256) * 40 / 256) + static_cast<std::uint32_t>(h % 3);
      rows(u, i) = reprosgd_test::float_from_bits((static_cast<std::uint32_t>(h >> 63) << 31) | (exponent << 23) |
                                                  (static_cast<std::uint32_t>(h >> 8) & 0x7FFFFFu));
    }
  return rows;
}

/// The rows this rank holds: micro-batches `mine` of the canonical rows `all`, at its runs' columns.
HostRows shard_rows(const HostRows& all, const Runs& runs, reprosgd::MicroBatchRange mine, long local_n) {
  HostRows rows("shard rows", mine.size(), local_n);
  for (long u = mine.begin; u < mine.end; ++u)
    for (const auto& r : runs)
      for (std::size_t e = 0; e < r.length; ++e) rows(u - mine.begin, static_cast<long>(r.local + e)) = all(u, static_cast<long>(r.canonical + e));
  return rows;
}

/// Elements of the shard whose sum differs in its bits from the one-process sum `expected`.
long mismatches(const HostSum& got, const HostSum& expected, const Runs& runs) {
  long bad = 0;
  for (const auto& r : runs)
    for (std::size_t e = 0; e < r.length; ++e)
      bad += bits_of(got(static_cast<long>(r.local + e))) != bits_of(expected(static_cast<long>(r.canonical + e)));
  return bad;
}

long sum_over_world(long x) {
  long total = 0;
  MPI_Allreduce(&x, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

/// The one-process Exact sum of all rows.
HostSum one_process_sum(const HostRows& all) {
  reprosgd::Serial<Space> serial;
  reprosgd::Exact exact;
  HostSum sum("one-process sum", all.extent(1));
  REQUIRE(exact.reduce(serial, all, static_cast<long>(all.extent(0)), sum).finite);
  return sum;
}

}  // namespace

TEST_SUITE("reduction/exact over model shards") {
  TEST_CASE("CanonicalBlocks: random shardings on every grid give the one-process bits") {
    const int p = reprosgd_test::world_size();
    constexpr long n = 9 * 256 + 77;
    long old_layout_mismatches = 0;
    for (const reprosgd::GridShape g : grids_of(p)) {
      reprosgd::Hybrid<Space> par(g);
      const int q = par.model_group().model_rank();
      for (const long m : {1L, 2L, 5L, 12L, 23L}) {
        if (m < g.data) continue;  // every replica needs a micro-batch
        for (const std::uint64_t seed : {3ull, 0xBEEFull}) {
          INFO("grid " << g.text() << ", world rank " << par.world_rank() << ", M = " << m << ", seed " << seed);
          const HostRows all = seed == 3 ? reprosgd_test::make_rows(seed, m, n) : ramp_rows(seed, m, n);
          const HostSum expected = one_process_sum(all);
          const Runs runs = random_runs(seed, n, g.model, q);
          const Blocks blocks(runs, n);
          const HostRows rows = shard_rows(all, runs, par.micro_batch_range(m), blocks.local_size());
          HostSum sum("sum", blocks.local_size());
          reprosgd::Exact exact;
          const reprosgd::ReductionResult r = exact.reduce(par, rows, m, sum, blocks, par.model_group().parallelism());
          CHECK(r.finite);
          CHECK(mismatches(sum, expected, runs) == 0);
          // A second call reuses the workspace.
          CHECK(exact.reduce(par, rows, m, sum, blocks, par.model_group().parallelism()).finite);
          CHECK(mismatches(sum, expected, runs) == 0);
          // Blocks laid over the shard's own buffer (the bug): the test's values tell them apart.
          if (g.model > 1) {
            reprosgd::Exact shard_local;
            (void)shard_local.reduce(par, rows, m, sum);
            old_layout_mismatches += mismatches(sum, expected, runs);
          }
        }
      }
    }
    // With P_model >= 2 the shard-local blocks must have differed somewhere: these values are
    // spread widely enough for a block boundary to matter.
    if (p > 1) CHECK(sum_over_world(old_layout_mismatches) > 0);
  }

  TEST_CASE("CanonicalBlocks: a Sequential model's shards on every grid give the one-process bits") {
    const int p = reprosgd_test::world_size();
    using reprosgd::Dense, reprosgd::Init;
    // 20 features are 3 chunks of 8: on 4 model ranks one owns none of the second layer.
    reprosgd::Sequential model{Dense{784, 47, Init::he_normal, 8}, Dense{47, 20, Init::he_normal, 8},
                               Dense{20, 10, Init::he_normal, 8}};
    const long n = static_cast<long>(model.canonical_parameter_count());
    const long m = 12;
    const HostRows all = reprosgd_test::make_rows(17, m, n);
    const HostSum expected = one_process_sum(all);
    for (const reprosgd::GridShape g : grids_of(p)) {
      reprosgd::Hybrid<Space> par(g);
      const int q = par.model_group().model_rank();
      INFO("grid " << g.text() << ", world rank " << par.world_rank());
      const Runs runs = model.canonical_runs(q, g.model);
      const Blocks blocks(runs, static_cast<std::size_t>(n));
      const HostRows rows = shard_rows(all, runs, par.micro_batch_range(m), blocks.local_size());
      HostSum sum("sum", blocks.local_size());
      reprosgd::Exact exact;
      CHECK(exact.reduce(par, rows, m, sum, blocks, par.model_group().parallelism()).finite);
      CHECK(mismatches(sum, expected, runs) == 0);
    }
  }

  TEST_CASE("CanonicalBlocks: a NaN, an Inf or an overflowing sum on one rank is reported on every rank") {
    const int p = reprosgd_test::world_size();
    constexpr long n = 3 * 256 + 5;
    const long m = 6;
    for (const reprosgd::GridShape g : grids_of(p)) {
      reprosgd::Hybrid<Space> par(g);
      const int q = par.model_group().model_rank();
      const Runs runs = random_runs(5, n, g.model, q);
      const Blocks blocks(runs, n);
      // Element 300's owner (a block this rank may hold nothing of).
      for (const int kind : {0, 1, 2}) {
        INFO("grid " << g.text() << ", world rank " << par.world_rank() << ", kind " << kind);
        HostRows all = reprosgd_test::make_rows(9, m, n, false);
        if (kind == 0) all(m - 1, 300) = std::numeric_limits<float>::quiet_NaN();
        if (kind == 1) all(0, 300) = -std::numeric_limits<float>::infinity();
        if (kind == 2)
          for (long u = 0; u < m; ++u) all(u, 300) = 3.0e38f;  // finite rows whose sum is not
        const HostRows rows = shard_rows(all, runs, par.micro_batch_range(m), blocks.local_size());
        HostSum sum("sum", blocks.local_size());
        reprosgd::Exact exact;
        CHECK_FALSE(exact.reduce(par, rows, m, sum, blocks, par.model_group().parallelism()).finite);
        // Still in step: a clean reduction afterwards is finite everywhere.
        const HostRows clean = shard_rows(reprosgd_test::make_rows(9, m, n, false), runs, par.micro_batch_range(m),
                                          blocks.local_size());
        CHECK(exact.reduce(par, clean, m, sum, blocks, par.model_group().parallelism()).finite);
      }
    }
  }

  TEST_CASE("CanonicalBlocks: rows that do not match the layout are refused before any collective") {
    reprosgd::Hybrid<Space> par(reprosgd::GridShape{1, reprosgd_test::world_size()});
    const Runs runs{{0, 0, 10}, {20, 10, 5}};
    const Blocks blocks(runs, 40);
    HostRows rows("rows", 1, 14);
    HostSum sum("sum", 14);
    reprosgd::Exact exact;
    CHECK_THROWS_WITH_AS(exact.reduce(par, rows, 1, sum, blocks, par.model_group().parallelism()),
                         "reprosgd::Exact::reduce: the shard layout has 15 elements, rows have 14",
                         reprosgd::config_error);
  }
}
