#!/usr/bin/env bash
# agent: mtc-agent end to end — `check --json` against the fake NVML library,
# exit codes, config-file errors, --drain through scontrol, and the `run`
# loop reporting to a small HTTP receiver (TCP + bearer token, and a unix
# socket) where a GPU broken while the agent runs shows up within seconds.
. "$(dirname "$0")/lib.sh"

FAKES=$B/fakes
STATE=$T_DIR/nvml.state
KLOG=$T_DIR/kern.log
export FAKE_NVML_STATE=$STATE
printf 'count 2\n' >"$STATE"
: >"$KLOG"
mkdir -p "$T_DIR/shared" "$T_DIR/local" "$T_DIR/ckpt"

cat >"$T_DIR/agent.json" <<EOF
{"nodeId": "n1", "clusterId": "c1", "project": "local", "location": "local",
 "homeDir": "$T_DIR/shared", "local_dir": "$T_DIR/local", "checkpointDir": "$T_DIR/ckpt",
 "nvmlLibrary": "$FAKES/libnvml.so", "kernelLog": "$KLOG", "expectedGpus": 2,
 "healthPolicy": {"checks": ["gpu", "disk", "sdc"], "reportEverySeconds": 30}}
EOF
AG=(mtc-agent check --config "$T_DIR/agent.json")

# --- one-shot checks -----------------------------------------------------
out=$("${AG[@]}" --json); rc=$?
check "check --json exits 0 when all pass" [ "$rc" -eq 0 ]
names=$(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["nodeId"], ",".join(r["check"]+"="+r["status"] for r in d["results"]))')
check "check --json lists the policy's checks, all PASS" \
    [ "$names" = "n1 gpu.count=PASS,gpu.ecc=PASS,gpu.remap=PASS,gpu.temp=PASS,gpu.throttle=PASS,gpu.xid=PASS,disk=PASS,sdc=PASS" ]

printf 'count 2\ngpu 1 ecc=4\n' >"$STATE"
out=$("${AG[@]}" --json); rc=$?
check "check exits 1 on a FAIL" [ "$rc" -eq 1 ]
ecc=$(printf '%s' "$out" | python3 -c 'import json,sys; r=[r for r in json.load(sys.stdin)["results"] if r["check"]=="gpu.ecc"][0]; print(r["status"], r["severity"], int(r["value"]), r["reason"])')
check "gpu.ecc FAILs with REBOOT and the count" [ "$ecc" = "FAIL REBOOT 4 GPU 1: 4 volatile uncorrected ECC errors (max 0)" ]

printf 'unreachable 1\n' >"$STATE"
out=$("${AG[@]}" --only gpu.count); rc=$?
check "NVML unreachable with GPUs expected FAILs" \
    eval '[ "$rc" -eq 1 ] && [[ "$out" == *"NVML not reachable: nvmlInit: Driver Not Loaded"* ]]'
out=$(mtc-agent check --only gpu --nvml "$T_DIR/no-such-libnvml.so" 2>&1); rc=$?
check "GPU-less host (no NVML, no GPUs expected) passes" [ "$rc" -eq 0 ]

err=$(mtc-agent check --config "$T_DIR/agent.json" --only gpu,nosuch 2>&1 >/dev/null); rc=$?
want='mtc-agent: unknown check "nosuch" (see `mtc-agent checks`)'
check "unknown --only name: exit 2, one line" eval '[ "$rc" -eq 2 ] && [ "$err" = "$want" ]'
echo '{"nodeId": "n1", "healthPolicy": {"diskMinFreePercent": 250}}' >"$T_DIR/bad.json"
err=$(mtc-agent check --config "$T_DIR/bad.json" 2>&1 >/dev/null); rc=$?
want="mtc-agent: $T_DIR/bad.json: healthPolicy.diskMinFreePercent: must be a number from 0 to 100"
check "bad healthPolicy in config: one line naming the field" eval '[ "$rc" -eq 2 ] && [ "$err" = "$want" ]'

# --drain: the agent drains its own node through scontrol (a recording stand-in here)
mkdir -p "$T_DIR/bin"
cat >"$T_DIR/bin/scontrol" <<EOF
#!/bin/sh
printf '%s|' "\$SLURM_CONF" "\$@" >"$T_DIR/scontrol.args"
EOF
chmod +x "$T_DIR/bin/scontrol"
printf 'count 2\ngpu 0 remap_failure=1\n' >"$T_DIR/nvml2.state"
FAKE_NVML_STATE=$T_DIR/nvml2.state PATH=$T_DIR/bin:$PATH SLURMD_NODENAME=n7 \
    mtc-agent check --config "$T_DIR/agent.json" --only gpu --drain >/dev/null
check "--drain runs scontrol update with the check and reason" \
    [ "$(cat "$T_DIR/scontrol.args" 2>/dev/null)" = "|update|nodename=n7|state=drain|reason=mtc-agent: gpu.remap: GPU 0: row remapping failed (0 uncorrectable rows remapped)|" ]

# silent data corruption: the agent itself under a faulty fma() (LD_PRELOAD)
out=$(LD_PRELOAD=$FAKES/libbadfma.so ASAN_OPTIONS=verify_asan_link_order=0 \
    mtc-agent check --only sdc); rc=$?
check "sdc FAILs REPLACE under a faulty fma()" \
    eval '[ "$rc" -eq 1 ] && [[ "$out" == *"FAIL  sdc            REPLACE  silent data corruption: digest"* ]]'

# prolog mode adds DCGM's diagnostic (a stand-in dcgmi that reports a failure)
printf 'count 2\n' >"$STATE"
out=$(mtc-agent check --config "$T_DIR/agent.json" --only gpu); rc=$?
check "outside the prolog gpu.dcgm does not run" eval '[ "$rc" -eq 0 ] && [[ "$out" != *gpu.dcgm* ]]'
out=$(SLURM_SCRIPT_CONTEXT=prolog_slurmd mtc-agent check --config "$T_DIR/agent.json" --only gpu.dcgm); rc=$?
check "in the prolog without DCGM, gpu.dcgm is skipped" eval '[ "$rc" -eq 0 ] && [[ "$out" == *"skipped: DCGM not installed"* ]]'
cat >"$T_DIR/bin/dcgmi" <<'EOF2'
#!/bin/sh
echo "| Memory                    | Fail - GPU 1 memory test found errors |"
exit 226
EOF2
chmod +x "$T_DIR/bin/dcgmi"
out=$(PATH=$T_DIR/bin:$PATH mtc-agent check --config "$T_DIR/agent.json" --mode prolog --only gpu); rc=$?
check "prolog: dcgmi diag failure FAILs gpu.dcgm with its line" \
    eval '[ "$rc" -eq 1 ] && [[ "$out" == *"FAIL  gpu.dcgm       REPLACE  dcgmi diag -r 1 failed (exit 226): | Memory"*"Fail - GPU 1 memory test found errors |"* ]]'

# --- the run loop reporting to a receiver ---------------------------------
cat >"$T_DIR/recv.py" <<'EOF'
import http.server, json, os, socketserver, sys, time
log = sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(log, "a") as f:
            f.write(json.dumps({"path": self.path, "auth": self.headers.get("Authorization"),
                                "body": json.loads(body), "t": time.time()}) + "\n")
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
    def address_string(self): return "peer"
addr = sys.argv[1]
if addr.startswith("/"):
    class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer): pass
    S(addr, H).serve_forever()
else:
    http.server.ThreadingHTTPServer(("127.0.0.1", int(addr)), H).serve_forever()
EOF
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$T_DIR/recv.py" "$PORT" "$T_DIR/tcp.log" & track_pid $!
wait_for 300 python3 -c "import socket; socket.create_connection(('127.0.0.1',$PORT))"

printf 'count 2\n' >"$STATE"
# the fake NVML counts the agent's passes (one nvmlInit_v2 each) in CALLS
export FAKE_NVML_CALLS=$T_DIR/nvml.calls
: >"$FAKE_NVML_CALLS"
passes() { wc -l <"$FAKE_NVML_CALLS"; }
# after_agent_passes N: wait until the agent has made N more passes
after_agent_passes() { local n0; n0=$(passes); wait_for 300 eval "[ \"\$(passes)\" -ge $((n0 + $1)) ]"; }
MTC_TOKEN=secret-token mtc-agent run --config "$T_DIR/agent.json" --url "http://127.0.0.1:$PORT" \
    --interval-ms 200 2>"$T_DIR/agent.log" & AGENT=$!; track_pid $AGENT

# last report's status of a check: last_status LOG CHECK
last_status() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
st = "none"
for line in open(sys.argv[1]):
    for r in json.loads(line)["body"]["results"]:
        if r["check"] == sys.argv[2]: st = r["status"] + "/" + r["severity"]
print(st)
EOF
}
export -f last_status
wait_for 10 test -s "$T_DIR/tcp.log"
first=$(head -1 "$T_DIR/tcp.log" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["path"], d["auth"], d["body"]["nodeId"], d["body"]["mode"], len(d["body"]["results"]), sorted(d["body"]), sorted(d["body"]["results"][0]))')
check "run reports to :reportHealth with the bearer token and the body shape" \
    [ "$first" = "/v1beta1/projects/local/locations/local/modelDevelopmentClusters/c1:reportHealth Bearer secret-token n1 HEALTH 8 ['mode', 'nodeId', 'results'] ['check', 'reason', 'severity', 'status', 'value']" ]
check "the agent makes 4 more passes" after_agent_passes 4
n_quiet=$(wc -l <"$T_DIR/tcp.log")
check "nothing changed: no report every pass ($n_quiet after $(passes) passes at 200 ms)" [ "$n_quiet" -le 2 ]

t0=$(date +%s.%N)
printf 'count 2\ngpu 0 temp=99\n' >"$STATE"
wait_for 300 bash -c "[ \"\$(last_status '$T_DIR/tcp.log' gpu.temp)\" = FAIL/REPLACE ]"
# the pass under way when the state changed may have read it before: the
# next one reports it — at most 2 passes begun between the change and the
# report's arrival (the fake's and the receiver's clocks are this machine's)
read -r np dt < <(python3 - "$T_DIR/tcp.log" "$FAKE_NVML_CALLS" "$t0" <<'PY'
import json, sys
t0 = float(sys.argv[3])
rep = [json.loads(l) for l in open(sys.argv[1])]
t1 = min(r["t"] for r in rep if r["t"] > t0 and any(x["check"] == "gpu.temp" and x["status"] == "FAIL" for x in r["body"]["results"]))
starts = [float(l.split()[1]) for l in open(sys.argv[2])]
print(sum(t0 < s < t1 for s in starts), round(t1 - t0, 2))
PY
)
check "a GPU overheating while the agent runs is reported by the next pass (${np:-?} passes begun, $dt s)" \
    eval '[ "$(last_status "$T_DIR/tcp.log" gpu.temp)" = FAIL/REPLACE ] && [ "${np:-9}" -le 2 ]'

echo "[ 5.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=42, name=python, GPU has fallen off the bus." >>"$KLOG"
wait_for 300 bash -c "[ \"\$(last_status '$T_DIR/tcp.log' gpu.xid)\" = FAIL/REBOOT ]"
check "an XID appended to the kernel log is reported as FAIL/REBOOT" \
    [ "$(last_status "$T_DIR/tcp.log" gpu.xid)" = FAIL/REBOOT ]

printf 'count 2\n' >"$STATE"
wait_for 300 bash -c "[ \"\$(last_status '$T_DIR/tcp.log' gpu.temp)\" = PASS/NONE ]"
check "recovery is reported too" [ "$(last_status "$T_DIR/tcp.log" gpu.temp)" = PASS/NONE ]

kill -TERM $AGENT; for _ in $(seq 50); do kill -0 $AGENT 2>/dev/null || break; sleep 0.1; done
wait $AGENT; rc=$?
check "run stops cleanly on SIGTERM" [ "$rc" -eq 0 ]

# the unix-socket transport, and a receiver that is down at first (retried)
SOCK=$T_DIR/mtcd.sock
mtc-agent run --config "$T_DIR/agent.json" --socket "$SOCK" --interval-ms 200 \
    2>"$T_DIR/agent2.log" & AGENT=$!; track_pid $AGENT
# the receiver starts once the agent has found it down
check "the agent tried the absent receiver" wait_for 300 grep -q "cannot reach mtcd at $SOCK" "$T_DIR/agent2.log"
python3 "$T_DIR/recv.py" "$SOCK" "$T_DIR/unix.log" & track_pid $!
wait_for 300 test -s "$T_DIR/unix.log"
check "unix socket: the report arrives once mtcd answers (no token sent)" \
    [ "$(head -1 "$T_DIR/unix.log" 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["auth"], d["body"]["nodeId"])')" = "None n1" ]
check "an unreachable mtcd is logged in one line" grep -q "cannot reach mtcd at $SOCK" "$T_DIR/agent2.log"
mtc-agent check --config "$T_DIR/agent.json" --socket "$SOCK" --mode prolog --report --only disk >/dev/null
check "check --mode prolog --report sends mode PROLOG" \
    [ "$(tail -1 "$T_DIR/unix.log" | python3 -c 'import json,sys; d=json.load(sys.stdin)["body"]; print(d["mode"], [r["check"] for r in d["results"]])')" = "PROLOG ['disk']" ]

# nothing changes, yet mtcd hears from the node at least every reportEverySeconds
kill -TERM $AGENT; wait $AGENT 2>/dev/null
sed 's/"reportEverySeconds": 30/"reportEverySeconds": 1/' "$T_DIR/agent.json" >"$T_DIR/agent-1s.json"
: >"$T_DIR/unix.log"
: >"$FAKE_NVML_CALLS"
mtc-agent run --config "$T_DIR/agent-1s.json" --socket "$SOCK" --interval-ms 200 \
    2>"$T_DIR/agent3.log" & AGENT=$!; track_pid $AGENT
# 16 passes, each begun at least 200 ms after the one before: a report at the
# first and then at least every 5th pass (5 x 200 ms = 1 s) — whatever the
# load, the passes that ended (all but the last begun) made at least
# (P - 2) / 5 + 1 reports; and no two reports less than a second of pass
# starts apart: at most 1 + (last start - first start) / 1 s
wait_for 300 eval '[ "$(passes)" -ge 16 ]'
kill -STOP $AGENT
P=$(passes) n=$(wc -l <"$T_DIR/unix.log")
SPAN=$(awk 'NR == 1 { a = $2 } { b = $2 } END { printf "%.3f", b - a }' "$FAKE_NVML_CALLS")
kill -CONT $AGENT; kill -TERM $AGENT; wait $AGENT 2>/dev/null
check "unchanged results are still reported every reportEverySeconds (1 s: $n reports in $P passes)" \
    eval '[ "$n" -ge $(( (P - 2) / 5 + 1 )) ]'
check "  and no more often ($n reports, passes over $SPAN s)" \
    python3 -c 'import sys; n, span = int(sys.argv[1]), float(sys.argv[2]); sys.exit(not n <= 1 + int(span // 1.0))' "$n" "$SPAN"

done_testing
