#!/usr/bin/env bash
# fault_slurmd: the slurmd of the training node is killed (-9) and cannot
# come back: its spool directory (SlurmdSpoolDir) is replaced by a dangling
# symbolic link, as a corrupted local disk would leave it, so every start of
# slurmd fails ("Unable to initialize slurmd spooldir"). The agent's daemon.slurmd check
# (or Slurm's node-down path, slurm.node) fails; mtcd drains the node and
# fences it (a reboot kills every process of the node: the job's old tasks
# must not run on beside the requeued job) and only then requeues the job,
# which resumes on a healthy node; the reboot does not bring slurmd back,
# reimage wipes the node's disks (the spool) and slurmd starts again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/fault_setup.inc"

STEPS=${STEPS:-400} EXP=slurmd
check "3-node cluster with agents up" fault_cluster fk
check "tiny corpus tokenized" run_corpus "$T_DIR/data"
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
fault_submit "$EXP"; run_or_stop $? "$T_DIR/run.out"
check "training with a checkpoint" fault_wait_training 20
N=$(job_node)
SPID=$(cat "$CD/run/slurmd-$N.pid")
diag "job $JOB on $N; killing its slurmd $SPID and breaking its spool"
mv "$CD/spool/$N" "$CD/spool/$N.broken"
ln -s "$CD/spool/$N.gone/spool" "$CD/spool/$N"
kill -9 "$SPID"
# the provider restarts a killed slurmd at once; for the moment before it
# fails again it re-registers without the job, and Slurm may requeue the job
# onto the same node itself before mtc fences it: the job may restart there
# first (fault_assert judges the start that ran to the end)
fault_assert "$N" "\\(daemon.slurmd\\|slurm.node\\)"
check "reimage (wiping the spool) brought it back" has_event VM_RESUMED "$N checks pass after reimage"
fault_no_other_drain "$N"
done_testing
