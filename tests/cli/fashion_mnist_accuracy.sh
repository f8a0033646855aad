#!/usr/bin/env bash
# fashion_mnist_accuracy.sh TRAIN_MLP [PREDICT] — a 784-256-128-10 ReLU MLP reaches >= 85% test
# accuracy on Fashion-MNIST within 3 epochs; with PREDICT, the model it saves (--save-model) predicts
# the test set with the accuracy training printed, and the same output bytes on 1 and 2 threads and
# on Serial (docs/surrogates.md). Skipped (exit 77) when the data set is not installed.
set -uo pipefail
exe=$1 predict=${2:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte ]; then
  echo "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist): skipped"; exit 77
fi
out=$(OMP_PROC_BIND=false "$exe" --data fashion-mnist --layers 784,256,128,10 --optimizer adam --lr 0.001 \
      --batch 128 --micro-batch 32 --epochs 3 --seed 42 --threads 2 --save-model "$dir/m.rsgdm" 2>&1) ||
  { echo "$out"; exit 1; }
echo "$out"
acc=$(printf '%s\n' "$out" | grep '^epoch 3 ' | sed -n 's/.*test_acc \([0-9.]*\).*/\1/p')
[ -n "$acc" ] || { echo "no epoch-3 test accuracy in the output"; exit 1; }
echo "test accuracy after 3 epochs: $acc (required: >= 0.85)"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || exit 1
[ -n "$predict" ] || exit 0
status=0
for v in "t1 --threads 1" "t2 --threads 2" "serial --backend serial"; do
  set -- $v
  p=$(OMP_PROC_BIND=false "$predict" --model "$dir/m.rsgdm" --data fashion-mnist --output "$dir/$1.csv" "${@:2}" 2>&1 |
      grep '^accuracy')
  echo "predict ${*:2}: $p"
  [ "$(echo "$p" | cut -d' ' -f2)" = "$acc" ] || { echo "FAIL: predict's accuracy is not training's $acc"; status=1; }
  cmp -s "$dir/t1.csv" "$dir/$1.csv" || { echo "FAIL: outputs differ from --threads 1"; status=1; }
done
exit $status
