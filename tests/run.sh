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
# Programs run T_JOBS at a time (they share nothing: private homes, free
# ports, their own namespaces), one or two more while the cores sit idle
# (programs that mostly wait: for Slurm, a node's power, a test host), the
# longest first (tests/durations, or the last run's times); a script whose
# header says "# test: alone" runs with no other program beside it, one that says "# test: owns NAME" with none that
# says "uses NAME" or "owns NAME". Ends with the 15 slowest programs, the 15 that
# used the most CPU (each program's daemons and jobs counted in a cpuacct
# cgroup of its own, where the machine has cgroup v1's; all of them in
# $B/test-logs/cpu), a line saying how many ran at a time, and
# "N passed, N failed" (", N skipped" when any).
# Usage: tests/run.sh [unit|integration|PATTERN...]
# Environment: B (build dir), SAN_B (sanitizer build dir), SAN_BUILD (the
# command that builds SAN_B's unit tests, run beside the first programs: their
# sanitizer reruns wait for it; its output in $SAN_B.log), T_TIMEOUT
# (seconds per program, default 1200), T_INTEGRATION (scripts' directory),
# T_STRICT=1|0 (skips are failures; default: 1 when $B/.setup-done exists),
# T_JOBS (programs at once, default 3; 1 runs them one after another),
# T_JOBS_MAX (at most this many while the cores are idle, default T_JOBS + 3),
# T_IDLE_PCT (how idle, in % of the cores' time over 3 s; default 20).
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
case $B in /*) export MTC_BUILD=$B ;; *) export MTC_BUILD=$PWD/$B ;; esac
export PATH=$MTC_BUILD/bin:$PATH
INTEGRATION=${T_INTEGRATION:-tests/integration}
TIMEOUT=${T_TIMEOUT:-1200}
STRICT=${T_STRICT:-$([ -e "$B/.setup-done" ] && echo 1 || echo 0)}
JOBS=${T_JOBS:-3}
case $JOBS in '' | *[!0-9]* | 0) echo "tests/run.sh: T_JOBS must be a positive number, not '$JOBS'" >&2; exit 2 ;; esac
JOBS_MAX=${T_JOBS_MAX:-$((JOBS > 1 ? JOBS + 3 : 1))}
case $JOBS_MAX in '' | *[!0-9]* | 0) echo "tests/run.sh: T_JOBS_MAX must be a positive number, not '$JOBS_MAX'" >&2; exit 2 ;; esac
[ "$JOBS_MAX" -lt "$JOBS" ] && JOBS_MAX=$JOBS
LOGS=$B/test-logs
mkdir -p "$LOGS"
# where each program's CPU seconds are counted (cgroup v1's cpuacct; none: not counted)
CPUACCT=/sys/fs/cgroup/cpuacct
[ -w "$CPUACCT/cgroup.procs" ] && [ -r "$CPUACCT/cpuacct.usage" ] || CPUACCT=
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

# run_one NAME KIND CMD...: run CMD (under the timeout) and judge its TAP
# log. Runs in a subshell of its own: what it found goes to files the parent
# reads when it ends — NAME.result (counts and skip reasons, for `source`)
# and NAME.report (the lines to print).
run_one() {
    local name=$1 kind=$2
    shift 2
    local base="$LOGS/${name//:/-}" start=$SECONDS
    local log=$base.log cg=
    # its CPU time, daemons and detached jobs included: the program (this
    # subshell) in a cpuacct cgroup of its own, where the machine has one
    if [ -n "$CPUACCT" ] && cg="$CPUACCT/mtc-test-$$-${name//:/-}" && mkdir "$cg" 2>/dev/null; then
        echo "$BASHPID" >"$cg/cgroup.procs" || cg=
    else
        cg=
    fi
    # TERM to the test's process group at the limit; its cleanup (lib.sh's
    # EXIT trap: deleting clusters, stopping daemons) gets 90 s before KILL
    timeout --kill-after=90 "$TIMEOUT" "$@" >"$log" 2>&1 </dev/null
    local rc=$? cpu=
    if [ -n "$cg" ]; then
        cpu=$(($(cat "$cg/cpuacct.usage") / 1000000000))
        echo "$BASHPID" >"$CPUACCT/cgroup.procs"
        rmdir "$cg" 2>/dev/null # (a process left behind keeps it: its CPU is still counted above)
    fi
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
    local secs=$((SECONDS - start))
    {
        if [ "$bad" -gt 0 ]; then
            printf 'FAIL %-40s %3d ok, %d failed (%ds) — see %s\n' "$name" "$ok" "$bad" "$secs" "$log"
            local p
            for p in "${problems[@]}"; do echo "    $p"; done
            grep -E '^not ok|^#' "$log" | head -20 | sed 's/^/    /'
            [ "$rc" -ne 0 ] && tail -5 "$log" | sed 's/^/    | /'
        elif [ "$skip" -gt 0 ] && [ "$ok" -eq 0 ]; then
            printf 'skip %-40s %s\n' "$name" "${why[0]}"
        else
            printf 'pass %-40s %3d ok%s (%ds)\n' "$name" "$ok" "$([ "$skip" -gt 0 ] && echo ", $skip skipped")" "$secs"
        fi
    } >"$base.report"
    { declare -p ok bad skip secs cpu; [ "$skip" -gt 0 ] && declare -p why; } >"$base.result"
}

# The programs, in the order their results are listed: unit tests, their
# sanitizer rerun (make test sets SAN_B=build-san), integration scripts.
Q_NAME=() Q_KIND=() Q_CMD=()
queue() { Q_NAME+=("$1") Q_KIND+=("$2") Q_CMD+=("$3"); }
for t in "$B"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    want "$name" unit && queue "$name" unit "$t"
done
# (with SAN_BUILD, what the build will make: the normal build's unit tests)
if [ -n "${SAN_B:-}" ] && { [ -d "$SAN_B/tests" ] || [ -n "${SAN_BUILD:-}" ]; }; then
    export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
    export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0}
    for t in "$([ -n "${SAN_BUILD:-}" ] && echo "$B" || echo "$SAN_B")"/tests/test_*; do
        [ -x "$t" ] || continue
        name=san:$(basename "$t")
        want "$name" unit && queue "$name" san "$SAN_B/tests/${t##*/}"
    done
fi
for t in "$INTEGRATION"/*.sh; do
    [ -f "$t" ] || continue
    name=$(basename "$t" .sh)
    [ "$name" = lib ] && continue
    want "$name" integration && queue "$name" integration "$t"
done

if [ ${#Q_NAME[@]} -eq 0 ]; then
    echo "tests/run.sh: no test program matches ${select[*]:-(none built?)}" >&2
    exit 2
fi

# Start order: the longest first (the last run's times, else tests/durations;
# a program with no time yet counts as long), so that the last to end is short.
declare -A EST=()
for f in tests/durations "$LOGS/durations"; do
    [ -r "$f" ] || continue
    while read -r n s; do [[ $n != \#* ]] && [ -n "${s:-}" ] && EST[$n]=$s; done <"$f"
done
mapfile -t ORDER < <(for i in "${!Q_NAME[@]}"; do echo "${EST[${Q_NAME[$i]}]:-100000} $i"; done |
    sort -k1,1nr -k2,2n | awk '{print $2}')
alone() { [ "${Q_KIND[$1]}" = integration ] && head -30 "${Q_CMD[$1]}" | grep -q '^# test: alone'; }
# What a script shares with others on this machine, from its header:
# "# test: uses NAME" (any number of users at once) or "# test: owns NAME"
# (no other user or owner beside it). RES[i]: "NAME:uses NAME:owns ...".
declare -A RES=()
for i in "${!Q_NAME[@]}"; do
    [ "${Q_KIND[$i]}" = integration ] || continue
    RES[$i]=$(head -30 "${Q_CMD[$i]}" | sed -n 's/^# test: \(uses\|owns\) \([a-z0-9-]*\).*/\2:\1/p' | tr '\n' ' ')
done
# res_free I: no running program holds what program I needs in a way that excludes it
res_free() {
    local r p o
    for r in ${RES[$1]:-}; do
        for p in "${!RUNNING[@]}"; do
            for o in ${RES[${RUNNING[$p]}]:-}; do
                [ "${o%:*}" = "${r%:*}" ] || continue
                [ "${o#*:}" = owns ] || [ "${r#*:}" = owns ] && return 1
            done
        done
    done
    return 0
}

declare -A RUNNING=() # pid -> queue index
declare -A DUR=() BAD=() CPU=()
collect() { # collect PID: count what the program ended with $PID found
    local i=${RUNNING[$1]} ok=0 bad=1 skip=0 secs=0 cpu= why=()
    unset "RUNNING[$1]"
    local base="$LOGS/${Q_NAME[$i]//:/-}"
    # shellcheck disable=SC1090
    [ -r "$base.result" ] && . "$base.result"
    cat "$base.report" 2>/dev/null || printf 'FAIL %-40s the runner lost its result\n' "${Q_NAME[$i]}"
    DUR[$i]=$secs
    [ -n "$cpu" ] && CPU[$i]=$cpu
    [ "$bad" -gt 0 ] && BAD[$i]=1
    if [ "${Q_KIND[$i]}" = san ]; then
        san_passed=$((san_passed + ok)) san_failed=$((san_failed + bad))
    else
        passed=$((passed + ok)) failed=$((failed + bad)) skipped=$((skipped + skip))
        local w
        for w in "${why[@]}"; do [ "$skip" -gt 0 ] && skips+=("${Q_NAME[$i]}: $w"); done
    fi
}
# Beyond T_JOBS, another program starts only when the cores sat idle for
# a whole look (TICK_S, begun after the last start): IDLE_PCT or more of
# their time, measured in /proc/stat. A look is a sleep the runner waits on
# beside the programs.
TICK_S=3 IDLE_PCT=${T_IDLE_PCT:-20}
case $IDLE_PCT in '' | *[!0-9]*) echo "tests/run.sh: T_IDLE_PCT must be a number, not '$IDLE_PCT'" >&2; exit 2 ;; esac
TICK= IDLE=0 STAT0=
stat_now() { # "total idle" jiffies of all cores
    local a t=0 k
    read -r -a a </proc/stat
    for k in 1 2 3 4 5 6 7 8; do t=$((t + ${a[k]:-0})); done
    echo "$t $((a[4] + a[5]))"
}
look_begin() { STAT0=$(stat_now); sleep "$TICK_S" & TICK=$!; }
look_cancel() { [ -n "$TICK" ] && { kill "$TICK" 2>/dev/null; wait "$TICK" 2>/dev/null; }; TICK=; }
look_end() { # IDLE: the idle share of the look that ended
    local t0 i0 t1 i1
    read -r t0 i0 <<<"$STAT0"
    read -r t1 i1 <<<"$(stat_now)"
    IDLE=$((t1 > t0 ? (i1 - i0) * 100 / (t1 - t0) : 0))
    TICK=
}
# The sanitizer build (SAN_BUILD), beside the first programs: SAN_PID while
# it runs; SAN_OK 1 once it built, 0 when it failed (its san: programs then
# fail without running, the build's last lines shown).
SAN_PID= SAN_OK=
san_build_start() {
    SAN_OK=1
    [ -n "${SAN_BUILD:-}" ] || return 0
    local i
    for i in "${!Q_KIND[@]}"; do [ "${Q_KIND[$i]}" = san ] && SAN_OK= && break; done
    [ -z "$SAN_OK" ] || return 0 # no sanitizer rerun selected: nothing to build
    bash -c "$SAN_BUILD" >"$SAN_B.log" 2>&1 </dev/null &
    SAN_PID=$!
}
san_build_end() { # san_build_end STATUS
    SAN_PID=
    if [ "$1" -eq 0 ]; then SAN_OK=1; return; fi
    SAN_OK=0
    echo "FAIL the sanitizer build ($SAN_BUILD), exit status $1 — see $SAN_B.log"
    tail -30 "$SAN_B.log" | sed 's/^/    | /'
}
# launchable I: program I may start now
launchable() { res_free "$1" && { [ "${Q_KIND[$1]}" != san ] || [ "$SAN_OK" = 1 ]; }; }
reap() { # reap: wait for one running program to end, or for a look or the sanitizer build to end
    local pid rc
    if [ "$JOBS_MAX" -gt "$JOBS" ] && [ ${#RUNNING[@]} -lt "$JOBS_MAX" ] && [ -z "$TICK" ]; then
        look_begin
    fi
    wait -n -p pid "${!RUNNING[@]}" $TICK $SAN_PID
    rc=$?
    if [ -n "$TICK" ] && [ "${pid:-}" = "$TICK" ]; then
        look_end
    elif [ -n "$SAN_PID" ] && [ "${pid:-}" = "$SAN_PID" ]; then
        san_build_end "$rc"
    elif [ -n "${pid:-}" ] && [ -n "${RUNNING[$pid]:-}" ]; then
        collect "$pid"
    fi
}
# room: another program may start now
room() {
    [ ${#RUNNING[@]} -lt "$JOBS" ] && return 0
    [ ${#RUNNING[@]} -lt "$JOBS_MAX" ] && [ "$IDLE" -ge "$IDLE_PCT" ]
}
launch() {
    local i=$1
    rm -f "$LOGS/${Q_NAME[$i]//:/-}".{result,report}
    if [ "${Q_KIND[$i]}" = integration ]; then
        run_one "${Q_NAME[$i]}" "${Q_KIND[$i]}" bash "${Q_CMD[$i]}" &
    else
        run_one "${Q_NAME[$i]}" "${Q_KIND[$i]}" "${Q_CMD[$i]}" &
    fi
    RUNNING[$!]=$i
    look_cancel # the next start beyond T_JOBS waits for a look that begins now
    IDLE=0
    [ ${#RUNNING[@]} -gt "$MOST" ] && MOST=${#RUNNING[@]}
}
T0=$SECONDS MOST=0
deferred=() pending=()
for i in "${ORDER[@]}"; do
    if alone "$i"; then deferred+=("$i"); else pending+=("$i"); fi
done
san_build_start
# in order, but a program whose resource is held (or whose build is not
# done) waits while the next start
while [ ${#pending[@]} -gt 0 ]; do
    while ! room; do reap; done
    if [ "$SAN_OK" = 0 ]; then # no sanitizer build: its programs fail unrun
        for k in "${!pending[@]}"; do
            [ "${Q_KIND[${pending[$k]}]}" = san ] || continue
            BAD[${pending[$k]}]=1 san_failed=$((san_failed + 1))
            unset "pending[$k]"
        done
        pending=("${pending[@]}")
        SAN_OK=failed
        continue
    fi
    next=-1
    for k in "${!pending[@]}"; do
        if launchable "${pending[$k]}"; then next=$k; break; fi
    done
    if [ "$next" -lt 0 ]; then reap; continue; fi
    launch "${pending[$next]}"
    unset "pending[$next]"
    pending=("${pending[@]}")
done
look_cancel
JOBS_MAX=$JOBS
while [ ${#RUNNING[@]} -gt 0 ]; do reap; done
for i in "${deferred[@]}"; do # each with nothing beside it
    launch "$i"
    reap
done
unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS

# the times, for the next run's order and for whoever makes the suite faster:
# this run's, and the earlier ones' of programs it did not run
declare -A LAST=()
[ -r "$LOGS/durations" ] && while read -r n t; do [ -n "${t:-}" ] && LAST[$n]=$t; done <"$LOGS/durations"
for i in "${!DUR[@]}"; do LAST[${Q_NAME[$i]}]=${DUR[$i]}; done
for n in "${!LAST[@]}"; do echo "$n ${LAST[$n]}"; done | sort -k2,2nr >"$LOGS/durations.new"
mv "$LOGS/durations.new" "$LOGS/durations"
if [ ${#DUR[@]} -gt 1 ]; then
    echo "slowest:"
    for i in "${!DUR[@]}"; do echo "${Q_NAME[$i]} ${DUR[$i]} ${CPU[$i]:-}"; done | sort -k2,2nr | head -15 |
        awk '{ printf "    %-40s %5d s%s\n", $1, $2, $3 != "" ? sprintf(", %5d s of CPU", $3) : "" }'
fi
if [ ${#CPU[@]} -gt 1 ]; then # what the machine's cores did: the suite's time on a busy machine
    for i in "${!CPU[@]}"; do echo "${Q_NAME[$i]} ${CPU[$i]}"; done | sort -k2,2nr >"$LOGS/cpu"
    echo "most CPU:"
    head -15 "$LOGS/cpu" | awk '{ printf "    %-40s %5d s\n", $1, $2 }'
    awk '{ s += $2 } END { printf "CPU in all: %d s (%d programs)\n", s, NR }' "$LOGS/cpu"
fi
for i in "${!Q_NAME[@]}"; do [ -n "${BAD[$i]:-}" ] && failures+=("${Q_NAME[$i]}"); done
if [ ${#skips[@]} -gt 0 ]; then
    echo "skipped:"
    printf '    %s\n' "${skips[@]}"
fi
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
[ -n "${SAN_B:-}" ] &&
    echo "sanitizer rerun of the unit tests (ASan+UBSan): $san_passed passed, $san_failed failed (not in the totals below but for its failures)"
w=$((SECONDS - T0))
echo "${#Q_NAME[@]} programs, $JOBS at a time, $MOST at most (${#deferred[@]} alone), in $((w / 60)) min $((w % 60)) s"
failed=$((failed + san_failed))
echo "$passed passed, $failed failed$([ "$skipped" -gt 0 ] && echo ", $skipped skipped")"
[ "$failed" -eq 0 ]
