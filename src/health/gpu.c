/* gpu: GPU checks through NVML opened with dlopen (so one binary runs on
 * hosts with and without GPUs; no NVIDIA headers needed: the few types and
 * values below are NVML's published ABI), and `dcgmi diag` in the prolog. */
#include "health/health.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health/runtime.h"

/* Paths and messages go into fixed buffers; a truncated one only shortens a
 * reason line, so the truncation warning is noise here. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* nvml.h values (NVML API v11/v12) */
#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_TEMPERATURE_GPU 0
#define NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR 1
/* nvmlClocksThrottleReason* bits that mean the hardware is slowing itself */
#define THROTTLE_HW_SLOWDOWN 0x8ULL
#define THROTTLE_SW_THERMAL 0x20ULL
#define THROTTLE_HW_THERMAL 0x40ULL
#define THROTTLE_HW_POWER_BRAKE 0x80ULL

/* Resolve every symbol; a missing required one makes NVML unusable. */
static int nvml_load(const struct health_ctx *ctx, struct health_runtime *rt, char *why, size_t len)
{
    if (rt->nvml && strcmp(rt->nvml_path, ctx->nvml_library) == 0)
        return 0;
    if (rt->nvml) { /* reconfigured to another library */
        dlclose(rt->nvml);
        rt->nvml = NULL;
    }
    void *h = dlopen(ctx->nvml_library, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, len, "cannot load %s: %s", ctx->nvml_library, e ? e : "unknown error");
        return -1;
    }
    struct nvml_api *a = &rt->api;
    static const struct {
        const char *sym;
        size_t off;
        int required;
    } syms[] = {
        {"nvmlInit_v2", offsetof(struct nvml_api, init), 1},
        {"nvmlShutdown", offsetof(struct nvml_api, shutdown), 1},
        {"nvmlErrorString", offsetof(struct nvml_api, error_string), 1},
        {"nvmlDeviceGetCount_v2", offsetof(struct nvml_api, get_count), 1},
        {"nvmlDeviceGetHandleByIndex_v2", offsetof(struct nvml_api, get_handle), 1},
        {"nvmlDeviceGetTotalEccErrors", offsetof(struct nvml_api, ecc), 0},
        {"nvmlDeviceGetRemappedRows", offsetof(struct nvml_api, remapped_rows), 0},
        {"nvmlDeviceGetRetiredPages", offsetof(struct nvml_api, retired_pages), 0},
        {"nvmlDeviceGetTemperature", offsetof(struct nvml_api, temperature), 0},
        {"nvmlDeviceGetCurrentClocksThrottleReasons", offsetof(struct nvml_api, throttle), 0},
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        void *p = dlsym(h, syms[i].sym);
        if (!p && syms[i].required) {
            snprintf(why, len, "%s lacks %s", ctx->nvml_library, syms[i].sym);
            dlclose(h);
            memset(a, 0, sizeof(*a));
            return -1;
        }
        memcpy((char *)a + syms[i].off, &p, sizeof(p));
    }
    rt->nvml = h;
    snprintf(rt->nvml_path, sizeof(rt->nvml_path), "%s", ctx->nvml_library);
    return 0;
}

/* Open NVML for this pass (once). Returns the GPU count, or -1 with rt->nvml_why. */
static int nvml_begin(const struct health_ctx *ctx)
{
    struct health_runtime *rt = ctx->rt;
    if (rt->pass_tried)
        return rt->pass_up ? (int)rt->gpu_count : -1;
    rt->pass_tried = 1;
    if (nvml_load(ctx, rt, rt->nvml_why, sizeof(rt->nvml_why)) < 0)
        return -1;
    int rc = rt->api.init();
    if (rc != NVML_SUCCESS) {
        snprintf(rt->nvml_why, sizeof(rt->nvml_why), "nvmlInit: %s", rt->api.error_string(rc));
        return -1;
    }
    rt->pass_up = 1;
    rc = rt->api.get_count(&rt->gpu_count);
    if (rc != NVML_SUCCESS) {
        snprintf(rt->nvml_why, sizeof(rt->nvml_why), "nvmlDeviceGetCount: %s",
                 rt->api.error_string(rc));
        rt->api.shutdown();
        rt->pass_up = 0;
        return -1;
    }
    return (int)rt->gpu_count;
}

void health_gpu_end(const struct health_ctx *ctx)
{
    struct health_runtime *rt = ctx->rt;
    if (!rt)
        return;
    if (rt->pass_up)
        rt->api.shutdown();
    rt->pass_up = rt->pass_tried = 0;
}

int health_gpu_count(const struct health_ctx *ctx, struct health_result *r)
{
    int n = nvml_begin(ctx);
    r->value = n < 0 ? 0 : n;
    if (n < 0)
        return ctx->expected_gpus == 0
                   ? health_set(r, HEALTH_PASS, -1, "no GPUs expected (NVML not loaded: %s)",
                                ctx->rt->nvml_why)
                   : health_set(r, HEALTH_FAIL, -1, "NVML not reachable: %s", ctx->rt->nvml_why);
    if (n < ctx->expected_gpus)
        return health_set(r, HEALTH_FAIL, -1, "%d GPUs visible, expected %d", n,
                          ctx->expected_gpus);
    if (n > ctx->expected_gpus)
        return health_set(r, HEALTH_WARN, -1, "%d GPUs visible, expected %d", n,
                          ctx->expected_gpus);
    return health_set(r, HEALTH_PASS, -1, "%d GPUs visible", n);
}

/* One GPU's verdict for one check: fills st/sev/reason; returns an NVML code. */
typedef int (*gpu_fn)(const struct health_ctx *ctx, unsigned i, void *dev, struct health_result *g,
                      double *value);

/* Run fn on every GPU and keep the worst verdict. A lost GPU fails (reboot);
 * a query the GPU does not support is skipped. */
static int each_gpu(const struct health_ctx *ctx, struct health_result *r, gpu_fn fn,
                    const char *what)
{
    struct health_runtime *rt = ctx->rt;
    int n = nvml_begin(ctx);
    if (n < 0)
        return ctx->expected_gpus == 0
                   ? health_set(r, HEALTH_PASS, -1, "skipped: no GPUs expected")
                   : health_set(r, HEALTH_WARN, -1, "not checked: NVML not reachable (%s)",
                                rt->nvml_why);
    int checked = 0;
    r->value = 0;
    for (unsigned i = 0; i < (unsigned)n; i++) {
        struct health_result g = {.status = HEALTH_PASS, .severity = -1};
        void *dev = NULL;
        int rc = rt->api.get_handle(i, &dev);
        if (rc == NVML_SUCCESS)
            rc = fn(ctx, i, dev, &g, &r->value);
        if (rc == NVML_ERROR_NOT_SUPPORTED)
            continue;
        if (rc == NVML_ERROR_GPU_IS_LOST)
            health_set(&g, HEALTH_FAIL, HEALTH_SEV_REBOOT, "GPU %u: GPU is lost", i);
        else if (rc != NVML_SUCCESS)
            health_set(&g, HEALTH_WARN, -1, "GPU %u: %s: %s", i, what, rt->api.error_string(rc));
        checked++;
        if (g.status > r->status ||
            (g.status == r->status && g.status != HEALTH_PASS && g.severity > r->severity)) {
            r->status = g.status;
            r->severity = g.severity;
            snprintf(r->reason, sizeof(r->reason), "%s", g.reason);
        }
    }
    if (r->status == HEALTH_PASS)
        health_set(r, HEALTH_PASS, -1, "%d of %d GPUs checked", checked, n);
    return 0;
}

static int ecc_one(const struct health_ctx *ctx, unsigned i, void *dev, struct health_result *g,
                   double *value)
{
    unsigned long long count = 0;
    if (!ctx->rt->api.ecc)
        return NVML_ERROR_NOT_SUPPORTED;
    int rc = ctx->rt->api.ecc(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &count);
    if (rc != NVML_SUCCESS)
        return rc;
    *value += (double)count;
    if (count > (unsigned long long)ctx->policy.gpu_max_uncorrected_ecc)
        health_set(g, HEALTH_FAIL, -1, "GPU %u: %llu volatile uncorrected ECC errors (max %d)", i,
                   count, ctx->policy.gpu_max_uncorrected_ecc);
    return NVML_SUCCESS;
}

int health_gpu_ecc(const struct health_ctx *ctx, struct health_result *r)
{
    return each_gpu(ctx, r, ecc_one, "ECC");
}

/* Row remapping (A100 and later); retired pages on older GPUs. */
static int remap_one(const struct health_ctx *ctx, unsigned i, void *dev, struct health_result *g,
                     double *value)
{
    const struct nvml_api *a = &ctx->rt->api;
    int rc = NVML_ERROR_NOT_SUPPORTED;
    if (a->remapped_rows) {
        unsigned corr = 0, unc = 0, pending = 0, failed = 0;
        rc = a->remapped_rows(dev, &corr, &unc, &pending, &failed);
        if (rc == NVML_SUCCESS) {
            *value += unc;
            if (failed)
                health_set(g, HEALTH_FAIL, HEALTH_SEV_REPLACE,
                           "GPU %u: row remapping failed (%u uncorrectable rows remapped)", i, unc);
            else if (pending)
                health_set(g, HEALTH_FAIL, HEALTH_SEV_REBOOT,
                           "GPU %u: row remap pending (needs a GPU reset)", i);
            return rc;
        }
    }
    if (rc == NVML_ERROR_NOT_SUPPORTED && a->retired_pages) {
        unsigned count = 0;
        rc = a->retired_pages(dev, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &count, NULL);
        if (rc == NVML_ERROR_INSUFFICIENT_SIZE) /* count-only query with pages present */
            rc = NVML_SUCCESS;
        if (rc == NVML_SUCCESS) {
            *value += count;
            if (count > (unsigned)ctx->policy.gpu_max_retired_pages)
                health_set(g, HEALTH_FAIL, HEALTH_SEV_REPLACE, "GPU %u: %u retired pages (max %d)",
                           i, count, ctx->policy.gpu_max_retired_pages);
        }
    }
    return rc;
}

int health_gpu_remap(const struct health_ctx *ctx, struct health_result *r)
{
    return each_gpu(ctx, r, remap_one, "remapped rows");
}

static int temp_one(const struct health_ctx *ctx, unsigned i, void *dev, struct health_result *g,
                    double *value)
{
    unsigned t = 0;
    if (!ctx->rt->api.temperature)
        return NVML_ERROR_NOT_SUPPORTED;
    int rc = ctx->rt->api.temperature(dev, NVML_TEMPERATURE_GPU, &t);
    if (rc != NVML_SUCCESS)
        return rc;
    if (t > *value)
        *value = t;
    if ((int)t >= ctx->policy.gpu_temp_fail_c)
        health_set(g, HEALTH_FAIL, -1, "GPU %u: %u C (fail at %d C)", i, t,
                   ctx->policy.gpu_temp_fail_c);
    else if ((int)t >= ctx->policy.gpu_temp_warn_c)
        health_set(g, HEALTH_WARN, -1, "GPU %u: %u C (warn at %d C)", i, t,
                   ctx->policy.gpu_temp_warn_c);
    return NVML_SUCCESS;
}

int health_gpu_temp(const struct health_ctx *ctx, struct health_result *r)
{
    return each_gpu(ctx, r, temp_one, "temperature");
}

static int throttle_one(const struct health_ctx *ctx, unsigned i, void *dev,
                        struct health_result *g, double *value)
{
    unsigned long long reasons = 0;
    if (!ctx->rt->api.throttle)
        return NVML_ERROR_NOT_SUPPORTED;
    int rc = ctx->rt->api.throttle(dev, &reasons);
    if (rc != NVML_SUCCESS)
        return rc;
    /* idle, application clocks, power cap, sync boost are normal operation */
    static const struct {
        unsigned long long bit;
        const char *name;
    } bad[] = {{THROTTLE_HW_SLOWDOWN, "hw_slowdown"},
               {THROTTLE_HW_THERMAL, "hw_thermal_slowdown"},
               {THROTTLE_HW_POWER_BRAKE, "hw_power_brake"},
               {THROTTLE_SW_THERMAL, "sw_thermal_slowdown"}};
    char names[128] = "";
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        if (reasons & bad[k].bit)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
                     *names ? "," : "", bad[k].name);
    if (*names) {
        *value = (double)(unsigned long long)((unsigned long long)*value | reasons);
        health_set(g, ctx->policy.gpu_throttle_fail ? HEALTH_FAIL : HEALTH_WARN, -1,
                   "GPU %u: clocks throttled: %s (reasons 0x%llx)", i, names, reasons);
    }
    return NVML_SUCCESS;
}

int health_gpu_throttle(const struct health_ctx *ctx, struct health_result *r)
{
    return each_gpu(ctx, r, throttle_one, "throttle reasons");
}

/* DCGM's level-1 diagnostic: a few seconds, so only in the prolog. */
int health_gpu_dcgm(const struct health_ctx *ctx, struct health_result *r)
{
    char level[8], *out = NULL;
    if (ctx->policy.dcgm_diag_level == 0)
        return health_set(r, HEALTH_PASS, -1, "skipped: dcgmDiagLevel is 0");
    if (ctx->expected_gpus == 0)
        return health_set(r, HEALTH_PASS, -1, "skipped: no GPUs expected");
    snprintf(level, sizeof(level), "%d", ctx->policy.dcgm_diag_level);
    char *argv[] = {"dcgmi", "diag", "-r", level, NULL};
    int rc = mtc_run(argv, NULL, &out, 600000);
    if (rc == 127 || (rc < 0 && errno == ENOENT)) {
        free(out);
        return health_set(r, HEALTH_PASS, -1, "skipped: DCGM not installed");
    }
    r->value = rc;
    if (rc != 0) {
        /* the first line naming a failed test is the useful one */
        const char *line = out ? strstr(out, "Fail") : NULL;
        const char *start = line;
        while (start && start > out && start[-1] != '\n')
            start--;
        int len = line ? (int)strcspn(start, "\n") : 0;
        health_set(r, HEALTH_FAIL, -1, "dcgmi diag -r %s failed (exit %d)%s%.*s", level, rc,
                   len ? ": " : "", len > 160 ? 160 : len, start ? start : "");
    } else {
        health_set(r, HEALTH_PASS, -1, "dcgmi diag -r %s passed", level);
    }
    free(out);
    return 0;
}
