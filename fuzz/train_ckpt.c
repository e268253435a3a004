/* Fuzz harness: a checkpoint directory from bytes — meta.json (up to the first NUL), then
 * params.bin (the rest; optim.bin is it twice) with DONE: read the config, verify, find the
 * newest, restore weights, optimizer state and meta, and resume a data loader and the
 * fine-tuning checks from the recorded positions. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "train/train.h"

static char root[128], ck[160];
static struct loader *ld; /* over a fixed two-shard data set */

static void cleanup(void)
{
    loader_destroy(ld);
}

static void put(const char *d, const char *name, const void *p, size_t n, int twice)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", d, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    for (int i = 0; i < (twice ? 2 : 1); i++)
        if (n && fwrite(p, 1, n, f) != n)
            abort();
    fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    setenv("OMP_NUM_THREADS", "1", 1);
    log_open(NULL, "fuzz", LOG_ERR); // ckpt_find_latest warns about each bad checkpoint
    fuzz_make_dir("ckpt");
    atexit(cleanup);
    fuzz_path(root, sizeof root, "ck");
    snprintf(ck, sizeof ck, "%s/step_00000001", root);
    if (mtc_mkdir_p(ck, 0755) < 0)
        abort();
    char data[128], path[256];
    fuzz_path(data, sizeof data, "data");
    mtc_mkdir_p(data, 0755);
    int32_t ids[200];
    for (int i = 0; i < 200; i++)
        ids[i] = i;
    mtc_error_t err;
    for (int s = 0; s < 2; s++) {
        snprintf(path, sizeof path, "%s/train_%06d.bin", data, s);
        if (shard_write(path, ids, 100 + 100 * (size_t)s, 2, &err) < 0)
            abort();
    }
    if (!(ld = loader_create(data, "train", 2, 4, 0, 1, 7, 1, &err)))
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t ml = nul ? (size_t)(nul - data) : size;
    size_t pl = nul ? size - ml - 1 : 0;
    put(ck, "meta.json", data, ml, 0);
    put(ck, "params.bin", nul ? nul + 1 : data, pl, 0);
    put(ck, "optim.bin", nul ? nul + 1 : data, pl, 1);
    put(ck, "DONE", "ok\n", 3, 0);

    mtc_error_t err;
    char found[256];
    ckpt_find_latest(root, found, sizeof found, &err);
    ckpt_find_latest_valid(root, found, sizeof found, &err);
    ckpt_verify(ck, &err);
    struct model_config cfg;
    if (ckpt_read_config(ck, &cfg, &err) < 0)
        return 0;
    size_t n = model_config_nparams(&cfg);
    if (n == 0 || n * sizeof(float) != pl)
        abort(); /* ckpt_read_config checked params.bin against its config */
    float *params = malloc(pl);
    struct opt_state opt;
    static struct ckpt_meta meta;
    if (!params || opt_init(&opt, n, &err) < 0)
        abort();
    // meta alone (no checksum to match): the recorded positions resume a loader
    if (ckpt_load(ck, NULL, n, NULL, &meta, &err) == 0) {
        if (meta.nranks >= 1 && meta.nranks <= TRAIN_MAX_RANKS &&
            loader_set_pos(ld, &meta.loader[0], &err) == 0) {
            int32_t x[8], y[8];
            if (loader_next(ld, x, y, &err) < 0)
                abort();
        }
        for (int mode = 0; mode <= FT_DPO; mode++)
            ft_resume_check(meta.train, mode, "init", ck, &err);
        json_decref(meta.train);
    }
    memset(&meta, 0, sizeof meta);
    if (ckpt_load(ck, params, n, &opt, &meta, &err) == 0) // weights and moments too
        json_decref(meta.train);
    opt_release(&opt);
    free(params);
    char got[256];
    struct model *m = interop_load_checkpoint(ck, got, sizeof got, &err);
    model_destroy(m);
    return 0;
}
