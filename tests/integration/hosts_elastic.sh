#!/usr/bin/env bash
# hosts_elastic: an elastic node pool on test hosts (min 1, max 2), powered
# through the test hosts' "BMC" (bmc.sh: kill every process of the host, or
# boot its sshd, as a power cycle would). Bad specs
# are refused with one line and nothing stored: a power command from a
# non-admin (403), a multi-line or empty one (400), fewer hosts than
# maxNodeCount (400). The elastic host is checked at create, then powered
# down (hostRemediation.powerOffCommand ran, nothing of the cluster runs
# there, sinfo says idle~); `sbatch -N2` makes Slurm resume it through
# mtc-power and mtcd: powerOnCommand runs ({host} {node} substituted), slurmd
# starts there (`slurmd -b`, its start the boot: the test host shares this
# machine's uptime, like any host that stays on) and the job runs on both
# hosts; idle past suspendTimeSeconds the node is stopped again (idle~, its
# daemons gone, powerOffCommand ran). Then 5 more resumes, each job started
# within 10 s of the resumed slurmd's start (issue 48). Delete leaves
# nothing on either host.
# test: uses mtc-dirs (its test hosts bind-mount their own dirs on this machine's
# /var/lib/mtc, /etc/mtc and /run/mtc: deb_package's purge removing them unmounts those)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
. "$(dirname "$0")/hosts_setup.inc"

C=he
t_extra_cleanup() { hosts_cleanup; }

check "2 test hosts up" testhosts_up 2
[ "$T_FAILED" -eq 0 ] || done_testing
H=("" "${TESTHOSTS_ADDRS[@]}")
PORT=$(free_port)
check "mtcd starts, listening on the bridge" start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT"

LOG=$T_DIR/power.log
hosts_power_script "$T_DIR/bmc.sh" "$LOG" # the test hosts' "BMC" (hosts_setup.inc)
# $1: the pool's hosts (JSON list body), $2: hostRemediation's extra fields
spec() {
    cat <<JSON
{"ssh": {"keyFile": "$TESTHOSTS_KEY"},
 "hostRemediation": {"bootTimeoutSeconds": 30$2},
 "nodePools": [{"id": "cpu", "machineSpec": {"machineType": "host"},
   "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 2, "suspendTimeSeconds": 2,
                   "resumeTimeoutSeconds": 60},
   "hosts": [$1]}],
 "healthPolicy": {"checks": ["disk"], "intervalSeconds": 5}}
JSON
}
BOTH="\"${H[1]}\", \"${H[2]}\""
POWER=", \"powerOnCommand\": \"bash $T_DIR/bmc.sh on {host} {node}\", \"powerOffCommand\": \"bash $T_DIR/bmc.sh off {host} {node}\""

# --- refused, nothing stored ----------------------------------------------------
EDITOR=$(mtc --home "$MTC_HOME" token create --name ed --role editor | head -1)
# (without ssh.keyFile, which is an admin's too)
body=$(spec "$BOTH" "$POWER" | python3 -c 'import json,sys; d = json.load(sys.stdin); d.pop("ssh"); print(json.dumps(d))')
out=$(curl -s -w '\n%{http_code}' -H "Authorization: Bearer $EDITOR" -H 'Content-Type: application/json' \
    --data-binary "$body" "http://$TESTHOSTS_CTL_ADDR:$PORT$CLUSTERS?modelDevelopmentClusterId=ed")
# (the hosts are an admin's too: the 403 names every root-only field it has)
check "editor: powerOnCommand is 403 naming the field" bash -c \
    "[ '${out##*$'\n'}' = 403 ] && grep -q 'hostRemediation.powerOnCommand[^:]*: only an admin' <<<'${out%$'\n'*}'"
api POST "$CLUSTERS?modelDevelopmentClusterId=ml" "$(spec "$BOTH" ', "powerOnCommand": "a\nb"')"
check "a multi-line powerOnCommand is 400 naming the field" bash -c \
    "[ $HTTP_STATUS = 400 ] && grep -q 'hostRemediation.powerOnCommand' <<<'$BODY'"
api POST "$CLUSTERS?modelDevelopmentClusterId=em" "$(spec "$BOTH" ', "powerOffCommand": ""')"
check "an empty powerOffCommand is 400 naming the field" bash -c \
    "[ $HTTP_STATUS = 400 ] && grep -q 'hostRemediation.powerOffCommand' <<<'$BODY'"
api POST "$CLUSTERS?modelDevelopmentClusterId=sh" "$(spec "\"${H[1]}\"" "$POWER")"
check "one host for maxNodeCount 2 is 400 naming nodePools[0].hosts" bash -c \
    "[ $HTTP_STATUS = 400 ] && grep -q 'nodePools\[0\].hosts: lists 1 host(s) and maxNodeCount is 2' <<<'$BODY'"
stored() { mtc cluster list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("modelDevelopmentClusters", [])))'; }
check "nothing stored" test "$(stored)" = 0

# --- create: the elastic host checked, then powered down ------------------------
spec "$BOTH" "$POWER" >"$T_DIR/spec.json"
t0=$SECONDS
out=$(mtc cluster create -f "$T_DIR/spec.json" --id "$C" 2>&1)
diag "$(tail -n 3 <<<"$out") (create took $((SECONDS - t0)) s)"
check "create: RUNNING" grep -q "done: cluster $C RUNNING" <<<"$out"
eval "$(mtc env "$C")"
state_is() { [ "$(sinfo -h -N -n "$1" -o %t 2>/dev/null | head -1)" = "$2" ]; }
check "sinfo: $C-cpu-1 idle~ (powered down)" state_is "$C-cpu-1" 'idle~'
check "  powerOffCommand ran for it at create" grep -qx "off ${H[2]} $C-cpu-1" "$LOG"
check "  nothing of the cluster runs on its host" host_quiet 2
api_state() {
    mtc cluster get "$C" --json | python3 -c 'import json,sys
for n in json.load(sys.stdin)["clusterStatus"]["nodesStatus"]:
    if n["instanceName"] == sys.argv[1]: print(n["nodeState"])' "$1"
}
check "  the API says POWERED_DOWN" test "$(api_state "$C-cpu-1")" = POWERED_DOWN

# --- a job needs it: resumed --------------------------------------------------------
mkdir -p "$T_DIR/jobs" && chmod 0777 "$T_DIR/jobs"
t0=$SECONDS
job=$(sbatch --parsable -N2 -o "$T_DIR/jobs/out-%j.txt" --wrap 'srun hostname' 2>&1)
check "sbatch -N2 queues ($job)" grep -qE '^[0-9]+$' <<<"$job"
both_ran() { [ "$(sort -u "$T_DIR/jobs/out-$job.txt" 2>/dev/null | grep -cxE "${TESTHOSTS_NAMES[1]}|${TESTHOSTS_NAMES[2]}")" = 2 ]; }
check "the job ran on both hosts (the elastic one resumed)" wait_for 90 both_ran
diag "job done $((SECONDS - t0)) s after sbatch; $(scontrol show job "$job" | grep -oE '(Submit|Start|End)Time=[^ ]*' | xargs)"
diag "$(scontrol show node "$C-cpu-1" | grep -oE '(BootTime|SlurmdStartTime|LastBusyTime)=[^ ]*' | xargs)"
check "  powerOnCommand ran with {host} {node}" grep -qx "on ${H[2]} $C-cpu-1" "$LOG"
check "  a NODE_POWERED_UP event" has_line NODE_POWERED_UP -- mtc cluster events "$C" --json

# --- idle past suspendTimeSeconds: powered down again --------------------------------
check "idle~ again after suspendTimeSeconds" wait_for 60 state_is "$C-cpu-1" 'idle~'
check "  powerOffCommand ran again" test "$(grep -cx "off ${H[2]} $C-cpu-1" "$LOG")" = 2
check "  its daemons are gone from the host" wait_for 10 host_quiet 2
for p in $(host_procs 2); do diag "left on host 2: $p $(tr '\0' ' ' </proc/$p/cmdline)"; done
check "  the static host still runs its node" state_is "$C-cpu-0" idle

# --- resumed again and again (issue 48) -------------------------------------------
# each time the job starts within 10 s of the resumed slurmd's start (the
# BootTime `slurmd -b` reports): Slurm took its first registration
RESUMES=${RESUMES:-5}
for i in $(seq "$RESUMES"); do
    out=$(timeout 90 srun -N2 sh -c 'echo "$SLURMD_NODENAME $SLURM_JOB_ID"' 2>&1)
    j=$(grep -m1 -oE "^$C-cpu-[01] [0-9]+$" <<<"$out" | cut -d' ' -f2)
    late=$(python3 -c 'import sys, time
f = lambda s: time.mktime(time.strptime(s, "%Y-%m-%dT%H:%M:%S"))
print(int(f(sys.argv[1]) - f(sys.argv[2])))' \
        "$(scontrol show job "$j" -o 2>/dev/null | grep -o 'StartTime=[^ ]*' | cut -d= -f2)" \
        "$(scontrol show node "$C-cpu-1" 2>/dev/null | grep -o 'BootTime=[^ ]*' | cut -d= -f2)" 2>/dev/null)
    check "resume $i: srun -N2 ran on both, ${late:-?} s after the resumed slurmd started (<= 10)" \
        eval '[ "$(grep -cE "^$C-cpu-[01] " <<<"$out")" = 2 ] && [ -n "$late" ] && [ "$late" -le 10 ]'
    check "  idle~ again" wait_for 60 state_is "$C-cpu-1" 'idle~'
done

out=$(mtc cluster delete "$C" 2>&1)
check "delete" grep -q "done: cluster deleted" <<<"$out"
for i in 1 2; do
    check "host $i: nothing left" host_clean "$i"
done
done_testing
