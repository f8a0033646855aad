#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Relaunch a job on fewer ranks while it asks to be restarted (the RestartFromCheckpoint policy).
#
# usage: scripts/relaunch.sh -n RANKS [--min-ranks N] [--attempts N] [--retry-on CODE]... [--expect REGEX]
#                            -- COMMAND [ARGS...]
#
# Runs COMMAND with every argument "{ranks}" (or containing it) replaced by the current rank
# count, and with REPROSGD_RANKS (the rank count) and REPROSGD_ATTEMPT (1, 2, ...) in its
# environment. While it exits with 75 (reprosgd::restart_exit_code, EX_TEMPFAIL), 76
# (reprosgd::startup_failure_exit_code: MPI's start-up did not finish, a rank died while the job
# started) or one of the --retry-on codes, it is run again with one rank fewer, at most --attempts times in all
# (default 3) and never below --min-ranks (default 1). The program resumes from its newest valid
# checkpoint; checkpoints do not depend on the rank count, so the result has the same bits.
#
# Exit status: the command's last status; 2 for a usage error. Giving up while the command
# still asks for a restart exits with that status and says why on stderr.
#
# --expect REGEX (an extended regular expression, e.g. '^fingerprint '): a status 0 is believed
# only if a line of the command's standard output (passed through unchanged) matches it; else
# relaunch.sh says so and exits 70 (EX_SOFTWARE). Open MPI's launcher can exit 0 when ranks died
# and nobody finished (docs/fault_tolerance.md), so the job's own last line is the better witness.
#
# Example (Open MPI; the job exits 75 when a rank dies, see docs/fault_tolerance.md):
#   scripts/relaunch.sh -n 4 -- mpiexec -n {ranks} --with-ft ulfm ./train --resume latest
set -u
usage() {
  echo "usage: relaunch.sh -n RANKS [--min-ranks N] [--attempts N] [--retry-on CODE]... [--expect REGEX] -- COMMAND [ARGS...]" >&2
  exit 2
}
is_count() { [[ $1 =~ ^[0-9]+$ ]]; }
ranks=
min_ranks=1
attempts=3
retry_codes=(75 76)
expect=
while [[ $# -gt 0 ]]; do
  case $1 in
    -n | --ranks) [[ $# -ge 2 ]] || usage; ranks=$2; shift 2 ;;
    --min-ranks) [[ $# -ge 2 ]] || usage; min_ranks=$2; shift 2 ;;
    --attempts) [[ $# -ge 2 ]] || usage; attempts=$2; shift 2 ;;
    --retry-on) [[ $# -ge 2 ]] || usage; retry_codes+=("$2"); shift 2 ;;
    --expect) [[ $# -ge 2 && -n $2 ]] || usage; expect=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "relaunch.sh: unknown option '$1'" >&2; usage ;;
  esac
done
[[ $# -gt 0 ]] || { echo "relaunch.sh: no command after --" >&2; usage; }
for v in "$ranks" "$min_ranks" "$attempts"; do
  is_count "$v" || { echo "relaunch.sh: '$v' is not a count" >&2; usage; }
done
for c in "${retry_codes[@]}"; do
  is_count "$c" || { echo "relaunch.sh: --retry-on '$c' is not an exit status" >&2; usage; }
done
((ranks >= 1 && min_ranks >= 1 && attempts >= 1)) || { echo "relaunch.sh: -n, --min-ranks and --attempts must be >= 1" >&2; usage; }
((ranks >= min_ranks)) || { echo "relaunch.sh: -n $ranks is below --min-ranks $min_ranks" >&2; usage; }

attempt=1
while :; do
  cmd=()
  for a in "$@"; do cmd+=("${a//\{ranks\}/$ranks}"); done
  echo "relaunch.sh: attempt $attempt of $attempts on $ranks ranks: ${cmd[*]}" >&2
  if [[ -z $expect ]]; then
    REPROSGD_RANKS=$ranks REPROSGD_ATTEMPT=$attempt "${cmd[@]}"
    rc=$?
  else
    out=$(mktemp)
    REPROSGD_RANKS=$ranks REPROSGD_ATTEMPT=$attempt "${cmd[@]}" | tee "$out"
    rc=${PIPESTATUS[0]}
    if ((rc == 0)) && ! grep -Eq -- "$expect" "$out"; then
      rm -f "$out"
      echo "relaunch.sh: the command exited 0 but printed no line matching '$expect': it did not finish; exiting with 70" >&2
      exit 70
    fi
    rm -f "$out"
  fi
  retry=0
  for c in "${retry_codes[@]}"; do ((rc == c)) && retry=1; done
  ((retry)) || exit "$rc"
  if ((attempt >= attempts)); then
    echo "relaunch.sh: exit status $rc asks for a restart, but all $attempts attempts are used; giving up" >&2
    exit "$rc"
  fi
  if ((ranks <= min_ranks)); then
    echo "relaunch.sh: exit status $rc asks for a restart, but $ranks ranks is the minimum (--min-ranks); giving up" >&2
    exit "$rc"
  fi
  ranks=$((ranks - 1))
  attempt=$((attempt + 1))
done
