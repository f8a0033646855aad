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
#     With --parallel model|hybrid (model parallelism, UlfmHybrid): ShrinkAndContinue only
#     (train_mlp has no restart for sharded state); the survivors re-grid (1x4 -> 1x3, 2x2 -> 3x1),
#     restore the lost shard from its buddy's in-memory copy (every --buddy-every steps), roll back
#     to that snapshot and replay the steps since it. Reported besides death -> first step (the
#     interrupted step K, completed after the replay): the repair (shrink_seconds: communicator,
#     shard restore, re-sharding and the new buddy snapshot),
#     detection -> first completed (replayed) step (recovery_seconds), the replay length
#     (K - snapshot step) and where the shards came from, from the metrics' failure line.
#     With --spares N (regrow): the ShrinkAndContinue runs start 4 + N ranks, the last N held idle
#     as spares (train_mlp --spares); after the failure a spare joins and receives the state, so
#     training goes on at 4 ranks. Reported as policy "regrow", with the failure line's
#     regrow_seconds (recruiting the spare and sending it the state). No restart runs, no
#     overhead runs.
#  2. failure-free overhead of ShrinkAndContinue (the agreement before every update and the stop
#     vote, under --with-ft ulfm) against Abort (plain DataParallel): median step time
#     from the metrics' wall times, steps 5 .. S-1, alternating, median over --repeats runs (and
#     the mean step time, which counts the buddy-snapshot steps of model parallelism).
#
# usage: bench/recovery_bench.sh [--repeats N] [--steps S] [--kill-step K] [--overhead-ranks P]
#          [--overhead-only | --recovery-only] [--smoke] [--layers W0,W1,..]
#          [--parallel data|model|hybrid] [--grid PDxPM] [--feature-chunk N] [--buddy-every N]
#          [--spares N]
#        (--parallel model|hybrid: --kill-step defaults to 33 and --buddy-every to 5, so 3 steps
#        are replayed; --smoke there uses --feature-chunk 8)
#        (train_mlp from build/apps, mpiexec from the Open MPI set up by scripts/setup.sh)
# Output: JSON lines on stdout (bench, policy, seconds / samples per second, context).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exe=${TRAIN_MLP:-$root/build/apps/train_mlp}
CACHE=${REPROSGD_CACHE:-$HOME/.cache/reprosgd}
mpiexec=${MPIEXEC:-$(cat "$CACHE/openmpi.prefix")/bin/mpiexec}
repeats=5 steps=60 kill_step= layers=784,512,512,10 train=20000 overhead_ranks=4 recovery=1 overhead=1
parallel=data grid= feature_chunk= buddy_every= smoke=0 layers_set=0 spares=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --repeats) repeats=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --kill-step) kill_step=$2; shift 2 ;;
    --overhead-ranks) overhead_ranks=$2; shift 2 ;;
    --overhead-only) recovery=0; shift ;;
    --recovery-only) overhead=0; shift ;;
    --layers) layers=$2 layers_set=1; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --grid) grid=$2; shift 2 ;;
    --feature-chunk) feature_chunk=$2; shift 2 ;;
    --buddy-every) buddy_every=$2; shift 2 ;;
    --smoke) smoke=1; shift ;;
    --spares) spares=$2; shift 2 ;;
    *) echo "recovery_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
case $parallel in
  data) if [[ -n $grid$feature_chunk$buddy_every ]]; then
          echo "recovery_bench.sh: --grid, --feature-chunk and --buddy-every need --parallel model or hybrid" >&2; exit 2
        fi ;;
  model|hybrid) ;;
  *) echo "recovery_bench.sh: --parallel must be data, model or hybrid, got $parallel" >&2; exit 2 ;;
esac
if [[ -n $grid && $parallel != hybrid ]]; then echo "recovery_bench.sh: --grid needs --parallel hybrid" >&2; exit 2; fi
if ((recovery == 0 && overhead == 0)); then echo "recovery_bench.sh: --overhead-only and --recovery-only exclude each other" >&2; exit 2; fi
default_kill=30
if ((smoke)); then
  repeats=1 steps=12 default_kill=6 train=2000
  ((layers_set)) || layers=784,32,10
  [[ $parallel == data ]] || { default_kill=8 buddy_every=${buddy_every:-3} feature_chunk=${feature_chunk:-8}; }
elif [[ $parallel != data ]]; then
  default_kill=33 buddy_every=${buddy_every:-5}
fi
kill_step=${kill_step:-$default_kill}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_PROC_BIND=false
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(--data synthetic --synthetic-train "$train" --synthetic-test 500 --layers "$layers" --optimizer sgd
      --lr 0.01 --batch 128 --micro-batch 16 --steps "$steps" --seed 1 --threads 1 --quiet)
# Model parallelism: the policy's options (every run of this invocation uses them; the grid is
# the one of the 4-rank recovery runs and of --overhead-ranks).
par_args=() par_ctx=""
if [[ $parallel != data ]]; then
  par_args=(--parallel "$parallel")
  grid_text=${grid:-balanced}
  [[ $parallel == hybrid ]] || grid_text=1xP
  [[ -z $grid ]] || par_args+=(--grid "$grid")
  [[ -z $feature_chunk ]] || par_args+=(--feature-chunk "$feature_chunk")
  par_ctx=",\"parallel\":\"$parallel\",\"grid\":\"$grid_text\",\"feature_chunk\":${feature_chunk:-null},\"buddy_every\":$buddy_every"
fi
args+=("${par_args[@]}")
# --buddy-every goes to the shrink runs only (train_mlp ignores it otherwise).
buddy=()
[[ -z $buddy_every ]] || buddy=(--buddy-every "$buddy_every")
launch=("$mpiexec" --oversubscribe --with-ft ulfm)
git_sha=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
context="\"layers\":\"$layers\",\"batch\":128,\"micro_batch\":16,\"repeats\":$repeats$par_ctx,\"load\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"git\":\"$git_sha\""

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
# step_mean METRICS: mean seconds per step over the same steps (counts occasional slow steps,
# e.g. the buddy snapshots of model parallelism, which the median skips).
step_mean() {
  awk -F'"wall_time":' '/"event":"step"/ { split($2, a, "}"); t[n++] = a[1] } END { printf "%.6f\n", (t[n - 1] - t[5]) / (n - 6) }' "$1"
}
# steps_before METRICS K: median seconds per step over steps 5 .. K-1 (before the failure).
steps_before() {
  awk -v k="$2" -F'"wall_time":' '/"event":"step"/ { split($2, a, "}"); t[n++] = a[1] } END { for (i = 6; i < k && i < n; ++i) print t[i] - t[i - 1] }' "$1" | median
}
# failure_field METRICS NAME: a field of the metrics' failure line (numbers and strings).
failure_field() {
  sed -n '/"event":"failure"/{s/.*"'"$2"'":\("[^"]*"\|[^,}]*\).*/\1/p;q}' "$1" | tr -d '"'
}

# --spares N: the recovery runs regrow (N idle spares besides the 4 workers); no restart, no overhead runs.
np=4 spare_args=() policy=shrink
if ((spares > 0)); then
  np=$((4 + spares)) spare_args=(--spares "$spares") policy=regrow overhead=0
  context+=",\"spares\":$spares"
fi
shrink_times=() restart_times=() repair_times=() first_times=() replays=() step_times=() restored=() regrow_times=()
for ((r = 0; r < repeats * recovery; ++r)); do
  # ShrinkAndContinue
  rm -f "$work/shrink.jsonl"
  "${launch[@]}" -n "$np" "$exe" "${args[@]}" "${buddy[@]}" --fault-tolerance shrink "${spare_args[@]}" \
    --inject-failure "2@$kill_step" --metrics "$work/shrink.jsonl" >"$work/shrink.log" 2>&1 || true
  t0=$(death_time "$work/shrink.log")
  t1=$(first_step_after "$work/shrink.jsonl" "$t0")
  if [[ -z $t0 || -z $t1 ]]; then
    echo "recovery_bench.sh: the shrink run did not recover (log below)" >&2; cat "$work/shrink.log" >&2; exit 1
  fi
  shrink_times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')")
  if [[ $parallel != data || $spares -gt 0 ]]; then
    # The metrics' failure line: the repair, detection -> first completed (replayed) step, the
    # snapshot step rolled back to (the replay is steps resumed_from .. K-1, then K is redone).
    repair_times+=("$(failure_field "$work/shrink.jsonl" shrink_seconds)")
    first_times+=("$(failure_field "$work/shrink.jsonl" recovery_seconds)")
    if [[ $parallel != data ]]; then
      replays+=("$(($(failure_field "$work/shrink.jsonl" step) - $(failure_field "$work/shrink.jsonl" resumed_from)))")
    else
      replays+=(0)  # data parallelism redoes the interrupted step only
    fi
    restored+=("$(failure_field "$work/shrink.jsonl" restored_from)")
    regrow_times+=("$(failure_field "$work/shrink.jsonl" regrow_seconds)")
    step_times+=("$(steps_before "$work/shrink.jsonl" "$kill_step")")
    continue
  fi
  # RestartFromCheckpoint (checkpoint every 10 steps; the relaunched job resumes from the newest)
  rm -rf "$work/ckpt" "$work"/restart-*.jsonl
  bash "$root/scripts/relaunch.sh" -n 4 --attempts 2 -- "${launch[@]}" -n '{ranks}' "$exe" "${args[@]}" \
    --fault-tolerance restart --checkpoint-dir "$work/ckpt" --checkpoint-every 10 --resume auto \
    --inject-failure "2@$kill_step" --metrics "$work/restart-{ranks}.jsonl" >"$work/restart.log" 2>&1 || true
  t0=$(death_time "$work/restart.log")
  t1=$(first_step_after "$work/restart-3.jsonl" "$t0")
  restart_times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')")
done
list() { local IFS=,; echo "$*"; }
if ((recovery)) && [[ $parallel == data ]] && ((spares == 0)); then
shrink=$(printf '%s\n' "${shrink_times[@]}" | median)
restart=$(printf '%s\n' "${restart_times[@]}" | median)
echo "{\"bench\":\"recovery\",\"policy\":\"shrink\",\"ranks\":4,\"seconds\":$shrink,\"samples\":[$(list "${shrink_times[@]}")],$context}"
echo "{\"bench\":\"recovery\",\"policy\":\"restart\",\"ranks\":4,\"seconds\":$restart,\"samples\":[$(list "${restart_times[@]}")],$context}"
awk -v s="$shrink" -v r="$restart" 'BEGIN { printf "{\"bench\":\"recovery\",\"restart_over_shrink\":%.2f}\n", r / s }'
elif ((recovery)); then
  quoted=()
  for x in "${restored[@]}"; do quoted+=("\"$x\""); done
  echo "{\"bench\":\"recovery\",\"policy\":\"$policy\",\"ranks\":4,\"kill_step\":$kill_step,\"seconds\":$(printf '%s\n' "${shrink_times[@]}" | median),\"samples\":[$(list "${shrink_times[@]}")],\"shrink_seconds\":$(printf '%s\n' "${repair_times[@]}" | median),\"shrink_samples\":[$(list "${repair_times[@]}")],\"first_step_seconds\":$(printf '%s\n' "${first_times[@]}" | median),\"first_step_samples\":[$(list "${first_times[@]}")],\"replayed_steps\":[$(list "${replays[@]}")],\"restored_from\":[$(list "${quoted[@]}")],\"regrow_seconds\":$(printf '%s\n' "${regrow_times[@]}" | median),\"regrow_samples\":[$(list "${regrow_times[@]}")],\"step_seconds\":$(printf '%s\n' "${step_times[@]}" | median),$context}"
fi

# Abort under the plain launcher, Abort under --with-ft ulfm (the runtime's own failure detector),
# ShrinkAndContinue under --with-ft ulfm: the policy's own cost is shrink vs abort_ulfm (with
# --parallel model|hybrid it includes the buddy snapshots every --buddy-every steps: compare the
# means).
((overhead)) || exit 0
abort_steps=() abort_ulfm_steps=() shrink_steps=() abort_means=() abort_ulfm_means=() shrink_means=()
for ((r = 0; r < repeats; ++r)); do
  "$mpiexec" --oversubscribe -n "$overhead_ranks" "$exe" "${args[@]}" --fault-tolerance abort --metrics "$work/abort.jsonl" >/dev/null 2>&1
  abort_steps+=("$(step_time "$work/abort.jsonl")") abort_means+=("$(step_mean "$work/abort.jsonl")")
  "${launch[@]}" -n "$overhead_ranks" "$exe" "${args[@]}" --fault-tolerance abort --metrics "$work/abort_ulfm.jsonl" >/dev/null 2>&1
  abort_ulfm_steps+=("$(step_time "$work/abort_ulfm.jsonl")") abort_ulfm_means+=("$(step_mean "$work/abort_ulfm.jsonl")")
  "${launch[@]}" -n "$overhead_ranks" "$exe" "${args[@]}" "${buddy[@]}" --fault-tolerance shrink --metrics "$work/ft.jsonl" >/dev/null 2>&1
  shrink_steps+=("$(step_time "$work/ft.jsonl")") shrink_means+=("$(step_mean "$work/ft.jsonl")")
done
a=$(printf '%s\n' "${abort_steps[@]}" | median)
u=$(printf '%s\n' "${abort_ulfm_steps[@]}" | median)
s=$(printf '%s\n' "${shrink_steps[@]}" | median)
am=$(printf '%s\n' "${abort_means[@]}" | median)
um=$(printf '%s\n' "${abort_ulfm_means[@]}" | median)
sm=$(printf '%s\n' "${shrink_means[@]}" | median)
awk -v a="$a" -v u="$u" -v s="$s" -v am="$am" -v um="$um" -v sm="$sm" -v r="$overhead_ranks" -v ctx="$context" 'BEGIN {
  printf "{\"bench\":\"failure_free_overhead\",\"overhead_ranks\":%d,\"abort_samples_per_s\":%.1f,\"abort_ulfm_samples_per_s\":%.1f,\"shrink_samples_per_s\":%.1f,\"shrink_over_abort_ulfm\":%.4f,\"shrink_over_abort\":%.4f,\"abort_samples_per_s_mean\":%.1f,\"abort_ulfm_samples_per_s_mean\":%.1f,\"shrink_samples_per_s_mean\":%.1f,\"shrink_over_abort_ulfm_mean\":%.4f,%s}\n",
         r, 128 / a, 128 / u, 128 / s, u / s, a / s, 128 / am, 128 / um, 128 / sm, um / sm, ctx }'
