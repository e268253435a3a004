#!/usr/bin/env bash
# Test hosts (testhosts.inc): 3 namespaced hosts answer ssh with their own
# hostnames, keep /run/mtc private, survive a reboot (processes gone, /run
# cleared, /var/lib/mtc kept), drop off with their link down, and leave no
# namespace, link, mount or process behind.
# test: uses mtc-dirs (its test hosts bind-mount their own dirs on this machine's
# /var/lib/mtc, /etc/mtc and /run/mtc: deb_package's purge removing them unmounts those)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
t_extra_cleanup() { testhosts_down; }

check "3 test hosts up" testhosts_up 3
[ "$T_FAILED" -eq 0 ] || done_testing
tag=${TESTHOSTS_NAMES[1]%-1}
seen_pids=()
not() { ! "$@"; }
# gone: no such pid, or a zombie not yet reaped by init
dead() { ! kill -0 "$1" 2>/dev/null || grep -q '^[^)]*) [ZX]' "/proc/$1/stat" 2>/dev/null; }
remember() { seen_pids+=($(testhost_pids "$1")); }

for i in 1 2 3; do
    out=$(testhost_ssh "$i" hostname 2>&1)
    check "host $i: ssh with the key shows its own hostname ($out)" test "$out" = "${TESTHOSTS_NAMES[$i]}"
done
check "ssh without the key is refused" bash -c "! ssh -o BatchMode=yes -o IdentitiesOnly=yes \
    -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o ConnectTimeout=3 \
    root@${TESTHOSTS_ADDRS[1]} true 2>/dev/null"
out=$(testhost_exec 2 hostname)
check "testhost_exec runs inside the host" test "$out" = "${TESTHOSTS_NAMES[2]}"

testhost_ssh 1 'echo one >/run/mtc/probe && echo one >/var/lib/mtc/probe && echo one >/run/munge/probe'
check "host 1 sees its own /run/mtc file" test "$(testhost_ssh 1 cat /run/mtc/probe)" = one
check "/run/mtc is private: host 2 does not see host 1's file" testhost_ssh 2 '! test -e /run/mtc/probe'
check "/var/lib/mtc is private: host 2 does not see host 1's file" \
    testhost_ssh 2 '! test -e /var/lib/mtc/probe'
check "/run/munge is private: host 3 does not see host 1's file" testhost_ssh 3 '! test -e /run/munge/probe'
check "the test machine does not see host 1's files" \
    bash -c '! test -e /run/mtc/probe && ! test -e /var/lib/mtc/probe && ! test -e /run/munge/probe'

# hosts reach each other and the controller address over the bridge
check "host 1 reaches host 2's sshd" testhost_exec 1 timeout 3 bash -c \
    "exec 3<>/dev/tcp/${TESTHOSTS_ADDRS[2]}/22"
python3 -c '
import socket, sys
s = socket.socket(); s.bind((sys.argv[1], 0)); s.listen(1); print(s.getsockname()[1], flush=True)
s.settimeout(10); c, _ = s.accept(); c.sendall(b"ctl\n"); c.close()' "$TESTHOSTS_CTL_ADDR" >"$T_DIR/port" &
track_pid $!
wait_for 5 test -s "$T_DIR/port"
out=$(testhost_exec 1 timeout 3 bash -c "exec 3<>/dev/tcp/$TESTHOSTS_CTL_ADDR/$(cat "$T_DIR/port"); cat <&3")
check "host 1 reaches the controller address $TESTHOSTS_CTL_ADDR" test "$out" = ctl

# reboot: every process killed, /run cleared, /var/lib/mtc kept, sshd back
testhost_ssh 2 'echo x >/run/mtc/f; echo y >/var/lib/mtc/f; setsid sleep 1000 </dev/null >/dev/null 2>&1 &'
remember 2
sshd_old=$(cat "$TESTHOSTS_DIR/h2/sshd.pid")
sleeper=$(for p in $(testhost_pids 2); do [ "$(cat /proc/$p/comm)" = sleep ] && echo "$p"; done)
check "a process runs on host 2 before the reboot" test -n "$sleeper"
start=$SECONDS
check "testhost_reboot 2 1 returns" testhost_reboot 2 1
check "the reboot took the delay" test $((SECONDS - start)) -ge 1
check "the host's process is gone" dead "$sleeper"
check "the old sshd is gone" dead "$sshd_old"
check "sshd is back" test "$(testhost_ssh 2 hostname)" = "${TESTHOSTS_NAMES[2]}"
check "/run/mtc was cleared" testhost_ssh 2 '! test -e /run/mtc/f'
check "/var/lib/mtc was kept" test "$(testhost_ssh 2 cat /var/lib/mtc/f)" = y
only_sshd() { [ "$(testhost_pids 2)" = "$(cat "$TESTHOSTS_DIR/h2/sshd.pid")" ]; }
check "only sshd runs after the reboot" wait_for 5 only_sshd

# link down: unreachable; up: reachable again
testhost_link 3 down
check "link down: host 3 unreachable" not testhost_ssh 3 true 2>/dev/null
testhost_link 3 up
check "link up: host 3 reachable again" wait_for 10 testhost_ssh 3 true

# rekey: a new host key on the same address
k1=$(ssh-keyscan -t ed25519 "${TESTHOSTS_ADDRS[1]}" 2>/dev/null | awk '{print $3}')
testhost_rekey 1
k2=$(ssh-keyscan -t ed25519 "${TESTHOSTS_ADDRS[1]}" 2>/dev/null | awk '{print $3}')
check "testhost_rekey changes the host key" bash -c "[ -n '$k1' ] && [ -n '$k2' ] && [ '$k1' != '$k2' ]"

for i in 1 2 3; do remember "$i"; done
dir=$TESTHOSTS_DIR
check "testhosts_down succeeds" testhosts_down
check "testhosts_down again is a no-op" testhosts_down
check "no namespace left" bash -c "! ip netns list | grep -q '^$tag-'"
check "no bridge or veth left" bash -c "! ip -o link | grep -q ': $tag'"
check "nothing mounted from the temp dir" bash -c "! grep -qF '$dir' /proc/mounts"
check "temp dir removed" test ! -e "$dir"
alive=$(for p in "${seen_pids[@]}"; do dead "$p" || echo "$p"; done)
check "no process of any host left (${#seen_pids[@]} recorded)" test -z "$alive"
done_testing
