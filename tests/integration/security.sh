#!/usr/bin/env bash
# security: mtcd over TLS; root-executing spec fields are an admin's; NVML
# libraries only from mtcd's own list; node tokens are the only principals
# that report health, each for its own node; unauthenticated clients are
# answered before their bodies are read; idle and excess connections cannot
# lock legitimate clients out; files holding secrets are 0600 under any umask.
. "$(dirname "$0")/lib.sh"

t_extra_cleanup() { delete_all_clusters; }
umask 022
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -keyout "$T_DIR/key.pem" -out "$T_DIR/cert.pem" -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1
check "mtcd starts with TLS and connection limits" start_mtcd --listen 127.0.0.1:$PORT \
    --tls-cert "$T_DIR/cert.pem" --tls-key "$T_DIR/key.pem" --max-per-ip 16 --idle-timeout 3
URL=https://127.0.0.1:$PORT

# --- TLS ---------------------------------------------------------------------
out=$(curl -s --cacert "$T_DIR/cert.pem" -w ' %{http_code}' "$URL/healthz" \
    -H "Authorization: Bearer none")
check "https with the CA: an answer (401 for a bad token)" grep -q ' 401$' <<<"$out"
curl -s "$URL/healthz" >/dev/null
rc=$?
check "https without the CA: the certificate is refused (curl exit $rc: 60, SSL certificate problem)" \
    test "$rc" = 60
out=$(curl -s -m 5 "http://127.0.0.1:$PORT/healthz")
rc=$?
# 52: empty reply, 56: the connection reset — the TLS handshake refused it
check "clear-text http on the TLS port gets no API answer (curl exit $rc: 52 or 56)" \
    bash -c "[ $rc = 52 ] || [ $rc = 56 ]"
check "  and mtcd still answers https" \
    bash -c "curl -s --cacert '$T_DIR/cert.pem' -H 'Authorization: Bearer none' -o /dev/null -w '%{http_code}' '$URL/healthz' | grep -qx 401"
check "db, wal and token-bearing files 0600 under umask 022" bash -c \
    "[ \$(stat -c %a '$MTC_HOME/mtcd.db') = 600 ] && [ \$(stat -c %a '$MTC_HOME/mtcd.db-wal') = 600 ]"
EDITOR=$(mtc --home "$MTC_HOME" token create --name ed --role editor | head -1)
out=$(MTC_URL=$URL MTC_TOKEN=$EDITOR MTC_CA_CERT=$T_DIR/cert.pem mtc cluster list 2>&1)
check "CLI over https with MTC_CA_CERT" grep -q '^ID' <<<"$out"
tcp() { # tcp TOKEN METHOD PATH [BODY] → BODY, HTTP_STATUS
    local o
    o=$(curl -s --cacert "$T_DIR/cert.pem" -X "$2" -w '\n%{http_code}' \
        ${1:+-H "Authorization: Bearer $1"} -H 'Content-Type: application/json' \
        ${4:+--data-binary "$4"} "$URL$3")
    HTTP_STATUS=${o##*$'\n'}
    BODY=${o%$'\n'*}
}

# --- root-executing fields ---------------------------------------------------
spec() { # spec EXTRA_SLURM EXTRA_POLICY → a 1-node CPU cluster
    cat <<JSON
{"nodePools": [{"id": "cpu", "machineSpec": {"machineType": "local"},
                "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1}}],
 "orchestratorSpec": {"slurmSpec": {"partitions": [{"id": "cpu", "nodePoolIds": ["cpu"]}]$1}},
 "healthPolicy": {"intervalSeconds": 1, "reportEverySeconds": 2, "probeIntervalSeconds": 0,
                  "checks": ["gpu", "disk"]$2}}
JSON
}
PROLOG=', "prologBashScripts": ["echo hi"]'
NVML=", \"nvmlLibrary\": \"$B/fakes/libnvml.so\""
tcp "$EDITOR" POST "$CLUSTERS?modelDevelopmentClusterId=ed1" "$(spec "$PROLOG" "")"
check "editor: a prolog script is 403 naming the field" bash -c \
    "[ $HTTP_STATUS = 403 ] && grep -q 'orchestratorSpec.slurmSpec.prologBashScripts: only an admin' <<<'$BODY'"
tcp "$EDITOR" POST "$CLUSTERS?modelDevelopmentClusterId=ed1" "$(spec "" "$NVML")"
check "editor: an NVML library is 403 naming the field" bash -c \
    "[ $HTTP_STATUS = 403 ] && grep -q 'healthPolicy.nvmlLibrary' <<<'$BODY'"
tcp "$EDITOR" POST "$CLUSTERS?modelDevelopmentClusterId=ed1" "$(spec "" ', "kernelLog": "/etc/shadow"')"
check "editor: a kernel log path is 403" test "$HTTP_STATUS" = 403
check "rejected creates stored nothing (cluster ed1 not found)" gone "cluster ed1 not found" -- mtc --home "$MTC_HOME" cluster get ed1
api POST "$CLUSTERS?modelDevelopmentClusterId=ad1" "$(spec "" ', "nvmlLibrary": "/tmp/evil.so"')"
check "admin: an NVML library mtcd does not list is 400" bash -c \
    "[ $HTTP_STATUS = 400 ] && grep -q 'is not an NVML library this mtcd allows' <<<'$BODY'"
api POST "$CLUSTERS?modelDevelopmentClusterId=sec" "$(spec "$PROLOG" "$NVML")"
check "admin (unix socket): prolog and a listed NVML library accepted" test "$HTTP_STATUS" = 200
mtc --home "$MTC_HOME" operations wait "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["name"])' "$BODY")" >/dev/null
tcp "$EDITOR" PATCH "$CLUSTERS/sec?updateMask=labels" '{"labels": {"team": "a"}}'
check "editor may change other fields of a cluster with a prolog" test "$HTTP_STATUS" = 200
tcp "$EDITOR" PATCH "$CLUSTERS/sec?updateMask=orchestratorSpec.slurmSpec.prologBashScripts" \
    '{"orchestratorSpec": {"slurmSpec": {"prologBashScripts": ["id"]}}}'
check "editor may not change the prolog: 403" test "$HTTP_STATUS" = 403

# --- node tokens --------------------------------------------------------------
N=sec-cpu-0
TOK=$(cat "$MTC_HOME/clusters/sec/nodes/$N/agent.token" 2>/dev/null)
check "the node's agent has a token file, 0600" bash -c \
    "[ -n '$TOK' ] && [ \$(stat -c %a '$MTC_HOME/clusters/sec/nodes/$N/agent.token') = 600 ]"
health_is() { [ "$(mtc --home "$MTC_HOME" cluster get sec --json | python3 -c \
    'import json,sys; n=json.load(sys.stdin)["clusterStatus"]["nodesStatus"]; print([x.get("health") for x in n if x["instanceName"]==sys.argv[1]][0])' "$N")" = "$1" ]; }
check "the agent's reports arrive with its node token" wait_for 30 health_is PASS
# every file of mtcd's home that holds a token, a key or a password, found
# by listing (names of tokens, keys, credentials; the store and its WAL,
# whose rows hold token hashes; slurmdbd's config): each 0600 or stricter
SECRETS=$(find "$MTC_HOME" -type f \( -name '*token*' -o -name '*.key' -o -path '*/munge/key' -o -name '*key*.pem' \
    -o -name '*cred*' -o -name 'acct.json' -o -name 'slurmdbd.conf' -o -name 'mtcd.db*' -o -name '*secret*' \) | sort)
loose=$(for f in $SECRETS; do [ $((0$(stat -c %a "$f") & 077)) = 0 ] || echo "$f $(stat -c %a "$f")"; done)
diag "secret-bearing files: $(wc -l <<<"$SECRETS"): $(sed "s|$MTC_HOME/||" <<<"$SECRETS" | tr '\n' ' ')"
check "every token-, key- or password-bearing file of the home 0600 or stricter (the agent's token and the munge key among them)${loose:+ — not: $loose}" \
    bash -c '[ -z "$0" ] && grep -q "/agent.token$" <<<"$1" && grep -q "/munge/key$" <<<"$1"' "$loose" "$SECRETS"
REPORT='{"nodeId": "'$N'", "results": [{"check": "gpu.ecc", "status": "FAIL", "severity": "REPLACE", "reason": "forged"}]}'
tcp "$EDITOR" POST "$CLUSTERS/sec:reportHealth" "$REPORT"
check "an editor cannot report health: 403" test "$HTTP_STATUS" = 403
api POST "$CLUSTERS/sec:reportHealth" "$REPORT"
check "nor the unix socket's owner (admin): 403" test "$HTTP_STATUS" = 403
tcp "$TOK" POST "$CLUSTERS/sec:reportHealth" '{"nodeId": "sec-cpu-1", "results": []}'
check "a node token for another node: 403" bash -c "[ $HTTP_STATUS = 403 ] && grep -q 'speaks for node $N' <<<'$BODY'"
tcp "$TOK" GET "$CLUSTERS/sec"
check "a node token cannot read clusters: 403" test "$HTTP_STATUS" = 403
tcp "$TOK" DELETE "$CLUSTERS/sec"
check "nor delete them: 403" test "$HTTP_STATUS" = 403
tcp "$TOK" POST "$CLUSTERS/sec:reportHealth" '{"nodeId": "'$N'", "results": [{"check": "disk", "status": "PASS", "severity": "NONE", "reason": ""}]}'
check "a node token reports its own node: 200" test "$HTTP_STATUS" = 200
api POST /v1/tokens '{"name": "n", "role": "node"}'
check "node tokens cannot be made through the token API: 400" test "$HTTP_STATUS" = 400
check "token list shows the node token with its node" bash -c \
    "mtc --home '$MTC_HOME' token list --json | grep -q '\"node\": *\"$N\"'"

# --- connections ----------------------------------------------------------------
# 200 unauthenticated 1 MiB POSTs from 127.0.0.3, 20 at a time, to a second
# mtcd listening in clear (on the TLS port they would end at the handshake,
# never reaching the code under test): each is answered 401 without its body
# being kept
PORT2=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$T_DIR/home2"
mtcd --home "$T_DIR/home2" --daemon --listen 127.0.0.1:$PORT2 --max-per-ip 32 &&
    M2=$(cat "$T_DIR/home2/mtcd.pid") && track_pid "$M2"
RSS0=$(awk '/VmRSS/ {print $2}' "/proc/$M2/status")
python3 "$ROOT/tests/tools/post_flood.py" "$PORT2" >"$T_DIR/flood.out" 2>&1
RSS1=$(awk '/VmRSS/ {print $2}' "/proc/$M2/status")
diag "second mtcd's RSS ${RSS0} kB before, ${RSS1} kB after 200 unauthenticated 1 MiB POSTs: $(cat "$T_DIR/flood.out")"
check "each unauthenticated POST answered 401" grep -qx "answered 401: 200, refused: 0, other: 0" "$T_DIR/flood.out"
check "unauthenticated bodies are not buffered (RSS grew < 32 MiB)" test $((RSS1 - RSS0)) -lt 32768
# an attacker on 127.0.0.2 holds 300 idle connections (16 allowed per address)
python3 - "$PORT" "$T_DIR/idle.ready" "$T_DIR/idle.out" <<'PY' &
import socket, sys, time
port, ready, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
held = []
for _ in range(300):
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=2, source_address=("127.0.0.2", 0)))
    except OSError:
        pass
open(ready, "w").write(str(len(held)))
# when mtcd closes each (polled together): at once beyond the 16 an address
# may hold, at the 3 s idle timeout for those 16
import selectors
sel = selectors.DefaultSelector()
for s in held:
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
t0, when = time.time(), []
while len(when) < len(held) and time.time() - t0 < 20:
    for key, _ in sel.select(timeout=0.5):
        try:
            data = key.fileobj.recv(1)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if data == b"":
            when.append(time.time() - t0)
            sel.unregister(key.fileobj)
quick = sum(1 for t in when if t < 1.5)
late = [t for t in when if t >= 1.5]
open(out, "w").write("%d %d %d %.1f %.1f" % (len(held), quick, len(late),
                     min(late) if late else -1, max(late) if late else -1))
PY
IDLE_PID=$!
track_pid "$IDLE_PID"
wait_for 20 test -s "$T_DIR/idle.ready"
tcp "$EDITOR" GET "$CLUSTERS"
check "a legitimate client is served while another address holds idle connections" test "$HTTP_STATUS" = 200
wait "$IDLE_PID"
read -r held quick late first last <"$T_DIR/idle.out"
diag "attacker opened $held connections: $quick closed at once, $late after ${first}-${last} s"
check "beyond the 16 an address may hold, closed at once ($quick of $held)" \
    test "${quick:-0}" = $((${held:-0} - 16))
check "the 16 held closed by the 3 s idle timeout (after ${first}-${last} s)" \
    python3 -c 'import sys; n, a, b = sys.argv[1:]; sys.exit(not (n == "16" and 2.5 <= float(a) and float(b) < 10))' \
    "${late:-0}" "${first:--1}" "${last:--1}"
check "mtcd still healthy" bash -c "mtc --home '$MTC_HOME' daemon status >/dev/null"
done_testing
