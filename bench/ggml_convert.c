/* ggml_convert: a GPT-2 model of mtc (a checkpoint directory, or a Hugging Face directory)
 * written as ggml's legacy GPT-2 file (examples/gpt-2 of github.com/ggml-org/ggml: magic,
 * hparams, vocab, then named tensors) at f32 or f16, for bench/serve_vs_ggml.sh; q8_0 is
 * made from the f32 file by ggml's own gpt-2-quantize. Links nothing of ggml.
 * Usage: ggml_convert MODEL ENCODER_JSON OUT f32|f16
 * ENCODER_JSON: GPT-2's encoder.json, whose byte-level strings become the file's vocab. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/train.h"

#define GGML_MAGIC 0x67676d6c
enum { T_F32 = 0, T_F16 = 1 }; // ggml_type and, for the header, ggml_ftype (ALL_F32, MOSTLY_F16)

/* Our (HF) names to ggml's, "%d" the layer. Every 2-D weight is (out,in) row-major here and
 * in ggml (ne[0] = in), so none is transposed. wide: stored at the file's type (ggml's
 * wtype); the others stay f32. */
static const struct {
    const char *ours, *ggml;
    int wide;
} names[] = {
    {"transformer.wte.weight", "model/wte", 1},
    {"transformer.wpe.weight", "model/wpe", 0},
    {"transformer.ln_f.weight", "model/ln_f/g", 0},
    {"transformer.ln_f.bias", "model/ln_f/b", 0},
    {"lm_head.weight", "model/lm_head", 1},
    {"transformer.h.%d.ln_1.weight", "model/h%d/ln_1/g", 0},
    {"transformer.h.%d.ln_1.bias", "model/h%d/ln_1/b", 0},
    {"transformer.h.%d.attn.c_attn.weight", "model/h%d/attn/c_attn/w", 1},
    {"transformer.h.%d.attn.c_attn.bias", "model/h%d/attn/c_attn/b", 0},
    {"transformer.h.%d.attn.c_proj.weight", "model/h%d/attn/c_proj/w", 1},
    {"transformer.h.%d.attn.c_proj.bias", "model/h%d/attn/c_proj/b", 0},
    {"transformer.h.%d.ln_2.weight", "model/h%d/ln_2/g", 0},
    {"transformer.h.%d.ln_2.bias", "model/h%d/ln_2/b", 0},
    {"transformer.h.%d.mlp.c_fc.weight", "model/h%d/mlp/c_fc/w", 1},
    {"transformer.h.%d.mlp.c_fc.bias", "model/h%d/mlp/c_fc/b", 0},
    {"transformer.h.%d.mlp.c_proj.weight", "model/h%d/mlp/c_proj/w", 1},
    {"transformer.h.%d.mlp.c_proj.bias", "model/h%d/mlp/c_proj/b", 0},
};

/* IEEE half from float, round to nearest even (subnormals and overflow included). */
static uint16_t to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, mag = x & 0x7fffffff;
    if (mag >= 0x7f800000) // inf, nan
        return (uint16_t)(sign | 0x7c00 | (mag > 0x7f800000 ? 0x200 : 0));
    if (mag >= 0x477ff000) // rounds to >= 65520: inf
        return (uint16_t)(sign | 0x7c00);
    if (mag < 0x38800000) { // half subnormal or zero: scale by 2^24 and round
        float a;
        memcpy(&a, &mag, 4);
        return (uint16_t)(sign | (uint32_t)__builtin_roundevenf(a * 16777216.0f));
    }
    uint32_t h = ((mag - 0x38000000) >> 13), rest = mag & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++;
    return (uint16_t)(sign | h);
}

/* GPT-2's bytes_to_unicode inverse: the byte a code point of encoder.json stands for, -1
 * for none. Printable Latin-1 stands for itself; 256+n for the n-th other byte. */
static int unicode_byte(unsigned cp)
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        if (printable && cp == (unsigned)b)
            return b;
        if (!printable && cp == 256u + (unsigned)n++)
            return b;
    }
    return -1;
}

/* encoder.json key → bytes into out (len into *n); -1 on a bad key. */
static int key_bytes(const char *k, unsigned char *out, size_t cap, size_t *n)
{
    const unsigned char *p = (const unsigned char *)k;
    *n = 0;
    while (*p) {
        unsigned cp;
        int extra = *p < 0x80 ? 0 : *p >= 0xf0 ? 3 : *p >= 0xe0 ? 2 : *p >= 0xc0 ? 1 : -1;
        if (extra < 0)
            return -1;
        cp = extra ? *p & (0x3f >> extra) : *p;
        for (p++; extra-- > 0; p++) {
            if ((*p & 0xc0) != 0x80)
                return -1;
            cp = cp << 6 | (*p & 0x3f);
        }
        int b = unicode_byte(cp);
        if (b < 0 || *n >= cap)
            return -1;
        out[(*n)++] = (unsigned char)b;
    }
    return 0;
}

static int put32(FILE *f, int32_t v)
{
    return fwrite(&v, 4, 1, f) == 1 ? 0 : -1;
}

/* One tensor: header (n_dims, name length, type, ne[0..n_dims)), name, data. rows may be
 * fewer than t's (wte: vocab_size of padded_vocab). */
static int put_tensor(FILE *f, const char *name, const struct model_tensor *t, int rows,
                      const float *w, int type)
{
    int cols = t->ndim == 2 ? t->shape[1] : 1;
    size_t n = (size_t)rows * cols;
    if (put32(f, t->ndim) < 0 || put32(f, (int32_t)strlen(name)) < 0 || put32(f, type) < 0)
        return -1;
    if (t->ndim == 2 ? put32(f, cols) < 0 || put32(f, rows) < 0 : put32(f, rows) < 0)
        return -1;
    if (fwrite(name, strlen(name), 1, f) != 1)
        return -1;
    if (type == T_F32)
        return fwrite(w, sizeof *w, n, f) == n ? 0 : -1;
    uint16_t buf[4096];
    for (size_t i = 0; i < n; i += 4096) {
        size_t k = n - i < 4096 ? n - i : 4096;
        for (size_t j = 0; j < k; j++)
            buf[j] = to_f16(w[i + j]);
        if (fwrite(buf, 2, k, f) != k)
            return -1;
    }
    return 0;
}

/* The ggml name of one of our tensors into out; -1 when it has none. */
static int ggml_name(const char *ours, char *out, size_t len, int *wide)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int layer = -1, used = 0;
        char want[128];
        if (strstr(names[i].ours, "%d")) {
            const char *dot = strncmp(ours, "transformer.h.", 14) ? NULL : ours + 14;
            if (!dot || sscanf(dot, "%d%n", &layer, &used) != 1)
                continue;
            snprintf(want, sizeof want, names[i].ours, layer);
            if (strcmp(want, ours))
                continue;
            snprintf(out, len, names[i].ggml, layer);
        } else if (strcmp(names[i].ours, ours) == 0) {
            snprintf(out, len, "%s", names[i].ggml);
        } else {
            continue;
        }
        *wide = names[i].wide;
        return 0;
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[4], "f32") && strcmp(argv[4], "f16"))) {
        fprintf(stderr, "usage: ggml_convert MODEL ENCODER_JSON OUT f32|f16\n");
        return 2;
    }
    mtc_error_t err;
    char dir[4096];
    struct model *m = interop_load_checkpoint(argv[1], dir, sizeof dir, &err);
    if (!m)
        m = interop_import_hf(argv[1], NULL, &err);
    if (!m) {
        fprintf(stderr, "ggml_convert: %s: %s\n", argv[1], err.text);
        return 1;
    }
    const struct model_config *c = model_cfg(m);
    if (c->family != MODEL_GPT2) {
        fprintf(stderr, "ggml_convert: %s: not a GPT-2 model\n", argv[1]);
        return 1;
    }
    json_error_t je;
    json_t *enc = json_load_file(argv[2], 0, &je);
    if (!json_is_object(enc) || (int)json_object_size(enc) < c->vocab_size) {
        fprintf(stderr, "ggml_convert: %s: %s\n", argv[2],
                enc ? "not an encoder.json with the model's vocab_size entries" : je.text);
        return 1;
    }
    // id → bytes
    unsigned char (*tok)[256] = calloc((size_t)c->vocab_size, 256);
    size_t *tlen = calloc((size_t)c->vocab_size, sizeof *tlen);
    const char *key;
    json_t *v;
    int seen = 0;
    json_object_foreach(enc, key, v) {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= c->vocab_size)
            continue;
        if (key_bytes(key, tok[id], 256, &tlen[id]) < 0) {
            fprintf(stderr, "ggml_convert: %s: entry %s is not GPT-2's byte encoding\n", argv[2],
                    key);
            return 1;
        }
        seen++;
    }
    if (seen != c->vocab_size) {
        fprintf(stderr, "ggml_convert: %s: %d of the model's %d ids\n", argv[2], seen,
                c->vocab_size);
        return 1;
    }
    int type = strcmp(argv[4], "f16") ? T_F32 : T_F16;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[3]);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        perror(tmp);
        return 1;
    }
    int bad = put32(f, GGML_MAGIC) | put32(f, c->vocab_size) | put32(f, c->max_seq) |
              put32(f, c->d_model) | put32(f, c->n_head) | put32(f, c->n_layer) | put32(f, type) |
              put32(f, c->vocab_size);
    for (int i = 0; i < c->vocab_size && !bad; i++)
        bad = put32(f, (int32_t)tlen[i]) < 0 || fwrite(tok[i], 1, tlen[i], f) != tlen[i];
    const float *p = model_params(m);
    for (int i = 0; i < model_ntensors(m) && !bad; i++) {
        const struct model_tensor *t = model_tensor(m, i);
        char gname[128];
        int wide;
        if (ggml_name(t->name, gname, sizeof gname, &wide) < 0) {
            fprintf(stderr, "ggml_convert: tensor %s has no ggml name\n", t->name);
            return 1;
        }
        int rows = t->shape[0] == c->padded_vocab ? c->vocab_size : t->shape[0];
        bad = put_tensor(f, gname, t, rows, p + t->offset, wide ? type : T_F32) < 0;
    }
    if (fclose(f) != 0 || bad || rename(tmp, argv[3]) != 0) {
        perror(argv[3]);
        remove(tmp);
        return 1;
    }
    printf("ggml_convert: %s (%s, %d tensors, vocab %d)\n", argv[3], argv[4], model_ntensors(m),
           c->vocab_size);
    free(tok);
    free(tlen);
    json_decref(enc);
    model_destroy(m);
    return 0;
}
