#!/usr/bin/env bash
# API behaviour without clusters coming up: health, auth (401/403 on TCP,
# roles), malformed JSON, unknown fields, oversized bodies, bad ids, and that a
# rejected create stores nothing.
. "$(dirname "$0")/lib.sh"

t_extra_cleanup() { delete_all_clusters; }

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
check "mtcd starts with --listen" start_mtcd --listen 127.0.0.1:$PORT
check "mtc daemon status reports running" mtc --home "$MTC_HOME" daemon status
check "socket is mode 0600" test "$(stat -c %a "$MTC_HOME/mtcd.sock")" = 600
check "log file written" test -s "$MTC_HOME/log/mtcd.log"
check "a second mtcd on the same home refuses" bash -c "! mtcd --home '$MTC_HOME' --daemon 2>/dev/null"

api GET /healthz; body=$BODY
check "healthz ok over the socket" test "$HTTP_STATUS" = 200
# the newest migration's number: src/store/store.c's last "/* vN:" comment
SCHEMA=$(grep -oE '/\* v[0-9]+:' "$ROOT/src/store/store.c" | tail -1 | grep -oE '[0-9]+')
check "healthz reports schema version $SCHEMA" grep -q "\"schemaVersion\":$SCHEMA\b" <<<"$body"
V=$(cat "$ROOT/VERSION")
check "healthz reports the VERSION file's version" grep -qF "\"version\":\"$V\"" <<<"$body"
for p in mtc mtcd mtc-agent mtc-train mtc-serve; do
    check "$p --version says $V" test "$($p --version)" = "$p $V"
done

tcp "" GET $CLUSTERS; body=$BODY
check "TCP without a token: 401" test "$HTTP_STATUS" = 401
check "401 is UNAUTHENTICATED" grep -q '"status":"UNAUTHENTICATED"' <<<"$body"
tcp "mtc_bogus" GET /healthz
check "TCP with an unknown token: 401" test "$HTTP_STATUS" = 401

VIEWER=$(mtc --home "$MTC_HOME" token create --name ci-viewer --role viewer | head -1)
EDITOR=$(mtc --home "$MTC_HOME" token create --name ci-editor --role editor | head -1)
check "tokens created" test -n "$VIEWER" -a -n "$EDITOR"
check "token hash stored, not the token" bash -c "! grep -qF '$VIEWER' '$MTC_HOME/mtcd.db'"
tcp "$VIEWER" GET $CLUSTERS
check "viewer may list: 200" test "$HTTP_STATUS" = 200
tcp "$VIEWER" POST "$CLUSTERS?modelDevelopmentClusterId=v1" '{}'; body=$BODY
check "viewer may not create: 403" test "$HTTP_STATUS" = 403
check "403 is PERMISSION_DENIED" grep -q PERMISSION_DENIED <<<"$body"
tcp "$EDITOR" GET /v1/tokens
check "editor may not list tokens: 403" test "$HTTP_STATUS" = 403
check "mtc token list shows both" bash -c "out=\$(mtc --home '$MTC_HOME' token list) &&
    grep -q ci-editor <<<\"\$out\" && grep -q ci-viewer <<<\"\$out\""
mtc --home "$MTC_HOME" token revoke ci-viewer >/dev/null
tcp "$VIEWER" GET $CLUSTERS
check "revoked token: 401" test "$HTTP_STATUS" = 401
body=$(MTC_URL=http://127.0.0.1:$PORT MTC_TOKEN=$EDITOR mtc cluster list 2>&1)
check "CLI over TCP with a token" grep -q "^ID" <<<"$body"

api POST "$CLUSTERS?modelDevelopmentClusterId=demo" '{"nodePools": ['; body=$BODY
check "malformed JSON: 400" test "$HTTP_STATUS" = 400
check "malformed JSON: INVALID_ARGUMENT with a reason" grep -q '"status":"INVALID_ARGUMENT","message":"malformed JSON\|"message":"malformed JSON' <<<"$body"
api POST "$CLUSTERS?modelDevelopmentClusterId=demo" '{"nodePools":[], "bogusField": 1}'; body=$BODY
check "unknown field: 400" test "$HTTP_STATUS" = 400
check "unknown field named" grep -q 'bogusField' <<<"$body"
big=$(head -c 1100000 /dev/zero | tr '\0' 'a')
body=$(printf '{"displayName":"%s"}' "$big" | curl -s --unix-socket "$MTC_HOME/mtcd.sock" -w '\n%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary @- "http://localhost$CLUSTERS?modelDevelopmentClusterId=big")
check "body over 1 MiB: 413" test "${body##*$'\n'}" = 413
api POST "$CLUSTERS?modelDevelopmentClusterId=Bad_Id" "$(cat "$ROOT/examples/local-2node.json")"; body=$BODY
check "bad cluster id: 400" test "$HTTP_STATUS" = 400
check "bad cluster id named" grep -q 'Bad_Id' <<<"$body"
api POST "$CLUSTERS?modelDevelopmentClusterId=toolongclusterid" "$(cat "$ROOT/examples/local-2node.json")"
check "11-char id: 400" test "$HTTP_STATUS" = 400
api POST "$CLUSTERS" "$(cat "$ROOT/examples/local-2node.json")"
check "missing id: 400" test "$HTTP_STATUS" = 400
api GET "/v1beta1/projects/BAD/locations/local/modelDevelopmentClusters"
check "bad project: 400" test "$HTTP_STATUS" = 400
api GET "$CLUSTERS/nosuch"
check "unknown cluster: 404" test "$HTTP_STATUS" = 404
api GET "/v1/projects/local/locations/local/operations/op-0000"; body=$BODY
check "unknown operation: 404 NOT_FOUND" grep -q NOT_FOUND <<<"$body"
api GET "/v2/whatever"
check "unknown path: 404" test "$HTTP_STATUS" = 404
api PUT "$CLUSTERS/x" '{}'
check "wrong method: 405" test "$HTTP_STATUS" = 405
api GET "$CLUSTERS?pageSize=abc"
check "bad pageSize: 400" test "$HTTP_STATUS" = 400

bad=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); s["nodePools"][0]["scalingSpec"]={"minNodeCount":3,"maxNodeCount":2}; print(json.dumps(s))' "$ROOT/examples/local-2node.json")
api POST "$CLUSTERS?modelDevelopmentClusterId=demo" "$bad"; body=$BODY
check "min > max rejected" test "$HTTP_STATUS" = 400
api GET $CLUSTERS; body=$BODY
check "a rejected create stores nothing" test "$body" = '{"modelDevelopmentClusters":[]}'
out=$(mtc --home "$MTC_HOME" cluster create -f /dev/stdin --id demo <<<"$bad" 2>&1)
rc=$?
check "CLI: validation error is one line, non-zero exit" test $rc -ne 0 -a "$(wc -l <<<"$out")" -eq 1
check "CLI: message names the field" grep -q "minNodeCount" <<<"$out"
out=$(mtc --home "$MTC_HOME" cluster get nosuch 2>&1)
check "CLI: cluster not found" grep -q "cluster nosuch not found" <<<"$out"
out=$(mtc --home "$T_DIR/nohome" cluster list 2>&1)
check "CLI: daemon not running says how to start it" grep -q "mtc daemon start" <<<"$out"
check "CLI: --help for subcommands" bash -c "mtc cluster --help | grep -q create && mtc cluster create --help | grep -q -- --id"

kill -TERM "$MTCD_PID"
wait_for 10 bash -c "! kill -0 $MTCD_PID 2>/dev/null"
check "SIGTERM stops mtcd" bash -c "! kill -0 $MTCD_PID 2>/dev/null"
check "socket removed on shutdown" test ! -e "$MTC_HOME/mtcd.sock"
check "shutdown logged" grep -q "shutting down" "$MTC_HOME/log/mtcd.log"

# A Type=notify unit: mtcd says READY=1 on $NOTIFY_SOCKET once it answers
# requests, and STOPPING=1 on SIGTERM (what systemd reads; no systemd here).
notify_run() {
    /usr/bin/python3 - "$T_DIR/notify-home" <<'PY'
import os, signal, socket, subprocess, sys, time
home = sys.argv[1]
path = home + ".notify"
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(30)
p = subprocess.Popen(["mtcd", "--home", home], env=dict(os.environ, NOTIFY_SOCKET=path),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    ready = s.recv(512).decode()
    assert "READY=1" in ready and "MAINPID=%d" % p.pid in ready, ready
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # answering already
    c.connect(home + "/mtcd.sock")
    c.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
    reply = b""
    while True:
        b = c.recv(4096)
        if not b:
            break
        reply += b
    assert b" 200 " in reply.split(b"\r\n")[0] and b'"status":"ok"' in reply, reply
    p.send_signal(signal.SIGTERM)
    assert "STOPPING=1" in s.recv(512).decode()
    p.wait(timeout=20)
finally:
    if p.poll() is None:
        p.kill()
        p.wait()
    os.unlink(path)
PY
}
check "sd_notify: READY=1 once /healthz answers, STOPPING=1 on SIGTERM" notify_run
done_testing
