#!/usr/bin/env bash
# hosts_failover: Slurm's backup controller on a cluster on hosts (issue 43,
# point 1). Bad input first: a backupHost that is the controller, or with no
# shared storage for the state, is refused by the spec's check; a
# stateSaveLocation the backup's host does not see (its own
# /var/lib/mtc) is refused by the create, naming the host. Then a cluster on
# 3 test hosts with backupHost = the login host, failoverSeconds 10 and
# accounting: `scontrol ping` shows both controllers UP, the status says the
# primary is in control. A job runs numbered steps; the controller machine
# is lost (kill -9 of its slurmctld, munged, slurmdbd, MariaDB and mtcd):
# from the login host `sbatch` is accepted and `squeue` answers within
# failoverSeconds + 15 s; a host restarted during the outage comes back
# (its boot, as an init system would run it) with its configuration from the
# backup; the running job completes with every step exactly once. mtcd
# started again: the primary takes control back (events CONTROLLER_FAILOVER
# and CONTROLLER_FAILBACK, status, /metrics), and sacct lists the job that
# finished during the outage. Then the backup moves to a host in no pool
# (host 4: munged and slurmctld only; the login host's stops) and takes
# control when the primary is lost again; the state moves to another shared
# directory with the queue. The delete removes the state directory and
# leaves every host clean.
# test: uses mtc-dirs (test hosts bind-mount this machine's /var/lib/mtc, /etc/mtc, /run/mtc)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
. "$(dirname "$0")/hosts_setup.inc"
D=$T_DIR
FAILOVER=10

t_extra_cleanup() { hosts_cleanup; }
check "4 test hosts up" testhosts_up 4
[ "$T_FAILED" -eq 0 ] || done_testing
PORT=$(free_port)
check "mtcd starts, listening on the bridge for the agents" start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT"

# spec CONTROLLER-JSON [PYTHON]: the 3-host spec with its controller section
# replaced, then PYTHON run on it (s)
spec() {
    hosts_cpu_spec failover 2 3 |
        hosts_spec_edit 's["controller"] = json.loads(sys.argv[1]); exec(sys.argv[2])' "$1" "${2:-pass}"
}
refused() { # WHAT SPEC-FILE PATTERN: the create fails and says PATTERN
    local out
    out=$(mtc cluster create -f "$2" --id fo 2>&1)
    check "$1 is refused ($(head -c 300 <<<"$out"))" grep -q -- "$3" <<<"$out"
    check "  and no cluster is left" bash -c "! mtc cluster list 2>/dev/null | grep -qw fo"
}
L1=${TESTHOSTS_ADDRS[1]}
spec "{\"address\": \"$TESTHOSTS_CTL_ADDR\", \"backupHost\": \"$TESTHOSTS_CTL_ADDR\"}" >"$D/bad1.json"
refused "backupHost = the controller" "$D/bad1.json" "is the controller itself"
spec "{\"address\": \"$TESTHOSTS_CTL_ADDR\", \"backupHost\": \"$L1\"}" 's.pop("experimentRoot")' >"$D/bad3.json"
refused "a backupHost with no stateSaveLocation or experimentRoot" "$D/bad3.json" "needs storage both controllers see"
spec "{\"address\": \"$TESTHOSTS_CTL_ADDR\", \"backupHost\": \"$L1\", \"stateSaveLocation\": \"/var/lib/mtc/fo-state-$$\"}" >"$D/bad4.json"
# found by the create: the cluster stays in ERROR with the reason, and is deleted
spec "{\"address\": \"$TESTHOSTS_CTL_ADDR\", \"backupHost\": \"$TESTHOSTS_UNUSED_ADDR\"}" >"$D/bad2.json"
out=$(mtc cluster create -f "$D/bad2.json" --id fo 2>&1)
check "a backupHost in no pool that does not answer is refused ($(head -c 200 <<<"$out"))" \
    grep -q "host $TESTHOSTS_UNUSED_ADDR: unreachable" <<<"$out"
check "  the cluster in ERROR is deleted" mtc cluster delete fo
out=$(mtc cluster create -f "$D/bad4.json" --id fo 2>&1)
check "a stateSaveLocation the backup's host does not see is refused ($(head -c 300 <<<"$out"))" \
    grep -q "stateSaveLocation /var/lib/mtc/fo-state-$$ is not shared storage: the backup controller's host $L1 does not see" <<<"$out"
for i in 1 2 3; do check "  the failed create left nothing on host $i" host_clean "$i"; done
check "  the directory it made here is removed" test ! -e "/var/lib/mtc/fo-state-$$"
check "  the cluster in ERROR is deleted" mtc cluster delete fo

# the cluster, with a backup controller on the login host and accounting
spec "{\"address\": \"$TESTHOSTS_CTL_ADDR\", \"backupHost\": \"$L1\", \"failoverSeconds\": $FAILOVER}" \
    's["orchestratorSpec"]["slurmSpec"]["accounting"] = {"enabled": True}' >"$D/spec.json"
check "cluster on 3 hosts with a backup controller on the login host created" \
    mtc cluster create -f "$D/spec.json" --id fo
[ "$T_FAILED" -eq 0 ] || done_testing
eval "$(mtc env fo)"
CDIR=$MTC_HOME/clusters/fo
UID_=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["uid"])' "$CDIR/hosts.json")
STATE=$D/.mtc/fo-$UID_.slurmctld
check "slurm.conf names both controllers and SlurmctldTimeout=$FAILOVER" \
    bash -c "grep -c '^SlurmctldHost=' '$CDIR/slurm.conf' | grep -qx 2 && grep -qx 'SlurmctldHost=${TESTHOSTS_NAMES[1]}($L1)' '$CDIR/slurm.conf' && grep -qx 'SlurmctldTimeout=$FAILOVER' '$CDIR/slurm.conf'"
check "StateSaveLocation is under the experiment root, with the cluster's marker" \
    bash -c "grep -qx 'StateSaveLocation=$STATE' '$CDIR/slurm.conf' && grep -q '^fo $UID_ ' '$STATE/mtc-cluster'"
out=$(scontrol ping 2>&1)
diag "$out"
check "scontrol ping: both controllers UP" bash -c "[ \$(grep -c 'is UP' <<<'$out') = 2 ]"
CTLD_PORT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ctldPort"])' "$CDIR/hosts.json")
argv=$(tr '\0' ' ' <"/proc/$(testhost_exec 2 cat "/run/mtc/$UID_/slurmd.pid")/cmdline")
check "slurmd on a compute host has both controllers ($argv)" \
    grep -q -- "--conf-server $TESTHOSTS_CTL_ADDR:$CTLD_PORT,$L1:$CTLD_PORT" <<<"$argv"
ctl() { mtc cluster get fo --json | jq_ "d['clusterStatus'].get('controller', {}).get('$1')"; }
check "the cluster's status: the primary is in control ($(ctl inControl))" wait_for 30 eval '[ "$(ctl inControl)" = primary ]'
out=$(mtc cluster hosts fo)
diag "$out"
check "mtc cluster hosts: both controllers UP, the primary in control" \
    bash -c "grep -q '^slurmctld primary .* UP\$' <<<'$out' && grep -q '^slurmctld backup .*$L1 .* UP\$' <<<'$out' && grep -q '^in control: primary since ' <<<'$out'"

# a job of numbered steps on the second host; the slurm.conf the login host uses
LCONF=/var/lib/mtc/$UID_/spool/conf-cache/slurm.conf
login() { testhost_exec 1 env SLURM_CONF="$LCONF" "$@"; }
hosts_steps_job "$D/jobs"
job=$(login sbatch --parsable -N1 -w fo-cpu-0 -o "$D/jobs/steps-%j.out" "$D/jobs/steps.sh" 2>&1)
check "a job of 8 steps queued from the login host ($job)" grep -qE '^[0-9]+$' <<<"$job"
check "  its second step ran" wait_for 60 grep -qx "step 2" "$D/jobs/steps.txt"

# the controller machine is lost
t0=$(date +%s.%N)
hosts_lose_controller "$CDIR"
check "the controller's daemons (pids $LOST) and mtcd are gone" wait_for 30 hosts_controller_gone
sb=$(login timeout $((FAILOVER + ${FO_SLACK:-15})) bash -c 'until j=$(sbatch --parsable -N1 -w fo-cpu-1 -o /dev/null --wrap "echo outage" 2>/dev/null); do sleep 0.5; done; echo $j')
t1=$(date +%s.%N)
secs=$(python3 -c "print(round($t1 - $t0, 1))")
check "sbatch from the login host is accepted within failoverSeconds + 15 s (job $sb, ${secs} s)" grep -qE '^[0-9]+$' <<<"$sb"
diag "failover: controller lost -> first sbatch accepted ${secs} s (failoverSeconds $FAILOVER)"
check "squeue answers from the login host" login timeout 15 squeue -h
diag "backup slurmctld: $(tail -n 30 "$TESTHOSTS_DIR/h1/var-lib-mtc/$UID_/log/slurmctld.log")"
out=$(login scontrol ping 2>&1)
check "the backup answers, the primary does not (scontrol ping: $(tr '\n' ' ' <<<"$out"))" \
    bash -c "grep -q '(backup) at ${TESTHOSTS_NAMES[1]} is UP' <<<'$out' && grep -q '(primary) at .* is DOWN' <<<'$out'"
# host 3 restarts during the outage: its daemons as its last bring-up started them
check "host 3 restarted during the outage" testhost_reboot 3
check "  its boot brings slurmd back, its config from the backup controller" \
    testhost_exec 3 sh "/var/lib/mtc/$UID_/bin/mtc-host" boot "$UID_"
node_up() { login scontrol show node fo-cpu-1 2>/dev/null | grep -qE 'State=(IDLE|ALLOCATED|MIXED)'; }
check "  fo-cpu-1 is registered with the backup" wait_for 60 node_up
done_job() { login scontrol show job "$1" 2>/dev/null | grep -q 'JobState=COMPLETED'; }
check "the job finished during the outage ($sb) COMPLETED" wait_for 60 done_job "$sb"
check "the running job completed during the outage" wait_for 90 done_job "$job"
check "  every step ran exactly once" hosts_steps_once "$D/jobs"
diag "steps: $(tr '\n' ' ' <"$D/jobs/steps.txt")"

# the controller machine back: mtcd and the primary
check "mtcd starts again" start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT"
check "the primary slurmctld takes control back (scontrol ping)" \
    wait_for 60 bash -c "out=\$(scontrol ping); grep -q '(primary) at .* is UP' <<<\"\$out\""
check "the status says the primary is in control again" wait_for 30 eval '[ "$(ctl inControl)" = primary ]'
evs=$(mtc cluster get fo --json | jq_ "' '.join(e['eventType'] for e in d.get('clusterEvents', []))")
check "events CONTROLLER_FAILOVER and CONTROLLER_FAILBACK ($evs)" \
    bash -c "grep -q CONTROLLER_FAILOVER <<<'$evs' && grep -q CONTROLLER_FAILBACK <<<'$evs'"
# the page whole first: under pipefail, grep -q leaving early would fail curl
metrics=$(curl -s --unix-socket "$MTC_HOME/mtcd.sock" http://localhost/metrics)
check "/metrics: the primary in control" \
    grep -qx 'mtc_slurmctld_in_control{cluster="fo",controller="primary"} 1' <<<"$metrics"
check "/metrics: both controllers up" \
    test "$(grep -c '^mtc_slurmctld_up{cluster="fo",controller="\(primary\|backup\)"} 1$' <<<"$metrics")" = 2
in_sacct() { sacct -n -X -P -j "$1" -o jobid,state 2>/dev/null | grep -qx "$1|COMPLETED"; }
check "sacct lists the job that finished during the outage (slurmctld kept its records)" wait_for 90 in_sacct "$sb"
check "  and the job that ran through it" wait_for 30 in_sacct "$job"

# the backup controller moves to host 4, a host in no pool: mtc runs munged
# and slurmctld there; the login host's slurmctld stops
H4=${TESTHOSTS_ADDRS[4]}
spec "{\"address\": \"$TESTHOSTS_CTL_ADDR\", \"backupHost\": \"$H4\", \"failoverSeconds\": $FAILOVER}" \
    's["orchestratorSpec"]["slurmSpec"]["accounting"] = {"enabled": True}' >"$D/spec4.json"
check "update: the backup controller on host 4, in no pool" mtc cluster update fo -f "$D/spec4.json"
out=$(scontrol ping 2>&1)
check "scontrol ping: the backup at ${TESTHOSTS_NAMES[4]} UP ($(tr '\n' ' ' <<<"$out"))" \
    grep -q "(backup) at ${TESTHOSTS_NAMES[4]} is UP" <<<"$out"
ctld_on() { testhost_exec "$1" sh -c "p=\$(cat /run/mtc/$UID_/slurmctld.pid 2>/dev/null) && kill -0 \$p 2>/dev/null"; }
check "  the login host runs no slurmctld any more" wait_for 30 eval '! ctld_on 1'
check "  host 4 runs slurmctld" ctld_on 4
out=$(mtc cluster hosts fo)
check "  mtc cluster hosts: host 4's role is backup" grep -qE "^$H4 +${TESTHOSTS_NAMES[4]} +- +- +backup" <<<"$out"
diag "$out"
kill -9 "$MTCD_PID"
kill -9 "$(cat "$CDIR/run/slurmctld.pid")"
sb=$(login timeout $((FAILOVER + 15)) bash -c 'until j=$(sbatch --parsable -N1 -o /dev/null --wrap "echo h4" 2>/dev/null); do sleep 0.5; done; echo $j')
check "the primary lost: sbatch on the login host accepted (job $sb), host 4's slurmctld in control" \
    grep -qE '^[0-9]+$' <<<"$sb"
out=$(login scontrol ping 2>&1)
check "  scontrol ping: the backup at ${TESTHOSTS_NAMES[4]} UP, the primary DOWN" \
    bash -c "grep -q '(backup) at ${TESTHOSTS_NAMES[4]} is UP' <<<'$out' && grep -q '(primary) at .* is DOWN' <<<'$out'"
check "mtcd again: the primary takes control back" start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT"
check "  (scontrol ping)" wait_for 60 bash -c "out=\$(scontrol ping); grep -q '(primary) at .* is UP' <<<\"\$out\""

# slurmctld's state moves to another shared directory: the queue goes with it
spec "{\"address\": \"$TESTHOSTS_CTL_ADDR\", \"backupHost\": \"$H4\", \"failoverSeconds\": $FAILOVER, \"stateSaveLocation\": \"$D/state2\"}" \
    's["orchestratorSpec"]["slurmSpec"]["accounting"] = {"enabled": True}' >"$D/spec5.json"
check "update: stateSaveLocation $D/state2" mtc cluster update fo -f "$D/spec5.json"
check "  slurm.conf names it, the old directory is gone" \
    bash -c "grep -qx 'StateSaveLocation=$D/state2' '$CDIR/slurm.conf' && [ ! -e '$STATE' ] && grep -q '^fo $UID_ ' '$D/state2/mtc-cluster'"
check "  the job that ran through the outage is still known to Slurm" \
    bash -c "scontrol show job $job | grep -q 'JobState=COMPLETED'"
out=$(scontrol ping 2>&1)
check "  both controllers UP on it" test "$(grep -c 'is UP' <<<"$out")" = 2
check "the cluster is deleted" mtc cluster delete fo
check "  its state directory is gone" test ! -e "$D/state2"
for i in 1 2 3 4; do check "  host $i is clean" host_clean "$i"; done
done_testing
