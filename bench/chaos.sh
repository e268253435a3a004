#!/usr/bin/env bash
# Chaos run on a local 3-node cluster: the tiny pretraining recipe (1 node,
# checkpoint every 10 steps) trains BENCH_CHAOS_STEPS steps while faults of
# random kinds (BENCH_KINDS, default ecc xid slurmd — see bench/faults.sh)
# hit random in-service nodes every BENCH_FAULT_EVERY_S (30) seconds (seeded:
# BENCH_SEED). Remediations of one cluster run one at a time and a node gets
# at most 4 actions an hour (an ECC fault takes 3: reboot, reimage, replace),
# so much higher rates end with every node in ERROR, as policy says. Reports the
# effective training time ratio (time of the steps that were kept ÷ wall time
# from the job's first start to its end, as `mtc experiment status` computes
# it: src/experiment/goodput.c), the same ratio of
# an undisturbed run of the same recipe in the same session, steps lost and
# repeated, and whether the final parameters (params.bin of the last
# checkpoint) are bitwise equal to the undisturbed run's.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/tests/integration/lib.sh" >/dev/null
. "$ROOT/tests/integration/run_setup.inc"
. "$ROOT/tests/integration/fault_setup.inc"
STEPS=${BENCH_CHAOS_STEPS:-12000}
EVERY=${BENCH_FAULT_EVERY_S:-30}
KINDS=(${BENCH_KINDS:-xid ecc slurmd})
SEED=${BENCH_SEED:-1}
exec 3>&1 >"$T_DIR/bench.log" 2>&1
T_FAILED=1

run_corpus "$T_DIR/data" || { echo "corpus preparation failed" >&3; exit 1; }
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
fault_cluster bc || { echo "cluster create failed" >&3; exit 1; }

# Follow experiment $1's job until it ends; print "wall kept repeated steps_ok".
follow() {
    python3 - "$TD/$JOB.log" "$TD/logs/metrics.jsonl" "$STEPS" <<'PY'
import json, os, re, sys, time
log, metrics, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
t_start = t_end = None
resumes_seen, seg_max, repeated = 0, 0, 0
deadline = time.time() + 900
while time.time() < deadline:
    try:
        text = open(log).read()
    except OSError:
        text = ""
    if t_start is None and re.search(r"^mtc: job \d+ start", text, re.M):
        t_start = time.time()
    try:
        lines = open(metrics).read().splitlines()
        if lines:
            seg_max = max(seg_max, json.loads(lines[-1])["step"])
    except (OSError, ValueError, KeyError):
        pass
    res = re.findall(r"resuming from .* \(step (\d+)\)", text)
    for s in res[resumes_seen:]:
        repeated += max(0, seg_max - int(s))
        seg_max = int(s)
    resumes_seen = len(res)
    if re.search(r"^mtc: job \d+ end .*exit status 0", text, re.M) and \
            not re.search(r"^mtc: job \d+ start", text.split("exit status 0")[-1], re.M):
        t_end = time.time()
        break
    time.sleep(0.1)
rows = [json.loads(l) for l in open(metrics)]
steps = [r["step"] for r in rows]
kept = sum(8 * 64 / r["tokens_per_s"] for r in rows if r.get("tokens_per_s"))
ok = steps == list(range(1, n + 1))
lost = n - len(set(steps))
wall = (t_end - t_start) if t_start and t_end else float("nan")
print(f"{wall:.2f} {kept:.2f} {repeated} {lost} {int(ok)} {resumes_seen}")
PY
}

# wall and kept time of experiment $1 as mtc computes goodput (src/experiment/goodput.c,
# docs/observability.md): the same formula, from the run's log and metrics.jsonl
goodput() {
    mtc experiment status "$1" --json |
        python3 -c 'import json,sys; p=json.load(sys.stdin)["progress"]; print(p["wallSeconds"], p["productiveSeconds"])'
}

# reference: undisturbed
fault_submit ref >/dev/null || { echo "submit failed" >&3; exit 1; }
read -r W0 K0 _ _ OK0 _ <<<"$(follow)"
read -r W0 K0 <<<"$(goodput ref)"
REF_PARAMS=$CK/step_$(printf %08d "$STEPS")/params.bin

# chaos
fault_submit chaos >/dev/null || { echo "submit failed" >&3; exit 1; }
(
    RANDOM=$SEED
    while sleep "$EVERY"; do
        mapfile -t up < <(sinfo -h -N -o '%N %T' | awk '$2 ~ /^(idle|allocated|mixed)$/ {print $1}')
        [ ${#up[@]} -eq 0 ] && continue
        n=${up[$((RANDOM % ${#up[@]}))]} k=${KINDS[$((RANDOM % ${#KINDS[@]}))]}
        on=$(squeue -h -j "$JOB" -t RUNNING -o %N)
        echo "$(date +%s) $k $n$([ "$n" = "$on" ] && echo ' (the job node)')" >>"$T_DIR/faults.log"
        case $k in
        ecc) echo 'gpu 2 ecc=3' >>"$CD/nodes/$n/hw/nvml.state" ;;
        xid) echo "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus" >>"$CD/nodes/$n/hw/kernel.log" ;;
        slurmd)
            mv "$CD/spool/$n" "$CD/spool/$n.broken.$(date +%s)"; ln -s "$CD/spool/$n.gone/spool" "$CD/spool/$n"
            kill -9 "$(cat "$CD/run/slurmd-$n.pid")" ;;
        esac
    done
) &
INJ=$!
track_pid $INJ
read -r W1 K1 REP LOST OK1 RES <<<"$(follow)"
read -r W1 K1 <<<"$(goodput chaos)"
kill $INJ 2>/dev/null
NF=$(wc -l <"$T_DIR/faults.log" 2>/dev/null || echo 0)
NJ=$(grep -c "job node" "$T_DIR/faults.log" 2>/dev/null || echo 0)
SAME=no
cmp -s "$REF_PARAMS" "$CK/step_$(printf %08d "$STEPS")/params.bin" && SAME=yes
python3 - "$W0" "$K0" "$W1" "$K1" >&3 <<PY
import sys
w0, k0, w1, k1 = map(float, sys.argv[1:])
print(f"chaos run: {$STEPS} steps, a fault every $EVERY s (seed $SEED): {$NF} faults, {$NJ} on the job's node, {$RES} resumes")
print(f"ETTR chaos {100*k1/w1:.1f}%  (kept step time {k1:.1f} s / wall {w1:.1f} s)")
print(f"ETTR undisturbed {100*k0/w0:.1f}%  (kept {k0:.1f} s / wall {w0:.1f} s); chaos/undisturbed {100*(k1/w1)/(k0/w0):.1f}%")
print(f"wall time added by faults {w1-w0:.1f} s ({(w1-w0)/max($NJ,1):.1f} s per fault on the job's node)")
PY
echo "steps lost $LOST, repeated $REP (sampled), every step once: $([ "$OK1" = 1 ] && echo yes || echo no)" >&3
echo "final parameters bitwise equal to the undisturbed run: $SAME" >&3
sed 's/^/  fault /' "$T_DIR/faults.log" >&3
mtc cluster events bc | grep -cE "VM_RESUMED" | sed 's/^/  nodes resumed: /' >&3
mtc cluster nodes bc | sed 's/^/  /' >&3
T_FAILED=0
