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
python3 - "$MTC_HOME/mtcd.sock" "$PORT" "$TOKEN" "$N" <<'PY'
import http.client, json, socket, sys, time, concurrent.futures
SOCK, PORT, TOKEN, N = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
EP = "/v1beta1/projects/local/locations/local/endpoints/bench"
class UC(http.client.HTTPConnection):
    def __init__(s): super().__init__("localhost", timeout=60)
    def connect(s):
        s.sock = socket.socket(socket.AF_UNIX); s.sock.connect(SOCK)
def get(path):
    c = UC(); c.request("GET", path); r = c.getresponse(); d = json.loads(r.read()); c.close(); return d
end = time.time() + 120
while time.time() < end:
    d = get(EP)["deployedModels"][0]
    if d["readyReplicaCount"] == 1: break
    time.sleep(0.3)
addr = d["replicas"][0]["address"]
host, port = addr.rsplit(":", 1)
body = json.dumps({"model": d["modelVersion"], "prompt": "the cat", "max_tokens": 1, "seed": 1})
H = {"Content-Type": "application/json"}
cases = {
    "direct (mtc-serve)": (lambda: http.client.HTTPConnection(host, int(port), timeout=60), "/v1/completions", H),
    "endpoint, unix socket": (UC, EP + "/v1/completions", H),
    "endpoint, TCP + token": (lambda: http.client.HTTPConnection("127.0.0.1", PORT, timeout=60),
                              EP + "/v1/completions", dict(H, Authorization="Bearer " + TOKEN)),
}
def run(mk, path, hdr, n):
    c = mk(); lat = []
    for _ in range(n):
        t = time.perf_counter()
        c.request("POST", path, body=body, headers=hdr); r = c.getresponse(); r.read()
        assert r.status == 200, r.status
        lat.append(time.perf_counter() - t)
    c.close(); return lat
def pct(l, q):
    l = sorted(l); return l[min(len(l) - 1, int(q * len(l)))] * 1000
res = {}
for name, (mk, path, hdr) in cases.items():  # warm-up, then interleaved rounds
    run(mk, path, hdr, 20)
for rnd in range(3):
    for name, (mk, path, hdr) in cases.items():
        res.setdefault(name, []).extend(run(mk, path, hdr, N // 3))
print(f"sequential, {N} requests each (max_tokens 1), one replica:")
base = res["direct (mtc-serve)"]
for name, lat in res.items():
    print(f"  {name:24s} p50 {pct(lat,.5):7.2f} ms  p99 {pct(lat,.99):7.2f} ms  "
          f"(p50 x{pct(lat,.5)/pct(base,.5):.2f}, +{pct(lat,.5)-pct(base,.5):.2f} ms)")
print(f"8 concurrent clients, {N} requests in all:")
conc = {}
for name, (mk, path, hdr) in cases.items():
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        t = time.perf_counter()
        parts = list(ex.map(lambda _: run(mk, path, hdr, N // 8), range(8)))
        wall = time.perf_counter() - t
    lat = [x for p in parts for x in p]
    conc[name] = (lat, len(lat) / wall)
cb = conc["direct (mtc-serve)"]
for name, (lat, rps) in conc.items():
    print(f"  {name:24s} p50 {pct(lat,.5):7.2f} ms  p99 {pct(lat,.99):7.2f} ms  {rps:7.1f} req/s "
          f"(x{rps/cb[1]:.2f} of direct)")
import threading
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
