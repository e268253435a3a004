#!/usr/bin/env bash
# Any framework's recovery, measured (issue 30): on a 2-node local cluster,
# (1) a node fault (mtc cluster report-faulty) mid-run of a PyTorch DDP job
# (tests/integration/ddp_train.py, 2 ranks, gloo) and of an mtc-train job,
# from the report to the first step after the resume, by stage: report →
# the job's start ends (drained, requeued: its log's end line), → the next
# start (Slurm's requeue and the node's repair), → its first step began
# (start-up: interpreter, imports, rendezvous, checkpoint load); (2) hang
# detection latency against monitor.hang_timeout_s: a rank SIGSTOPped (the
# job's watcher names it) and a rank blocked without stopping (a deadlock:
# only the timeout finds it), each with a short and a long timeout. Whole
# seconds from the log's start/end lines; the event times from mtcd.
. "$(dirname "$0")/lib.inc"
PY=/usr/bin/python3
PROG=$ROOT/tests/integration/ddp_train.py
cleanup() {
    [ -S "$MTC_HOME/mtcd.sock" ] && mtc cluster delete br >/dev/null 2>&1
    bench_stop_pids
    [ -n "${KEEP:-}" ] && echo "kept $W" || rm -rf "$W"
}
trap cleanup EXIT
bench_start_mtcd || exit 1
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); s["nodePools"][0]["scalingSpec"]={"minNodeCount":2,"maxNodeCount":2}; json.dump(s,open(sys.argv[2],"w"))' \
    "$ROOT/examples/local-cpu.json" "$W/spec.json"
mtc cluster create -f "$W/spec.json" --id br >/dev/null 2>&1 || { echo "cluster create failed"; exit 1; }
eval "$(mtc env br)"
bench_tiny_data || { echo "corpus preparation failed"; exit 1; }
URL=http://localhost/v1beta1/projects/local/locations/local/modelDevelopmentClusters/br/trainingJobs
post() { # post NAME RECIPE_JSON [DATA_DIR]: the Slurm job id
    local body out
    body=$(python3 -c 'import json,sys; b={"recipe": json.loads(sys.argv[1]), "experimentName": sys.argv[2], "nodeCount": 2}
if sys.argv[3]: b["dataDir"] = sys.argv[3]
print(json.dumps(b))' "$2" "$1" "${3:-}")
    out=$(curl -s --unix-socket "$MTC_HOME/mtcd.sock" -X POST -H 'Content-Type: application/json' \
        --data-binary "$body" "$URL?trainingJobId=$1")
    python3 -c 'import json,sys; print(json.loads(sys.argv[1])["slurmJobId"])' "$out" 2>/dev/null ||
        { echo "POST $1: $out" >&2; return 1; }
}
status() { mtc experiment status "$1" --json; }
field() { python3 -c 'import json,sys; print(eval("json.load(sys.stdin)" + sys.argv[1]))' "$1"; }
rows() { wc -l 2>/dev/null <"$(status "$1" | field '["logDir"]')/metrics.jsonl" || echo 0; }
wait_rows() { for _ in $(seq 600); do [ "$(rows "$1")" -ge "$2" ] && return 0; sleep 0.2; done; return 1; }
: >"$W/faults.txt"

# --- (1) a node fault mid-run, report → first step after the resume -------------
fault() { # fault NAME SLURM_JOB: report its last node faulty, wait for a step after the restart
    local node t0 td ld
    wait_rows "$1" 10 || { echo "$1: no progress"; return 1; }
    td=$(status "$1" | field '["taskDir"]')
    ld=$(status "$1" | field '["logDir"]')
    node=$(scontrol show hostnames "$(squeue -h -j "$2" -o %N)" | tail -1)
    t0=$(date +%s.%N)
    mtc cluster report-faulty br "$node" --description "bench: node fault" --no-wait >/dev/null
    for _ in $(seq 600); do
        python3 - "$td/$2.log" "$ld/metrics.jsonl" <<'PY' && break
import json, sys, datetime
starts = [l.split()[4] for l in open(sys.argv[1]) if l.startswith("mtc: job ") and " start " in l]
if len(starts) < 2:
    sys.exit(1)
t = datetime.datetime.strptime(starts[1], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()
rows = [json.loads(l) for l in open(sys.argv[2]) if l.endswith("\n")]
sys.exit(0 if any(r.get("time", 0) > t for r in rows) else 1)
PY
        sleep 0.5
    done
    echo "$1 $2 $t0" >>"$W/faults.txt"
}
J1=$(post ddp "{\"task\": \"custom\", \"launch\": {\"command\": [\"$PY\", \"$PROG\", \"--steps\", \"60\", \"--ckpt-every\", \"5\", \"--sleep\", \"0.3\"]}}") || exit 1
fault ddp "$J1"
J2=$(post trainer '{"task": "pretrain",
 "model": {"preset": "tiny-gpt2", "config": {"vocab_size": 320, "n_layer": 2, "d_model": 64, "n_head": 2, "d_ff": 128, "max_seq": 64}},
 "data": {"path": "tiny", "tokenizer": "tiny/tokenizer.json"},
 "train": {"steps": 400, "global_batch": 4, "seq_length": 64, "lr": 3e-3, "log_every": 1},
 "checkpoint": {"every": 20}, "resources": {"nodes": 2, "time": "00:30:00"},
 "cluster_types": {"local": {"micro_batch": 2, "ranks_per_node": 1}}}' "$W/data") || exit 1
fault trainer "$J2"
python3 - "$W/faults.txt" "$MTC_HOME" <<'PY'
import json, subprocess, sys, datetime
def utc(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()
print("node fault mid-run (report-faulty) → first step after the resume, seconds by stage:")
print(f"{'job':10} {'→ start ends':>13} {'→ next start':>13} {'→ first step':>13} {'total':>7}   resumed from")
for line in open(sys.argv[1]):
    name, job, t0 = line.split()
    st = json.loads(subprocess.check_output(["mtc", "experiment", "status", name, "--json"]))
    log = open(f"{st['taskDir']}/{job}.log").read().splitlines()
    starts = [utc(l.split()[4]) for l in log if l.startswith("mtc: job ") and " start " in l]
    ends = [utc(l.split()[4].rstrip(",")) for l in log if l.startswith("mtc: job ") and " end " in l]
    rows = [json.loads(l) for l in open(f"{st['logDir']}/metrics.jsonl")]
    t0 = float(t0)
    after = [r for r in rows if r.get("time", 0) > starts[1]]
    dt = (after[0].get("step_time_s") or 4 * 64 / after[0]["tokens_per_s"]) if after else 0
    first = after[0]["time"] - dt if after else float("nan")
    end = min([e for e in ends if e >= t0 - 1] or [starts[1]])
    print(f"{name:10} {end - t0:13.1f} {starts[1] - end:13.1f} {first - starts[1]:13.1f} {first - t0:7.1f}   step {after[0]['step'] - 1 if after else '?'}")
PY
for n in ddp trainer; do mtc experiment cancel "$n" >/dev/null 2>&1; done

# --- (2) hang detection latency vs hang_timeout_s ---------------------------------
hang() { # hang NAME TIMEOUT stop|block: seconds from the hang to TRAINING_HANG
    local j pid t0 args=(--steps 400 --ckpt-every 5 --sleep 0.3)
    [ "$3" = block ] && args+=(--hang-at 12)
    j=$(post "$1" "{\"task\": \"custom\", \"monitor\": {\"hang_timeout_s\": $2}, \"launch\": {\"command\": [\"$PY\", \"$PROG\", $(printf '"%s", ' "${args[@]}" | sed 's/, $//')]}}") || return 1
    wait_rows "$1" 10 || { echo "$1: no progress"; return 1; }
    if [ "$3" = stop ]; then
        for p in /proc/[0-9]*; do
            tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qx "SLURM_JOB_ID=$j" || continue
            tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qx "RANK=1" || continue
            grep -q ddp_train "$p/cmdline" 2>/dev/null && pid=${p#/proc/}
        done
        t0=$(date +%s.%N)
        kill -STOP "$pid"
    else # the last row before the block: step 11's time
        t0=$(tail -1 "$(status "$1" | field '["logDir"]')/metrics.jsonl" | field '["time"]')
    fi
    for _ in $(seq 600); do
        mtc cluster events br --json >"$W/ev.json" 2>/dev/null
        python3 - "$W/ev.json" "$1" "$t0" "$2" "$3" <<'PY' && break
import json, sys, datetime
for e in json.load(open(sys.argv[1])) or []:
    if e.get("eventType") == "TRAINING_HANG" and f"(experiment {sys.argv[2]})" in e["description"]:
        t = datetime.datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00")).timestamp()
        how = "named by the watcher" if " is stopped " in e["description"] else "no progress"
        print(f"{sys.argv[5]:6} hang_timeout_s {sys.argv[4]:>3}: TRAINING_HANG {t - float(sys.argv[3]):5.1f} s after the hang ({how})")
        sys.exit(0)
sys.exit(1)
PY
        sleep 0.5
    done
    mtc experiment cancel "$1" >/dev/null 2>&1
}
echo "hang detection latency (monitor pass 5 s; the watcher says a stop after min(5, timeout) s):"
hang stop8 8 stop
hang stop30 30 stop
hang block8 8 block
hang block20 20 block
