#!/usr/bin/env bash
# run_local: `mtc run -e local` runs the same recipe without Slurm (1 rank, and
# 2 ranks through mpirun), with the same experiment layout, status and logs;
# `mtc experiment cancel` stops a local run.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR
unset SLURM_CONF SLURM_JOB_ID

check "tiny corpus tokenized" run_corpus "$D/data"
run_recipe "$D/r.json" 30 10

mtc run -e local -s "$D/r.json" --data-dir "$D/data" --experiment-name loc >"$D/run.out" 2>&1
rc=$?
check "local run starts" test $rc -eq 0
run_or_stop $rc "$D/run.out"
sed 's/^/# /' "$D/run.out"
check "status block: LocalExecutor" grep -qx -- '- Executor: LocalExecutor' "$D/run.out"
TD=$(sed -n 's/^- Local Directory: //p' "$D/run.out")
JOB=$(sed -n 's/^- Job id: //p' "$D/run.out")
ST=$(run_wait_final 180 loc)
check "local run completes (state $ST)" test "$ST" = COMPLETED
check "<pid>.log holds the trainer's output" grep -q "mtc-train: done, 30 steps" "$TD/$JOB.log"
check "checkpoints and metrics in the experiment" test -e "$TD/checkpoints/step_00000030/DONE" -a -s "$TD/logs/metrics.jsonl"

mtc run -e local -n 2 -s "$D/r.json" --data-dir "$D/data" --experiment-name loc2 >"$D/run2.out" 2>&1
check "local run on 2 ranks starts" test $? -eq 0
ST=$(run_wait_final 180 loc2)
TD2=$(sed -n 's/^- Local Directory: //p' "$D/run2.out")
check "2-rank local run completes (state $ST)" test "$ST" = COMPLETED
check "2 ranks in the config" python3 -c "import json; assert json.load(open('$TD2/config.json'))['ranks'] == 2"
check "same losses as 1 rank (data parallel)" python3 - "$TD/logs/metrics.jsonl" "$TD2/logs/metrics.jsonl" <<'PY'
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert len(a) == len(b) == 30 and max(abs(x - y) for x, y in zip(a, b)) < 1e-3, (a[-1], b[-1])
PY

run_recipe "$D/long.json" 100000 1000
mtc run -e local -s "$D/long.json" --data-dir "$D/data" --experiment-name long >"$D/run3.out" 2>&1
TD3=$(sed -n 's/^- Local Directory: //p' "$D/run3.out")
JOB3=$(sed -n 's/^- Job id: //p' "$D/run3.out")
track_pid "$JOB3"
check "long run is running" wait_for 30 grep -q "^step " "$TD3/$JOB3.log"
mtc experiment cancel long >/dev/null
check "experiment cancel" test $? -eq 0
check "cancelled run stops" wait_for 30 bash -c "! kill -0 $JOB3 2>/dev/null"
check "status says CANCELLED" bash -c "mtc experiment status long | grep -qx -- '- Status: CANCELLED'"
done_testing
