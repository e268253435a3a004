#!/usr/bin/env bash
# hosts_storage: shared storage on a cluster of test hosts (1 login + 2
# compute). This machine's kernel has no NFS, so each host's private mount
# namespace gets a stand-in mount(8)/umount(8) bind-mounted over
# /usr/local/sbin (first on sshd's PATH; nothing of it in production code):
# for -t nfs|lustre it records its arguments and bind-mounts a directory of
# this test (one per export, so the hosts share it); other types go to the
# real mount. Asserted: the command lines and options (nosuid,nodev first),
# home first and everything before slurmd, the login host mounting home only,
# idempotence (an update mounts nothing new), a vanished mount reported by
# supervision (STORAGE_MOUNT_LOST), drained by storage.shared and remounted
# by the restart it asks for, unmount on delete (last first). The
# experiment root: the test hosts share it (the same /tmp), so create
# passes; hidden under a tmpfs on one host, the create fails in one line
# naming that host and leaves nothing (no process, mount or marker); hidden
# after a create, `mtc run` refuses naming the host and submits nothing, and
# the agent's storage.shared drains the node (which stays drained: a restart
# does not bring the root back and the test's reboot command fails).
# test: uses mtc-dirs (its test hosts bind-mount their own dirs on this machine's
# /var/lib/mtc, /etc/mtc and /run/mtc: deb_package's purge removing them unmounts those)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
. "$(dirname "$0")/hosts_setup.inc"

t_extra_cleanup() { hosts_cleanup; }
check "3 test hosts up" testhosts_up 3
[ "$T_FAILED" -eq 0 ] || done_testing
D=$T_DIR CTL=$TESTHOSTS_CTL_ADDR
H=("" "${TESTHOSTS_ADDRS[@]}") N=("" "${TESTHOSTS_NAMES[@]}")
LOG=$D/mount.log
mkdir -p "$D/standin" "$D/exports" "$D/exp"
cat >"$D/standin/mount" <<SH
#!/bin/sh
# stand-in mount(8) of the test hosts (hosts_storage.sh)
t= prev=
for a; do [ "\$prev" = -t ] && t=\$a; prev=\$a; done
case \$t in nfs|lustre) ;; *) exec /usr/bin/mount "\$@" ;; esac
eval src=\\\${\$((\$# - 1))} dst=\\\${\$#}
slurmd=no
for f in /run/mtc/*/slurmd.pid; do [ -e "\$f" ] && slurmd=yes; done
echo "\$(hostname) mount \$* slurmd=\$slurmd" >>$LOG
d=$D/exports/\$(printf %s "\$src" | tr -c 'A-Za-z0-9' _)
mkdir -p "\$d" && exec /usr/bin/mount --bind "\$d" "\$dst"
SH
cat >"$D/standin/umount" <<SH
#!/bin/sh
echo "\$(hostname) umount \$*" >>$LOG
exec /usr/bin/umount "\$@"
SH
printf '#!/bin/sh\nexit 1\n' >"$D/standin/mount.nfs"
cp "$D/standin/mount.nfs" "$D/standin/mount.lustre"
chmod 755 "$D/standin"/*
for i in 1 2 3; do
    check "host $i: stand-in mount first on its PATH" testhost_exec "$i" mount --bind "$D/standin" /usr/local/sbin
done
ssh_finds() { testhost_ssh 2 'command -v mount' | grep -qx /usr/local/sbin/mount; }
check "  sshd's PATH finds it" ssh_finds

check "mtcd starts, listening on the bridge for the agents" \
    start_mtcd --listen "$CTL:$(free_port)"
VOL=$D/mnt/vol1 LFS=$D/mnt/lfs
cat >"$D/spec.json" <<JSON
{"ssh": {"user": "root", "keyFile": "$TESTHOSTS_KEY"},
 "controller": {"address": "$CTL"},
 "experiment_root": "$D/exp",
 "hostRemediation": {"rebootCommand": "false"},
 "nodePools": [
   {"id": "login", "machineSpec": {"machineType": "host"},
    "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1}, "hosts": ["${H[1]}"]},
   {"id": "cpu", "machineSpec": {"machineType": "host"},
    "scalingSpec": {"minNodeCount": 2, "maxNodeCount": 2}, "hosts": ["${H[2]}", "${H[3]}"],
    "lustres": [{"lustre": "$CTL@tcp:/lfs", "mountPath": "$LFS"}],
    "filestores": [{"filestore": "$CTL:/vol1", "mountPath": "$VOL",
                    "mount_options": "vers=4.1,nconnect=4"}]}],
 "orchestratorSpec": {"slurmSpec": {"loginNodePoolId": "login",
   "homeDirectoryStorage": "$CTL:/home", "homeDirectoryMountOptions": "vers=4.2",
   "partitions": [{"id": "cpu", "nodePoolIds": ["cpu"]}], "defaultPartitionId": "cpu"}},
 "healthPolicy": {"checks": ["storage"], "intervalSeconds": 1, "reportEverySeconds": 5}}
JSON
mounted() { testhost_exec "$1" awk -v p="$2" '$5 == p { f = 1 } END { exit !f }' /proc/self/mountinfo; }
no_mounts() { # nothing of the spec's mounted on host $1
    ! mounted "$1" /home && ! mounted "$1" "$VOL" && ! mounted "$1" "$LFS"
}
quiet_unmounted() { host_quiet "$1" && no_mounts "$1"; }
clean_unmounted() { no_mounts "$1" && host_clean "$1"; }
has_ev() { has_line "$1" -- mtc cluster events sa; }

# --- the experiment root hidden on host 3: create fails, nothing left -------
testhost_exec 3 mount -t tmpfs -o size=1m tmpfs "$D/exp"
out=$(mtc cluster create -f "$D/spec.json" --id sb 2>&1)
diag "$out"
check "create fails naming host 3 and the experiment root" \
    grep -qE "experimentRoot $D/exp is not shared storage: host\(s\) ${H[3]//./\\.} \(sb-cpu-1\) do not see" <<<"$out"
check "  in one line" test "$(wc -l <<<"$out")" = 1
for i in 1 2 3; do
    check "  host $i: nothing running, nothing mounted" wait_for 10 quiet_unmounted "$i"
done
check "  what was mounted was unmounted" grep -q "umount $LFS" "$LOG"
check "  and the marker removed" test -z "$(ls -A "$D/exp/.mtc" 2>/dev/null)"
mtc cluster delete sb >/dev/null 2>&1
testhost_exec 3 umount "$D/exp"
: >"$LOG"

# --- shared: create, the mounts, idempotence --------------------------------
out=$(mtc cluster create -f "$D/spec.json" --id sa 2>&1)
check "create with the experiment root shared" grep -q "done: cluster sa RUNNING" <<<"$out"
[ "$T_FAILED" -eq 0 ] || { diag "$out"; done_testing; }
sed 's/^/# /' "$LOG"
for i in 2 3; do
    check "host $i: home, then vol1 (options passed), then the Lustre target, before slurmd" \
        test "$(grep "^${N[$i]} " "$LOG" | cut -d' ' -f2-)" = \
"mount -t nfs -o nosuid,nodev,vers=4.2 $CTL:/home /home slurmd=no
mount -t nfs -o nosuid,nodev,vers=4.1,nconnect=4 $CTL:/vol1 $VOL slurmd=no
mount -t lustre -o nosuid,nodev $CTL@tcp:/lfs $LFS slurmd=no"
done
check "the login host mounts home only" \
    test "$(grep "^${N[1]} " "$LOG" | cut -d' ' -f2-)" = "mount -t nfs -o nosuid,nodev,vers=4.2 $CTL:/home /home slurmd=no"
testhost_exec 2 sh -c "echo from-2 >$VOL/f"
check "a file written on host 2's vol1 is seen on host 3's" \
    test "$(testhost_exec 3 cat "$VOL/f")" = from-2
check "the controller's marker is in the experiment root" bash -c "ls $D/exp/.mtc/sa-*.marker"
node_health() { mtc cluster get sa --json | python3 -c '
import json, sys
n = {x["instanceName"]: x for x in json.load(sys.stdin)["clusterStatus"]["nodesStatus"]}
sys.exit(0 if n[sys.argv[1]].get("health") == sys.argv[2] else 1)' "$1" "$2"; }
both_pass() { node_health sa-cpu-0 PASS && node_health sa-cpu-1 PASS; }
check "storage.shared PASSes on the compute nodes" wait_for 20 both_pass
eval "$(mtc env sa)"
idle() { [ "$(sinfo -h -N -p cpu -o %t | sort -u)" = idle ]; }
check "  and they are idle, not drained (the marker was there before any agent looked)" idle
sed 's/"displayName"/"x"/; s/{"ssh"/{"displayName": "again", "ssh"/' "$D/spec.json" >"$D/spec2.json"
n0=$(grep -c ' mount ' "$LOG")
out=$(mtc cluster update sa -f "$D/spec2.json" 2>&1)
check "update (a second apply)" grep -q "done: cluster sa RUNNING" <<<"$out"
check "  mounts nothing new (already mounted paths are left alone)" test "$(grep -c ' mount ' "$LOG")" = "$n0"

api POST "$CLUSTERS/sa:checkStorage" '{}'
check_ok() { [ "$HTTP_STATUS" = 200 ] && grep -q "\"experimentRoot\": *\"$D/exp\"" <<<"$BODY"; }
check ":checkStorage answers 200 with the experiment root" check_ok

# --- a vanished mount: reported, and remounted by the remediation -----------
UID_=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["uid"])' "$MTC_HOME/clusters/sa/hosts.json")
# the agent paused meanwhile: the supervisor's pass sees the lost mount first
AGENT=$(testhost_exec 2 cat "/run/mtc/$UID_/agent.pid")
kill -STOP "$AGENT"
testhost_exec 2 /usr/bin/umount "$LFS"
check "STORAGE_MOUNT_LOST names the mount and the node" \
    wait_for 20 has_ev "STORAGE_MOUNT_LOST.*shared mount $LFS of sa-cpu-0"
kill -CONT "$AGENT"
check "storage.shared drains sa-cpu-0" \
    wait_for 20 has_ev "VM_SLURM_DRAIN +sa-cpu-0 +drained: storage.shared: shared mount $LFS is gone"
check "the restart remounts it" wait_for 60 mounted 2 "$LFS"
check "sa-cpu-0 back in service" wait_for 60 has_ev "VM_RESUMED.*sa-cpu-0"

# --- the experiment root hidden on host 3 after the create -------------------
check "mtc env names the experiment root" test "$MTC_EXPERIMENT_ROOT" = "$D/exp"
testhost_exec 3 mount -t tmpfs -o size=1m tmpfs "$D/exp"
out=$(mtc run -s pretrain/tiny_gpt2_pt -p cpu -n 2 --experiment-name hid 2>&1)
rc=$?
diag "$out"
refused() { [ "$rc" != 0 ] && grep -qE "host\(s\) ${H[3]//./\\.} \(sa-cpu-1\) do not see.*nothing submitted" <<<"$out"; }
check "mtc run refuses naming host 3" refused
check "  in one line" test "$(wc -l <<<"$out")" = 1
nothing_queued() { absent . -- squeue -h && [ ! -e "$D/exp/experiments/hid" ]; }
check "  nothing submitted" nothing_queued
out=$(mtc run -s pretrain/tiny_gpt2_pt -p cpu -d /tmp/elsewhere 2>&1)
check "mtc run -d outside the experiment root is refused" grep -q "is not under the cluster's experimentRoot" <<<"$out"
check "storage.shared drains sa-cpu-1, naming the experiment root" \
    wait_for 30 has_ev "VM_SLURM_DRAIN +sa-cpu-1 +drained: storage.shared: experiment root $D/exp is not the controller"
# a restart does not bring the root back, the reboot command fails, and there is no spare
check "  and it stays out of service" wait_for 60 has_ev "VM_REMEDIATION_FAILED +sa-cpu-1 +left drained"
drained() { sinfo -h -N -n sa-cpu-1 -o %t | grep -q drain; }
check "  (drained in Slurm)" drained
testhost_exec 3 umount "$D/exp"

# --- delete: everything mtc mounted unmounted, last first ---------------------
: >"$LOG"
deleted() { mtc cluster delete sa 2>&1 | grep -q "done: cluster deleted"; }
check "delete" wait_for 120 deleted # (retried while a remediation holds the cluster)
sed 's/^/# /' "$LOG"
for i in 2 3; do
    check "host $i: unmounted last first" test "$(grep "^${N[$i]} umount" "$LOG" | cut -d' ' -f3)" = \
"$LFS
$VOL
/home"
done
check "the marker removed" test -z "$(ls -A "$D/exp/.mtc" 2>/dev/null)"
for i in 1 2 3; do
    check "host $i: nothing mounted, nothing left" clean_unmounted "$i"
done
done_testing
