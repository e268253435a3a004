/* spec_view: what the rest of mtc reads from a normalized cluster spec — its
 * node pools by id, the login pool, the static node count, the partitions,
 * whether it is simulated. Reads only; spec.c, the files of the checks
 * (hosts.c, storage.c) and every module above call it, and it calls none of
 * them. */
#include "cluster/cluster.h"

#include <stdlib.h>
#include <string.h>

int cluster_spec_pool_index(const json_t *pools, const char *id)
{
    size_t i;
    json_t *p;
    json_array_foreach(pools, i, p)
    {
        const char *pid = json_string_value(json_object_get(p, "id"));
        if (pid && id && strcmp(pid, id) == 0)
            return (int)i;
    }
    return -1;
}

const json_t *cluster_spec_pool(const json_t *spec, const char *pool_id)
{
    json_t *pools = json_object_get(spec, "nodePools");
    int i = cluster_spec_pool_index(pools, pool_id);
    return i < 0 ? NULL : json_array_get(pools, (size_t)i);
}

const char *cluster_spec_login_pool(const json_t *spec)
{
    json_t *ss = json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec");
    return json_string_value(json_object_get(ss, "loginNodePoolId"));
}

int cluster_spec_node_count(const json_t *spec)
{
    size_t i;
    json_t *p;
    int n = 0;
    const char *login = cluster_spec_login_pool(spec);
    json_array_foreach(json_object_get(spec, "nodePools"), i, p)
    {
        const char *id = json_string_value(json_object_get(p, "id"));
        if (login && id && strcmp(id, login) == 0)
            continue;
        n += (int)json_integer_value(
            json_object_get(json_object_get(p, "scalingSpec"), "minNodeCount"));
    }
    return n;
}

char *cluster_spec_partitions(const json_t *spec)
{
    size_t i, len = 1;
    json_t *p;
    json_t *parts = json_object_get(
        json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec"), "partitions");
    json_array_foreach(parts, i, p) len +=
        strlen(json_string_value(json_object_get(p, "id")) ?: "") + 1;
    char *out = calloc(1, len);
    if (!out)
        return NULL;
    json_array_foreach(parts, i, p)
    {
        if (i)
            strcat(out, ",");
        strcat(out, json_string_value(json_object_get(p, "id")) ?: "");
    }
    return out;
}

int cluster_spec_simulated(const json_t *spec)
{
    return json_is_object(json_object_get(spec, "sim"));
}
