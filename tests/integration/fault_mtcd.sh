#!/usr/bin/env bash
# fault_mtcd: mtcd is killed (-9) in the middle of a remediation. ECC errors
# on the training node start a REMEDIATE operation (reboot → reimage →
# replace, since the errors stay with the hardware); mtcd dies right after
# the first action begins. The restarted mtcd resumes the persisted operation
# where its history says it was, the node is replaced and resumed, the job
# resumes from its checkpoint on a healthy node and every step runs once.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/fault_setup.inc"

STEPS=${STEPS:-400} EXP=mtcdkill
check "3-node cluster with agents up" fault_cluster fm
check "tiny corpus tokenized" run_corpus "$T_DIR/data"
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
fault_submit "$EXP"; run_or_stop $? "$T_DIR/run.out"
check "training with a checkpoint" fault_wait_training 20
N=$(job_node)
diag "job $JOB on $N; breaking GPU 1, then killing mtcd mid-remediation"
echo 'gpu 1 ecc=2' >>"$CD/nodes/$N/hw/nvml.state"
check "remediation under way (VM_REBOOT)" wait_for 30 has_event VM_REBOOT "$N"
kill -9 "$MTCD_PID"
wait_for 10 bash -c "! kill -0 $MTCD_PID 2>/dev/null"
diag "killed mtcd $MTCD_PID"
check "mtcd restarts" start_mtcd
fault_assert "$N" gpu.ecc
check "the operation was resumed and the node replaced" has_event VM_REPORT_AND_REPLACEMENT "$N"
n=$(events | grep -c "^VM_SLURM_DRAIN $N")
check "one remediation, not a second one started beside it ($n drains)" test "$n" -le 2
# No REMEDIATE operation unfinished in the store (the API has no operations list).
no_open_remediations() {
    python3 - "$MTC_HOME/mtcd.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=10)
sys.exit(db.execute("SELECT count(*) FROM operations WHERE kind = 'REMEDIATE' AND done = 0").fetchone()[0] != 0)
PY
}
check "no REMEDIATE operation left running" wait_for 30 no_open_remediations
fault_no_other_drain "$N"
done_testing
