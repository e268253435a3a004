#!/usr/bin/env bash
# fault_ecc: uncorrected ECC errors appear on one GPU of the node a training
# run is on (emulated NVML state). The agent reports gpu.ecc FAIL, mtcd drains
# the node and requeues the job, which resumes from its newest checkpoint on a
# healthy node; the node is rebooted, reimaged and finally replaced (the ECC
# errors stay with the hardware) and comes back; every step runs exactly once.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/fault_setup.inc"

STEPS=${STEPS:-400} EXP=ecc
check "3-node cluster with agents up" fault_cluster fe
check "tiny corpus tokenized" run_corpus "$T_DIR/data"
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
fault_submit "$EXP"; run_or_stop $? "$T_DIR/run.out"
check "training with a checkpoint" fault_wait_training 20
N=$(job_node)
diag "job $JOB on $N; breaking GPU 3"
echo 'gpu 3 ecc=4' >>"$CD/nodes/$N/hw/nvml.state"
fault_assert "$N" gpu.ecc
check "the ECC errors are in the detection event" has_event VM_CONTINUOUS_GPU_ERROR "$N gpu.ecc failed: GPU 3: 4 volatile"
check "replaced: the hardware changed (VM_REPORT_AND_REPLACEMENT)" has_event VM_REPORT_AND_REPLACEMENT "$N"
fault_no_other_drain "$N"
done_testing
