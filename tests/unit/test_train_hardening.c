/* test_train_hardening: the trainer's file readers against malicious input (issue 8) — model
 * dimensions that wrap size computations (llm.c header, config.json, meta.json), shard
 * headers claiming 2^63 tokens, safetensors shapes whose byte size wraps, tokenizer ids far
 * beyond the vocabulary — each must fail with one clean line. Each malicious file is built
 * here; `test_train_hardening NAME` runs only the cases whose name contains NAME. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "train/train.h"

static char dir[64];
static const char *only;

static int want(const char *name)
{
    return !only || strstr(name, only);
}

static void write_raw(const char *path, const void *a, size_t na, const void *b, size_t nb)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    fwrite(a, 1, na, f);
    if (b && nb)
        fwrite(b, 1, nb, f);
    fclose(f);
}

static void write_text(const char *path, const char *s)
{
    write_raw(path, s, strlen(s), NULL, 0);
}

/* A failure is one line: non-empty, no newline. */
static int one_line(const mtc_error_t *e)
{
    return e->text[0] && !strchr(e->text, '\n');
}

/* ---- item 2: model dimensions ---- */

/* int sizes that wrap: 4*d_model and 3*d_model overflow int, and the parameter count of
 * this shape (1018 layers of width 1075014995, 1606460472 positions) wraps modulo 2^64 to
 * 188 floats — the importer allocated 752 bytes and read the file's 16 KiB of "weights"
 * into them (ASan: heap-buffer-overflow in fread). */
static const int32_t wrap_hdr[8] = {20240326, 3, 1606460472, 64, 1018, 1, 1075014995, 64};

static void test_llmc_wrap(void)
{
    if (!want("llmc"))
        return;
    char p[200];
    snprintf(p, sizeof p, "%s/wrap.llmc", dir);
    int32_t h[256] = {0};
    memcpy(h, wrap_hdr, sizeof wrap_hdr);
    static float body[4096]; // 16 KiB, far more than the wrapped 188 parameters
    write_raw(p, h, sizeof h, body, sizeof body);
    mtc_error_t err = {{0}};
    struct model *m = interop_import_llmc(p, NULL, &err);
    CHECK(!m && one_line(&err) && strstr(err.text, "wrap.llmc") && strstr(err.text, "limit"),
          "llm.c header with wrapping dimensions refused: %s", err.text);
    model_destroy(m);

    /* in-bounds dimensions, but the file holds 1 KiB of the 124M floats its header needs:
     * refused from the file size, before a 500 MB model is allocated */
    int32_t g[256] = {20240326, 3, 1024, 50257, 12, 12, 768, 50304};
    snprintf(p, sizeof p, "%s/short.llmc", dir);
    write_raw(p, g, sizeof g, body, 1024);
    m = interop_import_llmc(p, NULL, &err);
    CHECK(!m && one_line(&err) && strstr(err.text, "short.llmc") && strstr(err.text, "truncated"),
          "llm.c file shorter than its header's model refused: %s", err.text);
    model_destroy(m);
}

static void test_config_bounds(void)
{
    if (!want("config"))
        return;
    static const struct {
        const char *json, *field;
    } cases[] = {
        {"{\"d_model\":1090523771,\"n_head\":1,\"d_ff\":64}", "d_model"},
        {"{\"vocab_size\":2147483584}", "vocab_size"},
        {"{\"padded_vocab\":2147483584}", "padded_vocab"},
        {"{\"max_seq\":2080854279}", "max_seq"},
        {"{\"n_layer\":1000000}", "n_layer"},
        {"{\"d_ff\":2000000000}", "d_ff"},
        {"{\"n_embd\":1073741840,\"n_head\":16}", "d_model"},
        {"{\"rope_orig_max\":2147483647,\"rope_factor\":8}", "rope_orig_max"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct model_config c;
        mtc_error_t err = {{0}};
        model_preset(i == 7 ? "tiny-llama" : "tiny-gpt2", &c, &err);
        json_t *o = json_loads(cases[i].json, 0, NULL);
        int rc = model_config_apply_json(&c, o, &err);
        json_decref(o);
        CHECK(rc < 0 && one_line(&err) && strstr(err.text, cases[i].field) &&
                  strstr(err.text, "limit"),
              "config %s refused naming %s: %s", cases[i].json, cases[i].field, err.text);
    }
    /* the largest shapes stay representable: 2^24 vocab, 2^16 width, 1024 layers */
    struct model_config c;
    mtc_error_t err = {{0}};
    model_preset("llama3.1-8b", &c, &err);
    c.vocab_size = 1 << 24, c.padded_vocab = 0, c.d_model = 1 << 16, c.n_head = 512;
    c.n_kv_head = 128, c.d_ff = 1 << 18, c.n_layer = 1024;
    CHECK(model_config_check(&c, &err) == 0 && model_config_nparams(&c) > ((size_t)1 << 45),
          "the largest allowed shape passes and its size does not wrap: %s", err.text);

    /* the same wrapping shape through HF config.json and checkpoint meta.json */
    char d[200], p[300];
    snprintf(d, sizeof d, "%s/hf", dir);
    mtc_mkdir_p(d, 0755);
    snprintf(p, sizeof p, "%s/config.json", d);
    write_text(p, "{\"model_type\":\"gpt2\",\"vocab_size\":64,\"n_positions\":1606460472,"
                  "\"n_embd\":1075014995,\"n_layer\":1018,\"n_head\":1,\"n_inner\":5092684}");
    struct model *m = interop_import_hf(d, NULL, &err);
    CHECK(!m && one_line(&err) && strstr(err.text, "limit"),
          "HF config.json with wrapping dimensions refused: %s", err.text);
    model_destroy(m);

    snprintf(d, sizeof d, "%s/ck/step_00000000", dir);
    mtc_mkdir_p(d, 0755);
    snprintf(p, sizeof p, "%s/DONE", d);
    write_text(p, "ok\n");
    snprintf(p, sizeof p, "%s/meta.json", d);
    write_text(p, "{\"format\":\"mtc-checkpoint\",\"version\":1,\"step\":0,\"nparams\":188,"
                  "\"model\":{\"family\":\"gpt2\",\"vocab_size\":64,\"padded_vocab\":64,"
                  "\"max_seq\":1606460472,\"n_layer\":1018,\"n_head\":1,\"n_kv_head\":1,"
                  "\"d_model\":1075014995,\"d_ff\":5092684}}");
    snprintf(p, sizeof p, "%s/params.bin", d);
    static float body[188];
    write_raw(p, body, sizeof body, NULL, 0);
    CHECK(ckpt_read_config(d, &c, &err) < 0 && one_line(&err) && strstr(err.text, "limit"),
          "checkpoint meta.json with wrapping dimensions refused: %s", err.text);
    char got[4096];
    m = interop_load_checkpoint(d, got, sizeof got, &err);
    CHECK(!m && one_line(&err), "loading that checkpoint fails cleanly: %s", err.text);
    model_destroy(m);
}

/* ---- item 3: token shard header count ---- */

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void shard_header(unsigned char *h, int width, uint64_t count)
{
    memset(h, 0, SHARD_HEADER_BYTES);
    put_u32(h, SHARD_MAGIC);
    put_u32(h + 4, SHARD_VERSION);
    put_u32(h + 8, (uint32_t)width);
    put_u32(h + 16, (uint32_t)count);
    put_u32(h + 20, (uint32_t)(count >> 32));
}

static void test_shard_count(void)
{
    if (!want("shard"))
        return;
    unsigned char h[SHARD_HEADER_BYTES];
    char p[300];
    mtc_error_t err = {{0}};
    /* a 1 KiB file claiming 2^63 tokens: 1024 + 2^63 * 2 wraps to 1024, the file size */
    snprintf(p, sizeof p, "%s/huge.bin", dir);
    shard_header(h, 2, (uint64_t)1 << 63);
    write_raw(p, h, sizeof h, NULL, 0);
    size_t n = 0;
    int32_t *ids = shard_read(p, &n, &err);
    CHECK(!ids && one_line(&err) && strstr(err.text, "huge.bin") && strstr(err.text, "tokens"),
          "shard claiming 2^63 tokens in 1 KiB refused: %s", err.text);
    free(ids);
    CHECK(shard_parse_header(h, sizeof h, p, &(int){0}, &(uint64_t){0}, &err) < 0,
          "shard_parse_header refuses it too");
    /* width 4: 2^62 tokens also wrap to 0 bytes */
    shard_header(h, 4, (uint64_t)1 << 62);
    CHECK(shard_parse_header(h, sizeof h, p, &(int){0}, &(uint64_t){0}, &err) < 0,
          "uint32 shard claiming 2^62 tokens refused: %s", err.text);

    /* 2^63 + 9 tokens in 18 bytes: with --shuffle the window order (2^61 + 2 entries)
     * was allocated as 16 bytes and written past its end */
    char d[200];
    snprintf(d, sizeof d, "%s/shuf", dir);
    mtc_mkdir_p(d, 0755);
    snprintf(p, sizeof p, "%s/train_000000.bin", d);
    shard_header(h, 2, ((uint64_t)1 << 63) + 9);
    static const unsigned char toks[18] = {1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8, 0, 9, 0};
    write_raw(p, h, sizeof h, toks, sizeof toks);
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        struct loader *l = loader_create(d, "train", 1, 4, 0, 1, 1, shuffle, &err);
        int32_t x[4], y[4];
        int rc = l ? loader_next(l, x, y, &err) : -1;
        CHECK(!l && rc < 0 && one_line(&err) && strstr(err.text, "train_000000.bin"),
              "loader (shuffle %d) refuses the wrapping shard naming it: %s", shuffle, err.text);
        loader_destroy(l);
    }
}

/* ---- item 4: safetensors numel * dtype size ---- */

static void write_st(const char *path, const char *hdr, size_t datalen)
{
    unsigned char len8[8];
    size_t hl = strlen(hdr);
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    fwrite(len8, 1, 8, f);
    fwrite(hdr, 1, hl, f);
    for (size_t i = 0; i < datalen; i++)
        fputc(0, f);
    fclose(f);
}

static void test_safetensors_wrap(void)
{
    if (!want("safetensors"))
        return;
    static const char *const hdrs[] = {
        // 2^62 * 4 F32 elements = 2^64 bytes: wraps to the 0 bytes its offsets give
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}",
        // 2^32 * 2^32 elements: numel itself wraps to 0
        "{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}",
        // 2^61 * 2^3 * 2 bytes wraps to 0; a real tensor after it
        "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2305843009213693952,8],\"data_offsets\":[0,0]},"
        "\"v\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        // wraps to exactly the 8 data bytes: 2^62 + 2 F32 elements
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387906],\"data_offsets\":[0,8]}}",
    };
    for (size_t i = 0; i < sizeof hdrs / sizeof hdrs[0]; i++) {
        char p[200];
        snprintf(p, sizeof p, "%s/wrap%zu.safetensors", dir, i);
        write_st(p, hdrs[i], i >= 2 ? 8 : 0);
        mtc_error_t err = {{0}};
        struct st_file *f = st_open(p, &err);
        CHECK(!f && one_line(&err) && strstr(err.text, "tensor w") && strstr(err.text, "too large"),
              "safetensors shape whose byte size wraps refused (%zu): %s", i, err.text);
        st_close(f);
    }
}

/* ---- item 5: tokenizer ids ---- */

/* A valid byte-level tokenizer.json (tok_train on a small corpus) parsed back. */
static json_t *small_tokenizer(void)
{
    char p[200];
    snprintf(p, sizeof p, "%s/base_tok.json", dir);
    const char *text = "the cat sat on the mat; the dog sat on the log. ";
    mtc_error_t err;
    if (tok_train(text, strlen(text), 270, p, &err) < 0)
        return NULL;
    return json_load_file(p, 0, NULL);
}

static void check_tok(const char *name, const char *json, const char *id)
{
    char p[200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    write_text(p, json);
    mtc_error_t err = {{0}};
    struct tok *t = tok_load(p, &err);
    CHECK(!t && one_line(&err) && strstr(err.text, id) && strstr(err.text, "out of range"),
          "%s: token id %s refused in one line: %s", name, id, err.text);
    tok_destroy(t);
}

static void test_tokenizer_ids(void)
{
    if (!want("tokenizer"))
        return;
    /* 62 bytes: id 2^30 made tok_load allocate 12 GB (a pointer and a length per id) */
    const char *tiny = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"ab\":1073741824},\"merges\":[]}}";
    CHECK(strlen(tiny) == 62, "the tiny tokenizer.json is 62 bytes");
    check_tok("tiny_tok.json", tiny, "1073741824");

    json_t *base = small_tokenizer();
    CHECK(base != NULL, "base tokenizer trained");
    if (!base)
        return;
    char p[200];
    snprintf(p, sizeof p, "%s/base_tok.json", dir);
    mtc_error_t err = {{0}};
    struct tok *t = tok_load(p, &err);
    CHECK(t && tok_vocab_size(t) == 270, "the unmodified tokenizer loads: %s", err.text);
    tok_destroy(t);

    /* an id a million past a 270-entry vocabulary, in model.vocab */
    json_t *o = json_deep_copy(base);
    json_object_set_new(json_object_get(json_object_get(o, "model"), "vocab"), "zzz",
                        json_integer(1000000));
    char *s = json_dumps(o, 0);
    check_tok("far_vocab.json", s, "1000000");
    free(s);
    json_decref(o);

    /* an added token whose id does not fit an int (2^32 + 65 was read as 65) */
    o = json_deep_copy(base);
    json_array_append_new(
        json_object_get(o, "added_tokens"),
        json_pack("{s:I,s:s}", "id", (json_int_t)4294967361LL, "content", "<|pad|>"));
    s = json_dumps(o, 0);
    check_tok("wide_added.json", s, "4294967361");
    free(s);
    json_decref(o);

    /* a negative id */
    o = json_deep_copy(base);
    json_object_set_new(json_object_get(json_object_get(o, "model"), "vocab"), "zzz",
                        json_integer(-5));
    s = json_dumps(o, 0);
    check_tok("negative.json", s, "-5");
    free(s);
    json_decref(o);

    /* ids just past the entries stay accepted (ids may leave holes, e.g. reserved specials) */
    o = json_deep_copy(base);
    json_array_append_new(json_object_get(o, "added_tokens"),
                          json_pack("{s:i,s:s}", "id", 270 + 500, "content", "<|reserved|>"));
    s = json_dumps(o, 0);
    snprintf(p, sizeof p, "%s/hole.json", dir);
    write_text(p, s);
    free(s);
    json_decref(o);
    t = tok_load(p, &err);
    CHECK(t && tok_vocab_size(t) == 771 && tok_special(t, "<|reserved|>") == 770,
          "a special id 500 past the vocabulary still loads: %s", t ? "ok" : err.text);
    tok_destroy(t);

    /* the GPT-2 encoder.json + vocab.bpe path caps ids the same way */
    snprintf(p, sizeof p, "%s/encoder.json", dir);
    write_text(p, "{\"a\":0,\"b\":1,\"<|endoftext|>\":1073741824}");
    snprintf(p, sizeof p, "%s/vocab.bpe", dir);
    write_text(p, "#version: 0.2\na b\n");
    snprintf(p, sizeof p, "%s/encoder.json", dir);
    t = tok_load(p, &err);
    CHECK(!t && one_line(&err) && strstr(err.text, "1073741824") &&
              strstr(err.text, "out of range"),
          "encoder.json with id 2^30 refused: %s", err.text);
    tok_destroy(t);
    json_decref(base);
}

int main(int argc, char **argv)
{
    only = argc > 1 ? argv[1] : NULL;
    snprintf(dir, sizeof dir, "/tmp/test_train_hardening.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    test_llmc_wrap();
    test_config_bounds();
    test_shard_count();
    test_safetensors_wrap();
    test_tokenizer_ids();
    mtc_rm_rf(dir);
    return check_done();
}
