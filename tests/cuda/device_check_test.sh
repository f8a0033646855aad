#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# device_check_test.sh BUILD_DIR — the CPU half of scripts/device_check.sh, tested without a GPU:
# a bundle made from the CPU build (its train_mlp standing in for the CUDA build's, unit_rng for its
# unit tests) must prepare within the size limit, run with a host backend to "device check: PASSED"
# with every configuration "same", and, with one expected fingerprint changed, report that row
# DIFFERENT and exit 1; a folder that is not a bundle exits 2.
set -uo pipefail
build=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export REPROSGD_CUDA_BUILD=$build REPROSGD_HOST_TRAIN_MLP=$build/apps/train_mlp REPROSGD_DEVICE_UNIT_TESTS=unit_rng
bash "$root/scripts/device_check.sh" prepare "$tmp/bundle" >"$tmp/prepare.log" 2>&1 || { cat "$tmp/prepare.log"; fail "prepare"; }
cat "$tmp/prepare.log"
# 5 configurations on one process, and 2 on 2 ranks when the build has MPI (then the bundle
# carries that MPI, which the run below uses through mpiexec from the bundle).
# (ldd's output is read whole first: `ldd | grep -q` under pipefail fails whenever grep exits at its
# first match before ldd has written the rest, SIGPIPE, which made this test count 5 rows for a
# build with MPI now and then.)
rows=5
libs=$(ldd "$build/apps/train_mlp")
if grep -q 'libmpi\.so' <<<"$libs"; then
  rows=7
  [ -x "$tmp/bundle/mpi/bin/mpiexec" ] || fail "the build has MPI but the bundle has no mpi/bin/mpiexec"
fi
[ "$(wc -l <"$tmp/bundle/configurations.txt")" = $rows ] || fail "$rows configurations expected"
# The pinned goldens are what the CPU build computed.
grep -q "^golden|.*|$(sed -n 2p "$root/tests/determinism/golden.txt" | cut -d' ' -f2)$" "$tmp/bundle/configurations.txt" ||
  fail "the bundle's golden fingerprint is not tests/determinism/golden.txt's"

REPROSGD_DEVICE_BACKEND=openmp bash "$tmp/bundle/device_check.sh" run "$tmp/bundle" >"$tmp/run.log" 2>&1
rc=$?
cat "$tmp/run.log"
[ $rc = 0 ] || fail "the run exited $rc"
[ "$(grep -c '| same |$' "$tmp/run.log")" = $rows ] || fail "$rows rows 'same' expected"
[ $rows = 5 ] || grep -q '^| golden_2ranks | 2 | ' "$tmp/run.log" || fail "no golden_2ranks row"
grep -q '^unit_rng: passed' "$tmp/run.log" || fail "unit_rng did not pass"
grep -q '^device check: PASSED$' "$tmp/run.log" || fail "no PASSED line"

sed -i '3s/|[0-9a-f]*$/|00000000000000000000000000000000/' "$tmp/bundle/configurations.txt"
REPROSGD_DEVICE_BACKEND=openmp bash "$tmp/bundle/device_check.sh" run "$tmp/bundle" >"$tmp/bad.log" 2>&1
rc=$?
[ $rc = 1 ] || { cat "$tmp/bad.log"; fail "a changed fingerprint exited $rc, not 1"; }
grep -q '^| contract | 1 | 00000000000000000000000000000000 | [0-9a-f]* | DIFFERENT |$' "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "no DIFFERENT row for contract"; }
grep -q '^device check: FAILED$' "$tmp/bad.log" || fail "no FAILED line"

bash "$root/scripts/device_check.sh" run "$tmp" >"$tmp/none.log" 2>&1
rc=$?
[ $rc = 2 ] || fail "a folder that is not a bundle exited $rc, not 2"
grep -q "is not a bundle" "$tmp/none.log" || fail "no 'is not a bundle' message"
echo "device_check CPU half: PASSED"
