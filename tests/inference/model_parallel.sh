#!/usr/bin/env bash
# model_parallel.sh TRAIN_MLP PREDICT "MPIEXEC FLAGS" — a model saved (--save-model) by a 3-rank
# --parallel model run (shards gathered into the one-process layout) and by a 2x2 hybrid grid is the
# same file as the one-process run's, and predicts the same bytes.
set -uo pipefail
train=$1 predict=$2 launcher=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
args=(--data synthetic --synthetic-train 960 --synthetic-test 200 --layers 784,40,24,10 --feature-chunk 8
      --dropout 0.2 --optimizer adam --lr 0.002 --batch 96 --micro-batch 8 --steps 20 --seed 5 --quiet --threads 1)
"$train" "${args[@]}" --save-model "$dir/one.rsgdm" > /dev/null || { echo "FAIL: one process"; exit 1; }
$launcher -n 3 "$train" "${args[@]}" --parallel model --save-model "$dir/model3.rsgdm" > /dev/null 2>&1 \
  || { echo "FAIL: 3 ranks"; status=1; }
$launcher -n 4 "$train" "${args[@]}" --parallel hybrid --grid 2x2 --save-model "$dir/grid.rsgdm" > /dev/null 2>&1 \
  || { echo "FAIL: 2x2"; status=1; }
for f in model3 grid; do
  if cmp -s "$dir/one.rsgdm" "$dir/$f.rsgdm"; then echo "$f: the same model file as one process"
  else echo "FAIL: $f.rsgdm differs from one process's"; status=1; fi
done
for f in one model3; do
  "$predict" --model "$dir/$f.rsgdm" --data synthetic --synthetic-train 960 --synthetic-test 200 --seed 5 \
    --output "$dir/$f.csv" --quiet > "$dir/$f.txt" || { echo "FAIL: predict $f"; status=1; }
done
cmp -s "$dir/one.csv" "$dir/model3.csv" && echo "predictions: the same bytes ($(cat "$dir/one.txt"))" \
  || { echo "FAIL: predictions differ"; status=1; }
exit $status
