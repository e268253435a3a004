#!/usr/bin/env bash
# The training job monitor's cost: mtcd's CPU per minute (its own and the
# Slurm commands it runs, reaped children included) while BENCH_JOBS (16)
# trainingJobs run on a local cluster of as many nodes and no client reads
# them — with the monitor every 5 s, then after a restart of mtcd with the
# monitor at one pass in 1000 s (the baseline), in the same run. The trainers
# are SIGSTOPped once they logged steps (so the 2 cores stay mtcd's), which
# also gives the second figure: the time from the SIGSTOP to each job's
# TRAINING_STALL event with nobody reading (the recipe's spike and drop
# alerts are off: 16 tiny runs on 2 cores would raise them, and a cluster's
# last 100 events are what the API shows). BENCH_SECONDS (60) per phase.
. "$(dirname "$0")/lib.inc"
N=${BENCH_JOBS:-16}
SECS=${BENCH_SECONDS:-60}
STOPPED=()
cleanup() {
    [ ${#STOPPED[@]} -gt 0 ] && kill -CONT "${STOPPED[@]}" 2>/dev/null
    [ -n "${SLURM_CONF:-}" ] && scancel --user="$(id -un)" >/dev/null 2>&1
    # the cluster goes with an mtcd, even when the restart below failed
    [ -S "$MTC_HOME/mtcd.sock" ] || { [ -d "$MTC_HOME/clusters/bm" ] && bench_start_mtcd; }
    [ -S "$MTC_HOME/mtcd.sock" ] && mtc cluster delete bm >/dev/null 2>&1
    bench_stop_pids
    [ -n "${KEEP:-}" ] && echo "kept $W" || rm -rf "$W"
}
trap cleanup EXIT
bench_start_mtcd --monitor-ms 5000 || exit 1
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); p=s["nodePools"][0]; p["scalingSpec"]={"minNodeCount":int(sys.argv[3]),"maxNodeCount":int(sys.argv[3])}; json.dump(s,open(sys.argv[2],"w"))' \
    "$ROOT/examples/local-cpu.json" "$W/spec.json" "$N"
mtc cluster create -f "$W/spec.json" --id bm >/dev/null 2>&1 || { echo "cluster create failed"; exit 1; }
eval "$(mtc env bm)"
bench_tiny_data || { echo "corpus preparation failed"; exit 1; }
cat >"$W/r.json" <<'JSON'
{"task": "pretrain",
 "model": {"preset": "tiny-gpt2", "config": {"vocab_size": 320, "n_layer": 1, "d_model": 32,
           "n_head": 2, "d_ff": 64, "max_seq": 32}},
 "data": {"path": "tiny", "tokenizer": "tiny/tokenizer.json"},
 "train": {"steps": 100000, "global_batch": 2, "seq_length": 32, "lr": 3e-3},
 "checkpoint": {"every": 0},
 "monitor": {"spike_z": 1000, "throughput_drop": 0.001},
 "resources": {"nodes": 1, "time": "01:00:00"},
 "cluster_types": {"local": {"micro_batch": 2}}}
JSON
URL=http://localhost/v1beta1/projects/local/locations/local/modelDevelopmentClusters/bm/trainingJobs
JOBIDS=()
for i in $(seq "$N"); do
    body=$(python3 -c "import json,sys; print(json.dumps({'recipe': json.load(open(sys.argv[1])), 'dataDir': sys.argv[2], 'experimentName': 'mon%s' % sys.argv[3], 'nodeCount': 1}))" "$W/r.json" "$W/data" "$i")
    out=$(curl -s --unix-socket "$MTC_HOME/mtcd.sock" -X POST -H 'Content-Type: application/json' \
        --data-binary "$body" "$URL?trainingJobId=mon$i") || { echo "POST failed"; exit 1; }
    JOBIDS+=("$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["slurmJobId"])' "$out")") ||
        { echo "POST trainingJobs: $out"; exit 1; }
done
# the mtc-train processes of Slurm job $1 (by their SLURM_JOB_ID)
trainer_pids() {
    local p
    for p in /proc/[0-9]*; do
        case "$(readlink "$p/exe" 2>/dev/null)" in */mtc-train) ;; *) continue ;; esac
        tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "SLURM_JOB_ID=$1" && echo "${p#/proc/}"
    done
}
# each job: running with 3 logged steps, then its trainer stopped (a GET of
# that job alone finds its directory: it refreshes no other job)
: >"$W/stops.txt"
for i in $(seq "$N"); do
    j=${JOBIDS[$((i - 1))]}
    td=$(curl -s --unix-socket "$MTC_HOME/mtcd.sock" "$URL/mon$i" | python3 -c 'import json,sys; print(json.load(sys.stdin)["taskDir"])')
    for _ in $(seq 300); do
        [ "$(wc -l <"$td/logs/metrics.jsonl" 2>/dev/null || echo 0)" -ge 3 ] && break
        sleep 0.2
    done
    p=$(trainer_pids "$j")
    [ -n "$p" ] || { echo "job $j: no trainer found"; exit 1; }
    kill -STOP $p && STOPPED+=($p)
    echo "mon$i $(date +%s.%N)" >>"$W/stops.txt"
done
# every job's TRAINING_STALL, read from the events only
for _ in $(seq 120); do
    mtc cluster events bm --json >"$W/ev.json" 2>/dev/null
    [ "$(python3 -c 'import json,sys; print(sum(e.get("eventType") == "TRAINING_STALL" for e in json.load(open(sys.argv[1])) or []))' "$W/ev.json")" -ge "$N" ] && break
    sleep 1
done

cpu() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; } # utime stime cutime cstime, ticks
measure() { # mtcd's CPU seconds over SECS
    local a b
    a=$(cpu "$MTCD"); sleep "$SECS"; b=$(cpu "$MTCD")
    python3 -c "import os, sys; print((float(sys.argv[2]) - float(sys.argv[1])) / os.sysconf('SC_CLK_TCK'))" "$a" "$b"
}
sleep 5
on=$(measure)
kill "$MTCD" && for _ in $(seq 100); do kill -0 "$MTCD" 2>/dev/null || break; sleep 0.1; done
bench_start_mtcd --monitor-ms 1000000 || { echo "mtcd restart failed"; exit 1; }
sleep 10 # its first pass, at start, is over
off=$(measure)
python3 - "$N" "$SECS" "$on" "$off" "$W/ev.json" "$W/stops.txt" <<'PY'
import json, sys, datetime
n, secs, on, off = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
stops = {k: float(v) for k, v in (l.split() for l in open(sys.argv[6]))}
lat = []
for e in json.load(open(sys.argv[5])) or []:
    job = e.get("description", "").split(" ")[1] if e.get("eventType") == "TRAINING_STALL" else ""
    if job in stops:
        t = datetime.datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00")).timestamp()
        lat.append(t - stops.pop(job))
print(f"{n} running trainingJobs (trainers stopped), no client reading, {secs:.0f} s per phase")
print(f"mtcd CPU, monitor every 5 s:      {on * 60 / secs:6.2f} s per minute")
print(f"mtcd CPU, monitor off (baseline): {off * 60 / secs:6.2f} s per minute"
      f"   the monitor: +{(on - off) * 60 / secs:.2f} s/min ({on / off if off > 0 else float('inf'):.1f}x)")
if lat:
    lat.sort()
    print(f"SIGSTOP to TRAINING_STALL (nobody reading): {len(lat)} of {n} jobs, median {lat[len(lat) // 2]:.1f} s, max {lat[-1]:.1f} s")
PY
