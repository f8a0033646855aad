#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# recovery_bench.sh — the cost of losing a rank, and of being ready to, with train_mlp on 4 ranks:
#
#  1. recovery: rank 2 is killed (SIGKILL) at step K; the time from its death (the wall time it
#     writes as it dies) to the first step completed after it (the step's wall time in the metrics),
#     for ShrinkAndContinue (the survivors repair the communicator and redo step K on 3 ranks) and
#     for RestartFromCheckpoint (the job exits 75, scripts/relaunch.sh starts it on 3 ranks, it
#     resumes from the newest checkpoint: process start, MPI and Kokkos start-up, data loading,
#     checkpoint load). Measured in the same run, alternating, median of --repeats.
#  2. failure-free overhead of ShrinkAndContinue (the agreement before every update and the stop
#     vote, under --with-ft ulfm) against Abort (plain DataParallel): median step time
#     from the metrics' wall times, steps 5 .. S-1, alternating, median over --repeats runs.
#
# usage: bench/recovery_bench.sh [--repeats N] [--steps S] [--kill-step K] [--overhead-ranks P] [--overhead-only] [--smoke]
#        (train_mlp from build/examples, mpiexec from the Open MPI set up by scripts/setup.sh)
# Output: JSON lines on stdout (bench, policy, seconds / samples per second, context).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exe=${TRAIN_MLP:-$root/build/examples/train_mlp}
CACHE=${REPROSGD_CACHE:-$HOME/.cache/reprosgd}
mpiexec=${MPIEXEC:-$(cat "$CACHE/openmpi.prefix")/bin/mpiexec}
repeats=5 steps=60 kill_step=30 layers=784,512,512,10 train=20000 overhead_ranks=4 recovery=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --repeats) repeats=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --kill-step) kill_step=$2; shift 2 ;;
    --overhead-ranks) overhead_ranks=$2; shift 2 ;;
    --overhead-only) recovery=0; shift ;;
    --smoke) repeats=1 steps=12 kill_step=6 layers=784,32,10 train=2000; shift ;;
    *) echo "recovery_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_PROC_BIND=false
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(--data synthetic --synthetic-train "$train" --synthetic-test 500 --layers "$layers" --optimizer sgd
      --lr 0.01 --batch 128 --micro-batch 16 --steps "$steps" --seed 1 --threads 1 --quiet)
launch=("$mpiexec" --oversubscribe --with-ft ulfm)
git_sha=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
context="\"layers\":\"$layers\",\"batch\":128,\"micro_batch\":16,\"repeats\":$repeats,\"load\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"git\":\"$git_sha\""

# death_time LOG: the wall time the killed rank wrote as it died.
death_time() { sed -n 's/.*kills itself (SIGKILL) .*wall time \([0-9.]*\)$/\1/p' "$1" | head -n 1; }
# first_step_after METRICS T: the wall time of the first step line completed after time T.
first_step_after() {
  awk -v t="$2" -F'"wall_time":' '/"event":"step"/ { split($2, a, "}"); if (a[1] + 0 > t + 0) { print a[1]; exit } }' "$1"
}
# median of numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# step_time METRICS: median seconds between consecutive steps, skipping the first 5 (warm-up).
step_time() {
  awk -F'"wall_time":' '/"event":"step"/ { split($2, a, "}"); t[n++] = a[1] } END { for (i = 6; i < n; ++i) print t[i] - t[i - 1] }' "$1" | median
}

shrink_times=() restart_times=()
for ((r = 0; r < repeats * recovery; ++r)); do
  # ShrinkAndContinue
  "${launch[@]}" -n 4 "$exe" "${args[@]}" --fault-tolerance shrink --inject-failure "2@$kill_step" \
    --metrics "$work/shrink.jsonl" >"$work/shrink.log" 2>&1 || true
  t0=$(death_time "$work/shrink.log")
  t1=$(first_step_after "$work/shrink.jsonl" "$t0")
  shrink_times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')")
  # RestartFromCheckpoint (checkpoint every 10 steps; the relaunched job resumes from the newest)
  rm -rf "$work/ckpt" "$work"/restart-*.jsonl
  bash "$root/scripts/relaunch.sh" -n 4 --attempts 2 -- "${launch[@]}" -n '{ranks}' "$exe" "${args[@]}" \
    --fault-tolerance restart --checkpoint-dir "$work/ckpt" --checkpoint-every 10 --resume auto \
    --inject-failure "2@$kill_step" --metrics "$work/restart-{ranks}.jsonl" >"$work/restart.log" 2>&1 || true
  t0=$(death_time "$work/restart.log")
  t1=$(first_step_after "$work/restart-3.jsonl" "$t0")
  restart_times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')")
done
if ((recovery)); then
shrink=$(printf '%s\n' "${shrink_times[@]}" | median)
restart=$(printf '%s\n' "${restart_times[@]}" | median)
echo "{\"bench\":\"recovery\",\"policy\":\"shrink\",\"ranks\":4,\"seconds\":$shrink,\"samples\":[$(IFS=,; echo "${shrink_times[*]}")],$context}"
echo "{\"bench\":\"recovery\",\"policy\":\"restart\",\"ranks\":4,\"seconds\":$restart,\"samples\":[$(IFS=,; echo "${restart_times[*]}")],$context}"
awk -v s="$shrink" -v r="$restart" 'BEGIN { printf "{\"bench\":\"recovery\",\"restart_over_shrink\":%.2f}\n", r / s }'
fi

# Abort under the plain launcher, Abort under --with-ft ulfm (the runtime's own failure detector),
# ShrinkAndContinue under --with-ft ulfm: the policy's own cost is shrink vs abort_ulfm.
abort_steps=() abort_ulfm_steps=() shrink_steps=()
for ((r = 0; r < repeats; ++r)); do
  "$mpiexec" --oversubscribe -n "$overhead_ranks" "$exe" "${args[@]}" --fault-tolerance abort --metrics "$work/abort.jsonl" >/dev/null 2>&1
  abort_steps+=("$(step_time "$work/abort.jsonl")")
  "${launch[@]}" -n "$overhead_ranks" "$exe" "${args[@]}" --fault-tolerance abort --metrics "$work/abort_ulfm.jsonl" >/dev/null 2>&1
  abort_ulfm_steps+=("$(step_time "$work/abort_ulfm.jsonl")")
  "${launch[@]}" -n "$overhead_ranks" "$exe" "${args[@]}" --fault-tolerance shrink --metrics "$work/ft.jsonl" >/dev/null 2>&1
  shrink_steps+=("$(step_time "$work/ft.jsonl")")
done
a=$(printf '%s\n' "${abort_steps[@]}" | median)
u=$(printf '%s\n' "${abort_ulfm_steps[@]}" | median)
s=$(printf '%s\n' "${shrink_steps[@]}" | median)
awk -v a="$a" -v u="$u" -v s="$s" -v r="$overhead_ranks" -v ctx="$context" 'BEGIN {
  printf "{\"bench\":\"failure_free_overhead\",\"overhead_ranks\":%d,\"abort_samples_per_s\":%.1f,\"abort_ulfm_samples_per_s\":%.1f,\"shrink_samples_per_s\":%.1f,\"shrink_over_abort_ulfm\":%.4f,\"shrink_over_abort\":%.4f,%s}\n",
         r, 128 / a, 128 / u, 128 / s, u / s, a / s, ctx }'
