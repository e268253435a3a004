#!/usr/bin/env bash
# Accounting's cost (issue 31), in one run: two 2-node local clusters, one
# with orchestratorSpec.slurmSpec.accounting enabled (slurmdbd on a private
# MariaDB) and one without; BENCH_JOBS (200) trivial jobs sbatch'ed to each
# (one at a time: --wrap true), the median and p95 of submit → start from
# sacct/scontrol's times, the whole batch's wall time; then on the accounting
# cluster BENCH_ARRAY (2000) more as job arrays, then `sacct` over every
# finished job and mtcd's usage API for the same query; and the resident
# memory of mariadbd and slurmdbd.
. "$(dirname "$0")/lib.inc"
N=${BENCH_JOBS:-200}
cleanup() {
    for id in acon acof; do mtc cluster delete "$id" >/dev/null 2>&1; done
    bench_stop_pids
    [ -n "${KEEP:-}" ] && echo "kept $W" || rm -rf "$W"
}
trap cleanup EXIT
bench_start_mtcd || exit 1
for on in true false; do
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); s["orchestratorSpec"]["slurmSpec"]["accounting"]={"enabled": sys.argv[3] == "true"}; json.dump(s,open(sys.argv[2],"w"))' \
        "$ROOT/examples/local-2node.json" "$W/spec-$on.json" "$on"
done
mtc cluster create -f "$W/spec-true.json" --id acon >/dev/null 2>&1 || { echo "create (accounting) failed"; exit 1; }
mtc cluster create -f "$W/spec-false.json" --id acof >/dev/null 2>&1 || { echo "create failed"; exit 1; }

# batch ID: N jobs, then the submit→start latencies (s) into $W/lat-ID.txt, wall time printed
batch() {
    local conf=$MTC_HOME/clusters/$1/slurm.conf t0 t1 ids=()
    t0=$(date +%s.%N)
    for _ in $(seq "$N"); do
        ids+=("$(SLURM_CONF=$conf sbatch --parsable -N 1 -o /dev/null --wrap true)")
    done
    while [ -n "$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null)" ]; do sleep 0.5; done
    t1=$(date +%s.%N)
    # every job slurmctld still holds (MinJobAge 300 s): `show job` takes one id or none
    SLURM_CONF=$conf scontrol show job -o 2>/dev/null |
        python3 -c '
import sys, datetime
def t(s): return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S").timestamp()
for line in sys.stdin:
    f = dict(w.split("=", 1) for w in line.split() if "=" in w)
    if "SubmitTime" in f and "StartTime" in f and f["StartTime"] != "Unknown":
        print(t(f["StartTime"]) - t(f["SubmitTime"]))' >"$W/lat-$1.txt"
    python3 -c "print(f'{float(\"$t1\") - float(\"$t0\"):.1f}')"
}
won=$(batch acon)
wof=$(batch acof)
python3 - "$W/lat-acon.txt" "$W/lat-acof.txt" "$N" "$won" "$wof" <<'PY'
import statistics, sys
def q(f):
    v = sorted(float(x) for x in open(f))
    return (statistics.median(v), v[int(0.95 * (len(v) - 1))], len(v)) if v else (float("nan"),) * 2 + (0,)
a, b = q(sys.argv[1]), q(sys.argv[2])
print(f"{sys.argv[3]} trivial jobs, submit -> start (whole seconds in Slurm's times):")
print(f"  with accounting:    median {a[0]:.1f} s, p95 {a[1]:.1f} s, batch {sys.argv[4]} s ({a[2]} started)")
print(f"  without (baseline): median {b[0]:.1f} s, p95 {b[1]:.1f} s, batch {sys.argv[5]} s ({b[2]} started)")
print(f"  batch time ratio: {float(sys.argv[4]) / float(sys.argv[5]):.2f}x")
PY
conf=$MTC_HOME/clusters/acon/slurm.conf
# BENCH_ARRAY (2000) more finished jobs in the database for the queries
# below, as job arrays (Slurm's MaxArraySize is 1001)
A=${BENCH_ARRAY:-2000}
t0=$(date +%s)
for ((k = 0; k < A; k += 1000)); do
    n=$((A - k < 1000 ? A - k : 1000))
    SLURM_CONF=$conf sbatch --parsable -N 1 -o /dev/null --array=0-$((n - 1)) --wrap true >/dev/null
done
while [ -n "$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null)" ] && [ $(($(date +%s) - t0)) -lt 1800 ]; do sleep 2; done
echo "$A array tasks ran in $(($(date +%s) - t0)) s"
sleep 5 # slurmctld sends the last records to slurmdbd
t0=$(date +%s.%N)
n=$(SLURM_CONF=$conf sacct -a -X -n -P -S now-1days -o jobid | wc -l)
t1=$(date +%s.%N)
curl -s --unix-socket "$MTC_HOME/mtcd.sock" -o "$W/usage.json" \
    "http://x/v1beta1/projects/local/locations/local/modelDevelopmentClusters/acon/accounts:usage?since=now-1days"
t2=$(date +%s.%N)
python3 - "$t0" "$t1" "$t2" "$n" "$W/usage.json" <<'PY'
import json, sys
t0, t1, t2, n = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
u = json.load(open(sys.argv[5]))["usage"]
print(f"sacct over {n} finished jobs: {1000 * (t1 - t0):.0f} ms; mtcd's accounts:usage for the same: {1000 * (t2 - t1):.0f} ms ({sum(x['jobs'] for x in u)} jobs summed)")
PY
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null; }
m=$(cat "$MTC_HOME/clusters/acon/run/mariadbd.pid") d=$(cat "$MTC_HOME/clusters/acon/run/slurmdbd.pid")
echo "memory per cluster: mariadbd $(( $(rss "$m") / 1024 )) MiB, slurmdbd $(( $(rss "$d") / 1024 )) MiB resident; database directory $(du -sm "$MTC_HOME/clusters/acon/db" | cut -f1) MiB"
