#!/usr/bin/env bash
# Fault detection and recovery latency on a local 3-node cluster running the
# tiny pretraining recipe (1 node, checkpoint every 10 steps, agents checking
# every 1 s). Per fault kind, N trials (BENCH_TRIALS, default 3), each on a
# fresh cluster (a node's remediation history would otherwise escalate):
#   detection = fault injected → the node drained (Slurm state drain*);
#   recovery  = fault injected → the first training step after the resume
#               (metrics.jsonl past the step the trainer resumed from).
# Kinds: ecc (emulated NVML), xid (kernel log), slurmd (killed, spool broken),
# mtcd (ECC + mtcd killed right after the first action starts).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/tests/integration/lib.sh" >/dev/null
. "$ROOT/tests/integration/run_setup.inc"
. "$ROOT/tests/integration/fault_setup.inc"
TRIALS=${BENCH_TRIALS:-3}
KINDS=${BENCH_KINDS:-ecc xid slurmd mtcd}
STEPS=100000 # never finishes during a trial; cancelled after it
exec 3>&1 >"$T_DIR/bench.log" 2>&1 # TAP chatter to the log, figures to stdout
T_FAILED=1 # keep $T_DIR on a failure for inspection; reset at the end

run_corpus "$T_DIR/data" || { echo "corpus preparation failed" >&3; exit 1; }
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
start_mtcd || { echo "mtcd did not start" >&3; exit 1; }
t_extra_cleanup() { delete_all_clusters; }
fault_spec
now() { date +%s.%N; }

inject() { # kind node
    case $1 in
    ecc | mtcd) echo 'gpu 2 ecc=3' >>"$CD/nodes/$2/hw/nvml.state" ;;
    xid) echo "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus" >>"$CD/nodes/$2/hw/kernel.log" ;;
    slurmd)
        mv "$CD/spool/$2" "$CD/spool/$2.broken"; ln -s "$CD/spool/$2.gone/spool" "$CD/spool/$2"
        kill -9 "$(cat "$CD/run/slurmd-$2.pid")" ;;
    esac
}

# One trial of kind $1 (index $2): prints "detect recover" seconds or "fail"
# (to stdout, which the caller sends to a file: it must run in this shell,
# as the mtcd kind replaces mtcd and its recorded pid).
trial() {
    local kind=$1 id=b$2 n t0 td="" tr=""
    C=$id
    mtc cluster create -f "$T_DIR/spec.json" --id "$id" >/dev/null 2>&1 || { echo fail; return; }
    eval "$(mtc env "$id")"
    CD=$MTC_HOME/clusters/$id
    export C CD
    fault_submit "$kind$2" >/dev/null || { echo fail; return; }
    if ! wait_for 120 ckpt_at_least 20 || [ -z "$(job_node)" ]; then echo fail; return; fi
    n=$(job_node)
    t0=$(now)
    inject "$kind" "$n"
    # poll both ends at 50 ms, in the background: the mtcd kind kills and
    # restarts mtcd meanwhile
    python3 - "$t0" "$n" "$TD/$JOB.log" "$TD/logs/metrics.jsonl" >"$T_DIR/lat" <<'PY' &
import json, re, subprocess, sys, time
t0, node, log, metrics = float(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
td = tr = None
while time.time() - t0 < 240 and (td is None or tr is None):
    if td is None:
        st = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], capture_output=True, text=True).stdout
        if "drain" in st:
            td = time.time() - t0
    if tr is None:
        try:
            m = re.findall(r"resuming from .* \(step (\d+)\)", open(log).read())
            if m:
                last = open(metrics).read().splitlines()[-1]
                if json.loads(last)["step"] > int(m[-1]):
                    tr = time.time() - t0
        except (OSError, IndexError, ValueError):
            pass
    time.sleep(0.05)
print(f"{td:.2f}" if td is not None else "fail", f"{tr:.2f}" if tr is not None else "fail")
PY
    local poller=$!
    if [ "$kind" = mtcd ]; then
        wait_for 30 has_event VM_REBOOT "$n"
        kill -9 "$MTCD_PID"; wait_for 10 bash -c "! kill -0 $MTCD_PID 2>/dev/null"
        start_mtcd
    fi
    wait "$poller"
    td=$(cat "$T_DIR/lat")
    wait_for 180 has_event VM_RESUMED "$n" || td="$td (node not resumed)"
    scancel "$JOB" 2>/dev/null
    mtc cluster delete "$id" >/dev/null 2>&1
    echo "$td"
}

stats() { # values... → "median X s, max Y s" (n)
    python3 -c '
import statistics, sys
v = [float(x) for x in sys.argv[1:] if x != "fail"]
bad = len(sys.argv[1:]) - len(v)
s = "median %.2f s, max %.2f s" % (statistics.median(v), max(v)) if v else "no data"
print(s + (" (%d failed)" % bad if bad else ""))' "$@"
}

echo "fault latency on a local 3-node cluster, $TRIALS trials per kind (agent interval 1 s, supervisor tick ${SUPERVISE_MS:-500} ms)" >&3
i=0
for kind in $KINDS; do
    D=() R=()
    for t in $(seq "$TRIALS"); do
        i=$((i + 1))
        trial "$kind" "$i" >"$T_DIR/res"
        read -r d r _ <"$T_DIR/res"
        D+=("${d:-fail}"); R+=("${r:-fail}")
        echo "$kind trial $t: detect ${d:-fail} s, recover ${r:-fail} s" >>"$T_DIR/trials.log"
    done
    printf '%-7s detection (fault -> drained): %s;  recovery (fault -> first step after resume): %s\n' \
        "$kind" "$(stats "${D[@]}")" "$(stats "${R[@]}")" >&3
done
sed 's/^/  /' "$T_DIR/trials.log" >&3
T_FAILED=0
