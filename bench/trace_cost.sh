#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# trace_cost.sh [TRAIN_BENCH] [ROUNDS] [THREADS] [RUNS] — the cost of the determinism trace
# (TrainerOptions::trace, docs/diagnosis.md) on train_bench's 784-512-512-10 MLP: RUNS processes (3)
# of `train_bench --trace interleaved`, each ROUNDS rounds (15) in which an untraced, a `step` and
# a `layer` trainer take turns for 20 steps each. Prints the JSON lines, then per level the median
# rate and the median over the runs of each run's x_untraced (the median over its rounds of the
# time per step traced / untraced in the same round). Rates move by up to half between processes
# on a 2-core VM at 2 threads; the ratio of segments of one round, seconds apart in one process,
# is what resolves a few percent.
set -euo pipefail
bench=${1:-build/bench/train_bench}
rounds=${2:-15}
threads=${3:-1}
runs=${4:-3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 0; i < runs; ++i)); do
  OMP_PROC_BIND=false "$bench" --kokkos-threads="$threads" --trace interleaved --steps 20 --repeats "$rounds" \
    2>/dev/null | grep '^{' | tee -a "$out"
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for level in ("off", "step", "layer"):
    mine = [r for r in rows if r["trace"] == level]
    line = f"{level:5s}: median {statistics.median(r['samples_per_s'] for r in mine):8.0f} samples/s over {len(mine)} runs"
    if level != "off":
        x = [r["x_untraced"] for r in mine]
        line += f"; time per step x{statistics.median(x):.3f} of the untraced (runs: {', '.join(f'{v:.3f}' for v in x)})"
    print(line)
PY
