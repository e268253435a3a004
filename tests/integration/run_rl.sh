#!/usr/bin/env bash
# run_rl: `mtc rl launch` makes <job_id>/ in the current directory with
# checkpoints/, logs/ and output.log; --interactive holds the allocation and
# writes attach.sh, which opens a shell inside the job on node N (mtc attach);
# examples/rl/algorithms/{grpo,sft,dpo}.sh train with mtc-train on both nodes into
# that layout.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR

check "local 2-node cluster up" run_cluster rl
mkdir -p "$D/rl/algorithms" && cd "$D/rl" || exit 1
cat >algorithms/dpo.sh <<'SH'
echo "algorithm on $(hostname) nodes=$NNODES ckpt=$MTC_CHECKPOINT_DIR"
srun -N2 -l printenv SLURMD_NODENAME
echo step1 >"$MTC_CHECKPOINT_DIR/state.txt"
SH
mtc rl launch -N 2 --cluster-type local --job-script algorithms/dpo.sh >"$D/l1.out" 2>&1
check "rl launch submits" test $? -eq 0
sed 's/^/# /' "$D/l1.out"
J=$(sed -n 's/^Submitted job \([0-9]*\):.*/\1/p' "$D/l1.out")
check "<job_id>/ with checkpoints/ and logs/" test -d "$J/checkpoints" -a -d "$J/logs"
check "job script ran" wait_for 60 grep -q "job script exited 0" "$J/output.log"
check "output.log has the script's output from both nodes" bash -c "grep -q '^1: rl-a3m-1' '$J/output.log' && grep -q '^0: rl-a3m-0' '$J/output.log'"
check "checkpoints written where the script was told" grep -qx step1 "$J/checkpoints/state.txt"

mtc rl launch -N 2 --interactive >"$D/l2.out" 2>&1
check "interactive launch submits" test $? -eq 0
J2=$(sed -n 's/^Submitted job \([0-9]*\):.*/\1/p' "$D/l2.out")
check "attach.sh written once it runs" wait_for 60 test -x "$J2/attach.sh"
check "allocation held" bash -c "squeue -h -j $J2 -o %T | grep -qx RUNNING"
if command -v script >/dev/null; then
    out=$(printf 'echo NODE=$SLURMD_NODENAME JOB=$SLURM_JOB_ID\nexit\n' |
        timeout 60 script -qec "bash $J2/attach.sh 1" /dev/null 2>&1)
    echo "$out" | grep NODE= | sed 's/^/# /'
    check "attach.sh 1: a shell inside the job on node 1" grep -q "NODE=rl-a3m-1 JOB=$J2" <<<"$out"
    out=$(printf 'echo NODE=$SLURMD_NODENAME\nexit\n' | timeout 60 script -qec "mtc attach $J2 0" /dev/null 2>&1)
    check "mtc attach JOB 0: node 0" grep -q "NODE=rl-a3m-0" <<<"$out"
else
    skip "script(1) not installed: no pty to attach with"
fi
check "  and still held after the attaches (the allocation outlives its shells)" \
    bash -c "squeue -h -j $J2 -o %T | grep -qx RUNNING"
mtc attach "$J2" 5 >"$D/a5" 2>&1
check "attach to a node the job lacks" grep -q "job $J2 has 2 nodes" "$D/a5"
scancel "$J2"
check "released with scancel" wait_for 120 absent "^$J2 RUNNING\$" -- squeue -h -o '%i %T'

# --- the algorithm scripts, NeMo-RL style: mtc-train on 2 nodes, one rank each
mkdir -p "$D/nemo" && cp -r "$ROOT/examples/rl/algorithms" "$D/nemo/" && cd "$D/nemo" || exit 1
export MTC_CACHE_DIR=$D/nemo-cache
for a in grpo sft dpo; do
    STEPS=2 mtc rl launch -N 2 --cluster-type local --job-script "algorithms/$a.sh" >"$D/$a.out" 2>&1
    J=$(sed -n 's/^Submitted job \([0-9]*\):.*/\1/p' "$D/$a.out")
    check "algorithms/$a.sh submitted" test -n "$J"
    [ $a = grpo ] && JG=$J
    wait_for 300 grep -q "job script exited" "$J/output.log"
    check "$a: the script exited 0" grep -q "job script exited 0" "$J/output.log"
    grep -E "step 2/2|mtc-train:" "$J/output.log" | sed 's/^/# /'
    check "$a: <job_id>/checkpoints/step_00000002 and 2 lines in <job_id>/logs/metrics.jsonl" \
        bash -c "test -e '$J/checkpoints/step_00000002/DONE' && [ \$(wc -l <'$J/logs/metrics.jsonl') -eq 2 ]"
    check "$a: written by 2 ranks" grep -q '"nranks": 2' "$J/checkpoints/step_00000002/meta.json"
done
check "grpo: rewards in the metrics, the reference beside the checkpoints" bash -c \
    "grep -q reward_mean '$JG/logs/metrics.jsonl' && test -e '$JG/checkpoints/reference/step_00000000/DONE'"
done_testing
