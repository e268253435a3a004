#!/usr/bin/env bash
# fault_none: the control run — a recipe trains to the end on the 3-node
# cluster with every agent checking each second, and nothing is drained,
# requeued or remediated: healthy nodes are never taken out of service.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/fault_setup.inc"

STEPS=${STEPS:-400} EXP=none
check "3-node cluster with agents up" fault_cluster fn
check "tiny corpus tokenized" run_corpus "$T_DIR/data"
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
fault_submit "$EXP"; run_or_stop $? "$T_DIR/run.out"
ST=$(run_wait_final 300 "$EXP")
check "run completes (state $ST)" test "$ST" = COMPLETED
# after the job: three more reports from the agents (each node's at least
# every 5 s), and then two whole supervision passes that judged them
check "agents reported after the job, and the supervisor judged it" \
    eval 'after_metric "mtc_health_reports_total{cluster=\"$C\"}" 3 && after_passes "$C" 2'
ev=$(events | grep -E '^(VM_|JOB_)' | head -5)
check "no VM_* or JOB_* event${ev:+: $ev}" no_event '$1 ~ /^(VM_|JOB_)/'
check "every node idle" test "$(sinfo -h -N -o %T | sort -u | tr '\n' ' ')" = "idle "
check "every node's health PASS or WARN" bash -c "out=\$(mtc cluster nodes $C) && [ \$(wc -l <<<\"\$out\") -ge 4 ] &&
    ! awk 'NR>1 && \$5 == \"FAIL\"' <<<\"\$out\" | grep -q ."
check "started once (restart 0 only)" test "$(grep -c '^mtc: job .* start ' "$TD/$JOB.log")" -eq 1
check "every step exactly once" python3 - "$TD/logs/metrics.jsonl" "$STEPS" <<'PY'
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1])]
assert steps == list(range(1, int(sys.argv[2]) + 1)), len(steps)
PY
mtc cluster nodes "$C" | sed 's/^/# /'
done_testing
