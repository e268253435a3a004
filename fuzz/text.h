/* text: the fuzzer's bytes as a NUL-terminated string, for the harnesses
 * whose inputs are text (caller frees; NULL when out of memory). */
#ifndef MTC_FUZZ_TEXT_H
#define MTC_FUZZ_TEXT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s) {
        memcpy(s, data, size);
        s[size] = '\0';
    }
    return s;
}

#endif
