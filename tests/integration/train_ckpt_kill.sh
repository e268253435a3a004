#!/usr/bin/env bash
# train_ckpt_kill: kill -9 while a checkpoint is being written (a model large
# enough that writes take a while, checkpointing every step) leaves the previous
# complete checkpoint intact: resume auto continues from it, the partial write is
# cleaned up, and the surviving checkpoint still exports.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/train_setup.inc"
D=$T_DIR
# one thread: on a loaded shared machine an OpenMP team waits at every barrier
# for a descheduled member (seconds per step); results do not depend on it
export OMP_NUM_THREADS=1

# token shards in our format directly (the tokenizer is not under test here)
train_shards "$D/data" 50000
# ~6.5M parameters: 78 MB per checkpoint (weights + two moments)
CFG='{"n_layer":4,"d_model":320,"n_head":4,"d_ff":1280,"vocab_size":512,"max_seq":32}'
ARGS=(--model tiny-gpt2 --config "$CFG" --data "$D/data" --steps 30 --batch 1 --seq 16
      --checkpoint-every 1 --keep 2 --log-every 1000 --checkpoint-dir "$D/ck")

killed=0
for attempt in 1 2 3; do
    rm -rf "$D/ck"
    mtc-train "${ARGS[@]}" 2>"$D/run.err" &
    pid=$!
    track_pid $pid
    # wait for a complete checkpoint, then for a write in flight, and kill -9 then
    wait_for 60 sh -c "ls '$D'/ck/step_*/DONE"
    for _ in $(seq 400); do
        if ls -d "$D"/ck/.tmp-step_* >/dev/null 2>&1; then kill -KILL $pid; killed=1; break; fi
        sleep 0.01
    done
    wait $pid 2>/dev/null
    [ $killed -eq 1 ] && break
done
check "killed during a checkpoint write" test $killed -eq 1
check "a partial write was left behind" sh -c "ls -d '$D'/ck/.tmp-step_* >/dev/null 2>&1"
complete=$(ls -d "$D"/ck/step_*/DONE 2>/dev/null | sort | tail -1 | xargs dirname)
check "previous complete checkpoint exists ($(basename "$complete"))" test -n "$complete"
mtc-train export --checkpoint "$complete" --output "$D/exp" 2>"$D/exp.err"
check "it is intact (checksums verify on export)" test $? -eq 0
mtc-train "${ARGS[@]}" --checkpoint-every 10 --resume auto 2>"$D/resume.err"
check "resume auto completes" test $? -eq 0
check "resumed from the newest complete checkpoint" grep -q "resuming from .*$(basename "$complete")" "$D/resume.err"
check "partial write cleaned up" sh -c "! ls -d '$D'/ck/.tmp-step_* >/dev/null 2>&1"
check "final checkpoint complete" test -e "$D/ck/step_00000030/DONE"
done_testing
