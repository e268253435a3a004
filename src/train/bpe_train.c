/* bpe_train: train a byte-level BPE tokenizer on a corpus (GPT-2 pre-tokenization, merges
 * chosen by pair frequency with incremental pair counts and a lazy max-heap) and write it as a
 * Hugging Face tokenizer.json with <|endoftext|> as the last id. */
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

/* Count the GPT-2 pre-tokenized words of corpus (skipping <|endoftext|> separators). */
static int collect_words(struct trainer *tr, const char *corpus, size_t len, const int32_t *byte_id)
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
            size_t k = tok_pretok_next(TOK_PRE_GPT2, s, end, j);
            /* Very long pieces (runs of digits or punctuation) are counted in 256-byte slices:
             * merges inside them are all that matters, and each merge rescans whole words. */
            if (k - j > 256)
                k = j + 256;
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
                for (size_t q = j; q < k; q++)
                    w->sym[q - j] = byte_id[s[q]];
                w->n = (int)(k - j), w->cnt = 1, w->stamp = -1;
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
    if (collect_words(&tr, corpus, len, byte_id) < 0)
        goto oom;
    for (int i = 0; i < tr.nw; i++)
        if (count_pairs(&tr, i, tr.w[i].cnt) < 0)
            goto oom;
    while (nm < nmax && tr.hn > 0) {
        struct heap_ent top = heap_pop(&tr);
        struct pair *p = &tr.p[top.p];
        if (p->done || p->count <= 0)
            continue;
        if (p->count != top.count) { /* stale: the count dropped since this entry was pushed */
            if (heap_push(&tr, p->count, top.p) < 0)
                goto oom;
            continue;
        }
        int32_t a = p->a, b = p->b, nid = 256 + nm;
        p->done = 1;
        if (!(bytes[nid] = malloc(blen[a] + blen[b])))
            goto oom;
        memcpy(bytes[nid], bytes[a], blen[a]);
        memcpy(bytes[nid] + blen[a], bytes[b], blen[b]);
        blen[nid] = blen[a] + blen[b];
        /* Two merge paths can spell the same bytes; a token exists once, so keep the first. */
        if (tok_smap_get(&seen, bytes[nid], blen[nid])) {
            free(bytes[nid]);
            bytes[nid] = NULL;
            continue;
        }
        if (!tok_smap_put(&seen, bytes[nid], blen[nid], nid))
            goto oom;
        merges[nm][0] = a, merges[nm][1] = b;
        /* p may move when pairs grow: copy its word list bounds first */
        int wn = p->wn, *wl = p->wl;
        p->wl = NULL, p->wn = p->wcap = 0;
        for (int k = 0; k < wn; k++) {
            struct word *w = &tr.w[wl[k]];
            if (w->stamp == nm)
                continue;
            w->stamp = nm;
            if (count_pairs(&tr, wl[k], -w->cnt) < 0) {
                free(wl);
                goto oom;
            }
            merge_word(w, a, b, nid);
            if (count_pairs(&tr, wl[k], w->cnt) < 0) {
                free(wl);
                goto oom;
            }
        }
        free(wl);
        nm++;
    }
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
