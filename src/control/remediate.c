/* remediate: the hardware-resilience controller. A node whose health fails
 * (mtc-agent report, Slurm says it is down, or a manual reportFaultyNodes) is
 * drained, its jobs requeued, then restarted → rebooted → reimaged → replaced
 * (escalating with the node's recent history) until its checks pass and it is
 * resumed — or the per-node limit is reached and it stays drained in ERROR.
 * Each node's remediation is its own persisted REMEDIATE operation, several
 * at once within the healthPolicy's limits (the rest wait QUEUED: remqueue.h);
 * every step is an event. */
#include "control/internal.h"
#include "control/remqueue.h"
#include "health/health.h"
#include "jobs/jobs.h"
#include "slurm/slurm.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const struct schema_enum control_remediation_enum =
    SCHEMA_NAMES(NULL, [CONTROL_REM_NONE] = "", [CONTROL_REM_PENDING] = "PENDING",
                 [CONTROL_REM_REMEDIATING] = "REMEDIATING", [CONTROL_REM_FAILED] = "FAILED", [CONTROL_REM_QUEUED] = "QUEUED");

/* Actions in escalation order: the name the provider and the history know
 * them by, and the event each one records. */
enum action_kind { ACT_RESTART, ACT_REBOOT, ACT_REIMAGE, ACT_REPLACE, N_ACTIONS };
static const struct action {
    const char *name;
    const char *event;
    int kills; /* every process of the node dies (a power cycle) */
} actions[] = {
    [ACT_RESTART] = {"restart", "VM_RESTART", 0},
    [ACT_REBOOT] = {"reboot", "VM_REBOOT", 1},
    [ACT_REIMAGE] = {"reimage", "VM_REIMAGE", 1},
    [ACT_REPLACE] = {"replace", "VM_REPORT_AND_REPLACEMENT", 1},
};

/* The first action a severity asks for: the ladders run in step. */
static enum action_kind action_for(enum health_severity sev)
{
    return sev > HEALTH_SEV_RESTART ? (enum action_kind)(sev - HEALTH_SEV_RESTART) : ACT_RESTART;
}

/* Set a node's remediation state (the store keeps its name). */
static void set_remediation(struct control *c, const char *id, const char *node,
                            enum control_remediation state)
{
    store_health_set_remediation(c->st, id, node, CONTROL_NAME(control_remediation_enum, state));
}

/* The detection event for a failing check. */
static const char *detect_event(const char *check, enum health_mode mode)
{
    static const char *const by_mode[] = {
        [HEALTH_MODE_PROLOG] = "VM_PROLOG_ERROR", [HEALTH_MODE_EPILOG] = "VM_EPILOG_ERROR"};
    if (by_mode[mode])
        return by_mode[mode];
    if (strncmp(check, "gpu", 3) == 0 || strncmp(check, "xid", 3) == 0)
        return "VM_CONTINUOUS_GPU_ERROR";
    return "VM_SCAN_ERROR";
}

static int conf_path(struct control *c, const char *id, char *buf, size_t len, mtc_error_t *err)
{
    char dir[PATH_MAX];
    if (provider_cluster_dir(c->prov, id, dir, sizeof(dir), err) < 0)
        return -1;
    if (snprintf(buf, len, "%s/slurm.conf", dir) >= (int)len)
        return errprintf(err, "path too long");
    return 0;
}

static void event(struct control *c, const char *id, const char *type, const char *node,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void event(struct control *c, const char *id, const char *type, const char *node,
                  const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    store_event_add(c->st, id, type, node, msg);
    log_msg(LOG_WARNING, "cluster %s: %s %s: %s", id, type, node, msg);
}

/* Slurm holds a requeued job about two minutes (its credential lifetime)
 * before it may start again; a job moved off a bad node should resume at once
 * on the healthy ones. Once it is PENDING again (its old steps ended: up to
 * 15 s), StartTime=now+1 releases it (slurm_job_release). Best effort: a job that does not become
 * pending in time merely waits out Slurm's hold. */
static void release_requeued(const char *conf, const char *job)
{
    for (int64_t end = mtc_now_ms() + 15000; mtc_now_ms() < end; mtc_sleep_ms(200)) {
        char state[32];
        if (slurm_job_state(conf, job, state, sizeof(state)) == 0 && strcmp(state, "PENDING") == 0) {
            slurm_job_release(conf, job, NULL);
            return;
        }
    }
}

/* A node whose slurmd is dead or unreachable (and stays so: one the
 * supervisor restarts is left alone, control_slurmd_supervised) cannot stop its jobs: Slurm
 * would requeue them and start them elsewhere while the old tasks still run
 * (two trainers writing one checkpoint directory). Such a node is fenced
 * first — at least a reboot, which kills every process of the node — and its
 * jobs are requeued only after that. */
static int needs_fence(const char *check)
{
    return strcmp(check, "daemon.slurmd") == 0 || strcmp(check, "slurm.node") == 0;
}
#define FENCE_ACTION ACT_REBOOT

static void requeue_jobs(struct control *c, const char *id, const char *conf, const char *node,
                         int fenced);

/* The drain reason naming the failed check (why: 400 bytes). */
static void drain_reason(char *why, const char *check, const char *reason)
{
    snprintf(why, 400, "mtc: %s: %.300s", check, reason);
}

/* Drain with a reason naming the check, then requeue the node's running jobs
 * (unless the node must be fenced first). */
static int drain_and_requeue(struct control *c, const char *id, const char *conf, const char *node,
                             const char *check, const char *reason)
{
    char why[400];
    mtc_error_t err = {""};
    drain_reason(why, check, reason);
    if (provider_node_set(c->prov, id, conf, node, SLURM_NODE_DRAIN, why, &err) < 0) {
        log_msg(LOG_ERR, "cluster %s: drain %s failed: %s", id, node, err.text);
        return -1;
    }
    event(c, id, "VM_SLURM_DRAIN", node, "drained: %s: %s", check, reason);
    if (!needs_fence(check))
        requeue_jobs(c, id, conf, node, 0);
    return 0;
}

static void requeue_jobs(struct control *c, const char *id, const char *conf, const char *node,
                         int fenced)
{
    if (!provider_has_slurm(c->prov, id)) /* a simulated cluster runs no jobs */
        return;
    json_t *jobs = slurm_node_jobs(conf, node, NULL);
    if (!jobs)
        return;
    if (fenced) /* slurmctld would wait for the dead slurmd to confirm the kill before
                 * letting the jobs go; DOWN tells it the node's processes are gone
                 * (Slurm requeues a --requeue job itself, as after a node failure) */
        provider_node_set(c->prov, id, conf, node, SLURM_NODE_DOWN,
                       "mtc: fenced after the node's slurmd failed: every process killed", NULL);
    size_t i;
    json_t *j;
    json_array_foreach(jobs, i, j)
    {
        const char *job = json_string_value(j);
        char st[32] = "";
        int already = fenced && slurm_job_state(conf, job, st, sizeof(st)) == 0 &&
                      strcmp(st, "RUNNING") != 0 && strcmp(st, "COMPLETING") != 0;
        mtc_error_t jerr = {""};
        if (already || slurm_job_requeue(conf, job, &jerr) == 0) {
            event(c, id, "JOB_REQUEUED", node, "job %s requeued (was running on %s)", job, node);
            release_requeued(conf, job);
        } else {
            event(c, id, "JOB_NOT_REQUEUED", node, "job %s not requeued: %s", job, jerr.text);
        }
    }
    json_decref(jobs);
}

/* After a power cycle: jobs requeued off the node whose old steps had not
 * ended yet (a slow node's trainer still writing its checkpoint when
 * release_requeued gave up) were killed with the node, but slurmctld keeps
 * them COMPLETING there until its periodic retry reaches the new slurmd —
 * minutes in which the node is not idle once resumed and the jobs wait out
 * Slurm's requeue hold. DOWN tells slurmctld those steps are gone (as after a
 * fence), DRAIN (reason why) keeps the node out until its checks pass, and
 * the jobs are released. (A job still RUNNING there was not requeued:
 * Slurm ends it when the new slurmd registers without it, as before.) */
static void release_killed(struct control *c, const char *id, const char *conf, const char *node,
                           const char *action, const char *why)
{
    if (!provider_has_slurm(c->prov, id))
        return;
    json_t *jobs = slurm_node_jobs(conf, node, NULL), *completing = json_array(), *j;
    size_t i;
    json_array_foreach(jobs, i, j)
    {
        char st[32];
        if (slurm_job_state(conf, json_string_value(j), st, sizeof(st)) == 0 &&
            strcmp(st, "COMPLETING") == 0)
            json_array_append(completing, j);
    }
    if (json_array_size(completing) > 0) {
        char down[128];
        snprintf(down, sizeof(down), "mtc: %s killed every process of the node", action);
        log_msg(LOG_NOTICE, "cluster %s: %s: %zu job(s) still completing after %s; setting it DOWN",
                id, node, json_array_size(completing), action);
        provider_node_set(c->prov, id, conf, node, SLURM_NODE_DOWN, down, NULL);
        provider_node_set(c->prov, id, conf, node, SLURM_NODE_DRAIN, why, NULL);
        json_array_foreach(completing, i, j)
        {
            release_requeued(conf, json_string_value(j));
        }
    }
    json_decref(completing);
    json_decref(jobs);
}

/* Run the node's checks after an action and store them as its health.
 * 1 pass, 0 fail (err names the failing check), -1 error (err). */
static int verify(struct control *c, const struct store_cluster *cl, const char *node,
                  mtc_error_t *err)
{
    json_t *results = provider_node_check(c->prov, cl->id, cl->spec, node, err);
    if (!results)
        return -1;
    struct health_result r[HEALTH_MAX_CHECKS * 2];
    mtc_error_t perr;
    int n = health_results_parse(results, r, (int)(sizeof(r) / sizeof(r[0])), &perr);
    if (n < 0) {
        json_decref(results);
        return errprintf(err, "%s", perr.text);
    }
    enum health_status worst =
        control_record_health(c, cl, node, HEALTH_MODE_HEALTH, 0, r, n, results);
    json_decref(results);
    for (int i = 0; worst == HEALTH_FAIL && i < n; i++)
        if (r[i].status == HEALTH_FAIL)
            return errprintf(err, "%s: %s", r[i].check, r[i].reason), 0;
    return worst != HEALTH_FAIL;
}

/* One node: detect event, drain + requeue, escalate through the actions. */
static int remediate_node(struct control *c, struct store_op *op, const struct store_cluster *cl,
                          const char *conf, const json_t *item, mtc_error_t *err)
{
    const json_t *spec = cl->spec;
    const char *id = op->cluster_id;
    const char *node = json_string_value(json_object_get(item, "node"));
    const char *check = json_string_value(json_object_get(item, "check"));
    const char *reason = json_string_value(json_object_get(item, "reason"));
    /* the item is JSON (the operation's stored request): names to enums here */
    int sev = schema_enum_parse(&health_severity_enum,
                                json_string_value(json_object_get(item, "severity")), 0);
    int mode =
        schema_enum_parse(&health_mode_enum, json_string_value(json_object_get(item, "mode")), 0);
    char progress[256];

    set_remediation(c, id, node, CONTROL_REM_REMEDIATING);
    event(c, id, detect_event(check, mode < 0 ? HEALTH_MODE_HEALTH : (enum health_mode)mode), node,
          "%s failed: %s", check, reason);
    snprintf(progress, sizeof(progress), "%s: draining and requeueing jobs", node);
    store_op_progress(c->st, op->id, progress);
    if (drain_and_requeue(c, id, conf, node, check, reason) < 0)
        return errprintf(err, "%s: cannot drain the node", node);

    int64_t since = mtc_now_ms() - (int64_t)REMEDIATION_WINDOW_S * 1000;
    int done = store_remediation_count(c->st, id, node, since);
    int a = (int)action_for(sev < 0 ? HEALTH_SEV_NONE : (enum health_severity)sev);
    if (done > a)
        a = done; /* the same node failing again within the window escalates */
    int fence = needs_fence(check);
    if (fence && a < FENCE_ACTION)
        a = FENCE_ACTION;
    /* a resumed operation (mtcd died in the middle of an action) repeats the
     * action it had recorded, without counting it twice toward the limit */
    int again = -1;
    char last[16] = "", last_op[48] = "";
    if (store_remediation_last(c->st, id, node, last, last_op) == 0 &&
        strcmp(last_op, op->id) == 0)
        for (int k = 0; k < N_ACTIONS; k++)
            if (strcmp(actions[k].name, last) == 0)
                a = again = k;
    for (;; a++, again = -1) {
        if (a != again && (done >= REMEDIATION_LIMIT || a >= N_ACTIONS)) {
            char why[300];
            snprintf(why, sizeof(why),
                     "mtc: remediation limit reached (%d actions in %d s); last failure %.200s",
                     done, REMEDIATION_WINDOW_S, check);
            provider_node_set(c->prov, id, conf, node, SLURM_NODE_DRAIN, why, NULL);
            set_remediation(c, id, node, CONTROL_REM_FAILED);
            event(c, id, "VM_REMEDIATION_FAILED", node,
                  "left drained in ERROR after %d actions in %d s: %s", done, REMEDIATION_WINDOW_S,
                  check);
            return 0; /* the operation did what policy allows */
        }
        if (a != again) {
            store_remediation_add(c->st, id, node, actions[a].name, check, op->id);
            done++;
        }
        snprintf(progress, sizeof(progress), "%s: %s (attempt %d)", node, actions[a].name, done);
        store_op_progress(c->st, op->id, progress);
        event(c, id, actions[a].event, node, "%s %s after %s", actions[a].name, node, check);
        mtc_error_t aerr = {""};
        int arc = provider_node_action(c->prov, id, spec, node, actions[a].name, &aerr);
        if (fence) { /* the node's processes are gone (even when its slurmd did not come back) */
            requeue_jobs(c, id, conf, node, 1);
            fence = 0;
        } else if (arc == 0 && actions[a].kills) {
            char why[400];
            drain_reason(why, check, reason);
            release_killed(c, id, conf, node, actions[a].name, why);
        }
        if (arc < 0) {
            event(c, id, "VM_ACTION_FAILED", node, "%s failed: %s", actions[a].name, aerr.text);
            continue;
        }
        /* a replace moves the node to another host */
        json_decref(control_refresh_nodes(c, id, spec, cl->nodes));
        mtc_error_t verr = {""};
        int ok = verify(c, cl, node, &verr);
        if (ok == 1) {
            /* the event first: a job Slurm starts on the node the moment it is
             * resumed never appears to start before the node came back */
            event(c, id, "VM_RESUMED", node, "checks pass after %s; node back in service",
                  actions[a].name);
            mtc_error_t rerr = {""};
            if (provider_node_set(c->prov, id, conf, node, SLURM_NODE_RESUME, NULL, &rerr) < 0)
                log_msg(LOG_ERR, "cluster %s: resume %s: %s", id, node, rerr.text);
            set_remediation(c, id, node, CONTROL_REM_NONE);
            return 0;
        }
        event(c, id, "VM_HEALTH_CHECK_FAILED", node, "after %s: %s", actions[a].name,
              ok < 0 ? verr.text : verr.text);
    }
}

int control_run_remediate(struct control *c, struct store_op *op, json_t **response,
                          mtc_error_t *err)
{
    struct store_cluster cl;
    char conf[PATH_MAX + 16];
    if (store_cluster_get(c->st, op->cluster_id, &cl) < 0)
        return errprintf(err, "cluster %s no longer exists", op->cluster_id);
    int rc = conf_path(c, op->cluster_id, conf, sizeof(conf), err);
    json_t *nodes = json_object_get(op->request, "nodes"), *item;
    size_t i;
    json_array_foreach(nodes, i, item)
    {
        if (rc < 0)
            break;
        rc = remediate_node(c, op, &cl, conf, item, err);
    }
    store_cluster_release(&cl);
    if (rc == 0)
        *response = json_pack("{s:O}", "nodes", nodes);
    return rc;
}

/* --- triggers ------------------------------------------------------------- */

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
    int rc = store_op_begin_shared(c->st, &op, CONTROL_NAME(cluster_state_enum, CLUSTER_STATE_RUNNING),
                                   busy);
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
        set_remediation(c, id, json_string_value(json_object_get(item, "node")),
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
    json_t *active =
        store_ops_active_nodes(c->st, cl->id, CONTROL_NAME(control_op_kind_enum, CONTROL_REMEDIATE));
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
                set_remediation(c, cl->id, h[i].node, CONTROL_REM_NONE);
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
            if (strcmp(json_string_value(json_object_get(nd, "instanceName")) ?: "", h[i].node) == 0)
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
            set_remediation(c, cl->id, q[i].node, CONTROL_REM_QUEUED);
            if (q[i].verdict == REMQ_WAIT_CLUSTER)
                event(c, cl->id, "VM_REMEDIATION_QUEUED", q[i].node,
                      "%s failed: queued: %d remediations in flight (maxConcurrentRemediations %d)",
                      hh->failing_check, in_flight, lim.max_concurrent);
            else
                event(c, cl->id, "VM_REMEDIATION_QUEUED", q[i].node,
                      "%s failed: queued: %d of %d nodes of node pool out of service "
                      "(maxDrainedFraction %g)",
                      hh->failing_check, ps.p[q[i].pool].drained, ps.p[q[i].pool].size,
                      lim.max_drained_fraction);
            continue;
        }
        if (q[i].verdict != REMQ_START)
            continue;
        json_t *items = json_pack("[{s:s, s:s, s:s, s:s}]", "node", hh->node, "check",
                                  hh->failing_check, "reason", hh->reason, "severity",
                                  hh->severity);
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
