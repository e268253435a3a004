/* privileged: does a spec set or change a field that makes mtc or Slurm
 * execute (or read) something as root on a node — the fields the spec's table
 * flags SCHEMA_ROOT_EXEC (a library the agent loads, scripts, hook commands)?
 * Only an admin may; the API asks here. */
#include "cluster/cluster.h"
#include "schema/schema.h"

#include <stdio.h>
#include <string.h>

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

struct walk {
    const json_t *old, *new_;
    char *field;
    size_t len;
    int found;
};

/* One flagged path: "a.b.c", or "nodePools[].x" for field x of every node
 * pool (a pool compared with the old pool of the same id). */
static void visit(const char *path, const struct schema_field *f, void *arg)
{
    (void)f;
    struct walk *w = arg;
    if (w->found)
        return;
    const char *rest = strstr(path, "[].");
    if (!rest) {
        if (differ(w->old ? get_path(w->old, path) : NULL, get_path(w->new_, path))) {
            snprintf(w->field, w->len, "%s", path);
            w->found = 1;
        }
        return;
    }
    if (strncmp(path, "nodePools[]", 11) != 0)
        return; /* no other repeated section holds such fields */
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(w->new_, "nodePools"), i, p)
    {
        const char *id = json_string_value(json_object_get(p, "id"));
        const json_t *was = w->old ? pool_by_id(w->old, id) : NULL;
        if (differ(was ? get_path(was, rest + 3) : NULL, get_path(p, rest + 3))) {
            snprintf(w->field, w->len, "nodePools[%zu].%s", i, rest + 3);
            w->found = 1;
            return;
        }
    }
}

int cluster_spec_privileged_change(const json_t *old, const json_t *new_, char *field, size_t len)
{
    struct walk w = {old, new_, field, len, 0};
    schema_walk(&cluster_spec_schema, SCHEMA_ROOT_EXEC, visit, &w);
    return w.found;
}
