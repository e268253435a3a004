#!/usr/bin/env bash
# healthscan_hostsctl: `mtc healthscan -c collective` on a cluster of 3 test
# hosts (network namespaces, the hosts provider): mtc-scan is copied to every
# host and run there by the scan's sbatch job, its reports written to the
# shared experiment root; with host 3's link slowed by tc (tbf, 20 Mbit/s, on
# its bridge-side veth and on its eth0 inside) the scan fails and names that
# host's node — and neither of the other two as a bad node — and the pairs
# between the healthy hosts pass. (tests/integration/healthscan_hosts.sh is
# mtc-scan's own test on namespace hosts, without mtcd.)
# test: uses mtc-dirs (its test hosts bind-mount their own dirs on this machine's
# /var/lib/mtc, /etc/mtc and /run/mtc: deb_package's purge removing them unmounts those)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
. "$(dirname "$0")/hosts_setup.inc"
command -v tc >/dev/null || { skip "tc not installed"; done_testing; }
D=$T_DIR
t_extra_cleanup() { hosts_cleanup; }
check "3 test hosts up" testhosts_up 3
[ "$T_FAILED" -eq 0 ] || done_testing
H=("" "${TESTHOSTS_ADDRS[@]}")
check "mtcd starts, listening on the bridge" start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$(free_port)"
cat >"$D/spec.json" <<JSON
{"displayName": "health scan across hosts",
 "ssh": {"user": "root", "keyFile": "$TESTHOSTS_KEY"},
 "controller": {"address": "$TESTHOSTS_CTL_ADDR"},
 "experimentRoot": "$D",
 "nodePools": [
   {"id": "cpu", "machineSpec": {"machineType": "host"},
    "scalingSpec": {"minNodeCount": 3, "maxNodeCount": 3},
    "hosts": ["${H[1]}", "${H[2]}", "${H[3]}"]}],
 "orchestratorSpec": {"slurmSpec": {
   "partitions": [{"id": "cpu", "nodePoolIds": ["cpu"]}], "defaultPartitionId": "cpu"}}}
JSON
check "cluster on 3 hosts created" mtc cluster create -f "$D/spec.json" --id hx
[ "$T_FAILED" -eq 0 ] || done_testing
eval "$(mtc env hx)"
check "mtc env names the mtc-scan copied to the hosts (${MTC_SCAN:-})" \
    bash -c '[[ "${MTC_SCAN:-}" == /var/lib/mtc/*/bin/mtc-scan ]]'
check "host 3 has mtc-scan, identical to the build's" testhost_exec 3 cmp -s "$MTC_SCAN" "$B/bin/mtc-scan"
# node name of host I (the pool's nodes follow the hosts' order)
node_of() { echo "hx-cpu-$(($1 - 1))"; }

# an experiment root anyone may write: a user could put their own
# .mtc-healthscans in its place, so the scan refuses to run there (issue 26)
chmod 0777 "$D"
mtc healthscan hx -c straggler >/dev/null 2>"$D/open.err"
rc=$?
chmod 0755 "$D"
check "a world-writable experiment root: the scan refuses, naming it (exit $rc)" bash -c \
    "[ $rc -ne 0 ] && grep -q 'the scan.s directory $D/.mtc-healthscans/.*$D: owned by uid 0, mode 0777: others than root could change it' '$D/open.err'"
check "  nothing written there" test ! -e "$D/.mtc-healthscans"
SLOW=$(node_of 3)

# host 3's link: 20 Mbit/s both ways (the bridge side shapes what reaches it,
# eth0 inside what it sends)
V=${TESTHOSTS_VETHS[3]}
tc qdisc add dev "$V" root tbf rate 20mbit burst 32kbit latency 400ms
testhost_exec 3 tc qdisc add dev eth0 root tbf rate 20mbit burst 32kbit latency 400ms
check "host 3's link shaped (tbf on $V and on its eth0)" bash -c "tc qdisc show dev $V | grep -q tbf"
mtc healthscan hx -c collective --max-bytes 1048576 --json >"$D/slow.json" 2>"$D/slow.err"
rc=$?
sed 's/^/# /' "$D/slow.err"
check "slowed link: the collective scan fails (exit $rc)" test $rc -eq 1
check "it names $SLOW's node (every pair with it slow) and no other as a bad node" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["response"]
slow = sys.argv[2]
st = {n["node"]: (n["state"], n.get("reason", "")) for n in r["nodes"]}
print("# " + json.dumps(st))
assert st[slow][0] == "FAIL" and "bad node" in st[slow][1], st
assert all("bad node" not in why for n, (s, why) in st.items() if n != slow), st
pairs = {tuple(p["nodes"]): p for p in r["pairs"]}
for (a, b), p in pairs.items():
    print("# %s - %s %s %.4f GB/s" % (a, b, p["state"], p["busGBps"]))
    if slow in (a, b):
        assert p["state"] == "FAIL", p
    else:
        assert p["state"] != "FAIL", p' "$D/slow.json" "$SLOW"
check "the report files lie in the shared experiment root" \
    bash -c "ls '$D'/.mtc-healthscans/op-*/pairs.json >/dev/null"
tc qdisc del dev "$V" root
testhost_exec 3 tc qdisc del dev eth0 root
done_testing
