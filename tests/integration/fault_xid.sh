#!/usr/bin/env bash
# fault_xid: an XID 79 ("GPU has fallen off the bus") appears in the kernel
# log of the node a training run is on. gpu.xid FAILs (REBOOT), mtcd drains
# the node and requeues the job, which resumes from its newest checkpoint on
# a healthy node; the reboot clears the log, the checks pass and the node is
# resumed; every step runs exactly once.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/fault_setup.inc"

STEPS=${STEPS:-400} EXP=xid
check "3-node cluster with agents up" fault_cluster fx
check "tiny corpus tokenized" run_corpus "$T_DIR/data"
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
fault_submit "$EXP"; run_or_stop $? "$T_DIR/run.out"
check "training with a checkpoint" fault_wait_training 20
N=$(job_node)
diag "job $JOB on $N; XID 79 in its kernel log"
echo "[ 42.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus." >>"$CD/nodes/$N/hw/kernel.log"
fault_assert "$N" gpu.xid
check "detection event names the XID" has_event VM_CONTINUOUS_GPU_ERROR "$N gpu.xid failed: .*79"
check "one reboot brought it back" has_event VM_RESUMED "$N checks pass after reboot"
fault_no_other_drain "$N"
done_testing
