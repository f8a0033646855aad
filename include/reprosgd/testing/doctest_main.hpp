// SPDX-License-Identifier: BSD-3-Clause
/// @file testing::run_doctest: the main of a user's doctest program without MPI (Kokkos, then
/// doctest), so that the program's main is one line.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/testing/host_execution_spaces.hpp>
#include <reprosgd/version.hpp>

#include <doctest/doctest.h>

#include <Kokkos_Core.hpp>

#include <cstdio>
#include <string>

REPROSGD_BEGIN_NAMESPACE
namespace testing {
namespace detail {

/// The line a test program prints first: what the fingerprints it checks were computed with.
inline void print_test_banner(int ranks) {
  std::string line = "reprosgd " REPROSGD_VERSION_STRING ", Kokkos " + reprosgd::detail::version_string() +
                     " (" + reprosgd::detail::enabled_backends() + "), default execution space " +
                     describe(Kokkos::DefaultExecutionSpace());
  if (ranks > 0) line += ", " + std::to_string(ranks) + (ranks == 1 ? " MPI rank" : " MPI ranks");
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace detail

/**
 * Run the doctest test cases of this program: initialise Kokkos (it reads `--kokkos-*` arguments),
 * print one line naming the library, Kokkos and the default execution space with its thread count,
 * run doctest with the command line, finalise Kokkos. Returns doctest's exit code.
 *
 * Define `DOCTEST_CONFIG_IMPLEMENT` in the one file that calls it. With MPI, use
 * run_doctest_mpi (reprosgd/testing/doctest_mpi.hpp) instead.
 *
 * **Example** (the whole main.cpp):
 * @code
 * #define DOCTEST_CONFIG_IMPLEMENT
 * #include <reprosgd/testing/doctest_main.hpp>
 * int main(int argc, char** argv) { return reprosgd::testing::run_doctest(argc, argv); }
 * @endcode
 */
inline int run_doctest(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  detail::print_test_banner(0);
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}

}  // namespace testing
REPROSGD_END_NAMESPACE
