/* remqueue: which waiting node remediations start now (remqueue.h). */
#include "control/remqueue.h"

#include <stdlib.h>
#include <string.h>

static const char *const verdict_names[] = {
    [REMQ_START] = "START",         [REMQ_WAIT_CLUSTER] = "WAIT_CLUSTER",
    [REMQ_WAIT_POOL] = "WAIT_POOL", [REMQ_RUNNING] = "RUNNING",
    [REMQ_DUPLICATE] = "DUPLICATE",
};

const char *remq_verdict_name(enum remq_verdict v)
{
    return (unsigned)v < sizeof(verdict_names) / sizeof(verdict_names[0]) ? verdict_names[v] : "?";
}

int remq_pool_cap(double fraction, int size)
{
    if (fraction <= 0 || size <= 0)
        return 0;
    /* a hair over the exact product: 0.3 x 10 is 2.9999... in binary */
    int cap = (int)(fraction * size + 1e-9);
    return cap > size ? size : cap;
}

static int by_time(const void *a, const void *b)
{
    const struct remq_item *x = a, *y = b;
    if (x->since_ms != y->since_ms)
        return x->since_ms < y->since_ms ? -1 : 1;
    return strcmp(x->node, y->node);
}

static int listed(const char *node, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], node) == 0)
            return 1;
    return 0;
}

int remq_admit(const struct remq_limits *lim, int *in_flight, struct remq_pool *pools, int npools,
               const char *const *running, int nrunning, struct remq_item *q, int n)
{
    int started = 0;
    qsort(q, (size_t)n, sizeof(*q), by_time);
    for (int i = 0; i < n; i++) {
        struct remq_item *it = &q[i];
        int dup = 0;
        for (int k = 0; k < i && !dup; k++)
            dup = strcmp(q[k].node, it->node) == 0;
        if (dup) {
            it->verdict = REMQ_DUPLICATE;
            continue;
        }
        if (listed(it->node, running, nrunning)) {
            it->verdict = REMQ_RUNNING;
            continue;
        }
        if (*in_flight >= lim->max_concurrent) {
            it->verdict = REMQ_WAIT_CLUSTER;
            continue;
        }
        struct remq_pool *p = it->pool >= 0 && it->pool < npools ? &pools[it->pool] : NULL;
        if (p && p->in_flight > 0 &&
            p->drained + !it->drained > remq_pool_cap(lim->max_drained_fraction, p->size)) {
            it->verdict = REMQ_WAIT_POOL;
            continue;
        }
        it->verdict = REMQ_START;
        (*in_flight)++;
        if (p) {
            p->in_flight++;
            p->drained += !it->drained;
        }
        started++;
    }
    return started;
}
