// SPDX-License-Identifier: BSD-3-Clause
/// @file The MPI tests' view of MPI_COMM_WORLD.
#pragma once

#include <mpi.h>

namespace reprosgd_test {
inline int world_size() {
  int p = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}
inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
}  // namespace reprosgd_test
