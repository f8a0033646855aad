#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# setup_cuda.sh — a CUDA 12.4 toolkit for ReproSGD's compile-and-link CUDA build, assembled in a
# prefix of its own under $REPROSGD_CACHE without a system-wide install, and Kokkos 4.6.1 built
# with it (CUDA + Serial, sm_90 and sm_80 code).
#
# Why assembled: Debian 12 has no CUDA 12 and Kokkos 3.4.1 does not build with CUDA 12 in C++20;
# Kokkos 4.6.1 does not build with CUDA 13 (which these machines may carry under /usr/local). The
# toolkit comes from pinned files, each checked against its sha256:
#   - Debian trixie non-free's nvidia-cuda-toolkit 12.4.131 .deb (nvcc, cicc, cudafe++, ptxas,
#     fatbinary, nvlink, cuobjdump, nvdisasm, libdevice), unpacked with dpkg-deb -x; its binaries
#     run on Debian 12;
#   - PyPI's nvidia-cuda-runtime-cu12 (cudart headers, libcudart.so.12),
#     nvidia-cuda-cccl-cu12 (libcu++, CUB, Thrust) and nvidia-cuda-nvcc-cu12 (the crt/ headers);
#   - a stub libcuda.so made here from the driver symbols Kokkos uses, so that programs link on a
#     machine without a GPU (on a GPU machine the driver's own libcuda.so.1 is loaded instead).
# The result is laid out like a standard toolkit ($PREFIX/bin/nvcc with an nvcc.profile relative
# to itself, include/, lib64/, nvvm/), so CUDAToolkit_ROOT and Kokkos's nvcc_wrapper find it, and
# nothing of /usr/local/cuda* is used: builds pin it (-DCUDAToolkit_ROOT, NVCC_WRAPPER_DEFAULT_COMPILER,
# CUDA_HOME) — docs/portability.md.
#
# Optional: without network access to these files, or without Kokkos 4.6.1's source, it says so in
# one line and exits 0; build.sh then skips the CUDA build and CTest reports its checks skipped.
#
#   REPROSGD_CACHE          cache root (default ~/.cache/reprosgd)
#   REPROSGD_DEBIAN_MIRROR  Debian mirror for the toolkit .deb (default http://deb.debian.org/debian)
#   REPROSGD_KOKKOS4_SRC    Kokkos 4.6.1 source tree (default: the one setup.sh unpacked in the cache)
#   REPROSGD_VERBOSE=1      say what is being done
#
# Result: $CACHE/cuda-12.4 (the toolkit) and $CACHE/kokkos4-cuda (Kokkos, with
# bin/nvcc_wrapper_pinned, the C++ compiler of CUDA builds), each with .complete.
set -euo pipefail
SCRIPT_TAG=setup_cuda
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CACHE=${REPROSGD_CACHE:-$HOME/.cache/reprosgd}
JOBS=${REPROSGD_JOBS:-$(nproc)}
MIRROR=${REPROSGD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PREFIX="$CACHE/cuda-12.4"
KOKKOS_PREFIX="$CACHE/kokkos4-cuda"
KOKKOS4_SRC=${REPROSGD_KOKKOS4_SRC:-$CACHE/src/kokkos-4.6.1}
mkdir -p "$CACHE"

note() { echo "setup: note: $*" >&2; }

DEB_PATH=pool/non-free/n/nvidia-cuda-toolkit/nvidia-cuda-toolkit_12.4.131~12.4.1-2_amd64.deb
DEB_SHA256=cd5fe85aee38d108b315f408a688641478f2402622a10c677478eb7a6c4e5319
WHEELS=(
  "nvidia-cuda-runtime-cu12==12.4.127 --hash=sha256:64403288fa2136ee8e467cdc9c9427e0434110899d07c779f25b5c068934faa5"
  "nvidia-cuda-cccl-cu12==12.4.127.post1 --hash=sha256:2027fa5fc75fbee703bf24e8275a40a605cf94a3e8fef8a7187897d49b34facb"
  "nvidia-cuda-nvcc-cu12==12.4.131 --hash=sha256:e4c9a35435c3b0e36c6397c5696334c9ea6650e524736cbd1c5d345ea099bb04"
)

[ -f "$PREFIX/.complete" ] && [ -f "$KOKKOS_PREFIX/.complete" ] && exit 0
if [ ! -f "$KOKKOS4_SRC/.complete" ]; then
  note "no Kokkos 4.6.1 source in $KOKKOS4_SRC (setup.sh unpacks it from ../shared/deps): the CUDA build and its checks are skipped"
  exit 0
fi

# ---------------------------------------------------------------------------------------------
# 1. The toolkit.
if [ ! -f "$PREFIX/.complete" ]; then
  dl="$CACHE/src/cuda-12.4"
  mkdir -p "$dl"
  deb="$dl/$(basename "$DEB_PATH")"
  if [ ! -f "$deb" ] || [ "$(sha256sum "$deb" | cut -d' ' -f1)" != "$DEB_SHA256" ]; then
    if ! curl -fsS --retry 3 -o "$deb.part" "$MIRROR/$DEB_PATH" 2>/dev/null; then
      rm -f "$deb.part"
      note "could not download $MIRROR/$DEB_PATH: the CUDA build and its checks are skipped"
      exit 0
    fi
    sum=$(sha256sum "$deb.part" | cut -d' ' -f1)
    [ "$sum" = "$DEB_SHA256" ] || { rm -f "$deb.part"; die "$(basename "$DEB_PATH"): sha256 $sum, expected $DEB_SHA256"; }
    mv "$deb.part" "$deb"
  fi
  req="$dl/requirements.txt"
  printf '%s\n' "${WHEELS[@]}" >"$req"
  if ! python3 -m pip download -q --no-deps --require-hashes -r "$req" -d "$dl/wheels" >"$dl/pip.log" 2>&1; then
    note "could not download the CUDA 12.4 wheels from PyPI ($(tail -n 1 "$dl/pip.log")): the CUDA build and its checks are skipped"
    exit 0
  fi

  tmp="$CACHE/src/cuda-assemble.$$"
  rm -rf "$tmp" "$PREFIX"; mkdir -p "$tmp/deb" "$tmp/whl"
  quiet "unpack $(basename "$deb")" dpkg-deb -x "$deb" "$tmp/deb"
  for w in "$dl"/wheels/*.whl; do
    quiet "unpack $(basename "$w")" python3 -m zipfile -e "$w" "$tmp/whl"
  done
  t="$tmp/deb/usr/lib/nvidia-cuda-toolkit"
  n="$tmp/whl/nvidia"
  mkdir -p "$PREFIX"/{bin/crt,include,lib64/stubs,nvvm/bin,nvvm/libdevice}
  for b in nvcc cudafe++ fatbinary nvlink bin2c; do cp "$t/bin/$b" "$PREFIX/bin/" 2>/dev/null || cp "$tmp/deb/usr/bin/$b" "$PREFIX/bin/"; done
  for b in ptxas cuobjdump nvdisasm nvprune cu++filt; do cp "$tmp/deb/usr/bin/$b" "$PREFIX/bin/"; done
  cp "$t"/bin/crt/*.stub "$PREFIX/bin/crt/"
  cp "$t/bin/cicc" "$PREFIX/nvvm/bin/"
  cp "$t/libdevice/libdevice.10.bc" "$PREFIX/nvvm/libdevice/"
  cp "$tmp/deb/usr/include/cuda.h" "$PREFIX/include/" 2>/dev/null || true
  cp -r "$n"/cuda_runtime/include/. "$n"/cuda_cccl/include/. "$n"/cuda_nvcc/include/. "$PREFIX/include/"
  find "$PREFIX/include" -name '__init__.py' -delete
  rm -rf "$PREFIX/include/__pycache__"
  cp "$n/cuda_runtime/lib/libcudart.so.12" "$PREFIX/lib64/"
  ln -s libcudart.so.12 "$PREFIX/lib64/libcudart.so"
  ln -s lib64 "$PREFIX/lib"
  # The nvcc.profile of a standard toolkit: every path relative to nvcc's own folder.
  cat >"$PREFIX/bin/nvcc.profile" <<'EOF'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
EOF
  # A version.json like a runfile install's, read by CMake's FindCUDAToolkit.
  printf '{\n   "cuda" : {\n      "name" : "CUDA SDK",\n      "version" : "12.4.1"\n   }\n}\n' >"$PREFIX/version.json"
  # The stub driver library: every cu* entry point returns CUDA_ERROR_STUB_LIBRARY (34), as the
  # toolkit's own stub does. The symbols are what cuda.h declares, under both the names it declares
  # and the versioned names its macros map them to (cuCtxPushCurrent -> cuCtxPushCurrent_v2).
  syms=$(grep -oE '^CUresult CUDAAPI (cu[A-Za-z0-9_]+)\(' "$PREFIX/include/cuda.h" | sed -E 's/^CUresult CUDAAPI (cu[A-Za-z0-9_]+)\(/\1/' | sort -u)
  { echo '#include <cuda.h>'; for s in $syms; do echo "REPROSGD_STUB $s"; done; } >"$tmp/names.c"
  mapped=$(gcc -E -P -I"$PREFIX/include" "$tmp/names.c" | sed -n 's/^REPROSGD_STUB \([A-Za-z0-9_]*\)$/\1/p')
  for s in $(printf '%s\n' $syms $mapped | sort -u); do echo "int $s(void) { return 34; }"; done >"$tmp/stub.c"
  quiet "build the stub libcuda.so" gcc -shared -fPIC -o "$PREFIX/lib64/stubs/libcuda.so" "$tmp/stub.c" -Wl,-soname,libcuda.so.1
  rm -rf "$tmp"
  echo 'int main(void){ return 0; }' >"$dl/hello.cu"
  quiet "compile a CUDA program with the assembled toolkit" env -u CUDA_HOME -u CUDA_PATH \
    "$PREFIX/bin/nvcc" -std=c++20 -arch=sm_90 -cudart shared -ccbin g++ "$dl/hello.cu" -o "$dl/hello"
  rm -f "$dl/hello"
  touch "$PREFIX/.complete"
fi

# ---------------------------------------------------------------------------------------------
# 2. Kokkos 4.6.1 with CUDA (+ Serial for the host side), compiled through its nvcc_wrapper with
#    the toolkit above. Code for Hopper (sm_90); Ampere (sm_80) is compiled by ReproSGD's build.
if [ ! -f "$KOKKOS_PREFIX/.complete" ]; then
  b="$CACHE/build/kokkos4-cuda"
  rm -rf "$b" "$KOKKOS_PREFIX"
  export CUDA_HOME="$PREFIX" NVCC_WRAPPER_DEFAULT_COMPILER=g++ PATH="$PREFIX/bin:$PATH"
  quiet "configure Kokkos (kokkos4-cuda)" cmake -S "$KOKKOS4_SRC" -B "$b" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$KOKKOS4_SRC/bin/nvcc_wrapper" -DCMAKE_CXX_STANDARD=20 \
    -DCMAKE_INSTALL_PREFIX="$KOKKOS_PREFIX" -DCUDAToolkit_ROOT="$PREFIX" \
    -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_CUDA_LAMBDA=ON \
    -DKokkos_ARCH_HOPPER90=ON -DKokkos_ENABLE_DEPRECATED_CODE_4=OFF -DKokkos_ENABLE_TESTS=OFF
  quiet "build Kokkos (kokkos4-cuda)" cmake --build "$b" -j "$JOBS"
  quiet "install Kokkos (kokkos4-cuda)" cmake --install "$b"
  rm -rf "$b"
  # The C++ compiler of CUDA builds: Kokkos's nvcc_wrapper pinned to this toolkit and to g++
  # whatever the caller's PATH and environment say (nvcc_wrapper otherwise runs the first nvcc on
  # PATH, which may be another CUDA's).
  printf '#!/usr/bin/env bash\nexport CUDA_ROOT="%s" CUDA_HOME="%s" NVCC_WRAPPER_DEFAULT_COMPILER=g++\nexec "%s" "$@"\n' \
    "$PREFIX" "$PREFIX" "$KOKKOS_PREFIX/bin/nvcc_wrapper" >"$KOKKOS_PREFIX/bin/nvcc_wrapper_pinned"
  chmod +x "$KOKKOS_PREFIX/bin/nvcc_wrapper_pinned"
  touch "$KOKKOS_PREFIX/.complete"
fi
