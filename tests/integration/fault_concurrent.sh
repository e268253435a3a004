#!/usr/bin/env bash
# fault_concurrent: remediations of different nodes of one cluster run at
# once, within the healthPolicy's limits. A 4-node cluster (maxDrainedFraction
# 1, the default maxConcurrentRemediations 32): an XID 79 lands in the kernel
# logs of three nodes within a second — one of them the node a training run
# is on. All three are drained and rebooted at once (each remediation starts
# before any node is back), the job resumes from its checkpoint on the fourth
# node and every step runs once. Then the
# policy is updated to maxConcurrentRemediations 2 and three nodes fail
# again: two are remediated, the third waits QUEUED (event naming the limit)
# and is remediated once a slot frees. Last, ECC errors on two nodes and mtcd
# killed (-9) while both are being remediated: the restarted mtcd resumes
# both operations and both nodes are replaced and back.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/fault_setup.inc"

STEPS=${STEPS:-600} EXP=concur
FAULT_NODES=4 FAULT_POLICY_EXTRA=', "maxDrainedFraction": 1'
check "4-node cluster with agents up" fault_cluster fc
check "tiny corpus tokenized" run_corpus "$T_DIR/data"
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
fault_submit "$EXP"; run_or_stop $? "$T_DIR/run.out"
check "training with a checkpoint" fault_wait_training 20
N=$(job_node)
mapfile -t ALL < <(sinfo -h -N -o %N | sort -u)
BAD=("$N")
for n in "${ALL[@]}"; do [ "$n" != "$N" ] && [ ${#BAD[@]} -lt 3 ] && BAD+=("$n"); done
for n in "${ALL[@]}"; do [[ " ${BAD[*]} " != *" $n "* ]] && GOOD=$n; done
diag "job $JOB on $N; XID 79 on ${BAD[*]} (${GOOD} stays healthy)"
# has_since T TYPE NODE: an event TYPE for NODE at or after time T (counting
# would be fooled by a failure the load causes: a munged timeout, say)
has_since() { events_t | awk -v t="$1" -v ty="$2" -v n="$3" '$1 >= t && $2 == ty && $3 == n {f = 1} END {exit !f}'; }
now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
export -f has_since
xid() { echo "[ 42.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus." >>"$CD/nodes/$1/hw/kernel.log"; }
T0=$(now)
for n in "${BAD[@]}"; do xid "$n"; done

for n in "${BAD[@]}"; do
    check "$n drained, reason names gpu.xid" wait_for 30 has_event VM_SLURM_DRAIN "$n drained: gpu.xid"
done
for n in "${BAD[@]}"; do
    check "$n rebooted and back in service" wait_for 120 has_event VM_RESUMED "$n checks pass after reboot"
done
# each remediation's action started before any node was back
# each remediation started (drained) before any finished (resumed: an
# emulated reboot takes about a second, too short to sample reliably); the
# reboot of the job's node follows the job's requeue, up to 15 s later
events_t >"$T_DIR/events1"
# side by side: no remediation waited for another — each node was drained
# before any node was back, unless its own failure was only seen after that
# (its agent's pass came later: on a loaded machine the three agents see
# the XID up to a pass apart, and an emulated reboot takes under a second),
# and none was queued
check "the three remediations ran side by side (each drained before the first resume unless seen after it; none queued)" \
    python3 - "$T_DIR/events1" "$T0" "${BAD[@]}" <<'PY'
import sys
t0, bad = sys.argv[2], sys.argv[3:]
first = {}
for line in open(sys.argv[1]):
    f = line.split(" ", 3)
    if len(f) >= 3 and f[0] >= t0 and f[2] in bad:
        first.setdefault((f[1], f[2]), f[0])
t = lambda kind: sorted(v for (k, n), v in first.items() if k == kind)
print("# drains", t("VM_SLURM_DRAIN"), "reboots", t("VM_REBOOT"), "resumes", t("VM_RESUMED"),
      "seen", t("VM_CONTINUOUS_GPU_ERROR") + t("VM_SCAN_ERROR"))
assert len(t("VM_SLURM_DRAIN")) == 3 and len(t("VM_RESUMED")) == 3, first
back = min(t("VM_RESUMED"))
for n in bad:
    drained = first[("VM_SLURM_DRAIN", n)]
    seen = first.get(("VM_CONTINUOUS_GPU_ERROR", n)) or first.get(("VM_SCAN_ERROR", n))
    assert seen and (drained < back or seen >= back), (n, "drained", drained, "seen", seen, "first back", back)
assert not [k for k in first if k[0] == "VM_REMEDIATION_QUEUED"], "a remediation was queued"
PY
check "job $JOB requeued (JOB_REQUEUED event)" has_event JOB_REQUEUED "$N"
check "job restarted (restart 1 in the log)" wait_for "${FAULT_RESTART_WAIT:-120}" grep -q "restart 1" "$TD/$JOB.log"
check "resumed from a checkpoint" wait_for 60 grep -q "resuming from .*step_" "$TD/$JOB.log"
st=$(run_wait_final 300 "$EXP")
check "run completes (state $st)" test "$st" = COMPLETED
check "every step exactly once across the restart" python3 - "$TD/logs/metrics.jsonl" "$STEPS" <<'PY'
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1])]
n = int(sys.argv[2])
assert steps == list(range(1, n + 1)), [s for s in steps if steps.count(s) > 1][:5] or len(steps)
PY
check "$GOOD never drained" no_event "\$1 == \"VM_SLURM_DRAIN\" && \$2 == \"$GOOD\""

# --- the queue: two at a time, the third waits ---------------------------
python3 - "$T_DIR/spec.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["healthPolicy"]["maxConcurrentRemediations"] = 2
json.dump(s, open(sys.argv[1], "w"))
PY
out=$(mtc cluster update "$C" -f "$T_DIR/spec.json" 2>&1)
check "policy updated to maxConcurrentRemediations 2" grep -q "done" <<<"$out" || diag "$out"
check "nodes idle again" wait_for 60 bash -c "[ \$(sinfo -h -N -t idle -o %N | sort -u | wc -l) -eq 4 ]"
# nodesStatus sampled every 50 ms meanwhile (an emulated reboot is short)
(while :; do
    curl -s --unix-socket "$MTC_HOME/mtcd.sock" "http://localhost$CLUSTERS/$C" | tr -d '\n'
    echo
    sleep 0.05
done >"$T_DIR/samples") &
SAMPLER=$!
track_pid "$SAMPLER"
T1=$(now)
for n in "${BAD[@]}"; do xid "$n"; done
check "one node waits QUEUED with an event naming the limit" \
    wait_for 30 has_line '^VM_REMEDIATION_QUEUED .*maxConcurrentRemediations 2' -- events
Q=$(events | awk '$1 == "VM_REMEDIATION_QUEUED" {print $2; exit}')
check "$Q remediated after the queue" wait_for 180 has_since "$T1" VM_RESUMED "$Q"
kill "$SAMPLER"
check "nodesStatus showed $Q QUEUED, never 3 remediating at once" python3 - "$T_DIR/samples" "$Q" <<'PY'
import json, sys
queued, most = 0, 0
for line in open(sys.argv[1]):
    try:
        nodes = json.loads(line)["clusterStatus"]["nodesStatus"]
    except (ValueError, KeyError, TypeError):
        continue
    rem = {n["instanceName"]: n.get("remediation", "") for n in nodes}
    queued += rem.get(sys.argv[2]) == "QUEUED"
    most = max(most, sum(v in ("PENDING", "REMEDIATING") for v in rem.values()))
print("# samples with %s QUEUED: %d; most remediating at once: %d" % (sys.argv[2], queued, most))
assert queued > 0 and most <= 2
PY
for n in "${BAD[@]}"; do
    check "$n back in service again" wait_for 120 has_since "$T1" VM_RESUMED "$n"
done
events_t >"$T_DIR/events2"
check "never more than 2 in flight: $Q drained only after another was resumed" python3 - "$T_DIR/events2" "$T1" "$Q" "${BAD[@]}" <<'PY'
import sys
t1, q, bad = sys.argv[2], sys.argv[3], sys.argv[4:]
drain_q, resumes = None, []
for line in open(sys.argv[1]):
    f = line.split(" ", 3)
    if len(f) < 3 or f[0] < t1 or f[2] not in bad:
        continue
    if f[1] == "VM_SLURM_DRAIN" and f[2] == q and not drain_q:
        drain_q = f[0]
    elif f[1] == "VM_RESUMED" and f[2] != q:
        resumes.append(f[0])
print("# queued", q, "drained", drain_q, "others resumed", resumes)
assert drain_q and resumes and min(resumes) <= drain_q, (drain_q, resumes)
PY
check_absent "no remediation left in flight" 'REMEDIATING|PENDING|QUEUED' -- mtc cluster nodes "$C"

# --- mtcd killed with two remediations in flight: both resume -------------
# ECC errors stay with the hardware; two reboots this hour already: reimage,
# then replace. mtcd dies as soon as both are drained (their third drain),
# wherever their actions are: a resumed operation repeats the action it was
# in (counted once), so neither runs into the limit of 4 actions an hour.
E=("${BAD[0]}" "${BAD[1]}")
T2=$(now)
for n in "${E[@]}"; do echo 'gpu 2 ecc=3' >>"$CD/nodes/$n/hw/nvml.state"; done
# (mtcd's log, polled every 50 ms: the API is too slow a clock here)
ecc_drained() {
    local end=$((SECONDS + 60))
    while [ $SECONDS -lt $end ]; do
        [ "$(grep -cE "VM_SLURM_DRAIN (${E[0]}|${E[1]}): drained: gpu.ecc" "$MTC_HOME/log/mtcd.log")" -ge 2 ] && return 0
        sleep 0.05
    done
    return 1
}
check "both ECC nodes drained" ecc_drained
OLD_PID=$MTCD_PID
kill -9 "$MTCD_PID"
wait_for 10 bash -c "! kill -0 $MTCD_PID 2>/dev/null"
diag "killed mtcd $MTCD_PID"
check "mtcd restarts" start_mtcd
for n in "${E[@]}"; do
    check "$n replaced and resumed after the restart" wait_for 120 bash -c \
        "has_since $T2 VM_REPORT_AND_REPLACEMENT $n && has_since $T2 VM_RESUMED $n"
done
# the killed mtcd's log: the remediations it started and did not finish are
# exactly those the new one resumed
check "the restarted mtcd resumed every remediation in flight" python3 - "$MTC_HOME/log/mtcd.log" "$OLD_PID" "$MTCD_PID" <<'PY'
import re, sys
old, new = "mtcd[%s]" % sys.argv[2], "mtcd[%s]" % sys.argv[3]
started, finished, resumed = set(), set(), set()
for line in open(sys.argv[1]):
    m = re.search(r"remediate cluster \w+: operation (op-\w+)", line)
    if old in line and m:
        started.add(m.group(1))
    m = re.search(r"REMEDIATE \w+/(op-\w+) op-\w+ (done|failed)", line)
    if old in line and m:
        finished.add(m.group(1))
    m = re.search(r"resuming operation (op-\w+)", line)
    if new in line and m:
        resumed.add(m.group(1))
print("# in flight at the kill:", sorted(started - finished), "resumed:", sorted(resumed))
assert resumed and resumed == started - finished
PY
check "no remediation left in flight after the restart" \
    wait_for 30 absent 'REMEDIATING|PENDING|QUEUED' -- mtc cluster nodes "$C"
events | sed 's/^/# /'
done_testing
