#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# build_complete.sh CUDA_BUILD UNIT_TEST... — the CUDA variant build compiled and linked what it must:
# train_mlp, every unit test of the main build (each with its kernels instantiated for the device
# space: tests/support/exec_spaces.hpp) and cuda_gemm_bench; and no object took a header from
# another CUDA toolkit (/usr/local/cuda*, /usr/local/include), which the pinned toolkit rules out.
set -uo pipefail
build=$1; shift
missing=()
for f in apps/train_mlp bench/cuda_gemm_bench; do [ -x "$build/$f" ] || missing+=("$f"); done
for t in "$@"; do [ -x "$build/tests/$t" ] || missing+=("tests/$t"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "FAIL: the CUDA build lacks ${missing[*]}"
  exit 1
fi
deps=$(find "$build" -name '*.o.d' | wc -l)
leaks=$(find "$build" -name '*.o.d' -print0 | xargs -0 grep -l '/usr/local/' 2>/dev/null)
if [ -n "$leaks" ]; then
  echo "FAIL: objects that include headers from /usr/local (another CUDA):"
  echo "$leaks" | head -n 5
  exit 1
fi
echo "CUDA build complete: train_mlp, cuda_gemm_bench and $# unit tests ($*); $deps objects, none with a header from /usr/local"
