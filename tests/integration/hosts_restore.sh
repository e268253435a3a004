#!/usr/bin/env bash
# hosts_restore: the head of a cluster on hosts lost and restored (issue 43,
# point 3) — a cluster on 3 test hosts runs a job; mtcd's state is backed
# up; mtcd, slurmctld and munged of the controller are killed -9 and its
# home deleted (the machine is lost); the backup is restored into a new home
# and mtcd started there: munged and slurmctld are started again (a host's
# munged, in another mount namespace with the same argv, is not taken for
# the controller's), the cluster is RUNNING, `srun -N2 hostname` works.
# Not here yet: a job running at the loss surviving it — slurmctld's state
# comes from the backup, and a job it had not saved yet is purged as an
# orphan; that needs the shared StateSaveLocation of issue 43's point 1.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
. "$(dirname "$0")/hosts_setup.inc"
D=$T_DIR

t_extra_cleanup() { hosts_cleanup; }
check "3 test hosts up" testhosts_up 3
[ "$T_FAILED" -eq 0 ] || done_testing
PORT=$(free_port)
check "mtcd starts, listening on the bridge for the agents" start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT"
hosts_cpu_spec "restored" 2 3 >"$D/spec.json"
check "cluster on 3 hosts created" mtc cluster create -f "$D/spec.json" --id hz
[ "$T_FAILED" -eq 0 ] || done_testing
eval "$(mtc env hz)"
check "srun -N2 hostname before the loss" bash -c "srun -N2 hostname | sort -u | wc -l | grep -qx 2"
check "a backup of mtcd's state" mtc daemon backup "$D/head.mtcbak"
CDIR=$MTC_HOME/clusters/hz
for d in slurmctld munged; do
    for p in $(daemon_pids "$CDIR" "$d"); do kill -9 "$p"; done
done
kill -9 "$MTCD_PID"
wait_for 30 eval '[ -z "$(daemon_pids "$CDIR" slurmctld)$(daemon_pids "$CDIR" munged)" ] && ! kill -0 "$MTCD_PID" 2>/dev/null'
mv "$MTC_HOME" "$D/lost-home"
check "restored into a new home" mtc daemon restore "$D/head.mtcbak" --home "$MTC_HOME"
check "mtcd starts on it" start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT"
st() { mtc cluster list --json | jq_ '[c["clusterStatus"]["state"] for c in d["modelDevelopmentClusters"] if c["name"].endswith("/hz")][0]'; }
check "the cluster is RUNNING ($(st))" wait_for 60 eval '[ "$(st)" = RUNNING ]'
eval "$(mtc env hz)"
check "slurmctld answers again" wait_for 60 scontrol ping
check "the controller's munged was started again, in this mount namespace" \
    bash -c "[ \"\$(readlink /proc/\$(cat '$CDIR/run/munged.pid')/ns/mnt)\" = \"\$(readlink /proc/self/ns/mnt)\" ]"
check "srun -N2 hostname after the restore" wait_for 60 bash -c "srun -N2 -t 1 hostname | sort -u | wc -l | grep -qx 2"
done_testing
