#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# demo.sh — the README's demo command: install what is missing, build, train an MLP on
# Fashion-MNIST (the synthetic set when it is absent) and show the determinism contract live: the
# same training on another thread count and another backend prints the same fingerprint.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
echo "Building (first run: a few minutes)..."
bash "$root/scripts/build.sh"
export OMP_PROC_BIND=false
exe="$root/build/examples/train_mlp"
args=(--data fashion-mnist --layers 784,256,128,10 --optimizer adam --lr 0.001 --dropout 0.1
      --batch 128 --micro-batch 32 --epochs ${REPROSGD_DEMO_EPOCHS:-3} --seed 42)

echo
echo "== 1. Train a 784-256-128-10 ReLU MLP (Adam, dropout 0.1, shuffled), OpenMP backend, 2 threads"
"$exe" "${args[@]}" --backend openmp --threads 2 | tee /tmp/reprosgd-demo-1.txt
fp1=$(tail -n 1 /tmp/reprosgd-demo-1.txt)

echo
echo "== 2. The same training on 1 thread, then on the Serial backend"
fp2=$("$exe" "${args[@]}" --backend openmp --threads 1 --quiet | tail -n 1)
fp3=$("$exe" "${args[@]}" --backend serial --quiet | tail -n 1)
printf '  %-22s %s\n' "OpenMP, 2 threads:" "$fp1" "OpenMP, 1 thread:" "$fp2" "Serial backend:" "$fp3"
if [ "$fp1" = "$fp2" ] && [ "$fp2" = "$fp3" ]; then
  echo "  identical, bit for bit."
else
  echo "  DIFFERENT: the determinism contract is broken" >&2; exit 1
fi
