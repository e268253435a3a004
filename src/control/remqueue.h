/* remqueue: the admission rules of concurrent remediation — which of the
 * nodes waiting for a remediation may start now, given what is in flight,
 * the cluster's limit (healthPolicy.maxConcurrentRemediations) and the cap
 * on the fraction of each node pool out of service at once
 * (healthPolicy.maxDrainedFraction). Pure: no store, no threads, no clock. */
#ifndef MTC_CONTROL_REMQUEUE_H
#define MTC_CONTROL_REMQUEUE_H

#include <stdint.h>

/* What became of a waiting node. */
enum remq_verdict {
    REMQ_START,        /* start its remediation now */
    REMQ_WAIT_CLUSTER, /* queued: maxConcurrentRemediations in flight */
    REMQ_WAIT_POOL,    /* queued: its pool is at maxDrainedFraction */
    REMQ_RUNNING,      /* it has a remediation in flight already: nothing to do */
    REMQ_DUPLICATE,    /* listed twice: the earlier entry stands */
};

struct remq_limits {
    int max_concurrent;          /* remediations in flight per cluster, >= 1 */
    double max_drained_fraction; /* of a pool out of service at once, 0..1 */
};

/* A node pool: its size, how many of its nodes are out of service (drained,
 * left in ERROR or being remediated) and how many of those have a
 * remediation in flight. remq_admit counts the nodes it starts in. */
struct remq_pool {
    int size;
    int drained;
    int in_flight;
};

/* A node waiting for a remediation: since_ms orders the queue (the time its
 * failure was first seen; ties by name); drained when it already counts in
 * its pool's drained. verdict is the answer. */
struct remq_item {
    const char *node;
    int pool; /* index into pools */
    int64_t since_ms;
    int drained;
    enum remq_verdict verdict;
};

/* How many nodes of pool size may be out of service at once: the fraction,
 * rounded down (a pool with nothing in flight may still start one). */
int remq_pool_cap(double fraction, int size);

/* Sort q[0..n) into queue order (FIFO by since_ms, then node) and decide
 * each: a node in running[0..nrunning) is REMQ_RUNNING, a repeated node
 * REMQ_DUPLICATE; then in order a node starts while fewer than
 * max_concurrent are in flight (*in_flight, counting those started) and its
 * pool stays within remq_pool_cap — or has nothing in flight (so a small pool
 * still heals one node at a time). Returns how many start. */
int remq_admit(const struct remq_limits *lim, int *in_flight, struct remq_pool *pools, int npools,
               const char *const *running, int nrunning, struct remq_item *q, int n);

/* A verdict's name, for events and logs ("START", "WAIT_CLUSTER", ...). */
const char *remq_verdict_name(enum remq_verdict v);

#endif
