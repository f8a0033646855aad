// SPDX-License-Identifier: BSD-3-Clause
/// @file doctest main for the MPI tests: MPI, then Kokkos; every rank runs every test case.
//
// Rank 0 reports in full; the other ranks use doctest's --minimal output, so they print only
// their failures (tests put the rank in an INFO so that a failure says where it happened). The
// exit code is the worst over all ranks, so mpiexec and CTest fail when any rank fails.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <Kokkos_Core.hpp>
#include <reprosgd/parallel/mpi_environment.hpp>
#include <reprosgd/version.hpp>

#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  reprosgd::MpiEnvironment mpi(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int result = 0;
  {
    Kokkos::ScopeGuard guard(argc, argv);
    if (rank == 0) {
      char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
      int len = 0;
      MPI_Get_library_version(version, &len);
      for (int i = 0; i < len; ++i)
        if (version[i] == '\n') version[i] = ' ';
      std::printf("reprosgd %s, Kokkos %d, default execution space %s, %d MPI ranks, %.60s\n",
                  REPROSGD_VERSION_STRING, KOKKOS_VERSION, Kokkos::DefaultExecutionSpace::name(), size, version);
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
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}
