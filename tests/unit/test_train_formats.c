/* test_train_formats: TensorBoard event records (framing, masked CRC32C, Event protobuf) and
 * safetensors write/read/validation. With a directory argument it only writes sample files
 * there (events + model.safetensors) for tests/integration/train_formats.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "train/data.h"

/* Bitwise CRC32C, independent of the table-driven one in tboard.c. */
static uint32_t crc32c_bitwise(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
}

static uint32_t masked(const unsigned char *p, size_t n)
{
    uint32_t c = crc32c_bitwise(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int write_samples(const char *dir, mtc_error_t *err, char *tbpath, size_t tblen)
{
    struct tb_writer *w = tb_create(dir, err);
    if (!w)
        return -1;
    snprintf(tbpath, tblen, "%s", tb_path(w));
    for (int s = 1; s <= 5; s++) {
        tb_scalar(w, "train/loss", s, 10.0f / (float)s);
        tb_scalar(w, "train/lr", s, 0.001f * (float)s);
    }
    tb_destroy(w);
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {-1, 0.5f, 7};
    uint16_t h[4] = {0x3f80, 0x4000, 0x4040, 0x4080};
    struct st_tensor t[3] = {
        {.name = "zeta.weight", .ndim = 2, .shape = {2, 3}, .data = a, .nbytes = sizeof a},
        {.name = "alpha.bias", .dtype = "F32", .ndim = 1, .shape = {3}, .data = b, .nbytes = sizeof b},
        {.name = "mid.bf16", .dtype = "BF16", .ndim = 2, .shape = {2, 2}, .data = h, .nbytes = sizeof h},
    };
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    return st_write(p, t, 3, err);
}

static void test_tboard(const char *dir)
{
    mtc_error_t err = {0};
    char path[512];
    CHECK(write_samples(dir, &err, path, sizeof path) == 0, "write samples: %s", err.text);
    const char *base = strrchr(path, '/') + 1;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    CHECK(strncmp(base, "events.out.tfevents.", 20) == 0 && strlen(base) > 31 && base[30] == '.' &&
              strcmp(base + 31, host) == 0,
          "event file name events.out.tfevents.<10 digits>.<host>: %s", base);
    size_t len;
    unsigned char *d = (unsigned char *)mtc_read_file(path, &len);
    CHECK(d != NULL, "read event file");
    if (!d)
        return;
    int nrec = 0, crc_ok = 1;
    size_t at = 0, first_len = 0;
    const unsigned char *first = NULL, *last = NULL;
    while (at + 12 <= len) {
        uint64_t n = le(d + at, 8);
        crc_ok &= le(d + at + 8, 4) == masked(d + at, 8);
        if (at + 12 + n + 4 > len)
            break;
        crc_ok &= le(d + at + 12 + n, 4) == masked(d + at + 12, n);
        if (!first)
            first = d + at + 12, first_len = n;
        last = d + at + 12;
        at += 12 + n + 4;
        nrec++;
    }
    CHECK(at == len && nrec == 11 && crc_ok, "11 records, every length and data CRC valid");
    CHECK(first && first[0] == 0x09 && first_len == 9 + 2 + 13 && first[9] == 0x1A &&
              memcmp(first + 11, "brain.Event:2", 13) == 0,
          "first record: wall_time + file_version brain.Event:2");
    /* last: wall_time, step=5, summary{value{tag "train/lr", simple_value 0.005}} */
    float v = 0;
    if (last)
        memcpy(&v, last + 9 + 2 + 4 + 10 + 1, 4);
    CHECK(last && last[9] == 0x10 && last[10] == 5 && last[11] == 0x2A && last[13] == 0x0A &&
              last[15] == 0x0A && last[16] == 8 && memcmp(last + 17, "train/lr", 8) == 0 &&
              last[25] == 0x15 && v == 0.001f * 5.0f,
          "last record encodes step 5, tag train/lr, simple_value 0.005");
    free(d);
    unsigned char nine[] = "123456789";
    CHECK(crc32c_bitwise(nine, 9) == 0xE3069283u, "CRC32C check value");
}

static void test_safetensors(const char *dir)
{
    mtc_error_t err = {0};
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    struct st_file *f = st_open(p, &err);
    CHECK(f != NULL, "st_open: %s", err.text);
    if (!f)
        return;
    CHECK(f->n == 3, "three tensors");
    const struct st_tensor *z = st_find(f, "zeta.weight"), *a = st_find(f, "alpha.bias"),
                           *m = st_find(f, "mid.bf16");
    CHECK(z && !strcmp(z->dtype, "F32") && z->ndim == 2 && z->shape[0] == 2 && z->shape[1] == 3 &&
              ((float *)z->data)[5] == 6,
          "zeta.weight F32 (2,3) data intact");
    CHECK(a && m && ((float *)a->data)[2] == 7 && !strcmp(m->dtype, "BF16") &&
              ((uint16_t *)m->data)[3] == 0x4080,
          "alpha.bias and BF16 tensor intact");
    CHECK(a && m && z && (char *)a->data < (char *)m->data && (char *)m->data < (char *)z->data,
          "data laid out in sorted name order");
    uint64_t hl = le(f->map, 8);
    CHECK(hl % 8 == 0 && (((char *)f->map)[8 + hl - 1] == ' ' || ((char *)f->map)[8 + hl - 1] == '}'),
          "header padded to 8 bytes");
    json_t *fmt = f->metadata ? json_object_get(f->metadata, "format") : NULL;
    CHECK_STR(fmt ? json_string_value(fmt) : NULL, "pt", "__metadata__ format pt");
    CHECK(st_find(f, "nope") == NULL, "unknown name -> NULL");
    /* corruptions: truncated file, offsets past the end, gap, unknown dtype */
    size_t len = f->map_len;
    char *copy = malloc(len + 8);
    memcpy(copy, f->map, len);
    st_close(f);
    char q[600];
    snprintf(q, sizeof q, "%s/bad.safetensors", dir);
    mtc_write_file_atomic(q, copy, len - 4, 0644);
    CHECK(!st_open(q, &err) && strstr(err.text, "bad.safetensors"), "truncated file refused: %s",
          err.text);
    memcpy(copy + len, "\0\0\0\0\0\0\0\0", 8);
    mtc_write_file_atomic(q, copy, len + 8, 0644);
    CHECK(!st_open(q, &err) && strstr(err.text, "after the last"), "trailing bytes refused: %s",
          err.text);
    char *dt = strstr(copy + 8, "\"BF16\"");
    memcpy(dt, "\"XF16\"", 6);
    mtc_write_file_atomic(q, copy, len, 0644);
    CHECK(!st_open(q, &err) && strstr(err.text, "unknown dtype"), "unknown dtype refused: %s",
          err.text);
    memcpy(dt, "\"BF16\"", 6);
    char *off = strstr(copy + 8, "[0,12]");
    if (off)
        memcpy(off, "[4,12]", 6);
    mtc_write_file_atomic(q, copy, len, 0644);
    CHECK(off && !st_open(q, &err) && strstr(err.text, "alpha.bias"),
          "wrong size/offsets refused naming the tensor: %s", err.text);
    memcpy(copy, "\xff\xff\xff\xff\0\0\0\0", 8);
    mtc_write_file_atomic(q, copy, len, 0644);
    CHECK(!st_open(q, &err) && strstr(err.text, "header size"), "huge header size refused: %s",
          err.text);
    free(copy);
    float x = 1;
    struct st_tensor bad = {.name = "x", .ndim = 1, .shape = {2}, .data = &x, .nbytes = 4};
    CHECK(st_write(q, &bad, 1, &err) < 0, "st_write refuses size/shape mismatch: %s", err.text);
}

int main(int argc, char **argv)
{
    mtc_error_t err = {0};
    if (argc == 2) {
        char path[512];
        if (write_samples(argv[1], &err, path, sizeof path) < 0) {
            fprintf(stderr, "%s\n", err.text);
            return 1;
        }
        printf("%s\n", path);
        return 0;
    }
    char dir[] = "/tmp/test_train_formats.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    test_tboard(dir);
    test_safetensors(dir);
    mtc_rm_rf(dir);
    return check_done();
}
