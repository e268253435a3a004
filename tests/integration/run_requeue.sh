#!/usr/bin/env bash
# run_requeue: a recipe run survives requeues — `scontrol requeue` mid-run and
# the pre-time-limit signal (USR1: the trainer checkpoints, exits 75, the script
# requeues itself) — resuming from the newest checkpoint each time with no lost
# or repeated step; the log shows every restart (SLURM_RESTART_COUNT).
# Node failures (the job requeued by mtcd's remediation after a drain) are the
# fault_*.sh tests: setting a live node DOWN and IDLE by hand here raced
# slurmd's cleanup of the old run and killed the restarted step now and then.
# Slurm holds a requeued job ~2 minutes (credential expiry) before it may start
# again; the test releases it at once with `scontrol update StartTime=now+1`.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR

check "local 2-node cluster up" run_cluster rq
check "tiny corpus tokenized" run_corpus "$D/data"
STEPS=${STEPS:-400}
run_recipe "$D/rq.json" "$STEPS" 5

mtc run -s "$D/rq.json" -n 2 --data-dir "$D/data" --experiment-name rq >"$D/run.out" 2>&1
rc=$?
check "submitted" test $rc -eq 0
run_or_stop $rc "$D/run.out"
TD=$(sed -n 's/^- Local Directory: //p' "$D/run.out")
JOB=$(sed -n 's/^- Job id: //p' "$D/run.out")
CK=$TD/checkpoints

# Wait for a complete checkpoint at or after step $1.
ckpt_at_least() {
    local d
    for d in "$CK"/step_*; do
        [ -e "$d/DONE" ] && [ "$((10#${d##*step_}))" -ge "$1" ] && return 0
    done
    return 1
}
release() { # skip Slurm's requeue hold once the job is pending again
    wait_for 30 bash -c "squeue -h -j $JOB -o %T | grep -q PENDING"
    scontrol update JobId="$JOB" StartTime=now+1
}

check "checkpoint at step >= 10" wait_for 120 ckpt_at_least 10
scontrol requeue "$JOB"
check "scontrol requeue accepted" test $? -eq 0
release
check "running again after the requeue" wait_for 60 grep -q "restart 1" "$TD/$JOB.log"
check "resumed from a checkpoint" wait_for 60 grep -q "resuming from .*step_" "$TD/$JOB.log"

N=$(ls -d "$CK"/step_* | tail -1); N=$((10#${N##*step_}))
check "a later checkpoint (> step $N)" wait_for 120 ckpt_at_least $((N + 5))
scancel --signal=USR1 "$JOB"   # what Slurm sends before the time limit (--signal)
check "the script requeued the job after the trainer's exit 75" \
    wait_for 60 grep -q "requeueing job $JOB" "$TD/$JOB.log"
S=$(sed -n 's/.*signal received, checkpointing at step \([0-9]*\) .*/\1/p' "$TD/$JOB.log" | tail -1)
S8=$(printf %08d "${S:-0}")
check "the trainer checkpointed on the signal: a complete checkpoint at its step (${S:-none})" \
    test -n "$S" -a -e "$CK/step_$S8/DONE"
release
check "second restart logged" wait_for 60 grep -q "restart 2" "$TD/$JOB.log"
check "resumed from the signal's checkpoint" wait_for 60 grep -q "resuming from .*step_$S8" "$TD/$JOB.log"

# 400 steps keep the job running through both requeues (over by step ~25:
# the second one at step 22 at load ~17); the wait for the end stays bounded
# at 10 min for a loaded runner (3000 steps once took past 4 min at load ~12)
ST=$(run_wait_final 600 rq)
check "run completes after two requeues (state $ST)" test "$ST" = COMPLETED
grep -E "^mtc:|resuming|signal" "$TD/$JOB.log" | sed 's/^/# /'
check "every step exactly once across the restarts" python3 - "$TD/logs/metrics.jsonl" "$STEPS" <<'PY'
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1])]
assert steps == list(range(1, int(sys.argv[2]) + 1)), [s for s in steps if steps.count(s) > 1][:5] or len(steps)
PY
check "three starts in one log" test "$(grep -c '^mtc: job .* start ' "$TD/$JOB.log")" -eq 3
check "final checkpoint" test -e "$CK/step_$(printf %08d "$STEPS")/DONE"
done_testing
