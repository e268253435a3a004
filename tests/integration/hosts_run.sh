#!/usr/bin/env bash
# hosts_run: a recipe across hosts — `mtc run -n 2` on a cluster of test hosts
# (1 login + 2 compute) runs the trainer's two MPI ranks on the two compute
# hosts, each from the copy mtc put in its /var/lib/mtc, talking TCP between
# the hosts' own addresses on the cluster's network; its losses equal a
# 1-host run with the same global batch (to float tolerance). Containers:
# the plugin is copied to every host, `srun -N2 --container-image` from the
# controller runs in the image on both compute hosts and leaves nothing
# mounted there, and `mtc run -i` of a trainer image completes across them.
# Registry images: a docker-registry on the bridge's address (the hosts'
# view of this machine), `srun -N2 --container-image=REGISTRY#test/app:1`
# runs on both hosts with one pull into the cache on the experiment root, and
# the cloud guide's conversion job (sbatch, `enroot import`, a PATH with no
# enroot) finds mtc's enroot on the host and writes an image srun then runs.
# A run registers its checkpoint from its host (the hosts' mtc, mtcd's TCP
# listener, a registrar token that may do nothing else); the model is served
# by an endpoint with 2 replicas on the hosts, which survives the kill -9 of
# one.
# test: uses mtc-dirs (its test hosts bind-mount their own dirs on this machine's
# /var/lib/mtc, /etc/mtc and /run/mtc: deb_package's purge removing them unmounts those)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/testhosts.inc"
. "$(dirname "$0")/hosts_setup.inc"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/registry.inc"
D=$T_DIR

t_extra_cleanup() { hosts_cleanup; }
check "3 test hosts up" testhosts_up 3
[ "$T_FAILED" -eq 0 ] || done_testing
H=("" "${TESTHOSTS_ADDRS[@]}")
check "mtcd starts, listening on the bridge for the agents" \
    start_mtcd --listen "$TESTHOSTS_CTL_ADDR:$(free_port)"
hosts_cpu_spec "recipes across hosts" 2 3 >"$D/spec.json"
# a spec user (nobody, as every host has it): mtc-host's users op runs on
# each host at preflight and finds it as the spec says
python3 - "$D/spec.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); s["users"] = [{"name": "nobody", "uid": 65534, "gid": 65534}]
json.dump(s, open(sys.argv[1], "w"))
PY
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

# --- a registry image on the hosts: a docker-registry on the bridge's address
# (the hosts reach this machine there, not at its 127.0.0.1), a tiny image
# pushed with skopeo; each host's plugin has the host's mtc pull it into the
# cache on the shared experiment root: one pull for both hosts
reg_image() {
    run_rootfs "$D/rroot" cat sh && tar -C "$D/rroot" -cf "$D/base.tar" . &&
        oci_layout "$D/v1" v1 amd64 &&
        reg_push "$D/v1" "$TESTHOSTS_CTL_ADDR:$RP/test/app:1" --dest-tls-verify=false
}
for tool in docker-registry skopeo; do
    command -v $tool >/dev/null || { skip "$tool is not installed (scripts/setup)"; T_NOREG=1; }
done
if [ -z "${T_NOREG:-}" ]; then
    RP=$(free_port)
    reg_config reg "$TESTHOSTS_CTL_ADDR" "$RP"
    check "a registry on the bridge's address ($TESTHOSTS_CTL_ADDR:$RP)" \
        reg_start reg "$TESTHOSTS_CTL_ADDR" "$RP" http
    check "skopeo pushes test/app:1 to it" reg_image || sed 's/^/# /' "$D/push.log"
    APP="$TESTHOSTS_CTL_ADDR:$RP#test/app:1"
    check "the hosts' plugstack.conf: the host's mtc pulls into the cache on the experiment root" \
        testhost_exec 2 grep -q " pull=/var/lib/mtc/$CU/bin/mtc cache=$D/.mtc-images " "/etc/mtc/$CU/etc/plugstack.conf"
    ENROOT_ALLOW_HTTP=1 srun -N2 -l --container-image="$APP" cat /etc/app-version >"$D/reg.out" 2>&1
    check "srun -N2 --container-image=REGISTRY#test/app:1: both hosts run the image" \
        test "$(grep -c '^[01]: v1 amd64$' "$D/reg.out")" = 2 || sed 's/^/# /' "$D/reg.out"
    check "... pulled once for the two hosts (the shared cache's pulls.log)" \
        test "$(grep -c " $APP\$" "$D/.mtc-images/pulls.log" 2>/dev/null)" = 1
    # the cloud guide's conversion job: enroot on the job's PATH on the host
    # (mtc's, appended by the plugin: plugstack.conf's path=), though the
    # submitter's PATH has none
    mkdir -p "$D/uhome"
    printf '%s\n' '#!/bin/bash' 'echo "enroot: $(command -v enroot)"' \
        "ENROOT_MAX_PROCESSORS=\$(( \$(nproc) / 2 )) enroot import -o \${HOME}/my_app.sqsh docker://$APP" \
        >"$D/convert.sh"
    J=$(env PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$D/uhome" ENROOT_ALLOW_HTTP=1 \
        sbatch --parsable -o "$D/convert.out" "$D/convert.sh")
    job_ended() { scontrol show job "$1" 2>/dev/null | grep -qE 'JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)'; }
    wait_for 120 job_ended "$J"
    check "the conversion job (enroot import -o \$HOME/my_app.sqsh docker://…) completes on a host" \
        bash -c "scontrol show job '$J' | grep -q JobState=COMPLETED && test -s '$D/uhome/my_app.sqsh'" ||
        sed 's/^/# /' "$D/convert.out"
    check "... with mtc's enroot from the host's /var/lib/mtc/<uid>/path on the job's PATH" \
        grep -qx "enroot: /var/lib/mtc/$CU/path/enroot" "$D/convert.out"
    check "srun --container-image= of the result on a host" \
        test "$(srun --container-image="$D/uhome/my_app.sqsh" cat /etc/app-version)" = "v1 amd64"
fi

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

# --- the run registered itself from its host, over TCP -------------------------
MV=$(mtc models show one --json 2>/dev/null)
check "the 1-host run's checkpoint is registered as model one (from its run on hr)" python3 -c "
import json,sys; v=json.loads(sys.argv[1]); l=v['lineage']
assert l['cluster']=='hr' and l['taskDir']==sys.argv[2], l" "$MV" "$TD1"
check "its job registered through mtcd's TCP listener with the hosts' mtc" \
    grep -q "^    MTC_URL='http://$TESTHOSTS_CTL_ADDR:[0-9]*' MTC_TOKEN=\"\$REGISTER_TOKEN\" '/var/lib/mtc/$CU/bin/mtc' " "$TD1/sbatch.sh"
check "... not the controller's socket, and no token written down" \
    bash -c "! grep -q 'MTC_HOME=' '$TD1/sbatch.sh' && ! grep -rq 'mtc_[0-9a-f]\{48\}' '$TD1'"
mtc token list --json >"$D/tokens.json"
check "the registrar token is listed with its scope (model one, run $TD1)" python3 -c "
import json,sys; t=[x for x in json.load(open(sys.argv[1]))['tokens'] if x['role']=='registrar']
assert any(x['cluster']=='hr' and x['scope']['model']=='one' and x['scope']['run']==sys.argv[2] for x in t), t" "$D/tokens.json" "$TD1"
# what a registrar token may do: mint one for run "two" as model "scoped"
ckdir() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]+'/config.json'))['checkpoint']['dir'])" "$1"; }
CK1=$(ckdir "$TD1"); CK2=$(ckdir "$TD2")
api POST /v1/tokens "$(python3 -c "import json,sys; print(json.dumps({'role':'registrar','cluster':'hr','project':'local','location':'local','model':'scoped','run':sys.argv[1],'checkpoint':sys.argv[2]}))" "$TD2" "$CK2")"
RTOK=$(python3 -c "import json,sys; print(json.loads(sys.argv[1]).get('token',''))" "$BODY")
check "an admin mints a registrar token for run two as model scoped" test -n "$RTOK"
URL=$(sed -n "s/^export MTC_HOSTS_URL='\(.*\)'$/\1/p" <(mtc env hr))
tcp() { # METHOD PATH [BODY] with the registrar token → HTTP status
    curl -s -o "$D/tcp.out" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $RTOK" \
        -H 'Content-Type: application/json' ${3:+--data-binary "$3"} "$URL$2"
}
M=/v1beta1/projects/local/locations/local/models
up() { echo "{\"modelId\":\"$1\",\"model\":{\"artifactUri\":\"$2\",\"sourceRun\":\"$3\"}}"; }
check "a registrar token lists no clusters (403)" test "$(tcp GET /v1beta1/projects/local/locations/local/modelDevelopmentClusters)" = 403
check "... uploads into no other model (403)" test "$(tcp POST "$M:upload" "$(up other "$CK2" "$TD2")")" = 403
check "... from no other run (403)" test "$(tcp POST "$M:upload" "$(up scoped "$CK1" "$TD1")")" = 403
check "... from no path outside its run (403)" test "$(tcp POST "$M:upload" "$(up scoped /etc "$TD2")")" = 403
check "... but registers its run (200, an operation)" test "$(tcp POST "$M:upload" "$(up scoped "$CK2" "$TD2")")" = 200
OPN=$(python3 -c "import json; print(json.load(open('$D/tcp.out'))['name'])")
op_done() { tcp GET "/v1/$OPN" >/dev/null && grep -q '"done": *true' "$D/tcp.out"; }
check "... and reads its upload's operation until done" wait_for 60 op_done
check "... and its model (scoped@1)" test "$(tcp GET "$M/scoped@1")" = 200
check "... once: a second upload of the run is refused (400 precondition)" \
    test "$(tcp POST "$M:upload" "$(up scoped "$CK2" "$TD2")")" = 400

# --- an endpoint on the hosts: 2 replicas, one killed -------------------------
E=/v1beta1/projects/local/locations/local/endpoints
out=$(mtc endpoints create hep 2>&1)
check "endpoint created" grep -q "created endpoint hep" <<<"$out"
out=$(mtc endpoints deploy hep --model one --cluster hr --min 2 --max 2 2>&1)
check "model one deployed on cluster hr (2 replicas)" grep -q "deployed one@1 as d1 on endpoint hep (cluster hr, 2-2 replicas)" <<<"$out"
check "... the version copied to the shared storage once ($D/.mtc/models)" \
    bash -c "ls '$D/.mtc/models'/*/.staged >/dev/null && [ \$(ls '$D/.mtc/models' | wc -l) -eq 1 ]"
ready2() {
    api GET "$E/hep"
    python3 -c "
import json,sys; d=json.loads(sys.argv[1])['deployedModels'][0]
sys.exit(0 if len(d['replicas'])==2 and d['readyReplicaCount']==2 else 1)" "$BODY"
}
check "both replicas READY (mtc-serve on the hosts, /health 200)" wait_for 120 ready2
REPS=$(python3 -c "
import json,sys; print(' '.join(r['id']+'='+r['address'] for r in json.loads(sys.argv[1])['deployedModels'][0]['replicas']))" "$BODY")
echo "# replicas: $REPS"
check "the replicas are addressed by their nodes' NodeAddr (compute hosts' addresses)" python3 -c "
import sys; a=[x.split('=')[1].rsplit(':',1)[0] for x in sys.argv[1].split()]
assert len(a)==2 and set(a)<=set(sys.argv[2:]), a" "$REPS" "${H[2]}" "${H[3]}"
complete() { api POST "$E/hep/v1/completions" '{"prompt":"the cat","max_tokens":8,"temperature":0}'; [ "$HTTP_STATUS" = 200 ] && grep -q '"text"' <<<"$BODY"; }
check "a completion through mtcd is answered by a replica on a host" complete
A1=${REPS#*=}; A1=${A1%% *}; R1=${REPS%%=*}
check "... and directly at the replica's address (its served name, one@1)" \
    bash -c "curl -sf -H 'Content-Type: application/json' -d '{\"model\":\"one@1\",\"prompt\":\"the cat\",\"max_tokens\":8}' http://$A1/v1/completions | grep -q '\"text\"'"
# kill -9 the first replica's mtc-serve: the process listening on its port on its host
HI=2; [ "${A1%:*}" = "${H[3]}" ] && HI=3
PID=$(testhost_exec "$HI" ss -Htlnp "sport = :${A1##*:}" | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)
check "replica $R1's mtc-serve found on host $HI (pid ${PID:-none})" test -n "$PID"
[ -n "$PID" ] && kill -9 "$PID"
ok=0
for i in 1 2 3 4 5 6; do complete && ok=$((ok + 1)); done
check "after the kill -9, requests are still answered ($ok/6)" test "$ok" = 6
lost() { api GET "$E/hep"; ! grep -q "\"$R1\"" <<<"$BODY" && ready2; }
check "replica $R1 replaced: 2 READY replicas again" wait_for 120 lost
api GET "/v1beta1/projects/local/locations/local/modelDevelopmentClusters/hr"
check "... with the event naming it" python3 -c "
import json,sys; ev=json.loads(sys.argv[1]).get('clusterEvents',[])
assert any(e['eventType'] in ('ENDPOINT_REPLICA_LOST','ENDPOINT_REPLICA_UNHEALTHY') and 'replica '+sys.argv[2]+' ' in e['description'] for e in ev), ev[-5:]" "$BODY" "$R1"
check "endpoint deleted" mtc endpoints delete hep
check "... its replicas' jobs leave the queue" wait_for 30 absent mtc-endpoint-hep -- squeue -h -o %j
check "... and the copy on the shared storage is removed" bash -c "[ -z \"\$(ls -A '$D/.mtc/models')\" ]"

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
