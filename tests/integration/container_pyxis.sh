#!/usr/bin/env bash
# container_pyxis: pyxis's --container-entrypoint, --no-container-entrypoint,
# --container-entrypoint-log and --container-save (and their PYXIS_* forms)
# on a local cluster: the image's entrypoint runs only when asked, its
# exports reach the task, its output shows only with the log flag, a failing
# one fails the step in one line; a step's container saved as a squashfs
# owned by the user (nobody), which runs as an image; a save path the user
# cannot write, or a symlink, refused in one line before the task runs.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR
chmod 755 "$D"

# --- an image whose entrypoint exports a variable and execs its arguments --
R=$D/rootfs
run_rootfs "$R" sh cat ls echo touch id
cat >"$R/usr/bin/ep.sh" <<'EOF'
#!/bin/sh
echo "entrypoint-ran $*"
[ -n "$EP_FAIL" ] && { echo "entrypoint-broke"; exit 3; }
export FROM_EP=yes
[ -n "$EP_NOEXEC" ] && { "$@"; exit 0; }
exec "$@"
EOF
chmod 755 "$R/usr/bin/ep.sh"
tar -C "$R" -cf "$D/layer.tar" .
lh=$(sha256sum "$D/layer.tar" | cut -d' ' -f1)
cat >"$D/config.json" <<EOF
{"architecture":"amd64","os":"linux",
 "config":{"Env":["PATH=/usr/bin:/bin"],"Entrypoint":["/usr/bin/ep.sh"],"Cmd":["sh"]},
 "rootfs":{"type":"layers","diff_ids":["sha256:$lh"]}}
EOF
ch=$(sha256sum "$D/config.json" | cut -d' ' -f1)
mkdir -p "$D/docker/$lh"
cp "$D/config.json" "$D/docker/$ch.json"
cp "$D/layer.tar" "$D/docker/$lh/layer.tar"
printf '[{"Config":"%s.json","RepoTags":["ep:1"],"Layers":["%s/layer.tar"]}]' "$ch" "$lh" \
    >"$D/docker/manifest.json"
tar -C "$D/docker" -cf "$D/docker.tar" .
I=$D/ep.sqsh
check "mtc image import of an image with an entrypoint" mtc image import "$D/docker.tar" -o "$I"

check "2-node cluster" run_cluster pyx
run_or_stop $? "$T_DIR/create.out"
check "srun --help lists the options" bash -c "srun --help | grep -q -- '--container-save=PATH' && \
    srun --help | grep -q -- '--no-container-entrypoint' && srun --help | grep -q -- '--container-entrypoint-log'"

# --- the entrypoint ----------------------------------------------------------
task='echo "task FROM_EP=${FROM_EP:-unset}"'
out=$(srun --container-image="$I" sh -c "$task" 2>&1)
check "by default the entrypoint does not run ($out)" test "$out" = "task FROM_EP=unset"
out=$(srun --container-image="$I" --no-container-entrypoint sh -c "$task" 2>&1)
check "--no-container-entrypoint: the same" test "$out" = "task FROM_EP=unset"
out=$(srun --container-image="$I" --container-entrypoint sh -c "$task" 2>&1)
check "--container-entrypoint: its export reaches the task, its output stays quiet ($out)" \
    test "$out" = "task FROM_EP=yes"
out=$(srun --container-image="$I" --container-entrypoint --container-entrypoint-log sh -c "$task" 2>&1)
check "--container-entrypoint-log shows what it printed" \
    bash -c "grep -q '^entrypoint-ran /bin/sh -c' <<<'$out' && grep -qx 'task FROM_EP=yes' <<<'$out'"
out=$(PYXIS_CONTAINER_ENTRYPOINT=1 srun --container-image="$I" sh -c "$task" 2>&1)
check "PYXIS_CONTAINER_ENTRYPOINT=1" test "$out" = "task FROM_EP=yes"
out=$(EP_FAIL=1 srun --container-image="$I" --container-entrypoint sh -c "$task" 2>&1)
rc=$?
ep_failed() {
    [ $rc -ne 0 ] && [ "$(grep -c 'error: mtc:' <<<"$out")" -eq 1 ] &&
        grep -q "error: mtc: --container-entrypoint: the image's entrypoint /usr/bin/ep.sh failed (exit 3)" <<<"$out" &&
        grep -q entrypoint-broke <<<"$out" && ! grep -q '^task' <<<"$out"
}
check "a failing entrypoint fails the step in one error line, its output shown, no task ($rc)" ep_failed

# (a hang here would be the test's failure: timeout ends it)
out=$(EP_NOEXEC=1 timeout 120 srun --container-image="$I" --container-entrypoint sh -c "$task" 2>&1)
check "an entrypoint that runs its arguments without exec does not hold the step ($out)" \
    test "$out" = "task FROM_EP=unset"

# --- --container-save, as nobody -----------------------------------------------
asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
mkdir -p "$D/nb" && chown 65534:65534 "$D/nb"
S=$D/nb/saved.sqsh
(cd "$D/nb" && asnobody srun --container-image="$I" --container-save=saved.sqsh \
    sh -c 'echo kept >/marker') >"$D/save.out" 2>&1
check "a step with --container-save=saved.sqsh (relative) runs" test $? -eq 0
saved() { unsquashfs -cat "$S" /marker 2>/dev/null | grep -qx kept; }
check "the container's root is saved as a squashfs holding the step's file" wait_for 60 saved
check "owned by the user" test "$(stat -c %u "$S")" = 65534
check "the saved image runs" test "$(asnobody srun --container-image="$S" cat /marker 2>/dev/null)" = kept
PYXIS_CONTAINER_SAVE=$D/nb/env.sqsh asnobody srun --container-image="$I" touch /x >/dev/null 2>&1
envsaved() { unsquashfs -l "$D/nb/env.sqsh" 2>/dev/null | grep -q 'squashfs-root/x$'; }
check "PYXIS_CONTAINER_SAVE" wait_for 60 envsaved

refused() { # DESCRIPTION WANT srun-args...
    local d=$1 want=$2
    shift 2
    asnobody srun "$@" sh -c 'echo task-ran' >"$D/bad.out" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] && [ "$(grep -c 'error: mtc:' "$D/bad.out")" = 1 ] &&
        grep -q -- "error: mtc: $want" "$D/bad.out" && ! grep -q task-ran "$D/bad.out"; then
        ok "$d"
    else
        nok "$d (rc $rc)"
        sed 's/^/#   /' "$D/bad.out"
    fi
}
mkdir -p "$D/rootonly" && chmod 755 "$D/rootonly"
refused "a save path the user cannot write: one line, no task" \
    "--container-save: $D/rootonly/x.sqsh: Permission denied" --container-image="$I" --container-save="$D/rootonly/x.sqsh"
check "and nothing made there" test ! -e "$D/rootonly/x.sqsh"
ln -s /etc/passwd-mtc-test-none "$D/nb/link.sqsh"
refused "a symlink as the save path: refused" "--container-save: $D/nb/link.sqsh: Too many levels" \
    --container-image="$I" --container-save="$D/nb/link.sqsh"
refused "a directory: refused" "--container-save: $D/nb: Is a directory" \
    --container-image="$I" --container-save="$D/nb"
check "--container-save without an image: one line" \
    bash -c "out=\$(srun --container-save=$D/x.sqsh true 2>&1); [ \$? -ne 0 ] && grep -q 'container options need --container-image' <<<\"\$out\""

check "nothing left mounted" wait_for 20 bash -c "[ \$(grep -c ' $MTC_HOME/clusters/pyx/nodes/[^ ]*/containers' /proc/self/mountinfo) -eq 0 ]"
done_testing
