#!/usr/bin/env bash
# fashion_mnist_accuracy.sh TRAIN_MLP — a 784-256-128-10 ReLU MLP reaches >= 85% test accuracy on
# Fashion-MNIST within 3 epochs. Skipped (exit 77) when the data set is not installed.
set -uo pipefail
exe=$1
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte ]; then
  echo "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist): skipped"; exit 77
fi
out=$(OMP_PROC_BIND=false "$exe" --data fashion-mnist --layers 784,256,128,10 --optimizer adam --lr 0.001 \
      --batch 128 --micro-batch 32 --epochs 3 --seed 42 --threads 2 2>&1) || { echo "$out"; exit 1; }
echo "$out"
acc=$(printf '%s\n' "$out" | grep '^epoch 3 ' | sed -n 's/.*test_acc \([0-9.]*\).*/\1/p')
[ -n "$acc" ] || { echo "no epoch-3 test accuracy in the output"; exit 1; }
echo "test accuracy after 3 epochs: $acc (required: >= 0.85)"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }'
