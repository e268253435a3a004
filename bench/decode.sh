#!/usr/bin/env bash
# decode: one stream's decoding against the memory-bandwidth bound, per weight dtype, and what
# bf16 and q8_0 cost in answers. (1) bench/decode_speed.c: a STREAM triad and a read-only sum
# over 128 MiB arrays, then gpt2-124m (random-init weights) with a 27-token prompt and 128 new
# tokens at f32, bf16 and q8_0 — prefill ms, ms/token, bytes of weights + KV read per token,
# their rate as a fraction of the triad's, the speed-up over f32. (2) bench/decode_quality.c:
# a small GPT-2 trained here for a minute or two on ../shared/data/tinyshakespeare.txt (all but
# its last 100 kB), its held-out loss through the decode path per dtype, greedy tokens vs f32.
# OMP_NUM_THREADS (default 2, the issue's comparison), REPEAT (default 2) runs of (1).
set -eu
cd "$(dirname "$0")/.."
B=$(basename "${MTC_BUILD:-build}")
[ -f "$B/libmtctrain.a" ] && [ -x "$B/bin/mtc-train" ] || make -s "$B/libmtctrain.a" "$B/bin/mtc-train"
mkdir -p "$B/bench"
for p in decode_speed decode_quality; do
    cc -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -Isrc -fopenmp -fno-trapping-math \
        -I/usr/include/x86_64-linux-gnu/openblas-pthread $(mpicc --showme:compile 2>/dev/null) \
        -o "$B/bench/$p" bench/$p.c "$B/libmtctrain.a" \
        -fopenmp -lopenblas -ljansson $(mpicc --showme:link 2>/dev/null) -lcrypto -lpthread -lm
done
export PATH=$PWD/$B/bin:$PATH
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} # prompts: a spinning OpenMP team starves on a shared machine
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), nproc $(nproc --all), OMP_NUM_THREADS $OMP_NUM_THREADS, OMP_WAIT_POLICY $OMP_WAIT_POLICY"
echo "-- speed"
for _ in $(seq "${REPEAT:-2}"); do
    "$B/bench/decode_speed" "${PRESET:-gpt2-124m}" 27 128
done

echo "-- quality"
TEXT=${TEXT:-../shared/data/tinyshakespeare.txt}
[ -f "$TEXT" ] || { echo "no $TEXT: quality skipped"; exit 0; }
W=$(mktemp -d /tmp/mtc-bench-decode.XXXXXX)
trap 'rm -rf "$W"' EXIT
HELD=100000
head -c $(($(stat -c %s "$TEXT") - HELD)) "$TEXT" >"$W/train.txt"
mtc-train tokenizer train --vocab-size 512 --input "$W/train.txt" --output "$W/tok.json" 2>/dev/null
mtc-train prepare --tokenizer "$W/tok.json" --input "$W/train.txt" --output "$W/data" --val-fraction 0.05 >/dev/null 2>&1
CFG='{"n_layer":4,"d_model":128,"n_head":4,"d_ff":512,"vocab_size":512,"max_seq":128}'
t0=$(date +%s)
mtc-train --model tiny-gpt2 --config "$CFG" --seq 128 --batch 8 --steps ${STEPS:-400} --lr 3e-3 \
    --log-every 1000 --tokenizer "$W/tok.json" --data "$W/data" --checkpoint-every ${STEPS:-400} \
    --checkpoint-dir "$W/ckpt" >/dev/null 2>&1
echo "trained 4x128 GPT-2 (vocab 512) for ${STEPS:-400} steps in $(($(date +%s) - t0)) s"
"$B/bench/decode_quality" "$W/ckpt" "$W/tok.json" "$TEXT" $HELD
