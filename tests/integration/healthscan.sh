#!/usr/bin/env bash
# healthscan: `mtc healthscan` on a 3-node local cluster. Bad input (unknown
# check, bad or unknown node, unknown cluster) is one line and stores
# nothing; a healthy cluster passes the straggler check (the collective
# check reports every pair and the ring) and `mtc cluster nodes` shows each
# node's last scan; a node busy with a job is refused without --force and
# scanned with it; a node whose scan rank (found from the node's slurmd, the
# local provider's recorded pid) is throttled in a cgroup (v1 cpu, 1% of a
# CPU) is the only straggler, and --drain-bad-nodes drains it ("healthscan: …") and the
# remediation controller brings it back (restart, checks pass, resumed).
# Verdicts at 25% of the pool median: the runner is 2 shared cores.
. "$(dirname "$0")/lib.sh"
command -v srun >/dev/null || { ok "# SKIP Slurm not installed"; done_testing; }
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
C=hs
cat >"$T_DIR/spec.json" <<'JSON'
{"displayName": "health scan test, 3 CPU nodes",
 "nodePools": [
   {"id": "cpu", "machineSpec": {"machineType": "n2-standard-2"},
    "scalingSpec": {"minNodeCount": 3, "maxNodeCount": 3}},
   {"id": "login", "machineSpec": {"machineType": "n2-standard-2"},
    "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1}}],
 "orchestratorSpec": {"slurmSpec": {"loginNodePoolId": "login",
   "partitions": [{"id": "cpu", "nodePoolIds": ["cpu"]}], "defaultPartitionId": "cpu"}}}
JSON
check "mtcd starts" start_mtcd
t_extra_cleanup() { cg_remove; [ -n "${SLEEPER:-}" ] && scancel "$SLEEPER" 2>/dev/null; delete_all_clusters; }
check "3-node local cluster up" mtc cluster create -f "$T_DIR/spec.json" --id $C
eval "$(mtc env $C)"
CD=$MTC_HOME/clusters/$C
N0=$C-cpu-0 N1=$C-cpu-1 N2=$C-cpu-2
LEAN=(--max-bytes 65536 --microbatches 60 --fail-fraction 0.25)
events() {
    mtc cluster events $C --json | python3 -c '
import json, sys
for e in json.load(sys.stdin) or []:
    print(e.get("eventType"), e.get("nodeName", "-"), e.get("description", ""))'
}
# one_line CMD...: fails (non-zero) with exactly one line on stderr; $OUT gets it
one_line() { OUT=$("$@" 2>&1 >/dev/null) && return 1; [ "$(wc -l <<<"$OUT")" = 1 ]; }

# ---- bad input: one line, nothing stored
check "unknown check: one line naming it" one_line mtc healthscan $C -c bogus
check "  ($OUT)" grep -q '"bogus"' <<<"$OUT"
check "bad node name: one line naming it" one_line mtc healthscan $C -c straggler -n 'x;rm'
check "  ($OUT)" grep -q 'x;rm' <<<"$OUT"
check "unknown node: one line naming it" one_line mtc healthscan $C -c straggler -n "$N0,$C-cpu-9"
check "  ($OUT)" grep -q "$C-cpu-9" <<<"$OUT"
check "unknown partition: one line" one_line mtc healthscan $C -c straggler --partition nope
check "unknown cluster: one line" one_line mtc healthscan nosuch -c straggler
check "  ($OUT)" grep -q "nosuch" <<<"$OUT"
check "usage without -c: exit 2" bash -c "mtc healthscan $C >/dev/null 2>&1; [ \$? -eq 2 ]"
check "nothing stored: no scan on any node, no scan event" bash -c "
    ! mtc cluster nodes $C --json | grep -q lastHealthScan && ! mtc cluster events $C | grep -q HEALTH_SCAN"

# ---- healthy: every node passes the straggler check; the collective check
# reports every pair and the ring (its verdict on loopback TCP between
# emulated nodes sharing 2 loaded cores is noise: asserted on the namespace
# hosts, healthscan_hosts.sh); the last scan is shown per node
t0=$SECONDS
mtc healthscan $C -c straggler -c collective "${LEAN[@]}" >"$T_DIR/ok.out" 2>&1
rc=$?
sed 's/^/# /' "$T_DIR/ok.out"
mtc healthscan $C -c straggler "${LEAN[@]}" --json >"$T_DIR/ok.json" 2>&1
rc2=$?
check "healthy cluster: the straggler scan passes (exit 0, $((SECONDS - t0)) s for both scans)" test $rc2 -eq 0
check "report: every node PASS as straggler with its figures" bash -c "
    [ \$(grep -cE ' PASS +straggler +microbatchesPerSecond=' '$T_DIR/ok.out') -eq 3 ]"
check "report: 3 pairs with bandwidth, ring sizes 8 KiB, 32 KiB, every node judged by collective" bash -c "
    [ \$(grep -cE '^$C-cpu-[0-9] - $C-cpu-[0-9] +(PASS|WARN|FAIL) +[0-9.]+ ' '$T_DIR/ok.out') -eq 3 ] &&
    grep -q '^8192 ' '$T_DIR/ok.out' && grep -q '^32768 ' '$T_DIR/ok.out' &&
    [ \$(grep -cE ' (PASS|WARN|FAIL) +collective' '$T_DIR/ok.out') -eq 3 ]"
check "exit status follows the report (exit $rc)" bash -c "
    if grep -qE '^health scan op-[0-9a-f]+: FAIL ' '$T_DIR/ok.out'; then [ $rc -eq 1 ]; else [ $rc -eq 0 ]; fi"
mtc cluster nodes $C >"$T_DIR/nodes.out"
sed 's/^/# /' "$T_DIR/nodes.out"
check "mtc cluster nodes: LAST SCAN PASS on the 3 compute nodes" bash -c "
    grep -q 'LAST SCAN' '$T_DIR/nodes.out' && [ \$(grep -cE '^$C-cpu-[0-9] .* PASS' '$T_DIR/nodes.out') -eq 3 ]"
check "API nodesStatus: lastHealthScan {time, state, checks}" bash -c "mtc cluster nodes $C --json | python3 -c '
import json, sys
n = {x[\"instanceName\"]: x.get(\"lastHealthScan\") for x in json.load(sys.stdin)}
s = [n[k] for k in (\"$N0\", \"$N1\", \"$N2\")]
assert all(x and x[\"state\"] == \"PASS\" and x[\"checks\"] == \"straggler\" and x[\"time\"] for x in s), n
assert n[\"$C-login-0\"] is None, n'"
scan_events() { events | grep -q '^HEALTH_SCAN_STARTED' && events | grep -qE "^HEALTH_SCAN_$1"; }
check "events: HEALTH_SCAN_STARTED, then HEALTH_SCAN_PASSED (or _FAILED, as the report)" \
    scan_events PASSED

# ---- busy: refused without --force, scanned with it
SLEEPER=$(sbatch --parsable -w "$N0" -n 1 -o /dev/null --wrap 'sleep 300')
running() { [ "$(squeue -h -j "$SLEEPER" -o %T)" = RUNNING ]; }
check "a job runs on $N0" wait_for 30 running
check "busy node: refused, one line naming it" one_line mtc healthscan $C -c straggler "${LEAN[@]}"
check "  ($OUT)" grep -q "not idle: $N0" <<<"$OUT"
check "  names only the busy node" bash -c "! grep -qE '$N1|$N2' <<<'$OUT'"
mtc healthscan $C -c straggler -n "$C-cpu-[0-1]" --force "${LEAN[@]}" --json >"$T_DIR/force.json" 2>"$T_DIR/force.err"
check "--force: the scan runs beside the job on the 2 given nodes" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["response"]
assert [n["node"] for n in r["nodes"]] == sys.argv[2:], r["nodes"]
assert all(n["results"] for n in r["nodes"]), r' "$T_DIR/force.json" "$N0" "$N1"
scancel "$SLEEPER"; SLEEPER=
all_idle() { [ "$(sinfo -h -N -p cpu -o %T | sort -u)" = idle ]; }
check "nodes idle again" wait_for 60 all_idle

# ---- a throttled node: the only straggler, drained, remediated
CG_ROOT=/sys/fs/cgroup/cpu
if [ ! -w "$CG_ROOT/cgroup.procs" ] || ! mkdir "$CG_ROOT/mtc-hs-$$" 2>/dev/null; then
    ok "# SKIP no writable cgroup v1 cpu controller at $CG_ROOT"
    done_testing
fi
CG=$CG_ROOT/mtc-hs-$$
cg_remove() {
    [ -n "${CG:-}" ] && [ -d "$CG" ] || return 0
    local p i
    for i in 1 2 3; do
        while read -r p; do echo "$p" >"$CG_ROOT/cgroup.procs" 2>/dev/null; done <"$CG/cgroup.procs"
        rmdir "$CG" 2>/dev/null && return 0
        sleep 0.2
    done
}
echo 100000 >"$CG/cpu.cfs_period_us" && echo 1000 >"$CG/cpu.cfs_quota_us"
# The node's scan rank, found from its slurmd (the local provider's recorded
# pid: its descendants named mtc-scan), goes into the cgroup as it starts;
# slurmd itself stays out (throttled, it could not launch the step in time).
SLURMD=$(cat "$CD/run/slurm/slurmd-$N2.pid")
descendants() { # pid $1 and all its descendants, by their parent pids
    local all todo=("$1") cur
    all=$(ps -e -o pid=,ppid=)
    while [ ${#todo[@]} -gt 0 ]; do
        cur=${todo[0]}; todo=("${todo[@]:1}"); echo "$cur"
        todo+=($(awk -v pp="$cur" '$2 == pp {print $1}' <<<"$all"))
    done
}
mover() {
    while :; do
        for p in $(descendants "$SLURMD"); do
            [ "$(cat /proc/$p/comm 2>/dev/null)" = mtc-scan ] && echo "$p" >"$CG/cgroup.procs" 2>/dev/null
        done
        sleep 0.05
    done
}
mover & MOVER=$!
track_pid $MOVER
mtc healthscan $C -c straggler --drain-bad-nodes --max-bytes 65536 --microbatches 300 \
    --fail-fraction 0.25 --json >"$T_DIR/slow.json" 2>"$T_DIR/slow.err"
rc=$?
kill $MOVER; wait $MOVER 2>/dev/null
check "$N2's scan rank was throttled in the cgroup" awk '$1 == "nr_throttled" && $2 > 0 {f = 1} END {exit !f}' "$CG/cpu.stat"
check "throttled: the scan fails (exit 1)" test $rc -eq 1
check "only $N2 is named, as a straggler, and drained" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["response"]
st = {n["node"]: n["state"] for n in r["nodes"]}
assert st == {sys.argv[2]: "PASS", sys.argv[3]: "PASS", sys.argv[4]: "FAIL"}, st
bad = r["nodes"][2]
assert bad["reason"].startswith("straggler: ") and bad["drained"] is True, bad
print("# " + bad["reason"])' "$T_DIR/slow.json" "$N0" "$N1" "$N2"
failed_nodes() { events | awk '$1 == "HEALTH_SCAN_FAILED" && $2 != "-" {print $2}' | sort -u; }
check "event HEALTH_SCAN_FAILED for $N2 only" test "$(failed_nodes)" = "$N2"
drained_by_scan() { events | grep -qE "^VM_SLURM_DRAIN $N2 drained: healthscan"; }
check "drained with reason healthscan: …, then the remediation takes it over" wait_for 60 drained_by_scan
resumed() { events | grep -qE "^VM_RESUMED $N2" && [ "$(sinfo -h -N -n "$N2" -o %T | head -1)" = idle ]; }
check "remediated: restarted outside the cgroup, resumed, idle" wait_for 180 resumed
events | sed 's/^/# /' | tail -8
check "its last scan stays FAIL with the reason" bash -c "mtc cluster nodes $C | grep -E '^$N2 ' | grep -q 'FAIL'"
cg_remove
done_testing
