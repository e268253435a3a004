#!/usr/bin/env bash
# backup: mtcd's state backed up while it serves and restored elsewhere
# (issue 43, points 2 and 3, docs/operations.md). `mtc daemon backup` ten
# times beside a loop of API writes: each file restores to a store whose
# PRAGMA integrity_check is ok and whose newest write is one the API
# acknowledged. Periodic backups (--backup-every 1s --backup-keep 2) keep two
# files; on a full small filesystem (a 64 KiB tmpfs mounted over the
# directory) they fail as an event and a /healthz error, mtcd serves on, and
# the next one after the space returns succeeds. A restore into a new home,
# then mtcd there: the local cluster is ERROR with "its nodes were on the
# lost machine" (a RESTORED event), the tokens work. The same machine with
# its home lost: restored where the home was, the cluster ERROR, and its
# delete stops the daemons the lost home's mtcd started. Bad input, one line
# each and nothing written: a viewer's backup, a backup inside the home, a
# restore into a non-empty home, of a truncated file, of one whose bytes
# fail the checksum, of a newer schema, of a file others may read.
. "$(dirname "$0")/lib.sh"
needs_root "backup" "it mounts a small tmpfs"
D=$T_DIR
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
mkdir -p "$D/bk" "$D/out"
MOUNTED=""
t_extra_cleanup() {
    [ -n "$MOUNTED" ] && umount "$D/bk"
    [ -n "${PID2:-}" ] && kill -TERM "$PID2" 2>/dev/null
    delete_all_clusters
}
check "mtcd with periodic backups" start_mtcd --listen "127.0.0.1:$PORT" --backup-dir "$D/bk" \
    --backup-every 1s --backup-keep 2
check "a local cluster" bash -c "mtc cluster create -f '$ROOT/examples/local-2node.json' --id bk >'$D/create.out' 2>&1"
ok_total() { metric 'mtc_backups_total{outcome="ok"}'; }
failed_total() { metric 'mtc_backups_total{outcome="failed"}'; }
check "three periodic backups taken" wait_for 60 eval '[ "$(ok_total)" -ge 3 ]'
backups() { find "$D/bk" -maxdepth 1 -name 'mtcd-*.mtcbak' | wc -l; }
temps() { find "$D/bk" -maxdepth 1 -name '.*.tmp' | wc -l; }
check "--backup-keep 2: the two newest kept ($(backups) there), no temporary file" \
    eval '[ "$(backups)" = 2 ] && [ "$(temps)" = 0 ]'
check "mtc daemon status names the last backup" \
    bash -c "mtc daemon status | grep -q 'backups: into $D/bk every 1s, keeping 2; last 20'"
check "/metrics: the last backup's time and size" \
    eval '[ "$(metric mtc_backup_last_bytes)" -gt 1000 ] && [ "$(metric mtc_backup_last_success_timestamp_seconds | cut -d. -f1)" -gt 1700000000 ]'

# a full small filesystem under the backup directory: failures, never a crash
mount -t tmpfs -o size=64k tmpfs "$D/bk" && MOUNTED=1
f0=$(failed_total)
check "on a full 64 KiB filesystem the periodic backup fails" wait_for 60 eval '[ "$(failed_total)" -gt "$f0" ]'
api GET /healthz
check "/healthz says why (no space left) and mtcd answers" \
    bash -c "grep -q 'No space left on device' <<<'$BODY' && grep -q '\"status\": *\"ok\"' <<<'$BODY'"
check "a BACKUP_FAILED event in mtcd's log" grep -q "periodic backup into $D/bk failed" "$MTC_HOME/log/mtcd.log"
check "nothing half-written left on it" eval '[ "$(find "$D/bk" -type f | wc -l)" = 0 ]'
umount "$D/bk" && MOUNTED=""
o0=$(ok_total)
check "space back: the next periodic backup succeeds" wait_for 60 eval '[ "$(ok_total)" -gt "$o0" ]'

# backups under a loop of API writes; each one's newest write was acknowledged
: >"$D/acked"
(
    i=0
    while [ ! -e "$D/stop" ] && [ $i -lt 2000 ]; do
        i=$((i + 1))
        out=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$MTC_HOME/mtcd.sock" -X POST \
            -H 'Content-Type: application/json' --data "{\"name\": \"w$i\", \"role\": \"viewer\"}" \
            http://localhost/v1/tokens)
        [ "$out" = 200 ] && echo "w$i" >>"$D/acked"
    done
) &
WRITER=$!
track_pid "$WRITER"
wait_for 30 test -s "$D/acked"
nb=0
for k in $(seq 10); do
    mtc daemon backup "$D/out/b$k.mtcbak" >"$D/out/b$k.said" 2>&1 && nb=$((nb + 1))
done
touch "$D/stop"
wait "$WRITER"
check "ten backups taken while the writes went on ($nb)" [ "$nb" = 10 ]
check "each backup file is its owner's only (mode 600)" \
    eval '[ "$(stat -c %a "$D"/out/*.mtcbak | sort -u)" = 600 ]'
diag "writes acknowledged meanwhile: $(wc -l <"$D/acked")"
good=0 last=""
for k in $(seq 10); do
    rm -rf "$D/r$k"
    mtc daemon restore "$D/out/b$k.mtcbak" --home "$D/r$k" >/dev/null 2>&1 || continue
    [ "$(sqlite3 "$D/r$k/mtcd.db" 'PRAGMA integrity_check')" = ok ] || continue
    newest=$(sqlite3 "$D/r$k/mtcd.db" \
        "SELECT name FROM tokens WHERE name GLOB 'w[0-9]*' ORDER BY CAST(substr(name, 2) AS INTEGER) DESC LIMIT 1")
    # before the writes began (the first backup may be): nothing to check
    [ -z "$newest" ] || grep -qx "$newest" "$D/acked" || continue
    good=$((good + 1)) last=$newest
    [ "$k" = 10 ] || rm -rf "$D/r$k"
done
check "every backup restores: integrity_check ok, its newest write acknowledged ($good of 10; last $last)" \
    [ "$good" = 10 ]

# the head moved: mtcd on another home restored from the backup
R=$D/r10
check "the restore wrote its record for mtcd" test -s "$R/restored.json"
mtcd --home "$R" --daemon --supervise-ms 500 && PID2=$(cat "$R/mtcd.pid") && track_pid "$PID2"
check "mtcd starts on the restored home" env MTC_HOME="$R" mtc daemon status
state2=$(MTC_HOME=$R mtc cluster list --json | jq_ '[c["clusterStatus"]["state"] for c in d["modelDevelopmentClusters"] if c["name"].endswith("/bk")][0]')
check "the local cluster is ERROR there ($state2)" [ "$state2" = ERROR ]
ev=$(MTC_HOME=$R event_texts bk RESTORED "its nodes were on the lost machine")
check "its RESTORED event says its nodes were on the lost machine" [ -n "$ev" ]
check "the record is consumed (a restart adopts nothing again)" test ! -e "$R/restored.json"
check "the tokens came back (w1 listed)" bash -c "MTC_HOME=$R mtc token list | grep -qw w1"
kill -TERM "$PID2"
wait_for 30 eval '! kill -0 "$PID2" 2>/dev/null'
PID2=""

# the same machine, its home lost: the backup restored where the home was;
# deleting the cluster then stops the daemons the lost home's mtcd started
CDIR=$MTC_HOME/clusters/bk
pre=$(daemon_pids "$CDIR" slurmctld)
check "the cluster's slurmctld runs (pid $pre)" [ -n "$pre" ]
kill -TERM "$MTCD_PID" && wait_for 30 eval '! kill -0 "$MTCD_PID" 2>/dev/null'
mv "$MTC_HOME" "$D/lost-home"
out=$(mtc daemon restore "$D/out/b10.mtcbak" --home "$MTC_HOME" 2>&1)
check "restored where the lost home was" [ $? -eq 0 ]
check "mtcd starts there" start_mtcd --listen "127.0.0.1:$PORT"
state3=$(mtc cluster list --json | jq_ '[c["clusterStatus"]["state"] for c in d["modelDevelopmentClusters"] if c["name"].endswith("/bk")][0]')
check "the local cluster is ERROR ($state3)" [ "$state3" = ERROR ]
check "deleting it succeeds" bash -c "mtc cluster delete bk >'$D/delete.out' 2>&1"
check "... and stops the daemons the lost home's mtcd started" \
    wait_for 60 eval '[ -z "$(daemon_pids "$CDIR" slurmctld)$(daemon_pids "$CDIR" slurmd)" ]'

# bad input: one line each, nothing written
VIEWER=$(mtc token create --name viewer1 --role viewer 2>/dev/null | head -1)
out=$(MTC_URL=http://127.0.0.1:$PORT MTC_TOKEN=$VIEWER mtc daemon backup "$D/out/v.mtcbak" 2>&1)
check "a viewer's backup is refused (needs admin)" one_line_fail $? "$out" "needs admin"
check "... and nothing is written" test ! -e "$D/out/v.mtcbak"
out=$(mtc daemon backup "$MTC_HOME/inside.mtcbak" 2>&1)
check "a backup inside the home is refused" one_line_fail $? "$out" "inside mtcd's home"
mkdir -p "$D/full" && echo x >"$D/full/keep"
out=$(mtc daemon restore "$D/out/b1.mtcbak" --home "$D/full" 2>&1)
check "a restore into a non-empty home is refused" one_line_fail $? "$out" "is not empty"
check "... and leaves it as it was" eval '[ "$(ls "$D/full")" = keep ]'
cp "$D/out/b1.mtcbak" "$D/out/t.mtcbak" && truncate -s -100 "$D/out/t.mtcbak"
out=$(mtc daemon restore "$D/out/t.mtcbak" --home "$D/n1" 2>&1)
check "a truncated backup is refused" one_line_fail $? "$out" "truncated"
check "... and no home is made" test ! -e "$D/n1"
cp "$D/out/b1.mtcbak" "$D/out/c.mtcbak"
size=$(stat -c %s "$D/out/c.mtcbak")
printf 'Z' | dd of="$D/out/c.mtcbak" bs=1 seek=$((size - 10)) conv=notrunc status=none
out=$(mtc daemon restore "$D/out/c.mtcbak" --home "$D/n1" 2>&1)
check "a backup whose bytes changed fails its checksum" one_line_fail $? "$out" "checksum mismatch"
cp "$D/out/b1.mtcbak" "$D/out/s.mtcbak"
# what a newer mtc writes: its header names a schema this one does not know
python3 - "$D/out/s.mtcbak" <<'PY'
import json, sys
b = open(sys.argv[1], "rb").read()
first = b.index(b"\n") + 1
end = b.index(b"\n", first)
h = json.loads(b[first:end])
h["schemaVersion"] = 9999
line = json.dumps(h, separators=(",", ":")).encode()
open(sys.argv[1], "wb").write(b[:first] + line.ljust(end - first) + b[end:])
PY
out=$(mtc daemon restore "$D/out/s.mtcbak" --home "$D/n1" 2>&1)
check "a backup from a newer schema is refused" one_line_fail $? "$out" "schema version 9999 is newer"
cp "$D/out/b1.mtcbak" "$D/out/o.mtcbak" && chmod 644 "$D/out/o.mtcbak"
out=$(mtc daemon restore "$D/out/o.mtcbak" --home "$D/n1" 2>&1)
check "a backup others may read is refused" one_line_fail $? "$out" "must be its owner's only"
check "none of them made a home" test ! -e "$D/n1"
done_testing
