#!/bin/bash
# grpo.sh: GRPO (mtc-train --mode grpo) over the job's nodes, launched as NeMo-RL's
# examples are: mtc rl launch -N 2 --cluster-type local --job-script algorithms/grpo.sh.
# INIT (a checkpoint, e.g. an SFT run's), DATA (builtin:tiny-rl, builtin:tiny-countdown or
# a JSONL of {"prompt","answer"}), ENV (arithmetic | countdown), STEPS, MODEL, CONFIG.
. "$(dirname "${BASH_SOURCE[0]}")/common.inc"
DATA=${DATA:-builtin:tiny-rl}
DIR=$(prepare rl "$DATA")
train --mode grpo --data "$DIR" --tokenizer "$DIR/tokenizer.json" --env "${ENV:-arithmetic}" \
    --prompts-per-step "${PROMPTS:-$((2 * NNODES))}" --generations-per-prompt "${G:-4}" \
    --max-new-tokens 8 --seq 96 --lr 3e-4 --log-every 1
