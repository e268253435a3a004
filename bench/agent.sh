#!/usr/bin/env bash
# mtc-agent cost: wall time and CPU time (user+sys) of one pass of every
# check (fake NVML with 8 GPUs, a kernel-log file, munged when installed),
# the per-check breakdown, and what the `run` loop costs a node at the
# default 5 s interval (speed probes rerun every 300 s). Baseline in the same run: exec of /bin/true.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${MTC_BUILD:-$ROOT/build}
W=$(mktemp -d /tmp/mtc-bench-agent.XXXXXX)
MUNGED=""
cleanup() {
    [ -n "$MUNGED" ] && kill "$MUNGED" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
printf 'count 8\n' >"$W/nvml.state"
: >"$W/kern.log"
echo $$ >"$W/slurmd.pid"
MUNGE=""
if command -v munged >/dev/null; then
    head -c 1024 /dev/urandom >"$W/munge.key"; chmod 600 "$W/munge.key"
    munged --socket="$W/munge.sock" --key-file="$W/munge.key" --pid-file="$W/munged.pid" \
        --log-file="$W/munged.log" --seed-file="$W/munge.seed" --force &&
        MUNGED=$(cat "$W/munged.pid") && MUNGE=", \"mungeSocket\": \"$W/munge.sock\""
fi
cat >"$W/agent.json" <<JSON
{"nodeId": "n1", "homeDir": "$W", "localDir": "/tmp", "nvmlLibrary": "$B/fakes/libnvml.so",
 "kernelLog": "$W/kern.log", "expectedGpus": 8, "slurmdPidFile": "$W/slurmd.pid"$MUNGE}
JSON
export FAKE_NVML_STATE=$W/nvml.state
python3 - "$B/bin/mtc-agent" "$W/agent.json" <<'PY'
import resource, statistics, subprocess, sys, time
agent, cfg = sys.argv[1], sys.argv[2]
def measure(argv, n):
    walls, cpus = [], []
    for _ in range(n):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3
N = 9
tw, tc = measure(["/bin/true"], N)
aw, ac = measure([agent, "check", "--config", cfg], N)
print(f"baseline exec of /bin/true: {tw:.1f} ms wall, {tc:.1f} ms CPU")
print(f"agent pass, all checks (median of {N}): {aw:.0f} ms wall, {ac:.0f} ms CPU "
      f"({aw / max(tw, 0.01):.0f}x an exec of true)")
# the loop reruns the speed probes only every probeIntervalSeconds (300 s)
lw, lc = measure([agent, "check", "--config", cfg, "--only", "gpu,disk,nic,sdc,daemon"], N)
sw, sc = measure([agent, "check", "--config", cfg, "--only", "speed"], N)
print(f"pass without the speed probes: {lw:.0f} ms wall, {lc:.0f} ms CPU; speed probes: {sw:.0f} ms wall, {sc:.0f} ms CPU")
# the real loop: a receiver in this process, the agent reporting to it
import http.server, os, signal, threading
class H(http.server.BaseHTTPRequestHandler):
    posts = 0
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        H.posts += 1
        self.send_response(200); self.end_headers()
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
tick = os.sysconf("SC_CLK_TCK")
def cpu_ms(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in f[11:15]) * 1000 / tick  # self + reaped children (munge)
p = subprocess.Popen([agent, "run", "--config", cfg, "--cluster", "b1", "--interval-ms", "250",
                      "--url", f"http://127.0.0.1:{srv.server_address[1]}"],
                     stderr=subprocess.DEVNULL)
time.sleep(1.5)             # first pass includes the speed probes
c0, t0 = cpu_ms(p.pid), time.time()
time.sleep(5)
c1, t1 = cpu_ms(p.pid), time.time()
p.send_signal(signal.SIGTERM); p.wait()
passes = (t1 - t0) / 0.25
per = (c1 - c0) / passes
print(f"run loop (in-process, probes cached): {per:.1f} ms CPU per pass, {H.posts} reports; "
      f"at the default 5 s interval with probes every 300 s: "
      f"{(per / 5e3 + sc / 300e3) * 100:.2f}% of one core")
print("per check (median wall / CPU, ms, process start included):")
checks = subprocess.run([agent, "checks"], capture_output=True, text=True).stdout.split("\n")
for line in checks:
    if not line.strip():
        continue
    name = line.split()[0]
    w, c = measure([agent, "check", "--config", cfg, "--only", name], 5)
    print(f"  {name:14s} {w:7.1f} {c:7.1f}")
PY
