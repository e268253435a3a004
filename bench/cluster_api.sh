#!/usr/bin/env bash
# Control-plane benchmark: time from create request to RUNNING for 2, 8 and 16
# emulated nodes; RSS of mtcd and of one slurmd; API throughput and p99 latency
# for GET of one cluster and for list with concurrent clients, beside
# slurmrestd's node listing on the same cluster in the same run.
# BENCH_API_ONLY=1: only the 2-node cluster and the API part (no 8/16-node
# creates, no RSS). BENCH_SECONDS (3) per measurement, BENCH_REPEAT (1) rounds.
. "$(dirname "$0")/lib.inc"
SECS=${BENCH_SECONDS:-3}
mkdir -p "$W/bin"
cc -O2 -std=c11 -D_GNU_SOURCE -o "$W/bin/httpload" "$ROOT/bench/httpload.c" -lpthread || exit 1
cleanup() {
    for id in $(mtc cluster list --json 2>/dev/null | python3 -c 'import json,sys; [print(c["name"].split("/")[-1]) for c in json.load(sys.stdin)["modelDevelopmentClusters"]]' 2>/dev/null); do
        mtc cluster delete "$id" >/dev/null 2>&1
    done
    bench_stop_pids
    [ -n "${KEEP:-}" ] && echo "kept $W" || rm -rf "$W"
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
bench_start_mtcd --listen 127.0.0.1:$PORT || exit 1
TOKEN=$(mtc token create --name bench --role viewer | head -1)
rss() { awk '/VmRSS/ {print $2/1024}' /proc/$1/status; }

spec() { # spec N → a CPU-only cluster spec with N static nodes
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); p=s["nodePools"][0]; p["scalingSpec"]={"minNodeCount":int(sys.argv[2]),"maxNodeCount":int(sys.argv[2])}; print(json.dumps(s))' "$ROOT/examples/local-cpu.json" "$1"
}
echo "create → RUNNING (local provider, CPU-only nodes):"
SIZES="2 8 16"
[ -n "${BENCH_API_ONLY:-}" ] && SIZES=2
for n in $SIZES; do
    spec $n >"$W/spec$n.json"
    t0=$(date +%s.%N)
    mtc cluster create -f "$W/spec$n.json" --id b$n >/dev/null || { echo "create of $n nodes failed"; exit 1; }
    t1=$(date +%s.%N)
    printf '  %2d nodes: %.2f s\n' $n "$(echo "$t1 - $t0" | bc -l)"
    [ $n -ne 2 ] && mtc cluster delete b$n >/dev/null
done
slurmd=$(for p in /proc/[0-9]*; do tr '\0' ' ' <$p/cmdline 2>/dev/null | grep -q "^slurmd .*$MTC_HOME/clusters/b2" && echo ${p#/proc/}; done | head -1)
[ -z "${BENCH_API_ONLY:-}" ] && printf 'RSS: mtcd %.1f MiB, one slurmd %.1f MiB\n' "$(rss $MTCD)" "$(rss $slurmd)"


# slurmrestd on the same cluster: node listing, same load generator. It refuses
# to run as root, so it runs as nobody: the cluster's config and munge socket
# are made reachable for that user in this throwaway MTC_HOME.
eval "$(mtc env b2)"
chmod o+x "$W" "$MTC_HOME" "$MTC_HOME/clusters" "$MTC_HOME/clusters/b2" "$MTC_HOME/clusters/b2/munge"
chmod o+r "$MTC_HOME"/clusters/b2/*.conf
mkdir -p "$W/rest" && chmod 777 "$W/rest"
RSOCK=$W/rest/slurmrestd.sock
slurmrestd -u nobody -g nogroup -s openapi/v0.0.38 -a rest_auth/local "unix:$RSOCK" >"$W/slurmrestd.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 50); do [ -S "$RSOCK" ] && break; sleep 0.1; done

# One measurement: label, then httpload's arguments; its line goes to stdout
# and to $W/results (label<TAB>line) for the ratios at the end.
measure() {
    local label=$1
    shift
    local line
    line=$("$W/bin/httpload" "$@" --seconds $SECS)
    printf '  %-40s %s\n' "$label" "$line"
    printf '%s\t%s\n' "$label" "$line" >>"$W/results"
}
C=/v1beta1/projects/local/locations/local/modelDevelopmentClusters
AUTH="Authorization: Bearer $TOKEN"
echo "API (closed loop, ${SECS}s each; mtcd, then slurmrestd 22.05 on the same cluster, rest_auth/local over a unix socket):"
for round in $(seq "${BENCH_REPEAT:-1}"); do
    [ "${BENCH_REPEAT:-1}" -gt 1 ] && echo " round $round:"
    for conns in 1 8; do
        measure "GET cluster, unix socket, $conns clients" --unix "$MTC_HOME/mtcd.sock" --path "$C/b2" --conns $conns
        measure "GET cluster, TCP+token, $conns clients" --tcp 127.0.0.1:$PORT --header "$AUTH" --path "$C/b2" --conns $conns
        measure "list clusters, TCP+token, $conns clients" --tcp 127.0.0.1:$PORT --header "$AUTH" --path "$C" --conns $conns
        measure "slurmrestd nodes, $conns clients" --unix "$RSOCK" --path /slurm/v0.0.38/nodes --conns $conns
    done
done
# requests/s over slurmrestd's at as many clients (medians over the rounds),
# and the worst p99 of any round
echo "summary (median req/s over rounds, ratio to slurmrestd's node list at as many clients, worst p99):"
awk -F'\t' '
    function med(s,   a, n, i, j, t) { n = split(s, a, " ");
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    { match($2, /req_per_s=[0-9.]+/); r = substr($2, RSTART + 10, RLENGTH - 10)
      match($2, /p99_ms=[0-9.]+/); p = substr($2, RSTART + 7, RLENGTH - 7)
      if (!($1 in rs)) order[++n] = $1
      rs[$1] = rs[$1] " " r; if (p + 0 > p99[$1]) p99[$1] = p + 0 }
    END { for (i = 1; i <= n; i++) { l = order[i]; m[l] = med(rs[l]) }
          for (i = 1; i <= n; i++) { l = order[i]; c = l; sub(/.*, /, "", c)
              base = m["slurmrestd nodes, " c]
              printf "  %-40s %8.0f req/s  %6.1fx  p99 %.2f ms\n", l, m[l], base ? m[l] / base : 0, p99[l] } }' "$W/results"
