#!/usr/bin/env bash
# fault_slow: the node a training run is on is slowed — its agent, slurmd and
# job processes moved into a cgroup (v1 cpu controller) with ~10% of a CPU.
# The agent's speed probes fall far below the median of the other nodes of
# its pool; mtcd FAILs speed.* (REBOOT), drains the node and requeues the
# job, which resumes on a healthy node; the reboot starts the node's
# processes outside the cgroup, its speed recovers and it is resumed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/fault_setup.inc"

. "$(dirname "$0")/cgroup.inc"
if ! cg_create "mtc-slow-$$" 10000; then # 10% of a CPU
    echo "1..0 # SKIP no writable cgroup cpu controller (v1 or v2)"
    exit 0
fi
# pid $1 and all its descendants (by the ppid in /proc/PID/stat).
descendants() {
    local all p
    all=$(for s in /proc/[0-9]*/stat; do
        read -r line 2>/dev/null <"$s" || continue
        p=${line%% (*}; line=${line##*) }; set -- $line; echo "$p $2"
    done)
    local todo=("$1") cur
    while [ ${#todo[@]} -gt 0 ]; do
        cur=${todo[0]}; todo=("${todo[@]:1}")
        echo "$cur"
        todo+=($(awk -v pp="$cur" '$2 == pp {print $1}' <<<"$all"))
    done
}

# speed probes at most every 2 s; the rest as every fault test
eval "fault_spec_base() $(declare -f fault_spec | tail -n +2)"
fault_spec() {
    fault_spec_base "$@"
    sed -i 's/"probeIntervalSeconds": 0/"probeIntervalSeconds": 2, "speedFailFraction": 0.3/' "$T_DIR/spec.json"
}
STEPS=${STEPS:-400} EXP=slow FAULT_CHECKS='"gpu","disk","daemon","speed"'
check "3-node cluster with agents up" fault_cluster fs
t_cluster_cleanup() { cg_remove; delete_all_clusters; }
t_extra_cleanup() { t_cluster_cleanup; }
check "spec has speed checks every 2 s" python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["healthPolicy"]
assert "speed" in p["checks"] and p["probeIntervalSeconds"] == 2, p' "$T_DIR/spec.json"
check "tiny corpus tokenized" run_corpus "$T_DIR/data"
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
fault_submit "$EXP"; run_or_stop $? "$T_DIR/run.out"
check "training with a checkpoint" fault_wait_training 20
N=$(job_node)
check "no node drained before the throttle" no_event '$1 == "VM_SLURM_DRAIN"'
pids=$( { descendants "$(cat "$CD/run/agent-$N.pid")"; descendants "$(cat "$CD/run/slurm/slurmd-$N.pid")"; job_pids "$JOB" "$CD/slurm.conf"; } | sort -u)
for p in $pids; do echo "$p" >"$CG/cgroup.procs" 2>/dev/null; done
diag "job $JOB on $N; $(wc -l <"$CG/cgroup.procs") processes (agent, slurmd, job) limited to 10% of a CPU"
check "throttled pids in the cgroup" grep -qx "$(cat "$CD/run/agent-$N.pid")" "$CG/cgroup.procs"
# the throttled agent itself runs at 10% of a CPU: its probe rounds take
# several times longer than on an idle node, more so on a loaded runner.
# The requeued job restarts within seconds of the reboot even when its old
# trainer was still writing its checkpoint: not after Slurm's two-minute
# requeue hold (FAULT_RESTART_WAIT 60; docs/faults.md)
FAULT_DETECT_WAIT=120 FAULT_RESTART_WAIT=60 fault_assert "$N" speed
check "the cgroup really throttled ($(grep nr_throttled "$CG/cpu.stat"))" \
    awk '$1 == "nr_throttled" && $2 > 0 {f = 1} END {exit !f}' "$CG/cpu.stat"
check "detection event names the pool median" has_event VM_SCAN_ERROR "$N speed\.[a-z]* failed: .* of the pool median"
check "the node's new processes run outside the throttle" \
    bash -c "! grep -qx \"\$(cat '$CD/run/agent-$N.pid')\" '$CG/cgroup.procs'"
fault_no_other_drain "$N"
done_testing
