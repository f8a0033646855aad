#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# same_bits.sh BINARY THREADS_FLAG "LAUNCHER": 30 steps of the Fashion-MNIST CNN give one fingerprint
# on 1 and 2 threads and the Serial backend, and, when LAUNCHER (mpiexec ...) is given, on 1, 2 and
# 3 data-parallel ranks, 2 and 3 model-parallel ranks (the 128-wide dense layer's two feature
# chunks: the third rank owns none) and a 2x2 hybrid grid. Exit 77 when the data is not installed.
set -uo pipefail
bin=$1 threads_flag=$2 launcher=${3:-}
common=(--steps 30 --train-samples 6400)
reference=""
check() {  # check NAME COMMAND...
  local name=$1; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc = 77 ]; then echo "$out" | tail -1; exit 77; fi
  if [ $rc != 0 ]; then echo "FAIL: $name exited $rc:"; echo "$out" | tail -5; exit 1; fi
  local fp
  fp=$(echo "$out" | sed -n 's/^fingerprint //p' | tail -1)
  if [ -z "$fp" ]; then echo "FAIL: $name printed no fingerprint"; echo "$out" | tail -5; exit 1; fi
  echo "$name: $fp"
  if [ -z "$reference" ]; then reference=$fp
  elif [ "$fp" != "$reference" ]; then echo "FAIL: $name gives $fp, not $reference"; exit 1; fi
}
check "1 thread" "$bin" "${common[@]}" "$threads_flag=1"
check "2 threads" "$bin" "${common[@]}" "$threads_flag=2"
check "Serial backend" "$bin" "${common[@]}" --backend serial "$threads_flag=1"
if [ -n "$launcher" ]; then
  for n in 1 2 3; do
    check "$n data-parallel ranks" $launcher -n $n "$bin" "${common[@]}" --parallel data "$threads_flag=1"
  done
  for n in 2 3; do
    check "$n model-parallel ranks" $launcher -n $n "$bin" "${common[@]}" --parallel model "$threads_flag=1"
  done
  check "2x2 hybrid grid" $launcher -n 4 "$bin" "${common[@]}" --parallel hybrid "$threads_flag=1"
fi
echo "PASS: one fingerprint, $reference"
