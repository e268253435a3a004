#!/usr/bin/env bash
# train_resume: a run interrupted by SIGTERM (checkpoint + exit 75) and resumed
# with --resume auto is BITWISE identical to an uninterrupted run: every logged
# loss, the final parameters and optimizer moments, and the exported safetensors.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/train_setup.inc"
D=$T_DIR
# one thread: on a loaded shared machine an OpenMP team waits at every barrier
# for a descheduled member (seconds per step); results do not depend on it
export OMP_NUM_THREADS=1

# a small corpus with structure to learn, a tokenizer trained on it, shards
train_corpus "$D/corpus.txt" 7 10
check "tokenizer train" mtc-train tokenizer train --vocab-size 384 --input "$D/corpus.txt" --output "$D/tok.json"
check "prepare shards" mtc-train prepare --tokenizer "$D/tok.json" --input "$D/corpus.txt" --output "$D/data" --val-fraction 0.1

CFG='{"n_layer":2,"d_model":64,"n_head":4,"d_ff":256,"vocab_size":384,"max_seq":64}'
ARGS=(--model tiny-gpt2 --config "$CFG" --data "$D/data" --steps 300 --batch 4 --micro-batch 2
      --seq 32 --lr 3e-3 --warmup 10 --shuffle --seed 5 --checkpoint-every 10 --keep 2
      --tokenizer "$D/tok.json" --log-every 1000)

mtc-train "${ARGS[@]}" --checkpoint-dir "$D/a" 2>"$D/a.err"
check "uninterrupted run" test $? -eq 0

mtc-train "${ARGS[@]}" --checkpoint-dir "$D/b" 2>"$D/b.err" &
pid=$!
track_pid $pid
poll_for 60 "$D/b/step_00000010/DONE"
kill -TERM $pid
wait $pid
rc=$?
check "SIGTERM → exit 75 (requeue)" test $rc -eq 75
stop=$(ls "$D/b" | grep '^step_' | sort | tail -1)
check "checkpoint written at the stop step ($stop)" test -e "$D/b/$stop/DONE"
check "stopped before the end" test "$stop" != step_00000300
check "signal reported on stderr" grep -q "signal received" "$D/b.err"

mtc-train "${ARGS[@]}" --checkpoint-dir "$D/b" --resume auto 2>"$D/b2.err"
check "resume auto completes" test $? -eq 0
check "resumed from the stop checkpoint" grep -q "resuming from .*$stop" "$D/b2.err"

check "losses identical at every step" python3 - "$D/a/metrics.jsonl" "$D/b/metrics.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
sa = [(x["step"], x["loss"], x["grad_norm"]) for x in a]
sb = [(x["step"], x["loss"], x["grad_norm"]) for x in b]
assert [s for s, _, _ in sa] == list(range(1, 301)), "steps of a"
assert sa == sb, "differ at %s" % next((p, q) for p, q in zip(sa, sb) if p != q)
PY
check "final parameters bitwise equal" cmp "$D/a/step_00000300/params.bin" "$D/b/step_00000300/params.bin"
check "optimizer moments bitwise equal" cmp "$D/a/step_00000300/optim.bin" "$D/b/step_00000300/optim.bin"
check "keep 2 checkpoints" test "$(ls -d "$D"/a/step_* | wc -l)" -eq 2
mtc-train export --checkpoint "$D/a" --format safetensors --output "$D/ea" 2>/dev/null
mtc-train export --checkpoint "$D/b" --format safetensors --output "$D/eb" 2>/dev/null
check "exported safetensors identical" cmp "$D/ea/model.safetensors" "$D/eb/model.safetensors"
check "tokenizer reference recorded" grep -q "tok.json" "$D/b/step_00000300/meta.json"
done_testing
