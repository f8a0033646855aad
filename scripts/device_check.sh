#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# device_check.sh — contract level L5 on a GPU machine that has only the files it is given: the
# CUDA build's unit tests, the CPU == GPU fingerprint table, and the device GEMM against cuBLAS.
#
#   device_check.sh prepare OUT   (here, after build.sh --variants made the CUDA build) bundle into
#                                 OUT: the CUDA build's train_mlp, unit tests and cuda_gemm_bench,
#                                 libcudart, the test data, and the configurations with the
#                                 fingerprints this machine's CPU build gives them; when the CUDA
#                                 build has MPI, the Open MPI it was built with (relocated) and
#                                 2-rank configurations too; at most 60 MB
#   device_check.sh run BUNDLE    (on the GPU machine) run the unit tests, train every configuration
#                                 on the GPU and compare with the CPU's fingerprint, bench the GEMM;
#                                 prints a table; exit 0 when every test passes and every fingerprint
#                                 is equal, 1 otherwise, 2 on bad usage or a bundle that is not whole
#
#   REPROSGD_CUDA_BUILD        the CUDA build to bundle (default build-variants/kokkos4-cuda)
#   REPROSGD_HOST_TRAIN_MLP    the CPU build's train_mlp that computes the expected fingerprints
#                              (default build/apps/train_mlp, run with --backend serial)
#   REPROSGD_DEVICE_BACKEND    the --backend the run trains on (default cuda; the CPU half of this
#                              script is tested with a host backend: tests/cuda/device_check_test.sh)
#   REPROSGD_DEVICE_UNIT_TESTS the unit tests to bundle (default: the device-relevant areas)
# The whole run takes a few minutes on an H200 (docs/portability.md, "The device check").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage() { echo "usage: device_check.sh prepare OUT | run BUNDLE" >&2; exit 2; }
[ $# -eq 2 ] || usage
mode=$1 dir=$2

# The configurations: NAME|RANKS|ARGS. golden and golden_chunked are tests/determinism's pinned
# fingerprints; contract and contract_chunked are the cross-build checks' (dropout, Adam, a cosine
# schedule with warm-up, shuffling, 120 steps); sgd_momentum is train_mlp's default optimizer.
# With MPI, golden and contract also run on 2 ranks sharing the GPU (data parallel, the exact
# reduction's integers staged through the host unless the MPI is CUDA-aware): their expected
# fingerprint is the 1-process CPU one (level L3, then L5).
configurations() {
  local with_mpi=$1
  local golden contract
  golden=$(sed -n 1p "$root/tests/determinism/golden.txt")
  contract="--data synthetic --synthetic-train 2048 --synthetic-test 512 --layers 784,64,32,10 --dropout 0.2 --optimizer adam --lr 0.002 --schedule cosine --warmup 10 --batch 64 --micro-batch 16 --steps 120 --seed 7 --quiet"
  echo "golden|1|$golden"
  echo "golden_chunked|1|$(sed -n 1p "$root/tests/determinism/golden_chunked.txt")"
  echo "contract|1|$contract"
  echo "contract_chunked|1|$contract --feature-chunk 16"
  echo "sgd_momentum|1|--data synthetic --synthetic-train 2048 --synthetic-test 512 --layers 784,128,64,10 --optimizer sgd --lr 0.05 --batch 128 --micro-batch 32 --steps 60 --seed 11 --quiet"
  if [ "$with_mpi" = 1 ]; then
    echo "golden_2ranks|2|$golden"
    echo "contract_2ranks|2|$contract"
  fi
}

prepare() {
  local out=$1
  local cuda=${REPROSGD_CUDA_BUILD:-$root/build-variants/kokkos4-cuda}
  local host=${REPROSGD_HOST_TRAIN_MLP:-$root/build/apps/train_mlp}
  local tests=${REPROSGD_DEVICE_UNIT_TESTS:-unit_kernels unit_optim unit_nn unit_reduction unit_rng unit_math unit_data unit_trainer unit_inference}
  [ -x "$cuda/apps/train_mlp" ] || { echo "device_check: no CUDA build in $cuda (scripts/build.sh --variants makes it when setup found CUDA)" >&2; exit 2; }
  [ -x "$host" ] || { echo "device_check: no CPU train_mlp at $host" >&2; exit 2; }
  rm -rf "$out"
  mkdir -p "$out/bin" "$out/lib" "$out/data"
  cp "$cuda/apps/train_mlp" "$out/bin/"
  # CI's build.sh compiles the training step's areas only; build the others here (a few minutes of
  # nvcc each) when the folder is a configured build that has their targets.
  local absent=()
  for t in $tests; do [ -x "$cuda/tests/$t" ] || absent+=("$t"); done
  if [ ${#absent[@]} -gt 0 ] && [ -f "$cuda/CMakeCache.txt" ]; then
    echo "device_check: building ${absent[*]} in $cuda" >&2
    cmake --build "$cuda" -j "${REPROSGD_JOBS:-$(nproc)}" --target "${absent[@]}" >"$cuda/device_check_build.log" 2>&1 ||
      { echo "device_check: building ${absent[*]} failed (see $cuda/device_check_build.log)" >&2; exit 2; }
  fi
  for t in $tests; do
    [ -x "$cuda/tests/$t" ] || { echo "device_check: $cuda/tests/$t is missing" >&2; exit 2; }
    cp "$cuda/tests/$t" "$out/bin/"
  done
  [ -x "$cuda/bench/cuda_gemm_bench" ] && cp "$cuda/bench/cuda_gemm_bench" "$out/bin/"
  # The CUDA runtime the build linked (the driver's libcuda.so.1 comes from the GPU machine).
  local cudart
  cudart=$(ldd "$cuda/apps/train_mlp" 2>/dev/null | awk '$1 == "libcudart.so.12" && $3 ~ /^\// { print $3 }')
  [ -z "$cudart" ] && [ -f "${REPROSGD_CACHE:-$HOME/.cache/reprosgd}/cuda-12.4/lib64/libcudart.so.12" ] &&
    cudart="${REPROSGD_CACHE:-$HOME/.cache/reprosgd}/cuda-12.4/lib64/libcudart.so.12"
  [ -n "$cudart" ] && cp -L "$cudart" "$out/lib/"
  cp -r "$root/tests/data/." "$out/data/"
  cp "$root/scripts/device_check.sh" "$out/"
  # The MPI the CUDA build links, whole (mpiexec, prte and their libraries; relocatable: the run
  # sets OPAL_PREFIX), without its headers, compiler wrappers' Python and docs.
  local with_mpi=0 libmpi
  libmpi=$(ldd "$cuda/apps/train_mlp" 2>/dev/null | awk '$1 ~ /^libmpi\.so/ && $3 ~ /^\// { print $3 }')
  if [ -n "$libmpi" ]; then
    local mpi_prefix
    mpi_prefix=$(cd "$(dirname "$(readlink -f "$libmpi")")/.." && pwd)
    [ -x "$mpi_prefix/bin/mpiexec" ] || { echo "device_check: no mpiexec next to $libmpi" >&2; exit 2; }
    mkdir -p "$out/mpi"
    cp -a "$mpi_prefix/bin" "$mpi_prefix/share" "$out/mpi/"
    [ -d "$mpi_prefix/etc" ] && cp -a "$mpi_prefix/etc" "$out/mpi/"
    cp -a "$mpi_prefix/lib" "$out/mpi/"
    rm -rf "$out/mpi/lib"/python*
    with_mpi=1
  fi
  # Expected fingerprints: the CPU build, Serial backend, one process, on this machine.
  : >"$out/configurations.txt"
  while IFS='|' read -r name ranks args; do
    local fp
    fp=$(OMP_PROC_BIND=false "$host" $args --backend serial 2>&1 | tail -n 1 | sed -n 's/^fingerprint //p')
    [ -n "$fp" ] || { echo "device_check: the CPU build gave no fingerprint for $name" >&2; exit 2; }
    echo "$name|$ranks|$args|$fp" >>"$out/configurations.txt"
  done < <(configurations $with_mpi)
  {
    echo "commit: $(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
    echo "prepared: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "cpu of the expected fingerprints: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1)"
    echo "cpu build: $("$host" --version | tr '\n' ';')"
  } >"$out/MANIFEST"
  strip --strip-debug "$out"/bin/* 2>/dev/null || true
  local mb
  mb=$(du -sm "$out" | cut -f1)
  [ "$mb" -le 60 ] || { echo "device_check: the bundle is $mb MB (at most 60)" >&2; exit 2; }
  echo "device_check: bundle in $out ($mb MB): $(ls "$out/bin" | tr '\n' ' ')"
}

run() {
  local b=$1
  local backend=${REPROSGD_DEVICE_BACKEND:-cuda}
  [ -f "$b/configurations.txt" ] && [ -x "$b/bin/train_mlp" ] || { echo "device_check: $b is not a bundle (device_check.sh prepare makes one)" >&2; exit 2; }
  export LD_LIBRARY_PATH="$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export REPROSGD_TEST_DATA_DIR="$b/data" OMP_PROC_BIND=false
  local mpiexec=()
  if [ -d "$b/mpi" ]; then
    export OPAL_PREFIX="$b/mpi" PATH="$b/mpi/bin:$PATH"
    export LD_LIBRARY_PATH="$b/mpi/lib:$b/mpi/lib/openmpi:$LD_LIBRARY_PATH"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    mpiexec=("$b/mpi/bin/mpiexec" --oversubscribe)
  fi
  cat "$b/MANIFEST"
  command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "no nvidia-smi on this machine"
  echo "backend: $backend; host: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1)"
  local fail=0 t
  echo
  echo "## Unit tests (every backend-templated test includes the device space)"
  for t in "$b"/bin/unit_*; do
    [ -x "$t" ] || continue
    local log rc=0
    log=$(mktemp)
    timeout 600 "$t" >"$log" 2>&1 || rc=$?
    echo "$(basename "$t"): $( [ $rc = 0 ] && echo passed || echo "FAILED (exit $rc)" ) — $(grep -a 'assertions:' "$log" | tail -n 1 | sed 's/\[doctest\] //')"
    [ $rc = 0 ] || { fail=1; grep -a -B2 -A6 'ERROR\|error' "$log" | head -n 40; }
    rm -f "$log"
  done
  echo
  echo "## CPU == GPU fingerprints (CPU: the bundle's expected values; device: train_mlp --backend $backend)"
  echo "| configuration | ranks | CPU (1 process) | device | |"
  echo "|---|---|---|---|---|"
  while IFS='|' read -r name ranks args want; do
    local got launch=()
    [ "$ranks" -gt 1 ] && launch=("${mpiexec[@]}" -n "$ranks")
    got=$(timeout 600 "${launch[@]}" "$b/bin/train_mlp" $args --backend "$backend" 2>&1 </dev/null | tail -n 1 | sed -n 's/^fingerprint //p') || true
    if [ "$got" = "$want" ]; then
      echo "| $name | $ranks | $want | $got | same |"
    else
      echo "| $name | $ranks | $want | ${got:-(none)} | DIFFERENT |"
      fail=1
    fi
  done <"$b/configurations.txt"
  if [ -x "$b/bin/cuda_gemm_bench" ]; then
    echo
    echo "## GEMM: ours against cuBLAS SGEMM (FP32, TF32 off), median of 9; and the device's bits against the host kernel's"
    timeout 600 "$b/bin/cuda_gemm_bench" || fail=1
  fi
  echo
  [ $fail = 0 ] && echo "device check: PASSED" || echo "device check: FAILED"
  return $fail
}

case $mode in
  prepare) prepare "$dir" ;;
  run) run "$dir" ;;
  *) usage ;;
esac
