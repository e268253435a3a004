#!/usr/bin/env bash
# Registry images (docs/containers.md, "Images from a registry"): a
# BENCH_PULL_MB (default 256) MB image — one layer of incompressible data
# over a small root — pushed to Debian's docker-registry on loopback, then,
# BENCH_PULL_TRIALS (default 3) of each, interleaved:
#  - `skopeo copy docker://… dir:X`: the download alone (the floor)
#  - `mtc image import docker://… -o X.sqsh`: pull + checks + flatten + mksquashfs
#  - `mtc image pull REF --cache C` into an empty cache (what a step's first use costs)
#  - the same again (a cache hit: one manifest request; goal < 0.5 s)
#  - 8 `mtc image pull` at once into one empty cache (8 nodes' first use of
#    an image: the digest's lock), pulls counted (goal 1), wall time vs one
# medians in seconds and the ratios to the floor. The registry is stopped by
# its pid on exit; the work directory is removed (BENCH_KEEP=1 keeps it).
for t in skopeo docker-registry mksquashfs; do
    command -v $t >/dev/null || { echo "skipped: $t is not installed (scripts/setup)"; exit 0; }
done
# shellcheck source=bench/lib.inc
. "$(dirname "$0")/lib.inc"
export LC_ALL=C
MB=${BENCH_PULL_MB:-256}
TRIALS=${BENCH_PULL_TRIALS:-3}
trap 'bench_stop_pids; [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$W"' EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$W/reg.yml" <<EOF
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $W/reg}}
http: {addr: 127.0.0.1:$PORT}
EOF
docker-registry serve "$W/reg.yml" >"$W/reg.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/v2/" && break; sleep 0.1; done

# the image: dash + cat as a root, and MB of random bytes
mkdir -p "$W/root/usr/bin" "$W/root/data"
cp /bin/dash "$W/root/usr/bin/sh"
head -c "${MB}M" /dev/urandom >"$W/root/data/blob"
tar -C "$W/root" -cf "$W/layer.tar" .
python3 - "$W" <<'PY'
import hashlib, json, os, sys
w = sys.argv[1]; d = w + "/oci"; os.makedirs(d + "/blobs/sha256", exist_ok=True)
def blob_file(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for c in iter(lambda: f.read(1 << 20), b""): h.update(c)
    os.rename(p, f"{d}/blobs/sha256/{h.hexdigest()}")
    return {"digest": "sha256:" + h.hexdigest(), "size": os.path.getsize(f"{d}/blobs/sha256/{h.hexdigest()}")}
def blob(b):
    h = hashlib.sha256(b).hexdigest(); open(f"{d}/blobs/sha256/{h}", "wb").write(b)
    return {"digest": "sha256:" + h, "size": len(b)}
l = blob_file(w + "/layer.tar")
c = blob(json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                     "rootfs": {"type": "layers", "diff_ids": [l["digest"]]}}).encode())
m = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
     "config": dict(c, mediaType="application/vnd.oci.image.config.v1+json"),
     "layers": [dict(l, mediaType="application/vnd.oci.image.layer.v1.tar")]}
md = blob(json.dumps(m).encode())
json.dump({"schemaVersion": 2, "manifests": [dict(md, mediaType=m["mediaType"],
          annotations={"org.opencontainers.image.ref.name": "t"})]}, open(d + "/index.json", "w"))
open(d + "/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
PY
skopeo copy --quiet --dest-tls-verify=false "oci:$W/oci:t" "docker://127.0.0.1:$PORT/bench/big:1" \
    >>"$W/bench.log" 2>&1 || { echo "failed: skopeo push (see $W/bench.log)"; BENCH_KEEP=1; exit 1; }
export ENROOT_ALLOW_HTTP=1
REF="127.0.0.1:$PORT#bench/big:1"

now() { date +%s.%N; }
t_floor() { rm -rf "$W/dir"; local a; a=$(now); skopeo copy --quiet --src-tls-verify=false \
    "docker://127.0.0.1:$PORT/bench/big:1" "dir:$W/dir" >>"$W/bench.log" 2>&1; echo "$(now) - $a" | bc; }
t_import() { rm -f "$W/x.sqsh"; local a; a=$(now); mtc image import "docker://$REF" -o "$W/x.sqsh" \
    >>"$W/bench.log" 2>&1; echo "$(now) - $a" | bc; }
t_first() { rm -rf "$W/cache"; local a; a=$(now); mtc image pull "$REF" --cache "$W/cache" \
    >>"$W/bench.log" 2>&1; echo "$(now) - $a" | bc; }
t_hit() { local a; a=$(now); mtc image pull "$REF" --cache "$W/cache" >>"$W/bench.log" 2>&1
    echo "$(now) - $a" | bc; }
t_eight() { rm -rf "$W/cache8"; local a i pids=(); a=$(now)
    for i in 1 2 3 4 5 6 7 8; do
        mtc image pull "$REF" --cache "$W/cache8" >>"$W/bench.log" 2>&1 &
        pids+=($!)
    done
    wait "${pids[@]}"; echo "$(now) - $a" | bc; }
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
F=() I=() P=() H=()
for _ in $(seq "$TRIALS"); do
    F+=("$(t_floor)") I+=("$(t_import)") P+=("$(t_first)") H+=("$(t_hit)")
done
f=$(printf '%s\n' "${F[@]}" | median) i=$(printf '%s\n' "${I[@]}" | median)
p=$(printf '%s\n' "${P[@]}" | median) h=$(printf '%s\n' "${H[@]}" | median)
printf 'image: %s MB (one incompressible layer), loopback registry, %s trials, medians\n' "$MB" "$TRIALS"
printf 'skopeo copy alone (floor)              %7.2f s\n' "$f"
printf 'mtc image import docker://… (pull+sqsh) %7.2f s  %.2fx the floor\n' "$i" "$(echo "$i / $f" | bc -l)"
printf 'mtc image pull, empty cache            %7.2f s  %.2fx the floor\n' "$p" "$(echo "$p / $f" | bc -l)"
e=$(t_eight)
n8=$(wc -l <"$W/cache8/pulls.log")
printf 'mtc image pull, 8 at once, empty cache %7.2f s  %.2fx one; pulls: %s (goal 1)\n' "$e" "$(echo "$e / $p" | bc -l)" "$n8"
printf 'mtc image pull, cache hit              %7.3f s  %.3fx the floor\n' "$h" "$(echo "$h / $f" | bc -l)"
