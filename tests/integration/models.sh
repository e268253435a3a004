#!/usr/bin/env bash
# The model registry on a fresh MTC_HOME: a real tiny `mtc run -e local`
# registers its final checkpoint by itself (lineage from its config, checkpoint
# and metrics); aliases (default on the first version, exactly one holder,
# moved on delete; format checked), identical weights stored once (inodes and
# disk usage), export HF -> upload -> the same tensors, --from-model, roles
# and paths over TCP, and bad input answered in one line with nothing lost.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
unset SLURM_CONF SLURM_JOB_ID
D=$T_DIR

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
check "mtcd starts" start_mtcd --listen 127.0.0.1:$PORT
M=/v1beta1/projects/local/locations/local/models
# one_error OUTPUT PATTERN: exactly one "mtc:" line and nothing else, matching PATTERN
one_error() { [ "$(wc -l <<<"$1")" -eq 1 ] && grep -q '^mtc: ' <<<"$1" && grep -q -- "$2" <<<"$1"; }
reply() { [ "$HTTP_STATUS" = "$1" ] && grep -q -- "$2" <<<"$BODY"; }

# --- a real run registers itself ---------------------------------------------
check "tiny corpus tokenized" run_corpus "$D/data"
run_recipe "$D/r.json" 6 3
mtc run -e local -s "$D/r.json" --data-dir "$D/data" --experiment-name Tiny_Run >"$D/run.out" 2>&1
check "mtc run -e local starts" test $? -eq 0
ST=$(run_wait_final 120 Tiny_Run)
check "the run completes (state $ST)" test "$ST" = COMPLETED
TD=$(sed -n 's/^- Local Directory: //p' "$D/run.out")
JOB=$(sed -n 's/^- Job id: //p' "$D/run.out")
check "the job log says it registered tiny-run@1" grep -q "registered tiny-run@1 (native" "$TD/$JOB.log"
api GET "$M/tiny-run"
check "GET models/tiny-run: version 1 with default" test "$(jq_ '(d["versionId"], d["versionAliases"], d["artifact"]["format"])' <<<"$BODY")" = "('1', ['default'], 'native')"
check "lineage from the run: experiment, run, job, recipe, tokenizer, dataset and its fingerprint" test "$(jq_ '[d["lineage"][k] for k in ("experiment","slurmJobId","recipe","task")] + [d["lineage"]["runId"].startswith("Tiny_Run_"), d["lineage"]["tokenizer"].endswith("tokenizer.json"), d["lineage"]["dataset"].endswith("/tiny"), len(d["lineage"]["datasetFingerprint"])]' <<<"$BODY")" = "['Tiny_Run', '$JOB', 'r', 'pretrain', True, True, True, 71]"
LAST=$(python3 -c "import json; print([json.loads(l) for l in open('$TD/logs/metrics.jsonl')][-1]['loss'])")
check "lineage: final train loss from metrics.jsonl, tokens seen, step" python3 -c "
import json,sys; l=json.loads(sys.argv[1])['lineage']
assert abs(l['finalTrainLoss'] - $LAST) < 1e-6 and l['tokensSeen'] == 6 * 8 * 64 and l['step'] == 6, l" "$BODY"
check "the artifact carries the run's tokenizer" test -f "$(jq_ 'd["artifactUri"]' <<<"$BODY")/tokenizer.json"

# register: false turns it off
python3 -c "import json; r=json.load(open('$D/r.json')); r['register']=False; json.dump(r, open('$D/noreg.json','w'))"
mtc run -e local -s "$D/noreg.json" --data-dir "$D/data" --experiment-name quiet >/dev/null 2>&1
ST=$(run_wait_final 120 quiet)
api GET "$M/quiet"
check "\"register\": false: the run completes ($ST) and nothing is registered" test "$ST" = COMPLETED -a "$HTTP_STATUS" = 404

# --from-model starts from a registered version, --model-name names the new one
mtc run -e local -s "$D/r.json" --data-dir "$D/data" --experiment-name ft --from-model tiny-run@default --model-name tuned >"$D/ft.out" 2>&1
ST=$(run_wait_final 120 ft)
check "--from-model run completes ($ST)" test "$ST" = COMPLETED
FTD=$(sed -n 's/^- Local Directory: //p' "$D/ft.out")
check "its trainer started from the registered version's files" grep -q "models/versions/" "$FTD/config.json"
api GET "$M/tuned@1"
check "registered as tuned@1 with parentModel tiny-run@1 (the version default named)" test "$(jq_ 'd["lineage"]["parentModel"]' <<<"$BODY")" = "tiny-run@1"
out=$(mtc run -e local -s "$D/r.json" --data-dir "$D/data" --experiment-name x --from-model tiny-run@nope 2>&1)
check "--from-model unknown alias: one line" one_error "$out" "no alias nope"
out=$(mtc run -e local -s "$D/r.json" --data-dir "$D/data" --experiment-name x --from-model ghost 2>&1)
check "--from-model unknown model: one line" one_error "$out" "model ghost not found"

# --- versions, aliases, dedup ------------------------------------------------
CK=$TD/checkpoints
blobs() { find "$MTC_HOME/models/blobs/sha256" -type f | wc -l; }
used() { du -sk "$MTC_HOME/models" | cut -f1; }
B0=$(blobs)
U0=$(used)
out=$(mtc models upload "$CK" --name tiny-run --run "$TD" 2>&1)
check "upload the same checkpoint again: version 2" grep -q "registered tiny-run@2" <<<"$out"
check "identical weights cost no space: no new blob" test "$(blobs)" -eq "$B0"
check "... and (nearly) no disk: $(used) KiB vs $U0 KiB" test $(($(used) - U0)) -lt 64
P1=$(mtc --json models show tiny-run@1 | jq_ 'd["artifactUri"]')
P2=$(mtc --json models show tiny-run@2 | jq_ 'd["artifactUri"]')
check "both versions' params.bin are one inode" test "$(stat -c %i "$P1/params.bin")" = "$(stat -c %i "$P2/params.bin")"
mtc models upload "$CK" --name tiny-run >/dev/null 2>&1
out=$(mtc models versions tiny-run)
check "versions lists 3 with default on 1 only" test "$(grep -c default <<<"$out")" -eq 1 -a "$(awk '$1==1' <<<"$out" | grep -c default)" -eq 1
out=$(mtc models alias tiny-run@2 prod staging)
check "alias adds prod, staging to version 2" grep -qx "tiny-run@2: prod,staging" <<<"$out"
mtc models alias tiny-run@3 prod >/dev/null
api GET "$M/tiny-run@prod"
check "an alias moves: prod now names version 3" test "$(jq_ 'd["versionId"]' <<<"$BODY")" = 3
api GET "$M/tiny-run@2"
check "... and left version 2" test "$(jq_ 'd["versionAliases"]' <<<"$BODY")" = "['staging']"
mtc models alias tiny-run@2 -staging >/dev/null
api GET "$M/tiny-run@2"
check "-staging removes it" test "$(jq_ 'd["versionAliases"]' <<<"$BODY")" = "[]"
out=$(mtc models alias tiny-run@1 -default 2>&1)
check "default cannot be removed, only moved: one line" one_error "$out" "holds default"
mtc models alias tiny-run@2 default >/dev/null
api GET "$M/tiny-run"
check "default moved to version 2; NAME is the default version" test "$(jq_ '(d["versionId"], d["versionAliases"])' <<<"$BODY")" = "('2', ['default'])"
api DELETE "$M/tiny-run@2"
check "deleteVersion of the default version" test "$HTTP_STATUS" = 200
api GET "$M/tiny-run"
check "default moved to the newest remaining version (3)" test "$(jq_ '(d["versionId"], sorted(d["versionAliases"]))' <<<"$BODY")" = "('3', ['default', 'prod'])"
check "version 1's files survive version 2's delete (shared blobs)" test -f "$P1/params.bin" -a ! -e "$P2"
api POST "$M/tiny-run@3:mergeVersionAliases" '{"versionAliases":["12"]}'
check "alias that is a number: 400" reply 400 'not a number'
api POST "$M/tiny-run@3:mergeVersionAliases" '{"versionAliases":["Prod"]}'
check "alias with a capital: 400" reply 400 '\[a-z\]\[a-z0-9-\]{0,126}'
out=$(mtc models alias tiny-run@3 -9x 2>&1)
check "CLI: bad alias in one line" one_error "$out" 'alias "-9x"'
api PATCH "$M/tiny-run?updateMask=description" '{"description":"tiny test model","labels":{"x":"y"}}'
check "patch with updateMask changes only the description" test "$(jq_ '(d["description"], d["labels"])' <<<"$BODY")" = "('tiny test model', {})"
api GET "$M/tiny-run:listVersions"
check "listVersions: versions 1 and 3" test "$(jq_ '[v["versionId"] for v in d["models"]]' <<<"$BODY")" = "['1', '3']"

# --- export round trip ---------------------------------------------------------
out=$(mtc models export tiny-run@1 "$D/hf" --format hf 2>&1)
check "export as HF" test -f "$D/hf/model.safetensors" -a -f "$D/hf/config.json" -a -f "$D/hf/tokenizer.json"
out=$(mtc models upload "$D/hf" --name from-hf 2>&1)
check "upload the HF directory (format detected)" grep -q "registered from-hf@1 (hf" <<<"$out"
mtc models export from-hf "$D/native" --format native >/dev/null 2>&1
mtc-train export --checkpoint "$D/native" --format safetensors --output "$D/hf2" >/dev/null 2>&1
check "export HF -> upload -> export: identical tensors" cmp "$D/hf/model.safetensors" "$D/hf2/model.safetensors"
mtc models export tiny-run@1 "$D/llmc" --format llmc >/dev/null 2>&1
check "export as llm.c: one .bin" test -f "$D/llmc/model.bin"
out=$(mtc models upload "$D/llmc/model.bin" --name from-llmc 2>&1)
check "upload the llm.c file (format detected)" grep -q "registered from-llmc@1 (llmc" <<<"$out"
mtc models export from-llmc "$D/n2" --format native >/dev/null 2>&1
check "export llm.c -> upload -> export native: the same weights" cmp "$D/n2/params.bin" "$P1/params.bin"
mtc models export tiny-run@1 "$D/ck" >/dev/null 2>&1
check "export as stored (native): the checkpoint's own files" cmp "$D/ck/params.bin" "$P1/params.bin"
# a run on the built-in tokenizer, as a recipe trains (the prepared data's
# tokenizer.json in the data cache; nothing names it but the checkpoint): its
# HF exports, through the registry and straight from mtc-train, carry that
# tokenizer and tokenizer_config.json, whose chat template renders
# conversations as mtc-serve does (issue 28)
mtc-train data prepare --source builtin:tiny-corpus --kind pretrain --cache-dir "$D/bcache" \
    --json >"$D/bprep.json" 2>/dev/null
BP=$(jq_ 'd["path"]' <"$D/bprep.json")
mtc-train --model tiny-gpt2 --config '{"n_layer":1,"d_model":32,"n_head":2,"d_ff":64,"max_seq":32}' \
    --tokenizer "$BP/tokenizer.json" --data "$BP" --steps 2 --batch 2 --seq 16 --log-every 100 \
    --checkpoint-every 2 --checkpoint-dir "$D/bck" >/dev/null 2>&1
out=$(mtc models upload "$D/bck" --name builtin-tok 2>&1)
check "a checkpoint on the built-in tokenizer registered" grep -q "registered builtin-tok@1" <<<"$out"
mtc models export builtin-tok "$D/bhf" --format hf >/dev/null 2>&1
check "its HF export has the tokenizer it was trained with" cmp "$D/bhf/tokenizer.json" "$BP/tokenizer.json"
mtc-train export --checkpoint "$D/bck" --format safetensors --output "$D/bhf2" >/dev/null 2>&1
check "so does mtc-train export of the checkpoint itself (read from its meta.json)" \
    bash -c "cmp '$D/bhf2/tokenizer.json' '$BP/tokenizer.json' && test -s '$D/bhf2/tokenizer_config.json'"
check "and tokenizer_config.json whose chat template renders as mtc's chat format" /usr/bin/python3 -c '
import json, sys, jinja2.sandbox
c = json.load(open(sys.argv[1]))
env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
t = env.from_string(c["chat_template"])
m = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
     {"role": "assistant", "content": "yo"}]
got = t.render(messages=m, add_generation_prompt=False, eos_token=c["eos_token"])
want = "<|endoftext|><|system|>\nbe brief\n<|user|>\nhi\n<|assistant|>\nyo<|endoftext|>"
assert got == want, repr(got)
got = t.render(messages=m[1:2], add_generation_prompt=True, eos_token=c["eos_token"])
assert got == "<|endoftext|><|user|>\nhi\n<|assistant|>\n", repr(got)
assert c["model_max_length"] == 32, c' "$D/bhf/tokenizer_config.json"

# --- bad input: one line, nothing stored lost ---------------------------------
before=$(mtc --json models versions tiny-run)
out=$(mtc models show ghost 2>&1)
check "unknown model: one line" one_error "$out" "model ghost not found"
out=$(mtc models show tiny-run@9 2>&1)
check "unknown version: one line" one_error "$out" "no version 9"
out=$(mtc models show tiny-run@nope 2>&1)
check "unknown alias: one line" one_error "$out" "no version with alias nope"
out=$(mtc models show 'Tiny@1' 2>&1)
check "bad model name: one line" one_error "$out" 'model name "Tiny"'
out=$(mtc models export tiny-run "$D/x" --format onnx 2>&1)
check "bad format: one line" one_error "$out" "want native, hf or llmc"
out=$(mtc models upload "$D/data" --name junk 2>&1)
check "a directory without a model: one line" one_error "$out" "holds no model"
out=$(mtc models upload "$D/hf" --name junk --format native 2>&1)
check "format that does not match the files: one line" one_error "$out" "for format native"
api POST "$M:upload" '{"modelId":"junk","model":{"artifactUri":"relative/dir"}}'
check "relative artifactUri: 400 naming the field" reply 400 'model.artifactUri'
api POST "$M:upload" '{"modelId":"junk","model":{"artifactUri":"/tmp","colour":"red"}}'
check "unknown field: 400 naming it" reply 400 'colour'
api POST "$M:upload" '{"modelId":"junk","model":'
check "bad JSON: 400" reply 400 'malformed JSON'
api DELETE "$M/tuned@1"
check "deleting a model's only version: 400, delete the model" reply 400 "only version"
check "nothing stored changed" test "$before" = "$(mtc --json models versions tiny-run)"
api GET "$M/junk"
check "no model junk was made" test "$HTTP_STATUS" = 404

# --- roles and paths over TCP --------------------------------------------------
VIEWER=$(mtc token create --name m-viewer --role viewer | head -1)
EDITOR=$(mtc token create --name m-editor --role editor | head -1)
tcp "$VIEWER" GET "$M"
check "viewer lists models" test "$HTTP_STATUS" = 200
tcp "$VIEWER" POST "$M/tiny-run@3:mergeVersionAliases" '{"versionAliases":["v"]}'
check "viewer may not change aliases: 403" test "$HTTP_STATUS" = 403
tcp "$EDITOR" POST "$M:upload" "{\"modelId\":\"stolen\",\"model\":{\"artifactUri\":\"$D/hf\"}}"
check "editor: a source outside mtcd's roots is refused (403)" reply 403 "outside the directories"
tcp "$EDITOR" POST "$M:upload" "{\"modelId\":\"tiny-copy\",\"model\":{\"artifactUri\":\"$CK\"}}"
check "editor: a run's checkpoint under MTC_HOME/experiments is allowed" test "$HTTP_STATUS" = 200
check "... its operation registers tiny-copy@1" bash -c "$(declare -f api wait_op jq_); wait_op '$(jq_ 'd["name"]' <<<"$BODY")' && grep -q '\"modelVersionId\":\"1\"' <<<\"\$OP\""
# readable by every user (an unbound editor reads as nobody; the data root
# mtcd makes is 0700): what stops it is the link
chmod 755 "$MTC_HOME/data" && mkdir -p -m 755 "$MTC_HOME/data/sneaky"
cp "$D/hf/config.json" "$MTC_HOME/data/sneaky/" && chmod 644 "$MTC_HOME/data/sneaky/config.json"
ln -s "$D/hf/model.safetensors" "$MTC_HOME/data/sneaky/model.safetensors"
tcp "$EDITOR" POST "$M:upload" "{\"modelId\":\"sneaky\",\"model\":{\"artifactUri\":\"$MTC_HOME/data/sneaky\"}}"
check "editor: a link from the data root to a file outside it: 403 at once (no link is followed)" test "$HTTP_STATUS" = 403
check "... naming the link" grep -q "model.safetensors is a symbolic link" <<<"$BODY"
api GET "$M/sneaky"
check "... and registers nothing" test "$HTTP_STATUS" = 404
tcp "$EDITOR" POST "$M/tiny-run@1:export" "{\"outputDir\":\"$D/out-editor\"}"
check "editor: export outside the roots refused (403)" test "$HTTP_STATUS" = 403
ln -s "$D" "$MTC_HOME/data/escape"
tcp "$EDITOR" POST "$M/tiny-run@1:export" "{\"outputDir\":\"$MTC_HOME/data/escape\"}"
check "editor: export into a link from the data root to outside it refused (403)" test "$HTTP_STATUS" = 403
tcp "$EDITOR" POST "$M/tiny-run@1:export" "{\"outputDir\":\"$MTC_HOME/data/mine/\"}"
check "editor: export to a new directory under the data root" test "$HTTP_STATUS" = 200 -a -f "$MTC_HOME/data/mine/params.bin"

# --- registry_resolve's files, and delete -----------------------------------------
check "refs file mirrors the aliases" python3 -c "
import json; r=json.load(open('$MTC_HOME/models/refs/local/local/tiny-run.json'))
assert r['aliases'] == {'default': 3, 'prod': 3}, r['aliases']"
B1=$(blobs)
mtc models delete tiny-copy >/dev/null
mtc models delete tiny-run >/dev/null
api GET "$M/tiny-run"
check "delete: the model is gone" test "$HTTP_STATUS" = 404
check "its refs file is gone" test ! -e "$MTC_HOME/models/refs/local/local/tiny-run.json"
check "its blobs are gone, others' stay ($B1 -> $(blobs))" test "$(blobs)" -lt "$B1" -a "$(blobs)" -gt 0
check "the other models stay" test "$(mtc --json models list | jq_ 'sorted(m["name"].split("/")[-1] for m in d["models"])')" = "['builtin-tok', 'from-hf', 'from-llmc', 'tuned']"
# --- a registration that fails loses nothing ----------------------------------------
kill "$MTCD_PID"
wait_for 10 bash -c "! kill -0 $MTCD_PID"
mtc run -e local -s "$D/r.json" --data-dir "$D/data" --experiment-name lonely >"$D/lonely.out" 2>&1
ST=$(run_wait_final 120 lonely)
LTD=$(sed -n 's/^- Local Directory: //p' "$D/lonely.out")
LJOB=$(sed -n 's/^- Job id: //p' "$D/lonely.out")
check "mtcd down: the run still completes ($ST)" test "$ST" = COMPLETED
check "the job log says the registry did not take it, and where the checkpoint stays" grep -q "the model registry did not take the checkpoint; it stays in $LTD/checkpoints" "$LTD/$LJOB.log"
check "the checkpoint is there" test -e "$LTD/checkpoints/step_00000006/DONE"
# what a crash between the steps of a registration leaves: an unrecorded
# version directory (with a blob of its own), temporaries, a stale refs file
mkdir -p "$MTC_HOME/models/versions/orphan" "$MTC_HOME/models/tmp/half"
head -c 1000 /dev/urandom >"$MTC_HOME/models/blobs/sha256/$(printf 'a%.0s' $(seq 64))"
ln "$MTC_HOME/models/blobs/sha256/$(printf 'a%.0s' $(seq 64))" "$MTC_HOME/models/versions/orphan/params.bin"
rm "$MTC_HOME/models/refs/local/local/tuned.json"
start_mtcd
check "restart: the unrecorded version, its blob and the temporaries are swept" test ! -e "$MTC_HOME/models/versions/orphan" -a ! -e "$MTC_HOME/models/tmp/half" -a ! -e "$MTC_HOME/models/blobs/sha256/$(printf 'a%.0s' $(seq 64))"
check "restart: refs files are rewritten from the store" test -f "$MTC_HOME/models/refs/local/local/tuned.json"
check "restart: the recorded versions keep their files" test -f "$(mtc --json models show tuned | jq_ 'd["artifactUri"]')/params.bin"
cmd=$(sed -n 's/.*(register it with: \(mtc models upload .*\))$/\1/p' "$LTD/$LJOB.log")
out=$($cmd 2>&1)
check "the command the log gives registers it by hand" grep -q "registered lonely@1" <<<"$out"

# --- mtcd killed during an upload: the operation resumes, one version ------------
mkdir -p "$D/big/step_00000001"
head -c $((48 * 1024 * 1024)) /dev/urandom >"$D/big/step_00000001/params.bin"
echo '{"step":1}' >"$D/big/step_00000001/meta.json"
echo ok >"$D/big/step_00000001/DONE"
api POST "$M:upload" "{\"modelId\":\"big\",\"model\":{\"artifactUri\":\"$D/big\"}}"
kill -9 "$MTCD_PID" # at once: the files are still being stored
BIGOP=$(jq_ 'd["name"]' <<<"$BODY")
wait_for 10 bash -c "! kill -0 $MTCD_PID"
start_mtcd
check "after kill -9 and a restart the upload operation finishes" wait_op "$BIGOP"
check "... without an error" test "$(jq_ '"error" in d' <<<"$OP")" = False
api GET "$M/big:listVersions"
check "... with exactly one version" test "$(jq_ '[v["versionId"] for v in d["models"]]' <<<"$BODY")" = "['1']"
check "... and nothing left in the temporaries" test -z "$(find "$MTC_HOME/models/tmp" "$MTC_HOME/models/blobs/tmp" -mindepth 1)"
done_testing
