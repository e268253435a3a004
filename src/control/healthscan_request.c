/* healthscan request: a :healthScan request checked against the cluster and
 * Slurm — its checks, its nodes (they exist, are compute nodes and are
 * idle) or a partition's — and the cluster's slurm.conf the scan runs
 * under (docs/healthscan.md). */
#include "control/healthscan_internal.h"
#include "cluster/cluster.h"
#include "slurm/slurm.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct schema_enum control_scan_check_enum =
    SCHEMA_NAMES(NULL, [CONTROL_SCAN_GPU] = "gpu", [CONTROL_SCAN_COLLECTIVE] = "collective",
                 [CONTROL_SCAN_STRAGGLER] = "straggler");

/* The mtc-scan modes each check runs, in order. */
const char *const healthscan_modes[][3] = {
    [CONTROL_SCAN_GPU] = {"gpu", NULL},
    [CONTROL_SCAN_COLLECTIVE] = {"pairs", "ring", NULL},
    [CONTROL_SCAN_STRAGGLER] = {"pipeline", NULL},
};

/* checks: "all" or one of the check names ("path: ..." on error). */
static int check_hook(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    size_t i;
    json_t *s;
    char names[64];
    json_array_foreach(*v, i, s)
    {
        const char *name = json_string_value(s);
        if (strcmp(name, "all") != 0 && schema_enum_parse(&control_scan_check_enum, name, 0) < 0)
            return schema_error(err, path, "unknown check \"%.40s\" (one of %s, all)", name,
                                schema_enum_list(&control_scan_check_enum, names, sizeof(names)));
    }
    /* canonical: the distinct checks in the table's order */
    json_t *out = json_array();
    for (int k = 0; k < control_scan_check_enum.n; k++) {
        json_array_foreach(*v, i, s)
        {
            const char *name = json_string_value(s);
            if (strcmp(name, "all") == 0 || strcmp(name, control_scan_check_enum.names[k]) == 0) {
                json_array_append_new(out, json_string(control_scan_check_enum.names[k]));
                break;
            }
        }
    }
    json_decref(*v);
    *v = out;
    return 0;
}

/* A node list: names, or Slurm hostlist expressions (a-[0-2]) expanded later. */
static int nodes_hook(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    size_t i;
    json_t *s;
    json_array_foreach(*v, i, s)
    {
        const char *n = json_string_value(s);
        if (!*n || strlen(n) > 1000 ||
            strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789-[],") != strlen(n) ||
            !(n[0] >= 'a' && n[0] <= 'z'))
            return schema_error(err, path, "\"%.64s\": not a node name or list (a-0, a-[0-2])", n);
    }
    return 0;
}

static int partition_hook(const struct schema_field *f, json_t **v, const char *path,
                          mtc_error_t *err)
{
    (void)f;
    if (!mtc_name_valid(json_string_value(*v), 63))
        return schema_error(err, path, "\"%.64s\": must match [a-z][a-z0-9-]{0,62}",
                            json_string_value(*v));
    return 0;
}

static const struct schema_field request_fields[] = {
    {"checks", SCHEMA_STRS, SCHEMA_REQUIRED | SCHEMA_NONEMPTY, .max_items = 8, .check = check_hook},
    {"nodes", SCHEMA_STRS, SCHEMA_NONEMPTY, .max_items = 1024, .check = nodes_hook},
    {"partition", SCHEMA_STR, 0, .check = partition_hook},
    {"drainBadNodes", SCHEMA_BOOL, 0, .dflt = "false"},
    {"force", SCHEMA_BOOL, 0, .dflt = "false"},
    /* the largest message of the collective check (pairs, ring) */
    {"maxBytes", SCHEMA_INT, SCHEMA_RANGE, .lo = 8192, .hi = 268435456},
    /* the straggler check's microbatches */
    {"microbatches", SCHEMA_INT, SCHEMA_RANGE, .lo = 10, .hi = 100000},
    /* measured-relative verdicts: FAIL below this fraction of the pool median */
    {"failFraction", SCHEMA_NUM, SCHEMA_RANGE, .lo = 0.01, .hi = 0.99},
    /* the gpu check's burn-in on nodes without GPUs */
    {"burnInSeconds", SCHEMA_INT, SCHEMA_RANGE, .lo = 1, .hi = 86400},
    {NULL, 0, 0, .max_items = 0},
};
const struct schema control_scan_request_schema = {request_fields, SCHEMA_PROTO3, NULL, NULL};

int healthscan_target(struct control *c, const char *id, struct healthscan_target *t,
                      mtc_error_t *err)
{
    memset(t, 0, sizeof(*t));
    char *env = provider_env(c->prov, id, err);
    if (!env)
        return -1;
    int rc = provider_env_get(env, "SLURM_CONF", t->conf, sizeof(t->conf));
    provider_env_get(env, "MTC_SCAN", t->scan, sizeof(t->scan));
    provider_env_get(env, "MTC_MPI_NETWORK", t->net, sizeof(t->net));
    free(env);
    if (rc < 0)
        return errprintf(err, "cluster %s has no slurm.conf in its environment", id);
    return 0;
}

/* The compute nodes of the cluster (of partition part when not NULL), as a
 * JSON array of names. */
static json_t *compute_nodes(const struct store_cluster *cl, const json_t *pools)
{
    json_t *out = json_array(), *n;
    size_t i;
    json_array_foreach(cl->nodes, i, n)
    {
        const char *name = json_string_value(json_object_get(n, "instanceName"));
        const char *type = json_string_value(json_object_get(n, "nodePoolType"));
        const char *pool = json_string_value(json_object_get(n, "nodePoolId"));
        if (!name || !type || strcmp(type, "NODE_POOL_TYPE_COMPUTE") != 0)
            continue;
        int in = !pools;
        size_t k;
        json_t *p;
        json_array_foreach(pools, k, p) in |= pool && strcmp(json_string_value(p), pool) == 0;
        if (in)
            json_array_append_new(out, json_string(name));
    }
    return out;
}

/* The node pools of partition part from the spec, or NULL when it has none of that id. */
static const json_t *partition_pools(const json_t *spec, const char *part)
{
    const json_t *parts = json_object_get(
        json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec"), "partitions");
    size_t i;
    json_t *p;
    json_array_foreach(parts, i, p)
    {
        const char *id = json_string_value(json_object_get(p, "id"));
        if (id && strcmp(id, part) == 0)
            return json_object_get(p, "nodePoolIds");
    }
    return NULL;
}

/* The names of list (names or hostlist expressions), expanded by Slurm. */
static json_t *expand(const char *conf, const json_t *list, mtc_error_t *err)
{
    json_t *out = json_array(), *v;
    size_t i;
    json_array_foreach(list, i, v)
    {
        const char *s = json_string_value(v);
        if (!strpbrk(s, "[,")) {
            json_array_append(out, v);
            continue;
        }
        char *o = NULL;
        char *argv[] = {"scontrol", "show", "hostnames", (char *)s, NULL};
        if (slurm_cmd(conf, argv, &o, 30000) != 0) {
            errprintf(err, "nodes: \"%.64s\": Slurm cannot expand it: %.120s", s, o ? o : "");
            free(o);
            json_decref(out);
            return NULL;
        }
        for (char *save = NULL, *t = strtok_r(o, "\n", &save); t; t = strtok_r(NULL, "\n", &save))
            json_array_append_new(out, json_string(t));
        free(o);
    }
    return out;
}

/* A node state Slurm would never run the scan on. */
static int unusable(const char *st)
{
    static const char *const bad[] = {"down",  "drain", "drng", "fail", "unk", "inval",
                                      "maint", "futr",  "plnd", "resv", NULL};
    if (strchr(st, '*'))
        return 1;
    for (int i = 0; bad[i]; i++)
        if (strncmp(st, bad[i], strlen(bad[i])) == 0)
            return 1;
    return 0;
}

json_t *control_healthscan_prepare(struct control *c, const struct store_cluster *cl,
                                   const json_t *req, int *http, mtc_error_t *err)
{
    *http = 400;
    if (schema_enum_parse(&cluster_state_enum, cl->state, 0) != CLUSTER_STATE_RUNNING)
        return errprintf(err, "precondition: cluster %s is %s, not RUNNING", cl->id, cl->state),
               NULL;
    struct healthscan_target t;
    if (healthscan_target(c, cl->id, &t, err) < 0) {
        *http = 500;
        return NULL;
    }
    const char *part = json_string_value(json_object_get(req, "partition"));
    const json_t *pools = NULL;
    if (part && !(pools = partition_pools(cl->spec, part))) {
        *http = 404;
        return errprintf(err, "partition: cluster %s has no partition \"%s\"", cl->id, part), NULL;
    }
    json_t *all = compute_nodes(cl, pools);
    json_t *given = json_object_get(req, "nodes");
    json_t *nodes = given ? expand(t.conf, given, err) : json_incref(all);
    json_t *out = NULL, *states = NULL;
    size_t i;
    json_t *v;
    if (!nodes)
        goto done;
    json_array_foreach(given ? nodes : NULL, i, v)
    {
        const char *n = json_string_value(v);
        if (!mtc_json_array_has(all, n)) {
            *http = 404;
            errprintf(err, "nodes: \"%.64s\" is not a compute node of cluster %s%s%s", n, cl->id,
                      part ? " in partition " : "", part ? part : "");
            goto done;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(json_string_value(json_array_get(nodes, k)), n) == 0) {
                errprintf(err, "nodes: \"%.64s\" is given twice", n);
                goto done;
            }
    }
    if (json_array_size(nodes) < 2) {
        errprintf(err,
                  "nodes: a health scan needs at least 2 nodes (it tests them against each "
                  "other), got %zu",
                  json_array_size(nodes));
        goto done;
    }
    /* like CHS: only idle nodes, unless forced (never nodes Slurm cannot use) */
    if (!(states = slurm_node_states(t.conf, err))) {
        *http = 503;
        goto done;
    }
    char busy[512] = "", dead[512] = "";
    json_array_foreach(nodes, i, v)
    {
        const char *n = json_string_value(v);
        const char *st = json_string_value(json_object_get(states, n));
        /* a node completing its last job runs nothing of anyone's: the
         * scan's job just starts once it is idle */
        int free_ = st && (strncmp(st, "idle", 4) == 0 || strcmp(st, "comp") == 0);
        char *list = !st || unusable(st) ? dead : !free_ ? busy : NULL;
        if (list && strlen(list) < sizeof(busy) - 100)
            snprintf(list + strlen(list), sizeof(busy) - strlen(list), "%s%s (%s)",
                     *list ? ", " : "", n, st ? st : "unknown");
    }
    if (*dead) {
        errprintf(err, "precondition: nodes Slurm cannot run the scan on: %.200s", dead);
        goto done;
    }
    if (*busy && !json_is_true(json_object_get(req, "force"))) {
        errprintf(err, "precondition: nodes not idle: %.200s (force runs the scan anyway)", busy);
        goto done;
    }
    out = json_deep_copy(req);
    json_object_set(out, "nodes", nodes);
done:
    json_decref(all);
    json_decref(nodes);
    json_decref(states);
    return out;
}
