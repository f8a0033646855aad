#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# torch_predict_pairs.sh — reprosgd::Inference against PyTorch's model(x) under torch.no_grad() on
# this machine, side by side: predict_bench and torch_predict_peer.py run alternately, --pairs
# times, for the 784-512-512-10 MLP at batch 1, 32 and 1024 and one thread count; each pair gives,
# per batch, the ratio of throughputs (ours / PyTorch's samples/s, so > 1 is faster) and both
# latencies. The summary line per batch is the median over the pairs (the figure to quote on a
# shared VM whose speed moves from one minute to the next; see torch_pairs.sh).
#
#   bash bench/torch_predict_pairs.sh [--threads 1] [--pairs 5] [--repeats 15] [--build DIR]
#
# Output: one JSON line per pair and batch, then per batch
#   {"bench":"predict_vs_torch","threads":1,"batch":32,"pairs":5,"ratio_median":..,"ratio_min":..,
#    "ratio_max":..,"ours_latency_us_median":..,"torch_latency_us_median":..,"cpu":".."}
# Needs Debian's python3-torch (apt-get install -y python3-torch; /usr/bin/python3).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=1 pairs=5 repeats=15 build="$root/build"
while [ $# -gt 0 ]; do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "torch_predict_pairs.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
bench="$build/bench/predict_bench"
[ -x "$bench" ] || { echo "torch_predict_pairs.sh: $bench not built (bash scripts/build.sh)" >&2; exit 1; }
/usr/bin/python3 -c "import torch" 2>/dev/null ||
  { echo "torch_predict_pairs.sh: PyTorch missing: apt-get install -y python3-torch" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 1; i <= pairs; i++)); do
  OMP_PROC_BIND=false "$bench" --kokkos-threads="$threads" --repeats "$repeats" 2>/dev/null | sed "s/^/ours $i /" >> "$out"
  /usr/bin/python3 "$root/bench/torch_predict_peer.py" --threads "$threads" --repeats "$repeats" 2>/dev/null |
    sed "s/^/torch $i /" >> "$out"
done
/usr/bin/python3 - "$out" "$threads" "$pairs" <<'PY'
import json, statistics, sys
path, threads, pairs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs = {}
cpu = ""
for line in open(path):
    who, pair, rec = line.split(" ", 2)
    r = json.loads(rec)
    cpu = r.get("cpu", cpu)
    runs.setdefault((int(pair), r["batch"]), {})[who] = r
for b in sorted({b for _, b in runs}):
    ratios, ours, theirs = [], [], []
    for p in range(1, pairs + 1):
        o, t = runs[(p, b)]["ours"], runs[(p, b)]["torch"]
        ratio = o["samples_per_s"] / t["samples_per_s"]
        ratios.append(ratio); ours.append(o["latency_us"]); theirs.append(t["latency_us"])
        print(json.dumps({"bench": "predict_vs_torch_pair", "threads": threads, "batch": b, "pair": p,
                          "ratio": round(ratio, 3), "ours_latency_us": o["latency_us"],
                          "torch_latency_us": t["latency_us"]}))
    print(json.dumps({"bench": "predict_vs_torch", "threads": threads, "batch": b, "pairs": pairs,
                      "ratio_median": round(statistics.median(ratios), 3), "ratio_min": round(min(ratios), 3),
                      "ratio_max": round(max(ratios), 3),
                      "ours_latency_us_median": round(statistics.median(ours), 2),
                      "torch_latency_us_median": round(statistics.median(theirs), 2), "cpu": cpu}))
PY
