// SPDX-License-Identifier: BSD-3-Clause
/// @file A rank that starts MPI and then never enters another collective (setup_deadline.sh): what
/// the others see of a process that dies or stalls right after MPI_Init, but deterministic.
/// usage: reprosgd_idle_rank SECONDS — MPI_Init, sleep SECONDS, exit 0 without MPI_Finalize.
#include <mpi.h>

#include <unistd.h>

#include <cstdlib>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 30;
  sleep(static_cast<unsigned>(seconds > 0 ? seconds : 30));
  std::_Exit(0);  // no MPI_Finalize: its barrier would wait for the ranks that already left
}
