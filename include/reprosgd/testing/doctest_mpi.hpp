// SPDX-License-Identifier: BSD-3-Clause
/// @file MPI test cases for doctest: REPROSGD_MPI_TEST_CASE(name, nranks), whose body runs on a
/// communicator of exactly nranks ranks, and testing::run_doctest_mpi, the main of such a program.
///
/// doctest's own MPI extension (`doctest/extensions/doctest_mpi.h`, `MPI_TEST_CASE`) is not part
/// of every doctest installation — Debian's doctest-dev 2.4.9 ships only `doctest.h` — so the
/// library provides this equivalent on top of doctest's public API (test cases, assertions and a
/// listener).
///
/// **How a case runs.** Every rank of MPI_COMM_WORLD runs every test case, in the same order (the
/// same binary and arguments on every rank). An MPI test case of n ranks splits MPI_COMM_WORLD
/// (`MPI_Comm_split`, collective): world ranks 0 … n−1 run the body with the new communicator, the
/// others skip it. When the world has fewer than n ranks the case is skipped on every rank, and
/// rank 0 prints `MESSAGE: skipped: the case needs n MPI ranks, the run has p`; the case then
/// counts as passed (doctest 2.4 has no run-time skip), so launch the program with at least as many
/// ranks as its largest case — a CTest that wants every case run passes `-n` accordingly.
///
/// **Failures.** After the body the n ranks agree (an `MPI_Allgather` on a communicator of the
/// helper's own) on which of them failed an assertion or threw. Rank 0 then also fails the case,
/// naming the other ranks that failed, so its full report shows a failure that only another rank
/// saw; every rank's own failures are in its own output (the other ranks report `--minimal`), and
/// run_doctest_mpi's exit code is the worst over all ranks.
///
/// **The collective rule.** A body must reach every collective on every one of its ranks. An
/// assertion that stops the body (REQUIRE, or an exception) on some ranks only, *before* a
/// collective the others then wait in, leaves them waiting forever. So: use CHECK for conditions
/// that may differ between ranks; use REQUIRE only for values every rank agrees on (a replicated
/// fingerprint, a reduced count) or after the body's last collective. An exception that leaves the
/// body after its last collective is safe: it is caught, agreed, and rethrown on its rank. A CTest
/// timeout turns a hang that the rule did not prevent into a failure.
#pragma once

#include <reprosgd/config.hpp>

#if !REPROSGD_HAS_MPI
#error "reprosgd/testing/doctest_mpi.hpp needs MPI: build with REPROSGD_ENABLE_MPI=ON and link ReproSGD::reprosgd (it defines REPROSGD_HAS_MPI=1). Without MPI, use reprosgd/testing/doctest_main.hpp (run_doctest)."
#endif

#include <reprosgd/detail/mpi_check.hpp>
#include <reprosgd/parallel/mpi_environment.hpp>
#include <reprosgd/testing/doctest_main.hpp>

#include <doctest/doctest.h>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

REPROSGD_BEGIN_NAMESPACE
namespace testing {
namespace detail {

/// Failed assertions (CHECK, REQUIRE, FAIL_CHECK, FAIL; not WARN or MESSAGE) seen on this rank
/// since the program started; counted by FailedAssertionCounter.
inline long& failed_assertions() noexcept {
  static long count = 0;
  return count;
}

/// A doctest listener that counts this rank's failed assertions, so that an MPI test case can tell
/// whether its body failed on a rank.
struct FailedAssertionCounter : doctest::IReporter {
  explicit FailedAssertionCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData& a) override {
    if (a.m_failed && !(a.m_at & doctest::assertType::is_warn)) ++failed_assertions();
  }
  void log_message(const doctest::MessageData& m) override {  // FAIL_CHECK and FAIL are messages
    if (!(m.m_severity & doctest::assertType::is_warn)) ++failed_assertions();
  }
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

// An inline variable: registered once per program, however many files include this header.
inline const int failed_assertion_counter_registered =
    doctest::registerReporter<FailedAssertionCounter>("reprosgd-mpi-failure-counter", 0, false);

/// What an MPI test case's body is given (REPROSGD_MPI_TEST_CASE names its parameters).
using MpiTestBody = void (*)(int test_rank, int test_nranks, MPI_Comm test_comm);

/// A rank's outcome of an MPI test case's body, as the ranks agree on it (bit flags).
inline constexpr int body_failed_assertion = 1;
inline constexpr int body_threw = 2;

/**
 * What rank 0 reports when the body failed on other ranks: "" when ranks 1 … n−1 all passed,
 * otherwise e.g. "the body failed on rank(s) 1 (failed assertions), 2 (threw) of the case's 3;
 * their own output has the details". `statuses[r]` is rank r's flags; rank 0's own failures are
 * in its own report already, so its flags are not repeated.
 */
[[nodiscard]] inline std::string failed_ranks_message(const std::vector<int>& statuses) {
  std::string others;
  for (std::size_t r = 1; r < statuses.size(); ++r) {
    if (statuses[r] == 0) continue;
    others += (others.empty() ? "" : ", ") + std::to_string(r);
    if (statuses[r] & body_threw) others += (statuses[r] & body_failed_assertion) ? " (failed assertions, threw)" : " (threw)";
    else others += " (failed assertions)";
  }
  if (others.empty()) return {};
  return "the body failed on rank(s) " + others + " of the case's " + std::to_string(statuses.size()) +
         "; their own output has the details";
}

/// Run `body` on world ranks 0 … nranks−1 with a communicator of those ranks (see the file comment).
inline void run_mpi_test_case(int nranks, MpiTestBody body) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    FAIL("REPROSGD_MPI_TEST_CASE: MPI is not initialised; make the test program's main "
         "reprosgd::testing::run_doctest_mpi(argc, argv)");
  if (nranks < 1) FAIL("REPROSGD_MPI_TEST_CASE: the rank count must be at least 1, not " << nranks);
  int rank = 0, size = 1;
  reprosgd::detail::mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "REPROSGD_MPI_TEST_CASE: MPI_Comm_rank");
  reprosgd::detail::mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &size), "REPROSGD_MPI_TEST_CASE: MPI_Comm_size");
  if (size < nranks) {
    if (rank == 0)
      MESSAGE("skipped: the case needs " << nranks << " MPI ranks, the run has " << size << " (mpiexec -n " << nranks
                                         << " or more runs it)");
    return;
  }
  MPI_Comm split = MPI_COMM_NULL;
  reprosgd::detail::mpi_check(MPI_Comm_split(MPI_COMM_WORLD, rank < nranks ? 0 : MPI_UNDEFINED, rank, &split),
                              "REPROSGD_MPI_TEST_CASE: MPI_Comm_split");
  const reprosgd::detail::CommHandle comm(split);
  if (!comm) return;  // this rank is not one of the case's nranks
  // The agreement runs on a communicator of its own, never mixing with the body's messages.
  MPI_Comm dup = MPI_COMM_NULL;
  reprosgd::detail::mpi_check(MPI_Comm_dup(comm.get(), &dup), "REPROSGD_MPI_TEST_CASE: MPI_Comm_dup");
  const reprosgd::detail::CommHandle agree(dup);

  const long failed_before = failed_assertions();
  std::exception_ptr error;
  try {
    body(rank, nranks, comm.get());
  } catch (...) {
    error = std::current_exception();
  }
  const int status = (failed_assertions() != failed_before ? body_failed_assertion : 0) | (error ? body_threw : 0);
  std::vector<int> statuses(static_cast<std::size_t>(nranks), 0);
  reprosgd::detail::mpi_check(MPI_Allgather(&status, 1, MPI_INT, statuses.data(), 1, MPI_INT, agree.get()),
                              "REPROSGD_MPI_TEST_CASE: MPI_Allgather");
  if (rank == 0) {
    const std::string others = failed_ranks_message(statuses);
    if (!others.empty()) FAIL_CHECK(others);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace detail

/**
 * Run the doctest test cases of this program on every MPI rank: initialise MPI (MpiEnvironment,
 * MPI_THREAD_FUNNELED), then Kokkos; rank 0 prints one line naming the library, Kokkos, the
 * default execution space with its thread count and the rank count, then one naming the MPI
 * library, and reports in full; the other
 * ranks report with doctest's `--minimal` (only their failures) and without colours. Returns the
 * worst exit code over all ranks, so mpiexec and CTest fail when any rank fails.
 *
 * @collective over MPI_COMM_WORLD (every rank must call it with the same arguments).
 * @throws comm_error, config_error from MpiEnvironment when MPI cannot be initialised.
 *
 * **Example** (the whole main.cpp of an MPI test program):
 * @code
 * #define DOCTEST_CONFIG_IMPLEMENT
 * #include <reprosgd/testing/doctest_mpi.hpp>
 * int main(int argc, char** argv) { return reprosgd::testing::run_doctest_mpi(argc, argv); }
 * @endcode
 */
inline int run_doctest_mpi(int argc, char** argv) {
  MpiEnvironment mpi(argc, argv);
  int rank = 0, size = 1;
  reprosgd::detail::mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "reprosgd::testing::run_doctest_mpi: MPI_Comm_rank");
  reprosgd::detail::mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &size), "reprosgd::testing::run_doctest_mpi: MPI_Comm_size");
  int result = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    if (rank == 0) {
      detail::print_test_banner(size);
      char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
      int length = 0;
      MPI_Get_library_version(version, &length);
      for (int i = 0; i < length; ++i)
        if (version[i] == '\n') version[i] = ' ';
      std::printf("MPI: %.80s\n", version);  // the library's first line (Open MPI: version, repository, date)
      std::fflush(stdout);
    }
    doctest::Context context;
    context.applyCommandLine(argc, argv);
    if (rank != 0) {
      context.setOption("minimal", true);
      context.setOption("no-colors", true);
    }
    result = context.run();
  }
  int worst = result;
  reprosgd::detail::mpi_check(MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
                              "reprosgd::testing::run_doctest_mpi: MPI_Allreduce");
  return worst;
}

}  // namespace testing
REPROSGD_END_NAMESPACE

/**
 * A doctest test case whose body runs on a communicator of exactly `nranks` MPI ranks (world ranks
 * 0 … nranks−1, split from MPI_COMM_WORLD); the other ranks skip it, and a world of fewer ranks
 * skips it with a message (see the file comment, and its collective rule). The body sees
 * `int test_rank` (its rank in `test_comm`, equal to its world rank), `int test_nranks` and
 * `MPI_Comm test_comm`. The program's main must initialise MPI: run_doctest_mpi.
 *
 * **Example**:
 * @code
 * REPROSGD_MPI_TEST_CASE("training on 3 ranks gives the golden", 3) {
 *   REPROSGD_CHECK_FINGERPRINT(train(reprosgd::DataParallel<>(test_comm)), golden);
 * }
 * @endcode
 */
#define REPROSGD_MPI_TEST_CASE(name, nranks) \
  REPROSGD_IMPL_MPI_TEST_CASE(name, nranks, DOCTEST_ANONYMOUS(REPROSGD_IMPL_MPI_BODY_))
#define REPROSGD_IMPL_MPI_TEST_CASE(name, nranks, body)                                                  \
  static void body(int, int, MPI_Comm);                                                                  \
  TEST_CASE(name) { ::reprosgd::testing::detail::run_mpi_test_case(nranks, &body); }                    \
  static void body([[maybe_unused]] int test_rank, [[maybe_unused]] int test_nranks,                      \
                   [[maybe_unused]] MPI_Comm test_comm)
