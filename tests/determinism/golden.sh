#!/usr/bin/env bash
# golden.sh TRAIN_MLP GOLDEN_FILE — the fixed small configuration in GOLDEN_FILE's first line must
# print the fingerprint on its second line.
set -uo pipefail
exe=$1 file=$2
args=$(sed -n 1p "$file") want=$(sed -n 2p "$file")
got=$(OMP_PROC_BIND=false $exe $args 2>&1 | tail -n 1)
echo "configuration: $args"
echo "expected: $want"
echo "got:      $got"
[ "$got" = "$want" ]
