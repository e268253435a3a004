/* normalize: what the normalize harnesses share — bytes to JSON, normalize,
 * and the canonical form must normalize again to itself (abort otherwise). */
#ifndef MTC_FUZZ_NORMALIZE_H
#define MTC_FUZZ_NORMALIZE_H

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/common.h"

typedef json_t *(*fuzz_normalize_fn)(const json_t *in, mtc_error_t *err);

/* The parsed input (caller decrefs; NULL when the bytes are not JSON) and, in
 * *out, its canonical form or NULL. */
static inline json_t *fuzz_normalize(const uint8_t *data, size_t size, fuzz_normalize_fn fn,
                                     json_t **out)
{
    mtc_error_t err;
    json_t *in = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    *out = in ? fn(in, &err) : NULL;
    if (*out) {
        json_t *again = fn(*out, &err);
        if (!again || !json_equal(again, *out))
            abort(); /* normalizing is idempotent */
        json_decref(again);
    }
    return in;
}

#endif
