#!/usr/bin/env bash
# train_tokenizer: byte-level BPE figures on ../shared/data (skipped when absent) — GPT-2
# encode throughput and agreement with GPT-2's known ids, BPE training time, prepare time.
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
MT=${MTC_TRAIN:-$B/bin/mtc-train}
D=${MTC_SHARED_DATA:-../shared/data}
if [ ! -x "$MT" ]; then echo "skip: $MT not built"; exit 0; fi
if [ ! -f $D/tinyshakespeare.txt ] || [ ! -f $D/gpt2-tokenizer/encoder.json ]; then
    echo "skip: $D/tinyshakespeare.txt or gpt2-tokenizer absent"; exit 0
fi
tmp=$(mktemp -d /tmp/mtc-bench-tok.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
bytes=$(stat -c %s $D/tinyshakespeare.txt)
secs() { local s=$(date +%s.%N); "$@" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; return 1; }
         echo "$(date +%s.%N) - $s" | bc; }

t=$(secs "$MT" tokenizer encode --tokenizer $D/gpt2-tokenizer/encoder.json --input $D/tinyshakespeare.txt) || exit 1
n=$(wc -w <"$tmp/out")
# First line of tinyshakespeare through the real GPT-2 vocabulary (ids as tiktoken gives them).
want="5962 22307 25 198 8421 356 5120 597 2252 11 3285 502 2740 13 198 198 3237 25 198"
got=$(cut -d' ' -f1-19 "$tmp/out")
agree=$([ "$got" = "$want" ] && echo yes || echo "NO (got $got)")
printf 'gpt2 encode tinyshakespeare: %d bytes -> %d tokens in %.2f s (%.1f MB/s); agrees with GPT-2 ids: %s\n' \
    "$bytes" "$n" "$t" "$(echo "$bytes / $t / 1000000" | bc -l)" "$agree"
cp "$tmp/out" "$tmp/ids"
t2=$(secs "$MT" tokenizer decode --tokenizer $D/gpt2-tokenizer/encoder.json --input "$tmp/ids") || exit 1
cmp -s "$tmp/out" $D/tinyshakespeare.txt && rt=exact || rt=DIFFERS
printf 'gpt2 decode: %.2f s, round-trip %s\n' "$t2" "$rt"

t=$(secs "$MT" tokenizer train --vocab-size 4096 --input $D/tinyshakespeare.txt --output "$tmp/tok.json") || exit 1
printf 'bpe train vocab 4096 on tinyshakespeare: %.2f s\n' "$t"
t=$(secs "$MT" prepare --tokenizer "$tmp/tok.json" --input $D/tinyshakespeare.txt --output "$tmp/data" --val-fraction 0.1) || exit 1
printf 'prepare (4096 vocab): %.2f s; %s\n' "$t" "$(tail -1 "$tmp/err")"
