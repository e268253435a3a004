#!/usr/bin/env bash
# hosts_run: a recipe across hosts — `mtc run -n 2` on a cluster of test hosts
# (1 login + 2 compute) runs the trainer's two MPI ranks on the two compute
# hosts, each from the copy mtc put in its /var/lib/mtc, talking TCP between
# the hosts' own addresses on the cluster's network; its losses equal a
# 1-host run with the same global batch (to float tolerance). Containers:
# the plugin is copied to every host, `srun -N2 --container-image` from the
# controller runs in the image on both compute hosts and leaves nothing
# mounted there, and `mtc run -i` of a trainer image completes across them.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
. "$(dirname "$0")/hosts_setup.inc"
. "$(dirname "$0")/run_setup.inc"
D=$T_DIR

t_extra_cleanup() { hosts_cleanup; }
check "3 test hosts up" testhosts_up 3
[ "$T_FAILED" -eq 0 ] || done_testing
H=("" "${TESTHOSTS_ADDRS[@]}")
check "mtcd starts, listening on the bridge for the agents" \
    start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$(free_port)"
cat >"$D/spec.json" <<JSON
{"displayName": "recipes across hosts",
 "ssh": {"user": "root", "keyFile": "$TESTHOSTS_KEY"},
 "controller": {"address": "$TESTHOSTS_CTL_ADDR"},
 "experimentRoot": "$D",
 "nodePools": [
   {"id": "login", "machineSpec": {"machineType": "host"},
    "scalingSpec": {"minNodeCount": 1, "maxNodeCount": 1}, "hosts": ["${H[1]}"]},
   {"id": "cpu", "machineSpec": {"machineType": "host"},
    "scalingSpec": {"minNodeCount": 2, "maxNodeCount": 2}, "hosts": ["${H[2]}", "${H[3]}"]}],
 "orchestratorSpec": {"slurmSpec": {"loginNodePoolId": "login",
   "partitions": [{"id": "cpu", "nodePoolIds": ["cpu"]}], "defaultPartitionId": "cpu"}}}
JSON
check "cluster on 3 hosts created" mtc cluster create -f "$D/spec.json" --id hr
[ "$T_FAILED" -eq 0 ] || done_testing
eval "$(mtc env hr)"
NET=$(python3 -c 'import ipaddress, sys; print(ipaddress.ip_interface(sys.argv[1] + "/24").network)' "$TESTHOSTS_CTL_ADDR")
check "mtc env names the hosts' network for MPI ($MTC_MPI_NETWORK)" test "${MTC_MPI_NETWORK:-}" = "$NET"
check "mtc env names the shared experiment root ($MTC_EXPERIMENT_ROOT)" test "${MTC_EXPERIMENT_ROOT:-}" = "$D"
check "mtc env names the trainer copied to the hosts ($MTC_TRAINER)" \
    bash -c '[[ "$MTC_TRAINER" == /var/lib/mtc/*/bin/mtc-train ]]'
for i in 2 3; do
    check "host $i has the trainer, identical to the build's" \
        testhost_exec "$i" cmp -s "$MTC_TRAINER" "$B/bin/mtc-train"
done

# --- containers: the plugin on every host, an image run from the controller
CU=${MTC_TRAINER#/var/lib/mtc/}; CU=${CU%%/*}
for i in 1 2 3; do
    check "host $i has the container plugin, identical to the build's" \
        testhost_exec "$i" cmp -s "/var/lib/mtc/$CU/lib/spank_mtc.so" "$B/lib/mtc/spank_mtc.so"
done
# a tiny root: dash as /bin/sh, cat, and an os-release of its own
mkdir -p "$D/root/bin" "$D/root/etc"
for f in /bin/dash /bin/cat; do
    cp "$f" "$D/root/bin/"
    for l in $(ldd "$f" | grep -o '/[^ ]*'); do mkdir -p "$D/root${l%/*}"; cp -L "$l" "$D/root$l"; done
done
ln -s dash "$D/root/bin/sh"
echo 'PRETTY_NAME="mtc hosts_run image"' >"$D/root/etc/os-release"
check "tiny image imported" mtc image import "$D/root" -o "$D/tiny.sqsh"
srun -N2 -l --container-image="$D/tiny.sqsh" cat /etc/os-release >"$D/srun.out" 2>&1
check "srun -N2 --container-image from the controller: both nodes print the image's file" \
    test "$(grep -c '^[01]: PRETTY_NAME="mtc hosts_run image"$' "$D/srun.out")" = 2
sed 's/^/# /' "$D/srun.out"
# what the job mounted on each host (its own mount namespace) is gone after it
no_container_mounts() { ! testhost_exec "$1" grep -q " /var/lib/mtc/$CU/containers/" /proc/self/mountinfo; }
for i in 2 3; do
    check "host $i: nothing left mounted under /var/lib/mtc/<uid>/containers" \
        wait_for 20 no_container_mounts "$i"
    # the sweep follows the unmount: wait for it like the mount check
    check "host $i: the job's container directory swept" \
        wait_for 20 bash -c '[ -z "$(ls -A "$1" 2>/dev/null)" ]' _ "$TESTHOSTS_DIR/h$i/var-lib-mtc/$CU/containers/jobs"
done

check "tiny corpus tokenized" run_corpus "$D/data"
STEPS=120
run_recipe "$D/pt.json" "$STEPS" 1000

# $1: experiment name, $2: nodes
submit() {
    mtc run -e slurm --slurm-type local -p cpu -d "$D/work" --data-dir "$D/data" \
        -s "$D/pt.json" -n "$2" --experiment-name "$1" >"$D/$1.out" 2>&1
}
submit two 2
rc=$?
check "mtc run -n 2 submits" test $rc -eq 0
run_or_stop $rc "$D/two.out"
TD2=$(sed -n 's/^- Local Directory: //p' "$D/two.out")
check "the job script runs MPI over TCP on the cluster's network" \
    grep -q "OMPI_MCA_btl_tcp_if_include='$NET'" "$TD2/sbatch.sh"
check "the job script runs the hosts' trainer" grep -q "^TRAIN=('$MTC_TRAINER'" "$TD2/sbatch.sh"
# while it runs: a trainer rank on each compute host, with a TCP connection
# to the other host's address
rank_talks() { # host i, peer j
    testhost_exec "$1" ss -Htnp state established 2>/dev/null |
        awk -v peer="${H[$2]}" '$4 ~ "^" peer ":" && /mtc-train/' | grep -q .
}
check "rank on host 2 talks TCP to host 3" wait_for 60 rank_talks 2 3
check "rank on host 3 talks TCP to host 2" wait_for 10 rank_talks 3 2
ST=$(run_wait_final 240 two)
check "2-host run completes (state $ST)" test "$ST" = COMPLETED
check "its job ran on both compute nodes" grep -q "on hr-cpu-\[0-1\]" "$TD2"/*.log

submit one 1
rc=$?
check "mtc run -n 1 submits" test $rc -eq 0
run_or_stop $rc "$D/one.out"
ST=$(run_wait_final 240 one)
check "1-host run completes (state $ST)" test "$ST" = COMPLETED
TD1=$(sed -n 's/^- Local Directory: //p' "$D/one.out")
check "2 hosts match 1 host with the same global batch (float tolerance)" \
    python3 - "$TD1/logs/metrics.jsonl" "$TD2/logs/metrics.jsonl" "$STEPS" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
n = int(sys.argv[3])
assert [x["step"] for x in a] == [x["step"] for x in b] == list(range(1, n + 1)), (len(a), len(b))
d = max(abs(x["loss"] - y["loss"]) for x, y in zip(a, b))
assert d < 1e-4, "loss diff %g" % d
print("# %d steps, max loss diff %.3g, final loss %.4f" % (n, d, a[-1]["loss"]))
PY

# the recipe in a trainer image, across both hosts
check "trainer image built" mtc image build-trainer -o "$D/trainer.sqsh"
run_recipe "$D/short.json" 10 1000
mtc run -e slurm --slurm-type local -p cpu -d "$D/work" --data-dir "$D/data" \
    -s "$D/short.json" -n 2 -i "$D/trainer.sqsh" --experiment-name img >"$D/img.out" 2>&1
rc=$?
check "mtc run -n 2 -i IMAGE submits" test $rc -eq 0
run_or_stop $rc "$D/img.out"
ST=$(run_wait_final 240 img)
check "2-host run in the image completes (state $ST)" test "$ST" = COMPLETED
for i in 2 3; do
    check "host $i: nothing left mounted after the image run" wait_for 20 no_container_mounts "$i"
done

check "delete" mtc cluster delete hr
for i in 1 2 3; do check "host $i clean after delete" host_clean "$i"; done
check "the controller's /etc/mtc/<uid> (plugstack.conf) removed by delete" test ! -e "/etc/mtc/$CU"
done_testing
