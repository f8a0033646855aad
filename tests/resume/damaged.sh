#!/usr/bin/env bash
# damaged.sh TRAIN_MLP — resume --auto skips a damaged newest checkpoint, says why, and still ends
# with the uninterrupted bits; a checkpoint of another configuration is refused with the field.
set -uo pipefail
exe=$1
source "$(dirname "$0")/common.sh"
opt=(--optimizer adam --lr 0.002)
ref=$("$exe" "${base[@]}" "${opt[@]}" | tail -n 1)
"$exe" "${base[@]}" "${opt[@]}" --checkpoint-dir "$tmp/d" --checkpoint-every 10 --stop-after 30 >/dev/null
newest="$tmp/d/ckpt-000000000030.rsgd"
printf '\xff' | dd of="$newest" bs=1 seek=200 conv=notrunc status=none  # one flipped byte
out=$("$exe" "${loud[@]}" "${opt[@]}" --checkpoint-dir "$tmp/d" --resume auto 2>&1)
same "resumed past a damaged newest checkpoint" "$ref" "$(printf '%s\n' "$out" | tail -n 1)"
if grep -q "skipped checkpoint .*ckpt-000000000030.rsgd: .*checksum" <<<"$out" &&
   grep -q "resumed from .*ckpt-000000000020.rsgd at step 20" <<<"$out"; then
  passes=$((passes + 1)); echo "ok   the skipped file and the reason are reported"
else fails=$((fails + 1)); echo "FAIL: no report of the skipped checkpoint:"; printf '%s\n' "$out" | head -n 5; fi
# Another learning rate: refused with the differing field, exit 6, nothing printed on stdout.
"$exe" "${base[@]}" --optimizer adam --lr 0.003 --resume "$tmp/d/ckpt-000000000020.rsgd" >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 6 ] && grep -q "configuration differs: optimizer is adam(lr=0x1.0624dep-9" "$tmp/err" && [ ! -s "$tmp/out" ]; then
  passes=$((passes + 1)); echo "ok   $(cat "$tmp/err")"
else fails=$((fails + 1)); echo "FAIL: other hyperparameters: exit $rc, $(cat "$tmp/err")"; fi
# Truncated and empty files given explicitly.
head -c 100 "$tmp/d/ckpt-000000000020.rsgd" >"$tmp/trunc.rsgd"; : >"$tmp/empty.rsgd"
for f in trunc empty; do
  "$exe" "${base[@]}" "${opt[@]}" --resume "$tmp/$f.rsgd" >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ $rc -eq 6 ] && grep -q "reprosgd::load_snapshot" "$tmp/err"; then passes=$((passes + 1)); echo "ok   $f: $(cat "$tmp/err")";
  else fails=$((fails + 1)); echo "FAIL $f: exit $rc, $(cat "$tmp/err")"; fi
done
finish
