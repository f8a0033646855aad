#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Run a ULFM test under mpiexec and judge it by what the survivors report, not by mpiexec's exit
# status alone: when a rank is killed on purpose the launcher may report that (a non-zero status)
# although every survivor finished correctly.
#
# usage: run_ulfm_test.sh SURVIVORS DEATHS LIMIT_S MPIEXEC [mpiexec arguments...] PROGRAM [arguments...]
#   SURVIVORS  how many "ULFM-PASS" lines must appear (ranks - scheduled deaths)
#   DEATHS     how many ranks kill themselves (0: the launcher must exit 0)
#   LIMIT_S    wall-clock limit for mpiexec (timeout sends TERM, then KILL 10 s later)
# The command line must contain "--run-id TOKEN" (unique per run): after the launcher returns,
# any process whose command line still contains it is a leftover; it is reported, killed (by its
# PID: these are processes this script started) and the test fails.
# Passes when: the launcher finished within the limit, exactly SURVIVORS ranks printed ULFM-PASS,
# none printed ULFM-FAIL, no process of the run is left, and the launcher's status is 0 or (with
# deaths scheduled) any status other than a timeout's.
set -u
survivors=$1
deaths=$2
limit=$3
shift 3
token=
prev=
for a in "$@"; do
  if [[ $prev == --run-id ]]; then token=$a; fi
  prev=$a
done
if [[ -z $token ]]; then
  echo "run_ulfm_test.sh: the command has no --run-id TOKEN" >&2
  exit 2
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s%N)
timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
rc=$?
end=$(date +%s%N)
cat "$log"
status=0
pass=$(grep -c '^ULFM-PASS ' "$log")
fail=$(grep -c '^ULFM-FAIL' "$log")
printf 'run_ulfm_test.sh: launcher exit status %d after %.1f s; %d ULFM-PASS (expected %d), %d ULFM-FAIL\n' \
  "$rc" "$(((end - start) / 1000000000)).$(((end - start) / 100000000 % 10))" "$pass" "$survivors" "$fail"
if [[ $rc -eq 124 || $rc -eq 137 ]]; then
  echo "run_ulfm_test.sh: FAIL: the launcher ran past ${limit} s (a hang)"
  status=1
fi
if [[ $deaths -eq 0 && $rc -ne 0 ]]; then
  echo "run_ulfm_test.sh: FAIL: no rank was meant to die, yet the launcher exited with $rc"
  status=1
fi
if [[ $pass -ne $survivors || $fail -ne 0 ]]; then
  echo "run_ulfm_test.sh: FAIL: survivors did not all report success"
  status=1
fi
# Leftovers: give the launcher's children a moment to go, then look for the run's token.
sleep 1
# pgrep writes to a file, not into $(...): a command substitution's subshell would carry this
# script's own command line, token included, and match itself.
pids=$(mktemp)
trap 'rm -f "$log" "$pids"' EXIT
pgrep -f -- "--run-id $token" >"$pids"
left=
while read -r pid; do
  [[ $pid != "$$" ]] && left+=" $pid"
done <"$pids"
if [[ -n $left ]]; then
  echo "run_ulfm_test.sh: FAIL: processes of this run left behind: $(echo $left)"
  for pid in $left; do kill -KILL "$pid" 2>/dev/null; done
  status=1
fi
exit $status
