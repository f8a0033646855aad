#!/usr/bin/env bash
# predict.sh TRAIN_MLP PREDICT MAKE_REGRESSION_MODEL — train_mlp --save-model, then predict:
#  - prints the test accuracy the last epoch of training printed (the same number);
#  - writes the same output bytes with --threads 1 and 2, --backend serial, and --batch 7;
#  - a model extracted from a checkpoint (portable and json) predicts the same bytes;
#  - a CSV data set (features then label) trained and predicted: the same accuracy again;
#  - a regression model's outputs (normalisation applied and inverted) and RMSE, exactly;
#  - --save-model does not change the fingerprint; an unwritable --save-model path is exit 5;
#  - bad input: exact messages and train_mlp's exit codes.
set -uo pipefail
train=$1 predict=$2 make_regression=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }
data=(--data synthetic --synthetic-train 1280 --synthetic-test 300 --seed 7)

out=$("$train" "${data[@]}" --layers 784,48,10 --dropout 0.1 --epochs 2 --batch 64 --micro-batch 32 --threads 2 \
      --checkpoint-dir "$dir/ck" --save-model "$dir/m.rsgdm" 2>&1) || { echo "$out"; fail "train_mlp"; exit 1; }
acc=$(printf '%s\n' "$out" | grep -o 'test_acc [0-9.]*' | tail -n 1 | cut -d' ' -f2)
echo "train_mlp: test_acc $acc, $(printf '%s\n' "$out" | grep 'model saved to')"
[ -n "$acc" ] && [ -s "$dir/m.rsgdm" ] || fail "no test accuracy or no model file"

run() {  # run NAME ARGS...: predict into $dir/NAME.csv, echo its accuracy line
  local name=$1; shift
  local o
  o=$("$predict" --model "${@}" "${data[@]}" --output "$dir/$name.csv" 2>&1) || { echo "$o" >&2; echo "predict failed"; return; }
  printf '%s\n' "$o" | grep '^accuracy'
}
a1=$(run t1 "$dir/m.rsgdm" --threads 1)
echo "predict --threads 1:    $a1"
[ "$(echo "$a1" | cut -d' ' -f2)" = "$acc" ] || fail "predict's accuracy '$a1' is not training's $acc"
for v in "t2 --threads 2" "serial --backend serial" "b7 --threads 2 --batch 7"; do
  set -- $v
  a=$(run "$1" "$dir/m.rsgdm" "${@:2}")
  echo "predict ${*:2}: $a"
  cmp -s "$dir/t1.csv" "$dir/$1.csv" || fail "outputs of '${*:2}' differ from --threads 1"
  [ "$a" = "$a1" ] || fail "accuracy of '${*:2}' differs"
done
head -n 2 "$dir/t1.csv"
rows=$(($(wc -l < "$dir/t1.csv") - 1))
[ "$rows" = 300 ] || fail "$rows rows in the output, expected 300"
[ "$(head -n 1 "$dir/t1.csv" | tr ',' '\n' | wc -l)" = 12 ] || fail "header is not sample,class,output_0..9"

# The model of the last checkpoint (the same step): extracted, written portable and json.
ckpt=$(ls "$dir/ck"/*.rsgd* | sort | tail -n 1)
"$predict" --model "$ckpt" --save-model "$dir/x.rsgdm" --quiet || fail "extract from $ckpt"
cmp -s "$dir/x.rsgdm" "$dir/m.rsgdm" && echo "extracted from $(basename "$ckpt"): the same bytes as --save-model" \
  || fail "the model extracted from the checkpoint differs from --save-model's"
"$predict" --model "$dir/m.rsgdm" --save-model "$dir/j.json" --format json --quiet || fail "json"
a=$(run j "$dir/j.json" --threads 1)
cmp -s "$dir/t1.csv" "$dir/j.csv" && [ "$a" = "$a1" ] && echo "json model file: the same outputs" || fail "json model outputs"
a=$(run c "$ckpt" --threads 2)
cmp -s "$dir/t1.csv" "$dir/c.csv" && echo "checkpoint given as --model: the same outputs" || fail "checkpoint outputs"

# A CSV data set: 5 features, then the label (train_mlp's CSV); trained on it, predicted on it.
python3 - "$dir/d.csv" <<'PY'
import sys, random
r = random.Random(3)
with open(sys.argv[1], "w") as f:
    f.write("a,b,c,d,e,label\n")
    for i in range(240):
        y = i % 3
        f.write(",".join(f"{y + r.uniform(-1.2, 1.2):.5f}" for _ in range(5)) + f",{y}\n")
PY
out=$("$train" --data "$dir/d.csv" --layers 5,12,3 --activation tanh --epochs 3 --batch 16 --micro-batch 8 \
      --optimizer sgd --lr 0.05 --save-model "$dir/csv.rsgdm" 2>&1) || { echo "$out"; fail "train_mlp on CSV"; }
cacc=$(printf '%s\n' "$out" | grep -o 'test_acc [0-9.]*' | tail -n 1 | cut -d' ' -f2)
pacc=$("$predict" --model "$dir/csv.rsgdm" --data "$dir/d.csv" --output "$dir/csv_out.csv" | grep '^accuracy')
echo "CSV: train_mlp test_acc $cacc, predict $pacc"
[ "$(echo "$pacc" | cut -d' ' -f2)" = "$cacc" ] || fail "CSV accuracy"

# Regression: a model whose outputs are exact (make_regression_model.cpp: inputs standardised,
# y0 = 4 (2 (x0 - 1) / 0.5) + 10, y1 = ((x1 + 1) + 0.5) - 3 after the inverse output normalisation); the targets
# are off by 3 in output 0 and by 4 in output 1, so the RMSE is sqrt((9 + 16) / 2).
"$make_regression" "$dir/reg.rsgdm" || fail "make_regression_model"
printf 'x0,x1,t0,t1\n1.5,2,21,4.5\n0,-1,-3,1.5\n' > "$dir/reg.csv"
r=$("$predict" --model "$dir/reg.rsgdm" --data "$dir/reg.csv" --output "$dir/reg_out.csv" --quiet)
echo "regression: $r; outputs: $(tail -n +2 "$dir/reg_out.csv" | tr '\n' ' ')"
[ "$r" = "rmse 3.5355339059327378" ] || fail "regression RMSE '$r'"
[ "$(cat "$dir/reg_out.csv")" = "$(printf 'sample,output_0,output_1\n0,18,0.5\n1,-6,-2.5')" ] || fail "regression outputs"

# --save-model changes nothing else; a path that cannot be written is an I/O error (exit 5).
fp1=$(printf '%s\n' "$out" | tail -n 1)
fp2=$("$train" --data "$dir/d.csv" --layers 5,12,3 --activation tanh --epochs 3 --batch 16 --micro-batch 8 \
      --optimizer sgd --lr 0.05 --quiet | tail -n 1)
[ "$fp1" = "$fp2" ] && echo "fingerprint with and without --save-model: $fp1" || fail "--save-model changed the fingerprint"
# Refused before training (the metrics file gets no step), not after it.
o=$(OMP_PROC_BIND=false "$train" --data "$dir/d.csv" --layers 5,12,3 --steps 2 --batch 16 --micro-batch 8 --quiet \
    --metrics "$dir/unwritable.jsonl" --save-model "$dir/no/such/dir/m.rsgdm" 2>&1); rc=$?
echo "unwritable --save-model: exit $rc: $o"
[ $rc -eq 5 ] && [ "$(printf '%s\n' "$o" | wc -l)" -eq 1 ] \
  && [[ "$o" == "train_mlp: error: reprosgd::AtomicFile: $dir/no/such/dir/m.rsgdm: cannot create temporary file $dir/no/such/dir/.m.rsgdm.tmp."*": No such file or directory" ]] \
  || fail "unwritable --save-model"
! grep -q '"event":"step"' "$dir/unwritable.jsonl" || fail "unwritable --save-model: trained before refusing it"

# Bad input: message and exit code.
expect() {  # expect CODE MESSAGE-PART ARGS...
  local code=$1 want=$2; shift 2
  local o rc
  o=$("$predict" "$@" 2>&1 >/dev/null); rc=$?
  echo "exit $rc: $o"
  [ $rc -eq "$code" ] || fail "exit $rc, expected $code"
  [[ "$o" == *"$want"* ]] || fail "message lacks '$want'"
}
head -c 200 "$dir/m.rsgdm" > "$dir/cut.rsgdm"
expect 6 "predict: error: reprosgd::read_model: $dir/cut.rsgdm: truncated" --model "$dir/cut.rsgdm" "${data[@]}"
cp "$dir/m.rsgdm" "$dir/flip.rsgdm"
printf '\x55' | dd of="$dir/flip.rsgdm" bs=1 seek=5000 conv=notrunc status=none
expect 6 "payload checksum mismatch" --model "$dir/flip.rsgdm" "${data[@]}"
expect 6 "reprosgd::read_model: $dir/none.rsgdm: no such file" --model "$dir/none.rsgdm" "${data[@]}"
expect 3 "predict: error: $dir/d.csv, line 2: 6 columns; the model has 784 inputs" --model "$dir/m.rsgdm" --data "$dir/d.csv"
expect 2 "predict: error: --backend cuda is not enabled" --model "$dir/m.rsgdm" "${data[@]}" --backend cuda
expect 2 "predict: error: give --data" --model "$dir/m.rsgdm"
expect 2 "--model is required" --data synthetic
exit $status
