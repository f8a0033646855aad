// SPDX-License-Identifier: BSD-3-Clause
/// @file CanonicalBlocks (a shard's segments of the whole vector's Exact blocks) and the Exact
/// reduction over segments in one process. The reduction across model ranks is tested in
/// tests/mpi/sharded_reduction_mpi_test.cpp.
#include <doctest/doctest.h>

#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/reduction/canonical_blocks.hpp>
#include <reprosgd/reduction/exact.hpp>

#include <support/exec_spaces.hpp>
#include "reduction_test_support.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using reprosgd_test::mix;

using Blocks = reprosgd::CanonicalBlocks<Kokkos::HostSpace>;
using Runs = std::vector<reprosgd::CanonicalRun>;

std::vector<long> starts_of(const Blocks& b) {
  std::vector<long> out;
  for (std::size_t s = 0; s < b.starts().extent(0); ++s) out.push_back(b.starts()(s));
  return out;
}
std::vector<long> blocks_of(const Blocks& b) { return {b.block_of().begin(), b.block_of().end()}; }


/// Values spread over `binades` binades from 2^-60 up within every block: 121 binades (a block's
/// exponent matters: the integer grid), or 8 (the double sum is exact: the fast path).
float value(long row, long col, std::uint32_t binades) {
  const std::uint64_t h = mix(static_cast<std::uint64_t>(row) * 1000003u + static_cast<std::uint64_t>(col));
  const std::uint32_t bits = (static_cast<std::uint32_t>(h >> 63) << 31) |
                             ((67u + static_cast<std::uint32_t>((h >> 24) % binades)) << 23) |
                             (static_cast<std::uint32_t>(h) & 0x7FFFFFu);
  return std::bit_cast<float>(bits);
}

}  // namespace

TEST_SUITE("reduction/canonical blocks") {
  TEST_CASE("segments: cut at canonical block boundaries, adjacent runs merged") {
    SUBCASE("one run is the uniform blocks") {
      const Blocks b(Runs{{0, 0, 600}}, 600);
      CHECK(b.local_size() == 600);
      CHECK(b.canonical_blocks() == 3);
      CHECK(starts_of(b) == std::vector<long>{0, 256, 512, 600});
      CHECK(blocks_of(b) == std::vector<long>{0, 1, 2});
    }
    SUBCASE("runs adjacent in both layouts make one segment per block") {
      const Blocks b(Runs{{0, 0, 100}, {100, 100, 156}, {256, 256, 10}}, 300);
      CHECK(starts_of(b) == std::vector<long>{0, 256, 266});
      CHECK(blocks_of(b) == std::vector<long>{0, 1});
    }
    SUBCASE("a shard's runs: pieces of one block stay separate segments of that block") {
      // Columns 4..7 of a 10 x 40 matrix (row-major), then 4 biases at 400: blocks 0 and 1.
      Runs runs;
      for (std::size_t r = 0; r < 10; ++r) runs.push_back({r * 40 + 4, r * 4, 4});
      runs.push_back({404, 40, 4});
      const Blocks b(runs, 440);
      CHECK(b.local_size() == 44);
      CHECK(b.canonical_blocks() == 2);
      CHECK(b.segments() == 11);
      // Rows 0..6 start below 256 (6 * 40 + 4 = 244), rows 7.. and the biases above.
      CHECK(blocks_of(b) == std::vector<long>{0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1});
      CHECK(starts_of(b).back() == 44);
    }
    SUBCASE("a run across a block boundary is cut there") {
      const Blocks b(Runs{{250, 0, 10}}, 300);
      CHECK(starts_of(b) == std::vector<long>{0, 6, 10});
      CHECK(blocks_of(b) == std::vector<long>{0, 1});
    }
    SUBCASE("no runs: no segments") {
      const Blocks b(Runs{}, 1000);
      CHECK(b.local_size() == 0);
      CHECK(b.segments() == 0);
      CHECK(b.canonical_blocks() == 4);
    }
  }

  TEST_CASE("segments: the whole Sequential model (one model rank) is the uniform blocks") {
    using reprosgd::Dense, reprosgd::Init;
    reprosgd::Sequential model{Dense{784, 47, Init::he_normal, 8}, Dense{47, 10, Init::he_normal, 8}};
    const auto runs = model.canonical_runs(0, 1);
    const Blocks b(runs, model.canonical_parameter_count());
    const long n = static_cast<long>(model.canonical_parameter_count());
    REQUIRE(b.segments() == (n + 255) / 256);
    for (long s = 0; s < b.segments(); ++s) {
      CHECK(b.starts()(s) == 256 * s);
      CHECK(b.block_of()[static_cast<std::size_t>(s)] == s);
    }
  }

  TEST_CASE("segments: runs that are not a shard's are refused with the reason") {
    CHECK_THROWS_WITH_AS(Blocks(Runs{{0, 0, 10}, {5, 10, 10}}, 100),
                         "reprosgd::CanonicalBlocks: run 1 (canonical 5, local 10, length 10) does not continue the "
                         "shard at local 10 after canonical 10 within 100 elements",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS(Blocks(Runs{{0, 0, 10}, {20, 11, 10}}, 100),
                         "reprosgd::CanonicalBlocks: run 1 (canonical 20, local 11, length 10) does not continue the "
                         "shard at local 10 after canonical 10 within 100 elements",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS(Blocks(Runs{{95, 0, 10}}, 100),
                         "reprosgd::CanonicalBlocks: run 0 (canonical 95, local 0, length 10) does not continue the "
                         "shard at local 0 after canonical 0 within 100 elements",
                         reprosgd::config_error);
  }

  TEST_CASE("SegmentBlocks::of finds every element's segment") {
    Runs runs;
    std::size_t local = 0;
    for (std::size_t c = 3; c + 7 < 2000; c += 7 + c % 5) {  // runs of 1..7 with gaps
      const std::size_t len = 1 + c % 7;
      runs.push_back({c, local, len});
      local += len;
      c += len;
    }
    const Blocks b(runs, 2000);
    const reprosgd::detail::exact::SegmentBlocks<Kokkos::HostSpace> seg{b.starts()};
    for (long i = 0; i < b.local_size(); ++i) {
      const long s = seg.of(i);
      CHECK(seg.begin(s) <= i);
      CHECK(i < seg.begin(s + 1));
    }
  }

  TEST_CASE_TEMPLATE_DEFINE("Exact over segments of the whole vector gives the uniform blocks' bits", Space,
                            exact_segments_id) {
    // The whole vector as the only model rank: random adjacent runs, merged back into the uniform
    // blocks, through the sharded path (segment exponents folded into canonical blocks, the fused
    // finish over segments) on every host backend.
    using Mem = typename Space::memory_space;
    reprosgd::Serial<Space> serial;
    constexpr long n = 5 * 256 + 31;
    for (const long m : {1L, 3L, 12L})
     for (const std::uint32_t binades : {121u, 8u}) {
      INFO("M = " << m << ", " << binades << " binades");
      Kokkos::View<float**, Kokkos::LayoutRight, Mem> rows("rows", m, n);
      for (long u = 0; u < m; ++u)
        for (long i = 0; i < n; ++i) rows(u, i) = value(u, i, binades);
      Kokkos::View<float*, Mem> uniform("uniform", n), segmented("segmented", n);
      reprosgd::Exact a, b;
      REQUIRE(a.reduce(serial, rows, m, uniform).finite);
      Runs runs;
      for (std::size_t at = 0; at < static_cast<std::size_t>(n);) {
        const std::size_t len = std::min<std::size_t>(static_cast<std::size_t>(n) - at, 1 + mix(at) % 90);
        runs.push_back({at, at, len});
        at += len;
      }
      const reprosgd::CanonicalBlocks<Mem> layout(runs, n);
      REQUIRE(layout.segments() == (n + 255) / 256);
      REQUIRE(b.reduce(serial, rows, m, segmented, layout, serial).finite);
      long differ = 0;
      for (long i = 0; i < n; ++i) differ += std::bit_cast<std::uint32_t>(uniform(i)) != std::bit_cast<std::uint32_t>(segmented(i));
      CHECK(differ == 0);
    }
  }
  TEST_CASE_TEMPLATE_APPLY(exact_segments_id, reprosgd_test::spaces);
}
