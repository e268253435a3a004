#!/usr/bin/env bash
# The hosts provider's ssh transport (src/provider/ssh.c, driven by
# tests/tools/ssh_probe) against test hosts: first contact fills mtc's
# known_hosts, commands share one master connection, and each failure is a
# classified one-line error: changed host key, wrong key, unreachable, refused,
# timeout (the remote command is gone too). A 0400 secret lands with its mode
# and never in the log; every command is logged with its exit status.
# test: uses mtc-dirs (its test hosts bind-mount their own dirs on this machine's
# /var/lib/mtc, /etc/mtc and /run/mtc: deb_package's purge removing them unmounts those)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
t_extra_cleanup() {
    local p
    # ssh masters this test left behind (their command line names T_DIR)
    for p in $(pids_under "$T_DIR"); do
        [ "$(cat /proc/$p/comm 2>/dev/null)" = ssh ] && kill -TERM "$p" 2>/dev/null
    done
    testhosts_down
}

# every line a TAP comment (remote output could start with "ok")
dg() { sed 's/^/# /' <<<"$1"; }
PROBE=$B/tests/tools/ssh_probe
check "ssh_probe is built" test -x "$PROBE"
check "2 test hosts up" testhosts_up 2
[ "$T_FAILED" -eq 0 ] || done_testing
H1=${TESTHOSTS_ADDRS[1]} H2=${TESTHOSTS_ADDRS[2]}
STATE=$MTC_HOME/ssh
KH=$STATE/known_hosts
LOG=$T_DIR/ssh.log
probe() { timeout 60 "$PROBE" -s "$STATE" -k "$TESTHOSTS_KEY" -l "$LOG" "$@"; }
accepted() { grep -c 'Accepted publickey' "$TESTHOSTS_DIR/h$1/sshd.log"; }
# "= ACTION rc=N errno=E ms=N" line number $1 of the output $2
result() { grep '^= ' <<<"$2" | sed -n "${1}p"; }
ms_of() { sed -n 's/.* ms=\([0-9]*\).*/\1/p' <<<"$1"; }

# first contact: accept-new writes mtc's own known_hosts
check "no known_hosts before first contact" test ! -e "$KH"
before=$(accepted 1)
out=$(probe "$H1" run hostname run 'echo oops >&2; exit 3' check run true 2>&1)
dg "$out"
check "run returns the remote output" grep -qx "${TESTHOSTS_NAMES[1]}" <<<"$out"
check "first contact: known_hosts has the host's key" grep -q "^$H1 ssh-ed25519 " "$KH"
check "the accepted key is the host's key" grep -qF \
    "$(cut -d' ' -f2 "$TESTHOSTS_DIR/h1/ssh_host_ed25519_key.pub")" "$KH"
check "the new key is logged" grep -q "new host key accepted into $KH" "$LOG"
check "remote exit status returned" grep -q '^= run rc=3 errno=0' <<<"$out"
check "non-zero status: one-line error with its stderr" \
    grep -qx "! host $H1: command exited with status 3: oops" <<<"$out"
check "the master connection is up between commands" grep -q '^= check rc=0' <<<"$out"
check "3 commands, 1 ssh login (multiplexed)" test $(($(accepted 1) - before)) -eq 1
check "ssh_destroy closed the master" bash -c "! ls '$STATE'/cm-* >/dev/null 2>&1"

# hanging command: killed at the deadline, here and on the host
out=$(probe -t 2000 "$H1" run 'sleep 60' 2>&1)
dg "$out"
r=$(result 1 "$out")
check "sleep 60 with a 2 s timeout: ETIMEDOUT" grep -q 'rc=-1 errno=ETIMEDOUT' <<<"$r"
check "  within 2-4 s ($(ms_of "$r") ms)" test "$(ms_of "$r")" -ge 2000 -a "$(ms_of "$r")" -lt 4000
check "  one-line timeout error" grep -qx "! host $H1: command timed out after 2 s" <<<"$out"
no_sleep() { ! testhost_pids 1 | xargs -r ps -o args= -p | grep -q '^sleep 60'; }
check "  no sleep 60 left on the host" wait_for 5 no_sleep

# a 0400 secret: mode, content, no trace in the log
secret=mtc-secret-$RANDOM$RANDOM
printf '%s' "$secret" >"$T_DIR/key"
out=$(probe "$H2" secret-put "$T_DIR/key" /etc/mtc/munge.key 0400 \
    run 'stat -c %a /etc/mtc/munge.key; sha256sum </etc/mtc/munge.key; ls -A /etc/mtc' \
    secret-run "test -s /etc/mtc/munge.key && echo $secret >/dev/null" 2>&1)
dg "$(grep -v "$secret" <<<"$out")"
check "ssh_put succeeds" grep -q '^= secret-put rc=0' <<<"$out"
check "the file has mode 0400" grep -qx 400 <<<"$out"
check "the content arrived whole" grep -q "^$(sha256sum <"$T_DIR/key" | cut -d' ' -f1) " <<<"$out"
check "no temp file left beside it" test "$(grep -c '^\.mtc-put' <<<"$out")" -eq 0
check "the file is on host 2 only (private /etc/mtc)" bash -c '! test -e /etc/mtc/munge.key'
check "the put is logged with path and mode" \
    grep -q "put /etc/mtc/munge.key (mode 0400, ${#secret} bytes, secret) -> exit 0" "$LOG"
check "a secret command is logged redacted" grep -q "ssh root@$H2: \[secret\] -> exit 0" "$LOG"
check "the secret never appears in the log" bash -c "! grep -q '$secret' '$LOG'"

# changed host key: a hard error naming the known_hosts line; nothing accepted
testhost_rekey 1
cp "$KH" "$T_DIR/kh.before"
out=$(probe "$H1" run true 2>&1)
dg "$out"
check "changed host key: EKEYREJECTED" grep -q '^= run rc=-1 errno=EKEYREJECTED' <<<"$out"
check "  error names the known_hosts line to remove" grep -qx \
    "! host $H1: host key changed; if the host was reinstalled, remove line 1 of $KH" <<<"$out"
check "  known_hosts unchanged" cmp -s "$KH" "$T_DIR/kh.before"

# wrong key: authentication refused
ssh-keygen -q -t ed25519 -N '' -f "$T_DIR/wrong_key"
out=$(timeout 60 "$PROBE" -s "$STATE" -k "$T_DIR/wrong_key" -l "$LOG" "$H2" run true 2>&1)
dg "$out"
check "wrong key: EACCES" grep -q '^= run rc=-1 errno=EACCES' <<<"$out"
check "  one-line error" grep -qx "! host $H2: authentication refused (wrong key or user)" <<<"$out"

# unreachable address in the test subnet, and a port with nothing listening
out=$(probe -c 2 "$TESTHOSTS_UNUSED_ADDR" run true 2>&1)
dg "$out"
r=$(result 1 "$out")
check "no host at the address: EHOSTUNREACH" grep -q 'rc=-1 errno=EHOSTUNREACH' <<<"$r"
check "  within the 2 s connect timeout ($(ms_of "$r") ms)" test "$(ms_of "$r")" -lt 4500
check "  one-line error" grep -q "^! host $TESTHOSTS_UNUSED_ADDR: unreachable (" <<<"$out"
out=$(probe -p 2222 "$H2" run true 2>&1)
check "nothing on the port: ECONNREFUSED" grep -q '^= run rc=-1 errno=ECONNREFUSED' <<<"$out"

# a host whose link is down, with no master yet: unreachable
testhost_link 2 down
out=$(probe -c 2 -t 5000 "$H2" run true 2>&1)
dg "$out"
check "link down: EHOSTUNREACH" grep -q '^= run rc=-1 errno=EHOSTUNREACH' <<<"$out"
testhost_link 2 up

out=$(probe -- "-oProxyCommand=x" run true 2>&1)
check "a host that looks like an option is rejected" grep -q '^= create rc=-1 errno=EINVAL' <<<"$out"

# the log: every command with its result
check "log: command and exit status" grep -q "ssh root@$H1: hostname -> exit 0 (" "$LOG"
check "log: failing command with its status" grep -q "ssh root@$H1: echo oops >&2; exit 3 -> exit 3 (" "$LOG"
check "log: timed-out command" grep -q "ssh root@$H1: sleep 60 -> failed: host $H1: command timed out" "$LOG"
masters() { for p in $(pids_under "$T_DIR"); do [ "$(cat /proc/$p/comm)" = ssh ] && echo "$p"; done; }
no_masters() { [ -z "$(masters)" ]; }
check "no ssh process left" wait_for 5 no_masters
done_testing
