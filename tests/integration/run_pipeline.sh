#!/usr/bin/env bash
# run_pipeline: the whole product on a fresh MTC_HOME — `scripts/quickstart-train
# --pipeline` on a local 2-node cluster runs the catalog's tiny pretrain → SFT → DPO as
# three `mtc run` commands (each stage started from the previous experiment by name, no
# path typed, no data prepared by hand), prints each stage's loss, and the DPO model
# prefers the correct answers: reward accuracy >= 0.9 at the end.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR

check "local cluster up" run_cluster pipe
export MTC_CLUSTER=pipe
# bounded: a stage that hangs fails the test instead of waiting out its time limit
timeout 1500 "$ROOT/scripts/quickstart-train" --pipeline >"$D/qs.out" 2>&1
rc=$?
grep -E '^(quickstart|mtc: |\+ mtc run)' "$D/qs.out" | sed 's/^/# /'
check "quickstart-train --pipeline succeeds" test $rc -eq 0
for e in quickstart quickstart-sft quickstart-dpo; do
    check "$e completed" bash -c "mtc experiment status $e | grep -qx -- '- Status: COMPLETED'"
    check "$e: its loss printed" grep -q "^$e: loss step 1 " "$D/qs.out"
done
check "SFT started from the pretraining run's final checkpoint" bash -c \
    "python3 -c \"import json,glob; c=json.load(open(glob.glob('$MTC_HOME/experiments/quickstart-sft/*/*/config.json')[0])); \
assert c['checkpoint']['init'].endswith('/step_00000300') and c['checkpoint']['fromExperiment'].startswith('quickstart_'), c['checkpoint']\""
check "DPO started from the SFT run's" bash -c \
    "python3 -c \"import json,glob; c=json.load(open(glob.glob('$MTC_HOME/experiments/quickstart-dpo/*/*/config.json')[0])); \
assert c['checkpoint']['fromExperiment'].startswith('quickstart-sft_'), c['checkpoint']\""
for e in quickstart quickstart-sft; do
    check "$e: the loss fell" python3 - "$(ls "$MTC_HOME"/experiments/$e/*/*/logs/metrics.jsonl)" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if "loss" in r]
assert rows[-1]["loss"] < rows[0]["loss"] * 0.8, (rows[0]["loss"], rows[-1]["loss"])
PY
done
acc=$(sed -n 's/.*DPO reward accuracy \([0-9.]*\).*/\1/p' "$D/qs.out")
check "DPO reward accuracy printed and >= 0.9 (${acc:-none})" \
    python3 -c "import sys; sys.exit(0 if '$acc' and float('$acc') >= 0.9 else 1)"
done_testing
