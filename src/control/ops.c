/* ops: mtcd's long-running operations — the kinds (create, update, delete,
 * remediate, a dataset's prepare, a model's upload, a health scan) and the
 * worker thread that runs each stored operation, begun for a cluster, a
 * dataset or a model and resumed after a restart. Operations are rows in the
 * store; a worker drives the provider or the kind's file below (prepare.c,
 * upload.c, healthscan.c, remediate.c) and records progress. */
#include "control/datasets.h"
#include "control/internal.h"
#include "control/models.h"
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

int control_resume_op(struct control *c, const char *op_id, mtc_error_t *err)
{
    return submit(c, op_id, 0, err);
}

/* op on what name, stored: started now, or when mtcd restarts if it cannot
 * start now. 0. */
static int begun(struct control *c, const struct store_op *op, const char *what,
                 const char *name)
{
    log_msg(LOG_NOTICE, "%s %s %s: operation %s", op->kind, what, name, op->id);
    mtc_error_t e2 = {""};
    if (control_submit(c, op->id, &e2) < 0)
        log_msg(LOG_ERR, "cannot start %s: %s (it resumes when mtcd restarts)", op->id, e2.text);
    return 0;
}

int control_dataset_begin(struct control *c, const struct store_dataset *d,
                          const struct store_op *op, char busy[48], mtc_error_t *err)
{
    const char *name = op->target + strlen("datasets/");
    if (d) {
        if (store_dataset_create(c->st, d, op, err) < 0)
            return -1;
    } else if (store_dataset_op_begin(c->st, op, name, busy) < 0) {
        int e = errno;
        if (e == EBUSY)
            errprintf(err, "dataset %s has an operation in progress: %s", name, busy);
        else if (e == ENOENT)
            errprintf(err, "dataset %s not found", name);
        else
            errprintf(err, "dataset %s: cannot start %s", name, op->kind);
        errno = e;
        return -1;
    }
    return begun(c, op, "dataset", name);
}

int control_model_begin(struct control *c, const struct store_op *op, char busy[48],
                        mtc_error_t *err)
{
    const char *name = op->target + strlen("models/");
    if (store_model_op_begin(c->st, op, busy) < 0) {
        int e = errno;
        if (e == EBUSY)
            errprintf(err, "model %s has an operation in progress: %s", name, busy);
        else
            errprintf(err, "model %s: cannot start %s", name, op->kind);
        errno = e;
        return -1;
    }
    return begun(c, op, "model", name);
}
