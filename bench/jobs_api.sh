#!/usr/bin/env bash
# Training jobs through the API: the time to submit one recipe run as a
# `POST …/trainingJobs` (mtcd resolves, checks, writes the experiment and
# runs sbatch) and as `mtc run` (the CLI, a client of that API), against
# `sbatch` of the same rendered script run directly, in the same run on the
# same local cluster. Figures: per submission the mean (the loop's wall time
# / N) and the median (sbatch: each call's wall time; POST: curl's
# time_total), and the ratios to sbatch's. BENCH_N sets the submissions per
# way (10). The partition is DOWN: the jobs queue and never run.
# BENCH_MTCD=PATH: that mtcd binary (an older build: before/after in one run).
. "$(dirname "$0")/lib.inc"
N=${BENCH_N:-10}
cleanup() {
    [ -n "${SLURM_CONF:-}" ] && scancel --user="$(id -un)" >/dev/null 2>&1
    [ -S "$MTC_HOME/mtcd.sock" ] && mtc cluster delete bj >/dev/null 2>&1
    bench_stop_pids
    [ -n "${KEEP:-}" ] && echo "kept $W" || rm -rf "$W"
}
trap cleanup EXIT
if [ -n "${BENCH_MTCD:-}" ]; then
    "$BENCH_MTCD" --home "$MTC_HOME" --daemon || exit 1
    PIDS+=("$(cat "$MTC_HOME/mtcd.pid")")
else
    bench_start_mtcd || exit 1
fi
echo "$(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg); mtcd: ${BENCH_MTCD:-$(command -v mtcd)}"
mtc cluster create -f "$ROOT/examples/local-2node.json" --id bj >/dev/null 2>&1 ||
    { echo "cluster create failed"; exit 1; }
eval "$(mtc env bj)"
bench_tiny_data || { echo "corpus preparation failed"; exit 1; }
cat >"$W/r.json" <<'JSON'
{"task": "pretrain",
 "model": {"preset": "tiny-gpt2", "config": {"vocab_size": 320, "n_layer": 2, "d_model": 64,
           "n_head": 4, "d_ff": 256, "max_seq": 64}},
 "data": {"path": "tiny", "tokenizer": "tiny/tokenizer.json"},
 "train": {"steps": 10, "global_batch": 8, "seq_length": 64, "lr": 3e-3},
 "resources": {"nodes": 1, "time": "00:10:00"},
 "cluster_types": {"local": {"micro_batch": 4}}}
JSON
# The partition DOWN: jobs queue but never run while submissions are timed.
scontrol update PartitionName=a3m State=DOWN >/dev/null 2>&1 ||
    { echo "cannot stop the partition"; exit 1; }
mtc run -s "$W/r.json" --data-dir "$W/data" --dry-run >"$W/script.sh" 2>/dev/null ||
    { echo "dry run failed"; exit 1; }
BODY=$(python3 -c "import json,sys; print(json.dumps({'recipe': json.load(open(sys.argv[1])), 'dataDir': sys.argv[2]}))" "$W/r.json" "$W/data")
URL=http://localhost/v1beta1/projects/local/locations/local/modelDevelopmentClusters/bj/trainingJobs
now() { date +%s.%N; }

t0=$(now)
for i in $(seq "$N"); do
    a=$(now)
    sbatch --parsable "$W/script.sh" >/dev/null || { echo "sbatch failed"; exit 1; }
    echo "$a $(now)" >>"$W/sbatch.t"
done
t1=$(now)
for i in $(seq "$N"); do
    out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --unix-socket "$MTC_HOME/mtcd.sock" -X POST \
        -H 'Content-Type: application/json' --data-binary "$BODY" "$URL")
    [ "${out%% *}" = 200 ] || { echo "POST trainingJobs: HTTP ${out%% *}"; exit 1; }
    echo "${out#* }" >>"$W/post.t"
done
t2=$(now)
for i in $(seq "$N"); do
    # one experiment per second: a name of its own each time
    mtc run -s "$W/r.json" --data-dir "$W/data" --experiment-name "cli$i" >/dev/null 2>&1 ||
        { echo "mtc run failed"; exit 1; }
done
t3=$(now)
queued=$(squeue -h | wc -l)
python3 - "$N" "$t0" "$t1" "$t2" "$t3" "$queued" "$W/sbatch.t" "$W/post.t" <<'PY'
import statistics, sys
n = int(sys.argv[1]); t0, t1, t2, t3 = map(float, sys.argv[2:6])
sb, api, cli = (t1 - t0) / n, (t2 - t1) / n, (t3 - t2) / n
sb50 = statistics.median(b - a for a, b in (map(float, l.split()) for l in open(sys.argv[7])))
api50 = statistics.median(float(l) for l in open(sys.argv[8]))
print(f"submissions per way: {n} ({sys.argv[6]} jobs queued, none ran)")
print(f"sbatch of the rendered script:   mean {sb * 1000:8.1f} ms  1.00x   median {sb50 * 1000:7.1f} ms  1.00x")
print(f"POST trainingJobs (curl):        mean {api * 1000:8.1f} ms {api / sb:5.2f}x   median {api50 * 1000:7.1f} ms {api50 / sb50:5.2f}x")
print(f"mtc run (CLI -> API, status):    mean {cli * 1000:8.1f} ms {cli / sb:5.2f}x"
      "  (its status block waits up to 5 s for RUNNING; these jobs never start)")
PY
