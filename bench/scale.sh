#!/usr/bin/env bash
# scale: the control plane at cluster sizes this machine cannot emulate, on
# simulated clusters (provider "sim") driven by mtc-simload (docs/scale.md).
# 1. Load: for 256, 1,024 and 2,048 nodes whose agents report every 30 s —
#    mtcd's CPU and memory (/proc/PID) and SQLite (db + WAL) growth over a
#    window of SCALE_SECONDS after one warm-up period, given per hour
#    (extrapolated: a compressed hour, not a measured one), and the p99 of API
#    GETs (the cluster with its nodesStatus, the cluster list) during it.
#    Baseline in the same run: fsync'd 4 KiB writes per second on the same
#    file system (each stored report is one SQLite commit, synchronous=FULL).
# 2. Remediation: 10 nodes of a 256-node pool fail at once (gpu.ecc: one
#    simulated 10 s reboot each): time from each failure's report to its
#    remediation's first action, serial (healthPolicy.maxConcurrentRemediations
#    1) vs concurrent (the default), and the share of the pool drained at peak.
#    Without maxConcurrentRemediations (issue 19 point 1) mtcd remediates one
#    node at a time: the serial figure only.
. "$(dirname "$0")/lib.inc"
SECS=${SCALE_SECONDS:-120}
SIZES=${SCALE_NODES-256 1024 2048}
REBOOT=${SCALE_REBOOT_SECONDS:-10}
trap 'bench_stop_pids; rm -rf "$W"' EXIT

# One sim cluster spec: $1 nodes, $2 more JSON in healthPolicy.
spec() {
    cat <<JSON
{"displayName": "scale: $1 simulated nodes",
 "nodePools": [{"id": "gpu", "machineSpec": {"machineType": "a3-megagpu-8g"},
                "scalingSpec": {"minNodeCount": $1, "maxNodeCount": $1}}],
 "healthPolicy": {"intervalSeconds": 30, "reportEverySeconds": 30$2},
 "sim": {"restartSeconds": $REBOOT, "rebootSeconds": $REBOOT, "reimageSeconds": $REBOOT,
         "replaceSeconds": $REBOOT}}
JSON
}

# A fresh mtcd in $W/$1 (its own MTC_HOME).
fresh_mtcd() {
    export MTC_HOME=$W/$1
    mkdir -p "$MTC_HOME"
    bench_start_mtcd
}
stop_mtcd() {
    kill "$MTCD" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$MTCD" 2>/dev/null || break; sleep 0.1; done
}

# "utime+stime ticks, VmRSS kB, VmHWM kB, db bytes, WAL bytes" of mtcd now.
sample() {
    local t rss hwm
    t=$(awk '{print $14 + $15}' "/proc/$MTCD/stat")
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$MTCD/status")
    hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$MTCD/status")
    echo "$t $rss $hwm $(stat -c %s "$MTC_HOME/mtcd.db") $(stat -c %s "$MTC_HOME/mtcd.db-wal" 2>/dev/null || echo 0)"
}

# Reports cluster $1's agents had stored (mtcd's /metrics; a big cluster's
# scrape is slow under load: 120 s).
stored() {
    curl -s -m 120 --unix-socket "$MTC_HOME/mtcd.sock" http://localhost/metrics |
        awk -v c="$1" '$1 == "mtc_health_reports_total{cluster=\"" c "\"}" {print $2}'
}

echo "simulated clusters; agents report every 30 s; window ${SECS} s after a 35 s warm-up (figures per hour are extrapolated)"
# the baseline: fsync'd 4 KiB writes on the file system of the store
dd if=/dev/zero of="$W/fsync.test" bs=4k count=200 oflag=dsync 2>"$W/dd.out" >/dev/null
FSYNC_S=$(awk '/copied/ {for (i = 1; i <= NF; i++) if ($i ~ /^s,?$/) print $(i-1)}' "$W/dd.out" | tr -d ,)
FSYNC_RATE=$(python3 -c "print(round(200 / max(float('${FSYNC_S:-0}'), 1e-6)))")
echo "baseline: $FSYNC_RATE fsync'd 4 KiB writes/s on this file system (dd oflag=dsync); $(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg)"
# "offered/s" is computed (nodes / the 30 s agent interval: what the agents are
# set to send), not measured; "stored/s" is measured (rows per second in the store)
printf '%-6s %8s %9s %9s %9s %10s %9s %9s %9s %8s %9s\n' nodes "offered/s" "stored/s" "CPU%" "RSS MB" "DB MB/h" "rep p50" "rep p99" "GET p99" timeouts "late p99"
HZ=$(getconf CLK_TCK)
for n in $SIZES; do # SCALE_NODES="" skips the load part
    fresh_mtcd "n$n" || { echo "mtcd did not start"; exit 1; }
    spec "$n" "" >"$W/spec$n.json"
    t0=$(date +%s.%N)
    mtc cluster create -f "$W/spec$n.json" --id s$n >/dev/null || { echo "create $n failed"; exit 1; }
    tc=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')")
    CD=$MTC_HOME/clusters/s$n
    mtc-simload --cluster-dir "$CD" --seconds $((SECS + 35)) --get-every-ms 2000 \
        >"$W/load$n.json" 2>"$W/load$n.err" &
    LOAD=$!
    PIDS+=("$LOAD")
    sleep 35
    s0="$(sample) $(date +%s.%N)"
    m0="$(stored s$n) $(date +%s.%N)"
    sleep "$SECS"
    s1="$(sample) $(date +%s.%N)"
    m1="$(stored s$n) $(date +%s.%N)"
    wait "$LOAD"
    python3 - "$W/load$n.json" "$n" "$SECS" "$HZ" "$s0" "$s1" "$m0" "$m1" "$tc" <<'PY'
import json, sys
load = json.load(open(sys.argv[1]))
n, secs, hz = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
s0, s1 = [list(map(float, s.split())) for s in sys.argv[5:7]]
m0, m1 = [list(map(float, s.split())) for s in sys.argv[7:9]]  # [count, time] or [time]
tc, secs = sys.argv[9], s1[5] - s0[5]
cpu = (s1[0] - s0[0]) / hz / secs * 100
db_h = (s1[3] - s0[3]) / secs * 3600 / 1e6
stored = (f'{(m1[0] - m0[0]) / (m1[1] - m0[1]):9.1f}' if len(m0) == 2 and len(m1) == 2
          else '      n/a')
r, g, late = load["reports"], load.get("gets", {}), load["lateness"]
print(f'{n:<6} {n / 30:8.1f} {stored} {cpu:9.1f} {s1[1] / 1024:9.1f} {db_h:10.2f} '
      f'{r["p50Ms"]:7.0f}ms {r["p99Ms"]:7.0f}ms {g.get("p99Ms", 0):7.0f}ms {r["timeouts"]:8d} '
      f'{late["p99Ms"] / 1000:8.1f}s   (create {tc} s, peak RSS {s1[2] / 1024:.1f} MB, '
      f'db {s1[3] / 1e6:.1f} MB, WAL {s1[4] / 1e6:.1f} MB)')
PY
    mtc cluster delete s$n >/dev/null 2>&1
    stop_mtcd
done

# ---- 10 simultaneous failures: serial vs concurrent ----
burst() { # $1 label, $2 healthPolicy extra, $3 cluster id
    local id=$3
    fresh_mtcd "burst$1" || return 1
    spec 256 "$2" >"$W/bspec$1.json"
    if ! mtc cluster create -f "$W/bspec$1.json" --id $id >"$W/bcreate$1.out" 2>&1; then
        echo "$1: not measured: $(tail -1 "$W/bcreate$1.out")"
        NOTE=" (this mtcd has no maxConcurrentRemediations: one remediation at a time)"
        stop_mtcd
        return 0
    fi
    mtc-simload --cluster-dir "$MTC_HOME/clusters/$id" --seconds $((REBOOT * 14 + 20)) \
        --burst 10 --burst-at 5 --checks gpu.ecc --max-failures 0 >"$W/burst$1.json" \
        2>"$W/burst$1.err"
    settled() {
        mtc cluster get $id --json | python3 -c '
import json, sys
ns = json.load(sys.stdin)["clusterStatus"]["nodesStatus"]
sys.exit(0 if all("remediation" not in n for n in ns) else 1)'
    }
    for _ in $(seq $((REBOOT * 12))); do settled && break; sleep 1; done
    mtc cluster events $id --json >"$W/bevents$1.json"
    python3 - "$W/burst$1.json" "$W/bevents$1.json" "$1${NOTE:-}" <<'PY'
import json, sys, datetime
load, events, label = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])) or [], sys.argv[3]
def ms(t):
    return datetime.datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp() * 1000
actions = ("VM_RESTART", "VM_REBOOT", "VM_REIMAGE", "VM_REPORT_AND_REPLACEMENT")
waits, missing = [], 0
for f in load["failures"]:
    starts = [ms(e["eventTime"]) for e in events
              if e.get("nodeName") == f["node"] and e["eventType"] in actions]
    if starts:
        waits.append((min(starts) - f["timeMs"]) / 1000)
    else:
        missing += 1
# drained nodes over time, from the drain and resume events
level = peak = 0
for e in sorted(events, key=lambda e: ms(e["eventTime"])):
    level += {"VM_SLURM_DRAIN": 1, "VM_RESUMED": -1}.get(e["eventType"], 0)
    peak = max(peak, level)
waits.sort()
if waits:
    print(f"{label}: failures {len(load['failures'])}: failure -> remediation start "
          f"min {waits[0]:.1f} s, median {waits[len(waits) // 2]:.1f} s, max {waits[-1]:.1f} s"
          f"{'' if not missing else f' ({missing} not started)'}; peak drained {peak}/256 "
          f"({peak / 256 * 100:.1f}% of the pool)")
else:
    print(f"{label}: no remediation started")
PY
    mtc cluster delete $id >/dev/null 2>&1
    stop_mtcd
}
[ "${SCALE_BURST:-1}" = 0 ] && exit 0 # SCALE_BURST=0: the load part only
echo "10 nodes of a 256-node pool fail at once (gpu.ecc, a simulated ${REBOOT} s reboot each):"
burst serial ', "maxConcurrentRemediations": 1' bser
burst concurrent '' bcon
