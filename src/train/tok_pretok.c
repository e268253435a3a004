/* tok_pretok: hand-written pre-tokenizers (the GPT-2 and Llama 3 split regexes) over UTF-8
 * with a small Unicode category table, the GPT-2 byte-to-unicode table, and a string map.
 * Limits: letters/numbers/spaces are classified from a table of the common scripts (Latin,
 * Greek, Cyrillic, Armenian, Hebrew, Arabic, Devanagari, Georgian, kana, CJK, Hangul, fullwidth);
 * code points outside it count as "other" (punctuation-like), combining marks too, so rare
 * scripts may split differently from the regex engine HF uses. Invalid UTF-8 bytes are "other". */
#include <stdlib.h>
#include <string.h>

#include "train/tok_internal.h"

enum cls { C_O, C_L, C_N, C_S };

static const struct range {
    uint32_t lo, hi;
    unsigned char c;
} ranges[] = {
    {0x85, 0x85, C_S},       {0xA0, 0xA0, C_S},       {0xAA, 0xAA, C_L},
    {0xB2, 0xB3, C_N},       {0xB5, 0xB5, C_L},       {0xB9, 0xB9, C_N},
    {0xBA, 0xBA, C_L},       {0xBC, 0xBE, C_N},       {0xC0, 0xD6, C_L},
    {0xD8, 0xF6, C_L},       {0xF8, 0x2C1, C_L},      {0x2C6, 0x2D1, C_L},
    {0x2E0, 0x2E4, C_L},     {0x2EC, 0x2EC, C_L},     {0x2EE, 0x2EE, C_L},
    {0x370, 0x374, C_L},     {0x376, 0x377, C_L},     {0x37A, 0x37D, C_L},
    {0x37F, 0x37F, C_L},     {0x386, 0x386, C_L},     {0x388, 0x3F5, C_L},
    {0x3F7, 0x481, C_L},     {0x48A, 0x52F, C_L},     {0x531, 0x556, C_L},
    {0x561, 0x587, C_L},     {0x5D0, 0x5EA, C_L},     {0x620, 0x64A, C_L},
    {0x660, 0x669, C_N},     {0x671, 0x6D3, C_L},     {0x6F0, 0x6F9, C_N},
    {0x904, 0x939, C_L},     {0x966, 0x96F, C_N},     {0x10A0, 0x10FF, C_L},
    {0x1680, 0x1680, C_S},   {0x1E00, 0x1FBC, C_L},   {0x2000, 0x200A, C_S},
    {0x2028, 0x2029, C_S},   {0x202F, 0x202F, C_S},   {0x205F, 0x205F, C_S},
    {0x2070, 0x2070, C_N},   {0x2074, 0x2079, C_N},   {0x2080, 0x2089, C_N},
    {0x2150, 0x2189, C_N},   {0x2460, 0x249B, C_N},   {0x3000, 0x3000, C_S},
    {0x3041, 0x3096, C_L},   {0x30A1, 0x30FA, C_L},   {0x3400, 0x4DBF, C_L},
    {0x4E00, 0x9FFF, C_L},   {0xAC00, 0xD7A3, C_L},   {0xF900, 0xFAFF, C_L},
    {0xFF10, 0xFF19, C_N},   {0xFF21, 0xFF3A, C_L},   {0xFF41, 0xFF5A, C_L},
    {0x20000, 0x2FFFF, C_L},
};

/* Decode one code point at s[i]; *len gets its byte length (1 for an invalid byte). */
static uint32_t utf8_at(const unsigned char *s, size_t n, size_t i, size_t *len)
{
    unsigned char c = s[i];
    int k = c < 0x80 ? 0 : c >= 0xF8 ? -1 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 ? 1 : -1;
    *len = 1;
    if (k == 0)
        return c;
    if (k < 0 || i + (size_t)k >= n)
        return 0xFFFFFFFFu;
    uint32_t cp = c & (0x3Fu >> k);
    for (int j = 1; j <= k; j++) {
        if ((s[i + j] & 0xC0) != 0x80)
            return 0xFFFFFFFFu;
        cp = cp << 6 | (s[i + j] & 0x3F);
    }
    *len = (size_t)k + 1;
    return cp;
}

static enum cls cls_of(uint32_t cp)
{
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')
            return C_L;
        if (cp >= '0' && cp <= '9')
            return C_N;
        if (cp == ' ' || (cp >= 9 && cp <= 13))
            return C_S;
        return C_O;
    }
    size_t lo = 0, hi = sizeof ranges / sizeof ranges[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < ranges[mid].lo)
            hi = mid;
        else if (cp > ranges[mid].hi)
            lo = mid + 1;
        else
            return (enum cls)ranges[mid].c;
    }
    return C_O;
}

static enum cls cls_at(const unsigned char *s, size_t n, size_t i, size_t *len)
{
    return cls_of(utf8_at(s, n, i, len));
}

/* Advance over a run of class c from i; at most max code points. */
static size_t run(const unsigned char *s, size_t n, size_t i, enum cls c, size_t max)
{
    size_t len;
    for (size_t k = 0; i < n && k < max && cls_at(s, n, i, &len) == c; k++)
        i += len;
    return i;
}

static size_t contraction(const unsigned char *s, size_t n, size_t i, int fold)
{
    static const char *const suf[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    if (s[i] != '\'')
        return 0;
    for (size_t k = 0; k < sizeof suf / sizeof suf[0]; k++) {
        size_t l = strlen(suf[k]);
        if (i + 1 + l > n)
            continue;
        size_t j = 0;
        for (; j < l; j++) {
            unsigned char c = s[i + 1 + j];
            if (fold && c >= 'A' && c <= 'Z')
                c = (unsigned char)(c | 0x20);
            if (c != (unsigned char)suf[k][j])
                break;
        }
        if (j == l)
            return i + 1 + l;
    }
    return 0;
}

/* \s+(?!\S) then \s+ : a run of spaces gives back its last one when a non-space follows. */
static size_t spaces(const unsigned char *s, size_t n, size_t i)
{
    size_t k = run(s, n, i, C_S, (size_t)-1), len;
    if (k == n)
        return k;
    if (k > i) {
        /* step back one code point */
        size_t last = i;
        for (size_t p = i; p < k; p += len) {
            cls_at(s, n, p, &len);
            last = p;
        }
        if (last > i)
            return last;
    }
    return k;
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t gpt2_next(const unsigned char *s, size_t n, size_t i)
{
    size_t e = contraction(s, n, i, 0), len;
    if (e)
        return e;
    size_t j = s[i] == ' ' && i + 1 < n ? i + 1 : i;
    enum cls c = cls_at(s, n, j, &len);
    if (c == C_L || c == C_N || c == C_O)
        return run(s, n, j, c, (size_t)-1);
    return spaces(s, n, i);
}

/* Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t llama3_next(const unsigned char *s, size_t n, size_t i)
{
    size_t e = contraction(s, n, i, 1), len, len2;
    if (e)
        return e;
    enum cls c = cls_at(s, n, i, &len);
    if (c == C_L)
        return run(s, n, i, C_L, (size_t)-1);
    if (c != C_N && s[i] != '\r' && s[i] != '\n' && i + len < n &&
        cls_at(s, n, i + len, &len2) == C_L)
        return run(s, n, i + len, C_L, (size_t)-1);
    if (c == C_N)
        return run(s, n, i, C_N, 3);
    size_t j = s[i] == ' ' && i + 1 < n ? i + 1 : i;
    if (cls_at(s, n, j, &len2) == C_O) {
        j = run(s, n, j, C_O, (size_t)-1);
        while (j < n && (s[j] == '\r' || s[j] == '\n'))
            j++;
        return j;
    }
    /* \s*[\r\n]+ : through the last CR/LF of the whitespace run */
    size_t k = run(s, n, i, C_S, (size_t)-1), last_nl = 0;
    for (size_t p = i; p < k; p++)
        if (s[p] == '\r' || s[p] == '\n')
            last_nl = p + 1;
    if (last_nl)
        return last_nl;
    return spaces(s, n, i);
}

size_t tok_pretok_next(enum tok_pretok kind, const unsigned char *s, size_t n, size_t i)
{
    size_t e = kind == TOK_PRE_GPT2 ? gpt2_next(s, n, i) : kind == TOK_PRE_LLAMA3 ? llama3_next(s, n, i) : n;
    return e > i ? e : i + 1;
}

/* Printable bytes keep their code point; the other 68 get 256, 257, ... in byte order. */
unsigned tok_byte_cp(unsigned char b)
{
    static unsigned table[256];
    if (!table['A']) {
        unsigned next = 256;
        unsigned t[256];
        for (int c = 0; c < 256; c++) {
            int keep = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255);
            t[c] = keep ? (unsigned)c : next++;
        }
        memcpy(table, t, sizeof t);
    }
    return table[b];
}

size_t tok_bytes_to_unicode(const unsigned char *p, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned cp = tok_byte_cp(p[i]);
        if (cp < 0x80) {
            out[o++] = (char)cp;
        } else {
            out[o++] = (char)(0xC0 | (cp >> 6));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    return o;
}

uint64_t tok_hash(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

int tok_smap_init(struct tok_smap *m, size_t hint)
{
    m->cap = 64;
    while (m->cap < hint * 2)
        m->cap *= 2;
    m->n = 0;
    m->e = calloc(m->cap, sizeof *m->e);
    return m->e ? 0 : -1;
}

void tok_smap_release(struct tok_smap *m)
{
    if (!m->e)
        return;
    for (size_t i = 0; i < m->cap; i++)
        free(m->e[i].k);
    free(m->e);
    m->e = NULL;
}

static struct tok_sent *slot(const struct tok_smap *m, const void *k, size_t len, uint64_t h)
{
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        struct tok_sent *e = &m->e[i];
        if (!e->k || (e->h == h && e->len == len && memcmp(e->k, k, len) == 0))
            return e;
    }
}

int32_t *tok_smap_get(const struct tok_smap *m, const void *k, size_t len)
{
    struct tok_sent *e = slot(m, k, len, tok_hash(k, len));
    return e->k ? &e->v : NULL;
}

int32_t *tok_smap_put(struct tok_smap *m, const void *k, size_t len, int32_t v)
{
    if ((m->n + 1) * 2 > m->cap) {
        struct tok_smap g = {calloc(m->cap * 2, sizeof *m->e), m->cap * 2, m->n};
        if (!g.e)
            return NULL;
        for (size_t i = 0; i < m->cap; i++)
            if (m->e[i].k)
                *slot(&g, m->e[i].k, m->e[i].len, m->e[i].h) = m->e[i];
        free(m->e);
        *m = g;
    }
    uint64_t h = tok_hash(k, len);
    struct tok_sent *e = slot(m, k, len, h);
    if (!e->k) {
        if (!(e->k = malloc(len ? len : 1)))
            return NULL;
        memcpy(e->k, k, len);
        e->len = (uint32_t)len;
        e->h = h;
        m->n++;
    }
    e->v = v;
    return &e->v;
}
