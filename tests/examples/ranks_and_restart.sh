#!/usr/bin/env bash
# ranks_and_restart.sh EXE MPIEXEC [MPIEXEC FLAGS...] — run the MPI example EXE on 2 ranks, on 3
# ranks, and on 2 ranks stopped after time step 13 (--checkpoint FILE --stop-after 13) then
# restarted from the file on 3 ranks (--restart FILE). Each full run must exit 0 and print exactly
# one `fingerprint <32 hex digits>` line, the three lines equal; the stopped run must write its
# checkpoint and print no fingerprint.
set -uo pipefail
exe=$1; shift
launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
ref="" status=0
one_fingerprint() {  # name, then the command
  local name=$1; shift
  local out rc fp
  out=$("$@" 2>&1); rc=$?
  fp=$(printf '%s\n' "$out" | grep -E '^fingerprint [0-9a-f]{32}$')
  if [ $rc -ne 0 ] || [ "$(printf '%s\n' "$fp" | grep -c .)" -ne 1 ]; then
    echo "FAIL $name: exit $rc, want one 'fingerprint <32 hex>' line; output:"
    printf '%s\n' "$out" | tail -n 8; status=1; return
  fi
  echo "$name: $fp"
  if [ -z "$ref" ]; then ref=$fp; elif [ "$fp" != "$ref" ]; then echo "MISMATCH $name"; status=1; fi
}
one_fingerprint "2 ranks" "${launch[@]}" -n 2 "$exe"
one_fingerprint "3 ranks" "${launch[@]}" -n 3 "$exe"
out=$("${launch[@]}" -n 2 "$exe" --checkpoint "$dir/run.ckpt" --stop-after 13 2>&1); rc=$?
if [ $rc -ne 0 ] || [ ! -s "$dir/run.ckpt" ] || grep -q '^fingerprint ' <<<"$out"; then
  echo "FAIL 2 ranks stopped after time step 13: exit $rc, want a checkpoint and no fingerprint; output:"
  printf '%s\n' "$out" | tail -n 8; exit 1
fi
echo "2 ranks stopped after time step 13: checkpoint written"
one_fingerprint "3 ranks restarted from it" "${launch[@]}" -n 3 "$exe" --restart "$dir/run.ckpt"
exit $status
