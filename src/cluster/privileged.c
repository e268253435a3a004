/* privileged: does a spec set or change a field that makes mtc or Slurm act
 * as root — run a program, connect to a machine, read a root-owned file as a
 * credential: the fields the spec's table flags SCHEMA_ROOT_EXEC (scripts, a
 * library the agent loads, hook commands, hosts, ssh, the accounting
 * database)? Only an admin may; the API asks here. */
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

/* Unset, "", false, [] and {} all mean "nothing": a default filled in is no
 * change, and a switch left off (installPackages) asks nothing of root. */
static int empty(const json_t *v)
{
    return !v || json_is_null(v) || json_is_false(v) ||
           (json_is_string(v) && !*json_string_value(v)) ||
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

/* One more changed field: its path appended to the list (", " between; the
 * list cut where field[len] ends). */
static void add(struct walk *w, const char *path)
{
    size_t used = strlen(w->field);
    if (used + 2 < w->len)
        snprintf(w->field + used, w->len - used, "%s%s", w->found ? ", " : "", path);
    w->found++;
}

/* One flagged path: "a.b.c", or "nodePools[].x" for field x of every node
 * pool (a pool compared with the old pool of the same id). */
static void visit(const char *path, const struct schema_field *f, void *arg)
{
    (void)f;
    struct walk *w = arg;
    const char *rest = strstr(path, "[].");
    if (!rest) {
        if (differ(w->old ? get_path(w->old, path) : NULL, get_path(w->new_, path)))
            add(w, path);
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
        char where[160];
        snprintf(where, sizeof(where), "nodePools[%zu].%s", i, rest + 3);
        if (differ(was ? get_path(was, rest + 3) : NULL, get_path(p, rest + 3)))
            add(w, where);
    }
}

int cluster_spec_privileged_change(const json_t *old, const json_t *new_, char *field, size_t len)
{
    struct walk w = {old, new_, field, len, 0};
    if (len)
        *field = '\0';
    schema_walk(&cluster_spec_schema, SCHEMA_ROOT_EXEC, visit, &w);
    return w.found > 0;
}
