#!/usr/bin/env bash
# container_gpu: the NVIDIA driver inside containers on emulated GPU nodes —
# each node's driver tree (nodes/NODE/hw/driver, which plugstack.conf's
# driver= names) built here as an admin installs one: versioned
# libcuda.so.535.104.05 (the fake CUDA) and libnvidia-ml.so.535.104.05 (the
# fake NVML) in a loader cache the real ldconfig makes, an nvidia-smi
# stand-in, GSP firmware, the persistenced socket, /proc/driver/nvidia with 8
# GPUs. In an image with none of these files: dlopen("libcuda.so.1") and
# NVML answer with the step's GPU count, a step given the node's last two
# GPUs sees them as 0,1, NVIDIA_DRIVER_CAPABILITIES=utility brings no
# libcuda, NVIDIA_VISIBLE_DEVICES=void no driver, and an unmet
# NVIDIA_REQUIRE_CUDA (the job's or the image's; cuda, driver, and each of
# the step's GPUs' arch and brand as the tree's NVML says them) fails the
# step in one line before the task runs (NVIDIA_DISABLE_REQUIRE=1 skips it); an image's CUDA
# compat libcuda is what libcuda.so.1 leads to only when newer than the driver.
# As nobody: NVIDIA_VISIBLE_DEVICES never widens a step's GPUs, and an image's
# library directory symlinked to a host directory gets nothing made there.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR
chmod 755 "$D"
VER=535.104.05
B=${MTC_BUILD:-$ROOT/build}

# --- an image with no NVIDIA file: a small userland and the probe ----------
R=$D/rootfs
run_rootfs "$R" sh cat ls echo touch readlink
cp "$B/tests/tools/gpu_probe" "$R/usr/bin/gpu_probe"
# a library of the image without its soname's link (ldconfig makes it)
printf 'int mtcfoo(void) { return 42; }\n' >"$D/foo.c"
check "an image library without its soname link" \
    cc -shared -fPIC -Wl,-soname,libmtcfoo.so.1 -o "$R/lib/x86_64-linux-gnu/libmtcfoo.so.1.0.0" "$D/foo.c"
check "the image holds no NVIDIA file" test -z "$(find "$R" -name '*nvidia*' -o -name 'libcuda*')"
printf 'PATH=/usr/bin:/bin\n' >"$R/etc/environment"
I=$D/gpu.sqsh
check "mtc image import of the root" mtc image import "$R" -o "$I"
# the same image asking for a newer CUDA than the driver's 12.2
printf 'PATH=/usr/bin:/bin\nNVIDIA_VISIBLE_DEVICES=all\nNVIDIA_REQUIRE_CUDA="cuda>=12.4 brand=tesla,driver>=470,driver<471"\n' >"$R/etc/environment"
IREQ=$D/req.sqsh
check "and of one with NVIDIA_REQUIRE_CUDA in its environment" mtc image import "$R" -o "$IREQ"

# CUDA forward-compatibility libraries in the image, newer and older than the
# driver (and the static ldconfig, to read the container's cache with -p)
printf 'PATH=/usr/bin:/bin\n' >"$R/etc/environment"
cp /sbin/ldconfig "$R/usr/bin/ldconfig"
mkdir -p "$R/usr/local/cuda/compat"
cp "$B/fakes/libcuda.so" "$R/usr/local/cuda/compat/libcuda.so.999.1.1"
ICNEW=$D/compat-new.sqsh
check "an image with compat libcuda 999.1.1" mtc image import "$R" -o "$ICNEW"
mv "$R/usr/local/cuda/compat/libcuda.so.999.1.1" "$R/usr/local/cuda/compat/libcuda.so.400.1.1"
ICOLD=$D/compat-old.sqsh
check "and one with compat libcuda 400.1.1" mtc image import "$R" -o "$ICOLD"

# an image whose first library directory is a symlink to a host path (the
# user's own directory, /tmp/...): root's files and mounts for the driver
# must land inside the container, never in the host's directory
R2=$D/rootfs2
cp -a "$R" "$R2"
rm -rf "$R2/usr/local/cuda"
mkdir -p "$R2/usr/lib" "$R2$D/evil" "$D/evil"
ln -s "$D/evil" "$R2/usr/lib/x86_64-linux-gnu"
chown 65534:65534 "$D/evil"
IEVIL=$D/evil.sqsh
check "an image whose library directory is a symlink to $D/evil" mtc image import "$R2" -o "$IEVIL"

check "2-node cluster" run_cluster gpud
run_or_stop $? "$T_DIR/create.out"
CDIR=$MTC_HOME/clusters/gpud
check "plugstack.conf names each node's driver tree" \
    grep -q "driver=$CDIR/nodes/%n/hw/driver" "$CDIR/etc/plugstack.conf"

# --- each node's driver, where its configuration says ----------------------
drv_tree() { # DIR
    local t=$1 g
    mkdir -p "$t/usr/lib/x86_64-linux-gnu" "$t/usr/bin" "$t/etc" "$t/lib/firmware/nvidia/$VER" \
        "$t/run/nvidia-persistenced" "$t/proc/driver/nvidia/gpus"
    cp "$B/fakes/libcuda.so" "$t/usr/lib/x86_64-linux-gnu/libcuda.so.$VER"
    cp "$B/fakes/libnvml.so" "$t/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.$VER"
    cp "$B/tests/tools/gpu_probe" "$t/usr/bin/nvidia-smi"
    head -c 4096 /dev/urandom >"$t/lib/firmware/nvidia/$VER/gsp_ga10x.bin"
    echo /usr/lib/x86_64-linux-gnu >"$t/etc/ld.so.conf"
    ldconfig -r "$t" || return 1
    printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Sat Aug 19 01:15:15 UTC 2023\n' "$VER" \
        >"$t/proc/driver/nvidia/version"
    for g in 0 1 2 3 4 5 6 7; do
        mkdir -p "$t/proc/driver/nvidia/gpus/0000:0$g:00.0"
        printf 'Model: \t\t Emulated GPU\nDevice Minor: \t %d\nGPU UUID: \t GPU-0000000%d-0000-0000-0000-000000000000\n' \
            "$g" "$g" >"$t/proc/driver/nvidia/gpus/0000:0$g:00.0/information"
    done
    python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' \
        "$t/run/nvidia-persistenced/socket"
}
for n in gpud-a3m-0 gpud-a3m-1; do
    check "$n: a driver tree with a loader cache made by ldconfig -r" drv_tree "$CDIR/nodes/$n/hw/driver"
done
# MIG's capability files (the emulated node's, beside its device files)
mkdir -p "$CDIR/nodes/gpud-a3m-0/hw/nvidia-caps" && : >"$CDIR/nodes/gpud-a3m-0/hw/nvidia-caps/nvidia-cap1"
check "the tree's cache links libcuda.so.1 to the versioned library" \
    test "$(readlink "$CDIR/nodes/gpud-a3m-0/hw/driver/usr/lib/x86_64-linux-gnu/libcuda.so.1")" = "libcuda.so.$VER"


# --- the driver inside ----------------------------------------------------
out=$(srun -w gpud-a3m-0 --gres=gpu:2 --container-image="$I" gpu_probe 2>&1)
check "libcuda.so.1 opens in the image and counts the step's 2 GPUs ($out)" grep -qx "cuda 2 12.2" <<<"$out"
check "NVML answers: 2 GPUs, driver $VER" grep -qx "nvml 2 $VER" <<<"$out"
out=$(srun -w gpud-a3m-0 -n4 --gres=gpu:2 --container-image="$I" sh -c 'gpu_probe; cat /.mtc/driver-ldconfig' 2>&1)
check "4 tasks of one step: each counts 2, and the container's cache is marked as made for this driver" \
    bash -c "[ \$(grep -cx 'cuda 2 12.2' <<<'$out') -eq 4 ] && [ \$(grep -c '^driver=$VER caps=3 libdir=/lib/x86_64-linux-gnu' <<<'$out') -eq 4 ]"
# the node's stash (R/ldcache, root's, 0700): the loader cache ldconfig made
# for an image and driver, links included, which a later step — of the job or
# of a later job — copies in; a link planted in the stash shows it was used
RT0=$CDIR/nodes/gpud-a3m-0/containers
st=$(ls "$RT0"/ldcache/*.links 2>/dev/null)
check "the earlier jobs' loader cache is stashed on the node, one entry ($st)" \
    bash -c "[ \$(wc -l <<<'$st') -eq 1 ] && [[ '$st' =~ /ldcache/[0-9a-f]{16}[.]links\$ ]] && [ -s '${st%.links}.cache' ]"
check "the stash is root's, 0700" test "$(stat -c '%u %a' "$RT0/ldcache")" = "0 700"
printf '/lib/x86_64-linux-gnu/libmtcstash.so.1\tstash-was-used\n' >>"$st"
cat >"$D/two.sh" <<TWO
srun --container-image=$I sh -c 'gpu_probe; readlink /lib/x86_64-linux-gnu/libmtcstash.so.1'
srun --container-image=$I sh -c 'gpu_probe; readlink /lib/x86_64-linux-gnu/libmtcstash.so.1; readlink /lib/x86_64-linux-gnu/libmtcfoo.so.1'
TWO
out=$(salloc -N1 -w gpud-a3m-0 --gres=gpu:2 bash "$D/two.sh" 2>"$D/two.err"); sed "s/^/# two: /" "$D/two.err"
check "two steps of a later job: both count 2 ($(tr '\n' ' ' <<<"$out"))" test "$(grep -cx 'cuda 2 12.2' <<<"$out")" -eq 2
check "the job's first step and its second copied the node's stash, not ldconfig's" \
    test "$(grep -cx stash-was-used <<<"$out")" -eq 2
check "and have the links ldconfig made for the image's own libraries too" grep -qx libmtcfoo.so.1.0.0 <<<"$out"
# an entry a user could have written (not root's, or writable by others) is
# refused: ldconfig runs again and its own entry replaces it
printf '/lib/x86_64-linux-gnu/libmtcplant.so.1\tplanted\n' >>"$st"
chown 65534 "$st"
out=$(srun -w gpud-a3m-0 --gres=gpu:2 --container-image="$I" sh -c \
    'gpu_probe; readlink /lib/x86_64-linux-gnu/libmtcplant.so.1 /lib/x86_64-linux-gnu/libmtcstash.so.1' 2>&1)
check "an entry owned by another user is not used ($(tr '\n' ' ' <<<"$out"))" \
    bash -c "grep -qx 'cuda 2 12.2' <<<'$out' && ! grep -qx planted <<<'$out' && ! grep -qx stash-was-used <<<'$out'"
check "ldconfig's new entry is root's again, without the planted lines" \
    bash -c "[ \$(stat -c %u '$st') = 0 ] && ! grep -q 'libmtcplant\|libmtcstash' '$st' && grep -q libmtcfoo.so.1 '$st'"
chmod 0666 "${st%.links}.cache"
printf '/lib/x86_64-linux-gnu/libmtcplant.so.1\tplanted\n' >>"$st"
out=$(srun -w gpud-a3m-0 --gres=gpu:2 --container-image="$I" sh -c \
    'gpu_probe; readlink /lib/x86_64-linux-gnu/libmtcplant.so.1' 2>&1)
check "an entry others can write is not used ($(tr '\n' ' ' <<<"$out"))" \
    bash -c "grep -qx 'cuda 2 12.2' <<<'$out' && ! grep -qx planted <<<'$out'"
check "and is made again, root's and not writable by others" \
    bash -c "[ \$(stat -c %u '${st%.links}.cache') = 0 ] && [ \$((0\$(stat -c %a '${st%.links}.cache') & 022)) -eq 0 ]"
# bounded: 70 other entries, used long ago, and a new one (the image's again,
# its entry removed) — the 64 most recently used stay, the new one among them
for i in $(seq 1 70); do
    f=$RT0/ldcache/$(printf '%016x' "$i")
    : >"$f.links" && : >"$f.cache" && touch -d "@$((1577836800 + 60 * i))" "$f.cache"
done
: >"$RT0/ldcache/.0000000000000001.links.1~" && touch -d @1577836800 "$RT0/ldcache/.0000000000000001.links.1~"
rm -f "$st" "${st%.links}.cache"
out=$(srun -w gpud-a3m-0 --gres=gpu:2 --container-image="$I" gpu_probe 2>&1)
check "with 70 entries more, a step runs ldconfig ($out)" grep -qx "cuda 2 12.2" <<<"$out"
check "the stash keeps 64 entries: the new one, and the 63 used last" \
    bash -c "[ \$(ls '$RT0/ldcache' | grep -c '[.]cache\$') -eq 64 ] && [ \$(ls '$RT0/ldcache' | grep -c '[.]links\$') -eq 64 ] &&
             [ -s '$st' ] && [ ! -e '$RT0/ldcache/0000000000000007.cache' ] && [ ! -e '$RT0/ldcache/0000000000000007.links' ] &&
             [ -e '$RT0/ldcache/0000000000000008.cache' ] && [ -e '$RT0/ldcache/0000000000000046.cache' ]"
check "a writer's leftover temporary is removed" test ! -e "$RT0/ldcache/.0000000000000001.links.1~"
rm -f "$RT0"/ldcache/00000000000000??.*
out=$(srun -w gpud-a3m-0 --gpus=3 --container-image="$I" gpu_probe 2>&1)
check "--gpus=3: CUDA and NVML count 3 ($out)" \
    bash -c "grep -qx 'cuda 3 12.2' <<<'$out' && grep -qx 'nvml 3 $VER' <<<'$out'"
out=$(srun -w gpud-a3m-1 --gres=gpu:8 --container-image="$I" gpu_probe 2>&1)
check "--gres=gpu:8 on the other node: 8 and 8 ($out)" \
    bash -c "grep -qx 'cuda 8 12.2' <<<'$out' && grep -qx 'nvml 8 $VER' <<<'$out'"
out=$(srun -w gpud-a3m-0 --gres=gpu:1 --container-image="$I" nvidia-smi -L 2>&1)
check "nvidia-smi -L from the driver lists the step's one GPU ($out)" \
    test "$(grep -c '^GPU [0-9]*: ' <<<"$out")" -eq 1
# (the image's library directory, the first of the usual ones it has: run_rootfs
# copies libc to /lib/x86_64-linux-gnu)
L=/lib/x86_64-linux-gnu
out=$(srun -w gpud-a3m-0 --gres=gpu:2 --container-image="$I" sh -c \
    "ls /lib/firmware/nvidia/$VER; ls $L; ls /proc/driver/nvidia/gpus; \
     test -S /run/nvidia-persistenced/socket && echo socket; ls /dev/nvidia-caps; \
     test -s $L/libcuda.so.$VER && { touch $L/libcuda.so.$VER 2>/dev/null || echo libcuda-ro; }" 2>&1)
check "the GSP firmware at /lib/firmware/nvidia/$VER" grep -qx gsp_ga10x.bin <<<"$out"
check "the versioned libraries and ldconfig's links in the image's library directory" \
    bash -c "grep -qx 'libcuda.so.$VER' <<<'$out' && grep -qx libcuda.so.1 <<<'$out' && grep -qx 'libnvidia-ml.so.1' <<<'$out'"
check "/proc/driver/nvidia lists the step's 2 GPUs only" \
    test "$(grep -c '^0000:' <<<"$out")" -eq 2
check "the persistenced socket" grep -qx socket <<<"$out"
check "/dev/nvidia-caps (MIG)" grep -qx nvidia-cap1 <<<"$out"
check "the driver's files are there, read-only" grep -qx libcuda-ro <<<"$out"

# the node's last two GPUs: six taken by another job first
srun -w gpud-a3m-0 --gres=gpu:6 sleep 600 >"$D/hold.out" 2>&1 &
HOLD=$!
track_pid "$HOLD"
holding() { squeue -h -o '%j %T' -w gpud-a3m-0 | grep -q '^sleep RUNNING'; }
check "a job holds GPUs 0-5" wait_for 60 holding
out=$(srun -w gpud-a3m-0 --gres=gpu:2 --container-image="$I" sh -c \
    'echo "step=$SLURM_STEP_GPUS cvd=$CUDA_VISIBLE_DEVICES nvd=$NVIDIA_VISIBLE_DEVICES"; ls /dev; gpu_probe' 2>&1)
check "the step got the node's last two GPUs ($(head -1 <<<"$out"))" grep -q '^step=6,7 ' <<<"$out"
check "CUDA_VISIBLE_DEVICES inside is 0,1" grep -q ' cvd=0,1 ' <<<"$out"
check "NVIDIA_VISIBLE_DEVICES names the same two GPUs" \
    grep -q ' nvd=GPU-00000006-0000-0000-0000-000000000000,GPU-00000007-0000-0000-0000-000000000000$' <<<"$out"
check "/dev holds nvidia6 and nvidia7 only" \
    test "$(grep -E '^nvidia[0-9]+$' <<<"$out" | tr '\n' ' ')" = "nvidia6 nvidia7 "
check "and CUDA counts both" grep -qx "cuda 2 12.2" <<<"$out"
kill "$HOLD" 2>/dev/null
wait "$HOLD" 2>/dev/null

# forward compatibility: the image's newer libcuda is what libcuda.so.1 leads
# to (in the loader's cache), an older one is not used
cuda_so1() { # IMAGE: "N TARGET": cache entries of libcuda.so.1 in $L, and the link's target
    local o
    o=$(srun -w gpud-a3m-0 --gres=gpu:1 --container-image="$1" sh -c "ldconfig -p; readlink $L/libcuda.so.1" 2>/dev/null)
    echo "$(grep -c "libcuda.so.1 (libc6,x86-64) => $L/libcuda.so.1\$" <<<"$o") $(tail -1 <<<"$o")"
}
got=$(cuda_so1 "$ICNEW")
check "compat libcuda newer than the driver: libcuda.so.1 is it ($got)" test "$got" = "1 libcuda.so.999.1.1"
got=$(cuda_so1 "$ICOLD")
check "an older one is not used ($got)" test "$got" = "1 libcuda.so.$VER"

# --- a user (nobody) against the driver's injection --------------------------
asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
out=$(NVIDIA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 asnobody srun -w gpud-a3m-0 --gres=gpu:2 --container-image="$I" \
    sh -c 'ls /dev; ls /proc/driver/nvidia/gpus; gpu_probe' 2>&1)
check "NVIDIA_VISIBLE_DEVICES naming all 8 GPUs gives a 2-GPU step its 2 only" \
    bash -c "[ \$(grep -cE '^nvidia[0-9]+\$' <<<'$out') -eq 2 ] && [ \$(grep -c '^0000:' <<<'$out') -eq 2 ] && grep -qx 'cuda 2 12.2' <<<'$out'"
asnobody srun -w gpud-a3m-0 --gres=gpu:1 --container-image="$IEVIL" true >"$D/evil.out" 2>&1
check "a library directory symlinked to the host's $D/evil: nothing made there ($(ls -A "$D/evil" | head -3 | tr '\n' ' '))" \
    test -z "$(ls -A "$D/evil")"
check "and nothing mounted there" bash -c "! grep -q ' $D/evil' /proc/self/mountinfo"

# --- what the job and the image ask ----------------------------------------
out=$(NVIDIA_DRIVER_CAPABILITIES=utility srun -w gpud-a3m-0 --gres=gpu:2 --container-image="$I" \
    sh -c "gpu_probe; ls $L" 2>&1)
check "NVIDIA_DRIVER_CAPABILITIES=utility: no libcuda ($(head -1 <<<"$out"))" \
    bash -c "grep -q '^cuda: libcuda.so.1: cannot open' <<<'$out' && ! grep -q '^libcuda' <<<'$out'"
check "and NVML still answers" grep -qx "nvml 2 $VER" <<<"$out"
out=$(NVIDIA_VISIBLE_DEVICES=void srun -w gpud-a3m-0 --gres=gpu:2 --container-image="$I" gpu_probe 2>&1)
check "NVIDIA_VISIBLE_DEVICES=void: no driver" grep -q '^cuda: libcuda.so.1: cannot open' <<<"$out"
out=$(srun -w gpud-a3m-0 --container-image="$I" gpu_probe 2>&1)
check "a step without GPUs: no driver" grep -q '^cuda: libcuda.so.1: cannot open' <<<"$out"
out=$(srun -w gpud-a3m-0 --container-image="$IREQ" gpu_probe 2>&1)
check "a step without GPUs in an image that says NVIDIA_VISIBLE_DEVICES=all (as CUDA images do): no driver" \
    grep -q '^cuda: libcuda.so.1: cannot open' <<<"$out"
out=$(NVIDIA_VISIBLE_DEVICES=none srun -w gpud-a3m-0 --container-image="$I" gpu_probe 2>&1)
check "a step without GPUs and NVIDIA_VISIBLE_DEVICES=none: the driver, no GPU ($(tr '\n' ' ' <<<"$out"))" \
    bash -c "grep -q '^cuda: cuInit 100' <<<'$out' && grep -qx 'nvml 0 $VER' <<<'$out'"

unmet() { # DESCRIPTION WANT srun-args...
    local d=$1 want=$2
    shift 2
    srun -w gpud-a3m-0 --gres=gpu:1 "$@" sh -c 'echo task-ran' >"$D/req.out" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] && [ "$(grep -c 'error: mtc:' "$D/req.out")" = 1 ] &&
        grep -q -- "error: mtc: .*$want" "$D/req.out" && ! grep -q task-ran "$D/req.out"; then
        ok "$d"
    else
        nok "$d (rc $rc)"
        sed 's/^/#   /' "$D/req.out"
    fi
}
NVIDIA_REQUIRE_CUDA='cuda>=12.4' unmet "the job's NVIDIA_REQUIRE_CUDA=cuda>=12.4 on a 12.2 driver: one line, no task" \
    "NVIDIA_REQUIRE_CUDA: this node does not meet cuda>=12.4 (this node's driver: CUDA 12.2, driver $VER)" \
    --container-image="$I"
unmet "the image's NVIDIA_REQUIRE_CUDA: the same" \
    "NVIDIA_REQUIRE_CUDA: this node does not meet cuda>=12.4 .*CUDA 12.2" --container-image="$IREQ"
out=$(NVIDIA_DISABLE_REQUIRE=1 srun -w gpud-a3m-0 --gres=gpu:1 --container-image="$IREQ" gpu_probe 2>&1)
check "NVIDIA_DISABLE_REQUIRE=1 skips it ($out)" grep -qx "cuda 1 12.2" <<<"$out"
out=$(NVIDIA_REQUIRE_CUDA='cuda>=12.0' srun -w gpud-a3m-0 --gres=gpu:1 --container-image="$I" gpu_probe 2>&1)
check "a requirement the driver meets runs" grep -qx "cuda 1 12.2" <<<"$out"

# arch and brand: each GPU's compute capability and brand as the tree's NVML
# says them (the fake's per-GPU file), for every GPU of the step
G0=$CDIR/nodes/gpud-a3m-0/hw/driver/proc/driver/nvidia/gpus
nvml_gpus() { # ARCH BRAND [ARCH7 BRAND7]: every GPU of gpud-a3m-0, GPU 7 apart
    local g
    for g in 0 1 2 3 4 5 6 7; do
        printf 'arch %s\nbrand %s\n' "$1" "$2" >"$G0/0000:0$g:00.0/fake-nvml"
    done
    [ -z "${3:-}" ] || printf 'arch %s\nbrand %s\n' "$3" "$4" >"$G0/0000:07:00.0/fake-nvml"
}
nvml_gpus 8.0 2 # 8.0 Teslas
NVIDIA_REQUIRE_CUDA='cuda>=12.0,arch>=9.0' unmet \
    "cuda>=12.0,arch>=9.0 on 8.0 GPUs: one line naming the condition and the GPU's value, no task" \
    "NVIDIA_REQUIRE_CUDA: this node does not meet arch>=9.0 (GPU [0-7]: compute capability 8.0)\$" \
    --container-image="$I"
out=$(NVIDIA_REQUIRE_CUDA='cuda>=12.0,arch>=8.0,brand=tesla' srun -w gpud-a3m-0 --gres=gpu:1 --container-image="$I" gpu_probe 2>&1)
check "cuda>=12.0,arch>=8.0,brand=tesla on an 8.0 Tesla runs ($(grep ^cuda <<<"$out"))" grep -qx "cuda 1 12.2" <<<"$out"
out=$(NVIDIA_REQUIRE_CUDA='cuda>=12.0 arch>=9.0' srun -w gpud-a3m-0 --gres=gpu:1 --container-image="$I" gpu_probe 2>&1)
check "'cuda>=12.0 arch>=9.0' (space: alternatives, libnvidia-container's OR) runs on 12.2" \
    grep -qx "cuda 1 12.2" <<<"$out"
out=$(NVIDIA_DISABLE_REQUIRE=1 NVIDIA_REQUIRE_CUDA='arch>=9.0' srun -w gpud-a3m-0 --gres=gpu:1 --container-image="$I" gpu_probe 2>&1)
check "NVIDIA_DISABLE_REQUIRE=1 skips arch>=9.0 ($(grep ^cuda <<<"$out"))" grep -qx "cuda 1 12.2" <<<"$out"
nvml_gpus 8.0 5 # GeForces
NVIDIA_REQUIRE_CUDA='brand=tesla' unmet "brand=tesla on GeForce GPUs: one line naming the GPU's brand" \
    "NVIDIA_REQUIRE_CUDA: this node does not meet brand=tesla (GPU [0-7]: brand GeForce)\$" \
    --container-image="$I"
out=$(NVIDIA_REQUIRE_CUDA='brand=GEFORCE' srun -w gpud-a3m-0 --gres=gpu:1 --container-image="$I" gpu_probe 2>&1)
check "brand=GEFORCE on a GeForce runs (no regard to case)" grep -qx "cuda 1 12.2" <<<"$out"
nvml_gpus 9.0 2 8.0 2 # 9.0 Teslas, GPU 7 an 8.0
NVIDIA_REQUIRE_CUDA='arch>=9.0' unmet "arch>=9.0 on all 8 GPUs, one of them 8.0: that one is named" \
    "NVIDIA_REQUIRE_CUDA: this node does not meet arch>=9.0 (GPU 7: compute capability 8.0)\$" \
    --container-image="$I" --gres=gpu:8
out=$(NVIDIA_REQUIRE_CUDA='arch>=9.0' srun -w gpud-a3m-0 --gres=gpu:7 --container-image="$I" gpu_probe 2>&1)
check "and on the seven 9.0 GPUs it runs ($(grep ^cuda <<<"$out"))" grep -qx "cuda 7 12.2" <<<"$out"
rm -f "$G0"/*/fake-nvml

check "nothing left mounted" wait_for 20 bash -c "[ \$(grep -c ' $CDIR/nodes/[^ ]*/containers' /proc/self/mountinfo) -eq 0 ]"
done_testing
