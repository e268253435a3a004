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
"$B/bench/serve_speed" gpt2-124m 32 ${GPT2_TOKENS:-32}

echo "-- HTTP (mtc-serve, streaming clients)"
W=$(mktemp -d /tmp/mtc-bench-serve.XXXXXX)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
. tests/integration/train_setup.inc
train_random_checkpoint "$W" tiny-llama gpt2-124m
for preset in tiny-llama gpt2-124m; do
    mtc-serve --model "$W/$preset" --listen 127.0.0.1:0 --max-batch 16 --ctx 256 >"$W/out" 2>"$W/err" &
    PID=$!
    for _ in $(seq 300); do grep -q serving "$W/out" 2>/dev/null && break; sleep 0.1; done
    port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$W/out")
    tokens=$([ $preset = tiny-llama ] && echo "${HTTP_TOKENS:-48}" || echo "${HTTP_TOKENS_GPT2:-16}")
    python3 - "http://127.0.0.1:$port" "$preset" "$tokens" <<'PY'
import json, sys, time, threading, urllib.request
U, name, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
def metric(key):  # from mtc-serve's /metrics: time to first token as the server measures it
    text = urllib.request.urlopen(U + "/metrics").read().decode()
    return float(next(l.split()[-1] for l in text.splitlines() if l.startswith(key + " ")))
def stream(i, out):
    body = json.dumps({"model": name, "prompt": list(range(5 + i, 37 + i)), "max_tokens": N,
                       "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}).encode()
    r = urllib.request.Request(U + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    toks, done = 0, False
    with urllib.request.urlopen(r, timeout=600) as f:
        for line in f:
            if line.startswith(b"data: {"):
                c = json.loads(line[6:])
                if c.get("usage"):
                    toks = c["usage"]["completion_tokens"]
            done |= line.strip() == b"data: [DONE]"
    out[i] = toks if done else 0
base = None
for k in (1, 4, 16):
    out = [0] * k
    s0, c0 = metric("mtc_serve_time_to_first_token_seconds_sum"), metric("mtc_serve_time_to_first_token_seconds_count")
    t0 = time.time()
    th = [threading.Thread(target=stream, args=(i, out)) for i in range(k)]
    [t.start() for t in th]
    [t.join() for t in th]
    wall = time.time() - t0
    ttft = (metric("mtc_serve_time_to_first_token_seconds_sum") - s0) / max(1, metric("mtc_serve_time_to_first_token_seconds_count") - c0)
    agg = sum(out) / wall
    base = base or agg
    print(f"  {name} HTTP {k:2d} streams x {N} tokens: {agg:8.1f} tok/s aggregate ({agg / base:.2f}x 1 stream), "
          f"mean time to first token {ttft * 1e3:.0f} ms, {sum(1 for o in out if o == N)}/{k} streams complete")
PY
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
done
