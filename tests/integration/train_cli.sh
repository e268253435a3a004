#!/usr/bin/env bash
# train_cli: the loss goes down on a small corpus (train and validation), export /
# import / sample work end to end, and bad input (missing or corrupt shard,
# corrupt checkpoint, preset mismatch on resume, missing tokenizer, non-finite
# loss, import shape mismatch) fails with one clear line and a non-zero exit.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/train_setup.inc"
D=$T_DIR
# one thread: on a loaded shared machine an OpenMP team waits at every barrier
# for a descheduled member (seconds per step); results do not depend on it
export OMP_NUM_THREADS=1

train_corpus "$D/corpus.txt" 3
mtc-train tokenizer train --vocab-size 384 --input "$D/corpus.txt" --output "$D/tok.json" 2>/dev/null
mtc-train prepare --tokenizer "$D/tok.json" --input "$D/corpus.txt" --output "$D/data" --val-fraction 0.1 2>/dev/null
check "corpus prepared" test -s "$D/tok.json"

CFG='{"n_layer":2,"d_model":64,"n_head":4,"d_ff":256,"vocab_size":384,"max_seq":64}'
ARGS=(--model tiny-gpt2 --config "$CFG" --seq 32 --batch 8 --log-every 1000 --tokenizer "$D/tok.json")

mtc-train "${ARGS[@]}" --data "$D/data" --steps 60 --lr 3e-3 --eval-every 30 --checkpoint-every 30 \
    --checkpoint-dir "$D/ck" >"$D/train.out" 2>"$D/train.err"
check "training run" test $? -eq 0
check "progress line format" grep -Eq '^step 60/60 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| [0-9 ]+ tok/s \| MFU [0-9]+% \| ETA ' "$D/train.out"
check "loss and val_loss go down" python3 - "$D/ck/metrics.jsonl" <<'PY'
import json, sys
m = [json.loads(l) for l in open(sys.argv[1])]
first, last = m[0]["loss"], sum(x["loss"] for x in m[-5:]) / 5
assert last < 0.6 * first, (first, last)
v = [x["val_loss"] for x in m if "val_loss" in x]
assert len(v) == 2 and v[1] < v[0] and v[1] < 0.6 * first, v
for x in m:
    assert all(k in x for k in ("step", "loss", "lr", "grad_norm", "tokens_per_s", "mfu")), x
PY
check "TensorBoard event file" test -s "$(ls "$D"/ck/events.out.tfevents.* | head -1)"

# export → HF dir, import back, export again: same bytes
mtc-train export --checkpoint "$D/ck" --format safetensors --output "$D/hf" 2>/dev/null
check "export writes safetensors + config.json" python3 - "$D/hf" <<'PY'
import json, struct, sys, os
d = sys.argv[1]
cfg = json.load(open(d + "/config.json"))
assert cfg["model_type"] == "gpt2" and cfg["n_embd"] == 64 and cfg["vocab_size"] == 384
b = open(d + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
assert h["transformer.wte.weight"]["shape"] == [384, 64]
assert h["transformer.h.1.attn.c_attn.weight"]["shape"] == [64, 192]
PY
mtc-train import --from safetensors "$D/hf" --output "$D/imp" 2>/dev/null
check "import from safetensors" test -e "$D/imp/step_00000000/DONE"
mtc-train export --checkpoint "$D/imp" --format safetensors --output "$D/hf2" 2>/dev/null
check "export/import/export round trip identical" cmp "$D/hf/model.safetensors" "$D/hf2/model.safetensors"
out=$(mtc-train sample --checkpoint "$D/ck" --prompt "the cat" --tokens 12 --temperature 0.5 --seed 1 2>/dev/null)
check "sample generates text after the prompt" test "${#out}" -gt 10
diag "sample: $out"
out2=$(mtc-train sample --checkpoint "$D/ck" --prompt "the cat" --tokens 12 --temperature 0.5 --seed 1 2>/dev/null)
check "sampling is reproducible for a seed" test "$out" = "$out2"
mtc-train "${ARGS[@]}" --data "$D/data" --steps 5 --init "$D/hf" --checkpoint-dir "$D/ck2" 2>/dev/null
check "continued pretraining from HF weights (--init)" test -e "$D/ck2/step_00000005/DONE"
check "--init starts from the imported loss" python3 - "$D/ck/metrics.jsonl" "$D/ck2/metrics.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert b[0]["loss"] < 0.8 * a[0]["loss"], (a[0]["loss"], b[0]["loss"])
PY

# bad input: non-zero exit and exactly one line on stderr, never a crash
bad() {
    local what=$1; shift
    "$@" >/dev/null 2>"$D/bad.err"
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$(wc -l <"$D/bad.err")" -eq 1 ]; then
        ok "$what: $(cat "$D/bad.err")"
    else
        nok "$what (rc $rc)"; sed 's/^/#   /' "$D/bad.err"
    fi
}
bad "missing data dir" mtc-train "${ARGS[@]}" --data "$D/nope" --steps 2
mkdir -p "$D/trunc" && cp "$D"/data/* "$D/trunc/"
f=$(ls "$D"/trunc/train_*.bin | head -1)
head -c 1500 "$f" >"$f.x" && mv "$f.x" "$f"
bad "truncated shard" mtc-train "${ARGS[@]}" --data "$D/trunc" --steps 2
bad "missing tokenizer" mtc-train --model tiny-gpt2 --config "$CFG" --data "$D/data" --steps 2 --tokenizer "$D/none.json"
SMALL='{"n_layer":2,"d_model":64,"n_head":4,"d_ff":256,"vocab_size":256,"max_seq":64}'
bad "tokenizer larger than the model's vocab" mtc-train --model tiny-gpt2 --config "$SMALL" --data "$D/data" --steps 2 --tokenizer "$D/tok.json"
bad "token ids beyond the model's vocab" mtc-train --model tiny-gpt2 --config "$SMALL" --data "$D/data" --steps 2 --seq 32
bad "unknown config key" mtc-train --model tiny-gpt2 --config '{"n_layers":3}' --data "$D/data" --steps 2
bad "unknown preset" mtc-train --model gpt7 --data "$D/data" --steps 2
bad "preset mismatch on resume" mtc-train --model tiny-llama --config "$CFG" --data "$D/data" --steps 70 --checkpoint-dir "$D/ck" --resume auto
bad "batch shape change on resume" mtc-train "${ARGS[@]}" --data "$D/data" --steps 70 --seq 16 --checkpoint-dir "$D/ck" --resume auto
cp -r "$D/ck" "$D/ckbad"
last=$(ls -d "$D"/ckbad/step_* | tail -1)
printf 'garbage' | dd of="$last/params.bin" bs=1 seek=64 conv=notrunc 2>/dev/null
bad "corrupt checkpoint" mtc-train "${ARGS[@]}" --data "$D/data" --steps 70 --resume "$last"
mtc-train "${ARGS[@]}" --data "$D/data" --steps 62 --checkpoint-dir "$D/ckbad" --resume auto >/dev/null 2>"$D/fallback.err"
check "resume auto skips the corrupt newest checkpoint" grep -q "skipping.*step_00000060/params.bin is corrupt" "$D/fallback.err"
check "and resumes from the previous one" grep -q "resuming from .*step_00000030" "$D/fallback.err"
bad "non-finite loss" mtc-train "${ARGS[@]}" --data "$D/data" --steps 30 --lr 1e12 --grad-clip 0
bad "import with mismatched preset" mtc-train import --from safetensors "$D/hf" --model tiny-llama --output "$D/x"
bad "import of a non-llm.c file" mtc-train import --from llmc "$D/tok.json" --output "$D/x"
bad "export of an empty dir" mtc-train export --checkpoint "$D/nope" --output "$D/x"
done_testing
