#!/usr/bin/env bash
# Elastic node pools on hosts (docs/hosts.md, "Elastic node pools"): a
# cluster on 2 test hosts, one static node and one elastic node powered
# through the test hosts' "BMC" (hosts_setup.inc's hosts_power_script: kill
# every process of the namespace host / start its sshd, as a power cycle).
# Figure: seconds from `sbatch -N2` (needing the powered-down host) to the
# job RUNNING, median over BENCH_ROUNDS (default 5) rounds, each after the
# node was powered down again (idle~); baseline in the same run: the same for
# a job on the static node (up), and the ratio. Also the provider's own part
# of each resume: mtcd's "powering up" log line to the NODE_POWERED_UP event.
# Traffic: loopback and the test hosts' private bridge only; everything is
# torn down on exit.
BENCH_NAME=hosts_elastic
. "$(dirname "$0")/hosts.inc"
ROUNDS=${BENCH_ROUNDS:-5}

testhosts_up 2 || fail "test hosts did not come up"
H=("" "${TESTHOSTS_ADDRS[@]}")
start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$(free_port)" || fail "mtcd did not start"
hosts_power_script "$T_DIR/bmc.sh" "$T_DIR/power.log"
cat >"$T_DIR/spec.json" <<JSON
{"ssh": {"keyFile": "$TESTHOSTS_KEY"},
 "hostRemediation": {"bootTimeoutSeconds": 60,
   "powerOnCommand": "bash $T_DIR/bmc.sh on {host} {node}",
   "powerOffCommand": "bash $T_DIR/bmc.sh off {host} {node}"},
 "nodePools": [{"id": "cpu", "machineSpec": {"machineType": "host"},
   "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 2, "suspendTimeSeconds": 3,
                   "resumeTimeoutSeconds": 90},
   "hosts": ["${H[1]}", "${H[2]}"]}],
 "healthPolicy": {"checks": ["disk"], "intervalSeconds": 5}}
JSON
mtc cluster create -f "$T_DIR/spec.json" --id be || fail "create failed"
eval "$(mtc env be)"

now() { date +%s.%N; }
state_is() { [ "$(sinfo -h -N -n "$1" -o %t 2>/dev/null | head -1)" = "$2" ]; }
# seconds from submit until the job is running (or already done)
to_running() {
    local t0 j st
    t0=$(now)
    j=$(sbatch --parsable "$@" -o /dev/null --wrap 'sleep 1') || return 1
    while :; do
        st=$(squeue -h -j "$j" -o %t 2>/dev/null)
        case "$st" in R | CG | "") break ;; esac
        sleep 0.05
    done
    echo "$(now) - $t0" | bc
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# the provider's part of the last resume: "powering be-cpu-1 up" in mtcd's log
# to the NODE_POWERED_UP event (both with milliseconds)
provider_part() {
    local up ev
    up=$(grep "powering be-cpu-1 up" "$MTC_HOME/log/mtcd.log" | tail -1 | cut -d' ' -f1)
    ev=$(mtc cluster events be --json | python3 -c '
import json, sys
e = [x for x in json.load(sys.stdin) or [] if x.get("eventType") == "NODE_POWERED_UP"]
print(max(x.get("eventTime", "") for x in e) if e else "")')
    python3 -c '
import sys
from datetime import datetime
f = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
print("%.2f" % (f(sys.argv[2]) - f(sys.argv[1])).total_seconds())' "$up" "$ev" 2>/dev/null || echo "?"
}

base=() resume=() prov=()
for i in $(seq "$ROUNDS"); do
    wait_for 120 state_is be-cpu-1 'idle~' || fail "be-cpu-1 did not power down (round $i)"
    base+=("$(to_running -N1 -w be-cpu-0)")
    resume+=("$(to_running -N2)")
    prov+=("$(provider_part)")
    echo "# round $i: static ${base[-1]} s, resume ${resume[-1]} s (provider ${prov[-1]} s)" >&3
done
mb=$(printf '%s\n' "${base[@]}" | median)
mr=$(printf '%s\n' "${resume[@]}" | median)
mp=$(printf '%s\n' "${prov[@]}" | grep -v '?' | median)
printf 'hosts elastic resume: job needing a powered-down host running after %.2f s (median of %d); on an up node %.2f s; ratio %.1fx; power-on command to daemons up (provider) %.2f s; load %s -> %s\n' \
    "$mr" "$ROUNDS" "$mb" "$(echo "$mr / $mb" | bc -l)" "$mp" "$LOAD0" "$(cut -d' ' -f1-3 /proc/loadavg)" >&3
T_FAILED=0
