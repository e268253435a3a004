#!/usr/bin/env bash
# fault_slurmd: the slurmd of the training node is killed (-9) and cannot
# come back: its spool directory (SlurmdSpoolDir) is replaced by a plain file,
# as a corrupted local disk would leave it, so every restart of slurmd fails
# ("Unable to initialize slurmd spooldir"). The agent's daemon.slurmd check
# (or Slurm's node-down path, slurm.node) fails; mtcd drains the node and
# requeues the job (it resumes on a healthy node); restart and reboot do not
# help, reimage wipes the node's disks (the spool) and slurmd starts again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/fault_setup.inc"

STEPS=${STEPS:-1500} EXP=slurmd
check "3-node cluster with agents up" fault_cluster fk
check "tiny corpus tokenized" run_corpus "$T_DIR/data"
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
fault_submit "$EXP"; run_or_stop $? "$T_DIR/run.out"
check "training with a checkpoint" fault_wait_training 20
N=$(job_node)
SPID=$(cat "$CD/run/slurmd-$N.pid")
diag "job $JOB on $N; killing its slurmd $SPID and breaking its spool"
mv "$CD/spool/$N" "$CD/spool/$N.broken"
: >"$CD/spool/$N"
kill -9 "$SPID"
fault_assert "$N" "\\(daemon.slurmd\\|slurm.node\\)"
check "reimage (wiping the spool) brought it back" has_event VM_RESUMED "$N checks pass after reimage"
fault_no_other_drain "$N"
done_testing
