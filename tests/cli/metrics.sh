#!/usr/bin/env bash
# metrics.sh TRAIN_MLP — --metrics writes one JSON object per step and per epoch, in order, and the
# fingerprint stays the last line of standard output; a metrics file that cannot be written (a full
# disk: /dev/full) ends the run with exit 5 and one line, after the checkpoint fit() writes at the stop
# (--checkpoint-async: fit() writes the checkpoints).
set -uo pipefail
exe=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
out=$(OMP_PROC_BIND=false "$exe" --data synthetic --synthetic-train 256 --synthetic-test 64 --layers 784,16,10 \
      --batch 32 --micro-batch 8 --epochs 2 --metrics "$tmp/m.jsonl") || exit 1
printf '%s\n' "$out" | tail -n 1 | grep -q '^fingerprint [0-9a-f]\{32\}$' || { echo "last line: $(printf '%s\n' "$out" | tail -n 1)"; exit 1; }
steps=$(grep -c '^{"event":"step","step":[0-9]*,"epoch":[0-9]*,"loss":[0-9.e+-]*,"accuracy":[0-9.e+-]*,"lr":[0-9.e+-]*,"wall_time":[0-9]*\.[0-9]\{6\}}$' "$tmp/m.jsonl")
epochs=$(grep -c '^{"event":"epoch",.*"test_accuracy":[0-9.e+-]*,"seconds":[0-9.e+-]*}$' "$tmp/m.jsonl")
total=$(wc -l <"$tmp/m.jsonl")
echo "step lines: $steps (want 16), epoch lines: $epochs (want 2), total lines: $total (want 18)"
first=$(sed -n 1p "$tmp/m.jsonl"); last_step=$(grep '"event":"step"' "$tmp/m.jsonl" | tail -n 1)
echo "first: $first"; echo "last step: $last_step"
ok=1
if [ -w /dev/full ]; then
  err=$(OMP_PROC_BIND=false "$exe" --data synthetic --synthetic-train 256 --synthetic-test 64 --layers 784,16,10 \
        --batch 32 --micro-batch 8 --epochs 2 --quiet --metrics /dev/full --checkpoint-dir "$tmp/ck" --checkpoint-every 1000 --checkpoint-async 2>&1); rc=$?
  echo "--metrics /dev/full: exit $rc: $err; checkpoints: $(ls "$tmp/ck" 2>/dev/null | tr '\n' ' ')"
  [ "$rc" -eq 5 ] && [ "$err" = "train_mlp: error: reprosgd::JsonLinesWriter: cannot write /dev/full: No space left on device" ] &&
    [ -f "$tmp/ck/ckpt-000000000001.rsgd" ] || ok=0
else
  echo "skipped the full-disk case: /dev/full is not writable here"
fi
[ "$ok" -eq 1 ] && [ "$steps" -eq 16 ] && [ "$epochs" -eq 2 ] && [ "$total" -eq 18 ] && [[ "$first" == '{"event":"step","step":0,'* ]] && [[ "$last_step" == '{"event":"step","step":15,'* ]]
