#!/usr/bin/env bash
# same_fingerprint.sh ARGS LABEL|COMMAND... — run each command with ARGS and require that the last
# line of every run is the same `fingerprint <hex>` line. Prints a table; exit 1 on any difference.
set -uo pipefail
args=$1; shift
ref="" status=0
for spec in "$@"; do
  label=${spec%%|*} cmd=${spec#*|}
  out=$(OMP_PROC_BIND=false $cmd $args 2>&1); rc=$?
  last=$(printf '%s\n' "$out" | tail -n 1)
  if [ $rc -ne 0 ] || [[ "$last" != fingerprint\ * ]]; then
    echo "FAIL $label: exit $rc, last line: $last"; printf '%s\n' "$out" | tail -n 5; status=1; continue
  fi
  printf '%-16s %s\n' "$label" "$last"
  if [ -z "$ref" ]; then ref=$last; elif [ "$last" != "$ref" ]; then echo "MISMATCH $label"; status=1; fi
done
[ $status -eq 0 ] && echo "all $# runs: $ref"
exit $status
