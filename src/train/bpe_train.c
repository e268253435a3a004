/* bpe_train: train a BPE tokenizer on a corpus (merges chosen by pair frequency with
 * incremental pair counts and a lazy max-heap) and write it as a Hugging Face tokenizer.json:
 * byte-level (GPT-2 pre-tokenization, <|endoftext|> as the last id) or SentencePiece-style
 * (Gemma layout: spaces as "▁", characters as initial symbols, <0xNN> byte fallback). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/data.h"
#include "train/tok_internal.h"

struct word {
    int32_t *sym;
    int n;
    int64_t cnt;
    int stamp; /* last merge that visited this word */
};

struct pair {
    int32_t a, b;
    int64_t count;
    int *wl; /* words that contain (or contained) the pair; may repeat */
    int wn, wcap;
    int done;
};

struct heap_ent {
    int64_t count;
    int p;
};

struct trainer {
    struct word *w;
    int nw;
    struct pair *p;
    int np, pcap;
    int *pidx; /* open addressing: key -> pair index + 1 */
    size_t icap;
    struct heap_ent *h;
    size_t hn, hcap;
    int32_t nomerge_below; /* symbols below this id (byte fallback tokens) are never merged */
};

static uint64_t pkey(int32_t a, int32_t b)
{
    uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) * 0x9e3779b97f4a7c15ull;
    return k ^ (k >> 31);
}

static int heap_push(struct trainer *tr, int64_t count, int p)
{
    if (tr->hn == tr->hcap) {
        size_t cap = tr->hcap ? tr->hcap * 2 : 4096;
        struct heap_ent *h = realloc(tr->h, cap * sizeof *h);
        if (!h)
            return -1;
        tr->h = h, tr->hcap = cap;
    }
    size_t i = tr->hn++;
    /* ties go to the older pair (lower index), which keeps training deterministic */
    while (i > 0) {
        size_t up = (i - 1) / 2;
        struct heap_ent *u = &tr->h[up];
        if (u->count > count || (u->count == count && u->p < p))
            break;
        tr->h[i] = *u;
        i = up;
    }
    tr->h[i] = (struct heap_ent){count, p};
    return 0;
}

static struct heap_ent heap_pop(struct trainer *tr)
{
    struct heap_ent top = tr->h[0], last = tr->h[--tr->hn];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= tr->hn)
            break;
        if (c + 1 < tr->hn && (tr->h[c + 1].count > tr->h[c].count ||
                               (tr->h[c + 1].count == tr->h[c].count && tr->h[c + 1].p < tr->h[c].p)))
            c++;
        if (last.count > tr->h[c].count || (last.count == tr->h[c].count && last.p < tr->h[c].p))
            break;
        tr->h[i] = tr->h[c];
        i = c;
    }
    tr->h[i] = last;
    return top;
}

/* Index of pair (a,b), created when absent; -1 on allocation failure. */
static int pair_get(struct trainer *tr, int32_t a, int32_t b)
{
    if ((size_t)(tr->np + 1) * 2 > tr->icap) {
        size_t cap = tr->icap ? tr->icap * 2 : 1 << 16;
        int *idx = calloc(cap, sizeof *idx);
        if (!idx)
            return -1;
        for (int i = 0; i < tr->np; i++) {
            size_t s = pkey(tr->p[i].a, tr->p[i].b) & (cap - 1);
            while (idx[s])
                s = (s + 1) & (cap - 1);
            idx[s] = i + 1;
        }
        free(tr->pidx);
        tr->pidx = idx, tr->icap = cap;
    }
    size_t s = pkey(a, b) & (tr->icap - 1);
    for (; tr->pidx[s]; s = (s + 1) & (tr->icap - 1)) {
        struct pair *p = &tr->p[tr->pidx[s] - 1];
        if (p->a == a && p->b == b)
            return tr->pidx[s] - 1;
    }
    if (tr->np == tr->pcap) {
        int cap = tr->pcap ? tr->pcap * 2 : 4096;
        struct pair *np = realloc(tr->p, (size_t)cap * sizeof *np);
        if (!np)
            return -1;
        tr->p = np, tr->pcap = cap;
    }
    tr->p[tr->np] = (struct pair){.a = a, .b = b};
    tr->pidx[s] = tr->np + 1;
    return tr->np++;
}

/* Add delta occurrences of every adjacent pair in word wi (delta < 0 removes them). */
static int count_pairs(struct trainer *tr, int wi, int64_t delta)
{
    struct word *w = &tr->w[wi];
    for (int i = 0; i + 1 < w->n; i++) {
        if (w->sym[i] < tr->nomerge_below || w->sym[i + 1] < tr->nomerge_below)
            continue;
        int pi = pair_get(tr, w->sym[i], w->sym[i + 1]);
        if (pi < 0)
            return -1;
        struct pair *p = &tr->p[pi];
        p->count += delta;
        if (delta > 0) {
            if (p->wn == p->wcap) {
                int cap = p->wcap ? p->wcap * 2 : 4;
                int *wl = realloc(p->wl, (size_t)cap * sizeof *wl);
                if (!wl)
                    return -1;
                p->wl = wl, p->wcap = cap;
            }
            if (!p->wn || p->wl[p->wn - 1] != wi)
                p->wl[p->wn++] = wi;
            if (heap_push(tr, p->count, pi) < 0)
                return -1;
        }
    }
    return 0;
}

static void trainer_release(struct trainer *tr)
{
    for (int i = 0; i < tr->nw; i++)
        free(tr->w[i].sym);
    free(tr->w);
    for (int i = 0; i < tr->np; i++)
        free(tr->p[i].wl);
    free(tr->p);
    free(tr->pidx);
    free(tr->h);
}

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

static const char META[] = "\xe2\x96\x81"; /* U+2581 */

/* End of the word at s[j]: GPT-2 pre-tokenization, or (chars != NULL, SentencePiece) up to
 * the next "▁" after the first character, never splitting a character. */
static size_t word_end(const unsigned char *s, size_t n, size_t j, const struct tok_smap *chars)
{
    size_t k = j;
    if (!chars) {
        k = tok_pretok_next(TOK_PRE_GPT2, s, n, j);
    } else {
        for (k = j + utf8_len(s, n, j); k < n && (k + 3 > n || memcmp(s + k, META, 3));)
            k += utf8_len(s, n, k);
    }
    /* Very long pieces (runs of digits or punctuation) are counted in 256-byte slices:
     * merges inside them are all that matters, and each merge rescans whole words. */
    if (k - j > 256) {
        k = j + 256;
        while (chars && k > j + 1 && (s[k] & 0xC0) == 0x80)
            k--;
    }
    return k;
}

/* Initial symbols of s[0..n): bytes, or characters of chars with byte fallback. */
static int word_syms(const unsigned char *s, size_t n, const int32_t *byte_id,
                     const struct tok_smap *chars, int32_t *out)
{
    int m = 0;
    for (size_t i = 0; i < n;) {
        size_t l = chars ? utf8_len(s, n, i) : 1;
        int32_t *id = chars ? tok_smap_get(chars, s + i, l) : NULL;
        if (id)
            out[m++] = *id;
        else
            for (size_t q = i; q < i + l; q++)
                out[m++] = byte_id[s[q]];
        i += l;
    }
    return m;
}

/* Count the words of corpus (skipping <|endoftext|> separators). */
static int collect_words(struct trainer *tr, const char *corpus, size_t len, const int32_t *byte_id,
                         const struct tok_smap *chars)
{
    static const char eot[] = "<|endoftext|>";
    struct tok_smap m;
    const unsigned char *s = (const unsigned char *)corpus;
    if (tok_smap_init(&m, 1 << 14) < 0)
        return -1;
    int rc = -1, cap = 0;
    for (size_t i = 0; i < len;) {
        size_t end = len;
        const char *e = memmem(corpus + i, len - i, eot, sizeof eot - 1);
        if (e)
            end = (size_t)(e - corpus);
        for (size_t j = i; j < end;) {
            size_t k = word_end(s, end, j, chars);
            int32_t *wi = tok_smap_get(&m, s + j, k - j);
            if (wi) {
                tr->w[*wi].cnt++;
            } else {
                if (tr->nw == cap) {
                    cap = cap ? cap * 2 : 4096;
                    struct word *nw = realloc(tr->w, (size_t)cap * sizeof *nw);
                    if (!nw)
                        goto out;
                    tr->w = nw;
                }
                struct word *w = &tr->w[tr->nw];
                if (!(w->sym = malloc((k - j) * sizeof *w->sym)) ||
                    !tok_smap_put(&m, s + j, k - j, tr->nw)) {
                    free(w->sym);
                    goto out;
                }
                w->n = word_syms(s + j, k - j, byte_id, chars, w->sym);
                w->cnt = 1, w->stamp = -1;
                tr->nw++;
            }
            j = k;
        }
        i = e ? end + sizeof eot - 1 : len;
    }
    rc = 0;
out:
    tok_smap_release(&m);
    return rc;
}

/* Replace every (a,b) in word w by id, left to right. */
static void merge_word(struct word *w, int32_t a, int32_t b, int32_t id)
{
    int o = 0;
    for (int i = 0; i < w->n; i++) {
        if (i + 1 < w->n && w->sym[i] == a && w->sym[i + 1] == b)
            w->sym[o++] = id, i++;
        else
            w->sym[o++] = w->sym[i];
    }
    w->n = o;
}

static json_t *unicode_str(const unsigned char *p, size_t n)
{
    char *u = malloc(2 * n + 1);
    if (!u)
        return NULL;
    size_t l = tok_bytes_to_unicode(p, n, u);
    json_t *s = json_stringn(u, l);
    free(u);
    return s;
}

static json_t *tokenizer_json(unsigned char **bytes, const uint32_t *blen, int nids,
                              const int32_t (*merges)[2], int nmerges, int eot)
{
    json_t *vocab = json_object(), *ml = json_array();
    for (int i = 0; i < nids; i++) {
        json_t *s = unicode_str(bytes[i], blen[i]);
        json_object_set_new(vocab, json_string_value(s), json_integer(i));
        json_decref(s);
    }
    for (int i = 0; i < nmerges; i++) {
        json_t *a = unicode_str(bytes[merges[i][0]], blen[merges[i][0]]);
        json_t *b = unicode_str(bytes[merges[i][1]], blen[merges[i][1]]);
        json_array_append_new(ml, json_sprintf("%s %s", json_string_value(a), json_string_value(b)));
        json_decref(a);
        json_decref(b);
    }
    return json_pack(
        "{s:s, s:n, s:n, s:[{s:i, s:s, s:b, s:b, s:b, s:b, s:b}], s:n,"
        " s:{s:s, s:b, s:b, s:b}, s:n, s:{s:s, s:b, s:b, s:b},"
        " s:{s:s, s:n, s:n, s:s, s:s, s:b, s:b, s:b, s:o, s:o}}",
        "version", "1.0", "truncation", "padding", "added_tokens", "id", eot, "content",
        "<|endoftext|>", "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1,
        "normalizer", "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
        "use_regex", 1, "post_processor", "decoder", "type", "ByteLevel", "add_prefix_space", 1,
        "trim_offsets", 1, "use_regex", 1, "model", "type", "BPE", "dropout", "unk_token",
        "continuing_subword_prefix", "", "end_of_word_suffix", "", "fuse_unk", 0, "byte_fallback", 0,
        "ignore_merges", 0, "vocab", vocab, "merges", ml);
}

/* The merge loop: up to nmax merges of the most frequent pair, new ids first + 0, 1, ...;
 * bytes/blen (indexed by id) get each new token's bytes, merges[] its pair. seen holds the
 * bytes of every token so far: two merge paths can spell the same bytes, and a token exists
 * once. Returns the number of merges, or -1 on allocation failure. */
static int learn_merges(struct trainer *tr, unsigned char **bytes, uint32_t *blen, int32_t first,
                        int nmax, int32_t (*merges)[2], struct tok_smap *seen)
{
    int nm = 0;
    for (int i = 0; i < tr->nw; i++)
        if (count_pairs(tr, i, tr->w[i].cnt) < 0)
            return -1;
    while (nm < nmax && tr->hn > 0) {
        struct heap_ent top = heap_pop(tr);
        struct pair *p = &tr->p[top.p];
        if (p->done || p->count <= 0)
            continue;
        if (p->count != top.count) { /* stale: the count dropped since this entry was pushed */
            if (heap_push(tr, p->count, top.p) < 0)
                return -1;
            continue;
        }
        int32_t a = p->a, b = p->b, nid = first + nm;
        p->done = 1;
        if (!(bytes[nid] = malloc(blen[a] + blen[b])))
            return -1;
        memcpy(bytes[nid], bytes[a], blen[a]);
        memcpy(bytes[nid] + blen[a], bytes[b], blen[b]);
        blen[nid] = blen[a] + blen[b];
        if (tok_smap_get(seen, bytes[nid], blen[nid])) {
            free(bytes[nid]);
            bytes[nid] = NULL;
            continue;
        }
        if (!tok_smap_put(seen, bytes[nid], blen[nid], nid))
            return -1;
        merges[nm][0] = a, merges[nm][1] = b;
        /* p may move when pairs grow: copy its word list bounds first */
        int wn = p->wn, *wl = p->wl;
        p->wl = NULL, p->wn = p->wcap = 0;
        for (int k = 0; k < wn; k++) {
            struct word *w = &tr->w[wl[k]];
            if (w->stamp == nm)
                continue;
            w->stamp = nm;
            if (count_pairs(tr, wl[k], -w->cnt) < 0) {
                free(wl);
                return -1;
            }
            merge_word(w, a, b, nid);
            if (count_pairs(tr, wl[k], w->cnt) < 0) {
                free(wl);
                return -1;
            }
        }
        free(wl);
        nm++;
    }
    return nm;
}

int tok_train(const char *corpus, size_t len, int vocab_size, const char *out_json,
              mtc_error_t *err)
{
    if (vocab_size < 257 || vocab_size > (1 << 24))
        return errprintf(err, "tokenizer train: vocab size %d must be 257..16777216", vocab_size);
    int nmax = vocab_size - 257;
    struct trainer tr = {0};
    unsigned char **bytes = calloc((size_t)vocab_size, sizeof *bytes);
    uint32_t *blen = calloc((size_t)vocab_size, sizeof *blen);
    int32_t(*merges)[2] = malloc((size_t)(nmax + 1) * sizeof *merges);
    int32_t byte_id[256];
    struct tok_smap seen = {0};
    int rc = -1, nm = 0;
    json_t *j = NULL;
    char *text = NULL;
    if (!bytes || !blen || !merges || tok_smap_init(&seen, (size_t)vocab_size) < 0)
        goto oom;
    /* ids 0..255 are the bytes in GPT-2's byte-to-unicode order (printable ones first) */
    int id = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int b = 0; b < 256; b++) {
            int printable = tok_byte_cp((unsigned char)b) == (unsigned)b;
            if (printable != (pass == 0))
                continue;
            if (!(bytes[id] = malloc(1)))
                goto oom;
            bytes[id][0] = (unsigned char)b, blen[id] = 1;
            byte_id[b] = id++;
        }
    }
    if (collect_words(&tr, corpus, len, byte_id, NULL) < 0 ||
        (nm = learn_merges(&tr, bytes, blen, 256, nmax, merges, &seen)) < 0)
        goto oom;
    int eot = 256 + nm;
    if (!(j = tokenizer_json(bytes, blen, 256 + nm, (const int32_t(*)[2])merges, nm, eot)) ||
        !(text = json_dumps(j, JSON_COMPACT)))
        goto oom;
    if (mtc_write_file_atomic(out_json, text, strlen(text), 0644) < 0) {
        errprintf(err, "%s: %s", out_json, strerror(errno));
        goto out;
    }
    rc = 0;
    goto out;
oom:
    errprintf(err, "tokenizer train: out of memory");
out:
    free(text);
    json_decref(j);
    for (int i = 0; bytes && i < vocab_size; i++)
        free(bytes[i]);
    free(bytes);
    free(blen);
    free(merges);
    tok_smap_release(&seen);
    trainer_release(&tr);
    return rc;
}

/* ---- SentencePiece-style (Gemma layout) ---- */

static const char *const spm_specials[] = {"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>",
                                           "<end_of_turn>"};
#define SPM_NSP 6
#define SPM_FIRST_CHAR (SPM_NSP + 256)

struct spm_char {
    const unsigned char *p;
    size_t len;
    int64_t cnt;
};

static int cmp_char(const void *x, const void *y)
{
    const struct spm_char *a = x, *b = y;
    if (a->cnt != b->cnt)
        return a->cnt < b->cnt ? 1 : -1;
    int c = memcmp(a->p, b->p, a->len < b->len ? a->len : b->len);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* Every valid UTF-8 character of s, most frequent first (ties by bytes). */
static struct spm_char *count_chars(const unsigned char *s, size_t n, int *nc)
{
    struct tok_smap m;
    struct spm_char *c = NULL;
    int cap = 0;
    *nc = 0;
    if (tok_smap_init(&m, 1024) < 0)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_len(s, n, i);
        if (l == 1 && (s[i] >= 0x80 || !s[i])) { /* invalid byte, NUL: byte fallback */
            i++;
            continue;
        }
        int32_t *k = tok_smap_get(&m, s + i, l);
        if (k) {
            c[*k].cnt++;
        } else {
            if (*nc == cap) {
                cap = cap ? cap * 2 : 256;
                struct spm_char *nc2 = realloc(c, (size_t)cap * sizeof *c);
                if (!nc2)
                    goto oom;
                c = nc2;
            }
            if (!tok_smap_put(&m, s + i, l, *nc))
                goto oom;
            c[(*nc)++] = (struct spm_char){s + i, l, 1};
        }
        i += l;
    }
    tok_smap_release(&m);
    if (*nc)
        qsort(c, (size_t)*nc, sizeof *c, cmp_char);
    if (!c)
        c = malloc(1);
    return c;
oom:
    tok_smap_release(&m);
    free(c);
    return NULL;
}

static json_t *spm_json(unsigned char **bytes, const uint32_t *blen, int nids,
                        const int32_t (*merges)[2], int nmerges)
{
    json_t *vocab = json_object(), *ml = json_array(), *added = json_array();
    for (int i = 0; i < SPM_NSP; i++) {
        json_object_set_new(vocab, spm_specials[i], json_integer(i));
        json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", i,
                                               "content", spm_specials[i], "single_word", 0,
                                               "lstrip", 0, "rstrip", 0, "normalized", 0,
                                               "special", 1));
    }
    for (int b = 0; b < 256; b++) {
        char k[8];
        snprintf(k, sizeof k, "<0x%02X>", b);
        json_object_set_new(vocab, k, json_integer(SPM_NSP + b));
    }
    for (int i = SPM_FIRST_CHAR; i < nids; i++) {
        char *k = bytes[i] ? strndup((const char *)bytes[i], blen[i]) : NULL;
        if (k)
            json_object_set_new(vocab, k, json_integer(i));
        free(k);
    }
    for (int i = 0; i < nmerges; i++)
        json_array_append_new(ml, json_sprintf("%.*s %.*s", (int)blen[merges[i][0]],
                                               (const char *)bytes[merges[i][0]],
                                               (int)blen[merges[i][1]],
                                               (const char *)bytes[merges[i][1]]));
    return json_pack(
        "{s:s, s:n, s:n, s:o, s:{s:s, s:{s:s}, s:s}, s:n, s:n,"
        " s:{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}]},"
        " s:{s:s, s:n, s:s, s:n, s:n, s:b, s:b, s:b, s:o, s:o}}",
        "version", "1.0", "truncation", "padding", "added_tokens", added, "normalizer", "type",
        "Replace", "pattern", "String", " ", "content", META, "pre_tokenizer", "post_processor",
        "decoder", "type", "Sequence", "decoders", "type", "Replace", "pattern", "String", META,
        "content", " ", "type", "ByteFallback", "type", "Fuse", "model", "type", "BPE", "dropout",
        "unk_token", "<unk>", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 1,
        "byte_fallback", 1, "ignore_merges", 0, "vocab", vocab, "merges", ml);
}

int tok_train_spm(const char *corpus, size_t len, int vocab_size, const char *out_json,
                  mtc_error_t *err)
{
    if (vocab_size < SPM_FIRST_CHAR + 1 || vocab_size > (1 << 24))
        return errprintf(err, "tokenizer train: vocab size %d must be %d..16777216 for "
                              "sentencepiece-bpe (6 specials + 256 byte tokens + characters)",
                         vocab_size, SPM_FIRST_CHAR + 1);
    struct trainer tr = {.nomerge_below = SPM_FIRST_CHAR};
    unsigned char **bytes = calloc((size_t)vocab_size, sizeof *bytes), *norm = malloc(3 * len + 1);
    uint32_t *blen = calloc((size_t)vocab_size, sizeof *blen);
    int32_t(*merges)[2] = malloc((size_t)vocab_size * sizeof *merges);
    int32_t byte_id[256];
    struct tok_smap chars = {0}, seen = {0};
    struct spm_char *ch = NULL;
    int rc = -1, nc = 0, nm = 0;
    json_t *j = NULL;
    char *text = NULL;
    if (!bytes || !norm || !blen || !merges || tok_smap_init(&chars, 1024) < 0 ||
        tok_smap_init(&seen, (size_t)vocab_size) < 0)
        goto oom;
    size_t m = 0; /* the normalizer: " " -> "▁" */
    for (size_t i = 0; i < len; i++) {
        if (corpus[i] == ' ')
            memcpy(norm + m, META, 3), m += 3;
        else
            norm[m++] = (unsigned char)corpus[i];
    }
    for (int b = 0; b < 256; b++) {
        if (!(bytes[SPM_NSP + b] = malloc(1)))
            goto oom;
        bytes[SPM_NSP + b][0] = (unsigned char)b, blen[SPM_NSP + b] = 1;
        byte_id[b] = SPM_NSP + b;
    }
    /* the alphabet: the most frequent characters that fit; the rest fall back to bytes */
    if (!(ch = count_chars(norm, m, &nc)))
        goto oom;
    if (nc > vocab_size - SPM_FIRST_CHAR)
        nc = vocab_size - SPM_FIRST_CHAR;
    for (int i = 0; i < nc; i++) {
        int id = SPM_FIRST_CHAR + i;
        if (!(bytes[id] = malloc(ch[i].len)))
            goto oom;
        memcpy(bytes[id], ch[i].p, ch[i].len), blen[id] = (uint32_t)ch[i].len;
        if (!tok_smap_put(&chars, ch[i].p, ch[i].len, id) ||
            !tok_smap_put(&seen, ch[i].p, ch[i].len, id))
            goto oom;
    }
    int first = SPM_FIRST_CHAR + nc;
    if (collect_words(&tr, (const char *)norm, m, byte_id, &chars) < 0 ||
        (nm = learn_merges(&tr, bytes, blen, first, vocab_size - first, merges, &seen)) < 0)
        goto oom;
    if (!(j = spm_json(bytes, blen, first + nm, (const int32_t(*)[2])merges, nm)) ||
        !(text = json_dumps(j, JSON_COMPACT)))
        goto oom;
    if (mtc_write_file_atomic(out_json, text, strlen(text), 0644) < 0) {
        errprintf(err, "%s: %s", out_json, strerror(errno));
        goto out;
    }
    rc = 0;
    goto out;
oom:
    errprintf(err, "tokenizer train: out of memory");
out:
    free(text);
    json_decref(j);
    for (int i = 0; bytes && i < vocab_size; i++)
        free(bytes[i]);
    free(bytes);
    free(blen);
    free(norm);
    free(merges);
    free(ch);
    tok_smap_release(&chars);
    tok_smap_release(&seen);
    trainer_release(&tr);
    return rc;
}
