#!/usr/bin/env bash
# chaos: `mtc chaos` (docs/any-framework.md) — a user proves that a job
# survives faults, with the tiny PyTorch DDP program (ddp_train.py, Debian's
# torch in /usr/bin/python3) on a local 2-node cluster. `--fault node --every
# 20s --count 3` on a 2-rank DDP job checkpointing every 5 steps: each fault
# is one of its nodes reported faulty (drained, the job requeued, the node
# rebooted), a CHAOS_FAULT event each; the job resumes from its checkpoints
# and ends COMPLETED, and the requeues, steps and goodput (and the breakdown
# of its time, where the API has one) are printed. Then, side by side,
# kill-rank into a job with retry_on_error 1, hang into one with
# monitor.hang_timeout_s (TRAINING_HANG, requeued) and slurmd into a third
# (supervision restarts it: SLURMD_RESTART): each ends COMPLETED. On a
# cluster on a test host (network namespace, reached over ssh): slurmd and
# kill-rank through mtc-host, the job COMPLETED. Refused in one line: a
# token that is not an admin's, an unknown fault, a bad duration, no --job;
# and through the API a job that is not running, one that is not the
# cluster's, an unknown fault, a node not the job's.
# test: uses mtc-dirs (its test hosts bind-mount their own dirs on this machine's
# /var/lib/mtc, /etc/mtc and /run/mtc: deb_package's purge removing them unmounts those)
# test: uses master-ports (its jobs choose a MASTER_PORT: not beside run_ports)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
. "$(dirname "$0")/hosts_setup.inc"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR
PY=/usr/bin/python3 # where Debian's torch is; a python3 earlier on PATH may have none
PROG=$ROOT/tests/integration/ddp_train.py

t_extra_cleanup() { hosts_cleanup; } # every cluster deleted, then the test hosts
check "2 test hosts up (a login and a compute host)" testhosts_up 2
run_or_stop $?
PORT=$(free_port)
# the monitor every second: a hang is acted on within hang_timeout_s + 1 s;
# TCP on the hosts' bridge: their agents report there, and tokens are used there
check "mtcd up (monitor every 1 s, TCP on the test hosts' bridge)" \
    start_mtcd --monitor-ms 1000 --listen "$TESTHOSTS_CTL_ADDR:$PORT"
out=$(mtc cluster create -f "$ROOT/examples/local-2node.json" --id ch 2>&1)
check "local 2-node cluster up" grep -q "RUNNING" <<<"$out"
run_or_stop $?
eval "$(mtc env ch)"
H=("" "${TESTHOSTS_ADDRS[@]}")
hosts_cpu_spec "chaos on a test host" 2 >"$D/hspec.json"
out=$(mtc cluster create -f "$D/hspec.json" --id hc 2>&1)
check "and a cluster on the test hosts (one compute host)" grep -q "done: cluster hc RUNNING" <<<"$out"
cd "$D" || exit 1
JOBS=$CLUSTERS/ch/trainingJobs

# events TYPE TEXT: "NODE DESCRIPTION" of cluster $EC's (ch) events of TYPE holding TEXT
EC=ch
events() { mtc cluster events "$EC" --json | python3 -c '
import json, sys
for e in json.load(sys.stdin) or []:
    if e.get("eventType") == sys.argv[1] and sys.argv[2] in e.get("description", ""):
        print(e.get("nodeName", "-"), e["description"])' "$1" "$2"; }
# job ID: the trainingJob resource (JSON)
job() { api GET "$JOBS/$1" && echo "$BODY"; }
# one_line RC OUT TEXT: a non-zero exit RC, and OUT is one line holding TEXT
one_line() { [ "$1" -ne 0 ] && [ "$(wc -l <<<"$2")" = 1 ] && grep -qF -- "$3" <<<"$2"; }
# submit ID STEPS NODES [RECIPE-EXTRA-JSON]: a custom DDP job through the API;
# it holds at step 6 while the file $HOLD exists (when HOLD is set)
submit() {
    api POST "$JOBS?trainingJobId=$1" "$(HOLD=${HOLD:-} python3 - "$PY" "$PROG" "$D" "$1" "$2" "$3" "${4:-}" <<'PY'
import json, os, sys
py, prog, d, name, steps, nodes, extra = sys.argv[1:]
cmd = [py, prog, "--steps", steps, "--sleep", "0.3"]
if os.environ["HOLD"]:
    cmd += ["--hold-file", os.environ["HOLD"], "--hold-at", "6"]
recipe = {"task": "custom", "launch": {"command": cmd, "workdir": d}}
recipe.update(json.loads(extra or "{}"))
print(json.dumps({"recipe": recipe, "nodeCount": int(nodes), "experimentName": name}))
PY
)"
    [ "$HTTP_STATUS" = 200 ] || { echo "# $BODY"; return 1; }
}
result() { # result EXPERIMENT EXPR: a field of the run's result.json (python on r)
    local dir
    dir=$(job "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["taskDir"])')
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$dir/result.json" "$2"
}

# --- bad flags: one line each, nothing injected ----------------------------------
out=$(mtc chaos ch --job x --fault disk --every 20s --count 3 2>&1); rc=$?
check "--fault disk: one line naming the faults, exit $rc" one_line $rc "$out" 'unknown fault (one of node, hang, kill-rank, slurmd)'
out=$(mtc chaos ch --job x --fault node --every 20 s 2>&1); rc=$?
check "--every 20 s (a stray word): one line, exit $rc" one_line $rc "$out" 'usage: mtc chaos CLUSTER'
out=$(mtc chaos ch --job x --fault node --every 5x 2>&1); rc=$?
check "--every 5x: one line, not a duration, exit $rc" one_line $rc "$out" '--every "5x": not a duration'
out=$(mtc chaos ch --fault node --every 20s 2>&1); rc=$?
check "no --job: one line, exit $rc" one_line $rc "$out" '--job JOB is required'
out=$(mtc chaos ch --job nosuch --fault node --every 0 2>&1); rc=$?
check "a job the cluster does not have: one line, exit $rc" one_line $rc "$out" 'cluster ch has no trainingJob "nosuch"'

# --- node: 3 faults, 20 s apart, into a 2-rank DDP job ---------------------------------
# 170 steps of 0.3 s, held at step 160 (after its checkpoint) until the third
# fault is in: still running at the third fault however slow the machine
touch "$D/hold-node"
mtc run --command "$PY $PROG --steps 170 --sleep 0.3 --ckpt-every 5 --hold-file $D/hold-node --hold-at 160" \
    -n 2 --experiment-name cnode >"$D/run.out" 2>&1
check "a 2-rank DDP job submitted with mtc run --command" grep -q "^- Status: " "$D/run.out"
run_or_stop $? "$D/run.out"
NJOB=$(api GET "$JOBS" && python3 -c 'import json,sys; print([j["id"] for j in json.loads(sys.argv[1])["trainingJobs"] if j.get("experimentName") == "cnode"][0])' "$BODY")
running() { job "$1" | grep -q '"state": *"RUNNING"'; }
check "  it runs (trainingJob $NJOB)" wait_for 60 running "$NJOB"

EDITOR=$(mtc token create --name chaos-editor --role editor | head -1)
out=$(MTC_URL=http://$TESTHOSTS_CTL_ADDR:$PORT MTC_TOKEN=$EDITOR mtc chaos ch --job cnode --fault node --every 0 2>&1); rc=$?
check "an editor's token: mtc chaos refused in one line (it needs admin), exit $rc" one_line $rc "$out" "may not do this; it needs admin"
diag "$out"
code=$(curl -s -o "$D/403.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $EDITOR" \
    -H 'Content-Type: application/json' --data-binary '{"fault": "hang"}' "http://$TESTHOSTS_CTL_ADDR:$PORT$JOBS/$NJOB:injectFault")
check "  and :injectFault: 403 PERMISSION_DENIED" bash -c '[ "$0" = 403 ] && grep -q PERMISSION_DENIED "$1"' "$code" "$D/403.json"
check_absent "  nothing injected" . -- events CHAOS_FAULT cnode

# the faults start once the job has its first checkpoint (step 5): each
# requeue resumes from one however slow the start (a fault before it would
# restart the job from step 0)
NTD=$(job "$NJOB" | python3 -c 'import json,sys; print(json.load(sys.stdin)["taskDir"])')
check "  it checkpointed step 5" wait_for 200 test -e "$NTD/checkpoints/step_5.pt"
t0=$SECONDS
mtc chaos ch --job cnode --fault node --every 20s --count 3 --seed 7 --timeout 15m >"$D/node.out" 2>&1 &
CHAOS=$!
track_pid $CHAOS
wait_for 600 grep -q '^\[+[0-9]*s\] fault 3/3:' "$D/node.out"
rm -f "$D/hold-node"
wait $CHAOS
rc=$?
diag "mtc chaos --fault node: exit $rc in $((SECONDS - t0)) s"
sed 's/^/# /' "$D/node.out"
check "mtc chaos --fault node --every 20s --count 3: exit 0" test $rc = 0
check "  three faults, one line each" test "$(grep -c '^\[+[0-9]*s\] fault [1-3]/3: node on ch-a3m-[01]: reported faulty' "$D/node.out")" = 3
check "  the job COMPLETED after 3 of 3 faults" grep -q "): COMPLETED after 3 of 3 node fault(s), seed 7" "$D/node.out"
check "  seed 7 picked ch-a3m-1, ch-a3m-0, ch-a3m-0 (test_chaos pins the same picks)" \
    test "$(sed -n 's/^\[+[0-9]*s\] fault [1-3]\/3: node on \(ch-a3m-[01]\):.*/\1/p' "$D/node.out" | tr '\n' ' ')" = "ch-a3m-1 ch-a3m-0 ch-a3m-0 "
check "  each fault a CHAOS_FAULT event naming it, the job and the node" \
    test "$(events CHAOS_FAULT "(node, seed 7) into trainingJob $NJOB (experiment cnode" | grep -c 'reported faulty: remediation op-')" = 3
events CHAOS_FAULT cnode | sed 's/^/# /'
check "  each fault requeued the running job (restartCount >= 3)" \
    python3 -c 'import json,sys; j = json.loads(sys.argv[1]); assert j["restartCount"] >= 3, j["restartCount"]' "$(job "$NJOB")"
check "  JOB_REQUEUED events for it" test "$(events JOB_REQUEUED "job $(job "$NJOB" | python3 -c 'import json,sys; print(json.load(sys.stdin)["slurmJobId"])') requeued" | wc -l)" -ge 3
check "  it resumed from a checkpoint (result.json: start >= 5, MTC_RESTART_COUNT >= 1)" \
    test "$(result "$NJOB" 'r["start"] >= 5 and int(r["env"]["MTC_RESTART_COUNT"]) >= 1')" = True
check "  the summary: restarts, steps repeated and lost, goodput" \
    bash -c 'grep -qE "^  restarts: [0-9]+ \(Slurm requeued it [3-9] times\)" "$0" &&
             grep -qE "^  step 170; steps repeated [0-9]+, steps lost [0-9]+" "$0" &&
             grep -qE "^  goodput [0-9.]+% \(productive [0-9.]+ s of [0-9.]+ s\)" "$0"' "$D/node.out"
check "  and every part of progress.breakdown the API has, by name" python3 - "$(job "$NJOB")" "$D/node.out" <<'PY'
import json, re, sys
bd = json.loads(sys.argv[1])["progress"].get("breakdown") or {}
out = open(sys.argv[2]).read()
assert bd, "the job's progress has no breakdown"
for k, v in bd.items():
    assert re.search(r"^    %s +%.1f$" % (re.escape(k), v), out, re.M), (k, v)
print("# breakdown keys:", ", ".join(bd) or "(none in this API yet)")
PY

# --- the API: a finished job, a job not the cluster's, bad bodies --------------------------
api POST "$JOBS/$NJOB:injectFault" '{"fault": "hang"}'
check "a COMPLETED job: 400 FAILED_PRECONDITION, one line" \
    bash -c '[ "$0" = 400 ] && python3 -c "import json,sys; e = json.loads(sys.argv[1])[\"error\"]; assert e[\"status\"] == \"FAILED_PRECONDITION\" and \"is COMPLETED\" in e[\"message\"] and \"\n\" not in e[\"message\"], e" "$1"' "$HTTP_STATUS" "$BODY"
api POST "$JOBS/$NJOB:injectFault" '{"fault": "hang", "validateOnly": true}'
check "validateOnly: nothing injected, and a hang into a job without hang_timeout_s is a warning" \
    bash -c '[ "$0" = 200 ] && grep -q "sets no monitor.hang_timeout_s: a hung rank is not acted on" <<<"$1"' "$HTTP_STATUS" "$BODY"
api POST "$JOBS/$NJOB:injectFault" '{"fault": "kill-rank", "validateOnly": true}'
check "  a killed rank into a job without retry_on_error too" grep -q "sets no retry_on_error: a killed rank fails the job" <<<"$BODY"
api POST "$JOBS/$NJOB:injectFault" '{"fault": "slurmd", "validateOnly": true}'
check "  a killed slurmd is none: every job survives it" bash -c '[ "$0" = 200 ] && ! grep -q warning <<<"$1"' "$HTTP_STATUS" "$BODY"
api POST "$JOBS/job-nosuch:injectFault" '{"fault": "hang"}'
check "a job the cluster does not have: 404" test "$HTTP_STATUS" = 404
api POST "$JOBS/$NJOB:injectFault" '{"fault": "disk"}'
check "an unknown fault: 400 naming fault" bash -c '[ "$0" = 400 ] && grep -q "fault" <<<"$1"' "$HTTP_STATUS" "$BODY"

# --- kill-rank, hang and slurmd side by side; slurmd and kill-rank on hosts ----------------
# each fault once the job has its first checkpoint (step 5): it resumes from
# there. Each job holds at step 6 (its own file $D/hold.JOB) from its
# checkpoint until its faults are in, so none can end before its fault
# however slow the machine; its faults start as soon as it is held (a job
# held long would be a hang to chang's monitor).
for j in ckill chang cslurmd hjob; do touch "$D/hold.$j"; done
HOLD=$D/hold.ckill check "a job with retry_on_error 1 submitted" submit ckill 40 1 '{"retry_on_error": 1}'
# hang_timeout_s 60: more than torch's start on a loaded machine (a start is
# no progress: at 15 a slow restart was a second hang); the SIGSTOPped rank
# is named by its node's watcher after 5 s, whatever the timeout
HOLD=$D/hold.chang check "a job with monitor.hang_timeout_s 60 submitted" submit chang 40 1 '{"monitor": {"hang_timeout_s": 60}}'
HOLD=$D/hold.cslurmd check "a third job submitted" submit cslurmd 40 1
JOBS=$CLUSTERS/hc/trainingJobs
HOLD=$D/hold.hjob check "on hosts, a job with retry_on_error 1 submitted" submit hjob 40 1 '{"retry_on_error": 1}'
JOBS=$CLUSTERS/ch/trainingJobs
checkpointed() { # checkpointed CLUSTER JOB...: each has its step-5 checkpoint
    local c=$1 j td
    shift
    for j in "$@"; do
        api GET "$CLUSTERS/$c/trainingJobs/$j" || return 1
        td=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["taskDir"])' "$BODY") &&
            [ -e "$td/checkpoints/step_5.pt" ] || return 1
    done
}
# a node given to a running job (cslurmd, held at step 6)
check "cslurmd checkpointed step 5 (held at 6)" wait_for 600 checkpointed ch cslurmd
api POST "$JOBS/cslurmd:injectFault" '{"fault": "hang", "node": "../x"}'
check "a running job, a node that is no name: 400 naming the node" \
    bash -c '[ "$0" = 400 ] && grep -q "node" <<<"$1"' "$HTTP_STATUS" "$BODY"
SJ=$(job cslurmd | python3 -c 'import json,sys; print(json.load(sys.stdin)["slurmJobId"])')
OTHER=ch-a3m-0
[ "$(squeue -h -j "$SJ" -o %N)" = ch-a3m-0 ] && OTHER=ch-a3m-1
api POST "$JOBS/cslurmd:injectFault" "{\"fault\": \"hang\", \"node\": \"$OTHER\"}"
check "a running job, a node of the cluster not the job's ($OTHER): 400 naming it" \
    bash -c '[ "$0" = 400 ] && grep -q "$2 is not a node of trainingJob" <<<"$1"' "$HTTP_STATUS" "$BODY" "$OTHER"
check_absent "  nothing injected into it" . -- events CHAOS_FAULT "into trainingJob cslurmd"
declare -A CPID=()
chaos() { # chaos CLUSTER JOB FAULT EVERY OUT: mtc chaos in the background (its pid: CPID[OUT])
    mtc chaos "$1" --job "$2" --fault "$3" --every "$4" --count 1 --timeout 10m >"$D/$5.out" 2>&1 &
    CPID[$5]=$!
    track_pid $!
}
# the chaos runs of each job, by job: "CLUSTER JOB FAULT EVERY OUT" each
declare -A FAULTS=([ckill]="ch ckill kill-rank 1s kill-rank" [chang]="ch chang hang 1s hang"
    [cslurmd]="ch cslurmd slurmd 1s slurmd" [hjob]="hc hjob slurmd 1s hslurmd;hc hjob kill-rank 3s hkill")
declare -A STARTED=() RELEASED=()
# start_ready: each job's chaos runs start once it has checkpointed step 5;
# true once all have started
start_ready() {
    local j f
    for j in "${!FAULTS[@]}"; do
        [ -n "${STARTED[$j]:-}" ] && continue
        checkpointed "$(cut -d' ' -f1 <<<"${FAULTS[$j]}")" "$j" || continue
        IFS=';' read -ra fs <<<"${FAULTS[$j]}"
        for f in "${fs[@]}"; do chaos $f; done
        STARTED[$j]=1
    done
    [ ${#STARTED[@]} = ${#FAULTS[@]} ]
}
# release_faulted: a job goes on once each of its faults is in (its chaos
# says so on a line); true once all are released
release_faulted() {
    local j f out
    for j in "${!FAULTS[@]}"; do
        [ -n "${RELEASED[$j]:-}" ] && continue
        IFS=';' read -ra fs <<<"${FAULTS[$j]}"
        for f in "${fs[@]}"; do
            out=${f##* }
            grep -q '^\[+[0-9]*s\] fault 1/1:' "$D/$out.out" 2>/dev/null || continue 2
        done
        rm -f "$D/hold.$j"
        RELEASED[$j]=1
    done
    [ ${#RELEASED[@]} = ${#FAULTS[@]} ]
}
t0=$SECONDS
check "each job's faults started once it checkpointed step 5 (held at 6)" wait_for 600 start_ready
check "every fault injected while its job was held running" wait_for 600 release_faulted
RCS=()
for f in kill-rank hang slurmd hslurmd hkill; do wait "${CPID[$f]}"; RCS+=($?); done
read -r rk rh rs rhs rhk <<<"${RCS[*]}"
diag "kill-rank, hang, slurmd; on hosts slurmd, kill-rank: exit ${RCS[*]}; all done in $((SECONDS - t0)) s"
for f in kill-rank hang slurmd hslurmd hkill; do sed "s/^/# $f: /" "$D/$f.out"; done

check "the jobs set up for their faults get no note" bash -c '! grep -q "^note:" "$0" "$1"' "$D/kill-rank.out" "$D/hang.out"
check "kill-rank: exit 0, COMPLETED after 1 of 1" \
    bash -c '[ "$0" = 0 ] && grep -q "): COMPLETED after 1 of 1 kill-rank fault" "$1"' $rk "$D/kill-rank.out"
check "  one rank SIGKILLed (its pid in the line and the event)" \
    test -n "$(events CHAOS_FAULT "into trainingJob ckill" | grep -E 'rank 0 \(pid [0-9]+, one of the node.s 1 task\(s\)\) killed \(SIGKILL\)')"
check "  its script requeued it (retry_on_error), it resumed and completed" \
    bash -c 'grep -q "Slurm requeued it [1-9] times" "$0"' "$D/kill-rank.out"
check "  resumed from a checkpoint, MTC_RESTART_COUNT 1" test "$(result ckill 'r["start"] >= 5, r["env"]["MTC_RESTART_COUNT"]')" = "(True, '1')"

check "hang: exit 0, COMPLETED after 1 of 1" \
    bash -c '[ "$0" = 0 ] && grep -q "): COMPLETED after 1 of 1 hang fault" "$1"' $rh "$D/hang.out"
check "  one rank SIGSTOPped (the event)" test -n "$(events CHAOS_FAULT "into trainingJob chang" | grep 'stopped (SIGSTOP)')"
check "  the monitor saw the hang and requeued it (TRAINING_HANG)" \
    test -n "$(events TRAINING_HANG "(experiment chang): hung" | grep 'requeued (restart 1')"
check "  resumed from a checkpoint, MTC_RESTART_COUNT 1" test "$(result chang 'r["start"] >= 5, r["env"]["MTC_RESTART_COUNT"]')" = "(True, '1')"

# slurmd_restarted CLUSTER JOB [nodrain]: a SLURMD_RESTART of the node the
# job's CHAOS_FAULT (slurmd) names, at or after it; nodrain: instead, no
# VM_SLURM_DRAIN of that node since (the events read: a dead mtcd fails it)
slurmd_restarted() {
    local ev
    ev=$(mtc cluster events "$1" --json) || return 1
    python3 - "$2" "${3:-}" "$ev" <<'PY'
import json, sys
job, mode, ev = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
f = [e for e in ev if e["eventType"] == "CHAOS_FAULT" and "into trainingJob " + job + " " in e["description"]
     and "killed -9" in e["description"]][0]
after = [e for e in ev if e.get("nodeName") == f["nodeName"] and e["eventTime"] >= f["eventTime"]]
if mode == "nodrain":
    assert not [e for e in after if e["eventType"] == "VM_SLURM_DRAIN"], after
else:
    assert any(e["eventType"] == "SLURMD_RESTART" for e in after), after
PY
}
check "slurmd: exit 0, COMPLETED after 1 of 1" \
    bash -c '[ "$0" = 0 ] && grep -q "): COMPLETED after 1 of 1 slurmd fault" "$1"' $rs "$D/slurmd.out"
check "  its node's slurmd killed -9 (the event names the node and the pid)" \
    test -n "$(events CHAOS_FAULT "into trainingJob cslurmd" | grep -E '^ch-a3m-[01] .*slurmd \(pid [0-9]+\) killed -9')"
check "  supervision restarted it (SLURMD_RESTART)" slurmd_restarted ch cslurmd
check "  and the job ran on without a restart" bash -c 'grep -q "Slurm requeued it 0 times" "$0"' "$D/slurmd.out"
check "  the node was not drained for it (the supervisor's to fix)" slurmd_restarted ch cslurmd nodrain

EC=hc JOBS=$CLUSTERS/hc/trainingJobs
check "hosts: both chaos runs end with the job COMPLETED (exit $rhs, $rhk)" \
    bash -c '[ "$0" = 0 ] && [ "$1" = 0 ] && grep -q "): COMPLETED after 1 of 1 kill-rank" "$2"' $rhs $rhk "$D/hkill.out"
check "  its host's slurmd killed -9 by mtc-host" \
    test -n "$(events CHAOS_FAULT "into trainingJob hjob" | grep -E '^hc-cpu-0 .*slurmd \(pid [0-9]+\) killed -9')"
check "  and restarted by supervision (SLURMD_RESTART on ${H[2]})" slurmd_restarted hc hjob
check "  not drained for it: the supervisor's to fix, not a remediation's" slurmd_restarted hc hjob nodrain
check "  its rank killed there, found by its environment" \
    test -n "$(events CHAOS_FAULT "into trainingJob hjob" | grep -E 'rank 0 \(pid [0-9]+, one of the node.s 1 task\(s\)\) killed \(SIGKILL\)')"
check "  requeued by its script, resumed from a checkpoint: MTC_RESTART_COUNT 1" \
    test "$(result hjob 'r["start"] >= 5, r["env"]["MTC_RESTART_COUNT"]')" = "(True, '1')"

done_testing
