#!/usr/bin/env bash
# serve: mtc-serve's speed — (1) the engine (bench/serve_speed.c): KV-cache decoding vs
# mtc-train sample's cache-less decode, one stream's time to first token and tokens/s, the
# aggregate of 1/4/16 streams, for tiny-llama and gpt2-124m (random-init weights); (2) the
# same through HTTP: N concurrent streaming clients against one mtc-serve (time to first
# token, aggregate tokens/s). Everything on loopback; the server is stopped on exit.
set -eu
cd "$(dirname "$0")/.."
B=$(basename "${MTC_BUILD:-build}")
[ -f "$B/libmtctrain.a" ] && [ -x "$B/bin/mtc-serve" ] || make -s "$B/libmtctrain.a" "$B/bin/mtc-serve"
mkdir -p "$B/bench"
cc -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -Isrc -fopenmp -fno-trapping-math \
    -fvect-cost-model=dynamic \
    -I/usr/include/x86_64-linux-gnu/openblas-pthread $(mpicc --showme:compile 2>/dev/null) \
    -o "$B/bench/serve_speed" bench/serve_speed.c "$B/libmtctrain.a" \
    -fopenmp -lopenblas -ljansson $(mpicc --showme:link 2>/dev/null) -lcrypto -lpthread -lm
export PATH=$PWD/$B/bin:$PATH
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} # a loaded shared machine stalls OpenMP teams at barriers
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), nproc $(nproc --all)"
echo "-- engine"
"$B/bench/serve_speed" tiny-llama 32 ${TINY_TOKENS:-128}
"$B/bench/serve_speed" gpt2-124m 32 ${GPT2_TOKENS:-64}

echo "-- HTTP (mtc-serve, streaming clients)"
W=$(mktemp -d /tmp/mtc-bench-serve.XXXXXX)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
. tests/integration/train_setup.inc
train_corpus "$W/corpus.txt" 3
mtc-train tokenizer train --vocab-size 384 --input "$W/corpus.txt" --output "$W/tok.json" 2>/dev/null
train_shards "$W/data" 20000
for preset in tiny-llama gpt2-124m; do
    # one optimizer step at lr 0: a checkpoint of the random-init weights
    mtc-train --model $preset --seq 32 --batch 1 --steps 1 --lr 0 --min-lr 0 --log-every 1000 \
        --tokenizer "$W/tok.json" --data "$W/data" --checkpoint-every 1 --checkpoint-dir "$W/$preset" >/dev/null 2>&1
    mtc-serve --model "$W/$preset" --listen 127.0.0.1:0 --max-batch 16 --ctx 256 >"$W/out" 2>"$W/err" &
    PID=$!
    for _ in $(seq 300); do grep -q serving "$W/out" 2>/dev/null && break; sleep 0.1; done
    port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$W/out")
    python3 - "http://127.0.0.1:$port" "$preset" "${HTTP_TOKENS:-48}" <<'PY'
import json, sys, time, threading, urllib.request
U, name, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
def stream(i, out):
    body = json.dumps({"model": name, "prompt": list(range(5 + i, 37 + i)), "max_tokens": N,
                       "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}).encode()
    t0 = time.time()
    r = urllib.request.Request(U + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    first, toks = None, 0
    with urllib.request.urlopen(r, timeout=600) as f:
        for line in f:
            if line.startswith(b"data: {"):
                c = json.loads(line[6:])
                if first is None:
                    first = time.time() - t0
                if c.get("usage"):
                    toks = c["usage"]["completion_tokens"]
    out[i] = (first, toks, time.time() - t0)
base = None
for k in (1, 4, 16):
    out = [None] * k
    t0 = time.time()
    th = [threading.Thread(target=stream, args=(i, out)) for i in range(k)]
    [t.start() for t in th]
    [t.join() for t in th]
    wall = time.time() - t0
    agg = sum(o[1] for o in out) / wall
    ttft = sorted(o[0] for o in out)
    base = base or agg
    print(f"  {name} HTTP {k:2d} streams: {agg:8.1f} tok/s aggregate ({agg / base:.2f}x 1 stream), "
          f"time to first token p50 {ttft[len(ttft) // 2] * 1e3:.0f} ms, max {ttft[-1] * 1e3:.0f} ms")
PY
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
done
