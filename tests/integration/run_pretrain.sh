#!/usr/bin/env bash
# run_pretrain: `mtc run` of a pretraining recipe on a 2-node local cluster runs
# to completion with the documented experiment layout and a lower final loss;
# the status block, experiment status/logs/list; secrets pass through but are
# never written to disk.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR

check "local 2-node cluster up" run_cluster rp
check "tiny corpus tokenized" run_corpus "$D/data"
run_recipe "$D/my_pt.json" 40 10

export HF_TOKEN=hf_do_not_store_123
mtc run -e slurm --slurm-type local --partition a3m -d "$D/work" --data-dir "$D/data" \
    -s "$D/my_pt.json" -n 2 --experiment-name demo-run >"$D/run.out" 2>&1
rc=$?
check "mtc run submits" test $rc -eq 0
run_or_stop $rc "$D/run.out"
cat "$D/run.out" | sed 's/^/# /'
check "status block header" grep -qE '^Experiment Status for demo-run_[0-9]{10}$' "$D/run.out"
check "status block task" grep -qx 'Task 0: demo-run' "$D/run.out"
check "status block state" grep -qE '^- Status: (RUNNING|PENDING|CONFIGURING|COMPLETING|COMPLETED)$' "$D/run.out"
check "status block executor" grep -qx -- '- Executor: SlurmExecutor on @localhost' "$D/run.out"
check "status block job id" grep -qE '^- Job id: [0-9]+$' "$D/run.out"
TD=$(sed -n 's/^- Local Directory: //p' "$D/run.out")
JOB=$(sed -n 's/^- Job id: //p' "$D/run.out")
check "local directory is \$MTC_HOME/experiments/<name>/<name>_<ts>/<name>" \
    bash -c "[[ '$TD' =~ ^$MTC_HOME/experiments/demo-run/demo-run_[0-9]+/demo-run$ ]]"

ST=$(run_wait_final 240 demo-run)
check "run completes (state $ST)" test "$ST" = COMPLETED
mtc experiment status demo-run >"$D/status.out"
check "experiment status prints the same block" grep -qx -- "- Local Directory: $TD" "$D/status.out"
check "status from a shell without the cluster's environment (recorded at submit)" \
    bash -c "unset SLURM_CONF; mtc experiment status demo-run | grep -qx -- '- Status: COMPLETED'"
timeout 30 mtc experiment logs -f demo-run >"$D/logs.out" 2>&1
check "experiment logs -f ends with the finished job" grep -q "exit status 0" "$D/logs.out"
check "<JOB_ID>.log in the task directory" test -s "$TD/$JOB.log"
check "script and resolved config kept" test -x "$TD/sbatch.sh" -a -s "$TD/config.json"
check "ran on both nodes" grep -q "on rp-a3m-\[0-1\]" "$TD/$JOB.log"
check "checkpoints (linked from the work dir)" test -e "$TD/checkpoints/step_00000040/DONE"
check "checkpoints live under -d" test -d "$D/work/experiments/demo-run"
check "metrics.jsonl and TensorBoard events" bash -c "test -s '$TD/logs/metrics.jsonl' && ls '$TD/logs/' | grep -q '^events.out.tfevents\.'"
check "final loss lower than the first" python3 - "$TD/logs/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["step"] for r in rows]
assert steps == list(range(1, 41)), steps
first, last = rows[0]["loss"], rows[-1]["loss"]
print("# loss %.3f -> %.3f" % (first, last))
assert last < first - 0.5, (first, last)
PY
check "HF_TOKEN reached the job" grep -q "HF_TOKEN is set" "$TD/$JOB.log"
check "HF_TOKEN written nowhere in the experiment" bash -c "! grep -rq hf_do_not_store_123 '$MTC_HOME/experiments' '$D/work'"
mtc experiment list >"$D/list.out"
check "experiment list shows the run" grep -qE "^demo-run_[0-9]+ .* slurm +$JOB +COMPLETED" "$D/list.out"
check "two ranks in the resolved config" python3 -c "import json,sys; c=json.load(open('$TD/config.json')); assert c['ranks']==2 and c['jobId']=='$JOB', c"
done_testing
