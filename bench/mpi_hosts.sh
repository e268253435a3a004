#!/usr/bin/env bash
# MPI across hosts: bench/allreduce.c (MPI_Allreduce of float buffers, 1 KiB to
# 16 MiB) run with `srun --mpi=pmix -N2 -n2` on a hosts cluster of two test
# hosts (network namespaces on a private bridge, tests/integration/testhosts.inc:
# the ranks talk TCP between the hosts' own addresses, over veth pairs and a
# bridge) and on a local-provider cluster of two emulated nodes (the ranks on
# this machine, TCP over loopback), in the same run; bus bandwidth per size and
# the ratio hosts/local. Open MPI: OMPI_MCA_pml=ob1, OMPI_MCA_btl=self,vader,tcp,
# btl_tcp_if_include the test subnet (hosts) or 127.0.0.0/8 (local); both
# ranks are on different Slurm nodes, so Open MPI uses TCP between them either
# way — a third column runs the local cluster with btl=self,tcp to show it.
# BENCH_REPEATS (default 3) runs of each, interleaved; per size the median.
# Traffic: loopback and the test hosts' private bridge only; everything is torn
# down on exit.
BENCH_NAME=mpi_hosts
. "$(dirname "$0")/hosts.inc"
REPEATS=${BENCH_REPEATS:-3}
command -v mpicc >/dev/null || fail "mpicc not installed"

# the program lives under $T_DIR (/tmp): the test hosts share this root filesystem
mpicc -O2 -o "$T_DIR/allreduce" "$ROOT/bench/allreduce.c" || fail "mpicc failed"
testhosts_up 2 || fail "test hosts did not come up"
start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$(free_port)" || fail "mtcd did not start"

cat >"$T_DIR/hosts.json" <<JSON
{"ssh": {"keyFile": "$TESTHOSTS_KEY"},
 "nodePools": [{"id": "cpu", "machineSpec": {"machineType": "host"},
   "scalingSpec": {"minNodeCount": 2}, "hosts": ["${TESTHOSTS_ADDRS[1]}", "${TESTHOSTS_ADDRS[2]}"]}]}
JSON
cat >"$T_DIR/local.json" <<JSON
{"nodePools": [{"id": "cpu", "machineSpec": {"machineType": "local"},
   "scalingSpec": {"minNodeCount": 2, "maxNodeCount": 2}}]}
JSON
for c in hm lm; do
    [ $c = hm ] && s=hosts || s=local
    out=$(mtc cluster create -f "$T_DIR/$s.json" --id $c 2>&1)
    echo "$out"
    grep -q "done: cluster $c RUNNING (2 nodes" <<<"$out" || fail "$s cluster: $out"
done

# run KIND REP: allreduce on cluster hm (hosts) or lm (local, local-tcp); output to $T_DIR/KIND.REP
run() {
    local kind=$1 rep=$2
    (
        export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
        case $kind in
        hosts) eval "$(mtc env hm)"; export OMPI_MCA_btl_tcp_if_include=$TESTHOSTS_PREFIX.0/24 ;;
        local) eval "$(mtc env lm)"; export OMPI_MCA_btl_tcp_if_include=127.0.0.0/8 ;;
        local-tcp) eval "$(mtc env lm)"; export OMPI_MCA_btl_tcp_if_include=127.0.0.0/8 OMPI_MCA_btl=self,tcp ;;
        esac
        timeout 300 srun --mpi=pmix -N2 -n2 -D / "$T_DIR/allreduce"
    ) >"$T_DIR/$kind.$rep" 2>&1
    local rc=$?
    sed "s/^/$kind.$rep: /" "$T_DIR/$kind.$rep"
    [ $rc -eq 0 ] && grep -q "^# result checked" "$T_DIR/$kind.$rep"
}
KINDS="hosts local local-tcp"
for r in $(seq "$REPEATS"); do
    for k in $KINDS; do
        run "$k" "$r" || fail "allreduce on $k failed (run $r): $(tail -3 "$T_DIR/$k.$r" | tr '\n' ' ')"
    done
done
grep -h "^# 2 ranks" "$T_DIR"/hosts.1 "$T_DIR"/local.1 | sed 's/^/  /' >"$T_DIR/ranks"
# shellcheck disable=SC2086 # KINDS: a list
python3 - "$T_DIR" "$REPEATS" $KINDS <<'PY' >&3
import statistics, sys
d, reps, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
bw, us = {}, {}  # kind -> size -> [busbw GB/s], [time per call us]
for k in kinds:
    for r in range(1, reps + 1):
        for line in open(f"{d}/{k}.{r}"):
            f = line.split()
            if len(f) == 5 and f[0].isdigit():
                bw.setdefault(k, {}).setdefault(int(f[0]), []).append(float(f[4]))
                us.setdefault(k, {}).setdefault(int(f[0]), []).append(float(f[2]))
mb = {k: {s: statistics.median(v) for s, v in bw[k].items()} for k in kinds}
mu = {k: {s: statistics.median(v) for s, v in us[k].items()} for k in kinds}
def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
print(f"MPI_Allreduce (float, MPI_SUM), srun --mpi=pmix -N2 -n2, median of {reps} runs; bus bandwidth GB/s (2 ranks: = bytes/time) and time per call:")
print(f"  {'size':>7} | {'hosts GB/s':>10} {'local GB/s':>10} {'hosts/local':>11} | {'hosts us':>9} {'local us':>9} | {'local btl=self,tcp GB/s':>23}")
for s in sorted(mb["hosts"]):
    h, l, lt = mb["hosts"][s], mb["local"].get(s, 0), mb["local-tcp"].get(s, 0)
    print(f"  {size(s):>7} | {h:10.4f} {l:10.4f} {(h / l if l else 0):10.2f}x | {mu['hosts'][s]:9.1f} {mu['local'].get(s, 0):9.1f} | {lt:23.4f}")
PY
echo "  (hosts: TCP between two test hosts over veth + bridge; local: both ranks on this machine, TCP over loopback)" >&3
cat "$T_DIR/ranks" >&3
for c in hm lm; do
    out=$(mtc cluster delete $c 2>&1)
    grep -q "done: cluster deleted" <<<"$out" || fail "delete $c: $out"
done
echo "  load average (1/5/15 min) at the start: $LOAD0, at the end: $(cut -d" " -f1-3 /proc/loadavg) ($(nproc) cores)" >&3
[ -n "${BENCH_KEEP:-}" ] || T_FAILED=0 # BENCH_KEEP=1 keeps $T_DIR (mtcd.log, bench.log)
