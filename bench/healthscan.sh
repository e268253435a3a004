#!/usr/bin/env bash
# The health scanner's workload (mtc-scan) on this machine: wall time of each
# check for 2 and 4 ranks (mpirun, shared memory), and its efficiency — the
# pairwise ping-pong and 2-rank all_reduce bus bandwidth over OpenMPI's TCP
# transport on loopback against the raw TCP throughput of the same loopback
# link measured in the same run (one python sender → receiver, 256 MiB in
# 4 MiB writes), as a ratio. Namespace hosts with a tc-shaped link are not
# measured here (issue 17 leaves that to the scanner's hosts tests).
. "$(dirname "$0")/lib.inc"
trap 'rm -rf "$W"' EXIT
command -v mpirun >/dev/null || { echo "mpirun not installed"; exit 0; }
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN=(mpirun --oversubscribe --bind-to none)
now() { date +%s.%N; }

echo "# scan time (s), mpirun on one machine over shared memory, --max-bytes 16 MiB"
printf '%-10s %8s %8s\n' check 2-ranks 4-ranks
for c in pipeline pairs ring; do
    row=$c
    for n in 2 4; do
        t0=$(now)
        OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none \
            "${MPIRUN[@]}" -np $n mtc-scan $c >"$W/$c-$n.json" 2>/dev/null
        rc=$?
        row="$row $(python3 -c "print('%.2f%s' % ($(now) - $t0, '' if $rc == 0 else '(FAIL)'))")"
    done
    printf '%-10s %8s %8s\n' $row
done

raw=$(python3 - <<'PY'
import socket, threading, time
N, CH = 256 << 20, 4 << 20
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def recv():
    c, _ = srv.accept(); got = 0
    while got < N:
        b = c.recv(CH)
        if not b: break
        got += len(b)
    c.close()
t = threading.Thread(target=recv); t.start()
s = socket.create_connection(srv.getsockname()); buf = b"x" * CH
t0 = time.time()
for _ in range(N // CH): s.sendall(buf)
s.close(); t.join()
print("%.3f" % (N / (time.time() - t0) / 1e9))
PY
)
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo
"${MPIRUN[@]}" -np 2 mtc-scan pairs >"$W/tcp-pairs.json" 2>/dev/null
"${MPIRUN[@]}" -np 2 mtc-scan ring --max-bytes 16777216 >"$W/tcp-ring.json" 2>/dev/null
python3 - "$raw" "$W/tcp-pairs.json" "$W/tcp-ring.json" <<'PY'
import json, sys
raw = float(sys.argv[1])
pp = json.load(open(sys.argv[2]))["pairs"][0]["busGBps"]
ring = json.load(open(sys.argv[3]))["sizes"][-1]
print("# loopback TCP, 2 ranks: raw TCP (python, 256 MiB) %.3f GB/s" % raw)
print("pairs ping-pong (4 MiB)      %.3f GB/s  %.2fx raw TCP" % (pp, pp / raw))
print("all_reduce busbw (%d MiB)    %.3f GB/s  %.2fx raw TCP" % (ring["bytes"] >> 20, ring["allReduceBusGBps"], ring["allReduceBusGBps"] / raw))
print("all_gather busbw (%d MiB)    %.3f GB/s  %.2fx raw TCP" % (ring["bytes"] >> 20, ring["allGatherBusGBps"], ring["allGatherBusGBps"] / raw))
PY
