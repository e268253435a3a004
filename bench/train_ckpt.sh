#!/usr/bin/env bash
# train_ckpt: what an asynchronous checkpoint costs the step loop. Trains a model
# of ~5M parameters (61 MB per checkpoint: weights + two AdamW moments) with a
# checkpoint every 10 steps and reports, from mtc-train's own accounting:
#   stall per async checkpoint (memcpy into the staging buffer + any wait for the
#   previous write, when checkpoints come faster than the background writer —
#   reported apart) vs the time the final, synchronous checkpoint write takes
#   (goal: stall < 5% of it), and the synchronous write throughput vs `dd` with
#   fsync on the same disk. Knobs: CKPT_DIR (default a temp dir on /tmp's disk),
#   BENCH_STEPS, BENCH_DMODEL.
set -u
. "$(dirname "$0")/../tests/integration/train_setup.inc"
B=${MTC_BUILD:-build}
BIN=$B/bin/mtc-train
[ -x "$BIN" ] || { echo "bench train_ckpt: $BIN missing (run make)"; exit 1; }
W=$(mktemp -d "${CKPT_DIR:-/tmp}/mtc-bench-ckpt.XXXXXX")
trap 'rm -rf "$W"' EXIT
STEPS=${BENCH_STEPS:-60}
DM=${BENCH_DMODEL:-320}
train_shards "$W/data" 100000
CFG="{\"n_layer\":4,\"d_model\":$DM,\"n_head\":4,\"d_ff\":$((4 * DM)),\"vocab_size\":512,\"max_seq\":32}"
start=$(date +%s.%N)
"$BIN" --model tiny-gpt2 --config "$CFG" --data "$W/data" --steps "$STEPS" --batch 2 --seq 32 \
    --checkpoint-every 10 --keep 2 --log-every 100000 --checkpoint-dir "$W/ck" >/dev/null 2>"$W/err" ||
    { cat "$W/err"; exit 1; }
end=$(date +%s.%N)
line=$(grep "checkpoints:" "$W/err")
echo "$line"
stall=$(sed -E 's/.*stall ([0-9.]+) s each.*/\1/' <<<"$line")
copy=$(sed -E 's/.*snapshot copy ([0-9.]+) s.*/\1/' <<<"$line")
wait=$(sed -E 's/.*previous write ([0-9.]+) s.*/\1/' <<<"$line")
sync=$(sed -E 's/.*synchronous write ([0-9.]+) s.*/\1/' <<<"$line")
mb=$(sed -E 's/.*\(([0-9.]+) MB, ([0-9.]+) MB\/s\).*/\1/' <<<"$line")
ckrate=$(sed -E 's/.*\(([0-9.]+) MB, ([0-9.]+) MB\/s\).*/\2/' <<<"$line")
mbi=$(printf '%.0f' "$mb")
ddout=$(dd if=/dev/zero of="$W/dd.bin" bs=1M count="$mbi" conv=fsync 2>&1 | tail -1)
ddsec=$(sed -E 's/.*copied, ([0-9.]+) s.*/\1/' <<<"$ddout")
awk -v st="$stall" -v cp="$copy" -v wt="$wait" -v sy="$sync" -v ck="$ckrate" -v mb="$mbi" \
    -v dd="$ddsec" -v t0="$start" -v t1="$end" -v steps="$STEPS" 'BEGIN {
    printf "run: %d steps in %.1f s\n", steps, t1 - t0
    printf "stall per async checkpoint: %.4f s = %.1f%% of a synchronous write (%.3f s)\n", st, 100*st/sy, sy
    printf "  of which snapshot copy %.4f s (%.1f%%), waiting for the previous write %.4f s\n", cp, 100*cp/sy, wt
    printf "checkpoint write: %.0f MB/s; dd %d MB + fsync: %.0f MB/s (ratio %.2f)\n", ck, mb, mb/dd, ck/(mb/dd)
}'
