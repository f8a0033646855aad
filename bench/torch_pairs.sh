#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# torch_pairs.sh — ReproSGD's training throughput against PyTorch's on this machine, side by side:
# train_bench and torch_peer.py run alternately, --pairs times, each for the same model, batch,
# optimizer and thread count; every pair gives a ratio (ours / PyTorch's samples/s), and the
# summary line is the median of those ratios. On a shared 2-core VM, whose speed moves by ±30 %
# from one minute to the next, a ratio taken within one pair is the figure to quote; medians of
# separate runs are not.
#
#   bash bench/torch_pairs.sh [--threads 1] [--pairs 9] [--steps 10] [--repeats 15] [--micro-batch 128]
#                             [--build DIR]
#
# --micro-batch M: ours splits each batch of 128 into micro-batches of M (the setting that makes a run
# rank-independent); PyTorch trains the batch of 128 in one piece, as a PyTorch user would.
#
# Output: one JSON line per pair and a summary line
#   {"bench":"train_vs_torch","threads":1,"pairs":9,"ratio_median":..,"ratio_min":..,"ratio_max":..,
#    "ours_median":..,"torch_median":..,"ratio_of_best":..,"load":".."}
# Needs Debian's python3-torch (apt-get install -y python3-torch; /usr/bin/python3).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=1 pairs=9 steps=10 repeats=15 micro=128 build="$root/build"
while [ $# -gt 0 ]; do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --micro-batch) micro=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "torch_pairs.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
bench="$build/bench/train_bench"
[ -x "$bench" ] || { echo "torch_pairs.sh: $bench not built (bash scripts/build.sh)" >&2; exit 1; }
/usr/bin/python3 -c "import torch" 2>/dev/null ||
  { echo "torch_pairs.sh: PyTorch missing: apt-get install -y python3-torch" >&2; exit 1; }

rate() { sed -n 's/.*"samples_per_s": *\([0-9.]*\), *"samples_per_s_best": *\([0-9.]*\).*/\1 \2/p' | head -n 1; }
results=()
for ((i = 1; i <= pairs; i++)); do
  ours=$(OMP_PROC_BIND=false "$bench" --kokkos-threads="$threads" --micro-batch "$micro" --steps "$steps" --repeats "$repeats" | rate)
  theirs=$(/usr/bin/python3 "$root/bench/torch_peer.py" --threads "$threads" --steps "$steps" --repeats "$repeats" \
             --check-steps 0 2>/dev/null | rate)
  [ -n "$ours" ] && [ -n "$theirs" ] || { echo "torch_pairs.sh: pair $i: no rate from a bench" >&2; exit 1; }
  results+=("$ours $theirs")
  set -- $ours $theirs
  printf '{"bench":"train_vs_torch_pair","threads":%s,"micro_batch":%s,"pair":%d,"ours":%s,"torch":%s,"ratio":%.3f}\n' \
    "$threads" "$micro" "$i" "$1" "$3" "$(echo "$1 / $3" | bc -l)"
done
printf '%s\n' "${results[@]}" | /usr/bin/python3 -c "
import json, os, statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
ratios = sorted(o / t for o, _, t, _ in rows)
print(json.dumps({'bench': 'train_vs_torch', 'threads': $threads, 'micro_batch': $micro, 'pairs': len(rows),
                  'ratio_median': round(statistics.median(ratios), 3), 'ratio_min': round(ratios[0], 3),
                  'ratio_max': round(ratios[-1], 3),
                  'ours_median': round(statistics.median(r[0] for r in rows), 1),
                  'torch_median': round(statistics.median(r[2] for r in rows), 1),
                  'ratio_of_best': round(max(r[1] for r in rows) / max(r[3] for r in rows), 3),
                  'load': open('/proc/loadavg').read().split()[0]}))
"
