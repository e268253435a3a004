#!/usr/bin/env bash
# healthscan_hosts: mtc-scan's pairs check across 5 network-namespace test
# hosts (testhosts.inc; mpirun over the hosts' sshd, Open MPI TCP on the test
# subnet) with --all-pairs-max 2: the random pairing, a second different one
# and retests; healthy, every node passes. Host 5's link shaped by tc (tbf,
# 2 Mbit/s egress: a hard ceiling, a ping-pong with it at most ~0.5 MB/s) →
# host 5 is named the bad node (slow with every partner, retested against a
# passing node), no bad link, the others pass. Judged against an absolute
# --min-bus-gbps 0.001 (1 MB/s): the shaped link's ceiling is below it, a
# healthy veth pair far above it even on a saturated 2-core runner, where
# measured-relative verdicts swing with the load (healthscan_mpi has those).
# Traffic only on the test hosts' bridge; hosts torn down at exit.
# test: uses mtc-dirs (its test hosts bind-mount their own dirs on this machine's
# /var/lib/mtc, /etc/mtc and /run/mtc: deb_package's purge removing them unmounts those)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
t_extra_cleanup() { testhosts_down; }
if [ "$(id -u)" != 0 ] || ! command -v mpirun >/dev/null || ! command -v tc >/dev/null; then
    skip "needs root, mpirun and tc"
    done_testing
fi
check "5 test hosts up" testhosts_up 5
[ "$T_FAILED" -eq 0 ] || done_testing
diag "hosts up after ${SECONDS}s"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SSH="ssh -F none -i $TESTHOSTS_KEY -o IdentitiesOnly=yes -o BatchMode=yes -o ConnectTimeout=30 \
-o UserKnownHostsFile=/dev/null -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=no \
-o LogLevel=ERROR"
HOSTS=""
for i in 1 2 3 4 5; do HOSTS="$HOSTS${HOSTS:+,}${TESTHOSTS_ADDRS[$i]}:1"; done
D=$T_DIR

# scan OUT: the pairs check on the 5 hosts, one rank each (rank i-1 on host i)
scan() {
    timeout 180 mpirun --host "$HOSTS" -np 5 --mca plm_rsh_agent "$SSH" --mca btl self,tcp \
        --mca btl_tcp_if_include "$TESTHOSTS_PREFIX.0/24" \
        --mca oob_tcp_if_include "$TESTHOSTS_PREFIX.0/24" \
        -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
        "$B/bin/mtc-scan" pairs --all-pairs-max 2 --seed 5 --max-bytes 65536 --min-bus-gbps 0.001 \
        >"$1" 2>"$1.err"
}
report() { local f=$1 code=$2; shift 2; python3 -c "import json, sys; r = json.load(open(sys.argv[1])); $code" "$f" "$@"; }

scan "$D/healthy.json"
check "healthy hosts: pairs exits 0" test $? -eq 0
diag "healthy scan done after ${SECONDS}s"
check "healthy: random pairing, two passes of 2 pairs, every node PASS" report "$D/healthy.json" '
assert r["pairing"] == "random" and r["state"] == "PASS" and len(r["nodes"]) == 5, r
assert [p["pass"] for p in r["pairs"]].count("first") == 2, r
assert [p["pass"] for p in r["pairs"]].count("second") == 2, r
assert all(n["state"] == "PASS" for n in r["nodes"]) and not r["badNodes"], r'

ip netns exec "${TESTHOSTS_NETNS[5]}" tc qdisc add dev eth0 root tbf rate 2mbit burst 16kb latency 1s
scan "$D/slow.json"
check "host 5's link shaped: pairs exits 1" test $? -eq 1
diag "shaped scan done after ${SECONDS}s"
SLOW=${TESTHOSTS_NAMES[5]}
check "host 5 is the bad node, retested, no bad link, the others pass" report "$D/slow.json" '
bad = r["nodes"][4]["node"]
assert bad.startswith(sys.argv[2]), (bad, sys.argv[2])
assert r["badNodes"] == [bad] and r["badLinks"] == [], r
assert r["nodes"][4]["reason"].startswith("bad node: slow with every partner"), r
assert all(n["state"] == "PASS" for n in r["nodes"][:4]), r
assert any(p["pass"] == "retest" and bad in p["nodes"] for p in r["pairs"]), r' "$SLOW"
diag "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["nodes"][4]["reason"], [(p["pass"], p["busGBps"], p["state"]) for p in r["pairs"]])' "$D/slow.json")"
done_testing
