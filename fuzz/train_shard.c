/* Fuzz harness: a token shard from bytes — shard_read, then the data loader over it for a
 * few batch shapes, with and without shuffle: every window's targets are its inputs shifted
 * by one, and a saved position replays the same batch. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "train/data.h"

static char path[128];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_make_dir("shard");
    fuzz_path(path, sizeof path, "train_000000.bin");
    return 0;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* tok: the shard's tokens, sorted */
static void run_loader(int B, int T, int shuffle, size_t ntok, const int32_t *tok)
{
    mtc_error_t err;
    struct loader *l = loader_create(fuzz_dir, "train", B, T, 0, 1, 42, shuffle, &err);
    if (!l)
        return;
    int32_t x[64], y[64], x2[64], y2[64];
    uint64_t steps = 2 * loader_batches_per_epoch(l) + 1;
    for (uint64_t s = 0; s < steps && s < 16; s++) {
        struct loader_pos pos;
        loader_get_pos(l, &pos);
        if (loader_next(l, x, y, &err) < 0)
            abort(); /* a loader that opened always has a next batch */
        for (int b = 0; b < B; b++)
            for (int t = 0; t + 1 < T; t++)
                if (y[b * T + t] != x[b * T + t + 1])
                    abort();
        for (int i = 0; i < B * T; i++) /* every token comes from the shard */
            if (!bsearch(&x[i], tok, ntok, sizeof *tok, cmp_i32))
                abort();
        if (s == 1) { // rewind one batch: the same batch again
            if (loader_set_pos(l, &pos, &err) < 0 || loader_next(l, x2, y2, &err) < 0 ||
                memcmp(x, x2, sizeof(int32_t) * B * T) || memcmp(y, y2, sizeof(int32_t) * B * T))
                abort();
        }
    }
    loader_ntokens(l);
    loader_destroy(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_put(path, data, size);
    mtc_error_t err;
    size_t n = 0;
    int32_t *ids = shard_read(path, &n, &err);
    if (ids)
        qsort(ids, n, sizeof *ids, cmp_i32);
    static const int shapes[][2] = {{1, 1}, {2, 3}, {4, 8}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int shuffle = 0; shuffle < 2; shuffle++) {
            if (!ids && shuffle) // a shard shard_read refuses, the loader refuses too
                continue;
            run_loader(shapes[i][0], shapes[i][1], shuffle, n, ids);
        }
    free(ids);
    return 0;
}
