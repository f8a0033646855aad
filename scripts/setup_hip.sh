#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# setup_hip.sh — Kokkos 4.6.1 with HIP (AMD GPUs) for ReproSGD's compile-and-link HIP build, with
# the HIP compiler of Debian 12's own archive: hipcc 5.2.3 (clang 15) and libamdhip64-dev 5.2.3,
# installed with apt-get when missing (about 40 MB to download; clang-15, lld-15, rocm-device-libs).
# Kokkos is built for HIP + Serial, code for gfx90a (MI200), C++ compiler hipcc.
#
# Two things differ from the CUDA build (docs/portability.md, "HIP"):
#   - Kokkos's own sources are compiled as C++17: clang 15 in HIP mode crashes (segmentation fault)
#     on libstdc++ 12's <regex> in C++20, which two of Kokkos's .cpp files include. Kokkos's headers
#     are C++20-clean, and ReproSGD's code is compiled as C++20 against them.
#   - Kokkos_ENABLE_ROCTHRUST=OFF: Debian has no rocThrust (Kokkos uses it only for sorting).
#
# Optional: without Kokkos 4.6.1's source, or when the packages cannot be installed, it says so in
# one line and exits 0; build.sh then skips the HIP build and CTest reports its check skipped.
#
#   REPROSGD_CACHE          cache root (default ~/.cache/reprosgd)
#   REPROSGD_KOKKOS4_SRC    Kokkos 4.6.1 source tree (default: the one setup.sh unpacked in the cache)
#   REPROSGD_VERBOSE=1      say what is being done
#
# Result: $CACHE/kokkos4-hip (Kokkos, with bin/hipcc_pinned, the C++ compiler of HIP builds), with
# .complete.
set -euo pipefail
SCRIPT_TAG=setup_hip
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CACHE=${REPROSGD_CACHE:-$HOME/.cache/reprosgd}
JOBS=${REPROSGD_JOBS:-$(nproc)}
KOKKOS_PREFIX="$CACHE/kokkos4-hip"
KOKKOS4_SRC=${REPROSGD_KOKKOS4_SRC:-$CACHE/src/kokkos-4.6.1}
HIP_ARCH=gfx90a
mkdir -p "$CACHE"

note() { echo "setup: note: $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

[ -f "$KOKKOS_PREFIX/.complete" ] && exit 0
if [ ! -f "$KOKKOS4_SRC/.complete" ]; then
  note "no Kokkos 4.6.1 source in $KOKKOS4_SRC (setup.sh unpacks it from ../shared/deps): the HIP build and its check are skipped"
  exit 0
fi

# ---------------------------------------------------------------------------------------------
# 1. hipcc and the HIP runtime headers and library from Debian's archive.
HIP_PACKAGES=(hipcc libamdhip64-dev)
missing=()
for p in "${HIP_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log="$CACHE/src/hip-apt.log"
  mkdir -p "$CACHE/src"
  if ! { as_root apt-get update -q && as_root env DEBIAN_FRONTEND=noninteractive \
         apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    note "could not install ${missing[*]} with apt-get ($(tail -n 1 "$log")): the HIP build and its check are skipped"
    exit 0
  fi
fi

# ---------------------------------------------------------------------------------------------
# 2. Kokkos 4.6.1 with HIP (+ Serial for the host side). hipcc asks rocm_agent_enumerator for the
#    GPU when no --offload-arch is given (a Python traceback without a GPU): HCC_AMDGPU_TARGET names
#    it, here and in hipcc_pinned.
export HCC_AMDGPU_TARGET=$HIP_ARCH
b="$CACHE/build/kokkos4-hip"
rm -rf "$b" "$KOKKOS_PREFIX"
quiet "configure Kokkos (kokkos4-hip)" cmake -S "$KOKKOS4_SRC" -B "$b" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$(command -v hipcc)" -DCMAKE_CXX_STANDARD=17 -DCMAKE_INSTALL_PREFIX="$KOKKOS_PREFIX" \
  -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_HIP=ON -DKokkos_ARCH_AMD_GFX90A=ON \
  -DKokkos_ENABLE_ROCTHRUST=OFF -DKokkos_ENABLE_DEPRECATED_CODE_4=OFF -DKokkos_ENABLE_TESTS=OFF
quiet "build Kokkos (kokkos4-hip)" cmake --build "$b" -j "$JOBS"
quiet "install Kokkos (kokkos4-hip)" cmake --install "$b"
rm -rf "$b"
# The C++ compiler of HIP builds: hipcc with the GPU architecture fixed (CMake's compiler checks
# call it without Kokkos's --offload-arch).
printf '#!/usr/bin/env bash\nexport HCC_AMDGPU_TARGET=%s\nexec "%s" "$@"\n' "$HIP_ARCH" "$(command -v hipcc)" >"$KOKKOS_PREFIX/bin/hipcc_pinned"
chmod +x "$KOKKOS_PREFIX/bin/hipcc_pinned"
touch "$KOKKOS_PREFIX/.complete"
