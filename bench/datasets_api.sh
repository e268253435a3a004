#!/usr/bin/env bash
# Datasets through the API: `mtc data prepare` (mtcd's operation running
# mtc-train data prepare) against `mtc-train data prepare` run directly on the
# same source in the same run, first into an empty cache and then again
# (cached: nothing re-tokenized); and the re-prepare after one changed line.
# Figures are ratios against the direct run. BENCH_MB sets the corpus size (8).
. "$(dirname "$0")/lib.inc"
MB=${BENCH_MB:-8}
cleanup() {
    bench_stop_pids
    [ -n "${KEEP:-}" ] && echo "kept $W" || rm -rf "$W"
}
trap cleanup EXIT
bench_start_mtcd || exit 1
mkdir -p "$MTC_HOME/data"
SRC=$MTC_HOME/data/corpus.txt
mtc-train data generate --name tiny-corpus --output "$W/tc.txt" 2>/dev/null || exit 1
: >"$SRC"
i=0
while [ "$(stat -c %s "$SRC")" -lt $((MB * 1024 * 1024)) ]; do
    i=$((i + 1))
    { echo "part $i"; cat "$W/tc.txt"; } >>"$SRC"
done
size=$(stat -c %s "$SRC")
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.3f}')"; }
ratio() { python3 -c "print(f'{($4 - $3) / ($2 - $1):.2f}')"; }

t0=$(now)
mtc-train data prepare --source "$SRC" --kind pretrain --cache-dir "$W/direct" --json \
    >"$W/direct.json" 2>/dev/null || { echo "direct prepare failed"; exit 1; }
t1=$(now)
mtc data prepare corpus --source "$SRC" --kind pretrain >/dev/null 2>&1 ||
    { echo "mtc data prepare failed"; exit 1; }
t2=$(now)
mtc-train data prepare --source "$SRC" --kind pretrain --cache-dir "$W/direct" --json \
    >/dev/null 2>&1 || { echo "direct prepare (cached) failed"; exit 1; }
t3=$(now)
mtc --json data prepare corpus >"$W/again.json" 2>/dev/null ||
    { echo "mtc data prepare (cached) failed"; exit 1; }
t4=$(now)
echo "one more line" >>"$SRC"
mtc --json data prepare corpus >"$W/changed.json" 2>/dev/null ||
    { echo "mtc data prepare (changed) failed"; exit 1; }
t5=$(now)
tokens=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["trainTokens"]+d["valTokens"])' "$W/direct.json")
cached=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["response"]; print(r["cached"], r["newVersion"], r["version"]["versionId"])' "$W/again.json")
echo "source: $((size / 1024 / 1024)) MiB of text, $tokens tokens (built-in tokenizer, trained once per cache)"
echo "first prepare, empty cache:  direct $(secs "$t0" "$t1") s, mtc data prepare $(secs "$t1" "$t2") s (x$(ratio "$t0" "$t1" "$t1" "$t2") of direct)"
echo "second prepare, cached:      direct $(secs "$t2" "$t3") s, mtc data prepare $(secs "$t3" "$t4") s (x$(ratio "$t1" "$t2" "$t3" "$t4") of the first; cached, newVersion, version: $cached)"
changed=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["response"]; print(r["version"]["versionId"])' "$W/changed.json")
echo "after one changed line:      mtc data prepare $(secs "$t4" "$t5") s (x$(ratio "$t1" "$t2" "$t4" "$t5") of the first: version $changed)"
