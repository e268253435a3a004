/* Fuzz harness: an llm.c GPT-2 model file (header 20240326, fp32) from bytes — imported
 * alone and against a requested shape. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "train/train.h"

static char path[128];
static struct model_config want; /* the shape of the seed files */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    setenv("OMP_NUM_THREADS", "1", 1);
    fuzz_make_dir("llmc");
    fuzz_path(path, sizeof path, "model.bin");
    mtc_error_t err;
    if (model_preset("tiny-gpt2", &want, &err) < 0)
        abort();
    want.vocab_size = 8, want.padded_vocab = 64, want.max_seq = 4, want.n_layer = 1;
    want.n_head = want.n_kv_head = 1, want.d_model = 4, want.d_ff = 16;
    if (model_config_check(&want, &err) < 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_put(path, data, size);
    mtc_error_t err;
    struct model *m = interop_import_llmc(path, NULL, &err);
    if (m && (size_t)size != 1024 + model_nparams(m) * sizeof(float))
        abort(); /* an imported file holds exactly the model */
    model_destroy(m);
    m = interop_import_llmc(path, &want, &err);
    if (m && !model_config_equal(model_cfg(m), &want))
        abort();
    model_destroy(m);
    return 0;
}
