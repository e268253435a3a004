/* test_train_tokenizer: byte-level BPE against hand-built GPT-2-style fixtures (encoder.json +
 * vocab.bpe, tokenizer.json with [a,b] merges, a Llama 3 style Split regex), pre-tokenizer
 * pieces, exact round-trips incl. unicode and specials, SentencePiece-style BPE (Gemma / Llama 2
 * tokenizer.json with ids worked out by hand, byte fallback), BPE training of both kinds, and
 * `prepare`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "train/data.h"

/* Wall-clock ms (local: mtc_now_ms lives with the sha256 helper, which the trainer lib does
 * not link libcrypto for). */
static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
#include "train/tok_internal.h"

static char dir[64];

/* GPT-2's byte order: printable bytes first (ids 0..187), then the rest (188..255). */
static int byte_rank[256], byte_cp[256];
static void byte_tables(void)
{
    int id = 0, extra = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0; b < 256; b++) {
            int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
            if (printable != (pass == 0))
                continue;
            byte_rank[b] = id++;
            byte_cp[b] = printable ? b : 256 + extra++;
        }
}

/* Byte-level form of a raw token: JSON-escaped, or plain UTF-8 (for vocab.bpe) when utf8. */
static void uni_mode(const char *raw, char *out, int utf8)
{
    for (const unsigned char *p = (const unsigned char *)raw; *p; p++) {
        int cp = byte_cp[*p];
        if (!utf8 && (cp == '"' || cp == '\\'))
            out += sprintf(out, "\\%c", cp);
        else if (cp < 0x80)
            *out++ = (char)cp;
        else if (utf8)
            *out++ = (char)(0xC0 | (cp >> 6)), *out++ = (char)(0x80 | (cp & 0x3F));
        else
            out += sprintf(out, "\\u%04x", cp);
    }
    *out = 0;
}

static void uni(const char *raw, char *out)
{
    uni_mode(raw, out, 0);
}

static const char *merges[][2] = {{"h", "e"},    {"l", "l"},    {"he", "ll"},   {"hell", "o"},
                                  {" ", "w"},    {"o", "r"},    {" w", "or"},   {" wor", "l"},
                                  {" worl", "d"}, {"b", "c"},   {"a", "b"}};
enum { NM = sizeof merges / sizeof merges[0], EOT_ID = 256 + NM };

static char *vocab_json(void)
{
    static char buf[1 << 16];
    char *p = buf, u[64], raw[64];
    p += sprintf(p, "{");
    for (int b = 1; b < 256; b++) { /* NUL cannot be in a C string; added below */
        raw[0] = (char)b, raw[1] = 0;
        uni(raw, u);
        p += sprintf(p, "\"%s\": %d, ", u, byte_rank[b]);
    }
    p += sprintf(p, "\"\\u%04x\": %d, ", byte_cp[0], byte_rank[0]);
    for (int i = 0; i < NM; i++) {
        snprintf(raw, sizeof raw, "%s%s", merges[i][0], merges[i][1]);
        uni(raw, u);
        p += sprintf(p, "\"%s\": %d, ", u, 256 + i);
    }
    sprintf(p, "\"<|endoftext|>\": %d}", EOT_ID);
    return buf;
}

static void write_file(const char *path, const char *s)
{
    mtc_write_file_atomic(path, s, strlen(s), 0644);
}

static int32_t *enc(const struct tok *t, const char *s, size_t *n)
{
    mtc_error_t err;
    int32_t *ids = NULL;
    *n = 0;
    if (tok_encode(t, s, strlen(s), &ids, n, &err) < 0)
        return NULL;
    return ids;
}

static int ids_eq(const struct tok *t, const char *s, const int32_t *want, size_t nw)
{
    size_t n;
    int32_t *ids = enc(t, s, &n);
    int ok = ids && n == nw && memcmp(ids, want, n * sizeof *ids) == 0;
    if (!ok) {
        printf("#   \"%s\" ->", s);
        for (size_t i = 0; ids && i < n; i++)
            printf(" %d", ids[i]);
        printf("\n");
    }
    free(ids);
    return ok;
}

static int roundtrip(const struct tok *t, const char *s, size_t len)
{
    mtc_error_t err;
    int32_t *ids;
    size_t n;
    if (tok_encode(t, s, len, &ids, &n, &err) < 0)
        return 0;
    char *d = tok_decode(t, ids, n);
    int ok = d && memcmp(d, s, len) == 0 && d[len] == 0;
    free(d);
    free(ids);
    return ok;
}

static const char unicode_text[] =
    "Héllo wörld — naïve café, Ελληνικά, русский, 日本語のテキスト, 한국어, emoji 😀🚀!\n"
    "\ttabs\r\n  spaces   and 1234567 numbers ½ ² I'm we'LL they've\n\n<|endoftext|>after"
    " <|endoftext|><|endoftext|> x\x01\x7f\xff\xfe raw bytes";

static void test_gpt2_files(void)
{
    mtc_error_t err = {0};
    char enc_path[128], bpe_path[128], line[256], u1[64], u2[64];
    snprintf(enc_path, sizeof enc_path, "%s/encoder.json", dir);
    snprintf(bpe_path, sizeof bpe_path, "%s/vocab.bpe", dir);
    write_file(enc_path, vocab_json());
    static char bpe[8192];
    char *p = bpe + sprintf(bpe, "#version: 0.2\n");
    for (int i = 0; i < NM; i++) {
        uni_mode(merges[i][0], u1, 1), uni_mode(merges[i][1], u2, 1);
        snprintf(line, sizeof line, "%s %s\n", u1, u2);
        p += sprintf(p, "%s", line);
    }
    write_file(bpe_path, bpe);

    struct tok *t = tok_load(enc_path, &err);
    CHECK(t != NULL, "load encoder.json + vocab.bpe beside it: %s", err.text);
    if (!t)
        return;
    CHECK(tok_vocab_size(t) == EOT_ID + 1 && tok_eot(t) == EOT_ID &&
              tok_special(t, "<|endoftext|>") == EOT_ID && tok_special(t, "<|x|>") == -1,
          "vocab size, <|endoftext|> recognised as the special EOT");
    /* GPT-2 byte ids: 'h' = 104 - 33 = 71, '!' = 0, ' ' (byte 32) = 188 + 32 = 220 */
    int32_t w1[] = {256 + 3, 256 + 8}, w2[] = {71, 72}, w3[] = {256 + 8, 0}, w4[] = {64, 256 + 9},
            w5[] = {256 + 10, 67}, w6[] = {220, 220, 256 + 8}, w7[] = {256 + 3, EOT_ID, 256 + 3};
    CHECK(ids_eq(t, "hello world", w1, 2), "\"hello world\" -> [hello, Ġworld]");
    CHECK(ids_eq(t, "hi", w2, 2), "unmerged bytes keep GPT-2's byte ids (h=71, i=72)");
    CHECK(ids_eq(t, " world!", w3, 2), "\" world!\" -> [Ġworld, !=0]");
    CHECK(ids_eq(t, "abc", w4, 2), "merge rank decides: b c (rank 9) before a b (rank 10)");
    CHECK(ids_eq(t, "abd", w5, 2), "a b merges when b c cannot");
    CHECK(ids_eq(t, "   world", w6, 3), "run of spaces leaves its last space to the word");
    CHECK(ids_eq(t, "hello<|endoftext|>hello", w7, 3), "special token in text -> its id");
    CHECK(roundtrip(t, unicode_text, sizeof unicode_text - 1),
          "exact round-trip of unicode, control bytes, invalid UTF-8 and specials");
    char nul[] = {'a', 0, 'b'};
    CHECK(roundtrip(t, nul, 3), "round-trip with a NUL byte");
    /* pieces longer than the simple loop's limit take the heap path: same merges */
    size_t big = 200000, n;
    char *run = malloc(big + 1);
    memset(run, 'l', big);
    run[big] = 0;
    int32_t *ids = enc(t, run, &n);
    int all_ll = ids && n == big / 2;
    for (size_t i = 0; all_ll && i < n; i++)
        all_ll = ids[i] == 256 + 1;
    CHECK(all_ll, "a 200 kB run of 'l' -> 100k x \"ll\" (heap merge on long pieces)");
    free(ids);
    for (size_t i = 0; i + 5 <= 600; i += 5)
        memcpy(run + i, "hello", 5);
    run[600] = 0;
    ids = enc(t, run, &n);
    int hellos = ids && n == 120;
    for (size_t i = 0; hellos && i < n; i++)
        hellos = ids[i] == 256 + 3;
    CHECK(hellos, "600-byte \"hellohello...\" piece -> 120 x hello");
    free(ids);
    free(run);
    int32_t bad[] = {71, 99999, -1, 72};
    char *d = tok_decode(t, bad, 4);
    CHECK_STR(d, "hi", "decode skips out-of-range ids");
    free(d);
    tok_destroy(t);

    char both[300];
    snprintf(both, sizeof both, "%s:%s", enc_path, bpe_path);
    t = tok_load(both, &err);
    CHECK(t && ids_eq(t, "hello world", w1, 2), "load \"encoder.json:vocab.bpe\"");
    tok_destroy(t);
    snprintf(both, sizeof both, "%s/nope.json", dir);
    CHECK(!tok_load(both, &err) && strstr(err.text, "nope.json"), "missing file named: %s",
          err.text);
}

static void test_hf_json(void)
{
    mtc_error_t err = {0};
    static char js[1 << 17];
    char u1[64], u2[64], path[128];
    char *p = js + sprintf(js, "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":%d,\"content\":"
                               "\"<|endoftext|>\",\"special\":true},{\"id\":%d,\"content\":"
                               "\"<|pad|>\",\"special\":true}],\"pre_tokenizer\":{\"type\":"
                               "\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
                               "\"model\":{\"type\":\"BPE\",\"vocab\":",
                           EOT_ID, EOT_ID + 1);
    p += sprintf(p, "%s,\"merges\":[", vocab_json());
    for (int i = 0; i < NM; i++) {
        uni(merges[i][0], u1), uni(merges[i][1], u2);
        p += sprintf(p, "%s[\"%s\",\"%s\"]", i ? "," : "", u1, u2);
    }
    sprintf(p, "]}}");
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_file(path, js);
    struct tok *t = tok_load(path, &err);
    CHECK(t != NULL, "load tokenizer.json with [a,b] merges: %s", err.text);
    if (!t)
        return;
    int32_t w1[] = {256 + 3, 256 + 8, EOT_ID + 1, EOT_ID};
    CHECK(ids_eq(t, "hello world<|pad|><|endoftext|>", w1, 4),
          "same ids as encoder.json, added tokens split out");
    CHECK(tok_vocab_size(t) == EOT_ID + 2 && tok_special(t, "<|pad|>") == EOT_ID + 1,
          "added tokens extend the vocabulary");
    CHECK(roundtrip(t, unicode_text, sizeof unicode_text - 1), "round-trip via tokenizer.json");
    tok_destroy(t);

    /* Llama 3 style: Split regex + ByteLevel(use_regex false), ignore_merges */
    char *m = strstr(js, "\"pre_tokenizer\"");
    char *end = strstr(m, "\"model\"");
    static char js2[1 << 17];
    snprintf(js2, sizeof js2,
             "%.*s\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
             "\"pattern\":{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]"
             "?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+"
             "|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\","
             "\"use_regex\":false}]},%s",
             (int)(m - js), js, end);
    char *im = strstr(js2, "\"type\":\"BPE\"");
    memcpy(im, "\"type\":\"BPE\",\"ignore_merges\":true,", 0); /* keep layout; patched below */
    static char js3[1 << 17];
    snprintf(js3, sizeof js3, "%.*s\"ignore_merges\":true,%s", (int)(im - js2), js2, im);
    write_file(path, js3);
    t = tok_load(path, &err);
    CHECK(t != NULL, "load Llama 3 style tokenizer.json: %s", err.text);
    if (!t)
        return;
    /* 12345 splits into 123|45 under \p{N}{1,3}; "hello" is a token, so ignore_merges emits it */
    int32_t w2[] = {256 + 3, 16, 17, 18, 19, 20, 256 + 8};
    CHECK(ids_eq(t, "hello12345 world", w2, 7), "Llama 3 pre-tokenizer and ignore_merges");
    CHECK(roundtrip(t, unicode_text, sizeof unicode_text - 1), "Llama 3 style round-trip");
    tok_destroy(t);
}

static int pieces_eq(enum tok_pretok k, const char *s, const char *const *want, int nw)
{
    size_t n = strlen(s), i = 0;
    int j = 0, ok = 1;
    while (i < n) {
        size_t e = tok_pretok_next(k, (const unsigned char *)s, n, i);
        if (j >= nw || strlen(want[j]) != e - i || memcmp(want[j], s + i, e - i)) {
            printf("#   piece %d: \"%.*s\"\n", j, (int)(e - i), s + i);
            ok = 0;
        }
        j++;
        i = e;
    }
    return ok && j == nw;
}

static void test_pretok(void)
{
    const char *g[] = {"I", "'m", " here", " ", " now", "\n", "\n", "ok", " 123", "abc", "!?",
                       " ..."};
    CHECK(pieces_eq(TOK_PRE_GPT2, "I'm here  now\n\nok 123abc!? ...", g, 12),
          "GPT-2 pieces (contractions, ' ?\\p{L}+', \\s+(?!\\S))");
    const char *g2[] = {"Héllo", " wörld", " 日本語", " ½²", "  "};
    CHECK(pieces_eq(TOK_PRE_GPT2, "Héllo wörld 日本語 ½²  ", g2, 5),
          "GPT-2 pieces over UTF-8 letters and numbers, trailing spaces kept together");
    const char *l[] = {"Hello", " ", "123", "45", " world", "\n\n", " ", " x", "'LL", ".\n"};
    CHECK(pieces_eq(TOK_PRE_LLAMA3, "Hello 12345 world\n\n  x'LL.\n", l, 10),
          "Llama 3 pieces (\\p{N}{1,3}, \\s*[\\r\\n]+, case-insensitive contractions)");
}

/* A varied corpus of about `bytes` bytes: pseudo-words from syllables, some unicode. */
static char *corpus(size_t bytes, size_t *len)
{
    static const char *syl[] = {"the", "kin", "g", "que", "en", "and", "of", "to", "thou",
                                "art", "hel", "lo", "wor", "ld", "na", "ïve", "ca", "fé",
                                "日本", "20", "24", "don't", "we'll", "—", "...", "lo", "ss",
                                "to", "ken", "Ελ", "λά", "δα", "Mün", "chen", "ra", "ti", "on"};
    enum { NS = sizeof syl / sizeof syl[0] };
    char *s = malloc(bytes + 64);
    size_t n = 0;
    unsigned r = 12345;
    while (n < bytes) {
        int k = 1 + (int)((r >> 20) % 3);
        for (int i = 0; i < k; i++) {
            r = r * 1103515245u + 12345u;
            n += (size_t)sprintf(s + n, "%s", syl[(r >> 16) % NS]);
        }
        r = r * 1103515245u + 12345u;
        n += (size_t)sprintf(s + n, "%s", (r >> 8) % 13 == 0 ? ".\n" : (r >> 8) % 7 == 0 ? ", " : " ");
    }
    *len = n;
    return s;
}

/* SentencePiece-style (Gemma) tokenizer.json: specials 0..5, <0x00>..<0xFF> = 6..261, then
 * characters and merges. norm/dec: the normalizer and decoder JSON; pre: the pre_tokenizer. */
#define M "\u2581"
static const char *const spm_words[] = {
    M,      "h",    "e",      "l",       "o",        "w",      "r",      "d",   "\u00e9",
    "he",   "ll",   "hell",   "hello",   M "w",      "or",     M "wor",  M "worl",
    M "world", M M, "lo"}; /* 262.. */
static const char *const spm_merges[] = {"h e",       "l l",        "he ll",     "hell o",
                                         M " w",      "o r",        M "w or",    M "wor l",
                                         M "worl d",  M " " M,      "l o"};
static const char *const spm_specials[] = {"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>",
                                           "<end_of_turn>"};

static struct tok *spm_load(const char *norm, const char *dec, const char *pre, int nbytes,
                            mtc_error_t *err)
{
    static char js[1 << 16];
    char path[128];
    char *p = js + sprintf(js, "{\"version\":\"1.0\",\"added_tokens\":[");
    for (int i = 0; i < 6; i++)
        p += sprintf(p, "%s{\"id\":%d,\"content\":\"%s\",\"special\":true}", i ? "," : "", i,
                     spm_specials[i]);
    p += sprintf(p, "],\"normalizer\":%s,\"pre_tokenizer\":%s,\"decoder\":%s,\"model\":{\"type\":"
                    "\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":true,"
                    "\"vocab\":{",
                 norm, pre, dec);
    for (int i = 0; i < 6; i++)
        p += sprintf(p, "\"%s\":%d,", spm_specials[i], i);
    for (int b = 0; b < nbytes; b++)
        p += sprintf(p, "\"<0x%02X>\":%d,", b, 6 + b);
    for (size_t i = 0; i < sizeof spm_words / sizeof spm_words[0]; i++)
        p += sprintf(p, "%s\"%s\":%zu", i ? "," : "", spm_words[i], 262 + i);
    p += sprintf(p, "},\"merges\":[");
    for (size_t i = 0; i < sizeof spm_merges / sizeof spm_merges[0]; i++)
        p += sprintf(p, "%s\"%s\"", i ? "," : "", spm_merges[i]);
    sprintf(p, "]}}");
    snprintf(path, sizeof path, "%s/spm.json", dir);
    write_file(path, js);
    return tok_load(path, err);
}

static void test_spm(void)
{
    mtc_error_t err = {0};
    const char *norm = "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"" M "\"}";
    const char *dec = "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":"
                      "{\"String\":\"" M "\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},"
                      "{\"type\":\"Fuse\"}]}";
    struct tok *t = spm_load(norm, dec, "null", 256, &err);
    CHECK(t != NULL, "load a Gemma-style tokenizer.json: %s", err.text);
    if (!t)
        return;
    /* hello: he(0) ll(1) he+ll(2) hell+o(3); "lo"(10) loses to ll. ▁world: ▁w(4) or(5) ... */
    int32_t w1[] = {274, 279};
    CHECK(ids_eq(t, "hello world", w1, 2), "spaces become \"▁\" and merges go by rank");
    /* ▁▁w: ▁+w (rank 4) beats ▁+▁ (rank 9); ö is not in the vocab: <0xC3> <0xB6> */
    int32_t w2[] = {2, 274, 262, 275, 6 + 0xC3, 6 + 0xB6, 268, 265, 269, 5};
    CHECK(ids_eq(t, "<bos>hello  w\u00f6rld<end_of_turn>", w2, 10),
          "specials split out, byte fallback for unknown characters");
    int32_t w3[] = {280, 270, 6 + 0xE4, 6 + 0xB8, 6 + 0xAD};
    CHECK(ids_eq(t, "  \u00e9\u4e2d", w3, 5), "known character is one token, unknown ones bytes");
    CHECK(tok_eot(t) == 1 && tok_special(t, "<start_of_turn>") == 4 && tok_vocab_size(t) == 282,
          "Gemma specials: <eos> is the end of text");
    CHECK(roundtrip(t, unicode_text, sizeof unicode_text - 1), "SentencePiece round-trip");
    static const char odd[] = "\xff\xfe a\x80 <start_of_turn>user\n  x\xe4\xb8<end_of_turn>\n";
    CHECK(roundtrip(t, odd, sizeof odd - 1), "round-trip of invalid UTF-8 via byte fallback");
    int32_t hi[] = {274};
    char *d = tok_decode(t, hi, 1);
    CHECK_STR(d, "hello", "decode");
    free(d);
    tok_destroy(t);

    /* Llama 2 style: Prepend "▁" and a Strip decoder that removes it again */
    const char *norm2 = "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":"
                        "\"" M "\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
                        "\"content\":\"" M "\"}]}";
    const char *dec2 = "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":"
                       "{\"String\":\"" M "\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},"
                       "{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":1,"
                       "\"stop\":0}]}";
    t = spm_load(norm2, dec2, "null", 256, &err);
    CHECK(t != NULL, "load a Llama 2 style tokenizer.json: %s", err.text);
    if (t) {
        int32_t w4[] = {262, 274, 279};
        CHECK(ids_eq(t, "hello world", w4, 3), "Prepend adds a leading \"▁\"");
        CHECK(roundtrip(t, "hello world", 11), "Strip removes it on decode");
        tok_destroy(t);
    }
    t = spm_load(norm, dec, "null", 200, &err);
    CHECK(!t && strstr(err.text, "<0xC8>"), "missing byte fallback token named: %s", err.text);
    tok_destroy(t);
    t = spm_load(norm, dec, "{\"type\":\"Metaspace\"}", 256, &err);
    CHECK(!t && strstr(err.text, "pre_tokenizer"), "unsupported pre_tokenizer refused: %s", err.text);
    tok_destroy(t);
}
#undef M

static void test_train(void)
{
    mtc_error_t err = {0};
    size_t len;
    char *text = corpus(60000, &len), p1[128], p2[128];
    snprintf(p1, sizeof p1, "%s/trained.json", dir);
    snprintf(p2, sizeof p2, "%s/trained2.json", dir);
    CHECK(tok_train(text, len, 400, p1, &err) == 0, "tok_train vocab 400: %s", err.text);
    tok_train(text, len, 400, p2, &err);
    size_t l1, l2;
    char *a = mtc_read_file(p1, &l1), *b = mtc_read_file(p2, &l2);
    CHECK(a && b && l1 == l2 && memcmp(a, b, l1) == 0, "training is deterministic");
    json_t *j = a ? json_loads(a, 0, NULL) : NULL;
    json_t *model = json_object_get(j, "model");
    CHECK(json_object_size(json_object_get(model, "vocab")) == 399 &&
              json_array_size(json_object_get(model, "merges")) == 143 &&
              json_integer_value(json_object_get(json_array_get(json_object_get(j, "added_tokens"), 0), "id")) == 399,
          "HF layout: 256 bytes + 143 merges, <|endoftext|> = 399 in added_tokens");
    json_decref(j);
    free(a);
    free(b);
    struct tok *t = tok_load(p1, &err);
    CHECK(t && tok_vocab_size(t) == 400 && tok_eot(t) == 399, "trained tokenizer loads: %s",
          err.text);
    if (t) {
        int32_t *ids;
        size_t n;
        tok_encode(t, text, len, &ids, &n, &err);
        CHECK(n * 2 < len, "trained merges compress the corpus (%zu bytes -> %zu tokens)", len, n);
        free(ids);
        CHECK(roundtrip(t, text, len), "round-trip of the training corpus");
        CHECK(roundtrip(t, unicode_text, sizeof unicode_text - 1), "round-trip of unseen text");
        size_t blen;
        char *big = corpus(1 << 20, &blen);
        int64_t t0 = now_ms();
        tok_encode(t, big, blen, &ids, &n, &err);
        int64_t ms = now_ms() - t0;
        CHECK(n > 0 && ms < 10000, "encodes 1 MB in seconds (%lld ms)", (long long)ms);
        free(ids);
        free(big);
    }
    tok_destroy(t);
    char out[128];
    snprintf(out, sizeof out, "%s/cli.json", dir);
    char in[128];
    snprintf(in, sizeof in, "%s/corpus.txt", dir);
    mtc_write_file_atomic(in, text, len, 0644);
    char *argv[] = {"tokenizer", "train", "--vocab-size", "300", "--input", in, "--output", out, NULL};
    CHECK(train_tokenizer_main(8, argv) == 0 && mtc_path_exists(out), "tokenizer train CLI");
    char *bad[] = {"tokenizer", "train", "--vocab-size", "300", "--bogus", "x", NULL};
    CHECK(train_tokenizer_main(6, bad) == 2, "unknown option -> usage error");
    CHECK(tok_train(text, len, 100, out, &err) < 0, "vocab below 257 refused: %s", err.text);

    /* SentencePiece-style: --kind sentencepiece-bpe writes a Gemma-layout file that loads back */
    char spm[128];
    snprintf(spm, sizeof spm, "%s/spm_trained.json", dir);
    char *argv3[] = {"tokenizer", "train", "--kind", "sentencepiece-bpe", "--vocab-size", "600",
                     "--input", in, "--output", spm, NULL};
    CHECK(train_tokenizer_main(10, argv3) == 0, "tokenizer train --kind sentencepiece-bpe");
    char *argv4[] = {"tokenizer", "train", "--kind", "unigram", "--vocab-size", "600",
                     "--input", in, "--output", spm, NULL};
    CHECK(train_tokenizer_main(10, argv4) == 2, "unknown --kind -> usage error");
    size_t sl;
    char *sj = mtc_read_file(spm, &sl);
    j = sj ? json_loads(sj, 0, NULL) : NULL;
    model = json_object_get(j, "model");
    json_t *sv = json_object_get(model, "vocab");
    const char *nt = json_string_value(json_object_get(json_object_get(j, "normalizer"), "type"));
    CHECK(json_is_true(json_object_get(model, "byte_fallback")) && nt && !strcmp(nt, "Replace") &&
              json_is_null(json_object_get(j, "pre_tokenizer")) &&
              json_integer_value(json_object_get(sv, "<eos>")) == 1 &&
              json_integer_value(json_object_get(sv, "<0x41>")) == 6 + 0x41 &&
              json_object_get(sv, "\u2581the") && json_array_size(json_object_get(model, "merges")) > 100,
          "Gemma layout: Replace normalizer, byte_fallback, <eos> = 1, <0x41> = 71, \"▁the\" learned");
    char *again = NULL;
    if (tok_train_spm(text, len, 600, p2, &err) == 0)
        again = mtc_read_file(p2, &l2);
    CHECK(again && sj && l2 == sl && !memcmp(again, sj, sl), "sentencepiece training is deterministic");
    free(again);
    free(sj);
    json_decref(j);
    t = tok_load(spm, &err);
    CHECK(t && tok_vocab_size(t) <= 600 && tok_eot(t) == 1 && tok_special(t, "<end_of_turn>") == 5,
          "trained sentencepiece tokenizer loads: %s", err.text);
    if (t) {
        int32_t *ids;
        size_t n;
        tok_encode(t, text, len, &ids, &n, &err);
        CHECK(n * 2 < len, "sentencepiece merges compress the corpus (%zu bytes -> %zu tokens)", len, n);
        free(ids);
        CHECK(roundtrip(t, text, len), "sentencepiece round-trip of the training corpus");
        CHECK(roundtrip(t, unicode_text, sizeof unicode_text - 1),
              "sentencepiece round-trip of unseen text (byte fallback)");
        static const char chat[] = "<start_of_turn>user\nhi there<end_of_turn>\n";
        tok_encode(t, chat, sizeof chat - 1, &ids, &n, &err);
        CHECK(n > 2 && ids[0] == 4 && ids[n - 2] == 5, "chat turn markers are single tokens");
        free(ids);
    }
    tok_destroy(t);
    CHECK(tok_train_spm(text, len, 262, spm, &err) < 0 && strstr(err.text, "263"),
          "sentencepiece vocab below 263 refused: %s", err.text);
    free(text);
}

static char *decode_split(const struct tok *t, const char *d, const char *split)
{
    char p[256];
    mtc_error_t err;
    size_t n;
    snprintf(p, sizeof p, "%s/%s_000000.bin", d, split);
    int32_t *ids = shard_read(p, &n, &err);
    char *s = ids ? tok_decode(t, ids, n) : NULL;
    free(ids);
    return s;
}

static void test_prepare(void)
{
    mtc_error_t err = {0};
    char tokp[128], in[128], out[128], jl[128];
    snprintf(tokp, sizeof tokp, "%s/trained.json", dir);
    snprintf(in, sizeof in, "%s/corpus.txt", dir);
    snprintf(out, sizeof out, "%s/data", dir);
    char *argv[] = {"prepare", "--tokenizer", tokp, "--input", in, "--output", out,
                    "--val-fraction", "0.1", NULL};
    CHECK(train_prepare_main(9, argv) == 0, "prepare plain text");
    struct tok *t = tok_load(tokp, &err);
    char *val = t ? decode_split(t, out, "val") : NULL, *train = t ? decode_split(t, out, "train") : NULL;
    size_t len;
    char *text = mtc_read_file(in, &len);
    size_t vl = val ? strlen(val) : 0;
    CHECK(val && train && !strncmp(val, "<|endoftext|>", 13) && vl > len / 20 && vl < len / 5 &&
              strlen(train) + vl == len + 13 && !memcmp(val + 13, text, vl - 13) &&
              !strcmp(train, text + vl - 13),
          "val (first 10%%) + train shards decode to EOT + the corpus");
    free(val);
    free(train);
    free(text);
    struct loader *l = loader_create(out, "train", 2, 16, 0, 1, 0, 0, &err);
    CHECK(l != NULL, "loader reads prepare's output: %s", err.text);
    loader_destroy(l);

    snprintf(jl, sizeof jl, "%s/docs.jsonl", dir);
    write_file(jl, "{\"text\": \"first doc\"}\n\n{\"text\": \"second\\n doc é\", \"id\": 2}\n");
    snprintf(out, sizeof out, "%s/data2", dir);
    char *argv2[] = {"prepare", "--tokenizer", tokp, "--input", jl, "--output", out,
                     "--val-fraction", "0", NULL};
    CHECK(train_prepare_main(9, argv2) == 0, "prepare JSONL");
    train = t ? decode_split(t, out, "train") : NULL;
    CHECK_STR(train, "<|endoftext|>first doc<|endoftext|>second\n doc é",
              "JSONL documents each follow an EOT");
    free(train);
    write_file(jl, "{\"text\": \"ok\"}\n{\"txt\": 1}\n");
    CHECK(train_prepare_main(9, argv2) == 1, "JSONL line without text fails");
    tok_destroy(t);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_train_tok.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    byte_tables();
    test_pretok();
    test_gpt2_files();
    test_hf_json();
    test_spm();
    test_train();
    test_prepare();
    mtc_rm_rf(dir);
    return check_done();
}
