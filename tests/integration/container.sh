#!/usr/bin/env bash
# container: the SPANK container plugin on a 2-node local cluster, with images
# made by `mtc image import` (a docker-save archive assembled here with tar) and
# `mtc image build-trainer`: the image's files on both nodes, ro/rw mounts,
# workdir, env precedence and the PYXIS_CONTAINER_* forms, a named container
# across the steps of one job (gone after it), sbatch's batch step in the
# image, GPU files with --gres=gpu:8, read-only, remap-root and a user who may
# not mount what they cannot read, `mtc run -i` losses equal to a run without,
# kill -9 and a step time limit leaving no mount or loop device, and every bad
# input failing with one "error: mtc: ..." line and nothing left mounted;
# `mtc rl launch -i` runs the job script's sruns in the image.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR
chmod 755 "$D"   # the nobody checks below read the images here

# --- an image: a small userland in one layer, docker-save style ----------
R=$D/rootfs
run_rootfs "$R" sh cat ls env echo id pwd touch sleep mkdir true wc
mkdir -p "$R/work"
printf 'NAME="mtc test image"\nID=mtc-test\n' >"$R/etc/os-release"
tar -C "$R" -cf "$D/layer.tar" .
lh=$(sha256sum "$D/layer.tar" | cut -d' ' -f1)
cat >"$D/config.json" <<EOF
{"architecture":"amd64","os":"linux",
 "config":{"Env":["PATH=/usr/bin:/bin","GREETING=from-image","FOO=image"],"WorkingDir":"/work"},
 "rootfs":{"type":"layers","diff_ids":["sha256:$lh"]}}
EOF
ch=$(sha256sum "$D/config.json" | cut -d' ' -f1)
mkdir -p "$D/docker/$lh"
cp "$D/config.json" "$D/docker/$ch.json"
cp "$D/layer.tar" "$D/docker/$lh/layer.tar"
printf '[{"Config":"%s.json","RepoTags":["t:1"],"Layers":["%s/layer.tar"]}]' "$ch" "$lh" \
    >"$D/docker/manifest.json"
tar -C "$D/docker" -cf "$D/docker.tar" .
I=$D/test.sqsh
check "mtc image import of a docker-save archive" mtc image import "$D/docker.tar" -o "$I"
# the trainer image (mksquashfs of some 20 MiB: the slowest step here) is
# built meanwhile, for `mtc run -i` below
mtc image build-trainer -o "$D/trainer.sqsh" >"$D/build-trainer.out" 2>&1 &
BUILD_PID=$!
track_pid "$BUILD_PID"

check "2-node cluster" run_cluster cont
run_or_stop $? "$T_DIR/create.out"
CDIR=$MTC_HOME/clusters/cont
# mounts and loop devices of this cluster's containers (the host shares the kernel)
mounts_left() { grep -c " $CDIR/nodes/${1:-[^ ]*}/containers" /proc/self/mountinfo; }
loops_left() { losetup -j "$1" | wc -l; }
check "srun --help lists the container options" \
    bash -c "srun --help | grep -q -- '--container-image=PATH' && srun --help | grep -q -- '--no-container-mount-home'"

# a step that outlives its time limit, started first (it takes a minute)
srun -t 1 -w cont-a3m-1 --container-image="$I" sleep 600 >"$D/timeout.out" 2>&1 &
TO_PID=$!
track_pid "$TO_PID"

# --- the basics ------------------------------------------------------------
out=$(srun -N2 --container-image="$I" cat /etc/os-release)
check "the image's /etc/os-release on both nodes" test "$(grep -c 'NAME="mtc test image"' <<<"$out")" -eq 2
# (values from stdout alone: srun may say on stderr that it waits for a node)
check "the image's workdir by default" test "$(srun --container-image="$I" pwd)" = /work
check "--container-workdir" test "$(srun --container-image="$I" --container-workdir=/usr pwd)" = /usr
check "PYXIS_CONTAINER_WORKDIR, the command line first" \
    test "$(PYXIS_CONTAINER_WORKDIR=/etc srun --container-image="$I" --container-workdir=/usr pwd)" = /usr
check "PYXIS_CONTAINER_IMAGE" \
    bash -c "PYXIS_CONTAINER_IMAGE='$I' srun cat /etc/os-release | grep -q 'mtc test image'"

mkdir -p "$D/data" && echo hostfile >"$D/data/f"
srun --container-image="$I" --container-mounts="$D/data:/mnt/ro:ro,$D/data:/mnt/rw" \
    sh -c 'cat /mnt/ro/f; touch /mnt/ro/x; touch /mnt/rw/y && echo rw-done' >"$D/mnt.out" 2>&1
check "a host file read through a mount" grep -qx hostfile "$D/mnt.out"
check "a :ro mount refuses writes" grep -q "Read-only file system" "$D/mnt.out"
check "an rw mount takes writes (seen on the host)" test -e "$D/data/y" -a ! -e "$D/data/x"

# pyxis's rule: the image's value wins, except for --container-env names
check "the image's value wins by default" \
    test "$(FOO=job srun --container-image="$I" sh -c 'echo $FOO $GREETING')" = "image from-image"
check "--container-env keeps the job's value" \
    test "$(FOO=job srun --container-image="$I" --container-env=FOO sh -c 'echo $FOO')" = job
check "PYXIS_CONTAINER_ENV" \
    test "$(FOO=job PYXIS_CONTAINER_ENV=FOO srun --container-image="$I" sh -c 'echo $FOO')" = job
check "a variable the image does not set passes through" \
    test "$(ONLYJOB=j srun --container-image="$I" sh -c 'echo $ONLYJOB')" = j

check "writable by default" srun --container-image="$I" touch /newfile
srun --container-image="$I" --container-readonly touch /newfile >"$D/ro.out" 2>&1
check "--container-readonly" grep -q "Read-only file system" "$D/ro.out"

out=$(srun --gres=gpu:8 --container-image="$I" ls /dev)
check "--gres=gpu:8: eight GPU device files inside" test "$(grep -c '^nvidia[0-9]$' <<<"$out")" -eq 8
check "and /dev/null, /dev/shm" bash -c "grep -qx null <<<'$out' && grep -qx shm <<<'$out'"
check "/proc is the container's own mount" \
    bash -c "srun --container-image='$I' cat /proc/self/mountinfo | grep -q ' / / .*overlay'"

# sbatch ARGS...: the job id, once the job has ended (polled: sbatch -W waits
# in steps of up to 10 s)
job_ended() { scontrol show job "$1" -o 2>/dev/null | grep -qE 'JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) '; }
sbatch_wait() {
    local id
    id=$(sbatch --parsable "$@") || return 1
    wait_for 120 job_ended "$id"
    echo "$id"
}

# --- a named container across the steps of one job -------------------------
cat >"$D/named.sh" <<EOF
#!/bin/bash
srun --container-image=$I --container-name=keep sh -c 'echo kept >/state'
srun --container-name=keep cat /state
srun --container-name=keep:exec cat /state
srun --container-image=$I --container-name=keep:create sh -c 'cat /state 2>/dev/null || echo fresh'
srun --container-name=other:exec true
EOF
NJOB=$(sbatch_wait -w cont-a3m-0 -o "$D/named.out" "$D/named.sh")
check "a file kept between two steps" test "$(grep -c '^kept$' "$D/named.out")" -eq 2
check ":create starts afresh" grep -qx fresh "$D/named.out"
check ":exec of no such container: named" grep -q "error: mtc: --container-name: no container named other" "$D/named.out"
check "the job's containers are gone after it" \
    wait_for 20 bash -c "[ ! -e '$CDIR/nodes/cont-a3m-0/containers/jobs/$NJOB' ] && [ \$(grep -c ' $CDIR/nodes/cont-a3m-0/containers/jobs/$NJOB/' /proc/self/mountinfo) -eq 0 ]"

sbatch_wait -o "$D/batch.out" --container-image="$I" --wrap 'cat /etc/os-release; pwd' >/dev/null
check "sbatch --container-image: the batch script runs in the image" \
    grep -q 'mtc test image' "$D/batch.out"

# --- another user ------------------------------------------------------------
mkdir -p "$D/secret" && chmod 700 "$D/secret"
asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
asnobody srun --container-image="$I" --container-mounts="$D/secret:/s" true >"$D/secret.out" 2>&1
check "a user cannot mount what they cannot read" \
    bash -c "[ $? -ne 0 ] && grep -q 'error: mtc: --container-mounts: $D/secret: Permission denied' '$D/secret.out'"
check "the task keeps the user's uid" test "$(asnobody srun --container-image="$I" id -u)" = 65534
check "--container-remap-root: root inside" \
    test "$(asnobody srun --container-image="$I" --container-remap-root id -u)" = 0

# --- mtc run -i: the trainer in its image, the same losses -----------------
wait "$BUILD_PID"
check "mtc image build-trainer" test $? -eq 0 -a -s "$D/trainer.sqsh"
check "tiny corpus tokenized" run_corpus "$D/tr"
run_recipe "$D/r.json" 20 10
sed -i 's/"nodes": 1/"nodes": 2/' "$D/r.json"
mtc run -s "$D/r.json" --data-dir "$D/tr" -i "$D/trainer.sqsh" --experiment-name inimg >"$D/run1.out" 2>&1
check "mtc run -i submits" test $? -eq 0
mtc run -s "$D/r.json" --data-dir "$D/tr" --experiment-name bare >"$D/run2.out" 2>&1
check "mtc run without -i submits" test $? -eq 0
check "the sbatch script runs srun --container-image" \
    grep -q -- "--container-image='$D/trainer.sqsh'" "$MTC_HOME"/experiments/inimg/*/inimg/sbatch.sh
ST1=$(run_wait_final 240 inimg)
ST2=$(run_wait_final 240 bare)
check "the containerised run completes on 2 nodes ($ST1)" test "$ST1" = COMPLETED
check "the bare run completes ($ST2)" test "$ST2" = COMPLETED
check "the same losses with and without the container" python3 - "$MTC_HOME"/experiments/{inimg,bare}/*/*/logs/metrics.jsonl <<'PY'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:3])
assert len(a) == len(b) == 20 and a == b, (a[-1], b[-1])
PY

# mtc rl launch -i: the job script's sruns run in the image
mkdir -p "$D/rl" && printf 'srun -N1 cat /etc/os-release\nsrun -N1 ls "$MTC_LOG_DIR"\n' >"$D/rl/job.sh"
(cd "$D/rl" && mtc rl launch -N 1 --job-script job.sh -i "$I") >"$D/rl.out" 2>&1
check "mtc rl launch -i submits" test $? -eq 0
RLJOB=$(sed -n 's/^Submitted job \([0-9]*\).*/\1/p' "$D/rl.out")
check "its sruns ran in the image, the launch directory mounted" wait_for 60 bash -c \
    "grep -q 'mtc test image' '$D/rl/$RLJOB/output.log' && grep -q 'job script exited 0' '$D/rl/$RLJOB/output.log'"

# --- a killed task, a timed-out step ---------------------------------------
srun -w cont-a3m-0 --container-image="$I" sleep 300 >"$D/kill.out" 2>&1 &
KPID=$!
track_pid "$KPID"
# the task: a sleep in another mount namespace whose / is the overlay
task=""
for _ in $(seq 100); do
    for p in $(pgrep -f '^[^ ]*sleep 300$'); do
        [ "$(readlink "/proc/$p/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] &&
            grep -q ' / / [^-]*- overlay ' "/proc/$p/mountinfo" 2>/dev/null && task=$p
    done
    [ -n "$task" ] && break
    sleep 0.1
done
check "the containerised task runs in its own mount namespace" test -n "$task"
[ -n "$task" ] && kill -9 "$task"
wait "$KPID" 2>/dev/null
check "kill -9 of the task: the step fails" grep -q "task 0: Killed" "$D/kill.out"
export CDIR
export -f mounts_left
check "no mount left after the killed task's job" wait_for 20 bash -c '[ "$(mounts_left cont-a3m-0)" -eq 0 ]'
wait "$TO_PID" 2>/dev/null
check "the step past its time limit was stopped" grep -q "DUE TO TIME LIMIT" "$D/timeout.out"

# --- bad input: one line naming it, nothing left mounted --------------------
head -c 4096 /dev/urandom >"$D/corrupt.sqsh"
printf 'hsqs' | dd of="$D/corrupt.sqsh" conv=notrunc 2>/dev/null
bad() { # DESCRIPTION WANT srun-args...
    local d=$1 want=$2; shift 2
    srun "$@" >"$D/bad.out" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] && grep -q -- "error: mtc: .*$want" "$D/bad.out"; then ok "$d"; else
        nok "$d (rc $rc)"; sed 's/^/#   /' "$D/bad.out"; fi
}
bad "missing image" "--container-image: $D/none.sqsh: No such file" --container-image="$D/none.sqsh" true
bad "not an image" "--container-image: $D/config.json is not a squashfs image" --container-image="$D/config.json" true
bad "a corrupt image" "image $D/corrupt.sqsh: cannot mount it" --container-image="$D/corrupt.sqsh" true
bad "an image without the command" "nosuchcmd: command not found in the image" --container-image="$I" nosuchcmd
bad "a bad mount spec" "--container-mounts: invalid entry" --container-image="$I" --container-mounts=":/x" true
bad "a relative destination" "destination rel is not an absolute path" --container-image="$I" --container-mounts="$D:rel" true
bad "a destination outside the image" "leaves the container" --container-image="$I" --container-mounts="$D:/a/../../etc" true
bad "a missing mount source" "--container-mounts: $D/nope: No such file" --container-image="$I" --container-mounts="$D/nope:/x" true
bad "an unknown mount flag" "unknown flag 'exec'" --container-image="$I" --container-mounts="$D:/x:exec" true
bad "an unknown --container-name flag" "--container-name: unknown flag 'bogus'" --container-image="$I" --container-name=x:bogus true
bad "a missing workdir" "--container-workdir: /nonexist: No such file" --container-image="$I" --container-workdir=/nonexist true
bad "options without an image" "container options need --container-image" --container-mounts="$D:/x" true
PYXIS_CONTAINER_WRITABLE=maybe bad "a bad PYXIS_ boolean" "PYXIS_CONTAINER_WRITABLE: 'maybe' is not 0 or 1" --container-image="$I" true
# (the timed-out step's job may still be ending: its epilog sweeps it)
check "nothing left mounted" wait_for 20 bash -c '[ "$(mounts_left)" -eq 0 ]'
no_loops() { [ "$(loops_left "$I")" -eq 0 ] && [ "$(loops_left "$D/trainer.sqsh")" -eq 0 ]; }
check "no loop device left on the images" wait_for 20 no_loops
no_job_dirs() { [ -z "$(find "$CDIR"/nodes/*/containers/jobs -mindepth 1 -maxdepth 1 2>/dev/null)" ]; }
check "and no job directory" wait_for 20 no_job_dirs
done_testing
