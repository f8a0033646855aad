#!/usr/bin/env bash
# bad_launch.sh TRAIN_MLP "MPIEXEC FLAGS" — invalid distributed setups stop every rank with the
# reason and a non-zero exit, never a hang (CTest's timeout would catch one).
set -uo pipefail
exe=$1 launcher=$2
small=(--data synthetic --synthetic-train 256 --synthetic-test 64 --steps 4 --quiet --threads 1)
net=(--layers 784,16,10)
fails=0
check() {  # check WANT-COUNT MESSAGE OUTPUT RC
  local n; n=$(printf '%s\n' "$3" | grep -c -- "$2")
  if [ "$4" -eq 0 ] || [ "$n" -ne "$1" ]; then echo "FAIL: want $1 ranks to report '$2' (got $n, exit $4):"; echo "$3"; fails=$((fails + 1));
  else echo "ok: $n ranks reported: $(printf '%s\n' "$3" | grep -m1 -- "$2")"; fi
}
out=$($launcher -n 3 "$exe" "${small[@]}" "${net[@]}" --batch 16 --micro-batch 8 2>&1); rc=$?
check 3 "2 micro-batches per step (global batch 16 / micro-batch 8) but 3 ranks" "$out" $rc
out=$($launcher -n 1 "$exe" "${small[@]}" "${net[@]}" --batch 16 --micro-batch 8 --seed 1 : -n 1 "$exe" "${small[@]}" "${net[@]}" --batch 16 --micro-batch 8 --seed 2 2>&1); rc=$?
check 2 "the ranks do not train the same configuration" "$out" $rc
out=$($launcher -n 2 "$exe" "${small[@]}" --batch 16 --micro-batch 8 --layers 784,16,10 : -n 1 "$exe" "${small[@]}" --batch 16 --micro-batch 8 --synthetic-shape 1,28,28 --layers 100,16,10 2>&1); rc=$?
check 1 "features but the model's first layer expects 100" "$out" $rc
check 2 "another rank found invalid input" "$out" $rc
# A file only rank 0 opens (--metrics) that it cannot create: every rank ends, none waits.
out=$($launcher -n 3 "$exe" "${small[@]}" "${net[@]}" --batch 16 --micro-batch 4 --metrics /nonexistent/dir/m.jsonl 2>&1); rc=$?
check 1 "/nonexistent/dir/m.jsonl" "$out" $rc
check 2 "error: --metrics or --save-model: another rank found invalid input" "$out" $rc
# A model file the writing rank could not write at the end (model parallelism: MPI_COMM_WORLD rank
# 0 writes): refused before training, on every rank; the metrics file got no step.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
out=$($launcher -n 3 "$exe" "${small[@]}" "${net[@]}" --batch 16 --micro-batch 4 --parallel model --metrics "$tmp/m.jsonl" \
      --save-model "$tmp/no/such/dir/m.rsgdm" 2>&1); rc=$?
check 1 "reprosgd::AtomicFile: $tmp/no/such/dir/m.rsgdm: cannot create temporary file" "$out" $rc
check 2 "error: --metrics or --save-model: another rank found invalid input" "$out" $rc
if grep -q '"event":"step"' "$tmp/m.jsonl"; then echo "FAIL: the run trained before refusing --save-model"; fails=$((fails + 1)); fi
# A file rank 0 cannot write during training (a full disk): every rank ends after that step.
if [ -w /dev/full ]; then
  out=$($launcher -n 3 "$exe" "${small[@]}" "${net[@]}" --batch 16 --micro-batch 4 --metrics /dev/full 2>&1); rc=$?
  check 1 "error: reprosgd::JsonLinesWriter: cannot write /dev/full: No space left on device" "$out" $rc
  check 2 "error: reprosgd::Trainer::fit: a callback failed on another rank after step 0 (see that rank's message)" "$out" $rc
else
  echo "skipped the full-disk case: /dev/full is not writable here"; fails=$((fails - 2))  # counted as passed
fi
# An allocation that fails on one rank only, before any agreement (its address space limited to
# 500 MB, the model's arrays 155 MB each): it reports the failure, its MPI_Finalize would wait for
# ranks that wait for it, so it exits within seconds without it and the launcher ends the job
# (it hung until an outside timeout before).
big=(--data synthetic --synthetic-train 256 --synthetic-test 64 --steps 2 --quiet --threads 1 --optimizer sgd
     --layers 784,6000,6000,10 --batch 16 --micro-batch 4)
start=$SECONDS
out=$(timeout 120 $launcher -n 1 bash -c 'ulimit -v 500000; exec "$0" "$@"' "$exe" "${big[@]}" : -n 2 "$exe" "${big[@]}" 2>&1); rc=$?
took=$((SECONDS - start))
check 1 "train_mlp: error: Kokkos failed to allocate memory" "$out" $rc
# Without --with-ft ulfm the rank ends with its error's exit code, not by SIGKILL.
check 1 "^reprosgd::MpiEnvironment: the other processes did not finalise MPI within 5 s of this process's error (they may be waiting for it); ending without MPI_Finalize$" "$out" $rc
if [ "$rc" -eq 124 ] || [ "$took" -gt 60 ]; then
  echo "FAIL: the job with a failed allocation on one rank took $took s (exit $rc): a hang"; fails=$((fails + 1))
else
  echo "ok: the job ended in $took s with exit $rc"
fi
# --fault-tolerance shrink without mpiexec --with-ft ulfm: a lost rank would end the job, which
# rank 0 says once; the run itself trains as with abort.
out=$($launcher -n 2 "$exe" "${small[@]}" "${net[@]}" --batch 16 --micro-batch 4 --fault-tolerance shrink 2>&1); rc=$?
n=$(grep -c "^train_mlp: warning: --fault-tolerance shrink without mpiexec --with-ft ulfm: MPI's tolerance of failures is off, so a lost rank ends the job$" <<<"$out")
if [ "$rc" -ne 0 ] || [ "$n" -ne 1 ] || ! grep -q "^fingerprint " <<<"$out"; then
  echo "FAIL: shrink without --with-ft ulfm: want exit 0, one warning and a fingerprint (exit $rc, $n warnings):"; echo "$out"; fails=$((fails + 1))
else
  echo "ok: shrink without --with-ft ulfm warned once and trained"
fi
echo "$((14 - fails)) passed, $fails failed"
[ $fails -le 0 ]
