#!/usr/bin/env bash
# train_speed: forward+backward tokens/s, achieved FLOP/s and MFU against this
# machine's measured sgemm peak, and peak RSS, for gpt2-124m (B=4 T=64) and
# tiny-llama, tiny-gemma2, tiny-gemma3 (the same shapes: B=8 T=256); then Gemma 2's sliding
# window: tiny-gemma2 at T=1024 with its local layers' window at 256 (4x shorter than the
# sequence) vs the same model with full attention in every layer (window 0). Compiles
# bench/train_speed.c with the Makefile's trainer flags.
set -eu
cd "$(dirname "$0")/.."
B=$(basename "${MTC_BUILD:-build}")
[ -f "$B/libmtctrain.a" ] || make -s "$B/libmtctrain.a"
mkdir -p "$B/bench"
cc -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -Isrc -fopenmp -fno-trapping-math \
    -fvect-cost-model=dynamic \
    -I/usr/include/x86_64-linux-gnu/openblas-pthread $(mpicc --showme:compile 2>/dev/null) \
    -o "$B/bench/train_speed" bench/train_speed.c "$B/libmtctrain.a" \
    -fopenmp -lopenblas -ljansson $(mpicc --showme:link 2>/dev/null) -lcrypto -lpthread -lm
bin=$B/bench/train_speed
echo "threads: OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset} nproc=$(nproc)"
line=$("$bin" sgemm 2048)
peak=$(echo "$line" | awk '{print $2}')
echo "sgemm peak (2048^3, all threads): $peak GFLOP/s  [$line]"
"$bin" model gpt2-124m 4 64 ${STEPS:-5} "$peak"
"$bin" model tiny-llama 8 256 ${STEPS:-5} "$peak"
"$bin" model tiny-gemma2 8 256 ${STEPS:-5} "$peak"
"$bin" model tiny-gemma3 8 256 ${STEPS:-5} "$peak"
echo "sliding window: tiny-gemma2 B=2 T=1024, local layers' window 256, vs full attention"
"$bin" model tiny-gemma2 2 1024 ${STEPS:-5} "$peak" '{"max_seq":1024,"window":256}'
"$bin" model tiny-gemma2 2 1024 ${STEPS:-5} "$peak" '{"max_seq":1024,"window":0}'
