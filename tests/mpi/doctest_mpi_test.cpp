// SPDX-License-Identifier: BSD-3-Clause
/// @file testing/doctest_mpi.hpp: an MPI test case's body runs on exactly its ranks with a
/// communicator of that size, a smaller world skips it, a failure on other ranks fails the case on
/// rank 0 too (once), an exception after the body's last collective comes back on its rank only.
#include <doctest/doctest.h>

#include <reprosgd/testing/doctest_mpi.hpp>

#include <mpi.h>

#include <stdexcept>
#include <vector>

#include "world.hpp"

namespace {

namespace rt = reprosgd::testing::detail;

// What the last body saw on this rank (bodies are plain functions: no captures).
struct Seen {
  bool ran = false;
  int rank = -1, nranks = -1, comm_size = -1, sum = -1;
};
Seen seen;

void record(int test_rank, int test_nranks, MPI_Comm test_comm) {
  seen.ran = true;
  seen.rank = test_rank;
  seen.nranks = test_nranks;
  MPI_Comm_size(test_comm, &seen.comm_size);
  int one = 1;
  MPI_Allreduce(&one, &seen.sum, 1, MPI_INT, MPI_SUM, test_comm);  // the communicator works
}

}  // namespace

TEST_SUITE("testing/doctest_mpi") {
  TEST_CASE("the body runs on world ranks 0 .. n-1 only, with a communicator of n ranks") {
    const int world = reprosgd_test::world_size(), rank = reprosgd_test::world_rank();
    for (int n = 1; n <= world; ++n) {
      CAPTURE(n);
      CAPTURE(rank);
      seen = {};
      const long failed = rt::failed_assertions();
      rt::run_mpi_test_case(n, record);
      CHECK(rt::failed_assertions() == failed);
      CHECK(seen.ran == (rank < n));
      if (rank < n) {
        CHECK(seen.rank == rank);
        CHECK(seen.nranks == n);
        CHECK(seen.comm_size == n);
        CHECK(seen.sum == n);
      }
      int ran = seen.ran ? 1 : 0, ran_total = 0;
      MPI_Allreduce(&ran, &ran_total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      CHECK(ran_total == n);
    }
  }

  TEST_CASE("a world smaller than the case skips the body on every rank, without a failure") {
    seen = {};
    const long failed = rt::failed_assertions();
    rt::run_mpi_test_case(reprosgd_test::world_size() + 1, record);  // rank 0 prints "skipped: ..."
    CHECK_FALSE(seen.ran);
    CHECK(rt::failed_assertions() == failed);
  }

  TEST_CASE("a failed assertion on other ranks fails the case on rank 0 too, exactly once" *
            doctest::expected_failures(1)) {
    // Ranks 1 .. p-1 fail one CHECK each; rank 0 passes its body and gets the agreed failure. With
    // one rank, rank 0 fails its own CHECK and must not be reported a second time.
    rt::run_mpi_test_case(reprosgd_test::world_size(), [](int test_rank, int test_nranks, MPI_Comm) {
      if (test_rank != 0 || test_nranks == 1) CHECK_MESSAGE(test_rank < 0, "the deliberate failure of this test");
    });
  }

  TEST_CASE("an exception after the body's last collective is rethrown on its rank; the others go on") {
    const long failed = rt::failed_assertions();
    auto body = [](int test_rank, int, MPI_Comm test_comm) {
      int one = 1, sum = 0;
      MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, test_comm);
      if (test_rank == 0) throw std::runtime_error("rank 0 stops after the collective");
    };
    if (reprosgd_test::world_rank() == 0)
      CHECK_THROWS_WITH_AS(rt::run_mpi_test_case(reprosgd_test::world_size(), body),
                           "rank 0 stops after the collective", std::runtime_error);
    else
      CHECK_NOTHROW(rt::run_mpi_test_case(reprosgd_test::world_size(), body));
    CHECK(rt::failed_assertions() == failed);
  }

  TEST_CASE("rank 0's report names the other ranks that failed, and how") {
    using rt::body_failed_assertion;
    using rt::body_threw;
    CHECK(rt::failed_ranks_message({0}) == "");
    CHECK(rt::failed_ranks_message({body_failed_assertion, 0, 0}) == "");  // rank 0's own: in its report
    CHECK(rt::failed_ranks_message({0, body_failed_assertion}) ==
          "the body failed on rank(s) 1 (failed assertions) of the case's 2; their own output has the details");
    CHECK(rt::failed_ranks_message({body_threw, 0, body_threw, body_failed_assertion | body_threw}) ==
          "the body failed on rank(s) 2 (threw), 3 (failed assertions, threw) of the case's 4; their own output "
          "has the details");
  }

  REPROSGD_MPI_TEST_CASE("REPROSGD_MPI_TEST_CASE gives its body test_rank, test_nranks and test_comm", 2) {
    int size = 0, rank = -1;
    MPI_Comm_size(test_comm, &size);
    MPI_Comm_rank(test_comm, &rank);
    CHECK(size == 2);
    CHECK(test_nranks == 2);
    CHECK(rank == test_rank);
    CHECK(test_rank == reprosgd_test::world_rank());
    int sum = 0;
    MPI_Allreduce(&test_rank, &sum, 1, MPI_INT, MPI_SUM, test_comm);
    CHECK(sum == 1);  // ranks 0 and 1
  }
}
