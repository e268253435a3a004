#!/usr/bin/env bash
# container_security: the container plugin against an unprivileged user
# (nobody) on a 2-node local cluster, each attack as the audit of issue 26
# found it, each bounded in tries and time:
#  - a node name forged in the job's environment (SLURMD_NODENAME) never
#    becomes a path root works in: a planted upper/ symlink is not chowned,
#    nothing is made or mounted in the user's directory;
#  - a mount source or an image path flipped between the user's own and a
#    private one (a symlink swapped as fast as possible) never exposes the
#    private one: root mounts what the user opened, not the path again;
#  - a FIFO or /dev/zero as the image (srun's own check bypassed with a
#    private slurm.conf) is refused at once, the node left idle;
#  - the job's runtime directories are root's, mode 0700, and nothing stays
#    mounted or attached.
# The sweep's race (a user's symlink swapped in during root's removal) is in
# test_container.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR
chmod 755 "$D"
N0=sec-a3m-0
asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
[ "$(id -u)" = 0 ] || { nok "needs root (scripts/setup's machine runs the tests as root)"; done_testing; }

# --- two images: the user's own, and a private one (root's, 0600 in 0700) ---
R=$D/rootfs
run_rootfs "$R" sh cat true id
echo 'public image' >"$R/etc/os-release"
mkdir -p "$D/u" "$D/private"
check "the user's image" mtc image import "$R" -o "$D/u/pub.sqsh"
echo 'private image' >"$R/etc/os-release"
check "a private image" mtc image import "$R" -o "$D/private/priv.sqsh"
mkdir -p "$D/u/pub" "$D/private/sub"
echo public >"$D/u/pub/f"
echo SECRET >"$D/private/sub/f"
chmod 600 "$D/private/priv.sqsh"
chmod 700 "$D/private"
chown -R 65534:65534 "$D/u"

run_cluster sec || { nok "2-node cluster"; sed 's/^/# /' "$D/create.out"; done_testing; }
ok "2-node cluster"
# (after run_cluster, whose cleanup this extends) whatever an attack left
# mounted under $D — none with the plugin as it is — goes, deepest first
t_extra_cleanup() {
    touch "$D/flip.stop" # a flipper still running ends
    [ -p "$D/u/fifo" ] && timeout 5 sh -c "echo x >'$D/u/fifo'" 2>/dev/null
    local m
    for m in $(awk -v p="$D/" 'index($5, p) == 1 { print length($5), $5 }' /proc/self/mountinfo |
        sort -rn | cut -d' ' -f2); do
        umount -l "$m" 2>/dev/null
    done
    delete_all_clusters
}
CDIR=$MTC_HOME/clusters/sec

# flip LINK A B: as nobody, LINK points to A and B by turns, as fast as a rename
# goes, until flip_stop (in the background; its pid in FLIP). The stop is a file
# in root's $D (nobody reads it, cannot write it) that the flipper polls: a TERM
# may reach only the subshell around it. 900 s is a last resort.
flip() {
    rm -f "$D/flip.stop"
    asnobody /usr/bin/python3 - "$@" "$D/flip.stop" <<'PY' &
import os, sys, time
link, a, b, stop = sys.argv[1:5]
tmp, end, i = link + ".new", time.time() + 900, 0
while True:
    if i % 256 == 0 and (os.path.exists(stop) or time.time() > end):
        break
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    os.symlink(a if i % 2 else b, tmp)
    os.replace(tmp, link)
    i += 1
PY
    FLIP=$!
    track_pid "$FLIP"
}
# flip_stop: the flipper ends (waits for it)
flip_stop() { touch "$D/flip.stop"; wait "$FLIP" 2>/dev/null; }

# --- 1. the node name: from slurmd (MTC_NODE), never from the job ----------
EVIL=$D/u/evil
mkdir -p "$D/rootowned"
REL=$(python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$EVIL" "$CDIR/nodes")
# the job is held while the attack is planted for its real id (its first
# step, 0), then its script forges the node name and runs the step
J1=$(cd "$D/u" && asnobody sbatch --parsable --hold -w $N0 -o "$D/u/forged.out" \
    --wrap "export SLURMD_NODENAME='$REL' SLURM_TOPOLOGY_ADDR='$REL'; srun --container-image='$D/u/pub.sqsh' cat /etc/os-release")
asnobody mkdir -p "$EVIL/containers/jobs/$J1/steps/0"
asnobody ln -s "$D/rootowned" "$EVIL/containers/jobs/$J1/steps/0/upper"
check "the attack armed for the job's own id ($J1): upper/ of its step 0 a symlink to a root directory" \
    test "$(readlink "$EVIL/containers/jobs/$J1/steps/0/upper")" = "$D/rootowned"
scontrol release "$J1"
check "  the held job ran and ended" wait_for 300 absent "^$J1\$" -- squeue -h -o %i
out=$(cat "$D/u/forged.out" 2>&1)
diag "$out"
check "SLURMD_NODENAME=$REL in the job: the step runs, in the node's own directory" \
    grep -qx 'public image' <<<"$out"
check "the root directory the user's upper/ symlink named is still root's" \
    test "$(stat -c %U "$D/rootowned")" = root
check "nothing made or mounted in the user's directory" bash -c \
    "! ls -d '$EVIL'/containers/jobs/*/images 2>/dev/null | grep -q . &&
     ! grep -qF ' $EVIL/' /proc/self/mountinfo"

# --- 2. check-then-use: a flipped mount source, a flipped image ------------
# tries TRIES SECS NEED CMD...: CMD again and again while the link flips — TRIES
# times or for SECS seconds, whichever ends first (the race's window), and then on
# until NEED runs got through: a slow machine takes longer, a fast one is not cut
# short (issue 51: 19 tries, 2 ran). LEAKS counts outputs holding "SECRET" or
# "private image", READ those holding the public one (the step ran: the race was
# there to win), TRIED the runs. HANG_S (and 20 x TRIES tries) only ends a hang.
HANG_S=480
tries() {
    local max=$1 secs=$2 need=$3 end hang
    shift 3
    end=$((SECONDS + secs)) hang=$((SECONDS + HANG_S))
    LEAKS=0 READ=0 TRIED=0
    while { [ "$TRIED" -lt "$max" ] && [ $SECONDS -lt $end ]; } || [ "$READ" -lt "$need" ]; do
        [ $SECONDS -lt $hang ] && [ "$TRIED" -lt $((20 * max)) ] || break
        out=$(cd "$D/u" && "$@" 2>&1)
        TRIED=$((TRIED + 1))
        grep -qE 'SECRET|private image' <<<"$out" && LEAKS=$((LEAKS + 1))
        grep -qE '^public' <<<"$out" && READ=$((READ + 1))
    done
}
flip "$D/u/link" "$D/u/pub" "$D/private/sub"
tries 60 20 3 asnobody srun -w $N0 --container-image="$D/u/pub.sqsh" --container-mounts="$D/u/link:/m" cat /m/f
flip_stop
check "a mount source flipped to a private directory: never read ($TRIED tries, $READ ran, $LEAKS leaked)" \
    test "$READ" -ge 3 -a "$LEAKS" = 0
flip "$D/u/img" "$D/u/pub.sqsh" "$D/private/priv.sqsh"
tries 60 20 3 asnobody srun -w $N0 --container-image="$D/u/img" cat /etc/os-release
flip_stop
check "an image flipped to a private one: never mounted ($TRIED tries, $READ ran, $LEAKS leaked)" \
    test "$READ" -ge 3 -a "$LEAKS" = 0

# --- 3. not a regular file: a FIFO, /dev/zero -------------------------------
# srun's own check would refuse them: the user's private slurm.conf loads no
# plugin, and the job's PYXIS_CONTAINER_IMAGE reaches the node's plugin alone
mkdir -p "$D/u/conf"
sed "s#^PlugStackConfig=.*#PlugStackConfig=$D/u/conf/plugstack.conf#" "$SLURM_CONF" >"$D/u/conf/slurm.conf"
: >"$D/u/conf/plugstack.conf"
mkfifo "$D/u/fifo"
chown -R 65534:65534 "$D/u"
for img in "$D/u/fifo" /dev/zero; do
    t0=$SECONDS
    out=$(cd "$D/u" && SLURM_CONF=$D/u/conf/slurm.conf PYXIS_CONTAINER_IMAGE=$img \
        asnobody timeout 30 srun -w $N0 true 2>&1)
    rc=$?
    check "$img as the image: refused at once ($((SECONDS - t0)) s, exit $rc), not a regular file" \
        bash -c "[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'error: mtc: --container-image: $img is not a regular file' <<<'$out'"
done
node_idle() { [ "$(sinfo -h -n $N0 -o %t)" = idle ]; }
check "the node is idle again (no step left completing)" wait_for 30 node_idle

# --- 4. what is left ----------------------------------------------------------
check "the job runtime directories are root's, mode 0700" \
    test "$(stat -c '%a %U' "$CDIR/nodes/$N0/containers/jobs")" = "700 root"
check "nothing left mounted under the cluster" \
    wait_for 20 bash -c "! grep -qF ' $CDIR/nodes/' /proc/self/mountinfo"
check "no loop device left on the images" \
    bash -c "[ -z \"\$(losetup -j '$D/u/pub.sqsh'; losetup -j '$D/private/priv.sqsh')\" ]"
done_testing
