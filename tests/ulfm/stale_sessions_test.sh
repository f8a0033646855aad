#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/lib.sh's remove_stale_mpi_sessions: the session directory of a launcher that no longer
# runs is removed (a later launcher given its pid would fail to start: "The PMIx server's listener
# thread failed to start", exit 213); a running launcher's, a non-pid name and another file stay.
# usage: stale_sessions_test.sh PATH/TO/scripts/lib.sh
set -u
SCRIPT_TAG=stale_sessions_test
source "$1"
TMPDIR=$(mktemp -d)
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
dead=$(sh -c 'echo $$')  # a process that has ended
while [ -e "/proc/$dead" ]; do dead=$(sh -c 'echo $$'); done
sleep 30 &
live=$!
mkdir -p "$TMPDIR/ompi.$dead/0" "$TMPDIR/ompi.$live" "$TMPDIR/ompi.vm.0" "$TMPDIR/ompi.12x"
touch "$TMPDIR/ompi.$dead/pmix.vm.tool" "$TMPDIR/other"
remove_stale_mpi_sessions
kill "$live" 2>/dev/null
failures=0
expect() {  # expect present|absent NAME
  if { [ "$1" = present ] && [ ! -e "$TMPDIR/$2" ]; } || { [ "$1" = absent ] && [ -e "$TMPDIR/$2" ]; }; then
    echo "FAIL: $2 should be $1"
    failures=$((failures + 1))
  else
    echo "ok: $2 $1"
  fi
}
expect absent "ompi.$dead"
expect present "ompi.$live"
expect present ompi.vm.0
expect present ompi.12x
expect present other
exit $((failures > 0))
