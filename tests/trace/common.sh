# SPDX-License-Identifier: BSD-3-Clause
# Shared by the trace tests (sourced): a small run of train_mlp with a trace, and the checks.
set -uo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_PROC_BIND=false
# 24 steps of 96 samples over 1,024: two epochs (an evaluation after steps 9 and 19) and 4 steps more.
base=(--data synthetic --synthetic-train 1024 --synthetic-test 200 --layers 784,32,16,10 --dropout 0.1
      --optimizer adam --lr 0.002 --batch 96 --micro-batch 8 --steps 24 --seed 3 --quiet)
status=0
fail() { echo "FAIL: $*"; status=1; }
# same_bytes WHAT A B: the two files are byte-identical.
same_bytes() {
  if cmp -s "$2" "$3"; then echo "ok: $1"; else fail "$1: $2 and $3 differ"; diff <(head -c 3000 "$2") <(head -c 3000 "$3") | head -5; fi
}
# run_diff WANT_RC OUT A B: reprosgd_diff A B, its output in OUT, the exit code checked.
run_diff() {
  local want=$1 out=$2
  shift 2
  "$diff_exe" "$@" >"$out" 2>&1
  local rc=$?
  if [ "$rc" != "$want" ]; then fail "reprosgd_diff $* exited $rc, want $want"; cat "$out"; fi
}
# has_line WHAT FILE LINE: FILE holds exactly this line.
has_line() {
  if grep -qxF -- "$3" "$2"; then echo "ok: $1"; else fail "$1: no line '$3' in:"; cat "$2"; fi
}
finish() { exit $status; }
