#!/usr/bin/env bash
# metrics: mtcd's /metrics scraped by the real Prometheus server (Debian's
# prometheus, temp config and storage on loopback, recorded pid): PromQL says
# how many nodes are RUNNING and the current step of a running trainingJob;
# /metrics needs a token over TCP (none: 401) and a viewer's is enough; the
# job's progress (goodput) equals the chaos benchmark's ETTR formula computed
# here from the same run's log and metrics.jsonl; `mtc experiment status`
# prints it. Early problem detection: a second job whose train shard has a
# region of random tokens (out of distribution for what it learned) makes the
# loss jump; that raises one TRAINING_LOSS_SPIKE cluster event, once (GETs and
# scrapes after it add none); a bad recipe "monitor" value is a one-line 400.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR
command -v prometheus >/dev/null || { echo "1..0 # SKIP prometheus not installed (scripts/setup installs it)"; exit 0; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
start_mtcd() { # run_cluster's, on loopback TCP too
    mtcd --home "$MTC_HOME" --daemon --supervise-ms 500 --listen 127.0.0.1:$PORT || return 1
    MTCD_PID=$(cat "$MTC_HOME/mtcd.pid")
    track_pid "$MTCD_PID"
}
check "local 2-node cluster up" run_cluster mt
check "tiny corpus tokenized" run_corpus "$D/data"
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read())$1)"; }

run_recipe "$D/r.json" 4000 500
# a tiny run's 30 ms steps on shared CPUs really do slow down now and then:
# this "healthy" job's recipe makes drops and spikes lenient (docs/observability.md)
python3 -c "import json; r=json.load(open('$D/r.json')); r['monitor']={'throughput_drop': 0.05, 'spike_z': 100}; json.dump(r, open('$D/r.json', 'w'))"
api POST "$CLUSTERS/mt/trainingJobs?trainingJobId=long" \
    "$(python3 -c "import json,sys; print(json.dumps({'recipe': json.load(open('$D/r.json')), 'dataDir': '$D/data', 'experiment_name': 'metricsjob', 'nodeCount': 1}))")"
check "a long trainingJob is created" test "$HTTP_STATUS" = 200
TD=$(field '["taskDir"]' <<<"$BODY")
JOB=$(field '["slurmJobId"]' <<<"$BODY")

URL=http://127.0.0.1:$PORT/metrics
check "no token over TCP: 401" test "$(curl -s -o /dev/null -w '%{http_code}' "$URL")" = 401
VIEWER=$(mtc token create --name mt-viewer --role viewer | head -1)
printf '%s' "$VIEWER" >"$D/token"
code=$(curl -s -o "$D/m.txt" -w '%{http_code}' -H "Authorization: Bearer $VIEWER" "$URL")
check "a viewer's token may scrape: 200" test "$code" = 200
check "text exposition: nodes, clusters, requests by route" bash -c "
grep -q '^mtc_clusters{state=\"RUNNING\"} 1$' '$D/m.txt' &&
grep -q '^mtc_nodes{cluster=\"mt\",node=\"[^\"]*\",pool=\"[^\"]*\",state=\"RUNNING\"} 1$' '$D/m.txt' &&
grep -q '^mtc_api_request_duration_seconds_bucket{route=\"POST .*trainingJobs\",le=\"+Inf\"} 1$' '$D/m.txt' &&
grep -q '^# TYPE mtc_api_request_duration_seconds histogram$' '$D/m.txt'"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $VIEWER" "$URL")
check "POST /metrics: 405" test "$code" = 405

# --- the real Prometheus scrapes it ------------------------------------------
PPORT=$(free_port)
cat >"$D/prometheus.yml" <<YML
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: mtcd
    authorization: {credentials_file: $D/token}
    static_configs: [{targets: ['127.0.0.1:$PORT']}]
YML
prometheus --config.file="$D/prometheus.yml" --storage.tsdb.path="$D/prom" \
    --web.listen-address=127.0.0.1:$PPORT >"$D/prometheus.log" 2>&1 &
track_pid $!
promql() { # $1 query → the first sample's value, or nothing
    curl -s --get --data-urlencode "query=$1" "http://127.0.0.1:$PPORT/api/v1/query" |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null
}
running_nodes() { [ "$(promql 'count(mtc_nodes{cluster="mt",state="RUNNING"})')" = 3 ]; }
check "PromQL: 3 nodes RUNNING (2 compute, 1 login)" wait_for 60 running_nodes
step_seen() { S=$(promql 'mtc_experiment_step{cluster="mt",training_job="long"}'); [ -n "$S" ] && [ "$S" -gt 0 ]; }
check "PromQL: the running job's current step (> 0)" wait_for 120 step_seen
[ -n "${S:-}" ] || { diag "up: $(promql 'up')"; curl -s -H "Authorization: Bearer $VIEWER" "$URL" | grep -E '^mtc_(experiment_step|nodes)' | sed 's/^/# /'; }
LAST=$(tail -1 "$TD/logs/metrics.jsonl" 2>/dev/null | field '["step"]')
check "that step is the run's (PromQL $S, metrics.jsonl now $LAST)" test "${S:-0}" -le "${LAST:-0}" -a "${S:-0}" -gt 0
G=$(promql 'mtc_experiment_goodput{training_job="long"}')
check "PromQL: goodput in (0, 1] ($G)" python3 -c "assert 0 < float('$G') <= 1"
# (throughput_drop and stall are the machine's as much as the run's: beside
# load.sh's stress-ng a healthy run's tokens/s may fall for real)
check "alerts are exported (4 kinds), no nonfinite or loss_spike on a healthy run" \
    test "$(promql 'count(mtc_experiment_alert{training_job="long"})'):$(promql 'sum(mtc_experiment_alert{training_job="long",kind=~"nonfinite|loss_spike"})')" = 4:0
TP=$(promql 'count(mtc_experiment_time_seconds{training_job="long"})')
TS=$(promql 'sum(mtc_experiment_time_seconds{training_job="long",part="productive"})')
check "PromQL: the run's time by part (7 parts; productive $TS s > 0)" python3 -c "assert int('$TP') == 7 and float('$TS') > 0"

# --- goodput = the chaos benchmark's ETTR for the same run -------------------
# the resource is made between G0 and G1: its wall time is from the log's
# first start (whole seconds) to then
G0=$(date +%s.%N)
api GET "$CLUSTERS/mt/trainingJobs/long"
G1=$(date +%s.%N)
echo "$BODY" >"$D/job.json"
check "goodput equals the chaos formula (kept = sum 8*64/tokens_per_s; wall from the log's first start)" \
    python3 - "$D/job.json" "$TD/$JOB.log" "$TD/logs/metrics.jsonl" "$G0" "$G1" <<'PY'
import json, re, sys, datetime
p = json.load(open(sys.argv[1]))["progress"]
g0, g1 = float(sys.argv[4]), float(sys.argv[5])
text = open(sys.argv[2]).read()
start = re.search(r"^mtc: job \d+ start (\S+)", text, re.M).group(1)
t0 = datetime.datetime.strptime(start, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()
rows = [json.loads(l) for l in open(sys.argv[3]) if l.endswith("\n")]
rows = [r for r in rows if r["step"] <= p["step"]]
kept = sum(8 * 64 / r["tokens_per_s"] for r in rows if r.get("tokens_per_s"))
assert abs(kept - p["productiveSeconds"]) < 1e-6 * max(1, kept), (kept, p)
assert abs(p["goodput"] - min(1, kept / p["wallSeconds"])) < 1e-9, p
# the wall time is from the first start to the moment the resource was made:
# t0 is the start's whole second, so t0 + wall is in [made - 1, made]
assert p["wallSeconds"] > 0 and p["restarts"] == 0 and p["stepsLost"] == 0, p
made = t0 + p["wallSeconds"]
assert g0 - 1.05 <= made <= g1 + 0.05, (t0, p["wallSeconds"], made, g0, g1)
PY
mtc experiment status metricsjob >"$D/status.out"
check "mtc experiment status prints goodput and the step" grep -qE '^- Goodput: [0-9.]+% \(productive' "$D/status.out"
check "--json: the same progress object (bench/chaos.sh reads it)" bash -c \
    "mtc experiment status metricsjob --json | python3 -c 'import json,sys; p=json.load(sys.stdin)[\"progress\"]; assert p[\"wallSeconds\"] > 0 and p[\"productiveSeconds\"] > 0 and 0 < p[\"goodput\"] <= 1, p'"
api POST "$CLUSTERS/mt/trainingJobs/long:cancel"

# --- a loss spike from a doctored data shard → one cluster event -------------
cp -r "$D/data" "$D/spike"
python3 - "$D/spike/tiny" <<'PY' >"$D/doctor.out"
import glob, random, struct, sys
path = sorted(glob.glob(sys.argv[1] + "/train*"))[0]
b = bytearray(open(path, "rb").read())
width = struct.unpack_from("<I", b, 8)[0]; n = struct.unpack_from("<Q", b, 16)[0]
random.seed(3)
lo, hi = 512 * 22, 512 * 33  # the tokens of steps 23..33 (sequential, unshuffled)
assert n >= hi, (n, hi)
for i in range(lo, hi):  # uniform random ids: nothing like the corpus the model learns
    struct.pack_into("<H" if width == 2 else "<I", b, 1024 + i * width, random.randrange(320))
open(path, "wb").write(bytes(b)); print(path, n)
PY
check "train shard doctored (steps 23-33 random tokens)" test -s "$D/doctor.out"
spike_body() { # $1: the monitor section
    python3 -c "import json; r=json.load(open('$D/r.json')); r['train']['steps']=33; r['checkpoint']['every']=0
r['monitor']=json.loads('$1'); print(json.dumps({'recipe': r, 'dataDir': '$D/spike', 'experiment_name': 'spikejob', 'nodeCount': 1}))"
}
api POST "$CLUSTERS/mt/trainingJobs?trainingJobId=bad" "$(spike_body '{"spike_z": -1}')"
printf '%s\n' "$BODY" >"$D/bad.json"
check "monitor.spike_z = -1: 400 naming the field ($(head -c 200 "$D/bad.json" | tr '\n' ' '))" \
    bash -c "[ $HTTP_STATUS = 400 ] && grep -q 'monitor.spike_z' '$D/bad.json'"
api POST "$CLUSTERS/mt/trainingJobs?trainingJobId=spike" \
    "$(spike_body '{"spike_z": 4, "spike_window": 20, "throughput_drop": 0.05, "stall_factor": 1000}')"
check "the spike trainingJob is created" test "$HTTP_STATUS" = 200
STD=$(field '["taskDir"]' <<<"$BODY")
spike_done() { api GET "$CLUSTERS/mt/trainingJobs/spike"; grep -q '"state": *"\(COMPLETED\|FAILED\|CANCELLED\)"' <<<"$BODY"; }
wait_for 180 spike_done
check "the spike job ran to the end" grep -q '"COMPLETED"' <<<"$BODY"
mtc cluster events mt --json >"$D/ev.json"
spikes() { python3 -c "import json,sys; print('\n'.join(e['description'] for e in json.load(open('$1')) if e.get('eventType')=='TRAINING_LOSS_SPIKE'))"; }
spikes "$D/ev.json" >"$D/spikes.txt"
diag "event: $(grep -m1 "^trainingJob spike " "$D/spikes.txt")"
check "a TRAINING_LOSS_SPIKE event names the job and a step in the doctored region" \
    grep -qE '^trainingJob spike \(experiment spikejob\): loss spike at step (2[3-9]|3[0-3]): ' "$D/spikes.txt"
[ -s "$D/spikes.txt" ] || { diag "events:"; sed 's/^/# /' "$D/ev.json" | tail -20; tail -20 "$STD/logs/metrics.jsonl" | sed 's/^/# /'; }
api GET "$CLUSTERS/mt/trainingJobs/spike"
curl -s -H "Authorization: Bearer $VIEWER" "$URL" >/dev/null
check "a whole job monitor pass after the GET and the scrape" after_monitor 2
mtc cluster events mt --json >"$D/ev2.json"
SPK='^trainingJob spike \(experiment spikejob\): loss spike at step'
N1=$(grep -cE "$SPK" "$D/spikes.txt") N2=$(spikes "$D/ev2.json" | grep -cE "$SPK")
check "raised once: one event, and GET, scrape and monitor passes later add none ($N1, then $N2)" \
    test "$N1" = 1 -a "$N2" = 1
done_testing
