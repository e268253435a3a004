#!/usr/bin/env bash
# Operations survive kill -9 of mtcd: mid-create and mid-delete, a restarted
# mtcd finishes the operation (or fails it with a reason) and no daemon is
# orphaned; a restarted mtcd adopts a running cluster without double-starting.
. "$(dirname "$0")/lib.sh"

t_extra_cleanup() { delete_all_clusters; }
M() { mtc --home "$MTC_HOME" "$@"; }
count() { pids_under "$MTC_HOME/clusters/$1" | wc -l; }
# long-running daemons only (not a health check or prolog running just now)
# kill -9 is asynchronous: restart only once the old mtcd (and its lock) is gone
kill_mtcd() { kill -9 "$MTCD_PID"; wait_for 10 bash -c "! kill -0 $MTCD_PID 2>/dev/null"; }
daemons() { daemon_pids "$MTC_HOME/clusters/$1" "(munged|slurmctld|slurmd|mtc-agent run) " | wc -l; }

check "mtcd starts" start_mtcd
op=$(M cluster create -f "$ROOT/examples/local-2node.json" --id crash --no-wait --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')
check "create accepted" test -n "$op"
wait_for 20 test -e "$MTC_HOME/clusters/crash/slurm.conf"
kill_mtcd
diag "killed mtcd mid-create ($(count crash) cluster processes running)"
check "mtcd restarts" start_mtcd
out=$(M operations wait "$op" --timeout 120 2>&1)
diag "$out"
check "the create operation finishes after the restart" grep -q "DONE" <<<"$out"
check "cluster RUNNING" bash -c "mtc --home '$MTC_HOME' cluster list | grep -qE '^crash +RUNNING'"
n=$(daemons crash)
check "one munged + slurmctld + 2 slurmd + 2 mtc-agent, no duplicates ($n)" test "$n" -eq 6
(eval "$(M env crash)"; timeout 60 srun -N2 true)
check "jobs run after recovery" test $? -eq 0

kill_mtcd
check "mtcd restarts again" start_mtcd
# the adoption is the first supervision pass after the start: two whole
# passes, then a double start would show
check "two supervision passes over the adopted cluster" \
    wait_for 100 eval '[ "$(metric "mtc_supervision_passes_total{cluster=\"crash\"}")" -ge 2 ]'
check "adoption does not double-start daemons" test "$(daemons crash)" -eq 6

op=$(M cluster delete crash --no-wait --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')
kill_mtcd
check "mtcd restarts after kill mid-delete" start_mtcd
out=$(M operations wait "$op" --timeout 120 2>&1)
check "the delete operation finishes" grep -q "DONE" <<<"$out"
check "no orphaned daemon" test "$(count crash)" -eq 0
check "cluster files removed" test ! -e "$MTC_HOME/clusters/crash"
done_testing
