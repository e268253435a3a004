/* registry internals: the helpers the registry's files share — source.c's
 * finders (conversions look for what mtc-train import wrote) and blob.c's
 * file copy. Included by source.c, blob.c and convert.c only. */
#ifndef MTC_REGISTRY_INTERNAL_H
#define MTC_REGISTRY_INTERNAL_H

#include "registry/registry.h"

#include <stddef.h>
#include <sys/types.h>

/* The newest complete step_ directory under root into out. 0/-1. */
int registry_newest_step(const char *root, char *out, size_t len);
/* The one .bin file in dir into out. 0/-1. */
int registry_one_bin(const char *dir, char *out, size_t len);
/* Copy from to a new file to (mode), both mtcd's own (under models). 0, or
 * -1 + err. */
int registry_copy_file(const char *from, const char *to, mode_t mode, mtc_error_t *err);

#endif
