#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# build.sh — configure and build ReproSGD's builds after setup.sh.
#
#   build.sh             the main build (g++, Serial + OpenMP, -O3 -march=native, MPI when setup.sh
#                        made it) in build/: library tests, apps, examples and benchmarks; the test
#                        programs at -O1 (REPROSGD_TEST_OPT_FLAGS, cmake/ReproSGDTestHelpers.cmake)
#   build.sh --variants  the same, plus the cross-build checks' variants in build-variants/: g++ -O2
#                        for generic x86-64, clang++ with the Threads backend, and
#                        g++ with Kokkos 4.6.1 (OpenMP + Serial, MPI like the main build; only when
#                        setup.sh could build that Kokkos, else CTest reports its checks skipped),
#                        and Kokkos 4.6.1 + CUDA 12.4 (compile and link only; when setup_cuda.sh
#                        made it, else CTest reports the cuda_* checks skipped), and Kokkos 4.6.1 +
#                        HIP with Debian's hipcc (compile and link only, train_mlp and some unit-test
#                        areas; when setup_hip.sh made it, else the hip_* checks are skipped)
#                        (what scripts/test.sh, the whole suite, builds)
#   build.sh --quick     the contributors' fast loop: the main build without MPI, benchmarks, the
#                        header compile check and variants; then `cd build && ctest -L unit`
#                        (README, "Contributing")
#
#   REPROSGD_BUILD_DIR   where the main build goes (default build/ in the repository)
#   REPROSGD_VARIANTS_DIR  where the variant builds go (default build-variants/ in the repository)
#   Kokkos_ROOT, CMAKE_PREFIX_PATH  a Kokkos of your own for the main build (docs/portability.md);
#                        the variants always use the Kokkos installs setup.sh made
#   REPROSGD_JOBS        parallel compile jobs (default: the number of cores)
#   REPROSGD_CCACHE=0    compile without ccache (by default the g++ and clang++ builds go through
#                        scripts/ccache_launch.sh when ccache is installed: a cache per CPU; the
#                        CUDA and HIP variants never do)
# Quiet on success; on failure prints the failing step's log tail.
set -euo pipefail
SCRIPT_TAG=build
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${REPROSGD_CACHE:-$HOME/.cache/reprosgd}
JOBS=${REPROSGD_JOBS:-$(nproc)}
BUILD_DIR=${REPROSGD_BUILD_DIR:-$root/build}
VARIANTS_DIR=${REPROSGD_VARIANTS_DIR:-$root/build-variants}
variants=0 quick=0
for arg in "$@"; do
  case $arg in
    --variants) variants=1 ;;
    --quick) quick=1 ;;
    *) die "unknown argument '$arg' (usage: build.sh [--variants | --quick])" ;;
  esac
done
[ $variants = 1 ] && [ $quick = 1 ] && die "--variants and --quick exclude each other"


mpi_flags=()
if [ -f "$CACHE/openmpi.prefix" ]; then
  mpi_prefix=$(cat "$CACHE/openmpi.prefix")
  mpi_flags=(-DREPROSGD_ENABLE_MPI=ON -DMPI_HOME="$mpi_prefix" -DMPIEXEC_EXECUTABLE="$mpi_prefix/bin/mpiexec")
fi

# configure_and_build DIR KOKKOS-PREFIX CXX CXXFLAGS [cmake args...] -- [targets...]
# KOKKOS-PREFIX is searched first for Kokkos by the main build (after a Kokkos_ROOT or
# CMAKE_PREFIX_PATH of the user's own); a variant pins it with -DKokkos_ROOT.
configure_and_build() {
  local dir=$1 kokkos=$2 cxx=$3 flags=$4; shift 4
  local args=() targets=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  targets=("$@")
  local prefix_path=$kokkos launcher=""
  case $cxx in
    g++|clang++) [ "${REPROSGD_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null 2>&1 && \
                   launcher="$root/scripts/ccache_launch.sh" ;;
  esac
  [ -n "${CMAKE_PREFIX_PATH:-}" ] && prefix_path="${CMAKE_PREFIX_PATH//:/;};$kokkos"
  quiet "configure $dir" cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS_RELEASE="$flags" \
    -DCMAKE_PREFIX_PATH="$prefix_path" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" "${args[@]}"
  if [ ${#targets[@]} -gt 0 ]; then
    quiet "build $dir (${targets[*]})" cmake --build "$dir" -j "$JOBS" --target "${targets[@]}"
  else
    quiet "build $dir" cmake --build "$dir" -j "$JOBS"
  fi
}

peers=()
# The Kokkos 4 variant, or why there is none (tests/determinism/CMakeLists.txt); both empty without
# --variants.
kokkos4_build="" kokkos4_missing=""
cuda_build="" cuda_missing="" cuda_toolkit="" cuda_tests=""
hip_build="" hip_missing="" hip_compiler="" hip_tests=""
if [ $variants = 1 ]; then
  # Only train_mlp and the per-backend known-answer tests are built in the variants (what
  # tests/determinism runs from them); clang-threads also builds the other apps (predict,
  # reprosgd_diff), the one check that they compile with clang. Their train_mlp has the default
  # backend's Exact policy only (REPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY): the comparisons run no other.
  # The Threads backend is compiled by clang++ only: g++ is the main build's compiler, Threads a
  # backend, clang++ a compiler; one variant covers both (a g++ + Threads variant cost CI 5 minutes).
  for v in "gcc-openmp-O2 gcc-openmp g++ -O2" "clang-threads clang-threads clang++ -O3 -march=native"; do
    set -- $v
    name=$1 kokkos=$2 cxx=$3; shift 3
    variant_targets=(train_mlp unit_rng unit_kernels)
    [ "$name" = clang-threads ] && variant_targets=()
    configure_and_build "$VARIANTS_DIR/$name" "$CACHE/kokkos-$kokkos" "$cxx" "$*" -DKokkos_ROOT="$CACHE/kokkos-$kokkos" \
      -DREPROSGD_VARIANT_BUILD=ON -DREPROSGD_ENABLE_MPI=OFF -DREPROSGD_BUILD_BENCH=OFF \
      -DREPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY=ON -- "${variant_targets[@]}"
    peers+=("$name=$VARIANTS_DIR/$name")
  done
  # Kokkos 4.6.1 with the main build's compiler, flags, backends and MPI: train_mlp (data-parallel
  # policies only: what the cross-build checks run) and the unit-test areas whose kernels run on
  # Kokkos (rng, kernels, nn, optim, reduction, trainer), compiled at -O1 like the main build's
  # (their known answers do not depend on the optimisation level). The main build's
  # CTest runs those unit tests and compares its fingerprints with the Kokkos 3.4.1 builds'. The other
  # areas' tests (checkpoint, data, fault, inference, math: host code around a few Views) are not
  # compiled against Kokkos 4.6.1 in CI (their headers are, through train_mlp; inference's tests
  # through the CUDA variant below); running them twice on the host cost CI about 5 minutes.
  kokkos4="$CACHE/kokkos4-gcc-openmp"
  kokkos4_areas="rng kernels nn optim reduction trainer"
  # The trainer's tests of host logic (the recovery stage machine, the trace, metrics and background
  # writers): the same host C++ on either Kokkos; their arithmetic is the kernels', which the Kokkos 4
  # unit tests and goldens check. Compiling them again cost CI about 2 minutes.
  kokkos4_skip="recovery_test;sharded_recovery_test;trace_test;online_training_test;write_behind_test;background_writer_test;metrics_writer_test"
  if [ -f "$kokkos4/.complete" ]; then
    kokkos4_build="$VARIANTS_DIR/kokkos4-gcc-openmp"
    kokkos4_targets=(train_mlp)
    for a in $kokkos4_areas; do kokkos4_targets+=("unit_$a"); done
    configure_and_build "$kokkos4_build" "$kokkos4" g++ "-O3 -march=native" -DKokkos_ROOT="$kokkos4" "${mpi_flags[@]}" \
      -DREPROSGD_VARIANT_BUILD=ON -DREPROSGD_VARIANT_AREAS="${kokkos4_areas// /;}" -DREPROSGD_BUILD_BENCH=OFF \
      -DREPROSGD_TRAIN_MLP_DATA_PARALLEL_ONLY=ON -DREPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY=ON \
      -DREPROSGD_TEST_OPT_FLAGS=-O1 \
      -DREPROSGD_VARIANT_SKIP_TESTS="$kokkos4_skip" -- "${kokkos4_targets[@]}"
  else
    kokkos4_missing="no Kokkos 4.6.1 in $kokkos4 (scripts/setup.sh builds it from ../shared/deps/kokkos-4.6.01.tar.gz next to the repository, which it did not find)"
  fi
  # CUDA: Kokkos 4.6.1 + CUDA 12.4 through nvcc_wrapper (scripts/setup_cuda.sh), compiled and linked
  # only (no GPU here): train_mlp, cuda_gemm_bench and the unit-test areas below with their kernels
  # instantiated for the device, for sm_90 (Hopper). The build is configured with every area; CI
  # compiles trainer (the whole training step on Kokkos::Cuda: Dense, the activations, dropout, the
  # exact reduction and every optimizer's update), kernels (GEMM and elementwise kernels directly)
  # and inference (predict's kernels, which training does not use); nvcc takes a minute a file, so
  # scripts/device_check.sh prepare builds the rest (nn, optim, reduction, rng, math, data) when a
  # GPU is there to run them. Not sm_80 too: Kokkos builds for one GPU architecture
  # and refuses at initialisation a device of another, so Ampere would need a second Kokkos and a
  # second variant (CI time). scripts/device_check.sh runs this build on a GPU. With MPI like the
  # main build: DataParallel on the device (the exact reduction's integers staged through host
  # buffers unless the MPI is CUDA-aware); the device check carries that MPI and trains on 2 ranks
  # sharing the GPU. Its train_mlp has the data-parallel policies on the device only (what the
  # device check runs; its CPU fingerprints come from the main build; Serial's cost nvcc 1.5 CPU-minutes):
  # the host-only model and ULFM policies took nvcc 7 CPU-minutes of CI's time, and unit_trainer's
  # fiber tests still instantiate the model-parallel machinery against Kokkos 4.6.1 (in the Kokkos 4
  # variant: here, as in the HIP variant, only the test files that run on the device are compiled,
  # REPROSGD_VARIANT_DEVICE_TESTS_ONLY).
  kokkos_cuda="$CACHE/kokkos4-cuda" cuda_toolkit="$CACHE/cuda-12.4"
  cuda_areas="kernels trainer inference"
  if [ -f "$kokkos_cuda/.complete" ] && [ -f "$cuda_toolkit/.complete" ]; then
    cuda_build="$VARIANTS_DIR/kokkos4-cuda"
    cuda_targets=(train_mlp cuda_gemm_bench)
    for a in $cuda_areas; do cuda_targets+=("unit_$a"); done
    cuda_tests=$(printf 'unit_%s;' $cuda_areas); cuda_tests=${cuda_tests%;}
    configure_and_build "$cuda_build" "$kokkos_cuda" "$kokkos_cuda/bin/nvcc_wrapper_pinned" \
      "-O2" -DKokkos_ROOT="$kokkos_cuda" -DCUDAToolkit_ROOT="$cuda_toolkit" \
      "${mpi_flags[@]}" -DREPROSGD_VARIANT_BUILD=ON -DREPROSGD_VARIANT_AREAS=all -DREPROSGD_BUILD_BENCH=OFF \
      -DREPROSGD_VARIANT_DEVICE_TESTS_ONLY=ON \
      -DREPROSGD_TRAIN_MLP_DATA_PARALLEL_ONLY=ON \
      -DREPROSGD_TRAIN_MLP_HOST_BACKENDS=OFF -- "${cuda_targets[@]}"
  else
    cuda_missing="no Kokkos 4.6.1 with CUDA in $kokkos_cuda (scripts/setup_cuda.sh builds it when it can download the CUDA 12.4 toolkit and ../shared/deps has the Kokkos 4.6.1 source)"
  fi
  # HIP: Kokkos 4.6.1 + Debian 12's hipcc 5.2.3 (clang 15; scripts/setup_hip.sh), compiled and linked
  # only (no AMD GPU here), for gfx90a (MI200): the unit-test areas below, each backend-templated
  # test instantiated for Kokkos::HIP too. Not train_mlp: it has no --backend hip, so hipcc would
  # compile only its host backends again (4 of the 9 CPU-minutes this build took; CI's time). Not every area: each translation unit is compiled twice (host and gfx90a), and the whole
  # set takes more than three times as long as these three (CI's time limit; and unit_checkpoint
  # crashes clang 15: docs/portability.md, "HIP"): trainer (the training step), optim and kernels
  # (whose gfx90a code hip_no_contraction reads).
  kokkos_hip="$CACHE/kokkos4-hip"
  hip_areas="kernels optim trainer"
  if [ -f "$kokkos_hip/.complete" ]; then
    hip_build="$VARIANTS_DIR/kokkos4-hip" hip_compiler="$kokkos_hip/bin/hipcc_pinned"
    hip_targets=()
    for a in $hip_areas; do hip_targets+=("unit_$a"); done
    hip_tests=$(printf 'unit_%s;' $hip_areas); hip_tests=${hip_tests%;}
    configure_and_build "$hip_build" "$kokkos_hip" "$hip_compiler" "-O2" -DKokkos_ROOT="$kokkos_hip" \
      -DREPROSGD_ENABLE_MPI=OFF -DREPROSGD_VARIANT_BUILD=ON -DREPROSGD_VARIANT_AREAS="${hip_areas// /;}" \
      -DREPROSGD_VARIANT_DEVICE_TESTS_ONLY=ON \
      -DREPROSGD_BUILD_BENCH=OFF -- "${hip_targets[@]}"
  else
    hip_missing="no Kokkos 4.6.1 with HIP in $kokkos_hip (scripts/setup_hip.sh builds it when it can install Debian's hipcc and ../shared/deps has the Kokkos 4.6.1 source)"
  fi
fi
peer_list=$(IFS=';'; echo "${peers[*]:-}")
# Benchmarks are set explicitly either way, so that a full build after a quick one in the same
# folder builds them again.
# So are MPI and the header compile check: the quick build is the one-process loop (everything
# `ctest -L unit` runs, nothing else), a full build in the same folder turns them back on.
bench=ON header_check=ON
if [ $quick = 1 ]; then
  bench=OFF header_check=OFF
  mpi_flags=(-DREPROSGD_ENABLE_MPI=OFF)
elif [ ${#mpi_flags[@]} = 0 ]; then
  mpi_flags=(-DREPROSGD_ENABLE_MPI=AUTO)
fi
configure_and_build "$BUILD_DIR" "$CACHE/kokkos-gcc-openmp" g++ "-O3 -march=native" "${mpi_flags[@]}" \
  -DREPROSGD_PEER_BUILDS="$peer_list" -DREPROSGD_KOKKOS4_BUILD="$kokkos4_build" \
  -DREPROSGD_KOKKOS4_MISSING="$kokkos4_missing" -DREPROSGD_CUDA_BUILD="$cuda_build" -DREPROSGD_CUDA_TOOLKIT="$cuda_toolkit" \
  -DREPROSGD_CUDA_MISSING="$cuda_missing" -DREPROSGD_CUDA_UNIT_TESTS="$cuda_tests" -DREPROSGD_HIP_BUILD="$hip_build" -DREPROSGD_HIP_MISSING="$hip_missing" \
  -DREPROSGD_HIP_COMPILER="$hip_compiler" -DREPROSGD_HIP_UNIT_TESTS="$hip_tests" -DREPROSGD_BUILD_BENCH=$bench -DREPROSGD_HEADER_CHECK=$header_check \
  -DREPROSGD_TEST_OPT_FLAGS=-O1 --
