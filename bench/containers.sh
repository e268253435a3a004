#!/usr/bin/env bash
# Containers (docs/containers.md) on a local 2-node cluster, each figure beside
# a baseline measured in the same run:
#  1. start: `srun -N1 -n1 --container-image=small.sqsh true` vs plain
#     `srun -N1 -n1 true` (each its own job on the same node), BENCH_STARTS
#     (default 20) of each, interleaved, after one unmeasured warm-up of each
#     (it hashes small.sqsh), the node idle before each (no job's Epilog in
#     the figure); medians in ms and their ratio. Then the same pair as
#     steps of one job (salloc). small.sqsh is `mtc image import` of a root
#     with dash as /bin/sh, true, cat and the shared libraries ldd names.
#  2. first vs cached use, BENCH_TRIALS (default 5) trials, each with a new
#     copy of a BENCH_IMAGE_MB (default 256) MB image (small root + random
#     data; a new file identity, so its digest is not cached): job A runs
#     plain `srun true` (absorbs the job's first-step cost: the Prolog), then
#     container step 1 (first use: sha256 + loop + mount + overlay), container
#     step 2 (cached use: image mounted, digest cached) and a plain step; job B
#     on the same node runs a plain step and one container step (digest cached,
#     the image mounted again for the new job). Every step timed in the job
#     script ($EPOCHREALTIME around srun); medians and ratios. Steps run with
#     --overlap: none waits for the previous step's resources to be released.
#  3. `mtc image import DIR` vs `mksquashfs DIR X -noappend -all-root
#     -no-progress -quiet` (import's own flags) on one tree: small root + the
#     first BENCH_TREE_MB (default 40) MB of /usr/lib/x86_64-linux-gnu's files;
#     BENCH_IMPORT_TRIALS (default 3) of each, interleaved; MB/s of the tree
#     and the ratio.
# Everything it starts (mtcd, the cluster and its daemons, jobs) is stopped on
# exit, failure and signals included, by recorded pid or job id; the work
# directory is removed (BENCH_KEEP=1 keeps it). Chatter goes to
# $W/bench.log, the figures to stdout.
if [ "$(id -u)" != 0 ] || [ ! -e /dev/loop-control ] || ! command -v mksquashfs >/dev/null; then
    echo "skipped: needs root, loop devices and mksquashfs (the plugin mounts images)"
    exit 0
fi
# shellcheck source=bench/lib.inc
. "$(dirname "$0")/lib.inc"
export LC_ALL=C
STARTS=${BENCH_STARTS:-20}
TRIALS=${BENCH_TRIALS:-5}
IMAGE_MB=${BENCH_IMAGE_MB:-256}
TREE_MB=${BENCH_TREE_MB:-40}
ITRIALS=${BENCH_IMPORT_TRIALS:-3}
LOAD0=$(cut -d" " -f1-3 /proc/loadavg)
CID=cbench
mkdir -p "$MTC_HOME" "$W/tmp" "$W/img"
export TMPDIR=$W/tmp # mtc image's work directories
: >"$W/jobs"
exec 3>&1 >"$W/bench.log" 2>&1 # chatter to the log, figures to fd 3
FAILED=0

# Pids recorded in the cluster's run/*.pid files that are still ours (their
# command line names $W): what a failed cluster delete left running.
cluster_leftovers() {
    local f p
    for f in "$MTC_HOME/clusters/$CID/run/"*.pid; do
        [ -f "$f" ] || continue
        p=$(cat "$f" 2>/dev/null)
        [[ "$p" =~ ^[0-9]+$ ]] || continue
        tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$W" && echo "$p"
    done
}
cleanup() {
    local j p
    trap - INT TERM HUP
    if [ -f "$MTC_HOME/clusters/$CID/slurm.conf" ]; then
        sort -u "$W/jobs" | while read -r j; do
            SLURM_CONF=$MTC_HOME/clusters/$CID/slurm.conf scancel "$j" 2>/dev/null
        done
        mtc cluster delete "$CID" >/dev/null 2>&1
        for p in $(cluster_leftovers); do PIDS+=("$p"); done
    fi
    bench_stop_pids
    if [ "$FAILED" -ne 0 ]; then
        echo "--- the end of bench.log (BENCH_KEEP=1 keeps it):" >&3
        tail -n 25 "$W/bench.log" >&3
    fi
    if grep -qF " $W/" /proc/self/mountinfo; then
        echo "containers: mounts left under $W; not removed" >&3
    elif [ -n "${BENCH_KEEP:-}" ]; then
        echo "kept $W" >&3
    else
        rm -rf --one-file-system "$W"
    fi
}
trap cleanup EXIT
trap 'FAILED=1; echo "containers: interrupted" >&3; exit 1' INT TERM HUP
fail() { FAILED=1; echo "containers: $*" >&3; exit 1; }

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
list() { echo "$@" | tr ' ' /; }
# Milliseconds a command took (its output to the log); fails with it.
timed() {
    local t0=$EPOCHREALTIME
    "$@" >&2 || return 1
    awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", (b - a) * 1000 }'
}

# --- the images --------------------------------------------------------------
# $1: a root with dash as /bin/sh, true, cat and their libraries (ldd).
small_root() {
    local r=$1 f
    mkdir -p "$r/bin" "$r/etc" "$r/proc" "$r/sys" "$r/dev" "$r/tmp" || return 1
    cp -L /bin/dash "$r/bin/sh" && cp -L /bin/true /bin/cat "$r/bin/" || return 1
    for f in $(ldd /bin/dash /bin/true /bin/cat | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && NF == 2 { print $1 }' | sort -u); do
        mkdir -p "$r$(dirname "$f")" && cp -L "$f" "$r$f" || return 1
    done
    echo "PATH=/bin" >"$r/etc/environment"
}
small_root "$W/small" || fail "cannot make the small root"
mtc image import "$W/small" -o "$W/small.sqsh" || fail "mtc image import of the small root failed"
if ! cp -a "$W/small" "$W/big" || ! mkdir -p "$W/big/data" ||
    ! head -c $((IMAGE_MB << 20)) /dev/urandom >"$W/big/data/blob"; then
    fail "cannot make the big root"
fi
mtc image import "$W/big" -o "$W/big.sqsh" || fail "mtc image import of the big root failed"
rm -rf "$W/big"
BIGSIZE=$(stat -c %s "$W/big.sqsh")

# --- the cluster ---------------------------------------------------------------
# shellcheck disable=SC2119 # no extra options
bench_start_mtcd || fail "mtcd did not start"
mtc cluster create -f "$ROOT/examples/local-2node.json" --id "$CID" || fail "cluster create failed"
eval "$(mtc env "$CID")"
NODE=$(sinfo -h -N -o %N | head -1)
[ -n "$NODE" ] || fail "no node in sinfo"
RT=$MTC_HOME/clusters/$CID/nodes/$NODE/containers # the plugin's runtime= directory
ndigests() { find "$RT/digests" -type f 2>/dev/null | wc -l; }
# Wait (up to 60 s) for $NODE to be idle with no job on it: a job's Epilog
# must not be part of the next figure.
wait_idle() {
    local end=$((SECONDS + 60))
    while [ $SECONDS -lt $end ]; do
        [ -z "$(squeue -h -w "$NODE" -o %i)" ] && [ "$(sinfo -h -n "$NODE" -o %T)" = idle ] && return 0
        sleep 0.05
    done
    fail "$NODE not idle after 60 s"
}

# The job script: "A IMAGE" → plain, container, container, plain; "B IMAGE" →
# plain, container; "S IMAGE N" → plain, then N times plain, container. Prints
# the steps' ms on one line.
cat >"$W/job.sh" <<'EOF'
echo "$SLURM_JOB_ID" >>"$BENCH_JOBS"
t=("$EPOCHREALTIME")
step() { srun -n1 --overlap "$@" true >&2 || exit 1; t+=("$EPOCHREALTIME"); }
step
case $1 in
A) step --container-image="$2"; step --container-image="$2"; step ;;
B) step --container-image="$2" ;;
S) for _ in $(seq "$3"); do step; step --container-image="$2"; done ;;
esac
echo "${t[@]}" | awk '{ for (i = 2; i <= NF; i++) printf "%.1f ", ($i - $(i - 1)) * 1000; print "" }'
EOF
export BENCH_JOBS=$W/jobs

# --- 1. start overhead -----------------------------------------------------------
plain=() cont=()
for i in $(seq 0 "$STARTS"); do
    wait_idle
    p=$(timed srun -N1 -n1 -w "$NODE" true) || fail "srun true failed"
    wait_idle
    c=$(timed srun -N1 -n1 -w "$NODE" --container-image="$W/small.sqsh" true) ||
        fail "srun --container-image true failed"
    [ "$i" -eq 0 ] && continue # the warm-up
    plain+=("$p") cont+=("$c")
done
P=$(median "${plain[@]}") C=$(median "${cont[@]}")
wait_idle
read -r -a st < <(salloc -N1 -w "$NODE" -J cbench-s bash "$W/job.sh" S "$W/small.sqsh" "$STARTS")
[ "${#st[@]}" -eq $((2 * STARTS + 1)) ] || fail "the steps' job failed"
splain=() scont=()
for ((i = 1; i < ${#st[@]}; i += 2)); do splain+=("${st[i]}") scont+=("${st[i + 1]}"); done
SP=$(median "${splain[@]}") SC=$(median "${scont[@]}")
{
    echo "start of a 1-node step, each its own job on $NODE, median of $STARTS, interleaved (after one warm-up each):"
    printf '  %-45s %7.1f ms\n' "srun true" "$P"
    printf '  %-45s %7.1f ms  %s of plain (image: %d bytes)\n' "srun --container-image=small.sqsh true" "$C" \
        "$(ratio "$C" "$P")" "$(stat -c %s "$W/small.sqsh")"
    echo "  plain:     $(list "${plain[@]}")"
    echo "  container: $(list "${cont[@]}")"
    echo "the same as steps of one job (image mounted by the first container step, which is counted), median of $STARTS, interleaved:"
    printf '  %-45s %7.1f ms\n' "srun true" "$SP"
    printf '  %-45s %7.1f ms  %s of plain\n' "srun --container-image=small.sqsh true" "$SC" "$(ratio "$SC" "$SP")"
    echo "  plain:     $(list "${splain[@]}")"
    echo "  container: $(list "${scont[@]}")"
} >&3

# --- 2. first use vs cached use ----------------------------------------------------
first=() cached=() aplain=() remount=() bfirst=()
for i in $(seq "$TRIALS"); do
    img=$W/img/first$i.sqsh
    { cp "$W/big.sqsh" "$img" && sync "$img"; } || fail "cannot copy the image" # no writeback during the job
    d0=$(ndigests)
    wait_idle
    read -r a1 a2 a3 a4 < <(salloc -N1 -w "$NODE" -J cbench-a bash "$W/job.sh" A "$img")
    [ -n "${a4:-}" ] || fail "job A of trial $i failed"
    d1=$(ndigests)
    wait_idle
    read -r b1 b2 < <(salloc -N1 -w "$NODE" -J cbench-b bash "$W/job.sh" B "$img")
    [ -n "${b2:-}" ] || fail "job B of trial $i failed"
    d2=$(ndigests)
    # job A hashed the new copy (one more digest cached), job B did not
    if [ $((d1 - d0)) -ne 1 ] || [ "$d2" -ne "$d1" ]; then
        fail "trial $i: digests cached $d0 → $d1 → $d2, expected one more after job A only"
    fi
    echo "trial $i: A $a1 $a2 $a3 $a4, B $b1 $b2"
    first+=("$a2") cached+=("$a3") aplain+=("$a4") bfirst+=("$b1") remount+=("$b2")
    rm -f "$img"
done
ref=$W/img/ref.sqsh
cp "$W/big.sqsh" "$ref" && sync "$ref"
if command -v openssl >/dev/null; then
    H=$(timed openssl dgst -sha256 "$ref") || H=""
else
    H=$(timed sha256sum "$ref") || H=""
fi
rm -f "$ref"
F=$(median "${first[@]}") K=$(median "${cached[@]}") M=$(median "${remount[@]}") A=$(median "${aplain[@]}")
{
    printf 'first vs cached use of a %.0f MB image on %s, median of %s trials (a new copy of the image each):\n' \
        "$(awk -v s="$BIGSIZE" 'BEGIN { print s / 1048576 }')" "$NODE" "$TRIALS"
    row() { printf '  %-60s %7.1f ms  %s\n' "$@"; }
    row "first use (job A step 2: sha256 + loop + mount + overlay)" "$F" "$(ratio "$F" "$K") of cached use"
    row "cached use (job A step 3: overlay)" "$K" "$(ratio "$K" "$A") of a plain step"
    row "digest cached, new job (job B step 2: loop + mount + overlay)" "$M" "$(ratio "$M" "$K") of cached use"
    row "plain step in the same job (job A step 4)" "$A" ""
    row "reference: $(command -v openssl >/dev/null && echo openssl || echo sha256sum) sha256 of a fresh copy of the image" "${H:-0}" ""
    echo "  first:  $(list "${first[@]}")"
    echo "  cached: $(list "${cached[@]}")"
    echo "  job B:  $(list "${remount[@]}")"
    echo "  plain:  $(list "${aplain[@]}") (a job's first step, with the Prolog: $(median "${bfirst[@]}") ms, median of job B's)"
} >&3

# --- 3. mtc image import vs mksquashfs -------------------------------------------
tree=$W/tree
{ small_root "$tree" && mkdir -p "$tree/data"; } || fail "cannot make the tree"
find /usr/lib/x86_64-linux-gnu -maxdepth 1 -type f -printf '%s %p\n' | sort -k2 |
    awk -v max=$((TREE_MB << 20)) '{ if (s + $1 > max) next; s += $1; print $2 }' |
    xargs -d '\n' -r cp -t "$tree/data" || fail "cannot fill the tree"
TREEB=$(du -sb "$tree" | cut -f1)
TREEMB=$(awk -v b="$TREEB" 'BEGIN { printf "%.1f", b / 1048576 }')
mks=() imp=()
for i in $(seq "$ITRIALS"); do
    m=$(timed mksquashfs "$tree" "$W/direct.sqsh" -noappend -all-root -no-progress -quiet) || fail "mksquashfs failed"
    SQB=$(stat -c %s "$W/direct.sqsh")
    rm -f "$W/direct.sqsh"
    t=$(timed mtc image import "$tree" -o "$W/import.sqsh") || fail "mtc image import failed"
    rm -f "$W/import.sqsh"
    mks+=("$m") imp+=("$t")
done
mbs() { awk -v mb="$TREEMB" -v ms="$1" 'BEGIN { printf "%.1f", mb / (ms / 1000) }'; }
MS=$(median "${mks[@]}") IM=$(median "${imp[@]}")
{
    printf 'mtc image import DIR vs mksquashfs on a %s MB tree (%s MB image), median of %s, interleaved:\n' \
        "$TREEMB" "$(awk -v b="$SQB" 'BEGIN { printf "%.1f", b / 1048576 }')" "$ITRIALS"
    printf '  %-45s %7.2f s  %6s MB/s\n' "mksquashfs DIR X -noappend -all-root" "$(awk -v m="$MS" 'BEGIN { print m / 1000 }')" "$(mbs "$MS")"
    printf '  %-45s %7.2f s  %6s MB/s  %s of mksquashfs\n' "mtc image import DIR -o X" \
        "$(awk -v m="$IM" 'BEGIN { print m / 1000 }')" "$(mbs "$IM")" "$(ratio "$MS" "$IM")"
    echo "  mksquashfs: $(list "${mks[@]}") ms"
    echo "  import:     $(list "${imp[@]}") ms"
    echo "  srun \"step creation temporarily disabled\" retries in the run: $(grep -c 'step creation temporarily disabled' "$W/bench.log")"
    echo "  load average (1/5/15 min) at the start: $LOAD0, at the end: $(cut -d" " -f1-3 /proc/loadavg) ($(nproc) cores)"
} >&3
