/* Fuzz harness: a tokenizer from bytes — a tokenizer.json (or a GPT-2 encoder.json whose
 * vocab.bpe is the bytes after the first NUL) is loaded, then a fixed sample and those
 * bytes are encoded and decoded. Every id encode returns must be below tok_vocab_size. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "train/data.h"

static char json_path[128], bpe_path[128];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_make_dir("tok");
    fuzz_path(json_path, sizeof json_path, "tokenizer.json");
    fuzz_path(bpe_path, sizeof bpe_path, "vocab.bpe");
    return 0;
}

static void encode(const struct tok *t, const char *s, size_t n)
{
    int32_t *ids = NULL;
    size_t nid = 0;
    mtc_error_t err;
    if (tok_encode(t, s, n, &ids, &nid, &err) < 0)
        return;
    for (size_t i = 0; i < nid; i++)
        if (ids[i] < 0 || ids[i] >= tok_vocab_size(t))
            abort(); /* encode only returns ids of the vocabulary */
    free(tok_decode(t, ids, nid));
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t jl = nul ? (size_t)(nul - data) : size;
    const char *rest = nul ? (const char *)nul + 1 : "";
    size_t rl = nul ? size - jl - 1 : 0;
    fuzz_put(json_path, data, jl);
    fuzz_put(bpe_path, rest, rl);
    mtc_error_t err;
    struct tok *t = tok_load(json_path, &err);
    if (!t)
        return 0;
    static const char sample[] =
        "Hello, world! It's 2024: naïve café — 12345 tokens\n\n  spaces\t<|endoftext|>"
        "<|start_header_id|>user<|end_header_id|>x<|eot_id|>";
    encode(t, sample, sizeof sample - 1);
    encode(t, rest, rl);
    tok_special(t, "<|endoftext|>");
    tok_eot(t);
    int32_t odd[] = {-1, 0, tok_vocab_size(t) - 1, tok_vocab_size(t), INT32_MAX};
    free(tok_decode(t, odd, sizeof odd / sizeof odd[0]));
    tok_destroy(t);
    return 0;
}
