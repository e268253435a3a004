#!/usr/bin/env bash
# hosts_restore: the head of a cluster on hosts lost and restored on another
# machine (issue 43, point 3) — a cluster on 3 test hosts, its slurmctld state
# on shared storage (controller.stateSaveLocation), accounting on, runs a job of numbered
# steps; mtcd's state is backed up; mtcd, slurmctld and munged of the
# controller are killed -9 and its home moved away (the machine is lost);
# the backup is restored into a new home and mtcd started on a second
# address of the bridge (another machine, to the hosts): the RESTORED event
# names the update that moves the controller, which rewrites slurm.conf's
# SlurmctldHost, the hosts' configuration (pushed to the running slurmds)
# and the agents' mtcd address; the cluster is RUNNING, munged and slurmctld
# run again (a host's munged, in another mount namespace with the same argv,
# is not taken for the controller's), `srun -N2 hostname` works, the job
# that ran through the loss completes with every step exactly once, and
# sacct lists the jobs from before the backup (the accounting database came
# in the backup as a dump, loaded into the new machine's) and that one.
# test: uses mtc-dirs (its test hosts bind-mount their own dirs on this machine's
# /var/lib/mtc, /etc/mtc and /run/mtc: deb_package's purge removing them unmounts those)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
. "$(dirname "$0")/hosts_setup.inc"
D=$T_DIR

t_extra_cleanup() { hosts_cleanup; }
check "3 test hosts up" testhosts_up 3
[ "$T_FAILED" -eq 0 ] || done_testing
PORT=$(free_port)
check "mtcd starts, listening on the bridge for the agents" start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT"
hosts_cpu_spec "restored" 2 3 | hosts_spec_edit '
s["controller"]["stateSaveLocation"] = sys.argv[1]
s["orchestratorSpec"]["slurmSpec"]["accounting"] = {"enabled": True}' "$D/slurm-state" >"$D/spec.json"
check "cluster on 3 hosts created, slurmctld's state on shared storage, accounting on" \
    mtc cluster create -f "$D/spec.json" --id hz
[ "$T_FAILED" -eq 0 ] || done_testing
eval "$(mtc env hz)"
check "srun -N2 hostname before the loss" bash -c "srun -N2 hostname | sort -u | wc -l | grep -qx 2"
in_sacct() { sacct -n -X -P -j "$1" -o jobid,jobname,state 2>/dev/null | grep -qx "$1|$2|COMPLETED"; }
check "  sacct lists it (job 1)" wait_for 60 in_sacct 1 hostname
hosts_steps_job "$D/jobs"
job=$(sbatch --parsable -N1 -w hz-cpu-0 -o "$D/jobs/steps-%j.out" "$D/jobs/steps.sh" 2>&1)
check "a job of 8 steps queued ($job)" grep -qE '^[0-9]+$' <<<"$job"
# slurmctld saves its queue a few seconds after a change: a job younger
# than that is not in the state a kill -9 leaves (Slurm's own limit)
check "  its third step ran" wait_for 60 grep -qx "step 3" "$D/jobs/steps.txt"
check "a backup of mtcd's state" mtc daemon backup "$D/head.mtcbak"
CDIR=$MTC_HOME/clusters/hz
hosts_lose_controller "$CDIR"
check "the controller's daemons (pids $LOST) and mtcd are gone" wait_for 30 hosts_controller_gone
mv "$MTC_HOME" "$D/lost-home"
check "restored into a new home" mtc daemon restore "$D/head.mtcbak" --home "$MTC_HOME"
NEW=$TESTHOSTS_PREFIX.200
check "a second address on the bridge ($NEW): the new machine, to the hosts" \
    ip addr add "$NEW/24" dev "$TESTHOSTS_BRIDGE"
check "mtcd starts on it, at the new address" start_mtcd --listen "$NEW:$PORT"
ev() { mtc cluster events hz 2>/dev/null; }
check "the RESTORED event names the update that moves the controller to $NEW" \
    wait_for 30 eval 'grep "RESTORED" <<<"$(ev)" | grep -q "moves it to this machine, $NEW"'
st() { mtc cluster list --json | jq_ '[c["clusterStatus"]["state"] for c in d["modelDevelopmentClusters"] if c["name"].endswith("/hz")][0]'; }
check "the cluster is RUNNING after the update ($(st))" wait_for 120 eval '[ "$(st)" = RUNNING ]'
diag "$(ev | tail -n 12)"
eval "$(mtc env hz)"
UID_=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["uid"])' "$CDIR/hosts.json")
check "slurm.conf: SlurmctldHost at $NEW" grep -q "^SlurmctldHost=.*($NEW)\$" "$CDIR/slurm.conf"
check "the spec's controller.address is $NEW" \
    bash -c "out=\$(mtc cluster get hz --json); grep -q '\"address\": \"$NEW\"' <<<\"\$out\""
check "slurmctld answers again" wait_for 60 scontrol ping
check "the controller's munged was started again, in this mount namespace" \
    bash -c "[ \"\$(readlink /proc/\$(cat '$CDIR/run/munged.pid')/ns/mnt)\" = \"\$(readlink /proc/self/ns/mnt)\" ]"
check "a host's slurmd learned the new controller (its cached slurm.conf)" \
    wait_for 60 testhost_exec 2 grep -q "^SlurmctldHost=.*($NEW)\$" "/var/lib/mtc/$UID_/spool/conf-cache/slurm.conf"
check "the agents report to the new address" \
    testhost_exec 2 grep -q "\"url\": \"http://$NEW:$PORT\"" "/etc/mtc/$UID_/nodes/hz-cpu-0/agent.json"
check "srun -N2 hostname after the move" wait_for 60 bash -c "srun -N2 -t 1 hostname | sort -u | wc -l | grep -qx 2"
done_job() { scontrol show job "$job" 2>/dev/null | grep -q 'JobName=steps.sh' && scontrol show job "$job" | grep -q 'JobState=COMPLETED'; }
check "the job that ran through the loss completed" wait_for 120 done_job
check "sacct on the new machine lists the job from before the backup (its records from the backup's dump)" \
    wait_for 60 in_sacct 1 hostname
check "  and the job that ran through the loss, COMPLETED" wait_for 60 in_sacct "$job" steps.sh
check "  every step ran exactly once" hosts_steps_once "$D/jobs"
diag "steps: $(tr '\n' ' ' <"$D/jobs/steps.txt")"
done_testing
