#!/usr/bin/env bash
# deb_package: the Debian package, installed on this machine for real and
# upgraded under a running job (docs/packaging.md).
# It runs beside other tests — each has its own MTC_HOME and build tree, and
# both packages are built in copies of the tree — but for those with test
# hosts: they bind-mount their own dirs on /var/lib/mtc, /etc/mtc and /run/mtc,
# and the purge's rm -rf /var/lib/mtc and rmdir /run/mtc unmount those in every
# mount namespace (a host's agent then vanishes under its Prolog: exit 127).
# test: owns mtc-dirs
#  - `make deb` builds the tree's package; an older one is built from a copy
#    of that build (objects kept, dpkg-buildpackage -nc: only what changed is
#    compiled) with a lower version ("VERSION~prev") and the store's newest
#    migration removed (store.c's migrations each start with a "v<N>:"
#    comment), so the upgrade migrates a real store; lintian finds no error
#    or warning in the new one.
#  - dpkg -i + apt-get -f install the older one; the unit passes
#    systemd-analyze verify; the man pages render; mtcd runs as the unit
#    would (this machine runs no systemd: its ExecStart with its environment,
#    stopped with SIGTERM to mtcd alone, as KillMode=process does); the
#    installed mtc, with no MTC_HOME, finds the service's mtcd through
#    /run/mtc/mtcd.sock, creates a local cluster and starts a tiny recipe.
#  - while the job trains, the new package is installed and mtcd restarted as
#    systemd restarts it on upgrade: the store migrates, the cluster is
#    adopted (its slurmctld is the same process), the job goes on and runs
#    every step exactly once.
#  - a downgrade: the older mtcd refuses the newer store with one line and
#    changes nothing; remove keeps /var/lib/mtc, purge removes it.
# It installs the package "mtc" on this machine and purges it at exit; it
# refuses to run where mtc is installed or /var/lib/mtc holds anything.
# Figures (diag lines): package size, install time, mtcd restart → adopted.
. "$(dirname "$0")/lib.sh"

SYS_HOME=/var/lib/mtc SYS_SOCK=/run/mtc/mtcd.sock UNIT=/lib/systemd/system/mtcd.service
STEPS=${STEPS:-300} EXP=upgrade CID=pkg
V=$(cat "$ROOT/VERSION") OLDV="$(cat "$ROOT/VERSION")~prev"
INSTALLED=0 UNIT_PID=""

# (an empty /var/lib/mtc or /run/mtc is left by the hosts provider's test
# hosts, which share this machine's files)
if dpkg -s mtc >/dev/null 2>&1 || [ -n "$(ls -A "$SYS_HOME" 2>/dev/null)" ] || [ -e "$SYS_SOCK" ]; then
    nok "mtc is not installed here and $SYS_HOME is empty (this test installs and purges the package)"
    done_testing
fi

# the installed programs only: not the build tree's, not this test's home
export PATH=/usr/bin:/usr/sbin:/bin:/sbin
export -n MTC_HOME # lib.sh's cleanup reads it; mtc must not see it
unset MTC_BUILD MTC_DATA_DIR MTC_URL MTC_TOKEN
export HOME=$T_DIR/root
mkdir -p "$HOME"

# The unit's ExecStart with its environment (Environment=, EnvironmentFile=),
# in the background: what systemd runs. Waits until mtcd answers.
unit_start() {
    local exec env envfile
    exec=$(sed -n 's/^ExecStart=//p' "$UNIT")
    env=$(sed -n 's/^Environment=//p' "$UNIT")
    envfile=$(sed -n 's/^EnvironmentFile=-\{0,1\}//p' "$UNIT")
    mkdir -p "$SYS_HOME" # StateDirectory=mtc
    (
        set -a
        [ -r "$envfile" ] && . "$envfile"
        eval "export $env"
        eval "exec $exec"
    ) </dev/null >>"$T_DIR/unit.stderr" 2>&1 &
    UNIT_PID=$!
    track_pid "$UNIT_PID"
    wait_for 60 curl -sf --unix-socket "$SYS_SOCK" http://localhost/healthz
}
# SIGTERM to mtcd alone (KillMode=process), and wait until it has ended.
unit_stop() {
    [ -n "$UNIT_PID" ] || return 0
    kill -TERM "$UNIT_PID" 2>/dev/null
    wait_for 30 bash -c "! kill -0 $UNIT_PID 2>/dev/null"
    local rc=$?
    UNIT_PID=""
    return $rc
}
healthz() { curl -sf --unix-socket "$SYS_SOCK" http://localhost/healthz; }
field() { python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1"; }
schema() { python3 -c 'import sqlite3,sys; print(sqlite3.connect("file:"+sys.argv[1]+"?mode=ro", uri=True).execute("PRAGMA user_version").fetchone()[0])' "$SYS_HOME/mtcd.db"; }
cluster_state() {
    mtc --json cluster get "$CID" 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["clusterStatus"]["state"])'
}

t_extra_cleanup() {
    [ -n "${JPIDS:-}" ] && kill -CONT $JPIDS 2>/dev/null # a held job, so its cluster can end it
    [ "$INSTALLED" = 1 ] || return 0
    if [ "$T_FAILED" -ne 0 ]; then # the service's clusters' logs, before the purge removes them
        local d
        for d in "$SYS_HOME"/clusters/*/log "$SYS_HOME"/log; do
            [ -d "$d" ] && mkdir -p "$T_DIR/kept-logs" && cp -r "$d" "$T_DIR/kept-logs/$(basename "$(dirname "$d")")-log"
        done
    fi
    if [ -S "$SYS_SOCK" ] && [ -n "$UNIT_PID" ]; then
        mtc --home "$SYS_HOME" cluster delete "$CID" >/dev/null 2>&1
    fi
    unit_stop
    dpkg -P mtc >>"$T_DIR/dpkg.log" 2>&1
    rm -rf "$SYS_HOME" "$SYS_SOCK"
    rmdir /run/mtc 2>/dev/null
}

# --- the two packages ---------------------------------------------------------
# a copy of the tree as `make deb` takes it (tracked and untracked, not ignored)
tree_copy() {
    mkdir -p "$1"
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard |
        tar -C "$ROOT" -c --null --no-recursion --ignore-failed-read -T - -f - | tar -x -C "$1"
}
# $1: the tree to build in (a git repository for make deb's file list)
build_deb() {
    (cd "$1" && git init -q && git add -A && make deb DEB_JOBS=2) >"$1.log" 2>&1
}
OLD=$T_DIR/old NEW=$T_DIR/new
tree_copy "$NEW"
NEWEST=$(grep -oE '/\* v[0-9]+:' "$ROOT/src/store/store.c" | tail -1 | grep -oE '[0-9]+')
t0=$SECONDS
check "the tree's package builds ($V, store v$NEWEST)" build_deb "$NEW" || { tail -20 "$NEW.log" | sed 's/^/# /'; done_testing; }
# The older package: the new one's build tree copied with its objects (dpkg's
# flags map the build dir to ".": an object is the same wherever it was
# built), given the older version and store, and built again without the
# pre-clean (dpkg-buildpackage -nc): make recompiles what changed, debhelper
# runs afresh (its stamps and staging removed).
OSRC=$OLD/build-deb/mtc-$OLDV
mkdir -p "$OLD/build-deb" && cp -a "$NEW/build-deb/mtc-$V" "$OSRC"
rm -rf "$OSRC"/debian/{.debhelper,debhelper-build-stamp,files,mtc,mtc.substvars,mtc.*.debhelper*}
echo "$OLDV" >"$OSRC/VERSION"
{
    printf 'mtc (%s) unstable; urgency=medium\n\n  * An older build for the upgrade test.\n\n' "$OLDV"
    printf ' -- mtc tests <tests@localhost>  %s\n\n' "$(date -R)"
    cat "$ROOT/debian/changelog"
} >"$OSRC/debian/changelog"
# the newest migration out: the last "/* vN:" entry of migrations[]
python3 - "$OSRC/src/store/store.c" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
a = s.index("static const char *migrations[] = {")
b = s.index("\n};", a)
last = s.rindex("\n    /* v", a, b)
open(p, "w").write(s[:last] + s[b:])
PY
old_deb() {
    (cd "$OSRC" && DEB_BUILD_OPTIONS="nocheck parallel=2" dpkg-buildpackage -us -uc -b -nc) >"$OLD.log" 2>&1
}
check "the older package builds ($OLDV, store v$((NEWEST - 1)))" old_deb || { tail -20 "$OLD.log" | sed 's/^/# /'; done_testing; }
check "  only what changed was compiled again (store.c, version.c)" bash -c \
    "[ \$(grep -cE '^(cc|gcc) .* -c ' '$OLD.log') -le 2 ] && grep -qE '^(cc|gcc) .* -c src/store/store.c' '$OLD.log'"
diag "make deb and the older package: $((SECONDS - t0)) s"
OLD_DEB=$(ls "$OLD"/build-deb/mtc_*_*.deb) NEW_DEB=$(ls "$NEW"/build-deb/mtc_*_*.deb)
diag "figure: package size $(stat -c %s "$NEW_DEB") bytes ($(basename "$NEW_DEB")), installed $(dpkg-deb -f "$NEW_DEB" Installed-Size) KiB"
CHANGES=$(ls "$NEW"/build-deb/mtc_*.changes 2>/dev/null)
check "the build's .changes file is there (${CHANGES##*/})" test -f "$CHANGES"
# one lintian run (-I: two of the hardening tags are info-level, hidden by default)
lout=$(lintian -I "$CHANGES" 2>&1)
lrc=$?
lint=$(grep -E '^[EW]: ' <<<"$lout" | head -5)
check "lintian: ran (exit $lrc), no errors, no warnings${lint:+ — $lint}" [ "$lrc" = 0 ] && [ -z "$lint" ]
hard=$(grep -E 'hardening-no-(relro|fortify-functions|bindnow|pie)' <<<"$lout" | head -3)
check "lintian: built with Debian's hardening flags${hard:+ — $hard}" [ "$lrc" = 0 ] && [ -z "$hard" ]

# --- install the older one -----------------------------------------------------
INSTALLED=1
t0=$(date +%s%N)
dpkg -i "$OLD_DEB" >"$T_DIR/dpkg.log" 2>&1
rc=$?
apt-get -f install -y >>"$T_DIR/dpkg.log" 2>&1
rc2=$?
ms=$((($(date +%s%N) - t0) / 1000000))
check "dpkg -i + apt-get -f install: $(dpkg-query -W -f '${Version} ${db:Status-Abbrev}' mtc 2>/dev/null)" \
    eval '[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && [ "$(dpkg-query -W -f "\${Version}" mtc)" = "$OLDV" ]' ||
    sed 's/^/# /' "$T_DIR/dpkg.log"
diag "figure: install time ${ms} ms (dpkg -i + apt-get -f install, dependencies already present)"
check "installed: programs, plugin, data, unit, /etc/default/mtcd" \
    eval 'for f in /usr/bin/mtc /usr/bin/mtcd /usr/bin/mtc-agent /usr/bin/mtc-train /usr/bin/mtc-serve /usr/lib/mtc/spank_mtc.so /usr/share/mtc/recipes /usr/share/mtc/www /usr/share/mtc/examples/local-2node.json $UNIT /etc/default/mtcd; do [ -e $f ] || { echo "# missing $f"; exit 1; }; done'
out=$(systemd-analyze verify "$UNIT" 2>&1)
check "systemd-analyze verify mtcd.service${out:+ — $out}" [ -z "$out" ]
for p in mtc mtcd; do
    out=$(MANWIDTH=80 man "$p" 2>&1 </dev/null)
    check "man $p renders its NAME from $(man -w "$p" 2>/dev/null)" grep -q "^NAME" <<<"$out"
done

# --- the older mtcd, a cluster, a job ------------------------------------------
check "mtcd runs as the unit runs it" unit_start || { sed 's/^/# /' "$T_DIR/unit.stderr"; done_testing; }
check "the socket is $SYS_SOCK, linked from $SYS_HOME/mtcd.sock" \
    eval '[ -S "$SYS_SOCK" ] && [ "$(readlink "$SYS_HOME/mtcd.sock")" = "$SYS_SOCK" ]'
check "it is the older version ($OLDV) on store v$((NEWEST - 1))" \
    eval '[ "$(healthz | field version)" = "$OLDV" ] && [ "$(schema)" = $((NEWEST - 1)) ]'
out=$(mtc daemon status 2>&1)
check "mtc with no MTC_HOME finds the service's mtcd: $out" grep -q "socket $SYS_HOME/mtcd.sock" <<<"$out"
mtc cluster create -f /usr/share/mtc/examples/local-2node.json --id "$CID" >"$T_DIR/create.out" 2>&1
check "a local cluster from the installed example is RUNNING" eval '[ "$(cluster_state)" = RUNNING ]' ||
    { sed 's/^/# /' "$T_DIR/create.out"; done_testing; }
eval "$(mtc env "$CID")"
CTLD=$(cat "$SYS_HOME/clusters/$CID/run/slurm/slurmctld.pid" 2>/dev/null)
. "$(dirname "$0")/run_setup.inc"
check "tiny corpus tokenized (installed mtc-train)" run_corpus "$T_DIR/data"
run_recipe "$T_DIR/recipe.json" "$STEPS" 50
mtc run -s "$T_DIR/recipe.json" -n 1 --data-dir "$T_DIR/data" --experiment-name "$EXP" >"$T_DIR/run.out" 2>&1
check "the tiny recipe is submitted" grep -q "^- Job id: " "$T_DIR/run.out" || { sed 's/^/# /' "$T_DIR/run.out"; done_testing; }
TD=$(sed -n 's/^- Local Directory: //p' "$T_DIR/run.out")
JOB=$(sed -n 's/^- Job id: //p' "$T_DIR/run.out")
steps_done() { [ -s "$TD/logs/metrics.jsonl" ] && [ "$(wc -l <"$TD/logs/metrics.jsonl")" -ge "$1" ]; }
check "job $JOB is training" wait_for 120 steps_done 5
# held across the upgrade (SIGSTOP to its processes: Slurm still sees it
# RUNNING), so it cannot end before the upgrade however fast it trains
# (listed again after each SIGSTOP until every one listed is stopped: a
# process can start before its parent stops, or end and wait, a zombie, for
# its stopped parent — a fresh clone's run, 2026-12-07: one of four was
# not T)
held() {
    local p st n=0
    for p in $JPIDS; do
        st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) || continue
        case $st in T) n=$((n + 1)) ;; Z | "") ;; *) return 1 ;; esac
    done
    [ "$n" -gt 0 ]
}
hold_job() {
    JPIDS=$(job_pids "$JOB" "$SYS_HOME/clusters/$CID/slurm.conf" | xargs)
    [ -n "$JPIDS" ] && kill -STOP $JPIDS 2>/dev/null
    held
}
check "the job's processes held for the upgrade" wait_for 10 hold_job
diag "held: $JPIDS"

# --- the upgrade ---------------------------------------------------------------
t0=$(date +%s%N)
dpkg -i "$NEW_DEB" >>"$T_DIR/dpkg.log" 2>&1
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
check "dpkg -i the new package over the old: $(dpkg-query -W -f '${Version}' mtc)" \
    eval '[ $rc -eq 0 ] && [ "$(dpkg-query -W -f "\${Version}" mtc)" = "$V" ]'
diag "figure: upgrade install time ${ms} ms (dpkg -i)"
# what systemd does after an upgrade: restart the unit
t0=$(date +%s%N)
check "the old mtcd stops on SIGTERM" unit_stop
check "the new mtcd starts as the unit" unit_start
up_ms=$((($(date +%s%N) - t0) / 1000000))
check "it is the new version ($V) and the store migrated to v$NEWEST" \
    eval '[ "$(healthz | field version)" = "$V" ] && [ "$(schema)" = "$NEWEST" ]'
adopted() { grep -q "\[$UNIT_PID\].*cluster $CID: supervised" "$SYS_HOME/log/mtcd.log"; }
check "the cluster is adopted (its first supervision pass)" wait_for 60 adopted
ad_ms=$((($(date +%s%N) - t0) / 1000000))
diag "figure: SIGTERM to the old mtcd → the new one answers ${up_ms} ms, → cluster adopted ${ad_ms} ms (0.2 s polls)"
check "the cluster is RUNNING, its slurmctld the same process ($CTLD)" \
    eval '[ "$(cluster_state)" = RUNNING ] && [ -n "$CTLD" ] && [ "$(cat "$SYS_HOME/clusters/$CID/run/slurm/slurmctld.pid")" = "$CTLD" ] && kill -0 "$CTLD"'
st=$(squeue -h -j "$JOB" -o %T 2>/dev/null)
check "job $JOB still running after the upgrade ($st), not requeued" \
    eval '[ "$st" = RUNNING ] && scontrol show job "$JOB" | grep -qE "(^| )Restarts=0( |$)"'
kill -CONT $JPIDS 2>/dev/null
final=$(run_wait_final 300 "$EXP")
check "job $JOB completes ($final)" [ "$final" = COMPLETED ]
check "every step exactly once across the upgrade" python3 - "$TD/logs/metrics.jsonl" "$STEPS" <<'PY'
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1])]
n = int(sys.argv[2])
assert steps == list(range(1, n + 1)), [s for s in steps if steps.count(s) > 1][:5] or len(steps)
PY

# --- downgrade, remove, purge --------------------------------------------------
check "mtcd stops" unit_stop
dpkg -i "$OLD_DEB" >>"$T_DIR/dpkg.log" 2>&1
check "dpkg -i the older package (a downgrade) installs" eval '[ "$(dpkg-query -W -f "\${Version}" mtc)" = "$OLDV" ]'
out=$(MTC_HOME=$SYS_HOME timeout 30 /usr/bin/mtcd --home "$SYS_HOME" --socket "$SYS_SOCK" 2>&1 </dev/null)
rc=$?
check "the older mtcd refuses the newer store in one line (exit $rc): $out" \
    eval '[ $rc -ne 0 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q "schema version $NEWEST is newer than this mtcd ($((NEWEST - 1)))" <<<"$out"'
check "and leaves it as it was (v$NEWEST, the cluster in it)" \
    eval '[ "$(schema)" = "$NEWEST" ] && python3 -c "import sqlite3,sys; sys.exit(not sqlite3.connect(\"file:$SYS_HOME/mtcd.db?mode=ro\", uri=True).execute(\"SELECT 1 FROM clusters WHERE id=?\", (\"$CID\",)).fetchone())"'
dpkg -i "$NEW_DEB" >>"$T_DIR/dpkg.log" 2>&1
check "back on the new package, mtcd starts" unit_start
out=$(mtc cluster delete "$CID" 2>&1)
check "the cluster is deleted (not found)" gone "cluster $CID not found" -- mtc cluster get "$CID" || diag "$out"
check "mtcd stops" unit_stop
dpkg -r mtc >>"$T_DIR/dpkg.log" 2>&1
check "dpkg -r: the programs go, $SYS_HOME stays" eval '[ ! -e /usr/bin/mtcd ] && [ -f "$SYS_HOME/mtcd.db" ]'
dpkg -P mtc >>"$T_DIR/dpkg.log" 2>&1
check "dpkg -P: $SYS_HOME and /etc/default/mtcd go" eval '[ ! -e "$SYS_HOME" ] && [ ! -e /etc/default/mtcd ] && ! dpkg -s mtc >/dev/null 2>&1'
INSTALLED=0
done_testing
