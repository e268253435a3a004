#!/usr/bin/env bash
# The web console in headless Chromium (Debian chromium + chromedriver, via
# python3-selenium): page weight (KB of HTML, CSS, JS incl. Chart.js, as mtcd
# serves them) and time to first render — first contentful paint and the time
# until the clusters list is drawn from the API — of the console's app page,
# beside the login page (a minimal page from the same mtcd) as the baseline in
# the same run. BENCH_N loads per page (5); medians. mtcd has no clusters.
. "$(dirname "$0")/lib.inc"
N=${BENCH_N:-5}
PY=/usr/bin/python3
cleanup() { bench_stop_pids; [ -n "${KEEP:-}" ] && echo "kept $W" || rm -rf "$W"; }
trap cleanup EXIT
if ! [ -x /usr/bin/chromedriver ] || ! $PY -c 'import selenium' 2>/dev/null; then
    echo "console: skipped (chromium-driver or python3-selenium missing)"; exit 0
fi
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
U=http://127.0.0.1:$PORT
bench_start_mtcd --listen 127.0.0.1:$PORT || exit 1
TOKEN=$(mtc token create --name bench --role admin --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["token"])')
size() { curl -s -o /dev/null -w '%{size_download}' "$@"; }
curl -s -c "$W/jar" -X POST -H 'X-MTC-CSRF: 1' -H "Authorization: Bearer $TOKEN" $U/console/login >/dev/null
APP=0; for p in / /console/app.js /console/style.css /console/chart.js; do APP=$((APP + $(size -b "$W/jar" $U$p))); done
LOGIN=0; for p in / /console/login.js /console/style.css; do LOGIN=$((LOGIN + $(size $U$p))); done
CHART=$(size $U/console/chart.js)
$PY - "$U" "$TOKEN" "$N" "$APP" "$LOGIN" "$CHART" <<'PY'
import statistics as st, sys
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
U, TOKEN, N, APP, LOGIN, CHART = sys.argv[1], sys.argv[2], int(sys.argv[3]), *map(int, sys.argv[4:7])
o = webdriver.ChromeOptions()
for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-proxy-server",
          "--disable-background-networking", "--disable-component-update", "--no-first-run"):
    o.add_argument(a)
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
FCP = ("const e = performance.getEntriesByName('first-contentful-paint')[0];"
       " return e ? e.startTime : null;")
def load(wait_for):
    d.get("about:blank")
    d.get(U + "/")
    WebDriverWait(d, 30, poll_frequency=0.005).until(lambda _: d.execute_script(wait_for))
    drawn = d.execute_script("return performance.now();")
    WebDriverWait(d, 10, poll_frequency=0.01).until(lambda _: d.execute_script(FCP) is not None)
    return d.execute_script(FCP), drawn
login = [load("return !!document.getElementById('token');") for _ in range(N)]
d.get(U + "/")
d.find_element(By.ID, "token").send_keys(TOKEN)
d.find_element(By.ID, "login-btn").click()
WebDriverWait(d, 30).until(lambda _: d.execute_script("return !!document.getElementById('cluster-list');"))
app = [load("const l = document.getElementById('cluster-list'); return !!(l && l.textContent);") for _ in range(N)]
d.quit()
lf, af = st.median(x[0] for x in login), st.median(x[0] for x in app)
ad = st.median(x[1] for x in app)
print(f"console page weight: app {APP/1024:.1f} KB (Chart.js {CHART/1024:.1f} KB of it), login page {LOGIN/1024:.1f} KB: {APP/LOGIN:.1f}x")
print(f"first contentful paint (median of {N}): app {af:.0f} ms, login page {lf:.0f} ms: {af/lf:.2f}x")
print(f"app: clusters list drawn from the API at {ad:.0f} ms ({ad/lf:.2f}x the login page's first paint)")
PY
