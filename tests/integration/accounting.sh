#!/usr/bin/env bash
# accounting: a local cluster with orchestratorSpec.slurmSpec.accounting
# enabled (issue 31, point 1) — a private MariaDB (Debian's mariadb-server)
# under the cluster's directory and slurmdbd on the controller, started
# before slurmctld: the cluster registered in the database, sacct lists the
# jobs that ended with their accounts, sreport and sacctmgr answer through
# `mtc env`; slurmdbd.conf is 0600; kill -9 of slurmdbd and of mariadbd →
# restarted by the supervisor (events), and after recovery sacct lists every
# job, those that started and ended while slurmdbd was away too; delete stops
# both and removes the instance; an external database's credentials file
# that others may read is refused in one line.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR

check "mtcd up" start_mtcd
t_extra_cleanup() { delete_all_clusters; }
python3 - "$ROOT/examples/local-2node.json" "$D/spec.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["orchestratorSpec"]["slurmSpec"]["accounting"] = {"enabled": True, "accountingStorageEnforce": "associations,limits"}
json.dump(s, open(sys.argv[2], "w"))
PY
check "a cluster with accounting: created" mtc cluster create -f "$D/spec.json" --id ac
[ $T_LAST -eq 0 ] || { done_testing; }
eval "$(mtc env ac)"
CD=$MTC_HOME/clusters/ac
check "slurm.conf: accounting through slurmdbd, jobs' usage gathered" \
    bash -c "grep -q '^AccountingStorageType=accounting_storage/slurmdbd$' '$CD/slurm.conf' && grep -q '^JobAcctGatherType=jobacct_gather/linux$' '$CD/slurm.conf' && grep -q '^AccountingStorageEnforce=associations,limits$' '$CD/slurm.conf'"
check "slurmdbd.conf holds the password: mode 0600" test "$(stat -c %a "$CD/slurmdbd.conf")" = 600
MDB=$(cat "$CD/run/mariadbd.pid" 2>/dev/null)
DBD=$(cat "$CD/run/slurmdbd.pid" 2>/dev/null)
check "mariadbd (pid $MDB) runs on the cluster's own datadir" \
    bash -c "tr '\\0' ' ' </proc/$MDB/cmdline | grep -q -- '--datadir=$CD/db/data'"
check "slurmdbd (pid $DBD) runs" kill -0 "$DBD"
check "the cluster is registered in the database (sacctmgr show cluster)" \
    bash -c "sacctmgr -n show cluster format=cluster | grep -qw ac"
check "the root account and user exist (sacctmgr show assoc)" \
    bash -c "sacctmgr -n -P show assoc format=cluster,account,user | grep -q '^ac|root|root$'"

# --- jobs are recorded ----------------------------------------------------------
J1=$(sbatch --parsable -N 1 --wrap 'sleep 1; echo one')
J2=$(sbatch --parsable -N 2 --wrap 'srun hostname')
ended() { absent "^($J1|$J2)\$" -- squeue -h -o %i; }
check "two jobs run and end" wait_for 60 ended
listed() { sacct -n -X -P -j "$J1,$J2" -o jobid,account,state 2>/dev/null | grep -c '|root|COMPLETED$' | grep -qx 2; }
check "sacct lists both, COMPLETED, with their account" wait_for 60 listed
diag "$(sacct -n -X -P -j "$J1,$J2" -o jobid,account,nnodes,state,elapsed 2>&1 | tr '\n' ' ')"
check "sreport answers for the cluster (its hourly rollup has usage only after an hour)" \
    bash -c "sreport cluster utilization start=now-1hour 2>&1 | grep -q 'Cluster Utilization'"

# --- accounts and users (API and CLI), a node limit that binds ----------------------
check "mtc accounts create: account a, at most 1 node, fair share 10" \
    mtc accounts create ac a --description "team a" --max-nodes 1 --fairshare 10 --max-wall 02:00:00
check "mtc accounts create: account b under a" mtc accounts create ac b --parent a
check "mtc users add: root to a" mtc users add ac --account a root
check "mtc accounts list --json: a's limits, parent and user as sacctmgr has them" python3 -c '
import json, sys
a = {x["name"]: x for x in json.loads(sys.argv[1])["accounts"]}
assert a["a"]["limits"] == {"maxNodes": 1, "maxWall": "02:00:00"} and a["a"]["fairshare"] == 10, a["a"]
assert a["a"]["description"] == "team a" and a["a"]["users"] == ["root"] and a["b"]["parent"] == "a", a' \
    "$(mtc accounts list ac --json)"
check "  and sacctmgr itself: GrpTRES node=1 on a" bash -c "sacctmgr -n -P show assoc where account=a format=account,user,grptres | grep -qx 'a||node=1'"
JW=$(sbatch --parsable -A a -N 2 --wrap 'sleep 1')
JR=$(sbatch --parsable -A a -N 1 --gpus-per-node=8 --wrap 'sleep 2') # on 8 emulated GPUs
limited() { squeue -h -j "$JW" -o %r 2>/dev/null | grep -q 'AssocGrpNodeLimit'; }
check "a 2-node job of account a waits: AssocGrpNodeLimit" wait_for 30 limited
diag "$(squeue -h -j "$JW,$JR" -o '%i %a %T %r' | tr '\n' ' ')"
ran() { sacct -n -X -P -j "$JR" -o account,state 2>/dev/null | grep -qx 'a|COMPLETED'; }
check "its 1-node job runs and sacct has it under account a" wait_for 60 ran

# --- visibility (issue 31, point 4): the queue and usage in /metrics and the console -----
# (a's 2-node job JW still waits on its limit here; a 1-node job of account root runs)
JV=$(sbatch --parsable -N 1 --wrap 'sleep 120')
running() { squeue -h -j "$JV" -o %T 2>/dev/null | grep -qx RUNNING; }
check "visibility: a 1-node job of account root runs beside a's waiting one" wait_for 60 running
# /metrics formats what mtcd's job monitor saw at its last pass (every 5 s;
# usage 10 s after the running jobs changed): wait until it has seen these
seen() {
    api GET /metrics
    M=$BODY
    grep -qx 'mtc_slurm_jobs_running{cluster="ac",account="root"} 1' <<<"$M" &&
        grep -qE '^mtc_account_usage_node_hours\{cluster="ac",account="a"\} [0-9.e+-]*[1-9]' <<<"$M"
}
wait_for 45 seen
check "visibility: /metrics counts a's waiting job under its reason (mtc_slurm_jobs_pending)" \
    grep -qE '^mtc_slurm_jobs_pending\{cluster="ac",account="a",reason="(AssocGrpNodeLimit|QOSGrpNodeLimit)"\} 1$' <<<"$M"
check "visibility: /metrics counts root's running job (mtc_slurm_jobs_running)" \
    grep -qx 'mtc_slurm_jobs_running{cluster="ac",account="root"} 1' <<<"$M"
# a's only job that ran: JR, 1 node x 8 GPUs x its elapsed seconds (sacct,
# once it ended); the monitor's usage figures catch up with the ended job
# (they may first show it running)
JR_S=$(sacct -n -X -P -j "$JR" -o ElapsedRaw)
usage_is() { # usage_is METRIC WANT: /metrics' figure of account a is WANT (within rounding)
    api GET /metrics
    python3 -c '
import re, sys
m = re.search(r"^%s\{cluster=\"ac\",account=\"a\"\} (\S+)$" % sys.argv[2], sys.argv[1], re.M)
want = float(sys.argv[3])
sys.exit(not (m and want > 0 and abs(float(m.group(1)) - want) <= 1e-4 * max(1, want)))' "$BODY" "$1" "$2"
}
check "visibility: /metrics has account a's node-hours (1 node x ${JR_S} s) and GPU-hours (8 GPUs x ${JR_S} s), both > 0" \
    wait_for 60 eval 'usage_is mtc_account_usage_node_hours "$(python3 -c "print(${JR_S:-0} / 3600)")" &&
        usage_is mtc_account_usage_gpu_hours "$(python3 -c "print(8 * ${JR_S:-0} / 3600)")"'
grep -E '^mtc_(slurm_jobs|account_usage)' <<<"$M" | sed 's/^/# /'
api GET "$CLUSTERS/ac/slurmJobs"
check "visibility: the console's Slurm queue (GET …/slurmJobs): a's job PENDING with account, QoS and reason as squeue has them" python3 -c '
import json, sys
q = {j["jobId"]: j for j in json.loads(sys.argv[1])["slurmJobs"]}
w, v = q[sys.argv[2]], q[sys.argv[3]]
assert w["state"] == "PENDING" and w["account"] == "a" and w["user"] == "root" and w["nodeCount"] == 2, w
assert w["qos"] == sys.argv[4] != "" and w["reason"] in ("AssocGrpNodeLimit", "QOSGrpNodeLimit"), w
assert v["state"] == "RUNNING" and v["account"] == "root" and v["nodes"] and v["reason"] == "", v' \
    "$BODY" "$JW" "$JV" "$(squeue -h -j "$JW" -o %q)"
scancel "$JV"
check "visibility: root's job cancelled, its node free again" wait_for 60 absent "^$JV\$" -- squeue -h -o %i
# --- end of visibility ------------------------------------------------------------
out=$(mtc accounts delete ac a 2>&1); rc=$?
check "deleting an account with a waiting job: refused, naming it" \
    bash -c "[ $rc -ne 0 ] && [ \$(wc -l <<<\"\$0\") = 1 ] && grep -q 'account a has jobs running or waiting: $JW' <<<\"\$0\"" "$out"
scancel "$JW"
api PATCH "$CLUSTERS/ac/accounts/a" '{"limits": {"maxNodes": 5}}'
check "a limit above the cluster's 2 nodes: 400, one line" one_line_error 400 'maxNodes: 5 is more than the cluster'
api POST "$CLUSTERS/ac/accounts?accountId=Bad!" '{}'
check "a bad account name: 400" bash -c "[ '$HTTP_STATUS' = 400 ] && grep -q 'a-z' <<<\"\$0\"" "$BODY"
out=$(mtc accounts create ac a 2>&1); rc=$?
check "creating an account twice: one line, non-zero" one_line_fail $rc "$out" 'already exists'
check "mtc users remove, then the account deleted" \
    bash -c "mtc users remove ac --account a root && mtc accounts delete ac b && mtc accounts delete ac a"
check_absent "  gone from sacctmgr" '^a$' -- sacctmgr -n -P show account format=account

# --- QoS and preemption: a high job requeues a low one, which resumes ------------
check "mtc qos create: low (priority 10), high (priority 1000, preempts low)" \
    bash -c "mtc qos create ac low --priority 10 && mtc qos create ac high --priority 1000 --preempt low"
check "mtc qos list: high preempts low" bash -c "mtc qos list ac | grep -qx 'high: priority 1000, preempts low'"
check "an account allowed both, root in it" \
    bash -c "mtc accounts create ac team --qos normal,low,high && mtc users add ac --account team root"
out=$(mtc run -s "$D/none.json" -A nosuch -n 1 2>&1); rc=$?
check "mtc run -A with an unknown account: one line before submitting" \
    bash -c "[ $rc -ne 0 ] && grep -q 'account nosuch: no such account in cluster ac' <<<\"\$0\"" "$out"
run_corpus "$D/data"
run_recipe "$D/low.json" 1500 10
(cd "$D" && mtc run -s "$D/low.json" -n 2 -A team -q low --data-dir "$D/data" --experiment-name low >"$D/low.out" 2>&1)
LTD=$(mtc experiment status low --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["taskDir"])')
LJ=$(mtc experiment status low --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobId"])')
steps_at() { [ "$(wc -l 2>/dev/null <"$LTD/logs/metrics.jsonl" || echo 0)" -ge "$1" ]; }
check "a low-QoS mtc-train job on both nodes logs steps past its first checkpoint" wait_for 120 steps_at 11
HJ=$(sbatch --parsable -A team -q high -N 2 --exclusive --gpus-per-node=8 --wrap 'sleep 2')
hi_done() { sacct -n -X -P -j "$HJ" -o state 2>/dev/null | grep -qx COMPLETED; }
check "a high-QoS job on both nodes: it preempts the low one and runs" wait_for 120 hi_done
check "  the low job was requeued (Restarts=1)" bash -c "scontrol show job $LJ -o | grep -qE '(^| )Restarts=1( |$)'"
check "  and completes (mtcd lifts the requeue hold)" test "$(run_wait_final 300 low)" = COMPLETED
check "  resumed from its checkpoint: every step once" python3 - "$LTD/logs/metrics.jsonl" 1500 <<'PY'
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1])]
assert steps == list(range(1, int(sys.argv[2]) + 1)), [s for s in steps if steps.count(s) > 1][:5] or len(steps)
PY
grep -E "^mtc:|resuming|signal" "$LTD/$LJ.log" | sed 's/^/# /'
# --- the preemption as the experiment sees it: who preempted it, an event, goodput ---
# (slurmctld's log names the preemptor: experiment/preempt.c, slurm/preempt.c)
st=$(mtc experiment status low)
check "  mtc experiment status: preempted by the high job (qos high)" \
    grep -q "^- Preempted by $HJ (qos high) at " <<<"$st"
grep -E "^- (Preempt|Time|Goodput)" <<<"$st" | sed 's/^/# /'
check "  its progress: 1 preemption by $HJ (qos high); its gap is restart time; the parts sum to the total" python3 -c '
import json, sys
p = json.loads(sys.argv[1])["progress"]
b = p["breakdown"]
assert p["preemptions"] == 1 and [(x["slurmJobId"], x["qos"]) for x in p["preemptedBy"]] == [(sys.argv[2], "high")], p
assert 0 < p["preemptedSeconds"] <= b["restartSeconds"] + 1e-6, (p["preemptedSeconds"], b)
assert abs(sum(v for k, v in b.items() if k != "totalSeconds") - b["totalSeconds"]) < 1e-6, b' \
    "$(mtc experiment status low --json)" "$HJ"
api GET "$CLUSTERS/ac/trainingJobs"
check "  the trainingJob resource: progress.preemptedBy names it too" python3 -c '
import json, sys
j = [j for j in json.loads(sys.argv[1])["trainingJobs"] if j.get("experimentName") == "low"][0]
assert [(x["slurmJobId"], x["qos"]) for x in j["progress"]["preemptedBy"]] == [(sys.argv[2], "high")], j["progress"]' \
    "$BODY" "$HJ"
# from the store: the cluster resource shows its newest 100 events, which a
# busy CPU's TRAINING_THROUGHPUT_DROPs of this run can fill
preempted_events() {
    python3 - "$MTC_HOME/mtcd.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=10)
for (m,) in db.execute("SELECT message FROM events WHERE cluster_id = 'ac' AND type = 'TRAINING_PREEMPTED'"):
    print(m)
PY
}
check "  one TRAINING_PREEMPTED event" wait_for 30 eval '[ "$(preempted_events | wc -l)" = 1 ]'
preempt_named() { has_line "\(experiment low\): preempted by $HJ \(qos high\) at .* after step [0-9]*; requeued" -- preempted_events; }
check "  naming the job, its preemptor and the QoS" preempt_named
preempted_events | sed 's/^/# /'
# --- end of the preemption's status block ---
check "  sacct: both jobs under account team with their QoS" \
    bash -c "sacct -n -X -P -j $LJ,$HJ -o jobid,account,qos | sort -u | grep -c '|team|' | grep -qx 2"

check "mtc accounts usage: node-hours of account team and user root (both jobs)" python3 -c '
import json, sys
u = {(x["account"], x["user"]): x for x in json.loads(sys.argv[1])["usage"]}
t = u[("team", "root")]
assert t["jobs"] == 2 and t["nodeHours"] > 0 and t["gpuHours"] > 0, t' "$(mtc accounts usage ac --since now-1days --json)"
mtc accounts usage ac | sed 's/^/# /'
out=$(mtc accounts usage ac --since 'x;y' 2>&1); rc=$?
check "  a bad --since: one line naming the bad value" one_line_fail $rc "$out" '--since x;y: a date'

# --- fair share: a pending job of an account that used nothing goes first -------
# Account team has just used both nodes (the low and high jobs); account light
# has used nothing. With the nodes busy (a job of root's), team's job is
# submitted first, then light's; once slurmctld's priority pass
# (PriorityCalcPeriod=1: each minute) has counted the usage, sprio gives
# light's job the larger FAIRSHARE factor, and when the nodes free up,
# light's job starts first. About a minute: the wait for that pass.
check "fair share: account light (root in it), which has used nothing" \
    bash -c "mtc accounts create ac light && mtc users add ac --account light root"
check "  slurm.conf: PriorityCalcPeriod=1" grep -qx 'PriorityCalcPeriod=1' "$CD/slurm.conf"
scancel "$LJ" 2>/dev/null # the low job, if it did not complete above: not in this block's way
FB=$(sbatch --parsable -A root -N 2 --exclusive --wrap 'sleep 600')
FH=$(sbatch --parsable -A team -N 2 --exclusive --wrap 'sleep 1')
FL=$(sbatch --parsable -A light -N 2 --exclusive --wrap 'sleep 1')
fs_of() { sprio -h -j "$1" -o '%F' 2>/dev/null | tr -d ' '; }
light_ahead() { local h l; h=$(fs_of "$FH"); l=$(fs_of "$FL"); [ -n "$h" ] && [ -n "$l" ] && awk -v l="$l" -v h="$h" 'BEGIN { exit !(l > h) }'; }
check "  sprio: light's pending job has the larger FAIRSHARE factor than team's" wait_for 150 light_ahead
sprio -l -j "$FH,$FL" 2>&1 | sed 's/^/# /'
scancel "$FB"
fs_done() { [ "$(sacct -n -X -P -j "$FH,$FL" -o state 2>/dev/null | grep -c '^COMPLETED$')" = 2 ]; }
check "  both run once the nodes are free" wait_for 90 fs_done
first=$(sacct -n -X -P -j "$FH,$FL" -o start,account 2>/dev/null | sort | head -1 | cut -d'|' -f2)
check "  light's job started first (it was submitted second)" test "$first" = light
sacct -n -X -P -j "$FH,$FL" -o jobid,account,submit,start 2>&1 | sed 's/^/# /'
# --- end of the fair-share block ---

# --- kill -9: both restarted, nothing lost ---------------------------------------
kill -9 "$DBD"
J3=$(sbatch --parsable -N 1 --wrap 'echo while slurmdbd was away')
dbd_back() { d=$(cat "$CD/run/slurmdbd.pid" 2>/dev/null); [ -n "$d" ] && [ "$d" != "$DBD" ] && kill -0 "$d" 2>/dev/null; }
check "kill -9 slurmdbd: restarted by the supervisor" wait_for 60 dbd_back
events_of() { mtc cluster events ac --json | python3 -c 'import json,sys; print(sum(e.get("eventType") == sys.argv[1] for e in json.load(sys.stdin) or []))' "$1"; }
check "  a SLURMDBD_RESTART event" wait_for 60 eval '[ "$(events_of SLURMDBD_RESTART)" -ge 1 ]'
kill -9 "$MDB"
J4=$(sbatch --parsable -N 1 --wrap 'echo while the database was away')
mdb_back() { m=$(cat "$CD/run/mariadbd.pid" 2>/dev/null); [ -n "$m" ] && [ "$m" != "$MDB" ] && kill -0 "$m" 2>/dev/null; }
check "kill -9 mariadbd: restarted by the supervisor" wait_for 90 mdb_back
check "  a MARIADB_RESTART event" wait_for 60 eval '[ "$(events_of MARIADB_RESTART)" -ge 1 ]'
all4() { [ "$(sacct -n -X -P -j "$J1,$J2,$J3,$J4" -o jobid,state 2>/dev/null | grep -c '|COMPLETED$')" = 4 ]; }
check "after recovery sacct lists all 4 jobs, those of the outages too" wait_for 120 all4
diag "$(sacct -n -X -P -j "$J1,$J2,$J3,$J4" -o jobid,state 2>&1 | tr '\n' ' ')"

# --- an external database: cluster ax keeps its records in ac's MariaDB -----------
python3 - "$CD/db/acct.json" "$D/cred-ext" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
open(sys.argv[2], "w").write(f"user={a['user']}\npassword={a['password']}\n")
print(a["dbPort"], file=open(sys.argv[2] + ".port", "w"))
PY
chmod 600 "$D/cred-ext"
python3 - "$D/spec.json" "$D/ext-ok.json" "$D/cred-ext" "$(cat "$D/cred-ext.port")" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["orchestratorSpec"]["slurmSpec"]["accounting"] = {"enabled": True, "database": {"host": "127.0.0.1", "port": int(sys.argv[4]), "credentialsFile": sys.argv[3]}}
json.dump(s, open(sys.argv[2], "w"))
PY
check "a cluster on an external database (ac's MariaDB, credentials from a 0600 file): created" \
    mtc cluster create -f "$D/ext-ok.json" --id ax
check "  its slurmdbd registered it there: ac's database knows both clusters" \
    bash -c "sacctmgr -n show cluster format=cluster | grep -qw ax && sacctmgr -n show cluster format=cluster | grep -qw ac"
check "  no database of its own, and the password not in its state (acct.json read, the password known)" \
    bash -c "[ ! -e '$MTC_HOME/clusters/ax/db/data' ] && [ -s '$MTC_HOME/clusters/ax/db/acct.json' ] && pw=\$(sed -n 's/^password=//p' '$D/cred-ext') && [ -n \"\$pw\" ] && ! grep -qF \"\$pw\" '$MTC_HOME/clusters/ax/db/acct.json'"
check "  deleting it leaves the database alone" \
    bash -c "mtc cluster delete ax && sacctmgr -n show cluster format=cluster | grep -qw ac"

# --- delete: both stopped, the instance gone ------------------------------------
MDB=$(cat "$CD/run/mariadbd.pid" 2>/dev/null)
DBD=$(cat "$CD/run/slurmdbd.pid" 2>/dev/null)
check "mariadbd and slurmdbd run under their recorded pids ($MDB, $DBD)" \
    bash -c '[ -n "$0" ] && [ -n "$1" ] && kill -0 "$0" && kill -0 "$1"' "$MDB" "$DBD"
check "delete" mtc cluster delete ac
check "  mariadbd and slurmdbd stopped" bash -c '! kill -0 "$0" 2>/dev/null && ! kill -0 "$1" 2>/dev/null' "$MDB" "$DBD"
check "  the database's directory removed" test ! -e "$CD/db"

# --- an external database: credentials only from a root-only file ----------------
printf 'user=slurm\npassword=x\n' >"$D/cred"
chmod 644 "$D/cred"
python3 - "$D/spec.json" "$D/ext.json" "$D/cred" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["orchestratorSpec"]["slurmSpec"]["accounting"]["database"] = {"host": "127.0.0.1", "port": 3306, "credentialsFile": sys.argv[3]}
json.dump(s, open(sys.argv[2], "w"))
PY
out=$(mtc cluster create -f "$D/ext.json" --id ax 2>&1); rc=$?
check "an external database whose credentials file others may read: refused, one line" \
    eval 'one_line_fail $rc "$out" "credentialsFile" && grep -q "credentialsFile .*must be a root-owned file that no one else may read" <<<"$out"'
diag "$out"
mtc cluster delete ax >/dev/null 2>&1
done_testing
