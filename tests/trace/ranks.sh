#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ranks.sh TRAIN_MLP REPROSGD_DIFF "MPIEXEC FLAGS" — with --reduction exact the trace is the same bytes
# on 1, 2 and 3 ranks and model-parallel on 2 ranks (the shards fingerprinted in the one-process
# layout); with --reduction native, 2 and 3 ranks part at step 0, the first step that reduces, in
# its reduced gradient, which reprosgd_diff names (exit 1) at step and at layer level; a native run
# stopped on 2 ranks and resumed on 3 parts from the 2-rank run at the first resumed step, an exact
# one does not.
exe=$1 diff_exe=$2 launcher=$3
source "$(dirname "$0")/common.sh"
for level in step layer; do
  "$exe" "${base[@]}" --threads 1 --trace-level $level --trace "$tmp/one.$level" >/dev/null
  for n in 1 2 3; do
    $launcher -n $n "$exe" "${base[@]}" --threads 1 --trace-level $level --trace "$tmp/np$n.$level" >/dev/null 2>&1 ||
      fail "$n ranks ($level level): the run failed"
    same_bytes "$level level: $n rank(s), exact" "$tmp/one.$level" "$tmp/np$n.$level"
  done
  $launcher -n 2 "$exe" "${base[@]}" --threads 1 --parallel model --trace-level $level --trace "$tmp/model.$level" \
    >/dev/null 2>&1 || fail "model parallel ($level level): the run failed"
  same_bytes "$level level: model-parallel on 2 ranks" "$tmp/one.$level" "$tmp/model.$level"
  run_diff 0 "$tmp/out" "$tmp/one.$level" "$tmp/np3.$level"
  for n in 2 3; do
    $launcher -n $n "$exe" "${base[@]}" --threads 1 --reduction native --trace-level $level --trace "$tmp/native$n.$level" \
      >/dev/null 2>&1 || fail "native on $n ranks ($level level): the run failed"
  done
  run_diff 1 "$tmp/out.$level" "$tmp/native2.$level" "$tmp/native3.$level"
  cat "$tmp/out.$level"
  has_line "$level level: native 2 vs 3 ranks differ" "$tmp/out.$level" "reprosgd_diff: the traces differ"
  grep -q '^  loss: equal (' "$tmp/out.$level" && echo "ok: $level level: step 0's loss is equal" || fail "$level level: loss line"
done
has_line "step level: native 2 vs 3 ranks part at step 0" "$tmp/out.step" \
  "first divergence: step 0 (epoch 0, micro-batches 0..11): the model and optimizer state (a step-level trace: --trace-level layer names the layer)"
# Every layer's reduced gradient differs; backward computed the last layer's first.
has_line "layer level: native 2 vs 3 ranks part at step 0 in the last layer's gradient" "$tmp/out.layer" \
  "first divergence: step 0 (epoch 0, micro-batches 0..11): the gradient of layer 6 (dense(16,10,he))"
grep -q '^  layer [036] (dense([0-9,]*,he)): gradient, optimizer m, optimizer v, parameters differ$' "$tmp/out.layer" &&
  echo "ok: layer level: the layer's tensors listed" || fail "layer level: no layer line"
# The tensor level (the first micro-batch's activations: data rank 0 runs it, the model-parallel
# shards gather each layer's output and sum its input gradient) is the one-process trace too; with
# native, 2 and 3 ranks have the same activations at step 0 and part in the reduced gradient.
"$exe" "${base[@]}" --threads 1 --trace-level tensor --trace "$tmp/one.tensor" >/dev/null
$launcher -n 3 "$exe" "${base[@]}" --threads 1 --trace-level tensor --trace "$tmp/np3.tensor" >/dev/null 2>&1 ||
  fail "3 ranks (tensor level): the run failed"
same_bytes "tensor level: 3 ranks, exact" "$tmp/one.tensor" "$tmp/np3.tensor"
$launcher -n 2 "$exe" "${base[@]}" --threads 1 --parallel model --trace-level tensor --trace "$tmp/model.tensor" \
  >/dev/null 2>&1 || fail "model parallel (tensor level): the run failed"
same_bytes "tensor level: model-parallel on 2 ranks" "$tmp/one.tensor" "$tmp/model.tensor"
for n in 2 3; do
  $launcher -n $n "$exe" "${base[@]}" --threads 1 --reduction native --trace-level tensor --trace "$tmp/native$n.tensor" \
    >/dev/null 2>&1 || fail "native on $n ranks (tensor level): the run failed"
done
run_diff 1 "$tmp/out.tensor" "$tmp/native2.tensor" "$tmp/native3.tensor"
has_line "tensor level: native 2 vs 3 ranks: equal activations, part in the last layer's gradient" "$tmp/out.tensor" \
  "first divergence: step 0 (epoch 0, micro-batches 0..11): the gradient of layer 6 (dense(16,10,he))"
# A step dump on 3 ranks (each rank writes the micro-batches it ran) is the one-process dump; with
# native, 2 and 3 ranks part first in the reduced gradient of the last layer; model parallelism
# refuses to dump.
"$exe" "${base[@]}" --threads 1 --dump-step 2 "$tmp/dump.one" >/dev/null
$launcher -n 3 "$exe" "${base[@]}" --threads 1 --dump-step 2 "$tmp/dump.np3" >/dev/null 2>&1 || fail "3 ranks: the dump failed"
run_diff 0 "$tmp/out" "$tmp/dump.one" "$tmp/dump.np3"
has_line "dump on 3 ranks: the one-process dump" "$tmp/out" "reprosgd_diff: the dumps agree (step 2, 222 arrays)"
for n in 2 3; do
  $launcher -n $n "$exe" "${base[@]}" --threads 1 --reduction native --dump-step 0 "$tmp/dump.native$n" >/dev/null 2>&1 ||
    fail "native on $n ranks: the dump failed"
done
run_diff 1 "$tmp/out" "$tmp/dump.native2" "$tmp/dump.native3"
grep -q '^first divergence, in the order the step computed them: reduced_gradient.layer6.npy: ' "$tmp/out" &&
  echo "ok: native dumps on 2 and 3 ranks part in the last layer's reduced gradient" || { fail "native dumps"; cat "$tmp/out"; }
$launcher -n 2 "$exe" "${base[@]}" --threads 1 --parallel model --dump-step 2 "$tmp/dump.model" >"$tmp/out" 2>&1
grep -q "dump_step is not available under model parallelism" "$tmp/out" && echo "ok: model parallelism refuses to dump" ||
  { fail "model-parallel dump"; cat "$tmp/out"; }
# Stopped on 2 ranks after step 10 and resumed on 3: with native the trace parts from the
# uninterrupted 2-rank run's at step 10, the first resumed step; with exact it does not part.
for red in native exact; do
  $launcher -n 2 "$exe" "${base[@]}" --threads 1 --reduction $red --trace-level layer --trace "$tmp/resumed.$red" \
    --checkpoint-dir "$tmp/ckpt.$red" --checkpoint-every 5 --stop-after 10 >/dev/null 2>&1 || fail "$red: the stopped run failed"
  $launcher -n 3 "$exe" "${base[@]}" --threads 1 --reduction $red --trace-level layer --trace "$tmp/resumed.$red" \
    --checkpoint-dir "$tmp/ckpt.$red" --resume auto >/dev/null 2>&1 || fail "$red: the resumed run failed"
done
run_diff 1 "$tmp/out" "$tmp/native2.layer" "$tmp/resumed.native"
grep -qx 'first divergence: step 10 (epoch 1, micro-batches 120..131): the gradient of layer [036] (dense([0-9,]*,he))' "$tmp/out" &&
  echo "ok: native stopped on 2 ranks, resumed on 3: parts at step 10" || { fail "native resumed on 3 ranks"; cat "$tmp/out"; }
same_bytes "exact stopped on 2 ranks, resumed on 3" "$tmp/np2.layer" "$tmp/resumed.exact"
# Native on one rank count is repeatable: its trace against itself agrees.
$launcher -n 2 "$exe" "${base[@]}" --threads 1 --reduction native --trace-level layer --trace "$tmp/native2.again" >/dev/null 2>&1
same_bytes "native on 2 ranks, twice" "$tmp/native2.layer" "$tmp/native2.again"
finish
