/* health: the check table, running a pass, results as JSON, and the health
 * context (defaults and the mtc-agent config file). */
#include "health/health.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Paths and messages go into fixed buffers; a truncated one only shortens a
 * reason line, so the truncation warning is noise here. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

const struct health_check health_checks[] = {
    {"gpu.count", "gpu", health_gpu_count, HEALTH_SEV_REBOOT, 0, 0,
     "NVML reachable and the expected number of GPUs visible"},
    {"gpu.ecc", "gpu", health_gpu_ecc, HEALTH_SEV_REBOOT, 0, 0,
     "volatile uncorrected ECC errors at most gpuMaxUncorrectedEcc"},
    {"gpu.remap", "gpu", health_gpu_remap, HEALTH_SEV_REPLACE, 0, 0,
     "no row-remapping failure or pending remap; retired pages at most gpuMaxRetiredPages"},
    {"gpu.temp", "gpu", health_gpu_temp, HEALTH_SEV_REPLACE, 0, 0,
     "GPU temperature below gpuTempWarnC / gpuTempFailC"},
    {"gpu.throttle", "gpu", health_gpu_throttle, HEALTH_SEV_REPLACE, 0, 0,
     "no hardware or thermal clock slowdown"},
    {"gpu.xid", "gpu", health_xid, HEALTH_SEV_REBOOT, 0, 0,
     "no critical NVRM Xid in the kernel log since the agent started"},
    {"gpu.dcgm", "gpu", health_gpu_dcgm, HEALTH_SEV_REPLACE, 1, 0,
     "dcgmi diag -r dcgmDiagLevel passes (prolog only; skipped without DCGM)"},
    {"disk", "disk", health_disk, HEALTH_SEV_REIMAGE, 0, 0,
     "free space and inodes on /, shared, local and checkpoint dirs"},
    {"nic", "nic", health_nic, HEALTH_SEV_REBOOT, 0, 0,
     "primary interface up with an IPv4 address"},
    {"speed.compute", "speed", health_speed_compute, HEALTH_SEV_REPLACE, 0, 1,
     "sgemm-like probe GFLOP/s against the machine type's baseline"},
    {"speed.membw", "speed", health_speed_membw, HEALTH_SEV_REPLACE, 0, 1,
     "memory-copy GB/s against the machine type's baseline"},
    {"sdc", "sdc", health_sdc, HEALTH_SEV_REPLACE, 0, 0,
     "deterministic integer+FMA computation matches the known answer bit for bit"},
    {"daemon.slurmd", "daemon", health_daemon_slurmd, HEALTH_SEV_RESTART, 0, 0,
     "slurmd alive (pid file) and accepting connections on its port"},
    {"daemon.munged", "daemon", health_daemon_munged, HEALTH_SEV_RESTART, 0, 0,
     "munged answers: munge -n | unmunge round trip on its socket"},
    /* a restart remounts what vanished (mtc-host up); a node that still does
     * not see the experiment root escalates */
    {"storage.shared", "storage", health_storage_shared, HEALTH_SEV_RESTART, 0, 0,
     "shared mounts in place; the experiment root holds the controller's marker and takes a "
     "small write+fsync (value: ms)"},
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

static const char *const status_names[] = {
    [HEALTH_PASS] = "PASS",
    [HEALTH_WARN] = "WARN",
    [HEALTH_FAIL] = "FAIL",
    [HEALTH_UNKNOWN] = "UNKNOWN",
};
const struct schema_enum health_status_enum = SCHEMA_ENUM(status_names, NULL);
const struct schema_enum health_result_status_enum = {status_names, HEALTH_FAIL + 1, NULL};

const struct schema_enum health_severity_enum =
    SCHEMA_NAMES(NULL, [HEALTH_SEV_NONE] = "NONE", [HEALTH_SEV_RESTART] = "RESTART",
                 [HEALTH_SEV_REBOOT] = "REBOOT", [HEALTH_SEV_REIMAGE] = "REIMAGE",
                 [HEALTH_SEV_REPLACE] = "REPLACE");

const struct schema_enum health_mode_enum =
    SCHEMA_NAMES(NULL, [HEALTH_MODE_HEALTH] = "HEALTH", [HEALTH_MODE_PROLOG] = "PROLOG",
                 [HEALTH_MODE_EPILOG] = "EPILOG");

const char *health_status_name(enum health_status s)
{
    return schema_enum_name(&health_status_enum, (int)s) ?: "FAIL";
}

const char *health_severity_name(int sev)
{
    return schema_enum_name(&health_severity_enum, sev) ?: "NONE";
}

int health_set(struct health_result *r, enum health_status st, int sev, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
    va_end(ap);
    r->status = st;
    if (sev >= 0)
        r->severity = sev;
    return 0;
}

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
static const char *const agent_fields[] = {
    "project",   "location",     "clusterId", "socket", "url", "tokenFile",
    "slurmConf", "healthPolicy", "caFile",    NULL};
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

json_t *health_results_json(const struct health_result *r, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:f}", "check", r[i].check,
                                           "status", health_status_name(r[i].status), "severity",
                                           health_severity_name(r[i].severity), "reason",
                                           r[i].reason, "value", r[i].value));
    return a;
}

enum health_status health_worst(const struct health_result *r, int n, int *severity)
{
    enum health_status w = HEALTH_PASS;
    int sev = HEALTH_SEV_NONE;
    for (int i = 0; i < n; i++) {
        if (r[i].status > w)
            w = r[i].status;
        if (r[i].status == HEALTH_FAIL && r[i].severity > sev)
            sev = r[i].severity;
    }
    if (severity)
        *severity = sev;
    return w;
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
