#!/usr/bin/env bash
# Recipe launcher benchmark on a local 2-node cluster: time from `mtc run` to
# the first training step (submit + schedule + srun/PMIx start + model set-up),
# and tokens/s of the tiny pretraining recipe on 2 nodes vs the same recipe on
# 1 node in the same run (scaling efficiency = tps2 / (2 x tps1); 1 CPU rank
# per node, 1 thread each). Corpus: ../shared/data/tinyshakespeare.txt when
# present, else the Debian license texts.
. "$(dirname "$0")/lib.inc"
STEPS=${BENCH_STEPS:-60}
cleanup() {
    mtc cluster delete bs >/dev/null 2>&1
    bench_stop_pids
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$MTC_HOME"
bench_start_mtcd || exit 1
mtc cluster create -f "$ROOT/examples/local-2node.json" --id bs >/dev/null || { echo "cluster create failed"; exit 1; }
eval "$(mtc env bs)"

CORPUS=$ROOT/../shared/data/tinyshakespeare.txt
if [ -f "$CORPUS" ]; then cp "$CORPUS" "$W/corpus.txt"; else cat /usr/share/common-licenses/* >"$W/corpus.txt"; fi
# prepared into the cache before timing (both runs find it there: bench/datasets.sh
# measures the run that prepares it)
mtc-train data prepare --source "$W/corpus.txt" --kind pretrain --cache-dir "$MTC_HOME/cache" \
    >/dev/null 2>&1 || { echo "corpus preparation failed"; exit 1; }
# the catalog recipe with fewer steps and no periodic checkpoints
python3 - "$ROOT/recipes/pretrain/tiny_gpt2_pt.json" "$W/bench_pt.json" "$STEPS" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["train"].update(steps=int(sys.argv[3]), eval_every=0)
r["checkpoint"] = {"every": 0, "keep": 1}
json.dump(r, open(sys.argv[2], "w"))
PY

run() { # run NODES NAME → prints "seconds-to-first-step median-tokens/s"
    local t0 td st
    t0=$(date +%s%3N)
    mtc run -s "$W/bench_pt.json" -n "$1" --data "$W/corpus.txt" --experiment-name "$2" >"$W/$2.out" 2>&1 ||
        { cat "$W/$2.out" >&2; return 1; }
    td=$(sed -n 's/^- Local Directory: //p' "$W/$2.out")
    while ! grep -q '"step":1,' "$td/logs/metrics.jsonl" 2>/dev/null; do
        sleep 0.05
        [ $(($(date +%s%3N) - t0)) -gt 120000 ] && { echo "no first step" >&2; return 1; }
    done
    local first
    first=$(($(date +%s%3N) - t0))
    for _ in $(seq 600); do
        st=$(mtc experiment status "$2" | sed -n 's/^- Status: //p')
        case $st in COMPLETED) break ;; FAILED|CANCELLED|UNKNOWN) echo "run $2: $st" >&2; return 1 ;; esac
        sleep 1
    done
    python3 - "$td/logs/metrics.jsonl" "$first" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tps = statistics.median(r["tokens_per_s"] for r in rows if r["step"] > 5)
print("%.2f %.0f" % (int(sys.argv[2]) / 1000, tps))
PY
}
R1=$(run 1 one) || exit 1
R2=$(run 2 two) || exit 1
read -r F1 T1 <<<"$R1"
read -r F2 T2 <<<"$R2"
echo "tiny_gpt2_pt (tiny-gpt2, vocab 1024, seq 128, global batch 16), $STEPS steps, local cluster:"
printf '  mtc run -> first training step: 1 node %.2f s, 2 nodes %.2f s\n' "$F1" "$F2"
printf '  tokens/s (median): 1 node %.0f, 2 nodes %.0f\n' "$T1" "$T2"
python3 -c 'import sys; t1, t2 = float(sys.argv[1]), float(sys.argv[2]); print("  speed-up 2 vs 1 node: %.2fx, scaling efficiency %.0f%%" % (t2 / t1, 100 * t2 / (2 * t1)))' "$T1" "$T2"
