#!/usr/bin/env bash
# resume.sh TRAIN_MLP — stop at step S, resume, compare with the uninterrupted run.
set -uo pipefail
exe=$1
source "$(dirname "$0")/common.sh"
for opt in "adam --lr 0.002" "adamw --lr 0.002 --weight-decay 0.01" "sgd --lr 0.05 --momentum 0.9 --nesterov"; do
  ref=$("$exe" "${base[@]}" --optimizer $opt --threads 2 | tail -n 1)
  for fmt in binary portable json; do
    for stop in 23 32; do  # mid-epoch, epoch boundary
      d="$tmp/$fmt-$stop"
      "$exe" "${base[@]}" --optimizer $opt --threads 2 --checkpoint-dir "$d" --checkpoint-every 5 --format $fmt --stop-after $stop >/dev/null
      got=$("$exe" "${base[@]}" --optimizer $opt --backend serial --checkpoint-dir "$d" --format $fmt --resume auto | tail -n 1)
      same "${opt%% *} $fmt stop@$stop, resumed on Serial" "$ref" "$got"
    done
  done
  # A JSON snapshot and a binary one of the same step resume to the same bits, on 1 thread.
  "$exe" "${base[@]}" --optimizer $opt --checkpoint-dir "$tmp/j" --format json --stop-after 11 >/dev/null
  got=$("$exe" "${base[@]}" --optimizer $opt --threads 1 --format json --resume "$tmp/j/ckpt-000000000011.rsgd" | tail -n 1)
  same "${opt%% *} json file resumed on 1 thread" "$ref" "$got"
  # Written behind training (--checkpoint-async, every 5 steps): stopped at 23, resumed, the same bits.
  "$exe" "${base[@]}" --optimizer $opt --threads 2 --checkpoint-dir "$tmp/a" --checkpoint-every 5 --checkpoint-async --stop-after 23 >/dev/null
  got=$("$exe" "${base[@]}" --optimizer $opt --backend serial --checkpoint-dir "$tmp/a" --resume auto | tail -n 1)
  same "${opt%% *} written behind training, stop@23, resumed on Serial" "$ref" "$got"
  rm -rf "$tmp"/*
done
finish
