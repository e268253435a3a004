#!/usr/bin/env bash
# Prototype of the hosts provider's Slurm layout, by hand (docs/hosts-notes.md):
# this machine is the controller (munged + slurmctld, configless) and test hosts
# get, over ssh as the provider will, only the munge key; each runs munged and
# `slurmd --conf-server`. Asserts: the configless fetch needs libmunge's default
# socket; srun -N2 hostname shows both hosts' hostnames; sbatch from the login
# host (SLURM_CONF_SERVER, then a slurmd there); MPI over TCP across two hosts
# (srun --mpi=pmix); a host's kill -9 + restart; moving a node to a spare host.
# test: uses mtc-dirs (its test hosts bind-mount their own dirs on this machine's
# /var/lib/mtc, /etc/mtc and /run/mtc: deb_package's purge removing them unmounts those)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"

U=$(od -An -N4 -tx4 /dev/urandom | tr -d ' ') # cluster uid: unique per cluster
C=p${U:0:4}                                    # cluster name
RUN=/run/mtc/$U                                # same path on controller and hosts
SOCK=$RUN/munge/munge.socket.2                 # AuthInfo socket, everywhere
CTL=$T_DIR/ctl                                 # controller-only state
CTLD_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
PROBE=$B/tests/tools/ssh_probe
LOG=$T_DIR/ssh.log

t_extra_cleanup() {
    local p
    for p in "${T_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in $(pids_under "$T_DIR"); do
        [ "$(cat /proc/$p/comm 2>/dev/null)" = ssh ] && kill -TERM "$p" 2>/dev/null
    done
    testhosts_down
    for p in "${T_PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    done
    rm -rf "$RUN"
}
dg() { sed 's/^/# /' <<<"$1"; }
# remote command on host I through the ssh transport; prints its stdout only
R() {
    local i=$1 out
    shift
    out=$(timeout 120 "$PROBE" -s "$MTC_HOME/ssh" -k "$TESTHOSTS_KEY" -l "$LOG" -t 60000 \
        "${TESTHOSTS_ADDRS[$i]}" run "$*")
    grep -v '^[=!] ' <<<"$out"
    grep -q '^= run rc=0 ' <<<"$out" || { grep '^! ' <<<"$out" >&2; return 1; }
}
S() { SLURM_CONF=$CTL/slurm.conf timeout 60 "$@"; } # Slurm command on the controller
node_state() {
    local t0=$SECONDS st
    st=$(S sinfo -h -N -n "$1" -o %t 2>&1 | head -1)
    echo "$(date +%T) $1 '$st' $((SECONDS - t0))s" >>"$T_DIR/states"
    echo "$st"
}
idle() { [ "$(node_state "$1")" = idle ]; }

check "ssh_probe is built" test -x "$PROBE"
check "4 test hosts up (2 compute, 1 login, 1 spare)" testhosts_up 4
[ "$T_FAILED" -eq 0 ] || done_testing
CTL_ADDR=$TESTHOSTS_CTL_ADDR
N0=$C-gpu-0 N1=$C-gpu-1 NL=$C-login-0
read -r CPUS MEM < <(slurmd -C | sed -n 's/.*CPUs=\([0-9]*\) .*RealMemory=\([0-9]*\).*/\1 \2/p')
MEM=$((MEM / 8)) # several emulated hosts share this machine's memory

# --- controller: munged + slurmctld on this machine ---------------------------
mkdir -p "$CTL/state" "$RUN/munge" && chmod 0755 "$RUN" "$RUN/munge"
head -c 1024 /dev/urandom >"$CTL/munge.key" && chmod 0400 "$CTL/munge.key"
munged -F --socket="$SOCK" --key-file="$CTL/munge.key" --pid-file="$CTL/munged.pid" \
    --log-file="$CTL/munged.log" --seed-file="$CTL/munge.seed" </dev/null >/dev/null 2>&1 &
track_pid $!
check "controller munged up on $SOCK" wait_for 10 test -S "$SOCK"
node_line() { echo "NodeName=$1 NodeHostname=${TESTHOSTS_NAMES[$2]} NodeAddr=${TESTHOSTS_ADDRS[$2]} CPUs=$CPUS RealMemory=$MEM"; }
write_conf() { # $1 $2 $3: host index of gpu-0, gpu-1, login-0
    cat >"$CTL/slurm.conf" <<EOF
ClusterName=$C
SlurmctldHost=$(hostname -s)($CTL_ADDR)
SlurmctldPort=$CTLD_PORT
SlurmdPort=6818
SlurmctldParameters=enable_configless
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$CTL/state
SlurmctldPidFile=$CTL/slurmctld.pid
SlurmctldLogFile=$CTL/slurmctld.log
SlurmdSpoolDir=/var/lib/mtc/$U/spool
SlurmdPidFile=/run/mtc/$U/slurmd.pid
SlurmdLogFile=/var/lib/mtc/$U/log/slurmd.log
TmpFS=/run/mtc/$U/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=10
KillWait=5
InactiveLimit=0
$(node_line "$N0" "$1")
$(node_line "$N1" "$2")
$(node_line "$NL" "$3")
PartitionName=gpu Nodes=$N0,$N1 Default=YES State=UP
EOF
}
write_conf 1 2 3
SLURM_CONF=$CTL/slurm.conf slurmctld -D -i -f "$CTL/slurm.conf" </dev/null >"$CTL/slurmctld.out" 2>&1 &
track_pid $!
check "slurmctld answers" wait_for 30 bash -c "SLURM_CONF=$CTL/slurm.conf scontrol ping | grep -q UP"

# --- hosts: the munge key is the only file that travels ------------------------
for i in 1 2 3 4; do
    out=$(timeout 60 "$PROBE" -s "$MTC_HOME/ssh" -k "$TESTHOSTS_KEY" -l "$LOG" \
        "${TESTHOSTS_ADDRS[$i]}" secret-put "$CTL/munge.key" "/etc/mtc/$U/munge.key" 0400 2>&1)
    check "host $i: munge key copied 0400" grep -q '^= secret-put rc=0' <<<"$out"
done
check "the key is never in the ssh log" bash -c "! grep -qF '$(head -c 32 "$CTL/munge.key" | base64 | head -c 20)' '$LOG'"

# munged on a host: on the cluster's AuthInfo path (private /run/mtc)
start_munged() {
    R "$1" "install -d -m 0755 $RUN/munge $RUN/tmp /var/lib/mtc/$U/log /var/lib/mtc/$U/munge &&
        munged --socket=$SOCK --key-file=/etc/mtc/$U/munge.key --pid-file=$RUN/munge/munged.pid \
        --log-file=/var/lib/mtc/$U/log/munged.log --seed-file=/var/lib/mtc/$U/munge/seed \
        </dev/null >/dev/null 2>&1"
}
# the configless bootstrap uses libmunge's default socket: a symlink to ours
link_default_socket() { R "$1" "install -d -m 0755 /run/munge && ln -sfn $SOCK /run/munge/munge.socket.2"; }
start_slurmd() { # host, node
    R "$1" "slurmd --conf-server $CTL_ADDR:$CTLD_PORT -N $2 </dev/null >/dev/null 2>&1"
}

check "host 1: munged on $SOCK" start_munged 1
cred=$(munge -S "$SOCK" -s hello)
out=$(R 1 "echo '$cred' | unmunge -S $SOCK")
check "host 1: munged with the same key decodes the controller's credential" grep -q hello <<<"$out"
# pitfall: without the default socket the configless fetch cannot authenticate
out=$(R 1 "timeout 6 slurmd -D -v --conf-server $CTL_ADDR:$CTLD_PORT -N $N0 2>&1; true")
dg "$(grep -iE 'munge|fetch|config' <<<"$out" | head -5)"
check "without /run/munge/munge.socket.2 the configless fetch fails on munge" \
    grep -q 'munge.socket.2' <<<"$out"
check "  and slurmd does not register" test "$(node_state "$N0")" != idle

t0=$SECONDS
for i in 1 2; do
    check "host $i: default munge socket linked to the cluster's" link_default_socket "$i"
    [ "$i" = 1 ] || check "host $i: munged" start_munged "$i"
    check "host $i: slurmd --conf-server -N $C-gpu-$((i - 1))" start_slurmd "$i" "$C-gpu-$((i - 1))"
done
both_idle() { idle "$N0" && idle "$N1"; }
check "both compute nodes register (idle)" wait_for 60 both_idle
diag "slurmd start to idle: $((SECONDS - t0)) s"
out=$(R 1 "ls -l /run/slurm/conf; ls /var/lib/mtc/$U/spool/conf-cache")
dg "$out"
check "slurmd keeps the fetched config in its spool, /run/slurm/conf points there" \
    grep -q "/run/slurm/conf -> /var/lib/mtc/$U/spool/conf-cache" <<<"$out"

out=$(S srun -N2 hostname | sort)
dg "$out"
check "srun -N2 hostname prints the two hosts' hostnames" \
    test "$(echo $out)" = "$(printf '%s\n' "${TESTHOSTS_NAMES[1]}" "${TESTHOSTS_NAMES[2]}" | sort | xargs)"
out=$(S srun -N2 -l printenv SLURMD_NODENAME | sort)
check "node names stay <cluster>-<pool>-<i>" test "$(echo $out)" = "0: $N0 1: $N1"

# after the fetch slurmd authenticates with AuthInfo's socket, not the default one
check "host 1: default socket link removed" R 1 "rm /run/munge/munge.socket.2"
out=$(S srun -N2 hostname | sort | xargs)
check "  jobs still run (slurmd uses AuthInfo=socket=$SOCK after the fetch)" \
    test "$out" = "$(printf '%s\n' "${TESTHOSTS_NAMES[1]}" "${TESTHOSTS_NAMES[2]}" | sort | xargs)"
check "  link restored (a slurmd restart fetches again)" link_default_socket 1

# --- login host: client commands without a local slurm.conf -------------------
munge_up() { start_munged "$1" && link_default_socket "$1"; }
check "login host: munged + default socket" munge_up 3
out=$(R 3 "sinfo -h -o %P 2>&1; true")
check "login host without config or SLURM_CONF_SERVER: no cluster" bash -c "! grep -q gpu <<<'$out'"
out=$(R 3 "SLURM_CONF_SERVER=$CTL_ADDR:$CTLD_PORT sinfo -h -o '%P %D %t'")
dg "$out"
check "login host: SLURM_CONF_SERVER=ctl:port lets sinfo fetch the config" grep -q '^gpu\* 2 idle' <<<"$out"
mkdir -p "$T_DIR/jobs" && chmod 0777 "$T_DIR/jobs"
job=$(R 3 "cd $T_DIR/jobs && SLURM_CONF_SERVER=$CTL_ADDR:$CTLD_PORT sbatch --parsable -N1 -o out-%j.txt --wrap hostname")
check "login host: sbatch (SLURM_CONF_SERVER) queues job $job" test -n "$job"
check "  the job ran on a compute host" wait_for 30 grep -qE "^(${TESTHOSTS_NAMES[1]}|${TESTHOSTS_NAMES[2]})$" "$T_DIR/jobs/out-$job.txt"
check "login host: slurmd for $NL (in no partition)" start_slurmd 3 "$NL"
check "  $NL registers" wait_for 30 bash -c "SLURM_CONF=$CTL/slurm.conf scontrol show node $NL | grep -q 'State=IDLE'"
job=$(R 3 "cd $T_DIR/jobs && sbatch --parsable -N2 -o out-%j.txt --wrap 'srun hostname'")
check "login host with a slurmd: plain sbatch (config from /run/slurm/conf) queues job $job" test -n "$job"
check "  the job ran on both compute hosts" wait_for 30 bash -c "[ \$(sort -u '$T_DIR/jobs/out-$job.txt' | grep -cE '^(${TESTHOSTS_NAMES[1]}|${TESTHOSTS_NAMES[2]})$') = 2 ]"
out=$(S sinfo -h -o %N)
check "the login node is in no partition (no jobs land there)" bash -c "! grep -q login <<<'$out'"

# --- MPI across two hosts over TCP -------------------------------------------
cat >"$T_DIR/allreduce.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    int rank, size, sum = 0;
    char host[256];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    gethostname(host, sizeof(host));
    printf("rank %d/%d on %s sum %d\n", rank, size, host, sum);
    MPI_Finalize();
    return 0;
}
EOF
check "mpicc builds the allreduce" mpicc -o "$T_DIR/allreduce" "$T_DIR/allreduce.c"
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=$TESTHOSTS_PREFIX.0/24 OMPI_MCA_pml=ob1
out=$(S srun --mpi=pmix -N2 -n2 "$T_DIR/allreduce" 2>&1 | sort)
dg "$out"
check "srun --mpi=pmix -N2 -n2: both ranks, allreduce over TCP" \
    test "$(grep -c 'sum 3$' <<<"$out")" = 2
check "  the two ranks ran on the two hosts" \
    test "$(grep -oE "on (${TESTHOSTS_NAMES[1]}|${TESTHOSTS_NAMES[2]}) " <<<"$out" | sort -u | wc -l)" = 2
unset OMPI_MCA_btl OMPI_MCA_btl_tcp_if_include OMPI_MCA_pml

# --- kill -9 of every process on a host, then the provider's restart -----------
# (a node killed while a job is completing stays "comp" until slurmctld resends
# TERMINATE_JOB, up to a minute or two: start from idle nodes)
# (seen in 2 of the last 5 full suites, never alone: the nodes not idle for the whole
# wait after the 0.3 s MPI job, then idle — a step that did not report its end
# for minutes; it is reported here with the states seen, and the nodes cycled
# down/resume so the rest of the test still runs. The first wait is 20 s
# (60 s with T_WAIT_SCALE): the cycle, not the wait, is what ends it.)
if ! wait_for 20 both_idle; then
    diag "not idle after $((20 * ${T_WAIT_SCALE:-3})) s: $(S sinfo -h -N -o '%N %t %C' | xargs); states seen: $(tail -4 "$T_DIR/states" | tr '\n' ';')"
    S scontrol update nodename="$N0,$N1" state=down reason="hosts_proto: stuck after the MPI job"
    S scontrol update nodename="$N0,$N1" state=resume
fi
check "both nodes idle before the kill" wait_for 60 both_idle
check "host 2: kill -9 of every process" testhost_kill 2
check "  its /run/mtc and /run/munge are empty (like a reboot)" testhost_exec 2 bash -c \
    '[ -z "$(find /run/mtc /run/munge /run/slurm -mindepth 1)" ]'
testhost_boot 2
t0=$SECONDS
host_up() { munge_up "$1" && start_slurmd "$1" "$2"; }
check "host 2: sshd back; munged, default socket, slurmd started again" host_up 2 "$N1"
check "  $N1 idle again (kept its name, spool kept under /var/lib/mtc)" wait_for 120 idle "$N1"
diag "restart to idle: $((SECONDS - t0)) s"
out=$(S srun -N1 -w "$N1" hostname)
check "  jobs run there again" test "$out" = "${TESTHOSTS_NAMES[2]}"

# --- move a node to a spare host, keeping its name ------------------------------
check "host 2: slurmd of $N1 stopped" R 2 "kill \$(cat $RUN/slurmd.pid)"
check "host 4 (spare): munged + default socket" munge_up 4
out=$(S scontrol update NodeName="$N1" NodeAddr="${TESTHOSTS_ADDRS[4]}" NodeHostname="${TESTHOSTS_NAMES[4]}" 2>&1)
check "scontrol update NodeAddr/NodeHostname accepted ($out)" test -z "$out"
write_conf 1 4 3 # the provider also rewrites slurm.conf, or a restart undoes the move
check "host 4: slurmd -N $N1" start_slurmd 4 "$N1"
check "  $N1 idle on the spare host" wait_for 60 idle "$N1"
out=$(S scontrol show node "$N1" | grep -oE 'NodeAddr=[^ ]+|NodeHostName=[^ ]+' | xargs)
dg "$out"
check "  scontrol shows the new address and hostname" \
    test "$out" = "NodeAddr=${TESTHOSTS_ADDRS[4]} NodeHostName=${TESTHOSTS_NAMES[4]}"
out=$(S srun -N1 -w "$N1" hostname)
check "  srun -w $N1 runs on the spare host" test "$out" = "${TESTHOSTS_NAMES[4]}"
out=$(S srun -N2 hostname | sort | xargs)
check "  srun -N2 spans host 1 and the spare" test "$out" = "$(printf '%s\n' "${TESTHOSTS_NAMES[1]}" "${TESTHOSTS_NAMES[4]}" | sort | xargs)"
check "scontrol reconfigure with the rewritten slurm.conf" S scontrol reconfigure
on_spare() { [ "$(S scontrol show node "$N1" | grep -oE 'NodeAddr=[^ ]+')" = "NodeAddr=${TESTHOSTS_ADDRS[4]}" ] && idle "$N1"; }
check "  after it, $N1 idle at the spare host's address" wait_for 60 on_spare
out=$(S srun -N1 -w "$N1" hostname)
check "  the node stays on the spare host" test "$out" = "${TESTHOSTS_NAMES[4]}"

# --- what mtc wrote on a host -----------------------------------------------------
out=$(R 1 "find /var/lib/mtc /etc/mtc /run/mtc -maxdepth 2 | sort; ls -la /run/munge /run/slurm")
dg "$out"
done_testing
