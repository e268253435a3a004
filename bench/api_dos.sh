#!/usr/bin/env bash
# API under attack (loopback only): a legitimate client's latency over TCP +
# token (GET of the cluster list) alone, then while an attacker on another
# loopback address (127.0.0.2) holds as many idle connections as it can
# (1,200 tried, reconnecting as mtcd drops them), then while 200
# unauthenticated 1 MiB POSTs arrive 20 at a time; mtcd's RSS before and after.
# Figures are ratios to the unloaded run in the same run.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${MTC_BUILD:-$ROOT/build}
export PATH=$B/bin:$PATH
W=$(mktemp -d /tmp/mtc-bench.XXXXXX)
export MTC_HOME=$W/home
SECS=${BENCH_SECONDS:-5}
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    sleep 0.5
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/bin"
cc -O2 -std=c11 -D_GNU_SOURCE -o "$W/bin/httpload" "$ROOT/bench/httpload.c" -lpthread || exit 1
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mtcd --home "$MTC_HOME" --daemon --listen 127.0.0.1:$PORT || exit 1
MTCD=$(cat "$MTC_HOME/mtcd.pid")
PIDS+=("$MTCD")
TOKEN=$(mtc token create --name bench --role viewer | head -1)
C=/v1beta1/projects/local/locations/local/modelDevelopmentClusters
rss() { awk '/VmRSS/ {printf "%.1f", $2/1024}' /proc/$MTCD/status; }
load() { "$W/bin/httpload" --tcp 127.0.0.1:$PORT --header "Authorization: Bearer $TOKEN" \
    --path "$C" --conns 1 --seconds "$SECS"; }
p99() { sed -n 's/.*p99_ms=\([0-9.]*\).*/\1/p' <<<"$1"; }

base=$(load)
echo "legitimate client alone:           $base"

# attacker: hold up to 1,200 idle connections from 127.0.0.2 until killed
python3 - "$PORT" "$W/held" <<'PY' &
import socket, sys, time
port, out = int(sys.argv[1]), sys.argv[2]
held, peak = [], 0
end = time.time() + 120
while time.time() < end:
    while len(held) < 1200:
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=1,
                                                 source_address=("127.0.0.2", 0)))
        except OSError:
            break
    for s in held[:]:  # drop the ones mtcd closed, and try again
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                held.remove(s); s.close()
        except BlockingIOError:
            pass
        except OSError:
            held.remove(s); s.close()
    peak = max(peak, len(held))
    open(out, "w").write("%d %d" % (len(held), peak))
    time.sleep(0.2)
PY
ATT=$!
PIDS+=("$ATT")
sleep 2
idle=$(load)
read -r now peak <"$W/held"
kill "$ATT" 2>/dev/null
echo "while 127.0.0.2 holds idle conns:  $idle  (attacker connected: $now open, peak $peak)"

rss0=$(rss)
python3 "$ROOT/tests/tools/post_flood.py" "$PORT" &
POSTS=$!
PIDS+=("$POSTS")
flood=$(load)
wait "$POSTS" 2>/dev/null
echo "during 200 unauth 1 MiB POSTs:     $flood"
echo "mtcd RSS: $rss0 MiB before the POSTs, $(rss) MiB after"
b=$(p99 "$base") i=$(p99 "$idle") f=$(p99 "$flood")
[ -n "$b" ] && [ -n "$i" ] && [ -n "$f" ] &&
    printf 'legitimate p99 vs alone: %.2fx while idle connections are held, %.2fx during the POST flood\n' \
        "$(echo "$i / $b" | bc -l)" "$(echo "$f / $b" | bc -l)"
