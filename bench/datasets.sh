#!/usr/bin/env bash
# Dataset preparation benchmark: `mtc-train data prepare` (read, fingerprint, validate,
# tokenize, write under a key) vs `mtc-train prepare` run directly on the same text with
# the same tokenizer (MB/s of text and tokens/s, and their ratio); a second, cached
# prepare; built-in SFT records; and, on a local cluster, the time from `mtc run` to the
# first training step with the data not yet prepared vs already in the cache.
# Text: the Debian license texts repeated to BENCH_MB (default 8) MB.
. "$(dirname "$0")/lib.inc"
MB=${BENCH_MB:-8}
cleanup() {
    mtc cluster delete bd >/dev/null 2>&1
    bench_stop_pids
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$MTC_HOME"
ms() { date +%s%3N; }

python3 - "$W/big.txt" "$MB" <<'PY'
import glob, sys
text = "".join(open(f, errors="replace").read() for f in sorted(glob.glob("/usr/share/common-licenses/*")))
want = int(sys.argv[2]) * 1000 * 1000
with open(sys.argv[1], "w") as f:
    n = 0
    while n < want:
        f.write(text)
        n += len(text)
PY
BYTES=$(stat -c %s "$W/big.txt")
# the built-in tokenizer, trained once (its own cost, measured too)
t0=$(ms)
mtc-train data prepare --source builtin:tiny-corpus --kind pretrain --cache-dir "$W/tokcache" --json \
    >"$W/tc.json" 2>/dev/null || { echo "built-in prepare failed"; exit 1; }
TTOK=$(($(ms) - t0))
TOK=$(python3 -c "import json; print(json.load(open('$W/tc.json'))['path'])")/tokenizer.json

t0=$(ms)
mtc-train prepare --tokenizer "$TOK" --input "$W/big.txt" --output "$W/direct" --val-fraction 0.05 \
    2>/dev/null || { echo "mtc-train prepare failed"; exit 1; }
TD=$(($(ms) - t0))
NTOK=$(python3 -c "import json; m = json.load(open('$W/direct/meta.json')); print(m['trainTokens'] + m['valTokens'])")
t0=$(ms)
mtc-train data prepare --source "$W/big.txt" --kind pretrain --cache-dir "$W/cache" --tokenizer "$TOK" \
    --json >"$W/p1.json" 2>/dev/null || { echo "data prepare failed"; exit 1; }
TP=$(($(ms) - t0))
t0=$(ms)
mtc-train data prepare --source "$W/big.txt" --kind pretrain --cache-dir "$W/cache" --tokenizer "$TOK" \
    --json >"$W/p2.json" 2>/dev/null || { echo "cached data prepare failed"; exit 1; }
TC=$(($(ms) - t0))
python3 - "$W/p1.json" "$W/p2.json" "$NTOK" <<'PY' || { echo "prepare results disagree"; exit 1; }
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert not a["cached"] and b["cached"] and a["key"] == b["key"], (a, b)
assert a["trainTokens"] + a["valTokens"] == int(sys.argv[3]), (a, sys.argv[3])
PY
t0=$(ms)
mtc-train data prepare --source builtin:tiny-sft --kind sft --cache-dir "$W/tokcache" --json \
    >"$W/sft.json" 2>/dev/null || { echo "sft prepare failed"; exit 1; }
TS=$(($(ms) - t0))

echo "preparation of $((BYTES / 1000000)) MB of text ($NTOK tokens, built-in BPE vocab 1024):"
python3 - "$BYTES" "$NTOK" "$TD" "$TP" "$TC" "$TTOK" "$TS" "$W/sft.json" <<'PY'
import json, sys
b, n, td, tp, tc, ttok, ts = (int(x) for x in sys.argv[1:8])
s = json.load(open(sys.argv[8]))
print("  mtc-train prepare (direct):  %6.2f s  %6.2f MB/s  %8.0f tokens/s" % (td / 1e3, b / 1e3 / td, n * 1e3 / td))
print("  mtc-train data prepare:      %6.2f s  %6.2f MB/s  %8.0f tokens/s   (%.2fx the direct time)" %
      (tp / 1e3, b / 1e3 / tp, n * 1e3 / tp, tp / td))
print("  data prepare again (cached): %6.3f s  (%.1f%% of the first; nothing tokenized)" % (tc / 1e3, 100.0 * tc / tp))
print("  built-in tokenizer + tiny corpus, first time: %.2f s" % (ttok / 1e3))
print("  builtin:tiny-sft (%d records, %d tokens): %.2f s" % (s["records"], s["trainTokens"] + s["valTokens"], ts / 1e3))
PY

# mtc run -> first training step, data not prepared vs cached (the same --data file)
bench_start_mtcd || exit 1
mtc cluster create -f "$ROOT/examples/local-2node.json" --id bd >/dev/null || { echo "cluster create failed"; exit 1; }
eval "$(mtc env bd)"
python3 - "$ROOT/recipes/pretrain/tiny_gpt2_pt.json" "$W/pt.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["train"].update(steps=3, eval_every=0)
r["checkpoint"] = {"every": 0, "keep": 1}
json.dump(r, open(sys.argv[2], "w"))
PY
first_step() { # first_step NAME → seconds from mtc run to step 1 in metrics.jsonl
    local t0 td
    t0=$(ms)
    mtc run -s "$W/pt.json" --data "$W/big.txt" --cache-dir "$W/runcache" --experiment-name "$1" \
        >"$W/$1.out" 2>&1 || { cat "$W/$1.out" >&2; return 1; }
    td=$(sed -n 's/^- Local Directory: //p' "$W/$1.out")
    while ! grep -q '"step":1,' "$td/logs/metrics.jsonl" 2>/dev/null; do
        sleep 0.05
        [ $(($(ms) - t0)) -gt 300000 ] && { echo "no first step" >&2; return 1; }
    done
    echo $(($(ms) - t0))
    for _ in $(seq 300); do
        case $(mtc experiment status "$1" | sed -n 's/^- Status: //p') in
        COMPLETED) return 0 ;; FAILED | CANCELLED | UNKNOWN) return 1 ;; esac
        sleep 0.5
    done
}
F1=$(first_step cold) || { echo "cold run failed"; exit 1; }
F2=$(first_step warm) || { echo "warm run failed"; exit 1; }
echo "mtc run -> first training step (tiny_gpt2_pt, --data of $((BYTES / 1000000)) MB, local cluster):"
python3 -c 'import sys; a, b = int(sys.argv[1]), int(sys.argv[2]); print("  not prepared: %.2f s   cached: %.2f s   (cached/not: %.2f)" % (a / 1e3, b / 1e3, b / a))' "$F1" "$F2"
