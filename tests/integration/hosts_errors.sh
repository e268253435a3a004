#!/usr/bin/env bash
# hosts_errors: bad input and bad hosts get one line naming the field or the
# host, and leave nothing behind. Spec errors (mixing local and hosts pools,
# minNodeCount != len(hosts), a host in another stored cluster) are refused by
# the API: nothing stored. Host errors are found by the create operation
# (unreachable, wrong key, changed host key, Slurm version mismatch — slurmd,
# and slurmctld on controller.backupHost's host — a host
# another cluster owns, the distribution's munged on the default socket, a
# slurmd that cannot start after others did, mtcd not listening on TCP): the
# cluster stays in ERROR with the reason, and no process and no file is left
# on any host or on the controller.
# test: uses mtc-dirs (its test hosts bind-mount their own dirs on this machine's
# /var/lib/mtc, /etc/mtc and /run/mtc: deb_package's purge removing them unmounts those)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
. "$(dirname "$0")/hosts_setup.inc"

t_extra_cleanup() {
    [ -n "${MTCD2:-}" ] && kill -TERM "$MTCD2" 2>/dev/null
    hosts_cleanup
}
# Every host clean, and on the controller neither the cluster's directory
# nor its /run/mtc/<uid> (the uid from mtcd's log) nor a daemon of it.
all_clean() {
    local i uid
    for i in 1 2 3 4; do host_clean "$i" "${2:-}" || return 1; done
    uid=$(sed -n "s/.*creating cluster $1 on hosts (uid \([0-9a-f]*\)).*/\1/p" "$MTC_HOME/log/mtcd.log" | tail -1)
    [ -n "$uid" ] && [ ! -e "/run/mtc/$uid" ] && [ ! -e "$MTC_HOME/clusters/$1" ] &&
        [ -z "$(pids_under "$MTC_HOME/clusters/$1")" ]
}
stored_error() { [ "$(state_of "$1")" = ERROR ] && has_line "OPERATION_FAILED .*$2" -- mtc cluster events "$1"; }
# spec ID_OF_FILE GPU_HOSTS_JSON COUNT [EXTRA_TOP_LEVEL]
spec() {
    cat >"$T_DIR/$1.json" <<JSON
{"ssh": {"keyFile": "${KEY:-$TESTHOSTS_KEY}"},${4:-}
 "nodePools": [{"id": "gpu", "machineSpec": {"machineType": "host"},
   "scalingSpec": {"minNodeCount": $3}, "hosts": [$2]}]}
JSON
}
state_of() { mtc cluster get "$1" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["clusterStatus"]["state"])'; }
# create ID [MTC_OPTION...]: mtc cluster create of $T_DIR/ID.json as cluster
# ID; its output into out (the caller's), and into the log.
create() {
    local id=$1
    shift
    out=$(mtc "$@" cluster create -f "$T_DIR/$id.json" --id "$id" 2>&1)
    diag "$id: $out"
}
# The create of $1 fails naming $2 (a pattern), in one line, the cluster in
# ERROR with the reason as an event; then nothing is left anywhere; delete.
create_fails() {
    local id=$1 want=$2 out
    create "$id"
    check "$id: the create fails naming ${3:-it}" grep -qE "$want" <<<"$out"
    check "$id: in one line" test "$(wc -l <<<"$out")" = 1
    check "$id: stored in ERROR, the reason an event" stored_error "$id" "$want"
    check "$id: nothing left on any host or on the controller" wait_for 10 all_clean "$id" "${4:-}"
    out=$(mtc cluster delete "$id" 2>&1)
    check "$id: delete removes it (not found after)" \
        eval 'grep -q "done: cluster deleted" <<<"$out" && gone "cluster $id not found" -- mtc cluster get "$id"'
}

check "4 test hosts up" testhosts_up 4
[ "$T_FAILED" -eq 0 ] || done_testing
H=("" "${TESTHOSTS_ADDRS[@]}")
PORT=$(free_port)
check "mtcd starts, listening on the bridge" start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT"

# --- refused by the API: nothing stored --------------------------------------
cat >"$T_DIR/mix.json" <<JSON
{"nodePools": [{"id": "gpu", "machineSpec": {"machineType": "host"}, "hosts": ["${H[1]}"]},
               {"id": "cpu", "machineSpec": {"machineType": "local"}}]}
JSON
create mix
check "mixing local and hosts pools: one line naming the pool" \
    grep -q 'nodePools\[1\]: node pool "cpu" lists no hosts; a cluster runs either on hosts' <<<"$out"
spec count "\"${H[1]}\", \"${H[2]}\"" 1
create count
check "maxNodeCount != len(hosts): one line naming the field" \
    grep -q 'nodePools\[0\].hosts: lists 2 host(s) and maxNodeCount is 1' <<<"$out"
check "neither is stored (not found)" eval 'gone "cluster mix not found" -- mtc cluster get mix && gone "cluster count not found" -- mtc cluster get count'

spec one "\"${H[1]}\"" 1
create one
check "a cluster on host 1 (first contact: host 1's key is now known)" grep -q "done: cluster one RUNNING" <<<"$out"
spec two "\"${H[2]}\", \"${H[1]}\"" 2
create two
check "a host in another cluster: refused naming the host and the cluster" \
    grep -q "nodePools\[0\].hosts\[1\]: host ${H[1]} belongs to cluster one (projects/local/locations/local)" <<<"$out"
check "  not stored (not found)" gone "cluster two not found" -- mtc cluster get two
check "  host 2 untouched" host_clean 2
out=$(mtc cluster delete one 2>&1)
check "delete the first cluster" grep -q "done: cluster deleted" <<<"$out"

# --- found by the create: ERROR with the reason, nothing left ------------------
testhost_rekey 1
spec rekey "\"${H[1]}\"" 1
create_fails rekey "host ${H[1]}: host key changed; if the host was reinstalled, remove line [0-9]+ of $MTC_HOME/ssh/known_hosts" "the host and the known_hosts line"

spec unreach "\"${H[2]}\", \"$TESTHOSTS_UNUSED_ADDR\"" 2
create_fails unreach "host $TESTHOSTS_UNUSED_ADDR: unreachable" "the unreachable host"

ssh-keygen -q -t ed25519 -N '' -f "$T_DIR/wrong_key"
KEY=$T_DIR/wrong_key spec wrongkey "\"${H[2]}\"" 1
create_fails wrongkey "host ${H[2]}: authentication refused" "the host"

# host 3's slurmd: a wrapper earlier in PATH, in host 3's mount namespace only
mkdir -p "$T_DIR/sbin"
cat >"$T_DIR/sbin/slurmd" <<EOF
#!/bin/sh
case "\$(cat $T_DIR/slurmd-mode)" in
old) [ "\$1" = -V ] && { echo "slurm-wlm 21.08.8"; exit 0; } ;;
broken) case "\$1" in -V | -C) ;; *) echo "slurmd: fatal: simulated start failure" >&2; exit 1 ;; esac ;;
esac
exec /usr/sbin/slurmd "\$@"
EOF
chmod 0755 "$T_DIR/sbin/slurmd"
echo old >"$T_DIR/slurmd-mode"
check "host 3: a different slurmd -V" testhost_exec 3 mount --bind "$T_DIR/sbin" /usr/local/sbin
spec version "\"${H[2]}\", \"${H[3]}\"" 2
create_fails version "host ${H[3]}: slurmd is 21.08.8, the controller runs Slurm $(slurmctld -V | awk '{print $2}')" "host 3 and both versions"

# the rollback: slurmd starts on host 2, cannot start on host 3
echo broken >"$T_DIR/slurmd-mode"
spec rollback "\"${H[2]}\", \"${H[3]}\"" 2
create_fails rollback "host ${H[3]}: .*slurmd did not start" "host 3"

# the backup controller's host runs slurmctld: at the controller's version
cat >"$T_DIR/sbin/slurmctld" <<EOF
#!/bin/sh
[ "\$1" = -V ] && { echo "slurm-wlm 21.08.8"; exit 0; }
exec /usr/sbin/slurmctld "\$@"
EOF
chmod 0755 "$T_DIR/sbin/slurmctld"
echo ok >"$T_DIR/slurmd-mode"
spec ctldver "\"${H[2]}\", \"${H[3]}\"" 2 "\"controller\": {\"backupHost\": \"${H[3]}\", \"stateSaveLocation\": \"$T_DIR/ctld-state\"},"
create_fails ctldver "host ${H[3]}: slurmctld is 21.08.8, the controller runs Slurm $(slurmctld -V | awk '{print $2}') \\(controller.backupHost needs the same version\\)" "the backup's host and both versions"
rm -f "$T_DIR/sbin/slurmctld"
echo broken >"$T_DIR/slurmd-mode"

owner="uid=0123456789ab cluster=other controller=elsewhere home=/srv/mtc"
testhost_exec 4 sh -c "echo '$owner' >/etc/mtc/owner"
spec owned "\"${H[4]}\"" 1
create_fails owned "host ${H[4]}: belongs to another cluster \(/etc/mtc/owner: uid=0123456789ab cluster=other" "the host and the owner" "*/owner"
check "  the other cluster's marker is kept" testhost_exec 4 grep -qx "$owner" /etc/mtc/owner
testhost_exec 4 rm -f /etc/mtc/owner

testhost_exec 2 python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("/run/munge/munge.socket.2")'
spec munge "\"${H[2]}\"" 1
create_fails munge "host ${H[2]}: a munged mtc did not start owns /run/munge/munge.socket.2 .*stop and disable munge.service" "the host and what to do" "*/munge.socket.2"
testhost_exec 2 rm -f /run/munge/munge.socket.2

# the host's own name (issue 26): munged and slurmd look it up, and a slow
# lookup made every node fail munge's round trip right after a create. Host
# 3 loses its name from /etc/hosts and asks a name server on the bridge:
# nothing there (the lookup fails at once), then a UDP sink that never
# answers (the lookup is slow).
printf '127.0.0.1\tlocalhost\n' >"$T_DIR/hosts-noname"
printf 'nameserver %s\noptions timeout:2 attempts:1\n' "$TESTHOSTS_CTL_ADDR" >"$T_DIR/resolv-bridge"
check "host 3: its name gone from its /etc/hosts, a name server on the bridge" testhost_exec 3 sh -c \
    "mount --bind '$T_DIR/hosts-noname' /etc/hosts && mount --bind '$T_DIR/resolv-bridge' /etc/resolv.conf"
spec noname "\"${H[3]}\"" 1
create_fails noname "host ${H[3]}: its own name ${TESTHOSTS_NAMES[3]} does not resolve \(getent hosts" "the host and its name"
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 53))
open(sys.argv[2], "w").close(); time.sleep(600)' "$TESTHOSTS_CTL_ADDR" "$T_DIR/sink.ready" &
SINK=$!
track_pid "$SINK"
# the sink bound before the create (else the lookup fails at once: noname)
check "a DNS sink that never answers listens on the bridge" wait_for 60 test -e "$T_DIR/sink.ready"
spec slowname "\"${H[3]}\"" 1
create_fails slowname "host ${H[3]}: its own name ${TESTHOSTS_NAMES[3]} takes ([0-9]+ ms|over 3 s) to resolve \(more than 1 s\)" "the host and how long"
kill "$SINK"
testhost_exec 3 sh -c "umount /etc/resolv.conf; umount /etc/hosts"
# no cgroup filesystem: slurmd would fail with "slurmd initialization failed"
# (host 4 runs nothing after this)
check "host 4: its cgroup filesystems unmounted" testhost_exec 4 umount -R -l /sys/fs/cgroup
spec nocgroup "\"${H[4]}\"" 1
create_fails nocgroup "host ${H[4]}: no cgroup filesystem is mounted" "the host"

# mtcd without --listen: agents on hosts could not report
mkdir -p "$T_DIR/home2"
mtcd --home "$T_DIR/home2" --daemon && MTCD2=$(cat "$T_DIR/home2/mtcd.pid") && track_pid "$MTCD2"
spec nolisten "\"${H[2]}\"" 1
create nolisten --home "$T_DIR/home2"
check "mtcd not listening on TCP: the create fails saying so" \
    grep -q "mtcd does not listen on TCP, and agents on hosts report over TCP: start mtcd with --listen ADDR:PORT" <<<"$out"
check "  host 2 untouched" host_clean 2
mtc --home "$T_DIR/home2" cluster delete nolisten >/dev/null 2>&1
done_testing
