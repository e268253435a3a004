/* hosts_state: a cluster on hosts' state file (clusters/<id>/hosts.json:
 * uid, ports, which host runs each node, spares, quarantined and touched
 * hosts) and the placement of the spec's nodes on hosts. No I/O but the file. */
#include "provider/hosts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cluster/cluster.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *const role_names[] = {[HOST_NODE] = "node",
                                         [HOST_SPARE] = "spare",
                                         [HOST_QUARANTINED] = "quarantined",
                                         [HOST_TOUCHED] = "touched",
                                         [HOST_BACKUP] = "backup"};

static void str(char *dst, size_t len, const json_t *o, const char *k)
{
    snprintf(dst, len, "%s", json_string_value(json_object_get(o, k)) ?: "");
}

int hosts_state_load(const struct head *c, struct hstate *s)
{
    char path[PLEN];
    memset(s, 0, sizeof(*s));
    json_t *j = json_load_file(head_path(c, path, "hosts.json"), 0, NULL);
    if (!j) {
        errno = ENOENT;
        return -1;
    }
    str(s->uid, sizeof(s->uid), j, "uid");
    s->ctld_port = (int)json_integer_value(json_object_get(j, "ctldPort"));
    str(s->ctld_addr, sizeof(s->ctld_addr), j, "ctldAddr");
    json_t *ssh = json_object_get(j, "ssh");
    str(s->ssh_user, sizeof(s->ssh_user), ssh, "user");
    s->ssh_port = (int)json_integer_value(json_object_get(ssh, "port"));
    str(s->ssh_key, sizeof(s->ssh_key), ssh, "keyFile");
    str(s->applied.sha, sizeof(s->applied.sha), j, "appliedConfSha256");
    str(s->applied.nodes, sizeof(s->applied.nodes), j, "appliedNodes");
    str(s->backup_addr, sizeof(s->backup_addr), j, "backupHost");
    str(s->backup_hostname, sizeof(s->backup_hostname), j, "backupHostname");
    str(s->state_dir, sizeof(s->state_dir), j, "stateSaveLocation");
    s->failover_s = (int)json_integer_value(json_object_get(j, "failoverSeconds"));
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(j, "nodes"), i, e)
    {
        if (s->nnodes >= HOSTS_MAX)
            break;
        struct hnode *n = &s->nodes[s->nnodes++];
        str(n->name, sizeof(n->name), e, "name");
        str(n->pool, sizeof(n->pool), e, "pool");
        str(n->host, sizeof(n->host), e, "host");
        str(n->hostname, sizeof(n->hostname), e, "hostname");
        n->login = json_is_true(json_object_get(e, "login"));
        n->cloud = json_is_true(json_object_get(e, "elastic"));
        n->cpus = (int)json_integer_value(json_object_get(e, "cpus"));
        n->memory_mb = (long)json_integer_value(json_object_get(e, "memoryMb"));
        n->gpus = (int)json_integer_value(json_object_get(e, "gpus"));
    }
    json_array_foreach(json_object_get(j, "hosts"), i, e)
    {
        if (s->nhosts >= 2 * HOSTS_MAX)
            break;
        struct hhost *h = &s->hosts[s->nhosts++];
        str(h->host, sizeof(h->host), e, "host");
        str(h->pool, sizeof(h->pool), e, "pool");
        str(h->reason, sizeof(h->reason), e, "reason");
        const char *r = json_string_value(json_object_get(e, "role"));
        h->role = HOST_TOUCHED;
        for (size_t k = 0; r && k < sizeof(role_names) / sizeof(role_names[0]); k++)
            if (strcmp(role_names[k], r) == 0)
                h->role = (enum hrole)k;
        h->since_ms = (int64_t)json_integer_value(json_object_get(e, "sinceMs"));
        h->stop_pending = json_is_true(json_object_get(e, "stopPending"));
    }
    json_decref(j);
    return s->uid[0] ? 0 : -1;
}

int hosts_state_save(const struct head *c, const struct hstate *s, mtc_error_t *err)
{
    char path[PLEN];
    json_t *nodes = json_array(), *hosts = json_array();
    for (size_t i = 0; i < s->nnodes; i++) {
        const struct hnode *n = &s->nodes[i];
        json_array_append_new(nodes,
                              json_pack("{s:s,s:s,s:b,s:b,s:s,s:s,s:i,s:I,s:i}", "name", n->name,
                                        "pool", n->pool, "login", n->login, "elastic", n->cloud,
                                        "host", n->host, "hostname", n->hostname, "cpus", n->cpus,
                                        "memoryMb", (json_int_t)n->memory_mb, "gpus", n->gpus));
    }
    for (size_t i = 0; i < s->nhosts; i++) {
        const struct hhost *h = &s->hosts[i];
        json_array_append_new(hosts, json_pack("{s:s,s:s,s:s,s:s,s:I,s:b}", "host", h->host, "pool",
                                               h->pool, "role", role_names[h->role], "reason",
                                               h->reason, "sinceMs", (json_int_t)h->since_ms,
                                               "stopPending", h->stop_pending));
    }
    json_t *j =
        json_pack("{s:s,s:s,s:i,s:s,s:{s:s,s:i,s:s},s:o,s:o,s:s,s:s}", "id", c->id, "uid", s->uid,
                  "ctldPort", s->ctld_port, "ctldAddr", s->ctld_addr, "ssh", "user", s->ssh_user,
                  "port", s->ssh_port, "keyFile", s->ssh_key, "nodes", nodes, "hosts", hosts,
                  "appliedConfSha256", s->applied.sha, "appliedNodes", s->applied.nodes);
    if (j && s->backup_addr[0]) {
        json_object_set_new(j, "backupHost", json_string(s->backup_addr));
        json_object_set_new(j, "backupHostname", json_string(s->backup_hostname));
    }
    if (j && s->state_dir[0])
        json_object_set_new(j, "stateSaveLocation", json_string(s->state_dir));
    if (j && s->failover_s)
        json_object_set_new(j, "failoverSeconds", json_integer(s->failover_s));
    return head_json_save(head_path(c, path, "hosts.json"), j, 0600, err);
}

int hosts_backup_of(const struct hstate *s, struct hbackup *b)
{
    *b = (struct hbackup){s->backup_addr, s->backup_hostname, NULL};
    if (!s->backup_addr[0])
        return 0;
    for (size_t i = 0; i < s->nnodes; i++)
        if (strcasecmp(s->nodes[i].host, s->backup_addr) == 0) {
            b->node = &s->nodes[i];
            b->hostname = s->nodes[i].hostname;
        }
    return 1;
}

void hosts_conf_servers(const struct hstate *s, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s:%d", s->ctld_addr, s->ctld_port);
    if (s->backup_addr[0] && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ",%s:%d", s->backup_addr, s->ctld_port);
}

struct hnode *hosts_node_find(struct hstate *s, const char *name)
{
    for (size_t i = 0; i < s->nnodes; i++)
        if (strcmp(s->nodes[i].name, name) == 0)
            return &s->nodes[i];
    return NULL;
}

struct hhost *hosts_host_find(struct hstate *s, const char *host)
{
    for (size_t i = 0; i < s->nhosts; i++)
        if (strcasecmp(s->hosts[i].host, host) == 0)
            return &s->hosts[i];
    return NULL;
}

int hosts_host_set(struct hstate *s, const char *host, const char *pool, enum hrole role,
                   const char *reason)
{
    struct hhost *h = hosts_host_find(s, host);
    if (!h) {
        if (s->nhosts >= sizeof(s->hosts) / sizeof(s->hosts[0]))
            return -1;
        h = &s->hosts[s->nhosts++];
        memset(h, 0, sizeof(*h));
        snprintf(h->host, sizeof(h->host), "%s", host);
    }
    if (h->role != role || !h->since_ms)
        h->since_ms = mtc_now_ms();
    snprintf(h->pool, sizeof(h->pool), "%s", pool ? pool : "");
    h->role = role;
    snprintf(h->reason, sizeof(h->reason), "%s", reason ? reason : "");
    return 0;
}

void hosts_host_forget(struct hstate *s, const char *host)
{
    struct hhost *h = hosts_host_find(s, host);
    if (!h)
        return;
    size_t i = (size_t)(h - s->hosts);
    memmove(&s->hosts[i], &s->hosts[i + 1], (s->nhosts - i - 1) * sizeof(s->hosts[0]));
    s->nhosts--;
}

int hosts_in_use(const struct hstate *s, const char *host)
{
    for (size_t i = 0; i < s->nnodes; i++)
        if (strcasecmp(s->nodes[i].host, host) == 0)
            return 1;
    return 0;
}

const char *hosts_free_spare(const struct hstate *s, const char *pool)
{
    for (size_t i = 0; i < s->nhosts; i++) {
        const struct hhost *h = &s->hosts[i];
        if (h->role == HOST_SPARE && strcmp(h->pool, pool) == 0 && !hosts_in_use(s, h->host))
            return h->host;
    }
    return NULL;
}

static int listed(const json_t *arr, const char *host)
{
    size_t i;
    json_t *h;
    json_array_foreach(arr, i, h) if (strcasecmp(json_string_value(h), host) == 0) return 1;
    return 0;
}

/* 1 when any pool of spec lists host (hosts or spareHosts). */
static int in_spec(const json_t *spec, const char *host)
{
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(spec, "nodePools"), i,
                       p) if (listed(json_object_get(p, "hosts"), host) ||
                              listed(json_object_get(p, "spareHosts"), host)) return 1;
    return 0;
}

static int quarantined(struct hstate *s, const char *host)
{
    struct hhost *h = hosts_host_find(s, host);
    return h && h->role == HOST_QUARANTINED;
}

/* Records carried from old: quarantine of hosts still listed (the rest are
 * to be cleaned: touched), touched hosts, and every host a node ran on. */
static int carry(const json_t *spec, const struct hstate *old, struct hstate *next)
{
    for (size_t i = 0; old && i < old->nhosts; i++) {
        const struct hhost *h = &old->hosts[i];
        if (h->role == HOST_QUARANTINED && in_spec(spec, h->host)) {
            if (next->nhosts >= sizeof(next->hosts) / sizeof(next->hosts[0]))
                return -1;
            next->hosts[next->nhosts++] = *h;
        }
    }
    for (size_t i = 0; old && i < old->nhosts; i++)
        if (old->hosts[i].role != HOST_SPARE && !hosts_host_find(next, old->hosts[i].host) &&
            hosts_host_set(next, old->hosts[i].host, old->hosts[i].pool, HOST_TOUCHED, NULL) < 0)
            return -1;
    return 0;
}

/* Node k of pool p: its old spare if it moved to one that is still listed,
 * else hosts[k]; "" when that is quarantined (a spare is picked later). */
static void place(const struct hstate *old, struct hstate *next, const json_t *p, struct hnode *n,
                  size_t k)
{
    const char *h = json_string_value(json_array_get(json_object_get(p, "hosts"), k));
    const struct hnode *was = NULL;
    for (size_t i = 0; old && i < old->nnodes; i++)
        if (strcmp(old->nodes[i].name, n->name) == 0)
            was = &old->nodes[i];
    if (was && strcasecmp(was->host, h) != 0 &&
        listed(json_object_get(p, "spareHosts"), was->host) && !quarantined(next, was->host))
        h = was->host;
    snprintf(n->host, sizeof(n->host), "%s", quarantined(next, h) ? "" : h);
    if (was && strcasecmp(was->host, n->host) == 0) { /* same host: keep what was learned */
        snprintf(n->hostname, sizeof(n->hostname), "%s", was->hostname);
        n->cpus = was->cpus;
        n->memory_mb = was->memory_mb;
        n->gpus = was->gpus;
    }
}

/* Nodes left without a host (theirs is quarantined): the pool's next free
 * spare each; -1 + err naming the host when none is left. */
static int take_spares(const char *id, const json_t *spec, struct hstate *next, mtc_error_t *err)
{
    size_t i, k;
    json_t *p, *h;
    json_array_foreach(json_object_get(spec, "nodePools"), i, p)
    {
        const char *pool = json_string_value(json_object_get(p, "id"));
        json_array_foreach(json_object_get(p, "hosts"), k, h)
        {
            char name[64];
            snprintf(name, sizeof(name), "%s-%s-%zu", id, pool, k);
            struct hnode *n = hosts_node_find(next, name);
            if (!n || n->host[0])
                continue;
            const char *spare = hosts_free_spare(next, pool);
            if (!spare) {
                const struct hhost *q = hosts_host_find(next, json_string_value(h));
                errno = EINVAL;
                return errprintf(err,
                                 "nodePools[%zu].hosts[%zu]: host %s is quarantined (%.80s) and "
                                 "node pool %s has no free spare host; add one to spareHosts or "
                                 "remove the host from the pool",
                                 i, k, json_string_value(h), q ? q->reason : "", pool);
            }
            snprintf(n->host, sizeof(n->host), "%s", spare);
        }
    }
    return 0;
}

int hosts_plan(const char *id, const json_t *spec, const struct hstate *old, struct hstate *next,
               mtc_error_t *err)
{
    const char *login = cluster_spec_login_pool(spec);
    size_t i, k;
    json_t *p, *h;
    next->nnodes = next->nhosts = 0;
    if (carry(spec, old, next) < 0)
        return errprintf(err, "too many hosts (at most %d)", HOSTS_MAX);
    json_array_foreach(json_object_get(spec, "nodePools"), i, p)
    {
        const char *pool = json_string_value(json_object_get(p, "id"));
        json_int_t min =
            json_integer_value(json_object_get(json_object_get(p, "scalingSpec"), "minNodeCount"));
        json_array_foreach(
            json_object_get(p, "spareHosts"), k,
            h) if (!quarantined(next, json_string_value(h)) &&
                   hosts_host_set(next, json_string_value(h), pool, HOST_SPARE, NULL) <
                       0) return errprintf(err, "too many hosts (at most %d)", HOSTS_MAX);
        json_array_foreach(json_object_get(p, "hosts"), k, h)
        {
            if (next->nnodes >= HOSTS_MAX)
                return errprintf(err, "too many nodes (at most %d)", HOSTS_MAX);
            struct hnode *n = &next->nodes[next->nnodes++];
            memset(n, 0, sizeof(*n));
            snprintf(n->name, sizeof(n->name), "%s-%s-%zu", id, pool, k);
            snprintf(n->pool, sizeof(n->pool), "%s", pool);
            n->login = login && strcmp(login, pool) == 0;
            n->cloud = (json_int_t)k >= min; /* elastic: powered by Slurm's power saving */
            place(old, next, p, n, k);
        }
    }
    if (take_spares(id, spec, next, err) < 0)
        return -1;
    /* hosts a node used to run on and runs on no more: to be cleaned */
    for (i = 0; old && i < old->nnodes; i++) {
        const char *oh = old->nodes[i].host;
        if (!hosts_in_use(next, oh) && !hosts_host_find(next, oh) &&
            hosts_host_set(next, oh, old->nodes[i].pool, HOST_TOUCHED, NULL) < 0)
            return errprintf(err, "too many hosts (at most %d)", HOSTS_MAX);
    }
    return 0;
}

void hosts_node_names(const struct hstate *s, char *buf, size_t len)
{
    buf[0] = '\0';
    for (size_t i = 0; i < s->nnodes; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s%s", i ? "," : "", s->nodes[i].name,
                 s->nodes[i].cloud ? "~" : "");
}

/* The spec's experimentRoot, NULL when unset or "". */
const char *hosts_experiment_root(const json_t *spec)
{
    const char *r = json_string_value(json_object_get(spec, "experimentRoot"));
    return r && *r ? r : NULL;
}

int hosts_node_off(const struct head *c, const struct hnode *n)
{
    return n->cloud && !head_power_is_on(c, n->name);
}
