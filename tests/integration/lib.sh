# lib.sh: helpers for integration scripts — TAP output, a private MTC_HOME,
# and cleanup that stops every daemon the test started (by recorded pid).
# Source it first: . "$(dirname "$0")/lib.sh"
set -u
T_N=0
T_FAILED=0
T_PIDS=()
T_DIR=$(mktemp -d /tmp/mtc-test.XXXXXX)
export MTC_HOME=$T_DIR/home
mkdir -p "$MTC_HOME"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${MTC_BUILD:-$ROOT/build}
export PATH=$B/bin:$PATH

ok() { T_N=$((T_N + 1)); echo "ok $T_N - $*"; }
nok() { T_N=$((T_N + 1)); T_FAILED=$((T_FAILED + 1)); echo "not ok $T_N - $*"; }
# check "description" command...  — passes when the command succeeds
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }
diag() { echo "# $*"; }

# Remember a pid to stop at exit.
track_pid() { T_PIDS+=("$1"); }

# Wait until a command succeeds (up to $1 seconds, polling every 0.2 s).
wait_for() {
    local secs=$1; shift
    local end=$((SECONDS + secs))
    while [ $SECONDS -lt $end ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    "$@" >/dev/null 2>&1
}

t_cleanup() {
    local rc=$?
    [ "$(type -t t_extra_cleanup)" = function ] && t_extra_cleanup
    for p in "${T_PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in "${T_PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null
    done
    if [ "$T_FAILED" -eq 0 ] && [ "$rc" -eq 0 ]; then rm -rf "$T_DIR"; else echo "# kept $T_DIR"; fi
}
trap t_cleanup EXIT

done_testing() { echo "1..$T_N"; [ "$T_FAILED" -eq 0 ]; exit $?; }
