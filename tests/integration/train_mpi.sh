#!/usr/bin/env bash
# train_mpi: data parallel over MPI — 2 ranks with per-rank batch B/2 match 1 rank
# with batch B to float tolerance (losses and final parameters); a 2-rank run
# stopped by SIGUSR1 through mpirun checkpoints (rank 0) and resumes on 2 ranks
# bitwise identical to an uninterrupted 2-rank run.
. "$(dirname "$0")/lib.sh"
D=$T_DIR
command -v mpirun >/dev/null || { skip "mpirun not installed"; done_testing; }
export OMP_NUM_THREADS=1
# root in CI containers; loopback/shared memory only; 2 ranks on 2 cores
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_rmaps_base_oversubscribe=1
# the ASan build: OpenMPI's runtime leaks its own allocations at MPI_Finalize
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
MPIRUN=(mpirun -np 2 --oversubscribe --bind-to none)

python3 - "$D/corpus.txt" <<'PY'
import random, sys
random.seed(11)
w = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
with open(sys.argv[1], "w") as f:
    for i in range(4000):
        f.write(" ".join(random.choice(w) for _ in range(random.randint(3, 9))) + ". ")
PY
mtc-train tokenizer train --vocab-size 320 --input "$D/corpus.txt" --output "$D/tok.json" 2>/dev/null
mtc-train prepare --tokenizer "$D/tok.json" --input "$D/corpus.txt" --output "$D/data" --val-fraction 0.1 2>/dev/null
check "corpus prepared" test -d "$D/data"

CFG='{"n_layer":2,"d_model":64,"n_head":4,"n_kv_head":2,"d_ff":192,"vocab_size":320,"max_seq":64}'
ARGS=(--model tiny-llama --config "$CFG" --data "$D/data" --steps 20 --batch 8 --seq 32
      --lr 2e-3 --shuffle --log-every 1000)

mtc-train "${ARGS[@]}" --checkpoint-dir "$D/one" 2>"$D/one.err"
check "1 rank, batch 8" test $? -eq 0
timeout 300 "${MPIRUN[@]}" mtc-train "${ARGS[@]}" --micro-batch 4 --checkpoint-dir "$D/two" >"$D/two.out" 2>&1
check "2 ranks, batch 4 each" test $? -eq 0
check "2-rank run matches 1 rank to float tolerance" python3 - "$D/one" "$D/two" <<'PY'
import array, json, sys
a, b = sys.argv[1], sys.argv[2]
la = [json.loads(l)["loss"] for l in open(a + "/metrics.jsonl")]
lb = [json.loads(l)["loss"] for l in open(b + "/metrics.jsonl")]
assert len(la) == len(lb) == 20
d = max(abs(x - y) for x, y in zip(la, lb))
assert d < 1e-4, "loss diff %g" % d
pa = array.array("f", open(a + "/step_00000020/params.bin", "rb").read())
pb = array.array("f", open(b + "/step_00000020/params.bin", "rb").read())
assert len(pa) == len(pb)
dp = max(abs(x - y) for x, y in zip(pa, pb))
assert dp < 1e-4, "param diff %g" % dp
print("# max loss diff %.3g, max param diff %.3g" % (d, dp))
PY
check "one metrics writer (rank 0)" test "$(wc -l <"$D/two/metrics.jsonl")" -eq 20

# stop a 2-rank run with SIGUSR1 (mpirun forwards it), resume on 2 ranks: bitwise
# equal to an uninterrupted 2-rank run
LONG=("${ARGS[@]}" --steps 300 --micro-batch 4 --checkpoint-every 10)
timeout 300 "${MPIRUN[@]}" mtc-train "${LONG[@]}" --checkpoint-dir "$D/straight" >"$D/straight.out" 2>&1
check "uninterrupted 2-rank run" test $? -eq 0
"${MPIRUN[@]}" mtc-train "${LONG[@]}" --checkpoint-dir "$D/sig" >"$D/sig.out" 2>&1 &
pid=$!
track_pid $pid
poll_for 60 "$D/sig/step_00000010/DONE"
kill -USR1 $pid
wait $pid
check "SIGUSR1 → exit 75 on 2 ranks" grep -q "exiting 75" "$D/sig.out"
stop=$(ls "$D/sig" | grep '^step_' | sort | tail -1)
check "stopped before the end ($stop)" test -n "$stop" -a "$stop" != step_00000300
timeout 300 "${MPIRUN[@]}" mtc-train "${LONG[@]}" --checkpoint-dir "$D/sig" --resume auto >"$D/sig2.out" 2>&1
check "2-rank resume completes" test $? -eq 0
check "resumed from the signal checkpoint" grep -q "resuming from .*$stop" "$D/sig2.out"
# bitwise as train_resume.sh means it: every logged loss and gradient norm,
# the final parameters and the optimizer's moments
check "2-rank resumed run: losses and gradient norms identical at every step" \
    python3 - "$D/straight/metrics.jsonl" "$D/sig/metrics.jsonl" <<'PY'
import json, sys
a = [(x["step"], x["loss"], x["grad_norm"]) for x in map(json.loads, open(sys.argv[1]))]
b = [(x["step"], x["loss"], x["grad_norm"]) for x in map(json.loads, open(sys.argv[2]))]
assert [s for s, _, _ in a] == list(range(1, 301)), "steps of the uninterrupted run"
assert a == b, "differ at %s" % (next(((p, q) for p, q in zip(a, b) if p != q), None) or (len(a), len(b)),)
PY
check "2-rank resumed run: final parameters bitwise equal" \
    cmp "$D/straight/step_00000300/params.bin" "$D/sig/step_00000300/params.bin"
check "2-rank resumed run: optimizer moments bitwise equal" \
    cmp "$D/straight/step_00000300/optim.bin" "$D/sig/step_00000300/optim.bin"
done_testing
