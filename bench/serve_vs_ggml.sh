#!/usr/bin/env bash
# serve_vs_ggml: mtc-serve's single-stream decode against ggml's examples/gpt-2 on the same
# GPT-2 124M weights (random init, made here) and the same 27-token prompt: ms per new token,
# prefill ms, and the ratio of speeds, per dtype (mtc f32/bf16/q8_0 against ggml
# f32/f16/q8_0). ggml is not part of mtc: GGML_SRC names a ggml source tree (bench/README.md
# says how to get one), built out of tree in $GGML_BUILD. Weights go to ggml's file format
# through bench/ggml_convert.c (q8_0: ggml's gpt-2-quantize), and the greedy tokens of
# both are compared at f32 (bench/greedy_ids.c) before anything is timed.
# Env: GGML_SRC (required), GGML_BUILD (/tmp/mtc-ggml-build), DTYPES ("f32 bf16 q8_0"),
# THREADS (2), RUNS (5), NEW (128), GPT2_ENCODER (GPT-2's encoder.json).
set -eu
cd "$(dirname "$0")/.."
if [ -z "${GGML_SRC:-}" ] || [ ! -f "${GGML_SRC:-}/examples/gpt-2/main-backend.cpp" ]; then
    echo "serve_vs_ggml: set GGML_SRC to a ggml source tree (git clone https://github.com/ggml-org/ggml; bench/README.md)" >&2
    exit 2
fi
ENC=${GPT2_ENCODER:-${MTC_SHARED_DATA:-../shared/data}/gpt2-tokenizer/encoder.json}
if [ ! -f "$ENC" ]; then
    echo "serve_vs_ggml: GPT-2's encoder.json not found at $ENC (set GPT2_ENCODER)" >&2
    exit 2
fi
ENC=$(realpath "$ENC")
B=$(basename "${MTC_BUILD:-build}")
GB=${GGML_BUILD:-/tmp/mtc-ggml-build}
DTYPES=${DTYPES:-f32 bf16 q8_0}
THREADS=${THREADS:-2}
RUNS=${RUNS:-5}
NEW=${NEW:-128}

[ -f "$B/libmtctrain.a" ] && [ -x "$B/bin/mtc-serve" ] && [ -x "$B/bin/mtc-train" ] ||
    make -s "$B/libmtctrain.a" "$B/bin/mtc-serve" "$B/bin/mtc-train"
mkdir -p "$B/bench"
for p in ggml_convert greedy_ids; do
    cc -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -Isrc -fopenmp -fno-trapping-math \
        -I/usr/include/x86_64-linux-gnu/openblas-pthread $(mpicc --showme:compile 2>/dev/null) \
        -o "$B/bench/$p" "bench/$p.c" "$B/libmtctrain.a" \
        -fopenmp -lopenblas -ljansson $(mpicc --showme:link 2>/dev/null) -lcrypto -lpthread -lm
done
echo "building ggml's gpt-2 example from $GGML_SRC in $GB ($(git -C "$GGML_SRC" rev-parse --short HEAD 2>/dev/null || echo 'not a git tree'))"
cmake -S "$GGML_SRC" -B "$GB" -DCMAKE_BUILD_TYPE=Release -DGGML_BUILD_TESTS=OFF \
    -DGGML_BUILD_EXAMPLES=ON >"$GB.cmake.log" 2>&1 || { cat "$GB.cmake.log"; exit 1; }
cmake --build "$GB" -j2 --target gpt-2-backend gpt-2-quantize >"$GB.build.log" 2>&1 ||
    { tail -30 "$GB.build.log"; exit 1; }
GGML=$GB/bin/gpt-2-backend

export PATH=$PWD/$B/bin:$PATH
W=$(mktemp -d /tmp/mtc-bench-ggml.XXXXXX)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT

# the model: gpt2-124m's random init (one step at lr 0, as train_random_checkpoint), GPT-2's
# tokenizer recorded so that mtc-serve's end-of-text is ggml's (50256)
. tests/integration/train_setup.inc
train_shards "$W/data" 20000
OMP_NUM_THREADS=$THREADS mtc-train --model gpt2-124m --seq 32 --batch 1 --steps 1 --lr 0 --min-lr 0 \
    --log-every 1000 --tokenizer "$ENC" --data "$W/data" --checkpoint-every 1 \
    --checkpoint-dir "$W/ck" >"$W/train.log" 2>&1 || { cat "$W/train.log"; exit 1; }
"$B/bench/ggml_convert" "$W/ck" "$ENC" "$W/f32.bin" f32 >/dev/null
"$B/bench/ggml_convert" "$W/ck" "$ENC" "$W/f16.bin" f16 >/dev/null
"$GB/bin/gpt-2-quantize" "$W/f32.bin" "$W/q8_0.bin" q8_0 >"$W/quantize.log" 2>&1 ||
    { cat "$W/quantize.log"; exit 1; }

# 27 words, each one GPT-2 token (ggml's tokenizer matches whole words, ours is real BPE:
# the same ids either way; ggml checks them itself with -tt)
PROMPT="The quick brown fox jumps over the lazy dog while the old man reads a book about the history of the river and the small town near"
IDS=464,2068,7586,21831,18045,625,262,16931,3290,981,262,1468,582,9743,257,1492,546,262,2106,286,262,7850,290,262,1402,3240,1474
echo "$PROMPT => $IDS" >"$W/tt.txt"

# ggml_run TYPE N OUT: ggml's gpt-2 on the prompt, N new tokens, greedy (top_k 1)
ggml_run() {
    "$GGML" -m "$W/$1.bin" -t "$THREADS" -s 1 -c 256 -b 32 --top_k 1 --ignore-eos \
        -tt "$W/tt.txt" -p "$PROMPT" -n "$2" >"$3" 2>"$3.err" || { cat "$3.err"; return 1; }
    grep -q " 0 tests failed out of 1 tests" "$3.err" ||
        { echo "ggml tokenized the prompt differently:"; cat "$3.err"; return 1; }
}
ms() { sed -n 's/^main:  predict time = *\([0-9.]*\) ms.*/\1/p' "$1"; }

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), nproc $(nproc --all)"
echo "gpt2-124m (random init), prompt 27 tokens, $NEW new tokens, greedy, $THREADS threads"
# the same model? mtc's greedy tokens against ggml's bytes, at each ggml type
OMP_NUM_THREADS=$THREADS "$B/bench/greedy_ids" "$W/ck" "$NEW" "$IDS" >"$W/mtc.ids"
for t in f32 f16 q8_0; do
    ggml_run $t "$NEW" "$W/check.$t"
    python3 - "$ENC" "$W/mtc.ids" "$W/check.$t" "$t" "$PROMPT" <<'PY'
import json, sys
enc, ids, out, t, prompt = sys.argv[1:]
# GPT-2's byte-level alphabet back to bytes
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
dec = {chr(c): b for b, c in zip(bs, cs)}
vocab = {v: bytes(dec[ch] for ch in k) for k, v in json.load(open(enc, encoding="utf-8")).items()}
mine = [int(x) for x in open(ids).read().split("ids", 1)[1].split()]
raw = open(out, "rb").read()
head = raw.index(b"first 8 tokens:")
raw = raw[raw.index(b"\n\n", head) + 2:raw.rindex(b"\n\nmain:     load time")]
assert raw.startswith(prompt.encode()), "ggml's output does not start with the prompt"
theirs = raw[len(prompt):]
pos = same = 0
for tok in mine:
    b = vocab[tok]
    if theirs[pos:pos + len(b)] != b:
        break
    pos, same = pos + len(b), same + 1
full = same == len(mine) and pos == len(theirs)
print(f"  check: ggml {t:4s} greedy text = mtc f32's {len(mine)} greedy tokens: "
      + ("yes, all" if full else f"the first {same}"))
sys.exit(0 if full or t != "f32" else 1)
PY
done

serves() { mtc-serve --help 2>&1 | grep -q -- --dtype && mtc-serve --help 2>&1 | grep -qw -- "$1"; }
# mtc_request PORT: one greedy completion of the prompt's ids; prints prefill ms and decode
# ms/token from the server's own histograms (arrival → first token, arrival → last token)
mtc_request() {
    python3 - "http://127.0.0.1:$1" "$IDS" "$NEW" <<'PY'
import json, sys, urllib.request
U, ids, N = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], int(sys.argv[3])
def metrics():
    text = urllib.request.urlopen(U + "/metrics").read().decode()
    v = {l.split()[0]: float(l.split()[-1]) for l in text.splitlines() if l and l[0] != "#"}
    return v["mtc_serve_time_to_first_token_seconds_sum"], v["mtc_serve_request_duration_seconds_sum"]
f0, d0 = metrics()
body = json.dumps({"model": "ck", "prompt": ids, "max_tokens": N, "temperature": 0}).encode()
r = urllib.request.Request(U + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
n = json.load(urllib.request.urlopen(r, timeout=3600))["usage"]["completion_tokens"]
f1, d1 = metrics()
print(f"{(f1 - f0) * 1e3:.2f} {(d1 - d0 - (f1 - f0)) * 1e3 / max(1, n - 1):.3f} {n}")
PY
}
# best X: the smallest (the run the other work on this shared machine disturbed least)
best() { tr ' ' '\n' | grep . | sort -g | head -1; }

printf "  %-12s %-26s %-26s %s\n" "mtc / ggml" "decode ms/token mtc  ggml" "prefill ms  mtc    ggml" "mtc/ggml speed: decode, prefill"
for d in $DTYPES; do
    case $d in f32) g=f32 ;; bf16 | f16) g=f16 ;; q8_0) g=q8_0 ;; *) echo "  $d: unknown dtype"; continue ;; esac
    run_mtc=1 flag=
    if mtc-serve --help 2>&1 | grep -q -- --dtype; then
        serves "$d" && flag="--dtype $d" || run_mtc=0
    elif [ "$d" != f32 ]; then
        run_mtc=0
    fi
    if [ $run_mtc = 1 ]; then
        # OMP_NUM_THREADS as well: --threads is set on mtc-serve's main thread, not on the
        # engine thread that runs the OpenMP regions (without it they use every core);
        # OMP_WAIT_POLICY passive unless set, as docs/serve.md advises on a shared machine
        # shellcheck disable=SC2086
        OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} mtc-serve --model "$W/ck" --listen 127.0.0.1:0 --max-batch 1 --ctx 256 --threads "$THREADS" \
            --served-name ck $flag >"$W/serve.out" 2>"$W/serve.err" &
        PID=$!
        for _ in $(seq 600); do grep -q serving "$W/serve.out" 2>/dev/null && break; sleep 0.1; done
        port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$W/serve.out")
        [ -n "$port" ] || { cat "$W/serve.err"; exit 1; }
        mtc_request "$port" >/dev/null # warm-up
    fi
    md= mp= gd= gp= gn= ntok=
    for r in $(seq "$RUNS"); do # interleaved: the machine's load hits both alike
        ggml_run $g 1 "$W/g1"
        ggml_run $g $((NEW + 1)) "$W/gN"
        p1=$(ms "$W/g1") pN=$(ms "$W/gN")
        gp="$gp $p1" gn="$gn $pN" gd="$gd $(echo "($pN - $p1) / $NEW" | bc -l)"
        if [ $run_mtc = 1 ]; then
            read -r p dd n < <(mtc_request "$port")
            mp="$mp $p" md="$md $dd" ntok=$n
        fi
    done
    if [ $run_mtc = 1 ]; then
        kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
    fi
    GP=$(echo "$gp" | best)
    GD=$(echo "($(echo "$gn" | best) - $GP) / $NEW" | bc -l) # best full run less best prefill
    if [ $run_mtc = 1 ]; then
        MD=$(echo "$md" | best) MP=$(echo "$mp" | best)
        printf "  %-12s %8.2f  %8.2f       %8.1f  %8.1f         %5.2fx, %5.2fx\n" "$d / $g" "$MD" "$GD" "$MP" "$GP" \
            "$(echo "$GD / $MD" | bc -l)" "$(echo "$GP / $MP" | bc -l)"
        [ "$ntok" = "$NEW" ] || echo "    (mtc stopped at end-of-text after $ntok tokens)"
        echo "    runs: mtc decode$md; ggml decode$(printf ' %.2f' $gd); mtc prefill$mp; ggml prefill$gp"
    else
        printf "  %-12s %8s  %8.2f       %8s  %8.1f         (mtc-serve has no --dtype %s: not measured)\n" \
            "$d / $g" - "$GD" - "$GP" "$d"
        echo "    runs: ggml decode$(printf ' %.2f' $gd); ggml prefill$gp"
    fi
done
echo "  (best of $RUNS interleaved runs each; speed ratio = ggml time / mtc time, above 1: mtc faster; ggml's"
echo "   decode = (its best predict time for $((NEW + 1)) new tokens - its best for 1) / $NEW, prefill = for 1;"
echo "   mtc's from mtc-serve's metrics: prefill = time to first token, decode = the rest / (n - 1))"
