#!/usr/bin/env bash
# hosts_faults: hardware faults on the hosts of a cluster on hosts, repaired
# by mtcd with a training run on it. ECC errors on a host's (emulated) GPU:
# the node is drained, its job requeued and resumed from a checkpoint; the
# host is rebooted (hostRemediation.rebootCommand: here a request the test
# serves like a BMC would, with testhost_reboot), still fails, has no reimage
# command, and the node moves to a spare host under the same name; the old
# host is quarantined (mtc cluster hosts). Then a host's link goes down: Slurm
# sets the node DOWN, its job is requeued, the node moves to the second spare.
# Delete leaves nothing on any host, quarantined ones included.
# test: uses mtc-dirs (its test hosts bind-mount their own dirs on this machine's
# /var/lib/mtc, /etc/mtc and /run/mtc: deb_package's purge removing them unmounts those)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
. "$(dirname "$0")/hosts_setup.inc"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/fault_setup.inc"

STEPS=${STEPS:-500} EXP=hecc C=hf # long enough to be running at the fault (ckpt 20)
export C
t_extra_cleanup() {
    hosts_bmc_stop
    hosts_cleanup
}
# Host index of address $1.
host_index() {
    local i
    for i in 1 2 3 4; do [ "${TESTHOSTS_ADDRS[$i]}" = "$1" ] && echo "$i"; done
}
# The host node $1 runs on, from the API.
node_host() {
    mtc cluster get "$C" --json | python3 -c '
import json, sys
for n in json.load(sys.stdin)["clusterStatus"]["nodesStatus"]:
    if n["instanceName"] == sys.argv[1]: print(n.get("host", ""))' "$1"
}
host_role() { # address → role in `mtc cluster hosts`
    mtc cluster hosts "$C" --json | python3 -c '
import json, sys
print(" ".join(h["role"] for h in json.load(sys.stdin) if h["host"] == sys.argv[1]))' "$1"
}

check "4 test hosts up (2 for nodes, 2 spares)" testhosts_up 4
[ "$T_FAILED" -eq 0 ] || done_testing
H=("" "${TESTHOSTS_ADDRS[@]}")
hosts_bmc_start 4 # reboot requests of the spec's rebootCommand

PORT=$(free_port)
check "mtcd starts, listening on the bridge" start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT"
hosts_fault_spec >"$T_DIR/spec.json"
out=$(mtc cluster create -f "$T_DIR/spec.json" --id "$C" 2>&1)
check "cluster on 2 hosts with 2 spares" grep -q "done: cluster $C RUNNING (2 nodes" <<<"$out"
eval "$(mtc env "$C")"
UID_=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["uid"])' "$MTC_HOME/clusters/$C/hosts.json")

check "tiny corpus tokenized" run_corpus "$T_DIR/data"
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
fault_submit "$EXP"
run_or_stop $? "$T_DIR/run.out"
check "training on a host, with a checkpoint" fault_wait_training 20
N=$(job_node)
NH=$(node_host "$N")
NI=$(host_index "$NH")
diag "job $JOB on $N (host $NI, $NH); ECC errors on its GPU"
testhost_exec "$NI" sh -c "printf 'count 1\ngpu 0 ecc=4\n' >>/var/lib/mtc/$UID_/hw/nvml.state"
fault_assert "$N" gpu.ecc
check "detection event names the ECC errors" has_event VM_CONTINUOUS_GPU_ERROR "$N gpu.ecc failed: GPU 0: 4 volatile"
check "the host was rebooted by its reboot command" grep -q "^${TESTHOSTS_NAMES[$NI]} " "$T_DIR/rebooted"
check "after the reboot it still failed" has_event VM_HEALTH_CHECK_FAILED "$N after reboot: gpu.ecc"
check "no reimage command: escalated to replace" has_event VM_ACTION_FAILED "$N reimage failed: no hostRemediation.reimageCommand"
check "replaced (VM_REPORT_AND_REPLACEMENT)" has_event VM_REPORT_AND_REPLACEMENT "$N"
on_host() { [ "$(node_host "$1")" = "$2" ]; }
check "$N now runs on the first spare (${H[3]})" wait_for 20 on_host "$N" "${H[3]}"
out=$(srun -N1 -w "$N" hostname 2>&1)
check "srun -w $N runs on the spare's hostname" test "$out" = "${TESTHOSTS_NAMES[3]}"
out=$(mtc cluster hosts "$C")
diag "$out"
check "mtc cluster hosts lists the faulty host as quarantined" test "$(host_role "$NH")" = quarantined
check "  with the reason" grep -qE "${NH//./\\.} .* quarantined +$N replaced by ${H[3]//./\\.}" <<<"$out"
check "  and its daemons stopped" wait_for 20 host_quiet "$NI"
fault_no_other_drain "$N"

# --- a host's link goes down ---------------------------------------------------
O=$( [ "$N" = "$C-gpu-0" ] && echo "$C-gpu-1" || echo "$C-gpu-0" )
OH=$(node_host "$O")
OI=$(host_index "$OH")
job2=$(sbatch --parsable --requeue -N1 -w "$O" -o /dev/null --wrap 'sleep 600')
check "a job on $O (host $OI)" wait_for 30 bash -c "squeue -h -j $job2 -t RUNNING | grep -q ."
diag "link of host $OI ($OH) down at $(date +%T)"
check "host $OI: link down" testhost_link "$OI" down
node_down() { sinfo -h -N -n "$O" -o %t | grep -qE 'down|drain|fail'; }
check "Slurm sets $O down (SlurmdTimeout)" wait_for 120 node_down
requeued() { [ "$(scontrol show job "$job2" | grep -o 'Restarts=[0-9]*' | cut -d= -f2)" -ge 1 ]; }
check "the node's job requeued" wait_for 90 requeued
check "$O replaced onto the second spare" wait_for 150 has_event VM_RESUMED "$O"
check "  (VM_REPORT_AND_REPLACEMENT)" has_event VM_REPORT_AND_REPLACEMENT "$O"
check "$O now on ${H[4]}" wait_for 20 on_host "$O" "${H[4]}"
check "  its old host quarantined" test "$(host_role "$OH")" = quarantined
events | sed 's/^/# /' | tail -12
scancel "$job2" 2>/dev/null
check "host $OI: link up again" testhost_link "$OI" up
check "  mtcd stops the quarantined host's daemons once it answers" wait_for 60 host_quiet "$OI"
for p in $(host_procs "$OI"); do diag "left on host $OI: $p $(tr '\0' ' ' </proc/$p/cmdline)"; done

out=$(mtc cluster delete "$C" 2>&1)
check "delete" grep -q "done: cluster deleted" <<<"$out"
for i in 1 2 3 4; do
    check "host $i: nothing left (quarantined ones too)" host_clean "$i"
done
done_testing
