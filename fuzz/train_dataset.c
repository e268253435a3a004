/* Fuzz harness: a dataset source from bytes — read as a .jsonl, a .csv and a .txt file and
 * validated for every kind (the readers of `mtc-train data check|prepare`); every error
 * must be one line naming the file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "train/dset_internal.h"

static char paths[3][128];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_make_dir("dataset");
    fuzz_path(paths[0], sizeof paths[0], "in.jsonl");
    fuzz_path(paths[1], sizeof paths[1], "in.csv");
    fuzz_path(paths[2], sizeof paths[2], "in.txt");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int f = 0; f < 3; f++) {
        fuzz_put(paths[f], data, size);
        for (int kind = DSET_PRETRAIN; kind <= DSET_RL; kind++) {
            struct dset_options o = {.source = paths[f], .kind = (enum dset_kind)kind};
            struct dset_result r;
            mtc_error_t err = {{0}};
            if (dset_check(&o, &r, &err) < 0) {
                if (strchr(err.text, '\n') || !strstr(err.text, paths[f]))
                    abort(); // one line, naming the file
            } else if (r.bytes != size || r.records == 0) {
                abort();
            }
        }
    }
    return 0;
}
