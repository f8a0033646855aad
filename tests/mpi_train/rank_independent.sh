#!/usr/bin/env bash
# rank_independent.sh TRAIN_MLP "MPIEXEC FLAGS" — the same fingerprint for 1..5 ranks, with 1 and 2
# threads per rank, dropout, Adam, a cosine schedule and shuffling over 120 steps; a global batch of
# 12 micro-batches, which 5 ranks cannot split evenly. Also: Native is repeatable for a fixed P.
set -uo pipefail
exe=$1 launcher=$2
args=(--data synthetic --synthetic-train 2048 --synthetic-test 300 --layers 784,32,16,10 --dropout 0.2
      --optimizer adam --lr 0.002 --schedule cosine --warmup 10 --batch 96 --micro-batch 8 --steps 120
      --seed 3 --quiet)
ref=$("$exe" "${args[@]}" --threads 1 | tail -n 1)
echo "single process:     $ref"
[[ "$ref" == fingerprint\ * ]] || exit 1
status=0
for spec in "1 1" "2 1" "3 1" "4 1" "5 1" "2 2" "3 2"; do
  set -- $spec
  got=$($launcher -n "$1" "$exe" "${args[@]}" --threads "$2" 2>&1 | tail -n 1)
  printf '%d ranks x %d threads: %s\n' "$1" "$2" "$got"
  [ "$got" = "$ref" ] || { echo "MISMATCH"; status=1; }
done
n1=$($launcher -n 2 "$exe" "${args[@]}" --threads 1 --reduction native 2>&1 | tail -n 1)
n2=$($launcher -n 2 "$exe" "${args[@]}" --threads 1 --reduction native 2>&1 | tail -n 1)
echo "native, 2 ranks, twice: $n1 / $n2"
[ "$n1" = "$n2" ] && [[ "$n1" == fingerprint\ * ]] || status=1
exit $status
