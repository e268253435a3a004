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
    {NULL, NULL, NULL, 0, 0, 0, NULL},
};

static const char *const status_names[] = {"PASS", "WARN", "FAIL"};
static const char *const severity_names[] = {"NONE", "RESTART", "REBOOT", "REIMAGE", "REPLACE"};

const char *health_status_name(enum health_status s)
{
    return (s >= HEALTH_PASS && s <= HEALTH_FAIL) ? status_names[s] : "FAIL";
}

const char *health_severity_name(int sev)
{
    return (sev >= HEALTH_SEV_NONE && sev <= HEALTH_SEV_REPLACE) ? severity_names[sev] : "NONE";
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

/* Config-file fields the ctx takes: camelCase name, kind, destination. */
enum ckind { C_STR, C_INT, C_NUM, C_IGNORE };
struct cfield {
    const char *name;
    enum ckind kind;
    size_t off, size;
};
#define S(n, m)                                                                                    \
    {                                                                                              \
        n, C_STR, offsetof(struct health_ctx, m), sizeof(((struct health_ctx *)0)->m)              \
    }
#define N(n, k, m)                                                                                 \
    {                                                                                              \
        n, k, offsetof(struct health_ctx, m), 0                                                    \
    }
static const struct cfield cfields[] = {
    S("nodeId", node),
    S("homeDir", home_dir),
    S("localDir", local_dir),
    S("checkpointDir", checkpoint_dir),
    S("nvmlLibrary", nvml_library),
    S("kernelLog", kernel_log),
    S("stateDir", state_dir),
    N("expectedGpus", C_INT, expected_gpus),
    S("slurmdPidFile", slurmd_pid_file),
    N("slurmdPort", C_INT, slurmd_port),
    S("mungeSocket", munge_socket),
    N("baselineGflops", C_NUM, baseline_gflops),
    N("baselineMemGbps", C_NUM, baseline_mem_gbps),
    /* the agent's own fields (transport, identity, Slurm) */
    {"project", C_IGNORE, 0, 0},
    {"location", C_IGNORE, 0, 0},
    {"clusterId", C_IGNORE, 0, 0},
    {"socket", C_IGNORE, 0, 0},
    {"url", C_IGNORE, 0, 0},
    {"tokenFile", C_IGNORE, 0, 0},
    {"slurmConf", C_IGNORE, 0, 0},
    {"healthPolicy", C_IGNORE, 0, 0},
    {NULL, C_STR, 0, 0},
};
#undef S
#undef N

int health_ctx_configure(struct health_ctx *ctx, const json_t *config, mtc_error_t *err)
{
    const char *k;
    json_t *v;
    char camel[64];
    if (!json_is_object(config)) {
        errno = EINVAL;
        return errprintf(err, "config: must be a JSON object");
    }
    json_object_foreach((json_t *)config, k, v)
    {
        size_t j = 0;
        int up = 0;
        for (const char *p = k; *p && j + 1 < sizeof(camel); p++) {
            if (*p == '_' && j > 0) {
                up = 1;
                continue;
            }
            camel[j++] = up ? (char)toupper((unsigned char)*p) : *p;
            up = 0;
        }
        camel[j] = '\0';
        const struct cfield *f = cfields;
        while (f->name && strcmp(f->name, camel) != 0)
            f++;
        errno = EINVAL;
        if (!f->name)
            return errprintf(err, "config.%.60s: unknown field", k);
        char *dst = (char *)ctx + f->off;
        switch (f->kind) {
        case C_STR:
            if (!json_is_string(v) || strlen(json_string_value(v)) >= f->size)
                return errprintf(err, "config.%s: must be a string shorter than %zu", f->name,
                                 f->size);
            memcpy(dst, json_string_value(v), strlen(json_string_value(v)) + 1);
            break;
        case C_INT:
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 65535)
                return errprintf(err, "config.%s: must be an integer from 0 to 65535", f->name);
            *(int *)dst = (int)json_integer_value(v);
            break;
        case C_NUM:
            if (!json_is_number(v) || json_number_value(v) < 0)
                return errprintf(err, "config.%s: must be a number >= 0", f->name);
            *(double *)dst = json_number_value(v);
            break;
        case C_IGNORE:
            break;
        }
    }
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

static int name_index(const char *const *names, int n, const char *s)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

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
        struct health_result *r = &out[i];
        const char *k;
        json_t *v;
        memset(r, 0, sizeof(*r));
        if (!json_is_object(e))
            return errprintf(err, "results[%zu]: must be an object", i);
        json_object_foreach(
            e, k, v) if (strcmp(k, "check") && strcmp(k, "status") && strcmp(k, "severity") &&
                         strcmp(k, "reason") &&
                         strcmp(k, "value")) return errprintf(err,
                                                              "results[%zu].%.40s: unknown field",
                                                              i, k);
        const char *check = json_string_value(json_object_get(e, "check"));
        const struct health_check *c = health_checks;
        while (c->name && (!check || strcmp(c->name, check) != 0))
            c++;
        if (!c->name)
            return errprintf(err, "results[%zu].check: unknown check \"%.40s\"", i,
                             check ? check : "(missing)");
        snprintf(r->check, sizeof(r->check), "%s", check);
        int st = name_index(status_names, 3, json_string_value(json_object_get(e, "status")));
        if (st < 0)
            return errprintf(err, "results[%zu].status: must be one of PASS, WARN, FAIL", i);
        r->status = (enum health_status)st;
        json_t *sv = json_object_get(e, "severity");
        r->severity = sv ? name_index(severity_names, 5, json_string_value(sv)) : HEALTH_SEV_NONE;
        if (r->severity < 0)
            return errprintf(err,
                             "results[%zu].severity: must be one of NONE, RESTART, REBOOT, "
                             "REIMAGE, REPLACE",
                             i);
        json_t *rv = json_object_get(e, "reason");
        if (rv && (!json_is_string(rv) || strlen(json_string_value(rv)) >= sizeof(r->reason)))
            return errprintf(err, "results[%zu].reason: must be a string of at most %zu bytes", i,
                             sizeof(r->reason) - 1);
        snprintf(r->reason, sizeof(r->reason), "%s", rv ? json_string_value(rv) : "");
        json_t *nv = json_object_get(e, "value");
        if (nv && !json_is_number(nv))
            return errprintf(err, "results[%zu].value: must be a number", i);
        r->value = nv ? json_number_value(nv) : 0;
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
