#!/usr/bin/env bash
# grpo: where a GRPO step's time goes (rollout vs training tokens/s and seconds per step,
# from metrics.jsonl), accuracy vs step for the tiny setup (an SFT stage on sums, then GRPO
# on the arithmetic environment, as tests/integration/train_grpo.sh), and the KV-cache
# engine's rollouts against cache-less sampling (bench/grpo_rollout.c). One thread.
# `bench/grpo.sh pack` runs only the SFT stage and the training pass of GRPO steps with
# packed rows (the default) against padded rows (--no-pack) on the same seeds, alternating,
# REPS times (2) for each --seq: the tiny setup's 36 (max 4 new tokens) and 64 (max 32);
# STEPS (10) steps a run. Prints the mean training seconds per step (train_s) of each and
# the whole runs' CPU time (rollouts, the same both ways, included; less noisy under load).
set -eu
MODE=${1:-all}
cd "$(dirname "$0")/.."
B=$(basename "${MTC_BUILD:-build}")
export PATH=$PWD/$B/bin:$PATH OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
[ -x "$B/bin/mtc-train" ] || make -s "$B/bin/mtc-train"
mkdir -p "$B/bench"
cc -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -Isrc -fopenmp -fno-trapping-math \
    -fvect-cost-model=dynamic \
    -I/usr/include/x86_64-linux-gnu/openblas-pthread $(mpicc --showme:compile 2>/dev/null) \
    -o "$B/bench/grpo_rollout" bench/grpo_rollout.c "$B/libmtctrain.a" \
    -fopenmp -lopenblas -ljansson $(mpicc --showme:link 2>/dev/null) -lcrypto -lpthread -lm
W=$(mktemp -d /tmp/mtc-bench-grpo.XXXXXX)
trap 'rm -rf "$W"' EXIT
echo "threads: OMP_NUM_THREADS=$OMP_NUM_THREADS nproc=$(nproc)"

if [ "$MODE" != pack ]; then
    echo "== KV-cache rollouts vs cache-less sampling (same model, prompts, seeds)"
    "$B/bench/grpo_rollout" tiny-llama 64 32 32
    "$B/bench/grpo_rollout" gpt2-124m 4 16 16
fi

echo "== the tiny setup: SFT on sums, then GRPO on arithmetic (8 prompts x 8 generations)"
RL=$(mtc-train data prepare --source builtin:tiny-rl --kind rl --cache-dir "$W/cache" 2>/dev/null | cut -d' ' -f2)
python3 - "$W" <<'PY'
import json, random, sys
d = sys.argv[1]
random.seed(1)
with open(d + "/sft.jsonl", "w") as f:
    for i in range(2000):
        a, b = random.randrange(10), random.randrange(10)
        f.write(json.dumps({"prompt": f"What is {a} + {b}?", "response": str(a + b)}) + "\n")
with open(d + "/rl.jsonl", "w") as f:
    for a in range(3):
        for b in range(3):
            f.write(json.dumps({"prompt": f"What is {a} + {b}?", "answer": str(a + b)}) + "\n")
PY
CFG='{"vocab_size":1024,"max_seq":64,"n_layer":2,"d_model":64,"n_head":4,"n_kv_head":2,"d_ff":192}'
M=(--model tiny-llama --config "$CFG" --tokenizer "$RL/tokenizer.json" --log-every 1000)
mtc-train "${M[@]}" --mode sft --data "$W/sft.jsonl" --steps 150 --batch 16 --seq 32 --lr 3e-3 \
    --warmup 5 --shuffle --checkpoint-dir "$W/sft" >/dev/null 2>&1
if [ "$MODE" = pack ]; then
    echo "== the training pass, packed rows vs padded rows (--no-pack), same seeds"
    for SEQ in 36:4 64:32; do
        for r in $(seq "${REPS:-2}"); do
            for P in pack no-pack; do
                /usr/bin/time -f "%U %S" -o "$W/$SEQ-$r-$P.cpu" \
                    mtc-train "${M[@]}" --mode grpo --init "$W/sft" --data "$W/rl.jsonl" --shuffle \
                    --seq "${SEQ%:*}" --max-new-tokens "${SEQ#*:}" --lr 1e-3 --min-lr 1e-3 \
                    --steps ${STEPS:-10} --prompts-per-step 8 --generations-per-prompt 8 \
                    --micro-batch 32 --checkpoint-dir "$W/$SEQ-$r-$P" \
                    $([ $P = pack ] || echo --no-pack) >/dev/null 2>&1
            done
            python3 - "$W/$SEQ-$r-pack" "$W/$SEQ-$r-no-pack" "${SEQ%:*}" "${SEQ#*:}" "$r" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
b = [json.loads(l) for l in open(sys.argv[2] + "/metrics.jsonl")]
ca, cb = (sum(map(float, open(d + ".cpu").read().split()[-2:])) for d in sys.argv[1:3])
same = all(x["reward_mean"] == y["reward_mean"] for x, y in zip(a, b))
dl = max(abs(x["loss"] - y["loss"]) for x, y in zip(a, b))
ta = sum(x["train_s"] for x in a) / len(a); tb = sum(x["train_s"] for x in b) / len(b)
ra = sum(x["train_rows"] for x in a) / len(a); rb = sum(x["train_rows"] for x in b) / len(b)
tok = sum(x["train_tokens_per_s"] * x["train_s"] for x in a) / len(a)
print("--seq %s, max %s new, run %s: %.0f tokens/step | packed %.1f rows, %.3f s/step | padded "
      "%.0f rows, %.3f s/step | training %.2fx faster | whole run's CPU time %.2f s vs %.2f s "
      "(%.2fx) | rewards identical: %s, max |loss diff| %.1g"
      % (sys.argv[3], sys.argv[4], sys.argv[5], tok, ra, ta, rb, tb, tb / ta, ca, cb, cb / ca,
         same, dl))
PY
        done
    done
    exit 0
fi
mtc-train "${M[@]}" --mode grpo --init "$W/sft" --data "$W/rl.jsonl" --shuffle --seq 36 \
    --max-new-tokens 4 --lr 1e-3 --min-lr 1e-3 --steps ${STEPS:-40} --prompts-per-step 8 \
    --generations-per-prompt 8 --micro-batch 32 --checkpoint-dir "$W/grpo" >/dev/null 2>&1
python3 - "$W/grpo/metrics.jsonl" <<'PY'
import json, sys
m = [json.loads(l) for l in open(sys.argv[1])]
print("step  accuracy  reward_std  kl      entropy  len   gen tok/s  train tok/s  gen s  train s")
for x in m:
    if x["step"] % 5 == 0 or x["step"] == 1:
        print("%4d  %8.3f  %10.3f  %.4f  %7.3f  %4.1f  %9.0f  %11.0f  %5.2f  %7.2f" % (
            x["step"], x["accuracy"], x["reward_std"], x["kl"], x["entropy"],
            x["response_length"], x["gen_tokens_per_s"], x["train_tokens_per_s"], x["gen_s"],
            x["train_s"]))
a = [x["accuracy"] for x in m]
g = sum(x["gen_s"] for x in m); t = sum(x["train_s"] for x in m)
print("accuracy, mean of 5 steps: first %.3f, last %.3f" % (sum(a[:5]) / 5, sum(a[-5:]) / 5))
print("time per step: rollouts %.2f s (%.0f%%), training %.2f s (%.0f%%)" % (
    g / len(m), 100 * g / (g + t), t / len(m), 100 * t / (g + t)))
PY
