/* control: the operation runner and the cluster supervisor. Operations are
 * rows in the store; a worker thread per running operation drives the
 * provider and records progress, so a killed mtcd resumes them on start. */
#include "control/internal.h"
#include "cluster/cluster.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct schema_enum control_op_kind_enum = SCHEMA_NAMES(
    NULL, [CONTROL_CREATE] = "CREATE", [CONTROL_UPDATE] = "UPDATE", [CONTROL_DELETE] = "DELETE",
    [CONTROL_REMEDIATE] = "REMEDIATE", [CONTROL_PREPARE] = "PREPARE", [CONTROL_UPLOAD] = "UPLOAD",
    [CONTROL_HEALTHSCAN] = "HEALTH_SCAN");

/* One operation as its worker thread runs it. */
struct op_worker {
    struct control *c;
    struct store_op op;
    char key[160];  /* what it holds in c->busy (op_key) */
    int keep_state; /* the run failed but left the cluster in a working state */
    int code;       /* google.rpc code of a failure (RPC_INTERNAL unless the run says) */
};

/* What an operation holds while it runs (one at a time each): its cluster,
 * or the other resource it is about. A REMEDIATE shares its cluster with the
 * other remediations (the store keeps their nodes apart and an UPDATE or
 * DELETE out: store_op_begin_shared), so it holds only itself, and the
 * supervisor keeps watching the cluster while it runs. */
static const char *op_key(const struct store_op *op, char *buf, size_t len)
{
    if (op->target[0])
        return op->target;
    if (schema_enum_parse(&control_op_kind_enum, op->kind, 0) != CONTROL_REMEDIATE)
        return op->cluster_id;
    snprintf(buf, len, "%s/%s", op->cluster_id, op->id);
    return buf;
}

/* --- operation kinds ------------------------------------------------------ */

static void progress_cb(void *arg, const char *message)
{
    struct op_worker *j = arg;
    store_op_progress(j->c->st, j->op.id, message);
    log_msg(LOG_INFO, "%s %s %s: %s", j->op.kind, j->op.cluster_id, j->op.id, message);
}

/* An UPDATE the provider could not apply: bring the cluster back to the spec
 * it last ran with (still the stored one) and fail the operation with the
 * reason; the cluster stays RUNNING when the rollback works. */
static int roll_back(struct op_worker *j, mtc_error_t *err)
{
    struct control *c = j->c;
    const char *id = j->op.cluster_id;
    char why[sizeof(err->text)];
    snprintf(why, sizeof(why), "%s", *err->text ? err->text : "the provider gave no reason");
    struct store_cluster cl;
    if (store_cluster_get(c->st, id, &cl) < 0)
        return errprintf(err, "update failed: %s", why);
    progress_cb(j, "update failed; restoring the previous configuration");
    mtc_error_t e2 = {""};
    int rc = provider_apply(c->prov, id, cl.spec, progress_cb, j, &e2);
    store_cluster_release(&cl);
    if (rc < 0)
        return errprintf(err,
                         "update failed: %.110s; restoring the previous configuration failed "
                         "too: %.110s",
                         why, e2.text);
    store_cluster_set_state(c->st, id, CONTROL_NAME(cluster_state_enum, CLUSTER_STATE_RUNNING));
    j->keep_state = 1;
    return errprintf(err, "update failed, cluster kept its previous configuration: %s", why);
}

static int run_apply(struct op_worker *j, json_t **response, mtc_error_t *err)
{
    struct control *c = j->c;
    const char *id = j->op.cluster_id;
    if (!j->op.request)
        return errprintf(err, "operation %s has no target spec", j->op.id);
    /* the spec's users first: jobs are submitted as them on this machine */
    if (json_array_size(json_object_get(j->op.request, "users")) &&
        !cluster_spec_simulated(j->op.request) && cluster_users_apply(j->op.request, err) < 0) {
        /* nothing was changed: an update leaves the cluster as it ran */
        if (schema_enum_parse(&control_op_kind_enum, j->op.kind, 0) == CONTROL_UPDATE) {
            store_cluster_set_state(c->st, id,
                                    CONTROL_NAME(cluster_state_enum, CLUSTER_STATE_RUNNING));
            j->keep_state = 1;
        }
        return -1;
    }
    if (provider_apply(c->prov, id, j->op.request, progress_cb, j, err) < 0)
        return schema_enum_parse(&control_op_kind_enum, j->op.kind, 0) == CONTROL_UPDATE
                   ? roll_back(j, err)
                   : -1;
    if (store_cluster_set_spec(c->st, id, j->op.request,
                               CONTROL_NAME(cluster_state_enum, CLUSTER_STATE_RUNNING)) < 0)
        return errprintf(err, "cannot record cluster %s: %s", id, strerror(errno));
    json_decref(control_refresh_nodes(c, id, j->op.request, NULL));
    int create = schema_enum_parse(&control_op_kind_enum, j->op.kind, 0) == CONTROL_CREATE;
    store_event_add(c->st, id, create ? "CLUSTER_CREATED" : "CLUSTER_UPDATED", NULL,
                    "cluster is RUNNING");
    /* the response is the cluster resource: the API shows it (views.c) */
    (void)response;
    return 0;
}

static int run_delete(struct op_worker *j, json_t **response, mtc_error_t *err)
{
    struct control *c = j->c;
    if (provider_delete(c->prov, j->op.cluster_id, err) < 0)
        return -1;
    store_health_delete(c->st, j->op.cluster_id);
    if (store_cluster_delete(c->st, j->op.cluster_id) < 0)
        return errprintf(err, "cannot remove cluster %s from the store", j->op.cluster_id);
    *response = json_object(); /* google.protobuf.Empty */
    return 0;
}

static int run_remediate(struct op_worker *j, json_t **response, mtc_error_t *err)
{
    return control_run_remediate(j->c, &j->op, response, err);
}

static int run_dataset(struct op_worker *j, json_t **response, mtc_error_t *err)
{
    return control_run_dataset(j->c, &j->op, response, &j->code, err);
}

static int run_healthscan(struct op_worker *j, json_t **response, mtc_error_t *err)
{
    return control_run_healthscan(j->c, &j->op, response, &j->code, err);
}

static int run_model(struct op_worker *j, json_t **response, mtc_error_t *err)
{
    return control_run_model(j->c, &j->op, response, &j->code, err);
}

static const struct op_kind {
    int (*run)(struct op_worker *j, json_t **response, mtc_error_t *err);
    int fail_state; /* enum cluster_state of the cluster when the operation fails; -1 = kept */
} op_kinds[] = {
    [CONTROL_CREATE] = {run_apply, CLUSTER_STATE_ERROR},
    [CONTROL_UPDATE] = {run_apply, CLUSTER_STATE_ERROR},
    [CONTROL_DELETE] = {run_delete, CLUSTER_STATE_ERROR},
    /* a failed remediation leaves the cluster as it is */
    [CONTROL_REMEDIATE] = {run_remediate, -1},
    [CONTROL_PREPARE] = {NULL, -1}, /* datasets only */
    [CONTROL_UPLOAD] = {NULL, -1},  /* models only */
    /* a scan that cannot run leaves the cluster as it is */
    [CONTROL_HEALTHSCAN] = {run_healthscan, -1},
};
/* Operations on another resource than a cluster, by the resource type their
 * target names ("TYPE/NAME"), whatever their kind. */
static const struct {
    const char *type;
    struct op_kind kind;
} target_kinds[] = {
    {"datasets",
     {run_dataset, -1}}, /* every operation on a dataset (CREATE, PREPARE) prepares it */
    {"models", {run_model, -1}},
};

static const struct op_kind *find_kind(const struct store_op *op)
{
    if (op->target[0]) {
        size_t n = strcspn(op->target, "/");
        for (size_t i = 0; i < sizeof(target_kinds) / sizeof(target_kinds[0]); i++)
            if (strlen(target_kinds[i].type) == n && !strncmp(op->target, target_kinds[i].type, n))
                return &target_kinds[i].kind;
        return NULL;
    }
    int k = schema_enum_parse(&control_op_kind_enum, op->kind, 0);
    return k < 0 || !op_kinds[k].run ? NULL : &op_kinds[k];
}

static void submit_or_defer(struct control *c, const char *op_id);

static void *worker(void *arg)
{
    struct op_worker *j = arg;
    struct control *c = j->c;
    mtc_error_t err = {""};
    json_t *response = NULL;
    const struct op_kind *k = find_kind(&j->op);
    j->code = RPC_INTERNAL;
    int rc =
        k ? k->run(j, &response, &err) : errprintf(&err, "unknown operation kind %s", j->op.kind);
    if (rc == 0) {
        store_op_finish(c->st, j->op.id, response, 0, NULL);
        store_op_progress(c->st, j->op.id, "done");
        log_msg(LOG_NOTICE, "%s %s %s done", j->op.kind, j->key, j->op.id);
    } else {
        if (k && k->fail_state >= 0 && !j->keep_state)
            store_cluster_set_state(c->st, j->op.cluster_id,
                                    CONTROL_NAME(cluster_state_enum, k->fail_state));
        if (!*err.text)
            errprintf(&err, "%s failed without a reason (see mtcd.log)", j->op.kind);
        if (!j->op.target[0]) /* events are a cluster's */
            store_event_add(c->st, j->op.cluster_id, "OPERATION_FAILED", NULL, err.text);
        store_op_finish(c->st, j->op.id, NULL, j->code, err.text);
        log_msg(LOG_ERR, "%s %s %s failed: %s", j->op.kind, j->key, j->op.id, err.text);
    }
    json_decref(response);
    char next[sizeof(j->op.id)] = "";
    pthread_mutex_lock(&c->lock);
    json_object_del(c->busy, j->key);
    const char *w = json_string_value(json_object_get(c->waiting, j->key));
    if (w && !c->stopping)
        snprintf(next, sizeof(next), "%s", w);
    json_object_del(c->waiting, j->key);
    c->running--;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (*next) /* the next operation on this key, begun while this one finished */
        submit_or_defer(c, next);
    store_op_release(&j->op);
    free(j);
    return NULL;
}

void control_op_init(struct store_op *op, const char *project, const char *location,
                     const char *cluster, const char *kind)
{
    char hex[17];
    memset(op, 0, sizeof(*op));
    mtc_random_hex(hex, 8);
    snprintf(op->id, sizeof(op->id), "op-%s", hex);
    snprintf(op->project, sizeof(op->project), "%s", project);
    snprintf(op->location, sizeof(op->location), "%s", location);
    snprintf(op->cluster_id, sizeof(op->cluster_id), "%s", cluster);
    snprintf(op->kind, sizeof(op->kind), "%s", kind);
    snprintf(op->progress, sizeof(op->progress), "queued");
}

/* Start a stored operation now; one that cannot start (mtcd stopping, the
 * cluster's worker still finishing) stays stored and resumes on restart. */
static void submit_or_defer(struct control *c, const char *op_id)
{
    mtc_error_t err = {""};
    if (control_submit(c, op_id, &err) < 0)
        log_msg(LOG_ERR, "cannot start %s: %s (it resumes when mtcd restarts)", op_id, err.text);
}

int control_begin_op(struct control *c, const struct store_op *op, enum cluster_state state,
                     char busy[48], mtc_error_t *err)
{
    if (store_op_begin(c->st, op, CONTROL_NAME(cluster_state_enum, state), busy) < 0) {
        int e = errno;
        if (e == EBUSY)
            errprintf(err, "cluster %s has an operation in progress: %s", op->cluster_id, busy);
        else
            errprintf(err, "cluster %s: cannot start %s", op->cluster_id, op->kind);
        errno = e;
        return -1;
    }
    log_msg(LOG_NOTICE, "%s cluster %s: operation %s", op->kind, op->cluster_id, op->id);
    submit_or_defer(c, op->id);
    return 0;
}

int control_create_cluster(struct control *c, const struct store_cluster *cl,
                           const struct store_op *op, mtc_error_t *err)
{
    if (store_cluster_create(c->st, cl, op, err) < 0)
        return -1;
    log_msg(LOG_NOTICE, "create cluster %s: operation %s", cl->id, op->id);
    submit_or_defer(c, op->id);
    return 0;
}

/* Start op_id's worker. When its key's worker is still letting go of the key
 * (the store let this operation begin, so that one is finished), wait_turn
 * leaves it to start this one next; without it that is EBUSY. */
static int submit(struct control *c, const char *op_id, int wait_turn, mtc_error_t *err)
{
    struct op_worker *j = calloc(1, sizeof(*j));
    if (!j)
        return errprintf(err, "out of memory");
    j->c = c;
    if (store_op_get(c->st, op_id, &j->op) < 0) {
        free(j);
        return errprintf(err, "operation %s not found", op_id);
    }
    char kb[sizeof(j->key)];
    snprintf(j->key, sizeof(j->key), "%s", op_key(&j->op, kb, sizeof(kb)));
    pthread_mutex_lock(&c->lock);
    if (wait_turn && !c->stopping && json_object_get(c->busy, j->key)) {
        /* the store let it begin, so the key's worker has finished its
         * operation and is letting go of the key: it starts this one then */
        json_object_set_new(c->waiting, j->key, json_string(op_id));
        pthread_mutex_unlock(&c->lock);
        store_op_release(&j->op);
        free(j);
        return 0;
    }
    if (c->stopping || json_object_get(c->busy, j->key)) {
        pthread_mutex_unlock(&c->lock);
        store_op_release(&j->op);
        free(j);
        errno = EBUSY;
        return errprintf(err, "cluster busy or mtcd stopping");
    }
    json_object_set_new(c->busy, j->key, json_string(op_id));
    c->running++;
    pthread_mutex_unlock(&c->lock);

    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, worker, j);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_lock(&c->lock);
        json_object_del(c->busy, j->key);
        c->running--;
        pthread_mutex_unlock(&c->lock);
        store_op_release(&j->op);
        free(j);
        errno = rc;
        return errprintf(err, "cannot start worker: %s", strerror(rc));
    }
    return 0;
}

int control_submit(struct control *c, const char *op_id, mtc_error_t *err)
{
    return submit(c, op_id, 1, err);
}

/* --- supervisor ----------------------------------------------------------- */

struct ev_ctx {
    struct control *c;
    const char *cluster;
};

/* A daemon that cannot start again would be restarted, and reported, on every
 * supervisor tick: the same event for the same node is recorded at most once
 * per EVENT_REPEAT_MS so it cannot push the rest out of the last-100 window. */
#define EVENT_REPEAT_MS 30000

static void event_cb(void *arg, const char *type, const char *node, const char *message)
{
    struct ev_ctx *e = arg;
    char key[256];
    int64_t now = mtc_now_ms();
    pthread_mutex_lock(&e->c->lock);
    if (node && strcmp(type, "SLURMD_RESTART") == 0) { /* every one, repeats too */
        snprintf(key, sizeof(key), "%s/%s", e->cluster, node);
        json_t *r = json_object_get(e->c->restarts, key);
        json_object_set_new(
            e->c->restarts, key,
            json_pack("[I, I]", r ? json_integer_value(json_array_get(r, 1)) : 0, (json_int_t)now));
    }
    snprintf(key, sizeof(key), "%s/%s/%s", e->cluster, type, node ? node : "-");
    json_t *last = json_object_get(e->c->recent, key);
    int repeat = last && now - json_integer_value(last) < EVENT_REPEAT_MS;
    if (!repeat)
        json_object_set_new(e->c->recent, key, json_integer(now));
    pthread_mutex_unlock(&e->c->lock);
    if (repeat)
        return;
    store_event_add(e->c->st, e->cluster, type, node, message);
    log_msg(LOG_WARNING, "cluster %s: %s %s: %s", e->cluster, type, node ? node : "-", message);
}

/* Slurm's view: a compute node down or not responding for NODE_DOWN_GRACE_S
 * (after the provider tried restarting its slurmd) counts as a failed node. */
static void watch_down(struct control *c, const char *id, const json_t *nodes)
{
    size_t i;
    json_t *n;
    json_array_foreach(nodes, i, n)
    {
        const char *name = json_string_value(json_object_get(n, "instanceName"));
        const char *st = json_string_value(json_object_get(n, "slurmState"));
        /* an elastic node that is off (or on its way) is no failed node:
         * "down~" is a resume that failed, already handled by Slurm and mtc */
        const char *ns = json_string_value(json_object_get(n, "nodeState"));
        if (ns && strstr(ns, "POWER"))
            continue;
        if (!name || !st ||
            strcmp(json_string_value(json_object_get(n, "nodePoolType")),
                   "NODE_POOL_TYPE_COMPUTE") != 0)
            continue;
        char key[128];
        snprintf(key, sizeof(key), "%s/%s", id, name);
        int down = strstr(st, "down") || strchr(st, '*') || strstr(st, "fail");
        pthread_mutex_lock(&c->lock);
        json_t *since = json_object_get(c->down, key);
        if (!down) {
            json_object_del(c->down, key);
        } else if (!since) {
            json_object_set_new(c->down, key, json_integer(mtc_now_ms()));
        } else if (mtc_now_ms() - json_integer_value(since) > NODE_DOWN_GRACE_S * 1000) {
            json_object_del(c->down, key);
            pthread_mutex_unlock(&c->lock);
            control_node_down(c, id, name, st);
            continue;
        }
        pthread_mutex_unlock(&c->lock);
    }
}

static void supervise_one(struct control *c, const char *id)
{
    struct store_cluster cl;
    if (store_cluster_get(c->st, id, &cl) < 0)
        return;
    if (schema_enum_parse(&cluster_state_enum, cl.state, 0) == CLUSTER_STATE_RUNNING) {
        mtc_error_t err = {""};
        struct ev_ctx e = {c, id};
        int64_t began = mtc_now_ms();
        if (provider_supervise(c->prov, id, cl.spec, event_cb, &e, &err) < 0) {
            log_msg(LOG_ERR, "supervise %s: %s", id, err.text);
        } else {
            /* what a daemon.slurmd report is judged against: a look at the
             * nodes that began after it (on hosts, not every pass looks) */
            int64_t looked = provider_supervised_at(c->prov, id, began);
            pthread_mutex_lock(&c->lock);
            int first = json_object_get(c->supervised, id) == NULL;
            json_object_set_new(c->supervised, id, json_integer(looked));
            pthread_mutex_unlock(&c->lock);
            /* the first pass since mtcd started: the cluster is adopted (or
             * was just created) — its daemons run under this mtcd's watch */
            if (first)
                log_msg(LOG_NOTICE, "cluster %s: supervised, %lld ms after the controller started",
                        id, (long long)(mtc_now_ms() - c->started_ms));
        }
        json_t *nodes = control_refresh_nodes(c, id, cl.spec, cl.nodes);
        watch_down(c, id, nodes);
        json_decref(nodes);
        control_check_health(c, &cl);
        /* counted once the whole pass is done: a test (or an operator) that
         * waits for a pass after some change knows everything above has
         * seen it (mtc_supervision_passes_total) */
        pthread_mutex_lock(&c->lock);
        json_t *n = json_object_get(c->passes, id);
        json_object_set_new(c->passes, id, json_integer(n ? json_integer_value(n) + 1 : 1));
        pthread_mutex_unlock(&c->lock);
    }
    store_cluster_release(&cl);
}

json_t *control_supervision_passes(struct control *c)
{
    pthread_mutex_lock(&c->lock);
    json_t *out = json_deep_copy(c->passes);
    pthread_mutex_unlock(&c->lock);
    return out ? out : json_object();
}

int control_slurmd_supervised(struct control *c, const char *cluster, const char *node,
                              int64_t report_ms)
{
    char key[160];
    snprintf(key, sizeof(key), "%s/%s", cluster, node);
    pthread_mutex_lock(&c->lock);
    json_t *sup = json_object_get(c->supervised, cluster);
    json_t *r = json_object_get(c->restarts, key);
    int64_t looked = sup ? json_integer_value(sup) : 0;
    int64_t prev = json_integer_value(json_array_get(r, 0));
    int64_t last = r ? json_integer_value(json_array_get(r, 1)) : 0;
    pthread_mutex_unlock(&c->lock);
    if (looked <= report_ms)
        return 1; /* no pass has looked at the daemons since the report */
    int flapping = prev > 0 && last - prev < SLURMD_FLAP_MS;
    return last > 0 && !flapping && last >= report_ms - SLURMD_START_GRACE_MS;
}

json_t *control_refresh_nodes(struct control *c, const char *id, const json_t *spec,
                              const json_t *stored)
{
    json_t *nodes = provider_nodes(c->prov, id, spec, NULL);
    if (nodes && !json_equal(nodes, stored))
        store_cluster_set_nodes(c->st, id, nodes);
    return nodes;
}

static void *supervisor(void *arg)
{
    struct control *c = arg;
    pthread_mutex_lock(&c->lock);
    while (!c->stopping) {
        pthread_mutex_unlock(&c->lock);
        json_t *ids = store_cluster_ids(c->st);
        size_t i;
        json_t *v;
        json_array_foreach(ids, i, v)
        {
            const char *id = json_string_value(v);
            pthread_mutex_lock(&c->lock);
            int skip = c->stopping || json_object_get(c->busy, id) != NULL;
            pthread_mutex_unlock(&c->lock);
            if (!skip)
                supervise_one(c, id);
        }
        json_decref(ids);
        pthread_mutex_lock(&c->lock);
        struct timespec ts = mtc_deadline_ms(c->supervise_ms);
        if (!c->stopping && !c->poked)
            pthread_cond_timedwait(&c->cond, &c->lock, &ts);
        c->poked = 0;
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* --- agents' identity, for the provider ---------------------------------- */

static int cluster_parent(void *arg, const char *cluster, char project[64], char location[64])
{
    struct control *c = arg;
    struct store_cluster cl;
    if (store_cluster_get(c->st, cluster, &cl) < 0)
        return -1;
    snprintf(project, 64, "%s", cl.project);
    snprintf(location, 64, "%s", cl.location);
    store_cluster_release(&cl);
    return 0;
}

static int mint_node_token(void *arg, const char *cluster, const char *node, char *token,
                           size_t len)
{
    struct control *c = arg;
    char secret[49], hash[65], hex[9], id[24];
    if (len < 64 || mtc_random_hex(secret, 24) < 0 || mtc_random_hex(hex, 4) < 0)
        return -1;
    snprintf(token, len, "mtc_node_%s", secret);
    snprintf(id, sizeof(id), "tok-%s", hex);
    mtc_sha256_hex(token, hash);
    explicit_bzero(secret, sizeof(secret));
    if (store_node_token_set(c->st, cluster, node, id, hash) < 0) {
        explicit_bzero(token, len);
        return -1;
    }
    log_msg(LOG_INFO, "cluster %s: node token %s for %s", cluster, id, node);
    return 0;
}

/* --- lifetime ------------------------------------------------------------- */

struct control *control_create(struct store *st, struct provider *prov, int supervise_ms,
                               mtc_error_t *err)
{
    struct control *c = calloc(1, sizeof(*c));
    if (!c) {
        errprintf(err, "out of memory");
        return NULL;
    }
    c->st = st;
    c->prov = prov;
    c->supervise_ms = supervise_ms > 0 ? supervise_ms : 2000;
    c->busy = json_object();
    c->waiting = json_object();
    c->down = json_object();
    c->recent = json_object();
    c->failed_since = json_object();
    c->supervised = json_object();
    c->passes = json_object();
    c->started_ms = mtc_now_ms();
    c->restarts = json_object();
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    struct provider_identity id = {cluster_parent, mint_node_token, c};
    provider_set_identity(prov, &id);
    return c;
}

int control_start(struct control *c, mtc_error_t *err)
{
    json_t *pending = store_ops_pending(c->st);
    size_t i;
    json_t *v;
    json_array_foreach(pending, i, v)
    {
        mtc_error_t e = {""};
        log_msg(LOG_NOTICE, "resuming operation %s", json_string_value(v));
        if (submit(c, json_string_value(v), 0, &e) < 0) {
            /* a second unfinished op on the same cluster cannot run: fail it */
            store_op_finish(c->st, json_string_value(v), NULL, RPC_ABORTED, e.text);
        }
    }
    json_decref(pending);
    if (pthread_create(&c->supervisor, NULL, supervisor, c) != 0)
        return errprintf(err, "cannot start supervisor thread");
    c->supervisor_started = 1;
    return 0;
}

int control_stop(struct control *c, int wait_ms)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (c->supervisor_started) {
        pthread_join(c->supervisor, NULL);
        c->supervisor_started = 0;
    }
    int64_t deadline = mtc_now_ms() + wait_ms;
    pthread_mutex_lock(&c->lock);
    while (c->running > 0 && mtc_now_ms() < deadline) {
        struct timespec ts = mtc_deadline_ms(100);
        pthread_cond_timedwait(&c->cond, &c->lock, &ts);
    }
    int left = c->running;
    pthread_mutex_unlock(&c->lock);
    return left;
}

void control_destroy(struct control *c)
{
    if (!c)
        return;
    int saved = errno;
    control_stop(c, 0);
    provider_set_identity(c->prov, NULL);
    json_decref(c->busy);
    json_decref(c->waiting);
    json_decref(c->down);
    json_decref(c->recent);
    json_decref(c->failed_since);
    json_decref(c->supervised);
    json_decref(c->passes);
    json_decref(c->restarts);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
    errno = saved;
}

void control_poke(struct control *c)
{
    pthread_mutex_lock(&c->lock);
    c->poked = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}
