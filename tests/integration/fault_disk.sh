#!/usr/bin/env bash
# fault_disk: the checkpoint filesystem fills up mid-run (the work directory
# `mtc run -d` is a small tmpfs; a file fills it). A full shared filesystem is
# not a node fault: no node is drained. The trainer fails its checkpoint
# write cleanly (one line naming the error, the job ends with a failure), the
# newest complete checkpoint stays intact, and once space is freed a requeue
# of the job resumes from it and finishes with every step exactly once.
# Needs mount(2) (root); skipped where a tmpfs cannot be mounted.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/fault_setup.inc"

FS=$T_DIR/ckfs
mkdir -p "$FS"
if ! mount -t tmpfs -o size=12m tmpfs "$FS" 2>/dev/null; then
    skip "cannot mount a tmpfs here"
    done_testing
fi
t_extra_cleanup() { delete_all_clusters; umount -l "$FS" 2>/dev/null; }

STEPS=${STEPS:-400} EXP=disk
check "3-node cluster with agents up" fault_cluster fd
t_extra_cleanup() { delete_all_clusters; umount -l "$FS" 2>/dev/null; }
check "tiny corpus tokenized" run_corpus "$T_DIR/data"
run_recipe "$T_DIR/recipe.json" "$STEPS" 10
mtc run -s "$T_DIR/recipe.json" -n 1 --data-dir "$T_DIR/data" --experiment-name "$EXP" -d "$FS" \
    >"$T_DIR/run.out" 2>&1
run_or_stop $? "$T_DIR/run.out"
TD=$(sed -n 's/^- Local Directory: //p' "$T_DIR/run.out")
JOB=$(sed -n 's/^- Job id: //p' "$T_DIR/run.out")
CK=$TD/checkpoints
check "checkpoints on the small filesystem" wait_for 120 ckpt_at_least 30
check "they really are on it" bash -c "df -P '$(readlink -f "$CK")' | tail -1 | grep -q '$FS'"
N=$(job_node)
# fill it: leave less than one checkpoint's worth free
free_kb=$(df -Pk "$FS" | awk 'NR==2 {print $4}')
dd if=/dev/zero of="$FS/filler" bs=1k count=$((free_kb - 64)) 2>/dev/null
diag "job $JOB on $N; $FS filled ($(df -Pk "$FS" | awk 'NR==2 {print $4}') KiB free)"
ST=$(run_wait_final 120 "$EXP")
check "the job ends with a failure once a checkpoint cannot be written (state $ST)" test "$ST" = FAILED
check "the trainer says why in one line (No space left on device)" \
    grep -q "mtc-train: checkpoint.*No space left on device" "$TD/$JOB.log"
LAST=$(for d in "$CK"/step_*; do [ -e "$d/DONE" ] && echo "${d##*step_}"; done | tail -1)
check "a complete checkpoint is left (step $LAST)" test -n "$LAST"
check "no node drained: a full shared filesystem is not a node fault" no_event '$1 == "VM_SLURM_DRAIN"'
check "every node idle" test "$(sinfo -h -N -o %T | sort -u | tr '\n' ' ')" = "idle "

rm -f "$FS/filler"
scontrol requeue "$JOB"
check "the failed job requeued once space is freed" test $? -eq 0
wait_for 30 bash -c "squeue -h -j $JOB -o %T | grep -q PENDING"
scontrol update JobId="$JOB" StartTime=now+1
check "resumed from the last complete checkpoint" \
    wait_for 60 grep -q "resuming from .*step_$LAST" "$TD/$JOB.log"
ST=$(run_wait_final 300 "$EXP")
check "run completes (state $ST)" test "$ST" = COMPLETED
check "every step exactly once" python3 - "$TD/logs/metrics.jsonl" "$STEPS" <<'PY'
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1])]
assert steps == list(range(1, int(sys.argv[2]) + 1)), [s for s in steps if steps.count(s) > 1][:5] or len(steps)
PY
grep -E "^mtc:|resuming|checkpoint" "$TD/$JOB.log" | sed 's/^/# /'
done_testing
