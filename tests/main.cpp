// SPDX-License-Identifier: BSD-3-Clause
/// @file doctest main for the unit tests: Kokkos is initialised once and the versions are printed.
/// doctest itself is implemented in doctest_impl.cpp.
#include <doctest/doctest.h>

#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/version.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  std::printf("reprosgd %s, Kokkos %d, default execution space %s, concurrency %d\n",
              REPROSGD_VERSION_STRING, KOKKOS_VERSION, Kokkos::DefaultExecutionSpace::name(),
              reprosgd::detail::concurrency(Kokkos::DefaultExecutionSpace()));
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
