// SPDX-License-Identifier: BSD-3-Clause
/// @file The test program's main: MPI when ReproSGD has it (then Kokkos, then doctest on every rank).
#define DOCTEST_CONFIG_IMPLEMENT
#include <reprosgd/testing/doctest_main.hpp>
#if REPROSGD_HAS_MPI
#include <reprosgd/testing/doctest_mpi.hpp>
int main(int argc, char** argv) { return reprosgd::testing::run_doctest_mpi(argc, argv); }
#else
int main(int argc, char** argv) { return reprosgd::testing::run_doctest(argc, argv); }
#endif
