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
