/* files: what the file-reading harnesses share — a private directory under
 * /dev/shm removed at exit, and the fuzzer's bytes written to a file in it. */
#ifndef MTC_FUZZ_FILES_H
#define MTC_FUZZ_FILES_H

#include <stdio.h>
#include <stdlib.h>

#include "common/common.h"

static char fuzz_dir[64]; /* the harness's private directory */

static void fuzz_dir_remove(void)
{
    mtc_rm_rf(fuzz_dir);
}

/* Make fuzz_dir, /dev/shm/mtc-fuzz-NAME.XXXXXX, removed at exit (after what the
 * harness registers with atexit later). Aborts on failure. */
static inline void fuzz_make_dir(const char *name)
{
    snprintf(fuzz_dir, sizeof fuzz_dir, "/dev/shm/mtc-fuzz-%s.XXXXXX", name);
    if (!mkdtemp(fuzz_dir))
        abort();
    atexit(fuzz_dir_remove);
}

/* path[len] = fuzz_dir/name. */
static inline void fuzz_path(char *path, size_t len, const char *name)
{
    snprintf(path, len, "%s/%s", fuzz_dir, name);
}

/* path holds exactly the n bytes at p (created or truncated). Aborts on failure. */
static inline void fuzz_put(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n))
        abort();
    fclose(f);
}

#endif
