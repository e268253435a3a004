#!/usr/bin/env bash
# hosts_cluster: a cluster on test hosts through mtcd and the CLI (the hosts
# provider): 1 login + 2 compute hosts + 1 spare, created under a non-default
# project; srun -N2 runs on the two compute hosts (their own hostnames); sbatch
# from the login host through `mtc login ID CMD`, and in sacct there (the
# cluster keeps accounting: slurmdbd and MariaDB on the controller); agents report PASS over TCP
# with node tokens; slurmd kill -9 on a host is restarted with an event; update
# adds a host to the pool and removes it again (cleaned); delete leaves no mtc
# process in any test namespace and no file in the hosts' private dirs.
# test: uses mtc-dirs (its test hosts bind-mount their own dirs on this machine's
# /var/lib/mtc, /etc/mtc and /run/mtc: deb_package's purge removing them unmounts those)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
. "$(dirname "$0")/hosts_setup.inc"

MT=(mtc --home "$MTC_HOME" --project lab --location west)
M() { "${MT[@]}" "$@"; }
t_extra_cleanup() {
    [ -S "$MTC_HOME/mtcd.sock" ] && M cluster delete hc >/dev/null 2>&1
    hosts_cleanup
}

check "5 test hosts up" testhosts_up 5
[ "$T_FAILED" -eq 0 ] || done_testing
H=("" "${TESTHOSTS_ADDRS[@]}")
PORT=$(free_port)
# mtcd serves TCP over TLS with a self-signed certificate for the bridge address:
# the agents on the hosts trust it through their config's caFile
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=mtcd \
    -addext "subjectAltName=IP:$TESTHOSTS_CTL_ADDR" -keyout "$T_DIR/key.pem" -out "$T_DIR/cert.pem" 2>/dev/null
check "mtcd starts, listening on the bridge for the agents (https)" \
    start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT" --tls-cert "$T_DIR/cert.pem" --tls-key "$T_DIR/key.pem"

spec() { # $1: the gpu pool's hosts as a JSON list body, $2 their count
    cat <<JSON
{"displayName": "lab on test hosts",
 "ssh": {"user": "root", "key_file": "$TESTHOSTS_KEY", "port": 22},
 "controller": {"address": "$TESTHOSTS_CTL_ADDR"},
 "node_pools": [
   {"id": "login", "machine_spec": {"machine_type": "host"},
    "scaling_spec": {"min_node_count": 1, "max_node_count": 1}, "hosts": ["${H[1]}"]},
   {"id": "gpu", "machine_spec": {"machine_type": "host"},
    "scaling_spec": {"min_node_count": $2, "max_node_count": $2}, "hosts": [$1],
    "spare_hosts": ["${H[4]}"]}],
 "orchestrator_spec": {"slurm_spec": {"login_node_pool_id": "login",
   "partitions": [{"id": "gpu", "node_pool_ids": ["gpu"]}], "default_partition_id": "gpu",
   "accounting": {"enabled": true}}},
 "health_policy": {"checks": ["gpu", "disk"], "intervalSeconds": 1,
                   "reportEverySeconds": 5, "nvmlLibrary": "$B/fakes/libnvml.so"}}
JSON
}
spec "\"${H[2]}\", \"${H[3]}\"" 2 >"$T_DIR/spec.json"
t0=$SECONDS
out=$(M cluster create -f "$T_DIR/spec.json" --id hc 2>&1)
diag "$out (create took $((SECONDS - t0)) s)"
check "create on hosts reports RUNNING" grep -q "done: cluster hc RUNNING (2 nodes, partitions: gpu)" <<<"$out"
json=$(M cluster get hc --json)
check "every node RUNNING, each on its host" python3 -c '
import json, sys
c = json.loads(sys.argv[1]); h = sys.argv[2:]
n = {x["instanceName"]: x for x in c["clusterStatus"]["nodesStatus"]}
assert all(x["nodeState"] == "RUNNING" for x in n.values()), n
assert [n["hc-login-0"]["host"], n["hc-gpu-0"]["host"], n["hc-gpu-1"]["host"]] == h[:3], n
assert n["hc-login-0"]["nodePoolType"] == "NODE_POOL_TYPE_LOGIN", n' "$json" "${H[1]}" "${H[2]}" "${H[3]}"
out=$(M cluster hosts hc)
diag "$out"
check "cluster hosts: the spare listed as spare" grep -qE "^${H[4]//./\\.} .* gpu .* spare" <<<"$out"

eval "$(M env hc)"
out=$(timeout 60 srun -N2 hostname | sort | xargs)
check "srun -N2 hostname prints the two compute hosts' own hostnames ($out)" \
    test "$out" = "$(printf '%s\n' "${TESTHOSTS_NAMES[2]}" "${TESTHOSTS_NAMES[3]}" | sort | xargs)"
out=$(timeout 60 srun -N2 -l printenv SLURMD_NODENAME | sort | xargs)
check "node names stay <cluster>-<pool>-<i>" test "$out" = "0: hc-gpu-0 1: hc-gpu-1"

out=$(timeout 60 "${MT[@]}" login hc hostname 2>&1)
check "mtc login ID CMD runs on the login host ($out)" test "$out" = "${TESTHOSTS_NAMES[1]}"
mkdir -p "$T_DIR/jobs" && chmod 0777 "$T_DIR/jobs"
job=$(timeout 60 "${MT[@]}" login hc sbatch --parsable -N2 -o "$T_DIR/jobs/out-%j.txt" --wrap 'srun hostname' 2>&1)
check "sbatch from the login host queues a job ($job)" grep -qE '^[0-9]+$' <<<"$job"
both_ran() { [ "$(sort -u "$T_DIR/jobs/out-$job.txt" 2>/dev/null | grep -cE "^(${TESTHOSTS_NAMES[2]}|${TESTHOSTS_NAMES[3]})$")" = 2 ]; }
check "  the job ran on both compute hosts" wait_for 60 both_ran
# accounting on hosts: slurmdbd and MariaDB on the controller, on the bridge
# address; sacct answers on the login host as on the controller
in_sacct() { timeout 30 "${MT[@]}" login hc sacct -n -X -P -j "$job" -o jobid,account,nnodes,state 2>/dev/null | grep -qx "$job|root|2|COMPLETED"; }
check "  sacct on the login host lists it: account root, 2 nodes, COMPLETED" wait_for 60 in_sacct
check "  and sreport answers there" \
    bash -c "timeout 30 ${MT[*]} login hc sreport cluster utilization 2>&1 | grep -q 'Cluster Utilization'"

nodes_pass() {
    M cluster nodes hc --json | python3 -c '
import json, sys
n = {x["instanceName"]: x for x in json.load(sys.stdin)}
sys.exit(0 if all(n[k].get("health") == "PASS" for k in ("hc-gpu-0", "hc-gpu-1")) else 1)'
}
check "agents on both compute hosts report PASS (project lab, location west, node tokens)" \
    wait_for 60 nodes_pass
out=$(M cluster nodes hc)
diag "$out"
cfg=$(echo "$MTC_HOME"/clusters/hc/nodes/hc-gpu-0/image/etc/mtc/*/nodes/hc-gpu-0/agent.json)
check "the agent reports over https to mtcd's listen address, trusting mtcd's certificate" \
    bash -c "grep -q '\"url\": \"https://$TESTHOSTS_CTL_ADDR:$PORT\"' $cfg && grep -q '\"caFile\": \"/etc/mtc/.*/ca.pem\"' $cfg"
UID_=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["uid"])' "$MTC_HOME/clusters/hc/hosts.json")
check "the munge key on a host is 0400, under /etc/mtc/<uid>" \
    testhost_exec 2 test "$(testhost_exec 2 stat -c %a "/etc/mtc/$UID_/munge.key")" = 400
token=$(cat "$MTC_HOME"/clusters/hc/nodes/hc-gpu-0/image/etc/mtc/*/nodes/hc-gpu-0/agent.token)
key64=$(head -c 48 "$MTC_HOME/clusters/hc/munge/key" | base64 | head -c 40)
check "remote commands are logged with their exit status" grep -q "ssh root@${H[2]}: .* -> exit 0" "$MTC_HOME/log/mtcd.log"
check "neither the munge key nor a node token is ever logged" \
    bash -c "! grep -qF -e '$token' -e '$key64' '$MTC_HOME/log/mtcd.log'"

# slurmd killed on a host: the supervisor restarts it over ssh, with an event
# (the policy has no daemon checks: an agent noticing first would start a
# remediation instead, which hosts_faults covers)
old=$(testhost_exec 3 cat "/run/mtc/$UID_/slurmd.pid")
check "slurmd of hc-gpu-1 found on host 3 (pid $old)" test -n "$old"
kill -9 "$old"
slurmd_back() {
    local p
    p=$(testhost_exec 3 cat "/run/mtc/$UID_/slurmd.pid" 2>/dev/null)
    [ -n "$p" ] && [ "$p" != "$old" ] && kill -0 "$p" && sinfo -h -n hc-gpu-1 -o %t | grep -q idle
}
check "slurmd restarted on its host after kill -9" wait_for 60 slurmd_back
check "SLURMD_RESTART event for hc-gpu-1" wait_for 10 has_line 'SLURMD_RESTART .*hc-gpu-1' -- \
    mtc --home "$MTC_HOME" --project lab --location west cluster events hc

# update: a third compute host, then back to two
spec "\"${H[2]}\", \"${H[3]}\", \"${H[5]}\"" 3 >"$T_DIR/spec3.json"
out=$(M cluster update hc -f "$T_DIR/spec3.json" 2>&1)
check "update adds host 5 to the pool" grep -q "done: cluster hc RUNNING (3 nodes" <<<"$out"
out=$(timeout 60 srun -N3 hostname | sort | xargs)
check "srun -N3 spans the three compute hosts" \
    test "$out" = "$(printf '%s\n' "${TESTHOSTS_NAMES[2]}" "${TESTHOSTS_NAMES[3]}" "${TESTHOSTS_NAMES[5]}" | sort | xargs)"
out=$(M cluster update hc -f "$T_DIR/spec.json" 2>&1)
check "update removes it again" grep -q "done: cluster hc RUNNING (2 nodes" <<<"$out"
check "sinfo shows 2 nodes" bash -c "sinfo -h -p gpu -o %D | grep -qx 2"
check "host 5 left clean (no process, no file)" wait_for 20 host_clean 5

# an update that cannot be applied loses nothing
spec "\"${H[2]}\", \"${H[3]}\", \"$TESTHOSTS_UNUSED_ADDR\"" 3 >"$T_DIR/bad.json"
out=$(M cluster update hc -f "$T_DIR/bad.json" 2>&1)
diag "$out"
check "an update adding an unreachable host fails in one line naming it" \
    grep -q "update failed, cluster kept its previous configuration: host $TESTHOSTS_UNUSED_ADDR: unreachable" <<<"$out"
json=$(M cluster get hc --json)
check "  the cluster stays RUNNING with its stored spec" python3 -c '
import json, sys
c = json.loads(sys.argv[1])
assert c["clusterStatus"]["state"] == "RUNNING", c["clusterStatus"]["state"]
assert [p for p in c["nodePools"] if p["id"] == "gpu"][0]["hosts"] == sys.argv[2:], c["nodePools"]' \
    "$json" "${H[2]}" "${H[3]}"
check "  and runs jobs on both hosts" bash -c "timeout 60 srun -N2 true"

# the first host leaves the pool: node 0 moves onto the second host, whose
# slurmd (running as node 1) restarts under its new name
spec "\"${H[3]}\"" 1 >"$T_DIR/one.json"
out=$(M cluster update hc -f "$T_DIR/one.json" 2>&1)
diag "$out"
check "update removing the pool's first host" grep -q "done: cluster hc RUNNING (1 node," <<<"$out"
check "  hc-gpu-0 now runs on the second host" \
    bash -c "timeout 60 srun -N1 -w hc-gpu-0 hostname | grep -qx '${TESTHOSTS_NAMES[3]}'"
check "  the first host left clean" wait_for 20 host_clean 2

out=$(M cluster delete hc 2>&1)
check "delete" grep -q "done: cluster deleted" <<<"$out"
for i in 1 2 3 4 5; do
    check "host $i: no mtc process, no file left" host_clean "$i"
done
check "the controller's cluster dir and /run/mtc/<uid> are gone" \
    bash -c "[ ! -e '$MTC_HOME/clusters/hc' ] && [ ! -e '/run/mtc/$UID_' ]"
check "no daemon of the cluster left on the controller" test -z "$(pids_under "$MTC_HOME/clusters/hc")"
done_testing
