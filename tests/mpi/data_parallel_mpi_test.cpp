// SPDX-License-Identifier: BSD-3-Clause
/// @file DataParallel's collectives, the micro-batch map and the MPI RAII helpers, on any rank count.
#include <doctest/doctest.h>

#include <reprosgd/detail/mpi_check.hpp>
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/mpi_environment.hpp>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include "world.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {
using Host = Kokkos::DefaultHostExecutionSpace;
using Par = reprosgd::DataParallel<Host>;
using I32 = Kokkos::View<std::int32_t*, Kokkos::HostSpace>;
using I64 = Kokkos::View<std::int64_t*, Kokkos::HostSpace>;
using F64 = Kokkos::View<double*, Kokkos::HostSpace>;

using reprosgd_test::world_rank;
using reprosgd_test::world_size;
}  // namespace

static_assert(reprosgd::Parallelism<reprosgd::DataParallel<Host>>);

TEST_SUITE("parallel/data_parallel") {
  TEST_CASE("rank and size are those of the communicator it duplicates") {
    Par par;
    INFO("rank " << world_rank());
    CHECK(par.rank() == world_rank());
    CHECK(par.size() == world_size());
    CHECK(std::string(Par::name()) == "data_parallel");
    int cmp = MPI_UNEQUAL;
    MPI_Comm_compare(par.comm(), MPI_COMM_WORLD, &cmp);
    CHECK(cmp == MPI_CONGRUENT);  // same group and order, a different context: a true duplicate
  }

  TEST_CASE("MPI is handed host memory directly, whatever the library says of device memory") {
    Par par;
    CHECK(par.reads_space_memory());
    I64 values("values", 3);
    for (int i = 0; i < 3; ++i) values(i) = world_rank() + i;
    par.allreduce_sum(values);  // a host View: no staging, no refusal
    const long p = world_size();
    for (int i = 0; i < 3; ++i) CHECK(values(i) == p * (p - 1) / 2 + p * i);
  }

  TEST_CASE("the duplicate returns errors; the user's communicator keeps its handler") {
    Par par;
    INFO("rank " << world_rank());
    MPI_Errhandler mine = MPI_ERRHANDLER_NULL, users = MPI_ERRHANDLER_NULL;
    MPI_Comm_get_errhandler(par.comm(), &mine);
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &users);
    CHECK(mine == MPI_ERRORS_RETURN);
    CHECK(users == MPI_ERRORS_ARE_FATAL);
    MPI_Errhandler_free(&mine);
    MPI_Errhandler_free(&users);
    // A purely local failure (a send to a rank that does not exist) comes back as comm_error.
    int value = 0;
    try {
      reprosgd::detail::mpi_check(MPI_Send(&value, 1, MPI_INT, par.size() + 3, 0, par.comm()), "reprosgd::test: MPI_Send");
      FAIL("MPI_Send to rank P+3 succeeded");
    } catch (const reprosgd::comm_error& e) {
      CHECK(e.code() == reprosgd::errc::communication_error);
      CHECK(std::string(e.what()).rfind("reprosgd::test: MPI_Send failed: ", 0) == 0);
    }
  }

  TEST_CASE("mpi_check names the call and the MPI error") {
    CHECK_NOTHROW(reprosgd::detail::mpi_check(MPI_SUCCESS, "x"));
    try {
      reprosgd::detail::mpi_check(MPI_ERR_COUNT, "reprosgd::f: MPI_Allreduce");
      FAIL("no throw");
    } catch (const reprosgd::comm_error& e) {
      const std::string what = e.what();
      CHECK(what.rfind("reprosgd::f: MPI_Allreduce failed: ", 0) == 0);
      CHECK(what.find("(error code " + std::to_string(MPI_ERR_COUNT) + ", class " + std::to_string(MPI_ERR_COUNT) + ")") !=
            std::string::npos);
    }
  }

  TEST_CASE("a communicator of the user's is duplicated, not taken over") {
    INFO("rank " << world_rank());
    MPI_Comm half = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank() % 2, world_rank(), &half);
    {
      Par par(half);
      CHECK(par.size() == (world_size() + 1 - world_rank() % 2) / 2);
      CHECK(par.rank() == world_rank() / 2);
      const bool all = par.agree(true);
      CHECK(all);
    }
    // The user's communicator still works after the policy is gone.
    int one = 1, total = 0;
    CHECK(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, half) == MPI_SUCCESS);
    CHECK(total == (world_size() + 1 - world_rank() % 2) / 2);
    MPI_Comm_free(&half);
  }

  TEST_CASE("moved-from policies do not free the communicator twice") {
    Par a;
    Par b(std::move(a));
    Par c;
    c = std::move(b);
    CHECK(c.agree(true));
    CHECK(c.size() == world_size());
  }

  TEST_CASE("MpiEnvironment inside an initialised program neither initialises nor finalises") {
    reprosgd::MpiEnvironment env;
    CHECK_FALSE(env.owner());
    CHECK(env.thread_level() >= MPI_THREAD_FUNNELED);
  }

  TEST_CASE("MpiEnvironment refuses a finalize_timeout that is negative, NaN or infinite, before it touches MPI") {
    int argc = 0;
    char** argv = nullptr;
    CHECK_THROWS_WITH_AS(reprosgd::MpiEnvironment(argc, argv, reprosgd::MpiStartOptions{.finalize_timeout = -2.5}),
                         "reprosgd::MpiEnvironment: finalize_timeout must be a finite number of seconds >= 0 (0: none), got -2.5",
                         reprosgd::config_error);
    CHECK_THROWS_AS(reprosgd::MpiEnvironment(argc, argv, reprosgd::MpiStartOptions{.finalize_timeout = std::nan("")}),
                    reprosgd::config_error);
    CHECK_THROWS_AS(
        reprosgd::MpiEnvironment(argc, argv, reprosgd::MpiStartOptions{.finalize_timeout = std::numeric_limits<double>::infinity()}),
        reprosgd::config_error);
    // Inside an initialised program a valid one changes nothing: this object will not finalise.
    reprosgd::MpiEnvironment env(argc, argv, reprosgd::MpiStartOptions{.finalize_timeout = 5.0});
    env.ending_with_error(3);
    CHECK_FALSE(env.owner());
  }

  TEST_CASE("mpi_fault_tolerance_enabled is false under a launcher started without --with-ft ulfm") {
    // CTest starts these processes with plain mpiexec; the ULFM tests check the other answer
    // (tests/ulfm/ulfm_shrink_test.cpp).
    CHECK_FALSE(reprosgd::mpi_fault_tolerance_enabled());
    CHECK_FALSE(reprosgd::mpi_fault_tolerance_enabled());  // the tool interface starts and ends each time
  }

  TEST_CASE("micro_batch_range tiles [0, M) in rank order, contiguously, for every M") {
    Par par;
    const int p = par.size();
    INFO("rank " << par.rank() << " of " << p);
    std::vector<long> ms;
    for (long m = 0; m <= 4L * p + 3; ++m) ms.push_back(m);
    ms.push_back(1000003);
    ms.push_back(1L << 40);
    for (const long m : ms) {
      INFO("M = " << m);
      long expected_begin = 0;
      for (int r = 0; r < p; ++r) {
        const reprosgd::MicroBatchRange range = reprosgd::micro_batch_range_of(r, p, m);
        CHECK(range.begin == expected_begin);
        CHECK(range.end >= range.begin);
        if (m >= p) CHECK(range.size() >= 1);
        // Balanced: sizes differ by at most one.
        CHECK(range.size() >= m / p);
        CHECK(range.size() <= (m + p - 1) / p);
        // The owner map (docs/distributed.md): micro-batch u belongs to rank floor(u*P/M).
        if (range.size() > 0 && m < (1L << 40)) {
          CHECK((range.begin * p) / m == r);
          CHECK(((range.end - 1) * p) / m == r);
        }
        expected_begin = range.end;
      }
      CHECK(expected_begin == m);
      const reprosgd::MicroBatchRange mine = par.micro_batch_range(m);
      CHECK(mine == reprosgd::micro_batch_range_of(par.rank(), p, m));
      // The ranks together own exactly M.
      I64 count("count", 1);
      count(0) = mine.size();
      par.allreduce_sum(count);
      CHECK(count(0) == m);
    }
    CHECK_THROWS_WITH_AS((void)par.micro_batch_range(-1),
                         "reprosgd::DataParallel::micro_batch_range: -1 micro-batches (must be >= 0)",
                         reprosgd::config_error);
  }

  TEST_CASE("agree is a logical AND over the ranks") {
    Par par;
    INFO("rank " << par.rank());
    CHECK(par.agree(true));
    CHECK_FALSE(par.agree(false));
    CHECK_FALSE(par.agree(par.rank() != par.size() - 1));
    CHECK(par.agree(par.rank() >= 0));
    // One dissenting rank decides for all, whichever rank it is.
    for (int r = 0; r < par.size(); ++r) CHECK_FALSE(par.agree(par.rank() != r));
  }

  TEST_CASE("allreduce_max and allreduce_sum are exact elementwise integer reductions") {
    Par par;
    const int p = par.size(), me = par.rank();
    INFO("rank " << me << " of " << p);
    const long n = 1031;
    I32 mx("max", n);
    I64 sm("sum", n);
    auto v32 = [](int r, long i) { return static_cast<std::int32_t>(((r * 7919 + i * 104729) % 511) - 255); };
    // Large values with cancellation: a float or double sum would lose the low bits.
    auto v64 = [](int r, long i) {
      const std::int64_t big = (std::int64_t{1} << 58) + 12345 * i;
      return (r % 2 == 0 ? big : -big) + static_cast<std::int64_t>(r) * 3 + i;
    };
    for (long i = 0; i < n; ++i) {
      mx(i) = v32(me, i);
      sm(i) = v64(me, i);
    }
    par.allreduce_max(mx);
    par.allreduce_sum(sm);
    long bad_max = 0, bad_sum = 0;
    for (long i = 0; i < n; ++i) {
      std::int32_t emax = v32(0, i);
      std::int64_t esum = 0;
      for (int r = 0; r < p; ++r) {
        emax = v32(r, i) > emax ? v32(r, i) : emax;
        esum += v64(r, i);
      }
      bad_max += mx(i) != emax;
      bad_sum += sm(i) != esum;
    }
    CHECK(bad_max == 0);
    CHECK(bad_sum == 0);
    // Subviews (what Exact passes) work, and an empty vector is a no-op collective.
    I32 big("big", 10);
    Kokkos::deep_copy(big, me);
    par.allreduce_max(Kokkos::subview(big, Kokkos::make_pair(2L, 7L)));
    CHECK(big(1) == me);
    CHECK(big(2) == p - 1);
    CHECK(big(6) == p - 1);
    CHECK(big(7) == me);
    par.allreduce_sum(I64("empty", 0));
  }

  TEST_CASE("allgather_micro_batches returns all M values in micro-batch order on every rank") {
    Par par;
    const int p = par.size();
    INFO("rank " << par.rank() << " of " << p);
    for (const long m : {0L, 1L, 2L, 3L, 7L, 23L, 1000L}) {
      INFO("M = " << m);
      const reprosgd::MicroBatchRange mine = par.micro_batch_range(m);
      F64 local("local", mine.size()), all("all", m);
      for (long u = mine.begin; u < mine.end; ++u) local(u - mine.begin) = 1.5 * static_cast<double>(u) + 0.25;
      par.allgather_micro_batches(local, all, m);
      for (long u = 0; u < m; ++u) CHECK(all(u) == 1.5 * static_cast<double>(u) + 0.25);
      // int64 values and the in-place form (local is this rank's segment of all).
      I64 all64("all64", m);
      for (long u = mine.begin; u < mine.end; ++u) all64(u) = -3 * u;
      par.allgather_micro_batches(Kokkos::subview(all64, Kokkos::make_pair(mine.begin, mine.end)), all64, m);
      for (long u = 0; u < m; ++u) CHECK(all64(u) == -3 * u);
    }
  }

  TEST_CASE("allgather_micro_batches with a wrong size on one rank throws on every rank") {
    Par par;
    INFO("rank " << par.rank());
    const long m = 2L * par.size() + 1;
    const reprosgd::MicroBatchRange mine = par.micro_batch_range(m);
    const long wrong = par.rank() == par.size() - 1 ? mine.size() + 1 : mine.size();
    F64 local("local", wrong), all("all", m);
    const std::string expected =
        "reprosgd::DataParallel::allgather_micro_batches: rank " + std::to_string(par.rank()) +
        (par.rank() == par.size() - 1 ? " expected " + std::to_string(mine.size()) + " local and " +
                                            std::to_string(m) + " gathered contiguous values, got " +
                                            std::to_string(wrong) + " and " + std::to_string(m)
                                      : " saw a size mismatch on another rank");
    CHECK_THROWS_WITH_AS(par.allgather_micro_batches(local, all, m), expected.c_str(), reprosgd::config_error);
    // Nobody is left inside a collective: the group still works.
    CHECK(par.agree(true));
  }
}
