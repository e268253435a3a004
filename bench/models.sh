#!/usr/bin/env bash
# Model registry benchmark: registering a checkpoint of BENCH_MB (default 256)
# MiB of weights through mtcd (hash + copy into blobs + hard links) vs `cp -r`
# of the same directory (the baseline), then registering the same weights again
# (hashed, not copied: the time and the disk it adds), and exporting a version
# as stored (a copy out) vs `cp -r`.
. "$(dirname "$0")/lib.inc"
MB=${BENCH_MB:-256}
cleanup() {
    bench_stop_pids
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$MTC_HOME"
ms() { date +%s%3N; }
kib() { du -sk "$1" | cut -f1; }

# a checkpoint the registry accepts: random weights (not a model mtc-train loads)
CK=$W/ck/step_00000001
mkdir -p "$CK"
head -c $((MB * 1024 * 1024)) /dev/urandom >"$CK/params.bin"
echo '{"step":1}' >"$CK/meta.json"
echo ok >"$CK/DONE"
sync

bench_start_mtcd || { echo "mtcd does not start"; exit 1; }
t0=$(ms)
cp -r "$CK" "$W/copy" && sync
TCP=$(($(ms) - t0))
rm -rf "$W/copy"
t0=$(ms)
mtc models upload "$CK" --name bench >/dev/null || { echo "upload failed"; exit 1; }
sync
T1=$(($(ms) - t0))
U1=$(kib "$MTC_HOME/models")
t0=$(ms)
mtc models upload "$CK" --name bench-again >/dev/null || { echo "second upload failed"; exit 1; }
sync
T2=$(($(ms) - t0))
U2=$(kib "$MTC_HOME/models")
t0=$(ms)
mtc models export bench@1 "$W/out" >/dev/null || { echo "export failed"; exit 1; }
sync
TE=$(($(ms) - t0))

echo "model registry, ${MB} MiB of weights (one params.bin)"
printf "  cp -r (baseline)             %6d ms\n" "$TCP"
printf "  upload (hash, copy, link)    %6d ms   %.2fx cp -r\n" "$T1" "$(echo "$T1 / $TCP" | bc -l)"
printf "  same weights again           %6d ms   %.2fx the first upload; disk +%d KiB (first: %d KiB)\n" \
    "$T2" "$(echo "$T2 / $T1" | bc -l)" $((U2 - U1)) "$U1"
printf "  export as stored (copy out)  %6d ms   %.2fx cp -r\n" "$TE" "$(echo "$TE / $TCP" | bc -l)"
