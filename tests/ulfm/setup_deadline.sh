#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# train_mlp's set-up deadline (issue 20): a rank that never makes the policy's communicators.
#
# usage: setup_deadline.sh MPIEXEC TRAIN_MLP IDLE_RANK [MPIEXEC FLAGS...]
#
# Two ranks, MPMD: rank 0 is train_mlp, rank 1 reprosgd_idle_rank, which starts MPI and sleeps, as a
# rank that stalled (or died unnoticed) right after MPI_Init would. train_mlp then waits in the
# policy's MPI_Comm_dup; with --startup-timeout 2 it must end within seconds with its one line and
# exit 76 (relaunchable), the launcher with it, and no process of the job may be left.
set -u
mpiexec=$1 train=$2 idle=$3
shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
timeout 60 "$mpiexec" "$@" -n 1 "$train" --data synthetic --synthetic-train 64 --synthetic-test 16 --layers 784,8,10 \
  --epochs 1 --batch 16 --threads 1 --quiet --startup-timeout 2 : -n 1 "$idle" 40 >"$out" 2>&1
rc=$?
took=$(($(date +%s) - start))
sleep 0.5
left=$(pgrep -f -- "$idle 40" | wc -l)
line='train_mlp: the ranks did not finish setting up their communicators within 2 s (--startup-timeout): a process of the job probably failed while the ranks were setting up; exiting with 76 so that the job is relaunched'
if [[ $rc -ne 76 ]] || ! grep -aqF "$line" "$out" || grep -aq '^fingerprint' "$out" || ((took > 20 || left > 0)); then
  echo "FAIL: exit $rc (want 76), $took s (want < 20), $left process(es) left (want 0), the line $(grep -aqF "$line" "$out" && echo present || echo MISSING)"
  sed 's/^/  | /' "$out"
  pkill -f -- "$idle 40"
  exit 1
fi
echo "ok: exit 76 after $took s with the line: $line"
