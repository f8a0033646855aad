#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# no_contraction.sh — contract level L2 in HIP device code: no floating-point contraction that the
# source does not write (docs/portability.md, "HIP"). Reads the gfx90a code objects embedded in the
# HIP build's binaries with LLVM 15's tools; needs no GPU.
#
#   no_contraction.sh HIPCC SGD_BINARY GEMM_BINARY
#
# 1. The control: tests/hip/no_contraction/axpy.hip (y = a*x + y) compiled for gfx90a with clang's
#    HIP defaults has a fused multiply-add (v_fmac_f32), and with -ffp-contract=off a v_mul_f32 and
#    a v_add_f32 and no FMA — so this check sees a contraction when there is one.
# 2. SGD_BINARY (unit_optim of the HIP build): every SGD update kernel (reprosgd::Sgd::update, a*b+c
#    written as a multiply and an add) has multiplies and adds and no FMA; GEMM_BINARY (unit_kernels):
#    the device GEMM kernels (GemmSharedTileFunctor, whose source writes fma) have their FMAs.
# Exit 0 when all hold, 1 with the counts otherwise, 77 (skipped) without the tools or binaries.
set -euo pipefail
hipcc=$1 sgd_binary=$2 gemm_binary=$3
here=$(cd "$(dirname "$0")" && pwd)
llvm=/usr/lib/llvm-15/bin
for t in clang-offload-bundler llvm-objdump llvm-objcopy; do
  [ -x "$llvm/$t" ] || { echo "SKIP: no $llvm/$t (Debian's clang-15/llvm-15, which hipcc brings)"; exit 77; }
done
[ -x "$hipcc" ] || { echo "SKIP: no hipcc at $hipcc"; exit 77; }
for b in "$sgd_binary" "$gemm_binary"; do [ -f "$b" ] || { echo "SKIP: no HIP build binary $b"; exit 77; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
fma_ops='v_(pk_)?(fma|fmac|mad|mac)_(f32|mix[a-z0-9_]*)'
mul_ops='v_(pk_)?mul_f32'
add_ops='v_(pk_)?(add|sub|subrev)_f32'

# count REGEX FILE [FUNCTION-PATTERN]: instructions matching REGEX in the disassembly of the
# functions whose mangled name matches the pattern (all functions without one).
count() {
  awk -v op="$1" -v pat="${3:-.}" '
    /^[0-9a-f]+ <.*>:$/ { inside = ($2 ~ pat) }
    inside && $1 ~ ("^" op "(_e32|_e64|_sdwa|_dpp)?$") { n++ }
    END { print n + 0 }' "$2"
}
functions() { awk -v pat="$1" '/^[0-9a-f]+ <.*>:$/ && $2 ~ pat { n++ } END { print n + 0 }' "$2"; }

# disassemble BINARY OUT: the gfx90a code objects of every offload bundle in BINARY's .hip_fatbin
# section (one bundle per translation unit, each starting with the bundler's magic), disassembled.
disassemble() {
  local bin=$1 out=$2 fatbin="$tmp/fatbin" i=0
  "$llvm/llvm-objcopy" --dump-section=.hip_fatbin="$fatbin" "$bin" "$tmp/stripped" 2>/dev/null ||
    { echo "FAIL: $bin has no .hip_fatbin section"; exit 1; }
  local size; size=$(stat -c %s "$fatbin")
  local offsets; offsets=($(grep -obUa '__CLANG_OFFLOAD_BUNDLE__' "$fatbin" | cut -d: -f1) "$size")
  : >"$out"
  while [ $i -lt $((${#offsets[@]} - 1)) ]; do
    dd if="$fatbin" of="$tmp/b.bundle" bs=64K iflag=skip_bytes,count_bytes status=none \
       skip=$((offsets[i])) count=$((offsets[i + 1] - offsets[i]))
    if "$llvm/clang-offload-bundler" --unbundle --type=o --input="$tmp/b.bundle" \
         --targets=hipv4-amdgcn-amd-amdhsa--gfx90a --output="$tmp/b.co" 2>/dev/null && [ -s "$tmp/b.co" ]; then
      "$llvm/llvm-objdump" -d --mcpu=gfx90a "$tmp/b.co" >>"$out"
    fi
    rm -f "$tmp/b.co"
    i=$((i + 1))
  done
}

HCC_AMDGPU_TARGET=gfx90a "$hipcc" --offload-arch=gfx90a --cuda-device-only -S -O2 -o "$tmp/default.s" "$here/no_contraction/axpy.hip" 2>/dev/null
HCC_AMDGPU_TARGET=gfx90a "$hipcc" --offload-arch=gfx90a --cuda-device-only -S -O2 -ffp-contract=off -o "$tmp/strict.s" "$here/no_contraction/axpy.hip" 2>/dev/null
# The assembly of one kernel: put it under a label line like llvm-objdump's, so count() reads it.
for f in default strict; do
  { echo "0000000000000000 <axpy>:"; sed -E 's/^[[:space:]]+//' "$tmp/$f.s"; } >"$tmp/$f.dis"
done
d_fma=$(count "$fma_ops" "$tmp/default.dis") s_fma=$(count "$fma_ops" "$tmp/strict.dis")
s_mul=$(count "$mul_ops" "$tmp/strict.dis") s_add=$(count "$add_ops" "$tmp/strict.dis")
echo "control axpy: clang's HIP defaults $d_fma FMA; -ffp-contract=off $s_fma FMA, $s_mul multiply, $s_add add"
if [ "$d_fma" -lt 1 ] || [ "$s_fma" -ne 0 ] || [ "$s_mul" -lt 1 ] || [ "$s_add" -lt 1 ]; then
  echo "FAIL: the control does not show clang's contraction and its absence under -ffp-contract=off"; fail=1
fi

sgd='3Sgd6update'
gemm='GemmSharedTileFunctor'
disassemble "$sgd_binary" "$tmp/sgd.dis"
disassemble "$gemm_binary" "$tmp/gemm.dis"
kernels=$(functions "$sgd" "$tmp/sgd.dis") g_kernels=$(functions "$gemm" "$tmp/gemm.dis")
k_fma=$(count "$fma_ops" "$tmp/sgd.dis" "$sgd") k_mul=$(count "$mul_ops" "$tmp/sgd.dis" "$sgd")
k_add=$(count "$add_ops" "$tmp/sgd.dis" "$sgd") g_fma=$(count "$fma_ops" "$tmp/gemm.dis" "$gemm")
echo "$(basename "$sgd_binary"): $kernels SGD update kernels: $k_fma FMA, $k_mul multiply, $k_add add; $(basename "$gemm_binary"): $g_kernels device GEMM kernels: $g_fma FMA"
if [ "$kernels" -lt 1 ] || [ "$k_fma" -ne 0 ] || [ "$k_mul" -lt 1 ] || [ "$k_add" -lt 1 ]; then
  echo "FAIL: the SGD update kernels must multiply and add in separate roundings (no FMA)"; fail=1
fi
if [ "$g_kernels" -lt 1 ] || [ "$g_fma" -lt 1 ]; then
  echo "FAIL: the device GEMM kernels must keep the fused multiply-adds their source writes"; fail=1
fi
exit $fail
