#!/usr/bin/env bash
# run_datasets: on a fresh MTC_HOME every tiny recipe (pretrain, cpt, sft, dpo; gpt2 and
# llama) runs to completion on the local Slurm cluster with no preparation by the test —
# the job prepares its built-in dataset first (a few steps each, from copies of the
# catalog recipes). Prepared once, used again without re-tokenizing; a user's --data
# file, changed, is prepared again; a Hugging Face split directory is read as it is;
# every bad input is one line with nothing submitted and nothing prepared touched.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR
CACHE=$MTC_HOME/cache

check "local cluster up" run_cluster dsets

# A catalog recipe copied to $2 with $3 steps (a checkpoint at the end, no evaluation).
short_recipe() {
    mtc recipes show "$1" | sed 1d | python3 -c '
import json, sys
r = json.load(sys.stdin)
r["train"].update(steps=int(sys.argv[1]), log_every=1, eval_every=0)
r["checkpoint"] = {"every": int(sys.argv[1]), "keep": 1}
json.dump(r, open(sys.argv[2], "w"), indent=2)' "$3" "$2"
}

RECIPES="pretrain/tiny_gpt2_pt pretrain/tiny_llama_pt cpt/tiny_gpt2_cpt cpt/tiny_llama_cpt
         sft/tiny_gpt2_sft sft/tiny_llama_sft dpo/tiny_gpt2_dpo dpo/tiny_llama_dpo"
for r in $RECIPES; do
    n=${r#*/}
    n=${n//_/-}
    short_recipe "$r" "$D/$n.json" 3
    grep -q '"dataset": "builtin:tiny-' "$D/$n.json" || nok "$r names a built-in dataset"
    mtc run -s "$D/$n.json" --experiment-name "$n" >"$D/$n.out" 2>&1 ||
        { nok "$r submitted"; sed 's/^/# /' "$D/$n.out"; }
done
all=1
for r in $RECIPES; do
    n=${r#*/}
    n=${n//_/-}
    st=$(run_wait_final 300 "$n")
    td=$(sed -n 's/^- Local Directory: //p' "$D/$n.out")
    job=$(sed -n 's/^- Job id: //p' "$D/$n.out")
    check "$r completes on a fresh MTC_HOME (state $st)" test "$st" = COMPLETED
    [ "$st" = COMPLETED ] || { all=0; tail -5 "$td/$job.log" 2>/dev/null | sed 's/^/# /'; }
    check "$r: the job log has the data step's progress line" grep -q "^mtc: data: preparing builtin:tiny-" "$td/$job.log"
    check "$r: trained 3 steps on it" grep -q "mtc-train: done, 3 steps" "$td/$job.log"
done
check "three datasets prepared (corpus, sft, dpo: gpt2 and llama share them)" \
    test "$(ls "$CACHE/datasets" | grep -c -E '^(pretrain|sft|dpo)-')" = 3
check "no temporaries left in the cache" test -z "$(ls -A "$CACHE/datasets" | grep '^\.tmp-')"

# prepared twice: the second finds it and tokenizes nothing
PT=$(ls -d "$CACHE"/datasets/pretrain-*)
before=$(stat -c '%i %Y.%y' "$PT/manifest.json" "$PT/train_000000.bin")
mtc-train data prepare --source builtin:tiny-corpus --kind pretrain --cache-dir "$CACHE" --json \
    >"$D/again.json" 2>"$D/again.err"
check "prepare again: cached" python3 -c "import json; j = json.load(open('$D/again.json')); assert j['cached'] is True and j['path'] == '$PT', j"
check "prepare again: says so, tokenizes nothing" bash -c "grep -q 'prepared already (cached)' '$D/again.err' && ! grep -q '^prepare:' '$D/again.err'"
check "prepare again: the manifest and shards are untouched" test "$(stat -c '%i %Y.%y' "$PT/manifest.json" "$PT/train_000000.bin")" = "$before"
check "a later job on the same data found it cached" \
    bash -c "grep -q 'prepared already (cached)' '$MTC_HOME'/experiments/tiny-*/*/*/*.log"

# a user's own file (--data), then the same file changed: prepared again under a new key
python3 - "$D/mine.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(64):
        f.write(json.dumps({"prompt": "Say %d twice." % i, "response": "%d %d" % (i, i)}) + "\n")
PY
mtc run -s "$D/tiny-gpt2-sft.json" --data "$D/mine.jsonl" --experiment-name mine >"$D/mine.out" 2>&1
check "--data FILE submitted" test $? -eq 0
# a Hugging Face layout (its run beside that one): the splits read as they
# are (validation becomes val.jsonl)
mkdir -p "$D/hf"
head -40 "$D/mine.jsonl" >"$D/hf/train.jsonl"
tail -8 "$D/mine.jsonl" >"$D/hf/validation.jsonl"
mtc run -s "$D/tiny-gpt2-sft.json" --data "$D/hf" --experiment-name hf >"$D/hf.out" 2>&1
st=$(run_wait_final 300 mine)
check "--data FILE: completes ($st)" test "$st" = COMPLETED
hfst=$(run_wait_final 300 hf)
nsft=$(ls -d "$CACHE"/datasets/sft-* | wc -l)
echo '{"prompt": "Say 99 twice.", "response": "99 99"}' >>"$D/mine.jsonl"
mtc run -s "$D/tiny-gpt2-sft.json" --data "$D/mine.jsonl" --experiment-name mine2 >"$D/mine2.out" 2>&1
st=$(run_wait_final 300 mine2)
check "the changed file: completes ($st)" test "$st" = COMPLETED
check "the changed file was prepared again under a new key" test "$(ls -d "$CACHE"/datasets/sft-* | wc -l)" = $((nsft + 1))
check "its job log says it prepared 65 records" bash -c "grep -q 'sft, 65 records' '$MTC_HOME'/experiments/mine2/*/*/*.log"

check "--data DIR (train.jsonl + validation.jsonl): completes ($hfst)" test "$hfst" = COMPLETED
HFD=$(sed -n 's/^mtc: data: \(\/.*\)$/\1/p' "$MTC_HOME"/experiments/hf/*/*/*.log | tail -1)
check "its splits kept: 40 train, 8 validation records" \
    test "$(wc -l <"$HFD/train.jsonl") $(wc -l <"$HFD/val.jsonl")" = "40 8"

# bad input: one line, exit non-zero, nothing submitted, nothing prepared touched
sums() { (cd "$CACHE" && find . -type f | sort | xargs md5sum) | md5sum; }
SUMS=$(sums)
NEXP=$(mtc experiment list 2>/dev/null | wc -l)
# bad NAME PATTERN mtc-run-args...
bad() {
    local name=$1 pat=$2
    shift 2
    mtc run "$@" >"$D/bad.out" 2>"$D/bad.err"
    local rc=$?
    check "$name: exit non-zero" test $rc -ne 0
    check "$name: one line naming it ($(head -c 200 "$D/bad.err"))" \
        bash -c "[ \$(wc -l <'$D/bad.err') = 1 ] && grep -q -- '$pat' '$D/bad.err'"
    check "$name: nothing submitted" bash -c "[ -z \"\$(squeue -h)\" ] && [ \$(mtc experiment list 2>/dev/null | wc -l) = $NEXP ]"
}
sed 's/builtin:tiny-sft/builtin:tiny-nothing/' "$D/tiny-gpt2-sft.json" >"$D/unknown.json"
bad "unknown dataset" 'unknown built-in dataset "tiny-nothing"' -s "$D/unknown.json"
echo '{"prompt":"a","chosen":"b","rejected":"c"}' >"$D/pairs.jsonl"
bad "a source of another kind" 'pairs.jsonl:1: field "response" missing (the record is dpo data, not sft)' \
    -s sft/tiny_gpt2_sft --data "$D/pairs.jsonl"
: >"$D/empty.jsonl"
bad "an empty file" 'empty.jsonl: empty file' -s sft/tiny_gpt2_sft --data "$D/empty.jsonl"
printf '{"prompt":"a","response":"b"}\n{"prompt":"a","resp' >"$D/trunc.jsonl"
bad "a truncated file" 'trunc.jsonl:2: truncated record' -s sft/tiny_gpt2_sft --data "$D/trunc.jsonl"
printf '{"prompt":"a","response":"b"}\n{"prompt":"a","answer":"b"}\n' >"$D/wrong.jsonl"
bad "JSONL with a wrong field" 'wrong.jsonl:2: field "response" missing' -s sft/tiny_gpt2_sft --data "$D/wrong.jsonl"
bad "a built-in dataset of another kind" 'builtin:tiny-sft is sft data, not dpo' -s dpo/tiny_gpt2_dpo --data builtin:tiny-sft
echo "not records" >"$D/plain.txt"
bad "text for a DPO recipe" 'plain text is pretraining data, not dpo' -s dpo/tiny_gpt2_dpo --data "$D/plain.txt"
python3 -c 'print("the quick brown fox jumps over the lazy dog " * 200)' >"$D/other.txt"
mtc-train tokenizer train --vocab-size 300 --input "$D/other.txt" --output "$D/other-tok.json" 2>/dev/null
python3 - "$D/tiny-gpt2-sft.json" "$D/othertok.json" "$D/other-tok.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["data"]["tokenizer"] = sys.argv[3]
json.dump(r, open(sys.argv[2], "w"))
PY
bad "a tokenizer mismatch with the checkpoint" 'tokenizer mismatch' -s "$D/othertok.json" --from-experiment tiny-gpt2-pt
bad "chained from an unknown experiment" 'no experiment "nothing-here"' -s sft/tiny_gpt2_sft --from-experiment nothing-here
# an experiment that did not complete: cancelled while it runs (-e local: not in squeue)
short_recipe pretrain/tiny_gpt2_pt "$D/long.json" 100000
mtc run -e local -s "$D/long.json" --experiment-name unfinished >"$D/long.out" 2>&1
track_pid "$(sed -n 's/^- Job id: //p' "$D/long.out")"
NEXP=$(mtc experiment list 2>/dev/null | wc -l)
bad "chained from a running experiment" 'unfinished_[0-9]* is RUNNING, not COMPLETED' -s sft/tiny_gpt2_sft --from-experiment unfinished
mtc experiment cancel unfinished >/dev/null 2>&1
wait_for 30 bash -c "mtc experiment status unfinished | grep -qx -- '- Status: CANCELLED'"
bad "chained from a cancelled experiment" 'is CANCELLED, not COMPLETED' -s sft/tiny_gpt2_sft --from-experiment unfinished
check "nothing prepared was touched by the bad inputs" test "$(sums)" = "$SUMS"
# the trainer's own command, with a cache that has nothing yet (no tokenizer either)
for src in "$D/wrong.jsonl" builtin:tiny-nothing "$D/trunc.jsonl"; do
    mtc-train data prepare --source "$src" --kind sft --cache-dir "$D/fresh" >/dev/null 2>"$D/prep.err"
    rc=$?
    check "data prepare $(basename "$src"): exit 1, one line ($(head -c 120 "$D/prep.err"))" \
        bash -c "[ $rc = 1 ] && [ \$(wc -l <'$D/prep.err') = 1 ]"
done
done_testing
