#!/usr/bin/env bash
# fault_sdc: the node a training run is on starts computing wrong answers —
# its emulated hardware environment (nodes/N/hw/env) preloads libbadfma, so
# fma() flips a bit now and then, and its agent is killed (supervise restarts
# it on the faulty "hardware"). The sdc check FAILs (REPLACE), mtcd drains the
# node and requeues the job, which resumes from its newest checkpoint on a
# healthy node; the fault stays with the hardware until the node is replaced
# (fresh hw/, no hw/env), then it is resumed; every step runs exactly once.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/fault_setup.inc"

STEPS=${STEPS:-400} EXP=sdc
BADFMA=$(cd "$B/fakes" && pwd)/libbadfma.so
check "libbadfma built" test -f "$BADFMA"
check "3-node cluster with agents up" fault_cluster fs
check "tiny corpus tokenized" run_corpus "$T_DIR/data"
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
fault_submit "$EXP"; run_or_stop $? "$T_DIR/run.out"
check "training with a checkpoint" fault_wait_training 20
N=$(job_node)
diag "job $JOB on $N; its hardware gets a faulty fma(), its agent killed"
# the sanitizer build wants its runtime first in the library list
printf '# emulated hardware fault: a bad FPU\nLD_PRELOAD=%s\nASAN_OPTIONS=%s\n' "$BADFMA" \
    "${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" >"$CD/nodes/$N/hw/env"
OLD=$(cat "$CD/run/agent-$N.pid")
kill -9 "$OLD"
check "agent restarted by supervise (AGENT_RESTART)" wait_for 30 has_event AGENT_RESTART "$N"
fault_assert "$N" sdc
check "detection event names sdc (VM_SCAN_ERROR)" has_event VM_SCAN_ERROR "$N sdc failed: silent data corruption"
# libbadfma only perturbs fma(): no other check of the node failed
other=$(events | awk -v n="$N" '$1 ~ /^VM_.*ERROR$/ && $2 == n' | grep -v " sdc failed" | head -3)
check "no other check failed on $N${other:+ ($other)}" test -z "$other"
check "replaced: the faulty hardware is gone (VM_REPORT_AND_REPLACEMENT)" \
    has_event VM_REPORT_AND_REPLACEMENT "$N"
check "replace dropped hw/env" test ! -e "$CD/nodes/$N/hw/env"
check "the new agent runs without libbadfma" bash -c "p=\$(cat '$CD/run/agent-$N.pid');
    kill -0 \$p && ! tr '\\0' '\\n' </proc/\$p/environ | grep -q '^LD_PRELOAD=$BADFMA'"
fault_no_other_drain "$N"
done_testing
