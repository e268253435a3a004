#!/usr/bin/env bash
# An endpoint on a cluster on hosts (docs/endpoints.md, "On hosts"): one
# replica of a tiny Llama runs on a namespace test host (mtc-serve as the
# hosts provider copied it, the model staged on the shared experiment root);
# the same completions go to it directly (the controller to the host's
# address) and through mtcd (unix socket; TCP with a token, on the address
# the hosts reach mtcd at), interleaved in the same run
# (bench/endpoint_latency.py): p50/p99 of BENCH_N (300) sequential requests,
# max_tokens 1, and of BENCH_N from 8 concurrent clients. Traffic: loopback
# and the test hosts' private bridge only; everything is torn down on exit.
BENCH_NAME=endpoint_hosts
. "$(dirname "$0")/hosts.inc"
N=${BENCH_N:-300}
export OMP_NUM_THREADS=1

testhosts_up 1 || fail "test hosts did not come up"
PORT=$(free_port)
start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT" || fail "mtcd did not start"
cat >"$T_DIR/spec.json" <<JSON
{"ssh": {"keyFile": "$TESTHOSTS_KEY"},
 "experimentRoot": "$T_DIR/shared",
 "nodePools": [{"id": "cpu", "machineSpec": {"machineType": "host"},
   "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1},
   "hosts": ["${TESTHOSTS_ADDRS[1]}"]}]}
JSON
mkdir -p "$T_DIR/shared"
mtc cluster create -f "$T_DIR/spec.json" --id beh || fail "create failed"
python3 - "$T_DIR/corpus.txt" <<'PY'
import random, sys
random.seed(1)
w = "the cat a dog sat on ran to the mat a red house".split()
open(sys.argv[1], "w").write(" ".join(random.choice(w) for _ in range(20000)))
PY
mtc-train tokenizer train --vocab-size 320 --input "$T_DIR/corpus.txt" --output "$T_DIR/tok.json" &&
    mtc-train prepare --tokenizer "$T_DIR/tok.json" --input "$T_DIR/corpus.txt" \
        --output "$T_DIR/data" --val-fraction 0.1 &&
    mtc-train --model tiny-llama --config '{"n_layer":2,"d_model":64,"n_head":4,"n_kv_head":2,"d_ff":192,"vocab_size":320,"max_seq":128}' \
        --seq 32 --batch 8 --steps 5 --tokenizer "$T_DIR/tok.json" --data "$T_DIR/data" \
        --checkpoint-every 5 --checkpoint-dir "$T_DIR/ck" --log-every 1000 ||
    fail "training the tiny model failed"
mtc models upload "$T_DIR/ck" --name tiny || fail "upload failed"
mtc endpoints create bench || fail "endpoint create failed"
mtc endpoints deploy bench --model tiny --cluster beh --min 1 --max 1 || fail "deploy failed"
TOKEN=$(mtc --json token create --name bench --role viewer | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
python3 "$ROOT/bench/endpoint_latency.py" "$MTC_HOME/mtcd.sock" "$PORT" "$TOKEN" "$N" \
    /v1beta1/projects/local/locations/local/endpoints/bench "$TESTHOSTS_CTL_ADDR" >&3 ||
    fail "the measurement failed"
echo "(load average before: $LOAD0, after: $(cut -d' ' -f1-3 /proc/loadavg))" >&3
mtc endpoints delete bench
mtc cluster delete beh || fail "delete failed"
T_FAILED=0
