#!/usr/bin/env bash
# runner: tests/run.sh counts what programs say, and only that — fake test
# scripts (one passing, one with a skipped check, one skipping as a whole,
# one printing nothing, one with a wrong plan, one with a "not ok", one
# crashing, one hanging past the timeout, whose daemon its cleanup stops) and
# a fake unit test with its
# sanitizer rerun give exactly the closing line they must, the skips listed
# with their reasons; on a machine scripts/setup prepared (T_STRICT=1) the
# skips are failures. Programs run side by side (T_JOBS): two that wait for
# each other both pass only when they ran at once, one marked "# test:
# alone" finds no other running, one that "owns" a resource finds none that
# "uses" it, and the closing line is the same one at a time; beyond T_JOBS a
# program starts while the cores are idle (T_JOBS_MAX, T_IDLE_PCT); the 15
# slowest and how many ran at a time are printed.
. "$(dirname "$0")/lib.sh"
F=$T_DIR/fakes
mkdir -p "$F" "$T_DIR/build"
fake() { printf '%s\n' "$2" >"$F/$1.sh"; }
fake pass 'echo "ok 1 - one"; echo "ok 2 - two"; echo "1..2"'
fake partskip 'echo "ok 1 - one"; echo "ok 2 - # SKIP no widget"; echo "1..2"'
fake skipall 'echo "1..0 # SKIP no gadget here"'
fake silent 'exit 0'
fake plan 'echo "ok 1 - one"; echo "1..3"'
fake notok 'echo "ok 1 - one"; echo "not ok 2 - two"; echo "1..2"'
fake crash 'echo "ok 1 - one"; kill -SEGV $$'
# the hang starts a daemon of its own (another session, recorded with
# track_pid): the timeout must not leave it running
fake hang ". '$ROOT/tests/integration/lib.sh'; setsid sleep 300 </dev/null >/dev/null 2>&1 &
track_pid \$!; echo \$! >'$T_DIR/hang.daemon'; echo 'ok 1 - one'; sleep 60; echo '1..1'"
# a unit test binary, and its sanitizer build finding one more failure
mkdir -p "$T_DIR/build/tests" "$T_DIR/san/tests"
printf '#!/bin/sh\necho "ok 1 - u"; echo "1..1"\n' >"$T_DIR/build/tests/test_unit"
printf '#!/bin/sh\necho "ok 1 - u"; echo "not ok 2 - leak"; echo "1..2"; exit 1\n' >"$T_DIR/san/tests/test_unit"
chmod +x "$T_DIR/build/tests/test_unit" "$T_DIR/san/tests/test_unit"
# runner STRICT: the runner on the fakes
runner() {
    T_INTEGRATION=$F T_TIMEOUT=3 T_STRICT=$1 B=$T_DIR/build SAN_B=$T_DIR/san "$ROOT/tests/run.sh" \
        >"$T_DIR/out.$1" 2>&1
}
runner 0
rc=$?
sed 's/^/# /' "$T_DIR/out.0"
check "the run fails (exit $rc)" test "$rc" -ne 0
check "closing line: 8 passed, 6 failed, 2 skipped" test "$(tail -1 "$T_DIR/out.0")" = "8 passed, 6 failed, 2 skipped"
check "each failing program named" grep -qx "failed: san:test_unit crash hang notok plan silent" "$T_DIR/out.0"
check "the sanitizer rerun on its own line: its passes not counted twice, its failure counted" \
    grep -q "^sanitizer rerun of the unit tests (ASan+UBSan): 1 passed, 1 failed" "$T_DIR/out.0"
check "a program with no checks fails: no checks, no plan" \
    bash -c "grep -A2 '^FAIL silent' '$T_DIR/out.0' | grep -q 'no checks' && grep -A3 '^FAIL silent' '$T_DIR/out.0' | grep -q 'no plan'"
check "a wrong plan fails" grep -q "plan 1..3 but 1 checks" "$T_DIR/out.0"
check "a crash fails: its exit status" grep -q "exit status 139 without a \"not ok\" line" "$T_DIR/out.0"
check "a hang fails: the timeout" grep -q "timed out after 3 s" "$T_DIR/out.0"
HD=$(cat "$T_DIR/hang.daemon" 2>/dev/null)
check "... and its daemon is stopped by its cleanup (pid ${HD:-none})" \
    bash -c "[ -n '$HD' ] && ! kill -0 '$HD' 2>/dev/null"
rm -rf $(sed -n 's/^# kept //p' "$T_DIR/build/test-logs/hang.log" 2>/dev/null)
check "skips listed with their reasons" bash -c "grep -q '^    partskip: no widget' '$T_DIR/out.0' && grep -q '^    skipall: no gadget here' '$T_DIR/out.0'"
check "a whole-program skip is shown as a skip" grep -q "^skip skipall .*no gadget here" "$T_DIR/out.0"
runner 1
sed 's/^/# /' "$T_DIR/out.1"
rm -rf $(sed -n 's/^# kept //p' "$T_DIR/build/test-logs/hang.log" 2>/dev/null) # the second run's
check "prepared machine: the skips fail — 8 passed, 8 failed" test "$(tail -1 "$T_DIR/out.1")" = "8 passed, 8 failed"
check "  saying why" grep -q "skipped on a machine scripts/setup prepared (nothing may skip here): no gadget here" "$T_DIR/out.1"

# lib.sh's check returns its command's status: `check … || stop` stops, and
# run_or_stop $? sees the failure
out=$(bash -c ". '$ROOT/tests/integration/lib.sh'; check 'a failing command' sh -c 'exit 3' || echo \"branch \$?\"; T_FAILED=0" 2>&1)
check "check returns the failing command's status (3) to a || branch" grep -qx 'branch 3' <<<"$out"

# side by side: busy1 and busy2 each wait (up to 60 s) for the other's mark,
# so both pass only when they ran at the same time; "lonely" (# test: alone)
# fails when it finds a mark of another program still running
P=$T_DIR/par
mkdir -p "$P/t" "$P/build"
unset SAN_B # (make test's: the runs below are of the fakes alone)
pfake() { printf '%s\n' "$2" >"$P/t/$1.sh"; }
for me in busy1 busy2; do
    other=busy$((3 - ${me#busy}))
    pfake "$me" "touch '$P/on.$me'; for _ in \$(seq \${BUSY_WAIT:-600}); do [ -e '$P/on.$other' ] && break; sleep 0.1; done
if [ -e '$P/on.$other' ]; then echo 'ok 1 - saw $other'; else echo 'not ok 1 - saw $other'; fi
sleep 0.5; rm -f '$P/on.$me'; echo 1..1"
done
pfake lonely '# test: alone
if ls '"'$P'"'/on.* >/dev/null 2>&1; then echo "not ok 1 - alone"; else echo "ok 1 - alone"; fi; echo 1..1'
prun() { T_INTEGRATION=$P/t T_TIMEOUT=120 T_STRICT=1 T_JOBS=$1 B=$P/build "$ROOT/tests/run.sh" >"$P/out.$1" 2>&1; }
prun 3
rc=$?
sed 's/^/# /' "$P/out.3"
check "T_JOBS=3: two programs ran at once, the lonely one alone — 3 passed, 0 failed" \
    bash -c "[ $rc = 0 ] && [ \"\$(tail -1 '$P/out.3')\" = '3 passed, 0 failed' ]"
check "... the closing lines say how many at a time and list the slowest" \
    bash -c "grep -q '^3 programs, 3 at a time, 2 at most (1 alone)' '$P/out.3' && grep -A3 '^slowest:' '$P/out.3' | grep -q '^    busy'"
check "... and the times are kept for the next run's order" grep -q '^busy1 [0-9]' "$P/build/test-logs/durations"
rm -f "$P/on."*
T_INTEGRATION=$P/t T_JOBS=x B=$P/build "$ROOT/tests/run.sh" >"$P/out.x" 2>&1
rc=$?
check "a bad T_JOBS: one line naming it, exit 2" \
    bash -c "[ $rc = 2 ] && [ \$(wc -l <'$P/out.x') = 1 ] && grep -q \"T_JOBS.*'x'\" '$P/out.x'"
# shared and owned resources: u1 and u2 ("# test: uses box") run at once (each
# waits for the other's mark); "owner" ("# test: owns box") runs with neither:
# it fails when it sees a user's mark, a user when it sees the owner's
R=$T_DIR/res
mkdir -p "$R/t" "$R/build"
rfake() { printf '%s\n' "$2" >"$R/t/$1.sh"; }
for me in u1 u2; do
    other=u$((3 - ${me#u}))
    rfake "$me" "# test: uses box (a shared thing)
touch '$R/on.$me'; for _ in \$(seq 600); do [ -e '$R/on.$other' ] && break; sleep 0.1; done
if [ -e '$R/on.$other' ]; then echo 'ok 1 - saw $other'; else echo 'not ok 1 - saw $other'; fi
if [ -e '$R/on.owner' ]; then echo 'not ok 2 - no owner'; else echo 'ok 2 - no owner'; fi
sleep 0.5; rm -f '$R/on.$me'; echo 1..2"
done
rfake owner "# test: owns box
touch '$R/on.owner'; sleep 1
if ls '$R'/on.u* >/dev/null 2>&1; then echo 'not ok 1 - no user'; else echo 'ok 1 - no user'; fi
rm -f '$R/on.owner'; echo 1..1"
T_INTEGRATION=$R/t T_TIMEOUT=120 T_STRICT=1 T_JOBS=3 B=$R/build "$ROOT/tests/run.sh" >"$R/out" 2>&1
rc=$?
sed 's/^/# /' "$R/out"
check "T_JOBS=3: the two users of a resource ran at once, its owner with neither — 5 passed" \
    bash -c "[ $rc = 0 ] && [ \"\$(tail -1 '$R/out')\" = '5 passed, 0 failed' ]"

# one at a time, but a second while the cores are idle (any idle share
# counts here: the suite runs beside this): the busy pair meets
T_JOBS_MAX=2 T_IDLE_PCT=0 T_INTEGRATION=$P/t T_TIMEOUT=120 T_STRICT=1 T_JOBS=1 B=$P/build "$ROOT/tests/run.sh" busy >"$P/out.idle" 2>&1
rc=$?
sed 's/^/# /' "$P/out.idle"
check "T_JOBS=1, T_JOBS_MAX=2: the second starts beside the first once the cores were seen idle" \
    bash -c "[ $rc = 0 ] && [ \"\$(tail -1 '$P/out.idle')\" = '2 passed, 0 failed' ] && grep -q '^2 programs, 1 at a time, 2 at most (0 alone)' '$P/out.idle'"
rm -f "$P/on."*

# one at a time, the busy pair cannot both see each other: proves the pair's
# check can fail (busy1 ends before busy2 starts; its wait cut to 2 s, as
# no wait could help)
BUSY_WAIT=20 T_JOBS_MAX=1 T_INTEGRATION=$P/t T_TIMEOUT=120 T_STRICT=1 T_JOBS=1 B=$P/build "$ROOT/tests/run.sh" busy1 >"$P/out.1" 2>&1
check "T_JOBS=1: busy1 alone waits for busy2 in vain and fails" \
    bash -c "[ \"\$(tail -1 '$P/out.1')\" = '0 passed, 1 failed' ]"
done_testing
