#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# shrink.sh TRAIN_MLP REPROSGD_DIFF MPIEXEC [mpiexec flags...] — under ULFM (--fault-tolerance shrink,
# 4 ranks, one killed) the tensor-level trace records the failure in one line and every committed step once: less
# its failure line it is the failure-free one-process trace byte for byte, and reprosgd_diff says
# the two agree. Data parallelism losing the rank that writes the trace (rank 0) and another rank;
# model parallelism, whose survivors replay the steps since the last buddy snapshot.
exe=$1 diff_exe=$2
shift 2
launcher=("$@")
source "$(dirname "$0")/common.sh"
export OMP_NUM_THREADS=1
run_case() {  # run_case NAME "INJECT" "POLICY OPTIONS" "MODEL OPTIONS"
  local name=$1 inject=$2
  read -r -a policy <<<"$3"
  read -r -a model <<<"$4"
  "$exe" "${base[@]}" "${model[@]}" --threads 1 --trace-level tensor --trace "$tmp/ref.$name" >/dev/null
  timeout --kill-after=10 120 "${launcher[@]}" -n 4 --with-ft ulfm "$exe" "${base[@]}" "${model[@]}" --threads 1 \
    "${policy[@]}" --fault-tolerance shrink --inject-failure "$inject" --trace-level tensor --trace "$tmp/ft.$name" \
    >"$tmp/log.$name" 2>&1
  local rc=$?
  if ((rc == 124)); then fail "$name: the job ran past 120 s"; return; fi
  grep -q '^fingerprint ' "$tmp/log.$name" || { fail "$name: no fingerprint (exit $rc)"; cat "$tmp/log.$name"; return; }
  local failures
  failures=$(grep -c '"event":"failure"' "$tmp/ft.$name")
  [ "$failures" = 1 ] && echo "ok: $name: one failure line: $(grep '"event":"failure"' "$tmp/ft.$name")" ||
    fail "$name: $failures failure lines"
  grep -v '"event":"failure"' "$tmp/ft.$name" >"$tmp/ft-less.$name"
  same_bytes "$name: the trace less its failure line is the failure-free one" "$tmp/ref.$name" "$tmp/ft-less.$name"
  run_diff 0 "$tmp/out.$name" "$tmp/ref.$name" "$tmp/ft.$name"
  grep -q "^B: recovered from a failure at step " "$tmp/out.$name" && echo "ok: $name: reprosgd_diff agrees and notes the failure" ||
    { fail "$name: reprosgd_diff output"; cat "$tmp/out.$name"; }
}
run_case data_rank2 "2@11:allreduce" "" ""
run_case data_rank0 "0@11" "" ""
run_case model_rank2 "2@13" "--parallel model --buddy-every 5" "--feature-chunk 8"
grep -q '"restored_from":"buddy","resumed_from":10}' "$tmp/ft.model_rank2" && echo "ok: model_rank2: steps 10..12 replayed" ||
  fail "model_rank2: the failure line: $(grep failure "$tmp/ft.model_rank2")"
finish
