#!/usr/bin/env bash
# The health scanner's workload (mtc-scan) between network-namespace test
# hosts (tests/integration/testhosts.inc: veth pairs on a private bridge; the
# ranks launched by mpirun over the hosts' sshd, Open MPI's TCP transport on
# the test subnet). Figures, all measured in this run:
#   - the scanner's efficiency: the pairs check's ping-pong and the ring's
#     all_reduce bus bandwidth (16 MiB) between two hosts against the raw TCP
#     throughput of the same link (one python sender -> receiver, 256 MiB in
#     4 MiB writes, host 1 -> host 2), as ratios; on the bare veth link (CPU
#     bound: both ends share this machine's cores) and on the link shaped to
#     1 Gbit/s each way (tc tbf on both hosts' eth0), where the link is the
#     bottleneck as on a real cluster;
#   - scan time per check for 2 and 4 hosts, and the gpu check's burn-in
#     (--seconds 3) wall time;
#   - with host 3's link slowed to 100 Mbit/s among 4 hosts, what the pairs
#     check names (its bad node: the host whose link is slow with everyone).
# Needs root; traffic only on the test hosts' bridge; everything torn down.
BENCH_NAME=healthscan_hosts
. "$(dirname "$0")/hosts.inc"
B=${MTC_BUILD:-$ROOT/build}
SCAN=$B/bin/mtc-scan
[ -x "$SCAN" ] || fail "$SCAN not built"
command -v mpirun >/dev/null || fail "mpirun not installed"
command -v tc >/dev/null || fail "tc not installed"
testhosts_up 4 || fail "test hosts did not come up"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SSH="ssh -F none -i $TESTHOSTS_KEY -o IdentitiesOnly=yes -o BatchMode=yes -o ConnectTimeout=30 \
-o UserKnownHostsFile=/dev/null -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=no \
-o LogLevel=ERROR"
now() { date +%s.%N; }

# scan N OUT ARGS...: mtc-scan ARGS on hosts 1..N (one rank each) into OUT;
# prints the wall time
scan() {
    local n=$1 out=$2 hosts="" i t0
    shift 2
    for i in $(seq "$n"); do hosts="$hosts${hosts:+,}${TESTHOSTS_ADDRS[$i]}:1"; done
    t0=$(now)
    timeout 300 mpirun --host "$hosts" -np "$n" --mca plm_rsh_agent "$SSH" \
        --mca btl self,tcp --mca btl_tcp_if_include "$TESTHOSTS_PREFIX.0/24" \
        --mca oob_tcp_if_include "$TESTHOSTS_PREFIX.0/24" \
        -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM "$SCAN" "$@" >"$out"
    local rc=$?
    python3 -c "print('%.2f' % ($(now) - $t0))"
    [ $rc -le 1 ] || fail "mtc-scan $* on $n hosts: exit $rc"
}

# raw TCP throughput host 1 -> host 2 (GB/s)
raw_tcp() {
    local port=5201
    testhost_exec 2 python3 - "${TESTHOSTS_ADDRS[2]}" $port >"$T_DIR/rx" 2>&1 <<'PY' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
c, _ = s.accept()
while c.recv(4 << 20):
    pass
PY
    local rx=$!
    sleep 0.5
    testhost_exec 1 python3 - "${TESTHOSTS_ADDRS[2]}" $port <<'PY'
import socket, sys, time
N, CH = 256 << 20, 4 << 20
s = socket.create_connection((sys.argv[1], int(sys.argv[2]))); buf = b"x" * CH
t0 = time.time()
for _ in range(N // CH): s.sendall(buf)
s.shutdown(socket.SHUT_WR); s.recv(1); s.close()
print("%.4f" % (N / (time.time() - t0) / 1e9))
PY
    wait $rx
}

shape() { # shape I RATE: tbf on host I's eth0 egress ("" removes it)
    ip netns exec "${TESTHOSTS_NETNS[$1]}" tc qdisc del dev eth0 root 2>/dev/null
    [ -z "$2" ] || ip netns exec "${TESTHOSTS_NETNS[$1]}" tc qdisc add dev eth0 root tbf \
        rate "$2" burst 256kb latency 100ms
}

efficiency() { # efficiency LABEL
    local raw
    raw=$(raw_tcp) || fail "raw TCP failed"
    scan 2 "$T_DIR/p.json" pairs --max-bytes 4194304 >/dev/null
    scan 2 "$T_DIR/r.json" ring --max-bytes 16777216 >/dev/null
    python3 - "$1" "$raw" "$T_DIR/p.json" "$T_DIR/r.json" <<'PY' >&3
import json, sys
label, raw = sys.argv[1], float(sys.argv[2])
pp = json.load(open(sys.argv[3]))["pairs"][0]["busGBps"]
ring = json.load(open(sys.argv[4]))["sizes"][-1]
print("%s: raw TCP host1->host2 (python, 256 MiB) %.4f GB/s" % (label, raw))
print("  pairs ping-pong (4 MiB)        %.4f GB/s  %.2fx raw TCP" % (pp, pp / raw))
print("  all_reduce busbw (%2d MiB)      %.4f GB/s  %.2fx raw TCP" % (ring["bytes"] >> 20, ring["allReduceBusGBps"], ring["allReduceBusGBps"] / raw))
print("  all_gather busbw (%2d MiB)      %.4f GB/s  %.2fx raw TCP" % (ring["bytes"] >> 20, ring["allGatherBusGBps"], ring["allGatherBusGBps"] / raw))
PY
}

echo "# mtc-scan between namespace test hosts (mpirun over ssh, Open MPI TCP on the bridge)" >&3
efficiency "bare veth link"
shape 1 1gbit
shape 2 1gbit
efficiency "link shaped to 1 Gbit/s each way (tbf)"
shape 1 ""
shape 2 ""

echo "# scan time (s), bare links, --max-bytes 16 MiB; gpu = burn-in --seconds 3" >&3
printf '%-10s %8s %8s\n' check 2-hosts 4-hosts >&3
for c in pipeline pairs ring gpu; do
    row=$c
    for n in 2 4; do
        extra=()
        [ $c = gpu ] && extra=(--seconds 3)
        row="$row $(scan $n "$T_DIR/$c-$n.json" $c "${extra[@]}")"
    done
    printf '%-10s %8s %8s\n' $row >&3
done

shape 3 100mbit
scan 4 "$T_DIR/slow.json" pairs --max-bytes 4194304 >/dev/null
python3 - "$T_DIR/slow.json" "${TESTHOSTS_NAMES[3]}" <<'PY' >&3
import json, sys
r = json.load(open(sys.argv[1]))
print("# host 3 (%s) shaped to 100 Mbit/s, 4 hosts, pairs: state %s, badNodes %s, badLinks %s"
      % (sys.argv[2], r["state"], r["badNodes"], r["badLinks"]))
for p in r["pairs"]:
    print("  %-30s %-6s %8.4f GB/s  %s" % (" - ".join(p["nodes"]), p["pass"], p["busGBps"], p["state"]))
PY
shape 3 ""
echo "  load average (1/5/15 min) at the start: $LOAD0, at the end: $(cut -d" " -f1-3 /proc/loadavg) ($(nproc) cores)" >&3
[ -n "${BENCH_KEEP:-}" ] || T_FAILED=0
