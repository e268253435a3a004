/* test_train_data: token shards (ours and llm.c's), error messages naming the file, and the
 * data loader's rank split, shuffling, epoch wrap and exact resume. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "train/data.h"

static char dir[64];

static void write_raw(const char *path, const void *a, size_t na, const void *b, size_t nb)
{
    FILE *f = fopen(path, "wb");
    fwrite(a, 1, na, f);
    if (b)
        fwrite(b, 1, nb, f);
    fclose(f);
}

static void test_shards(void)
{
    mtc_error_t err = {0};
    char p[400];
    int32_t ids[1000];
    for (int i = 0; i < 1000; i++)
        ids[i] = (i * 7919) % 70000;
    size_t n = 0;
    snprintf(p, sizeof p, "%s/w4.bin", dir);
    CHECK(shard_write(p, ids, 1000, 4, &err) == 0, "write uint32 shard");
    int32_t *r = shard_read(p, &n, &err);
    CHECK(r && n == 1000 && memcmp(r, ids, sizeof ids) == 0, "uint32 shard round-trips");
    free(r);
    snprintf(p, sizeof p, "%s/w2.bin", dir);
    CHECK(shard_write(p, ids, 1000, 2, &err) < 0 && strstr(err.text, "does not fit"),
          "uint16 shard rejects ids >= 65536: %s", err.text);
    for (int i = 0; i < 1000; i++)
        ids[i] = (i * 7919) % 65536;
    CHECK(shard_write(p, ids, 1000, 2, &err) == 0, "write uint16 shard");
    r = shard_read(p, &n, &err);
    CHECK(r && n == 1000 && memcmp(r, ids, sizeof ids) == 0, "uint16 shard round-trips");
    free(r);

    /* llm.c shards, written by hand per formats.md */
    int32_t h[256] = {20240520, 1, 5};
    uint16_t t16[5] = {50256, 1, 2, 3, 65535};
    snprintf(p, sizeof p, "%s/llmc16.bin", dir);
    write_raw(p, h, sizeof h, t16, sizeof t16);
    r = shard_read(p, &n, &err);
    CHECK(r && n == 5 && r[0] == 50256 && r[4] == 65535, "reads llm.c 20240520 uint16 shard");
    free(r);
    h[0] = 20240801, h[1] = 7, h[2] = 3;
    uint32_t t32[3] = {128000, 5, 128255};
    snprintf(p, sizeof p, "%s/llmc32.bin", dir);
    write_raw(p, h, sizeof h, t32, sizeof t32);
    r = shard_read(p, &n, &err);
    CHECK(r && n == 3 && r[0] == 128000 && r[2] == 128255, "reads llm.c 20240801 uint32 shard");
    free(r);
    /* truncated: header says 3 tokens, 2 present */
    snprintf(p, sizeof p, "%s/trunc.bin", dir);
    write_raw(p, h, sizeof h, t32, 8);
    r = shard_read(p, &n, &err);
    CHECK(!r && strstr(err.text, "trunc.bin") && strstr(err.text, "truncated"),
          "truncated shard is an error naming the file: %s", err.text);
    snprintf(p, sizeof p, "%s/bad.bin", dir);
    h[0] = 12345;
    write_raw(p, h, sizeof h, t32, sizeof t32);
    r = shard_read(p, &n, &err);
    CHECK(!r && strstr(err.text, "bad.bin") && strstr(err.text, "magic"),
          "bad magic is an error naming the file: %s", err.text);
    snprintf(p, sizeof p, "%s/missing.bin", dir);
    r = shard_read(p, &n, &err);
    CHECK(!r && strstr(err.text, "missing.bin"), "missing shard names the file: %s", err.text);
}

/* Two train shards whose token i is i (+100000 in the second), one val shard. */
static void make_dataset(const char *d)
{
    mtc_error_t err;
    char p[400];
    int32_t *ids = malloc(2000 * sizeof *ids);
    mkdir(d, 0755);
    for (int i = 0; i < 1001; i++)
        ids[i] = i;
    snprintf(p, sizeof p, "%s/train_000000.bin", d);
    shard_write(p, ids, 1001, 4, &err);
    for (int i = 0; i < 801; i++)
        ids[i] = 100000 + i;
    snprintf(p, sizeof p, "%s/train_000001.bin", d);
    shard_write(p, ids, 801, 4, &err);
    for (int i = 0; i < 300; i++)
        ids[i] = 5000 + i;
    snprintf(p, sizeof p, "%s/val_000000.bin", d);
    shard_write(p, ids, 300, 2, &err);
    free(ids);
}

static void test_loader(void)
{
    mtc_error_t err = {0};
    char d[128];
    snprintf(d, sizeof d, "%s/data", dir);
    make_dataset(d);
    enum { B = 2, T = 10 };
    int32_t x[B * T], y[B * T];

    struct loader *l = loader_create(d, "train", B, T, 0, 1, 1, 0, &err);
    CHECK(l != NULL, "loader over train shards: %s", err.text);
    /* shard 0: 100 windows -> 50 batches; shard 1: 80 windows -> 40 batches */
    CHECK(loader_batches_per_epoch(l) == 90, "batches per epoch = %llu",
          (unsigned long long)loader_batches_per_epoch(l));
    CHECK(loader_ntokens(l) == 1802, "token count");
    int ok = 1;
    for (int s = 0; s < 50; s++) {
        loader_next(l, x, y, &err);
        for (int i = 0; i < B * T; i++)
            ok &= x[i] == s * B * T + i && y[i] == x[i] + 1;
    }
    CHECK(ok, "sequential batches walk the first shard in order, y = x shifted by one");
    loader_next(l, x, y, &err);
    CHECK(x[0] == 100000 && y[B * T - 1] == 100000 + B * T, "then the second shard");
    for (int s = 1; s < 40; s++)
        loader_next(l, x, y, &err);
    loader_next(l, x, y, &err);
    struct loader_pos pos;
    loader_get_pos(l, &pos);
    CHECK(x[0] == 0 && pos.epoch == 1 && pos.shard == 0 && pos.offset == 1,
          "wraps into epoch 1 at the first shard");
    loader_destroy(l);

    /* rank split: ranks 0 and 1 of 2 together see what one rank with 2B sees */
    struct loader *l2 = loader_create(d, "train", 2 * B, T, 0, 1, 1, 1, &err);
    struct loader *r0 = loader_create(d, "train", B, T, 0, 2, 1, 1, &err);
    struct loader *r1 = loader_create(d, "train", B, T, 1, 2, 1, 1, &err);
    CHECK(l2 && r0 && r1, "loaders for two ranks");
    int32_t X[2 * B * T], Y[2 * B * T], x1[B * T], y1[B * T];
    ok = 1;
    int differs = 0;
    for (int s = 0; s < 60; s++) {
        loader_next(l2, X, Y, &err);
        loader_next(r0, x, y, &err);
        loader_next(r1, x1, y1, &err);
        ok &= memcmp(X, x, sizeof x) == 0 && memcmp(X + B * T, x1, sizeof x1) == 0 &&
              memcmp(Y + B * T, y1, sizeof y1) == 0;
        differs |= memcmp(x, x1, sizeof x) != 0;
        for (int b = 0; b < B; b++)
            ok &= x[b * T] % T == 0 || x[b * T] >= 100000;
    }
    CHECK(ok && differs, "rank r of 2 gets its own half of the global (shuffled) batch");
    loader_destroy(l2);
    loader_destroy(r1);

    /* shuffle: a permutation of the shard's windows, different per epoch */
    struct loader *a = loader_create(d, "train", B, T, 0, 1, 7, 1, &err);
    int seen[100] = {0}, inorder = 1;
    for (int s = 0; s < 50; s++) {
        loader_next(a, x, y, &err);
        for (int b = 0; b < B; b++) {
            seen[x[b * T] / T]++;
            inorder &= x[b * T] == (s * B + b) * T;
        }
    }
    int perm = 1;
    for (int i = 0; i < 100; i++)
        perm &= seen[i] == 1;
    CHECK(perm && !inorder, "shuffled epoch visits every window of the shard once, not in order");
    for (int s = 0; s < 40; s++)
        loader_next(a, x, y, &err);
    int32_t e0[B * T];
    loader_next(a, e0, y, &err);
    struct loader *a2 = loader_create(d, "train", B, T, 0, 1, 7, 1, &err);
    loader_next(a2, x, y, &err);
    CHECK(memcmp(e0, x, sizeof x) != 0, "epoch 1 order differs from epoch 0");
    loader_destroy(a2);

    /* exact resume: get_pos mid-run, continue, then a fresh loader set_pos repeats it */
    loader_get_pos(a, &pos);
    int32_t want[30][B * T];
    for (int s = 0; s < 30; s++)
        loader_next(a, want[s], y, &err);
    struct loader *c = loader_create(d, "train", B, T, 0, 1, 7, 1, &err);
    CHECK(loader_set_pos(c, &pos, &err) == 0, "set_pos on a fresh loader");
    ok = 1;
    for (int s = 0; s < 30; s++) {
        loader_next(c, x, y, &err);
        ok &= memcmp(x, want[s], sizeof x) == 0;
    }
    CHECK(ok, "resumed loader yields exactly the same next 30 batches (across a shard switch)");
    pos.shard = 9;
    CHECK(loader_set_pos(c, &pos, &err) < 0, "set_pos outside the data is refused");
    loader_destroy(c);
    loader_destroy(a);
    loader_destroy(r0);

    struct loader *v = loader_create(d, "val", 4, 8, 0, 1, 0, 0, &err);
    int32_t vx[32], vy[32];
    CHECK(v && loader_next(v, vx, vy, &err) == 0 && vx[0] == 5000 && vy[31] == 5032,
          "val split reads val_*.bin");
    loader_destroy(v);
    CHECK(!loader_create(d, "train", 64, 64, 0, 1, 0, 0, &err) && strstr(err.text, "too few"),
          "too little data is an error: %s", err.text);
    CHECK(!loader_create(d, "test", 2, 2, 0, 1, 0, 0, &err) && strstr(err.text, "no test shards"),
          "no shards is an error: %s", err.text);
    char p[400];
    snprintf(p, sizeof p, "%s/train_000002.bin", d);
    int32_t hh[256] = {20240520, 1, 100};
    write_raw(p, hh, sizeof hh, hh, 20);
    CHECK(!loader_create(d, "train", 2, 2, 0, 1, 0, 0, &err) && strstr(err.text, "train_000002.bin"),
          "a truncated shard fails loader_create naming it: %s", err.text);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_train_data.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    test_shards();
    test_loader();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return check_done();
}
