/* check: a minimal TAP-producing unit test harness. Each CHECK prints
 * "ok N - what" or "not ok N - what (file:line)"; check_done() returns the
 * exit status (non-zero when anything failed). tests/run.sh counts the lines. */
#ifndef MTC_CHECK_H
#define MTC_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_n, check_failed;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        int ok_ = !!(cond);                                                                        \
        check_n++;                                                                                 \
        if (!ok_)                                                                                  \
            check_failed++;                                                                        \
        printf("%sok %d - ", ok_ ? "" : "not ", check_n);                                          \
        printf(__VA_ARGS__);                                                                       \
        if (!ok_)                                                                                  \
            printf(" (%s:%d: %s)", __FILE__, __LINE__, #cond);                                     \
        printf("\n");                                                                              \
        fflush(stdout);                                                                            \
    } while (0)

#define CHECK_STR(a, b, ...)                                                                       \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        int eq_ = a_ && b_ && strcmp(a_, b_) == 0;                                                 \
        CHECK(eq_, __VA_ARGS__);                                                                   \
        if (!eq_)                                                                                  \
            printf("#   got \"%s\"\n#   want \"%s\"\n", a_ ? a_ : "(null)", b_ ? b_ : "(null)");  \
    } while (0)

static inline int check_done(void)
{
    printf("1..%d\n", check_n);
    return check_failed ? 1 : 0;
}

#endif
