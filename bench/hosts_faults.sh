#!/usr/bin/env bash
# Fault detection and recovery times on the hosts provider (a cluster of 2
# nodes on 2 test hosts + 2 spare hosts, tests/integration/testhosts.inc), for
# the fault kinds of tests/integration/hosts_faults.sh, and the same kinds on a
# local-provider cluster (3 emulated nodes) in the same run where there is one:
#   slurmd  kill -9 of a node's slurmd (by its pid) → SLURMD_RESTART event and
#           the node registered again (new SlurmdStartTime, idle);
#           BENCH_TRIALS trials (default 3) on each provider;
#   ecc     ECC errors on the node's emulated GPU (fake NVML state) with a
#           sleep job on it → detection (VM_CONTINUOUS_GPU_ERROR), drain,
#           job requeued, reboot (hosts: hostRemediation.rebootCommand, served
#           here like a BMC with testhost_reboot), still failing, reimage
#           (hosts: none configured, fails), replace (hosts: onto a spare
#           host), VM_RESUMED (node back in service);
#   link    (hosts only) the host's interface set down with a sleep job on the
#           node → Slurm stops hearing from it (not responding, state*; DOWN
#           at SlurmdTimeout) → mtc's detection
#           (slurm.node, after NODE_DOWN_GRACE_S) and drain → fence (reboot,
#           fails: unreachable) → job requeued → replaced onto the second
#           spare → VM_RESUMED. No local counterpart: printed beside the
#           configured timeouts. 3 s after the link goes down, a slurmd of
#           the local cluster (still up, same mtcd) is killed: its restart
#           time shows what an unreachable host costs the other clusters'
#           supervision.
# For ecc and link also: when the API (clusterStatus.nodesStatus[].host) shows
# the node on its spare.
# Every time is seconds from the moment the fault was injected: event times
# from `mtc cluster events ID --json` (ms), Slurm states polled every 0.2 s.
# Health policy on both: checks gpu and disk every 1 s, mtcd supervising
# every 500 ms (hosts: each host checked at most every 2 s). Traffic: the
# test hosts' private bridge only; everything is torn down on exit.
BENCH_NAME=hosts_faults
. "$(dirname "$0")/hosts.inc"
. "$ROOT/tests/integration/run_setup.inc"
. "$ROOT/tests/integration/fault_setup.inc"
TRIALS=${BENCH_TRIALS:-3}
WATCHER=
t_extra_cleanup() {
    hosts_bmc_stop
    hosts_cleanup
}
now() { date +%s.%N; }
say() { echo "$*" >&3; echo "## $*"; }

# The events of cluster $1 for node $3 from epoch $2 on, one per line:
# "SECONDS-SINCE<TAB>TYPE<TAB>DESCRIPTION" (one API call).
ev_since() {
    mtc cluster events "$1" --json | python3 -c '
import datetime, json, sys
t0, node = float(sys.argv[1]), sys.argv[2]
for e in json.load(sys.stdin) or []:
    t = datetime.datetime.strptime(e["eventTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    if t >= t0 - 0.001 and e.get("nodeName") == node:
        print("%.2f\t%s\t%s" % (t - t0, e["eventType"], e.get("description", "")))' "$2" "$3"
}
# Seconds of the first of ev_since's lines $1 of type $2 whose description
# contains $3 (optional); "-" if none.
ev_first() {
    awk -F'\t' -v typ="$2" -v sub_="${3:-}" '
        $2 == typ && (sub_ == "" || index($3, sub_)) { print $1; f = 1; exit }
        END { if (!f) print "-" }' <<<"$1"
}
# Seconds from $2 (epoch) to the first event of type $3 for node $4 at or after
# it, whose description contains $5 (optional), in cluster $1; "-" if none.
ev_at() { ev_first "$(ev_since "$1" "$2" "$4")" "$3" "${5:-}"; }
# Into the associative array named $1: for each TYPE in $5..., the seconds
# from $3 (epoch) to the node $4's first TYPE event in cluster $2 ("-" if
# none); and "trail", every event of the node since, as "+S TYPE description".
# One API call.
ev_times() {
    local -n into=$1
    local typ all
    all=$(ev_since "$2" "$3" "$4")
    for typ in "${@:5}"; do into[$typ]=$(ev_first "$all" "$typ"); done
    into[trail]=$(awk -F'\t' 'NF { printf "    +%7.2f s  %-26s %s\n", $1, $2, $3 }' <<<"$all")
}
# Poll (0.2 s) until command "$2..." succeeds, at most $1 s; prints seconds
# since $T0 when it did, "-" if it never did.
since_t0_when() {
    local secs=$1 end
    shift
    end=$((SECONDS + secs))
    while [ $SECONDS -lt $end ]; do
        if "$@" >/dev/null 2>&1; then
            awk -v a="$(now)" -v b="$T0" 'BEGIN { printf "%.2f\n", a - b }'
            return 0
        fi
        sleep 0.2
    done
    echo "-"
}
# In the background from $T0: seconds until the API (GET cluster, its
# clusterStatus.nodesStatus[].host) shows node $2 of cluster $1 on host $3,
# polled every 0.2 s over mtcd's unix socket by one process, written to file $4.
api_host_when() {
    python3 - "$T0" "$MTC_HOME/mtcd.sock" "$CLUSTERS/$1" "$2" "$3" >"$4" <<'PY' &
import http.client, json, socket, sys, time
t0, sock, path, node, host = float(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(sock)
while time.time() - t0 < 300:
    try:
        c = C("localhost"); c.request("GET", path); o = json.loads(c.getresponse().read()); c.close()
        if any(n.get("instanceName") == node and n.get("host") == host
               for n in o.get("clusterStatus", {}).get("nodesStatus", [])):
            print("%.2f" % (time.time() - t0)); sys.exit(0)
    except (OSError, ValueError):
        pass
    time.sleep(0.2)
print("-")
PY
}
slurmd_start() { scontrol show node "$1" | grep -o 'SlurmdStartTime=[^ ]*'; }
# node $1 registered by a new slurmd (start time other than $2) and idle
registered_again() {
    local s
    s=$(slurmd_start "$1")
    [ -n "$s" ] && [ "$s" != "$2" ] && [ "$s" != SlurmdStartTime=None ] &&
        sinfo -h -N -n "$1" -o %T | grep -qx idle
}
node_drained_or_down() { sinfo -h -N -n "$1" -o %T | grep -qE 'drain|down|fail'; }
# Slurm no longer hears from the node: not responding (state*) or down
node_unresponsive() { sinfo -h -N -n "$1" -o %T | grep -qE '[*]$|^down'; }
node_idle() { sinfo -h -N -n "$1" -o %T | grep -qx idle; }
node_in_service() { sinfo -h -N -n "$1" -o %T | grep -qE '^(idle|allocated|mixed)$'; }
stats() { # values... → "median X s (a/b/c)"
    python3 -c '
import statistics, sys
v = [float(x) for x in sys.argv[1:] if x != "-"]
bad = len(sys.argv[1:]) - len(v)
s = "median %5.2f s" % statistics.median(v) if v else "no data"
print(s + " (" + "/".join(sys.argv[1:]) + ")" + (" %d failed" % bad if bad else ""))' "$@"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", a / b; else print "-" }'; }
median() { python3 -c 'import statistics,sys; v=[float(x) for x in sys.argv[1:] if x != "-"]; print(statistics.median(v) if v else "-")' "$@"; }
# A requeueable sleep job on node $1; sets SJOB.
sleep_job() {
    SJOB=$(sbatch --parsable --requeue -N1 -w "$1" -o /dev/null -D / --wrap 'sleep 600') &&
        wait_for 30 bash -c "squeue -h -j $SJOB -t RUNNING | grep -q ."
}

# slurmd trial on cluster $1, node $2, pid-file reader "$3...": prints
# "restart_event registered_again". mtcd records one event per type and node
# per 30 s (EVENT_REPEAT_MS), and SlurmdStartTime has 1 s resolution: a node
# is killed again only 31 s after its last kill (trials alternate nodes).
declare -A LAST_KILL
slurmd_trial() {
    local c=$1 n=$2 old pid r e wait
    shift 2
    wait=$(awk -v l="${LAST_KILL[$n]:-0}" -v t="$(now)" 'BEGIN { w = l + 31 - t; print (w > 0) ? w : 0 }')
    sleep "$wait"
    wait_for 60 node_idle "$n" || { echo "- -"; return; }
    old=$(slurmd_start "$n")
    pid=$("$@")
    [ -n "$pid" ] || { echo "- -"; return; }
    T0=$(now)
    LAST_KILL[$n]=$T0
    kill -9 "$pid"
    r=$(since_t0_when 90 registered_again "$n" "$old")
    # the event comes when the host's check returns, which may be after the
    # registration; earlier trials' events do not count
    for _ in $(seq 50); do
        e=$(ev_at "$c" "$T0" SLURMD_RESTART "$n")
        [ "$e" != - ] && break
        sleep 0.2
    done
    echo "$e $r"
}

# --- local provider: 3 emulated nodes (+ login) -----------------------------------
PORT=$(free_port)
testhosts_up 4 || fail "test hosts did not come up"
H=("" "${TESTHOSTS_ADDRS[@]}")
start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT" || fail "mtcd did not start"

C=lf
export C
fault_spec '"gpu","disk"'
out=$(mtc cluster create -f "$T_DIR/spec.json" --id lf 2>&1)
grep -q "done: cluster lf RUNNING" <<<"$out" || fail "local cluster: $out"
eval "$(mtc env lf)"
CD=$MTC_HOME/clusters/lf
LS_E=() LS_R=()
sleep 2 # the nodes' first slurmd start times must be in an earlier second
for t in $(seq "$TRIALS"); do
    n=lf-a3m-$(((t % 2) * 2)) # a3m-2, a3m-0, ...: a3m-1 is for the ECC fault
    slurmd_trial lf "$n" cat "$CD/run/slurmd-$n.pid" >"$T_DIR/res"
    read -r e r <"$T_DIR/res"
    LS_E+=("$e") LS_R+=("$r")
    say "# local slurmd trial $t ($n): SLURMD_RESTART +$e s, registered again +$r s"
done
N=lf-a3m-1
sleep_job "$N" || fail "local: sleep job on $N did not start"
T0=$(now)
echo 'gpu 2 ecc=3' >>"$CD/nodes/$N/hw/nvml.state"
LE_DRAIN=$(since_t0_when 60 node_drained_or_down "$N")
wait_for 240 has_event VM_RESUMED "$N" || say "# local ecc: $N not resumed within 240 s"
LE_IDLE=$(since_t0_when 30 node_in_service "$N")
declare -A LE
ev_times LE lf "$T0" "$N" VM_CONTINUOUS_GPU_ERROR VM_SLURM_DRAIN JOB_REQUEUED VM_REBOOT VM_REIMAGE VM_REPORT_AND_REPLACEMENT VM_RESUMED
LE_TRAIL=${LE[trail]}
scancel "$SJOB" 2>/dev/null
# (lf stays up until the end: a local slurmd is killed while a host is unreachable)

# --- hosts provider: 2 nodes on hosts 1-2, spares 3-4 ------------------------------
hosts_bmc_start 4 # reboot requests of the spec's rebootCommand
C=hf
export C
hosts_fault_spec >"$T_DIR/hspec.json"
out=$(mtc cluster create -f "$T_DIR/hspec.json" --id hf 2>&1)
grep -q "done: cluster hf RUNNING (2 nodes" <<<"$out" || fail "hosts cluster: $out"
eval "$(mtc env hf)"
UID_=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["uid"])' "$MTC_HOME/clusters/hf/hosts.json")
HS_E=() HS_R=()
sleep 2
for t in $(seq "$TRIALS"); do
    i=$((2 - t % 2)) # host 1 (hf-gpu-0) or host 2 (hf-gpu-1)
    slurmd_trial hf "hf-gpu-$((i - 1))" testhost_exec "$i" cat "/run/mtc/$UID_/slurmd.pid" >"$T_DIR/res"
    read -r e r <"$T_DIR/res"
    HS_E+=("$e") HS_R+=("$r")
    say "# hosts slurmd trial $t (hf-gpu-$((i - 1))): SLURMD_RESTART +$e s, registered again +$r s"
done

# ECC on hf-gpu-1 (host 2): reboot, still failing, no reimage command, replaced onto host 3
N=hf-gpu-1
sleep_job "$N" || fail "hosts: sleep job on $N did not start"
T0=$(now)
testhost_exec 2 sh -c "printf 'count 1\ngpu 0 ecc=4\n' >>/var/lib/mtc/$UID_/hw/nvml.state"
api_host_when hf "$N" "${H[3]}" "$T_DIR/api_ecc"
APIP=$!
HE_DRAIN=$(since_t0_when 60 node_drained_or_down "$N")
wait_for 300 has_event VM_RESUMED "$N" || say "# hosts ecc: $N not resumed within 300 s"
HE_IDLE=$(since_t0_when 30 node_in_service "$N")
declare -A HE
ev_times HE hf "$T0" "$N" VM_CONTINUOUS_GPU_ERROR VM_SLURM_DRAIN JOB_REQUEUED VM_REBOOT VM_REIMAGE VM_REPORT_AND_REPLACEMENT VM_RESUMED
HE_BOOT=$(awk -v n="${TESTHOSTS_NAMES[2]}" -v t0="$T0" '$1 == n { printf "%.2f", $2 - t0; exit }' "$T_DIR/rebooted" 2>/dev/null)
HE_TRAIL=${HE[trail]}
wait "$APIP"
HE_API=$(cat "$T_DIR/api_ecc")
scancel "$SJOB" 2>/dev/null

# link of host 1 (hf-gpu-0) down: DOWN after SlurmdTimeout, fenced, replaced onto host 4
N=hf-gpu-0
wait_for 60 node_idle "$N"
sleep_job "$N" || fail "hosts: sleep job on $N did not start"
T0=$(now)
testhost_link 1 down || fail "link down failed"
# meanwhile (3 s on, when mtcd's next check of the hosts waits on the dead
# link) a local node's slurmd is killed: how long until the local cluster's
# supervision restarts it? (the hosts' pass runs in a thread of its own: it
# must not wait for the dead host's ssh timeouts)
(
    sleep 3
    eval "$(mtc env lf)"
    slurmd_trial lf lf-a3m-0 cat "$CD/run/slurmd-lf-a3m-0.pid"
) >"$T_DIR/stall" 2>"$T_DIR/stall.err" &
STALL=$!
api_host_when hf "$N" "${H[4]}" "$T_DIR/api_link"
APIP=$!
HL_DOWN=$(since_t0_when 120 node_unresponsive "$N")
wait_for 240 has_event VM_RESUMED "$N" || say "# hosts link: $N not resumed within 240 s"
HL_IDLE=$(since_t0_when 30 node_in_service "$N")
declare -A HL
ev_times HL hf "$T0" "$N" VM_SCAN_ERROR VM_SLURM_DRAIN VM_REBOOT JOB_REQUEUED VM_REIMAGE VM_REPORT_AND_REPLACEMENT VM_RESUMED
HL_TRAIL=${HL[trail]}
scancel "$SJOB" 2>/dev/null
wait "$APIP"
HL_API=$(cat "$T_DIR/api_link")
testhost_link 1 up
wait "$STALL"
read -r SE SR <"$T_DIR/stall"
HL_QUIET=$(T0=$(now) since_t0_when 60 host_quiet 1)
for c in hf lf; do
    out=$(mtc cluster delete $c 2>&1)
    grep -q "done: cluster deleted" <<<"$out" || fail "delete $c: $out"
done
for i in 1 2 3 4; do host_clean "$i" || say "# host $i not clean after the delete"; done

# --- figures ---------------------------------------------------------------------
say "fault detection and recovery, hosts provider (2 test hosts + 2 spares) vs local provider (3 emulated nodes), seconds after the fault"
say "(checks gpu+disk every 1 s; supervisor 500 ms, hosts at most every 2 s; SlurmdTimeout=60, NODE_DOWN_GRACE 10 s, bootTimeout 60 s)"
say "slurmd kill -9, $TRIALS trials:"
say "  SLURMD_RESTART event   local $(stats "${LS_E[@]}")   hosts $(stats "${HS_E[@]}")   ratio $(ratio "$(median "${HS_E[@]}")" "$(median "${LS_E[@]}")")"
say "  registered again, idle local $(stats "${LS_R[@]}")   hosts $(stats "${HS_R[@]}")   ratio $(ratio "$(median "${HS_R[@]}")" "$(median "${LS_R[@]}")")"
say "ECC errors on a node's GPU (sleep job on it), 1 trial:"
printf '  %-44s %9s %9s %s\n' "" local hosts ratio >&3
row() { printf '  %-44s %9s %9s %s\n' "$1" "$2" "$3" "$(ratio "$3" "$2")" >&3; }
row "detected (VM_CONTINUOUS_GPU_ERROR)" "${LE[VM_CONTINUOUS_GPU_ERROR]}" "${HE[VM_CONTINUOUS_GPU_ERROR]}"
row "drained (VM_SLURM_DRAIN)" "${LE[VM_SLURM_DRAIN]}" "${HE[VM_SLURM_DRAIN]}"
row "drained in sinfo (polled)" "$LE_DRAIN" "$HE_DRAIN"
row "job requeued (JOB_REQUEUED)" "${LE[JOB_REQUEUED]}" "${HE[JOB_REQUEUED]}"
row "reboot starts (VM_REBOOT)" "${LE[VM_REBOOT]}" "${HE[VM_REBOOT]}"
row "reimage starts (VM_REIMAGE)" "${LE[VM_REIMAGE]}" "${HE[VM_REIMAGE]}"
row "replace starts (VM_REPORT_AND_REPLACEMENT)" "${LE[VM_REPORT_AND_REPLACEMENT]}" "${HE[VM_REPORT_AND_REPLACEMENT]}"
row "back in service (VM_RESUMED)" "${LE[VM_RESUMED]}" "${HE[VM_RESUMED]}"
row "in service in sinfo (polled)" "$LE_IDLE" "$HE_IDLE"
say "  hosts: the test host's BMC reboot done at +${HE_BOOT:--} s; the API shows the node on the spare ${H[3]} at +$HE_API s"
say "  local event trail:"
say "$LE_TRAIL"
say "  hosts event trail:"
say "$HE_TRAIL"
say "link down on a node's host (sleep job on it), hosts only, 1 trial (reference: SlurmdTimeout=60 s + NODE_DOWN_GRACE 10 s):"
say "  Slurm: not responding (sinfo, polled)        ${HL_DOWN}"
say "  detected (VM_SCAN_ERROR slurm.node)          ${HL[VM_SCAN_ERROR]}"
say "  drained (VM_SLURM_DRAIN)                     ${HL[VM_SLURM_DRAIN]}"
say "  fence (VM_REBOOT)                            ${HL[VM_REBOOT]}"
say "  job requeued (JOB_REQUEUED)                  ${HL[JOB_REQUEUED]}"
say "  reimage starts (VM_REIMAGE)                  ${HL[VM_REIMAGE]}"
say "  replace starts (VM_REPORT_AND_REPLACEMENT)   ${HL[VM_REPORT_AND_REPLACEMENT]}"
say "  back in service (VM_RESUMED)                 ${HL[VM_RESUMED]}"
say "  in service in sinfo (polled)                ${HL_IDLE}"
say "  API shows the node on the spare (${H[4]})          ${HL_API}"
say "  after link up, the old host's daemons stopped within ${HL_QUIET} s"
say "  event trail:"
say "$HL_TRAIL"
say "local slurmd kill -9 3 s after the host's link went down (same mtcd): SLURMD_RESTART +${SE:--} s, registered again +${SR:--} s"
say "  (the hosts' checks run in a thread of their own; before, this waited for the dead host's 20 s ssh deadline)"
echo "  load average (1/5/15 min) at the start: $LOAD0, at the end: $(cut -d" " -f1-3 /proc/loadavg) ($(nproc) cores)" >&3
[ -n "${BENCH_KEEP:-}" ] || T_FAILED=0 # BENCH_KEEP=1 keeps $T_DIR (mtcd.log, bench.log)
