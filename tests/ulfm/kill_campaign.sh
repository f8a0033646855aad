#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kill_campaign.sh — SIGKILL ranks of a running 4-rank `train_mlp --fault-tolerance shrink` job at
# random instants, from launch to the end, as an operator's watcher would, and classify every trial.
#
# usage: kill_campaign.sh --mpiexec MPIEXEC --train TRAIN_MLP [--parallel data,model,hybrid]
#                         [--trials N] [--double N] [--seed S] [--hang S] [--startup-timeout S]
#                         [--allow-ompi-fatal] [--log FILE] [--spares N] [--window A,B] [--epochs N]
#
# For each --parallel mode: one failure-free run gives the reference fingerprint and the run's
# length L; then N trials kill one random rank (rank 0 included) at a uniform instant in [0, 1.2 L]
# (in [A, B] ms after launch with --window A,B, e.g. 0,250 to aim at the start-up), and --double
# more trials kill two random ranks 0-50 ms apart. Each trial is one of
#   ok        finished with the reference fingerprint (the kill may have come after the end); the
#             summary's "in_setup" counts those among them that lost a rank while the ranks set up
#             their communicators and trained on the survivors ("while the ranks set up")
#   startup   ended during MPI's start-up with exit 76 and a survivor's one line (relaunchable):
#             inside MPI_Init (its deadline, an error it returned or a crash inside it: the start-up
#             guard's "MPI_Init_thread did not finish / failed / crashed"), or in the set-up
#             collectives after it (the policy's MPI_Comm_dup or split: "failed while the ranks were
#             setting up")
#   policy    ended with exit 7 and one of the documented errors of model and hybrid parallelism:
#             a shard lost with every copy of it (its buddy's, another replica's) and no checkpoint
#             to fall back to (docs/fault_tolerance.md, "What is missing")
#   ompi_fatal  a survivor was aborted by Open MPI itself: its ob1 transport ends the process through
#             the fatal error handler, whatever handler the communicator has, when a send whose
#             request was already freed (ULFM's own fire-and-forget messages) fails ("Send error
#             after request freed"); the launcher then leaves the other survivors behind, which this
#             script kills. Not survived, and not ours to fix: a failure unless --allow-ompi-fatal.
#   WRONG     finished with another fingerprint
#   HANG      still running after --hang seconds (default 60); killed
#   NOFP0     no fingerprint yet exit status 0 (a launcher that hides a failure)
#   ERROR     any other exit without a fingerprint (the status and the first line kept)
#   LEFTOVER  a process of the trial still alive after it ended
# --spares N: the job has N spare ranks besides its 4 workers (train_mlp --spares: after a failure
# a spare joins and the job grows back to 4); the victims are drawn from every rank, spares included.
# --epochs N: the job's length (default 40 epochs of 32 steps; CTest runs 20 to halve CI's time).
# The campaign fails (exit 1) on any WRONG, HANG, NOFP0, ERROR or LEFTOVER. --log FILE keeps
# every trial's output. Deterministic given --seed (the instants and victims; not the scheduler).
set -uo pipefail
SCRIPT_TAG=kill_campaign
source "$(dirname "$0")/../../scripts/lib.sh"  # remove_stale_mpi_sessions
mpiexec= train= modes=data,model,hybrid trials=20 double=4 seed=1 hang=60 startup=5 log= allow_fatal=0 spares=0 window= epochs=40
while [[ $# -gt 0 ]]; do
  case $1 in
    --mpiexec) mpiexec=$2; shift 2 ;;
    --train) train=$2; shift 2 ;;
    --parallel) modes=$2; shift 2 ;;
    --trials) trials=$2; shift 2 ;;
    --double) double=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --hang) hang=$2; shift 2 ;;
    --startup-timeout) startup=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    --allow-ompi-fatal) allow_fatal=1; shift ;;
    --spares) spares=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    *) echo "kill_campaign.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ -x $mpiexec && -x $train ]] || { echo "kill_campaign.sh: give --mpiexec and --train (executables)" >&2; exit 2; }
export OMP_NUM_THREADS=1 OMP_PROC_BIND=false OMP_WAIT_POLICY=passive
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
[[ -n $log ]] && : >"$log"
RANDOM=$seed

now_ms() { date +%s%3N; }
# The job: 4 ranks, shrink, small enough that a trial takes a few seconds on 2 cores.
# The failure-free run gets a 30 s start-up deadline (a slow start there is no trial); the trials get
# --startup-timeout, which is what a kill inside MPI_Init costs them.
job() {  # MODE OUT STARTUP_TIMEOUT; sets pid (the launcher, a session leader)
  local mode=$1 out=$2 init_deadline=$3 extra=()
  [[ $mode != data ]] && extra=(--buddy-every 5)
  ((spares > 0)) && extra+=(--spares "$spares")
  setsid "$mpiexec" --oversubscribe --with-ft ulfm -n $((4 + spares)) "$train" --data synthetic --synthetic-train 1024 \
    --synthetic-test 128 --layers 784,64,64,10 --epochs "$epochs" --batch 32 --micro-batch 8 --threads 1 --seed 3 \
    --fault-tolerance shrink --parallel "$mode" "${extra[@]}" --startup-timeout "$init_deadline" --quiet >"$out" 2>&1 &
  pid=$!
}
# PIDs of the job's ranks by MPI_COMM_WORLD rank ("rank pid" lines), read from their environment.
ranks_of() {  # SESSION_ID
  local p
  for p in $(pgrep -s "$1" -f "$train"); do
    local r
    r=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [[ -n $r ]] && echo "$r $p"
  done
}

# Whether a process of the session still runs (zombies left to an init that does not reap are not).
alive_in() { ps -s "$1" -o stat= 2>/dev/null | grep -qv '^Z'; }

bad=0
declare -A count
for mode in ${modes//,/ }; do
  t0=$(now_ms)
  job "$mode" "$tmp/ref" 30
  wait "$pid"; rc=$?
  length=$(($(now_ms) - t0))
  ref=$(sed -n 's/^fingerprint //p' "$tmp/ref")
  if [[ $rc -ne 0 || -z $ref ]]; then
    echo "kill_campaign: $mode: the failure-free run failed (exit $rc):"; cat "$tmp/ref"; exit 1
  fi
  echo "kill_campaign: $mode: failure-free fingerprint $ref in $length ms"
  for ((i = 0; i < trials + double; i++)); do
    kills=1; ((i >= trials)) && kills=2
    if [[ -n $window ]]; then  # --window A,B: a uniform instant in [A, B] ms
      delay=$((${window%,*} + (RANDOM * 32768 + RANDOM) % (${window#*,} - ${window%,*} + 1)))
    else
      delay=$(((RANDOM * 32768 + RANDOM) % (length * 12 / 10 + 1)))
    fi
    gap=$((RANDOM % 51))
    pick=$RANDOM pick2=$RANDOM
    t0=$(now_ms)
    job "$mode" "$tmp/out" "$startup"
    sid=$pid  # setsid made the launcher a session leader
    sleep "$(awk -v d="$delay" 'BEGIN { print d / 1000 }')"
    victims=
    mapfile -t live < <(ranks_of "$sid" | sort -n)
    if ((${#live[@]} > 0)); then
      v=${live[$((pick % ${#live[@]}))]}
      kill -9 "${v#* }" 2>/dev/null && victims="rank ${v% *}"
      if ((kills == 2 && ${#live[@]} > 1)); then
        sleep "$(awk -v g="$gap" 'BEGIN { print g / 1000 }')"
        w=${live[$(((pick % ${#live[@]} + 1 + pick2 % (${#live[@]} - 1)) % ${#live[@]}))]}
        kill -9 "${w#* }" 2>/dev/null && victims="$victims, rank ${w% *} ${gap} ms later"
      fi
    fi
    # Wait for the launcher, at most --hang seconds.
    deadline=$(($(now_ms) + hang * 1000))
    while kill -0 "$pid" 2>/dev/null && (($(now_ms) < deadline)); do sleep 0.1; done
    verdict=
    if kill -0 "$pid" 2>/dev/null; then
      verdict=HANG
      pkill -9 -s "$sid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null; rc=$?
    # A launcher killed here leaves its session directory, which would make a later launcher given
    # its pid fail to start (scripts/lib.sh).
    remove_stale_mpi_sessions
    sleep 0.2
    if grep -aq "error after request freed" "$tmp/out"; then
      [[ -z $verdict ]] && verdict=ompi_fatal
    fi
    if alive_in "$sid"; then
      [[ -z $verdict ]] && verdict=LEFTOVER
      pkill -9 -s "$sid" 2>/dev/null
    fi
    fp=$(sed -n 's/^fingerprint //p' "$tmp/out" | head -n 1)
    ((allow_fatal)) && accepted="ok startup policy ompi_fatal" || accepted="ok startup policy"
    if [[ -z $verdict ]]; then
      if [[ -n $fp ]]; then
        [[ $fp == "$ref" ]] && verdict=ok || verdict=WRONG
        if [[ $verdict == ok ]] && grep -aq "while the ranks set up their communicators" "$tmp/out"; then
          count[in_setup]=$((${count[in_setup]:-0} + 1))
          victims="$victims, survived in the set-up"
        fi
      elif ((rc == 76)) && grep -aq -e "reprosgd::MpiEnvironment: MPI_Init_thread " \
             -e "failed while the ranks were setting up" "$tmp/out"; then
        verdict=startup
      elif ((rc == 7)) && grep -q -e "no checkpoint directory is set to fall back to" \
             -e "holds no usable checkpoint" "$tmp/out"; then
        verdict=policy
      elif ((rc == 0)); then
        verdict=NOFP0
      else
        verdict=ERROR
      fi
    fi
    count[$verdict]=$((${count[$verdict]:-0} + 1))
    line="$mode trial $((i + 1)): kill at ${delay} ms (${victims:-no rank alive}): $verdict, exit $rc, $(($(now_ms) - t0)) ms"
    if [[ " $accepted " != *" $verdict "* ]]; then
      bad=$((bad + 1))
      line="$line | $(grep -a -v -e '^ *$' -e WARNING -e 'Detected:' -e 'Requested:' -e '^fingerprint' "$tmp/out" | head -n 2 | tr '\n' '|' | cut -c1-240)"
    fi
    echo "$line"
    if [[ -n $log ]]; then { echo "=== $line"; cat "$tmp/out"; } >>"$log"; fi
  done
done
summary=
for k in ok in_setup startup policy ompi_fatal WRONG HANG NOFP0 ERROR LEFTOVER; do summary="$summary $k ${count[$k]:-0}"; done
echo "kill_campaign:$summary"
((bad == 0)) || { echo "kill_campaign: FAILED ($bad bad trials)"; exit 1; }
echo "kill_campaign: PASSED"
