#!/usr/bin/env bash
# Datasets as named, versioned API objects: `mtc data prepare|list|show|delete`
# and the datasets resource with curl (unix socket and TCP with tokens) —
# versions (preparing twice re-tokenizes nothing, a changed source is version
# 2), who may read sources where, and bad input answered in one line with
# nothing stored lost. mtcd runs the real `mtc-train data prepare`.
. "$(dirname "$0")/lib.sh"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
EXTRA=$T_DIR/extra-root
mkdir -p "$EXTRA"
check "mtcd starts with --data-root" start_mtcd --listen 127.0.0.1:$PORT --data-root "$EXTRA"
D=$MTC_HOME/data
check "mtcd makes MTC_HOME/data and the cache" test -d "$D" -a -d "$MTC_HOME/cache"
m() { mtc --home "$MTC_HOME" "$@"; }
DS=/v1beta1/projects/local/locations/local/datasets
VIEWER=$(m token create --name ds-viewer --role viewer | head -1)
EDITOR=$(m token create --name ds-editor --role editor | head -1)
# one_error OUTPUT PATTERN: exactly one "mtc:" line, and it matches PATTERN
one_error() { [ "$(grep -c '^mtc: ' <<<"$1")" -eq 1 ] && grep '^mtc: ' <<<"$1" | grep -q -- "$2"; }
# one_line OUTPUT PATTERN: the output is one line matching PATTERN
one_line() { [ "$(wc -l <<<"$1")" -eq 1 ] && grep -q -- "$2" <<<"$1"; }
# reply CODE PATTERN: the last API call answered CODE with a body matching PATTERN
reply() { [ "$HTTP_STATUS" = "$1" ] && grep -q -- "$2" <<<"$BODY"; }
# done_ok NAME: the operation finishes without an error
done_ok() { wait_op "$1" && ! grep -q '"error"' <<<"$OP"; }
# files under a directory with their modification times, for "nothing rewritten"
# every file with its inode and its modification time in nanoseconds: a
# rewrite shows, however soon after (no wait for a clock tick needed)
snapshot() { find "$1" -type f -printf '%p %i %T@\n' | sort; }

# --- versions ---------------------------------------------------------------
for i in $(seq 200); do echo "the quick brown fox $i jumps over the lazy dog $((i * 7))"; done >"$D/corpus.txt"
out=$(m data prepare corpus --source "$D/corpus.txt" --kind pretrain 2>&1)
check "prepare creates a dataset: version 1" grep -q "dataset corpus version 1 (new)" <<<"$out"
m --json data show corpus >"$T_DIR/v1.json"
check "show: one version with key, fingerprints, counts" test "$(jq_ '(len(d["versions"]), d["versions"][0]["versionId"], bool(d["versions"][0]["sourceFingerprint"]), d["versions"][0]["records"] > 0, d["state"])' <"$T_DIR/v1.json")" = "(1, 1, True, True, 'READY')"
P1=$(jq_ 'd["latestVersion"]["path"]' <"$T_DIR/v1.json")
K1=$(jq_ 'd["latestVersion"]["key"]' <"$T_DIR/v1.json")
check "the prepared data lies in mtcd's cache" bash -c "[[ '$P1' == '$MTC_HOME/cache/'* ]] && test -d '$P1'"
before=$(snapshot "$P1")
m --json data prepare corpus >"$T_DIR/again.json" 2>/dev/null
check "prepare twice: the same version, nothing new" test "$(jq_ '(d["response"]["version"]["versionId"], d["response"]["newVersion"], d["response"]["cached"])' <"$T_DIR/again.json")" = "(1, False, True)"
check "prepare twice: no file re-tokenized (same files, same times)" test "$before" = "$(snapshot "$P1")"
out=$(m data prepare corpus 2>&1)
check "CLI says unchanged, cached" grep -q "version 1 (unchanged, cached)" <<<"$out"
echo "a new line of text changes the content" >>"$D/corpus.txt"
out=$(m data prepare corpus 2>&1)
check "changed source: version 2" grep -q "dataset corpus version 2 (new)" <<<"$out"
m --json data show corpus >"$T_DIR/v2.json"
check "show: two versions, different keys, v1 kept" test "$(jq_ '(len(d["versions"]), d["versions"][1]["key"] != d["versions"][0]["key"], d["latestVersion"]["versionId"])' <"$T_DIR/v2.json")" = "(2, True, 2)"
P2=$(jq_ 'd["latestVersion"]["path"]' <"$T_DIR/v2.json")
check "mtc data list: a table with the dataset" bash -c "m() { mtc --home '$MTC_HOME' \"\$@\"; }; m data list | grep -qE '^corpus +pretrain +READY +2 '"

# --- the API with curl ------------------------------------------------------
api POST "$DS?datasetId=tiny-chat" '{"source":"builtin:tiny-sft","kind":"sft","description":"templated chat","labels":{"team":"ml"}}'
check "POST datasets: 200 with an operation" test "$HTTP_STATUS" = 200
OPNAME=$(jq_ 'd["name"]' <<<"$BODY")
check "the operation targets the dataset" grep -q '"target":"projects/local/locations/local/datasets/tiny-chat"' <<<"$BODY"
check "the operation finishes" wait_op "$OPNAME"
check "its response: version 1, new" test "$(jq_ '(d["response"]["version"]["versionId"], d["response"]["newVersion"], d["response"]["dataset"])' <<<"$OP")" = "(1, True, 'projects/local/locations/local/datasets/tiny-chat')"
api GET "$DS/tiny-chat"
check "GET: the resource with its request fields and versions" test "$(jq_ '(d["name"], d["kind"], d["labels"]["team"], len(d["versions"]))' <<<"$BODY")" = "('projects/local/locations/local/datasets/tiny-chat', 'sft', 'ml', 1)"
api POST "$DS/tiny-chat:prepare" ''
check ":prepare with no body re-prepares as stored" wait_op "$(jq_ 'd["name"]' <<<"$BODY")"
check ":prepare unchanged: the existing version" test "$(jq_ '(d["response"]["version"]["versionId"], d["response"]["newVersion"])' <<<"$OP")" = "(1, False)"
api GET "$DS?pageSize=1"
check "list pages: pageSize 1 gives a nextPageToken" test "$(jq_ '(len(d["datasets"]), d.get("nextPageToken"))' <<<"$BODY")" = "(1, 'corpus')"
api GET "$DS?pageSize=1&pageToken=corpus"
check "list pages: the next page" test "$(jq_ '[x["name"].split("/")[-1] for x in d["datasets"]]' <<<"$BODY")" = "['tiny-chat']"
api POST "$DS?dataset_id=snake" '{"source":"builtin:tiny-dpo","kind":"dpo","bogus_field":1}'
check "unknown body field: 400 naming it" reply 400 'bogus_field: unknown field'

# --- roles and where sources may lie ----------------------------------------
tcp "$VIEWER" GET "$DS"
check "viewer may list: 200" test "$HTTP_STATUS" = 200
tcp "$VIEWER" GET "$DS/corpus"
check "viewer may get: 200" test "$HTTP_STATUS" = 200
tcp "$VIEWER" POST "$DS?datasetId=v" '{"source":"builtin:tiny-sft","kind":"sft"}'
check "viewer may not create: 403" test "$HTTP_STATUS" = 403
tcp "$VIEWER" DELETE "$DS/corpus"
check "viewer may not delete: 403" test "$HTTP_STATUS" = 403
echo "a private file of mtcd's user" >"$T_DIR/outside.txt"
tcp "$EDITOR" POST "$DS?datasetId=outside" "{\"source\":\"$T_DIR/outside.txt\",\"kind\":\"pretrain\"}"
check "editor, source outside the roots: 403 naming source" reply 403 '"message":"source: .*"status":"PERMISSION_DENIED"'
ln -s "$T_DIR/outside.txt" "$D/sneaky.txt"
tcp "$EDITOR" POST "$DS?datasetId=outside" "{\"source\":\"$D/sneaky.txt\",\"kind\":\"pretrain\"}"
check "editor, a link out of the root: 403" test "$HTTP_STATUS" = 403
tcp "$EDITOR" POST "$DS?datasetId=outside" "{\"source\":\"$D/../../outside.txt\",\"kind\":\"pretrain\"}"
check "editor, .. out of the root: 403" test "$HTTP_STATUS" = 403
# outside the roots, a file that is not there gets the very answer a file
# that is there gets: the roots are checked before the path is looked at
# (issue 26); only the path named differs
tcp "$EDITOR" POST "$DS?datasetId=outside" "{\"source\":\"$T_DIR/outside.txt\",\"kind\":\"pretrain\"}"
there="$HTTP_STATUS ${BODY//outside.txt/X}"
tcp "$EDITOR" POST "$DS?datasetId=outside" "{\"source\":\"$T_DIR/no-such.txt\",\"kind\":\"pretrain\"}"
check "editor, a missing file outside the roots: the same 403 as an existing one" \
    test "$HTTP_STATUS ${BODY//no-such.txt/X}" = "$there"
tcp "$EDITOR" POST "$DS?datasetId=outside" "{\"source\":\"builtin:tiny-corpus\",\"kind\":\"pretrain\",\"tokenizer\":\"$T_DIR/outside.txt\"}"
check "editor, tokenizer outside the roots: 403 naming tokenizer" reply 403 '"message":"tokenizer: '
api GET "$DS/outside"
check "a refused create stores nothing" test "$HTTP_STATUS" = 404
cp "$D/corpus.txt" "$EXTRA/extra.txt"
tcp "$EDITOR" POST "$DS?datasetId=extra" "{\"source\":\"$EXTRA/extra.txt\",\"kind\":\"pretrain\"}"
check "editor, source under --data-root: accepted" test "$HTTP_STATUS" = 200
check "... and prepared" done_ok "$(jq_ 'd.get("name","")' <<<"$BODY")"
tcp "$EDITOR" POST "$DS?datasetId=builtin" '{"source":"builtin:tiny-rl","kind":"rl"}'
check "editor, a built-in: accepted" test "$HTTP_STATUS" = 200
api POST "$DS?datasetId=admin" "{\"source\":\"$T_DIR/outside.txt\",\"kind\":\"pretrain\"}"
check "admin (the socket's owner) may name any path" test "$HTTP_STATUS" = 200
check "... and it is prepared" done_ok "$(jq_ 'd.get("name","")' <<<"$BODY")"

# --- bad input: one line, nothing stored lost --------------------------------
out=$(m data show nosuch 2>&1)
rc=$?
check "unknown dataset: one line, non-zero" test $rc -ne 0 -a "$out" = "mtc: dataset nosuch not found"
api GET "$DS/nosuch"
check "unknown dataset: 404 NOT_FOUND" reply 404 NOT_FOUND
out=$(m data delete nosuch 2>&1)
check "delete an unknown dataset: one line" test "$out" = "mtc: dataset nosuch not found"
out=$(m data prepare x --source builtin:tiny-sft --kind chat 2>&1)
check "bad kind (CLI): one line naming it" one_line "$out" 'kind "chat"'
api POST "$DS?datasetId=x" '{"source":"builtin:tiny-sft","kind":"chat"}'
check "bad kind (API): 400 naming kind" reply 400 '"message":"kind: '
out=$(m data prepare Bad_Name --source builtin:tiny-sft --kind sft 2>&1)
check "bad name (CLI): one line naming it" one_line "$out" 'Bad_Name'
api POST "$DS?datasetId=Bad_Name" '{"source":"builtin:tiny-sft","kind":"sft"}'
check "bad name (API): 400" test "$HTTP_STATUS" = 400
api GET "$DS/a.b"
check "a name with a dot: 400" reply 400 'a\.b.*must match'
api GET "$DS/..%2Fetc"
check "a name with a path in it: never found" test "$HTTP_STATUS" != 200
out=$(m data prepare rel --source corpus-relative.txt --kind pretrain 2>&1)
check "a missing source: one line naming it" one_line "$out" 'source: .*corpus-relative.txt'

printf '{"prompt":"2+2?","response":"4"}\n{"prompt":"3+3?","response":"6"}\n' >"$D/chat.jsonl"
check "an SFT dataset from a file" bash -c "mtc --home '$MTC_HOME' data prepare chat --source '$D/chat.jsonl' --kind sft >/dev/null 2>&1"
PC=$(m --json data show chat | jq_ 'd["latestVersion"]["path"]')
out=$(m data prepare chat --kind dpo 2>&1)
check "re-prepare as another kind: one line naming kind" one_line "$out" 'kind: dataset chat holds sft data, not dpo'
printf '{"prompt":"2+2?","chosen":"4","rejected":"5"}\n' >"$D/chat.jsonl"
out=$(m data prepare chat 2>&1)
rc=$?
check "the source changed kind: non-zero" test $rc -ne 0
check "... one line naming the file's line" one_error "$out" 'chat.jsonl:1: .*dpo'
check "... the dataset keeps its version and its data" test "$(m --json data show chat | jq_ '(len(d["versions"]), d["state"])')" = "(1, 'READY')" -a -d "$PC"
printf '{"prompt":"2+2?","response":"4"}\n{"prompt": 3}\n' >"$D/badline.jsonl"
out=$(m data prepare badline --source "$D/badline.jsonl" --kind sft 2>&1)
check "a bad JSONL line: one line naming file:line" one_error "$out" 'badline.jsonl:2: '
check "... and a failed create stores no dataset (not found)" gone "dataset badline not found" -- mtc --home "$MTC_HOME" data show badline
: >"$D/empty.txt"
out=$(m data prepare empty --source "$D/empty.txt" --kind pretrain 2>&1)
check "an empty file: one line" one_error "$out" 'empty.txt: empty'
cp "$D/badline.jsonl" "$D/chat.jsonl"
m data prepare chat >/dev/null 2>&1
check "a bad line in a re-prepare loses nothing" test "$(m --json data show chat | jq_ 'len(d["versions"])')" = 1 -a -d "$PC"
check "every refusal left corpus as it was" test "$(m --json data show corpus | jq_ '(len(d["versions"]), d["state"])')" = "(2, 'READY')"

# --- mtc run --dataset: a recipe reads a registered version as it is ------------
PT=$(m --json data show tiny-chat | jq_ 'd["latestVersion"]["path"]')
out=$(m run -s sft/tiny_gpt2_sft --dataset tiny-chat --dry-run 2>&1)
check "run --dataset: the trainer reads the latest version's data" grep -qF -- "'--data' '$PT'" <<<"$out"
check "... with its tokenizer" grep -qF -- "'--tokenizer' '$PT/tokenizer.json'" <<<"$out"
check "... and no preparation step" bash -c "! grep -q 'data prepare' <<<\"\$0\"" "$out"
out=$(m run -s sft/tiny_gpt2_sft --dataset tiny-chat@1 --dry-run 2>&1)
check "run --dataset NAME@VERSION" grep -qF -- "'--data' '$PT'" <<<"$out"
out=$(m run -s dpo/tiny_gpt2_dpo --dataset tiny-chat --dry-run 2>&1)
check "run --dataset of another kind: one line, nothing submitted" one_line "$out" "mtc: dataset: dataset tiny-chat holds sft data; this run needs dpo data; nothing submitted"
out=$(m run -s sft/tiny_gpt2_sft --dataset nosuch --dry-run 2>&1)
check "run --dataset unknown: one line" one_line "$out" "dataset nosuch not found"
out=$(m run -s sft/tiny_gpt2_sft --dataset tiny-chat@7 --dry-run 2>&1)
check "run --dataset unknown version: one line naming the versions" one_line "$out" "tiny-chat@7: no such version (dataset tiny-chat has 1)"
out=$(m run -s sft/tiny_gpt2_sft --dataset tiny-chat --data "$D/chat.jsonl" --dry-run 2>&1)
check "run --dataset with --data: one line" one_line "$out" "give one of them"
out=$(m run -s sft/tiny_gpt2_sft --dataset 'Tiny@x' --dry-run 2>&1)
check "run --dataset malformed: one line" one_line "$out" "want NAME or NAME@VERSION"

# --- delete: the record goes, data another dataset uses stays ----------------
check "a second dataset with extra's content (corpus's version 2)" bash -c "mtc --home '$MTC_HOME' data prepare twin --source '$EXTRA/extra.txt' --kind pretrain >/dev/null 2>&1"
KT=$(m --json data show twin | jq_ 'd["latestVersion"]["key"]')
KE=$(m --json data show extra | jq_ 'd["latestVersion"]["key"]')
check "same content, same key (shared data)" test "$KT" = "$KE" -a -n "$KT" -a "$P2" = "$MTC_HOME/cache/datasets/$KT"
out=$(m data delete extra 2>&1)
check "mtc data delete: deleted" test "$out" = "dataset extra deleted"
check "data still used by another dataset stays" test -d "$MTC_HOME/cache/datasets/$KT"
check "the deleted one is gone (not found)" gone "dataset extra not found" -- mtc --home "$MTC_HOME" data show extra
tcp "$EDITOR" DELETE "$DS/corpus"
check "editor may delete: 200" test "$HTTP_STATUS" = 200
check "corpus's data no other dataset uses is removed (version 1)" test ! -e "$P1"
check "its version 2's data, twin's too, stays" test -d "$P2"
check "its name link is removed" test ! -e "$MTC_HOME/cache/datasets/by-name/corpus"
api GET "$DS/corpus"
check "deleted: 404" test "$HTTP_STATUS" = 404

# --- durable across a restart ----------------------------------------------
kill -TERM "$MTCD_PID"
wait_for 10 bash -c "! kill -0 $MTCD_PID 2>/dev/null"
check "mtcd restarts" start_mtcd --listen 127.0.0.1:$PORT --data-root "$EXTRA"
check "datasets survive a restart" bash -c "mtc --home '$MTC_HOME' data list | grep -q '^tiny-chat '"
done_testing
