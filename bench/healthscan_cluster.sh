#!/usr/bin/env bash
# `mtc healthscan` end to end on local clusters of 2, 4 and 8 emulated nodes:
# wall time of each check (straggler, collective) from the CLI's request to
# its printed report — the API, sbatch, the job's srun steps of mtc-scan, the
# report — and, as the baseline measured in the same run, the same mtc-scan
# mode run by a bare `srun` on the same nodes (the control plane's overhead is
# the difference). Lean sizes: --max-bytes 1 MiB, --microbatches 100.
# Usage: bench/healthscan_cluster.sh [NODE_COUNTS...]   (default: 2 4 8)
. "$(dirname "$0")/lib.inc"
command -v srun >/dev/null || { echo "Slurm not installed"; exit 0; }
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(2 4 8)
cleanup() {
    for id in $(mtc cluster list --json 2>/dev/null | python3 -c 'import json,sys; [print(c["name"].split("/")[-1]) for c in json.load(sys.stdin).get("modelDevelopmentClusters",[])]' 2>/dev/null); do
        mtc cluster delete "$id" >/dev/null 2>&1
    done
    bench_stop_pids
    rm -rf "$W"
}
trap cleanup EXIT
bench_start_mtcd --supervise-ms 1000 || exit 1
now() { date +%s.%N; }
ARGS=(--max-bytes 1048576 --microbatches 100)
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
printf '%-6s %-11s %10s %10s %8s  %s\n' nodes check "scan(s)" "srun(s)" ratio verdict
for n in "${SIZES[@]}"; do
    id=b$n
    cat >"$W/spec-$n.json" <<JSON
{"nodePools": [{"id": "cpu", "machineSpec": {"machineType": "n2-standard-2"},
   "scalingSpec": {"minNodeCount": $n, "maxNodeCount": $n}}],
 "orchestratorSpec": {"slurmSpec": {"partitions": [{"id": "cpu", "nodePoolIds": ["cpu"]}],
   "defaultPartitionId": "cpu"}}}
JSON
    mtc cluster create -f "$W/spec-$n.json" --id $id >/dev/null || { echo "create $n nodes failed"; continue; }
    eval "$(mtc env $id)"
    idle() { [ "$(sinfo -h -N -p cpu -o %T | sort -u)" = idle ]; }
    for check in straggler collective; do
        for _ in $(seq 100); do idle && break; sleep 0.3; done # the baseline's job leaving
        t0=$(now)
        mtc healthscan $id -c $check "${ARGS[@]}" --json >"$W/$id-$check.json" 2>&1
        t1=$(now)
        verdict=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r.get("response",{}).get("state") or r.get("error",{}).get("message","?"))' "$W/$id-$check.json" 2>/dev/null)
        # baseline: the same modes by bare srun (the nodes are idle again)
        modes=pipeline; [ $check = collective ] && modes="pairs ring"
        t2=$(now)
        base_ok=yes
        for m in $modes; do
            # exit 0 pass, 1 a FAIL verdict: both ran the mode; anything else did not
            srun --mpi=pmix -N $n --ntasks-per-node=1 mtc-scan $m "${ARGS[@]}" >/dev/null 2>&1
            case $? in 0 | 1) ;; *) base_ok="no ($m exit $?)" ;; esac
        done
        t3=$(now)
        if [ "$base_ok" != yes ]; then
            echo "$n $check: the baseline srun failed: $base_ok — no ratio"
            continue
        fi
        python3 -c "
s, b = $t1 - $t0, $t3 - $t2
print('%-6d %-11s %10.2f %10.2f %8.2f  %s' % ($n, '$check', s, b, s / b, '${verdict:-?}'))"
    done
    mtc cluster delete $id >/dev/null
done
