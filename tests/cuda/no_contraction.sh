#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# no_contraction.sh — the device half of contract level L2: no floating-point contraction in device
# code that the source does not write (docs/portability.md, "Device numerics"). Reads SASS with
# cuobjdump; needs no GPU.
#
#   no_contraction.sh CUDA_BIN_DIR BINARY
#
# 1. The control: tests/cuda/no_contraction/axpy.cu (y = a*x + y) compiled for sm_90 with nvcc's
#    defaults has an FFMA, and with --fmad=false an FMUL and an FADD and no FFMA — so this check
#    sees a contraction when there is one.
# 2. BINARY (a test or train_mlp of the CUDA build): every SGD update kernel (reprosgd::Sgd::update,
#    a*b+c written as a multiply and an add) has FMULs and FADDs and no FFMA, and the device GEMM
#    kernel (GemmSharedTileFunctor, whose source writes __fmaf_rn) has its FFMAs.
# Exit 0 when all hold, 1 with the counts otherwise, 77 (skipped) without the toolkit or binary.
set -euo pipefail
bin=$1 binary=$2
here=$(cd "$(dirname "$0")" && pwd)
nvcc="$bin/nvcc" cuobjdump="$bin/cuobjdump"
[ -x "$nvcc" ] && [ -x "$cuobjdump" ] || { echo "SKIP: no CUDA toolkit in $bin"; exit 77; }
[ -f "$binary" ] || { echo "SKIP: no CUDA build binary $binary"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0

# count OPCODE FILE [FUNCTION-PATTERN]: OPCODE instructions in the SASS of the functions whose
# mangled name matches the pattern (all functions without one).
count() {
  awk -v op="$1" -v pat="${3:-.}" '
    /Function :/ { inside = ($3 ~ pat) }
    inside && $0 ~ ("[ \t]" op "[ .]") { n++ }
    END { print n + 0 }' "$2"
}

env -u CUDA_HOME "$nvcc" -arch=sm_90 -cubin -o "$tmp/default.cubin" "$here/no_contraction/axpy.cu"
env -u CUDA_HOME "$nvcc" -arch=sm_90 --fmad=false -cubin -o "$tmp/strict.cubin" "$here/no_contraction/axpy.cu"
"$cuobjdump" -sass "$tmp/default.cubin" >"$tmp/default.sass"
"$cuobjdump" -sass "$tmp/strict.cubin" >"$tmp/strict.sass"
d_ffma=$(count FFMA "$tmp/default.sass") s_ffma=$(count FFMA "$tmp/strict.sass")
s_fmul=$(count FMUL "$tmp/strict.sass") s_fadd=$(count FADD "$tmp/strict.sass")
echo "control axpy: nvcc defaults $d_ffma FFMA; --fmad=false $s_ffma FFMA, $s_fmul FMUL, $s_fadd FADD"
if [ "$d_ffma" -lt 1 ] || [ "$s_ffma" -ne 0 ] || [ "$s_fmul" -lt 1 ] || [ "$s_fadd" -lt 1 ]; then
  echo "FAIL: the control does not show nvcc's contraction and its absence under --fmad=false"; fail=1
fi

"$cuobjdump" -sass "$binary" >"$tmp/binary.sass" 2>/dev/null || { echo "FAIL: cuobjdump -sass $binary"; exit 1; }
sgd='3Sgd6update'
gemm='GemmSharedTileFunctor'
kernels=$(awk -v pat="$sgd" '/Function :/ && $3 ~ pat { n++ } END { print n + 0 }' "$tmp/binary.sass")
g_kernels=$(awk -v pat="$gemm" '/Function :/ && $3 ~ pat { n++ } END { print n + 0 }' "$tmp/binary.sass")
k_ffma=$(count FFMA "$tmp/binary.sass" "$sgd") k_fmul=$(count FMUL "$tmp/binary.sass" "$sgd")
k_fadd=$(count FADD "$tmp/binary.sass" "$sgd") g_ffma=$(count FFMA "$tmp/binary.sass" "$gemm")
echo "$(basename "$binary"): $kernels SGD update kernels: $k_ffma FFMA, $k_fmul FMUL, $k_fadd FADD; $g_kernels device GEMM kernels: $g_ffma FFMA"
if [ "$kernels" -lt 1 ] || [ "$k_ffma" -ne 0 ] || [ "$k_fmul" -lt 1 ] || [ "$k_fadd" -lt 1 ]; then
  echo "FAIL: the SGD update kernels must multiply and add in separate roundings (no FFMA)"; fail=1
fi
if [ "$g_kernels" -lt 1 ] || [ "$g_ffma" -lt 1 ]; then
  echo "FAIL: the device GEMM kernels must keep the fused multiply-adds their source writes"; fail=1
fi
exit $fail
