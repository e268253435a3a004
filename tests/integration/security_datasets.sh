#!/usr/bin/env bash
# security_datasets: a dataset's source and tokenizer are read as the caller
# (issue 47, the datasets' part of findings 1-3). With mtcd as root and two
# Unix users of the test's own: a token bound to A is refused B's 0700
# source and tokenizer ("cannot read PATH as user A"), an unbound editor
# token reads what every user may, a source directory's symbolic link or
# FIFO fails the preparation at once (nothing followed, nothing waited on),
# and a racer running as A swaps her source directory for a link to a
# root-only one (renameat2 RENAME_EXCHANGE) during the preparations: no
# root-only byte reaches mtcd's cache, and what is written there is root's.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/security_race.inc"
D=$T_DIR
TRIES=${T_RACE_TRIES:-60}

needs_root security_datasets "it creates Unix users and runs mtcd as root"
UA=mtcd$$a UB=mtcd$$b
t_extra_cleanup() {
    stop_racer
    drop_users
}
new_user "$UA" && new_user "$UB"
check "two Unix users made" test ${#USERS[@]} = 2
[ ${#USERS[@]} = 2 ] || done_testing
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
check "mtcd starts as root" start_mtcd --listen 127.0.0.1:$PORT || done_testing
chmod 0755 "$D" "$MTC_HOME"
DS=/v1beta1/projects/local/locations/local/datasets
op_error() { jq_ 'd.get("error", {}).get("message", "")' <<<"$OP"; }
TA=$(mtc token create --name d-alice --role editor --user "$UA" | head -1)
TB=$(mtc token create --name d-bob --role editor --user "$UB" | head -1)
TE=$(mtc token create --name d-unbound --role editor | head -1)
DATA=$MTC_HOME/data DA=$MTC_HOME/data/$UA DB=$MTC_HOME/data/$UB
mkdir -p "$DATA" && chmod 0755 "$DATA"
sft() { # sft DIR TEXT: an SFT source directory whose every record says TEXT
    mkdir -p "$1" && for i in 1 2 3 4; do
        printf '{"prompt":"%s %d?","response":"%s"}\n' "$2" "$i" "$2"
    done >"$1/train.jsonl"
}
# root-only: a source directory holding a secret, 0700 root
mkdir -m 0700 "$D/vault"
sft "$D/vault/secret" ROOTSECRET
install -d -o "$UA" -m 0755 "$DA"
install -d -o "$UB" -m 0700 "$DB"
runuser -u "$UA" -- bash -c "$(declare -f sft); sft '$DA/mine' ALICE && sft '$DA/src' ALICE"
runuser -u "$UB" -- bash -c "$(declare -f sft); sft '$DB/ck' BOB"
check "A's and B's sources, B's in his 0700 directory" \
    test -f "$DA/mine/train.jsonl" -a -f "$DB/ck/train.jsonl"

create() { # create TOKEN NAME SOURCE [TOKENIZER]
    tcp "$1" POST "$DS?datasetId=$2" \
        "{\"source\":\"$3\",\"kind\":\"sft\"${4:+,\"tokenizer\":\"$4\"}}"
}
# --- whose files a token reads ------------------------------------------------------
create "$TA" stolen "$DB/ck"
check "A's bound token: B's 0700 source refused, one line naming A" \
    one_line_error 403 "source: cannot read $DB/ck as user $UA" PERMISSION_DENIED
create "$TE" stolen "$DB/ck"
check "an unbound editor token (reads as nobody): B's source refused" \
    one_line_error 403 "source: cannot read $DB/ck as user nobody" PERMISSION_DENIED
runuser -u "$UB" -- bash -c "printf '{}' >'$DB/tok.json'"
create "$TA" stolen "$DA/mine" "$DB/tok.json"
check "A's bound token: B's tokenizer refused" \
    one_line_error 403 "tokenizer: cannot read $DB/tok.json as user $UA" PERMISSION_DENIED
api GET "$DS/stolen"
check "... and no dataset stolen exists" test "$HTTP_STATUS" = 404
create "$TB" bobs "$DB/ck"
check "B's own token prepares his source (an operation)" test "$HTTP_STATUS" = 200
wait_op "$(jq_ 'd.get("name","")' <<<"$BODY")" 120
check "  it succeeds" test -z "$(op_error)"
create "$TA" alices "$DA/mine"
wait_op "$(jq_ 'd.get("name","")' <<<"$BODY")" 120
check "A's token prepares hers" test -z "$(op_error)"
api GET "$DS/alices"
P=$(jq_ 'd["latestVersion"]["path"]' <<<"$BODY")
check "  into mtcd's cache, every file there root's" \
    bash -c "[[ '$P' == '$MTC_HOME/cache/'* ]] && [ \"\$(find '$P' -printf '%u\n' | sort -u)\" = root ]"

# --- what a source directory holds: no link followed, no FIFO waited on ---------------
runuser -u "$UA" -- bash -c "mkdir '$DA/linked' && ln -s '$D/vault/secret/train.jsonl' '$DA/linked/train.jsonl'"
create "$TA" linked "$DA/linked"
check "a source directory whose train.jsonl is a link: accepted at first (the link is a file's name)" \
    test "$HTTP_STATUS" = 200
wait_op "$(jq_ 'd.get("name","")' <<<"$BODY")" 120
diag "$(op_error)"
check "  the preparation fails naming the link" grep -q "train.jsonl: a symbolic link" <<<"$(op_error)"
runuser -u "$UA" -- bash -c "mkdir '$DA/piped' && mkfifo '$DA/piped/train.jsonl'"
create "$TA" piped "$DA/piped"
wait_op "$(jq_ 'd.get("name","")' <<<"$BODY")" 120
check "a source directory whose train.jsonl is a FIFO: the preparation fails at once, naming it" \
    grep -q "train.jsonl: not a directory or a regular file" <<<"$(op_error)"
runuser -u "$UA" -- mkfifo "$DA/fifo.jsonl"
create "$TA" fifo "$DA/fifo.jsonl"
check "a FIFO as the source: 400 at once, no hang" \
    one_line_error 400 "fifo.jsonl: not a directory or a regular file"
api GET "$DS"
check "mtcd still answers" test "$HTTP_STATUS" = 200

# --- a racer swaps A's source directory for a link to a root-only one -------------------
ln -s "$D/vault/secret" "$DA/srclink"
chown -h "$UA" "$DA/srclink"
race "$DA/src" "$DA/srclink"
prepared=0 refused=0 other=0 OPS=()
for i in $(seq 1 $TRIES); do
    create "$TA" "race-$i" "$DA/src"
    case $HTTP_STATUS in
    200) OPS+=("$(jq_ 'd["name"]' <<<"$BODY")") ;;
    400 | 403) refused=$((refused + 1)) ;; # the link, or "changed while it was being opened"
    *) other=$((other + 1)); diag "create $i: $HTTP_STATUS $BODY" ;;
    esac
done
for op in "${OPS[@]}"; do
    if ! wait_op "$op" 120; then
        other=$((other + 1)); diag "operation $op: not done"
    elif [ -n "$(op_error)" ]; then
        refused=$((refused + 1))
    else
        prepared=$((prepared + 1))
    fi
done
stop_racer
diag "creates during the race: $prepared prepared, $refused refused, $other other; racer swaps: $(cat "$DA/swaps" 2>/dev/null)"
check "$TRIES creates raced against the swap, each answered (prepared or refused)" \
    test $((prepared + refused)) = $TRIES
check "the race was real: the racer swapped, some creates met the link" \
    bash -c "[ \"\$(cat '$DA/swaps' 2>/dev/null || echo 0)\" -gt 0 ] && [ $refused -gt 0 ]"
leaked=$(grep -rl ROOTSECRET "$MTC_HOME/cache")
rc=$?
[ -z "$leaked" ] || diag "holding root-only bytes: $leaked"
check "no root-only byte reached the cache (grep exit $rc: 1, nothing found)" test "$rc" = 1
check "what the cache holds is root's" test "$(find "$MTC_HOME/cache" -printf '%u\n' | sort -u)" = root
done_testing
