/* local layout: a local cluster's layout, cluster.json — the controller's
 * and each node's port, its pool, whether it is elastic, and the config
 * last applied — loaded, saved and looked up by node. */
#include "provider/local.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

int local_layout_load(const struct head *c, struct layout *l)
{
    char path[PLEN];
    memset(l, 0, sizeof(*l));
    json_t *j = json_load_file(head_path(c, path, "cluster.json"), 0, NULL);
    if (!j)
        return -1;
    l->ctld_port = (int)json_integer_value(json_object_get(j, "ctldPort"));
    l->slurmd_port = (int)json_integer_value(json_object_get(j, "slurmdPort"));
    snprintf(l->applied.sha, sizeof(l->applied.sha), "%s",
             json_string_value(json_object_get(j, "appliedConfSha256")) ?: "");
    snprintf(l->applied.nodes, sizeof(l->applied.nodes), "%s",
             json_string_value(json_object_get(j, "appliedNodes")) ?: "");
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(j, "nodes"), i, n)
    {
        if (l->nnodes >= MAX_NODES)
            break;
        struct lnode *ln = &l->nodes[l->nnodes++];
        snprintf(ln->name, sizeof(ln->name), "%s",
                 json_string_value(json_object_get(n, "name")) ?: "");
        snprintf(ln->pool, sizeof(ln->pool), "%s",
                 json_string_value(json_object_get(n, "pool")) ?: "");
        ln->port = (int)json_integer_value(json_object_get(n, "port"));
        ln->cloud = json_is_true(json_object_get(n, "cloud"));
    }
    json_decref(j);
    return l->ctld_port > 0 ? 0 : -1;
}

int local_layout_save(const struct head *c, const struct layout *l, mtc_error_t *err)
{
    char path[PLEN];
    json_t *nodes = json_array();
    for (size_t i = 0; i < l->nnodes; i++) {
        json_t *n = json_pack("{s:s,s:s,s:i}", "name", l->nodes[i].name, "pool", l->nodes[i].pool,
                              "port", l->nodes[i].port);
        if (n && l->nodes[i].cloud)
            json_object_set_new(n, "cloud", json_true());
        json_array_append_new(nodes, n);
    }
    json_t *j = json_pack("{s:s,s:i,s:i,s:o,s:s,s:s}", "id", c->id, "ctldPort", l->ctld_port,
                          "slurmdPort", l->slurmd_port, "nodes", nodes, "appliedConfSha256",
                          l->applied.sha, "appliedNodes", l->applied.nodes);
    return head_json_save(head_path(c, path, "cluster.json"), j, 0644, err);
}

const struct lnode *local_layout_find(const struct layout *l, const char *name)
{
    for (size_t i = 0; i < l->nnodes; i++)
        if (strcmp(l->nodes[i].name, name) == 0)
            return &l->nodes[i];
    return NULL;
}

struct layout *local_layout_node(const struct head *c, const char *node, const char *what,
                                 const struct lnode **n, mtc_error_t *err)
{
    struct layout *l = calloc(1, sizeof(*l));
    *n = NULL;
    if (!l) {
        errno = ENOMEM;
        errprintf(err, "out of memory");
    } else if (local_layout_load(c, l) < 0) {
        errno = ENOENT;
        errprintf(err, "cluster %s: no cluster.json (never applied?)", c->id);
    } else if (!node || !(*n = local_layout_find(l, node))) {
        errno = EINVAL;
        errprintf(err, "cluster %s has no %s \"%.64s\"", c->id, what, node ? node : "");
    } else
        return l;
    free(l);
    return NULL;
}
