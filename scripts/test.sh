#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test.sh — the README's test command: install what is missing, build everything (the main build
# and the cross-compiler/cross-backend variants), and run the whole test suite with CTest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
SCRIPT_TAG=test
source "$root/scripts/lib.sh"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" --variants
use_setup_mpi  # the MPI programs start in 0.1 s instead of 1.1 s (lib.sh)
# Kokkos's OpenMP backend warns when OMP_PROC_BIND is unset; binding threads would also pin several
# MPI ranks to the same cores, so leave threads unbound.
export OMP_PROC_BIND=false
# CTest runs two tests at once on CI's two cores, each with OpenMP threads: libgomp's default
# spin-waiting then burns the core a descheduled peer needs, and a unit-test executable ran up to
# 50x slower (unit_kernels 18 s instead of 1.5 s). Sleeping threads cost nothing in the results.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
cd "$root/build"
ctest --output-on-failure --timeout 1800 -j "${REPROSGD_TEST_JOBS:-2}" "$@"
