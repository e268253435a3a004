/* tok_internal: pieces shared by tokenizer.c and bpe_train.c — the GPT-2 byte-to-unicode
 * table, the hand-written pre-tokenizers, and a string -> int hash map. Not a public API. */
#ifndef MTC_TRAIN_TOK_INTERNAL_H
#define MTC_TRAIN_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Pre-tokenization regexes we implement by hand (see tokenizer.c for their text). */
enum tok_pretok { TOK_PRE_NONE, TOK_PRE_GPT2, TOK_PRE_LLAMA3 };

/* End of the piece that starts at s[i] (i < n) under pre-tokenizer kind; always > i. */
size_t tok_pretok_next(enum tok_pretok kind, const unsigned char *s, size_t n, size_t i);

/* GPT-2 byte-to-unicode: byte b is shown as code point tok_byte_cp(b). Appends the UTF-8
 * form of the bytes p[0..n) to out (room for 2n bytes) and returns its length. */
unsigned tok_byte_cp(unsigned char b);
size_t tok_bytes_to_unicode(const unsigned char *p, size_t n, char *out);

/* Open-addressing map from a byte string to an int. Keys are copied. */
struct tok_smap {
    struct tok_sent {
        char *k;
        uint32_t len;
        int32_t v;
        uint64_t h;
    } *e;
    size_t cap, n;
};
uint64_t tok_hash(const void *p, size_t n);
int tok_smap_init(struct tok_smap *m, size_t hint);
void tok_smap_release(struct tok_smap *m);
/* Insert or overwrite; returns a pointer to the stored value, NULL on allocation failure. */
int32_t *tok_smap_put(struct tok_smap *m, const void *k, size_t len, int32_t v);
int32_t *tok_smap_get(const struct tok_smap *m, const void *k, size_t len);

#endif
