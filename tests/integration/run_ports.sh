#!/usr/bin/env bash
# run_ports: a custom job's rendezvous port is chosen the way its ranks use it,
# and a rank that exits non-zero ends the job (issue 50).
# test: owns master-ports (port_hold takes every free port of 29500-32767: a
# job of another test choosing its MASTER_PORT then could lose it to port_hold)
# Beside port_hold
# (tests/tools/port_hold.c) holding the rendezvous ports below the ephemeral
# range (29500-32767) bound without listening — a connect probe calls them
# free, a bind fails — and 2000 outgoing loopback connections whose local
# ends take ephemeral ports, 2-rank PyTorch DDP jobs complete with each
# launcher: srun on 2 nodes, torchrun on 2 nodes (a stand-in torchrun,
# tests/tools/torchrun-standin: Debian 12's cannot start a worker) and
# `-e local` (3 runs), each MASTER_PORT outside the ephemeral range. A rank
# that exits 1 at step 2 while the other is in a long step ends a 2-rank
# `-e local` job FAILED (said in the log, no rank left behind) and a 2-node
# srun job FAILED with the rank's last line in its TRAINING_FAILED event. A
# program whose progress rows hold only step and loss (issue 41) shows a
# goodput above 30% and at most 100%, in `mtc experiment status` (the file
# read whole) and in the trainingJob (mtcd's monitor, read as it grows).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR
PY=/usr/bin/python3 # where Debian's torch is
PROG=$ROOT/tests/integration/ddp_train.py

check "local 2-node cluster up" run_cluster cp
run_or_stop $?
cd "$D" || exit 1

# --- the ports held as an outgoing connection or a bound socket holds them ------------
"$B/tests/tools/port_hold" --bind 29500-32767 --connect 2000 --ready "$D/held" &
track_pid $!
check "port_hold holds 29500-32767 bound and 2000 outgoing connections" wait_for 120 test -s "$D/held"
run_or_stop $?
diag "port_hold: $(cat "$D/held")"
check "  most of the range bound, every connection made" python3 -c '
import sys
w = open(sys.argv[1]).read().split()
assert w[0] == "bound" and int(w[1]) > 3000 and w[2] == "connected" and int(w[3]) == 2000, w' "$D/held"
check "  a held port refuses a connection (a connect probe calls it free) yet cannot be bound" \
    python3 - <<'PY'
import errno, socket
c = socket.socket()
try:
    c.connect(("127.0.0.1", 29501))
    raise SystemExit("29501 accepted a connection")
except ConnectionRefusedError:
    pass
s = socket.socket()
try:
    s.bind(("127.0.0.1", 29501))
    raise SystemExit("29501 could be bound")
except OSError as e:
    assert e.errno == errno.EADDRINUSE, e
PY
P=$(mtc-agent port --addr 127.0.0.1 --seed 1)
check "mtc-agent port skips the held ports: $P, outside the ephemeral range" python3 - "$P" "$D/held" <<'PY'
import sys
p = int(sys.argv[1])
unheld = {int(x) for x in open(sys.argv[2]).read().split("unheld")[1].split()}
lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
assert not lo <= p <= hi and (p > 32767 or p in unheld), p
PY

# result EXPERIMENT EXPR: EXPR over the run's result.json (r)
result() {
    local dir
    dir=$(mtc experiment status "$1" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["taskDir"])')
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$dir/result.json" "$2"
}
# port_ok EXPERIMENT: its ranks' MASTER_PORT came from mtc-agent port, is
# outside the ephemeral range and is none of those port_hold holds (above
# them, or one it could not take: another test's then, free again since)
port_ok() {
    local p
    p=$(result "$1" 'r["env"]["MASTER_PORT"]') || return 1
    diag "$1: MASTER_PORT $p"
    python3 - "$p" "$D/held" /proc/sys/net/ipv4/ip_local_port_range <<'PY' || return 1
import sys
p = int(sys.argv[1])
unheld = {int(x) for x in open(sys.argv[2]).read().split("unheld")[1].split()}
lo, hi = map(int, open(sys.argv[3]).read().split())
assert not lo <= p <= hi, (p, "in the ephemeral range", lo, hi)
assert p > 32767 or p in unheld, (p, "held by port_hold")
PY
    absent 'no MASTER_PORT from mtc-agent' -- mtc experiment logs "$1"
}

# --- each launcher, beside the held ports ------------------------------------------
mtc run --command "$PY $PROG --steps 5" -n 2 --experiment-name psrun >"$D/psrun.out" 2>&1
check "srun, 2 nodes: the 2-rank DDP job completes" test "$(run_wait_final 240 psrun)" = COMPLETED
check "  on a MASTER_PORT none of the held ones, outside the ephemeral range" port_ok psrun

JOBS=$CLUSTERS/cp/trainingJobs
api POST "$JOBS?trainingJobId=torchrun" "$(python3 - "$PY" "$PROG" "$D" "$ROOT/tests/tools/torchrun-standin" <<'PY'
import json, os, sys
py, prog, d, standin = sys.argv[1:]
print(json.dumps({"recipe": {"task": "custom",
                             "launch": {"command": [py, prog, "--steps", "5"], "launcher": "torchrun",
                                        "workdir": d,
                                        "env": {"PATH": standin + ":" + os.environ["PATH"]}}},
                  "nodeCount": 2, "experimentName": "ptorch"}))
PY
)"
check "torchrun, 2 nodes (the stand-in): 200" test "$HTTP_STATUS" = 200
check "  the 2-rank DDP job completes" test "$(run_wait_final 240 ptorch)" = COMPLETED
check "  WORLD_SIZE 2 from the launcher's --nnodes 2 --nproc_per_node 1" \
    test "$(result ptorch 'r["env"]["WORLD_SIZE"], r["env"]["LOCAL_WORLD_SIZE"]')" = "('2', '1')"
check "  on a MASTER_PORT none of the held ones (its rendezvous endpoint)" port_ok ptorch

for i in 1 2 3; do
    mtc run -e local --command "$PY $PROG --steps 5" -n 2 --experiment-name "ploc$i" >"$D/ploc$i.out" 2>&1
    check "-e local, run $i: the 2-rank DDP job completes" test "$(run_wait_final 180 "ploc$i")" = COMPLETED
    check "  on a MASTER_PORT none of the held ones" port_ok "ploc$i"
done

# --- a rank that exits 1 at step 2, the other in a long step (600 s) -------------------
# rank_pids TASKDIR: the processes of the run in TASKDIR (their MTC_TASK_DIR)
rank_pids() {
    local p
    for p in /proc/[0-9]*; do
        tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qxF "MTC_TASK_DIR=$1" &&
            grep -q ddp_train "$p/cmdline" 2>/dev/null && echo "${p#/proc/}"
    done
}
no_ranks() { [ -z "$(rank_pids "$1")" ]; }
mtc run -e local --command "$PY $PROG --steps 20 --fail-at 2 --fail-rank 1" -n 2 \
    --experiment-name plfail >"$D/plfail.out" 2>&1
t0=$SECONDS
check "-e local: a rank that exits 1 at step 2 ends the 2-rank job FAILED (not RUNNING on the other's 600 s step)" \
    test "$(run_wait_final 150 plfail)" = FAILED
diag "FAILED $((SECONDS - t0)) s after the submission"
mtc experiment logs plfail >"$D/plfail.log"
check "  the log names the rank and its status, as srun does" \
    grep -qE '^mtc: rank 1 \(pid [0-9]+\) exited with status 1; stopping the other ranks$' "$D/plfail.log"
check "  the rank's own last line is there" grep -q '^rank 1: failing at step 2 as asked' "$D/plfail.log"
check "  the run's exit status is the rank's" grep -q 'end .*, exit status 1$' "$D/plfail.log"
LTD=$(mtc experiment status plfail --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["taskDir"])')
check "  no rank of it is left running" wait_for 30 no_ranks "$LTD"

mtc run --command "$PY $PROG --steps 20 --fail-at 2 --fail-rank 1" -n 2 \
    --experiment-name psfail >"$D/psfail.out" 2>&1
check "srun, 2 nodes: the same rank exit ends the job FAILED (--kill-on-bad-exit)" \
    test "$(run_wait_final 180 psfail)" = FAILED
events() { event_texts cp "$1" "$2"; } # TYPE TEXT: descriptions of cluster cp's events
check "  a TRAINING_FAILED event with exit status 1 and the rank's last line" \
    wait_for 30 eval '[ -n "$(events TRAINING_FAILED "(experiment psfail) FAILED (exit status 1); last line: rank 1: failing at step 2 as asked")" ]'
diag "$(events TRAINING_FAILED psfail)"

# --- goodput of rows that hold only step and loss (issue 41) ---------------------------
mtc run --command "$PY $PROG --steps 80 --sleep 0.2 --plain-metrics" -n 2 \
    --experiment-name pgood >"$D/pgood.out" 2>&1
check "a DDP program writing rows of only step and loss completes" test "$(run_wait_final 300 pgood)" = COMPLETED
MF=$(mtc experiment status pgood --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["logDir"])')/metrics.jsonl
check "  its rows hold only step and loss (80 of them)" python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 80 and all(sorted(r) == ["loss", "step"] for r in rows), rows[:2]' "$MF"
diag "$(mtc experiment status pgood | grep -E '^- (Goodput|Time):')"
check "  mtc experiment status: goodput above 30% and at most 100% (80 steps of 0.2 s and more)" \
    python3 -c '
import json, sys
p = json.loads(sys.argv[1])["progress"]
assert p["step"] == 80 and 0.3 < p["goodput"] <= 1 and p["productiveSeconds"] >= 16, p' \
    "$(mtc experiment status pgood --json)"
check "  and its text line is not 0.0%" bash -c "mtc experiment status pgood | grep -E '^- Goodput: ' | grep -vq 'Goodput: 0.0%'"
api GET "$JOBS?pageSize=50"
check "  the trainingJob (mtcd's monitor, reading as the file grew): the same range" python3 -c '
import json, sys
j = [j for j in json.loads(sys.argv[1])["trainingJobs"] if j.get("experimentName") == "pgood"][0]
p = j["progress"]
print("# trainingJob goodput %.3f, productive %.1f s of %.1f s" % (p["goodput"], p["productiveSeconds"], p["wallSeconds"]))
assert 0.3 < p["goodput"] <= 1, p' "$BODY"

done_testing
