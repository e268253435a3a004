/* hosts: the cluster spec's rules for clusters on real hosts (nodePools[].hosts,
 * spareHosts, ssh, controller, hostRemediation) — which strings are host names,
 * and the checks across pools: all pools on hosts or none, one node per host,
 * no host twice. Called by cluster_spec_normalize on the canonical object. */
#include "cluster/cluster.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define PATH_LEN 512

/* A DNS name: labels of [A-Za-z0-9-], 1..63 long, not starting or ending
 * with '-', at most 253 in all; the last label not all digits (that would
 * be a malformed IPv4 address). */
static int dns_name(const char *s)
{
    size_t len = strlen(s), label = 0;
    int digits_only = 1;
    if (len == 0 || len > 253)
        return 0;
    for (size_t i = 0; i <= len; i++) {
        char c = s[i];
        if (c == '.' || c == '\0') {
            if (label == 0 || s[i - 1] == '-')
                return 0;
            if (c == '\0')
                return !digits_only;
            label = 0;
            digits_only = 1;
            continue;
        }
        if (!isalnum((unsigned char)c) && c != '-')
            return 0;
        if (c == '-' && label == 0)
            return 0;
        if (!isdigit((unsigned char)c))
            digits_only = 0;
        if (++label > 63)
            return 0;
    }
    return 0;
}

int cluster_host_valid(const char *host)
{
    unsigned char buf[16];
    if (!host || !*host || host[0] == '-')
        return 0;
    if (inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1)
        return 1;
    return dns_name(host);
}

static const json_t *pool_hosts(const json_t *pool)
{
    return json_object_get(pool, "hosts");
}

int cluster_spec_on_hosts(const json_t *spec)
{
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(spec, "nodePools"), i, p) if (pool_hosts(p)) return 1;
    return 0;
}

/* The k-th host of spec (each pool's hosts, then its spareHosts, pool by
 * pool) with its path in where; NULL past the last. */
static const char *host_at(const json_t *spec, size_t k, char *where, size_t len)
{
    static const char *const lists[] = {"hosts", "spareHosts"};
    const json_t *pools = json_object_get(spec, "nodePools");
    for (size_t i = 0; i < json_array_size(pools); i++) {
        for (int l = 0; l < 2; l++) {
            const json_t *a = json_object_get(json_array_get(pools, i), lists[l]);
            if (k < json_array_size(a)) {
                snprintf(where, len, "nodePools[%zu].%s[%zu]", i, lists[l], k);
                return json_string_value(json_array_get(a, k));
            }
            k -= json_array_size(a);
        }
    }
    return NULL;
}

int cluster_spec_host_listed(const json_t *spec, const char *host)
{
    char where[64];
    const char *h;
    for (size_t k = 0; host && (h = host_at(spec, k, where, sizeof(where))); k++)
        if (h && strcasecmp(h, host) == 0)
            return 1;
    return 0;
}

const char *cluster_spec_shared_host(const json_t *spec, const json_t *other, char *where,
                                     size_t len)
{
    const char *h;
    for (size_t k = 0; (h = host_at(spec, k, where, len)); k++)
        if (cluster_spec_host_listed(other, h))
            return h;
    return NULL;
}

/* Where host h (case-insensitive) first appears among the pools' hosts and
 * spareHosts, as a path, before position (pool, list, index); 0 when it does not. */
static int seen_before(const json_t *pools, const char *h, size_t pool, int list, size_t idx,
                       char *where, size_t len)
{
    static const char *const lists[] = {"hosts", "spareHosts"};
    for (size_t i = 0; i <= pool; i++) {
        const json_t *p = json_array_get(pools, i);
        for (int l = 0; l < 2; l++) {
            const json_t *a = json_object_get(p, lists[l]);
            for (size_t k = 0; k < json_array_size(a); k++) {
                if (i == pool && (l > list || (l == list && k >= idx)))
                    return 0;
                if (strcasecmp(json_string_value(json_array_get(a, k)), h) == 0) {
                    snprintf(where, len, "nodePools[%zu].%s[%zu]", i, lists[l], k);
                    return 1;
                }
            }
        }
    }
    return 0;
}

/* One pool of a cluster on hosts: hosts given, one node per host, a machine
 * type that describes a host, no host listed twice anywhere. */
static int check_pool(const json_t *pools, size_t i, const char *login, mtc_error_t *err)
{
    static const char *const lists[] = {"hosts", "spareHosts"};
    char path[PATH_LEN], where[PATH_LEN];
    const json_t *p = json_array_get(pools, i);
    const char *id = json_string_value(json_object_get(p, "id"));
    const json_t *hosts = pool_hosts(p);
    snprintf(path, sizeof(path), "nodePools[%zu]", i);
    if (!hosts)
        return schema_error(err, path,
                            "node pool \"%s\" lists no hosts; a cluster runs either on hosts "
                            "(every node pool lists its hosts) or locally (none does)",
                            id);
    if (json_array_size(hosts) == 0)
        return schema_error(err, schema_join(where, sizeof(where), path, "hosts"),
                            "at least one host is required");
    /* one host per node: the first minNodeCount static, the rest elastic
     * (powered by Slurm's power saving; docs/hosts.md) */
    json_int_t max =
        json_integer_value(json_object_get(json_object_get(p, "scalingSpec"), "maxNodeCount"));
    if (max != (json_int_t)json_array_size(hosts))
        return schema_error(err, schema_join(where, sizeof(where), path, "hosts"),
                            "lists %zu host(s) and maxNodeCount is %lld: a pool on hosts lists "
                            "one host per node (the first minNodeCount static, the rest elastic)",
                            json_array_size(hosts), (long long)max);
    json_int_t min =
        json_integer_value(json_object_get(json_object_get(p, "scalingSpec"), "minNodeCount"));
    if (login && id && strcmp(login, id) == 0 && max > min) /* no job ever resumes it */
        return schema_error(err,
                            schema_join(where, sizeof(where), path, "scalingSpec.maxNodeCount"),
                            "the login pool is not elastic: maxNodeCount must equal minNodeCount "
                            "(%lld)",
                            (long long)min);
    const char *mt =
        json_string_value(json_object_get(json_object_get(p, "machineSpec"), "machineType"));
    if (mt && strncmp(mt, "local", 5) == 0)
        return schema_error(err, schema_join(where, sizeof(where), path, "machineSpec.machineType"),
                            "machine type \"%s\" emulates nodes on the mtcd host; a pool on "
                            "hosts uses \"host\" (whatever the host has) or a catalog type",
                            mt);
    for (int l = 0; l < 2; l++) {
        const json_t *a = json_object_get(p, lists[l]);
        for (size_t k = 0; k < json_array_size(a); k++) {
            const char *h = json_string_value(json_array_get(a, k));
            char here[PATH_LEN];
            snprintf(here, sizeof(here), "%s.%s[%zu]", path, lists[l], k);
            if (seen_before(pools, h, i, l, k, where, sizeof(where)))
                return schema_error(err, here, "host \"%s\" is also %s (one node per host)", h,
                                    where);
        }
    }
    return 0;
}

/* controller.backupHost: another host than the controller — one that runs
 * a static node of the cluster (the login host is the usual choice) or a
 * host in no pool (mtc runs munged and slurmctld there), never a spare
 * (a replacement may take it) or an elastic host (powered down when idle)
 * — and a StateSaveLocation both controllers see (stateSaveLocation, else
 * under experimentRoot). */
static int check_controller(const json_t *spec, mtc_error_t *err)
{
    const json_t *ctl = json_object_get(spec, "controller");
    const char *backup = json_string_value(json_object_get(ctl, "backupHost"));
    const char *addr = json_string_value(json_object_get(ctl, "address"));
    if (!backup)
        return 0;
    if (addr && strcasecmp(addr, backup) == 0)
        return schema_error(err, "controller.backupHost",
                            "\"%s\" is the controller itself; the backup controller runs on "
                            "another host",
                            backup);
    const json_t *pools = json_object_get(spec, "nodePools"), *p;
    size_t i;
    int elastic = 0, spare = 0;
    json_array_foreach(pools, i, p)
    {
        const json_t *hosts = json_object_get(p, "hosts"), *spares = json_object_get(p, "spareHosts");
        json_int_t min =
            json_integer_value(json_object_get(json_object_get(p, "scalingSpec"), "minNodeCount"));
        for (size_t k = 0; k < json_array_size(hosts); k++)
            if (!strcasecmp(json_string_value(json_array_get(hosts, k)), backup))
                elastic = (json_int_t)k >= min;
        for (size_t k = 0; k < json_array_size(spares); k++)
            spare |= !strcasecmp(json_string_value(json_array_get(spares, k)), backup);
    }
    if (spare)
        return schema_error(err, "controller.backupHost",
                            "\"%s\" is a spare host, which a replacement may take; the backup "
                            "controller needs a host of its own or a static node's",
                            backup);
    if (elastic)
        return schema_error(err, "controller.backupHost",
                            "\"%s\" runs an elastic node, powered down when idle; the backup "
                            "controller needs a host that stays up (the login host)",
                            backup);
    if (!json_object_get(ctl, "stateSaveLocation") && !json_object_get(spec, "experimentRoot"))
        return schema_error(err, "controller.backupHost",
                            "needs storage both controllers see: set controller.stateSaveLocation "
                            "or experimentRoot");
    return 0;
}

/* mtc's own top-level fields that only a cluster on hosts uses. */
static const char *const hosts_only[] = {"ssh", "controller", "installPackages", "hostRemediation",
                                         NULL};

int cluster_spec_hosts_check(json_t *spec, mtc_error_t *err)
{
    char path[PATH_LEN];
    const json_t *pools = json_object_get(spec, "nodePools");
    size_t i;
    json_t *p;
    if (!cluster_spec_on_hosts(spec)) {
        for (const char *const *f = hosts_only; *f; f++)
            if (json_object_get(spec, *f))
                return schema_error(err, *f,
                                    "only a cluster on hosts (nodePools[].hosts) uses this field");
        json_array_foreach(pools, i, p)
        {
            const char *mt = json_string_value(
                json_object_get(json_object_get(p, "machineSpec"), "machineType"));
            snprintf(path, sizeof(path), "nodePools[%zu].", i);
            if (json_object_get(p, "spareHosts"))
                return schema_error(err, strcat(path, "spareHosts"),
                                    "only a node pool with hosts has spare hosts");
            if (mt && strcmp(mt, "host") == 0)
                return schema_error(err, strcat(path, "machineSpec.machineType"),
                                    "machine type \"host\" describes the pool's hosts, and the "
                                    "pool lists none");
        }
        return 0;
    }
    const char *login = cluster_spec_login_pool(spec);
    json_array_foreach(pools, i, p) if (check_pool(pools, i, login, err) < 0) return -1;
    return check_controller(spec, err);
}
