/* tboard: TensorBoard event file writer — TFRecord framing with masked CRC32C
 * (common/tfevents.c, which also reads them) and a hand-encoded Event
 * protobuf per scalar (formats.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "train/data.h"

struct tb_writer {
    FILE *f;
    char *path;
};

static size_t put_varint(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    return n;
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static int write_record(struct tb_writer *w, const unsigned char *data, size_t n)
{
    unsigned char head[12], tail[4];
    put_le(head, n, 8);
    put_le(head + 8, mtc_crc32c_masked(head, 8), 4);
    put_le(tail, mtc_crc32c_masked(data, n), 4);
    if (fwrite(head, 1, 12, w->f) != 12 || fwrite(data, 1, n, w->f) != n ||
        fwrite(tail, 1, 4, w->f) != 4 || fflush(w->f) != 0)
        return -1;
    return 0;
}

/* Event header fields: wall_time (1, fixed64 double) and step (2, varint). */
static size_t put_event_head(unsigned char *p, int64_t step)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    double wt = (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
    uint64_t bits;
    memcpy(&bits, &wt, 8);
    size_t n = 0;
    p[n++] = 0x09;
    put_le(p + n, bits, 8);
    n += 8;
    if (step != 0) {
        p[n++] = 0x10;
        n += put_varint(p + n, (uint64_t)step);
    }
    return n;
}

struct tb_writer *tb_create(const char *log_dir, mtc_error_t *err)
{
    if (mtc_mkdir_p(log_dir, 0755) < 0) {
        errprintf(err, "%s: %s", log_dir, strerror(errno));
        return NULL;
    }
    struct tb_writer *w = calloc(1, sizeof *w);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    if (!w || asprintf(&w->path, "%s/events.out.tfevents.%010lld.%s", log_dir,
                       (long long)time(NULL), host) < 0) {
        free(w);
        errprintf(err, "tensorboard: out of memory");
        return NULL;
    }
    if (!(w->f = fopen(w->path, "wb"))) {
        errprintf(err, "%s: %s", w->path, strerror(errno));
        goto error;
    }
    unsigned char ev[64];
    size_t n = put_event_head(ev, 0);
    static const char version[] = "brain.Event:2";
    ev[n++] = 0x1A;
    ev[n++] = (unsigned char)(sizeof version - 1);
    memcpy(ev + n, version, sizeof version - 1);
    n += sizeof version - 1;
    if (write_record(w, ev, n) < 0) {
        errprintf(err, "%s: %s", w->path, strerror(errno));
        goto error;
    }
    return w;
error:
    tb_destroy(w);
    return NULL;
}

int tb_scalar(struct tb_writer *w, const char *tag, int64_t step, float value)
{
    size_t tl = strlen(tag);
    if (tl > 1024) {
        errno = EINVAL;
        return -1;
    }
    /* Value { tag=1, simple_value=2 } inside Summary { value=1 } inside Event { summary=5 } */
    unsigned char val[1100], sum[1120], ev[1160];
    size_t vn = 0, sn = 0;
    val[vn++] = 0x0A;
    vn += put_varint(val + vn, tl);
    memcpy(val + vn, tag, tl);
    vn += tl;
    val[vn++] = 0x15;
    uint32_t fb;
    memcpy(&fb, &value, 4);
    put_le(val + vn, fb, 4);
    vn += 4;
    sum[sn++] = 0x0A;
    sn += put_varint(sum + sn, vn);
    memcpy(sum + sn, val, vn);
    sn += vn;
    size_t n = put_event_head(ev, step);
    ev[n++] = 0x2A;
    n += put_varint(ev + n, sn);
    memcpy(ev + n, sum, sn);
    n += sn;
    return write_record(w, ev, n);
}

const char *tb_path(const struct tb_writer *w)
{
    return w->path;
}

void tb_destroy(struct tb_writer *w)
{
    if (!w)
        return;
    int e = errno;
    if (w->f)
        fclose(w->f);
    free(w->path);
    free(w);
    errno = e;
}
