#!/usr/bin/env bash
# serve: mtc-serve on loopback with tiny models trained here (a Llama checkpoint, the same
# registered in the model registry and served as NAME@alias, and a GPT-2 Hugging Face
# export) — greedy completions equal `mtc-train sample` token for token,
# chat, SSE streams ending with [DONE], seeds, stop strings, /v1/models, /metrics, 16
# concurrent clients on 4 KV slots getting what they get alone, and every bad input an
# OpenAI-style 4xx after which the server keeps serving.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/train_setup.inc"
D=$T_DIR
export OMP_NUM_THREADS=1

train_corpus "$D/corpus.txt" 3
mtc-train tokenizer train --vocab-size 384 --input "$D/corpus.txt" --output "$D/tok.json" 2>/dev/null
mtc-train prepare --tokenizer "$D/tok.json" --input "$D/corpus.txt" --output "$D/data" --val-fraction 0.1 2>/dev/null
LCFG='{"n_layer":2,"d_model":64,"n_head":4,"n_kv_head":2,"d_ff":192,"vocab_size":384,"max_seq":128}'
GCFG='{"n_layer":2,"d_model":64,"n_head":4,"d_ff":256,"vocab_size":384,"max_seq":96}'
mtc-train --model tiny-llama --config "$LCFG" --seq 32 --batch 8 --steps 40 --lr 3e-3 --log-every 1000 \
    --tokenizer "$D/tok.json" --data "$D/data" --checkpoint-every 40 --checkpoint-dir "$D/llama" >/dev/null 2>&1
mtc-train --model tiny-gpt2 --config "$GCFG" --seq 32 --batch 8 --steps 30 --lr 3e-3 --log-every 1000 \
    --tokenizer "$D/tok.json" --data "$D/data" --checkpoint-every 30 --checkpoint-dir "$D/gpt2" >/dev/null 2>&1
mtc-train export --checkpoint "$D/gpt2" --format safetensors --output "$D/gpt2-hf" 2>/dev/null
cp "$D/tok.json" "$D/gpt2-hf/tokenizer.json"
check "tiny models trained (llama checkpoint, gpt2 HF export)" test -e "$D/gpt2-hf/model.safetensors" -a -d "$D/llama"

# start_serve NAME ARGS...: start mtc-serve, record its pid, set URL_NAME from its "serving" line
start_serve() {
    local name=$1; shift
    mtc-serve --listen 127.0.0.1:0 "$@" >"$D/$name.out" 2>"$D/$name.err" &
    track_pid $!
    eval "PID_$name=$!"
    poll_for 30 "$D/$name.out"
    wait_for 30 grep -q 'serving' "$D/$name.out"
    local port
    port=$(sed -n 's/^mtc-serve: serving .* on 127.0.0.1:\([0-9]*\)$/\1/p' "$D/$name.out")
    eval "URL_$name=http://127.0.0.1:$port"
}
start_serve L --model "$D/llama" --max-batch 4 --served-name tiny-llama
start_serve G --model "$D/gpt2-hf" --max-batch 2 --ctx 64
check "mtc-serve starts on loopback and answers /health 200" \
    test "$(curl -s -o /dev/null -w '%{http_code}' "$URL_L/health")" = 200
check "the served name defaults to the model directory's name" \
    grep -q '"id":"gpt2-hf"' <(curl -s "$URL_G/v1/models")

# py URL CODE...: run python with the server's URL as U and helpers post/get
py() {
    local url=$1; shift
    python3 - "$url" <<PY
import json, sys, urllib.request, urllib.error, concurrent.futures
U = sys.argv[1]
def req(path, body=None, raw=None, method=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    r = urllib.request.Request(U + path, data=data, method=method,
                               headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=60) as f:
            return f.status, f.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
def post(path, body):
    code, text = req(path, body)
    assert code == 200, (code, text)
    return json.loads(text)
$*
PY
}

# a registered version: mtcd's registry (upload, alias), mtc-serve --model NAME@alias
check "mtcd starts (the model registry)" start_mtcd
mtc models upload "$D/llama" --name tiny-serve >/dev/null 2>&1 && mtc models alias tiny-serve@1 prod >/dev/null 2>&1
check "the llama checkpoint is registered as tiny-serve@prod" test $? -eq 0
start_serve R --model tiny-serve@prod --max-batch 2
check "a registry reference is served under its name" grep -q '"id":"tiny-serve@prod"' <(curl -s "$URL_R/v1/models")
want=$(mtc-train sample --checkpoint "$D/llama" --prompt "the cat" --tokens 12 --temperature 0 2>/dev/null)
got=$(curl -s "$URL_R/v1/completions" -d '{"model":"tiny-serve@prod","prompt":"the cat","max_tokens":12,"temperature":0}' |
    python3 -c 'import json,sys; print("the cat" + json.load(sys.stdin)["choices"][0]["text"])')
check "tiny-serve@prod: greedy completion equals mtc-train sample of the checkpoint" same "$got" "$want"
# every reference that resolves to the served version names it (issue 28):
# NAME (NAME@default), NAME@1, NAME@prod; another version or alias does not
code_for() { curl -s -o /dev/null -w '%{http_code}' "$URL_R/v1/completions" \
    -d "{\"model\":\"$1\",\"prompt\":\"the\",\"max_tokens\":1}"; }
codes() { local m; for m in "$@"; do printf '%s ' "$(code_for "$m")"; done; }
check "the model's own name, NAME@1, NAME@prod and NAME@default are all served (200)" \
    test "$(codes tiny-serve tiny-serve@1 tiny-serve@prod tiny-serve@default)" = "200 200 200 200 "
check "a version it does not serve: 404" test "$(code_for tiny-serve@2)" = 404
check "/v1/models lists the served name, the canonical id and the aliases, root NAME@1" python3 -c '
import json, sys, urllib.request
d = json.load(urllib.request.urlopen(sys.argv[1] + "/v1/models"))["data"]
ids = [x["id"] for x in d]
assert ids[0] == "tiny-serve@prod" and ids[1] == "tiny-serve@1", ids
assert set(ids) == {"tiny-serve@prod", "tiny-serve@1", "tiny-serve", "tiny-serve@default"}, ids
assert all(x["root"] == "tiny-serve@1" for x in d), d' "$URL_R"
mtc models upload "$D/llama" --name tiny-serve >/dev/null 2>&1 && mtc models alias tiny-serve@2 default >/dev/null 2>&1
check "default moved to version 2: NAME and NAME@default no longer name it (404), NAME@1 still does" \
    test "$(codes tiny-serve tiny-serve@default tiny-serve@1)" = "404 404 200 "
kill -TERM "$PID_R"
mtc-serve --model tiny-serve@nope --listen 127.0.0.1:0 >/dev/null 2>"$D/err0"
check "an unknown alias: exit 1 naming it" grep -q "no alias nope" "$D/err0"

for fam in L G; do
    url=URL_$fam; url=${!url}
    model=$([ $fam = L ] && echo "$D/llama" || echo "$D/gpt2")
    name=$([ $fam = L ] && echo tiny-llama || echo gpt2-hf)
    for prompt in "the cat" "a small bird looked at"; do
        want=$(mtc-train sample --checkpoint "$model" --prompt "$prompt" --tokens 20 --temperature 0 2>/dev/null)
        got=$(py "$url" "print('$prompt' + post('/v1/completions', {'model': '$name', 'prompt': '$prompt', 'max_tokens': 20, 'temperature': 0})['choices'][0]['text'])")
        check "$fam: greedy completion of '$prompt' equals mtc-train sample" same "$got" "$want"
        diag "$fam: $got"
    done
done

# --dtype: bf16 and q8_0 weights (and bf16 KV cache) serve the same model; greedy text compared
start_serve B --model "$D/gpt2-hf" --max-batch 1 --ctx 64 --dtype bf16
start_serve Q --model "$D/gpt2-hf" --max-batch 1 --ctx 64 --dtype q8_0
check "--dtype q8_0: the startup line and /v1/models say q8_0" \
    test -n "$(grep 'serving gpt2-hf (q8_0 weights) on' "$D/Q.out")" -a \
    "$(curl -s "$URL_Q/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["dtype"])')" = q8_0
for dt in B Q; do
    url=URL_$dt; url=${!url}
    agree=$(python3 - "$URL_G" "$url" <<'PY'
import json, sys, urllib.request
def text(u):
    body = json.dumps({"model": "gpt2-hf", "prompt": "a small bird looked at", "max_tokens": 24,
                       "temperature": 0}).encode()
    r = urllib.request.Request(u + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r, timeout=60))["choices"][0]["text"]
a, b = text(sys.argv[1]), text(sys.argv[2])
n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
print(n, len(a))
PY
)
    diag "--dtype $([ $dt = B ] && echo bf16 || echo q8_0): greedy text agrees with f32 for ${agree% *} of ${agree#* } characters"
    check "--dtype $([ $dt = B ] && echo bf16 || echo q8_0): a greedy completion is served (agrees with f32 for ${agree% *} of ${agree#* } characters)" \
        test "${agree% *}" -gt 0
done
kill "$PID_B" "$PID_Q"
mtc-serve --model "$D/gpt2-hf" --listen 127.0.0.1:0 --dtype fp16 >/dev/null 2>"$D/err4"
rc=$?
check "--dtype fp16: exit 2 with one line naming it" \
    test $rc -eq 2 -a "$(wc -l <"$D/err4")" -eq 1 -a -n "$(grep -- '--dtype fp16' "$D/err4")"

check "completion: usage counts, finish_reason length, OpenAI shape" py "$URL_L" "
r = post('/v1/completions', {'model': 'tiny-llama', 'prompt': 'the cat', 'max_tokens': 7, 'seed': 1})
assert r['object'] == 'text_completion' and r['model'] == 'tiny-llama' and r['id'].startswith('cmpl-'), r
c = r['choices'][0]
assert c['finish_reason'] == 'length' and c['index'] == 0, c
u = r['usage']
assert u['prompt_tokens'] == 3 and u['completion_tokens'] == 7 and u['total_tokens'] == 10, u
"
check "same seed, same text; another seed, other text" py "$URL_L" "
b = {'model': 'tiny-llama', 'prompt': 'the', 'max_tokens': 24, 'temperature': 1.0, 'seed': 5}
a1 = post('/v1/completions', b)['choices'][0]['text']
a2 = post('/v1/completions', b)['choices'][0]['text']
b['seed'] = 6
a3 = post('/v1/completions', b)['choices'][0]['text']
assert a1 == a2 and a1 != a3, (a1, a2, a3)
"
check "stop strings end the text before them (finish_reason stop)" py "$URL_L" "
r = post('/v1/completions', {'model': 'tiny-llama', 'prompt': 'the cat', 'max_tokens': 40, 'temperature': 0, 'stop': ['.', 'zzz']})
full = post('/v1/completions', {'model': 'tiny-llama', 'prompt': 'the cat', 'max_tokens': 40, 'temperature': 0})['choices'][0]['text']
c = r['choices'][0]
assert '.' in full and c['text'] == full[:full.index('.')] and c['finish_reason'] == 'stop', (c, full)
"
check "chat completion: an assistant message with usage" py "$URL_L" "
r = post('/v1/chat/completions', {'model': 'tiny-llama', 'messages': [{'role': 'system', 'content': 'be brief'}, {'role': 'user', 'content': 'the cat'}], 'max_tokens': 6, 'seed': 2})
m = r['choices'][0]['message']
assert r['object'] == 'chat.completion' and m['role'] == 'assistant' and isinstance(m['content'], str), r
assert r['usage']['completion_tokens'] == 6 and r['usage']['prompt_tokens'] > 6, r
"
check "SSE stream: OpenAI chunks, the same text as without, usage, ending with [DONE]" py "$URL_L" "
b = {'model': 'tiny-llama', 'prompt': 'the dog', 'max_tokens': 12, 'seed': 9}
want = post('/v1/completions', b)['choices'][0]['text']
b.update(stream=True, stream_options={'include_usage': True})
code, text = req('/v1/completions', b)
events = [e for e in text.split('\n\n') if e]
assert code == 200 and events[-1] == 'data: [DONE]', text
chunks = [json.loads(e[6:]) for e in events[:-1]]
got = ''.join(c['choices'][0]['text'] for c in chunks if c['choices'])
assert got == want, (got, want)
assert chunks[-2]['choices'][0]['finish_reason'] == 'length' and chunks[-1]['usage']['completion_tokens'] == 12
assert all(c['object'] == 'text_completion' and c['id'] == chunks[0]['id'] for c in chunks)
"
# seeded (an unseeded sample may end on the end token, finishing "stop"): what OpenAI's
# API promises — a first chunk with the role only, the non-streamed text, a finish_reason
# that fits the token count
check "chat SSE stream: chat.completion.chunk deltas ending with [DONE] (role first, the non-streamed text, finish_reason fits the token count)" py "$URL_L" "
b = {'model': 'tiny-llama', 'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': 5, 'seed': 3}
r = post('/v1/chat/completions', b)
want, wfin, wn = r['choices'][0]['message']['content'], r['choices'][0]['finish_reason'], r['usage']['completion_tokens']
b.update(stream=True, stream_options={'include_usage': True})
code, text = req('/v1/chat/completions', b)
events = [e for e in text.split('\n\n') if e and not e.startswith(':')]  # ': keep-alive' comments aside
assert code == 200 and events[-1] == 'data: [DONE]' and all(e.startswith('data: ') for e in events), text
chunks = [json.loads(e[6:]) for e in events[:-1]]
assert all(c['object'] == 'chat.completion.chunk' and c['id'] == chunks[0]['id'] for c in chunks), text
ch = [c['choices'][0] for c in chunks if c['choices']]
assert ch[0]['delta'] in ({'role': 'assistant'}, {'role': 'assistant', 'content': ''}), ch[0]
assert ch[0]['finish_reason'] is None and all('role' not in c['delta'] for c in ch[1:]), ch
got = ''.join(c['delta'].get('content', '') for c in ch)
assert got == want, (got, want)
fin, n = ch[-1]['finish_reason'], chunks[-1]['usage']['completion_tokens']
assert all(c['finish_reason'] is None for c in ch[:-1]), ch
assert (fin == 'length' and n == 5) or (fin == 'stop' and 1 <= n <= 5), (fin, n)
assert (fin, n) == (wfin, wn), (fin, n, wfin, wn)
"
# 16 clients at once on 4 KV slots (the rest wait in the queue): each gets what it gets alone
check "16 concurrent clients on 4 slots all succeed with their single-request text" py "$URL_L" "
bodies = [{'model': 'tiny-llama', 'prompt': ['the cat', 'a dog', 'my friend ran', 'the'][i % 4],
           'max_tokens': 10 + i, 'seed': 100 + i, 'temperature': 0.9, 'top_k': [0, 40][i % 2],
           'top_p': [1, 0.9][i // 8]} for i in range(16)]
alone = [post('/v1/completions', b)['choices'][0]['text'] for b in bodies]
with concurrent.futures.ThreadPoolExecutor(16) as ex:
    together = list(ex.map(lambda b: post('/v1/completions', b)['choices'][0]['text'], bodies))
assert alone == together, [(a, t) for a, t in zip(alone, together) if a != t]
"
check "/metrics: token totals, latency and TTFT histograms, running, waiting, KV use" py "$URL_L" "
code, text = req('/metrics')
m = {}
for line in text.splitlines():
    if line and not line.startswith('#'):
        k, v = line.rsplit(' ', 1)
        m[k] = float(v)
assert code == 200 and m['mtc_serve_prompt_tokens_total'] > 50 and m['mtc_serve_generation_tokens_total'] > 300, m
assert m['mtc_serve_request_duration_seconds_count'] >= 40 and m['mtc_serve_time_to_first_token_seconds_count'] >= 40
assert m['mtc_serve_requests_running'] == 0 and m['mtc_serve_requests_waiting'] == 0
assert m['mtc_serve_kv_cache_slots'] == 4 and m['mtc_serve_kv_cache_usage_ratio'] == 0 and m['mtc_serve_kv_cache_bytes'] > 0
assert m['mtc_serve_request_duration_seconds_bucket{le=\"+Inf\"}'] == m['mtc_serve_request_duration_seconds_count']
"

# bad input: an OpenAI-style error with the right 4xx, then the server still serves
bad() {
    local what=$1 code=$2 path=$3 body=$4 method=${5:-POST}
    check "bad input ($what) → $code with an OpenAI error naming it" py "$URL_L" "
code, text = req('$path', raw=$body, method='$method')
e = json.loads(text)['error']
assert code == $code and e['code'] == $code and e['type'] and e['message'], (code, text)
print('# ' + e['message'])
"
}
long=$(python3 -c "print('the cat sat. ' * 80)")
bad "invalid JSON" 400 /v1/completions "b'{\"model\": \"tiny-llama\", \"prompt\": '"
bad "body not an object" 400 /v1/completions "b'[1, 2]'"
bad "empty body" 400 /v1/completions "b''"
bad "unknown model" 404 /v1/completions "json.dumps({'model': 'nope', 'prompt': 'x'}).encode()"
bad "prompt longer than the context" 400 /v1/completions "json.dumps({'model': 'tiny-llama', 'prompt': '$long'}).encode()"
bad "prompt plus max_tokens beyond the context" 400 /v1/completions "json.dumps({'model': 'tiny-llama', 'prompt': 'the cat', 'max_tokens': 126}).encode()"
bad "max_tokens 0" 400 /v1/completions "json.dumps({'model': 'tiny-llama', 'prompt': 'x', 'max_tokens': 0}).encode()"
bad "max_tokens -5" 400 /v1/chat/completions "json.dumps({'model': 'tiny-llama', 'messages': [{'role': 'user', 'content': 'x'}], 'max_tokens': -5}).encode()"
bad "temperature a string" 400 /v1/completions "json.dumps({'model': 'tiny-llama', 'prompt': 'x', 'temperature': 'hot'}).encode()"
bad "stream not a boolean" 400 /v1/completions "json.dumps({'model': 'tiny-llama', 'prompt': 'x', 'stream': 'yes'}).encode()"
bad "prompt a number" 400 /v1/completions "json.dumps({'model': 'tiny-llama', 'prompt': 7}).encode()"
bad "messages not an array" 400 /v1/chat/completions "json.dumps({'model': 'tiny-llama', 'messages': 'hi'}).encode()"
bad "unknown role" 400 /v1/chat/completions "json.dumps({'model': 'tiny-llama', 'messages': [{'role': 'robot', 'content': 'x'}]}).encode()"
bad "unknown field" 400 /v1/completions "json.dumps({'model': 'tiny-llama', 'prompt': 'x', 'best_of': 3}).encode()"
bad "token id outside the vocabulary" 400 /v1/completions "json.dumps({'model': 'tiny-llama', 'prompt': [1, 99999]}).encode()"
bad "top_p 0" 400 /v1/completions "json.dumps({'model': 'tiny-llama', 'prompt': 'x', 'top_p': 0}).encode()"
bad "body over the limit" 413 /v1/completions "json.dumps({'model': 'tiny-llama', 'prompt': 'x' * 2000000}).encode()"
bad "unknown route" 404 /v1/engines "None" GET
bad "GET on a POST route" 405 /v1/completions "None" GET
# slow clients (issue 26): 8 connections from 127.0.0.2 start a request and
# trickle a byte every 0.3 s. Only 3 are taken (the per-address cap, at accept:
# no thread for the others), a client at another address is served at once
# meanwhile, and each held one gets 408 within the 2 s request deadline plus
# a watchdog pass, then is closed.
start_serve S --model "$D/gpt2-hf" --max-batch 1 --ctx 64 --max-connections 12 \
    --max-connections-per-ip 3 --request-timeout 2
check "slow clients: capped per address before a thread is taken, 408 at the deadline, others served" \
    python3 - "$URL_S" "$PID_S" <<'PY'
import socket, sys, time, urllib.request
U, pid = sys.argv[1], int(sys.argv[2])
port = int(U.rsplit(":", 1)[1])
def threads():
    with open(f"/proc/{pid}/status") as f:
        return int(next(l for l in f if l.startswith("Threads:")).split()[1])
base = threads()
slow = []
for i in range(8):
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    s.connect(("127.0.0.1", port))
    try:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    except OSError:
        pass
    s.setblocking(False)
    slow.append(s)
time.sleep(0.5)
held = threads() - base
t0 = time.time()
with urllib.request.urlopen(U + "/health", timeout=5) as r:
    code, lat = r.status, time.time() - t0
got, when = {}, {}
start = time.time()
while time.time() - start < 8 and len(got) < len(slow):
    for i, s in enumerate(slow):
        if i in got:
            continue
        try:
            s.send(b"X")
        except OSError:
            pass
        try:
            data = s.recv(4096)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        got[i], when[i] = data, time.time() - start
    time.sleep(0.3)
timed_out = sorted(round(when[i], 1) for i, d in got.items() if d.startswith(b"HTTP/1.1 408"))
refused = [i for i, d in got.items() if d == b""]
print(f"# threads +{held} for 8 slow connections; /health {code} in {lat:.3f} s; "
      f"408 after {timed_out} s; {len(refused)} refused")
assert held <= 3, held
assert code == 200 and lat < 1.5, (code, lat)
assert len(timed_out) == 3 and all(1.0 <= t <= 4.5 for t in timed_out), got
assert len(refused) == 5, got
assert b'"code":408' in next(d for d in got.values() if d.startswith(b"HTTP/1.1 408"))
PY
check "and the server still serves after them" \
    test "$(curl -s -o /dev/null -w '%{http_code}' "$URL_S/health")" = 200
check "after all that the server still serves" py "$URL_L" "
assert req('/health')[0] == 200
r = post('/v1/completions', {'model': 'tiny-llama', 'prompt': 'the cat', 'max_tokens': 3})
assert r['usage']['completion_tokens'] == 3
"
kill -0 "$PID_L" 2>/dev/null
check "the server process is still running" test $? -eq 0

kill -TERM "$PID_L"
for _ in $(seq 50); do kill -0 "$PID_L" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$PID_L" 2>/dev/null
check "SIGTERM stops mtc-serve" test $? -eq 0
mtc-serve --model "$D/nowhere" --listen 127.0.0.1:0 >/dev/null 2>"$D/err1"
check "a missing model: exit 1 with one line" test $? -eq 1 -a "$(wc -l <"$D/err1")" -eq 1
mtc-serve --model "$D/llama" --listen nohost:80 >/dev/null 2>"$D/err2"
check "a bad --listen: exit 1 naming it" grep -q -- "--listen nohost:80" "$D/err2"
mtc-serve --model "$D/llama" --listen 127.0.0.1:0 --ctx 1000 >/dev/null 2>"$D/err3"
check "--ctx beyond the model: exit 1 naming it" grep -q -- "--ctx 1000" "$D/err3"
done_testing
