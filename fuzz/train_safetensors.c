/* Fuzz harness: a safetensors file from bytes — st_open, every tensor's bytes read and its
 * size checked against shape x dtype, lookup by name, then the file imported as the weights
 * of a tiny GPT-2 (fixed config.json beside it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "train/train.h"

static char st_path[128];
static volatile unsigned sink;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    setenv("OMP_NUM_THREADS", "1", 1);
    fuzz_make_dir("st");
    fuzz_path(st_path, sizeof st_path, "model.safetensors");
    char cfg[128];
    fuzz_path(cfg, sizeof cfg, "config.json");
    static const char cj[] = "{\"model_type\":\"gpt2\",\"vocab_size\":8,\"n_positions\":4,"
                             "\"n_embd\":4,\"n_layer\":1,\"n_head\":1}";
    fuzz_put(cfg, cj, sizeof cj - 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_put(st_path, data, size);
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
    struct model *m = interop_import_hf(fuzz_dir, NULL, &err);
    model_destroy(m);
    return 0;
}
