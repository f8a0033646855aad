#!/usr/bin/env bash
# other_run.sh TRAIN_MLP — a checkpoint directory belongs to one run: a run of another
# configuration pointed at it (with or without --resume auto) is refused with the field that
# differs, exit 6, and leaves every file as it was (it used to start fresh and prune them); a second
# process writing into a directory another live process writes is refused with that process's pid.
set -uo pipefail
exe=$1
source "$(dirname "$0")/common.sh"
expect() {  # expect LABEL CODE MESSAGE-SUBSTRING -- ARGS...
  local label=$1 code=$2 msg=$3; shift 4
  "$exe" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -eq "$code" ] && grep -qF -- "$msg" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
     ! grep -q '^fingerprint' "$tmp/out"; then
    passes=$((passes + 1)); echo "ok   $label: $(cat "$tmp/err")"
  else fails=$((fails + 1)); echo "FAIL $label: exit $rc (want $code), stderr: $(cat "$tmp/err") (want: $msg)"; fi
}
unchanged() {  # unchanged LABEL: the other run's three files, byte for byte
  if [ "$(cd "$tmp/d" && ls ckpt-* | tr '\n' ' ')" = "ckpt-000000000010.rsgd ckpt-000000000020.rsgd ckpt-000000000030.rsgd " ] &&
     (cd "$tmp/d" && sha256sum -c --quiet "$tmp/sums"); then passes=$((passes + 1)); echo "ok   $1: the other run's files are intact"
  else fails=$((fails + 1)); echo "FAIL $1: the other run's files changed: $(ls "$tmp/d")"; fi
}
"$exe" "${base[@]}" --optimizer adam --lr 0.002 --checkpoint-dir "$tmp/d" --checkpoint-every 10 --stop-after 30 >/dev/null
(cd "$tmp/d" && sha256sum ckpt-* >"$tmp/sums")
refusal="holds checkpoints of another configuration (ckpt-000000000010.rsgd: optimizer is adam(lr=0x1.0624dep-9"
expect "another learning rate, --resume auto" 6 "$refusal" -- "${base[@]}" --optimizer adam --lr 0.003 \
  --checkpoint-dir "$tmp/d" --checkpoint-every 10 --resume auto
unchanged "--resume auto"
expect "another learning rate, no --resume" 6 "$refusal" -- "${base[@]}" --optimizer adam --lr 0.003 \
  --checkpoint-dir "$tmp/d" --checkpoint-every 10 --keep 1
unchanged "no --resume"
# The same configuration resumes from it as before.
ref=$("$exe" "${base[@]}" --optimizer adam --lr 0.002 | tail -n 1)
same "the directory's own run resumes" "$ref" "$("$exe" "${base[@]}" --optimizer adam --lr 0.002 --checkpoint-dir "$tmp/d" --checkpoint-every 10 --resume auto | tail -n 1)"

# Two live processes, one directory: the second writer is refused while the first runs.
long=(--data synthetic --synthetic-train 1024 --synthetic-test 128 --layers 784,32,16,10 --batch 64 --micro-batch 16
      --steps 1000000 --seed 9 --quiet --checkpoint-dir "$tmp/e" --checkpoint-every 1 --keep 2)
"$exe" "${long[@]}" >/dev/null 2>&1 &
writer=$!
for _ in $(seq 600); do ls "$tmp/e"/ckpt-* >/dev/null 2>&1 && break; sleep 0.1; done
expect "a second writer" 6 "$tmp/e is being written by another process (pid $writer); one writer per directory" -- \
  "${long[@]/1000000/5}"
kill -9 $writer 2>/dev/null; wait $writer 2>/dev/null
# Once the first process has ended (killed, as a crash would), the directory is free again.
got=$("$exe" "${long[@]/1000000/5}" --resume auto 2>&1 | tail -n 1)
if [[ $got == fingerprint* ]]; then passes=$((passes + 1)); echo "ok   after the writer's death a new run writes: $got"
else fails=$((fails + 1)); echo "FAIL after the writer's death: $got"; fi
finish
