#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# demo.sh — the README's demo command: install what is missing, build, train an MLP on
# Fashion-MNIST (the synthetic set when it is absent) and show the determinism contract live: the
# same training on another thread count and another backend prints the same fingerprint.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
SCRIPT_TAG=demo
source "$root/scripts/lib.sh"
bash "$root/scripts/setup.sh"
echo "Building (first run: a few minutes)..."
bash "$root/scripts/build.sh"
use_setup_mpi  # every run below starts in 0.1 s instead of 1.1 s (lib.sh)
export OMP_PROC_BIND=false
exe="$root/build/apps/train_mlp"
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

# 3. The headline: lose a rank mid-epoch, keep training, end with the same bits (ULFM).
CACHE=${REPROSGD_CACHE:-$HOME/.cache/reprosgd}
if [ -f "$CACHE/openmpi.prefix" ]; then
  mpiexec="$(cat "$CACHE/openmpi.prefix")/bin/mpiexec"
  kill_step=${REPROSGD_DEMO_KILL_STEP:-700}
  echo
  echo "== 3. The same training on 4 MPI ranks; rank 2 is killed (SIGKILL) at step $kill_step, mid-epoch."
  echo "      The survivors repair the communicator (ULFM shrink), redo the step on 3 ranks and go on."
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 \
    timeout 600 "$mpiexec" -n 4 --oversubscribe --with-ft ulfm "$exe" "${args[@]}" --threads 1 \
    --fault-tolerance shrink --inject-failure "2@$kill_step" 2>&1 | grep -v '^ \|Kokkos::OpenMP::initialize WARNING' |
    tee /tmp/reprosgd-demo-4.txt || true
  fp4=$(grep '^fingerprint ' /tmp/reprosgd-demo-4.txt | tail -n 1)
  echo
  printf '  %-34s %s\n' "failure-free (1 process, 2 threads):" "$fp1" "4 ranks, rank 2 killed, 3 finish:" "${fp4:-none}"
  if [ "$fp4" = "$fp1" ]; then
    echo "  identical, bit for bit: the lost rank left no trace in the model."
  else
    echo "  DIFFERENT: the fault-tolerance contract is broken" >&2; exit 1
  fi
fi
