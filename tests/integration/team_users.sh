#!/usr/bin/env bash
# team_users: training jobs run as Unix users, never as root (issue 31,
# point 2). With mtcd as root, a token bound to a Unix user (mtc token create
# --user) creates jobs that run as that user: Slurm's job is the user's, its
# experiment directory is the user's own under <experiment root>/users/NAME,
# and mtcd reads what the job wrote as that user (a symlink the user plants
# in the run directory shows nothing root-only). An unbound editor token is
# refused, a bound token cannot pick another user or root, an admin may name
# any user but root; tokens for root or for no such user are refused.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR

needs_root team_users "it creates Unix users and runs mtcd as root"
# two users of our own (removed on exit), and directories they can search
U1=mtcu$$a U2=mtcu$$b
t_extra_cleanup() { drop_users; }
# U1 made here; U2 made by mtcd from the spec's users (with a free uid and gid)
new_user "$U1"
check "a Unix user made" test ${#USERS[@]} = 1
USERS+=("$U2")
ID2=$(python3 -c 'import pwd, grp
u = {p.pw_uid for p in pwd.getpwall()}; g = {x.gr_gid for x in grp.getgrall()}
print(next(i for i in range(23000, 60000) if i not in u and i not in g))')
UG1=$(id -u "$U1"):$(id -g "$U1")
python3 - "$ROOT/examples/local-2node.json" "$D/spec.json" "$U1" "$UG1" "$U2" "$ID2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
u1, g1 = sys.argv[4].split(":")
s["users"] = [{"name": sys.argv[3], "uid": int(u1), "gid": int(g1)},
              {"name": sys.argv[5], "uid": int(sys.argv[6]), "gid": int(sys.argv[6])}]
# accounting on: a user's job runs under one of that user's accounts
s["orchestratorSpec"]["slurmSpec"]["accounting"] = {"enabled": True, "accountingStorageEnforce": "associations"}
json.dump(s, open(sys.argv[2], "w"))
PY
chmod 0755 "$D"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_mtcd() { # run_cluster's, on loopback TCP too (tokens)
    mtcd --home "$MTC_HOME" --daemon --supervise-ms 500 --listen 127.0.0.1:$PORT || return 1
    MTCD_PID=$(cat "$MTC_HOME/mtcd.pid")
    track_pid "$MTCD_PID"
}
run_cluster() { # the spec lists the users
    start_mtcd || return 1
    mtc cluster create -f "$D/spec.json" --id "$1" >"$T_DIR/create.out" 2>&1 ||
        { cat "$T_DIR/create.out"; return 1; }
    eval "$(mtc env "$1")"
}
check "local 2-node cluster up, its spec listing $U1 (as it is) and $U2 (new)" run_cluster tu
t_extra_cleanup() { delete_all_clusters; drop_users; } # run_cluster set its own
[ $T_LAST -eq 0 ] || done_testing
check "tiny corpus tokenized" run_corpus "$D/data"
JOBS=$CLUSTERS/tu/trainingJobs
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read())$1)"; }
body() { # $1 steps, $2 more members
    run_recipe "$D/r.json" "$1" 5
    python3 - "$D/r.json" "$2" <<'PY'
import json, sys
extra = json.loads("{" + sys.argv[2] + "}")
print(json.dumps(dict({"recipe": json.load(open(sys.argv[1]))}, **extra)))
PY
}

check "mtcd made $U2 with the spec's uid and gid (its group too)" \
    test "$(id -u "$U2"):$(id -g "$U2"):$(getent group "$ID2" | cut -d: -f1)" = "$ID2:$ID2:$U2"
check "  and left $U1 as it was" test "$(id -u "$U1"):$(id -g "$U1")" = "$UG1"
# a spec whose user exists with other ids, or gives a held uid (nobody's) to a new
# name: the update fails in one line, nothing is made, the cluster runs on
python3 - "$D/spec.json" "$D/bad1.json" "$D/bad2.json" "$D/bad3.json" "$U1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
a = json.loads(json.dumps(s)); a["users"][0]["uid"] += 7
json.dump(a, open(sys.argv[2], "w"))
b = json.loads(json.dumps(s)); b["users"].append({"name": "mtcdup" + sys.argv[5][-6:], "uid": 65534, "gid": 65534})
json.dump(b, open(sys.argv[3], "w"))
c = json.loads(json.dumps(s)); c["users"].append(dict(s["users"][1]))
json.dump(c, open(sys.argv[4], "w"))
PY
out=$(mtc cluster update tu -f "$D/bad1.json" 2>&1)
check "update with $U1 under another uid: refused, naming the user and both ids" \
    grep -q "user $U1 is uid:gid $UG1 here, the spec says" <<<"$out"
diag "$out"
out=$(mtc cluster update tu -f "$D/bad2.json" 2>&1)
held() { grep -q "uid 65534 is nobody's here, the spec gives it to mtcdup${U1: -6}" <<<"$out" && ! getent passwd "mtcdup${U1: -6}" >/dev/null; }
check "update giving nobody's uid to a new name: refused, nothing made" held
check "  the cluster is RUNNING still" bash -c "mtc cluster list | grep -qE '^tu +RUNNING'"
out=$(mtc cluster update tu -f "$D/bad3.json" 2>&1)
check "a user listed twice: 400 naming the field" grep -q "users\[2\]: user \"$U2\" is listed twice" <<<"$out"

# each user in an account of their own (Slurm refuses a user with none)
check "accounts ta and tb, $U1 in ta and $U2 in tb" bash -c "mtc accounts create tu ta && mtc accounts create tu tb && mtc users add tu --account ta $U1 && mtc users add tu --account tb $U2"

# --- tokens bound to users ------------------------------------------------------
T1=$(mtc token create --name tu-one --role editor --user "$U1" | head -1)
T0=$(mtc token create --name tu-plain --role editor | head -1)
check "a token bound to $U1" test -n "$T1"
check "mtc token list shows its user" bash -c "mtc token list | grep -E '^tok-[0-9a-f]+ +tu-one +editor +$U1 '"
one_line() { [ "$(printf '%s\n' "$1" | wc -l)" = 1 ] && grep -q -- "$2" <<<"$1"; }
out=$(mtc token create --name tu-root --role editor --user root 2>&1)
check "a token bound to root: refused in one line" one_line "$out" "uid 0"
out=$(mtc token create --name tu-none --role editor --user nosuchuser$$ 2>&1)
check "a token for no such user: refused, naming it" one_line "$out" "user nosuchuser$$: no such user"

tcp "$T0" POST "$CLUSTERS?modelDevelopmentClusterId=tu2" "$(cat "$D/spec.json")"
check "an editor's cluster listing users (mtc makes them as root): 403" test "$HTTP_STATUS" = 403
diag "$BODY"
J=$(body 40 "\"dataDir\":\"$D/data\",\"experimentName\":\"teamrun\",\"nodeCount\":1")
tcp "$T0" POST "$JOBS?trainingJobId=plain" "$J"
check "an unbound editor token: 403 (mtcd is root), pointing to --user" one_line_error 403 "mtc token create --user"
tcp "$T1" POST "$JOBS?trainingJobId=other" "${J%\}},\"user\":\"$U2\"}"
check "a bound token naming another user: 403" one_line_error 403 "this token's jobs run as $U1"
tcp "$T1" POST "$JOBS?trainingJobId=asroot" "${J%\}},\"user\":\"root\"}"
check "a bound token naming root: 403" one_line_error 403 "this token's jobs run as $U1"
tcp "$T0" POST "$JOBS?trainingJobId=chosen" "${J%\}},\"user\":\"$U2\"}"
check "an editor choosing a user: 403" one_line_error 403 "only an admin may choose"
api POST "$JOBS?trainingJobId=adminroot" "${J%\}},\"user\":\"root\"}"
check "an admin naming root: 400 (an admin's job without a user runs as root)" one_line_error 400 "uid 0"
tcp "$T1" POST "$JOBS?trainingJobId=theirs" "${J%\}},\"account\":\"tb\"}"
check "the bound token naming an account $U1 is not in: 400, one line" one_line_error 400 "account tb: user $U1 is not in it"
check_absent "nothing was submitted by the refused requests" . -- squeue -h

# --- a job as the token's user ----------------------------------------------------
tcp "$T1" POST "$JOBS?trainingJobId=mine" "$J"
check "the bound token's job: 200" test "$HTTP_STATUS" = 200
echo "$BODY" >"$D/mine.json"
SJ=$(field '["slurmJobId"]' <"$D/mine.json")
TD=$(field '["taskDir"]' <"$D/mine.json")
diag "job $SJ in $TD"
check "the trainingJob says whom it runs as" test "$(field '["user"]' <"$D/mine.json")" = "$U1"
# slurmctld says it while the job is queued or runs; sacct once slurmdbd has it
charged() {
    [ "$(squeue -h -j "$SJ" -o '%u|%a' 2>/dev/null)" = "$U1|ta" ] ||
        [ "$(sacct -n -X -P -j "$SJ" -o user,account 2>/dev/null | head -1)" = "$U1|ta" ]
}
check "Slurm's job belongs to $U1, under $U1's account ta" wait_for 30 charged
check "its run directory is under $MTC_HOME/users/$U1 and is $U1's" \
    bash -c "case '$TD' in '$MTC_HOME/users/$U1/'*) [ \"\$(stat -c %U '$TD')\" = $U1 ] ;; *) false ;; esac"
check "  the user's directory: $U1's, 0700, no one else's to enter" \
    bash -c "[ \"\$(stat -c '%U %a' '$MTC_HOME/users/$U1')\" = '$U1 700' ]"
state() { tcp "$T1" GET "$JOBS/$1"; field '["state"]' <<<"$BODY"; }
done_() { [ "$(state mine)" = COMPLETED ]; }
check "the job completes" wait_for 120 done_
diag "$(state mine)"
check "  its trainer ran as $U1: the checkpoint files are $U1's" \
    bash -c "ls -n '$TD/checkpoints' >/dev/null && [ -z \"\$(find '$TD' -not -user $U1 -print -quit)\" ]"
# the user (who owns the run directory) plants symlinks to a root-only file
# in place of the job's log and metrics: mtcd reads them as the user, so
# nothing of that file shows
printf '{"step": 999999, "loss": 1.5, "note": "root-only-secret-%s"}\n' $$ >"$D/secret"
chmod 0600 "$D/secret"
check "the user replaces the job's log and metrics with symlinks to a root-only file" \
    runuser -u "$U1" -- bash -c "ln -sfn '$D/secret' '$TD/$SJ.log' && ln -sfn '$D/secret' '$TD/logs/metrics.jsonl'"
tcp "$T1" GET "$JOBS/mine:metrics"
check "  :metrics answers, and neither its log tail nor its points hold that file" \
    bash -c "[ '$HTTP_STATUS' = 200 ] && ! grep -q root-only-secret <<<'$BODY'"

# a program of the user's own (a custom task): what it runs as, said by itself
C=$(python3 -c 'import json; print(json.dumps({"recipe": {"task": "custom", "launch": {"command": ["sh", "-c", "echo whoami=$(id -un) uid=$(id -u)"]}}, "nodeCount": 1, "experimentName": "whoami"}))')
tcp "$T1" POST "$JOBS?trainingJobId=who" "$C"
check "a custom task with the bound token: 200" test "$HTTP_STATUS" = 200
WTD=$(field '["taskDir"]' <<<"$BODY") WSJ=$(field '["slurmJobId"]' <<<"$BODY")
said() { grep -q "^whoami=$U1 uid=${UG1%%:*}$" "$WTD/$WSJ.log" 2>/dev/null; }
check "  its program says it runs as $U1 (id -un in the job)" wait_for 90 said

# --- an admin names the user ------------------------------------------------------------
J2=$(body 400 "\"dataDir\":\"$D/data\",\"experimentName\":\"teamrun2\",\"nodeCount\":1,\"user\":\"$U2\"")
api POST "$JOBS?trainingJobId=forb" "$J2"
check "an admin's job for $U2: 200" test "$HTTP_STATUS" = 200
SJ2=$(field '["slurmJobId"]' <<<"$BODY")
check "  Slurm's job belongs to $U2" bash -c "[ \"\$(squeue -h -j $SJ2 -o %u 2>/dev/null || sacct -n -X -j $SJ2 -o user)\" = $U2 ]"
api POST "$JOBS/forb:cancel"
done_testing
