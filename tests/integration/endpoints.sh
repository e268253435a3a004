#!/usr/bin/env bash
# endpoints: inference endpoints on a local 2-node cluster — a tiny model
# trained here and registered, deployed through mtcd (replicas are Slurm jobs
# of mtc-serve): 200 completions from 16 concurrent clients through
# …/endpoints/E/v1/completions all succeed while replicas scale up, one
# replica's job killed with SIGKILL mid-load is retried around and replaced,
# a hung one (SIGSTOP) is kept for a moment and replaced after 10 s,
# replicas go back to the minimum when idle; an 80/20 split measured over 500
# requests; mtcd's other requests are not held up by the proxied ones; bad
# input in one line (google.rpc) with nothing changed, OpenAI errors passed
# through; a restarted mtcd adopts the replicas; undeploy and delete stop
# the jobs.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/train_setup.inc"
D=$T_DIR
export OMP_NUM_THREADS=1

check "local 2-node cluster up" run_cluster ep
train_corpus "$D/corpus.txt" 3
mtc-train tokenizer train --vocab-size 320 --input "$D/corpus.txt" --output "$D/tok.json" 2>/dev/null
mtc-train prepare --tokenizer "$D/tok.json" --input "$D/corpus.txt" --output "$D/data" --val-fraction 0.1 2>/dev/null
LCFG='{"n_layer":2,"d_model":64,"n_head":4,"n_kv_head":2,"d_ff":192,"vocab_size":320,"max_seq":128}'
mtc-train --model tiny-llama --config "$LCFG" --seq 32 --batch 8 --steps 10 --lr 3e-3 --log-every 1000 \
    --tokenizer "$D/tok.json" --data "$D/data" --checkpoint-every 10 --checkpoint-dir "$D/ck" >/dev/null 2>&1
check "tiny model trained and registered twice (tiny@1, tiny@2)" \
    bash -c "mtc models upload '$D/ck' --name tiny >/dev/null && mtc models upload '$D/ck' --name tiny >/dev/null"

E=/v1beta1/projects/local/locations/local/endpoints
one_line_rpc() { # $1 HTTP status, $2 substring of the message
    [ "$HTTP_STATUS" = "$1" ] && python3 - "$BODY" "$2" <<'PY'
import json, sys
e = json.loads(sys.argv[1])["error"]
assert e["code"] == int(e["code"]) and e["status"] and "\n" not in e["message"], e
assert sys.argv[2] in e["message"], e
PY
}
# ready ENDPOINT DEPLOYED N: the deployed model has exactly N replicas, all READY
ready() {
    api GET "$E/$1"
    python3 -c "
import json,sys; d=[x for x in json.loads(sys.argv[1])['deployedModels'] if x['id']==sys.argv[2]][0]
sys.exit(0 if len(d['replicas'])==int(sys.argv[3]) and d['readyReplicaCount']==int(sys.argv[3]) else 1)" "$BODY" "$2" "$3"
}

out=$(mtc endpoints create chat --display-name "tiny chat" 2>&1)
check "mtc endpoints create" grep -q "created endpoint chat" <<<"$out"
out=$(mtc endpoints deploy chat --model tiny@default --cluster ep --min 2 --max 3 --target 1 --scale-down-delay 2 2>&1)
check "mtc endpoints deploy: tiny@default pinned to tiny@1 as d1" grep -q "deployed tiny@1 as d1 on endpoint chat (cluster ep, 2-3 replicas)" <<<"$out"
check "the minimum, 2 replicas, become READY (their Slurm jobs listen, /health 200)" wait_for 120 ready chat d1 2
JOB1=$(api GET "$E/chat"; jq_ 'd["deployedModels"][0]["replicas"][0]["slurmJobId"]' <<<"$BODY")
check "the replica is a Slurm job (mtc-endpoint-chat in squeue)" bash -c "squeue -h -o '%i %j' | grep -qx '$JOB1 mtc-endpoint-chat'"
out=$(mtc endpoints predict chat "the cat" --max-tokens 8 --seed 1 2>&1)
check "mtc endpoints predict prints a completion" test $? -eq 0 -a -n "$out"

# --- load: 16 requests in flight; scale up; SIGKILL one replica --------------
# (target 1 request per replica: 16 clients with no pause between their
# requests hold 16 in flight whatever a request takes — a load that depends
# on how fast requests complete left an idle machine at 2 replicas. The load
# lasts until the deployment reached its maximum and a replica was killed,
# and at least 200 requests; at most 150 s.)
python3 - "$MTC_HOME/mtcd.sock" "$E/chat" >"$D/load.out" 2>&1 <<'PY'
import http.client, json, os, re, socket, subprocess, sys, threading, time, concurrent.futures
SOCK, EP = sys.argv[1], sys.argv[2]
class UC(http.client.HTTPConnection):
    def __init__(s): super().__init__("localhost", timeout=120)
    def connect(s):
        s.sock = socket.socket(socket.AF_UNIX); s.sock.settimeout(120); s.sock.connect(SOCK)
def call(method, path, body=None):
    c = UC(); t = time.time()
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse(); data = r.read(); c.close()
    return r.status, data, time.time() - t, r.getheader("X-Mtc-Replica")
state = {"max": 0, "killed": None, "before": set(), "replacement": None, "slow": 0.0, "done": False}
def monitor():
    while not state["done"]:
        st, data, dt, _ = call("GET", EP)
        state["slow"] = max(state["slow"], dt)
        d = json.loads(data)["deployedModels"][0]
        ready = [r for r in d["replicas"] if r["state"] == "READY"]
        state["max"] = max(state["max"], len(d["replicas"]))
        if state["killed"] is None and len(ready) >= 2:
            state["killed"] = ready[0]
            state["before"] = set(r["id"] for r in d["replicas"])
            # kill -9 the replica's mtc-serve: the process listening on its port
            port = ready[0]["address"].rsplit(":", 1)[1]
            ss = subprocess.run(["ss", "-ltnpH", "sport = :" + port], capture_output=True, text=True).stdout
            m_ = re.search(r"pid=(\d+)", ss)
            state["how"] = "kill -9 %s" % m_.group(1) if m_ else "scancel -s KILL"
            if m_: os.kill(int(m_.group(1)), 9)
            else: subprocess.run(["scancel", "--full", "--signal=KILL", ready[0]["slurmJobId"]])
        time.sleep(0.2)
m = threading.Thread(target=monitor); m.start()
res, lock, t0 = [], threading.Lock(), time.time()
def enough():
    return (len(res) >= 200 and state["max"] >= 3 and state["killed"] is not None) or \
        time.time() - t0 > 150
def client():
    while not enough():
        st, data, dt, rep = call("POST", EP + "/v1/completions",
                                 {"prompt": "the cat sat", "max_tokens": 100, "temperature": 0})
        ok = st == 200 and json.loads(data)["choices"][0]["text"] is not None
        with lock:
            res.append((ok, rep, (st, data[:200])))
ts = [threading.Thread(target=client) for _ in range(16)]
[t.start() for t in ts]
[t.join() for t in ts]
state["done"] = True; m.join()
print("requests", len(res))
print("succeeded", sum(1 for r in res if r[0]))
print("seconds", round(time.time() - t0, 1))
print("replicas_max", state["max"])
k = state["killed"]
print("killed", k["id"] if k else "none", k["slurmJobId"] if k else "", state.get("how", ""))
print("before", " ".join(sorted(state["before"])))
print("served_by", len(set(r[1] for r in res)))
print("slowest_get", round(state["slow"], 3))
for r in [r for r in res if not r[0]][:3]:
    print("failed", r[2])
PY
sed 's/^/# /' "$D/load.out"
N=$(awk '/^requests/{print $2}' "$D/load.out")
check "${N:-no} requests (at least 200) from 16 concurrent clients all succeed" \
    bash -c "[ '${N:-0}' -ge 200 ] && grep -qx 'succeeded $N' '$D/load.out'"
check "replicas scale up under the load (to the maximum, 3)" grep -qx "replicas_max 3" "$D/load.out"
KILLED=$(awk '/^killed/{print $2}' "$D/load.out")
check "a READY replica's job was killed with SIGKILL mid-load ($KILLED)" test -n "$KILLED" -a "$KILLED" != none
# replaced: 2 READY replicas again (the minimum), none of them the killed one, one started after the kill
replaced() {
    api GET "$E/chat"
    python3 -c "
import json,sys; d=json.loads(sys.argv[1])['deployedModels'][0]
ready=[r['id'] for r in d['replicas'] if r['state']=='READY']
sys.exit(0 if len(ready)>=2 and sys.argv[2] not in ready and set(ready)-set(sys.argv[3].split()) else 1)" "$BODY" "$KILLED" "$(sed -n 's/^before //p' "$D/load.out")"
}
check "the killed replica is replaced by a new READY one" wait_for 60 replaced
check "mtcd's own requests were not held up by the proxied ones (GET endpoint < 2 s)" \
    awk '/^slowest_get/{exit !($2 < 2)}' "$D/load.out"
api GET "$CLUSTERS/ep"
check "the lost replica is an event of the cluster (its job gone, or /health failing)" python3 -c "
import json,sys; ev=json.loads(sys.argv[1])['clusterEvents']
assert any(e['eventType'] in ('ENDPOINT_REPLICA_LOST','ENDPOINT_REPLICA_UNHEALTHY') and 'replica '+sys.argv[2]+' ' in e['description'] for e in ev), ev[-5:]" "$BODY" "$KILLED"
check "idle: back to the minimum (2 READY replicas)" wait_for 60 ready chat d1 2

# --- a hung replica (SIGSTOP): kept through a moment without answers, replaced
# once /health has failed over 10 s -----------------------------------------
read -r HUNG HADDR <<<"$(api GET "$E/chat"; jq_ '" ".join([[r["id"], r["address"]] for r in d["deployedModels"][0]["replicas"] if r["state"]=="READY"][0])' <<<"$BODY")"
HPID=$(ss -ltnpH "sport = :${HADDR##*:}" | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)
check "replica $HUNG's mtc-serve found (pid ${HPID:-none})" test -n "$HPID"
[ -n "$HPID" ] && kill -STOP "$HPID"
still_there() { api GET "$E/chat"; grep -q "\"id\": *\"$HUNG\"" <<<"$BODY"; }
check "two controller passes after SIGSTOP, each finding /health silent" after_endpoint_ticks 2
check "... it is still a replica (a moment without answers is not a hang)" still_there
hung_gone() {
    api GET "$CLUSTERS/ep"
    python3 -c "
import json,re,sys; ev=json.loads(sys.argv[1])['clusterEvents']
m=[re.search(r'over (\d+) s', e['description']) for e in ev if e['eventType']=='ENDPOINT_REPLICA_UNHEALTHY' and 'replica '+sys.argv[2]+' ' in e['description']]
sys.exit(0 if m and m[-1] and int(m[-1].group(1)) >= 10 else 1)" "$BODY" "$HUNG"
}
check "... then replaced: ENDPOINT_REPLICA_UNHEALTHY after /health failed over >= 10 s" wait_for 60 hung_gone
[ -n "$HPID" ] && kill -CONT "$HPID" 2>/dev/null
check "back to 2 READY replicas" wait_for 90 ready chat d1 2

# --- traffic split 80/20 over 500 requests ------------------------------------
api POST "$E/chat:deployModel" '{"deployedModel":{"model":"tiny@2","cluster":"ep","minReplicaCount":1},"trafficSplit":{"d1":80,"0":20}}'
check "deploy tiny@2 beside it with trafficSplit d1=80, new=20" test "$HTTP_STATUS" = 200 -a "$(jq_ 'd["endpoint"]["trafficSplit"]' <<<"$BODY")" = "{'d1': 80, 'd2': 20}"
check "d2's replica becomes READY" wait_for 120 ready chat d2 1
python3 - "$MTC_HOME/mtcd.sock" "$E/chat" >"$D/split.out" <<'PY'
import http.client, json, socket, sys, collections
SOCK, EP = sys.argv[1], sys.argv[2]
class UC(http.client.HTTPConnection):
    def __init__(s): super().__init__("localhost", timeout=60)
    def connect(s):
        s.sock = socket.socket(socket.AF_UNIX); s.sock.connect(SOCK)
n = collections.Counter(); models = collections.Counter()
c = UC()
for i in range(500):
    c.request("POST", EP + "/v1/completions", body=json.dumps({"prompt": "a dog", "max_tokens": 1}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse(); raw = r.read(); data = json.loads(raw)
    n[r.getheader("X-Mtc-Deployed-Model") if r.status == 200 else "error"] += 1
    models[data.get("model")] += 1
    if r.status != 200 and n["error"] == 1:
        print("failed", i, r.status, raw[:300].decode(errors="replace"))
print("d1", n["d1"]); print("d2", n["d2"]); print("errors", n["error"])
print("models", models["tiny@1"], models["tiny@2"])
PY
sed 's/^/# /' "$D/split.out"
check "80/20 split within ±5% over 500 requests" awk '/^d1 /{a=$2} /^d2 /{b=$2} END{exit !(a+b==500 && a>=375 && a<=425)}' "$D/split.out"
check "each answer names the version that served it (tiny@1 / tiny@2)" \
    awk '/^models /{exit !($2+$3==500)}' "$D/split.out"

api PATCH "$E/chat?updateMask=trafficSplit" '{"trafficSplit":{"d1":30,"d2":70}}'
check "PATCH trafficSplit d1=30, d2=70" test "$HTTP_STATUS" = 200 -a "$(jq_ 'd["trafficSplit"]' <<<"$BODY")" = "{'d1': 30, 'd2': 70}"
n2=0
for i in $(seq 20); do
    h=$(curl -s -o /dev/null -D - --unix-socket "$MTC_HOME/mtcd.sock" -H 'Content-Type: application/json' \
        -d '{"prompt":"a","max_tokens":1}' "http://localhost$E/chat/v1/completions" | tr -d '\r' | sed -n 's/^X-Mtc-Deployed-Model: //p')
    [ "$h" = d2 ] && n2=$((n2 + 1))
done
check "... the next 20 requests follow it (d2: $n2 of 20)" test "$n2" -eq 14
api PATCH "$E/chat" '{"trafficSplit":{"d1":80,"d2":20}}'
check "PATCH back to 80/20" test "$HTTP_STATUS" = 200

# --- mtcd restarts: the replicas are adopted, not restarted ------------------
IDS=$(api GET "$E/chat"; jq_ 'sorted(r["slurmJobId"] for x in d["deployedModels"] for r in x["replicas"])' <<<"$BODY")
kill -TERM "$MTCD_PID"
wait_for 20 bash -c "! kill -0 $MTCD_PID"
check "mtcd restarts" start_mtcd
out=$(mtc endpoints predict chat "the cat" --max-tokens 4 2>&1)
rc=$?
diag "$out"
check "right after the restart the endpoint answers (routing from the store)" test $rc -eq 0 -a -n "$out"
check "two whole passes of the restarted endpoints controller (where it would restart replicas)" after_endpoint_ticks 2
check "... through the same replicas' jobs (adopted, none restarted)" \
    test "$(api GET "$E/chat"; jq_ 'sorted(r["slurmJobId"] for x in d["deployedModels"] for r in x["replicas"])' <<<"$BODY")" = "$IDS"

# --- bad input: one line, nothing changed --------------------------------------
BEFORE=$(api GET "$E/chat"; jq_ '(d["trafficSplit"], [x["id"] for x in d["deployedModels"]])' <<<"$BODY")
api POST "$E/chat:deployModel" '{"deployedModel":{"model":"ghost","cluster":"ep"}}'
check "unknown model: 404, one line" one_line_rpc 404 "ghost"
api POST "$E/chat:deployModel" '{"deployedModel":{"model":"tiny@nope","cluster":"ep"}}'
check "unknown alias: 404, one line" one_line_rpc 404 "nope"
api POST "$E/chat:deployModel" '{"deployedModel":{"model":"tiny@1","cluster":"ep"},"trafficSplit":{"d1":80,"d2":30,"0":0}}'
check "split summing to 110: 400, one line" one_line_rpc 400 "sum to 110, not 100"
api POST "$E/chat:deployModel" '{"deployedModel":{"model":"tiny@1","cluster":"ep"},"trafficSplit":{"d9":100}}'
check "split naming no deployed model: 400" one_line_rpc 400 '"d9" is not a model deployed'
api POST "$E/chat:deployModel" '{"deployedModel":{"model":"tiny@1","cluster":"Bad_Cluster"}}'
check "bad cluster name: 400" one_line_rpc 400 "deployedModel.cluster"
api POST "$E/chat:deployModel" '{"deployedModel":{"model":"tiny@1","cluster":"ep","minReplicaCount":3,"maxReplicaCount":2}}'
check "max below min: 400" one_line_rpc 400 "maxReplicaCount (2) is below minReplicaCount (3)"
api POST "$E/chat:deployModel" '{"deployedModel":{"model":"../etc","cluster":"ep"}}'
check "bad model name: 400" one_line_rpc 400 "deployedModel.model"
api POST "$E/chat:deployModel" '{"deployedModel":{"model":"tiny","cluster":"ep","partition":"nopart"}}'
check "unknown partition: 400" one_line_rpc 400 "no partition nopart"
api PATCH "$E/chat" '{"trafficSplit":{"d1":50,"d2":40}}'
check "PATCH a split summing to 90: 400" one_line_rpc 400 "sum to 90, not 100"
api PATCH "$E/chat?updateMask=deployedModels" '{"trafficSplit":{"d1":50,"d2":50}}'
check "PATCH an output-only field: 400" one_line_rpc 400 "only displayName and trafficSplit"
api POST "$E?endpointId=Bad_Name" '{}'
check "bad endpoint name: 400" one_line_rpc 400 'endpoint "Bad_Name"'
api POST "$E?endpointId=chat" '{}'
check "the same endpoint again: 409" one_line_rpc 409 "already exists"
api POST "$E/Bad_Name/v1/completions" '{"prompt":"x"}'
check "a routed request to a bad name: 400" one_line_rpc 400 'endpoint "Bad_Name"'
api POST "$E/ghost/v1/completions" '{"prompt":"x"}'
check "a routed request to an unknown endpoint: 404" one_line_rpc 404 "ghost"
out=$(mtc endpoints deploy chat --model tiny@nope --cluster ep 2>&1)
check "mtc endpoints deploy with an unknown alias: one line" bash -c "[ \$(wc -l <<<'$out') -eq 1 ] && grep -q '^mtc: .*nope' <<<'$out'"
AFTER=$(api GET "$E/chat"; jq_ '(d["trafficSplit"], [x["id"] for x in d["deployedModels"]])' <<<"$BODY")
check "nothing changed by the bad requests" same "$BEFORE" "$AFTER"
api POST "$E/chat/v1/completions" '{"prompt":"the cat","max_tokens":0}'
check "OpenAI-style errors pass through (max_tokens 0: 400 {error:{message,type}})" python3 -c "
import json,sys; e=json.loads(sys.argv[1])['error']; assert sys.argv[2]=='400' and e['message'] and e['type'], e" "$BODY" "$HTTP_STATUS"
out=$(curl -sN --unix-socket "$MTC_HOME/mtcd.sock" -H 'Content-Type: application/json' \
    -d '{"prompt":"the cat","max_tokens":4,"stream":true}' "http://localhost$E/chat/v1/completions")
# (the text is the model's: passed as an argument, never spliced into the code)
check "streaming passes through (SSE ending with data: [DONE])" \
    bash -c 'grep -q "^data: {" <<<"$0" && tail -n 2 <<<"$0" | grep -q "^data: \[DONE\]"' "$out" ||
    diag "what came back: $(head -c 600 <<<"$out")"

# --- list, undeploy, delete ---------------------------------------------------
out=$(mtc endpoints list 2>&1)
check "mtc endpoints list: both deployed models with their split" bash -c "grep -qE '^chat +d1 +tiny@1 +ep +80%' <<<'$out' && grep -qE '^chat +d2 +tiny@2 +ep +20%' <<<'$out'"
JOB2=$(api GET "$E/chat"; jq_ '[r["slurmJobId"] for x in d["deployedModels"] if x["id"]=="d2" for r in x["replicas"]][0]' <<<"$BODY")
out=$(mtc endpoints undeploy chat d2 2>&1)
check "mtc endpoints undeploy chat d2" grep -q "undeployed d2 from endpoint chat" <<<"$out"
api GET "$E/chat"
check "... d1 gets 100%" test "$(jq_ 'd["trafficSplit"]' <<<"$BODY")" = "{'d1': 100}"
check "... its job leaves the queue" wait_for 120 absent "^$JOB2\$" -- squeue -h -o %i
mtc endpoints delete chat >/dev/null 2>&1
check "delete: every replica's job leaves the queue" wait_for 120 absent mtc-endpoint-chat -- squeue -h -o %j
api GET "$E/chat"
check "... and the endpoint is gone (404)" test "$HTTP_STATUS" = 404
done_testing
