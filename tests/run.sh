#!/usr/bin/env bash
# Runs the test suite: unit test binaries and integration scripts, each
# printing TAP lines. Counts "ok"/"not ok" across all of them; a program that
# exits non-zero without a "not ok" line counts as one failure. Ends with
# "N passed, N failed". Usage: tests/run.sh [unit|integration|PATTERN...]
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
export MTC_BUILD=$PWD/$B
export PATH=$PWD/$B/bin:$PATH
mkdir -p "$B/test-logs"
passed=0 failed=0
failures=()

select=("$@")
want() {
    local name=$1 kind=$2
    [ ${#select[@]} -eq 0 ] && return 0
    for s in "${select[@]}"; do
        [ "$s" = "$kind" ] && return 0
        s=${s##*/} s=${s%.sh} s=${s%.c} # a path names its test: tests/integration/X.sh, tests/unit/T.c
        case "$name" in *"$s"*) return 0 ;; esac
    done
    return 1
}

run_one() {
    local name=$1; shift
    local log="$B/test-logs/${name//:/-}.log"
    local start=$SECONDS
    "$@" >"$log" 2>&1 </dev/null
    local rc=$?
    local ok nok
    ok=$(grep -c '^ok ' "$log")
    nok=$(grep -c '^not ok ' "$log")
    if [ "$rc" -ne 0 ] && [ "$nok" -eq 0 ]; then nok=1; fi
    passed=$((passed + ok)); failed=$((failed + nok))
    if [ "$nok" -gt 0 ]; then
        failures+=("$name")
        printf 'FAIL %-40s %3d ok, %d failed (%ds) — see %s\n' "$name" "$ok" "$nok" $((SECONDS - start)) "$log"
        grep -E '^not ok|^#' "$log" | head -20 | sed 's/^/    /'
        [ "$rc" -ne 0 ] && tail -5 "$log" | sed 's/^/    | /'
    else
        printf 'pass %-40s %3d ok (%ds)\n' "$name" "$ok" $((SECONDS - start))
    fi
}

for t in "$B"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    want "$name" unit || continue
    run_one "$name" "$t"
done
# The sanitizer build's unit tests (make test sets SAN_B=build-san).
if [ -n "${SAN_B:-}" ] && [ -d "$SAN_B/tests" ]; then
    export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
    export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}
    for t in "$SAN_B"/tests/test_*; do
        [ -x "$t" ] || continue
        name=san:$(basename "$t")
        want "$name" unit || continue
        run_one "$name" "$t"
    done
    unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
fi
for t in tests/integration/*.sh; do
    [ -f "$t" ] || continue
    name=$(basename "$t" .sh)
    [ "$name" = lib ] && continue
    want "$name" integration || continue
    run_one "$name" timeout 1200 bash "$t"
done

[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
