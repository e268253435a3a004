/* Fuzz harness: a safetensors file from bytes — st_open, every tensor's bytes read and its
 * size checked against shape x dtype, lookup by name, then the file imported as the weights
 * of a tiny GPT-2 (fixed config.json beside it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/train.h"

static char dir[64], st_path[128];
static volatile unsigned sink;

static void cleanup(void)
{
    mtc_rm_rf(dir);
}

static void put(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n))
        abort();
    fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    setenv("OMP_NUM_THREADS", "1", 1);
    snprintf(dir, sizeof dir, "/dev/shm/mtc-fuzz-st.XXXXXX");
    if (!mkdtemp(dir))
        abort();
    atexit(cleanup);
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
    char cfg[128];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    static const char cj[] = "{\"model_type\":\"gpt2\",\"vocab_size\":8,\"n_positions\":4,"
                             "\"n_embd\":4,\"n_layer\":1,\"n_head\":1}";
    put(cfg, cj, sizeof cj - 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    put(st_path, data, size);
    mtc_error_t err;
    struct st_file *f = st_open(st_path, &err);
    if (f) {
        const unsigned char *lo = f->map, *hi = lo + f->map_len;
        unsigned sum = 0; // every byte is read
        for (int i = 0; i < f->n; i++) {
            const struct st_tensor *t = &f->t[i];
            size_t n = st_dtype_size(t->dtype);
            for (int d = 0; d < t->ndim; d++)
                n *= (size_t)t->shape[d];
            const unsigned char *p = t->data;
            if (n != t->nbytes || p < lo || p > hi || t->nbytes > (size_t)(hi - p))
                abort(); /* st_open promised shape x dtype bytes inside the file */
            for (size_t k = 0; k < t->nbytes; k++)
                sum += p[k];
            if (st_find(f, t->name) == NULL)
                abort();
        }
        sink = sum;
        st_close(f);
    }
    struct model *m = interop_import_hf(dir, NULL, &err);
    model_destroy(m);
    return 0;
}
