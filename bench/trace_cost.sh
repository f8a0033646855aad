#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# trace_cost.sh [TRAIN_BENCH] [ROUNDS] [THREADS] — the cost of the determinism trace
# (TrainerOptions::trace, docs/diagnosis.md) on train_bench's 784-512-512-10 MLP: ROUNDS rounds (7)
# of three runs back to back — no trace, --trace step, --trace layer — each the median samples/s
# of 5 segments of 20 steps; prints the JSON lines, then per level the median rate and the median
# of the per-round ratios off/traced (time per step traced over untraced), which a neighbour's load
# moves less than the rates.
set -euo pipefail
bench=${1:-build/bench/train_bench}
rounds=${2:-7}
threads=${3:-1}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 0; i < rounds; ++i)); do
  for t in off step layer; do
    OMP_PROC_BIND=false "$bench" --kokkos-threads="$threads" --trace $t --steps 20 --repeats 5 2>/dev/null | grep '^{' | tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r["trace"], []).append(r["samples_per_s"])
for level in ("off", "step", "layer"):
    print(f"{level:5s}: median {statistics.median(by[level]):8.0f} samples/s over {len(by[level])} runs")
for level in ("step", "layer"):
    ratios = [o / t for o, t in zip(by["off"], by[level])]
    print(f"{level:5s}: time per step x{statistics.median(ratios):.3f} of the untraced run "
          f"(median of {len(ratios)} paired ratios, range {min(ratios):.3f} to {max(ratios):.3f})")
PY
