#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# alloc_failure.sh TRAIN_MLP MPIEXEC [mpiexec flags...] — an error one rank meets alone, before any
# agreement, under --with-ft ulfm --fault-tolerance shrink: the allocation of the model fails on
# MPI_COMM_WORLD rank 3 only (its address space limited to 500 MB, each of the model's arrays is
# 155 MB). That rank prints the failure and, once the 5 s finalize deadline of its MpiEnvironment
# has passed (the others are waiting for it in fit()'s first agreement), ends itself with SIGKILL:
# Open MPI 5 does not report a process that exits without MPI_Finalize, as it does one that is
# killed, and with an exit instead the three others waited inside MPIX_Comm_agree until the outer
# timeout (found 2026-12-07). The other three see a rank lost while they set up, shrink, train on
# 3 ranks and print the failure-free fingerprint in the same launch. The job must not hang, and no
# process of it may be left.
set -uo pipefail
exe=$1
shift
launcher=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
token="reprosgd-alloc-$$-$RANDOM"
fail() { echo "FAIL: $*"; exit 1; }

args=(--data synthetic --synthetic-train 256 --synthetic-test 64 --steps 2 --threads 1 --optimizer sgd
      --layers 784,6000,6000,10 --batch 16 --micro-batch 4 --seed 3)
ref=$("$exe" "${args[@]}" | tail -n 1)
[[ $ref == fingerprint\ * ]] || fail "the reference run printed '$ref'"
echo "failure-free single process: $ref"

# The token is in every rank's command line (the metrics file's name), for the leftover check.
ft=(--fault-tolerance shrink --metrics "$work/metrics-$token.jsonl")
start=$SECONDS
timeout --kill-after=10 120 "${launcher[@]}" --with-ft ulfm -n 3 "$exe" "${args[@]}" "${ft[@]}" \
  : -n 1 bash -c 'ulimit -v 500000; exec "$0" "$@"' "$exe" "${args[@]}" "${ft[@]}" >"$work/out" 2>&1
rc=$?
took=$((SECONDS - start))
cat "$work/out"
echo "launcher status $rc after $took s"
((rc == 124 || (rc == 137 && took >= 120))) && fail "the job ran past 120 s (a hang)"
sleep 1
left=$(pgrep -f -- "$token" | grep -v "^$$\$" | tr '\n' ' ')
if [[ -n $left ]]; then
  kill -KILL $left 2>/dev/null
  fail "processes of this run left behind: $left"
fi
n=$(grep -c "^train_mlp: error: Kokkos failed to allocate memory" "$work/out")
((n == 1)) || fail "$n ranks said that an allocation failed (want 1, rank 3)"
grep -q "^reprosgd::MpiEnvironment: the other processes did not finalise MPI within 5 s of this process's error (they may be waiting for it); ending without MPI_Finalize, by SIGKILL, so that MPI reports this process as failed$" "$work/out" ||
  fail "rank 3 did not say that it ends by SIGKILL"
grep -q '^failure: lost rank 3 at step 0; 4 -> 3 ranks;' "$work/out" || fail "no line says that rank 3 was lost at step 0"
grep -q '"event":"failure".*"lost_ranks":\[3\]' "$work/metrics-$token.jsonl" || fail "no failure event names rank 3"
n=$(grep -c "^$ref\$" "$work/out")
((n >= 1)) || fail "the survivors did not print the failure-free fingerprint"
n=$(grep "^fingerprint " "$work/out" | grep -cv "^$ref\$")
((n == 0)) || fail "a different fingerprint was printed"
echo "ok: rank 3's allocation failure was survived as a lost rank, with the failure-free fingerprint"
