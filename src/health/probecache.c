/* probecache: the costly probes' results kept between passes — in the
 * context (by check-table index) and in the node's probe file, which the
 * agent's loop and the one-shot checks share. The runner (health.c) asks it
 * before it runs a costly check and hands it the result after. */
#include "health/health.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health/runtime.h"

/* The node's probe file, stateDir/probes: the costly probes' last results
 * that did not FAIL, {"speed.compute": {"ms": T, "status": "PASS", "value": V,
 * "reason": "..."}, ...}. The agent's loop and the one-shot checks (Prolog,
 * Epilog, Slurm's HealthCheckProgram) share it, so probeIntervalSeconds bounds
 * how often a node runs an sgemm whoever asks — not once per job start and
 * per health check. A FAIL is never reused: a failing node is measured again. */
static int probe_file(const struct health_ctx *ctx, char *buf, size_t len)
{
    return *ctx->state_dir && snprintf(buf, len, "%s/probes", ctx->state_dir) < (int)len;
}

/* check's entry of the probe file into r and *ms: 0, or -1 when none. */
static int probe_load(const struct health_ctx *ctx, const char *check, struct health_result *r,
                      int64_t *ms)
{
    char path[PATH_MAX + 16];
    if (!probe_file(ctx, path, sizeof(path)))
        return -1;
    json_t *all = json_load_file(path, 0, NULL), *e = json_object_get(all, check);
    const char *st = json_string_value(json_object_get(e, "status"));
    int rc = -1;
    if (st && (strcmp(st, "PASS") == 0 || strcmp(st, "WARN") == 0) &&
        json_is_integer(json_object_get(e, "ms"))) {
        memset(r, 0, sizeof(*r));
        snprintf(r->check, sizeof(r->check), "%s", check);
        r->status = strcmp(st, "PASS") == 0 ? HEALTH_PASS : HEALTH_WARN;
        r->severity = HEALTH_SEV_NONE;
        snprintf(r->reason, sizeof(r->reason), "%s",
                 json_string_value(json_object_get(e, "reason")) ?: "");
        r->value = json_number_value(json_object_get(e, "value"));
        *ms = json_integer_value(json_object_get(e, "ms"));
        rc = 0;
    }
    json_decref(all);
    return rc;
}

/* r (measured at ms) into the probe file, or its entry out when it FAILed. */
static void probe_save(const struct health_ctx *ctx, const struct health_result *r, int64_t ms)
{
    char path[PATH_MAX + 16];
    if (!probe_file(ctx, path, sizeof(path)))
        return;
    json_t *all = json_load_file(path, 0, NULL);
    if (!json_is_object(all)) {
        json_decref(all);
        all = json_object();
    }
    if (r->status == HEALTH_FAIL)
        json_object_del(all, r->check);
    else
        json_object_set_new(all, r->check,
                            json_pack("{s:I, s:s, s:f, s:s}", "ms", (json_int_t)ms, "status",
                                      health_status_name(r->status), "value", r->value, "reason",
                                      r->reason));
    char *text = json_dumps(all, JSON_COMPACT);
    if (text && mtc_write_file_atomic(path, text, strlen(text), 0644) < 0)
        log_msg(LOG_WARNING, "cannot save %s: %s", path, strerror(errno));
    free(text);
    json_decref(all);
}

static int fresh(const struct health_ctx *ctx, int64_t ms)
{
    int64_t now = mtc_now_ms();
    return ms > 0 && now >= ms && now - ms < (int64_t)ctx->policy.probe_interval_seconds * 1000;
}

struct health_result *health_rt_cached(const struct health_ctx *ctx, int idx)
{
    struct health_runtime *rt = ctx->rt;
    if (!rt || idx < 0 || idx >= HEALTH_MAX_CHECKS || !health_checks[idx].costly)
        return NULL;
    if (fresh(ctx, rt->cache_ms[idx]))
        return &rt->cache[idx];
    /* another process's probe: the agent's loop, or a check of a job's start */
    struct health_result r;
    int64_t ms = 0;
    if (ctx->policy.probe_interval_seconds > 0 &&
        probe_load(ctx, health_checks[idx].name, &r, &ms) == 0 && fresh(ctx, ms)) {
        rt->cache[idx] = r;
        rt->cache_ms[idx] = ms;
        return &rt->cache[idx];
    }
    return NULL;
}

void health_rt_cache(const struct health_ctx *ctx, int idx, const struct health_result *r)
{
    if (!ctx->rt || idx < 0 || idx >= HEALTH_MAX_CHECKS)
        return;
    ctx->rt->cache[idx] = *r;
    ctx->rt->cache_ms[idx] = mtc_now_ms();
    probe_save(ctx, r, ctx->rt->cache_ms[idx]);
}
