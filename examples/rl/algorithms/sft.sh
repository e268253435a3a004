#!/bin/bash
# sft.sh: supervised fine-tuning (mtc-train --mode sft) over the job's nodes:
# mtc rl launch -N 2 --cluster-type local --job-script algorithms/sft.sh.
# INIT, DATA (builtin:tiny-sft or a chat JSONL), STEPS, MODEL, CONFIG.
. "$(dirname "${BASH_SOURCE[0]}")/common.inc"
DIR=$(prepare sft "${DATA:-builtin:tiny-sft}")
train --mode sft --data "$DIR" --tokenizer "$DIR/tokenizer.json" --batch $((8 * NNODES)) \
    --seq 96 --lr 1e-3 --shuffle --log-every 1
