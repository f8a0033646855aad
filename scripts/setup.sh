#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# setup.sh — install everything ReproSGD's builds, tests and demo need, on a Debian 12 machine.
#
# Idempotent and cached: a second run does nothing but check stamps. Quiet on success; on failure
# it prints the step that failed and the tail of that step's log, and exits non-zero.
#
#   REPROSGD_CACHE   where sources and Kokkos builds are kept (default ~/.cache/reprosgd)
#   REPROSGD_VERBOSE=1  say what is being done
#
# Prints nothing on stdout except, with --print-env, shell assignments for the prefixes it made.
set -euo pipefail
SCRIPT_TAG=setup
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CACHE=${REPROSGD_CACHE:-$HOME/.cache/reprosgd}
JOBS=${REPROSGD_JOBS:-$(nproc)}
mkdir -p "$CACHE"


as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# ---------------------------------------------------------------------------------------------
# 1. Debian packages. Compilers and CMake are on the machine image; the rest come from Debian.
DEB_PACKAGES=(
  g++ clang cmake make pkg-config dpkg-dev xz-utils
  libcereal-dev doctest-dev zlib1g-dev libxxhash-dev libcli11-dev
  libbenchmark-dev libopenblas-dev
  python3  # tests/headers/layering.py (the include layering test)
  dataset-fashion-mnist
  ccache  # optional: build.sh's compiler cache (scripts/ccache_launch.sh)
)
missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
apt_updated=0
apt_update() { if [ $apt_updated = 0 ]; then quiet "apt-get update" as_root apt-get update; apt_updated=1; fi; }
if [ ${#missing[@]} -gt 0 ]; then
  apt_update
  # dataset-fashion-mnist is wanted, not required: the demo falls back to a synthetic set. Nor is
  # ccache: without it every build compiles everything.
  required=(); optional=()
  for p in "${missing[@]}"; do
    case $p in dataset-fashion-mnist|ccache) optional+=("$p") ;; *) required+=("$p") ;; esac
  done
  if [ ${#required[@]} -gt 0 ]; then
    quiet "apt-get install ${required[*]}" as_root env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends "${required[@]}"
  fi
  for p in "${optional[@]}"; do
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$p" \
      >/dev/null 2>&1 || case $p in
        ccache) echo "setup: note: ccache could not be installed; builds will not be cached" >&2 ;;
        *) echo "setup: note: $p could not be installed; the synthetic data set will be used" >&2 ;;
      esac
  done
fi

# ---------------------------------------------------------------------------------------------
# 2. Kokkos 3.4.1 from Debian's trilinos source package (Debian ships Kokkos only inside it, and
#    its binary package has the Serial backend alone). Only packages/kokkos is extracted.
KOKKOS_SRC="$CACHE/src/kokkos-3.4.1"
if [ ! -f "$KOKKOS_SRC/.complete" ]; then
  srcdir="$CACHE/src/trilinos"
  mkdir -p "$srcdir"
  if ! ls "$srcdir"/trilinos_*.orig.tar.* >/dev/null 2>&1; then
    # apt-get source needs deb-src entries: derive them from the machine's own deb entries.
    if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
      for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        sed 's/^Types: deb$/Types: deb-src/' "$f" | as_root tee "/etc/apt/sources.list.d/reprosgd-src-$(basename "$f")" >/dev/null
      done
      if [ -f /etc/apt/sources.list ]; then
        grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' | as_root tee /etc/apt/sources.list.d/reprosgd-src.list >/dev/null || true
      fi
      apt_updated=0
    fi
    apt_update
    (cd "$srcdir" && quiet "apt-get source trilinos" apt-get source --download-only -q trilinos)
  fi
  tarball=$(ls "$srcdir"/trilinos_*.orig.tar.* | head -n 1)
  tmp="$CACHE/src/kokkos-extract.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  quiet "extract packages/kokkos from $(basename "$tarball")" \
    tar -xf "$tarball" -C "$tmp" --wildcards '*/packages/kokkos/*'
  kdir=$(find "$tmp" -maxdepth 3 -type d -path '*/packages/kokkos' | head -n 1)
  [ -n "$kdir" ] || die "packages/kokkos not found in $tarball"
  grep -q 'Kokkos_VERSION_MINOR 4' "$kdir/CMakeLists.txt" 2>/dev/null || grep -q 'KOKKOS_VERSION_MINOR 4' "$kdir/CMakeLists.txt" || \
    say "note: Kokkos in $tarball is not 3.4.x"
  rm -rf "$KOKKOS_SRC"; mv "$kdir" "$KOKKOS_SRC"; rm -rf "$tmp"
  touch "$KOKKOS_SRC/.complete"
fi

# build_kokkos NAME CXX CMAKE-ARGS...: a Kokkos install in $CACHE/kokkos-NAME from $KOKKOS_SRC.
build_kokkos() {
  build_kokkos_from "$KOKKOS_SRC" "kokkos-$1" "${@:2}"
}
# build_kokkos_from SRC PREFIX-NAME CXX CMAKE-ARGS...: a Kokkos install in $CACHE/PREFIX-NAME.
build_kokkos_from() {
  local src=$1 name=$2 cxx=$3; shift 3
  local prefix="$CACHE/$name"
  [ -f "$prefix/.complete" ] && return 0
  local b="$CACHE/build/$name"
  rm -rf "$b" "$prefix"
  quiet "configure Kokkos ($name)" cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_STANDARD=20 -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DKokkos_ENABLE_SERIAL=ON "$@"
  quiet "build Kokkos ($name)" cmake --build "$b" -j "$JOBS"
  quiet "install Kokkos ($name)" cmake --install "$b"
  rm -rf "$b"
  touch "$prefix/.complete"
}
# Kokkos allows one host-parallel backend per build, so each backend pair is its own install.
build_kokkos gcc-openmp g++ -DKokkos_ENABLE_OPENMP=ON
build_kokkos clang-threads clang++ -DKokkos_ENABLE_PTHREAD=ON

# ---------------------------------------------------------------------------------------------
# 2b. Kokkos 4.6.1 (g++, Serial + OpenMP) for the Kokkos 4 variant build, from its release tarball
#     in ../shared/deps (no package registry these machines reach serves Kokkos >= 4). Optional: a
#     machine without the tarball says so in one line and carries on; build.sh then skips the
#     variant and CTest reports its checks as skipped. docs/portability.md.
#   REPROSGD_KOKKOS4_TARBALL   where the tarball is (default ../shared/deps/kokkos-4.6.01.tar.gz
#                              next to the repository)
KOKKOS4_SHA256=ada24fdc63691853ef8bc62b6214898707472c8298ea6c914b6d82043629622b
KOKKOS4_TARBALL=${REPROSGD_KOKKOS4_TARBALL:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/../shared/deps/kokkos-4.6.01.tar.gz}
if [ ! -f "$CACHE/kokkos4-gcc-openmp/.complete" ]; then
  if [ ! -f "$KOKKOS4_TARBALL" ]; then
    echo "setup: note: no Kokkos 4.6.1 source ($KOKKOS4_TARBALL is absent): the Kokkos 4 variant build and its checks are skipped" >&2
  else
    KOKKOS4_SRC="$CACHE/src/kokkos-4.6.1"
    if [ ! -f "$KOKKOS4_SRC/.complete" ]; then
      sum=$(sha256sum "$KOKKOS4_TARBALL" | cut -d' ' -f1)
      [ "$sum" = "$KOKKOS4_SHA256" ] || die "$KOKKOS4_TARBALL: sha256 $sum, expected $KOKKOS4_SHA256"
      tmp="$CACHE/src/kokkos4-extract.$$"
      rm -rf "$tmp"; mkdir -p "$tmp"
      quiet "extract $(basename "$KOKKOS4_TARBALL")" tar -xzf "$KOKKOS4_TARBALL" -C "$tmp"
      kdir=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -n 1)
      grep -q 'Kokkos_VERSION_MAJOR 4' "$kdir/CMakeLists.txt" || die "$KOKKOS4_TARBALL is not a Kokkos 4 source tree"
      rm -rf "$KOKKOS4_SRC"; mv "$kdir" "$KOKKOS4_SRC"; rm -rf "$tmp"
      touch "$KOKKOS4_SRC/.complete"
    fi
    # Deprecated 4.x code is compiled out, so a use of an API Kokkos 4 deprecates fails to compile.
    build_kokkos_from "$KOKKOS4_SRC" kokkos4-gcc-openmp g++ -DKokkos_ENABLE_OPENMP=ON \
      -DKokkos_ENABLE_DEPRECATED_CODE_4=OFF
  fi
fi

# ---------------------------------------------------------------------------------------------
# 2c. A CUDA 12.4 toolkit and Kokkos 4.6.1 with CUDA for the compile-and-link CUDA build, optional
#     (needs the Kokkos 4.6.1 source above and Debian's and PyPI's servers): scripts/setup_cuda.sh.
REPROSGD_CACHE="$CACHE" bash "$(dirname "${BASH_SOURCE[0]}")/setup_cuda.sh"

# ---------------------------------------------------------------------------------------------
# 2d. Debian 12's hipcc 5.2.3 and Kokkos 4.6.1 with HIP for the compile-and-link HIP build,
#     optional (needs the Kokkos 4.6.1 source above and Debian's archive): scripts/setup_hip.sh.
REPROSGD_CACHE="$CACHE" bash "$(dirname "${BASH_SOURCE[0]}")/setup_hip.sh"

# ---------------------------------------------------------------------------------------------
# 3. MPI (Open MPI 5 with ULFM), optional for serial users: scripts/setup_mpi.sh.
if [ -f "$(dirname "$0")/setup_mpi.sh" ]; then
  REPROSGD_CACHE="$CACHE" bash "$(dirname "$0")/setup_mpi.sh"
fi

if [ "${1:-}" = --print-env ]; then
  echo "REPROSGD_CACHE=$CACHE"
fi
