#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# alloc_failure.sh TRAIN_MLP MPIEXEC [mpiexec flags...] — an error one rank meets alone, before any
# agreement, under --with-ft ulfm --fault-tolerance shrink: the allocation of the model fails on
# MPI_COMM_WORLD rank 3 only (its address space limited to 500 MB, each of the model's arrays is
# 155 MB). That rank prints the failure and leaves (train_mlp cuts its MPI_Finalize at 5 s,
# docs/distributed.md "Errors"); the other three see it as a rank lost while they set up their
# communicators, shrink, train on 3 ranks and print the failure-free fingerprint in the same
# launch. The job must not hang, and no process of it may be left.
#
# NOT REGISTERED IN CTEST: it fails today (2026-12-07), a reproducer of an open hole (issue 20,
# docs/fault_tolerance.md "What is missing"). Rank 3 prints its error and, after its 5 s
# MPI_Finalize deadline, exits 1 without MPI_Finalize; the three others stay inside MPIX_Comm_agree
# (fit()'s first agreement, UlfmDataParallel::checked_agree) until the outer timeout: Open MPI does
# not report a process that exits on its own, as it does one that is killed. Register it (label
# ulfm) once that rank's exit is one ULFM detects.
set -uo pipefail
exe=$1
shift
launcher=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
token="reprosgd-alloc-$$-$RANDOM"
fail() { echo "FAIL: $*"; exit 1; }

args=(--data synthetic --synthetic-train 256 --synthetic-test 64 --steps 2 --quiet --threads 1 --optimizer sgd
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
grep -q "^failure: lost rank 3 while the ranks set up their communicators; 4 -> 3 ranks before training$" "$work/out" ||
  fail "no line says that rank 3 was lost in the set-up"
n=$(grep -c "^$ref\$" "$work/out")
((n >= 1)) || fail "the survivors did not print the failure-free fingerprint"
n=$(grep "^fingerprint " "$work/out" | grep -cv "^$ref\$")
((n == 0)) || fail "a different fingerprint was printed"
echo "ok: rank 3's allocation failure was survived as a lost rank, with the failure-free fingerprint"
