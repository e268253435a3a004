#!/usr/bin/env bash
# ports: issue 50's loop — BENCH_N (50) 2-rank `mtc run -e local` runs of a
# PyTorch DDP program (tests/integration/ddp_train.py, 2 steps) beside
# port_hold (tests/tools/port_hold.c) holding 29500-32767 bound without
# listening and BENCH_CONN (6000) outgoing loopback connections whose local
# ends sit in 32768-49499 — the ports the old rule (29500 + job id mod 20000,
# moving on while a connect succeeds) picks from. Counts the runs that
# complete, fail, or hang (a rank said "Address already in use" and the run
# did not end within 10 s, or no end within 120 s: the bench cancels it). With
# BENCH_MTC_BEFORE=DIR (a build of an older tree: DIR/bin/mtc) the same loop
# runs that mtc first, beside the same holder, for a before/after in one run.
. "$(dirname "$0")/lib.inc"
N=${BENCH_N:-50}
PY=/usr/bin/python3
PROG=$ROOT/tests/integration/ddp_train.py
HOLD=$B/tests/tools/port_hold
[ -x "$HOLD" ] || { echo "ports: build $HOLD first (make)"; exit 1; }
cleanup() {
    bench_stop_pids
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$MTC_HOME"
cd "$W" || exit 1

"$HOLD" --bind 29500-32767 --connect "${BENCH_CONN:-6000}" --connect-from 32768-49499 \
    --ready "$W/held" &
PIDS+=($!)
for _ in $(seq 600); do [ -s "$W/held" ] && break; sleep 0.1; done
echo "port_hold: $(cat "$W/held" 2>/dev/null)"

# the processes of the run in task dir $1 (their MTC_TASK_DIR)
run_pids() {
    local p
    for p in /proc/[0-9]*; do
        tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qxF "MTC_TASK_DIR=$1" && echo "${p#/proc/}"
    done
}

# loop LABEL MTC: N runs with that mtc; prints the counts
loop() {
    local label=$1 mtc=$2 done=0 failed=0 hung=0 t0=$SECONDS i
    for i in $(seq "$N"); do
        local name="$label$i" st td log end=$((SECONDS + 120)) seen=0
        "$mtc" run -e local --command "$PY $PROG --steps 2" -n 2 --experiment-name "$name" \
            >/dev/null 2>&1
        td=$("$mtc" experiment status "$name" --json 2>/dev/null |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["taskDir"])')
        while :; do
            st=$("$mtc" experiment status "$name" 2>/dev/null | sed -n 's/^- Status: //p')
            [ "$st" = RUNNING ] || break
            log=$(cat "$td"/*.log 2>/dev/null)
            if [ "$seen" = 0 ] && grep -q 'Address already in use' <<<"$log"; then
                seen=1
                end=$((SECONDS + 10)) # a rank is gone: does the run end?
            fi
            [ $SECONDS -ge $end ] && { st=HUNG; break; }
            sleep 0.2
        done
        case "$st" in
        COMPLETED) done=$((done + 1)) ;;
        HUNG)
            hung=$((hung + 1))
            "$mtc" experiment cancel "$name" >/dev/null 2>&1
            for p in $(run_pids "$td"); do kill -9 "$p" 2>/dev/null; done
            ;;
        *) failed=$((failed + 1)) ;;
        esac
    done
    printf '%-7s %d runs: %d completed, %d failed, %d hung (%d s)\n' "$label" "$N" "$done" \
        "$failed" "$hung" $((SECONDS - t0))
}

if [ -n "${BENCH_MTC_BEFORE:-}" ]; then
    loop before "$BENCH_MTC_BEFORE/bin/mtc"
fi
loop after "$B/bin/mtc"
