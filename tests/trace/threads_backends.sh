#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# threads_backends.sh TRAIN_MLP REPROSGD_DIFF — the trace (step, layer and tensor level) is the same bytes on
# 1 and 2 threads and on the Serial and OpenMP backends, every level records the same state
# fingerprints step by step, and reprosgd_diff says the traces agree (exit 0).
exe=$1 diff_exe=$2
source "$(dirname "$0")/common.sh"
for level in step layer tensor; do
  "$exe" "${base[@]}" --threads 1 --trace "$tmp/t1.$level" --trace-level $level >/dev/null
  "$exe" "${base[@]}" --threads 2 --trace "$tmp/t2.$level" --trace-level $level >/dev/null
  "$exe" "${base[@]}" --backend serial --trace "$tmp/serial.$level" --trace-level $level >/dev/null
  "$exe" "${base[@]}" --backend openmp --threads 2 --trace "$tmp/openmp.$level" --trace-level $level >/dev/null
  same_bytes "$level level: 1 vs 2 threads" "$tmp/t1.$level" "$tmp/t2.$level"
  same_bytes "$level level: Serial vs OpenMP" "$tmp/serial.$level" "$tmp/openmp.$level"
  same_bytes "$level level: 1 thread vs Serial" "$tmp/t1.$level" "$tmp/serial.$level"
  lines=$(wc -l <"$tmp/t1.$level")
  [ "$lines" = 27 ] && echo "ok: $level level: 27 lines (header, 24 steps, 2 evaluations)" || fail "$level level: $lines lines, want 27"
  grep -o '"state":"[0-9a-f]*"' "$tmp/t1.$level" >"$tmp/states.$level"
  n_states=$(sort -u "$tmp/states.$level" | wc -l)
  [ "$n_states" = 24 ] && echo "ok: $level level: 24 distinct states" || fail "$level level: $n_states distinct states, want 24"
  same_bytes "$level level: the step level's states" "$tmp/states.step" "$tmp/states.$level"
  run_diff 0 "$tmp/out" "$tmp/t1.$level" "$tmp/openmp.$level"
  has_line "$level level: reprosgd_diff agrees" "$tmp/out" "reprosgd_diff: the traces agree (24 steps, 0..23, 2 evaluations)"
done
# The layer level names the layers with parameters only (the activations and dropout have none).
layers=$(grep '"event":"step"' "$tmp/t1.layer" | head -n 1 | grep -o '{"layer":[0-9]*' | tr '\n' ' ')
[ "$layers" = '{"layer":0 {"layer":3 {"layer":6 ' ] && echo "ok: layers 0, 3 and 6 traced" || fail "traced layers: $layers"
# The tensor level adds every layer's activations (7 layers: dense, relu, dropout three times less one),
# with an input gradient for every layer but the first; its layer fingerprints are the layer level's.
tensors=$(grep '"event":"step"' "$tmp/t1.tensor" | head -n 1 | grep -o '"tensors":.*')
n_out=$(grep -o '"output":' <<<"$tensors" | wc -l) n_gin=$(grep -o '"input_gradient":' <<<"$tensors" | wc -l)
[ "$n_out/$n_gin" = 7/6 ] && echo "ok: tensor level: 7 outputs, 6 input gradients" || fail "tensor level: $n_out outputs, $n_gin input gradients"
[[ $tensors == '"tensors":[{"layer":0,"output":"'????????????????????????????????'"},{"layer":1,"output":'* ]] &&
  echo "ok: tensor level: layer 0 has no input gradient" || fail "tensor level: layer 0's entry: ${tensors:0:120}"
cmp -s <(sed 's/,"tensors":.*}$/}/; s/"level":"tensor"/"level":"layer"/' "$tmp/t1.tensor") "$tmp/t1.layer" &&
  echo "ok: tensor level: the layer level's lines plus the activations" || fail "tensor level: not the layer level plus activations"
finish
