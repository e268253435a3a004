/* tfevents: reading TensorBoard event files — the TFRecord framing (a
 * little-endian u64 length, the masked CRC-32C of those 8 bytes, the data,
 * the masked CRC-32C of the data; both checked) and, in each record, the
 * Event protobuf's wall_time, step and summary scalars: a Summary.Value's
 * simple_value, or a scalar float/double tensor (what newer writers emit).
 * Everything is bounds-checked: a truncated file is read up to its last
 * whole record, a corrupt record stops the reading there. The Castagnoli
 * CRC is also what mtc-train's writer (train/tboard.c) frames with. */
#include "common/common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t crc_table[256];

uint32_t mtc_crc32c(const void *data, size_t n)
{
    const unsigned char *p = data;
    if (!crc_table[1]) /* idempotent: racing initialisations write the same values */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            crc_table[i] = c;
        }
    uint32_t c = 0xFFFFFFFFu;
    while (n--)
        c = crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t mtc_crc32c_masked(const void *data, size_t n)
{
    uint32_t c = mtc_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static uint64_t le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A protobuf cursor over [p, end). */
struct pb {
    const unsigned char *p, *end;
};

static int varint(struct pb *b, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end)
            return -1;
        unsigned char c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return 0;
    }
    return -1;
}

/* The next field: its number and wire type, and its payload (varint value,
 * fixed bits, or a sub-buffer). 0, 1 at the end, -1 when malformed. */
struct field {
    uint64_t num, v;
    int wt;
    struct pb sub;
};

static int next(struct pb *b, struct field *f)
{
    if (b->p >= b->end)
        return 1;
    uint64_t key;
    if (varint(b, &key) < 0)
        return -1;
    f->num = key >> 3;
    f->wt = (int)(key & 7);
    switch (f->wt) {
    case 0:
        return varint(b, &f->v);
    case 1:
        if (b->end - b->p < 8)
            return -1;
        f->v = le(b->p, 8);
        b->p += 8;
        return 0;
    case 5:
        if (b->end - b->p < 4)
            return -1;
        f->v = le(b->p, 4);
        b->p += 4;
        return 0;
    case 2:
        if (varint(b, &f->v) < 0 || f->v > (uint64_t)(b->end - b->p))
            return -1;
        f->sub.p = b->p;
        f->sub.end = b->p + f->v;
        b->p += f->v;
        return 0;
    default: /* groups (3, 4) and the reserved types are not in events */
        return -1;
    }
}

static double f32(uint64_t bits)
{
    uint32_t u = (uint32_t)bits;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static double f64(uint64_t bits)
{
    double x;
    memcpy(&x, &bits, 8);
    return x;
}

/* A TensorProto holding one float or double: 1 with *v, 0 when it is not
 * such a scalar, -1 when malformed. */
static int tensor_scalar(struct pb t, double *v)
{
    struct field f;
    int rc, dtype = 0, have = 0;
    while ((rc = next(&t, &f)) == 0) {
        if (f.num == 1 && f.wt == 0)
            dtype = (int)f.v; /* DT_FLOAT 1, DT_DOUBLE 2 */
        else if (f.num == 5 && f.wt == 5)
            *v = f32(f.v), have = 1; /* float_val, unpacked */
        else if (f.num == 5 && f.wt == 2 && f.sub.end - f.sub.p == 4)
            *v = f32(le(f.sub.p, 4)), have = 1; /* float_val, packed */
        else if (f.num == 6 && f.wt == 1)
            *v = f64(f.v), have = 1;
        else if (f.num == 6 && f.wt == 2 && f.sub.end - f.sub.p == 8)
            *v = f64(le(f.sub.p, 8)), have = 1;
        else if (f.num == 4 && f.wt == 2) { /* tensor_content: the raw bytes */
            long n = f.sub.end - f.sub.p;
            if (n == 4 || n == 8)
                *v = n == 4 ? f32(le(f.sub.p, 4)) : f64(le(f.sub.p, 8)), have = n;
        }
    }
    if (rc < 0)
        return -1;
    if (have == 4 && dtype == 2) /* 4 content bytes cannot be a double */
        return 0;
    return have && (dtype == 0 || dtype == 1 || dtype == 2);
}

/* One Summary.Value: its tag and scalar into s. 1 when it is a scalar. */
static int summary_value(struct pb b, struct mtc_scalar *s)
{
    struct field f;
    int rc, have = 0;
    s->tag[0] = '\0';
    while ((rc = next(&b, &f)) == 0) {
        if (f.num == 1 && f.wt == 2) {
            size_t n = (size_t)(f.sub.end - f.sub.p);
            if (n >= sizeof(s->tag))
                n = sizeof(s->tag) - 1;
            memcpy(s->tag, f.sub.p, n);
            s->tag[n] = '\0';
        } else if (f.num == 2 && f.wt == 5) {
            s->value = f32(f.v), have = 1;
        } else if (f.num == 8 && f.wt == 2) {
            int t = tensor_scalar(f.sub, &s->value);
            if (t < 0)
                return -1;
            have |= t;
        }
    }
    return rc < 0 ? -1 : have && s->tag[0];
}

/* One Event: each scalar of its summary to fn. 0, or -1 when malformed. */
static int event(const unsigned char *p, size_t n, mtc_scalar_fn fn, void *arg)
{
    struct pb b = {p, p + n};
    struct field f;
    struct mtc_scalar s = {0};
    struct pb summary = {NULL, NULL};
    int rc;
    while ((rc = next(&b, &f)) == 0) {
        if (f.num == 1 && f.wt == 1)
            s.wall_time = f64(f.v);
        else if (f.num == 2 && f.wt == 0)
            s.step = (int64_t)f.v;
        else if (f.num == 5 && f.wt == 2)
            summary = f.sub;
    }
    if (rc < 0)
        return -1;
    while (summary.p && (rc = next(&summary, &f)) == 0) {
        if (f.num != 1 || f.wt != 2)
            continue;
        int v = summary_value(f.sub, &s);
        if (v < 0)
            return -1;
        if (v > 0 && fn)
            fn(arg, &s);
    }
    return rc < 0 ? -1 : 0;
}

long mtc_tfevents_parse(const unsigned char *buf, size_t len, size_t *used, int *corrupt,
                        mtc_scalar_fn fn, void *arg)
{
    long records = 0;
    size_t at = 0;
    *corrupt = 0;
    while (len - at >= 12) {
        const unsigned char *h = buf + at;
        uint64_t n = le(h, 8);
        if ((uint32_t)le(h + 8, 4) != mtc_crc32c_masked(h, 8)) {
            *corrupt = 1;
            break;
        }
        if (len - at < 16 || n > len - at - 16)
            break; /* not all written yet */
        if ((uint32_t)le(h + 12 + n, 4) != mtc_crc32c_masked(h + 12, (size_t)n) ||
            event(h + 12, (size_t)n, fn, arg) < 0) {
            *corrupt = 1;
            break;
        }
        at += 16 + (size_t)n;
        records++;
    }
    *used = at;
    return records;
}

long mtc_tfevents_read(const char *path, long long *off, int *corrupt, mtc_scalar_fn fn, void *arg)
{
    /* a run's file, read with the thread's ids (mtcd: the job's user): a
     * regular file only, never a FIFO that would block the reader nor a
     * kernel filesystem's (mtc_open_as_user) */
    int fd = mtc_open_as_user(path, 0);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    long total = 0;
    *corrupt = 0;
    if (fseeko(f, *off, SEEK_SET) < 0) {
        fclose(f);
        return -1;
    }
    /* a window at a time; a record larger than it gets a larger window */
    size_t cap = 1 << 16, have = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + have, 1, cap - have, f);
        have += r;
        size_t used = 0;
        total += mtc_tfevents_parse(buf, have, &used, corrupt, fn, arg);
        *off += (long long)used;
        memmove(buf, buf + used, have - used);
        have -= used;
        if (*corrupt || r == 0)
            break; /* corrupt, or the end: what is left is a record being written */
        if (have == cap) {
            uint64_t need = le(buf, 8) + 16;
            if (need > (64u << 20)) { /* no event is that large */
                *corrupt = 1;
                break;
            }
            size_t ncap = (size_t)need > 2 * cap ? (size_t)need : 2 * cap;
            unsigned char *nb = realloc(buf, ncap);
            if (!nb)
                break;
            buf = nb, cap = ncap;
        }
    }
    free(buf);
    fclose(f);
    return total;
}
