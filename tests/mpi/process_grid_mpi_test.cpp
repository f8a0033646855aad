// SPDX-License-Identifier: BSD-3-Clause
/// @file ProcessGrid: every factorisation of P, the communicators' members, and wrong grids on every rank.
#include <doctest/doctest.h>

#include <reprosgd/parallel/process_grid.hpp>

#include <mpi.h>

#include "world.hpp"

#include <string>
#include <vector>

namespace {
using reprosgd_test::world_rank;
using reprosgd_test::world_size;
/// The MPI_COMM_WORLD ranks of `comm`'s members, in `comm`'s rank order.
std::vector<int> members(MPI_Comm comm) {
  int n = 0;
  MPI_Comm_size(comm, &n);
  std::vector<int> out(static_cast<std::size_t>(n));
  const int me = world_rank();
  MPI_Allgather(&me, 1, MPI_INT, out.data(), 1, MPI_INT, comm);
  return out;
}
}  // namespace

TEST_SUITE("parallel/process_grid") {
  TEST_CASE("GridShape parses PDxPM and refuses anything else with one message") {
    CHECK(reprosgd::GridShape::parse("2x2") == reprosgd::GridShape{2, 2});
    CHECK(reprosgd::GridShape::parse("1x4") == reprosgd::GridShape{1, 4});
    CHECK(reprosgd::GridShape::parse("12x3").ranks() == 36);
    for (const char* bad : {"", "x", "2x", "x2", "0x2", "2x0", "2*2", "2x2x1", "-1x4", "2 x2", "axb"}) {
      INFO(bad);
      CHECK_THROWS_WITH_AS(reprosgd::GridShape::parse(bad),
                           ("reprosgd::GridShape::parse: \"" + std::string(bad) +
                            "\" is not a grid (expected PDxPM with positive integers, e.g. 2x2)")
                               .c_str(),
                           reprosgd::config_error);
    }
    CHECK(reprosgd::GridShape::default_for(5) == reprosgd::GridShape{5, 1});
    CHECK(reprosgd::GridShape{3, 2}.check(6).empty());
    CHECK(reprosgd::GridShape{3, 2}.check(4) ==
          "reprosgd::ProcessGrid: grid 3x2 has 6 ranks but the communicator has 4 (grids that fit: 4x1, 2x2, 1x4)");
  }

  TEST_CASE("every factorisation of P: positions and communicator members") {
    const int p = world_size(), r = world_rank();
    for (int m = 1; m <= p; ++m) {
      if (p % m != 0) continue;
      const reprosgd::GridShape shape{p / m, m};
      CAPTURE(shape.text());
      reprosgd::ProcessGrid grid(MPI_COMM_WORLD, shape);
      CHECK(grid.rank() == r);
      CHECK(grid.data_rank() == r / m);
      CHECK(grid.model_rank() == r % m);
      CHECK(grid.model_size() == m);
      CHECK(grid.data_size() == p / m);
      // The model communicator holds this replica's ranks in model order, the data communicator
      // the ranks at this model position in replica order.
      std::vector<int> model_expected, data_expected;
      for (int q = 0; q < m; ++q) model_expected.push_back((r / m) * m + q);
      for (int d = 0; d < p / m; ++d) data_expected.push_back(d * m + r % m);
      CHECK(members(grid.model_comm()) == model_expected);
      CHECK(members(grid.data_comm()) == data_expected);
    }
  }

  TEST_CASE("a grid that does not fit throws the same error on every rank") {
    const int p = world_size();
    const reprosgd::GridShape wrong{p + 1, 1};
    CHECK_THROWS_WITH_AS(reprosgd::ProcessGrid(MPI_COMM_WORLD, wrong), wrong.check(p).c_str(), reprosgd::config_error);
  }

  TEST_CASE("ranks given different grids all throw, none hangs") {
    const int p = world_size();
    if (p != 4) return;  // needs two factorisations that fit
    const reprosgd::GridShape shape = world_rank() == 0 ? reprosgd::GridShape{2, 2} : reprosgd::GridShape{4, 1};
    CHECK_THROWS_WITH_AS(reprosgd::ProcessGrid(MPI_COMM_WORLD, shape),
                         ("reprosgd::ProcessGrid: the ranks were given different grids (this rank: " + shape.text() + ")")
                             .c_str(),
                         reprosgd::config_error);
  }
}
