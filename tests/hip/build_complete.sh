#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# build_complete.sh HIP_BUILD UNIT_TEST... — the HIP variant build compiled and linked what it must:
# train_mlp and the unit tests scripts/build.sh lists for it (each with its kernels instantiated for
# Kokkos::HIP: tests/support/exec_spaces.hpp), each unit test with gfx90a device code (an offload
# bundle in its .hip_fatbin section); and no object took a header from another ROCm (/opt/rocm*),
# only Debian's in /usr.
set -uo pipefail
build=$1; shift
missing=() no_device=()
[ -x "$build/apps/train_mlp" ] || missing+=("apps/train_mlp")
for t in "$@"; do
  if [ ! -x "$build/tests/$t" ]; then
    missing+=("tests/$t")
  elif ! grep -aq 'hipv4-amdgcn-amd-amdhsa--gfx90a' "$build/tests/$t"; then
    no_device+=("tests/$t")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "FAIL: the HIP build lacks ${missing[*]}"
  exit 1
fi
if [ ${#no_device[@]} -gt 0 ]; then
  echo "FAIL: no gfx90a code in ${no_device[*]}"
  exit 1
fi
deps=$(find "$build" -name '*.o.d' | wc -l)
leaks=$(find "$build" -name '*.o.d' -print0 | xargs -0 grep -l '/opt/rocm' 2>/dev/null)
if [ -n "$leaks" ]; then
  echo "FAIL: objects that include headers from /opt/rocm (another ROCm):"
  echo "$leaks" | head -n 5
  exit 1
fi
echo "HIP build complete: train_mlp and $# unit tests ($*), each with gfx90a code; $deps objects, none with a header from /opt/rocm"
