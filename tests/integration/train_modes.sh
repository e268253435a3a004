#!/usr/bin/env bash
# train_modes: continued pretraining (--init: new data, schedule and step count from 0),
# SFT on a JSONL set (loss falls; validation from val.jsonl; resume is bitwise equal to
# a straight run; 2 MPI ranks match 1), DPO on a synthetic preference set (reward
# accuracy rises to ~1, metrics in metrics.jsonl and TensorBoard, 2 ranks match 1),
# resume under another mode is refused, the tiny SFT/DPO catalog recipes' rendered trainer
# commands run as they are, and bad JSONL input
# (one line naming file:line, non-zero exit).
. "$(dirname "$0")/lib.sh"
D=$T_DIR
export OMP_NUM_THREADS=1

python3 - "$D" <<'PY'
import json, random, sys
d = sys.argv[1]
random.seed(5)
things = "apple|sky|grass|snow|coal|sun|sea|rose|lime|plum".split("|")
colors = "red|blue|green|white|black|yellow|blue|red|green|purple".split("|")
with open(d + "/corpus.txt", "w") as f:
    for i in range(600):
        j = random.randrange(10)
        f.write(f"what color is the {things[j]}? the {things[j]} is {colors[j]}. ")
with open(d + "/corpus2.txt", "w") as f:
    for i in range(600):
        j = random.randrange(10)
        f.write(f"the {things[j]} is good. the {things[j]} is not bad. ")
import os
os.makedirs(d + "/sft", exist_ok=True)
for name, n in (("train", 64), ("val", 10)):
    with open(f"{d}/sft/{name}.jsonl", "w") as f:
        for i in range(n):
            j = (i * 3 + (name == "val")) % 10
            f.write(json.dumps({"prompt": f"what color is the {things[j]}?",
                                "response": f"the {things[j]} is {colors[j]}.", "id": i}) + "\n")
with open(d + "/dpo.jsonl", "w") as f:
    for i in range(40):
        j = i % 10
        f.write(json.dumps({"prompt": f"what about the {things[j]}?",
                            "chosen": f"the {things[j]} is good.",
                            "rejected": f"the {things[j]} is bad."}) + "\n")
PY
mtc-train tokenizer train --vocab-size 384 --input "$D/corpus.txt" --output "$D/tok.json" 2>/dev/null
mtc-train prepare --tokenizer "$D/tok.json" --input "$D/corpus.txt" --output "$D/data" 2>/dev/null
mtc-train prepare --tokenizer "$D/tok.json" --input "$D/corpus2.txt" --output "$D/data2" 2>/dev/null
check "corpora and JSONL sets prepared" test -s "$D/data2/train_000000.bin"

CFG='{"n_layer":2,"d_model":64,"n_head":4,"d_ff":256,"vocab_size":384,"max_seq":64}'
ARGS=(--model tiny-gpt2 --config "$CFG" --seq 32 --batch 8 --log-every 1000 --tokenizer "$D/tok.json")

mtc-train "${ARGS[@]}" --data "$D/data" --steps 30 --lr 3e-3 --checkpoint-dir "$D/pt" >/dev/null 2>&1
check "pretraining run" test -e "$D/pt/step_00000030/DONE"

# --- CPT: weights from the checkpoint, new data, a new schedule counted from step 0
mtc-train "${ARGS[@]}" --data "$D/data2" --steps 6 --warmup 3 --lr 1e-3 --init "$D/pt" \
    --checkpoint-dir "$D/cpt" >/dev/null 2>"$D/cpt.err"
check "CPT run from a checkpoint (--init)" test -e "$D/cpt/step_00000006/DONE"
mtc-train "${ARGS[@]}" --data "$D/data2" --steps 6 --warmup 3 --lr 1e-3 --checkpoint-dir "$D/cold" >/dev/null 2>&1
check "CPT: steps and lr schedule start from 0, weights from the init" python3 - "$D/cpt" "$D/cold" <<'PY'
import json, sys
m = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
c = [json.loads(l) for l in open(sys.argv[2] + "/metrics.jsonl")]
assert [x["step"] for x in m] == [1, 2, 3, 4, 5, 6], m
assert abs(m[0]["lr"] - 1e-3 / 3) < 1e-9 and abs(m[2]["lr"] - 1e-3) < 1e-9, [x["lr"] for x in m]
assert m[0]["loss"] < c[0]["loss"] - 0.5, (m[0]["loss"], c[0]["loss"])  # starts from the init weights
meta = json.load(open(sys.argv[1] + "/step_00000006/meta.json"))
assert meta["step"] == 6, meta["step"]
PY
check "CPT does not resume the checkpoint" bash -c "! grep -q resuming '$D/cpt.err'"

# --- SFT
mtc-train "${ARGS[@]}" --mode sft --data "$D/sft" --init "$D/pt" --steps 30 --lr 2e-3 --shuffle \
    --eval-every 15 --eval-batches 1 --checkpoint-dir "$D/sft1" >/dev/null 2>"$D/sft1.err"
check "SFT run" test $? -eq 0
check "SFT loss falls, val_loss from val.jsonl falls" python3 - "$D/sft1/metrics.jsonl" <<'PY'
import json, sys
m = [json.loads(l) for l in open(sys.argv[1])]
first, last = m[0]["loss"], sum(x["loss"] for x in m[-5:]) / 5
assert len(m) == 30 and last < 0.5 * first, (first, last)
v = [x["val_loss"] for x in m if "val_loss" in x]
assert len(v) == 2 and v[1] < v[0], v
PY
# resume: stop at step 10 (a checkpoint of the straight run), continue to 20
S=(--mode sft --data "$D/sft/train.jsonl" --init "$D/pt" --steps 20 --lr 2e-3 --shuffle --batch 8
   --micro-batch 2 --checkpoint-every 10)
mtc-train "${ARGS[@]}" "${S[@]}" --checkpoint-dir "$D/s1" --keep 5 >/dev/null 2>&1
mkdir -p "$D/s2" && cp -r "$D/s1/step_00000010" "$D/s2/"
mtc-train "${ARGS[@]}" "${S[@]}" --checkpoint-dir "$D/s2" --resume auto >/dev/null 2>"$D/s2.err"
check "SFT resumed from step 10" grep -q "resuming from .*step_00000010" "$D/s2.err"
check "SFT resume: weights bitwise equal to the straight run" \
    cmp "$D/s1/step_00000020/params.bin" "$D/s2/step_00000020/params.bin"
check "SFT resume: moments bitwise equal" cmp "$D/s1/step_00000020/optim.bin" "$D/s2/step_00000020/optim.bin"
check "SFT resume: losses of steps 11-20 identical" python3 - "$D/s1/metrics.jsonl" "$D/s2/metrics.jsonl" <<'PY'
import json, sys
a = {json.loads(l)["step"]: json.loads(l)["loss"] for l in open(sys.argv[1])}
b = {json.loads(l)["step"]: json.loads(l)["loss"] for l in open(sys.argv[2])}
assert sorted(b) == list(range(11, 21)), sorted(b)
assert all(a[s] == b[s] for s in b), [(a[s], b[s]) for s in b]
PY
if command -v mpirun >/dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
    export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_rmaps_base_oversubscribe=1
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
    M=(--mode sft --data "$D/sft/train.jsonl" --steps 4 --lr 2e-3 --shuffle --batch 8)
    mtc-train "${ARGS[@]}" "${M[@]}" --micro-batch 2 --checkpoint-dir "$D/r1" >/dev/null 2>&1
    timeout 300 mpirun -np 2 --oversubscribe --bind-to none mtc-train "${ARGS[@]}" "${M[@]}" \
        --micro-batch 2 --checkpoint-dir "$D/r2" >"$D/r2.out" 2>&1
    check "SFT on 2 MPI ranks matches 1 rank (each rank its slice, one normaliser)" \
        python3 - "$D/r1/metrics.jsonl" "$D/r2/metrics.jsonl" <<'PY'
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert len(a) == len(b) == 4 and all(abs(x - y) <= 1e-4 * (1 + abs(x)) for x, y in zip(a, b)), (a, b)
PY
    P=(--mode dpo --data "$D/dpo.jsonl" --init "$D/pt" --steps 4 --lr 1e-3 --batch 8 --micro-batch 2)
    mtc-train "${ARGS[@]}" "${P[@]}" --checkpoint-dir "$D/p1" >/dev/null 2>&1
    timeout 300 mpirun -np 2 --oversubscribe --bind-to none mtc-train "${ARGS[@]}" "${P[@]}" \
        --checkpoint-dir "$D/p2" >"$D/p2.out" 2>&1
    check "DPO on 2 MPI ranks matches 1 rank (loss and reward metrics)" \
        python3 - "$D/p1/metrics.jsonl" "$D/p2/metrics.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
keys = ("loss", "rewards/chosen", "rewards/rejected", "rewards/accuracy", "rewards/margin")
assert len(a) == len(b) == 4, (len(a), len(b))
for x, y in zip(a, b):
    assert all(abs(x[k] - y[k]) <= 1e-4 * (1 + abs(x[k])) for k in keys), (x, y)
PY
else
    skip "SFT on 2 MPI ranks matches 1 rank: mpirun not installed"
    skip "DPO on 2 MPI ranks matches 1 rank: mpirun not installed"
fi

# --- DPO: "chosen" always ends in "good", "rejected" in "bad"
mtc-train "${ARGS[@]}" --mode dpo --dpo-beta 0.1 --data "$D/dpo.jsonl" --init "$D/pt" --steps 30 \
    --lr 1e-3 --checkpoint-dir "$D/dpo" >"$D/dpo.out" 2>"$D/dpo.err"
check "DPO run" test $? -eq 0
check "DPO: reward accuracy rises from <= 0.5 to ~1, margin grows, loss falls" python3 - "$D/dpo/metrics.jsonl" <<'PY'
import json, math, sys
m = [json.loads(l) for l in open(sys.argv[1])]
for x in m:
    assert all(k in x for k in ("loss", "rewards/chosen", "rewards/rejected", "rewards/accuracy",
                                "rewards/margin")), x
acc = [x["rewards/accuracy"] for x in m]
assert acc[0] <= 0.5 and sum(acc[-5:]) / 5 >= 0.95, acc
assert abs(m[0]["loss"] - math.log(2)) < 1e-4, m[0]["loss"]  # policy == reference at step 1
assert m[-1]["loss"] < 0.6 and m[-1]["rewards/margin"] > 0.1, m[-1]
assert abs(m[-1]["rewards/margin"] - (m[-1]["rewards/chosen"] - m[-1]["rewards/rejected"])) < 1e-5
PY
check "DPO metrics in TensorBoard" grep -qa "rewards/accuracy" "$(ls "$D"/dpo/events.out.tfevents.* | head -1)"

# --- the catalog's tiny SFT and DPO recipes: the trainer command `mtc run` renders for
# them (their trainer_args, --init from --from-checkpoint) runs as is; steps cut to 3
mkdir -p "$D/dd/tiny-sft" "$D/dd/tiny-dpo" "$D/dd/tiny-corpus"
cp "$D/sft/train.jsonl" "$D/dd/tiny-sft/train.jsonl"
cp "$D/dpo.jsonl" "$D/dd/tiny-dpo/train.jsonl"
cp "$D/tok.json" "$D/dd/tiny-corpus/tokenizer.json"
mtc-train --model tiny-gpt2 --config '{"max_seq":128,"vocab_size":1024}' --data "$D/data" --steps 1 \
    --seq 64 --checkpoint-dir "$D/rpt" >/dev/null 2>&1
for r in sft/tiny_gpt2_sft dpo/tiny_gpt2_dpo; do
    n=${r#*/}
    python3 - "$ROOT/recipes/$r.json" "$D/$n.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["train"]["steps"] = 3
r["checkpoint"]["every"] = 2
json.dump(r, open(sys.argv[2], "w"))
PY
    mtc run -s "$D/$n.json" --data-dir "$D/dd" --from-checkpoint "$D/rpt/step_00000001" --dry-run \
        >"$D/$n.sh" 2>"$D/$n.err"
    bash "$D/$n.sh" >"$D/$n.out" 2>&1
    check "recipe $r: the rendered trainer command runs" \
        bash -c "grep -q 'done, 3 steps' '$D/$n.out' && ls -d '$MTC_HOME'/experiments/${n//_/-}/*/*/checkpoints/step_00000003 | grep -q ."
done
check "recipe dpo/tiny_gpt2_dpo: DPO metrics" bash -c "grep -q rewards/accuracy '$MTC_HOME'/experiments/tiny-gpt2-dpo/*/*/logs/metrics.jsonl"

# --- bad input: exactly one line naming file:line, non-zero exit
bad() {
    local what=$1 want=$2; shift 2
    "$@" >/dev/null 2>"$D/bad.err"
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$(wc -l <"$D/bad.err")" -eq 1 ] && grep -qF -- "$want" "$D/bad.err"; then
        ok "$what: $(cat "$D/bad.err")"
    else
        nok "$what (rc $rc)"; sed 's/^/#   /' "$D/bad.err"
    fi
}
{ head -3 "$D/sft/train.jsonl"; echo '{"prompt": "x", "answer": "y"}'; } >"$D/missing.jsonl"
bad "missing key" "missing.jsonl:4: missing key \"response\"" \
    mtc-train "${ARGS[@]}" --mode sft --data "$D/missing.jsonl" --steps 2
{ head -2 "$D/sft/train.jsonl"; echo '{"prompt": "x", "response": ""}'; } >"$D/empty.jsonl"
bad "empty response" "empty.jsonl:3: empty \"response\"" \
    mtc-train "${ARGS[@]}" --mode sft --data "$D/empty.jsonl" --steps 2
bad "a text file as JSONL" "corpus.txt:1: not a JSON line" \
    mtc-train "${ARGS[@]}" --mode sft --data "$D/corpus.txt" --steps 2
python3 -c 'import json; print(json.dumps({"prompt": "x", "response": "the sky is blue. " * 20}))' >"$D/long.jsonl"
bad "response longer than --seq" "long.jsonl:1: example of" \
    mtc-train "${ARGS[@]}" --mode sft --data "$D/long.jsonl" --steps 2
echo '{"prompt": "x", "chosen": "the sky"}' >"$D/dpobad.jsonl"
bad "DPO line without rejected" "dpobad.jsonl:1: missing key \"rejected\"" \
    mtc-train "${ARGS[@]}" --mode dpo --data "$D/dpobad.jsonl" --steps 2
bad "resume with another mode" "was trained with --mode pretrain, this run has --mode sft" \
    mtc-train "${ARGS[@]}" --mode sft --data "$D/sft" --steps 40 --checkpoint-dir "$D/pt" --resume auto
bad "unknown mode" "--mode rl" mtc-train "${ARGS[@]}" --mode rl --data "$D/dpo.jsonl" --steps 2
bad "SFT without a tokenizer" "needs --tokenizer" \
    mtc-train --model tiny-gpt2 --config "$CFG" --mode sft --data "$D/sft" --steps 2
bad "--eval-every without val.jsonl" "dpo-val/val.jsonl" bash -c \
    "mkdir -p '$D/dpo-val' && cp '$D/dpo.jsonl' '$D/dpo-val/train.jsonl' && mtc-train ${ARGS[*]@Q} --mode dpo --data '$D/dpo-val' --eval-every 5 --steps 2"
done_testing
