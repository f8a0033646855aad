#!/usr/bin/env bash
# regression.sh TRAIN_MLP [PREDICT] — train_mlp's regression and optimizer controls from the command
# line: --loss mse on a CSV of features then 2 targets learns (test R^2 rising to above 0.9, RMSE
# and R^2 printed and in --metrics, predict's RMSE of the saved model equal to the last epoch's), the same fingerprint on 1 and 2 threads and Serial;
# --no-shuffle, --dampening, --beta1/--beta2/--eps change the bits and are deterministic; options
# of another optimizer, out-of-range values and cross-entropy on float targets are refused with
# exit 2 or 3 and one line; --save-initial writes the parameters drawn from --seed (the same file
# for any training length) that predict loads; --standardize all trains targets x 1000 + 7 to the
# same test R^2 and predict reports 1000x the RMSE (the statistics travel with the model file);
# the same data in IDX files (float features N x 2 x 2, gzip, and float targets N x 2: --targets,
# --test-targets) train to the fingerprint of the CSV and predict reads them; bad IDX targets are
# refused with one line.
set -uo pipefail
exe=$1 predict=${2:-}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OMP_PROC_BIND=false
fail() { echo "FAIL: $*"; exit 1; }

# x in [-1, 1) from a fixed LCG; t0 = 0.5 x0 - x1 + 0.25 x2 x3, t1 = x3 + 0.5 x0^2.
make_csv() {  # ROWS SEED
  awk -v n="$1" -v s="$2" 'BEGIN {
    print "x0,x1,x2,x3,t0,t1"
    for (i = 0; i < n; i++) {
      for (j = 0; j < 4; j++) { s = (s * 1103515245 + 12345) % 2147483648; x[j] = s / 1073741824 - 1 }
      printf "%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", x[0], x[1], x[2], x[3], 0.5 * x[0] - x[1] + 0.25 * x[2] * x[3], x[3] + 0.5 * x[0] * x[0]
    }
  }'
}
make_csv 512 7 >"$tmp/train.csv"
make_csv 128 99 >"$tmp/test.csv"
data=(--data "$tmp/train.csv" --test-data "$tmp/test.csv" --layers 4,32,2 --activation tanh --batch 32 --micro-batch 8 --seed 5)
base=("${data[@]}" --loss mse --optimizer sgd --lr 0.1 --momentum 0.9)
adam=("${data[@]}" --loss mse --optimizer adam --lr 0.01)
fp() { "$exe" "$@" 2>&1 | tail -n 1 | sed -n 's/^fingerprint //p'; }

out=$("$exe" "${base[@]}" --epochs 6 --threads 1 --metrics "$tmp/m.jsonl" --save-model "$tmp/model.rsgdm" \
      --save-initial "$tmp/init6.rsgdm") || { echo "$out"; fail "regression training exited $?"; }
echo "$out"
fp1=$(printf '%s\n' "$out" | tail -n 1 | sed -n 's/^fingerprint //p')
[ -n "$fp1" ] || fail "no fingerprint"
grep -q '^epoch 6  step 96  train_loss [0-9.]*  test_loss [0-9.]*  test_rmse [0-9.]*  test_r2 [0-9.-]*  (' <<<"$out" ||
  fail "no epoch line with test_rmse and test_r2 (and no train_acc)"
grep -q "^initial model saved to $tmp/init6.rsgdm$" <<<"$out" || fail "no 'initial model saved' line"
r2_first=$(grep '"event":"epoch"' "$tmp/m.jsonl" | head -n 1 | sed -n 's/.*"test_r2":\([-0-9.e+]*\).*/\1/p')
r2_last=$(grep '"event":"epoch"' "$tmp/m.jsonl" | tail -n 1 | sed -n 's/.*"test_r2":\([-0-9.e+]*\).*/\1/p')
rmse_last=$(grep '"event":"epoch"' "$tmp/m.jsonl" | tail -n 1 | sed -n 's/.*"test_rmse":\([-0-9.e+]*\).*/\1/p')
echo "test R^2 after epoch 1: $r2_first, after epoch 6: $r2_last (RMSE $rmse_last)"
awk -v a="$r2_last" 'BEGIN { exit !(a > 0.9) }' || fail "test R^2 $r2_last after 6 epochs, want > 0.9"
awk -v a="$r2_first" -v b="$r2_last" 'BEGIN { exit !(b > a) }' || fail "R^2 did not improve ($r2_first -> $r2_last)"

[ "$(fp "${base[@]}" --epochs 6 --threads 2 --quiet)" = "$fp1" ] || fail "2 threads gave another fingerprint"
[ "$(fp "${base[@]}" --epochs 6 --backend serial --quiet)" = "$fp1" ] || fail "Serial gave another fingerprint"

# The optimizer and order controls: each changes the bits, each is the same on 1 and 2 threads.
for extra in "--no-shuffle" "--dampening 0.5" "adam --beta1 0.8" "adam --beta2 0.99" "adam --eps 1e-6"; do
  args=("${base[@]}")
  [ "${extra#adam }" != "$extra" ] && args=("${adam[@]}") && extra=${extra#adam }
  # shellcheck disable=SC2086
  a=$(fp "${args[@]}" --epochs 2 --threads 1 --quiet $extra)
  # shellcheck disable=SC2086
  b=$(fp "${args[@]}" --epochs 2 --threads 2 --quiet $extra)
  ref=$(fp "${args[@]}" --epochs 2 --threads 1 --quiet)
  echo "$extra: $a (2 threads: $b; without it: $ref)"
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$extra: 1 and 2 threads differ"
  [ "$a" != "$ref" ] || fail "$extra changed nothing"
done

# Refusals: one line on standard error, the exit code of its kind, no fingerprint.
refuse() {  # CODE MESSAGE ARGS...
  local code=$1 msg=$2; shift 2
  "$exe" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -ne "$code" ] || ! grep -qF -- "$msg" "$tmp/err" || grep -q '^fingerprint' "$tmp/out" || [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
    echo "args: $*"; echo "exit $rc (want $code); stderr:"; cat "$tmp/err"; fail "expected: $msg"
  fi
}
refuse 2 "train_mlp: error: --dampening is SGD's (--optimizer sgd), not adam's" "${adam[@]}" --dampening 0.1
refuse 2 "train_mlp: error: --beta1, --beta2 and --eps are Adam's and AdamW's, not sgd's" "${base[@]}" --beta2 0.9
refuse 2 "train_mlp: error: --beta1, --beta2 and --eps are Adam's and AdamW's, not sgd's" "${base[@]}" --beta1 0.9
refuse 2 "train_mlp: error: --dampening is SGD's (--optimizer sgd), not adam's" "${adam[@]}" --dampening 0
refuse 2 "train_mlp: error: reprosgd::Sgd: dampening must be in [0, 1], got 2" "${base[@]}" --dampening 2
refuse 2 "train_mlp: error: reprosgd::Sgd: nesterov needs dampening 0 (as torch.optim.SGD)" "${base[@]}" --nesterov --dampening 0.1
refuse 2 "train_mlp: error: reprosgd::Adam: beta1 must be in [0, 1), got 1" "${adam[@]}" --beta1 1
refuse 2 "train_mlp: error: --loss: mae not in {cross-entropy,mse}" "${base[@]}" --loss mae
refuse 3 "train_mlp: error: reprosgd::read_csv_dataset: $tmp/train.csv, line 2, column 6: label '" \
  "${base[@]/mse/cross-entropy}"
refuse 3 "expected at least one feature and 8 target(s), found 6 field(s)" "${base[@]/4,32,2/4,32,8}"

# --save-initial: the parameters drawn from --seed, whatever follows them.
"$exe" "${base[@]}" --steps 3 --quiet --save-initial "$tmp/init3.rsgdm" >/dev/null || fail "--save-initial run failed"
cmp -s "$tmp/init3.rsgdm" "$tmp/init6.rsgdm" || fail "--save-initial wrote different files for 3 steps and 6 epochs"
cmp -s "$tmp/init6.rsgdm" "$tmp/model.rsgdm" && fail "the initial and the trained model files are the same"
seed6=() prev=
for a in "${base[@]}"; do [ "$prev" = --seed ] && a=6; seed6+=("$a"); prev=$a; done
"$exe" "${seed6[@]}" --steps 3 --quiet --save-initial "$tmp/init_seed6.rsgdm" >/dev/null || fail "seed 6 run failed"
cmp -s "$tmp/init3.rsgdm" "$tmp/init_seed6.rsgdm" && fail "--seed 6 drew the same initial parameters as --seed 5"

if [ -n "$predict" ]; then
  trained=$("$predict" --model "$tmp/model.rsgdm" --data "$tmp/test.csv" --output "$tmp/p.csv" --quiet) || fail "predict (trained) failed"
  initial=$("$predict" --model "$tmp/init6.rsgdm" --data "$tmp/test.csv" --output "$tmp/p0.csv" --quiet) || fail "predict (initial) failed"
  echo "predict: $trained (initial model: $initial)"
  t=$(printf '%s\n' "$trained" | sed -n 's/^rmse //p'); i=$(printf '%s\n' "$initial" | sed -n 's/^rmse //p')
  [ -n "$t" ] && [ -n "$i" ] || fail "predict printed no rmse"
  awk -v t="$t" -v r="$rmse_last" 'BEGIN { d = t - r; if (d < 0) d = -d; exit !(d <= 1e-5 * r) }' ||
    fail "predict's RMSE $t is not train_mlp's test_rmse $rmse_last"
  awk -v t="$t" -v i="$i" 'BEGIN { exit !(t < 0.5 * i) }' || fail "trained RMSE $t not below half the initial $i"

  # --standardize all: the same data with targets x 1000 + 7 trains the same standardized problem
  # (the same test R^2) and predict, which inverts the targets' standardisation, reports 1000x the
  # RMSE in the original units.
  awk -F, 'NR == 1 { print; next } { printf "%s,%s,%s,%s,%.6f,%.6f\n", $1, $2, $3, $4, 1000 * $5 + 7, 1000 * $6 + 7 }' \
    "$tmp/train.csv" >"$tmp/train_k.csv"
  awk -F, 'NR == 1 { print; next } { printf "%s,%s,%s,%s,%.6f,%.6f\n", $1, $2, $3, $4, 1000 * $5 + 7, 1000 * $6 + 7 }' \
    "$tmp/test.csv" >"$tmp/test_k.csv"
  std=(--layers 4,32,2 --activation tanh --batch 32 --micro-batch 8 --seed 5 --loss mse --optimizer adam --lr 0.01 --epochs 4 --standardize all)
  out1=$("$exe" --data "$tmp/train.csv" --test-data "$tmp/test.csv" "${std[@]}" --save-model "$tmp/std1.rsgdm") ||
    fail "--standardize all training exited $?"
  outk=$("$exe" --data "$tmp/train_k.csv" --test-data "$tmp/test_k.csv" "${std[@]}" --save-model "$tmp/stdk.rsgdm") ||
    fail "--standardize all training (targets x 1000 + 7) exited $?"
  grep -q "^standardized 4 input features and 2 targets with the training set's mean and standard deviation" <<<"$out1" ||
    fail "no 'standardized 4 input features and 2 targets' line"
  r2_1=$(printf '%s\n' "$out1" | grep '^epoch 4 ' | sed -n 's/.*test_r2 \([-0-9.]*\).*/\1/p')
  r2_k=$(printf '%s\n' "$outk" | grep '^epoch 4 ' | sed -n 's/.*test_r2 \([-0-9.]*\).*/\1/p')
  [ -n "$r2_1" ] && [ "$r2_1" = "$r2_k" ] || fail "standardized test R^2 $r2_1 (original) vs $r2_k (targets x 1000 + 7)"
  p1=$("$predict" --model "$tmp/std1.rsgdm" --data "$tmp/test.csv" --output "$tmp/s1.csv" --quiet | sed -n 's/^rmse //p')
  pk=$("$predict" --model "$tmp/stdk.rsgdm" --data "$tmp/test_k.csv" --output "$tmp/sk.csv" --quiet | sed -n 's/^rmse //p')
  echo "--standardize all: test R^2 $r2_1 both; predict RMSE $p1 (original) and $pk (targets x 1000 + 7)"
  awk -v a="$p1" -v b="$pk" 'BEGIN { exit !(a > 0 && b / a > 999 && b / a < 1001) }' ||
    fail "predict's RMSE with targets x 1000 + 7 is $pk, not 1000 x $p1"

  # --standardize inputs: the features only. The targets stay in their units, so the epoch line's
  # RMSE is predict's (which standardizes its inputs with the saved statistics); the bits differ
  # from --standardize none's and are the same on 2 threads.
  inp=(--data "$tmp/train.csv" --test-data "$tmp/test.csv" "${std[@]/all/inputs}")
  outi=$("$exe" "${inp[@]}" --threads 1 --save-model "$tmp/stdi.rsgdm") || fail "--standardize inputs training exited $?"
  grep -q "^standardized 4 input features with the training set's mean and standard deviation" <<<"$outi" ||
    fail "no 'standardized 4 input features with' line"
  grep -q "standardized units" <<<"$outi" && fail "--standardize inputs says the loss is in standardized units"
  rmse_i=$(printf '%s\n' "$outi" | grep '^epoch 4 ' | sed -n 's/.*test_rmse \([0-9.]*\).*/\1/p')
  fpi=$(printf '%s\n' "$outi" | tail -n 1 | sed -n 's/^fingerprint //p')
  pi=$("$predict" --model "$tmp/stdi.rsgdm" --data "$tmp/test.csv" --output "$tmp/si.csv" --quiet | sed -n 's/^rmse //p')
  echo "--standardize inputs: fingerprint $fpi, test_rmse $rmse_i, predict RMSE $pi"
  awk -v t="$pi" -v r="$rmse_i" 'BEGIN { d = t - r; if (d < 0) d = -d; exit !(r > 0 && d <= 1e-5 * r) }' ||
    fail "--standardize inputs: predict's RMSE $pi is not the epoch line's $rmse_i"
  [ "$(fp "${inp[@]}" --threads 2 --quiet)" = "$fpi" ] || fail "--standardize inputs: 2 threads gave another fingerprint"
  [ "$(fp "${inp[@]/inputs/none}" --threads 1 --quiet)" != "$fpi" ] || fail "--standardize inputs changed nothing"
fi
# IDX regression files: the CSV's floats (first made exactly representable: printed with 9
# significant digits, which round-trip) in big-endian float IDX files, features N x 2 x 2 (gzip) and
# targets N x 2. The same floats train to the same bits, whichever file holds them.
python3 - "$tmp" <<'PY' || fail "could not write the IDX files"
import gzip, struct, sys
tmp = sys.argv[1]
for part in ("train", "test"):
    rows = [line.strip().split(",") for line in open(f"{tmp}/{part}.csv")][1:]
    rows = [[struct.unpack(">f", struct.pack(">f", float(v)))[0] for v in r] for r in rows]
    with open(f"{tmp}/{part}_f.csv", "w") as f:
        f.write("x0,x1,x2,x3,t0,t1\n")
        for r in rows: f.write(",".join("%.9g" % v for v in r) + "\n")
    def idx(dims, values):
        head = struct.pack(">I", 0x0D00 | len(dims)) + b"".join(struct.pack(">I", d) for d in dims)
        return head + b"".join(struct.pack(">f", v) for v in values)
    with gzip.open(f"{tmp}/{part}_x.idx.gz", "wb") as f: f.write(idx([len(rows), 2, 2], [v for r in rows for v in r[:4]]))
    with open(f"{tmp}/{part}_t.idx", "wb") as f: f.write(idx([len(rows), 2], [v for r in rows for v in r[4:]]))
with open(f"{tmp}/bytes_t.idx", "wb") as f: f.write(struct.pack(">III", 0x0802, 512, 2) + bytes(1024))
with open(f"{tmp}/short_t.idx", "wb") as f: f.write(struct.pack(">II", 0x0D01, 511) + bytes(4 * 511))
PY
net=(--layers 4,32,2 --activation tanh --batch 32 --micro-batch 8 --seed 5 --loss mse --optimizer sgd --lr 0.1 --epochs 2 --quiet)
fp_csv=$(fp --data "$tmp/train_f.csv" --test-data "$tmp/test_f.csv" "${net[@]}")
fp_idx=$(fp --data "$tmp/train_x.idx.gz" --targets "$tmp/train_t.idx" --test-data "$tmp/test_x.idx.gz" \
            --test-targets "$tmp/test_t.idx" "${net[@]}" --save-model "$tmp/idx.rsgdm")
echo "IDX regression: fingerprint $fp_idx (the same floats in CSV: $fp_csv)"
[ -n "$fp_idx" ] && [ "$fp_idx" = "$fp_csv" ] || fail "the IDX files trained to another fingerprint than the CSV"
if [ -n "$predict" ]; then
  pi=$("$predict" --model "$tmp/idx.rsgdm" --data "$tmp/test_x.idx.gz" --targets "$tmp/test_t.idx" --output "$tmp/pi.csv" --quiet)
  pc=$("$predict" --model "$tmp/idx.rsgdm" --data "$tmp/test_f.csv" --output "$tmp/pc.csv" --quiet)
  echo "predict on IDX: $pi; on the CSV: $pc"
  [ -n "$pi" ] && [ "$pi" = "$pc" ] || fail "predict's RMSE on the IDX files ($pi) is not the CSV's ($pc)"
  cmp -s "$tmp/pi.csv" "$tmp/pc.csv" || fail "predict's outputs on the IDX files differ from the CSV's"
  "$predict" --model "$tmp/idx.rsgdm" --data "$tmp/test_x.idx.gz" --output "$tmp/pn.csv" --quiet >"$tmp/pn.out" ||
    fail "predict on IDX features without targets failed"
  # Without targets predict cannot tell a regression from a 2-class model: it adds the class column.
  cut -d, -f1,3- "$tmp/pn.csv" | cmp -s - "$tmp/pc.csv" || fail "predict's outputs on IDX features alone differ"
  grep -q rmse "$tmp/pn.out" && fail "predict printed an RMSE without targets"
fi
idx=(--data "$tmp/train_x.idx.gz" "${net[@]}")
refuse 3 "train_mlp: error: reprosgd::read_idx_regression_dataset: $tmp/bytes_t.idx: expected floats (IDX type 0x0D), found 0x08 (unsigned byte)" \
  "${idx[@]}" --targets "$tmp/bytes_t.idx"
refuse 3 "train_mlp: error: reprosgd::read_idx_regression_dataset: 512 samples in $tmp/train_x.idx.gz but 511 in $tmp/short_t.idx" \
  "${idx[@]}" --targets "$tmp/short_t.idx"
refuse 2 "train_mlp: error: --targets FILE (IDX regression targets) needs --loss mse" "${idx[@]/mse/cross-entropy}" --targets "$tmp/train_t.idx"
refuse 2 "train_mlp: error: with --targets, --test-data and --test-targets come together" "${idx[@]}" --targets "$tmp/train_t.idx" \
  --test-data "$tmp/test_x.idx.gz"
refuse 2 "train_mlp: error: --test-targets needs --targets" --data "$tmp/train_f.csv" "${net[@]}" --test-targets "$tmp/test_t.idx"

"$exe" "${base[@]}" --standardize targets >"$tmp/bad.out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q -- "--standardize" "$tmp/bad.out" || fail "--standardize targets: exit $rc, want 2 naming the option"
echo "regression CLI: PASSED"
