#!/usr/bin/env bash
# run_custom_register: what a custom task's program trained, registered and
# served (issue 30, point 6; docs/any-framework.md, "Registering what the
# program trained"). A PyTorch program (tests/integration/gpt2_hf.py) run as
# a trainingJob on a local cluster trains a tiny GPT-2 and saves it as an HF
# directory (hand-written safetensors, vocab.json + merges.txt); with
# "register": {"path": "out/hf"} the job registers it as a version of the
# experiment's model with the run's lineage, only the HF files, and
# mtc-serve --model NAME@1 completes a prompt as the program itself does. A
# registrar token scoped to that directory uploads it and no other directory
# of the run. A missing, non-HF or linked-out directory is one log line and
# the run stays COMPLETED; bad register values are one line, nothing
# submitted. Llama and Gemma 2/3 HF exports of mtc-train, registered, are
# served too, each completing as `mtc-train sample` of its checkpoint.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/train_setup.inc"
D=$T_DIR
PY=/usr/bin/python3 # where Debian's torch is
PROG=$ROOT/tests/integration/gpt2_hf.py
M=/v1beta1/projects/local/locations/local/models
# one_error OUTPUT PATTERN: exactly one "mtc:" line, matching PATTERN
one_error() { [ "$(wc -l <<<"$1")" -eq 1 ] && grep -q '^mtc: ' <<<"$1" && grep -q -- "$2" <<<"$1"; }

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
check "mtcd starts (TCP listener for registrar tokens)" start_mtcd --listen 127.0.0.1:$PORT
t_extra_cleanup() { delete_all_clusters; }
mtc cluster create -f "$ROOT/examples/local-2node.json" --id cr >"$D/create.out" 2>&1
check "local cluster up" test $? -eq 0
run_or_stop $? "$D/create.out"
eval "$(mtc env cr)"
cd "$D" || exit 1

# recipe FILE REGISTER COMMAND-WORDS-AS-JSON: a custom recipe, one rank
recipe() {
    cat >"$1" <<JSON
{"task": "custom", "launch": {"command": $3, "tasks_per_node": 1},
 "resources": {"nodes": 1, "time": "00:10:00"}, "register": $2}
JSON
}

# --- the program's HF directory, registered by its job ---------------------------
recipe "$D/hf.json" '{"path": "out/hf", "format": "hf"}' "[\"$PY\", \"$PROG\", \"--export\", \"out/hf\"]"
mtc run -s "$D/hf.json" --experiment-name Hf_Run >"$D/hf.out" 2>&1
check "the custom job is submitted to the cluster" grep -q "^- Status: " "$D/hf.out"
run_or_stop $? "$D/hf.out"
ST=$(run_wait_final 180 Hf_Run)
check "it completes ($ST)" test "$ST" = COMPLETED
TD=$(mtc experiment status Hf_Run --json | jq_ 'd["taskDir"]')
JOB=$(mtc experiment status Hf_Run --json | jq_ 'd["jobId"]')
check "its log: registered hf-run@1 (hf), no register complaint" \
    bash -c "grep -q 'registered hf-run@1 (hf' '$TD/$JOB.log' && ! grep -q 'mtc: register:' '$TD/$JOB.log'"
mtc models show hf-run --json >"$D/v.json"
LAST=$(tail -n 1 "$TD/logs/metrics.jsonl" | jq_ 'd["loss"]')
check "a version of the experiment's model, format hf, with the run's lineage" python3 -c '
import json, sys
v = json.load(open(sys.argv[1])); l = v["lineage"]
assert v["versionId"] == "1" and v["artifact"]["format"] == "hf", v
assert (l["task"], l["experiment"], l["taskDir"], l["cluster"], l["slurmJobId"]) == \
    ("custom", "Hf_Run", sys.argv[2], "cr", sys.argv[3]), l
assert l["runId"].startswith("Hf_Run_") and l["checkpoint"] == sys.argv[2] + "/out/hf", l
assert abs(l["finalTrainLoss"] - float(sys.argv[4])) < 1e-9 and l["step"] == 150, l' \
    "$D/v.json" "$TD" "$JOB" "$LAST"
check "only the HF files are stored (not training_args.bin)" test "$(jq_ 'sorted(f["path"] for f in d["artifact"]["files"])' <"$D/v.json")" = \
    "['config.json', 'merges.txt', 'model.safetensors', 'tokenizer_config.json', 'vocab.json']"
check "mtc models show names the run" bash -c "mtc models show hf-run | grep -q '^  runId  *Hf_Run_' && mtc models show hf-run | grep -q '^  task  *custom'"
api GET "$CLUSTERS/cr/trainingJobs?pageSize=50"
check "the trainingJob names its model" python3 -c '
import json, sys
j = [j for j in json.loads(sys.argv[1])["trainingJobs"] if j.get("experimentName") == "Hf_Run"]
assert j and j[0]["model"] == "projects/local/locations/local/models/hf-run", j' "$BODY"

# --- mtc-serve serves the registered version -------------------------------------
# serve NAME MODEL-REF: mtc-serve on loopback; URL_NAME from its "serving" line
serve() {
    mtc-serve --model "$2" --listen 127.0.0.1:0 --max-batch 1 >"$D/$1.out" 2>"$D/$1.err" &
    track_pid $!
    eval "PID_$1=$!"
    wait_for 60 grep -q 'serving' "$D/$1.out"
    eval "URL_$1=http://127.0.0.1:$(sed -n 's/^mtc-serve: serving .* on 127.0.0.1:\([0-9]*\)$/\1/p' "$D/$1.out")"
}
# complete URL MODEL PROMPT N: prompt + the greedy completion, then the prompt's token count
complete() {
    curl -s "$1/v1/completions" -d "{\"model\":\"$2\",\"prompt\":\"$3\",\"max_tokens\":$4,\"temperature\":0}" |
        python3 -c 'import json,sys; r=json.load(sys.stdin); print(sys.argv[1] + r["choices"][0]["text"]); print(r["usage"]["prompt_tokens"])' "$3"
}
serve G hf-run@1
check "mtc-serve --model hf-run@1 starts" grep -q "serving hf-run@1" "$D/G.out"
WANT=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["prompt"] + r["completion"]); print(r["promptTokens"])' "$TD/result.json")
GOT=$(complete "$URL_G" hf-run@1 "the cat" 12)
check "its greedy completion is the program's own, token for token (vocab.json + merges.txt)" same "$GOT" "$WANT"
diag "served: $(head -n 1 <<<"$GOT") (the program's: $(head -n 1 <<<"$WANT"); smallest margin $(jq_ 'round(d["minMargin"], 4)' <"$TD/result.json"))"
kill -TERM "$PID_G"

# --- a registrar token reads that directory only ----------------------------------
cp -r "$TD/out/hf" "$TD/out/hf2"
api POST /v1/tokens "$(python3 -c "import json,sys; print(json.dumps({'role':'registrar','cluster':'cr','project':'local','location':'local','model':'scoped','run':sys.argv[1],'checkpoint':sys.argv[1]+'/out/hf'}))" "$TD")"
RTOK=$(jq_ 'd.get("token","")' <<<"$BODY")
check "an admin mints a registrar token for the run's out/hf as model scoped" test -n "$RTOK"
tcp() { # METHOD PATH [BODY] with the registrar token → HTTP status
    curl -s -o "$D/tcp.out" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $RTOK" \
        -H 'Content-Type: application/json' ${3:+--data-binary "$3"} "http://127.0.0.1:$PORT$2"
}
up() { echo "{\"modelId\":\"scoped\",\"model\":{\"artifactUri\":\"$1\",\"sourceRun\":\"$2\"}}"; }
check "another HF directory of the same run: 403" test "$(tcp POST "$M:upload" "$(up "$TD/out/hf2" "$TD")")" = 403
check "... the run's directory itself: 403" test "$(tcp POST "$M:upload" "$(up "$TD" "$TD")")" = 403
check "... its directory with another run as the source: 403" test "$(tcp POST "$M:upload" "$(up "$TD/out/hf" "$TD/out")")" = 403
check "its own directory: 200" test "$(tcp POST "$M:upload" "$(up "$TD/out/hf" "$TD")")" = 200
OPN=$(jq_ 'd["name"]' <"$D/tcp.out")
op_done() { tcp GET "/v1/$OPN" >/dev/null && grep -q '"done": *true' "$D/tcp.out"; }
check "... its upload's operation completes" wait_for 30 op_done
api GET "$M/scoped@1"
check "... as scoped@1, format hf" test "$(jq_ 'd["artifact"]["format"]' <<<"$BODY")" = hf

# --- what is not registered: one log line, the run COMPLETED -----------------------
# local NAME REGISTER-PATH SHELL-CODE: run SHELL-CODE (-e local) registering REGISTER-PATH
local_run() {
    recipe "$D/$1.json" "{\"path\": \"$2\"}" "[\"/bin/sh\", \"-c\", \"$3\"]"
    mtc run -e local -s "$D/$1.json" --experiment-name "$1" >"$D/$1.out" 2>&1
    local st
    st=$(run_wait_final 60 "$1")
    RUN_DIR=$(mtc experiment status "$1" --json | jq_ 'd["taskDir"]')
    LOG=$(cat "$RUN_DIR"/*.log)
    [ "$st" = COMPLETED ]
}
reg_lines() { grep -c '^mtc: register: ' <<<"$LOG"; }
check "a program that wrote no out/hf: COMPLETED" local_run nodir out/hf "mkdir -p out"
check "  one log line: no such directory, nothing registered" \
    test "$(reg_lines)" = 1 -a -n "$(grep "^mtc: register: $RUN_DIR/out/hf: no such directory" <<<"$LOG")"
check "a directory without model.safetensors: COMPLETED" local_run nothf out/hf "mkdir -p out/hf && echo {} >out/hf/config.json"
check "  one log line: not an HF directory" \
    test "$(reg_lines)" = 1 -a -n "$(grep "^mtc: register: $RUN_DIR/out/hf is not an HF directory" <<<"$LOG")"
check "a link to an HF directory outside the run: COMPLETED" local_run outside out/hf "mkdir -p out && ln -s $TD/out/hf2 out/hf"
check "  one log line: leads outside the run directory" \
    test "$(reg_lines)" = 1 -a -n "$(grep "^mtc: register: $RUN_DIR/out/hf leads outside the run directory" <<<"$LOG")"
check "none of the three registered a model" test "$(mtc --json models list | jq_ 'sorted(m["name"].split("/")[-1] for m in d["models"])')" = "['hf-run', 'scoped']"

# --- bad register values: one line, nothing submitted ------------------------------
recipe "$D/b1.json" true '["/bin/true"]'
out=$(mtc run -e local -s "$D/b1.json" --experiment-name bad1 2>&1)
check "register true for a custom task: one line" one_error "$out" "register: a custom task must name the path"
recipe "$D/b2.json" '{"path": "../elsewhere"}' '["/bin/true"]'
out=$(mtc run -s "$D/b2.json" --experiment-name bad2 2>&1)
check "a path out of the run directory (trainingJob): one line naming register.path" one_error "$out" 'register.path: "../elsewhere"'
check "nothing was submitted" test ! -e "$MTC_HOME/experiments/bad1" -a ! -e "$MTC_HOME/experiments/bad2"

# --- registered HF exports of mtc-train's Llama and Gemma ----------------------------
mkdir -p "$D/t"
train_corpus "$D/t/corpus.txt" 3
mtc-train tokenizer train --vocab-size 384 --input "$D/t/corpus.txt" --output "$D/t/tok.json" 2>/dev/null
mtc-train prepare --tokenizer "$D/t/tok.json" --input "$D/t/corpus.txt" --output "$D/t/data" \
    --val-fraction 0.1 >/dev/null 2>&1
longer_same() { same "$1" "$2" && [ ${#1} -gt 12 ]; } # the same, and more than the prompt
k=0
for preset in tiny-llama tiny-gemma2 tiny-gemma3; do
    k=$((k + 1)) # a server and output file per preset: a stopping server writes nothing into the next's
    mtc-train --model $preset --config '{"vocab_size":384}' --seq 32 --batch 8 --steps 30 --lr 3e-3 \
        --log-every 1000 --tokenizer "$D/t/tok.json" --data "$D/t/data" --checkpoint-every 30 \
        --checkpoint-dir "$D/t/$preset" >/dev/null 2>&1
    mtc-train export --checkpoint "$D/t/$preset" --format safetensors --output "$D/t/$preset-hf" 2>/dev/null &&
        out=$(mtc models upload "$D/t/$preset-hf" --name "$preset" 2>&1)
    check "$preset: its HF export is registered ($out)" grep -q "registered $preset@1 (hf" <<<"$out"
    serve "S$k" "$preset@1"
    WANT=$(mtc-train sample --checkpoint "$D/t/$preset" --prompt "the cat" --tokens 10 --temperature 0 2>/dev/null)
    eval "URL_S=\$URL_S$k PID_S=\$PID_S$k"
    GOT=$(complete "$URL_S" "$preset@1" "the cat" 10)
    GOT=${GOT%%$'\n'*}
    check "$preset@1 served: greedy completion equals mtc-train sample of the checkpoint" \
        longer_same "$GOT" "$WANT"
    diag "$preset: $GOT"
    kill -TERM "$PID_S"
done

done_testing
