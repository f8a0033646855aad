#!/usr/bin/env bash
# version.sh TRAIN_MLP LIB_VERSION KOKKOS_VERSION KOKKOS_DEVICES COMPILER FLAGS HAS_MPI HAS_ULFM [MPIEXEC]
# `train_mlp --version` prints exactly six lines, each with what this build's CMake configured:
#   train_mlp (ReproSGD) LIB_VERSION
#   Kokkos KOKKOS_VERSION, backends: <the enabled execution spaces> (default host: <one of them>)
#   compiler: COMPILER
#   flags: FLAGS
#   MPI: <library version line>; ULFM: yes|no; CUDA-aware: <a>, ROCm-aware: <a>
#                                                       (or "MPI: none (built without MPI); ULFM: no")
#   CPU GEMM kernel: <isa>, <n> lanes, <r>x<c> micro-tile, <how the FMA is done>
# exit 0, nothing on standard error, no fingerprint, and no training.
set -uo pipefail
exe=$1 lib=$2 kokkos=$3 devices=$4 compiler=$5 flags=$6 has_mpi=$7 has_ulfm=$8 mpiexec=${9:-}
# Kokkos 3.x's CMake package spells the version 3.4.01; the binary prints KOKKOS_VERSION as 3.4.1.
kokkos=$(awk -F. '{ printf "%d.%d.%d", $1, $2, $3 }' <<<"$kokkos")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
OMP_PROC_BIND=false "$exe" --version >"$tmp/out" 2>"$tmp/err"; rc=$?
cat "$tmp/out"
[ $rc -eq 0 ] || fail "exit $rc (want 0)"
[ ! -s "$tmp/err" ] || fail "standard error not empty: $(head -n 3 "$tmp/err")"
mapfile -t line <"$tmp/out"
[ ${#line[@]} -eq 6 ] || fail "${#line[@]} lines (want 6)"
for i in 0 1 2 3 4 5; do line[$i]=${line[$i]:-}; done

[ "${line[0]}" = "train_mlp (ReproSGD) $lib" ] || fail "line 1: '${line[0]}' (want 'train_mlp (ReproSGD) $lib')"

# Kokkos's devices as CMake names them (OPENMP;SERIAL; PTHREAD or THREADS) against the spaces'
# names the binary prints, as sorted lower-case sets.
want_backends=$(tr ';' '\n' <<<"$devices" | tr 'A-Z' 'a-z' | sed 's/^pthread$/threads/' | grep -v '^$' | sort | tr '\n' ' ')
re='^Kokkos ([0-9]+\.[0-9]+\.[0-9]+), backends: ([A-Za-z ]+) \(default host: ([A-Za-z]+)\)$'
if [[ "${line[1]}" =~ $re ]]; then
  [ "${BASH_REMATCH[1]}" = "$kokkos" ] || fail "line 2: Kokkos ${BASH_REMATCH[1]} (want $kokkos)"
  got_backends=$(tr ' ' '\n' <<<"${BASH_REMATCH[2]}" | tr 'A-Z' 'a-z' | grep -v '^$' | sort | tr '\n' ' ')
  [ "$got_backends" = "$want_backends" ] || fail "line 2: backends '$got_backends' (want '$want_backends')"
  [[ " ${BASH_REMATCH[2]} " == *" ${BASH_REMATCH[3]} "* ]] || fail "line 2: default host ${BASH_REMATCH[3]} is not an enabled backend"
else
  fail "line 2: '${line[1]}' is not 'Kokkos X.Y.Z, backends: ... (default host: ...)'"
fi

[ "${line[2]}" = "compiler: $compiler" ] || fail "line 3: '${line[2]}' (want 'compiler: $compiler')"
[ "${line[3]}" = "flags: $flags" ] || fail "line 4: '${line[3]}' (want 'flags: $flags')"

if [ "$has_mpi" = 1 ]; then
  want_ulfm=no; [ "$has_ulfm" = 1 ] && want_ulfm=yes
  # Device memory: what Open MPI's ompi_info (next to mpiexec) says the library was built with,
  # asked independently of the binary. Built without it: "no". Built with it: "yes", or "no (built
  # with it, not enabled at run time)" when no driver loads here. No ompi_info (another MPI): "no".
  aware_re() {  # aware_re NAME BUILT(true|false)
    if [ "$2" = true ]; then echo "$1-aware: (yes|no \\(built with it, not enabled at run time\\))"; else echo "$1-aware: no"; fi
  }
  built_cuda=false built_rocm=false
  ompi_info=$(dirname "${mpiexec:-/nonexistent/x}")/ompi_info
  if [ -x "$ompi_info" ]; then
    info=$("$ompi_info" --parsable --all 2>/dev/null)
    grep -q '^mca:mpi:base:param:mpi_built_with_cuda_support:value:true$' <<<"$info" && built_cuda=true
    # Open MPI 5's ompi_info has no ROCm parameter: its installed extension header says it.
    grep -qs '^#define MPIX_ROCM_AWARE_SUPPORT 1' "$(dirname "$ompi_info")/../include/openmpi/mpiext/mpiext_rocm_c.h" && built_rocm=true
    echo "ompi_info: built with CUDA support: $built_cuda, with ROCm support: $built_rocm"
  fi
  re="^MPI: (.*[^ ]); ULFM: $want_ulfm; $(aware_re CUDA $built_cuda), $(aware_re ROCm $built_rocm)\$"
  [[ "${line[4]}" =~ $re ]] || fail "line 5: '${line[4]}' (want 'MPI: <library>; ULFM: $want_ulfm; CUDA-aware: .., ROCm-aware: ..' matching $re)"
  [[ "${line[4]}" != "MPI: unknown library;"* ]] || fail "line 5: MPI_Get_library_version gave nothing"
else
  [ "${line[4]}" = "MPI: none (built without MPI); ULFM: no" ] || fail "line 5: '${line[4]}' (want 'MPI: none (built without MPI); ULFM: no')"
fi

kernel='(avx512f|avx2|avx|sse2|generic), (4|8|16) lanes, [0-9]+x[0-9]+ micro-tile, (FMA instructions|fmaf per lane)'
re="^CPU GEMM kernel: $kernel( \\(chosen at run time; the build's own: $kernel\\))?\$"
[[ "${line[5]}" =~ $re ]] || [ "${line[5]}" = "CPU GEMM kernel: portable loop" ] || fail "line 6: '${line[5]}' is not a kernel description"

[ $fails -eq 0 ] && echo "ok: 6 lines as configured"
[ $fails -eq 0 ]
