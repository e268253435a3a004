/* err: the mtc_error_t convention — callee fills human text, returns -1. */
#include "common/common.h"

#include <errno.h>
#include <stdio.h>

int errprintf(mtc_error_t *err, const char *fmt, ...)
{
    int saved = errno;
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof(err->text), fmt, ap);
        va_end(ap);
    }
    errno = saved;
    return -1;
}
