#!/usr/bin/env bash
# same_fingerprint.sh EXE [FLAG] — run the example EXE with 1 and with 2 Kokkos threads (FLAG=N,
# FLAG default --kokkos-threads, Kokkos >= 3.7: --kokkos-num-threads); each run must exit 0 and
# print exactly one `fingerprint <32 hex digits>` line, and the two lines must be equal.
set -uo pipefail
exe=$1 flag=${2:---kokkos-threads}
ref="" status=0
for threads in 1 2; do
  out=$("$exe" "$flag=$threads" 2>&1); rc=$?
  fp=$(printf '%s\n' "$out" | grep -E '^fingerprint [0-9a-f]{32}$')
  if [ $rc -ne 0 ] || [ "$(printf '%s\n' "$fp" | grep -c .)" -ne 1 ]; then
    echo "FAIL threads=$threads: exit $rc, want one 'fingerprint <32 hex>' line; output:"
    printf '%s\n' "$out" | tail -n 5; status=1; continue
  fi
  echo "threads=$threads $fp"
  if [ -z "$ref" ]; then ref=$fp; elif [ "$fp" != "$ref" ]; then echo "MISMATCH threads=$threads"; status=1; fi
done
exit $status
