#!/usr/bin/env bash
# serve_slow: mtc-serve under slow clients (issue 26). A legitimate client's
# latency — BENCH_REQUESTS (default 40) sequential /v1/completions of 8 tokens
# from 127.0.0.1 — alone (the baseline), then while BENCH_SLOW (default 64)
# connections from 127.0.0.2 start a request and trickle a byte a second,
# reconnecting whenever they are closed (a slowloris keeps its pressure). p50
# and p99 of each and their ratio; a request that failed (refused, or no
# answer within 10 s) counts at 10 s. The attacked phase lasts at least 15 s
# (past the default 10 s request deadline: the slow clients' 408s show) and
# at most BENCH_SECONDS (default 60), even if fewer requests were made. Also the server's threads under attack and how the slow
# clients were answered (408, closed at accept). BENCH_SERVE_BEFORE=PATH
# measures a second mtc-serve binary (e.g. a build of an earlier commit) in
# the same run, with its default flags. Loopback only; bounded in count and
# time; the server is stopped on exit.
set -eu
cd "$(dirname "$0")/.."
B=$(basename "${MTC_BUILD:-build}")
[ -x "$B/bin/mtc-serve" ] || make -s "$B/bin/mtc-serve" "$B/bin/mtc-train"
export PATH=$PWD/$B/bin:$PATH
export OMP_NUM_THREADS=1
N=${BENCH_REQUESTS:-40}
SECS=${BENCH_SECONDS:-60}
SLOW=${BENCH_SLOW:-64}
W=$(mktemp -d /tmp/mtc-bench-slow.XXXXXX)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
. tests/integration/train_setup.inc
train_random_checkpoint "$W" tiny-llama
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), nproc $(nproc --all)"
printf '%-34s %9s %9s %9s %9s %6s %8s %s\n' server "p50 alone" "p99 alone" "p50 slow" "p99 slow" \
    "p99 x" threads "slow clients"
for bin in "$B/bin/mtc-serve" ${BENCH_SERVE_BEFORE:+"$BENCH_SERVE_BEFORE"}; do
    "$bin" --model "$W/tiny-llama" --served-name m --listen 127.0.0.1:0 --max-batch 4 >"$W/out" 2>"$W/err" &
    PID=$!
    for _ in $(seq 300); do grep -q serving "$W/out" 2>/dev/null && break; sleep 0.1; done
    port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$W/out")
    python3 - "$port" "$PID" "$N" "$SLOW" "$bin" "$SECS" <<'PY'
import json, socket, sys, threading, time, urllib.request
port, pid, n, slow, name = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
budget = float(sys.argv[6])
U = f"http://127.0.0.1:{port}"
body = json.dumps({"model": "m", "prompt": "the", "max_tokens": 8, "temperature": 0}).encode()
def legit(least=0):
    lat, fail, start = [], 0, time.time()
    while (len(lat) < n or time.time() - start < least) and time.time() - start < budget:
        t = time.time()
        try:
            r = urllib.request.Request(U + "/v1/completions", data=body,
                                       headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(r, timeout=10) as f:
                f.read()
            lat.append(time.time() - t)
        except Exception:
            fail += 1
            lat.append(10.0)
    return sorted(lat), fail
def q(lat, p):
    return lat[min(len(lat) - 1, int(p * len(lat)))]
def threads():
    with open(f"/proc/{pid}/status") as f:
        return int(next(l for l in f if l.startswith("Threads:")).split()[1])
legit()  # warm-up
alone, _ = legit()
stop, socks, seen = False, [], {"408": 0, "closed": 0}
def connect():
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n")
        s.setblocking(False)
        socks.append(s)
    except OSError:
        s.close()
def attack():
    while not stop:
        while len(socks) < slow and not stop:
            connect()
        for s in list(socks):
            try:
                s.send(b"X")
                data = s.recv(4096)
                seen["408" if data.startswith(b"HTTP/1.1 408") else "closed"] += 1
                socks.remove(s)
                s.close()
            except BlockingIOError:
                pass
            except OSError:
                seen["closed"] += 1
                socks.remove(s)
                s.close()
        time.sleep(1)
t = threading.Thread(target=attack)
t.start()
time.sleep(3)
th = threads()
under, fail = legit(15)
stop = True
t.join()
for s in socks:
    s.close()
print(f"{name[-34:]:<34} {q(alone, .5)*1000:7.1f}ms {q(alone, .99)*1000:7.1f}ms "
      f"{q(under, .5)*1000:7.1f}ms {q(under, .99)*1000:7.1f}ms {q(under, .99)/q(alone, .99):6.1f} "
      f"{th:8d} {seen['408']} got 408, {seen['closed']} closed; legit failed {fail}/{len(under)}")
PY
    kill "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null || true
    PID=
done
