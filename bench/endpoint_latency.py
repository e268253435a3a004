#!/usr/bin/env python3
"""endpoint_latency: the same completions sent to an endpoint's one replica
directly (its own address) and through mtcd's .../endpoints/E/v1/completions
(unix socket, and TCP with a token), interleaved in the same run: p50/p99 of
N sequential requests (max_tokens 1: routing, not generation, dominates) and
of N requests from 8 concurrent clients. Shared by bench/endpoints.sh (a
local cluster) and bench/endpoint_hosts.sh (a replica on a namespace host).

usage: endpoint_latency.py SOCK TCP_PORT TOKEN N ENDPOINT_PATH [TCP_HOST]"""
import concurrent.futures, http.client, json, socket, sys, time

SOCK, PORT, TOKEN, N, EP = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
TCP_HOST = sys.argv[6] if len(sys.argv) > 6 else "127.0.0.1"


class UC(http.client.HTTPConnection):
    def __init__(s):
        super().__init__("localhost", timeout=60)

    def connect(s):
        s.sock = socket.socket(socket.AF_UNIX)
        s.sock.connect(SOCK)


def get(path):
    c = UC()
    c.request("GET", path)
    r = c.getresponse()
    d = json.loads(r.read())
    c.close()
    return d


end = time.time() + 180
while time.time() < end:
    d = get(EP)["deployedModels"][0]
    if d["readyReplicaCount"] == 1:
        break
    time.sleep(0.3)
else:
    sys.exit("no ready replica after 180 s")
addr = d["replicas"][0]["address"]
host, port = addr.rsplit(":", 1)
body = json.dumps({"model": d["modelVersion"], "prompt": "the cat", "max_tokens": 1, "seed": 1})
H = {"Content-Type": "application/json"}
cases = {
    "direct (mtc-serve)": (lambda: http.client.HTTPConnection(host, int(port), timeout=60),
                           "/v1/completions", H),
    "endpoint, unix socket": (UC, EP + "/v1/completions", H),
    "endpoint, TCP + token": (lambda: http.client.HTTPConnection(TCP_HOST, PORT, timeout=60),
                              EP + "/v1/completions", dict(H, Authorization="Bearer " + TOKEN)),
}


def run(mk, path, hdr, n):
    c = mk()
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        c.request("POST", path, body=body, headers=hdr)
        r = c.getresponse()
        r.read()
        assert r.status == 200, r.status
        lat.append(time.perf_counter() - t)
    c.close()
    return lat


def pct(l, q):
    l = sorted(l)
    return l[min(len(l) - 1, int(q * len(l)))] * 1000


print(f"replica at {addr}")
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
