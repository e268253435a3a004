#!/usr/bin/env bash
# security_jobs: jobs of other users (issue 47, findings 7-9). With mtcd as
# root and two Unix users of one primary group, A and B, each with tokens
# bound to them: A's viewer and editor tokens (and an unbound editor's) are
# refused B's :metrics (its log tail and points) and :cancel with a 403
# naming the job, while B's own tokens and an admin succeed; A's list shows
# B's job without its progress; B's directory under users/ is 0700 (also
# one an older mtcd made 0750); a containerImage A cannot read gets one
# answer whether it is missing, root-only, a FIFO or no image; A's scrape of
# /metrics has no series of B's run, and A sees B's TRAINING_FAILED event
# without the log line it quotes; a log B
# replaces with a symlink to /proc/self/maps gives an empty tail, nothing of
# mtcd's memory; a FIFO where mtcd opens a user's file for a request (the
# log, an init checkpoint's meta.json, an image) is an answer at once.
. "$(dirname "$0")/lib.sh"
D=$T_DIR

needs_root security_jobs "it creates Unix users and runs mtcd as root"
UA=mtcs$$a UB=mtcs$$b
t_extra_cleanup() { drop_users; }
new_user "$UA" && new_user "$UB"
check "two Unix users of one primary group" test "$(id -g "$UA")" = "$(id -g "$UB")"
[ ${#USERS[@]} = 2 ] || done_testing
chmod 0755 "$D"
# the state an older mtcd left: B's directory 0750, group-readable
mkdir -m 0755 "$MTC_HOME/users" && mkdir -m 0750 "$MTC_HOME/users/$UB" &&
    chown "$UB:nogroup" "$MTC_HOME/users/$UB"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
up() {
    start_mtcd --listen 127.0.0.1:$PORT || return 1
    t_extra_cleanup() { delete_all_clusters; drop_users; }
    mtc cluster create -f "$ROOT/examples/local-2node.json" --id sj >"$D/create.out" 2>&1 ||
        { cat "$D/create.out"; return 1; }
    eval "$(mtc env sj)"
}
check "mtcd as root, a local 2-node cluster up" up || done_testing
JOBS=$CLUSTERS/sj/trainingJobs
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read())$1)"; }
token() { mtc token create --name "$1" --role "$2" ${3:+--user "$3"} | head -1; }
AV=$(token a-view viewer "$UA") AE=$(token a-edit editor "$UA")
BV=$(token b-view viewer "$UB") BE=$(token b-edit editor "$UB") E0=$(token plain editor)
check "viewer and editor tokens bound to $UA and to $UB, an unbound editor token" \
    bash -c "[ -n '$AV' ] && [ -n '$AE' ] && [ -n '$BV' ] && [ -n '$BE' ] && [ -n '$E0' ]"

# --- B's job, running until cancelled ------------------------------------------
# it prints a line that is not in its request, then waits to be cancelled
C=$(python3 -c 'import json; print(json.dumps({"recipe": {"task": "custom", "launch": {"command": ["sh", "-c", "echo tail-$((6 * 7))-$(id -un); exec sleep 3600"]}}, "nodeCount": 1, "experimentName": "bobs"}))')
tcp "$BE" POST "$JOBS?trainingJobId=bjob" "$C"
check "$UB's job: 200" test "$HTTP_STATUS" = 200 || done_testing
TD=$(field '["taskDir"]' <<<"$BODY") SJ=$(field '["slurmJobId"]' <<<"$BODY")
MARK="tail-42-$UB"
check "  its log says $MARK" wait_for 90 grep -q "^$MARK$" "$TD/$SJ.log"
check "users/$UB is 0700 (made 0750 by an older mtcd): $UB's only" \
    bash -c "[ \"\$(stat -c '%U %a' '$MTC_HOME/users/$UB')\" = '$UB 700' ]"
check "  $UA (of $UB's primary group) cannot list it" \
    bash -c "! runuser -u '$UA' -- ls '$MTC_HOME/users/$UB' >/dev/null 2>&1 && runuser -u '$UB' -- ls '$MTC_HOME/users/$UB' >/dev/null"

# --- its log and metrics ------------------------------------------------------------
refused() { # the last call: 403 PERMISSION_DENIED naming the job, its user and what ($1)
    one_line_error 403 "trainingJob bjob runs as $UB: only a token bound to $UB or an admin may $1" \
        PERMISSION_DENIED
}
tcp "$AV" GET "$JOBS/bjob:metrics"
check "$UA's viewer token: $UB's :metrics (log tail, metrics) 403 naming the job" \
    refused "read its log"
diag "$BODY"
tcp "$AE" GET "$JOBS/bjob:metrics"
check "$UA's editor token: $UB's :metrics 403" refused "read its log"
tcp "$E0" GET "$JOBS/bjob:metrics"
check "an unbound editor token: $UB's :metrics 403 (a user's job is that user's)" \
    refused "read its log"
shows_mark() { # the last call: 200, its log tail saying MARK
    [ "$HTTP_STATUS" = 200 ] &&
        python3 -c 'import json,sys; assert sys.argv[2] in json.loads(sys.argv[1])["logTail"]' "$BODY" "$MARK"
}
tcp "$BV" GET "$JOBS/bjob:metrics"
check "$UB's viewer token: its :metrics, the log tail saying $MARK" shows_mark
api GET "$JOBS/bjob:metrics"
check "an admin: $UB's :metrics, the log tail saying $MARK" shows_mark

# --- lists and gets ---------------------------------------------------------------------
item() { # the list's bjob item, from BODY: has progress? whose?
    python3 -c 'import json,sys
j = [x for x in json.loads(sys.argv[1])["trainingJobs"] if x["id"] == "bjob"][0]
print(j.get("user"), "progress" in j)' "$BODY"
}
tcp "$AV" GET "$JOBS"
check "$UA's list shows $UB's job, without its progress" test "$(item)" = "$UB False"
tcp "$BV" GET "$JOBS"
check "$UB's list shows it with its progress" test "$(item)" = "$UB True"
tcp "$AV" GET "$JOBS/bjob"
no_progress() { [ "$HTTP_STATUS" = 200 ] && python3 -c 'import json,sys; assert "progress" not in json.loads(sys.argv[1])' "$BODY"; }
check "$UA's get of $UB's job: 200, without its progress" no_progress

# --- what events and /metrics say of a run: its owner's ---------------------------------
series() { grep -c "training_job=\"bjob\"" <<<"$BODY"; }
tcp "$BV" GET /metrics
check "$UB's scrape of /metrics: bjob's series (its step, loss, goodput)" \
    bash -c "[ '$HTTP_STATUS' = 200 ] && [ $(series) -gt 0 ]"
tcp "$AV" GET /metrics
check "$UA's scrape: none of bjob's" bash -c "[ '$HTTP_STATUS' = 200 ] && [ $(series) = 0 ]"
tcp "$E0" GET /metrics
check "an unbound token's scrape: none of bjob's" bash -c "[ '$HTTP_STATUS' = 200 ] && [ $(series) = 0 ]"
# B's job that fails: TRAINING_FAILED quotes its log's last line
F=$(python3 -c 'import json; print(json.dumps({"recipe": {"task": "custom", "launch": {"command": ["sh", "-c", "echo fail-$((6 * 7))-secret; exit 3"]}}, "nodeCount": 1, "experimentName": "bobfails"}))')
tcp "$BE" POST "$JOBS?trainingJobId=bfail" "$F"
check "$UB's job that fails: 200" test "$HTTP_STATUS" = 200
failed_said() { api GET "$CLUSTERS/sj" && grep -q 'fail-42-secret' <<<"$BODY"; }
check "  its TRAINING_FAILED event quotes its last line to an admin" wait_for 90 failed_said
tcp "$BV" GET "$CLUSTERS/sj"
check "  to $UB's token too" grep -q "fail-42-secret" <<<"$BODY"
tcp "$AV" GET "$CLUSTERS/sj"
check "  $UA's token sees the event without its line" \
    bash -c "grep -q 'trainingJob bfail (experiment bobfails) FAILED' <<<\"\$0\" && ! grep -q 'fail-42-secret' <<<\"\$0\"" "$BODY"
tcp "$E0" GET "$CLUSTERS/sj"
check "  an unbound token's too" bash -c "[ '$HTTP_STATUS' = 200 ] && ! grep -q 'fail-42-secret' <<<\"\$0\"" "$BODY"

# --- a log that is mtcd's memory map ---------------------------------------------
check "$UB replaces the job's log with a symlink to /proc/self/maps" \
    runuser -u "$UB" -- ln -sfn /proc/self/maps "$TD/$SJ.log"
empty_tail() {
    [ "$HTTP_STATUS" = 200 ] && python3 -c 'import json,sys
t = json.loads(sys.argv[1])["logTail"]
assert t == "" and "r-xp" not in sys.argv[1] and "[heap]" not in sys.argv[1], t[:200]' "$BODY"
}
tcp "$BV" GET "$JOBS/bjob:metrics"
check "  $UB's :metrics: 200, an empty log tail, no memory map" empty_tail
diag "${BODY:0:300}"
api GET "$JOBS/bjob:metrics"
check "  an admin's :metrics: the same" empty_tail

# --- FIFOs where mtcd opens a user's file for a request: an answer, never a wait --------
# tcp with a deadline: a request thread waiting on a FIFO for a writer never answers
tcp_m() {
    local out
    out=$(curl -s -m 60 -X "$2" -w '\n%{http_code}' -H "Authorization: Bearer $1" \
        -H 'Content-Type: application/json' ${4:+--data-binary "$4"} "http://127.0.0.1:$PORT$3")
    HTTP_STATUS=${out##*$'\n'}
    BODY=${out%$'\n'*}
}
check "$UB replaces the job's log with a FIFO" \
    runuser -u "$UB" -- bash -c "rm -f '$TD/$SJ.log' && mkfifo '$TD/$SJ.log'"
tcp_m "$BV" GET "$JOBS/bjob:metrics"
check "  $UB's :metrics: 200 at once, an empty log tail" empty_tail
tcp_m "$BV" GET "$JOBS"
check "  $UB's list (its progress read from the run): 200 at once" test "$HTTP_STATUS" = 200
runuser -u "$UB" -- bash -c "rm -f '$TD/$SJ.log' && : >'$TD/$SJ.log'" # the job's end writes there
install -d -o "$UA" -m 0755 "$D/ackpt"
runuser -u "$UA" -- mkfifo "$D/ackpt/meta.json"
tcp_m "$AE" POST "$JOBS?trainingJobId=afifo" \
    "{\"recipe\":\"pretrain/tiny_gpt2_pt\",\"nodeCount\":1,\"fromCheckpoint\":\"$D/ackpt\"}"
check "$UA's job from a checkpoint whose meta.json is a FIFO: 400 at once, naming it" \
    one_line_error 400 "checkpoint.init: $D/ackpt/meta.json: not a regular file"
diag "${BODY:0:300}"

# --- :cancel ------------------------------------------------------------------------------
tcp "$AV" POST "$JOBS/bjob:cancel"
check "$UA's viewer token: $UB's :cancel 403" test "$HTTP_STATUS" = 403
tcp "$AE" POST "$JOBS/bjob:cancel"
check "$UA's editor token: $UB's :cancel 403 naming the job" refused "cancel it"
tcp "$E0" POST "$JOBS/bjob:cancel"
check "an unbound editor token: $UB's :cancel 403" refused "cancel it"
running() { [ "$(squeue -h -j "$SJ" -o %T 2>/dev/null)" = RUNNING ]; }
check "  the job still runs (Slurm says RUNNING)" running
tcp "$BE" POST "$JOBS/bjob:cancel"
check "$UB's editor token: its :cancel 200" test "$HTTP_STATUS" = 200
diag "${BODY:0:200}"
check "  the job leaves the queue" wait_for 60 absent "^$SJ\$" -- squeue -h -o %i

# --- containerImage: one answer for what the user cannot read ------------------------
mkdir -m 0700 "$D/rootonly" && mkdir -m 0755 "$D/pub" "$D/sqsrc" && echo x >"$D/sqsrc/f"
mksquashfs "$D/sqsrc" "$D/rootonly/real.sqsh" -quiet -noappend >/dev/null &&
    mksquashfs "$D/sqsrc" "$D/pub/root.sqsh" -quiet -noappend >/dev/null && chmod 0600 "$D/pub/root.sqsh" &&
    echo "no image" >"$D/rootonly/text.sqsh" && echo "no image" >"$D/pub/text.sqsh" &&
    chmod 0644 "$D/rootonly/real.sqsh" "$D/rootonly/text.sqsh" "$D/pub/text.sqsh"
check "images: a real one and a text file in a root-only directory, a root-only real one, a text file $UA may read" \
    test -s "$D/rootonly/real.sqsh" -a -s "$D/pub/root.sqsh"
answer() { # the error for a job of A's naming image $1, the image's path as IMAGE
    local b
    b=$(python3 -c 'import json,sys; c = json.loads(sys.argv[1]); c["containerImage"] = sys.argv[2]; print(json.dumps(c))' "$C" "$1")
    tcp_m "$AE" POST "$JOBS?trainingJobId=aimg" "$b" # a FIFO image: an answer, not a wait
    [ "$HTTP_STATUS" = 400 ] || { echo "HTTP $HTTP_STATUS"; return; }
    python3 -c 'import json,sys; print(json.loads(sys.argv[1])["error"]["message"].replace(sys.argv[2], "IMAGE"))' "$BODY" "$1"
}
mkfifo -m 0666 "$D/pub/fifo.sqsh"
M1=$(answer "$D/rootonly/none.sqsh") M2=$(answer "$D/rootonly/real.sqsh")
M3=$(answer "$D/rootonly/text.sqsh") M4=$(answer "$D/pub/root.sqsh")
M6=$(answer "$D/pub/fifo.sqsh")
diag "$M1 | $M2 | $M3 | $M4 | $M6"
check "a missing image, a real one in a root-only directory, a text file there, a root-only image, a FIFO: one answer" \
    bash -c "[ '$M1' = 'containerImage: cannot read IMAGE as user $UA' ] && [ '$M1' = '$M2' ] && [ '$M1' = '$M3' ] && [ '$M1' = '$M4' ] && [ '$M1' = '$M6' ]"
M5=$(answer "$D/pub/text.sqsh")
check "a text file $UA may read: told it is no squashfs image" \
    grep -q "^containerImage: IMAGE: not a squashfs image" <<<"$M5"
check_absent "the refused requests submitted nothing" . -- squeue -h
done_testing
