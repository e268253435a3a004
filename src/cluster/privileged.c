/* privileged: the spec fields that make mtc or Slurm execute (or read) something
 * as root on a node — a library it loads, scripts, hook commands. Only an admin
 * may set or change them; the API asks here whether a request does. */
#include "cluster/cluster.h"

#include <stdio.h>
#include <string.h>

/* "a.b.c" from the spec root; "nodePools[].x" is field x of every node pool
 * (matched by pool id between the old and the new spec). */
static const char *const privileged[] = {
    "healthPolicy.nvmlLibrary",                     /* dlopen'ed by mtc-agent (root) */
    "healthPolicy.kernelLog",                       /* read by mtc-agent (root) */
    "orchestratorSpec.slurmSpec.prologBashScripts", /* run by slurmd (root) */
    "orchestratorSpec.slurmSpec.epilogBashScripts",
    "nodePools[].startupScript", /* run as root on a node where a provider supports it */
    NULL,
};

/* The value at a dotted path below obj, or NULL. */
static const json_t *get_path(const json_t *obj, const char *path)
{
    char seg[64];
    while (obj && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof(seg))
            return NULL;
        memcpy(seg, path, n);
        seg[n] = '\0';
        obj = json_object_get(obj, seg);
        path += n + (path[n] == '.');
    }
    return obj;
}

/* Unset, "", [] and {} all mean "nothing": a default filled in is no change. */
static int empty(const json_t *v)
{
    return !v || json_is_null(v) || (json_is_string(v) && !*json_string_value(v)) ||
           (json_is_array(v) && json_array_size(v) == 0) ||
           (json_is_object(v) && json_object_size(v) == 0);
}

static int differ(const json_t *a, const json_t *b)
{
    if (empty(a) || empty(b))
        return empty(a) != empty(b);
    return !json_equal(a, b);
}

static const json_t *pool_by_id(const json_t *spec, const char *id)
{
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(spec, "nodePools"), i, p)
    {
        const char *pid = json_string_value(json_object_get(p, "id"));
        if (pid && id && strcmp(pid, id) == 0)
            return p;
    }
    return NULL;
}

int cluster_spec_privileged_change(const json_t *old, const json_t *new_, char *field, size_t len)
{
    for (const char *const *f = privileged; *f; f++) {
        const char *pools = strstr(*f, "[].");
        if (!pools) {
            if (differ(old ? get_path(old, *f) : NULL, get_path(new_, *f))) {
                snprintf(field, len, "%s", *f);
                return 1;
            }
            continue;
        }
        /* per node pool: compare each pool of the new spec with its old self */
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(new_, "nodePools"), i, p)
        {
            const char *id = json_string_value(json_object_get(p, "id"));
            const json_t *was = old ? pool_by_id(old, id) : NULL;
            if (differ(was ? get_path(was, pools + 3) : NULL, get_path(p, pools + 3))) {
                snprintf(field, len, "nodePools[%zu].%s", i, pools + 3);
                return 1;
            }
        }
    }
    return 0;
}
