#!/usr/bin/env bash
# mtcd's /metrics scrape time against a /healthz request of the same mtcd in
# the same run: median and p90 of BENCH_N (100) requests each over the unix
# socket (curl's time_total), the ratio, and the size of a scrape, in two
# settings:
# 1. 16 nodes and 4 running training jobs (local provider, CPU-only nodes;
#    tiny recipe runs that log every step); BENCH_LOCAL=0 skips it.
# 2. BENCH_SIM_NODES (2048; 0 skips it) simulated nodes (provider sim,
#    docs/scale.md) whose agents (mtc-simload) report every 30 s, scraped
#    after every node has reported once.
# A scrape asks Slurm nothing: it formats what the job monitor and the
# supervisor keep. BENCH_MTCD=PATH measures another mtcd binary (an older
# build, for a before/after in one run) with this script's clients.
. "$(dirname "$0")/lib.inc"
N=${BENCH_N:-100}
SIM=${BENCH_SIM_NODES:-2048}
MTCD_BIN=${BENCH_MTCD:-mtcd}
HOMES=()
cleanup() {
    [ -n "${SLURM_CONF:-}" ] && scancel --user="$(id -un)" >/dev/null 2>&1
    for h in "${HOMES[@]}"; do
        [ -S "$h/mtcd.sock" ] && MTC_HOME=$h mtc cluster delete "$(basename "$h")" >/dev/null 2>&1
    done
    bench_stop_pids
    [ -n "${KEEP:-}" ] && echo "kept $W" || rm -rf "$W"
}
trap cleanup EXIT
# mtcd for $MTC_HOME (set by the caller), its pid into PIDS
start() {
    mkdir -p "$MTC_HOME" && HOMES+=("$MTC_HOME")
    "$MTCD_BIN" --home "$MTC_HOME" --daemon "$@" || return 1
    PIDS+=("$(cat "$MTC_HOME/mtcd.pid")")
}
times() { # $1 path → N time_total values
    for _ in $(seq "$N"); do
        curl -s -o /dev/null -w '%{time_total}\n' --unix-socket "$MTC_HOME/mtcd.sock" "http://localhost$1"
    done
}
scrape() { curl -s -m 120 --unix-socket "$MTC_HOME/mtcd.sock" http://localhost/metrics; }
# $1 what was scraped: N /healthz then N /metrics, the figures
measure() {
    times /healthz >"$W/healthz.t"
    times /metrics >"$W/metrics.t"
    python3 - "$W/healthz.t" "$W/metrics.t" "$1" "$(scrape | wc -c)" "$N" <<'PY'
import statistics, sys
h = sorted(map(float, open(sys.argv[1]))); m = sorted(map(float, open(sys.argv[2])))
p90 = lambda v: v[int(0.9 * (len(v) - 1))]
print(f"/metrics with {sys.argv[3]} ({sys.argv[4]} bytes), {sys.argv[5]} requests each, unix socket:")
print(f"  /healthz  median {1e3*statistics.median(h):.2f} ms  p90 {1e3*p90(h):.2f} ms")
print(f"  /metrics  median {1e3*statistics.median(m):.2f} ms  p90 {1e3*p90(m):.2f} ms")
print(f"  ratio /metrics / /healthz (median): {statistics.median(m)/statistics.median(h):.1f}x")
PY
}
echo "$(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg); mtcd: $(command -v "$MTCD_BIN")"

if [ "${BENCH_LOCAL:-1}" != 0 ]; then
    export MTC_HOME=$W/bm
    start || exit 1
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); p=s["nodePools"][0]; p["scalingSpec"]={"minNodeCount":16,"maxNodeCount":16}; print(json.dumps(s))' \
        "$ROOT/examples/local-cpu.json" >"$W/spec.json"
    mtc cluster create -f "$W/spec.json" --id bm >/dev/null 2>&1 || { echo "cluster create failed"; exit 1; }
    eval "$(mtc env bm)"
    bench_tiny_data || { echo "corpus preparation failed"; exit 1; }
    C=/v1beta1/projects/local/locations/local/modelDevelopmentClusters/bm/trainingJobs
    for i in 1 2 3 4; do
        python3 - "$W" $i >"$W/job$i.json" <<'PY'
import json, sys
w, i = sys.argv[1], sys.argv[2]
r = {"task": "pretrain",
     "model": {"preset": "tiny-gpt2", "config": {"vocab_size": 320, "n_layer": 2, "d_model": 64,
               "n_head": 4, "d_ff": 256, "max_seq": 64}},
     "data": {"path": "tiny", "tokenizer": "tiny/tokenizer.json"},
     "train": {"steps": 1000000, "global_batch": 8, "seq_length": 64, "lr": 3e-3},
     "resources": {"nodes": 1, "time": "00:30:00"},
     "cluster_types": {"local": {"micro_batch": 4}}}
print(json.dumps({"recipe": r, "dataDir": w + "/data", "experiment_name": "bench" + i, "nodeCount": 1}))
PY
        curl -s --unix-socket "$MTC_HOME/mtcd.sock" -X POST -H 'Content-Type: application/json' \
            --data-binary "@$W/job$i.json" "http://localhost$C?trainingJobId=job$i" >/dev/null
    done
    end=$((SECONDS + 300))
    until [ "$(scrape | grep -cE '^mtc_experiment_step\{.*\} [1-9]')" -ge 4 ] || [ $SECONDS -ge $end ]; do sleep 1; done
    running=$(scrape | grep -cE '^mtc_experiment_step\{.*\} [1-9]')
    nodes=$(scrape | grep -c '^mtc_nodes{cluster="bm"')
    [ "$running" -ge 4 ] || { echo "only $running of 4 jobs running after 300 s"; exit 1; }
    measure "$nodes nodes and $running running jobs"
    scancel --user="$(id -un)" >/dev/null 2>&1
    mtc cluster delete bm >/dev/null 2>&1
    unset SLURM_CONF
fi

if [ "$SIM" != 0 ]; then
    export MTC_HOME=$W/sm
    start || exit 1
    cat >"$W/sim.json" <<JSON
{"displayName": "metrics: $SIM simulated nodes",
 "nodePools": [{"id": "gpu", "machineSpec": {"machineType": "a3-megagpu-8g"},
                "scalingSpec": {"minNodeCount": $SIM, "maxNodeCount": $SIM}}],
 "healthPolicy": {"intervalSeconds": 30, "reportEverySeconds": 30},
 "sim": {"restartSeconds": 10, "rebootSeconds": 10, "reimageSeconds": 10, "replaceSeconds": 10}}
JSON
    mtc cluster create -f "$W/sim.json" --id sm >/dev/null || { echo "sim cluster create failed"; exit 1; }
    # the agents report for the whole measurement: one period first, so every node has
    mtc-simload --cluster-dir "$MTC_HOME/clusters/sm" --seconds 1200 --max-failures 0 \
        >"$W/simload.json" 2>"$W/simload.err" &
    PIDS+=("$!")
    sleep 35
    reported=$(scrape | awk '$1 == "mtc_health_reports_total{cluster=\"sm\"}" {print $2}')
    measure "$SIM simulated nodes, ${reported:-0} health reports stored, the agents reporting"
fi
