/* test_train_tfevents: common/tfevents.c reads TensorBoard event files —
 * mtc-train's own writer's (train/tboard.c), records built here by hand
 * the way other writers encode scalars (a scalar float tensor, a double's
 * tensor_content), a file cut mid-record (read up to the last whole one,
 * the rest read once written), a bad CRC (stops there), and garbage. */
#include "check.h"
#include "train/data.h"
#include <limits.h>
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct got {
    int n;
    struct mtc_scalar s[16];
};

static void take(void *arg, const struct mtc_scalar *s)
{
    struct got *g = arg;
    if (g->n < 16)
        g->s[g->n++] = *s;
}

/* A TFRecord around data[n] into out; its length. */
static size_t frame(unsigned char *out, const unsigned char *data, size_t n)
{
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)((uint64_t)n >> (8 * i));
    uint32_t c = mtc_crc32c_masked(out, 8);
    memcpy(out + 8, &c, 4); /* little-endian host */
    memcpy(out + 12, data, n);
    c = mtc_crc32c_masked(data, n);
    memcpy(out + 12 + n, &c, 4);
    return 16 + n;
}

/* Event{step=2 (varint), summary=5{value=1{tag=1, tensor=8{TensorProto t[tn]}}}} */
static size_t tensor_event(unsigned char *e, int64_t step, const char *tag, const unsigned char *t,
                           size_t tn)
{
    unsigned char val[160], sum[170];
    size_t vn = 0, sn = 0, en = 0, tl = strlen(tag);
    val[vn++] = 0x0A, val[vn++] = (unsigned char)tl;
    memcpy(val + vn, tag, tl), vn += tl;
    val[vn++] = 0x42, val[vn++] = (unsigned char)tn;
    memcpy(val + vn, t, tn), vn += tn;
    sum[sn++] = 0x0A, sum[sn++] = (unsigned char)vn;
    memcpy(sum + sn, val, vn), sn += vn;
    e[en++] = 0x10, e[en++] = (unsigned char)step; /* step < 128 */
    e[en++] = 0x2A, e[en++] = (unsigned char)sn;
    memcpy(e + en, sum, sn), en += sn;
    return en;
}

/* A float as TensorProto{dtype=1 DT_FLOAT, float_val=5 packed}. */
static size_t float_tensor(unsigned char *t, float v)
{
    t[0] = 0x08, t[1] = 1, t[2] = 0x2A, t[3] = 4;
    memcpy(t + 4, &v, 4);
    return 8;
}

/* A double as TensorProto{dtype=1 DT_DOUBLE (2), tensor_content=4}. */
static size_t double_tensor(unsigned char *t, double v)
{
    t[0] = 0x08, t[1] = 2, t[2] = 0x22, t[3] = 8;
    memcpy(t + 4, &v, 8);
    return 12;
}

int main(void)
{
    char dir[] = "/tmp/mtc-test-tfevents.XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a temp dir");
    mtc_error_t err = {""};

    /* mtc-train's writer: a version record, then one Event a scalar */
    struct tb_writer *w = tb_create(dir, &err);
    CHECK(w && tb_scalar(w, "train/loss", 1, 3.25f) == 0 &&
              tb_scalar(w, "train/loss", 2, 2.5f) == 0 &&
              tb_scalar(w, "train/tokens_per_s", 2, 1000.0f) == 0,
          "mtc-train's writer wrote three scalars (%s)", err.text);
    char path[4096];
    snprintf(path, sizeof(path), "%s", w ? tb_path(w) : "");
    tb_destroy(w);
    struct got g = {0};
    long long off = 0;
    int corrupt = 0;
    long n = mtc_tfevents_read(path, &off, &corrupt, take, &g);
    CHECK(n == 4 && g.n == 3 && !corrupt, "4 records, 3 scalars (%ld, %d)", n, g.n);
    CHECK(g.n == 3 && !strcmp(g.s[0].tag, "train/loss") && g.s[0].step == 1 &&
              g.s[0].value == 3.25 && g.s[1].step == 2 && g.s[1].value == 2.5 &&
              !strcmp(g.s[2].tag, "train/tokens_per_s") && g.s[2].value == 1000.0 &&
              g.s[0].wall_time > 1.7e9,
          "tags, steps, values and wall times as written");
    g.n = 0;
    CHECK(mtc_tfevents_read(path, &off, &corrupt, take, &g) == 0 && g.n == 0,
          "read again from the offset: nothing new");

    /* another writer's encodings, cut mid-record, then completed */
    unsigned char e1[256], e2[256], t1[16], t2[16], file[2048];
    size_t len = frame(file, e1, tensor_event(e1, 7, "loss", t1, float_tensor(t1, 1.5f)));
    size_t second = frame(file + len, e2,
                          tensor_event(e2, 8, "reduced_train_loss", t2, double_tensor(t2, 0.125)));
    char p2[4200];
    snprintf(p2, sizeof(p2), "%s/events.out.tfevents.other", dir);
    FILE *f = fopen(p2, "wb");
    CHECK(f && fwrite(file, 1, len + second / 2, f) == len + second / 2, "a file cut mid-record");
    fflush(f);
    g.n = 0, off = 0;
    n = mtc_tfevents_read(p2, &off, &corrupt, take, &g);
    CHECK(n == 1 && g.n == 1 && !corrupt && off == (long long)len && !strcmp(g.s[0].tag, "loss") &&
              g.s[0].step == 7 && g.s[0].value == 1.5,
          "read up to the last whole record: a scalar float tensor (%ld, off %lld)", n, off);
    fwrite(file + len + second / 2, 1, second - second / 2, f);
    fclose(f);
    g.n = 0;
    n = mtc_tfevents_read(p2, &off, &corrupt, take, &g);
    CHECK(n == 1 && g.n == 1 && g.s[0].step == 8 && g.s[0].value == 0.125 &&
              !strcmp(g.s[0].tag, "reduced_train_loss"),
          "the rest once written: a double's tensor_content");

    /* a bad CRC: reading stops there, never past it */
    file[len + 12 + 3] ^= 0x40; /* a byte of the second record's data */
    f = fopen(p2, "wb");
    fwrite(file, 1, len + second, f);
    fclose(f);
    g.n = 0, off = 0;
    n = mtc_tfevents_read(p2, &off, &corrupt, take, &g);
    CHECK(n == 1 && g.n == 1 && corrupt && off == (long long)len,
          "a bad data CRC: the good record read, then stopped (corrupt)");
    file[len + 12 + 3] ^= 0x40;
    file[len + 2] ^= 0x01; /* the length, its CRC now wrong */
    size_t used;
    g.n = 0;
    n = mtc_tfevents_parse(file, len + second, &used, &corrupt, take, &g);
    CHECK(n == 1 && corrupt && used == len, "a bad length CRC: stopped before the record");

    /* garbage and a frame whose protobuf is wrong: no crash, nothing read */
    unsigned char junk[512];
    srand(7);
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (unsigned char)rand();
    g.n = 0;
    n = mtc_tfevents_parse(junk, sizeof(junk), &used, &corrupt, take, &g);
    CHECK(n == 0 && g.n == 0 && used == 0, "random bytes: nothing read");
    unsigned char bad[] = {0x2A, 0x7F, 0x0A}; /* summary says 127 bytes, has 1 */
    len = frame(file, bad, sizeof(bad));
    n = mtc_tfevents_parse(file, len, &used, &corrupt, take, &g);
    CHECK(n == 0 && corrupt, "a protobuf longer than its record: corrupt");
    CHECK(mtc_tfevents_read("/nonexistent/x", &off, &corrupt, take, &g) < 0, "no file: -1");
    /* fuzz/tfevents found it: 12 to 15 bytes with a valid length CRC read the
     * data CRC past the end (len - at - 16 wrapped around) */
    unsigned char short_rec[14] = {0x10, 0xe3, 0xf1, 0xe2, 0xdb, 0, 0, 0, 0x99, 0x03, 0x8d, 0x9c};
    uint32_t hc = mtc_crc32c_masked(short_rec, 8);
    memcpy(short_rec + 8, &hc, 4);
    n = mtc_tfevents_parse(short_rec, sizeof(short_rec), &used, &corrupt, take, &g);
    CHECK(n == 0 && used == 0 && !corrupt,
          "tfevents_short_record: a frame shorter than 16 bytes waits");

    /* a run's directory is its user's: a FIFO named like an event file is
     * refused at once, never waited on (mtcd's monitor read it blocking) */
    char fifo[PATH_MAX];
    snprintf(fifo, sizeof(fifo), "%s/events.out.tfevents.fifo", dir);
    off = 0;
    alarm(10);
    CHECK(mkfifo(fifo, 0600) == 0 && mtc_tfevents_read(fifo, &off, &corrupt, take, &g) < 0,
          "tfevents_fifo: a FIFO is not read (no wait)");
    alarm(0);
    unlink(fifo);

    unlink(path);
    unlink(p2);
    rmdir(dir);
    return check_done();
}
