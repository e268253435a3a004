#!/usr/bin/env bash
# run_custom: any training program as an mtc job (docs/any-framework.md),
# proven with real PyTorch (Debian's python3-torch in /usr/bin/python3, the
# gloo backend) — `mtc run --command` with the srun launcher on 2 nodes of a
# local cluster: torch.distributed's variables and the resume contract reach
# every rank, the losses on 2 ranks equal 1 rank's with the same global batch
# (float64, within 1e-6), the status block and `mtc experiment status` work,
# progress rows feed the trainingJob's goodput track, and so do TensorBoard
# events written by hand (no metrics rows); `-e local` runs the
# ranks on this machine with the same losses; progress from log lines alone
# (monitor.log_rules); a node fault (report-faulty) mid-run requeues the job,
# which resumes from the newest checkpoint (MTC_RESTART_COUNT 1) and ends with
# the uninterrupted run's parameters, bit for bit, its time broken down into
# parts that sum to the time since submission; a program that raises is
# FAILED with a TRAINING_FAILED event carrying its last line, and with
# retry_on_error 1 requeued once and completed from its checkpoint; a rank
# SIGSTOPped with monitor.hang_timeout_s set is named by the job's watcher
# (mtc-agent ranks), raises TRAINING_HANG and the job is requeued and
# completes from its checkpoint, nobody reading, the hang in its breakdown; a
# program in an image (`-i`, made by `mtc image import` from a directory) gets
# the ranks' variables and the contract; the torchrun launcher's command line
# (Debian 12's torchrun cannot start workers: checked rendered, not run); bad
# --command input and bad custom recipes get one line.
# test: uses master-ports (its jobs choose a MASTER_PORT: not beside run_ports)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR
PY=/usr/bin/python3 # where Debian's torch is; a python3 earlier on PATH may have none
PROG=$ROOT/tests/integration/ddp_train.py

check "local 2-node cluster up" run_cluster cu
run_or_stop $?
cd "$D" || exit 1

# result EXPERIMENT FIELD: a field of the run's result.json (python expression on r)
result() {
    local dir
    dir=$(mtc experiment status "$1" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["taskDir"])')
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$dir/result.json" "$2"
}
metrics_of() { # the metrics rows of experiment $1, the last row of each step
    local dir
    dir=$(mtc experiment status "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["logDir"])')
    cat "$dir/metrics.jsonl"
}

# --- 2 nodes, srun launcher ------------------------------------------------------
mtc run --command "$PY $PROG --steps 20" -n 2 --experiment-name ddp2 >"$D/ddp2.out" 2>&1
check "mtc run --command -n 2: the status block" grep -q "^- Status: " "$D/ddp2.out"
run_or_stop $? "$D/ddp2.out"
check "the 2-rank DDP job completes" test "$(run_wait_final 180 ddp2)" = COMPLETED
mtc run --command "$PY $PROG --steps 20" -n 1 --experiment-name ddp1 >"$D/ddp1.out" 2>&1
check "the 1-rank run of the same program completes" test "$(run_wait_final 180 ddp1)" = COMPLETED
check "each rank got torch.distributed's variables: WORLD_SIZE 2, MASTER_ADDR and MASTER_PORT" \
    test "$(result ddp2 'r["env"]["WORLD_SIZE"], r["env"]["LOCAL_WORLD_SIZE"], bool(r["env"]["MASTER_ADDR"]), int(r["env"]["MASTER_PORT"]) > 0')" = "('2', '1', True, True)"
check "and the resume contract: MTC_CHECKPOINT_DIR, MTC_RUN_DIR, MTC_METRICS_FILE, MTC_TENSORBOARD_DIR, restart 0" \
    test "$(result ddp2 'all(r["env"][k] for k in ("MTC_CHECKPOINT_DIR","MTC_RUN_DIR","MTC_METRICS_FILE","MTC_TENSORBOARD_DIR")), r["env"]["MTC_RESTART_COUNT"]')" = "(True, '0')"
metrics_of ddp1 >"$D/m1.jsonl"
metrics_of ddp2 >"$D/m2.jsonl"
check "2 ranks' losses equal 1 rank's with the same global batch (20 steps, within 1e-6)" python3 - "$D/m1.jsonl" "$D/m2.jsonl" <<'PY'
import json, sys
a, b = ({r["step"]: r["loss"] for r in map(json.loads, open(f))} for f in sys.argv[1:])
assert len(a) == 20 and a.keys() == b.keys(), (len(a), len(b))
worst = max(abs(a[s] - b[s]) for s in a)
print("# largest difference", worst)
assert worst <= 1e-6, worst
PY
check "its progress rows feed the run's track: step 20, productive time from step_time_s" python3 -c '
import json, sys
p = json.loads(sys.argv[1])["progress"]
assert p["step"] == 20 and p["productiveSeconds"] > 0, p' "$(mtc experiment status ddp2 --json)"
TD=$(mtc experiment status ddp2 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["taskDir"])')
check "checkpoints in MTC_CHECKPOINT_DIR (every 5 steps)" test -f "$TD/checkpoints/step_20.pt" -a -f "$TD/checkpoints/step_5.pt"
check "mtc experiment logs: the program's output" has_line '^step 20 loss' -- mtc experiment logs ddp2
JOBS=$CLUSTERS/cu/trainingJobs
api GET "$JOBS?pageSize=50"
check "the run is a trainingJob of the cluster, COMPLETED" python3 -c '
import json, sys
j = [j for j in json.loads(sys.argv[1])["trainingJobs"] if j.get("experimentName") == "ddp2"]
assert j and j[0]["state"] == "COMPLETED", j' "$BODY"

# --- progress from TensorBoard events alone (an independent writer) ------------------
mtc run --command "$PY $PROG --steps 6 --tb --no-metrics" -n 1 --experiment-name ddptb >"$D/tb.out" 2>&1
check "a run logging its loss only as TensorBoard events completes" test "$(run_wait_final 120 ddptb)" = COMPLETED
LAST=$(mtc experiment logs ddptb | sed -n 's/^step 6 loss //p')
check "  its track reads the events: step 6, the last loss (float32 of $LAST)" python3 -c '
import json, sys
p = json.loads(sys.argv[1])["progress"]
assert p["step"] == 6 and abs(p["loss"] - float(sys.argv[2])) < 1e-5 * abs(float(sys.argv[2])), p' \
    "$(mtc experiment status ddptb --json)" "$LAST"

# --- progress from the program's log lines alone (monitor.log_rules) -----------------
api POST "$JOBS?trainingJobId=rules" "$(python3 - "$PY" "$PROG" "$D" <<'PY'
import json, sys
py, prog, d = sys.argv[1:]
print(json.dumps({"recipe": {"task": "custom",
                             "monitor": {"log_rules": [{"pattern": "^step (?<step>[0-9]+) loss (?<loss>[0-9.]+)"}]},
                             "launch": {"command": [py, prog, "--steps", "6", "--no-metrics"], "workdir": d}},
                  "nodeCount": 1, "experimentName": "ddprules"}))
PY
)"
check "a job whose progress is only its log lines (a log rule with step and loss): 200" test "$HTTP_STATUS" = 200
check "  it completes" test "$(run_wait_final 120 ddprules)" = COMPLETED
LAST=$(mtc experiment logs ddprules | sed -n 's/^step 6 loss //p')
check "  its track reads the lines: step 6 and its loss $LAST" python3 -c '
import json, sys
p = json.loads(sys.argv[1])["progress"]
assert p["step"] == 6 and abs(p["loss"] - float(sys.argv[2])) < 1e-12, p' \
    "$(mtc experiment status ddprules --json)" "$LAST"

# --- a node fault mid-run (report-faulty): requeued, resumed from the newest
# checkpoint, the same end; where its time went --------------------------------------
mtc run --command "$PY $PROG --steps 40 --ckpt-every 5 --sleep 0.3" -n 2 --experiment-name ddpre >"$D/ddpre.out" 2>&1
RJOB=$(mtc experiment status ddpre --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobId"])')
RM=$(mtc experiment status ddpre --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["logDir"])')/metrics.jsonl
past() { [ "$(wc -l <"$RM" 2>/dev/null || echo 0)" -ge 12 ]; }
check "the long run logs its steps" wait_for 120 past
FN=$(scontrol show hostnames "$(squeue -h -j "$RJOB" -o %N)" | tail -1)
check "  a fault reported on its node $FN (mtc cluster report-faulty)" \
    mtc cluster report-faulty cu "$FN" --description "run_custom: node fault mid-run" --no-wait
check "requeued by remediation mid-run, it completes" test "$(run_wait_final 300 ddpre)" = COMPLETED
check "  resumed from a checkpoint at step >= 10, MTC_RESTART_COUNT 1" \
    test "$(result ddpre 'r["start"] >= 10, r["env"]["MTC_RESTART_COUNT"]')" = "(True, '1')"
mtc run --command "$PY $PROG --steps 40 --ckpt-every 5" -n 2 --experiment-name ddpun >"$D/ddpun.out" 2>&1
check "the uninterrupted run completes" test "$(run_wait_final 180 ddpun)" = COMPLETED
check "  the resumed run ends with its parameters, bit for bit" \
    same "$(result ddpre 'r["params_sha256"]')" "$(result ddpun 'r["params_sha256"]')"
# parts(JSON of mtc experiment status --json) checks the breakdown; $2: more asserts on b
parts() {
    python3 - "$1" "$2" <<'PY'
import json, sys
p = json.loads(sys.argv[1])["progress"]
b = p["breakdown"]
keys = ("queueSeconds", "startupSeconds", "productiveSeconds", "checkpointSeconds",
        "lostSeconds", "restartSeconds", "hangSeconds")
print("# " + ", ".join("%s %.1f" % (k[:-7], b[k]) for k in keys) + ", total %.1f" % b["totalSeconds"])
assert all(b[k] >= 0 for k in keys), b
assert abs(sum(b[k] for k in keys) - b["totalSeconds"]) < 1e-6, b
assert abs(b["totalSeconds"] - b["queueSeconds"] - p["wallSeconds"]) < 1e-6, (b, p["wallSeconds"])
assert eval(sys.argv[2]), b
PY
}
check "  its time: the parts sum to the time since submission; a restart gap, lost steps, productive time" \
    parts "$(mtc experiment status ddpre --json)" 'b["restartSeconds"] > 0 and b["lostSeconds"] > 0 and b["productiveSeconds"] > 5 and b["startupSeconds"] > 0'
check "  mtc experiment status prints them" bash -c "mtc experiment status ddpre | grep -qE '^- Time: [0-9.]+ s = queue [0-9.]+ \+ startup'"
api GET "$JOBS?pageSize=50"
check "  and the trainingJob resource has the same parts" python3 -c '
import json, sys
j = [j for j in json.loads(sys.argv[1])["trainingJobs"] if j.get("experimentName") == "ddpre"][0]
b = j["progress"]["breakdown"]
assert b["restartSeconds"] > 0 and abs(sum(v for k, v in b.items() if k != "totalSeconds") - b["totalSeconds"]) < 1e-6, b' "$BODY"

# --- -e local: the ranks on this machine, the same losses ---------------------------
mtc run -e local --command "$PY $PROG --steps 5" -n 2 --experiment-name ddploc >"$D/loc.out" 2>&1
check "-e local with 2 ranks completes" test "$(run_wait_final 120 ddploc)" = COMPLETED
metrics_of ddploc >"$D/mloc.jsonl"
check "  with the 1-rank run's losses (5 steps, within 1e-6)" python3 - "$D/m1.jsonl" "$D/mloc.jsonl" <<'PY'
import json, sys
a, b = ({r["step"]: r["loss"] for r in map(json.loads, open(f))} for f in sys.argv[1:])
assert sorted(b) == [1, 2, 3, 4, 5] and max(abs(a[s] - b[s]) for s in b) <= 1e-6, b
PY

# --- a program that raises: FAILED ---------------------------------------------------
mtc run --command "$PY $PROG --steps 10 --fail-at 3" -n 2 --experiment-name ddpfail >"$D/fail.out" 2>&1
check "a program that raises: FAILED" test "$(run_wait_final 120 ddpfail)" = FAILED
check "  its traceback in the job's log" has_line 'RuntimeError: ddp_train: failing at step 3' -- mtc experiment logs ddpfail
events() { event_texts cu "$1" "$2"; } # TYPE TEXT: descriptions of cluster cu's events
check "  a TRAINING_FAILED event with the exit status and the program's last line" \
    wait_for 20 eval '[ -n "$(events TRAINING_FAILED "(experiment ddpfail) FAILED (exit status 1); last line: RuntimeError: ddp_train: failing at step 3")" ]'
diag "$(events TRAINING_FAILED ddpfail)"

# --- retry_on_error: an application error retried, resumed from its checkpoint ----------
api POST "$JOBS?trainingJobId=retry" "$(python3 - "$PY" "$PROG" "$D" <<'PY'
import json, sys
py, prog, d = sys.argv[1:]
print(json.dumps({"recipe": {"task": "custom", "retry_on_error": 1,
                             "launch": {"command": [py, prog, "--steps", "12", "--fail-at", "8",
                                                    "--fail-once"], "workdir": d}},
                  "nodeCount": 2, "experimentName": "ddpretry"}))
PY
)"
check "a custom job with retry_on_error 1 that fails once at step 8: 200" test "$HTTP_STATUS" = 200
YJOB=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["slurmJobId"])' "$BODY" 2>/dev/null)
requeued() { scontrol show job "$YJOB" -o 2>/dev/null | grep 'Restarts=1' | grep -q 'JobState=PENDING'; }
check "  it is requeued, not FAILED" wait_for 120 requeued
check "  and completes on the retry (mtcd's monitor lifts Slurm's requeue hold)" test "$(run_wait_final 180 ddpretry)" = COMPLETED
check "  resumed from its step-5 checkpoint, MTC_RESTART_COUNT 1" \
    test "$(result ddpretry 'r["start"], r["env"]["MTC_RESTART_COUNT"]')" = "(5, '1')"
check "  the log says why" has_line 'retry_on_error 1: requeueing it \(restart 1\)' -- mtc experiment logs ddpretry

# --- a hang (one rank SIGSTOPped): TRAINING_HANG, requeued, resumed, completed ---------
api POST "$JOBS?trainingJobId=hang" "$(python3 - "$PY" "$PROG" "$D" <<'PY'
import json, sys
py, prog, d = sys.argv[1:]
print(json.dumps({"recipe": {"task": "custom", "monitor": {"hang_timeout_s": 60},
                             "launch": {"command": [py, prog, "--steps", "40", "--sleep", "0.3"],
                                        "workdir": d}},
                  "nodeCount": 2, "experimentName": "ddphang"}))
PY
)"
# hang_timeout_s 60: more than torch's start on a loaded machine (a start is
# no progress); a stopped rank is named by its node's watcher after 5 s,
# whatever the timeout
check "a custom job with monitor.hang_timeout_s 60 through the API: 200" test "$HTTP_STATUS" = 200
HJOB=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["slurmJobId"])' "$BODY" 2>/dev/null)
HM=$(mtc experiment status ddphang --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["logDir"])')/metrics.jsonl
hrows() { [ "$(wc -l <"$HM" 2>/dev/null || echo 0)" -ge 8 ]; }
check "  it logs its steps" wait_for 120 hrows
rank1() { # the rank-1 process of Slurm job $1
    local p
    for p in /proc/[0-9]*; do
        tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "SLURM_JOB_ID=$1" || continue
        tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "RANK=1" || continue
        grep -q ddp_train "$p/cmdline" 2>/dev/null && echo "${p#/proc/}"
    done
}
R1=$(rank1 "$HJOB")
check "  its rank 1 found (pid $R1)" test -n "$R1"
kill -STOP $R1
t0=$SECONDS
check "  rank 1 SIGSTOPped, nobody reading: a TRAINING_HANG event (the watcher's, or hang_timeout_s + a pass)" \
    wait_for 70 eval '[ -n "$(events TRAINING_HANG "(experiment ddphang): hung")" ]'
diag "TRAINING_HANG $((SECONDS - t0)) s after the SIGSTOP (hang_timeout_s 60): $(events TRAINING_HANG ddphang | head -1)"
check "  the watcher on its node named the stopped rank (mtc-agent ranks)" bash -c "grep -q 'hung: rank 1 (pid $R1 on [^)]*) is stopped for [0-9]* s after step' <<<\"\$0\"" "$(events TRAINING_HANG ddphang)"
check "  it says the job was requeued" bash -c "grep -q 'requeued (restart 1 of at most 3)' <<<\"\$0\"" "$(events TRAINING_HANG ddphang)"
check "  the job resumes and completes" test "$(run_wait_final 240 ddphang)" = COMPLETED
check "  from a checkpoint, MTC_RESTART_COUNT 1" \
    test "$(result ddphang 'r["start"] >= 5, r["env"]["MTC_RESTART_COUNT"]')" = "(True, '1')"
check "  its breakdown holds the hang (>= 3 s) and sums to the time since submission" \
    parts "$(mtc experiment status ddphang --json)" 'b["hangSeconds"] >= 3 and b["restartSeconds"] >= 0'

# --- a program in an image: the ranks' variables and the contract inside it -----------
run_rootfs "$D/ctr" sh env echo cat
echo "image-$$" >"$D/ctr/etc/mtc-test-marker" # only the image has it
check "an image made by mtc image import from a directory" mtc image import "$D/ctr" -o "$D/ctr.sqsh"
mtc run --command 'sh -c "echo rank=$RANK/$WORLD_SIZE local=$LOCAL_RANK ckpt=$MTC_CHECKPOINT_DIR restart=$MTC_RESTART_COUNT marker=$(cat /etc/mtc-test-marker)"' \
    -i "$D/ctr.sqsh" -n 2 --experiment-name ddpimg >"$D/img.out" 2>&1
check "a custom job in the image on 2 nodes completes" test "$(run_wait_final 120 ddpimg)" = COMPLETED
mtc experiment logs ddpimg >"$D/img.log"
check "  each rank ran in it (the image's own file) with its variables and the contract" bash -c "grep -q '^rank=0/2 local=0 ckpt=/.*checkpoints restart=0 marker=image-$$\$' '$D/img.log' && grep -q '^rank=1/2 local=0 ckpt=/.* marker=image-$$\$' '$D/img.log'"
diag "$(grep '^rank=' "$D/img.log" | tr '\n' ' ')"

# --- the torchrun launcher: the command line each node runs ------------------------------
mtc run --command "$PY train.py --lr 3e-4" --launcher torchrun -n 2 --dry-run >"$D/tr.sh" 2>"$D/tr.err"
check "torchrun: one per node, with the rendezvous on the first node; a bad exit ends the others" \
    grep -qF 'srun --kill-on-bad-exit=1 --ntasks=2 --ntasks-per-node=1 sh -c' "$D/tr.sh"
check "  --nnodes=2 --nproc_per_node=1 --node_rank --rdzv_backend=c10d --rdzv_endpoint --rdzv_id (underscore spellings)" \
    grep -qF 'torchrun --nnodes=2 --nproc_per_node=1 --node_rank=$SLURM_NODEID --rdzv_backend=c10d --rdzv_endpoint=$MASTER_ADDR:$MASTER_PORT --rdzv_id=$SLURM_JOB_ID --no_python "$@"' "$D/tr.sh"
check "  the program's words quoted, never re-split" grep -qF "CMD=('$PY' 'train.py' '--lr' '3e-4')" "$D/tr.sh"

# --- bad input: one line each, nothing submitted ------------------------------------------
N0=$(count_of . -- mtc experiment list)
out=$(mtc run --command "" -n 1 2>&1); rc=$?
check "--command '': one line, non-zero" bash -c "[ $rc -ne 0 ] && [ \$(wc -l <<<'$out') = 1 ] && grep -q 'at least one word' <<<'$out'"
out=$(mtc run --command "python3 'train.py" 2>&1); rc=$?
check "--command with an unmatched quote: one line naming it" bash -c "[ $rc -ne 0 ] && [ \$(wc -l <<<\"\$0\") = 1 ] && grep -q 'unmatched' <<<\"\$0\"" "$out"
out=$(mtc run --command "python3 x.py" -s pretrain/tiny_gpt2_pt 2>&1); rc=$?
check "--command with -s: one line" one_line_fail $rc "$out" 'give one of them'
api POST "$JOBS" '{"recipe": {"task": "custom", "launch": {"command": ["python3"]}, "model": {"preset": "tiny-gpt2"}}}'
check "a custom recipe with a model: 400 naming model" \
    bash -c "[ '$HTTP_STATUS' = 400 ] && grep -q 'a custom task runs its own program' <<<\"\$0\"" "$BODY"
api POST "$JOBS" '{"recipe": {"task": "custom"}}'
check "a custom recipe without launch: 400 naming launch" \
    bash -c "[ '$HTTP_STATUS' = 400 ] && grep -q 'launch' <<<\"\$0\"" "$BODY"
api POST "$JOBS" '{"recipe": {"task": "custom", "launch": {"command": ["python3"], "launcher": "mpirun"}}}'
check "an unknown launcher: 400" bash -c "[ '$HTTP_STATUS' = 400 ] && grep -q 'launcher' <<<\"\$0\"" "$BODY"
api POST "$JOBS" '{"recipe": {"task": "custom", "launch": {"command": ["python3"], "workdir": "rel/dir"}}}'
check "a relative workdir: 400" bash -c "[ '$HTTP_STATUS' = 400 ] && grep -q 'absolute' <<<\"\$0\"" "$BODY"
N1=$(count_of . -- mtc experiment list)
check "  nothing submitted (the list answered: $N0 lines, then ${N1:-none})" test -n "$N0" -a -n "$N1" -a "$N1" = "$N0"

done_testing
