#!/usr/bin/env bash
# bench/elastic.sh: elastic node pools (docs/clusters.md, "Elastic node
# pools"). A local cluster with one static and one elastic node:
#  - resume latency: seconds from `sbatch -N2` (needing the powered-down
#    node) to the job RUNNING, median over N (default 10) rounds, each after
#    the node was powered down again; baseline: the same for a job on the
#    static node (already up), measured in the same run, and the ratio;
#  - what a powered-down node saves: RSS and CPU (over 10 s idle) of the
#    elastic node's processes (slurmd, mtc-agent) while it is up; powered
#    down it has none.
# Usage: bench/elastic.sh [ROUNDS]
set -u
ROUNDS=${1:-10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${MTC_BUILD:-$ROOT/build}
export PATH=$B/bin:$PATH
W=$(mktemp -d /tmp/mtc-bench-elastic.XXXXXX)
export MTC_HOME=$W/home
mkdir -p "$MTC_HOME"
cleanup() {
    mtc --home "$MTC_HOME" cluster delete be >/dev/null 2>&1
    [ -f "$MTC_HOME/mtcd.pid" ] && kill "$(cat "$MTC_HOME/mtcd.pid")" 2>/dev/null
    sleep 1
    rm -rf "$W"
}
trap cleanup EXIT
cat >"$W/spec.json" <<JSON
{"nodePools": [
  {"id": "cpu", "machineSpec": {"machineType": "n2-standard-4"},
   "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 2, "suspendTimeSeconds": 5,
                   "resumeTimeoutSeconds": 60}},
  {"id": "login", "machineSpec": {"machineType": "n2-standard-4"}}],
 "orchestratorSpec": {"slurmSpec": {"loginNodePoolId": "login",
   "partitions": [{"id": "cpu", "nodePoolIds": ["cpu"]}], "defaultPartitionId": "cpu"}}}
JSON
mtcd --home "$MTC_HOME" --daemon --supervise-ms 1000 || exit 1
mtc cluster create -f "$W/spec.json" --id be >/dev/null || exit 1
eval "$(mtc env be)"
CD=$MTC_HOME/clusters/be

now() { date +%s.%N; }
state_is() { [ "$(sinfo -h -N -n "$1" -o %t 2>/dev/null | head -1)" = "$2" ]; }
wait_state() { # node state seconds
    local end=$((SECONDS + $3))
    while [ $SECONDS -lt $end ]; do state_is "$1" "$2" && return 0; sleep 0.2; done
    return 1
}
# seconds from submit until the job is running (or already done)
to_running() {
    local t0 j st
    t0=$(now)
    j=$(sbatch --parsable "$@" --wrap 'sleep 1') || return 1
    while :; do
        st=$(squeue -h -j "$j" -o %t 2>/dev/null)
        case "$st" in R | CG | "") break ;; esac
        sleep 0.05
    done
    echo "$(now) - $t0" | bc
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

base=() resume=()
for i in $(seq "$ROUNDS"); do
    wait_state be-cpu-1 "idle~" 120 || { echo "be-cpu-1 did not power down" >&2; exit 1; }
    base+=("$(to_running -N1 -w be-cpu-0)")
    resume+=("$(to_running -N2)")
    echo "# round $i: static ${base[-1]} s, resume ${resume[-1]} s" >&2
done
if [ "$ROUNDS" -gt 0 ]; then
    mb=$(printf '%s\n' "${base[@]}" | median)
    mr=$(printf '%s\n' "${resume[@]}" | median)
    printf 'elastic resume: job needing a powered-down node running after %.2f s (median of %d); on an up node %.2f s; ratio %.1fx\n' \
        "$mr" "$ROUNDS" "$mb" "$(echo "$mr / $mb" | bc -l)"
fi

# a powered-up elastic node's daemons (slurmd, mtc-agent: their recorded
# pids): RSS and CPU over 10 s, the node kept up by a sleeping job
sbatch -N1 -n1 -w be-cpu-1 --wrap 'sleep 40' >/dev/null # 1 of its CPUs: mix
wait_state be-cpu-1 mix 120 || { echo "be-cpu-1 did not come up" >&2; exit 1; }
sleep 2
pids=$(cat "$CD/run/slurmd-be-cpu-1.pid" "$CD/run/agent-be-cpu-1.pid")
ticks() { local t=0 p; for p in $pids; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo $t; }
rss=0
for p in $pids; do rss=$((rss + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0))); done
t0=$(ticks)
sleep 10
t1=$(ticks)
hz=$(getconf CLK_TCK)
printf 'elastic saving per powered-down node: %d processes, RSS %.1f MiB, CPU %.2f%% of a core (idle, over 10 s) -> 0 while powered down\n' \
    "$(echo $pids | wc -w)" "$(echo "$rss / 1024" | bc -l)" "$(echo "($t1 - $t0) * 100 / $hz / 10" | bc -l)"
