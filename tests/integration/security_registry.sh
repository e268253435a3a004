#!/usr/bin/env bash
# security_registry: the model registry acts for users only on descriptors
# (issue 47, findings 1-3). With mtcd as root and two Unix users of the
# test's own: a token bound to alice reads and writes as alice (bob's 0700
# checkpoint refused), an unbound editor token reads what every user may and
# writes only where only root writes, and a racer running as alice swaps her
# directory for a symlink into root-only directories (renameat2
# RENAME_EXCHANGE) during 200 uploads and 200 exports: no root-only byte
# reaches the registry and no file appears in the root-only directory.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/security_race.inc"
D=$T_DIR
TRIES=200

if [ "$(id -u)" != 0 ]; then
    check "security_registry needs root (it creates Unix users and runs mtcd as root)" false
    done_testing
fi
UA=mtcr$$a UB=mtcr$$b
USERS=()
t_extra_cleanup() {
    stop_racer
    for u in "${USERS[@]}"; do userdel "$u" 2>/dev/null; done
}
for u in "$UA" "$UB"; do
    useradd -M -N -g nogroup -s /usr/sbin/nologin "$u" && USERS+=("$u")
done
check "two Unix users made" test ${#USERS[@]} = 2
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
check "mtcd starts as root" start_mtcd --listen 127.0.0.1:$PORT || done_testing
chmod 0755 "$D" "$MTC_HOME"
M=/v1beta1/projects/local/locations/local/models
hf() { # hf DIR TEXT: an HF artifact whose every byte says TEXT
    mkdir -p "$1" && printf '%s-weights' "$2" >"$1/model.safetensors" &&
        printf '{"note":"%s"}' "$2" >"$1/config.json"
}
TA=$(mtc token create --name r-alice --role editor --user "$UA" | head -1)
TB=$(mtc token create --name r-bob --role editor --user "$UB" | head -1)
TE=$(mtc token create --name r-unbound --role editor | head -1)
DATA=$MTC_HOME/data DA=$MTC_HOME/data/$UA DB=$MTC_HOME/data/$UB
mkdir -p "$DATA" && chmod 0755 "$DATA"
# root-only: a secret artifact and an empty directory, both 0700 root
mkdir -m 0700 "$D/vault" "$D/vault/secret" "$D/drop"
hf "$D/vault/secret" ROOTSECRET
install -d -o "$UA" -m 0755 "$DA"
install -d -o "$UB" -m 0700 "$DB"
runuser -u "$UA" -- bash -c "$(declare -f hf); hf '$DA/mine' ALICE && hf '$DA/src' ALICE"
runuser -u "$UB" -- bash -c "$(declare -f hf); hf '$DB/ck' BOB"
check "alice's and bob's artifacts, bob's in his 0700 directory" \
    test -f "$DA/mine/config.json" -a -f "$DB/ck/config.json"

# --- finding 3: whose files a token reads ---------------------------------------
up() { # up TOKEN MODEL SOURCE
    tcp "$1" POST "$M:upload" "{\"modelId\":\"$2\",\"model\":{\"artifactUri\":\"$3\"}}"
}
up "$TA" stolen "$DB/ck"
check "alice's bound token: bob's 0700 checkpoint refused (403)" \
    bash -c "[ '$HTTP_STATUS' = 403 ] && grep -q 'Permission denied' <<<'$BODY'"
up "$TE" stolen "$DB/ck"
check "an unbound editor token (reads as nobody): bob's checkpoint refused (403)" test "$HTTP_STATUS" = 403
api GET "$M/stolen"
check "... and no model stolen exists" test "$HTTP_STATUS" = 404
up "$TB" bobs "$DB/ck"
check "bob's own token uploads it (an operation)" \
    bash -c "[ '$HTTP_STATUS' = 200 ] && $(declare -f api wait_op jq_); wait_op '$(jq_ 'd["name"]' <<<"$BODY" 2>/dev/null)' 60 && ! grep -q '\"error\"' <<<\"\$OP\""
up "$TA" alices "$DA/mine"
check "alice's token uploads her own" \
    bash -c "[ '$HTTP_STATUS' = 200 ] && $(declare -f api wait_op jq_); wait_op '$(jq_ 'd["name"]' <<<"$BODY" 2>/dev/null)' 60 && ! grep -q '\"error\"' <<<\"\$OP\""
tcp "$TA" POST "$M/alices:export" "{\"outputDir\":\"$DA/exp\"}"
check "alice's export: a directory and files of hers" \
    bash -c "[ '$HTTP_STATUS' = 200 ] && [ \"\$(stat -c %U '$DA/exp' '$DA/exp/config.json' | sort -u)\" = '$UA' ]"
tcp "$TA" POST "$M/alices:export" "{\"outputDir\":\"$DB/exp\"}"
check "alice's export into bob's 0700 directory: 403, nothing made" \
    bash -c "[ '$HTTP_STATUS' = 403 ] && [ ! -e '$DB/exp' ]"
tcp "$TE" POST "$M/alices:export" "{\"outputDir\":\"$DA/unbound\"}"
check "an unbound token's export into alice's directory: 403 (root writes only where only root can)" \
    bash -c "[ '$HTTP_STATUS' = 403 ] && [ ! -e '$DA/unbound' ]"

# --- findings 1 and 2: a racer swaps alice's directory for a link ---------------
ln -s "$D/vault/secret" "$DA/srclink"
chown -h "$UA" "$DA/srclink"
race "$DA/src" "$DA/srclink"
# all uploads asked for while the racer runs (each an operation of its own
# model), then each operation waited for before the racer stops
stored=0 refused=0 other=0 OPS=()
for i in $(seq 1 $TRIES); do
    up "$TA" "race-$i" "$DA/src"
    case $HTTP_STATUS in
    200) OPS+=("$(jq_ 'd["name"]' <<<"$BODY")") ;;
    400 | 403) refused=$((refused + 1)) ;; # the link, or "changed while it was being opened"
    *) other=$((other + 1)); diag "upload $i: $HTTP_STATUS $BODY" ;;
    esac
done
for op in "${OPS[@]}"; do
    if ! wait_op "$op" 60; then
        other=$((other + 1)); diag "operation $op: not done"
    elif grep -q '"error"' <<<"$OP"; then
        refused=$((refused + 1))
    else
        stored=$((stored + 1))
    fi
done
stop_racer
diag "uploads during the race: $stored stored, $refused refused, $other other; racer swaps: $(cat "$DA/swaps" 2>/dev/null)"
check "$TRIES uploads raced against the swap, each answered (stored or refused)" \
    test $((stored + refused)) = $TRIES
check "the race was real: the racer swapped, some uploads met the link" \
    bash -c "[ \"\$(cat '$DA/swaps' 2>/dev/null || echo 0)\" -gt 0 ] && [ $refused -gt 0 ]"
leaked=$(grep -rl ROOTSECRET "$MTC_HOME/models")
rc=$?
[ -z "$leaked" ] || diag "holding root-only bytes: $leaked"
check "no root-only byte reached the registry (grep exit $rc: 1, nothing found)" test "$rc" = 1

mkdir -m 0755 "$DA/out" && chown "$UA" "$DA/out"
ln -s "$D/drop" "$DA/outlink"
chown -h "$UA" "$DA/outlink"
race "$DA/out" "$DA/outlink"
written=0 refused=0 other=0
for i in $(seq 1 $TRIES); do
    tcp "$TA" POST "$M/alices:export" "{\"outputDir\":\"$DA/out\"}"
    case $HTTP_STATUS in
    200) written=$((written + 1)) ;;
    400 | 403) refused=$((refused + 1)) ;;
    *) other=$((other + 1)); diag "export $i: $HTTP_STATUS $BODY" ;;
    esac
done
stop_racer
diag "exports during the race: $written written, $refused refused, $other other; racer swaps: $(cat "$DA/swaps" 2>/dev/null)"
check "$TRIES exports raced against the swap, each answered (written or refused)" \
    test $((written + refused)) = $TRIES
check "the race was real: the racer swapped, some exports met the link" \
    bash -c "[ \"\$(cat '$DA/swaps' 2>/dev/null || echo 0)\" -gt 0 ] && [ $refused -gt 0 ]"
check "nothing appeared in the root-only directory" test -z "$(ls -A "$D/drop")"
check "what was written is alice's, in her directory" \
    bash -c "[ \"\$(stat -c %U '$DA/out' '$DA/out/config.json' | sort -u)\" = '$UA' ]"
done_testing
