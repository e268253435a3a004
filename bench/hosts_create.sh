#!/usr/bin/env bash
# Control plane on hosts: create → RUNNING and delete → gone of a hosts cluster
# on 2, 4 and 8 test hosts (network namespaces with their own sshd,
# tests/integration/testhosts.inc): 1 login + N-1 compute nodes, one node per
# host. Beside it, in the same run and through the same mtcd, a local-provider
# cluster of the same shape (1 login + N-1 compute emulated nodes); printed as
# hosts/local ratios (the machine is shared and noisy). Figure: wall time from
# before `mtc cluster create|delete --no-wait` to the operation seen done
# (polled every 50 ms over mtcd's unix socket; the CLI's own wait polls at a
# growing 0.1..1 s), and the operation's own duration in mtcd (createTime →
# done). BENCH_TRIALS (default 3) trials per size (BENCH_SIZES, default
# "2 4 8"), local and hosts interleaved; the figure is the median. Note: all
# test hosts share this machine's cores, so the hosts' parallel bring-up is not
# parallel here. Traffic: loopback and the test hosts' private bridge only.
# Everything (test hosts, clusters, daemons) is torn down on exit, failure and
# signals included.
BENCH_NAME=hosts_create
. "$(dirname "$0")/hosts.inc"
TRIALS=${BENCH_TRIALS:-3}
SIZES=${BENCH_SIZES:-2 4 8}

MAX=0
for n in $SIZES; do [ "$n" -gt "$MAX" ] && MAX=$n; done
testhosts_up "$MAX" || fail "test hosts did not come up"
H=("" "${TESTHOSTS_ADDRS[@]}")
start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$(free_port)" || fail "mtcd did not start"

hosts_spec() { # N → 1 login host + N-1 compute hosts
    python3 - "$1" "$TESTHOSTS_KEY" "${H[@]:1:$1}" <<'PY'
import json, sys
n, key, hosts = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
print(json.dumps({
    "ssh": {"keyFile": key},
    "nodePools": [
        {"id": "cpu", "machineSpec": {"machineType": "host"},
         "scalingSpec": {"minNodeCount": n - 1, "maxNodeCount": n - 1}, "hosts": hosts[1:]},
        {"id": "login", "machineSpec": {"machineType": "host"},
         "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1}, "hosts": hosts[:1]}],
    "orchestratorSpec": {"slurmSpec": {"loginNodePoolId": "login",
        "partitions": [{"id": "cpu", "nodePoolIds": ["cpu"]}], "defaultPartitionId": "cpu"}}}))
PY
}
local_spec() { # N → 1 login + N-1 compute emulated nodes
    python3 - "$1" "$ROOT/examples/local-cpu.json" <<'PY'
import json, sys
n, s = int(sys.argv[1]), json.load(open(sys.argv[2]))
s["nodePools"][0]["scalingSpec"] = {"minNodeCount": n - 1, "maxNodeCount": n - 1}
print(json.dumps(s))
PY
}
# `mtc cluster $@ --no-wait`, then its operation polled over mtcd's unix
# socket every 50 ms until done. Prints "WALL OP STATE": seconds from before
# the CLI started to the poll that saw it done, the operation's own duration
# in mtcd (createTime → done), and the cluster state in the response (or
# "deleted", or "error: ..."). (The CLI's own wait polls at a growing 0.1..1 s.)
timed_op() {
    local t0 out name
    t0=$(date +%s.%N)
    out=$(mtc cluster "$@" --no-wait 2>&1) || { echo "error: $out"; return 1; }
    name=$(grep -oE 'projects/[^ ]*/operations/op-[0-9a-f]+' <<<"$out" | head -1)
    [ -n "$name" ] || { echo "error: $out"; return 1; }
    python3 - "$t0" "$MTC_HOME/mtcd.sock" "/v1/$name" <<'PY'
import datetime, http.client, json, socket, sys, time
t0, sock, path = float(sys.argv[1]), sys.argv[2], sys.argv[3]
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(sock)
while True:
    c = C("localhost"); c.request("GET", path); o = json.loads(c.getresponse().read()); c.close()
    if o.get("done"):
        break
    if time.time() - t0 > 300:
        print("error: not done after 300 s"); sys.exit(1)
    time.sleep(0.05)
wall = time.time() - t0
m = o["metadata"]["genericMetadata"]
t = lambda s: datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
if "error" in o:
    print("%.2f %.2f error: %s" % (wall, t(m["updateTime"]) - t(m["createTime"]), o["error"]["message"])); sys.exit(1)
r = o.get("response") or {}
st = (r.get("clusterStatus") or {}).get("state", "deleted")
n = len([x for x in (r.get("clusterStatus") or {}).get("nodesStatus", [])])
print("%.2f %.2f %s %d" % (wall, t(m["updateTime"]) - t(m["createTime"]), st, n))
PY
}
# create+delete of spec $2 as cluster $1, expecting $3 nodes in its status:
# writes "create delete create_op delete_op" seconds to $T_DIR/t
create_delete() {
    local id=$1 spec=$2 nodes=$3 c d co dop st n
    read -r c co st n < <(timed_op create -f "$spec" --id "$id")
    echo "$id create: $c s (operation $co s) $st $n nodes"
    [ "$st" = RUNNING ] && [ "$n" = "$nodes" ] || return 1
    read -r d dop st n < <(timed_op delete "$id")
    echo "$id delete: $d s (operation $dop s) $st"
    [ "$st" = deleted ] || return 1
    echo "$c $d $co $dop" >"$T_DIR/t"
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A V # V[kind,n] = values: kind = {l,h}{c,d} (wall), {l,h}{C,D} (operation)
for t in $(seq "$TRIALS"); do
    for n in $SIZES; do
        local_spec "$n" >"$T_DIR/local$n.json"
        hosts_spec "$n" >"$T_DIR/hosts$n.json"
        for p in l h; do
            if [ $p = l ]; then
                create_delete "l${n}t$t" "$T_DIR/local$n.json" "$n" || fail "local cluster of $n nodes failed"
            else
                create_delete "h${n}t$t" "$T_DIR/hosts$n.json" "$n" || fail "hosts cluster on $n hosts failed"
            fi
            read -r c d co dop <"$T_DIR/t"
            V[${p}c,$n]="${V[${p}c,$n]:-} $c" V[${p}d,$n]="${V[${p}d,$n]:-} $d"
            V[${p}C,$n]="${V[${p}C,$n]:-} $co" V[${p}D,$n]="${V[${p}D,$n]:-} $dop"
        done
        for i in $(seq "$n"); do
            host_clean "$i" || fail "test host $i not clean after the delete of h${n}t$t"
        done
    done
done

# "median s (a/b/…)" of V[$1]
# shellcheck disable=SC2086 # V values are space-separated lists
cell() { printf '%.2f s (%s)' "$(median ${V[$1]})" "$(echo ${V[$1]} | tr ' ' /)"; }
# shellcheck disable=SC2086
rat() { awk -v a="$(median ${V[$1]})" -v b="$(median ${V[$2]})" 'BEGIN { printf "%.2fx", a / b }'; }
{
    echo "create → RUNNING and delete → gone, hosts provider (N test hosts over ssh) vs local provider (N emulated nodes),"
    echo "1 login + N-1 compute nodes, same mtcd, median of $TRIALS (trials); wall time from the CLI's request to the operation done (polled every 50 ms):"
    printf '  %-3s %-26s %-26s %-7s | %-26s %-26s %s\n' N "create local" "create hosts" ratio "delete local" "delete hosts" ratio
    for n in $SIZES; do
        printf '  %-3s %-26s %-26s %-7s | %-26s %-26s %s\n' "$n" "$(cell "lc,$n")" "$(cell "hc,$n")" "$(rat "hc,$n" "lc,$n")" \
            "$(cell "ld,$n")" "$(cell "hd,$n")" "$(rat "hd,$n" "ld,$n")"
    done
    echo "the operations' own durations in mtcd (createTime → done):"
    for n in $SIZES; do
        printf '  %-3s %-26s %-26s %-7s | %-26s %-26s %s\n' "$n" "$(cell "lC,$n")" "$(cell "hC,$n")" "$(rat "hC,$n" "lC,$n")" \
            "$(cell "lD,$n")" "$(cell "hD,$n")" "$(rat "hD,$n" "lD,$n")"
    done
} >&3
echo "  load average (1/5/15 min) at the start: $LOAD0, at the end: $(cut -d" " -f1-3 /proc/loadavg) ($(nproc) cores)" >&3
[ -n "${BENCH_KEEP:-}" ] || T_FAILED=0 # BENCH_KEEP=1 keeps $T_DIR (mtcd.log, bench.log)
