#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Tests of scripts/relaunch.sh against a fake job. usage: relaunch_test.sh PATH/TO/relaunch.sh
set -u
relaunch=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
check() {  # check NAME EXPECTED_STATUS EXPECTED_LOG -- relaunch args...
  local name=$1 want_rc=$2 want_log=$3
  shift 4
  : >"$dir/log"
  bash "$relaunch" "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  local got
  got=$(tr '\n' ' ' <"$dir/log")
  if [[ $rc -ne $want_rc || $got != "$want_log" ]]; then
    echo "FAIL $name: status $rc (expected $want_rc), runs '$got' (expected '$want_log')"
    sed 's/^/  stderr: /' "$dir/err"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}
# The fake job logs "ranks/attempt/argument" and exits 75 while it has more ranks than $dir/ok_at.
cat >"$dir/job.sh" <<JOB
#!/usr/bin/env bash
echo "\$REPROSGD_RANKS/\$REPROSGD_ATTEMPT/\$1" >>"$dir/log"
[[ \$REPROSGD_RANKS -le \$(cat "$dir/ok_at") ]] && exit \${2:-0}
exit 75
JOB
echo 4 >"$dir/ok_at"
check "no restart needed" 0 "4/1/n4 " -- -n 4 -- bash "$dir/job.sh" "n{ranks}"
check "the job's own failure is passed through" 3 "4/1/x " -- -n 4 -- bash "$dir/job.sh" x 3
echo 2 >"$dir/ok_at"
check "two restarts, fewer ranks each time" 0 "4/1/n4 3/2/n3 2/3/n2 " -- -n 4 -- bash "$dir/job.sh" "n{ranks}"
check "attempts are bounded" 75 "4/1/a 3/2/a " -- -n 4 --attempts 2 -- bash "$dir/job.sh" a
check "never below --min-ranks" 75 "4/1/m 3/2/m " -- -n 4 --min-ranks 3 --attempts 5 -- bash "$dir/job.sh" m
echo 1 >"$dir/ok_at"
cat >"$dir/die.sh" <<JOB
#!/usr/bin/env bash
echo "\$REPROSGD_RANKS" >>"$dir/log"
[[ \$REPROSGD_RANKS -le 3 ]] && exit 0
exit 137
JOB
check "--retry-on another code" 0 "4 3 " -- -n 4 --retry-on 137 -- bash "$dir/die.sh"
check "137 is not retried by default" 137 "4 " -- -n 4 -- bash "$dir/die.sh"
# 76: MPI's start-up did not finish (reprosgd::startup_failure_exit_code): relaunched by default.
cat >"$dir/startup.sh" <<JOB
#!/usr/bin/env bash
echo "\$REPROSGD_RANKS" >>"$dir/log"
[[ \$REPROSGD_RANKS -le 3 ]] && exit 0
exit 76
JOB
check "76 (start-up failed) is retried by default" 0 "4 3 " -- -n 4 -- bash "$dir/startup.sh"
# --expect: a status 0 without the expected line is a failure (70); with it, believed.
cat >"$dir/quiet.sh" <<JOB
#!/usr/bin/env bash
echo "\$REPROSGD_RANKS" >>"$dir/log"
[[ \$1 == say ]] && echo "fingerprint 0123"
exit 0
JOB
check "--expect: exit 0 without the line is 70" 70 "4 " -- -n 4 --expect '^fingerprint ' -- bash "$dir/quiet.sh" hush
check "--expect: exit 0 with the line" 0 "4 " -- -n 4 --expect '^fingerprint ' -- bash "$dir/quiet.sh" say
cat >"$dir/late.sh" <<JOB
#!/usr/bin/env bash
echo "\$REPROSGD_RANKS" >>"$dir/log"
[[ \$REPROSGD_RANKS -le 3 ]] && echo "fingerprint 4567" && exit 0
exit 76
JOB
check "--expect: retries still relaunch" 0 "4 3 " -- -n 4 --expect '^fingerprint ' -- bash "$dir/late.sh"
check "usage error: --expect without a pattern" 2 "" -- -n 4 --expect
check "usage error: no command" 2 "" -- -n 4 --
check "usage error: bad count" 2 "" -- -n four -- true
check "usage error: -n below --min-ranks" 2 "" -- -n 1 --min-ranks 2 -- true
check "usage error: unknown option" 2 "" -- -x -- true
if [[ $failures -ne 0 ]]; then
  echo "$failures relaunch.sh test(s) failed"
  exit 1
fi
echo "all relaunch.sh tests passed"
