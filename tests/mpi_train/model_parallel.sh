#!/usr/bin/env bash
# model_parallel.sh TRAIN_MLP "MPIEXEC FLAGS" — model-parallel and hybrid training give the bits of
# the one-process run (issue 6): model parallel on P_model = 1..4, hybrid grids 1x1, 2x2, 1x4, 4x1,
# 2x1 (with 2 threads per rank: 4 threads on 2 cores, oversubscribed) and 3x1, with dropout, Adam, a
# cosine schedule and shuffling. Feature chunks of 8 make the widths 40, 24, 10 split unevenly
# (5, 3 and 2 chunks: with 4 model ranks some own no chunk of a layer). A run saved on a 2x2 grid
# resumes on 1x3 and on one process with the same bits; a grid that does not fit fails on every rank.
set -uo pipefail
exe=$1 launcher=$2
args=(--data synthetic --synthetic-train 1536 --synthetic-test 200 --layers 784,40,24,10 --feature-chunk 8
      --dropout 0.2 --optimizer adam --lr 0.002 --schedule cosine --warmup 5 --batch 96 --micro-batch 8
      --steps 40 --seed 5 --quiet)
ref=$("$exe" "${args[@]}" --threads 1 | tail -n 1)
echo "single process:        $ref"
[[ "$ref" == fingerprint\ * ]] || exit 1
status=0
expect() {  # expect LABEL OUTPUT
  printf '%-22s %s\n' "$1:" "$(printf '%s\n' "$2" | tail -n 1)"
  [ "$(printf '%s\n' "$2" | tail -n 1)" = "$ref" ] || { echo "MISMATCH"; printf '%s\n' "$2" | tail -n 5; status=1; }
}
for p in 1 2 3 4; do
  expect "model, P_model=$p" "$($launcher -n $p "$exe" "${args[@]}" --threads 1 --parallel model 2>&1)"
done
for spec in "1x1 1 1" "2x2 4 1" "1x4 4 1" "4x1 4 1" "2x1 2 2" "3x1 3 1"; do
  set -- $spec
  expect "hybrid $1 (${3} thr)" "$($launcher -n $2 "$exe" "${args[@]}" --threads $3 --parallel hybrid --grid $1 2>&1)"
done
expect "data, 3 ranks" "$($launcher -n 3 "$exe" "${args[@]}" --threads 1 2>&1)"

# Save on 2x2 (stopped after step 17), resume on 1x3 and on one process: the same bits.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
$launcher -n 4 "$exe" "${args[@]}" --threads 1 --parallel hybrid --grid 2x2 --checkpoint-dir "$dir/ck" \
  --stop-after 17 >/dev/null 2>&1 || { echo "FAIL: the 2x2 run that saves did not finish"; status=1; }
cp -r "$dir/ck" "$dir/ck2"
expect "saved 2x2, resumed 1x3" \
  "$($launcher -n 3 "$exe" "${args[@]}" --threads 1 --parallel model --checkpoint-dir "$dir/ck" --resume auto 2>&1)"
expect "saved 2x2, resumed 1x1" "$("$exe" "${args[@]}" --threads 2 --checkpoint-dir "$dir/ck2" --resume auto 2>&1)"

# A grid that does not fit: every rank says why, nobody hangs.
out=$($launcher -n 4 "$exe" "${args[@]}" --threads 1 --parallel hybrid --grid 3x2 2>&1); rc=$?
n=$(printf '%s\n' "$out" | grep -c "grid 3x2 has 6 ranks but the communicator has 4")
echo "grid 3x2 on 4 ranks: exit $rc, $n ranks reported it"
{ [ $rc -ne 0 ] && [ "$n" -eq 4 ]; } || { echo "FAIL"; printf '%s\n' "$out"; status=1; }
out=$("$exe" "${args[@]}" --grid 2x2 2>&1); rc=$?
echo "--grid without --parallel hybrid: exit $rc: $(printf '%s\n' "$out" | tail -n 1)"
[ $rc -eq 2 ] || status=1
exit $status
