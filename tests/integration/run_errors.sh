#!/usr/bin/env bash
# run_errors: the errors users meet with `mtc run`, each said before anything
# is submitted where it can be (unknown recipe, missing data or tokenizer, more
# nodes than the partition has, a container image that is missing or no image), and
# Slurm's own message plus the partitions for an unknown partition; --dry-run
# prints a complete sbatch script for every recipe and cluster type.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR

# --dry-run needs no cluster: every catalog recipe on every cluster type
mtc recipes list --json >"$D/cat.json"
check "recipes list --json" test -s "$D/cat.json"
mtc recipes list >"$D/list.out"
check "recipes list shows the 2B pretraining recipe" grep -q "^pretrain/llama3p1_2b_pt " "$D/list.out"
mtc recipes show sft/llama3p1_2b_sft >"$D/show.out"
check "recipes show prints the recipe" grep -q '"task": "sft"' "$D/show.out"
# values that reach #SBATCH lines: mtc rl launch checks them as mtc run does
out=$(mtc rl launch -N 1 --interactive --time $'1:00:00\ntouch /tmp/pwned' 2>&1); rc=$?
check "rl launch --time with a newline: exit 2, one line naming --time" \
    bash -c "[ $rc = 2 ] && [ \$(wc -l <<<'$out') = 1 ] && grep -q -- '--time' <<<'$out'"
out=$(mtc rl launch -N 1 --interactive -p $'a3m\n#SBATCH --uid=0' 2>&1); rc=$?
check "rl launch -p with a newline: exit 2 naming -p" bash -c "[ $rc = 2 ] && grep -q -- '-p a3m' <<<'$out'"
out=$(mtc run -s pretrain/tiny_gpt2_pt -p a3m --time '1h; id' --dry-run 2>&1); rc=$?
check "mtc run --time '1h; id': refused" bash -c "[ $rc != 0 ] && grep -q -- '--time' <<<'$out'"
bad=""
n=0
for r in $(python3 -c 'import json,sys; [print(x["name"]) for x in json.load(open(sys.argv[1]))]' "$D/cat.json"); do
    for t in local hcc-a3m hcc-a3u hcc-a4 hcc-a3h; do
        n=$((n + 1))
        out=$(mtc run -s "$r" --slurm-type "$t" -p a3m --dry-run 2>/dev/null) || { bad="$bad $r@$t(rc)"; continue; }
        for want in '#!/bin/bash' '#SBATCH --requeue' '#SBATCH --signal=USR1@' '#SBATCH --open-mode=append' \
            'srun --mpi=pmix' "'--resume' 'auto'" "'--checkpoint-dir'" "'--log-dir'" '#SBATCH --partition=a3m'; do
            grep -qF -- "$want" <<<"$out" || bad="$bad $r@$t($want)"
        done
        case $r in sft/*) grep -qF "'--mode' 'sft'" <<<"$out" || bad="$bad $r@$t(mode)" ;; esac
        case $r in dpo/*) grep -qF "'--mode' 'dpo'" <<<"$out" || bad="$bad $r@$t(mode)" ;; esac
        case $t in hcc-*) grep -qF '#SBATCH --gpus-per-node=8' <<<"$out" || bad="$bad $r@$t(gpus)" ;; esac
    done
done
[ -n "$bad" ] && diag "dry-run problems:$bad"
check "--dry-run renders all $n recipe x cluster-type scripts" test -z "$bad"
mtc run -s pretrain/llama3p1_2b_pt.py --slurm-type hcc-a3u -p a3m -n 2 --experiment-name demo-run --dry-run >"$D/dry.out" 2>/dev/null
check "NeMo-style .py name, 2 nodes x 8 GPUs" grep -q 'srun --mpi=pmix --ntasks-per-node=8 ' "$D/dry.out"
check "--dry-run creates no experiment" test ! -e "$MTC_HOME/experiments"

check "local 2-node cluster up" run_cluster re
check "tiny corpus tokenized" run_corpus "$D/data"
run_recipe "$D/r.json" 10 5

mtc run -s pretrain/no_such_recipe >"$D/e1" 2>&1
check "unknown recipe: non-zero exit" test $? -ne 0
check "unknown recipe: named" grep -q 'unknown recipe "pretrain/no_such_recipe"' "$D/e1"
check "unknown recipe: the list of recipes" grep -qx '  pretrain/tiny_gpt2_pt' "$D/e1"

mtc run -s "$D/r.json" -p general --data-dir "$D/data" >"$D/e2" 2>&1
check "unknown partition: non-zero exit" test $? -ne 0
sed 's/^/# /' "$D/e2"
check "unknown partition: Slurm's message" grep -q 'sbatch: error: invalid partition specified: general' "$D/e2"
check "unknown partition: the partitions" grep -q 'partitions: a3m (2 nodes, default)' "$D/e2"
check "unknown partition: no experiment left behind" test ! -e "$MTC_HOME/experiments"

start=$SECONDS
mtc run -s "$D/r.json" --data-dir "$D/nodata" >"$D/e3" 2>&1
check "missing data: non-zero exit" test $? -ne 0
check "missing data: the path named" grep -q "data.path: $D/nodata/tiny does not exist" "$D/e3"
check "missing data: said at once" test $((SECONDS - start)) -lt 10
mkdir -p "$D/notok/tiny" && cp "$D/data/tiny/"*.bin "$D/notok/tiny/"
mtc run -s "$D/r.json" --data-dir "$D/notok" >"$D/e4" 2>&1
check "missing tokenizer: named" grep -q "data.tokenizer: $D/notok/tiny/tokenizer.json does not exist" "$D/e4"
mtc run -s "$D/r.json" --data-dir "$D/data" --from-checkpoint "$D/nockpt" >"$D/e5" 2>&1
check "missing --from-checkpoint: named" grep -q "does not exist" "$D/e5"
check_absent "nothing was submitted" . -- squeue -h

mtc run -s "$D/r.json" --data-dir "$D/data" -n 3 >"$D/e6" 2>&1
check "too many nodes: non-zero exit" test $? -ne 0
check "too many nodes: said before submitting" grep -q -- "-n 3: partition a3m has 2 nodes" "$D/e6"
mtc run -s "$D/r.json" --data-dir "$D/data" -p a3m -n 5 >"$D/e7" 2>&1
check "too many nodes with -p" grep -q -- "-n 5: partition a3m has 2 nodes" "$D/e7"
check_absent "still nothing submitted" . -- squeue -h

mtc run -s "$D/r.json" --data-dir "$D/data" -i "$D/image.sqsh" >"$D/e8" 2>&1
check "a missing container image: named, non-zero exit" \
    bash -c "[ $? -ne 0 ] && grep -q -- '-i $D/image.sqsh: No such file' '$D/e8'"
echo "not squashfs" >"$D/bad.sqsh"
mtc run -s "$D/r.json" --data-dir "$D/data" -i "$D/bad.sqsh" >"$D/e8b" 2>&1
check "a file that is no image: named" grep -q "bad.sqsh: not a squashfs image" "$D/e8b"
mtc run -s "$D/r.json" --data-dir "$D/data" --slurm-type hcc-x >"$D/e9" 2>&1
check "unknown cluster type listed" grep -q "known: hcc-a3m, hcc-a3u, hcc-a4, hcc-a3h, local" "$D/e9"
echo '{"task":"pretrain","model":{"preset":"tiny-gpt2"},"data":{"path":"tiny","tokenizer":"t"},"train":{"steps":1,"global_batch":8,"seq_length":64,"learning_rate":1}}' >"$D/bad.json"
mtc run -s "$D/bad.json" >"$D/e10" 2>&1
check "a bad field is named" grep -q "train.learning_rate: unknown field" "$D/e10"
( unset SLURM_CONF; SLURM_CONF=$D/none.conf mtc run -s "$D/r.json" --data-dir "$D/data" ) >"$D/e11" 2>&1
check "no cluster in this shell: says how to get one" grep -q 'mtc env ID' "$D/e11"
done_testing
