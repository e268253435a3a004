#!/usr/bin/env python3
"""console_browser: the browser half of console.sh — one headless Chromium
session (Debian chromium + chromedriver through selenium), bounded waits,
screenshots into ART. Prints TAP-ish "# ..." lines and exits non-zero on the
first failure. Args: URL ADMIN_TOKEN VIEWER_TOKEN ART JOB_JSON LOCAL_SPEC."""
import http.server, json, os, sys, threading, time, urllib.request
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

URL, ADMIN, VIEWER, ART, JOB, SPEC = sys.argv[1:7]
CL = "/v1beta1/projects/local/locations/local/modelDevelopmentClusters"

opts = webdriver.ChromeOptions()
for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
          "--window-size=1280,1000", "--no-proxy-server", "--disable-background-networking",
          "--disable-component-update", "--disable-sync", "--no-first-run"):
    opts.add_argument(a)
opts.binary_location = "/usr/bin/chromium"
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
n = 0


def ok(desc):
    global n
    n += 1
    print(f"# browser ok {n} - {desc}", flush=True)


def shot(name):
    d.save_screenshot(os.path.join(ART, name + ".png"))


def wait(secs, cond, what):
    try:
        return WebDriverWait(d, secs, poll_frequency=0.5).until(lambda _: safe(cond))
    except Exception:
        shot("FAILED-" + what.replace(" ", "_")[:40])
        print(f"# browser FAILED: {what}\n# page: {d.current_url}\n# "
              + d.find_element(By.TAG_NAME, "body").text[:1500].replace("\n", "\n# "), flush=True)
        d.quit()
        sys.exit(1)


def text(id_):  # via JS: the views re-render, so a held element goes stale
    return d.execute_script("const e = document.getElementById(arguments[0]);"
                            " return e ? e.textContent : '';", id_)


def safe(cond):
    try:
        return cond()
    except Exception:  # a re-rendered element: try again at the next poll
        return False


def login(token):
    d.get(URL + "/")
    wait(20, lambda: d.find_elements(By.ID, "token"), "login page")
    d.find_element(By.ID, "token").send_keys(token)
    d.find_element(By.ID, "login-btn").click()
    wait(20, lambda: text("who") != "", "logged in")


def api(method, path, body=None, token=ADMIN):
    req = urllib.request.Request(URL + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


try:
    # 1. log in with an admin token
    login(ADMIN)
    wait(10, lambda: text("who") == "admin", "role shown")
    shot("01-clusters-empty")
    ok("logged in with a token")

    # 2. a bad node count: the API's one-line error next to the field, nothing created
    wait(10, lambda: d.find_elements(By.ID, "create-form"), "create form")
    d.find_element(By.ID, "new-id").send_keys("badcount")
    n_in = d.find_element(By.ID, "new-nodes")
    n_in.clear()
    n_in.send_keys("-3")
    d.find_element(By.ID, "create-btn").click()
    wait(20, lambda: text("err-nodes"), "field error next to the node count")
    msg = text("err-nodes")
    assert "\n" not in msg and "NodeCount" in msg, msg
    shot("02-field-error")
    assert "badcount" not in json.dumps(api("GET", CL)[1]), "a cluster was created"
    ok("bad node count: field error: " + msg)

    # 3. create from the local 2-node reference architecture; see it RUNNING
    d.get(URL + "/#/clusters")
    d.refresh()  # a fresh page: no view of the last step still rendering
    wait(10, lambda: d.find_elements(By.ID, "create-form") and d.find_elements(By.ID, "new-arch")
         and len(Select(d.find_element(By.ID, "new-arch")).options) > 1, "create form again")
    d.find_element(By.ID, "new-id").send_keys("web")
    Select(d.find_element(By.ID, "new-arch")).select_by_value("local-2node")
    d.find_element(By.ID, "create-btn").click()
    wait(30, lambda: d.find_elements(By.CSS_SELECTOR, "a[href='#/clusters/web']"), "the new cluster in the list")
    d.get(URL + "/#/clusters/web")
    wait(300, lambda: text("cluster-state") == "RUNNING", "cluster RUNNING")
    wait(30, lambda: any(w in text("view").lower() for w in ("idle", "alloc", "mix")), "nodes with their Slurm state")
    shot("03-cluster-running")
    ok("local 2-node cluster created from the reference architecture is RUNNING")

    # 4. a running tiny recipe: its loss chart gets new points
    st, job = api("POST", CL + "/web/trainingJobs?trainingJobId=webjob", json.load(open(JOB)))
    assert st == 200, job
    # the cluster page's Slurm queue lists the job Slurm runs for it (issue 31, point 4)
    d.get(URL + "/#/clusters/web")

    def queued():  # the job's row (id slurm-job-N) shows its state and user
        global sj
        sj = api("GET", CL + "/web/trainingJobs/webjob")[1].get("slurmJobId", "")
        row = text("slurm-job-" + sj) if sj else ""
        return ("RUNNING" in row or "PENDING" in row) and "root" in row
    sj = ""
    wait(60, queued, "the training job's Slurm job in the cluster's Slurm queue")
    print("# slurm queue row: " + text("slurm-job-" + sj), flush=True)
    ok(f"the cluster page's Slurm queue lists Slurm job {sj} with its user and state")
    d.get(URL + "/#/runs/web/webjob")
    pts = lambda: int(d.execute_script("const c = document.getElementById('chart-loss');"
                                        " return c ? c.dataset.points : 0;") or 0)
    wait(240, lambda: text("run-state") == "RUNNING" and pts() > 0, "run RUNNING with loss points")
    first = pts()
    shot("04-run-chart-first")
    wait(120, lambda: pts() > first, "the loss chart gets new points while the job runs")
    assert text("run-state") in ("RUNNING", "COMPLETED"), text("run-state")
    assert "null" not in text("run-status"), text("run-status")
    wait(20, lambda: text("run-goodput").endswith("%"), "the run's goodput shown")
    wait(20, lambda: " productive " in text("run-time"), "and where its time went (queue, startup, productive ...)")
    print("# run status: " + text("run-status"), flush=True)
    shot("05-run-chart-more")
    ok(f"loss chart grew from {first} to {pts()} points while RUNNING; goodput {text('run-goodput')}")
    api("POST", CL + "/web/trainingJobs/webjob:cancel")

    # 5. the cookie is not sent cross-site: a link from http://localhost (another
    # site than 127.0.0.1) opens the login page, not the app
    port = int(URL.rsplit(":", 1)[1])
    page = f'<!doctype html><a id="go" href="{URL}/">console</a>' \
           f'<form id="f" method="POST" action="{URL}{CL}?modelDevelopmentClusterId=xsite"></form>'.encode()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    d.get(f"http://localhost:{srv.server_address[1]}/")
    d.find_element(By.ID, "go").click()
    wait(20, lambda: d.find_elements(By.ID, "token"), "cross-site navigation lands on the login page")
    shot("06-cross-site-login")
    d.get(f"http://localhost:{srv.server_address[1]}/")
    d.execute_script("document.getElementById('f').submit()")
    time.sleep(2)
    assert "xsite" not in json.dumps(api("GET", CL)[1]), "a cross-site form created a cluster"
    d.get(URL + "/")
    wait(20, lambda: text("who") == "admin", "same-site the session still works")
    ok("session cookie not sent cross-site (login page; a cross-site form POST created nothing)")
    srv.shutdown()

    # 6. a viewer: no create form, no delete button; the API refuses a delete
    d.find_element(By.ID, "logout").click()
    wait(20, lambda: d.find_elements(By.ID, "token"), "logged out")
    login(VIEWER)
    wait(10, lambda: text("who") == "viewer" and d.find_elements(By.ID, "cluster-list"), "viewer clusters page")
    time.sleep(1)
    assert not d.find_elements(By.ID, "create-form")
    d.get(URL + "/#/clusters/web")
    wait(30, lambda: text("cluster-state") != "", "viewer cluster page")
    assert not d.find_elements(By.ID, "delete-btn")
    status = d.execute_async_script(
        "const cb = arguments[arguments.length - 1]; fetch(arguments[0], {method: 'DELETE', credentials: 'same-origin',"
        " headers: {'X-MTC-CSRF': '1'}}).then(r => cb(r.status));", URL + CL + "/web")
    assert status == 403, status
    shot("07-viewer")
    ok("viewer: no create form, no delete button, DELETE refused (403)")
finally:
    d.quit()
print(f"# browser: {n} checks passed", flush=True)
