#!/usr/bin/env bash
# Container start with the NVIDIA driver put inside vs without (docs/
# containers.md, "The NVIDIA driver inside the container"; goal: at most
# 1.1x), on a local 2-node cluster whose first node has an emulated driver
# tree (hw/driver: the fake libcuda and NVML at 535.104.05 in a loader cache
# made by ldconfig -r, nvidia-smi, GSP firmware, /proc/driver/nvidia with 8
# GPUs). In one job (salloc --gres=gpu:2), BENCH_STARTS (default 20) pairs of
# steps, interleaved, after one unmeasured pair: `srun --container-image=
# small.sqsh true` with NVIDIA_VISIBLE_DEVICES=void (the driver left out: the
# container start as before) and without it (the driver's files bound, the
# loader cache made — by ldconfig in the job's first step, from the job's
# stash after — and /proc/driver/nvidia made); the first pair is shown apart. Medians in ms and
# their ratio. Then the same pairs in two named containers (--container-name,
# the first step of each unmeasured): the driver's container finds its
# loader cache made already (ldconfig's mark), so the difference is the
# mounts alone. Then BENCH_FIRSTS (default 8) jobs of three steps: without the
# driver (unmeasured: it mounts the image), with it (the job's first GPU
# step: the node's stash of the loader cache copied in, or ldconfig where
# the stash is per job), without it again; the median of their ratios is
# the first step's overhead. Everything it starts is stopped on exit by recorded pid or job
# id; the work directory is removed (BENCH_KEEP=1 keeps it).
if [ "$(id -u)" != 0 ] || [ ! -e /dev/loop-control ] || ! command -v mksquashfs >/dev/null; then
    echo "skipped: needs root, loop devices and mksquashfs (the plugin mounts images)"
    exit 0
fi
# shellcheck source=bench/lib.inc
. "$(dirname "$0")/lib.inc"
export LC_ALL=C
STARTS=${BENCH_STARTS:-20}
VER=535.104.05
CID=dbench
mkdir -p "$MTC_HOME"
: >"$W/jobs"
exec 3>&1 >"$W/bench.log" 2>&1
FAILED=0
cleanup() {
    local j
    trap - INT TERM HUP
    if [ -f "$MTC_HOME/clusters/$CID/slurm.conf" ]; then
        sort -u "$W/jobs" | while read -r j; do
            SLURM_CONF=$MTC_HOME/clusters/$CID/slurm.conf scancel "$j" 2>/dev/null
        done
        mtc cluster delete "$CID" >/dev/null 2>&1
    fi
    bench_stop_pids
    [ "$FAILED" -ne 0 ] && tail -n 25 "$W/bench.log" >&3
    if grep -qF " $W/" /proc/self/mountinfo; then
        echo "container_driver: mounts left under $W; not removed" >&3
    elif [ -n "${BENCH_KEEP:-}" ]; then
        echo "kept $W" >&3
    else
        rm -rf --one-file-system "$W"
    fi
}
trap cleanup EXIT
trap 'FAILED=1; exit 1' INT TERM HUP
fail() { FAILED=1; echo "container_driver: $*" >&3; exit 1; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# the image: dash, true and their libraries
r=$W/small
mkdir -p "$r/bin" "$r/etc"
cp -L /bin/dash "$r/bin/sh" && cp -L /bin/true "$r/bin/" || fail "cannot make the root"
for f in $(ldd /bin/dash /bin/true | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && NF == 2 { print $1 }' | sort -u); do
    mkdir -p "$r$(dirname "$f")" && cp -L "$f" "$r$f" || fail "cannot copy $f"
done
echo "PATH=/bin" >"$r/etc/environment"
mtc image import "$r" -o "$W/small.sqsh" || fail "mtc image import failed"

bench_start_mtcd || fail "mtcd did not start"
mtc cluster create -f "$ROOT/examples/local-2node.json" --id "$CID" || fail "cluster create failed"
eval "$(mtc env "$CID")"
NODE=$(sinfo -h -N -o %N | head -1)
t=$MTC_HOME/clusters/$CID/nodes/$NODE/hw/driver
mkdir -p "$t/usr/lib/x86_64-linux-gnu" "$t/usr/bin" "$t/etc" "$t/lib/firmware/nvidia/$VER" "$t/proc/driver/nvidia/gpus"
cp "$B/fakes/libcuda.so" "$t/usr/lib/x86_64-linux-gnu/libcuda.so.$VER"
cp "$B/fakes/libnvml.so" "$t/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.$VER"
cp "$B/tests/tools/gpu_probe" "$t/usr/bin/nvidia-smi"
head -c 65536 /dev/urandom >"$t/lib/firmware/nvidia/$VER/gsp_ga10x.bin"
echo /usr/lib/x86_64-linux-gnu >"$t/etc/ld.so.conf"
ldconfig -r "$t" || fail "ldconfig -r failed"
printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Sat Aug 19 01:15:15 UTC 2023\n' "$VER" >"$t/proc/driver/nvidia/version"
for g in 0 1 2 3 4 5 6 7; do
    mkdir -p "$t/proc/driver/nvidia/gpus/0000:0$g:00.0"
    printf 'Device Minor: \t %d\nGPU UUID: \t GPU-0000000%d\n' "$g" "$g" >"$t/proc/driver/nvidia/gpus/0000:0$g:00.0/information"
done

cat >"$W/job.sh" <<'EOF'
echo "$SLURM_JOB_ID" >>"$BENCH_JOBS"
t=("$EPOCHREALTIME")
step() { srun -n1 --overlap --gres=gpu:2 "$@" true >&2 || exit 1; t+=("$EPOCHREALTIME"); }
for _ in $(seq "$2"); do
    NVIDIA_VISIBLE_DEVICES=void step --container-image="$1" $3
    step --container-image="$1" $4
done
echo "${t[@]}" | awk '{ for (i = 2; i <= NF; i++) printf "%.1f ", ($i - $(i - 1)) * 1000; print "" }'
EOF
# a job's first step with the driver: after an unmeasured step without it
# (which mounts the image), then one without it again — BENCH_FIRSTS jobs
cat >"$W/first.sh" <<'EOF'
echo "$SLURM_JOB_ID" >>"$BENCH_JOBS"
step() { srun -n1 --overlap --gres=gpu:2 "$@" true >&2 || exit 1; t+=("$EPOCHREALTIME"); }
t=()
NVIDIA_VISIBLE_DEVICES=void step --container-image="$1"
step --container-image="$1"
NVIDIA_VISIBLE_DEVICES=void step --container-image="$1"
echo "${t[@]}" | awk '{ printf "%.1f %.1f\n", ($2 - $1) * 1000, ($3 - $2) * 1000 }'
EOF
export BENCH_JOBS=$W/jobs
pairs() { # NAME-OPTION-VOID NAME-OPTION-DRIVER: medians "OFF ON" and the lists
    local st off=() on=() i
    read -r -a st < <(salloc -N1 -w "$NODE" --gres=gpu:2 -J dbench bash "$W/job.sh" "$W/small.sqsh" $((STARTS + 1)) "$1" "$2")
    [ "${#st[@]}" -eq $((2 * STARTS + 2)) ] || fail "the steps' job failed"
    for ((i = 2; i < ${#st[@]}; i += 2)); do off+=("${st[i]}") on+=("${st[i + 1]}"); done
    echo "$(median "${off[@]}") $(median "${on[@]}") $(echo "${off[@]}" | tr ' ' /) $(echo "${on[@]}" | tr ' ' /) ${st[0]} ${st[1]}"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
read -r OFF ON LOFF LON FOFF FON < <(pairs "" "")
read -r NOFF NON NLOFF NLON NFOFF NFON < <(pairs --container-name=bvoid --container-name=bdrv)
FIRSTS=${BENCH_FIRSTS:-8}
fon=() foff=() fr=()
for _ in $(seq "$FIRSTS"); do
    read -r a b < <(salloc -N1 -w "$NODE" --gres=gpu:2 -J dbench bash "$W/first.sh" "$W/small.sqsh")
    [ -n "${b:-}" ] || fail "a first-step job failed"
    fon+=("$a") foff+=("$b") fr+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a / b }')")
done
{
    echo "the first job's first pair (unmeasured below): without $FOFF ms, with $FON ms (its first step mounts the image; ldconfig runs in the driver's)"
    echo "the second job's first pair (unmeasured below): without $NFOFF ms, with $NFON ms (the node's stash, where kept across jobs, copied in)"
    echo "start of a containerised step on 2 GPUs of $NODE (steps of one job), median of $STARTS, interleaved:"
    printf '  %-52s %7.1f ms\n' "without the driver (NVIDIA_VISIBLE_DEVICES=void)" "$OFF"
    printf '  %-52s %7.1f ms  %s\n' "with the driver (libs, firmware, stashed cache, /proc)" "$ON" "$(ratio "$ON" "$OFF")"
    echo "  without: $LOFF"
    echo "  with:    $LON"
    echo "a later job's first step with the driver (after one without, which mounts the image) vs its next"
    echo "step without, $FIRSTS jobs after the above (median of the ratios):"
    printf '  %-52s %7.1f ms\n' "without the driver" "$(median "${foff[@]}")"
    printf '  %-52s %7.1f ms  %sx\n' "with the driver (first in the job)" "$(median "${fon[@]}")" "$(median "${fr[@]}")"
    echo "  without: $(echo "${foff[@]}" | tr ' ' /)"
    echo "  with:    $(echo "${fon[@]}" | tr ' ' /)"
    echo "the same in named containers (the driver's loader cache made by the first step: no ldconfig):"
    printf '  %-52s %7.1f ms\n' "without the driver" "$NOFF"
    printf '  %-52s %7.1f ms  %s\n' "with the driver (mounts only)" "$NON" "$(ratio "$NON" "$NOFF")"
    echo "  without: $NLOFF"
    echo "  with:    $NLON"
} >&3
