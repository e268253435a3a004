#!/usr/bin/env bash
# healthscan: `mtc healthscan` on a 3-node local cluster. Bad input (unknown
# check, bad or unknown node, unknown cluster) is one line and stores
# nothing; a healthy cluster passes the straggler check (the collective
# check reports every pair and the ring) and `mtc cluster nodes` shows each
# node's last scan; a node busy with a job is refused without --force and
# scanned with it; a node whose slurmd (and so its scan rank) is throttled
# in a cgroup (3% of a CPU, its bite measured first) is the only straggler,
# and --drain-bad-nodes drains it ("healthscan: …") and the remediation
# controller brings it back (restart outside the cgroup, checks pass, resumed).
# Verdicts at 25% of the pool median: the runner is 2 shared cores.
. "$(dirname "$0")/lib.sh"
command -v srun >/dev/null || { skip "Slurm not installed"; done_testing; }
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
C=hs
# the experiment root is a user's to write, with a .mtc-healthscans of theirs
# planted in it: a scan must write its script and read its reports only
# where no one but root can write (issue 26)
mkdir -p "$T_DIR/exp/.mtc-healthscans" && chown -R 65534:65534 "$T_DIR/exp" &&
    chmod 0777 "$T_DIR/exp" "$T_DIR/exp/.mtc-healthscans"
cat >"$T_DIR/spec.json" <<JSON
{"displayName": "health scan test, 3 CPU nodes", "experimentRoot": "$T_DIR/exp",
 "nodePools": [
   {"id": "cpu", "machineSpec": {"machineType": "n2-standard-2"},
    "scalingSpec": {"minNodeCount": 3, "maxNodeCount": 3}},
   {"id": "login", "machineSpec": {"machineType": "n2-standard-2"},
    "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1}}],
 "orchestratorSpec": {"slurmSpec": {"loginNodePoolId": "login",
   "partitions": [{"id": "cpu", "nodePoolIds": ["cpu"]}], "defaultPartitionId": "cpu"}}}
JSON
check "mtcd starts" start_mtcd
. "$(dirname "$0")/cgroup.inc"
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
check_absent "nothing stored: no scan on any node" lastHealthScan -- mtc cluster nodes "$C" --json
check_absent "  and no scan event" HEALTH_SCAN -- mtc cluster events "$C"

# ---- healthy: every node passes the straggler check; the last scan is
# shown per node
t0=$SECONDS
mtc healthscan $C -c straggler "${LEAN[@]}" >"$T_DIR/ok.out" 2>&1
rc=$?
sed 's/^/# /' "$T_DIR/ok.out"
check "healthy cluster: the straggler scan passes (exit 0, $((SECONDS - t0)) s)" test $rc -eq 0
# WARN is not a failure (mtc-scan's contract): noise on a loaded runner
check "report: every node PASS (or WARN) as straggler with its figures" bash -c "
    [ \$(grep -cE ' (PASS|WARN) +straggler +microbatchesPerSecond=' '$T_DIR/ok.out') -eq 3 ]"
mtc cluster nodes $C >"$T_DIR/nodes.out"
sed 's/^/# /' "$T_DIR/nodes.out"
check "mtc cluster nodes has a LAST SCAN column" grep -q 'LAST SCAN' "$T_DIR/nodes.out"
check "API nodesStatus: lastHealthScan {time, state PASS/WARN, checks} on the compute nodes only" bash -c "mtc cluster nodes $C --json | python3 -c '
import json, sys
n = {x[\"instanceName\"]: x.get(\"lastHealthScan\") for x in json.load(sys.stdin)}
s = [n[k] for k in (\"$N0\", \"$N1\", \"$N2\")]
assert all(x and x[\"state\"] in (\"PASS\", \"WARN\") and x[\"checks\"] == \"straggler\" and x[\"time\"] for x in s), n
assert n[\"$C-login-0\"] is None, n'"
check "nothing written into the user's planted .mtc-healthscans" test -z "$(ls -A "$T_DIR/exp/.mtc-healthscans")"
check "the scan's files are in the cluster's directory, root's, mode 0700" bash -c "
    d=\$(ls -d '$CD'/healthscans/op-* | head -1); [ -s \"\$d/healthscan.sbatch\" ] &&
    [ \"\$(stat -c '%a %U' \"\$d\" '$CD/healthscans')\" = \"\$(printf '700 root\\n700 root')\" ]"
scan_events() { has_line '^HEALTH_SCAN_STARTED' -- events && has_line "^HEALTH_SCAN_$1" -- events; }
check "events: HEALTH_SCAN_STARTED, HEALTH_SCAN_PASSED" scan_events PASSED

# the collective check reports every pair and the ring (its verdict on
# loopback TCP between emulated nodes sharing 2 loaded cores is noise); the
# scan waited for its job to leave the nodes, so this one finds them idle
mtc healthscan $C -c collective,straggler "${LEAN[@]}" >"$T_DIR/coll.out" 2>&1
rc=$?
sed 's/^/# /' "$T_DIR/coll.out"
check "back to back: the next scan runs (the nodes were left idle)" grep -qE '^health scan op-[0-9a-f]+: (PASS|WARN|FAIL) \(checks collective straggler' "$T_DIR/coll.out"
check "report: 3 pairs with bandwidth, ring sizes 8 KiB, 32 KiB, every node judged by both checks" bash -c "
    [ \$(grep -cE '^$C-cpu-[0-9] - $C-cpu-[0-9] +(PASS|WARN|FAIL) +[0-9.]+ ' '$T_DIR/coll.out') -eq 3 ] &&
    grep -q '^8192 ' '$T_DIR/coll.out' && grep -q '^32768 ' '$T_DIR/coll.out' &&
    [ \$(grep -cE ' (PASS|WARN|FAIL) +collective/pairs' '$T_DIR/coll.out') -eq 3 ] &&
    [ \$(grep -cE ' (PASS|WARN|FAIL) +straggler' '$T_DIR/coll.out') -eq 3 ]"
check "exit status follows the report (exit $rc)" bash -c "
    if grep -qE '^health scan op-[0-9a-f]+: FAIL ' '$T_DIR/coll.out'; then [ $rc -eq 1 ]; else [ $rc -eq 0 ]; fi"

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
# N2's slurmd goes into a cgroup before the scan, so every slurmstepd and
# scan rank it starts is throttled from its first instruction (a process
# moved in once it runs was caught late on a loaded runner: a WARN, not a
# FAIL). 10% of a CPU in 10 ms periods: every ~5 ms microbatch of the scan
# is stopped, so the rank runs at 10% of a CPU — under a 50% share of the
# healthy ranks' whenever they get more than 20% of one (a FAIL at
# --fail-fraction 0.5; a second suite beside it leaves them 35-50%) — while
# slurmd keeps enough to launch the step (at 3% in 100 ms periods the launch
# timed out: "Task launch ... failed on node: Socket timed out"). The
# throttle's bite is measured before anything is asserted on it.
if ! cg_create "mtc-hs-$$" 1000 10000; then
    skip "a throttled node: no writable cgroup cpu controller (v1 or v2)"
    done_testing
fi
read -r out_ms in_ms stops <<<"$(cg_bite)"
check "the throttle bites: a fixed loop stopped $stops times by the quota (${in_ms} ms in the cgroup, ${out_ms} ms outside)" \
    test "$stops" -ge 3
SD=$(cat "$CD/run/slurm/slurmd-$N2.pid")
check "$N2's slurmd ($SD) in the cgroup" bash -c "echo $SD >'$CG/cgroup.procs' && grep -qx $SD '$CG/cgroup.procs'"
th0=$(cg_throttled)
mtc healthscan $C -c straggler --drain-bad-nodes --max-bytes 65536 --microbatches 60 \
    --fail-fraction 0.5 --json >"$T_DIR/slow.json" 2>"$T_DIR/slow.err"
rc=$?
check "$N2's scan rank was throttled in the cgroup (nr_throttled $th0 → $(cg_throttled))" \
    test "$(cg_throttled)" -gt "$th0"
check "throttled: the scan fails (exit 1)" test $rc -eq 1
check "only $N2 is named, as a straggler, and drained" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["response"]
st = {n["node"]: n["state"] for n in r["nodes"]}
# the healthy ones are not FAILed (a WARN is noise on a loaded runner)
assert st[sys.argv[4]] == "FAIL" and st[sys.argv[2]] != "FAIL" and st[sys.argv[3]] != "FAIL", st
bad = r["nodes"][2]
assert bad["reason"].startswith("straggler: ") and "straggler: straggler" not in bad["reason"], bad
assert bad["drained"] is True, bad
print("# " + bad["reason"])' "$T_DIR/slow.json" "$N0" "$N1" "$N2"
# the nodes of HEALTH_SCAN_FAILED events since the last scan started
failed_nodes() {
    events | awk '$1 == "HEALTH_SCAN_STARTED" {n = ""} $1 == "HEALTH_SCAN_FAILED" && $2 != "-" {n = n $2 "\n"} END {printf "%s", n}' | sort -u
}
check "event HEALTH_SCAN_FAILED for $N2 only" test "$(failed_nodes)" = "$N2"
drained_by_scan() { has_line "^VM_SLURM_DRAIN $N2 drained: healthscan" -- events; }
check "drained with reason healthscan: …, then the remediation takes it over" wait_for 60 drained_by_scan
resumed() { has_line "^VM_RESUMED $N2" -- events && [ "$(sinfo -h -N -n "$N2" -o %T | head -1)" = idle ]; }
check "remediated: restarted outside the cgroup, resumed, idle" wait_for 180 resumed
events | sed 's/^/# /' | tail -8
check "its last scan stays FAIL with the reason" bash -c "mtc cluster nodes $C | grep -E '^$N2 ' | grep -q 'FAIL'"
cg_remove
done_testing
