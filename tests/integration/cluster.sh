#!/usr/bin/env bash
# A real Slurm cluster through mtcd and the CLI: create 2 nodes, sinfo/srun/
# sbatch, update 2→3→2 with a queued job kept (the 3-node default's emulated
# GPUs pass the health scan's gpu check; 2 nodes are judged against each
# other by the straggler check), kill -9 of slurmctld and a
# slurmd (restarted, job kept, events), two clusters at once (the second of 8
# nodes, Slurm sized to them, srun -N8), delete leaves no process and no file.
. "$(dirname "$0")/lib.sh"

t_extra_cleanup() { delete_all_clusters; }
M() { mtc --home "$MTC_HOME" "$@"; }

check "mtcd starts" start_mtcd
out=$(M cluster create -f "$ROOT/examples/local-2node.json" --id demo 2>&1)
diag "$out"
check "create reports RUNNING with nodes and partitions" \
    grep -q "done: cluster demo RUNNING (2 nodes, partitions: a3m)" <<<"$out"
check "list shows the cluster RUNNING" bash -c "mtc --home '$MTC_HOME' cluster list | grep -E '^demo +RUNNING +2 +a3m'"
json=$(M cluster get demo --json)
check "get: nodesStatus has 2 RUNNING compute nodes" python3 -c '
import json,sys; c=json.loads(sys.argv[1]); n=[x for x in c["clusterStatus"]["nodesStatus"] if x["nodePoolType"]=="NODE_POOL_TYPE_COMPUTE"]
assert len(n)==2 and all(x["nodeState"]=="RUNNING" for x in n), n' "$json"

eval "$(M env demo)"
check "env sets SLURM_CONF inside the cluster dir" grep -q "$MTC_HOME/clusters/demo" <<<"$SLURM_CONF"
out=$(sinfo -h -o '%P %D %t')
diag "$out"
check "sinfo shows the spec's default partition with 2 nodes" grep -qE '^a3m\* 2 idle' <<<"$out"
out=$(timeout 60 srun -N2 -l printenv SLURMD_NODENAME | sort)
check "srun -N2 runs on both nodes" test "$(echo $out)" = "0: demo-a3m-0 1: demo-a3m-1"
out=$(timeout 30 srun -N1 --gres=gpu:8 bash -c 'echo $CUDA_VISIBLE_DEVICES' 2>&1)
check "GRES gpu:8 allocatable" grep -q "0,1,2,3,4,5,6,7" <<<"$out"
out=$(sbatch -p general --wrap true 2>&1)
check "sbatch -p general: Slurm's invalid partition error" grep -q "invalid partition specified: general" <<<"$out"
job=$(sbatch -H --parsable -p a3m --wrap true)
check "held job queued" test -n "$job"

out=$(M cluster update demo -f "$ROOT/examples/local-3node.json" 2>&1)
diag "$out"
check "update to 3 nodes" grep -q "done: cluster demo RUNNING (3 nodes" <<<"$out"
check "sinfo shows 3 nodes" bash -c "sinfo -h -p a3m -o '%D' | grep -qx 3"
check "queued job survives the update" bash -c "squeue -h -j $job -o %i | grep -qx $job"
# the embedded default's GPUs are emulated (device files, no NVML): the
# scan's gpu check checks them as the agents do — the files and a burn-in —
# and never fails (or drains) a healthy node (issue 28)
M healthscan demo -c gpu --burn-in-seconds 1 --drain-bad-nodes --json >"$T_DIR/gpu.json" 2>"$T_DIR/gpu.err"
rc=$?
check "healthscan -c gpu on emulated GPUs: exit $rc, every node PASS or WARN, 'emulated' with 8 device files, none drained" \
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["response"]
n = r["nodes"]
g = [x["results"][0] for x in n]
print("# " + json.dumps([(x["node"], x["state"], y.get("gpus"), y.get("reason", "")) for x, y in zip(n, g)]))
assert sys.argv[2] == "0" and len(n) == 3, (sys.argv[2], n)
assert all(x["state"] in ("PASS", "WARN") for x in n), n
assert all(y["emulated"] is True and y["gpus"] == 8 and y["reason"].startswith("emulated: 8 GPU device files") for y in g), g
assert not any(x.get("drained") for x in n), n' "$T_DIR/gpu.json" "$rc"
check_absent "  and the nodes stay in service" 'drain|drng' -- sinfo -h -N -p a3m -o %t
# (the scan's job may still be leaving the nodes: what follows wants them idle)
all_idle() { [ "$(sinfo -h -N -p a3m -o %t | sort -u)" = idle ]; }
check "  its job gone, every node idle" wait_for 60 all_idle
out=$(M cluster update demo -f "$ROOT/examples/local-2node.json" 2>&1)
check "update back to 2 nodes" grep -q "done: cluster demo RUNNING (2 nodes" <<<"$out"
check "sinfo shows 2 nodes again" bash -c "sinfo -h -p a3m -o '%D' | grep -qx 2"
check "queued job survives shrinking" bash -c "squeue -h -j $job -o %i | grep -qx $job"
# two nodes: the straggler check judges each against the other (no UNKNOWN,
# no median of 0)
M healthscan demo -c straggler --microbatches 200 --json >"$T_DIR/two.json" 2>"$T_DIR/two.err"
check "healthscan -c straggler on 2 nodes: each judged against the other" python3 -c '
import json, sys
n = json.load(open(sys.argv[1]))["response"]["nodes"]
s = [x["results"][0] for x in n]
print("# " + json.dumps([(x["node"], x["state"], y.get("poolMedian"), y.get("fractionOfMedian")) for x, y in zip(n, s)]))
assert len(n) == 2 and all(x["state"] in ("PASS", "WARN") for x in n), n
assert all(y["poolMedian"] > 0 for y in s), s
f = sorted(y["fractionOfMedian"] for y in s)
assert abs(f[0] * f[1] - 1) < 1e-3, f  # each the other one inverse' "$T_DIR/two.json"
check "  its job gone, both nodes idle" wait_for 60 all_idle
D=$MTC_HOME/clusters/demo
check "removed node's slurmd stopped" test -z "$(daemon_pids "$D" 'slurmd .*-N demo-a3m-2')"
# PATCH with an updateMask replaces just that field; a rejected update changes nothing.
api PATCH "$CLUSTERS/demo?updateMask=labels" '{"labels":{"team":"infra"},"displayName":"ignored"}'
check "PATCH with updateMask returns an operation" grep -q '"name":"projects/local/locations/local/operations/' <<<"$BODY"
M operations wait "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["name"])' "$BODY")" >/dev/null
json=$(M cluster get demo --json)
check "masked field replaced, others kept" python3 -c '
import json,sys; c=json.loads(sys.argv[1]); assert c["labels"]=={"team":"infra"}, c["labels"]; assert c["displayName"]!="ignored"' "$json"
before=$(M cluster get demo --json | python3 -c 'import json,sys; c=json.load(sys.stdin); print(json.dumps(c["nodePools"],sort_keys=True))')
api PATCH "$CLUSTERS/demo?update_mask=node_pools" '{"node_pools":[{"id":"a3m","machine_spec":{"machine_type":"no-such-type"}}]}'
check "invalid update: 400 naming the field" bash -c "[ $HTTP_STATUS = 400 ] && grep -q machineType <<<'$BODY'"
after=$(M cluster get demo --json | python3 -c 'import json,sys; c=json.load(sys.stdin); print(json.dumps(c["nodePools"],sort_keys=True))')
check "a rejected update changes nothing" same "$before" "$after"
api PATCH "$CLUSTERS/demo?updateMask=createTime" '{}'
check "output-only field in the mask: 400" test "$HTTP_STATUS" = 400
check "... and no operation started" bash -c "! grep -q '\"name\"' <<<'$BODY'"
# A valid spec whose slurm.conf Slurm refuses: the operation fails with Slurm's
# reason, the cluster stays RUNNING on its previous configuration.
conf_before=$(cat "$MTC_HOME/clusters/demo/slurm.conf")
api PATCH "$CLUSTERS/demo?updateMask=orchestratorSpec.slurmSpec.partitions" \
    '{"orchestratorSpec":{"slurmSpec":{"partitions":[{"id":"a3m","nodePoolIds":["a3m"],"config":{"MaxTime":"bogus"}}]}}}'
out=$(M operations wait "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["name"])' "$BODY")" 2>&1)
check "update Slurm refuses: the operation fails with Slurm's reason" grep -q 'kept its previous configuration: slurm.conf: Bad value "bogus" for MaxTime' <<<"$out"
state=$(M cluster get demo --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["clusterStatus"]["state"])')
check "... the cluster stays RUNNING" test "$state" = RUNNING
check "... on its previous slurm.conf" test "$(cat "$MTC_HOME/clusters/demo/slurm.conf")" = "$conf_before"
check "... and still runs jobs" bash -c "srun -p a3m -N1 true"
# slurmctld saves its state some seconds after a change: killed before that,
# it comes back with jobs that had ended RUNNING again (their nodes never
# idle; Slurm's own lag, not what is tested here). Kill it once it has saved
# the state after the last job.
ended=$(date +%s.%N)
saved() { python3 -c 'import os, sys; sys.exit(os.stat(sys.argv[1]).st_mtime <= float(sys.argv[2]))' "$D/state/job_state" "$ended"; }
check "slurmctld saved its state after the last job" wait_for 30 saved

event_list() { M cluster events demo --json | python3 -c '
import json, sys
for e in json.load(sys.stdin) or []:
    print(e.get("eventType"), e.get("nodeName", "-"))'; }
ctld_changed() { local p; p=$(daemon_pids "$D" 'slurmctld '); [ -n "$p" ] && [ "$p" != "$1" ] && scontrol ping | grep -q UP; }
slurmd_back() { [ -n "$(daemon_pids "$D" "slurmd .*-N $1")" ] && sinfo -h -n "$1" -o %t | grep -q idle; }
old=$(daemon_pids "$D" 'slurmctld ')
check "slurmctld found" test -n "$old"
kill -9 $old
check "slurmctld restarted after kill -9" wait_for 30 ctld_changed "$old"
check "queued job survives slurmctld kill -9" wait_for 10 bash -c "squeue -h -j $job -o %i | grep -qx $job"
old=$(daemon_pids "$D" 'slurmd .*-N demo-a3m-1')
check "slurmd of demo-a3m-1 found" test -n "$old"
kill -9 $old
# its agent reports the dead slurmd before the supervisor's next pass (as when
# the agent's check runs first): the supervisor restarts it, and does not
# fence the node (drain, reboot) for a slurmd it brought back
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$MTC_HOME/mtcd.sock" \
    -H "Authorization: Bearer $(cat "$D/nodes/demo-a3m-1/agent.token")" -H 'Content-Type: application/json' \
    -d '{"nodeId": "demo-a3m-1", "results": [{"check": "daemon.slurmd", "status": "FAIL", "severity": "RESTART", "reason": "slurmd not running", "value": -1}]}' \
    "http://localhost$CLUSTERS/demo:reportHealth")
check "the agent's report of the dead slurmd accepted" test "$code" = 200
check "slurmd restarted after kill -9" wait_for 30 slurmd_back demo-a3m-1
ev=$(event_list)
diag "$(grep RESTART <<<"$ev")"
check "a SLURMCTLD_RESTART event recorded" grep -q '^SLURMCTLD_RESTART ' <<<"$ev"
check "a SLURMD_RESTART event recorded for the node" grep -qx 'SLURMD_RESTART demo-a3m-1' <<<"$ev"
check "  two whole supervisor passes after the report" after_passes demo 2
check_absent "  and the node was neither drained nor rebooted" '^(VM_SLURM_DRAIN|VM_REBOOT|VM_SCAN_ERROR) demo-a3m-1' -- event_list
scancel "$job"

# the second cluster has 8 nodes: Slurm's timeouts and fan-out sized to them
# (docs/clusters.md, "Emulated nodes: sizing"), a step over all 8
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); p=s["nodePools"][0]; p["scalingSpec"]={"minNodeCount":8,"maxNodeCount":8}; json.dump(s,open(sys.argv[2],"w"))' \
    "$ROOT/examples/local-cpu.json" "$T_DIR/cpu8.json"
out=$(M cluster create -f "$T_DIR/cpu8.json" --id second 2>&1)
check "second cluster (8 nodes) comes up beside the first" grep -q "done: cluster second RUNNING (8 nodes" <<<"$out"
check "first cluster still answers" bash -c "timeout 60 srun -N2 true"
(eval "$(M env second)"; timeout 90 srun -N8 true)
check "second cluster runs a step on all 8 nodes" test $? -eq 0
mt=$(( (2 * 8 + $(nproc) - 1) / $(nproc) )); [ $mt -lt 10 ] && mt=10; [ $mt -gt 100 ] && mt=100
conf=$MTC_HOME/clusters/second/slurm.conf
check "its slurm.conf is sized: MessageTimeout=$mt, TreeWidth=8" \
    bash -c "grep -qx 'MessageTimeout=$mt' '$conf' && grep -qx 'TreeWidth=8' '$conf'"
check "list shows both" bash -c "[ \$(mtc --home '$MTC_HOME' cluster list | grep -c RUNNING) = 2 ]"

for id in second demo; do
    out=$(M cluster delete $id 2>&1)
    check "delete $id" grep -q "done: cluster deleted" <<<"$out"
    check "no process left for $id" test -z "$(pids_under "$MTC_HOME/clusters/$id")"
    check "no files left for $id" test ! -e "$MTC_HOME/clusters/$id"
done
out=$(M cluster get demo 2>&1)
check "deleted cluster is gone from the API" grep -q "not found" <<<"$out"
done_testing
