#!/usr/bin/env bash
# The local provider's emulation at size: 16/32/64-node local clusters (one
# slurmd + mtc-agent per node on this host), each created twice, the two
# modes interleaved size by size — with Slurm's
# timeouts and fan-out sized to the nodes on the host (the provider's default)
# and with Slurm's usual fixed values (MTC_EMULATION_SIZING=fixed, the
# baseline) — measuring create → RUNNING, `srun -N<n> true` (time, success),
# and delete. At the largest size of the sized run: RSS of a node's slurmd and
# agent, and the cluster's CPU use at rest per node. The 64-node check of
# issue 19 runs here, not in `make test`: the benchmark fails when the sized
# `srun -N64 true` fails or the delete takes 15 s or more.
#   BENCH_NODES   sizes, one cluster at a time (default "16 32 64"; more
#                 for capacity: a delete that fails stops the run)
#   BENCH_MODES   "sized fixed" (default) or one of them
#   BENCH_IDLE_S  the at-rest window in seconds (default 30)
. "$(dirname "$0")/lib.inc"
NODES=${BENCH_NODES:-16 32 64}
MODES=${BENCH_MODES:-sized fixed}
IDLE_S=${BENCH_IDLE_S:-30}
SRUN_S=180
TICK=$(getconf CLK_TCK)
CORES=$(nproc)
# Last resort when mtcd cannot delete a cluster: SIGKILL the daemons recorded
# in its pid files (their command lines must name the cluster directory),
# then every process whose command line names it (slurmstepds, checks).
force_stop() {
    local d=$MTC_HOME/clusters/$1 p
    for p in $(cat "$d"/run/*.pid "$d"/run/slurm/*.pid 2>/dev/null | sort -u); do
        grep -qF "$d" "/proc/$p/cmdline" 2>/dev/null && kill -9 "$p"
    done
    sleep 1
    for p in $(pgrep -f "$d"); do kill -9 "$p" 2>/dev/null; done
}
cleanup() {
    if [ -n "${ID:-}" ]; then
        timeout 60 mtc cluster delete "$ID" >/dev/null 2>&1 || force_stop "$ID"
    fi
    bench_stop_pids
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }

spec() { # nodes
    cat >"$W/spec.json" <<J
{"nodePools":[{"id":"c","machineSpec":{"machineType":"local"},"scalingSpec":{"minNodeCount":$1,"maxNodeCount":$1}}],
 "orchestratorSpec":{"slurmSpec":{"partitions":[{"id":"c","nodePoolIds":["c"]}],"defaultPartitionId":"c"}}}
J
}

# CPU ticks of the cluster's daemons and their reaped children (health
# checks, prologs, epilogs): utime+stime+cutime+cstime of every process
# whose command line names the cluster directory.
cluster_ticks() {
    local d=$1 p t=0 v
    for p in /proc/[0-9]*; do
        grep -qF "$d" "$p/cmdline" 2>/dev/null || continue
        v=$(awk '{sub(/.*\) /, ""); print $12+$13+$14+$15}' "$p/stat" 2>/dev/null) || continue
        t=$((t + ${v:-0}))
    done
    echo $t
}
# Average RSS (KiB) of the processes whose command line matches $2 (a regex) under $1.
avg_rss() {
    ps -eo rss=,args= | grep -F "$1" | grep -E "$2" | awk '{s+=$1; n++} END {if (n) printf "%d", s/n; else print 0}'
}

mtcd_for() { # mode: (re)start mtcd with the sizing mode in its environment
    bench_stop_pids
    PIDS=()
    rm -rf "$MTC_HOME"
    if [ "$1" = fixed ]; then
        MTC_EMULATION_SIZING=fixed bench_start_mtcd --supervise-ms 2000
    else
        MTC_EMULATION_SIZING= bench_start_mtcd --supervise-ms 2000
    fi
}

declare -A CREATE SRUN SRUN_OK DELETE
fail=0
# interleaved: each size in both modes before the next size (a machine whose
# load drifts during the run weighs on both alike)
for n in $NODES; do
    for mode in $MODES; do
        mtcd_for "$mode" || { echo "mtcd did not start"; exit 1; }
        spec "$n"
        ID=e$n
        t0=$(now)
        if ! mtc cluster create -f "$W/spec.json" --id "$ID" >"$W/create.out" 2>&1; then
            echo "$mode $n: create failed: $(tail -1 "$W/create.out")"
            CREATE[$mode,$n]=fail SRUN[$mode,$n]=- SRUN_OK[$mode,$n]=no DELETE[$mode,$n]=-
            timeout 60 mtc cluster delete "$ID" >/dev/null 2>&1 || force_stop "$ID"
            ID=
            fail=1
            break 2
        fi
        CREATE[$mode,$n]=$(printf %.1f "$(since "$t0")")
        D=$MTC_HOME/clusters/$ID
        t0=$(now)
        SLURM_CONF=$D/slurm.conf timeout $SRUN_S srun -N"$n" true >"$W/srun.out" 2>&1
        rc=$?
        SRUN[$mode,$n]=$(printf %.1f "$(since "$t0")")
        why=$(grep -m1 -o 'Socket timed out on send/recv operation\|error: [^:]*' "$W/srun.out" | head -1)
        SRUN_OK[$mode,$n]=$([ $rc = 0 ] && echo yes || echo "no (rc $rc: ${why:-no message})")
        if [ "$mode" = sized ] && [ "$n" = "${NODES##* }" ]; then
            # at rest: the epilogs of the srun done first (every node idle)
            for _ in $(seq 120); do
                SLURM_CONF=$D/slurm.conf sinfo -h -o %t | grep -qvx idle || break
                sleep 1
            done
            RSS_SLURMD=$(avg_rss "$D" '^ *[0-9]+ slurmd ')
            RSS_AGENT=$(avg_rss "$D" 'mtc-agent run')
            RSS_CTLD=$(avg_rss "$D" '^ *[0-9]+ slurmctld ')
            c0=$(cluster_ticks "$D")
            sleep "$IDLE_S"
            c1=$(cluster_ticks "$D")
            IDLE_CPU=$(echo "scale=2; ($c1 - $c0) / $TICK / $IDLE_S * 100 / $n" | bc)
            IDLE_N=$n
        fi
        t0=$(now)
        if ! mtc cluster delete "$ID" >"$W/delete.out" 2>&1; then
            # a host past its capacity: never go on to a bigger cluster beside this one
            echo "$mode $n: delete failed: $(tail -1 "$W/delete.out"); stopping the cluster by pid, no bigger sizes"
            force_stop "$ID"
            DELETE[$mode,$n]=fail
            ID=
            fail=1
            break 2
        fi
        DELETE[$mode,$n]=$(printf %.1f "$(since "$t0")")
        ID=
        left=$(pgrep -f "$D" | wc -l)
        [ "$left" = 0 ] || { echo "$mode $n: $left process(es) left after delete"; fail=1; }
        echo "$mode $n nodes: create ${CREATE[$mode,$n]} s, srun ${SRUN[$mode,$n]} s (${SRUN_OK[$mode,$n]}), delete ${DELETE[$mode,$n]} s"
    done
done

echo "host: $CORES cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-6s %10s %10s  %-48s %10s\n' mode nodes create_s srun_s "srun ok" delete_s
for mode in $MODES; do
    for n in $NODES; do
        [ -n "${CREATE[$mode,$n]:-}" ] || continue
        printf '%-6s %-6s %10s %10s  %-48s %10s\n' "$mode" "$n" "${CREATE[$mode,$n]}" "${SRUN[$mode,$n]}" \
            "${SRUN_OK[$mode,$n]:0:48}" "${DELETE[$mode,$n]:--}"
    done
done
has_mode() { case " $MODES " in *" $1 "*) return 0 ;; esac; return 1; }
if has_mode sized && has_mode fixed; then
    for n in $NODES; do
        if [ "${SRUN_OK[fixed,$n]:-}" = yes ] && [ "${SRUN_OK[sized,$n]:-}" = yes ]; then
            echo "srun -N$n: sized/fixed time ratio $(echo "scale=2; ${SRUN[sized,$n]} / ${SRUN[fixed,$n]}" | bc)"
        else
            echo "srun -N$n: sized ${SRUN_OK[sized,$n]:0:3}, fixed ${SRUN_OK[fixed,$n]:0:3}" # "" when not run
        fi
    done
fi
if [ -n "${IDLE_N:-}" ]; then
    echo "per node at $IDLE_N nodes (sized): slurmd RSS ${RSS_SLURMD} KiB, mtc-agent RSS ${RSS_AGENT} KiB (slurmctld ${RSS_CTLD} KiB for all);"
    echo "  CPU at rest ${IDLE_CPU}% of a core per node (daemons + health checks, ${IDLE_S} s window)"
fi
# issue 19's check: the 64-node emulation works on this host
case " $NODES " in *" 64 "*)
    if has_mode sized; then
        if [ "${SRUN_OK[sized,64]:-}" != yes ]; then echo "FAIL: srun -N64 true: ${SRUN_OK[sized,64]:-not run}"; fail=1; fi
        d=${DELETE[sized,64]:--}
        if [ "$d" = - ] || [ "$d" = fail ] || [ "$(echo "$d >= 15" | bc)" = 1 ]; then
            echo "FAIL: 64-node delete: $d s (must be < 15)"; fail=1
        fi
    fi ;;
esac
exit $fail
