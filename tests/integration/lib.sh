# lib.sh: helpers for integration scripts — TAP output, a private MTC_HOME,
# and cleanup that stops every daemon the test started (by recorded pid).
# Source it first: . "$(dirname "$0")/lib.sh"
set -u
# a pipeline fails when any part of it fails: `x=$(lister | filter)` and
# `lister | grep` see a lister that could not answer (check bodies run by
# `bash -c` get it too: see check)
set -o pipefail
T_N=0
T_FAILED=0
T_LAST=0 # 1: the last check failed
T_PIDS=()
T_DIR=$(mktemp -d /tmp/mtc-test.XXXXXX)
export MTC_HOME=$T_DIR/home
mkdir -p "$MTC_HOME"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${MTC_BUILD:-$ROOT/build}
export PATH=$B/bin:$PATH
# python3 is the one scripts/setup installs (Debian's, with torch, selenium and
# jinja2), not a version manager's shim earlier on PATH: pyenv's runs two bash
# scripts before the interpreter, 4x the CPU of a short assertion
if [ -x /usr/bin/python3 ]; then
    mkdir -p "$T_DIR/bin" && ln -sf /usr/bin/python3 "$T_DIR/bin/python3" && export PATH=$T_DIR/bin:$PATH
fi

ok() { T_N=$((T_N + 1)); T_LAST=0; echo "ok $T_N - $*"; }
# T_ON_FAIL: a command a test sets to keep evidence that later steps remove
# (a cluster's delete cleans its hosts); run at the first failure only.
nok() {
    T_N=$((T_N + 1)); T_LAST=1; T_FAILED=$((T_FAILED + 1)); echo "not ok $T_N - $*"
    [ "$T_FAILED" -eq 1 ] && [ -n "${T_ON_FAIL:-}" ] && $T_ON_FAIL
    return 0
}
# skip "why": a check that could not run here (tests/run.sh counts it as a
# skip, never a pass; on a machine scripts/setup prepared, as a failure)
skip() { T_N=$((T_N + 1)); T_LAST=0; echo "ok $T_N - # SKIP $*"; }
# check "description" command...  — passes when the command succeeds; returns
# the command's status, so `check … || …` and `run_or_stop $?` can stop
check() {
    # names no caller uses: a command like eval '[ "$rc" ... ]' sees the caller's
    local __check_what=$1 __check_rc
    shift
    # a body given as `bash -c '…'` runs with pipefail too
    [ "${1:-}" = bash ] && [ "${2:-}" = -c ] && set -- bash -o pipefail "${@:2}"
    "$@"
    __check_rc=$? # (after `if CMD; then …; fi` $? is the if's 0, not CMD's)
    if [ "$__check_rc" -eq 0 ]; then ok "$__check_what"; return 0; fi
    nok "$__check_what"
    return "$__check_rc"
}
diag() { echo "# $*"; }

# absent PATTERN -- CMD...: the lister CMD answered (exit 0, nothing on
# stderr) and no line it printed matches PATTERN (grep -E). A lister that
# failed is never "nothing there": a dead mtcd or slurmdbd fails a negative.
# Sets ABSENT_WHY to what went wrong. Usable with wait_for:
# `wait_for 60 absent "^$JOB\$" -- squeue -h -o %i`.
absent() {
    local pat=$1 out rc err
    shift
    [ "${1:-}" = -- ] && shift
    err=$(mktemp "$T_DIR/absent.XXXXXX")
    out=$("$@" 2>"$err")
    rc=$?
    if [ "$rc" -ne 0 ] || [ -s "$err" ]; then
        ABSENT_WHY="the lister failed ($*: exit $rc: $(head -c 300 "$err" | tr '\n' ' '))"
        rm -f "$err"
        return 2
    fi
    rm -f "$err"
    if grep -qE -- "$pat" <<<"$out"; then
        ABSENT_WHY="found: $(grep -E -m 3 -- "$pat" <<<"$out" | tr '\n' ' ')"
        return 1
    fi
    ABSENT_WHY=
}
# has_line PATTERN -- CMD...: CMD answered (exit 0) and a line it printed
# matches PATTERN (grep -E). The output is read whole first: `lister | grep
# -q` under pipefail fails when grep's early exit kills a long lister.
has_line() {
    local pat=$1 out
    shift
    [ "${1:-}" = -- ] && shift
    out=$("$@") || return 1
    grep -qE -- "$pat" <<<"$out"
}
# check_absent "what" PATTERN -- CMD...: the check that absent passes; a
# failure says whether the lister failed or what it found.
check_absent() {
    local what=$1
    shift
    if absent "$@"; then ok "$what"; return 0; fi
    nok "$what"
    diag "  $ABSENT_WHY"
    return 1
}
# gone TEXT -- CMD...: CMD answers that the thing is not there — it exits
# non-zero and says TEXT (e.g. "cluster x not found"); any other failure (a
# dead mtcd, a refused token) is no proof that something was not stored.
gone() {
    local text=$1 out
    shift
    [ "${1:-}" = -- ] && shift
    out=$("$@" 2>&1) && return 1
    grep -qF -- "$text" <<<"$out"
}
# one_line_fail RC OUT TEXT: a CLI's refusal — exit status RC non-zero, and
# its output OUT exactly one line holding TEXT.
one_line_fail() { [ "$1" -ne 0 ] && [ -n "$2" ] && [ "$(wc -l <<<"$2")" = 1 ] && grep -qF -- "$3" <<<"$2"; }
# one_line_error CODE TEXT [STATUS]: the last api/tcp call answered HTTP CODE
# with a google.rpc error whose message is one line holding TEXT, and whose
# status is STATUS (default: one of INVALID_ARGUMENT, PERMISSION_DENIED,
# FAILED_PRECONDITION, NOT_FOUND).
one_line_error() {
    [ "$HTTP_STATUS" = "$1" ] && python3 - "$BODY" "$2" "${3:-}" <<'PY'
import json, sys
e = json.loads(sys.argv[1])["error"]
want = [sys.argv[3]] if sys.argv[3] else ["INVALID_ARGUMENT", "PERMISSION_DENIED", "FAILED_PRECONDITION", "NOT_FOUND"]
assert e["status"] in want, e
assert "\n" not in e["message"] and sys.argv[2] in e["message"], e
PY
}
# count_of PATTERN -- CMD...: how many lines CMD prints that match PATTERN
# (grep -E), and fails when CMD fails — a count from a failed lister is no 0.
count_of() {
    local pat=$1 out
    shift
    [ "${1:-}" = -- ] && shift
    out=$("$@") || return 1
    grep -cE -- "$pat" <<<"$out"
    return 0
}
# same A B: A and B are equal and not empty — two outputs that both failed
# (empty) are not "the same"
same() { [ -n "$1" ] && [ "$1" = "$2" ]; }

# Remember a pid to stop at exit.
track_pid() { T_PIDS+=("$1"); }
# needs_root NAME WHY: unless the test runs as root, one failed check and the end.
needs_root() {
    [ "$(id -u)" = 0 ] && return
    check "$1 needs root ($2)" false
    done_testing
}
# Unix users a test makes (removed with their groups by drop_users, which
# the test's t_extra_cleanup calls): new_user NAME, in group nogroup, no
# home, no login shell.
USERS=()
new_user() { useradd -M -N -g nogroup -s /usr/sbin/nologin "$1" && USERS+=("$1"); }
drop_users() {
    local u
    for u in "${USERS[@]}"; do userdel "$u" 2>/dev/null; groupdel "$u" 2>/dev/null; done
}

# Wait until a command succeeds, polling every 0.2 s for the first 5 s, then
# every 0.5 s, and after 30 s every second (a long wait's polls — sinfo,
# curl, python3 at 0.1 s of CPU each — are CPU the tests beside it need).
# $1 seconds is what the wait takes on a slow machine; the deadline is
# T_WAIT_SCALE (default 3) times that: it only ends a hang, never a wait on
# a busy machine (the suite beside stress-ng: tests/load.sh).
wait_for() {
    local secs=$(($1 * ${T_WAIT_SCALE:-3})); shift
    local start=$SECONDS end=$((SECONDS + secs))
    while [ $SECONDS -lt $end ]; do
        "$@" >/dev/null 2>&1 && return 0
        case $((SECONDS - start)) in
        [0-4]) sleep 0.2 ;;
        [0-9] | [12][0-9]) sleep 0.5 ;;
        *) sleep 1 ;;
        esac
    done
    "$@" >/dev/null 2>&1
}

# Wait up to $1 seconds until file $2 exists, polling every 10 ms (for events
# shorter than wait_for's 0.2 s).
poll_for() {
    local end=$((SECONDS + $1))
    while [ ! -e "$2" ] && [ $SECONDS -lt $end ]; do sleep 0.01; done
}

t_cleanup() {
    local rc=$?
    # a failed test keeps its clusters' logs (slurmctld, slurmd, agents):
    # deleting a cluster removes its directory
    if [ "$T_FAILED" -ne 0 ] || [ "$rc" -ne 0 ]; then
        local d
        for d in "$MTC_HOME"/clusters/*/log; do
            [ -d "$d" ] && mkdir -p "$T_DIR/kept-logs" && cp -r "$d" "$T_DIR/kept-logs/$(basename "$(dirname "$d")")"
        done
    fi
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
# a test stopped by a signal (run.sh's timeout signals its process group)
# still cleans up: exit runs the EXIT trap
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP

done_testing() { echo "1..$T_N"; [ "$T_FAILED" -eq 0 ]; exit $?; }

# --- mtcd helpers ---------------------------------------------------------
# Start mtcd for this test's MTC_HOME (extra args passed through), record its pid.
start_mtcd() {
    # the fake NVML (tests/fakes/nvml.c) is a library this test mtcd allows
    mtcd --home "$MTC_HOME" --daemon --supervise-ms "${SUPERVISE_MS:-500}" \
        --nvml-library "$B/fakes/libnvml.so" "$@" || return 1
    MTCD_PID=$(cat "$MTC_HOME/mtcd.pid")
    track_pid "$MTCD_PID"
}
# API call over the unix socket: api METHOD PATH [BODY] → sets BODY and HTTP_STATUS.
api() {
    local out
    out=$(curl -s --unix-socket "$MTC_HOME/mtcd.sock" -X "$1" -w '\n%{http_code}' \
        -H 'Content-Type: application/json' ${3:+--data-binary "$3"} "http://localhost$2")
    HTTP_STATUS=${out##*$'\n'}
    BODY=${out%$'\n'*}
}
CLUSTERS=/v1beta1/projects/local/locations/local/modelDevelopmentClusters
# jq_ EXPR: EXPR (Python, over d: stdin's JSON) printed.
jq_() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }
# wait_op NAME [SECS]: poll the operation over the socket until done (at
# most SECS, default 120: a deadline that only ends a hang); its JSON in OP.
# "done": true is matched in bash — a process per poll of 50 ms (python3's
# start is 0.1 s of CPU) made waiting cost more than the work waited for;
# after 2 s a poll every 0.2 s (an operation that long is a cluster's start).
wait_op() {
    local start=$SECONDS end=$((SECONDS + ${2:-120}))
    while [ $SECONDS -lt $end ]; do
        api GET "/v1/$1"
        OP=$BODY
        [[ $OP =~ \"done\":[[:space:]]*true ]] && return 0
        if [ $((SECONDS - start)) -lt 2 ]; then sleep 0.05; else sleep 0.2; fi
    done
    return 1
}
# API call over loopback TCP to mtcd's --listen 127.0.0.1:$PORT, with a bearer
# token ("" for none): tcp TOKEN METHOD PATH [BODY] → sets BODY and HTTP_STATUS.
tcp() {
    local out
    out=$(curl -s -X "$2" -w '\n%{http_code}' ${1:+-H "Authorization: Bearer $1"} \
        -H 'Content-Type: application/json' ${4:+--data-binary "$4"} "http://127.0.0.1:$PORT$3")
    HTTP_STATUS=${out##*$'\n'}
    BODY=${out%$'\n'*}
}
# metric SERIES: the value of one series of mtcd's /metrics (over the unix
# socket), e.g. mtc_job_monitor_passes_total or
# 'mtc_supervision_passes_total{cluster="x"}'; 0 when mtcd has none yet;
# fails when mtcd does not answer.
metric() {
    local m
    m=$(curl -sf --unix-socket "$MTC_HOME/mtcd.sock" http://localhost/metrics) || return 1
    awk -v s="$1" '$1 == s { v = $2 } END { print v == "" ? 0 : v }' <<<"$m"
}
# after_metric SERIES N: wait (up to 300 s, a deadline that only ends a hang)
# until the counter SERIES has grown by N — a pass of mtcd's that began after
# the call has ended, so whatever it would do about an earlier change is
# done, and a negative checked then means something.
after_metric() {
    local n0
    n0=$(metric "$1") || return 1
    wait_for 100 eval "[ \"\$(metric '$1')\" -ge $((n0 + $2)) ]"
}
# after_passes CLUSTER N: N more supervision passes over the cluster (its
# daemons restarted, its nodes and health judged, events recorded).
after_passes() { after_metric "mtc_supervision_passes_total{cluster=\"$1\"}" "$2"; }
# after_monitor N: N more passes of the training job monitor (every
# unfinished job's state and TRAINING_* events).
after_monitor() { after_metric mtc_job_monitor_passes_total "$1"; }
# after_endpoint_ticks N: N more passes of the endpoints controller.
after_endpoint_ticks() { after_metric mtc_endpoint_ticks_total "$1"; }
# event_texts CLUSTER TYPE TEXT: the descriptions of cluster CLUSTER's events
# of TYPE that hold TEXT, one a line; fails when mtcd does not answer.
event_texts() {
    local j
    j=$(mtc cluster events "$1" --json) || return 1
    python3 -c '
import json, sys
for e in json.loads(sys.argv[3]) or []:
    if e.get("eventType") == sys.argv[1] and sys.argv[2] in e.get("description", ""):
        print(e["description"])' "$2" "$3" "$j"
}
# Delete every cluster this test's mtcd knows, then stop mtcd (used in cleanup).
delete_all_clusters() {
    [ -S "$MTC_HOME/mtcd.sock" ] || return 0
    local ids out
    ids=$(mtc --home "$MTC_HOME" cluster list --json 2>/dev/null |
        python3 -c 'import json,sys; [print(c["name"].split("/")[-1]) for c in json.load(sys.stdin).get("modelDevelopmentClusters",[])]' 2>/dev/null)
    # a cluster with an operation in progress (a scan, a remediation) refuses
    # the delete until it ends: retry for up to a minute, or its daemons outlive
    # the test
    local end=$((SECONDS + 60))
    for id in $ids; do
        while :; do
            out=$(mtc --home "$MTC_HOME" cluster delete "$id" 2>&1) && break
            grep -q "operation in progress" <<<"$out" && [ $SECONDS -lt $end ] || break
            sleep 1
        done
    done
}
# Pids of processes whose command line mentions this test's private directory
# (our own daemons only: the directory is unique to this test run).
pids_under() {
    local d=$1 p
    for p in /proc/[0-9]*; do
        # not this shell (nor its subshell): a `bash -c "…$d…"` names the dir itself
        [ "${p#/proc/}" = $$ ] || [ "${p#/proc/}" = "$BASHPID" ] && continue
        tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "$d" && echo "${p#/proc/}"
    done
}
# Pids under dir $1 whose command line starts with $2 (e.g. "slurmctld ", "slurmd .*-N x").
daemon_pids() {
    local p
    for p in $(pids_under "$1"); do
        tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qE "^(/[^ ]*/)?$2" && echo "$p"
    done
}
# job_pids JOB CONF: the processes of Slurm job JOB of the cluster whose
# slurm.conf is CONF (both in their environment: another test's cluster has
# a job JOB too).
# One process reads every environment (a grep per process took seconds,
# long enough for a short job to end before it was held).
job_pids() {
    python3 - "$1" "$2" <<'PY'
import os, sys
want = {b"SLURM_JOB_ID=" + sys.argv[1].encode(), b"SLURM_CONF=" + sys.argv[2].encode()}
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        with open("/proc/%s/environ" % p, "rb") as f:
            env = set(f.read().split(b"\0"))
    except OSError:
        continue
    if want <= env:
        print(p)
PY
}
export -f pids_under daemon_pids has_line absent
