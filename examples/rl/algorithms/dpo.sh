#!/bin/bash
# dpo.sh: DPO (mtc-train --mode dpo, beta 0.1) over the job's nodes:
# mtc rl launch -N 2 --cluster-type local --job-script algorithms/dpo.sh.
# INIT (the reference and starting weights), DATA (builtin:tiny-dpo or a preference JSONL),
# STEPS, MODEL, CONFIG.
. "$(dirname "${BASH_SOURCE[0]}")/common.inc"
DIR=$(prepare dpo "${DATA:-builtin:tiny-dpo}")
train --mode dpo --data "$DIR" --tokenizer "$DIR/tokenizer.json" --batch $((4 * NNODES)) \
    --seq 96 --lr 3e-4 --dpo-beta 0.1 --log-every 1
