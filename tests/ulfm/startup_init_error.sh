#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# MPI_Init_thread that returns an error, under train_mlp's start-up guard (issue 20).
#
# usage: startup_init_error.sh MPIEXEC TRAIN_MLP [MPIEXEC FLAGS...]
#
# Open MPI's MPI_Init_thread fails with "unreachable" when a process of the job dies at the end of
# the start-up exchange; its default initial error handler then aborts the job with no line of
# ours (a random-kill campaign trial saw exit 14). The same error is provoked here on purpose by
# leaving ob1 only the "self" transport on 2 ranks. With --startup-timeout S the guard makes the
# call return the error, and every rank that reports says so in one line and exits 76 (the
# launcher then exits 76: relaunchable); with --startup-timeout 0 (no guard) Open MPI aborts. (The
# launcher interleaves the ranks' standard error with Open MPI's messages, so a line of ours may not
# start a line of the output.)
set -u
mpiexec=$1 train=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
run() {  # STARTUP_TIMEOUT [MPIEXEC FLAGS...]
  local t=$1
  shift
  timeout 60 "$mpiexec" "$@" -n 2 --mca pml ob1 --mca btl self "$train" --data synthetic --synthetic-train 64 \
    --synthetic-test 16 --layers 784,8,10 --epochs 1 --batch 16 --threads 1 --quiet --startup-timeout "$t" >"$out" 2>&1
}
line='reprosgd::MpiEnvironment: MPI_Init_thread failed: .* \(a process of the job probably died while it started\); exiting with 76 so that the job is relaunched$'

run 10 "$@"
rc=$?
ours=$(grep -ac 'reprosgd::MpiEnvironment' "$out")
good=$(grep -acE "$line" "$out")
if [[ $rc -ne 76 || $good -lt 1 || $good -ne $ours ]] || grep -aq -e MPI_ERRORS_ARE_FATAL -e '^fingerprint' "$out"; then
  echo "FAIL guarded: exit $rc (want 76), $good start-up line(s) of $ours of ours (want >= 1, all of that form)"
  sed 's/^/  | /' "$out"
  fail=1
else
  echo "ok   guarded: exit 76, $good start-up line(s): $(tr -d '\0' <"$out" | grep -a -m1 -E "$line")"
fi

run 0 "$@"
rc=$?
if [[ $rc -eq 0 || $rc -eq 76 || $rc -eq 124 ]] || grep -aq "reprosgd::MpiEnvironment" "$out"; then
  echo "FAIL unguarded: exit $rc (want Open MPI's own abort: neither 0, 76 nor the 60 s timeout), no line of ours"
  sed 's/^/  | /' "$out"
  fail=1
else
  echo "ok   unguarded: exit $rc from Open MPI's abort"
fi
exit $fail
