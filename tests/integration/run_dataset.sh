#!/usr/bin/env bash
# A training job on a registered dataset through the API: trainingJobs with
# "dataset": NAME[@VERSION] on a local cluster reads that version's prepared
# data as it is (no preparation step) and completes; an unknown dataset or
# version, another kind, both data and dataset: 400 in one line naming the
# field, nothing submitted.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR

check "local cluster up" run_cluster dsrun
JOBS=$CLUSTERS/dsrun/trainingJobs
m() { mtc --home "$MTC_HOME" "$@"; }
check "a dataset: builtin:tiny-sft" bash -c "mtc --home '$MTC_HOME' data prepare chat --source builtin:tiny-sft --kind sft >/dev/null 2>&1"
PV=$(m --json data show chat | jq_ 'd["latestVersion"]["path"]')
# one_error STATUS TEXT: the last call's error, one line, containing TEXT
one_error() {
    [ "$HTTP_STATUS" = "$1" ] && python3 - "$BODY" "$2" <<'PY'
import json, sys
e = json.loads(sys.argv[1])["error"]
assert "\n" not in e["message"] and sys.argv[2] in e["message"], e
PY
}
squeue_count() { squeue -h | wc -l; }

api POST "$JOBS?trainingJobId=nosuch" '{"recipe":"sft/tiny_gpt2_sft","dataset":"nosuch"}'
check "unknown dataset: 400 naming it" one_error 400 "dataset: dataset nosuch not found"
api POST "$JOBS?trainingJobId=badver" '{"recipe":"sft/tiny_gpt2_sft","dataset":"chat@9"}'
check "unknown version: 400 naming the versions" one_error 400 "chat@9: no such version (dataset chat has 1)"
api POST "$JOBS?trainingJobId=kind" '{"recipe":"dpo/tiny_gpt2_dpo","dataset":"chat"}'
check "another kind: 400" one_error 400 "dataset chat holds sft data; this run needs dpo data"
api POST "$JOBS?trainingJobId=both" "{\"recipe\":\"sft/tiny_gpt2_sft\",\"dataset\":\"chat\",\"data\":\"$D/x.jsonl\"}"
check "data and dataset: 400" one_error 400 "give one of them"
api POST "$JOBS?trainingJobId=bad" '{"recipe":"sft/tiny_gpt2_sft","dataset":"Chat@x"}'
check "a malformed reference: 400 naming the field" one_error 400 "dataset: \"Chat@x\""
check "nothing submitted" test "$(squeue_count)" = 0
api GET "$JOBS"
check "no job stored" test "$(jq_ 'len(d.get("trainingJobs", []))' <<<"$BODY")" = 0

api POST "$JOBS?trainingJobId=ds" '{"recipe":"sft/tiny_gpt2_sft","dataset":"chat@1","experimentName":"dsrun","overrides":{"train":{"steps":4,"eval_every":0}}}'
check "a job on chat@1: 200" test "$HTTP_STATUS" = 200
TD=$(jq_ 'd.get("taskDir", "")' <<<"$BODY")
check "it completes" test "$(run_wait_final 300 dsrun)" = COMPLETED
check "its config reads the version's data" test "$(jq_ '(d["data"]["path"], d["data"]["dataset"])' <"$TD/config.json")" = "('$PV', 'chat@1')"
check "its script has no preparation step" bash -c "! grep -q 'data prepare' '$TD/sbatch.sh'"
check "the trainer read it" grep -q -- "--data $PV\|'--data' '$PV'" "$TD/sbatch.sh"
done_testing
