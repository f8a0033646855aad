#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# torch_cnn_pairs.sh [PAIRS=5] [THREADS=1] [MICRO_BATCH=128] [CNN_BENCH=build/bench/cnn_bench]:
# cnn_bench and bench/torch_cnn_peer.py alternately, PAIRS times, the same CNN, batch and thread
# count; one line per pair with ours / PyTorch samples/s, then the median, min and max of the
# ratios and the load average. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for both.
set -euo pipefail
pairs=${1:-5} threads=${2:-1} mb=${3:-128}
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${4:-$root/build/bench/cnn_bench}
ratios=()
for ((i = 1; i <= pairs; ++i)); do
  ours=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_PROC_BIND=false OMP_WAIT_POLICY=passive \
    "$bench" --kokkos-threads="$threads" --micro-batch "$mb" --steps 10 --repeats 5 | sed -n 's/.*"samples_per_s":\([0-9.]*\).*/\1/p')
  theirs=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 "$root/bench/torch_cnn_peer.py" \
    --threads "$threads" --steps 10 --repeats 5 | sed -n 's/.*"samples_per_s": \([0-9.]*\).*/\1/p')
  r=$(python3 -c "print(f'{$ours / $theirs:.3f}')")
  ratios+=("$r")
  echo "{\"pair\":$i,\"threads\":$threads,\"micro_batch\":$mb,\"ours\":$ours,\"torch\":$theirs,\"ratio\":$r}"
done
python3 - "${ratios[@]}" <<PY
import statistics, sys, os
r = sorted(float(v) for v in sys.argv[1:])
print('{"summary":"cnn ours/torch","threads":$threads,"micro_batch":$mb,"pairs":%d,"median":%.3f,"min":%.3f,"max":%.3f,"load":"%s"}'
      % (len(r), statistics.median(r), r[0], r[-1], " ".join(open("/proc/loadavg").read().split()[:3])))
PY
