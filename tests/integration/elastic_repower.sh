#!/usr/bin/env bash
# elastic_repower: the nodes of one elastic pool (examples/local-3node.json,
# min 1, max 3; elastic_resume.inc) powered down and resumed again and again
# (issue 48): 20 times the elastic nodes go back to idle~ (idle past
# suspendTimeSeconds the first time, then powered down by `scontrol update
# state=power_down`; Slurm's SuspendTimeout each time) and `srun -N3` resumes
# them, its job running on the 3 nodes within 10 s of their slurmds starting, no
# slurmd restarted for it. Then a resumed node's slurmd stopped (SIGSTOP)
# before it registers: supervise's watch asks it to register (SIGHUP at
# 5 s, which a stopped slurmd cannot answer), restarts it at 10 s
# (SLURMD_RESTART), and the job runs all the same.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/elastic_resume.inc"

RESUMES=${RESUMES:-20}
start_mtcd || { nok "mtcd started"; done_testing; }
t_extra_cleanup() { delete_all_clusters; }

# --- one cluster: the nodes powered down again, srun -N3 again, RESUMES times ---
C=er
check "cluster created for the resume cycles" mtc cluster create -f "$T_DIR/spec.json" --id "$C" || done_testing
eval "$(mtc env "$C")"
CD=$MTC_HOME/clusters/$C
T0=$SECONDS worked=0 lates=
for i in $(seq "$RESUMES"); do
    # the first time idle past SuspendTime; then, to keep the cycles short
    # (Slurm looks at idle nodes again only when a node changes, or after a
    # minute), powered down by an admin's `scontrol update state=power_down`:
    # either way Slurm runs the SuspendProgram and keeps the nodes powering
    # down (idle%) for SuspendTimeout (5 s)
    [ "$i" -gt 1 ] && scontrol update nodename=er-a3m-[1-2] state=power_down
    if ! wait_for 60 eval 'state_is er-a3m-1 "idle~" && state_is er-a3m-2 "idle~"'; then
        nok "resume $i: the elastic nodes powered down (idle~)"
        sinfo -h -N -o '%N %t' | sed 's/^/# /'
        continue
    fi
    resume_run "$C"
    lates+=" $LATE"
    if [ "$RAN" = 3 ] && fast; then worked=$((worked + 1)); fi
    check "resume $i: srun -N3 ran on the 3 nodes, ${LATE} s after the resumed slurmds started (job start; <= $START_S)" \
        eval '[ "$RAN" = 3 ] && fast'
    [ -n "$WHY" ] && diag "$WHY"
done
diag "resume cycles: $worked of $RESUMES worked in $((SECONDS - T0)) s; s from the slurmds' start to the job's start:$lates"
check_absent "no slurmd had to be restarted to register" '^SLURMD_RESTART' -- events "$C"

# --- a resumed slurmd that does not register: made to ---
# stopped once it runs (its own pid file written: the resume waits for it)
# and before Slurm took its registration: supervise's watch sends SIGHUP at
# 5 s (a stopped slurmd cannot answer it) and restarts it at 10 s; the new
# slurmd registers. Between the two is a short window: the stopper forks
# nothing while it looks (builtin reads, a 10 ms read -t on a FIFO for its
# pause), and when the slurmd registered first all the same (a loaded
# machine), it is let go, the nodes power down again and it is tried again
# (3 tries).
check "the elastic nodes powered down again" wait_for 60 eval 'state_is er-a3m-1 "idle~" && state_is er-a3m-2 "idle~"'
mkfifo "$T_DIR/tick"
OWN=$CD/run/slurm/slurmd-er-a3m-2.pid
stopper() {
    local end=$((SECONDS + 60)) p o tick
    exec {tick}<>"$T_DIR/tick"
    while [ $SECONDS -lt $end ]; do
        p= o=
        read -r p <"$CD/run/slurmd-er-a3m-2.pid" 2>/dev/null
        read -r o <"$OWN" 2>/dev/null
        if [ -n "$p" ] && [ "$p" != "$1" ] && [ "$o" = "$p" ]; then
            kill -STOP "$p" && echo "$p $(sinfo -h -N -n er-a3m-2 -o %t)" >"$T_DIR/stopped"
            return
        fi
        read -r -t 0.01 -u "$tick"
    done
}
for try in 1 2 3; do
    rm -f "$T_DIR/stopped"
    old=$(cat "$CD/run/slurmd-er-a3m-2.pid" 2>/dev/null)
    stopper "$old" &
    STOPPER=$!
    track_pid "$STOPPER"
    T0=$SECONDS
    timeout 90 srun -N3 sh -c 'echo "$SLURMD_NODENAME"' >"$T_DIR/srun.out" 2>&1
    wait "$STOPPER"
    read -r SP SSTATE <"$T_DIR/stopped" 2>/dev/null || SP= SSTATE=
    [[ ${SSTATE:-} == *"#" ]] || [ -z "$SP" ] || [ $try = 3 ] && break
    diag "try $try: er-a3m-2's slurmd registered ($SSTATE) before it was stopped: let go, powered down, again"
    kill -CONT "$SP" 2>/dev/null
    scontrol update nodename=er-a3m-[1-2] state=power_down
    wait_for 60 eval 'state_is er-a3m-1 "idle~" && state_is er-a3m-2 "idle~"' || break
done
check "er-a3m-2's slurmd was stopped before it registered (${SSTATE:-?}: powering up)" \
    eval '[ -n "${SP:-}" ] && [[ ${SSTATE:-} == *"#" ]]'
diag "srun ended $((SECONDS - T0)) s after it was started"
check "the job ran on the 3 nodes all the same" eval '[ "$(grep -x "er-a3m-[0-2]" "$T_DIR/srun.out" | sort -u | wc -l)" = 3 ]'
check "a SLURMD_RESTART event says why" eval 'events "$C" | grep -q "^SLURMD_RESTART er-a3m-2 .*without Slurm taking its registration"'
check "the stopped slurmd is gone" eval '[ -n "$SP" ] && ! kill -0 "$SP" 2>/dev/null'
check "the node is up with a new slurmd" eval 'p=$(cat "$CD/run/slurmd-er-a3m-2.pid") && [ "$p" != "$SP" ] && kill -0 "$p" && ! state_is er-a3m-2 "idle#"'
check "mtcd logged the nudge (SIGHUP) before the restart" grep -q "er-a3m-2 still powering up .* asking slurmd to register again" "$MTC_HOME/log/mtcd.log"
done_testing
