/* straggler: a node's speed.* probe results judged against the median of the
 * latest values of the other nodes of its node pool (same machine type), so a
 * slowed node is found without a configured baseline. */
#include <stdlib.h>
#include <string.h>

#include "control/control.h"
#include "control/reports.h"
#include "health/health.h"

/* The node pool of node in the cluster's last observed nodes ("" if unknown). */
static const char *node_pool(const struct store_cluster *cl, const char *node)
{
    size_t i;
    json_t *n;
    json_array_foreach(cl->nodes, i, n)
    {
        const char *name = json_string_value(json_object_get(n, "instanceName"));
        const char *pool = json_string_value(json_object_get(n, "nodePoolId"));
        if (name && pool && strcmp(name, node) == 0)
            return pool;
    }
    return "";
}

/* The value of check in a stored results array, or -1. */
static double result_value(const json_t *results, const char *check)
{
    size_t i;
    json_t *e;
    json_array_foreach(results, i, e)
    {
        const char *c = json_string_value(json_object_get(e, "check"));
        json_t *v = json_object_get(e, "value");
        if (c && strcmp(c, check) == 0 && json_is_number(v))
            return json_number_value(v);
    }
    return -1;
}

static const struct {
    const char *check, *unit;
} speed_units[] = {{"speed.compute", "GFLOP/s"}, {"speed.membw", "GB/s"}};

/* The unit of a speed probe's check, or NULL. */
static const char *speed_unit(const char *check)
{
    for (size_t u = 0; u < sizeof(speed_units) / sizeof(speed_units[0]); u++)
        if (strcmp(check, speed_units[u].check) == 0)
            return speed_units[u].unit;
    return NULL;
}

static int speed_compare(struct store *st, const struct store_cluster *cl, const char *node,
                         struct health_result *res, int n);

int control_speed_compare(struct store *st, const struct store_cluster *cl, const char *node,
                          struct health_result *res, int n)
{
    int probes = 0;
    for (int i = 0; i < n; i++)
        probes += speed_unit(res[i].check) && res[i].value > 0;
    if (!probes)
        return 0;
    if (cl->spec)
        return speed_compare(st, cl, node, res, n);
    /* a head only (an agent's report): the spec and nodesStatus now */
    struct store_cluster whole;
    if (store_cluster_get(st, cl->id, &whole) < 0)
        return 0;
    int changed = speed_compare(st, &whole, node, res, n);
    store_cluster_release(&whole);
    return changed;
}

static int speed_compare(struct store *st, const struct store_cluster *cl, const char *node,
                         struct health_result *res, int n)
{
    struct health_policy pol;
    mtc_error_t err = {""};
    if (health_policy_parse(json_object_get(cl->spec, "healthPolicy"), &pol, &err) < 0)
        return 0; /* the spec was validated when stored; nothing to judge against */
    const char *pool = node_pool(cl, node);
    if (!*pool)
        return 0;
    int nrows = 0, changed = 0;
    struct store_health *rows = NULL;
    for (int i = 0; i < n; i++) {
        const char *unit = speed_unit(res[i].check);
        if (!unit || res[i].value <= 0)
            continue;
        if (!rows && !(rows = store_health_list(st, cl->id, &nrows)))
            break;
        double peers[256];
        int np = 0;
        for (int k = 0; k < nrows && np < 256; k++) {
            if (strcmp(rows[k].node, node) == 0 || strcmp(node_pool(cl, rows[k].node), pool))
                continue;
            double v = result_value(rows[k].results, res[i].check);
            if (v > 0)
                peers[np++] = v;
        }
        double median = 0, frac = 0;
        int verdict = health_speed_judge(res[i].value, peers, np, pol.speed_warn_fraction,
                                          pol.speed_fail_fraction, &median, &frac);
        int first_strike = 0;
        if (verdict == HEALTH_FAIL) {
            /* One slow probe on a busy host is noise; a straggler is slow in two
             * consecutive measurements (a repeated cached value is the same one). */
            double prev = -1;
            for (int k = 0; k < nrows; k++)
                if (strcmp(rows[k].node, node) == 0)
                    prev = result_value(rows[k].results, res[i].check);
            if (prev <= 0 || prev == res[i].value || prev >= pol.speed_fail_fraction * median) {
                verdict = HEALTH_WARN;
                first_strike = 1;
            }
        }
        if (verdict < 0 || verdict <= (int)res[i].status)
            continue; /* too few peers, or the agent's own verdict is as bad */
        res[i].status = (enum health_status)verdict;
        res[i].severity = verdict == HEALTH_FAIL ? HEALTH_SEV_REBOOT : HEALTH_SEV_NONE;
        snprintf(res[i].reason, sizeof(res[i].reason),
                 "%.1f %s is %.2f of the pool median %.1f (%s below %.2f, %d nodes)%s",
                 res[i].value, unit, frac, median, verdict == HEALTH_FAIL ? "fail" : "warn",
                 verdict == HEALTH_FAIL || first_strike ? pol.speed_fail_fraction
                                                        : pol.speed_warn_fraction,
                 np, first_strike ? "; fails if the next probe is as slow" : "");
        changed++;
    }
    store_health_free(rows, nrows);
    return changed;
}
