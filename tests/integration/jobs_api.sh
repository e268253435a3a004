#!/usr/bin/env bash
# jobs_api: training jobs through the HTTP API (curl) — a job created with a
# recipe object is in squeue and `mtc experiment list` and completes; :cancel
# ends a running one (CANCELLED); a requeued (and held) one is REQUEUED with
# its restart count; list pages (pageSize/pageToken) and filters
# by state; bad bodies get one-line google.rpc errors and submit nothing; a
# secret reaches the job but is stored nowhere; roles (viewer, editor, and
# admin-only while mtcd runs as root); `mtc run` is a client of the same API
# and says so in one line when mtcd is not running. The job monitor, with no
# client reading: a SIGSTOPped trainer raises TRAINING_STALL, jobs that end
# are COMPLETED in the store, and each pass asks Slurm once for the cluster's
# jobs, not once per job.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# Slurm's clients as mtcd runs them: each call mtcd itself makes is logged
# (what the job monitor asks Slurm is counted below)
mkdir -p "$D/wrap" && touch "$D/slurm-calls.log"
for c in scontrol squeue; do
    cat >"$D/wrap/$c" <<EOF
#!/bin/sh
[ "\$PPID" = "\$(cat '$MTC_HOME/mtcd.pid' 2>/dev/null)" ] && echo "$c \$*" >>'$D/slurm-calls.log'
exec '$(command -v $c)' "\$@"
EOF
    chmod +x "$D/wrap/$c"
done
start_mtcd() { # run_cluster's, on loopback TCP too (tokens and roles)
    PATH=$D/wrap:$PATH mtcd --home "$MTC_HOME" --daemon --supervise-ms 500 --listen 127.0.0.1:$PORT ||
        return 1
    MTCD_PID=$(cat "$MTC_HOME/mtcd.pid")
    track_pid "$MTCD_PID"
}
check "local 2-node cluster up" run_cluster ja
check "tiny corpus tokenized" run_corpus "$D/data"
JOBS=$CLUSTERS/ja/trainingJobs

# The request body: the test's recipe as an object, $1 steps, plus $2 (JSON members).
body() {
    run_recipe "$D/r.json" "$1" 5
    python3 - "$D/r.json" "$2" <<'PY'
import json, sys
extra = json.loads("{" + sys.argv[2] + "}")
print(json.dumps(dict({"recipe": json.load(open(sys.argv[1]))}, **extra)))
PY
}
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read())$1)"; }
job_state() { api GET "$JOBS/$1"; field '["state"]' <<<"$BODY"; }
wait_state() { # $1 job, $2 state, $3 seconds
    local end=$((SECONDS + $3)) st=""
    while [ $SECONDS -lt $end ]; do
        st=$(job_state "$1")
        [ "$st" = "$2" ] && return 0
        sleep 1
    done
    echo "# $1: $st" >&2
    return 1
}

# --- a job that completes ---------------------------------------------------
api POST "$JOBS?trainingJobId=first" "$(body 60 "\"dataDir\":\"$D/data\",\"experiment_name\":\"apijob\",\"nodeCount\":1,\"secretEnv\":{\"HF_TOKEN\":\"hf_api_secret_456\"}")"
check "create: 200" test "$HTTP_STATUS" = 200
echo "$BODY" >"$D/first.json"
JOB=$(field '["slurmJobId"]' <"$D/first.json")
TD=$(field '["taskDir"]' <"$D/first.json")
check "the resource names the job, its Slurm id and its experiment" python3 - "$D/first.json" <<PY
import json, sys
j = json.load(open(sys.argv[1]))
assert j["name"] == "projects/local/locations/local/modelDevelopmentClusters/ja/trainingJobs/first", j
assert j["slurmJobId"].isdigit() and j["experimentName"] == "apijob" and j["nodeCount"] == 1, j
assert j["experimentDir"].startswith("$MTC_HOME/experiments/apijob/apijob_"), j
assert j["state"] in ("PENDING", "RUNNING") and j["restartCount"] == 0 and j["createTime"], j
assert j["model"] == "projects/local/locations/local/models/apijob", j
PY
check "visible in squeue" bash -c "squeue -h -o %i | grep -qx '$JOB'"
mtc experiment list >"$D/list.out"
check "visible in mtc experiment list" grep -qE "^apijob_[0-9]+ .* slurm +$JOB " "$D/list.out"
check "completes (state COMPLETED)" wait_state first COMPLETED 240
api GET /v1beta1/projects/local/locations/local/models/apijob
check "the completed job registered its final checkpoint: apijob@1, lineage with cluster and job" python3 -c "
import json, sys; d = json.loads(sys.argv[1]); l = d['lineage']
assert d['versionId'] == '1' and l['cluster'] == 'ja' and l['slurmJobId'] == '$JOB' and l['step'] == 60, d" "$BODY"
api GET "$CLUSTERS/ja"
check "the cluster's events say so (MODEL_REGISTERED)" grep -q 'MODEL_REGISTERED' <<<"$BODY"
check "the secret reached the job" grep -q "HF_TOKEN is set" "$TD/$JOB.log"
check "the secret is stored nowhere (store, experiment, mtcd's log)" \
    bash -c "! grep -rqa hf_api_secret_456 '$MTC_HOME/mtcd.db'* '$MTC_HOME/experiments' '$MTC_HOME/log'"
api POST "$JOBS?trainingJobId=first" "$(body 10 "\"dataDir\":\"$D/data\"")"
check "the same id again: 409" test "$HTTP_STATUS" = 409

# two runs of one experiment in the same second: each its own run directory
TWIN=$(body 5 "\"dataDir\":\"$D/data\",\"experimentName\":\"twin\"")
api POST "$JOBS?trainingJobId=twin-a" "$TWIN"; A=$BODY
api POST "$JOBS?trainingJobId=twin-b" "$TWIN"; B2=$BODY
check "same experiment, same second: two runs, two directories" python3 - "$A" "$B2" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert a["experimentDir"] != b["experimentDir"] and a["slurmJobId"] != b["slurmJobId"], (a, b)
PY
check "both twins complete" bash -c "
    for i in \$(seq 120); do
        n=\$(curl -s --unix-socket '$MTC_HOME/mtcd.sock' 'http://localhost$JOBS?filter=state%3DCOMPLETED' | grep -o '\"id\": *\"twin-[ab]\"' | wc -l)
        [ \"\$n\" = 2 ] && exit 0; sleep 1
    done; exit 1"

# --- bad bodies: one line each, nothing submitted ---------------------------
NJOBS=$(squeue -h | wc -l)
NEXP=$(ls "$MTC_HOME/experiments" | wc -l)
api POST "$JOBS" '{"recipe":"pretrain/no_such_recipe"}'
check "unknown recipe: 400, named" one_line_error 400 'unknown recipe "pretrain/no_such_recipe"'
api POST "$JOBS" "$(body 10 "\"dataDir\":\"$D/data\",\"nodeCount\":0")"
check "nodeCount 0: 400" one_line_error 400 "nodeCount"
api POST "$JOBS" "$(body 10 "\"dataDir\":\"$D/data\",\"nodeCount\":5")"
check "more nodes than the partition: 400" one_line_error 400 "nodeCount: 5: partition a3m has 2 nodes"
api POST "$JOBS" "$(body 10 "\"dataDir\":\"$D/data\",\"partition\":\"a3m; id\"")"
check "bad partition name: 400" one_line_error 400 "partition: a3m; id: not a partition name"
api POST "$JOBS" "$(body 10 "\"dataDir\":\"$D/data\",\"partition\":\"general\"")"
check "unknown partition: 400 with Slurm's word and the partitions" \
    one_line_error 400 "invalid partition specified: general; partitions: a3m (2 nodes, default)"
api POST "$JOBS" "$(body 10 "\"dataDir\":\"$D/data\",\"colour\":\"red\"")"
check "unknown field: 400, named" one_line_error 400 "colour: unknown field"
api POST "$JOBS" "$(body 10 "\"dataDir\":\"$D/data\",\"experimentName\":\"../etc\"")"
check "bad experiment name: 400" one_line_error 400 "experimentName: ../etc"
api POST "$JOBS" "$(body 10 "\"dataDir\":\"$D/data\",\"trainer\":\"/bin/sh\"")"
check "the trainer is mtcd's to choose: 400" one_line_error 400 "trainer: set by the server"
api POST "$JOBS" "$(body 10 "\"dataDir\":\"$D/nodata\"")"
check "missing data: 400, the path named" one_line_error 400 "data.path: $D/nodata/tiny does not exist"
api POST "$JOBS" "$(body 10 "\"dataDir\":\"$D/data\",\"overrides\":{\"train\":{\"lr\":\"fast\"}}")"
check "a bad override: 400" one_line_error 400 "overrides: train.lr"
api POST "$JOBS" '{"recipe":"pretrain/tiny_gpt2_pt","executor":"local"}'
check "executor local: 400" one_line_error 400 "executor: local"
# a FIFO as the image: refused at once, never opened for a read that waits
# for a writer (a request thread of mtcd's held; issue 26)
mkfifo "$D/image.fifo"
t0=$SECONDS
api POST "$JOBS" "$(body 10 "\"dataDir\":\"$D/data\",\"containerImage\":\"$D/image.fifo\"")"
el=$((SECONDS - t0))
fifo_refused() { [ "$el" -lt 5 ] && one_line_error 400 'image.fifo: not a squashfs image'; }
check "a FIFO as containerImage: 400 at once ($el s), not a squashfs image" fifo_refused
check "nothing was submitted" test "$(squeue -h | wc -l)" = "$NJOBS"
check "no experiment left behind" test "$(ls "$MTC_HOME/experiments" | wc -l)" = "$NEXP"

# --- roles (TCP with tokens) and cancel --------------------------------------
VIEWER=$(mtc token create --name ja-viewer --role viewer | head -1)
EDITOR=$(mtc token create --name ja-editor --role editor | head -1)
LONG=$(body 3000 "\"dataDir\":\"$D/data\",\"experimentName\":\"longjob\",\"overrides\":{\"train\":{\"log_every\":50}}")
tcp "$VIEWER" POST "$JOBS?trainingJobId=long" "$LONG"
check "viewer may not create: 403" test "$HTTP_STATUS" = 403
tcp "$VIEWER" GET "$JOBS/first"
check "viewer may read a job" test "$HTTP_STATUS" = 200
tcp "$EDITOR" POST "$JOBS?trainingJobId=long" "$LONG"
if [ "$(id -u)" = 0 ]; then
    check "mtcd runs as root: an editor may not create (403, one line)" \
        one_line_error 403 "only an admin may create one"
    api POST "$JOBS?trainingJobId=long" "$LONG" # the socket's owner is admin
fi
check "created (editor, or admin when mtcd is root)" test "$HTTP_STATUS" = 200
check "the override reached the config" python3 - "$(field '["taskDir"]' <<<"$BODY")/config.json" <<'PY'
import json, sys
assert json.load(open(sys.argv[1]))["train"]["log_every"] == 50
PY
check "long job running" wait_state long RUNNING 60
LJOB=$(api GET "$JOBS/long"; field '["slurmJobId"]' <<<"$BODY")
# the job monitor: with no client reading the job (only the cluster's events
# are read), a hung trainer raises TRAINING_STALL within the stall window plus
# a monitor pass (5 s)
trainer_pids() { # the mtc-train processes of Slurm job $1
    local p
    for p in /proc/[0-9]*; do
        case "$(readlink "$p/exe" 2>/dev/null)" in */mtc-train) ;; *) continue ;; esac
        tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "SLURM_JOB_ID=$1" && echo "${p#/proc/}"
    done
}
stalls() { mtc cluster events ja --json | python3 -c '
import json, sys
for e in json.load(sys.stdin) or []:
    if e.get("eventType") == "TRAINING_STALL" and e.get("description", "").startswith("trainingJob long "):
        print(e["description"])'; }
# the event for the step the stopped trainer is frozen at: on a loaded machine
# a pause of the job may have raised it (and this one alert) already
last_step() { python3 -c 'import json, sys; print(max([json.loads(l).get("step", 0) for l in open(sys.argv[1]) if l.endswith("\n")] or [0]))' "$LTD/logs/metrics.jsonl"; }
stalled() { stalls | grep -q "after step $STEP ("; }
LTD=$(api GET "$JOBS/long"; field '["taskDir"]' <<<"$BODY")
rows() { [ "$(wc -l <"$LTD/logs/metrics.jsonl" 2>/dev/null || echo 0)" -ge 3 ]; }
check "the long job logs its steps" wait_for 60 rows
TP=$(trainer_pids "$LJOB")
check "the long job's trainer found (pid $TP)" test -n "$TP"
STALLS=$(stalls | wc -l)
diag "stall events before: $STALLS"
t0=$SECONDS
kill -STOP $TP
STEP=$(last_step)
check "trainer SIGSTOPped at step $STEP, no client reading the job: a TRAINING_STALL event after that step" wait_for 60 stalled
diag "TRAINING_STALL stored $((SECONDS - t0)) s after the SIGSTOP: $(stalls | tail -1)"
kill -CONT $TP
# requeued and held: mtcd releases a requeued job from Slurm's requeue hold
# at once (it would run again within moments), not from a user's hold
scontrol requeuehold "$LJOB"
requeued() {
    api GET "$JOBS/long"
    [ "$(field '["state"]' <<<"$BODY") $(field '["restartCount"]' <<<"$BODY")" = "REQUEUED 1" ]
}
check "scontrol requeuehold: state REQUEUED, restartCount 1" wait_for 30 requeued
tcp "$VIEWER" POST "$JOBS/long:cancel"
check "viewer may not cancel: 403" test "$HTTP_STATUS" = 403
api POST "$JOBS/long:cancel"
check "cancel: 200" test "$HTTP_STATUS" = 200
check "cancelled (state CANCELLED)" wait_state long CANCELLED 30
check "gone from squeue" wait_for 120 absent "^$LJOB\$" -- squeue -h -o %i
api POST "$JOBS/long:cancel"
check "cancel a finished job: FAILED_PRECONDITION" one_line_error 400 "already CANCELLED" FAILED_PRECONDITION
api GET "$JOBS/nope"
check "unknown job: 404" test "$HTTP_STATUS" = 404

# --- mtc run is a client of the same API ------------------------------------
run_recipe "$D/c.json" 10 5
mtc run -s "$D/c.json" --data-dir "$D/data" --experiment-name clijob >"$D/cli.out" 2>&1
check "mtc run: submitted, the status block" grep -q "^- Status: " "$D/cli.out"
api GET "$JOBS?pageSize=100"
check "mtc run: its job is a trainingJob" grep -qE '"experimentName": *"clijob"' <<<"$BODY"
check "mtc run's job completes" wait_for 120 bash -c "mtc experiment status clijob | grep -q 'Status: COMPLETED'"

# --- list: pages and the state filter -----------------------------------------
api GET "$JOBS?pageSize=1"
check "page 1: the first job" test "$(field '["trainingJobs"][0]["id"]' <<<"$BODY")" = first
TOKEN=$(field '.get("nextPageToken", "")' <<<"$BODY")
check "page 1: a token for the next" test -n "$TOKEN"
api GET "$JOBS?pageSize=1&pageToken=$TOKEN"
check "page 2: the next job" test "$(field '["trainingJobs"][0]["id"]' <<<"$BODY")" = twin-a
api GET "$JOBS?pageSize=10&pageToken=$TOKEN"
check "the last page has no token" test "$(field '.get("nextPageToken", "none")' <<<"$BODY")" = none
api GET "$JOBS?filter=state%3DCANCELLED"
check "filter state=CANCELLED: the cancelled job only" \
    test "$(field '["trainingJobs"]' <<<"$BODY" | grep -o "'id': '[a-z-]*'")" = "'id': 'long'"
api GET "$JOBS?filter=state%3DCOMPLETED"
check "filter state=COMPLETED: the four that completed" test "$(field '["trainingJobs"].__len__()' <<<"$BODY")" = 4
api GET "$JOBS?filter=state%3DBOGUS"
check "a bad filter: 400" one_line_error 400 "want state=STATE"
api GET "$JOBS?pageToken=xyz"
check "a bad page token: 400" test "$HTTP_STATUS" = 400

# --- jobs no client reads: the monitor stores their end, asking Slurm once a
# pass for the cluster's jobs, never job by job ---------------------------------
api POST "$JOBS?trainingJobId=quiet" "$(body 20 "\"dataDir\":\"$D/data\",\"experimentName\":\"quietjob\",\"nodeCount\":1")"
QJOB=$(field '["slurmJobId"]' <<<"$BODY")
api POST "$JOBS?trainingJobId=quiet2" "$(body 20 "\"dataDir\":\"$D/data\",\"experimentName\":\"quietjob2\",\"nodeCount\":1")"
QJOB2=$(field '["slurmJobId"]' <<<"$BODY")
CALLS0=$(wc -l <"$D/slurm-calls.log")
check "two jobs nobody reads: submitted" test -n "$QJOB" -a -n "$QJOB2"
check "  they leave squeue" wait_for 300 absent "^($QJOB|$QJOB2)\$" -- squeue -h -o %i
stored_state() { python3 -c '
import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
print(db.execute("SELECT state FROM training_jobs WHERE id = ?", (sys.argv[2],)).fetchone()[0])' "$MTC_HOME/mtcd.db" "$1"; }
check "  and are COMPLETED in the store within a monitor pass, unread" \
    wait_for 15 eval '[ "$(stored_state quiet) $(stored_state quiet2)" = "COMPLETED COMPLETED" ]'
tail -n +$((CALLS0 + 1)) "$D/slurm-calls.log" >"$D/quiet-calls.log"
ALL=$(grep -cx "scontrol show job -o" "$D/quiet-calls.log")
ONE=$(grep -cE "^scontrol show job -o [0-9]|^squeue .*--jobs=" "$D/quiet-calls.log")
diag "mtcd's Slurm calls while they ran: $ALL for all the cluster's jobs, $ONE for one job; $(sort "$D/quiet-calls.log" | uniq -c | sort -rn | head -5 | tr '\n' ';')"
check "  the monitor asked Slurm for the cluster's jobs once a pass ($ALL passes), never one job at a time ($ONE)" \
    test "$ALL" -ge 1 -a "$ONE" -eq 0

# --- mtcd not running: one line from mtc run ---------------------------------
out=$(MTC_HOME=$D/elsewhere mtc run -s "$D/c.json" --data-dir "$D/data" 2>&1); rc=$?
check "mtcd not running: non-zero, one line" bash -c "[ $rc != 0 ] && [ \$(wc -l <<<'$out') = 1 ]"
diag "$out"
done_testing
