/* Fuzz harness: the container plugin's options from bytes — each NUL-ended
 * chunk is one option (its first byte picks which, the rest is the value, as
 * srun or a PYXIS_CONTAINER_* variable would pass it). Whatever is accepted
 * must be safe to use: mount destinations absolute, normalized (normalizing
 * again changes nothing) and without "..", names of [A-Za-z0-9._-] not
 * starting with '.', env names valid identifiers. */
#include "spank/container.h"
#include "text.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_opts(const struct container_opts *o)
{
    char again[1024];
    for (size_t i = 0; i < o->nmounts; i++) {
        const char *d = o->mounts[i].dst;
        if (d[0] != '/' || strstr(d, "/../") || strstr(d, "//") ||
            (strlen(d) >= 3 && strcmp(d + strlen(d) - 3, "/..") == 0) ||
            container_path_normalize("d", d, again, sizeof(again), NULL) < 0 ||
            strcmp(again, d) != 0 || o->mounts[i].src[0] != '/')
            abort();
    }
    for (const char *p = o->name; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
            abort();
    if (o->name[0] == '.')
        abort();
    for (size_t i = 0; i < o->nenv; i++)
        if (!o->env[i][0] || isdigit((unsigned char)o->env[i][0]) ||
            strspn(o->env[i], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") !=
                strlen(o->env[i]))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_text(data, size);
    if (!buf)
        return 0;
    struct container_opts o;
    container_opts_init(&o);
    mtc_error_t err;
    for (size_t at = 0; at < size;) {
        const char *chunk = buf + at;
        size_t n = strlen(chunk);
        if (n > 0) {
            const struct container_optdef *d =
                &container_optdefs[(unsigned char)chunk[0] % container_noptdefs];
            container_opt_set(&o, d->name, d->arginfo ? chunk + 1 : NULL, "/cwd", &err);
        }
        at += n + 1;
    }
    check_opts(&o);
    free(buf);
    return 0;
}
