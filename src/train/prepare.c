/* prepare: the `mtc-train tokenizer` (train/encode/decode) and `mtc-train prepare` commands —
 * tokenize plain text or JSONL {"text":...} into train_/val_ token shards, documents
 * separated by the end-of-text token, with progress lines on stderr. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train/data.h"

/* Wall-clock ms (local: mtc_now_ms lives with the sha256 helper, which the trainer lib does
 * not link libcrypto for). */
static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct opt {
    const char *name;
    const char **val;
};

/* Parse "--name value" pairs against a table; returns 0 or -1 with a message. */
static int parse_opts(int argc, char **argv, int first, const struct opt *o, const char *cmd)
{
    for (int i = first; i < argc; i++) {
        const struct opt *hit = NULL;
        for (const struct opt *p = o; p->name; p++)
            if (!strncmp(argv[i], "--", 2) && !strcmp(argv[i] + 2, p->name))
                hit = p;
        if (!hit || i + 1 >= argc) {
            fprintf(stderr, "mtc-train %s: %s %s\n", cmd,
                    hit ? "missing value for" : "unknown argument", argv[i]);
            return -1;
        }
        *hit->val = argv[++i];
    }
    return 0;
}

static char *read_input(const char *path, size_t *len)
{
    if (path && strcmp(path, "-"))
        return mtc_read_file(path, len);
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    for (size_t got; b && (got = fread(b + n, 1, cap - n, stdin)) > 0;) {
        n += got;
        if (n == cap) {
            char *nb = realloc(b, (cap *= 2) + 1);
            if (!nb)
                free(b);
            b = nb;
        }
    }
    if (b)
        b[n] = 0, *len = n;
    return b;
}

const char train_tokenizer_usage[] =
    "mtc-train tokenizer train [--kind byte-level-bpe|sentencepiece-bpe] --vocab-size N "
    "--input F --output tok.json\n"
    "       mtc-train tokenizer encode|decode --tokenizer T [--input F]\n";
const char train_prepare_usage[] = "mtc-train prepare --tokenizer T --input F(.txt|.jsonl) --output DIR "
                                   "[--val-fraction 0..1] [--shard-tokens N]\n";

static int cmd_train(int argc, char **argv)
{
    const char *vs = NULL, *in = NULL, *out = NULL, *kind = "byte-level-bpe";
    const struct opt o[] = {{"vocab-size", &vs}, {"input", &in}, {"output", &out}, {"kind", &kind},
                            {NULL, NULL}};
    if (parse_opts(argc, argv, 2, o, "tokenizer train") < 0)
        return 2;
    if (!vs || !in || !out) {
        fprintf(stderr, "usage: %s", train_tokenizer_usage);
        return 2;
    }
    static const struct {
        const char *name;
        int (*train)(const char *, size_t, int, const char *, mtc_error_t *);
    } kinds[] = {{"byte-level-bpe", tok_train}, {"sentencepiece-bpe", tok_train_spm}};
    size_t k = 0;
    while (k < sizeof kinds / sizeof kinds[0] && strcmp(kinds[k].name, kind))
        k++;
    if (k == sizeof kinds / sizeof kinds[0]) {
        fprintf(stderr, "mtc-train tokenizer train: unknown --kind %s (byte-level-bpe, "
                        "sentencepiece-bpe)\n", kind);
        return 2;
    }
    size_t len;
    char *text = read_input(in, &len);
    if (!text) {
        fprintf(stderr, "mtc-train tokenizer train: %s: %s\n", in, strerror(errno));
        return 1;
    }
    mtc_error_t err = {0};
    int64_t t0 = now_ms();
    int rc = kinds[k].train(text, len, atoi(vs), out, &err);
    free(text);
    if (rc < 0) {
        fprintf(stderr, "mtc-train tokenizer train: %s\n", err.text);
        return 1;
    }
    fprintf(stderr, "tokenizer: trained %s vocab on %zu bytes in %.1f s -> %s\n", vs, len,
            (double)(now_ms() - t0) / 1000, out);
    return 0;
}

static int cmd_code(int argc, char **argv)
{
    const char *tk = NULL, *in = NULL;
    const struct opt o[] = {{"tokenizer", &tk}, {"input", &in}, {NULL, NULL}};
    int enc = !strcmp(argv[1], "encode");
    if (parse_opts(argc, argv, 2, o, argv[1]) < 0)
        return 2;
    if (!tk) {
        fprintf(stderr, "usage: %s", train_tokenizer_usage);
        return 2;
    }
    mtc_error_t err = {0};
    struct tok *t = tok_load(tk, &err);
    size_t len;
    char *text = t ? read_input(in, &len) : NULL;
    if (!t || !text) {
        fprintf(stderr, "mtc-train tokenizer %s: %s\n", argv[1], t ? strerror(errno) : err.text);
        tok_destroy(t);
        return 1;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = 0;
    if (enc) {
        if (tok_encode(t, text, len, &ids, &n, &err) < 0) {
            fprintf(stderr, "mtc-train tokenizer encode: %s\n", err.text);
            rc = 1;
        }
        for (size_t i = 0; i < n; i++)
            printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    } else {
        ids = malloc((len / 2 + 1) * sizeof *ids);
        for (char *p = text, *end; ids; p = end) {
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            ids[n++] = (int32_t)v;
        }
        char *s = ids ? tok_decode(t, ids, n) : NULL;
        if (s)
            fputs(s, stdout);
        free(s);
    }
    free(ids);
    free(text);
    tok_destroy(t);
    return rc;
}

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} tok_cmds[] = {{"train", cmd_train}, {"encode", cmd_code}, {"decode", cmd_code}};

int train_tokenizer_main(int argc, char **argv)
{
    for (size_t i = 0; argc > 1 && i < sizeof tok_cmds / sizeof tok_cmds[0]; i++)
        if (!strcmp(argv[1], tok_cmds[i].name))
            return tok_cmds[i].fn(argc, argv);
    fprintf(stderr, "usage: %s", train_tokenizer_usage);
    return 2;
}

void prep_ids_release(struct prep_ids *b)
{
    if (b)
        free(b->v), memset(b, 0, sizeof *b);
}

static int append(struct prep_ids *b, const int32_t *v, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 20;
        while (cap < b->n + n)
            cap *= 2;
        int32_t *nv = realloc(b->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        b->v = nv, b->cap = cap;
    }
    memcpy(b->v + b->n, v, n * sizeof *v);
    b->n += n;
    return 0;
}

static int encode_into(const struct tok *t, const char *s, size_t len, struct prep_ids *out,
                       mtc_error_t *err)
{
    int32_t *ids;
    size_t n;
    if (tok_encode(t, s, len, &ids, &n, err) < 0)
        return -1;
    int rc = append(out, ids, n);
    free(ids);
    return rc < 0 ? errprintf(err, "prepare: out of memory") : 0;
}

/* Plain text: one document, encoded in ~1 MB pieces cut after a newline that is followed by
 * an ASCII letter or digit, where neither pre-tokenizer joins across the cut. */
static int encode_text(const struct tok *t, const char *s, size_t len, struct prep_ids *out,
                       mtc_error_t *err)
{
    size_t at = 0, step = 1 << 20;
    int64_t t0 = now_ms();
    while (at < len) {
        size_t end = at + step < len ? at + step : len;
        while (end < len && !(s[end - 1] == '\n' &&
                              ((s[end] | 0x20) >= 'a' && (s[end] | 0x20) <= 'z')))
            end++;
        if (encode_into(t, s + at, end - at, out, err) < 0)
            return -1;
        at = end;
        double secs = (double)(now_ms() - t0) / 1000;
        fprintf(stderr, "prepare: %.1f/%.1f MB, %zu tokens, %.1f MB/s\n", at / 1e6, len / 1e6,
                out->n, secs > 0 ? at / 1e6 / secs : 0.0);
    }
    return 0;
}

/* JSONL: one {"text": ...} document per line, each preceded by end-of-text. */
static int encode_jsonl(const struct tok *t, const char *path, const char *s, size_t len,
                        int32_t eot, struct prep_ids *out, mtc_error_t *err)
{
    size_t line = 0, docs = 0;
    for (const char *p = s, *end = s + len, *nl; p < end; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            nl = end;
        line++;
        const char *q = p;
        while (q < nl && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q == nl)
            continue;
        json_error_t je;
        json_t *doc = json_loadb(p, (size_t)(nl - p), 0, &je);
        json_t *text = json_object_get(doc, "text");
        if (!json_is_string(text)) {
            json_decref(doc);
            return errprintf(err, "%s:%zu: %s", path, line,
                             doc ? "no \"text\" string in the object" : je.text);
        }
        int rc = (docs > 0 && eot >= 0 ? append(out, &eot, 1) : 0) < 0
                     ? errprintf(err, "prepare: out of memory")
                     : encode_into(t, json_string_value(text), json_string_length(text), out, err);
        json_decref(doc);
        if (rc < 0)
            return -1;
        if (++docs % 10000 == 0)
            fprintf(stderr, "prepare: %zu documents, %.1f/%.1f MB, %zu tokens\n", docs,
                    (double)(nl - s) / 1e6, len / 1e6, out->n);
    }
    fprintf(stderr, "prepare: %zu documents, %zu tokens\n", docs, out->n);
    return 0;
}

int prep_write_shards(const char *dir, const char *split, const int32_t *v, size_t n,
                        size_t per, int width, mtc_error_t *err)
{
    for (size_t i = 0, k = 0; i < n; i += per, k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s_%06zu.bin", dir, split, k);
        if (shard_write(path, v + i, n - i < per ? n - i : per, width, err) < 0)
            return -1;
        fprintf(stderr, "prepare: wrote %s (%zu tokens)\n", path, n - i < per ? n - i : per);
    }
    return 0;
}

int prep_encode(const struct tok *t, const char *name, const char *s, size_t len, int as,
                struct prep_ids *out, mtc_error_t *err)
{
    int32_t eot = tok_eot(t);
    if (eot >= 0 && append(out, &eot, 1) < 0) /* every document starts after an EOT */
        return errprintf(err, "prepare: out of memory");
    size_t il = strlen(name), skip = strspn(s, " \t\r\n");
    int jsonl = as == PREP_AUTO ? (il > 6 && !strcmp(name + il - 6, ".jsonl")) ||
                                      (skip < len && s[skip] == '{')
                                : as == PREP_JSONL;
    return jsonl ? encode_jsonl(t, name, s, len, eot, out, err) : encode_text(t, s, len, out, err);
}

int prep_write_meta(const char *dir, const char *tokenizer, const struct tok *t, size_t train,
                    size_t val, mtc_error_t *err)
{
    char meta[8192];
    snprintf(meta, sizeof meta, "%s/meta.json", dir);
    json_t *m = json_pack("{s:s, s:i, s:i, s:I, s:I, s:i}", "tokenizer", tokenizer, "vocabSize",
                          tok_vocab_size(t), "eot", tok_eot(t), "trainTokens", (json_int_t)train,
                          "valTokens", (json_int_t)val, "tokenBytes",
                          tok_vocab_size(t) <= 65536 ? 2 : 4);
    char *ms = m ? json_dumps(m, JSON_INDENT(2)) : NULL;
    json_decref(m);
    if (!ms || mtc_write_file_atomic(meta, ms, strlen(ms), 0644) < 0) {
        free(ms);
        return errprintf(err, "%s: %s", meta, strerror(errno));
    }
    free(ms);
    return 0;
}

int train_prepare_main(int argc, char **argv)
{
    const char *tk = NULL, *in = NULL, *outdir = NULL, *vf = "0.01", *st = "100000000";
    const struct opt o[] = {{"tokenizer", &tk},    {"input", &in},         {"output", &outdir},
                            {"val-fraction", &vf}, {"shard-tokens", &st}, {NULL, NULL}};
    if (parse_opts(argc, argv, 1, o, "prepare") < 0)
        return 2;
    double frac = atof(vf);
    long long per = atoll(st);
    if (!tk || !in || !outdir || frac < 0 || frac >= 1 || per <= 0) {
        fprintf(stderr, "usage: %s", train_prepare_usage);
        return 2;
    }
    mtc_error_t err = {0};
    struct prep_ids out = {0};
    size_t len = 0;
    char *s = NULL;
    int rc = 1;
    struct tok *t = tok_load(tk, &err);
    if (!t)
        goto fail;
    if (!(s = mtc_read_file(in, &len))) {
        errprintf(&err, "%s: %s", in, strerror(errno));
        goto fail;
    }
    if (mtc_mkdir_p(outdir, 0755) < 0) {
        errprintf(&err, "%s: %s", outdir, strerror(errno));
        goto fail;
    }
    if (prep_encode(t, in, s, len, PREP_AUTO, &out, &err) < 0)
        goto fail;
    size_t nval = frac > 0 ? (size_t)ceil(frac * (double)out.n) : 0;
    int width = tok_vocab_size(t) <= 65536 ? 2 : 4;
    if (prep_write_shards(outdir, "val", out.v, nval, (size_t)per, width, &err) < 0 ||
        prep_write_shards(outdir, "train", out.v + nval, out.n - nval, (size_t)per, width, &err) < 0 ||
        prep_write_meta(outdir, tk, t, out.n - nval, nval, &err) < 0)
        goto fail;
    fprintf(stderr, "prepare: %zu train + %zu val tokens in %s\n", out.n - nval, nval, outdir);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "mtc-train prepare: %s\n", err.text[0] ? err.text : "out of memory");
out:
    free(out.v);
    free(s);
    tok_destroy(t);
    return rc;
}
