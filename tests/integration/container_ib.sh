#!/usr/bin/env bash
# container_ib: InfiniBand HCAs inside containers, as enroot's 99-mellanox
# hook gives them, on an emulated node: nodes/NODE/hw/ib (plugstack.conf's
# ib=) holds sys/class/infiniband with three HCAs (mlx5_0, mlx5_2, mlx5_10:
# numbered in that order) and dev/infiniband with real character devices
# (mknod'ed with /dev/null's numbers). MELLANOX_VISIBLE_DEVICES=all binds
# rdma_cm and every HCA's uverbs/umad/issm, =1 only the second HCA's, none
# and void nothing, unset nothing (enroot's default) unless the image says
# it; an index that names no HCA fails the step in one line before the task.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR
chmod 755 "$D"

R=$D/rootfs
run_rootfs "$R" sh ls echo cat test tr
printf 'PATH=/usr/bin:/bin\n' >"$R/etc/environment"
I=$D/ib.sqsh
check "mtc image import of a small root" mtc image import "$R" -o "$I"
printf 'PATH=/usr/bin:/bin\nMELLANOX_VISIBLE_DEVICES=2\n' >"$R/etc/environment"
IENV=$D/ib-env.sqsh
check "and of one whose environment says MELLANOX_VISIBLE_DEVICES=2" mtc image import "$R" -o "$IENV"

check "2-node cluster" run_cluster ibd
run_or_stop $? "$T_DIR/create.out"
CDIR=$MTC_HOME/clusters/ibd
check "plugstack.conf names each node's InfiniBand tree" \
    grep -q "ib=$CDIR/nodes/%n/hw/ib" "$CDIR/etc/plugstack.conf"

# --- the emulated HCAs of the first node, laid out as sysfs lays them -------
N0=ibd-a3m-0
IB=$CDIR/nodes/$N0/hw/ib
ib_tree() {
    local i=0 h
    mkdir -p "$IB/dev/infiniband" || return 1
    mknod -m 666 "$IB/dev/infiniband/rdma_cm" c 1 3 || return 1
    mknod -m 666 "$IB/dev/infiniband/ucm9" c 1 3 || return 1 # not an HCA's: never bound
    for h in mlx5_0 mlx5_2 mlx5_10; do
        mkdir -p "$IB/sys/class/infiniband/$h/device/infiniband_verbs/uverbs$i" \
            "$IB/sys/class/infiniband/$h/device/infiniband_mad/umad$i" \
            "$IB/sys/class/infiniband/$h/device/infiniband_mad/issm$i" || return 1
        mknod -m 666 "$IB/dev/infiniband/uverbs$i" c 1 3 &&
            mknod -m 666 "$IB/dev/infiniband/umad$i" c 1 3 &&
            mknod -m 666 "$IB/dev/infiniband/issm$i" c 1 3 || return 1
        i=$((i + 1))
    done
}
check "$N0: three emulated HCAs and their device files" ib_tree

ibls() { # srun args...: the container's /dev/infiniband, one line
    srun -w "$N0" "$@" sh -c 'ls /dev/infiniband 2>/dev/null | tr "\n" " "; echo' 2>>"$D/srun.err"
}
out=$(MELLANOX_VISIBLE_DEVICES=all ibls --container-image="$I")
check "all: rdma_cm and every HCA's uverbs, umad and issm ($out)" \
    test "$out" = "issm0 issm1 issm2 rdma_cm umad0 umad1 umad2 uverbs0 uverbs1 uverbs2 "
out=$(MELLANOX_VISIBLE_DEVICES=1 ibls --container-image="$I")
check "1: the second HCA's (mlx5_2's) only ($out)" test "$out" = "issm1 rdma_cm umad1 uverbs1 "
out=$(MELLANOX_VISIBLE_DEVICES=2,0 ibls --container-image="$I")
check "2,0: mlx5_10's and mlx5_0's, numbers sorted as numbers ($out)" \
    test "$out" = "issm0 issm2 rdma_cm umad0 umad2 uverbs0 uverbs2 "
for v in none void; do
    out=$(MELLANOX_VISIBLE_DEVICES=$v srun -w "$N0" --container-image="$I" sh -c 'test -e /dev/infiniband && echo there; echo ran' 2>>"$D/srun.err")
    check "$v: no /dev/infiniband ($out)" test "$out" = ran
done
out=$(srun -w "$N0" --container-image="$I" sh -c 'test -e /dev/infiniband && echo there; echo ran' 2>>"$D/srun.err")
check "unset: no /dev/infiniband, enroot's default ($out)" test "$out" = ran
out=$(ibls --container-image="$IENV")
check "unset in the job, 2 in the image: the third HCA's ($out)" test "$out" = "issm2 rdma_cm umad2 uverbs2 "
out=$(MELLANOX_VISIBLE_DEVICES=none ibls --container-image="$IENV")
check "the job's none wins over the image's ($out)" test "$out" = ""

# the devices work inside, and nothing else of the host's /dev came with them
out=$(MELLANOX_VISIBLE_DEVICES=1 srun -w "$N0" --container-image="$I" sh -c \
    'test -c /dev/infiniband/uverbs1 && echo chr; echo x >/dev/infiniband/uverbs1 && echo written;
     cat /proc/self/mountinfo | while read -r _ _ _ _ mp opts _; do [ "$mp" = /dev/infiniband/uverbs1 ] && echo "opts $opts"; done;
     ls /dev | tr "\n" " "' 2>>"$D/srun.err")
check "uverbs1 is a character device inside, and opens for writing ($(head -2 <<<"$out" | tr '\n' ' '))" \
    bash -c "grep -qx chr <<<'$out' && grep -qx written <<<'$out'"
check "bound read-only, nosuid, noexec, as enroot's hook binds it ($(grep '^opts' <<<"$out"))" \
    bash -c "grep -q '^opts ro,nosuid,noexec' <<<'$out' || grep -q '^opts ro,nosuid,nodev,noexec' <<<'$out'"
base=$(srun -w "$N0" --container-image="$I" sh -c 'ls /dev | tr "\n" " "' 2>>"$D/srun.err")
check "/dev holds what it holds without HCAs, plus infiniband ($(tail -1 <<<"$out"))" \
    test "$(tail -1 <<<"$out" | sed 's/ infiniband / /')" = "$base"

# --- a value that names no HCA: one line, the step fails, no task -----------
unknown() { # DESCRIPTION WANT NODE VALUE
    local d=$1 want=$2
    MELLANOX_VISIBLE_DEVICES=$4 srun -w "$3" --container-image="$I" sh -c 'echo task-ran' >"$D/bad.out" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] && [ "$(grep -c 'error: mtc:' "$D/bad.out")" = 1 ] &&
        grep -q -- "error: mtc: $want" "$D/bad.out" && ! grep -q task-ran "$D/bad.out"; then
        ok "$d"
    else
        nok "$d (rc $rc)"
        sed 's/^/#   /' "$D/bad.out"
    fi
}
unknown "3 on a node of three HCAs: one line naming it, no task" \
    "MELLANOX_VISIBLE_DEVICES: '3' names no HCA of this node (it has 3: 0-2)" "$N0" 3
unknown "mlx5_0 (a name, not an index): one line, no task" \
    "MELLANOX_VISIBLE_DEVICES: 'mlx5_0' is not an HCA index" "$N0" mlx5_0
unknown "0 on the node without HCAs: one line, no task" \
    "MELLANOX_VISIBLE_DEVICES: '0' names no HCA: this node has none" ibd-a3m-1 0
out=$(MELLANOX_VISIBLE_DEVICES=all srun -w ibd-a3m-1 --container-image="$I" sh -c 'test -e /dev/infiniband && echo there; echo ran' 2>>"$D/srun.err")
check "all on the node without HCAs: runs, no /dev/infiniband ($out)" test "$out" = ran

check "nothing left mounted" wait_for 20 bash -c "[ \$(grep -c ' $CDIR/nodes/[^ ]*/containers' /proc/self/mountinfo) -eq 0 ]"
done_testing
