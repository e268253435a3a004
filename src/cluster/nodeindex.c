/* nodeindex: a by-name index over a cluster's nodesStatus array
 * (instanceName → its object), so a view joins per-node rows (health, scans)
 * in O(n log n) instead of nodes × rows. */
#include "cluster/cluster.h"

#include <stdlib.h>
#include <string.h>

struct entry {
    const char *name;
    size_t pos; /* the node's place in the array: the first of equal names wins */
    json_t *node;
};

struct cluster_node_index {
    size_t n;
    struct entry e[];
};

static int by_name(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

static int name_cmp(const void *key, const void *elem)
{
    return strcmp(key, ((const struct entry *)elem)->name);
}

struct cluster_node_index *cluster_node_index_create(const json_t *nodes)
{
    size_t cap = json_array_size(nodes), i;
    struct cluster_node_index *ix = malloc(sizeof(*ix) + cap * sizeof(ix->e[0]));
    if (!ix)
        return NULL;
    ix->n = 0;
    json_t *node;
    json_array_foreach(nodes, i, node)
    {
        const char *name = json_string_value(json_object_get(node, "instanceName"));
        if (name)
            ix->e[ix->n++] = (struct entry){name, i, node};
    }
    qsort(ix->e, ix->n, sizeof(ix->e[0]), by_name);
    return ix;
}

json_t *cluster_node_index_get(const struct cluster_node_index *ix, const char *name)
{
    if (!ix || !name || ix->n == 0)
        return NULL;
    const struct entry *e = bsearch(name, ix->e, ix->n, sizeof(ix->e[0]), name_cmp);
    while (e && e > ix->e && strcmp(e[-1].name, name) == 0)
        e--; /* bsearch may land on any of equal names */
    return e ? e->node : NULL;
}

void cluster_node_index_destroy(struct cluster_node_index *ix)
{
    free(ix);
}
