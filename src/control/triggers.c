/* triggers: what starts a node's remediation — the supervisor's look at the
 * cluster's health each pass (control_check_health: a failed node admitted
 * by the queue's limits, remqueue.h, or queued), a node Slurm has had down
 * too long, a report of faulty nodes or a job's fault (control_jobs_ops) —
 * each a REMEDIATE operation (remediate.c runs it). */
#include "control/internal.h"
#include "control/remqueue.h"
#include "health/health.h"
#include "jobs/jobs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Start a REMEDIATE operation for the given items; EBUSY when the cluster is busy. */
int control_start_remediation(struct control *c, const char *project, const char *location,
                              const char *id, json_t *items, char op_id[48], mtc_error_t *err)
{
    struct store_op op;
    control_op_init(&op, project, location, id,
                    CONTROL_NAME(control_op_kind_enum, CONTROL_REMEDIATE));
    op.request = json_pack("{s:O}", "nodes", items);
    char busy[48] = "";
    /* the nodes are PENDING before the worker may run; remediations of other
     * nodes may run beside it, an UPDATE or DELETE may not */
    int rc = store_op_begin_shared(c->st, &op,
                                   CONTROL_NAME(cluster_state_enum, CLUSTER_STATE_RUNNING), busy);
    json_decref(op.request);
    if (rc < 0) {
        if (errno == EBUSY)
            return errprintf(err, "cluster %s has an operation in progress: %s", id, busy);
        return errprintf(err, "cluster %s: cannot start remediation", id);
    }
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        control_set_remediation(c, id, json_string_value(json_object_get(item, "node")),
                                CONTROL_REM_PENDING);
    }
    snprintf(op_id, 48, "%s", op.id);
    log_msg(LOG_NOTICE, "remediate cluster %s: operation %s", id, op.id);
    return control_submit(c, op.id, err);
}

static int jobs_remediate(void *arg, const char *project, const char *location, const char *cluster,
                          json_t *items, char op_id[48], mtc_error_t *err)
{
    return control_start_remediation(arg, project, location, cluster, items, op_id, err);
}

void control_jobs_ops(struct control *c, struct jobs_ops *ops)
{
    *ops = (struct jobs_ops){0};
    if (!c)
        return;
    ops->prov = c->prov;
    ops->trainer = control_datasets(c)->trainer;
    ops->remediate = jobs_remediate;
    ops->arg = c;
}

/* The queue's view of a cluster: its compute pools (size, out of service,
 * in flight) and each node's pool. */
struct pools {
    json_t *index; /* pool id -> index */
    struct remq_pool p[64];
    int n;
};

static int pool_of(struct pools *ps, const struct store_cluster *cl, const char *node)
{
    size_t i;
    json_t *nd;
    json_array_foreach(cl->nodes, i, nd)
    {
        const char *name = json_string_value(json_object_get(nd, "instanceName"));
        if (name && strcmp(name, node) == 0) {
            json_t *k = json_object_get(ps->index,
                                        json_string_value(json_object_get(nd, "nodePoolId")) ?: "");
            return k ? (int)json_integer_value(k) : -1;
        }
    }
    return -1;
}

static const struct store_health *health_of(const struct store_health *h, int n, const char *node)
{
    for (int i = 0; i < n; i++)
        if (strcmp(h[i].node, node) == 0)
            return &h[i];
    return NULL;
}

/* Count each compute pool's nodes, those out of service (Slurm shows them
 * drained, left FAILED, or with a remediation in flight) and those in flight. */
static void count_pools(struct pools *ps, const struct store_cluster *cl,
                        const struct store_health *h, int nh, const json_t *active)
{
    ps->index = json_object();
    ps->n = 0;
    size_t i;
    json_t *nd;
    json_array_foreach(cl->nodes, i, nd)
    {
        const char *name = json_string_value(json_object_get(nd, "instanceName"));
        const char *pool = json_string_value(json_object_get(nd, "nodePoolId"));
        const char *type = json_string_value(json_object_get(nd, "nodePoolType"));
        const char *st = json_string_value(json_object_get(nd, "slurmState"));
        if (!name || !pool || !type || strcmp(type, "NODE_POOL_TYPE_COMPUTE") != 0)
            continue;
        json_t *k = json_object_get(ps->index, pool);
        if (!k && ps->n >= (int)(sizeof(ps->p) / sizeof(ps->p[0])))
            continue;
        if (!k) {
            k = json_integer(ps->n);
            json_object_set_new(ps->index, pool, k);
            ps->p[ps->n++] = (struct remq_pool){0, 0, 0};
        }
        struct remq_pool *p = &ps->p[json_integer_value(k)];
        const struct store_health *hh = health_of(h, nh, name);
        int flight = mtc_json_array_has(active, name);
        int failed = hh && schema_enum_parse(&control_remediation_enum, hh->remediation, 0) ==
                               CONTROL_REM_FAILED;
        p->size++;
        p->in_flight += flight;
        p->drained += flight || failed || (st && strstr(st, "drain"));
    }
}

/* 1 when the cluster's last observed state of node is a power state
 * (POWERED_DOWN, POWERING_UP, POWERING_DOWN): an elastic node that is not on
 * is not remediated; its next start is checked by the prolog. */
static int node_powered_off(const struct store_cluster *cl, const char *node)
{
    size_t i;
    json_t *n;
    json_array_foreach(cl->nodes, i, n)
    {
        const char *name = json_string_value(json_object_get(n, "instanceName"));
        const char *ns = json_string_value(json_object_get(n, "nodeState"));
        if (name && strcmp(name, node) == 0)
            return ns && strstr(ns, "POWER") != NULL;
    }
    return 0;
}

/* Supervisor pass: nodes whose health FAILs, or that Slurm has had down for a
 * while, get a remediation each (unless one ran out of its limit), as many at
 * once as the healthPolicy allows; the others wait QUEUED, oldest failure
 * first (remqueue.h). */
void control_check_health(struct control *c, const struct store_cluster *cl)
{
    struct health_policy pol;
    mtc_error_t perr = {""};
    struct remq_limits lim = {32, 0.1};
    if (health_policy_parse(json_object_get(cl->spec, "healthPolicy"), &pol, &perr) == 0)
        lim = (struct remq_limits){pol.max_concurrent_remediations, pol.max_drained_fraction};
    else
        log_msg(LOG_ERR, "cluster %s: %s (default remediation limits)", cl->id, perr.text);
    int n = 0;
    struct store_health *h = store_health_list(c->st, cl->id, &n);
    json_t *active = store_ops_active_nodes(c->st, cl->id,
                                            CONTROL_NAME(control_op_kind_enum, CONTROL_REMEDIATE));
    struct pools ps;
    count_pools(&ps, cl, h, n, active);
    struct remq_item *q = calloc((size_t)n + 1, sizeof(*q));
    const char **running = calloc(json_array_size(active) + 1, sizeof(*running));
    int nq = 0, nrun = 0, in_flight = (int)json_array_size(active);
    for (size_t i = 0; running && i < json_array_size(active); i++)
        running[nrun++] = json_string_value(json_array_get(active, i));
    for (int i = 0; q && i < n; i++) {
        char key[160];
        snprintf(key, sizeof(key), "%s/%s", cl->id, h[i].node);
        int rem = schema_enum_parse(&control_remediation_enum, h[i].remediation, 0);
        int fail = schema_enum_parse(&health_status_enum, h[i].status, 0) == HEALTH_FAIL &&
                   !node_powered_off(cl, h[i].node);
        if (!fail || rem == CONTROL_REM_FAILED || rem == CONTROL_REM_REMEDIATING) {
            pthread_mutex_lock(&c->lock);
            json_object_del(c->failed_since, key);
            pthread_mutex_unlock(&c->lock);
            if (!fail && rem == CONTROL_REM_QUEUED) { /* healed while it waited */
                control_set_remediation(c, cl->id, h[i].node, CONTROL_REM_NONE);
                log_msg(LOG_NOTICE, "cluster %s: %s passes again; no longer queued", cl->id,
                        h[i].node);
            }
            continue;
        }
        /* a dead slurmd the supervisor restarts is no reason to fence the node:
         * its jobs' steps live on and the new slurmd takes them back */
        if (strcmp(h[i].failing_check, "daemon.slurmd") == 0 &&
            control_slurmd_supervised(c, cl->id, h[i].node, h[i].time_ms))
            continue;
        pthread_mutex_lock(&c->lock);
        json_t *since = json_object_get(c->failed_since, key);
        if (!since) /* the report that failed; after a restart, the last one */
            json_object_set_new(c->failed_since, key, since = json_integer(h[i].time_ms));
        int64_t since_ms = json_integer_value(since);
        pthread_mutex_unlock(&c->lock);
        const char *st = NULL;
        size_t k;
        json_t *nd;
        json_array_foreach(cl->nodes, k, nd)
        {
            if (strcmp(json_string_value(json_object_get(nd, "instanceName")) ?: "", h[i].node) ==
                0)
                st = json_string_value(json_object_get(nd, "slurmState"));
        }
        q[nq++] = (struct remq_item){
            h[i].node, pool_of(&ps, cl, h[i].node), since_ms,
            (st && strstr(st, "drain")) || mtc_json_array_has(active, h[i].node), REMQ_START};
    }
    if (q && running)
        remq_admit(&lim, &in_flight, ps.p, ps.n, running, nrun, q, nq);
    for (int i = 0; q && running && i < nq; i++) {
        const struct store_health *hh = health_of(h, n, q[i].node);
        int rem = schema_enum_parse(&control_remediation_enum, hh->remediation, 0);
        if (q[i].verdict == REMQ_WAIT_CLUSTER || q[i].verdict == REMQ_WAIT_POOL) {
            if (rem == CONTROL_REM_QUEUED)
                continue;
            control_set_remediation(c, cl->id, q[i].node, CONTROL_REM_QUEUED);
            if (q[i].verdict == REMQ_WAIT_CLUSTER)
                control_event(
                    c, cl->id, "VM_REMEDIATION_QUEUED", q[i].node,
                    "%s failed: queued: %d remediations in flight (maxConcurrentRemediations %d)",
                    hh->failing_check, in_flight, lim.max_concurrent);
            else
                control_event(c, cl->id, "VM_REMEDIATION_QUEUED", q[i].node,
                              "%s failed: queued: %d of %d nodes of node pool out of service "
                              "(maxDrainedFraction %g)",
                              hh->failing_check, ps.p[q[i].pool].drained, ps.p[q[i].pool].size,
                              lim.max_drained_fraction);
            continue;
        }
        if (q[i].verdict != REMQ_START)
            continue;
        json_t *items =
            json_pack("[{s:s, s:s, s:s, s:s}]", "node", hh->node, "check", hh->failing_check,
                      "reason", hh->reason, "severity", hh->severity);
        char op_id[48];
        mtc_error_t err = {""};
        if (control_start_remediation(c, cl->project, cl->location, cl->id, items, op_id, &err) <
            0) {
            if (errno != EBUSY)
                log_msg(LOG_ERR, "cluster %s: %s", cl->id, err.text);
        } else {
            char key[160];
            snprintf(key, sizeof(key), "%s/%s", cl->id, hh->node);
            pthread_mutex_lock(&c->lock);
            json_object_del(c->failed_since, key);
            pthread_mutex_unlock(&c->lock);
        }
        json_decref(items);
    }
    free(q);
    free(running);
    json_decref(ps.index);
    json_decref(active);
    store_health_free(h, n);
}

/* Record that Slurm reports a node down (not responding) for too long. */
void control_node_down(struct control *c, const char *id, const char *node, const char *state)
{
    /* a node being remediated goes down on purpose (reboot, reimage ...) */
    json_t *active =
        store_ops_active_nodes(c->st, id, CONTROL_NAME(control_op_kind_enum, CONTROL_REMEDIATE));
    int mine = mtc_json_array_has(active, node);
    json_decref(active);
    if (mine)
        return;
    struct store_health h = {0};
    snprintf(h.status, sizeof(h.status), "%s", health_status_name(HEALTH_FAIL));
    snprintf(h.failing_check, sizeof(h.failing_check), "slurm.node");
    snprintf(h.reason, sizeof(h.reason), "Slurm reports the node %s for over %d s", state,
             NODE_DOWN_GRACE_S);
    snprintf(h.severity, sizeof(h.severity), "%s", health_severity_name(HEALTH_SEV_REBOOT));
    store_health_put(c->st, id, node, &h);
}
