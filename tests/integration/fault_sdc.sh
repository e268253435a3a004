#!/usr/bin/env bash
# fault_sdc: the node's CPU turns marginal — every program the node starts
# from now on runs with a faulty fma() (LD_PRELOAD of build/fakes/libbadfma.so
# added to the node's agent.env, the environment the provider and the Slurm
# hooks give the node's agent; the agent is restarted to pick it up, as a
# reboot of a machine with bad silicon would). The correctness probe (sdc)
# returns a wrong digest → FAIL REPLACE; mtcd drains the node, requeues the
# job (it resumes on a healthy node) and replaces the node, whose fresh
# environment no longer has the fault; the node comes back.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/fault_setup.inc"

STEPS=${STEPS:-1500} EXP=sdc
check "3-node cluster with agents up" fault_cluster fs
check "tiny corpus tokenized" run_corpus "$T_DIR/data"
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
fault_submit "$EXP"; run_or_stop $? "$T_DIR/run.out"
check "training with a checkpoint" fault_wait_training 20
N=$(job_node)
diag "job $JOB on $N; its CPU's fma() turns faulty"
echo "export LD_PRELOAD='$B/fakes/libbadfma.so'" >>"$CD/nodes/$N/agent.env"
APID=$(cat "$CD/run/agent-$N.pid")
kill -9 "$APID"
fault_assert "$N" sdc
check "detection event names the digest" has_event VM_SCAN_ERROR "$N sdc failed: silent data corruption"
check "replaced (VM_REPORT_AND_REPLACEMENT)" has_event VM_REPORT_AND_REPLACEMENT "$N"
check "the replacement's environment has no faulty library" bash -c "! grep -q badfma '$CD/nodes/$N/agent.env'"
fault_no_other_drain "$N"
done_testing
