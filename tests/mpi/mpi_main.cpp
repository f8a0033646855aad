// SPDX-License-Identifier: BSD-3-Clause
/// @file doctest main for the MPI tests: the library's own (testing/doctest_mpi.hpp), as a user's
/// MPI test program has it. MPI, then Kokkos; every rank runs every test case; rank 0 reports in
/// full, the other ranks only their failures (tests put the rank in an INFO so that a failure says
/// where it happened); the exit code is the worst over all ranks, so mpiexec and CTest fail when
/// any rank fails.
#define DOCTEST_CONFIG_IMPLEMENT
#include <reprosgd/testing/doctest_mpi.hpp>

int main(int argc, char** argv) { return reprosgd::testing::run_doctest_mpi(argc, argv); }
