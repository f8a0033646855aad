#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# diff_cli.sh TRAIN_MLP REPROSGD_DIFF FLIP_BIT — reprosgd_diff names the first divergence in the order a step
# computes (loss, gradient, optimizer state, parameters) and the configuration fields that differ
# (exit 1); on bad input it prints one line on standard error and exits 2. Given two checkpoints or
# model files it compares their parameters tensor by tensor, and names a single flipped bit by element.
exe=$1 diff_exe=$2 flip_exe=$3
source "$(dirname "$0")/common.sh"
"$exe" "${base[@]}" --trace-level layer --trace "$tmp/a" >/dev/null
# Another learning rate: step 0's loss, gradient and Adam moments are the same, its update is not.
args_lr=("${base[@]}")
args_lr[13]=0.003  # --lr
"$exe" "${args_lr[@]}" --trace-level layer --trace "$tmp/lr" >/dev/null
run_diff 1 "$tmp/out" "$tmp/a" "$tmp/lr"
cat "$tmp/out"
has_line "another lr: the verdict" "$tmp/out" "reprosgd_diff: the traces differ"
has_line "another lr: the configuration field" "$tmp/out" \
  "configuration: optimizer differs: adam(lr=0x1.0624dep-9,beta1=0x1.ccccccp-1,beta2=0x1.ff7ceep-1,eps=0x1.5798eep-27,weight_decay=0x0p+0) in A, adam(lr=0x1.89374cp-9,beta1=0x1.ccccccp-1,beta2=0x1.ff7ceep-1,eps=0x1.5798eep-27,weight_decay=0x0p+0) in B"
has_line "another lr: step 0, the parameters of layer 0" "$tmp/out" \
  "first divergence: step 0 (epoch 0, micro-batches 0..11): the parameters of layer 0 (dense(784,32,he))"
grep -q '^  loss: equal (' "$tmp/out" && echo "ok: another lr: the loss is equal" || fail "another lr: loss line"
has_line "another lr: every layer's parameters" "$tmp/out" "  layer 6 (dense(16,10,he)): parameters differ"
# Another seed: the initial parameters differ, so step 0's loss does.
args_seed=("${base[@]}")
args_seed[21]=4  # --seed
"$exe" "${args_seed[@]}" --trace-level layer --trace "$tmp/seed" >/dev/null
run_diff 1 "$tmp/out" "$tmp/a" "$tmp/seed"
has_line "another seed: the configuration field" "$tmp/out" "configuration: seed differs: 3 in A, 4 in B"
has_line "another seed: step 0, the loss" "$tmp/out" "first divergence: step 0 (epoch 0, micro-batches 0..11): the loss"
# A longer run agrees on the common steps but is not the same trace.
args_long=("${base[@]}")
args_long[19]=30  # --steps
"$exe" "${args_long[@]}" --trace-level layer --trace "$tmp/long" >/dev/null
run_diff 1 "$tmp/out" "$tmp/a" "$tmp/long"
has_line "a longer run" "$tmp/out" "no divergence in the 24 steps both traces hold (0..23), but they cover different steps"
# A step-level trace against a layer-level one: the step fields are compared.
"$exe" "${base[@]}" --trace-level step --trace "$tmp/s" >/dev/null
run_diff 0 "$tmp/out" "$tmp/a" "$tmp/s"
has_line "layer vs step level" "$tmp/out" "note: A is a layer-level trace and B a step-level one: only the step fields are compared"

# Bad input: exit 2, one line on standard error, nothing on standard output.
bad() {  # bad WHAT WANT_MESSAGE A B
  local what=$1 want=$2
  shift 2
  "$diff_exe" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  if [ $rc = 2 ] && [ "$(cat "$tmp/stderr")" = "$want" ] && [ ! -s "$tmp/stdout" ]; then echo "ok: $what"; else
    fail "$what: exit $rc, stderr '$(cat "$tmp/stderr")', want '$want'"; fi
}
bad "a missing file" "reprosgd_diff: error: $tmp/none: cannot open the file" "$tmp/a" "$tmp/none"
head -c 4000 "$tmp/a" >"$tmp/truncated"
n=$(wc -l <"$tmp/truncated")
bad "a truncated trace" "reprosgd_diff: error: $tmp/truncated: line $((n + 1)) is truncated (no end of line: was the run killed while writing it?)" \
  "$tmp/a" "$tmp/truncated"
{ head -n 3 "$tmp/a"; echo '{"event":"step","step":2,'; } >"$tmp/damaged"
bad "a damaged line" "reprosgd_diff: error: $tmp/damaged: line 4 is not JSON (Missing a name for object member. at column 26): truncated or damaged" \
  "$tmp/damaged" "$tmp/a"
"$exe" "${base[@]}" --metrics "$tmp/metrics" >/dev/null
bad "not a trace (a metrics file)" "reprosgd_diff: error: $tmp/metrics: not a ReproSGD trace (its first line is not a trace header)" \
  "$tmp/a" "$tmp/metrics"
: >"$tmp/empty"
bad "an empty file" "reprosgd_diff: error: $tmp/empty: not a ReproSGD trace (the file is empty)" "$tmp/empty" "$tmp/a"
args_model=("${base[@]}")
args_model[7]=784,48,16,10  # --layers
"$exe" "${args_model[@]}" --trace-level layer --trace "$tmp/model" >/dev/null
bad "traces of different models" \
  "reprosgd_diff: error: A and B trace different models: layer 0 is dense(784,32,he) in A but dense(784,48,he) in B" "$tmp/a" "$tmp/model"
{ head -n 2 "$tmp/a"; sed -n 2p "$tmp/a"; } >"$tmp/twice"
bad "a step written twice" "reprosgd_diff: error: $tmp/twice: step 0 appears twice (lines 2 and 3)" "$tmp/twice" "$tmp/a"
# Checkpoints and model files: the same step on 1 and 2 threads agrees; another lr differs, named by
# tensor and element; a model file equals the checkpoint of its step.
"$exe" "${base[@]}" --threads 1 --checkpoint-dir "$tmp/c1" --checkpoint-every 10 --save-model "$tmp/m1.rsgdm" >/dev/null
"$exe" "${base[@]}" --threads 2 --checkpoint-dir "$tmp/c2" --checkpoint-every 10 >/dev/null
"$exe" "${args_lr[@]}" --checkpoint-dir "$tmp/clr" --checkpoint-every 10 >/dev/null
run_diff 0 "$tmp/out" "$tmp/c1/ckpt-000000000010.rsgd" "$tmp/c2/ckpt-000000000010.rsgd"
has_line "checkpoints on 1 and 2 threads agree" "$tmp/out" "reprosgd_diff: the checkpoints agree"
run_diff 0 "$tmp/out" "$tmp/m1.rsgdm" "$tmp/c2/ckpt-000000000024.rsgd"
has_line "a model file and the checkpoint of its step agree" "$tmp/out" "reprosgd_diff: the models agree"
has_line "... the checkpoint's optimizer state not compared" "$tmp/out" "optimizer state: in B only (the other is a model file): not compared"
run_diff 1 "$tmp/out" "$tmp/c1/ckpt-000000000010.rsgd" "$tmp/clr/ckpt-000000000010.rsgd"
cat "$tmp/out"
has_line "checkpoints of another lr differ" "$tmp/out" "reprosgd_diff: the checkpoints differ"
# Adam's m and v differ too, per layer and tensor; its step count does not.
grep -qx 'layer 6 (dense(16,10,he)) bias optimizer v: [0-9]* of 10 elements differ; the first, \[[0-9]*\] (parameter [0-9]*), is 0x[0-9a-f]\{8\} ([-0-9.e]*) in A, 0x[0-9a-f]\{8\} ([-0-9.e]*) in B' "$tmp/out" &&
  echo "ok: the optimizer's second moment named by tensor" || fail "no line for layer 6's optimizer v"
grep -q "^optimizer steps" "$tmp/out" && fail "the step counts are equal but reported" || echo "ok: equal step counts not reported"
has_line "the optimizer configurations named" "$tmp/out" \
  "configuration: optimizer differs: adam(lr=0x1.0624dep-9,beta1=0x1.ccccccp-1,beta2=0x1.ff7ceep-1,eps=0x1.5798eep-27,weight_decay=0x0p+0) in A, $(grep -o 'adam(lr=[^)]*)' "$tmp/out" | tail -n 1) in B"
grep -qx 'layer 0 (dense(784,32,he)) weights: [0-9]* of 25088 elements differ; the first, \[[0-9]*\]\[[0-9]*\] (parameter [0-9]*), is 0x[0-9a-f]\{8\} ([-0-9.e]*) in A, 0x[0-9a-f]\{8\} ([-0-9.e]*) in B' "$tmp/out" &&
  echo "ok: the first differing element of layer 0's weights" || fail "no line for layer 0's weights"
grep -qx '18 of 21 tensors differ, [0-9]* of 25818 parameters' "$tmp/out" && echo "ok: the count (parameters, m, v; the 3 scalars equal)" || fail "no count line"
# One bit of one weight flipped (layer 3's weight [5][7], parameter 25120 + 5*16 + 7 = 25207; bit 3
# of the mantissa) and the model file signed again: named by tensor and element, the only difference.
"$flip_exe" "$tmp/m1.rsgdm" "$tmp/flipped.rsgdm" 25207 3 || fail "flip_bit failed"
run_diff 1 "$tmp/out" "$tmp/m1.rsgdm" "$tmp/flipped.rsgdm"
cat "$tmp/out"
grep -qx 'layer 3 (dense(32,16,he)) weights: 1 of 512 elements differ; the first, \[5\]\[7\] (parameter 25207), is 0x[0-9a-f]\{8\} ([-0-9.e]*) in A, 0x[0-9a-f]\{8\} ([-0-9.e]*) in B' "$tmp/out" &&
  echo "ok: the flipped weight named by element" || fail "the flipped weight"
has_line "the flipped weight is the only difference" "$tmp/out" "1 of 6 tensors differ, 1 of 25818 parameters"
a_bits=$(grep -o 'is 0x[0-9a-f]*' "$tmp/out" | cut -c6-); b_bits=$(grep -o 'in A, 0x[0-9a-f]*' "$tmp/out" | cut -c9-)
[ $(( 0x$a_bits ^ 0x$b_bits )) = 8 ] && echo "ok: the two values differ in bit 3" || fail "the values $a_bits and $b_bits"
# The same bit flipped in a training checkpoint, signed again: named by element, the optimizer state
# equal; the flipped checkpoint is a valid one (train_mlp resumes from it).
"$flip_exe" "$tmp/c1/ckpt-000000000010.rsgd" "$tmp/flipped.rsgd" 25207 3 || fail "flip_bit on a checkpoint failed"
run_diff 1 "$tmp/out" "$tmp/c1/ckpt-000000000010.rsgd" "$tmp/flipped.rsgd"
has_line "a checkpoint with one bit flipped differs" "$tmp/out" "reprosgd_diff: the checkpoints differ"
grep -qx 'layer 3 (dense(32,16,he)) weights: 1 of 512 elements differ; the first, \[5\]\[7\] (parameter 25207), is 0x[0-9a-f]\{8\} ([-0-9.e]*) in A, 0x[0-9a-f]\{8\} ([-0-9.e]*) in B' "$tmp/out" &&
  echo "ok: the flipped weight of the checkpoint named by element" || { fail "the flipped checkpoint weight"; cat "$tmp/out"; }
has_line "... the only difference, optimizer state included" "$tmp/out" "1 of 21 tensors differ, 1 of 25818 parameters"
"$exe" "${base[@]}" --threads 1 --resume "$tmp/flipped.rsgd" --stop-after 11 >"$tmp/resumed" 2>&1 &&
  echo "ok: the re-signed checkpoint resumes" || { fail "resume from the flipped checkpoint"; cat "$tmp/resumed"; }
bad "a checkpoint against a trace" "reprosgd_diff: error: reprosgd::read_checkpoint_state: $tmp/a: not a ReproSGD checkpoint (magic bytes are 7b 22 74 72 61 63 65 22, expected \"RSGDCKPT\")" \
  "$tmp/c1/ckpt-000000000010.rsgd" "$tmp/a"
"$diff_exe" "$tmp/a" >/dev/null 2>&1
rc=$?
[ $rc = 2 ] && echo "ok: one argument: exit 2" || fail "one argument: exit $rc"
finish
