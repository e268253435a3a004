/* tokenizer: BPE tokenizers — byte-level (GPT-2 / Llama 3 style, from an HF tokenizer.json or
 * GPT-2 encoder.json + vocab.bpe) and SentencePiece-style (Gemma / Llama 2: a normalizer that
 * maps spaces to U+2581 "▁", characters as initial symbols, <0xNN> byte fallback, no
 * pre-tokenizer) — encodes text (special tokens, pre-tokenizer, merges by rank through a hash
 * map) and decodes ids back to the exact bytes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/data.h"
#include "train/tok_internal.h"

struct merge_ent {
    uint64_t key; /* (a << 32 | b) + 1; 0 = empty */
    int32_t rank, id;
};

struct special {
    char *s;
    size_t len;
    int id;
};

/* Ids a tokenizer file may use: below its number of entries (vocabulary + added tokens) plus
 * this slack, which leaves room for reserved ids missing from the file. Each id up to the
 * largest costs a pointer and a length, so the cap keeps that proportional to the file:
 * a 62-byte tokenizer.json with the id 2^30 used to allocate 12 GB. */
#define TOK_ID_SLACK 1024

struct tok {
    int nvocab;
    char **bytes; /* raw bytes of each id (specials: their text); NULL when unused */
    uint32_t *blen;
    struct tok_smap vocab; /* raw bytes -> id, regular tokens */
    struct merge_ent *merges;
    size_t mcap;
    int byte_id[256];
    struct special *sp; /* longest first */
    int nsp;
    unsigned char sp_first[256];
    enum tok_pretok pre;
    int ignore_merges; /* Llama 3: a piece that is itself a token is not merged */
    /* SentencePiece-style: vocab keys are UTF-8 text, byte_id[] are the <0xNN> tokens. */
    int spm, space_meta, prepend, strip;
};

static const char META[] = "\xe2\x96\x81"; /* U+2581, SentencePiece's space */

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    return k ^ (k >> 33);
}

static struct merge_ent *merge_slot(const struct tok *t, uint64_t key)
{
    for (size_t i = mix(key) & (t->mcap - 1);; i = (i + 1) & (t->mcap - 1))
        if (t->merges[i].key == key || t->merges[i].key == 0)
            return &t->merges[i];
}

static const struct merge_ent *merge_get(const struct tok *t, int a, int b)
{
    if (!t->mcap)
        return NULL;
    const struct merge_ent *e = merge_slot(t, ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1);
    return e->key ? e : NULL;
}

void tok_destroy(struct tok *t)
{
    if (!t)
        return;
    int e = errno;
    for (int i = 0; i < t->nvocab; i++)
        free(t->bytes[i]);
    free(t->bytes);
    free(t->blen);
    tok_smap_release(&t->vocab);
    free(t->merges);
    for (int i = 0; i < t->nsp; i++)
        free(t->sp[i].s);
    free(t->sp);
    free(t);
    errno = e;
}

/* Byte-level form (UTF-8 of the byte-to-unicode code points) back to raw bytes.
 * Returns the length, or -1 when a code point is not one of the 256 byte symbols. */
static long unicode_to_bytes(const char *s, size_t n, unsigned char *out)
{
    static int rev[324];
    if (!rev['A']) {
        for (int i = 0; i < 324; i++)
            rev[i] = -1;
        for (int b = 0; b < 256; b++)
            rev[tok_byte_cp((unsigned char)b)] = b;
    }
    long o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        unsigned cp;
        if (c < 0x80) {
            cp = c, i++;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < n) {
            cp = (unsigned)(c & 0x1F) << 6 | ((unsigned char)s[i + 1] & 0x3F), i += 2;
        } else {
            return -1;
        }
        if (cp >= 324 || rev[cp] < 0)
            return -1;
        out[o++] = (unsigned char)rev[cp];
    }
    return o;
}

static int grow_vocab(struct tok *t, int id)
{
    if (id < t->nvocab)
        return 0;
    int n = id + 1;
    char **b = realloc(t->bytes, (size_t)n * sizeof *b);
    if (!b)
        return -1;
    t->bytes = b;
    uint32_t *l = realloc(t->blen, (size_t)n * sizeof *l);
    if (!l)
        return -1;
    t->blen = l;
    for (int i = t->nvocab; i < n; i++)
        t->bytes[i] = NULL, t->blen[i] = 0;
    t->nvocab = n;
    return 0;
}

/* Set id's bytes; regular tokens also go into the lookup map. */
static int set_token(struct tok *t, int id, const void *p, size_t len, int regular)
{
    if (id < 0 || id > (1 << 30) || grow_vocab(t, id) < 0)
        return -1;
    free(t->bytes[id]);
    if (!(t->bytes[id] = malloc(len + 1)))
        return -1;
    memcpy(t->bytes[id], p, len);
    t->bytes[id][len] = 0;
    t->blen[id] = (uint32_t)len;
    if (regular && !tok_smap_put(&t->vocab, p, len, id))
        return -1;
    return 0;
}

static int add_special(struct tok *t, const char *s, int id)
{
    for (int i = 0; i < t->nsp; i++)
        if (!strcmp(t->sp[i].s, s))
            return 0;
    struct special *n = realloc(t->sp, (size_t)(t->nsp + 1) * sizeof *n);
    if (!n)
        return -1;
    t->sp = n;
    size_t len = strlen(s);
    if (!len || !(t->sp[t->nsp].s = strdup(s)))
        return len ? -1 : 0;
    t->sp[t->nsp].len = len;
    t->sp[t->nsp].id = id;
    t->nsp++;
    t->sp_first[(unsigned char)s[0]] = 1;
    return set_token(t, id, s, len, 0);
}

/* An id read from path (what: where) must be in [0, limit): one line naming it otherwise. */
static int check_id(json_int_t id, size_t limit, const char *path, const char *what,
                    mtc_error_t *err)
{
    if (id < 0 || (uint64_t)id >= limit)
        return errprintf(err,
                         "%s: %s id %lld is out of range (ids must be below %zu: the "
                         "entries plus %d)",
                         path, what, (long long)id, limit, TOK_ID_SLACK);
    return 0;
}

static int add_vocab_entry(struct tok *t, const char *key, int id, mtc_error_t *err)
{
    size_t kl = strlen(key);
    unsigned char *raw = malloc(kl + 1);
    if (!raw)
        return errprintf(err, "tokenizer: out of memory");
    long rl = t->spm ? -1 : unicode_to_bytes(key, kl, raw);
    int rc = rl >= 0 ? set_token(t, id, raw, (size_t)rl, 1) : set_token(t, id, key, kl, !t->spm ? 0 : 1);
    unsigned hex;
    char tail;
    /* SentencePiece: decoding shows "▁" as a space and <0xNN> as the byte NN */
    if (rc == 0 && t->spm && kl == 6 && sscanf(key, "<0x%2X>%c", &hex, &tail) == 1 &&
        key[5] == '>') {
        unsigned char b = (unsigned char)hex;
        rc = set_token(t, id, &b, 1, 0);
        t->byte_id[b] = id + 1; /* + 1: 0 means absent until finish() */
    } else if (rc == 0 && t->spm && t->space_meta) {
        size_t o = 0;
        for (size_t i = 0; i < kl; i++) {
            if (i + 3 <= kl && !memcmp(key + i, META, 3))
                raw[o++] = ' ', i += 2;
            else
                raw[o++] = (unsigned char)key[i];
        }
        free(t->bytes[id]);
        t->bytes[id] = NULL;
        rc = set_token(t, id, raw, o, 0);
    }
    free(raw);
    if (rc < 0)
        return errprintf(err, "tokenizer: bad id %d for %s", id, key);
    return 0;
}

/* Record merge a + b (byte-level forms) with the given rank; skipped when a part is unknown. */
static int add_merge(struct tok *t, const char *a, size_t al, const char *b, size_t bl, int rank)
{
    unsigned char ra[256], rb[256], rab[512];
    if (al > 256 || bl > 256)
        return 0;
    long na, nb;
    if (t->spm) {
        memcpy(ra, a, al), memcpy(rb, b, bl), na = (long)al, nb = (long)bl;
    } else if ((na = unicode_to_bytes(a, al, ra)) < 0 || (nb = unicode_to_bytes(b, bl, rb)) < 0) {
        return 0;
    }
    int32_t *ia = tok_smap_get(&t->vocab, ra, (size_t)na), *ib = tok_smap_get(&t->vocab, rb, (size_t)nb);
    memcpy(rab, ra, (size_t)na);
    memcpy(rab + na, rb, (size_t)nb);
    int32_t *iab = tok_smap_get(&t->vocab, rab, (size_t)(na + nb));
    if (!ia || !ib || !iab)
        return 0;
    struct merge_ent *e = merge_slot(t, ((uint64_t)(uint32_t)*ia << 32 | (uint32_t)*ib) + 1);
    if (e->key)
        return 0; /* a duplicate keeps its first (best) rank */
    e->key = ((uint64_t)(uint32_t)*ia << 32 | (uint32_t)*ib) + 1;
    e->rank = rank;
    e->id = *iab;
    return 0;
}

static int alloc_merges(struct tok *t, size_t n)
{
    t->mcap = 64;
    while (t->mcap < n * 2)
        t->mcap *= 2;
    t->merges = calloc(t->mcap, sizeof *t->merges);
    return t->merges ? 0 : -1;
}

static int cmp_special(const void *a, const void *b)
{
    const struct special *x = a, *y = b;
    return x->len != y->len ? (x->len < y->len ? 1 : -1) : strcmp(x->s, y->s);
}

/* Every byte must have a token, or some text could not be encoded. */
static int finish(struct tok *t, const char *path, mtc_error_t *err)
{
    for (int b = 0; t->spm && b < 256; b++) {
        if (!t->byte_id[b])
            return errprintf(err, "%s: vocabulary lacks the byte fallback token <0x%02X>", path, b);
        t->byte_id[b]--;
    }
    for (int b = 0; !t->spm && b < 256; b++) {
        unsigned char c = (unsigned char)b;
        int32_t *id = tok_smap_get(&t->vocab, &c, 1);
        if (!id)
            return errprintf(err, "%s: vocabulary lacks the token for byte 0x%02x (not byte-level BPE?)",
                             path, b);
        t->byte_id[b] = *id;
    }
    if (t->nsp > 1)
        qsort(t->sp, (size_t)t->nsp, sizeof *t->sp, cmp_special);
    return 0;
}

static enum tok_pretok detect_pretok(json_t *pre)
{
    if (!pre || json_is_null(pre))
        return TOK_PRE_NONE;
    char *s = json_dumps(pre, JSON_COMPACT);
    enum tok_pretok k = TOK_PRE_GPT2;
    if (s && strstr(s, "\\\\p{N}{1,3}"))
        k = TOK_PRE_LLAMA3;
    else if (s && strstr(s, "\"Split\""))
        k = strstr(s, "?\\\\p{L}+") ? TOK_PRE_GPT2 : (enum tok_pretok)-1;
    else if (s && strstr(s, "\"use_regex\":false"))
        k = TOK_PRE_NONE;
    free(s);
    return k;
}

/* Does j (a normalizer or decoder, maybe a Sequence) contain a step of this type whose
 * fields match? want_a/want_b: "Replace" pattern.String / content, "Prepend" prepend,
 * "Strip" content. NULL matches anything. */
static json_t *find_step(json_t *j, const char *type, const char *want_a, const char *want_b)
{
    const char *ty = json_string_value(json_object_get(j, "type"));
    if (!ty)
        return NULL;
    if (!strcmp(ty, "Sequence")) {
        json_t *list = json_object_get(j, "normalizers");
        if (!list)
            list = json_object_get(j, "decoders");
        size_t i;
        json_t *v, *f;
        json_array_foreach(list, i, v) if ((f = find_step(v, type, want_a, want_b))) return f;
        return NULL;
    }
    if (strcmp(ty, type))
        return NULL;
    const char *a = !strcmp(type, "Replace")
                        ? json_string_value(json_object_get(json_object_get(j, "pattern"), "String"))
                        : !strcmp(type, "Prepend") ? json_string_value(json_object_get(j, "prepend"))
                                                   : json_string_value(json_object_get(j, "content"));
    const char *b = !strcmp(type, "Replace") ? json_string_value(json_object_get(j, "content")) : NULL;
    if ((want_a && (!a || strcmp(a, want_a))) || (want_b && (!b || strcmp(b, want_b))))
        return NULL;
    return j;
}

/* SentencePiece-style files: byte_fallback, or a normalizer mapping " " to "▁". */
static int detect_spm(struct tok *t, json_t *root, const char *path, mtc_error_t *err)
{
    json_t *norm = json_object_get(root, "normalizer"), *dec = json_object_get(root, "decoder");
    t->space_meta = find_step(norm, "Replace", " ", META) != NULL;
    t->spm = t->space_meta || json_is_true(json_object_get(json_object_get(root, "model"), "byte_fallback"));
    if (!t->spm)
        return 0;
    if (norm && !json_is_null(norm) && !t->space_meta)
        return errprintf(err, "%s: unsupported normalizer (SentencePiece-style BPE needs Replace \" \" -> \"▁\")", path);
    json_t *pre = json_object_get(root, "pre_tokenizer");
    if (pre && !json_is_null(pre))
        return errprintf(err, "%s: unsupported pre_tokenizer for SentencePiece-style BPE (none expected)", path);
    t->prepend = find_step(norm, "Prepend", META, NULL) != NULL;
    json_t *st = find_step(dec, "Strip", " ", NULL);
    t->strip = st ? (int)json_integer_value(json_object_get(st, "start")) : 0;
    t->pre = TOK_PRE_NONE;
    return 0;
}

static struct tok *load_hf(const char *path, json_t *root, mtc_error_t *err)
{
    struct tok *t = calloc(1, sizeof *t);
    json_t *model = json_object_get(root, "model"), *vocab = json_object_get(model, "vocab"),
           *merges = json_object_get(model, "merges");
    json_t *type = json_object_get(model, "type");
    if (!t || tok_smap_init(&t->vocab, 1024) < 0) {
        errprintf(err, "tokenizer: out of memory");
        goto error;
    }
    if (!json_is_object(vocab) || !json_is_array(merges) ||
        (type && strcmp(json_string_value(type) ? json_string_value(type) : "", "BPE"))) {
        errprintf(err, "%s: not a BPE tokenizer.json (model.type, model.vocab, model.merges)", path);
        goto error;
    }
    if (detect_spm(t, root, path, err) < 0)
        goto error;
    if (!t->spm)
        t->pre = detect_pretok(json_object_get(root, "pre_tokenizer"));
    if ((int)t->pre < 0) {
        errprintf(err, "%s: unsupported pre_tokenizer Split regex (GPT-2 and Llama 3 only)", path);
        goto error;
    }
    t->ignore_merges = !t->spm && json_is_true(json_object_get(model, "ignore_merges"));
    json_t *added = json_object_get(root, "added_tokens");
    size_t limit = json_object_size(vocab) + json_array_size(added) + TOK_ID_SLACK;
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v)
    {
        if (!json_is_integer(v)) {
            errprintf(err, "%s: model.vocab[%s] is not an integer", path, key);
            goto error;
        }
        if (check_id(json_integer_value(v), limit, path, "model.vocab", err) < 0 ||
            add_vocab_entry(t, key, (int)json_integer_value(v), err) < 0)
            goto error;
    }
    if (alloc_merges(t, json_array_size(merges)) < 0) {
        errprintf(err, "tokenizer: out of memory");
        goto error;
    }
    size_t i;
    json_array_foreach(merges, i, v)
    {
        const char *a, *b, *s = json_string_value(v), *sp;
        size_t al, bl;
        if (s && (sp = strchr(s, ' '))) {
            a = s, al = (size_t)(sp - s), b = sp + 1, bl = strlen(sp + 1);
        } else if (json_is_array(v) && json_array_size(v) == 2 &&
                   json_is_string(json_array_get(v, 0)) && json_is_string(json_array_get(v, 1))) {
            a = json_string_value(json_array_get(v, 0)), al = strlen(a);
            b = json_string_value(json_array_get(v, 1)), bl = strlen(b);
        } else {
            errprintf(err, "%s: model.merges[%zu] is neither \"a b\" nor [a, b]", path, i);
            goto error;
        }
        add_merge(t, a, al, b, bl, (int)i);
    }
    json_array_foreach(added, i, v)
    {
        json_t *c = json_object_get(v, "content"), *id = json_object_get(v, "id");
        if (!json_is_string(c) || !json_is_integer(id)) {
            errprintf(err, "%s: added_tokens[%zu] needs content and id", path, i);
            goto error;
        }
        char what[48];
        snprintf(what, sizeof what, "added_tokens[%zu]", i);
        if (check_id(json_integer_value(id), limit, path, what, err) < 0)
            goto error;
        if (add_special(t, json_string_value(c), (int)json_integer_value(id)) < 0) {
            errprintf(err, "%s: added_tokens[%zu]: bad id", path, i);
            goto error;
        }
    }
    if (finish(t, path, err) < 0)
        goto error;
    return t;
error:
    tok_destroy(t);
    return NULL;
}

static struct tok *load_gpt2(const char *enc_path, json_t *enc, const char *bpe_path,
                             mtc_error_t *err)
{
    struct tok *t = calloc(1, sizeof *t);
    char *bpe = NULL;
    if (!t || tok_smap_init(&t->vocab, json_object_size(enc)) < 0) {
        errprintf(err, "tokenizer: out of memory");
        goto error;
    }
    t->pre = TOK_PRE_GPT2;
    size_t limit = json_object_size(enc) + TOK_ID_SLACK;
    const char *key;
    json_t *v;
    json_object_foreach(enc, key, v)
    {
        if (!json_is_integer(v)) {
            errprintf(err, "%s: value of %s is not an integer", enc_path, key);
            goto error;
        }
        if (check_id(json_integer_value(v), limit, enc_path, "encoder.json", err) < 0)
            goto error;
        int id = (int)json_integer_value(v);
        size_t kl = strlen(key);
        /* GPT-2 ships <|endoftext|> inside encoder.json: it is a special token. */
        int special = kl > 4 && !strncmp(key, "<|", 2) && !strcmp(key + kl - 2, "|>");
        if (special ? add_special(t, key, id) < 0 : add_vocab_entry(t, key, id, err) < 0) {
            errprintf(err, "%s: bad entry %s", enc_path, key);
            goto error;
        }
    }
    size_t len;
    if (!(bpe = mtc_read_file(bpe_path, &len))) {
        errprintf(err, "%s: %s", bpe_path, strerror(errno));
        goto error;
    }
    if (alloc_merges(t, len / 4 + 16) < 0) {
        errprintf(err, "tokenizer: out of memory");
        goto error;
    }
    int rank = 0;
    for (char *line = bpe, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        size_t ll = next ? (size_t)(next - line) : strlen(line);
        if (next)
            next++;
        if (ll && line[ll - 1] == '\r')
            ll--;
        if (ll == 0 || (rank == 0 && line[0] == '#'))
            continue;
        char *sp = memchr(line, ' ', ll);
        if (!sp) {
            errprintf(err, "%s: merge line %d has no space", bpe_path, rank + 1);
            goto error;
        }
        add_merge(t, line, (size_t)(sp - line), sp + 1, ll - (size_t)(sp - line) - 1, rank++);
    }
    if (finish(t, enc_path, err) < 0)
        goto error;
    free(bpe);
    return t;
error:
    free(bpe);
    tok_destroy(t);
    return NULL;
}

struct tok *tok_load(const char *path, mtc_error_t *err)
{
    char *enc = strdup(path), *bpe = NULL;
    struct tok *t = NULL;
    json_t *root = NULL;
    if (!enc) {
        errprintf(err, "tokenizer: out of memory");
        return NULL;
    }
    char *colon = strchr(enc, ':');
    if (colon) {
        *colon = 0;
        bpe = strdup(colon + 1);
    }
    json_error_t je;
    if (!(root = json_load_file(enc, 0, &je))) {
        errprintf(err, "%s: %s", enc, je.text);
        goto out;
    }
    if (json_is_object(json_object_get(root, "model"))) {
        t = load_hf(enc, root, err);
        goto out;
    }
    if (!bpe) {
        const char *slash = strrchr(enc, '/');
        if (asprintf(&bpe, "%.*svocab.bpe", slash ? (int)(slash - enc + 1) : 0, enc) < 0)
            bpe = NULL;
    }
    if (!bpe || !json_is_object(root)) {
        errprintf(err, "%s: neither a tokenizer.json nor an encoder.json", enc);
        goto out;
    }
    t = load_gpt2(enc, root, bpe, err);
out:
    json_decref(root);
    free(enc);
    free(bpe);
    return t;
}

int tok_vocab_size(const struct tok *t)
{
    return t->nvocab;
}

int tok_special(const struct tok *t, const char *name)
{
    for (int i = 0; i < t->nsp; i++)
        if (!strcmp(t->sp[i].s, name))
            return t->sp[i].id;
    return -1;
}

const char *tok_eot_text(const struct tok *t)
{
    static const char *const names[] = {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (tok_special(t, names[i]) >= 0)
            return names[i];
    return NULL;
}

int tok_eot(const struct tok *t)
{
    const char *name = tok_eot_text(t);
    return name ? tok_special(t, name) : -1;
}

struct idbuf {
    int32_t *v;
    size_t n, cap;
};

static int push(struct idbuf *b, int32_t id)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        int32_t *v = realloc(b->v, cap * sizeof *v);
        if (!v)
            return -1;
        b->v = v, b->cap = cap;
    }
    b->v[b->n++] = id;
    return 0;
}

/* BPE over the initial symbols sym[0..m) of one piece: repeatedly merge the best-ranked
 * adjacent pair (all its non-overlapping occurrences, left to right), as GPT-2's bpe() does. */
static int bpe_syms(const struct tok *t, int32_t *sym, size_t m, struct idbuf *out)
{
    while (m > 1) {
        int32_t best = INT32_MAX, a = 0, b = 0, id = 0;
        for (size_t i = 0; i + 1 < m; i++) {
            const struct merge_ent *e = merge_get(t, sym[i], sym[i + 1]);
            if (e && e->rank < best)
                best = e->rank, a = sym[i], b = sym[i + 1], id = e->id;
        }
        if (best == INT32_MAX)
            break;
        size_t w = 0;
        for (size_t i = 0; i < m; i++) {
            if (i + 1 < m && sym[i] == a && sym[i + 1] == b)
                sym[w++] = id, i++;
            else
                sym[w++] = sym[i];
        }
        m = w;
    }
    for (size_t i = 0; i < m; i++)
        if (push(out, sym[i]) < 0)
            return -1;
    return 0;
}

/* Pieces longer than this use the heap merge, O(n log n) instead of O(n^2): long runs of
 * digits, punctuation or spaces occur in real corpora. */
#ifndef BPE_LONG_PIECE
#define BPE_LONG_PIECE 128
#endif

struct hent {
    int32_t rank, pos, a, b;
};

static int hless(const struct hent *x, const struct hent *y)
{
    return x->rank != y->rank ? x->rank < y->rank : x->pos < y->pos;
}

static void hpush(struct hent *h, size_t *n, struct hent e)
{
    size_t i = (*n)++;
    while (i > 0 && hless(&e, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static struct hent hpop(struct hent *h, size_t *n)
{
    struct hent top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && hless(&h[c + 1], &h[c]))
            c++;
        if (!hless(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static void push_pair(const struct tok *t, struct hent *h, size_t *hn, const int32_t *sym, int i,
                      int j)
{
    const struct merge_ent *e = merge_get(t, sym[i], sym[j]);
    if (e)
        hpush(h, hn, (struct hent){e->rank, i, sym[i], sym[j]});
}

/* The same merges as bpe_syms, lowest (rank, position) first, over a linked list of symbols:
 * what HF tokenizers does. Each merge pushes at most two pairs, so the heap holds < 3n.
 * sym (n initial symbols) is overwritten. */
static int bpe_long(const struct tok *t, int32_t *sym, size_t n, struct idbuf *out)
{
    int32_t *nx = malloc(n * sizeof *nx), *pv = malloc(n * sizeof *pv);
    struct hent *h = malloc(3 * n * sizeof *h);
    size_t hn = 0;
    int rc = -1;
    if (!nx || !pv || !h)
        goto out;
    for (size_t i = 0; i < n; i++) {
        nx[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        pv[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        push_pair(t, h, &hn, sym, (int)i, (int)i + 1);
    while (hn > 0) {
        struct hent e = hpop(h, &hn);
        int i = e.pos, j = nx[i];
        if (sym[i] != e.a || j < 0 || sym[j] != e.b) /* stale: a neighbour merged first */
            continue;
        sym[i] = merge_get(t, e.a, e.b)->id;
        sym[j] = -1;
        nx[i] = nx[j];
        if (nx[j] >= 0)
            pv[nx[j]] = i;
        if (pv[i] >= 0)
            push_pair(t, h, &hn, sym, pv[i], i);
        if (nx[i] >= 0)
            push_pair(t, h, &hn, sym, i, nx[i]);
    }
    rc = 0;
    for (int i = 0; i >= 0 && rc == 0; i = nx[i])
        rc = push(out, sym[i]);
out:
    free(nx);
    free(pv);
    free(h);
    return rc;
}

static int bpe_run(const struct tok *t, int32_t *sym, size_t m, struct idbuf *out)
{
    return m > BPE_LONG_PIECE ? bpe_long(t, sym, m, out) : bpe_syms(t, sym, m, out);
}

/* Length of the UTF-8 character at s[i] (1 for an invalid or truncated byte). */
static size_t utf8_len(const unsigned char *s, size_t n, size_t i)
{
    unsigned char c = s[i];
    size_t k = c < 0xC2 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 1;
    if (i + k > n)
        return 1;
    for (size_t j = 1; j < k; j++)
        if ((s[i + j] & 0xC0) != 0x80)
            return 1;
    return k;
}

/* SentencePiece-style: normalize (spaces -> "▁", maybe a leading "▁"), then each character is
 * its token when the vocabulary has it, else its bytes' <0xNN> tokens; then merge. */
static int encode_spm(const struct tok *t, const unsigned char *s, size_t n, struct idbuf *out,
                      int32_t **scratch, size_t *scap)
{
    if (!n)
        return 0;
    size_t cap = 3 * n + 3; /* every byte may become "▁" or a byte token */
    unsigned char *norm = malloc(cap);
    if (!norm)
        return -1;
    size_t m = 0;
    if (t->prepend)
        memcpy(norm, META, 3), m = 3;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ' && t->space_meta)
            memcpy(norm + m, META, 3), m += 3;
        else
            norm[m++] = s[i];
    }
    if (m > *scap) {
        int32_t *ns = realloc(*scratch, m * sizeof *ns);
        if (!ns) {
            free(norm);
            return -1;
        }
        *scratch = ns, *scap = m;
    }
    size_t k = 0;
    for (size_t i = 0; i < m;) {
        size_t l = utf8_len(norm, m, i);
        int32_t *id = tok_smap_get(&t->vocab, norm + i, l);
        if (id)
            (*scratch)[k++] = *id;
        else
            for (size_t j = 0; j < l; j++)
                (*scratch)[k++] = t->byte_id[norm[i + j]];
        i += l;
    }
    free(norm);
    return bpe_run(t, *scratch, k, out);
}

static int encode_plain(const struct tok *t, const unsigned char *s, size_t n, struct idbuf *out,
                        int32_t **scratch, size_t *scap)
{
    if (t->spm)
        return encode_spm(t, s, n, out, scratch, scap);
    for (size_t i = 0; i < n;) {
        size_t e = tok_pretok_next(t->pre, s, n, i);
        if (e - i > *scap) {
            int32_t *ns = realloc(*scratch, (e - i) * sizeof *ns);
            if (!ns)
                return -1;
            *scratch = ns, *scap = e - i;
        }
        int32_t *id = t->ignore_merges || e - i == 1 ? tok_smap_get(&t->vocab, s + i, e - i) : NULL;
        if (id) {
            if (push(out, *id) < 0)
                return -1;
        } else {
            for (size_t j = i; j < e; j++)
                (*scratch)[j - i] = t->byte_id[s[j]];
            if (bpe_run(t, *scratch, e - i, out) < 0)
                return -1;
        }
        i = e;
    }
    return 0;
}

int tok_encode(const struct tok *t, const char *text, size_t len, int32_t **ids, size_t *n,
               mtc_error_t *err)
{
    const unsigned char *s = (const unsigned char *)text;
    struct idbuf out = {0};
    int32_t *scratch = NULL;
    size_t scap = 0, seg = 0;
    for (size_t i = 0; i < len; i++) {
        if (!t->sp_first[s[i]])
            continue;
        for (int k = 0; k < t->nsp; k++) {
            const struct special *sp = &t->sp[k];
            if (sp->len > len - i || memcmp(s + i, sp->s, sp->len) != 0)
                continue;
            if (encode_plain(t, s + seg, i - seg, &out, &scratch, &scap) < 0 ||
                push(&out, sp->id) < 0)
                goto oom;
            i += sp->len - 1;
            seg = i + 1;
            break;
        }
    }
    if (encode_plain(t, s + seg, len - seg, &out, &scratch, &scap) < 0)
        goto oom;
    free(scratch);
    if (!out.v && !(out.v = malloc(sizeof *out.v)))
        goto oom;
    *ids = out.v;
    *n = out.n;
    return 0;
oom:
    free(scratch);
    free(out.v);
    return errprintf(err, "tokenizer: out of memory");
}

char *tok_decode(const struct tok *t, const int32_t *ids, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < t->nvocab)
            len += t->blen[ids[i]];
    char *out = malloc(len + 1), *p = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= 0 && ids[i] < t->nvocab && t->bytes[ids[i]]) {
            memcpy(p, t->bytes[ids[i]], t->blen[ids[i]]);
            p += t->blen[ids[i]];
        }
    }
    *p = 0;
    /* a Strip decoder drops the leading space(s) the Prepend normalizer added */
    size_t skip = 0;
    while ((int)skip < t->strip && out[skip] == ' ')
        skip++;
    if (skip)
        memmove(out, out + skip, (size_t)(p - out) - skip + 1);
    return out;
}
