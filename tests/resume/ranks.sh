#!/usr/bin/env bash
# ranks.sh TRAIN_MLP "MPIEXEC FLAGS" — save on 3 ranks, resume on 2 and on 4: the uninterrupted bits.
set -uo pipefail
exe=$1 launcher=$2
source "$(dirname "$0")/common.sh"
opt=(--optimizer adam --lr 0.002 --threads 1)
ref=$("$exe" "${base[@]}" "${opt[@]}" | tail -n 1)
$launcher -n 3 "$exe" "${base[@]}" "${opt[@]}" --checkpoint-dir "$tmp/d" --checkpoint-every 4 --stop-after 19 >/dev/null 2>&1
for p in 2 4; do
  cp -r "$tmp/d" "$tmp/d$p"
  got=$($launcher -n $p "$exe" "${base[@]}" "${opt[@]}" --checkpoint-dir "$tmp/d$p" --resume auto 2>/dev/null | tail -n 1)
  same "saved on 3 ranks, resumed on $p" "$ref" "$got"
done
finish
