#!/usr/bin/env bash
# elastic: an elastic node pool (min 1, max 3) on the local provider. Nodes 1
# and 2 are Slurm CLOUD nodes, powered down (idle~, no processes) until a job
# needs them: `sbatch -N3` makes Slurm resume them through mtc-power and
# mtcd. A powered-down node's slurmd port is held by mtcd, so nothing else
# takes it; but while mtcd is down (kill -9) another process binds el-cpu-2's,
# so its resume fails, naming the port: it ends DOWN after
# resumeTimeoutSeconds with the job requeued and a NODE_RESUME_FAILED event;
# `mtc cluster update`, as the event says, gives the node a new port (held),
# and returned to service, the requeued job resumes it again,
# runs (the agent's prolog check runs on the resumed nodes) and completes;
# idle past suspendTimeSeconds the nodes are stopped again (idle~, their
# recorded pids gone). Lowering maxNodeCount while the node is powered down
# removes it; raising minNodeCount starts it as a static node, its slurmd
# left running (no failed check, no remediation). (One
# resume/suspend cycle serves every scenario: Slurm 22.05 moves a job off
# CONFIGURING on a 30 s periodic check, so each resume costs up to 30 s.)
. "$(dirname "$0")/lib.sh"

C=el
SUSPEND=${SUSPEND:-8} RESUME_TIMEOUT=${RESUME_TIMEOUT:-15}
spec() { # $1 min, $2 max
    cat <<JSON
{
  "nodePools": [
    {"id": "cpu", "machineSpec": {"machineType": "n2-standard-4"},
     "scalingSpec": {"minNodeCount": $1, "maxNodeCount": $2,
                     "suspend_time_seconds": $SUSPEND, "resumeTimeoutSeconds": $RESUME_TIMEOUT}},
    {"id": "login", "machineSpec": {"machineType": "n2-standard-4"}}
  ],
  "orchestratorSpec": {"slurmSpec": {"loginNodePoolId": "login",
    "prologBashScripts": ["echo \"\$SLURMD_NODENAME\" >>$T_DIR/prolog.nodes"],
    "partitions": [{"id": "cpu", "nodePoolIds": ["cpu"]}], "defaultPartitionId": "cpu"}},
  "healthPolicy": {"checks": ["daemon"], "intervalSeconds": 5, "reportEverySeconds": 5}
}
JSON
}
spec 1 3 >"$T_DIR/spec.json"

# "NODE STATE" lines of sinfo (every node, powered down ones included)
states() { sinfo -h -N -o '%N %t' 2>/dev/null | sort -u; }
state_is() { [ "$(sinfo -h -N -n "$1" -o %t 2>/dev/null | head -1)" = "$2" ]; }
# nodesStatus[].nodeState of node $1 from the API
api_state() {
    api GET "$CLUSTERS/$C"
    python3 -c 'import json,sys
for n in json.loads(sys.argv[1])["clusterStatus"].get("nodesStatus", []):
    if n["instanceName"] == sys.argv[2]: print(n["nodeState"])' "$BODY" "$1"
}
api_state_is() { [ "$(api_state "$1")" = "$2" ]; }
events() {
    mtc cluster events "$C" --json | python3 -c '
import json, sys
for e in json.load(sys.stdin) or []:
    print(e.get("eventType", "?"), e.get("nodeName", "-"), e.get("description", ""))'
}
# (a basic regular expression, read whole first: no SIGPIPE under pipefail)
has_event() { local ev; ev=$(events) || return 1; grep -q "^$1 $2" <<<"$ev"; }
job_state() { scontrol show job "$1" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
job_is() { [ "$(job_state "$1")" = "$2" ]; }
# the node's recorded daemon pids (slurmd, agent), alive or not
node_pids() { cat "$CD/run/slurmd-$1.pid" "$CD/run/agent-$1.pid" 2>/dev/null; }
none_alive() { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }

start_mtcd || { nok "mtcd started"; done_testing; }
t_extra_cleanup() {
    [ -n "${PORT_PID:-}" ] && kill "$PORT_PID" 2>/dev/null
    if [ "$T_FAILED" -gt 0 ]; then # what to look at, kept with $T_DIR
        cp -r "$CD/log" "$T_DIR/cluster-log" 2>/dev/null
        events >"$T_DIR/events" 2>/dev/null
    fi
    delete_all_clusters
}
T0=$SECONDS
check "cluster created (min 1, max 3)" mtc cluster create -f "$T_DIR/spec.json" --id "$C"
eval "$(mtc env "$C")"
CD=$MTC_HOME/clusters/$C
diag "created in $((SECONDS - T0)) s"

# --- powered down at start ---
want=$'el-cpu-0 idle\nel-cpu-1 idle~\nel-cpu-2 idle~'
check "sinfo shows the 2 elastic nodes idle~" wait_for 20 eval '[ "$(states)" = "$want" ]'
states | sed 's/^/# /'
check "no slurmd for a powered-down node" eval '[ ! -e "$CD/run/slurmd-el-cpu-1.pid" ] && [ -z "$(daemon_pids "$CD" "slurmd .*-N el-cpu-1" 2>/dev/null)" ]'
check "API: nodeState POWERED_DOWN" wait_for 10 api_state_is el-cpu-1 POWERED_DOWN
check "API: the static node RUNNING" api_state_is el-cpu-0 RUNNING
check "mtc cluster nodes shows POWERED_DOWN" eval 'mtc cluster nodes "$C" | grep -q "^el-cpu-2 .*POWERED_DOWN"'
check "power.json is 0600" eval '[ "$(stat -c %a "$CD/power.json")" = 600 ]'

# --- a powered-down node's port is mtcd's; one taken while mtcd was down ---
port_free() { python3 -c 'import socket,sys; s=socket.socket(); s.bind(("0.0.0.0", int(sys.argv[1])))' "$PORT" 2>/dev/null; }
PORT=$(python3 -c 'import json,sys; print([n["port"] for n in json.load(open(sys.argv[1]))["nodes"] if n["name"]=="el-cpu-2"][0])' "$CD/cluster.json")
# a listener on el-cpu-2's port, bound as a port pick probes (no
# SO_REUSEADDR), in the background until killed; "bound" or the error in
# $T_DIR/bound, written whole then renamed (poll_for waits for the name: an
# empty file read before its write was stop 56's CI failure)
take_port() {
    rm -f "$T_DIR/bound"
    python3 -c 'import os,socket,sys,time
def say(what):
    open(sys.argv[2] + ".tmp", "w").write(what); os.rename(sys.argv[2] + ".tmp", sys.argv[2])
s=socket.socket()
try:
    s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1)
except OSError as e:
    say(e.strerror); sys.exit(1)
say("bound")
time.sleep(600)' "$PORT" "$T_DIR/bound" &
    PORT_PID=$!
    track_pid "$PORT_PID"
    poll_for 10 "$T_DIR/bound"
}
take_port
check "el-cpu-2 powered down: nothing else binds its slurmd port $PORT (mtcd holds it)" grep -qi "in use" "$T_DIR/bound"
wait "$PORT_PID" 2>/dev/null
# mtcd killed: its holds go with it; the port taken before it is back
kill -9 "$MTCD_PID"
wait_for 10 eval '! kill -0 "$MTCD_PID" 2>/dev/null'
take_port
check "mtcd killed: another program binds it" grep -qx bound "$T_DIR/bound"
check "mtcd restarted (the cluster adopted)" start_mtcd
check "it supervised the cluster (and could not hold the port)" after_passes "$C" 2

# el-cpu-2's slurmd cannot start: the resume of both for the job starts
# el-cpu-1 and fails el-cpu-2, which Slurm marks DOWN after
# resumeTimeoutSeconds, requeueing the job
T0=$SECONDS
JOB=$(sbatch --parsable -N3 -o "$T_DIR/job1.out" --wrap 'srun hostname' 2>"$T_DIR/sbatch.err") ||
    cat "$T_DIR/sbatch.err"
check "sbatch -N3 (2 nodes powered down, el-cpu-2's port taken) accepted" test -n "$JOB"
check "NODE_RESUME_FAILED event after resumeTimeoutSeconds" wait_for $((RESUME_TIMEOUT + 40)) has_event NODE_RESUME_FAILED el-cpu-2
diag "resume failed after $((SECONDS - T0)) s: el-cpu-2 $(sinfo -h -N -n el-cpu-2 -o '%t %E')"
check "the failed start is an event too" has_event NODE_POWER_FAILED el-cpu-2
check "  naming the port and what to do" eval 'events | grep "^NODE_POWER_FAILED el-cpu-2" | grep -q "port $PORT is in use.*mtc cluster update el"'
check "Slurm marked it DOWN" eval 'sinfo -h -N -n el-cpu-2 -o %t | grep -q "^down"'
check "the job was requeued" eval '[ "$(scontrol show job "$JOB" -o | grep -o "Restarts=[0-9]*" | cut -d= -f2)" -ge 1 ]'
check "el-cpu-1 was powered up by the same resume" has_event NODE_POWERED_UP el-cpu-1
scontrol show job "$JOB" -o | grep -o 'JobState=[^ ]* Reason=[^ ]*' | sed 's/^/# /'
# what the event says to do: the update gives the node a port of its own again
node_port() { python3 -c 'import json,sys; print([n["port"] for n in json.load(open(sys.argv[1]))["nodes"] if n["name"]==sys.argv[2]][0])' "$CD/cluster.json" "$1"; }
check "mtc cluster update (same spec)" mtc cluster update "$C" -f "$T_DIR/spec.json"
NEWPORT=$(node_port el-cpu-2)
check "  el-cpu-2 got a new port ($PORT -> $NEWPORT), in slurm.conf" eval '[ "$NEWPORT" != "$PORT" ] && grep -q "NodeName=el-cpu-2 .*Port=$NEWPORT" "$SLURM_CONF"'
check "  held by mtcd" eval '! PORT=$NEWPORT port_free'
kill "$PORT_PID" 2>/dev/null
wait "$PORT_PID" 2>/dev/null
PORT_PID=
check "the other daemon gone, its old port is free (mtcd let it go)" port_free

# the failed node stays DOWN (powered down) until an admin returns it, then
# it is idle~; Slurm holds the requeued job a while (BeginTime): released,
# it resumes the node again, this time with its port free
scontrol update nodename=el-cpu-2 state=resume
check "the failed node returned to service powered down (idle~)" wait_for 60 state_is el-cpu-2 "idle~"
T0=$SECONDS
scontrol update jobid="$JOB" StartTime=now+1 >/dev/null
check "the requeued job ran and completed once the port was free" wait_for 150 job_is "$JOB" COMPLETED
diag "job $JOB: $(job_state "$JOB") $((SECONDS - T0)) s after its release"
check "it ran on 3 nodes" eval '[ "$(wc -l <"$T_DIR/job1.out")" = 3 ]'
check "NODE_POWERED_UP events" eval 'has_event NODE_POWERED_UP el-cpu-1 && has_event NODE_POWERED_UP el-cpu-2'
P1=$(node_pids el-cpu-1) P2=$(node_pids el-cpu-2)
check "resumed nodes had slurmd and agent (recorded pids)" eval '[ $(echo $P1 $P2 | wc -w) = 4 ]'
# Slurm's Prolog runs the agent's check (--mode prolog --drain) first and the
# spec's script only when it passed: the script ran on the node resumed for
# the job's run (el-cpu-1, up since the first resume, saw the job killed at
# its requeue: its slurmd does not run the prolog for that job id again)
check "the prolog runs the agent's check" grep -q "check --config .* --mode prolog" "$CD/etc/prolog.sh"
check "the prolog (agent check passed) ran on the resumed node" grep -qx el-cpu-2 "$T_DIR/prolog.nodes"
check "API: resumed node RUNNING" wait_for 10 api_state_is el-cpu-2 RUNNING

# --- idle past suspendTimeSeconds: stopped again ---
T0=$SECONDS
check "idle nodes back to idle~" wait_for $((SUSPEND + 60)) eval 'state_is el-cpu-1 "idle~" && state_is el-cpu-2 "idle~"'
diag "suspended $((SECONDS - T0)) s after the job"
check "their processes are gone" wait_for 10 none_alive $P1 $P2 ||
    ps -o pid=,ppid=,stat=,args= -p "$(echo $P1 $P2 | tr ' ' ,)" | sed 's/^/# left: /'
check "no process of theirs left (environment marker)" eval '[ -z "$(daemon_pids "$CD" "slurmd .*-N el-cpu-[12]" 2>/dev/null)" ]'
check "NODE_POWERED_DOWN events" eval 'has_event NODE_POWERED_DOWN el-cpu-1 && has_event NODE_POWERED_DOWN el-cpu-2'
check "the static node stayed up" state_is el-cpu-0 idle
check_absent "no remediation of elastic nodes" '^VM_' -- events

# --- min/max change while the elastic nodes are powered down ---
spec 1 2 >"$T_DIR/spec2.json"
check "update maxNodeCount 3 -> 2" mtc cluster update "$C" -f "$T_DIR/spec2.json"
want=$'el-cpu-0 idle\nel-cpu-1 idle~'
check "sinfo: el-cpu-2 removed, el-cpu-1 still idle~" wait_for 20 eval '[ "$(states)" = "$want" ]'
states | sed 's/^/# /'
check "API: 2 nodes, el-cpu-1 POWERED_DOWN" api_state_is el-cpu-1 POWERED_DOWN
spec 2 2 >"$T_DIR/spec3.json"
ALOG=$CD/log/agent-el-cpu-1.log
ALINES=$(cat "$ALOG" 2>/dev/null | wc -l)
check "update minNodeCount 1 -> 2 (no elastic node left)" mtc cluster update "$C" -f "$T_DIR/spec3.json"
want=$'el-cpu-0 idle\nel-cpu-1 idle'
check "sinfo: el-cpu-1 static and up" wait_for 30 eval '[ "$(states)" = "$want" ]'
states | sed 's/^/# /'
check "API: el-cpu-1 RUNNING" wait_for 10 api_state_is el-cpu-1 RUNNING
# the apply's slurmd of el-cpu-1 stays up: its agent (started with it, first
# check at once, then every 5 s, each reported: reportEverySeconds 5) finds
# it running, so no remediation reboots it; a check that failed would have
# drained and rebooted it: two more reports of the node (two agent passes)
# and two supervision passes that judged them are waited for
SPID=$(cat "$CD/run/slurmd-el-cpu-1.pid" 2>/dev/null)
check "el-cpu-1's slurmd running (recorded pid)" eval '[ -n "$SPID" ] && kill -0 "$SPID"'
check "slurmd wrote its own pid file (what the agent checks)" eval '[ "$(cat "$CD/run/slurm/slurmd-el-cpu-1.pid" 2>/dev/null)" = "$SPID" ]'
health_time() { api GET "$CLUSTERS/$C" && python3 -c 'import json,sys
for n in json.loads(sys.argv[1])["clusterStatus"].get("nodesStatus", []):
    if n["instanceName"] == "el-cpu-1": print(n.get("healthTime", ""))' "$BODY"; }
H0=$(health_time)
changed_from() { local h; h=$(health_time) && [ -n "$h" ] && [ "$h" != "$1" ] && HNOW=$h; }
check "two more health reports of el-cpu-1 (two agent passes), then two supervision passes" \
    eval 'wait_for 60 changed_from "$H0" && H1=$HNOW && wait_for 60 changed_from "$H1" && after_passes "$C" 2'
check "the same slurmd still running after an agent interval" eval 'kill -0 "$SPID" && [ "$(cat "$CD/run/slurmd-el-cpu-1.pid")" = "$SPID" ]'
check "el-cpu-1 still idle (not drained)" state_is el-cpu-1 idle
check "the agent's log is there" test -s "$ALOG"
check_absent "no failed check of el-cpu-1 since the update" FAIL -- tail -n +$((ALINES + 1)) "$ALOG"
check_absent "no remediation of el-cpu-1 (no VM_ event)" '^VM_[A-Z_]* el-cpu-1 ' -- events

# --- bad input ---
bad=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); s["nodePools"][0]["scalingSpec"]["suspendTimeSeconds"]=0; print(json.dumps(s))' "$T_DIR/spec.json")
api POST "$CLUSTERS?modelDevelopmentClusterId=bad" "$bad"
check "suspendTimeSeconds 0 refused (400, names the field)" eval '[ "$HTTP_STATUS" = 400 ] && echo "$BODY" | grep -q "suspendTimeSeconds"'
api POST "$CLUSTERS/$C:powerNodes" '{"action": "RESUME", "nodes": ["el-cpu-9"]}'
check ":powerNodes of an unknown node: 404" eval '[ "$HTTP_STATUS" = 404 ]'
api POST "$CLUSTERS/$C:powerNodes" '{"action": "REBOOT", "nodes": ["el-cpu-1"]}'
check ":powerNodes with a bad action: 400" eval '[ "$HTTP_STATUS" = 400 ]'
done_testing
