#!/usr/bin/env bash
# run_grpo_chain: the README's GRPO chain as a new user runs it — the catalog's
# pretrain/tiny_llama_pt, then sft/tiny_llama_sft --from-experiment, then
# rl/tiny_llama_grpo --from-experiment, each stage preparing its own built-in data
# (`mtc run -e local`: the same recipes and sbatch script, no cluster) — and the
# GRPO run learns: from its metrics.jsonl, the mean accuracy of the first quarter of
# its steps is above 0.05 (the SFT stage makes the task reachable) and that of the
# last quarter is at least the first's + 0.15 (issue 48; docs/rl.md "The tiny recipe").
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
unset SLURM_CONF SLURM_JOB_ID
D=$T_DIR
export OMP_NUM_THREADS=1

# stage EXPERIMENT CHECK RECIPE [ARGS...]: run it to the end (bounded), print its last lines;
# CHECK passes when it completed; one that does not ends the test (nothing after it can run)
stage() {
    local e=$1 what=$2 st
    shift 2
    if mtc run -e local -s "$@" --experiment-name "$e" >"$D/$e.out" 2>&1; then
        st=$(run_wait_final 1100 "$e")
        tail -n 2 "$(sed -n 's/^- Local Directory: //p' "$D/$e.out")"/*.log | sed "s/^/# $e: /"
    else
        sed 's/^/# /' "$D/$e.out"
    fi
    [ "${st:-}" = COMPLETED ] && { ok "$what"; return; }
    nok "$what (${st:-not started})"
    mtc experiment cancel "$e" >/dev/null 2>&1 # still running when out of time: stop it
    done_testing
}

stage tiny-pt "pretrain/tiny_llama_pt completes" pretrain/tiny_llama_pt
stage tiny-sft "sft/tiny_llama_sft --from-experiment tiny-pt completes" \
    sft/tiny_llama_sft --from-experiment tiny-pt
stage tiny-grpo "rl/tiny_llama_grpo --from-experiment tiny-sft completes" \
    rl/tiny_llama_grpo --from-experiment tiny-sft

M=$(ls "$MTC_HOME"/experiments/tiny-grpo/*/tiny-grpo/logs/metrics.jsonl)
q=$(python3 - "$M" <<'PY'
import json, sys
a = [json.loads(l)["accuracy"] for l in open(sys.argv[1]) if '"accuracy"' in l]
k = len(a) // 4
print(len(a), "%.3f" % (sum(a[:k]) / k), "%.3f" % (sum(a[-k:]) / k), " ".join("%.2f" % x for x in a))
PY
)
read -r n first last steps <<<"$q"
diag "accuracy by step: $steps"
check "30 GRPO steps in metrics.jsonl (${n:-none})" test "${n:-0}" -eq 30
check "first quarter's accuracy ${first:-none} > 0.05: the SFT stage makes the task reachable" \
    python3 -c "import sys; sys.exit(0 if float('${first:-0}') > 0.05 else 1)"
check "last quarter's accuracy ${last:-none} >= first quarter's ${first:-none} + 0.15" \
    python3 -c "import sys; sys.exit(0 if float('${last:-0}') >= float('${first:-9}') + 0.15 else 1)"
done_testing
