#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dump.sh TRAIN_MLP REPROSGD_DIFF — train_mlp --dump-step N DIR replays step N and writes what it
# computed as NumPy .npy files: the dump of a run resumed from a checkpoint on 2 threads is the
# uninterrupted 1-thread run's, byte for byte (reprosgd_diff: exit 0); the run stops after step N
# with the state of a run stopped there; every file is a well-formed .npy (format 1.0, checked
# against the NumPy format specification with Python's standard library) of the manifest's shape;
# a changed learning rate is named at its first array; bad input is refused with one line.
exe=$1 diff_exe=$2
source "$(dirname "$0")/common.sh"
"$exe" "${base[@]}" --threads 1 --dump-step 13 "$tmp/whole" >"$tmp/fp.whole" || fail "the dumping run failed"
"$exe" "${base[@]}" --threads 1 --stop-after 14 >"$tmp/fp.stop"
same_bytes "the dumping run stops after step 13, with the state of a run stopped there" "$tmp/fp.whole" "$tmp/fp.stop"
"$exe" "${base[@]}" --threads 1 --checkpoint-dir "$tmp/ckpt" --checkpoint-every 10 --stop-after 10 >/dev/null
"$exe" "${base[@]}" --threads 2 --resume "$tmp/ckpt/ckpt-000000000010.rsgd" --dump-step 13 "$tmp/resumed" >/dev/null ||
  fail "the resumed dumping run failed"
run_diff 0 "$tmp/out" "$tmp/whole" "$tmp/resumed"
has_line "resumed from step 10 on 2 threads: the same dump" "$tmp/out" "reprosgd_diff: the dumps agree (step 13, 222 arrays)"
for f in "$tmp/whole"/*; do cmp -s "$f" "$tmp/resumed/$(basename "$f")" || fail "$(basename "$f") differs"; done
echo "ok: every file byte for byte"
# The .npy format (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html), read
# with the standard library: magic, version 1.0, a little-endian header length, a dict literal
# padded with spaces to a multiple of 64 bytes and ended by a newline, then the data.
python3 - "$tmp/whole" <<'PY' && echo "ok: 222 well-formed .npy files of the manifest's shapes" || fail "the .npy files"
import ast, json, struct, sys
d = sys.argv[1]
m = json.load(open(d + "/manifest.json"))
assert m["step"] == 13 and m["micro_batches"] == [156, 168], m
want = {"mb156.input.npy": ("<f4", (8, 784)), "mb156.labels.npy": ("<i4", (8,)),
        "mb156.layer0.output.npy": ("<f4", (8, 32)), "mb167.layer6.output.npy": ("<f4", (8, 10)),
        "mb156.layer3.input_gradient.npy": ("<f4", (8, 32)), "mb156.layer6.parameter_gradient.npy": ("<f4", (170,)),
        "parameters.layer0.npy": ("<f4", (25120,)), "reduced_gradient.layer3.npy": ("<f4", (528,))}
assert len(m["files"]) == 222, len(m["files"])
for name in m["files"]:
    b = open(d + "/" + name, "rb").read()
    assert b[:6] == b"\x93NUMPY" and b[6:8] == b"\x01\x00", name
    (hlen,) = struct.unpack("<H", b[8:10])
    assert (10 + hlen) % 64 == 0 and b[10 + hlen - 1:10 + hlen] == b"\n", name
    h = ast.literal_eval(b[10:10 + hlen].decode("latin1"))
    assert set(h) == {"descr", "fortran_order", "shape"} and h["fortran_order"] is False, (name, h)
    n = 1
    for s in h["shape"]: n *= s
    assert len(b) - 10 - hlen == 4 * n, name
    if name in want: assert (h["descr"], h["shape"]) == want[name], (name, h)
    if name.endswith(".labels.npy"):
        labels = struct.unpack("<%di" % n, b[10 + hlen:])
        assert all(0 <= v < 10 for v in labels), labels
PY
# Another learning rate: step 13's parameters differ first (the step's input), named by element.
args_lr=("${base[@]}")
args_lr[13]=0.003  # --lr
"$exe" "${args_lr[@]}" --threads 1 --dump-step 13 "$tmp/lr" >/dev/null
run_diff 1 "$tmp/out" "$tmp/whole" "$tmp/lr"
grep -qx 'first divergence, in the order the step computed them: parameters.layer0.npy: [0-9]* of 25120 elements differ; the first, \[[0-9]*\], is 0x[0-9a-f]\{8\} ([-0-9.e]*) in A, 0x[0-9a-f]\{8\} ([-0-9.e]*) in B' "$tmp/out" &&
  echo "ok: another lr: the parameters named first" || { fail "another lr"; cat "$tmp/out"; }
# Bad input: one line, exit 2, nothing written.
bad() {  # bad WHAT WANT-LINE COMMAND...
  local what=$1 want=$2
  shift 2
  "$@" >"$tmp/bad" 2>&1
  local rc=$?
  if [ $rc = 2 ] && grep -qxF -- "$want" "$tmp/bad"; then echo "ok: $what: exit 2"; else fail "$what: exit $rc"; cat "$tmp/bad"; fi
}
bad "--dump-step x" "train_mlp: error: --dump-step: 'x' is not a step number (want --dump-step N DIR)" \
  "$exe" "${base[@]}" --dump-step x "$tmp/x"
bad "--dump-step beyond the run" "train_mlp: error: reprosgd::Trainer::fit: dump_step 24 is not a step this fit() runs (steps 0..23)" \
  "$exe" "${base[@]}" --dump-step 24 "$tmp/x"
bad "--dump-step before the resumed step" "train_mlp: error: reprosgd::Trainer::fit: dump_step 5 is not a step this fit() runs (steps 10..23)" \
  "$exe" "${base[@]}" --resume "$tmp/ckpt/ckpt-000000000010.rsgd" --dump-step 5 "$tmp/x"
[ ! -e "$tmp/x" ] && echo "ok: no dump directory made" || fail "a dump directory was made"
: >"$tmp/file"
"$exe" "${base[@]}" --dump-step 3 "$tmp/file/d" >"$tmp/bad" 2>&1
rc=$?
[ $rc != 0 ] && grep -q "^train_mlp: error: reprosgd::Trainer::fit: cannot create the step dump directory $tmp/file/d: " "$tmp/bad" &&
  echo "ok: an uncreatable dump directory: exit $rc" || { fail "uncreatable dump directory: exit $rc"; cat "$tmp/bad"; }
"$exe" "${base[@]}" --threads 1 --dump-step 12 "$tmp/other" >/dev/null
bad "dumps of different steps" \
  "reprosgd_diff: error: A and B dump different steps or micro-batches (step 13 in A, 12 in B; 222 and 222 files)" \
  "$diff_exe" "$tmp/whole" "$tmp/other"
cp -r "$tmp/whole" "$tmp/cut"
truncate -s 200 "$tmp/cut/mb160.layer3.output.npy"
bad "a truncated array" \
  "reprosgd_diff: error: $tmp/cut/mb160.layer3.output.npy: 72 bytes of data for shape (8, 16) (want 512): truncated or damaged" \
  "$diff_exe" "$tmp/whole" "$tmp/cut"
bad "a directory that is no dump" "reprosgd_diff: error: $tmp/ckpt: not a step dump (no manifest.json)" \
  "$diff_exe" "$tmp/ckpt" "$tmp/whole"
finish
