#!/usr/bin/env bash
# console: the web console in a real browser (Debian chromium + chromedriver
# via python3-selenium, headless, loopback only) — log in with a token; create
# a local cluster from the reference architecture and see it RUNNING; a bad
# node count shows the API's one-line error next to the field; a tiny
# recipe's Slurm job shows in the cluster page's Slurm queue and its loss
# chart gets new points. Security with curl: no page or API
# without a session, the cookie is HttpOnly + SameSite=Strict, a
# state-changing request without the CSRF header is refused, a viewer cannot
# create or delete, revoking a token ends its sessions, static files are a fixed set (no traversal), CSP is
# strict; `mtc console`'s one-time link works once. Screenshots go to
# $MTC_ARTIFACTS (else the test's temp dir).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR
PY=/usr/bin/python3
if ! [ -x /usr/bin/chromium ] || ! [ -x /usr/bin/chromedriver ] || ! $PY -c 'import selenium' 2>/dev/null; then
    echo "1..0 # SKIP chromium, chromium-driver or python3-selenium missing (scripts/setup installs them)"
    exit 0
fi
ART=${MTC_ARTIFACTS:-$D/artifacts}/console
mkdir -p "$ART"
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
U=http://127.0.0.1:$PORT
start_mtcd() { mtcd --home "$MTC_HOME" --daemon --supervise-ms 500 --listen 127.0.0.1:$PORT || return 1
    MTCD_PID=$(cat "$MTC_HOME/mtcd.pid"); track_pid "$MTCD_PID"; }
t_extra_cleanup() { delete_all_clusters; }
check "mtcd up on loopback TCP" start_mtcd
tok() { mtc token create --name "$1" --role "$2" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["token"])'; }
ADMIN=$(tok web-admin admin); VIEWER=$(tok web-viewer viewer)

# --- security, with curl -------------------------------------------------------
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
check "/ without a session is the login page, not the app" \
    eval 'has_line "id=\"login\"" -- curl -sf "$U/" && absent app.js -- curl -sf "$U/"'
check "the API without a session or token: 401" test "$(code $U$CLUSTERS)" = 401
check "a forged session cookie: 401" test "$(code -b mtc_session=$(printf '%064d' 0) $U$CLUSTERS)" = 401
check "login without the CSRF header: 403" test "$(code -X POST -H "Authorization: Bearer $ADMIN" $U/console/login)" = 403
check "login with a bad token: 401" test "$(code -X POST -H 'X-MTC-CSRF: 1' -H 'Authorization: Bearer mtc_nope' $U/console/login)" = 401
login() { # $1 token, $2 cookie jar; headers into $2.h
    curl -s -D "$2.h" -c "$2" -X POST -H 'X-MTC-CSRF: 1' -H "Authorization: Bearer $1" $U/console/login >/dev/null; }
login "$ADMIN" "$D/admin.jar"; login "$VIEWER" "$D/viewer.jar"
check "the session cookie is HttpOnly and SameSite=Strict" grep -qiE '^set-cookie: mtc_session=[0-9a-f]{64}; Path=/; HttpOnly; SameSite=Strict' "$D/admin.jar.h"
check "with the session: the app page and the API" bash -c "curl -s -b $D/admin.jar $U/ | grep -q app.js && test \$(curl -s -o /dev/null -w '%{http_code}' -b $D/admin.jar $U$CLUSTERS) = 200"
check "strict CSP, nosniff, no framing on pages" bash -c "curl -s -D - -o /dev/null -b $D/admin.jar $U/ | tr -d '\r' | grep -q \"^Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'\" && curl -s -D - -o /dev/null $U/ | grep -qi '^X-Frame-Options: DENY'"
check "no inline script in any console page" bash -c "! grep -hiE '<script>|<script [^s]|on[a-z]+=\"|style=\"' $ROOT/data/www/*.html"
SPEC=$(cat "$ROOT/examples/local-2node.json")
check "a state-changing request with the cookie but without the CSRF header: 403, nothing created" bash -c "
  test \$(curl -s -o /dev/null -w '%{http_code}' -b $D/admin.jar -X POST -H 'Content-Type: application/json' --data-binary @$ROOT/examples/local-2node.json '$U$CLUSTERS?modelDevelopmentClusterId=csrf') = 403 &&
  out=\$(curl -sf -b $D/admin.jar $U$CLUSTERS) && ! grep -q csrf <<<\"\$out\""
check "a viewer's session cannot create (403)" test "$(code -b "$D/viewer.jar" -X POST -H 'X-MTC-CSRF: 1' -H 'Content-Type: application/json' --data-binary @"$ROOT/examples/local-2node.json" "$U$CLUSTERS?modelDevelopmentClusterId=v1")" = 403
check "path traversal and unknown files: 404" bash -c "
  for p in /console/../../etc/passwd /console/%2e%2e/%2e%2e/etc/passwd /console/app.js/.. /console/www/app.js /console/index.html.bak; do
    test \$(curl -s --path-as-is -o /dev/null -w '%{http_code}' -b $D/admin.jar $U\$p) = 404 || exit 1; done"
check ":metrics with a bad afterStep: 400" test "$(code -b "$D/admin.jar" "$U$CLUSTERS/none/trainingJobs/j:metrics?afterStep=x")" = 400
check "Chart.js from libjs-chart.js is served" bash -c "curl -sf -o '$D/chart.js' $U/console/chart.js && head -c 200 '$D/chart.js' | grep -q 'Chart.js v'"
mtc console >"$D/console.out" 2>&1
LINK=$(sed -n 's/^log in .*: //p' "$D/console.out")
check "mtc console prints a one-time login link for this mtcd" grep -q "^http://127.0.0.1:$PORT/console/login?code=[0-9a-f]\{64\}$" <<<"$LINK"
check "the link logs in once (303 to / with a cookie) ..." bash -c "curl -s -D - -o /dev/null '$LINK' | tr -d '\r' | grep -q '^Set-Cookie: mtc_session='"
check "... and not twice" test "$(code "$LINK")" = 401
curl -s -b "$D/admin.jar" -c "$D/admin2.jar" -X POST -H 'X-MTC-CSRF: 1' $U/console/logout >/dev/null
check "after logout the session is gone" test "$(code -b "$D/admin.jar" $U$CLUSTERS)" = 401
TMP=$(tok web-tmp viewer); login "$TMP" "$D/tmp.jar"
mtc token revoke web-tmp >/dev/null
check "revoking a token ends its console sessions" test "$(code -b "$D/tmp.jar" $U$CLUSTERS)" = 401
login "$ADMIN" "$D/admin.jar"

# --- the browser ------------------------------------------------------------------
check "tiny corpus tokenized" run_corpus "$D/data"
run_recipe "$D/r.json" 400 100
$PY - "$D/r.json" "$D/data" >"$D/job.json" <<'PY'
import json, sys
print(json.dumps({"recipe": json.load(open(sys.argv[1])), "dataDir": sys.argv[2],
                  "experiment_name": "webrun", "nodeCount": 1}))
PY
timeout 600 $PY "$ROOT/tests/integration/console_browser.py" "$U" "$ADMIN" "$VIEWER" "$ART" "$D/job.json" "$ROOT/examples/local-2node.json"
BROWSER_RC=$?
check "browser checks (console_browser.py)" test $BROWSER_RC = 0
check "screenshots saved as artifacts" bash -c "ls $ART/*.png | wc -l | grep -qv '^0$'"
diag "screenshots: $ART"

# --- the README's way: `mtc daemon start`, then `mtc console` (issue 28) ------
H2=$D/home2
out=$(mtc --home "$H2" daemon start 2>&1)
track_pid "$(cat "$H2/mtcd.pid" 2>/dev/null)"
diag "$out"
check "mtc daemon start listens on 127.0.0.1 too" grep -qE "also on 127\.0\.0\.1:[0-9]+ " <<<"$out"
out=$(mtc --home "$H2" console 2>&1)
diag "$out"
LINK=$(sed -n 's/^log in (one-time link, [0-9]* s): //p' <<<"$out")
check "mtc console then prints a login link" test -n "$LINK"
check "the link logs in (a session cookie, then the app page)" bash -c "
    curl -s -c '$D/h2.jar' -o /dev/null '$LINK' &&
    curl -s -b '$D/h2.jar' \"\$(sed 's|console/login.*||' <<<'$LINK')\" | grep -q app.js"
check "  and without a token the TCP API answers 401" bash -c "
    [ \$(curl -s -o /dev/null -w '%{http_code}' \"\$(sed 's|console/login.*||' <<<'$LINK')v1/tokens\") = 401 ]"
mtc --home "$H2" daemon stop >/dev/null 2>&1
out=$(mtc --home "$H2" daemon start --no-listen 2>&1)
track_pid "$(cat "$H2/mtcd.pid" 2>/dev/null)"
out=$(mtc --home "$H2" console 2>&1)
check "--no-listen: mtc console says in one line what to do" bash -c \
    "[ \$(wc -l <<<'$out') = 1 ] && grep -q 'does not listen on TCP: restart it with \`mtc daemon start\`' <<<'$out'"
mtc --home "$H2" daemon stop >/dev/null 2>&1
done_testing
