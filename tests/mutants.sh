#!/usr/bin/env bash
# mutants: does the suite catch a broken product? (issue 46, point 4) Each row
# of the table below is one small deliberate fault — an exact text in one
# file and what replaces it — and the test program(s) that must fail on it.
# In a scratch copy of the tree (build-mutants/tree: the tracked and the
# untracked-not-ignored files, as `make deb` copies them; build/ seeded from
# this tree's build, then brought up to date once), each mutant in turn: the
# text must occur exactly once (else the row is `stale`: the code moved, the
# row must follow it), the file is patched, `make -j2` builds what the paired
# programs need, tests/run.sh runs exactly those programs, and the file is
# restored. Prints `killed NAME (by TEST)`, `survived NAME`, `stale NAME` or
# `no-build NAME` for each, then a total with the time taken; exits non-zero
# when any mutant survived, was stale or did not build. Not part of `make
# test`: a bench-like tool (tests/README.md, "Mutants").
#
# Usage: tests/mutants.sh [--list] [--baseline] [NAME...]
#   NAME...     only these mutants (default: all)
#   --list      the table: name, file, paired programs, what it breaks, and
#               whether its text still occurs exactly once here
#   --baseline  first run every paired program on the unmutated copy; what
#               fails there (a check, or a program's own problem) is then no
#               kill: a mutant is killed only by a failure the baseline had not
#               program that already fails would "kill" any mutant
# Environment: M_DIR (scratch directory, default build-mutants: git-ignored),
# T_TIMEOUT (per program, passed to tests/run.sh; default 900 here), M_JOBS
# (make's -j, default 2).
#
# A row: NAME @@ FILE @@ ORIGINAL @@ REPLACEMENT @@ TESTS @@ WHAT. In ORIGINAL
# and REPLACEMENT, \n is a newline, \t a tab and \\ one backslash (so C's
# "\n" is written "\\n"). ORIGINAL "-" makes FILE a new executable file
# holding REPLACEMENT (a fault in the tests' environment, e.g. a stand-in
# on the PATH tests/run.sh gives the programs: build/bin comes first), removed
# afterwards. TESTS: unit test binaries (test_*) or integration scripts (their
# name without .sh), space-separated; the first to fail is the killer.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
M=${M_DIR:-build-mutants}
case $M in /*) ;; *) M=$ROOT/$M ;; esac
TREE=$M/tree
JOBS=${M_JOBS:-2}
export T_TIMEOUT=${T_TIMEOUT:-900}

TABLE=$(
    cat <<'ROWS'
# --- roles and who a job runs as
inject-fault-editor @@ src/api/routes.c @@ "/*/trainingJobs/*:injectFault", ROLE_ADMIN, @@ "/*/trainingJobs/*:injectFault", ROLE_EDITOR, @@ test_api_views @@ :injectFault accepts an editor's token (it is an admin's)
bound-token-other-user @@ src/api/jobs.c @@ if (bound && run->user && strcmp(bound, run->user) != 0) @@ if (0 && bound && run->user && strcmp(bound, run->user) != 0) @@ team_users @@ a token bound to a Unix user may name another user for its job
editor-root-field @@ src/api/clusters.c @@ if (r->who.role < ROLE_ADMIN && cluster_spec_privileged_change(old, spec, field, sizeof(field))) @@ if (r->who.role < ROLE_EDITOR && cluster_spec_privileged_change(old, spec, field, sizeof(field))) @@ security @@ an editor may set a spec field that runs something as root (prolog, NVML library): no 403
privileged-change-blind @@ src/cluster/privileged.c @@     return w.found;\n} @@     return 0 && w.found;\n} @@ test_spec @@ cluster_spec_privileged_change never sees a root-executing field
# --- names that reach paths, configs and commands
chaos-node-name @@ src/jobs/chaos.c @@ if (!mtc_name_valid(json_string_value(*v), 63)) @@ if (0 && !mtc_name_valid(json_string_value(*v), 63)) @@ test_chaos @@ :injectFault's node is not checked against the node-name pattern
pool-id-pattern @@ src/cluster/spec.c @@ if (mtc_name_valid(id, r->max)) @@ if (id && *id) @@ test_spec @@ a node pool or partition id is not checked against its pattern
name-allows-slash @@ src/common/file.c @@ (c >= '0' && c <= '9') || c == '-')) @@ (c >= '0' && c <= '9') || c == '-' || c == '/')) @@ test_common @@ mtc_name_valid lets a '/' into a name that becomes a path
spank-node-from-job-env @@ src/spank/plugin.c @@ const char *node = node_name(); @@ char jn[64] = "";\n    const char *node = spank_getenv(sp, "SLURMD_NODENAME", jn, sizeof(jn)) == ESPANK_SUCCESS ? jn : node_name(); @@ container_security @@ the container plugin takes the node name (%n of its paths) from the job's environment again
# --- accounting
account-delete-keeps-row @@ src/slurm/acct.c @@     char *args[] = {"delete", "account", "where", n, cl, NULL}; @@     return 0; /* reported deleted, left in sacctmgr */\n    char *args[] = {"delete", "account", "where", n, cl, NULL}; @@ accounting @@ mtc accounts delete reports success and leaves the sacctmgr row
slurmdbd-down-lister @@ build/bin/sacctmgr @@ - @@ #!/bin/sh\n# mutant: slurmdbd unreachable for the test's own listing of accounts\ncase "$*" in "-n -P show account"*) echo "sacctmgr: error: Problem talking to the database: Connection refused" >&2; exit 1 ;; esac\nexec /usr/bin/sacctmgr "$@"\n @@ accounting @@ the environment: sacctmgr cannot reach slurmdbd when accounting's negative lists the accounts
# --- health and the agent
ecc-never-drains @@ src/health/health.c @@ {"gpu.ecc", "gpu", health_gpu_ecc, HEALTH_SEV_REBOOT, 0, 0, @@ {"gpu.ecc", "gpu", health_gpu_ecc, HEALTH_SEV_NONE, 0, 0, @@ test_health @@ a GPU's uncorrected ECC errors fail gpu.ecc with no severity: the node is never drained
ecc-threshold @@ src/health/gpu.c @@ if (count > (unsigned long long)ctx->policy.gpu_max_uncorrected_ecc) @@ if (count >= (unsigned long long)ctx->policy.gpu_max_uncorrected_ecc) @@ test_health @@ gpuMaxUncorrectedEcc off by one: as many errors as allowed fail the check
xid79-harmless @@ src/health/xid.c @@ {79, HEALTH_SEV_REBOOT, "GPU has fallen off the bus"}, @@ {79, HEALTH_SEV_NONE, "GPU has fallen off the bus"}, @@ test_health @@ Xid 79 (GPU fallen off the bus) asks for no reboot
speed-never-fails @@ src/health/judge.c @@ if (*fraction < fail_fraction) @@ if (*fraction < fail_fraction - 1) @@ test_straggler @@ a node far slower than its peers' median only warns, never fails
# --- training jobs, goodput, the trainer
goodput-wall-from-submit @@ src/experiment/goodput.c @@ t->wall_s = t->first_start > 0 && stop > t->first_start ? stop - t->first_start : 0; @@ t->wall_s = t->submit > 0 && stop > t->submit ? stop - t->submit : t->first_start > 0 && stop > t->first_start ? stop - t->first_start : 0; @@ test_goodput @@ goodput's wall time starts at the submission instead of the job's first start
ckpt-resume-step-late @@ src/train/loop.c @@ r->step = r->ckpt_step = meta.step; @@ r->step = r->ckpt_step = meta.step + 1; @@ train_resume @@ a checkpoint is resumed one step late
loader-resume-batch-late @@ src/train/loader.c @@     l->pos = *pos;\n @@     l->pos = *pos;\n    l->pos.offset += l->pos.offset + 1 < l->s[pos->shard].nb;\n @@ test_train_data @@ the data loader resumes one batch past its saved position
# --- the registry and the store
alias-no-version-check @@ src/store/store_model.c @@ json_deep_copy(v[i].aliases);\n        if (v[i].version == version) @@ json_deep_copy(v[i].aliases);\n        if (v[i].version == version || (!me && i == n - 1)) @@ test_registry @@ an alias moved to a version that does not exist lands on the newest one
alias-may-be-number @@ src/registry/names.c @@ if (n == 0 || n > REGISTRY_ALIAS_MAX || !islower((unsigned char)alias[0])) @@ if (n == 0 || n > REGISTRY_ALIAS_MAX) @@ test_registry @@ an alias may start with a digit ("12": NAME@12 would mean two things)
store-newer-schema @@ src/store/store.c @@ if (v > N_MIGRATIONS) @@ if (v > N_MIGRATIONS + 100) @@ test_store @@ a database from a newer mtcd is opened (and written) instead of refused
store-last-migration @@ src/store/store.c @@ for (; v < N_MIGRATIONS; v++) { @@ for (; v < N_MIGRATIONS - 1; v++) { @@ test_store @@ the store's newest migration never runs
# --- strict input and one-line errors
schema-unknown-field @@ src/schema/schema.c @@ if (ignored(s, key)) @@ if (1 || ignored(s, key)) @@ test_schema @@ an unknown JSON field is ignored instead of refused by name
schema-error-two-lines @@ src/schema/schema.c @@ return errprintf(err, "%s: %s", path, msg); @@ return errprintf(err, "%s:\\n%s", path, msg); @@ test_schema @@ a field's error becomes two lines
# --- the runner itself
runner-skip-is-pass @@ tests/run.sh @@ { checks++; if ($0 ~ /#[ \\t]*[Ss][Kk][Ii][Pp]/) { skip++; r[skip] = why($0) } else ok++; next } @@ { checks++; ok++; next } @@ runner @@ tests/run.sh counts a skipped check as a pass
ROWS
)

# --- the table ----------------------------------------------------------------
N_NAME=() N_FILE=() N_FROM=() N_TO=() N_TESTS=() N_WHAT=()
while IFS= read -r row; do
    case $row in '' | '#'*) continue ;; esac
    f=()
    while [[ $row == *' @@ '* ]]; do f+=("${row%% @@ *}"); row=${row#* @@ }; done
    f+=("$row")
    if [ ${#f[@]} -ne 6 ]; then
        echo "tests/mutants.sh: a row with ${#f[@]} fields, not 6: ${f[0]}" >&2
        exit 2
    fi
    N_NAME+=("${f[0]}") N_FILE+=("${f[1]}") N_FROM+=("${f[2]}") N_TO+=("${f[3]}")
    N_TESTS+=("${f[4]}") N_WHAT+=("${f[5]}")
done <<<"$TABLE"

# patch DIR FILE FROM TO: FROM (escapes decoded) replaced by TO in DIR/FILE;
# exit 3 (stale) with the count on stdout when FROM does not occur exactly
# once (or FROM is "-" and the file exists). --count: only say whether it would apply.
patch() {
    python3 - "$@" <<'PY'
import os, re, sys
args = sys.argv[1:]
dry = args[0] == "--count"
if dry:
    args = args[1:]
root, name, a, b = args
dec = lambda s: re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)
path = os.path.join(root, name)
if a == "-":
    if os.path.exists(path):
        print("the file exists")
        sys.exit(3)
    if not dry:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(dec(b))
        os.chmod(path, 0o755)
    sys.exit(0)
try:
    text = open(path).read()
except OSError as e:
    print("no file (%s)" % e.strerror)
    sys.exit(3)
a = dec(a)
n = text.count(a)
if n != 1:
    print("the text occurs %d times" % n)
    sys.exit(3)
if not dry:
    with open(path, "w") as f:
        f.write(text.replace(a, dec(b), 1))
PY
}

if [ "${1:-}" = --list ]; then
    for i in "${!N_NAME[@]}"; do
        why=$(patch --count "$ROOT" "${N_FILE[$i]}" "${N_FROM[$i]}" "${N_TO[$i]}") &&
            state=applies || state="stale: $why"
        printf '%-26s %-24s %-20s %s\n%26s %s\n' "${N_NAME[$i]}" "${N_FILE[$i]}" "${N_TESTS[$i]}" \
            "($state)" "" "${N_WHAT[$i]}"
    done
    echo "${#N_NAME[@]} mutants"
    exit 0
fi
BASELINE=0
[ "${1:-}" = --baseline ] && { BASELINE=1; shift; }
SEL=()
if [ $# -gt 0 ]; then
    for want in "$@"; do
        found=
        for i in "${!N_NAME[@]}"; do [ "${N_NAME[$i]}" = "$want" ] && SEL+=("$i") found=1; done
        [ -n "$found" ] || { echo "tests/mutants.sh: no mutant named $want (--list)" >&2; exit 2; }
    done
else
    SEL=("${!N_NAME[@]}")
fi

T0=$SECONDS
# --- the scratch copy, built once -----------------------------------------------
echo "scratch copy: $TREE"
rm -rf "$TREE" && mkdir -p "$TREE" "$M/logs" || exit 2
git ls-files -z --cached --others --exclude-standard |
    tar -c --null --no-recursion --ignore-failed-read -T - -f - | tar -x -C "$TREE" || exit 2
# this tree's build as the seed (sources and objects keep their times: make
# rebuilds only what changed since)
[ -d build ] && { cp -a build "$TREE/build" && rm -rf "$TREE/build/test-logs"; }
(cd "$TREE" && make -j"$JOBS" >"$M/logs/build.log" 2>&1) ||
    { tail -20 "$M/logs/build.log"; echo "tests/mutants.sh: the unmutated copy does not build" >&2; exit 2; }
echo "built in $((SECONDS - T0)) s"

# targets PROGRAM...: what make must bring up to date for these programs
targets() {
    local t u integ=
    for t in "$@"; do
        case $t in
        test_*) # every unit test tests/run.sh will run for this name (it selects by substring)
            for u in "$TREE"/tests/unit/test_*.c; do
                u=${u##*/} u=${u%.c}
                case $u in *"$t"*) echo "build/tests/$u" ;; esac
            done
            ;;
        *) integ=1 ;;
        esac
    done
    [ -z "$integ" ] && return
    echo progs
    for t in "$TREE"/tests/fakes/*.c; do [ -e "$t" ] && t=${t##*/} && echo "build/fakes/lib${t%.c}.so"; done
    for t in "$TREE"/tests/tools/*.c; do [ -e "$t" ] && t=${t##*/} && echo "build/tests/tools/${t%.c}"; done
}

# run_tests LOGDIR PROGRAM...: tests/run.sh on exactly these programs in the
# copy (the scripts through a directory holding only them beside lib.sh and
# the shared files: run.sh selects scripts by substring); its output into
# LOGDIR/run.out, the programs' logs into LOGDIR. Status: run.sh's; 3 when a
# program named did not run.
run_tests() {
    local out=$1 t pats=() integ=
    shift
    local sel=$TREE/tests/mutant-sel
    rm -rf "$sel" && mkdir -p "$sel" "$out"
    for t in "$TREE"/tests/integration/*; do
        case ${t##*/} in *.sh) [ "${t##*/}" = lib.sh ] || continue ;; esac
        ln -s "../integration/${t##*/}" "$sel/${t##*/}"
    done
    for t in "$@"; do
        case $t in
        test_*) pats+=("$t") ;;
        *)
            [ -f "$TREE/tests/integration/$t.sh" ] || { echo "no program $t" >"$out/run.out"; return 3; }
            ln -s "../integration/$t.sh" "$sel/$t.sh"
            integ=1
            ;;
        esac
    done
    [ -n "$integ" ] && pats+=(integration)
    rm -rf "$TREE/build/test-logs"
    (cd "$TREE" && T_INTEGRATION=tests/mutant-sel tests/run.sh "${pats[@]}") >"$out/run.out" 2>&1
    local rc=$?
    cp "$TREE"/build/test-logs/*.log "$out/" 2>/dev/null
    for t in "$@"; do
        grep -qE "^(pass|FAIL|skip) +$t( |\$)" "$out/run.out" || { echo "# $t did not run" >>"$out/run.out"; return 3; }
    done
    return "$rc"
}

# failures DIR: what failed in a run_tests run in DIR, one a line: "PROG not
# ok N" per failed check (from the program's log), "PROG: PROBLEM" per
# problem of a program (a wrong plan, an exit status, a timeout: run.sh's words)
failures() {
    local p
    for p in $(awk '/^FAIL/ { print $2 }' "$1/run.out"); do
        grep -oE '^not ok [0-9]+' "$1/$p.log" 2>/dev/null | sed "s/^/$p /"
    done
    awk '/^FAIL/ { p = $2; next } /^[^ ]/ { p = "" }
         p != "" && /^    [^|# ]/ && !/^    not ok/ { sub(/^    /, ""); print p ": " $0 }' "$1/run.out"
}

if [ "$BASELINE" = 1 ]; then
    mapfile -t progs < <(for i in "${SEL[@]}"; do tr ' ' '\n' <<<"${N_TESTS[$i]}"; done | sort -u)
    # shellcheck disable=SC2046
    (cd "$TREE" && make -j"$JOBS" $(targets "${progs[@]}") >>"$M/logs/build.log" 2>&1)
    run_tests "$M/logs/baseline" "${progs[@]}"
    if [ $? = 3 ]; then
        tail -1 "$M/logs/baseline/run.out"
        echo "tests/mutants.sh: a paired program did not run unmutated (see $M/logs/baseline)" >&2
        exit 2
    fi
    failures "$M/logs/baseline" >"$M/logs/baseline/failures"
    if [ -s "$M/logs/baseline/failures" ]; then
        echo "baseline: these fail without a mutant (no mutant is killed by them alone):"
        sed 's/^/    /' "$M/logs/baseline/failures"
    else
        echo "baseline: ${progs[*]} pass unmutated"
    fi
    echo "baseline done in $((SECONDS - T0)) s"
fi

# --- each mutant ------------------------------------------------------------------
killed=0 survived=0 stale=0 nobuild=0
for i in "${SEL[@]}"; do
    name=${N_NAME[$i]} file=${N_FILE[$i]}
    read -r -a tests <<<"${N_TESTS[$i]}"
    log=$M/logs/$name
    rm -rf "$log" && mkdir -p "$log"
    t1=$SECONDS
    new=0
    [ "${N_FROM[$i]}" = - ] && new=1 || cp "$TREE/$file" "$log/original"
    if ! why=$(patch "$TREE" "$file" "${N_FROM[$i]}" "${N_TO[$i]}"); then
        echo "stale $name ($file: $why)"
        stale=$((stale + 1))
        continue
    fi
    # shellcheck disable=SC2046
    if ! (cd "$TREE" && make -j"$JOBS" $(targets "${tests[@]}")) >"$log/build.log" 2>&1; then
        echo "no-build $name (see $log/build.log)"
        nobuild=$((nobuild + 1))
    else
        run_tests "$log" "${tests[@]}"
        rc=$?
        if [ "$rc" = 3 ]; then
            echo "stale $name ($(tail -1 "$log/run.out"))"
            stale=$((stale + 1))
        elif [ "$rc" != 0 ] && [ "$BASELINE" = 1 ] &&
            ! failures "$log" | grep -qvxF -f "$M/logs/baseline/failures"; then
            echo "survived $name: ${N_WHAT[$i]} — only the baseline's failures (see $log)"
            survived=$((survived + 1))
        elif [ "$rc" != 0 ]; then
            by=$(awk '/^FAIL/ { printf "%s%s", s, $2; s = ", " }' "$log/run.out")
            [ "$BASELINE" = 1 ] &&
                by=$(failures "$log" | grep -vxF -f "$M/logs/baseline/failures" | awk '{ sub(/:$/, "", $1); print $1 }' | sort -u | paste -sd, | sed 's/,/, /g')
            echo "killed $name (by ${by:-tests/run.sh, exit $rc}) in $((SECONDS - t1)) s"
            # the first two failures (new ones, with --baseline): failed checks or problems
            if [ "$BASELINE" = 1 ]; then
                failures "$log" | grep -vxF -f "$M/logs/baseline/failures" | head -2 |
                    while read -r p rest; do
                        case $rest in
                        "not ok "*) grep -m 1 -E "^$rest( |\$)" "$log/$p.log" | sed 's/^/    /' ;;
                        *) echo "    $p $rest" ;;
                        esac
                    done
            else
                awk '/^FAIL/ { f = 1; next } /^[^ ]/ { f = 0 } f && /^    [^|#]/ && n++ < 2' "$log/run.out"
            fi
            killed=$((killed + 1))
        else
            echo "survived $name: ${N_WHAT[$i]} — ${tests[*]} passed (see $log)"
            survived=$((survived + 1))
        fi
    fi
    # restored with a new time: the next make rebuilds what the mutant built
    if [ "$new" = 1 ]; then rm -f "$TREE/$file"; else cat "$log/original" >"$TREE/$file"; fi
done
w=$((SECONDS - T0))
echo "${#SEL[@]} mutants: $killed killed, $survived survived, $stale stale, $nobuild no-build in $((w / 60)) min $((w % 60)) s"
[ $((survived + stale + nobuild)) -eq 0 ]
