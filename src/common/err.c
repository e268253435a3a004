/* err: the mtc_error_t convention — callee fills human text, returns -1. The
 * text is always one line: control characters from quoted input (a name with
 * a newline) are escaped, so a message cannot forge a second line. */
#include "common/common.h"

#include <errno.h>
#include <stdio.h>

int errprintf(mtc_error_t *err, const char *fmt, ...)
{
    int saved = errno;
    if (err) {
        char raw[sizeof(err->text)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof(raw), fmt, ap);
        va_end(ap);
        size_t o = 0;
        for (const unsigned char *s = (const unsigned char *)raw; *s; s++) {
            char esc[5];
            int n = 1;
            if (*s == '\n' || *s == '\r' || *s == '\t')
                n = snprintf(esc, sizeof(esc), "\\%c", *s == '\n' ? 'n' : *s == '\r' ? 'r' : 't');
            else if (*s < 0x20 || *s == 0x7f)
                n = snprintf(esc, sizeof(esc), "\\x%02x", *s);
            else
                esc[0] = (char)*s;
            if (o + (size_t)n >= sizeof(err->text))
                break;
            for (int k = 0; k < n; k++)
                err->text[o++] = esc[k];
        }
        err->text[o] = '\0';
    }
    errno = saved;
    return -1;
}
