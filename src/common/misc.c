/* misc: time (and durations as people write them), randomness, hashing
 * and checked size arithmetic. */
#include "common/common.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

int mtc_size_mul(size_t a, size_t b, size_t *out)
{
    if (__builtin_mul_overflow(a, b, out)) {
        errno = EOVERFLOW;
        return -1;
    }
    return 0;
}

int mtc_size_add(size_t a, size_t b, size_t *out)
{
    if (__builtin_add_overflow(a, b, out)) {
        errno = EOVERFLOW;
        return -1;
    }
    return 0;
}

int64_t mtc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec mtc_deadline_ms(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L)
        ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    return ts;
}

char *mtc_time_rfc3339(int64_t ms, char *buf, size_t len)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char base[32];
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03dZ", base, (int)(ms % 1000));
    return buf;
}

void mtc_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

int mtc_duration_ms(const char *s, int64_t *ms)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    const char *p = s ? s : "";
    int64_t whole = 0, frac = 0, scale = 1;
    size_t digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) /* past 2^40 it is too long anyway */
        whole = whole < INT64_C(1) << 40 ? whole * 10 + (*p - '0') : whole;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (scale < 1000000) /* microsecond-ish precision is plenty */
                frac = frac * 10 + (*p - '0'), scale *= 10;
    for (size_t i = 0; digits && i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(p, units[i].unit) != 0)
            continue;
        /* 30 days, and every unit's product below it fits an int64 */
        const int64_t max = INT64_C(30) * 24 * 3600 * 1000;
        if (whole > max / units[i].ms) {
            errno = ERANGE;
            return -1;
        }
        int64_t v = whole * units[i].ms + frac * units[i].ms / scale;
        if (v > max) {
            errno = ERANGE;
            return -1;
        }
        *ms = v;
        return 0;
    }
    errno = EINVAL;
    return -1;
}

int mtc_random_hex(char *buf, size_t nbytes)
{
    unsigned char raw[64];
    if (nbytes > sizeof(raw)) {
        errno = EINVAL;
        return -1;
    }
    if (getrandom(raw, nbytes, 0) != (ssize_t)nbytes)
        return -1;
    for (size_t i = 0; i < nbytes; i++)
        sprintf(buf + 2 * i, "%02x", raw[i]);
    buf[2 * nbytes] = '\0';
    return 0;
}

void mtc_sha256_hex(const char *s, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(s, strlen(s), md, &n, EVP_sha256(), NULL);
    static const char hex[] = "0123456789abcdef"; /* every API request: no sprintf */
    for (unsigned int i = 0; i < n && i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
}

/* The short host name (common.h). */
void mtc_short_hostname(char *buf, size_t len)
{
    if (gethostname(buf, len) < 0)
        snprintf(buf, len, "localhost");
    buf[len - 1] = '\0';
    char *dot = strchr(buf, '.');
    if (dot)
        *dot = '\0';
}
