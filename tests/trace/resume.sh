#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# resume.sh TRAIN_MLP REPROSGD_DIFF — a run stopped and resumed writes the uninterrupted run's trace
# byte for byte: resumed in the same trace file it continues after the checkpoint's step, dropping
# the lines a run wrote after the checkpoint it resumes from; a trace of another configuration is
# not continued.
exe=$1 diff_exe=$2
source "$(dirname "$0")/common.sh"
"$exe" "${base[@]}" --trace-level tensor --trace "$tmp/whole" >/dev/null
for stop in 7 10 13; do  # mid-epoch, just after an epoch's evaluation, mid-epoch
  d=$tmp/ckpt-$stop
  "$exe" "${base[@]}" --trace-level tensor --trace "$tmp/split-$stop" --checkpoint-dir "$d" --checkpoint-every 5 \
    --stop-after $stop >/dev/null
  "$exe" "${base[@]}" --trace-level tensor --trace "$tmp/split-$stop" --checkpoint-dir "$d" --resume auto \
    --backend serial >/dev/null
  same_bytes "stopped after step $stop, resumed on Serial" "$tmp/whole" "$tmp/split-$stop"
done
# A run that went on to step 13 after its checkpoint of step 10 (as if killed at 13): resumed from
# that checkpoint, the trace drops steps 10..12 and writes them again, once.
d=$tmp/ckpt-killed
"$exe" "${base[@]}" --trace-level tensor --trace "$tmp/killed" --checkpoint-dir "$d" --checkpoint-every 10 --stop-after 13 >/dev/null
"$exe" "${base[@]}" --trace-level tensor --trace "$tmp/killed" --resume "$d/ckpt-000000000010.rsgd" >/dev/null
same_bytes "resumed from an older checkpoint than the trace's last step" "$tmp/whole" "$tmp/killed"
run_diff 0 "$tmp/out" "$tmp/whole" "$tmp/killed"
# Resuming with another trace level into the same file is refused (exit 2), the file left as it was.
cp "$tmp/whole" "$tmp/other"
"$exe" "${base[@]}" --trace-level step --trace "$tmp/other" --resume "$d/ckpt-000000000010.rsgd" >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "^train_mlp: error: reprosgd::Trainer::fit: the trace $tmp/other was written by another configuration or trace level" "$tmp/out" &&
  echo "ok: another level's trace is not continued (exit 2)" || { fail "resume into another level's trace: exit $rc"; cat "$tmp/out"; }
same_bytes "the refused trace is untouched" "$tmp/whole" "$tmp/other"
finish
