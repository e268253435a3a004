/* spec: parse, validate and normalize a cluster spec. The field tables below
 * drive the schema engine (known fields, kinds, enums, snake_case ->
 * camelCase, per-field and per-object rules); the checks that span the whole
 * spec (references between pools and partitions, uniqueness) and their
 * defaults follow, and a second pass puts what they added in table order. */
#include "cluster/cluster.h"
#include "health/health.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Field paths go into fixed buffers; a truncated path only shortens an error
 * message, so the compiler's truncation warning is noise here. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define PATH_LEN 512
#define POOL_ID_MAX 16
#define PARTITION_ID_MAX 32

/* ---- enums: names as the API writes them; the cloud API's proto names
 * (PROVISIONING_MODEL_SPOT) are accepted on input ---- */

const struct schema_enum cluster_state_enum = SCHEMA_NAMES(
    NULL, [CLUSTER_STATE_PROVISIONING] = "PROVISIONING", [CLUSTER_STATE_RUNNING] = "RUNNING",
    [CLUSTER_STATE_UPDATING] = "UPDATING", [CLUSTER_STATE_STOPPING] = "STOPPING", [CLUSTER_STATE_ERROR] = "ERROR");

const struct schema_enum cluster_provisioning_model_enum = SCHEMA_NAMES(
    "PROVISIONING_MODEL_", [CLUSTER_PROVISIONING_ON_DEMAND] = "ON_DEMAND",
    [CLUSTER_PROVISIONING_RESERVATION] = "RESERVATION", [CLUSTER_PROVISIONING_SPOT] = "SPOT",
    [CLUSTER_PROVISIONING_FLEX_START] = "FLEX_START");

const struct schema_enum cluster_reservation_affinity_enum =
    SCHEMA_NAMES("RESERVATION_AFFINITY_TYPE_", [CLUSTER_NO_RESERVATION] = "NO_RESERVATION",
                 [CLUSTER_ANY_RESERVATION] = "ANY_RESERVATION",
                 [CLUSTER_SPECIFIC_RESERVATION] = "SPECIFIC_RESERVATION");

const struct schema_enum cluster_boot_disk_type_enum =
    SCHEMA_NAMES(NULL, [CLUSTER_PD_STANDARD] = "pd-standard", [CLUSTER_PD_BALANCED] = "pd-balanced",
                 [CLUSTER_PD_SSD] = "pd-ssd", [CLUSTER_PD_EXTREME] = "pd-extreme",
                 [CLUSTER_HYPERDISK_BALANCED] = "hyperdisk-balanced");

const struct schema_enum cluster_priority_type_enum =
    SCHEMA_NAMES(NULL, [CLUSTER_PRIORITY_BASIC] = "priority/basic",
                 [CLUSTER_PRIORITY_MULTIFACTOR] = "priority/multifactor");

const struct schema_enum cluster_preempt_type_enum =
    SCHEMA_NAMES(NULL, [CLUSTER_PREEMPT_NONE] = "preempt/none",
                 [CLUSTER_PREEMPT_PARTITION_PRIO] = "preempt/partition_prio",
                 [CLUSTER_PREEMPT_QOS] = "preempt/qos");

/* Vocabularies of slurm.conf comma lists (matched in any case). */
static const struct schema_enum preempt_modes =
    SCHEMA_NAMES(NULL, "OFF", "CANCEL", "GANG", "REQUEUE", "SUSPEND", "WITHIN", "PRIORITY");
static const struct schema_enum enforce_values = SCHEMA_NAMES(
    NULL, "associations", "limits", "nojobs", "nosteps", "qos", "safe", "wckeys", "all");

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

/* ---- slurm.conf values ---- */

/* Why a slurm.conf value would break its line, or NULL when it is fine: it must
 * not end the line, start a comment, break our quoting or continue onto the
 * next line; unquoted (scheduling keys are written bare) it must also be one
 * word, or the rest would be read as other keys. */
static const char *conf_value_bad(const char *v, int quoted)
{
    if (!*v)
        return "value must be non-empty, one line, without '#' or '\"'";
    for (const char *p = v; *p; p++)
        if (*p == '#' || *p == '"' || iscntrl((unsigned char)*p))
            return "value must be non-empty, one line, without '#' or '\"'";
    if (strchr(v, '\\'))
        return "value must not contain '\\' (slurm.conf would join the next line to it)";
    if (!quoted && strpbrk(v, " \t"))
        return "value must be one word: a blank would end it and start another key";
    return NULL;
}

/* Hook: a scheduling value slurm.conf gets bare (Key=value). */
static int conf_word(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *why = conf_value_bad(json_string_value(*v), 0);
    return why ? schema_error(err, path, "%s", why) : 0;
}

/* Hook: a comma list whose items all come from f->arg (any case), one word. */
static int comma_list(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    const struct schema_enum *allowed = f->arg;
    const char *s = json_string_value(*v);
    char buf[256], list[200];
    int ok = *s && strlen(s) < sizeof(buf) && s[strlen(s) - 1] != ',';
    snprintf(buf, sizeof(buf), "%s", s);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); ok && t; t = strtok_r(NULL, ",", &save))
        ok = schema_enum_parse(allowed, t, SCHEMA_ENUM_ANYCASE) >= 0;
    if (!ok)
        return schema_error(err, path, "invalid value \"%.60s\" (comma list of %s)", s,
                            schema_enum_list(allowed, list, sizeof(list)));
    return conf_word(f, v, path, err);
}

/* The keys of one slurm.conf level a config{} map may set. */
struct conf_level {
    const char *level; /* "partition", "node" */
    const char *const *keys, *const *managed;
};

static int in_list(const char *const *list, const char *s)
{
    for (; list && *list; list++)
        if (strcmp(*list, s) == 0)
            return 1;
    return 0;
}

/* One Key: "Value" of a config{} map (a bare integer is a fair way to write
 * "10"): the key in Slurm's spelling, the value on one line. */
static int conf_entry(json_t *out, const char *k, const json_t *e, const char *path,
                      const void *arg, mtc_error_t *err)
{
    const struct conf_level *lv = arg;
    char sub[PATH_LEN], num[32];
    const char *canon = NULL, *s = json_string_value(e), *why;
    for (const char *const *c = lv->keys; *c; c++)
        if (strcasecmp(*c, k) == 0)
            canon = *c;
    if (!canon)
        return schema_error(err, path, "unknown slurm.conf %s key \"%.60s\"", lv->level, k);
    if (in_list(lv->managed, canon))
        return schema_error(err, path, "slurm.conf %s key \"%s\" is set by mtc", lv->level, canon);
    schema_join(sub, sizeof(sub), path, canon);
    if (json_is_integer(e)) {
        snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(e));
        s = num;
    }
    if (!s)
        return schema_error(err, sub, "must be a string");
    if ((why = conf_value_bad(s, 1)))
        return schema_error(err, sub, "%s", why);
    if (json_object_get(out, canon))
        return schema_error(err, sub, "key given twice");
    return json_object_set_new(out, canon, json_string(s));
}

/* Hook: a config{} map of slurm.conf keys of one level (values quoted when blank). */
static int conf_map(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    return schema_map(v, path, "slurm.conf Key: \"Value\"", conf_entry, f->arg, err);
}

static const struct conf_level partition_level = {"partition", partition_keys, partition_managed};
static const struct conf_level node_level = {"node", node_keys, node_managed};

/* ---- per-object rules ---- */

struct id_rule {
    const char *what;
    size_t max;
};

/* Hook: a node pool or partition id, which names Slurm objects and paths. */
static int id_ok(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    const struct id_rule *r = f->arg;
    const char *id = json_string_value(*v);
    if (mtc_name_valid(id, r->max))
        return 0;
    return schema_error(err, path,
                        "invalid %s id \"%.60s\" (want ^[a-z][a-z0-9-]{0,%zu}, no trailing '-')",
                        r->what, id, r->max - 1);
}

static const struct id_rule pool_id = {"node pool", POOL_ID_MAX};
static const struct id_rule partition_id = {"partition", PARTITION_ID_MAX};

/* machineSpec: the catalog knows the type; accelerators match it and default to it. */
static int check_machine(json_t *ms, const char *path, mtc_error_t *err)
{
    char q[PATH_LEN];
    const char *mt = json_string_value(json_object_get(ms, "machineType"));
    struct cluster_machine_type info;
    mtc_error_t e2;
    if (cluster_machine_type_lookup(mt, &info, &e2) < 0) {
        schema_join(q, sizeof(q), path, "machineType");
        if (errno == ENOENT)
            return schema_error(err, q, "unknown machine type \"%.60s\"", mt);
        return schema_error(err, q, "%s", e2.text);
    }
    const char *acc = json_string_value(json_object_get(ms, "acceleratorType"));
    json_t *ac = json_object_get(ms, "acceleratorCount");
    if (acc && strcmp(acc, info.accelerator_type) != 0) {
        schema_join(q, sizeof(q), path, "acceleratorType");
        if (!info.accelerator_type[0])
            return schema_error(err, q, "machine type %s has no accelerators", mt);
        return schema_error(err, q, "machine type %s has %s, not \"%.60s\"", mt,
                            info.accelerator_type, acc);
    }
    if (ac && (json_integer_value(ac) < 0 || json_integer_value(ac) > info.accelerator_count)) {
        schema_join(q, sizeof(q), path, "acceleratorCount");
        return schema_error(err, q, "must be 0..%d for machine type %s", info.accelerator_count,
                            mt);
    }
    if (info.accelerator_type[0]) {
        if (!acc)
            json_object_set_new(ms, "acceleratorType", json_string(info.accelerator_type));
        if (!ac)
            json_object_set_new(ms, "acceleratorCount", json_integer(info.accelerator_count));
    }
    return 0;
}

/* scalingSpec: max defaults to min; 0 <= min <= max. A pool with max > min
 * is elastic (nodes min..max-1 powered by Slurm's power saving): it gets the
 * power-saving defaults. */
static int check_scaling(json_t *sc, const char *path, mtc_error_t *err)
{
    json_t *mn = json_object_get(sc, "minNodeCount"), *mx = json_object_get(sc, "maxNodeCount");
    if (!mx)
        json_object_set_new(sc, "maxNodeCount", mx = json_integer(json_integer_value(mn)));
    if (json_integer_value(mn) < 0)
        return schema_error(err, path, "minNodeCount must be >= 0");
    if (json_integer_value(mx) < 0)
        return schema_error(err, path, "maxNodeCount must be >= 0");
    if (json_integer_value(mn) > json_integer_value(mx))
        return schema_error(err, path, "minNodeCount %lld > maxNodeCount %lld",
                            (long long)json_integer_value(mn), (long long)json_integer_value(mx));
    json_t *st = json_object_get(sc, "suspendTimeSeconds");
    if (st && json_integer_value(st) == 0)
        return schema_error(err, path, "suspendTimeSeconds must be -1 (never) or 1..%d",
                            CLUSTER_SUSPEND_TIME_MAX);
    if (json_integer_value(mx) == json_integer_value(mn))
        return 0; /* a fixed pool: its power-saving fields, if any, wait unused */
    if (!st)
        json_object_set_new(sc, "suspendTimeSeconds", json_integer(CLUSTER_SUSPEND_TIME_DEFAULT));
    if (!json_object_get(sc, "resumeTimeoutSeconds"))
        json_object_set_new(sc, "resumeTimeoutSeconds",
                            json_integer(CLUSTER_RESUME_TIMEOUT_DEFAULT));
    return 0;
}

/* ---- clusters on hosts (rules across pools: hosts.c) ---- */

/* Hook: every element of a host list is an address or a DNS name: it reaches
 * ssh's and slurm.conf's command lines. */
static int host_list(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    char q[PATH_LEN];
    size_t i;
    json_t *h;
    json_array_foreach(*v, i, h)
    {
        if (cluster_host_valid(json_string_value(h)))
            continue;
        snprintf(q, sizeof(q), "%s[%zu]", path, i);
        return schema_error(err, q,
                            "invalid host \"%.60s\" (want an IPv4 or IPv6 address or a DNS name)",
                            json_string_value(h));
    }
    return 0;
}

static int host_one(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    if (cluster_host_valid(json_string_value(*v)))
        return 0;
    return schema_error(err, path,
                        "invalid host \"%.60s\" (want an IPv4 or IPv6 address or a DNS name)",
                        json_string_value(*v));
}

/* Hook: the ssh login name: ^[a-z_][a-z0-9_.-]{0,31}$ */
static int ssh_user(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *u = json_string_value(*v);
    int ok = *u && strlen(u) <= 32 && (islower((unsigned char)*u) || *u == '_');
    for (const char *c = u; ok && *c; c++)
        ok = islower((unsigned char)*c) || isdigit((unsigned char)*c) || strchr("_.-", *c);
    return ok ? 0
              : schema_error(err, path, "invalid user \"%.40s\" (want ^[a-z_][a-z0-9_.-]{0,31}$)",
                             u);
}

/* Hook: an absolute path of [A-Za-z0-9/._+-], up to 255 (it reaches ssh's command line). */
static int abs_path(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    int ok = s[0] == '/' && strlen(s) <= 255 && !strstr(s, "/../");
    for (const char *c = s; ok && *c; c++)
        ok = isalnum((unsigned char)*c) || strchr("/._+-", *c);
    return ok ? 0
              : schema_error(err, path,
                             "must be an absolute path of up to 255 of [A-Za-z0-9/._+-]");
}

/* Hook: a shell command mtc runs as root: one line, up to 1000 bytes. */
static int command(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (strlen(s) > 1000)
        return schema_error(err, path, "must be at most 1000 bytes");
    return 0;
}

/* ---- the tables ---- */

#define SPEC (SCHEMA_PROTO3 | SCHEMA_QUOTING)
#define STR(n) .name = n, .kind = SCHEMA_STR
#define OBJ(n, t) .name = n, .kind = SCHEMA_OBJ, .obj = &t
#define CONF(level) .name = "config", .kind = SCHEMA_CUSTOM, .check = conf_map, .arg = &level

static const struct schema_field f_network[] = {
    {STR("network")}, {STR("subnetwork")}, {.name = NULL}};
static const struct schema s_network = {f_network, SPEC, NULL, NULL};

static const struct schema_field f_boot_disk[] = {
    {.name = "bootDiskType", .kind = SCHEMA_ENUM, .enm = &cluster_boot_disk_type_enum},
    {.name = "bootDiskSizeGb", .kind = SCHEMA_INT, .flags = SCHEMA_LO, .lo = 10},
    {.name = NULL}};
static const struct schema s_boot_disk = {f_boot_disk, SPEC, NULL, NULL};

static const struct schema_field f_reservation[] = {
    {.name = "reservationAffinityType",
     .kind = SCHEMA_ENUM,
     .enm = &cluster_reservation_affinity_enum},
    {STR("key")},
    {.name = "values", .kind = SCHEMA_STRS},
    {.name = NULL},
};
static const struct schema s_reservation = {f_reservation, SPEC, NULL, NULL};

static const struct schema_field f_machine[] = {
    {.name = "machineType", .kind = SCHEMA_STR, .flags = SCHEMA_REQUIRED},
    {STR("acceleratorType")},
    {.name = "acceleratorCount", .kind = SCHEMA_INT},
    {OBJ("reservationAffinity", s_reservation)},
    {.name = NULL},
};
static const struct schema s_machine = {f_machine, SPEC, NULL, check_machine};

static const struct schema_field f_scaling[] = {
    {.name = "minNodeCount", .kind = SCHEMA_INT, .dflt = "0"},
    {.name = "maxNodeCount", .kind = SCHEMA_INT},
    /* elastic pools (max > min): Slurm's SuspendTime and ResumeTimeout */
    {.name = "suspendTimeSeconds",
     .kind = SCHEMA_INT,
     .flags = SCHEMA_RANGE,
     .lo = -1,
     .hi = CLUSTER_SUSPEND_TIME_MAX},
    {.name = "resumeTimeoutSeconds",
     .kind = SCHEMA_INT,
     .flags = SCHEMA_RANGE,
     .lo = 5,
     .hi = CLUSTER_RESUME_TIMEOUT_MAX},
    {.name = NULL}};
static const struct schema s_scaling = {f_scaling, SPEC, NULL, check_scaling};

/* Shared storage (storage.c): on hosts, root mounts each entry on every node of
 * the pool (nosuid,nodev; options from a safe set) */
#define STORAGE(rule) .kind = SCHEMA_STR, .check = cluster_hook_storage, .arg = &cluster_rule_##rule
#define MOUNT_PATH .name = "mountPath", .flags = SCHEMA_REQUIRED, STORAGE(path)
#define MOUNT_OPTIONS(n) .name = n, STORAGE(options)
static const struct schema_field f_filestore[] = {
    {.name = "filestore", .flags = SCHEMA_REQUIRED, STORAGE(nfs)},
    {MOUNT_PATH},
    {MOUNT_OPTIONS("mountOptions")},
    {.name = NULL}};
static const struct schema s_filestore = {f_filestore, SPEC, NULL, NULL};
static const struct schema_field f_lustre[] = {
    {.name = "lustre", .flags = SCHEMA_REQUIRED, STORAGE(lustre)},
    {MOUNT_PATH},
    {MOUNT_OPTIONS("mountOptions")},
    {.name = NULL}};
static const struct schema s_lustre = {f_lustre, SPEC, NULL, NULL};

static const struct schema_field f_pool[] = {
    {.name = "id", .kind = SCHEMA_STR, .flags = SCHEMA_REQUIRED, .check = id_ok, .arg = &pool_id},
    {STR("zone")},
    {.name = "enablePublicIps", .kind = SCHEMA_BOOL},
    {OBJ("bootDisk", s_boot_disk)},
    {.name = "machineSpec", .kind = SCHEMA_OBJ, .flags = SCHEMA_REQUIRED, .obj = &s_machine},
    {.name = "provisioningModel",
     .kind = SCHEMA_ENUM,
     .enm = &cluster_provisioning_model_enum,
     .dflt = "\"ON_DEMAND\""},
    {.name = "scalingSpec",
     .kind = SCHEMA_OBJ,
     .obj = &s_scaling,
     .dflt = "{\"minNodeCount\": 1, \"maxNodeCount\": 1}"},
    /* no provider runs it today; a node's startup script runs as root where one does */
    {.name = "startupScript", .kind = SCHEMA_STR, .flags = SCHEMA_ROOT_EXEC},
    {STR("nodeImage")},
    /* what root mounts on the pool's hosts: admin-only, like the scripts */
    {.name = "filestores",
     .kind = SCHEMA_OBJS,
     .flags = SCHEMA_ROOT_EXEC,
     .max_items = 16,
     .obj = &s_filestore},
    {.name = "lustres",
     .kind = SCHEMA_OBJS,
     .flags = SCHEMA_ROOT_EXEC,
     .max_items = 16,
     .obj = &s_lustre},
    /* mtc's own: the real hosts the pool runs on (node i = hosts[i]), and the
     * spares a replaced node moves to — mtcd logs in to them as root */
    {.name = "hosts", .kind = SCHEMA_STRS, .flags = SCHEMA_ROOT_EXEC, .check = host_list},
    {.name = "spareHosts", .kind = SCHEMA_STRS, .flags = SCHEMA_ROOT_EXEC, .check = host_list},
    {.name = NULL},
};
static const struct schema s_pool = {f_pool, SPEC, NULL, NULL};

static const struct schema_field f_partition[] = {
    {.name = "id",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REQUIRED,
     .check = id_ok,
     .arg = &partition_id},
    {.name = "nodePoolIds", .kind = SCHEMA_STRS},
    {CONF(partition_level)},
    {.name = NULL},
};
static const struct schema s_partition = {f_partition, SPEC, NULL, NULL};

static const struct schema_field f_node_set[] = {
    {.name = "nodePoolId", .kind = SCHEMA_STR, .flags = SCHEMA_REQUIRED},
    {CONF(node_level)},
    {.name = NULL}};
static const struct schema s_node_set = {f_node_set, SPEC, NULL, NULL};

/* an external database for slurmdbd; without it mtc runs a private MariaDB */
static const struct schema_field f_acct_db[] = {
    {.name = "host", .kind = SCHEMA_STR, .flags = SCHEMA_REQUIRED, .check = conf_word},
    {.name = "port", .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .lo = 1, .hi = 65535, .dflt = "3306"},
    /* user= and password= lines, a root-owned file of mode 0600 */
    {.name = "credentialsFile", .kind = SCHEMA_STR, .flags = SCHEMA_REQUIRED, .check = abs_path},
    {.name = NULL},
};
static const struct schema s_acct_db = {f_acct_db, SPEC, NULL, NULL};

static const struct schema_field f_accounting[] = {
    {.name = "accountingStorageEnforce",
     .kind = SCHEMA_STR,
     .check = comma_list,
     .arg = &enforce_values},
    /* slurmdbd on the controller, every job recorded (sacct, sreport) */
    {.name = "enabled", .kind = SCHEMA_BOOL},
    /* mtcd reads its credentials file as root, slurmdbd sends them to its host */
    {.name = "database", .kind = SCHEMA_OBJ, .flags = SCHEMA_ROOT_EXEC, .obj = &s_acct_db},
    {.name = NULL},
};
static const struct schema s_accounting = {f_accounting, SPEC, NULL, NULL};

#define WEIGHT(n) .name = n, .kind = SCHEMA_INT, .flags = SCHEMA_LO, .lo = 0
#define CONF_WORD(n) .name = n, .kind = SCHEMA_STR, .check = conf_word
static const struct schema_field f_scheduling[] = {
    {.name = "priorityType", .kind = SCHEMA_ENUM, .enm = &cluster_priority_type_enum},
    {WEIGHT("priorityWeightAge")},
    {WEIGHT("priorityWeightAssoc")},
    {WEIGHT("priorityWeightFairshare")},
    {WEIGHT("priorityWeightJobSize")},
    {WEIGHT("priorityWeightPartition")},
    {WEIGHT("priorityWeightQos")},
    {CONF_WORD("priorityWeightTres")},
    {.name = "preemptType", .kind = SCHEMA_ENUM, .enm = &cluster_preempt_type_enum},
    {.name = "preemptMode", .kind = SCHEMA_STR, .check = comma_list, .arg = &preempt_modes},
    {CONF_WORD("preemptExemptTime")},
    {.name = NULL},
};
static const struct schema s_scheduling = {f_scheduling, SPEC, NULL, NULL};

/* Prolog/epilog scripts run as root on every node around every job. */
#define SCRIPTS(n) .name = n, .kind = SCHEMA_STRS, .flags = SCHEMA_ROOT_EXEC
static const struct schema_field f_slurm[] = {
    /* mounted as root at /home on every host of a cluster on hosts */
    {.name = "homeDirectoryStorage", .flags = SCHEMA_ROOT_EXEC, STORAGE(nfs)},
    {MOUNT_OPTIONS("homeDirectoryMountOptions")},
    {STR("loginNodePoolId")},
    {.name = "partitions", .kind = SCHEMA_OBJS, .obj = &s_partition},
    {STR("defaultPartitionId")},
    {.name = "nodeSets", .kind = SCHEMA_OBJS, .obj = &s_node_set},
    {OBJ("accounting", s_accounting)},
    {OBJ("scheduling", s_scheduling)},
    {SCRIPTS("prologBashScripts")},
    {SCRIPTS("epilogBashScripts")},
    {.name = NULL},
};
static const struct schema s_slurm = {f_slurm, SPEC, NULL, NULL};

static const struct schema_field f_orchestrator[] = {{OBJ("slurmSpec", s_slurm)}, {.name = NULL}};
static const struct schema s_orchestrator = {f_orchestrator, SPEC, NULL, NULL};

/* mtc's own sections for a cluster on hosts (hosts.c says which pools need them) */
static const struct schema_field f_ssh[] = {
    {.name = "user", .kind = SCHEMA_STR, .check = ssh_user},
    /* mtcd reads the private key as root (the section is root-only) */
    {.name = "keyFile", .kind = SCHEMA_STR, .check = abs_path},
    {.name = "port", .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .lo = 1, .hi = 65535},
    {.name = NULL}};
static const struct schema s_ssh = {f_ssh, SPEC, NULL, NULL};

/* Hook: a directory for slurmctld's state: abs_path, and not / or a path
 * that ends in . or .. (mtc makes it and writes a marker there as root). */
static int state_dir(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    if (abs_path(f, v, path, err) < 0)
        return -1;
    const char *s = json_string_value(*v), *last = strrchr(s, '/');
    if (!strcmp(s, "/") || !strcmp(last, "/.") || !strcmp(last, "/..") || !strcmp(last, "/"))
        return schema_error(err, path, "\"%.60s\" is not a directory of its own", s);
    return 0;
}

/* the controller: where the hosts reach it, and Slurm's backup controller
 * (cluster/hosts.c checks backupHost against the pools; docs/hosts.md) */
static const struct schema_field f_controller[] = {
    {.name = "address", .kind = SCHEMA_STR, .check = host_one},
    {.name = "backupHost", .kind = SCHEMA_STR, .check = host_one},
    {.name = "failoverSeconds", .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .lo = 5, .hi = 3600},
    {.name = "stateSaveLocation", .kind = SCHEMA_STR, .check = state_dir},
    {.name = NULL}};
static const struct schema s_controller = {f_controller, SPEC, NULL, NULL};

/* the reboot command runs as root on a host, the reimage and power commands
 * as root on the mtcd host */
#define COMMAND(n)                                                                                 \
    .name = n, .kind = SCHEMA_STR, .flags = SCHEMA_ROOT_EXEC | SCHEMA_NONEMPTY | SCHEMA_ONELINE,   \
    .check = command
static const struct schema_field f_host_remediation[] = {
    {COMMAND("rebootCommand")},
    {COMMAND("reimageCommand")},
    {COMMAND("powerOnCommand")},
    {COMMAND("powerOffCommand")},
    {.name = "bootTimeoutSeconds", .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .lo = 5, .hi = 7200},
    {.name = NULL}};
static const struct schema s_host_remediation = {f_host_remediation, SPEC, NULL, NULL};

/* mtc's own: a simulated cluster (provider "sim", docs/scale.md) — how long
 * its node actions take and how often one fails */
#define SIM_SECONDS(n, d)                                                                          \
    .name = n, .kind = SCHEMA_NUM, .flags = SCHEMA_RANGE, .lo = 0, .hi = 86400, .dflt = d
static const struct schema_field f_sim[] = {
    {SIM_SECONDS("restartSeconds", "10")},
    {SIM_SECONDS("rebootSeconds", "180")},
    {SIM_SECONDS("reimageSeconds", "900")},
    {SIM_SECONDS("replaceSeconds", "1800")},
    {.name = "actionFailurePercent",
     .kind = SCHEMA_NUM,
     .flags = SCHEMA_RANGE,
     .lo = 0,
     .hi = 100,
     .dflt = "0"},
    {.name = NULL}};
static const struct schema s_sim = {f_sim, SPEC, NULL, NULL};

/* mtc's own: the container plugin's registry images (docs/containers.md) —
 * the image cache's size limit; least recently used images no step holds
 * are evicted beyond it */
static const struct schema_field f_containers[] = {
    {.name = "cacheMaxGb",
     .kind = SCHEMA_NUM,
     .flags = SCHEMA_RANGE,
     .lo = 1,
     .hi = 1000000,
     .dflt = "200"},
    {.name = NULL}};
static const struct schema s_containers = {f_containers, SPEC, NULL, NULL};

/* users[]: the Unix users mtc makes where missing (users.c) */
static int user_name(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *u = json_string_value(*v);
    return mtc_user_name_valid(u)
               ? 0
               : schema_error(err, path, "invalid user \"%.40s\" (want ^[a-z_][a-z0-9_-]{0,31}$)", u);
}

static const struct schema_field f_user[] = {
    {.name = "name", .kind = SCHEMA_STR, .flags = SCHEMA_REQUIRED, .check = user_name},
    {.name = "uid", .kind = SCHEMA_INT, .flags = SCHEMA_REQUIRED | SCHEMA_RANGE, .lo = 1,
     .hi = 2147483646},
    {.name = "gid", .kind = SCHEMA_INT, .flags = SCHEMA_REQUIRED | SCHEMA_RANGE, .lo = 1,
     .hi = 2147483646},
    {.name = NULL},
};
static const struct schema s_user = {f_user, SPEC, NULL, NULL};

/* Output-only fields of the resource: accepted in a request (a GET body sent
 * back) and dropped. */
const char *const cluster_output_only[] = {"name",          "createTime",    "updateTime",
                                          "clusterStatus", "clusterEvents", NULL};

static const struct schema_field f_cluster[] = {
    {STR("displayName")},
    {STR("description")},
    {.name = "labels", .kind = SCHEMA_LABELS},
    {OBJ("network", s_network)},
    {.name = "nodePools", .kind = SCHEMA_OBJS, .obj = &s_pool},
    {OBJ("orchestratorSpec", s_orchestrator)},
    {OBJ("healthPolicy", health_policy_schema)}, /* mtc's own: the node health checks */
    /* mtc's own, from here: clusters on hosts. How mtcd logs in as root, to
     * which controller, and whether it runs apt-get there: an admin's */
    {.name = "ssh", .kind = SCHEMA_OBJ, .flags = SCHEMA_ROOT_EXEC, .obj = &s_ssh},
    {.name = "controller", .kind = SCHEMA_OBJ, .flags = SCHEMA_ROOT_EXEC, .obj = &s_controller},
    {.name = "installPackages", .kind = SCHEMA_BOOL, .flags = SCHEMA_ROOT_EXEC},
    {OBJ("hostRemediation", s_host_remediation)},
    /* mtc's own: where `mtc run` writes experiments; on hosts, shared storage
     * (checked by a marker mtcd writes there as root) */
    {.name = "experimentRoot", .flags = SCHEMA_ROOT_EXEC, STORAGE(path)},
    /* mtc's own: Unix users made (as root) where missing, here and on the hosts */
    {.name = "users", .kind = SCHEMA_OBJS, .flags = SCHEMA_ROOT_EXEC, .obj = &s_user},
    {OBJ("sim", s_sim)}, /* mtc's own: a simulated cluster (no Slurm, no jobs) */
    {OBJ("containers", s_containers)}, /* mtc's own: the registry image cache */
    {.name = NULL},
};
const struct schema cluster_spec_schema = {f_cluster, SPEC, cluster_output_only, NULL};

/* ---- checks across the spec, on the canonical object ---- */

static json_t *ensure_obj(json_t *parent, const char *key)
{
    json_t *o = json_object_get(parent, key);
    if (!o) {
        o = json_object();
        json_object_set_new(parent, key, o);
    }
    return o;
}

static int check_pools(const json_t *pools, mtc_error_t *err)
{
    char q[PATH_LEN];
    size_t i;
    json_t *pool;
    if (json_array_size(pools) == 0)
        return schema_error(err, "nodePools", "at least one node pool is required");
    json_array_foreach(pools, i, pool)
    {
        const char *id = json_string_value(json_object_get(pool, "id"));
        snprintf(q, sizeof(q), "nodePools[%zu].id", i);
        if (cluster_spec_pool_index(pools, id) != (int)i)
            return schema_error(err, q, "duplicate node pool id \"%s\"", id);
    }
    return 0;
}

#define SLURM_SPEC "orchestratorSpec.slurmSpec"

/* Default: one partition per compute pool, named after the pool. */
static void default_partitions(json_t *ss, const json_t *pools, const char *login)
{
    size_t i;
    json_t *e;
    if (json_object_get(ss, "partitions"))
        return;
    json_t *parts = json_array();
    json_array_foreach(pools, i, e)
    {
        const char *id = json_string_value(json_object_get(e, "id"));
        if (login && strcmp(id, login) == 0)
            continue;
        json_array_append_new(parts, json_pack("{s:s,s:[s]}", "id", id, "nodePoolIds", id));
    }
    json_object_set_new(ss, "partitions", parts);
}

/* Partition i: a unique id, existing compute pools. */
static int check_partition(const json_t *parts, size_t i, const json_t *pools, const char *login,
                           mtc_error_t *err)
{
    char path[PATH_LEN], q[PATH_LEN];
    size_t j;
    json_t *pid;
    const json_t *e = json_array_get(parts, i);
    const char *id = json_string_value(json_object_get(e, "id"));
    snprintf(path, sizeof(path), SLURM_SPEC ".partitions[%zu]", i);
    for (j = 0; j < i; j++)
        if (strcmp(json_string_value(json_object_get(json_array_get(parts, j), "id")), id) == 0)
            return schema_error(err, schema_join(q, sizeof(q), path, "id"),
                                "duplicate partition id \"%s\"", id);
    json_t *ids = json_object_get(e, "nodePoolIds");
    if (json_array_size(ids) == 0)
        return schema_error(err, schema_join(q, sizeof(q), path, "nodePoolIds"),
                            "at least one node pool id is required");
    json_array_foreach(ids, j, pid)
    {
        const char *p = json_string_value(pid);
        snprintf(q, sizeof(q), "%s.nodePoolIds[%zu]", path, j);
        if (cluster_spec_pool_index(pools, p) < 0)
            return schema_error(err, q, "no node pool \"%.60s\"", p);
        if (login && strcmp(p, login) == 0)
            return schema_error(
                err, q, "node pool \"%s\" is the login pool and cannot be in a partition", p);
    }
    return 0;
}

/* defaultPartitionId names a partition; default: the first. */
static int check_default_partition(json_t *ss, mtc_error_t *err)
{
    size_t i;
    json_t *e;
    json_t *parts = json_object_get(ss, "partitions");
    const char *def = json_string_value(json_object_get(ss, "defaultPartitionId"));
    if (!def) {
        json_object_set(ss, "defaultPartitionId", json_object_get(json_array_get(parts, 0), "id"));
        return 0;
    }
    json_array_foreach(parts, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "id")), def) == 0)
            return 0;
    }
    return schema_error(err, SLURM_SPEC ".defaultPartitionId", "no partition \"%.60s\"", def);
}

/* At most one node set per existing pool. */
static int check_node_sets(const json_t *ss, const json_t *pools, mtc_error_t *err)
{
    char q[PATH_LEN];
    size_t i, j;
    json_t *e;
    const json_t *sets = json_object_get(ss, "nodeSets");
    json_array_foreach(sets, i, e)
    {
        const char *p = json_string_value(json_object_get(e, "nodePoolId"));
        snprintf(q, sizeof(q), SLURM_SPEC ".nodeSets[%zu].nodePoolId", i);
        if (cluster_spec_pool_index(pools, p) < 0)
            return schema_error(err, q, "no node pool \"%.60s\"", p);
        for (j = 0; j < i; j++)
            if (strcmp(json_string_value(json_object_get(json_array_get(sets, j), "nodePoolId")),
                       p) == 0)
                return schema_error(err, q, "duplicate node set for node pool \"%s\"", p);
    }
    return 0;
}

static int check_slurm(json_t *spec, mtc_error_t *err)
{
    const json_t *pools = json_object_get(spec, "nodePools");
    json_t *ss = ensure_obj(ensure_obj(spec, "orchestratorSpec"), "slurmSpec");
    const char *login = json_string_value(json_object_get(ss, "loginNodePoolId"));
    if (login && cluster_spec_pool_index(pools, login) < 0)
        return schema_error(err, SLURM_SPEC ".loginNodePoolId", "no node pool \"%.60s\"", login);
    default_partitions(ss, pools, login);
    json_t *parts = json_object_get(ss, "partitions");
    if (json_array_size(parts) == 0)
        return schema_error(err, SLURM_SPEC ".partitions", "at least one partition is required");
    for (size_t i = 0; i < json_array_size(parts); i++)
        if (check_partition(parts, i, pools, login, err) < 0)
            return -1;
    if (check_default_partition(ss, err) < 0)
        return -1;
    return check_node_sets(ss, pools, err);
}

/* A simulated cluster has no machines: no hosts. */
/* users: each name and uid once, at most CLUSTER_USERS_MAX. */
static int check_users(const json_t *spec, mtc_error_t *err)
{
    const json_t *us = json_object_get(spec, "users");
    if (json_array_size(us) > CLUSTER_USERS_MAX)
        return schema_error(err, "users", "at most %d users", CLUSTER_USERS_MAX);
    for (size_t i = 0; i < json_array_size(us); i++)
        for (size_t k = 0; k < i; k++) {
            const json_t *a = json_array_get(us, i), *b = json_array_get(us, k);
            char where[32];
            snprintf(where, sizeof(where), "users[%zu]", i);
            if (json_equal(json_object_get(a, "name"), json_object_get(b, "name")))
                return schema_error(err, where, "user \"%s\" is listed twice",
                                    json_string_value(json_object_get(a, "name")));
            if (json_equal(json_object_get(a, "uid"), json_object_get(b, "uid")))
                return schema_error(err, where, "uid %lld is users[%zu]'s too",
                                    (long long)json_integer_value(json_object_get(a, "uid")), k);
        }
    return 0;
}

static int check_sim(const json_t *spec, mtc_error_t *err)
{
    if (cluster_spec_simulated(spec) && cluster_spec_on_hosts(spec))
        return schema_error(err, "sim",
                            "a simulated cluster runs on no hosts (drop nodePools[].hosts)");
    return 0;
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
        schema_error(err, "", "cluster spec must be a JSON object");
        return NULL;
    }
    first = schema_normalize(in, &cluster_spec_schema, "", err);
    if (!first || check_pools(json_object_get(first, "nodePools"), err) < 0 ||
        cluster_spec_hosts_check(first, err) < 0 || check_sim(first, err) < 0 ||
        cluster_spec_storage_check(first, err) < 0 || check_slurm(first, err) < 0 ||
        check_users(first, err) < 0)
        goto error;
    /* the checks above added defaults at the end; a second pass restores table order */
    out = schema_normalize(first, &cluster_spec_schema, "", err);
    if (!out)
        goto error;
    json_decref(first);
    return out;
error:
    json_decref(first);
    errno = EINVAL;
    return NULL;
}
