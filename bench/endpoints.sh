#!/usr/bin/env bash
# Routing overhead of an endpoint: the same completions sent to mtc-serve
# directly (the replica's own address) and through mtcd's
# …/endpoints/E/v1/completions (unix socket, and TCP with a token), in the
# same run against the same single replica: p50/p99 latency of N sequential
# requests (max_tokens 1: the overhead, not generation, dominates), and of
# BENCH_N sets the requests per case (300).
. "$(dirname "$0")/lib.inc"
N=${BENCH_N:-300}
export OMP_NUM_THREADS=1
cleanup() {
    mtc cluster delete be >/dev/null 2>&1
    bench_stop_pids
    [ -n "${KEEP:-}" ] && echo "kept $W" || rm -rf "$W"
}
trap cleanup EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
bench_start_mtcd --listen 127.0.0.1:$PORT || exit 1
mtc cluster create -f "$ROOT/examples/local-2node.json" --id be >/dev/null || { echo "cluster create failed"; exit 1; }
eval "$(mtc env be)"
python3 - "$W/corpus.txt" <<'PY'
import random, sys
random.seed(1)
w = "the cat a dog sat on ran to the mat a red house".split()
open(sys.argv[1], "w").write(" ".join(random.choice(w) for _ in range(20000)))
PY
mtc-train tokenizer train --vocab-size 320 --input "$W/corpus.txt" --output "$W/tok.json" 2>/dev/null
mtc-train prepare --tokenizer "$W/tok.json" --input "$W/corpus.txt" --output "$W/data" --val-fraction 0.1 2>/dev/null
mtc-train --model tiny-llama --config '{"n_layer":2,"d_model":64,"n_head":4,"n_kv_head":2,"d_ff":192,"vocab_size":320,"max_seq":128}' \
    --seq 32 --batch 8 --steps 5 --tokenizer "$W/tok.json" --data "$W/data" --checkpoint-every 5 \
    --checkpoint-dir "$W/ck" --log-every 1000 >/dev/null 2>&1
mtc models upload "$W/ck" --name tiny >/dev/null || { echo "upload failed"; exit 1; }
mtc endpoints create bench >/dev/null
mtc endpoints deploy bench --model tiny --cluster be --min 1 --max 1 >/dev/null || exit 1
TOKEN=$(mtc --json token create --name bench --role viewer | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
python3 "$ROOT/bench/endpoint_latency.py" "$MTC_HOME/mtcd.sock" "$PORT" "$TOKEN" "$N" \
    /v1beta1/projects/local/locations/local/endpoints/bench || exit 1
python3 - "$MTC_HOME/mtcd.sock" <<'PY'
import http.client, json, socket, sys, time, threading
SOCK = sys.argv[1]
EP = "/v1beta1/projects/local/locations/local/endpoints/bench"
H = {"Content-Type": "application/json"}
class UC(http.client.HTTPConnection):
    def __init__(s): super().__init__("localhost", timeout=60)
    def connect(s):
        s.sock = socket.socket(socket.AF_UNIX); s.sock.connect(SOCK)
def pct(l, q):
    l = sorted(l); return l[min(len(l) - 1, int(q * len(l)))] * 1000
def healthz(n):
    c = UC(); lat = []
    for _ in range(n):
        t = time.perf_counter(); c.request("GET", "/healthz"); c.getresponse().read()
        lat.append(time.perf_counter() - t)
    c.close(); return lat
idle = healthz(200)
stop = False
durs = []
def stream():
    while not stop:
        c = UC(); t = time.perf_counter()
        c.request("POST", EP + "/v1/completions", headers=H, body=json.dumps(
            {"prompt": "the cat", "max_tokens": 100, "stream": True, "temperature": 0}))
        c.getresponse().read(); c.close(); durs.append(time.perf_counter() - t)
ts = [threading.Thread(target=stream) for _ in range(16)]
[t.start() for t in ts]
time.sleep(0.5)
busy = healthz(200)
stop = True
[t.join() for t in ts]
print("mtcd's GET /healthz (unix socket, 200 each):")
print(f"  idle                     p50 {pct(idle,.5):7.2f} ms  p99 {pct(idle,.99):7.2f} ms")
print(f"  (each stream {pct(durs,.5):.0f} ms p50 over {len(durs)} streams, 100 tokens)")
print(f"  16 proxied streams       p50 {pct(busy,.5):7.2f} ms  p99 {pct(busy,.99):7.2f} ms  (p50 x{pct(busy,.5)/pct(idle,.5):.2f})")
PY
