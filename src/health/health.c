/* health: the health context (defaults and the mtc-agent config file),
 * running a pass over the check table (checks.c; costly probes through
 * probecache.c), results read back from JSON, and the faults' behaviours. */
#include "health/health.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Paths and messages go into fixed buffers; a truncated one only shortens a
 * reason line, so the truncation warning is noise here. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

int health_ctx_init(struct health_ctx *ctx, mtc_error_t *err)
{
    memset(ctx, 0, sizeof(*ctx));
    snprintf(ctx->nvml_library, sizeof(ctx->nvml_library), "libnvidia-ml.so.1");
    snprintf(ctx->kernel_log, sizeof(ctx->kernel_log), "/dev/kmsg");
    if (health_policy_parse(NULL, &ctx->policy, err) < 0)
        return -1;
    ctx->rt = health_rt_create(ctx, err);
    return ctx->rt ? 0 : -1;
}

void health_ctx_release(struct health_ctx *ctx)
{
    if (!ctx)
        return;
    int e = errno;
    health_rt_destroy(ctx->rt);
    ctx->rt = NULL;
    errno = e;
}

/* The mtc-agent config fields the ctx takes (docs/health.md). */
#define CTX(m) SCHEMA_MEMBER(struct health_ctx, m)
#define CTX_STR(n, m) .name = n, .kind = SCHEMA_STR, CTX(m)
#define CTX_INT(n, m) .name = n, .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .hi = 65535, CTX(m)
#define CTX_NUM(n, m) .name = n, .kind = SCHEMA_NUM, .flags = SCHEMA_LO, CTX(m)
static const struct schema_field ctx_fields[] = {
    {CTX_STR("nodeId", node)},
    {CTX_STR("homeDir", home_dir)},
    {CTX_STR("localDir", local_dir)},
    {CTX_STR("checkpointDir", checkpoint_dir)},
    /* the agent runs as root in Slurm's HealthCheckProgram and prolog and dlopens it */
    {.name = "nvmlLibrary", .kind = SCHEMA_STR, .flags = SCHEMA_ROOT_EXEC, CTX(nvml_library)},
    {CTX_STR("kernelLog", kernel_log)},
    {CTX_STR("stateDir", state_dir)},
    {CTX_INT("expectedGpus", expected_gpus)},
    {CTX_STR("slurmdPidFile", slurmd_pid_file)},
    {CTX_INT("slurmdPort", slurmd_port)},
    {CTX_STR("mungeSocket", munge_socket)},
    {CTX_NUM("baselineGflops", baseline_gflops)},
    {CTX_NUM("baselineMemGbps", baseline_mem_gbps)},
    {.name = "mounts",
     .kind = SCHEMA_STRS,
     .max_items = HEALTH_MAX_MOUNTS,
     CTX(mounts),
     .count_off = offsetof(struct health_ctx, nmounts)},
    {CTX_STR("experimentRoot", experiment_root)},
    {CTX_STR("storageMarker", storage_marker)},
    {CTX_STR("storageMarkerContent", storage_marker_content)},
    {.name = NULL},
};
/* the agent's own fields (transport, identity, Slurm) and the policy, read apart */
static const char *const agent_fields[] = {"project", "location",  "clusterId", "socket",
                                           "url",     "tokenFile", "slurmConf", "healthPolicy",
                                           "caFile",  NULL};
static const struct schema ctx_schema = {ctx_fields, 0, agent_fields, NULL};

int health_ctx_configure(struct health_ctx *ctx, const json_t *config, mtc_error_t *err)
{
    json_t *c = schema_normalize(config, &ctx_schema, "config", err);
    int rc = c ? schema_fill(c, &ctx_schema, ctx) : -1;
    json_decref(c);
    if (rc < 0)
        return c ? errprintf(err, "config: does not fit the health context") : -1;
    json_t *pol = json_object_get(config, "healthPolicy");
    if (!pol)
        pol = json_object_get(config, "health_policy");
    if (health_policy_parse(pol, &ctx->policy, err) < 0)
        return -1;
    /* the kernel log may have changed: start over at its end */
    health_rt_destroy(ctx->rt);
    ctx->rt = health_rt_create(ctx, err);
    return ctx->rt ? 0 : -1;
}

/* Is the check selected by the comma list? A family selects its slow
 * checks only in the prolog; naming a slow check always runs it. */
static int in_csv(const struct health_ctx *ctx, const char *csv, const struct health_check *c)
{
    const char *p = csv;
    while (*p) {
        size_t n = strcspn(p, ",");
        if ((strlen(c->name) == n && strncmp(p, c->name, n) == 0) ||
            (strlen(c->family) == n && strncmp(p, c->family, n) == 0 &&
             (!c->slow || ctx->mode == HEALTH_MODE_PROLOG)))
            return 1;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

static int enabled(const struct health_ctx *ctx, const struct health_check *c)
{
    for (int i = 0; i < ctx->policy.nchecks; i++)
        if (strcmp(ctx->policy.checks[i], c->name) == 0 ||
            strcmp(ctx->policy.checks[i], c->family) == 0)
            return !c->slow || ctx->mode == HEALTH_MODE_PROLOG;
    return 0;
}

int health_run(const struct health_ctx *ctx, const char *only, struct health_result *out, int max,
               mtc_error_t *err)
{
    int n = 0;
    if (only) { /* every name must be known: a typo must not silently pass */
        const char *p = only;
        while (*p) {
            size_t len = strcspn(p, ",");
            int known = 0;
            for (const struct health_check *c = health_checks; c->name; c++)
                known |= (strlen(c->name) == len && strncmp(p, c->name, len) == 0) ||
                         (strlen(c->family) == len && strncmp(p, c->family, len) == 0);
            if (!known) {
                errno = EINVAL;
                return errprintf(err, "unknown check \"%.*s\" (see `mtc-agent checks`)",
                                 (int)(len > 40 ? 40 : len), p);
            }
            p += len;
            if (*p == ',')
                p++;
        }
    }
    for (const struct health_check *c = health_checks; c->name; c++) {
        if (only ? !in_csv(ctx, only, c) : !enabled(ctx, c))
            continue;
        if (n >= max) {
            health_gpu_end(ctx);
            errno = ENOSPC;
            return errprintf(err, "more than %d results", max);
        }
        struct health_result *r = &out[n++];
        memset(r, 0, sizeof(*r));
        snprintf(r->check, sizeof(r->check), "%s", c->name);
        int idx = (int)(c - health_checks);
        struct health_result *cached = health_rt_cached(ctx, idx);
        if (cached) { /* a probe that ran recently: do not load the node again */
            *r = *cached;
            continue;
        }
        r->status = HEALTH_PASS;
        r->severity = -1;
        c->fn(ctx, r);
        if (r->status != HEALTH_FAIL)
            r->severity = HEALTH_SEV_NONE;
        else if (r->severity < 0)
            r->severity = c->severity;
        if (c->costly)
            health_rt_cache(ctx, idx, r);
    }
    health_gpu_end(ctx);
    return n;
}

/* Hook: a result names a check of the table. */
static int check_name(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    for (const struct health_check *c = health_checks; c->name; c++)
        if (strcmp(c->name, json_string_value(*v)) == 0)
            return 0;
    return schema_error(err, path, "unknown check \"%.40s\"", json_string_value(*v));
}

#define RES(m) SCHEMA_MEMBER(struct health_result, m)
static const struct schema_field result_fields[] = {
    {.name = "check",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REQUIRED,
     .check = check_name,
     RES(check)},
    {.name = "status",
     .kind = SCHEMA_ENUM,
     .flags = SCHEMA_REQUIRED,
     .enm = &health_result_status_enum,
     RES(status)},
    {.name = "severity",
     .kind = SCHEMA_ENUM,
     .enm = &health_severity_enum,
     .dflt = "\"NONE\"",
     RES(severity)},
    {.name = "reason", .kind = SCHEMA_STR, .dflt = "\"\"", RES(reason)},
    {.name = "value", .kind = SCHEMA_NUM, RES(value)},
    {.name = NULL},
};
static const struct schema result_schema = {result_fields, SCHEMA_EXACT, NULL, NULL};

int health_results_parse(const json_t *results, struct health_result *out, int max,
                         mtc_error_t *err)
{
    size_t i;
    json_t *e;
    errno = EINVAL;
    if (!json_is_array(results))
        return errprintf(err, "results: must be an array");
    if (json_array_size(results) > (size_t)max)
        return errprintf(err, "results: at most %d entries", max);
    json_array_foreach(results, i, e)
    {
        char path[32];
        snprintf(path, sizeof(path), "results[%zu]", i);
        json_t *r = schema_normalize(e, &result_schema, path, err);
        memset(&out[i], 0, sizeof(out[i]));
        int rc = r ? schema_fill(r, &result_schema, &out[i]) : -1;
        json_decref(r);
        if (rc < 0)
            return -1;
    }
    errno = 0;
    return (int)json_array_size(results);
}

const char *health_fault_behavior(const char *check)
{
    static const struct {
        const char *prefix, *behavior;
    } map[] = {{"gpu.", "UNRECOVERABLE_GPU_ERROR"},
               {"sdc", "SILENT_DATA_CORRUPTION"},
               {"speed.", "PERFORMANCE"}};
    for (size_t i = 0; check && i < sizeof(map) / sizeof(map[0]); i++)
        if (strncmp(check, map[i].prefix, strlen(map[i].prefix)) == 0)
            return map[i].behavior;
    return "BEHAVIOR_UNSPECIFIED";
}
