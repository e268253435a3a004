#!/usr/bin/env bash
# healthscan_mpi: the health scanner's MPI workload (mtc-scan) on 3 local
# ranks over shared memory: a healthy set passes the straggler (pipeline),
# pairwise and ring checks with valid JSON reports; one rank's process
# throttled in a cgroup (v1 cpu controller, 2% of a CPU) is named by the
# straggler check and only it; bad arguments are refused with exit 2.
# Verdicts at 25% of the median: the runner is 2 shared cores, where a
# healthy rank's share of a CPU varies a few times over.
. "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { ok "# SKIP mpirun not installed"; done_testing; }
export OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
MPIRUN=(timeout 120 mpirun --oversubscribe --bind-to none)
D=$T_DIR

# report FILE PYTHON-ASSERTION: the JSON report in FILE satisfies the assertion on r
report() { python3 -c "import json, sys; r = json.load(open(sys.argv[1])); $2" "$1"; }

for c in pipeline pairs ring; do
    # pairs at 10%: two ranks sharing one of the 2 loaded cores get a fraction
    # of the bandwidth of two ranks on different cores
    f=0.25; [ $c = pairs ] && f=0.1
    "${MPIRUN[@]}" -np 3 mtc-scan "$c" --max-bytes 1048576 --fail-fraction $f >"$D/$c.json" 2>"$D/$c.err"
    check "healthy: $c exits 0" test $? -eq 0
done
check "every report: check, state PASS, 3 nodes with node/state" bash -c '
for c in pipeline pairs ring; do python3 -c "import json, sys; r = json.load(open(sys.argv[1]))
assert r[\"check\"] and r[\"state\"] == \"PASS\" and len(r[\"nodes\"]) == 3, r
assert all(n[\"node\"] and n[\"state\"] == \"PASS\" for n in r[\"nodes\"]), r" "$1/$c.json" || exit 1; done' _ "$D"
check "straggler report: 3 nodes PASS, heatmap rows" report "$D/pipeline.json" '
assert r["check"] == "straggler" and len(r["nodes"]) == 3, r
assert all(n["state"] == "PASS" and n["microbatchesPerSecond"] > 0 for n in r["nodes"]), r
assert len(r["heatmap"]) == 3, r'
check "pairs report: 3 pairs with bandwidth, nodes PASS" report "$D/pairs.json" '
assert len(r["pairs"]) == 3 and all(p["busGBps"] > 0 for p in r["pairs"]), r
assert all(p["state"] == "PASS" and p["thresholdGBps"] > 0 and len(p["nodes"]) == 2 for p in r["pairs"]), r
assert all(n["state"] == "PASS" for n in r["nodes"]), r'
check "ring report: all_reduce/all_gather 8 KiB..1 MiB, checked" report "$D/ring.json" '
s = r["sizes"]
assert r["state"] == "PASS" and s[0]["bytes"] == 8192 and s[-1]["bytes"] <= 1048576, r
assert all(x["allReduceBusGBps"] > 0 and x["allGatherBusGBps"] > 0 for x in s), r'

# an absolute threshold no loopback reaches: ring and pairs FAIL, naming it
"${MPIRUN[@]}" -np 2 mtc-scan ring --max-bytes 65536 --min-bus-gbps 50000 >"$D/ringmin.json" 2>"$D/ringmin.err"
check "ring below --min-bus-gbps: exit 1" test $? -eq 1
check "ring below --min-bus-gbps: every node FAIL with the threshold in the reason" report "$D/ringmin.json" '
assert r["state"] == "FAIL" and r["thresholdGBps"] == 50000, r
assert all(n["state"] == "FAIL" and "50000" in n["reason"] for n in r["nodes"]), r'
"${MPIRUN[@]}" -np 2 mtc-scan pairs --min-bus-gbps 50000 >"$D/pairsmin.json" 2>"$D/pairsmin.err"
check "pairs below --min-bus-gbps: exit 1, the pair FAILs against 50000" report "$D/pairsmin.json" '
p = r["pairs"][0]
assert r["state"] == "FAIL" and p["state"] == "FAIL" and p["thresholdGBps"] == 50000 and p["reason"], r'
mtc-scan pairs --min-bus-gbps -3 >/dev/null 2>"$D/bad.err"
check "bad --min-bus-gbps refused (exit 2, names the flag)" \
    bash -c "[ $? -eq 2 ] && grep -q -- '--min-bus-gbps -3' '$D/bad.err' && [ \$(wc -l <'$D/bad.err') -eq 1 ]"
mtc-scan ring --max-bytes 12 >/dev/null 2>"$D/bad.err"
check "bad --max-bytes refused (exit 2, names the flag)" \
    bash -c "[ $? -eq 2 ] && grep -q -- '--max-bytes 12' '$D/bad.err'"
mtc-scan bogus >/dev/null 2>"$D/bad.err"
check "unknown check refused (exit 2)" bash -c "[ $? -eq 2 ] && grep -q bogus '$D/bad.err'"

CG_ROOT=/sys/fs/cgroup/cpu
if [ ! -w "$CG_ROOT/cgroup.procs" ] || ! mkdir "$CG_ROOT/mtc-scan-$$" 2>/dev/null; then
    ok "# SKIP no writable cgroup v1 cpu controller at $CG_ROOT"
    done_testing
fi
CG=$CG_ROOT/mtc-scan-$$
cg_remove() {
    [ -d "$CG" ] || return 0
    local p
    while read -r p; do echo "$p" >"$CG_ROOT/cgroup.procs" 2>/dev/null; done <"$CG/cgroup.procs"
    rmdir "$CG" 2>/dev/null
}
t_extra_cleanup() { cg_remove; }
echo 100000 >"$CG/cpu.cfs_period_us" && echo 2000 >"$CG/cpu.cfs_quota_us"
# rank 2 enters the cgroup before it starts (MPMD: the third rank via a shell)
"${MPIRUN[@]}" -np 2 mtc-scan pipeline --microbatches 30 --fail-fraction 0.3 : -np 1 \
    bash -c "echo \$\$ >$CG/cgroup.procs && exec mtc-scan pipeline --microbatches 30 --fail-fraction 0.3" >"$D/slow.json" 2>"$D/slow.err"
check "throttled: the straggler check fails (exit 1)" test $? -eq 1
check "only the throttled rank (2) is named a straggler" report "$D/slow.json" '
st = [n["state"] for n in r["nodes"]]
assert st == ["PASS", "PASS", "FAIL"], r
assert "of the pool median" in r["nodes"][2]["reason"], r
assert "#" in r["heatmap"][2], r'
diag "throttled rank: $(python3 -c 'import json,sys; n=json.load(open(sys.argv[1]))["nodes"][2]; print(n["fractionOfMedian"], n.get("reason"))' "$D/slow.json")"
check "the cgroup really throttled" awk '$1 == "nr_throttled" && $2 > 0 {f = 1} END {exit !f}' "$CG/cpu.stat"
cg_remove
done_testing
