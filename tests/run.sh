#!/usr/bin/env bash
# Runs the test suite: unit test binaries and integration scripts, each
# printing TAP lines, and counts what they say (tests/README.md, "What
# counts"). A program passes when it exits 0, prints one plan 1..N with N its
# ok/not ok lines, and no "not ok"; "ok ... # SKIP why" is a skip, never a
# pass, and "1..0 # SKIP why" skips the whole program. A program with no
# checks, a wrong or missing plan, a non-zero exit or a timeout is a failure.
# On a machine scripts/setup prepared ($B/.setup-done) nothing may skip: a
# skip there is a failure. The sanitizer rerun of the unit tests is reported
# on its own line; its failures count, its passes are not counted twice.
# Ends with "N passed, N failed" (", N skipped" when any).
# Usage: tests/run.sh [unit|integration|PATTERN...]
# Environment: B (build dir), SAN_B (sanitizer build dir), T_TIMEOUT
# (seconds per program, default 1200), T_INTEGRATION (scripts' directory),
# T_STRICT=1|0 (skips are failures; default: 1 when $B/.setup-done exists).
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
case $B in /*) export MTC_BUILD=$B ;; *) export MTC_BUILD=$PWD/$B ;; esac
export PATH=$MTC_BUILD/bin:$PATH
INTEGRATION=${T_INTEGRATION:-tests/integration}
TIMEOUT=${T_TIMEOUT:-1200}
STRICT=${T_STRICT:-$([ -e "$B/.setup-done" ] && echo 1 || echo 0)}
mkdir -p "$B/test-logs"
passed=0 failed=0 skipped=0
failures=() skips=()
san_passed=0 san_failed=0

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

# tap LOG: "ok nok skip plans plan checks" of a TAP log, then each skip's
# reason on a line of its own (the plan's "# SKIP why" first when it has one).
tap() {
    awk '
    function why(s) { sub(/^[^#]*#[ \t]*[Ss][Kk][Ii][Pp][ \t]*/, "", s); return s == "" ? "no reason given" : s }
    /^ok([ \t]|$)/ { checks++; if ($0 ~ /#[ \t]*[Ss][Kk][Ii][Pp]/) { skip++; r[skip] = why($0) } else ok++; next }
    /^not ok([ \t]|$)/ { checks++; nok++; next }
    /^1\.\.[0-9]+/ { plans++; plan = substr($1, 4) + 0; if ($0 ~ /#[ \t]*[Ss][Kk][Ii][Pp]/) pskip = why($0) }
    END {
        printf "%d %d %d %d %d %d\n", ok, nok, skip, plans, plan, checks
        if (pskip != "") print pskip
        for (i = 1; i <= skip; i++) print r[i]
    }' "$1"
}

# run_one NAME [san] CMD...: run CMD (under the timeout), count its TAP log.
run_one() {
    local name=$1 kind=$2
    shift 2
    local log="$B/test-logs/${name//:/-}.log" start=$SECONDS
    # TERM to the test's process group at the limit; its cleanup (lib.sh's
    # EXIT trap: deleting clusters, stopping daemons) gets 90 s before KILL
    timeout --kill-after=90 "$TIMEOUT" "$@" >"$log" 2>&1 </dev/null
    local rc=$?
    local counts ok nok skip plans plan checks why=()
    counts=$(tap "$log")
    read -r ok nok skip plans plan checks <<<"$(head -1 <<<"$counts")"
    mapfile -t why < <(tail -n +2 <<<"$counts")
    local problems=()
    if [ "$plans" -eq 1 ] && [ "$plan" -eq 0 ] && [ "$checks" -eq 0 ] && [ ${#why[@]} -gt 0 ] && [ "$rc" -eq 0 ]; then
        skip=1 # 1..0 # SKIP why: the whole program
    elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        problems+=("timed out after ${TIMEOUT} s")
    elif [ "$rc" -ne 0 ] && [ "$nok" -eq 0 ]; then
        problems+=("exit status $rc without a \"not ok\" line")
    fi
    if [ "$skip" -eq 0 ] || [ "$plan" -ne 0 ]; then
        [ "$checks" -eq 0 ] && problems+=("no checks")
        [ "$plans" -eq 0 ] && problems+=("no plan (1..N)")
        [ "$plans" -gt 1 ] && problems+=("$plans plans")
        [ "$plans" -eq 1 ] && [ "$plan" -ne "$checks" ] && problems+=("plan 1..$plan but $checks checks")
    fi
    local bad=$((nok + (${#problems[@]} > 0 ? 1 : 0))) # a program's own problems: one failure
    if [ "$STRICT" = 1 ] && [ "$skip" -gt 0 ]; then # each skip a failure
        problems+=("$skip skipped on a machine scripts/setup prepared (nothing may skip here): ${why[0]}")
        bad=$((bad + skip)) skip=0
    fi
    if [ "$kind" = san ]; then
        san_passed=$((san_passed + ok)) san_failed=$((san_failed + bad))
    else
        passed=$((passed + ok)) failed=$((failed + bad)) skipped=$((skipped + skip))
        local w
        for w in "${why[@]}"; do [ "$skip" -gt 0 ] && skips+=("$name: $w"); done
    fi
    if [ "$bad" -gt 0 ]; then
        failures+=("$name")
        printf 'FAIL %-40s %3d ok, %d failed (%ds) — see %s\n' "$name" "$ok" "$bad" $((SECONDS - start)) "$log"
        local p
        for p in "${problems[@]}"; do echo "    $p"; done
        grep -E '^not ok|^#' "$log" | head -20 | sed 's/^/    /'
        [ "$rc" -ne 0 ] && tail -5 "$log" | sed 's/^/    | /'
    elif [ "$skip" -gt 0 ] && [ "$ok" -eq 0 ]; then
        printf 'skip %-40s %s\n' "$name" "${why[0]}"
    else
        printf 'pass %-40s %3d ok%s (%ds)\n' "$name" "$ok" "$([ "$skip" -gt 0 ] && echo ", $skip skipped")" \
            $((SECONDS - start))
    fi
}

for t in "$B"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    want "$name" unit || continue
    run_one "$name" unit "$t"
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
        run_one "$name" san "$t"
    done
    unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
fi
for t in "$INTEGRATION"/*.sh; do
    [ -f "$t" ] || continue
    name=$(basename "$t" .sh)
    [ "$name" = lib ] && continue
    want "$name" integration || continue
    run_one "$name" integration bash "$t"
done

if [ ${#skips[@]} -gt 0 ]; then
    echo "skipped:"
    printf '    %s\n' "${skips[@]}"
fi
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
[ -n "${SAN_B:-}" ] &&
    echo "sanitizer rerun of the unit tests (ASan+UBSan): $san_passed passed, $san_failed failed (not in the totals below but for its failures)"
failed=$((failed + san_failed))
echo "$passed passed, $failed failed$([ "$skipped" -gt 0 ] && echo ", $skipped skipped")"
[ "$failed" -eq 0 ]
