#!/usr/bin/env bash
# Slurm's backup controller on hosts (docs/hosts.md, "A backup controller"):
# a cluster on 2 test hosts (the login host, the backup controller; one
# compute host), created once per failoverSeconds in BENCH_FAILOVER (default
# "10 30"). Each: the controller machine lost (kill -9 of mtcd and every
# daemon the cluster directory recorded: slurmctld, munged), then `sbatch`
# tried in a loop on the login host. Figure: seconds from the kill to the
# first sbatch accepted, and its ratio to failoverSeconds (the floor:
# Slurm's SlurmctldTimeout itself). Then mtcd again: seconds until the
# primary answers (it takes control back). Traffic: the test hosts' private
# bridge only; everything is torn down on exit.
BENCH_NAME=failover
. "$(dirname "$0")/hosts.inc"

testhosts_up 2 || fail "test hosts did not come up"
PORT=$(free_port)
start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT" || fail "mtcd did not start"
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.1f}')"; }
for F in ${BENCH_FAILOVER:-10 30}; do
    hosts_cpu_spec failover 2 | hosts_spec_edit \
        's["controller"].update({"backupHost": sys.argv[1], "failoverSeconds": int(sys.argv[2])})' \
        "${TESTHOSTS_ADDRS[1]}" "$F" >"$T_DIR/spec.json"
    mtc cluster create -f "$T_DIR/spec.json" --id fb || fail "create (failoverSeconds $F) failed"
    CDIR=$MTC_HOME/clusters/fb
    UID_=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["uid"])' "$CDIR/hosts.json")
    LCONF=/var/lib/mtc/$UID_/spool/conf-cache/slurm.conf
    t0=$(now)
    hosts_lose_controller "$CDIR"
    testhost_exec 1 env SLURM_CONF="$LCONF" timeout $((F + 120)) bash -c \
        'until sbatch -o /dev/null --wrap true >/dev/null 2>&1; do sleep 0.2; done' ||
        fail "no sbatch accepted within $((F + 120)) s (failoverSeconds $F)"
    t1=$(now)
    start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$PORT" || fail "mtcd did not start again"
    eval "$(mtc env fb)"
    wait_for 120 bash -c "out=\$(scontrol ping); grep -q '(primary) at .* is UP' <<<\"\$out\"" ||
        fail "the primary did not come back"
    t2=$(now)
    took=$(secs "$t0" "$t1")
    echo "failover ${F}s: controller lost -> first sbatch on the login host ${took} s" \
        "($(python3 -c "print(f'{$took / $F:.2f}')")x failoverSeconds); mtcd started -> primary in control $(secs "$t1" "$t2") s" >&3
    mtc cluster delete fb || fail "delete failed"
done
echo "load at start: $LOAD0" >&3
T_FAILED=0
