/* spec: parse, validate and normalize a cluster spec. A table-driven schema
 * does the structural pass (known fields, types, snake_case -> camelCase);
 * semantic checks (references, uniqueness, catalog, slurm.conf keys) and
 * defaults follow, and a second structural pass fixes the key order. */
#include "cluster/cluster.h"
#include "health/health.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Field paths go into fixed buffers; a truncated path only shortens an error
 * message, so the compiler's truncation warning is noise here. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

enum kind { K_STR, K_INT, K_BOOL, K_ENUM, K_OBJ, K_OBJS, K_STRS, K_MAP, K_CONF, K_HEALTH };

struct field {
    const char *name;
    enum kind kind;
    const struct field *obj; /* K_OBJ, K_OBJS */
    const char *const *vals; /* K_ENUM: allowed values; K_CONF: slurm.conf keys */
    const char *level;       /* K_CONF: "partition" or "node" */
};

/* Real Slurm 22.05 slurm.conf keys per level (man slurm.conf), canonical case.
 * Keys mtc itself writes are in the *_managed lists and rejected. */
static const char *const partition_keys[] = {"AllocNodes",
                                             "AllowAccounts",
                                             "AllowGroups",
                                             "AllowQos",
                                             "Alternate",
                                             "CpuBind",
                                             "DefaultTime",
                                             "DefCpuPerGPU",
                                             "DefMemPerCPU",
                                             "DefMemPerGPU",
                                             "DefMemPerNode",
                                             "DenyAccounts",
                                             "DenyQos",
                                             "DisableRootJobs",
                                             "ExclusiveUser",
                                             "GraceTime",
                                             "Hidden",
                                             "LLN",
                                             "MaxCPUsPerNode",
                                             "MaxMemPerCPU",
                                             "MaxMemPerNode",
                                             "MaxNodes",
                                             "MaxTime",
                                             "MinNodes",
                                             "OverSubscribe",
                                             "OverTimeLimit",
                                             "PowerDownOnIdle",
                                             "PreemptMode",
                                             "PriorityJobFactor",
                                             "PriorityTier",
                                             "QOS",
                                             "ReqResv",
                                             "ResumeTimeout",
                                             "RootOnly",
                                             "SelectTypeParameters",
                                             "State",
                                             "SuspendTime",
                                             "SuspendTimeout",
                                             "TRESBillingWeights",
                                             "Default",
                                             "Nodes",
                                             "PartitionName",
                                             NULL};
static const char *const partition_managed[] = {"Default", "Nodes", "PartitionName", NULL};
static const char *const node_keys[] = {"BcastAddr",      "Boards",         "CoreSpecCount",
                                        "CoresPerSocket", "CpuBind",        "CPUs",
                                        "CpuSpecList",    "Features",       "Gres",
                                        "MemSpecLimit",   "Procs",          "RealMemory",
                                        "Reason",         "Sockets",        "SocketsPerBoard",
                                        "State",          "ThreadsPerCore", "TmpDisk",
                                        "Weight",         "NodeName",       "NodeAddr",
                                        "NodeHostname",   "Port",           NULL};
static const char *const node_managed[] = {"NodeName", "NodeAddr", "NodeHostname", "Port", NULL};

static const char *const provisioning_models[] = {"ON_DEMAND", "RESERVATION", "SPOT", "FLEX_START",
                                                  NULL};
static const char *const reservation_types[] = {"NO_RESERVATION", "ANY_RESERVATION",
                                                "SPECIFIC_RESERVATION", NULL};
static const char *const boot_disk_types[] = {"pd-standard", "pd-balanced",        "pd-ssd",
                                              "pd-extreme",  "hyperdisk-balanced", NULL};
static const char *const priority_types[] = {"priority/basic", "priority/multifactor", NULL};
static const char *const preempt_types[] = {"preempt/none", "preempt/partition_prio", "preempt/qos",
                                            NULL};

static const struct field f_network[] = {
    {.name = "network", .kind = K_STR}, {.name = "subnetwork", .kind = K_STR}, {.name = NULL}};
static const struct field f_boot_disk[] = {
    {.name = "bootDiskType", .kind = K_ENUM, .vals = boot_disk_types},
    {.name = "bootDiskSizeGb", .kind = K_INT},
    {.name = NULL}};
static const struct field f_reservation[] = {
    {.name = "reservationAffinityType", .kind = K_ENUM, .vals = reservation_types},
    {.name = "key", .kind = K_STR},
    {.name = "values", .kind = K_STRS},
    {.name = NULL}};
static const struct field f_machine[] = {
    {.name = "machineType", .kind = K_STR},
    {.name = "acceleratorType", .kind = K_STR},
    {.name = "acceleratorCount", .kind = K_INT},
    {.name = "reservationAffinity", .kind = K_OBJ, .obj = f_reservation},
    {.name = NULL}};
static const struct field f_scaling[] = {{.name = "minNodeCount", .kind = K_INT},
                                         {.name = "maxNodeCount", .kind = K_INT},
                                         {.name = NULL}};
static const struct field f_filestore[] = {
    {.name = "filestore", .kind = K_STR}, {.name = "mountPath", .kind = K_STR}, {.name = NULL}};
static const struct field f_lustre[] = {
    {.name = "lustre", .kind = K_STR}, {.name = "mountPath", .kind = K_STR}, {.name = NULL}};
static const struct field f_pool[] = {
    {.name = "id", .kind = K_STR},
    {.name = "zone", .kind = K_STR},
    {.name = "enablePublicIps", .kind = K_BOOL},
    {.name = "bootDisk", .kind = K_OBJ, .obj = f_boot_disk},
    {.name = "machineSpec", .kind = K_OBJ, .obj = f_machine},
    {.name = "provisioningModel", .kind = K_ENUM, .vals = provisioning_models},
    {.name = "scalingSpec", .kind = K_OBJ, .obj = f_scaling},
    {.name = "startupScript", .kind = K_STR},
    {.name = "nodeImage", .kind = K_STR},
    {.name = "filestores", .kind = K_OBJS, .obj = f_filestore},
    {.name = "lustres", .kind = K_OBJS, .obj = f_lustre},
    {.name = NULL}};
static const struct field f_partition[] = {
    {.name = "id", .kind = K_STR},
    {.name = "nodePoolIds", .kind = K_STRS},
    {.name = "config", .kind = K_CONF, .vals = partition_keys, .level = "partition"},
    {.name = NULL}};
static const struct field f_node_set[] = {
    {.name = "nodePoolId", .kind = K_STR},
    {.name = "config", .kind = K_CONF, .vals = node_keys, .level = "node"},
    {.name = NULL}};
static const struct field f_accounting[] = {{.name = "accountingStorageEnforce", .kind = K_STR},
                                            {.name = NULL}};
static const struct field f_scheduling[] = {
    {.name = "priorityType", .kind = K_ENUM, .vals = priority_types},
    {.name = "priorityWeightAge", .kind = K_INT},
    {.name = "priorityWeightAssoc", .kind = K_INT},
    {.name = "priorityWeightFairshare", .kind = K_INT},
    {.name = "priorityWeightJobSize", .kind = K_INT},
    {.name = "priorityWeightPartition", .kind = K_INT},
    {.name = "priorityWeightQos", .kind = K_INT},
    {.name = "priorityWeightTres", .kind = K_STR},
    {.name = "preemptType", .kind = K_ENUM, .vals = preempt_types},
    {.name = "preemptMode", .kind = K_STR},
    {.name = "preemptExemptTime", .kind = K_STR},
    {.name = NULL}};
static const struct field f_slurm[] = {{.name = "homeDirectoryStorage", .kind = K_STR},
                                       {.name = "loginNodePoolId", .kind = K_STR},
                                       {.name = "partitions", .kind = K_OBJS, .obj = f_partition},
                                       {.name = "defaultPartitionId", .kind = K_STR},
                                       {.name = "nodeSets", .kind = K_OBJS, .obj = f_node_set},
                                       {.name = "accounting", .kind = K_OBJ, .obj = f_accounting},
                                       {.name = "scheduling", .kind = K_OBJ, .obj = f_scheduling},
                                       {.name = "prologBashScripts", .kind = K_STRS},
                                       {.name = "epilogBashScripts", .kind = K_STRS},
                                       {.name = NULL}};
static const struct field f_orchestrator[] = {{.name = "slurmSpec", .kind = K_OBJ, .obj = f_slurm},
                                              {.name = NULL}};
static const struct field f_cluster[] = {
    {.name = "displayName", .kind = K_STR},
    {.name = "description", .kind = K_STR},
    {.name = "labels", .kind = K_MAP},
    {.name = "network", .kind = K_OBJ, .obj = f_network},
    {.name = "nodePools", .kind = K_OBJS, .obj = f_pool},
    {.name = "orchestratorSpec", .kind = K_OBJ, .obj = f_orchestrator},
    {.name = "healthPolicy", .kind = K_HEALTH}, /* mtc's own: the node health checks */
    {.name = NULL}};

/* Output-only fields of the resource: accepted in a request (a GET body sent
 * back) and dropped. */
static const char *const output_only[] = {"name",          "createTime",    "updateTime",
                                          "clusterStatus", "clusterEvents", NULL};

static int in_list(const char *const *list, const char *s)
{
    for (; list && *list; list++)
        if (strcmp(*list, s) == 0)
            return 1;
    return 0;
}


static const char *at(const char *path, char *buf, size_t len, const char *name)
{
    if (!*path)
        snprintf(buf, len, "%s", name);
    else
        snprintf(buf, len, "%s.%s", path, name);
    return buf;
}

static int fail(mtc_error_t *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(mtc_error_t *err, const char *path, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    errno = EINVAL;
    if (*path)
        return errprintf(err, "%s: %s", path, msg);
    return errprintf(err, "%s", msg);
}

/* A slurm.conf value: one token on one line; it must not end the line, start
 * a comment or break our quoting. */
static int conf_value_ok(const char *v)
{
    if (!*v)
        return 0;
    for (; *v; v++)
        if (*v == '\n' || *v == '\r' || *v == '#' || *v == '"' || iscntrl((unsigned char)*v))
            return 0;
    return 1;
}

static int label_ok(const char *s, int key)
{
    size_t n = strlen(s);
    if (n > 63 || (key && (n == 0 || !islower((unsigned char)s[0]))))
        return 0;
    for (; *s; s++)
        if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '_' && *s != '-')
            return 0;
    return 1;
}

static int norm_obj(const json_t *in, const struct field *schema, const char *path, json_t **out,
                    mtc_error_t *err);

static int norm_value(const json_t *v, const struct field *f, const char *path, json_t **out,
                      mtc_error_t *err)
{
    char sub[512];
    size_t i;
    const char *k;
    json_t *e;
    switch (f->kind) {
    case K_STR:
        if (!json_is_string(v))
            return fail(err, path, "must be a string");
        *out = json_deep_copy(v);
        return 0;
    case K_ENUM:
        if (!json_is_string(v))
            return fail(err, path, "must be a string");
        if (!in_list(f->vals, json_string_value(v))) {
            char allowed[200] = "";
            for (const char *const *a = f->vals; *a; a++)
                snprintf(allowed + strlen(allowed), sizeof(allowed) - strlen(allowed), "%s%s",
                         a == f->vals ? "" : ", ", *a);
            return fail(err, path, "invalid value \"%.60s\" (one of %s)", json_string_value(v),
                        allowed);
        }
        *out = json_deep_copy(v);
        return 0;
    case K_BOOL:
        if (!json_is_boolean(v))
            return fail(err, path, "must be true or false");
        *out = json_deep_copy(v);
        return 0;
    case K_INT: {
        long long n;
        if (json_is_integer(v)) {
            n = json_integer_value(v);
        } else if (json_is_string(v)) { /* proto3 JSON may quote integers */
            const char *s = json_string_value(v);
            char *end;
            errno = 0;
            n = strtoll(s, &end, 10);
            if (!*s || *end || errno)
                return fail(err, path, "must be an integer");
        } else {
            return fail(err, path, "must be an integer");
        }
        if (n < INT_MIN || n > INT_MAX)
            return fail(err, path, "integer out of range");
        *out = json_integer(n);
        return 0;
    }
    case K_OBJ:
        return norm_obj(v, f->obj, path, out, err);
    case K_OBJS:
    case K_STRS:
        if (!json_is_array(v))
            return fail(err, path, "must be an array");
        *out = json_array();
        json_array_foreach(v, i, e)
        {
            json_t *n = NULL;
            snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
            if (f->kind == K_STRS) {
                if (!json_is_string(e))
                    return fail(err, sub, "must be a string");
                n = json_deep_copy(e);
            } else if (norm_obj(e, f->obj, sub, &n, err) < 0) {
                return -1;
            }
            json_array_append_new(*out, n);
        }
        return 0;
    case K_MAP:
        if (!json_is_object(v))
            return fail(err, path, "must be an object");
        *out = json_object();
        json_object_foreach((json_t *)v, k, e)
        {
            at(path, sub, sizeof(sub), k);
            if (!label_ok(k, 1))
                return fail(err, sub, "invalid label key (want ^[a-z][a-z0-9_-]{0,62}$)");
            if (!json_is_string(e) || !label_ok(json_string_value(e), 0))
                return fail(err, sub, "invalid label value (want ^[a-z0-9_-]{0,63}$)");
            json_object_set(*out, k, e);
        }
        return 0;
    case K_HEALTH:
        /* its own module validates it; its messages already start "healthPolicy" */
        *out = health_policy_normalize(v, err);
        if (!*out) {
            errno = EINVAL;
            return -1;
        }
        return 0;
    case K_CONF:
        if (!json_is_object(v))
            return fail(err, path, "must be an object of slurm.conf Key: \"Value\"");
        *out = json_object();
        json_object_foreach((json_t *)v, k, e)
        {
            const char *canon = NULL;
            for (const char *const *c = f->vals; *c; c++)
                if (strcasecmp(*c, k) == 0)
                    canon = *c;
            if (!canon)
                return fail(err, path, "unknown slurm.conf %s key \"%.60s\"", f->level, k);
            const char *const *managed =
                strcmp(f->level, "partition") == 0 ? partition_managed : node_managed;
            if (in_list(managed, canon))
                return fail(err, path, "slurm.conf %s key \"%s\" is set by mtc", f->level, canon);
            at(path, sub, sizeof(sub), canon);
            char num[32];
            const char *s = json_string_value(e);
            if (json_is_integer(e)) { /* a bare number is a fair way to write "10" */
                snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(e));
                s = num;
            }
            if (!s)
                return fail(err, sub, "must be a string");
            if (!conf_value_ok(s))
                return fail(err, sub, "value must be non-empty, one line, without '#' or '\"'");
            if (json_object_get(*out, canon))
                return fail(err, sub, "key given twice");
            json_object_set_new(*out, canon, json_string(s));
        }
        return 0;
    }
    return fail(err, path, "unsupported field kind");
}

static int norm_obj(const json_t *in, const struct field *schema, const char *path, json_t **out,
                    mtc_error_t *err)
{
    char camel[128], sub[512];
    const char *k;
    json_t *v;
    *out = NULL;
    if (!json_is_object(in))
        return fail(err, path, "must be an object");
    json_t *tmp = json_object(); /* camelCase key -> normalized value */
    json_object_foreach((json_t *)in, k, v)
    {
        mtc_camel_case(k, camel, sizeof(camel));
        if (schema == f_cluster && in_list(output_only, camel))
            continue;
        const struct field *f = schema;
        while (f->name && strcmp(f->name, camel) != 0)
            f++;
        if (!f->name) {
            json_decref(tmp);
            return fail(err, path, "unknown field \"%.60s\"", k);
        }
        at(path, sub, sizeof(sub), f->name);
        if (json_object_get(tmp, f->name)) {
            json_decref(tmp);
            return fail(err, sub, "field given twice (snake_case and camelCase)");
        }
        if (json_is_null(v))
            continue; /* proto3: null means "not set" */
        json_t *n = NULL;
        if (norm_value(v, f, sub, &n, err) < 0) {
            json_decref(n);
            json_decref(tmp);
            return -1;
        }
        json_object_set_new(tmp, f->name, n);
    }
    /* re-emit in schema order so the canonical form is stable */
    *out = json_object();
    for (const struct field *f = schema; f->name; f++)
        if ((v = json_object_get(tmp, f->name)))
            json_object_set(*out, f->name, v);
    json_decref(tmp);
    return 0;
}

/* ---- semantic checks and defaults on the camelCase object ---- */

#define POOL_ID_MAX 16
#define PARTITION_ID_MAX 32

static int pool_index(const json_t *pools, const char *id)
{
    size_t i;
    json_t *p;
    json_array_foreach(pools, i, p)
    {
        const char *pid = json_string_value(json_object_get(p, "id"));
        if (pid && strcmp(pid, id) == 0)
            return (int)i;
    }
    return -1;
}

static json_t *ensure_obj(json_t *parent, const char *key)
{
    json_t *o = json_object_get(parent, key);
    if (!o) {
        o = json_object();
        json_object_set_new(parent, key, o);
    }
    return o;
}

static int check_machine(json_t *pool, const char *path, mtc_error_t *err)
{
    char p[512], q[512];
    snprintf(p, sizeof(p), "%s.machineSpec", path);
    json_t *ms = json_object_get(pool, "machineSpec");
    if (!ms)
        return fail(err, p, "required (machineSpec.machineType names the machine type)");
    const char *mt = json_string_value(json_object_get(ms, "machineType"));
    at(p, q, sizeof(q), "machineType");
    if (!mt || !*mt)
        return fail(err, q, "required");
    struct cluster_machine_type info;
    mtc_error_t e2;
    if (cluster_machine_type_lookup(mt, &info, &e2) < 0) {
        if (errno == ENOENT)
            return fail(err, q, "unknown machine type \"%.60s\"", mt);
        return fail(err, q, "%s", e2.text);
    }
    const char *at_ = json_string_value(json_object_get(ms, "acceleratorType"));
    json_t *ac = json_object_get(ms, "acceleratorCount");
    if (at_ && strcmp(at_, info.accelerator_type) != 0) {
        at(p, q, sizeof(q), "acceleratorType");
        if (!info.accelerator_type[0])
            return fail(err, q, "machine type %s has no accelerators", mt);
        return fail(err, q, "machine type %s has %s, not \"%.60s\"", mt, info.accelerator_type,
                    at_);
    }
    if (ac && (json_integer_value(ac) < 0 || json_integer_value(ac) > info.accelerator_count)) {
        at(p, q, sizeof(q), "acceleratorCount");
        return fail(err, q, "must be 0..%d for machine type %s", info.accelerator_count, mt);
    }
    if (info.accelerator_type[0]) {
        if (!at_)
            json_object_set_new(ms, "acceleratorType", json_string(info.accelerator_type));
        if (!ac)
            json_object_set_new(ms, "acceleratorCount", json_integer(info.accelerator_count));
    }
    return 0;
}

static int check_pools(json_t *spec, mtc_error_t *err)
{
    char path[512], q[512];
    size_t i;
    json_t *pool;
    json_t *pools = json_object_get(spec, "nodePools");
    if (!pools || json_array_size(pools) == 0)
        return fail(err, "nodePools", "at least one node pool is required");
    json_array_foreach(pools, i, pool)
    {
        snprintf(path, sizeof(path), "nodePools[%zu]", i);
        const char *id = json_string_value(json_object_get(pool, "id"));
        at(path, q, sizeof(q), "id");
        if (!id)
            return fail(err, q, "required");
        if (!mtc_name_valid(id, POOL_ID_MAX))
            return fail(
                err, q,
                "invalid node pool id \"%.60s\" (want ^[a-z][a-z0-9-]{0,%d}, no trailing '-')", id,
                POOL_ID_MAX - 1);
        if (pool_index(pools, id) != (int)i)
            return fail(err, q, "duplicate node pool id \"%s\"", id);
        if (check_machine(pool, path, err) < 0)
            return -1;
        if (!json_object_get(pool, "provisioningModel"))
            json_object_set_new(pool, "provisioningModel", json_string("ON_DEMAND"));
        json_t *sc = json_object_get(pool, "scalingSpec");
        if (!sc) {
            sc = json_pack("{s:i,s:i}", "minNodeCount", 1, "maxNodeCount", 1);
            json_object_set_new(pool, "scalingSpec", sc);
        }
        json_t *mn = json_object_get(sc, "minNodeCount"), *mx = json_object_get(sc, "maxNodeCount");
        if (!mn)
            json_object_set_new(sc, "minNodeCount", mn = json_integer(0));
        if (!mx)
            json_object_set_new(sc, "maxNodeCount", mx = json_integer(json_integer_value(mn)));
        snprintf(q, sizeof(q), "%s.scalingSpec", path);
        if (json_integer_value(mn) < 0)
            return fail(err, q, "minNodeCount must be >= 0");
        if (json_integer_value(mx) < 0)
            return fail(err, q, "maxNodeCount must be >= 0");
        if (json_integer_value(mn) > json_integer_value(mx))
            return fail(err, q, "minNodeCount %lld > maxNodeCount %lld",
                        (long long)json_integer_value(mn), (long long)json_integer_value(mx));
        json_t *bd = json_object_get(pool, "bootDisk");
        json_t *sz = bd ? json_object_get(bd, "bootDiskSizeGb") : NULL;
        if (sz && json_integer_value(sz) < 10) {
            snprintf(q, sizeof(q), "%s.bootDisk.bootDiskSizeGb", path);
            return fail(err, q, "must be >= 10");
        }
    }
    return 0;
}

/* A comma list whose items all come from allowed (case-insensitive). */
static int comma_list_ok(const char *s, const char *const *allowed)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", s);
    if (!*buf || strlen(s) >= sizeof(buf))
        return 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= strcasecmp(*a, t) == 0;
        if (!ok)
            return 0;
    }
    return s[strlen(s) - 1] != ',';
}

static int check_slurm_misc(json_t *ss, mtc_error_t *err)
{
    static const char *const enforce[] = {"all", "associations", "limits", "nojobs", "nosteps",
                                          "qos", "safe",         "wckeys", NULL};
    static const char *const modes[] = {"OFF",     "CANCEL", "GANG",     "REQUEUE",
                                        "SUSPEND", "WITHIN", "PRIORITY", NULL};
    const char *base = "orchestratorSpec.slurmSpec";
    char q[512];
    json_t *acc = json_object_get(ss, "accounting");
    const char *ase =
        acc ? json_string_value(json_object_get(acc, "accountingStorageEnforce")) : NULL;
    if (ase && !comma_list_ok(ase, enforce)) {
        snprintf(q, sizeof(q), "%s.accounting.accountingStorageEnforce", base);
        return fail(err, q,
                    "invalid value \"%.60s\" (comma list of associations, limits, nojobs, nosteps, "
                    "qos, safe, wckeys, all)",
                    ase);
    }
    json_t *sch = json_object_get(ss, "scheduling");
    const char *k;
    json_t *v;
    json_object_foreach(sch, k, v)
    {
        snprintf(q, sizeof(q), "%s.scheduling.%s", base, k);
        if (json_is_integer(v) && json_integer_value(v) < 0)
            return fail(err, q, "must be >= 0");
        if (json_is_string(v) && !conf_value_ok(json_string_value(v)))
            return fail(err, q, "value must be non-empty, one line, without '#' or '\"'");
        if (strcmp(k, "preemptMode") == 0 && !comma_list_ok(json_string_value(v), modes))
            return fail(err, q,
                        "invalid value \"%.60s\" (comma list of OFF, CANCEL, GANG, REQUEUE, "
                        "SUSPEND, WITHIN, PRIORITY)",
                        json_string_value(v));
    }
    return 0;
}

static int check_slurm(json_t *spec, mtc_error_t *err)
{
    char path[512], q[512];
    size_t i, j;
    json_t *e, *pid;
    const char *base = "orchestratorSpec.slurmSpec";
    json_t *pools = json_object_get(spec, "nodePools");
    json_t *ss = ensure_obj(ensure_obj(spec, "orchestratorSpec"), "slurmSpec");

    const char *login = json_string_value(json_object_get(ss, "loginNodePoolId"));
    if (login && pool_index(pools, login) < 0) {
        at(base, q, sizeof(q), "loginNodePoolId");
        return fail(err, q, "no node pool \"%.60s\"", login);
    }
    json_t *parts = json_object_get(ss, "partitions");
    if (!parts) {
        /* default: one partition per compute pool, named after the pool */
        parts = json_array();
        json_array_foreach(pools, i, e)
        {
            const char *id = json_string_value(json_object_get(e, "id"));
            if (login && strcmp(id, login) == 0)
                continue;
            json_array_append_new(parts, json_pack("{s:s,s:[s]}", "id", id, "nodePoolIds", id));
        }
        json_object_set_new(ss, "partitions", parts);
    }
    if (json_array_size(parts) == 0) {
        at(base, q, sizeof(q), "partitions");
        return fail(err, q, "at least one partition is required");
    }
    json_array_foreach(parts, i, e)
    {
        snprintf(path, sizeof(path), "%s.partitions[%zu]", base, i);
        const char *id = json_string_value(json_object_get(e, "id"));
        at(path, q, sizeof(q), "id");
        if (!id)
            return fail(err, q, "required");
        if (!mtc_name_valid(id, PARTITION_ID_MAX))
            return fail(
                err, q,
                "invalid partition id \"%.60s\" (want ^[a-z][a-z0-9-]{0,%d}, no trailing '-')", id,
                PARTITION_ID_MAX - 1);
        for (j = 0; j < i; j++)
            if (strcmp(json_string_value(json_object_get(json_array_get(parts, j), "id")), id) == 0)
                return fail(err, q, "duplicate partition id \"%s\"", id);
        json_t *ids = json_object_get(e, "nodePoolIds");
        if (!ids || json_array_size(ids) == 0) {
            at(path, q, sizeof(q), "nodePoolIds");
            return fail(err, q, "at least one node pool id is required");
        }
        json_array_foreach(ids, j, pid)
        {
            snprintf(q, sizeof(q), "%s.nodePoolIds[%zu]", path, j);
            const char *p = json_string_value(pid);
            if (pool_index(pools, p) < 0)
                return fail(err, q, "no node pool \"%.60s\"", p);
            if (login && strcmp(p, login) == 0)
                return fail(err, q,
                            "node pool \"%s\" is the login pool and cannot be in a partition", p);
        }
    }
    const char *def = json_string_value(json_object_get(ss, "defaultPartitionId"));
    if (!def) {
        json_object_set(ss, "defaultPartitionId", json_object_get(json_array_get(parts, 0), "id"));
    } else {
        int found = 0;
        json_array_foreach(parts, i, e) found |=
            strcmp(json_string_value(json_object_get(e, "id")), def) == 0;
        if (!found) {
            at(base, q, sizeof(q), "defaultPartitionId");
            return fail(err, q, "no partition \"%.60s\"", def);
        }
    }
    json_array_foreach(json_object_get(ss, "nodeSets"), i, e)
    {
        snprintf(q, sizeof(q), "%s.nodeSets[%zu].nodePoolId", base, i);
        const char *p = json_string_value(json_object_get(e, "nodePoolId"));
        if (!p)
            return fail(err, q, "required");
        if (pool_index(pools, p) < 0)
            return fail(err, q, "no node pool \"%.60s\"", p);
        for (j = 0; j < i; j++)
            if (strcmp(json_string_value(json_object_get(
                           json_array_get(json_object_get(ss, "nodeSets"), j), "nodePoolId")),
                       p) == 0)
                return fail(err, q, "duplicate node set for node pool \"%s\"", p);
    }
    return check_slurm_misc(ss, err);
}

int cluster_id_valid(const char *id)
{
    if (!id || !islower((unsigned char)id[0]) || strlen(id) > 10)
        return 0;
    for (const char *s = id; *s; s++)
        if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s))
            return 0;
    return 1;
}

json_t *cluster_spec_normalize(const json_t *in, mtc_error_t *err)
{
    json_t *first = NULL, *out = NULL;
    if (!in || !json_is_object(in)) {
        fail(err, "", "cluster spec must be a JSON object");
        return NULL;
    }
    if (norm_obj(in, f_cluster, "", &first, err) < 0)
        goto error;
    if (check_pools(first, err) < 0 || check_slurm(first, err) < 0)
        goto error;
    /* defaults were appended; a second pass restores schema order */
    if (norm_obj(first, f_cluster, "", &out, err) < 0)
        goto error;
    json_decref(first);
    return out;
error:
    json_decref(first);
    json_decref(out);
    errno = EINVAL;
    return NULL;
}

const json_t *cluster_spec_pool(const json_t *spec, const char *pool_id)
{
    json_t *pools = json_object_get(spec, "nodePools");
    int i = pool_index(pools, pool_id);
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
