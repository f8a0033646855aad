#!/usr/bin/env bash
# crash.sh TRAIN_MLP N [OPTION...] — N times: checkpoint every step, SIGKILL the process at a
# random moment (deterministic seed), then resume --auto: the newest complete checkpoint must load
# and the run must end with the uninterrupted fingerprint; no temporary may pose as a checkpoint.
# The OPTIONs go to the killed run (--checkpoint-async: killed while a write runs behind training).
set -uo pipefail
exe=$1 trials=${2:-50}
extra=("${@:3}")
source "$(dirname "$0")/common.sh"
ref=$("$exe" "${base[@]}" --optimizer adam --lr 0.002 | tail -n 1)
RANDOM=4242
for ((t = 1; t <= trials; t++)); do
  d="$tmp/run$t"
  "$exe" "${base[@]}" --optimizer adam --lr 0.002 --checkpoint-dir "$d" --checkpoint-every 1 --keep 2 "${extra[@]}" >/dev/null 2>&1 &
  pid=$!
  sleep "0.$(printf '%03d' $((RANDOM % 1000)))"
  kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  n=$(ls "$d" 2>/dev/null | grep -c '^ckpt-.*\.rsgd$')
  got=$("$exe" "${base[@]}" --optimizer adam --lr 0.002 --checkpoint-dir "$d" --resume auto 2>&1 | tail -n 1)
  same "trial $t ($n checkpoints when killed)" "$ref" "$got"
  rm -rf "$d"
done
finish
