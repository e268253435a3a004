/* control: the control plane's lifetime and the cluster supervisor — a
 * thread that passes over every running cluster (daemons restarted, nodes
 * refreshed, nodes down too long and failed health handed to the
 * remediation triggers, triggers.c) — and the agents' identity for the
 * provider. The operations it resumes on start are ops.c's. */
#include "control/internal.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "cluster/cluster.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* A cluster whose nodes are other machines, restored from a backup taken
 * when: adopted, and when its machines reached the lost controller at an
 * address this machine does not hold, an UPDATE with controller.address
 * this machine's stored to run when the control starts (the provider
 * rewrites slurm.conf, slurmd's --conf-server and the agents' mtcd address
 * on every host and starts slurmctld here). msg: what happened, for the
 * RESTORED event. */
static void adopt_elsewhere(struct control *c, const struct store_cluster *cl, const char *when,
                            char *msg, size_t len)
{
    char addr[256], busy[48] = "";
    mtc_error_t e2 = {""};
    int moved = provider_controller_moved(c->prov, cl->id, addr, sizeof(addr), &e2);
    if (moved <= 0) {
        snprintf(msg, len, "restored from a backup taken %s: adopted by this mtcd%s%s", when,
                 moved < 0 ? "; cannot tell whether its controller moved: " : "",
                 moved < 0 ? e2.text : "");
        return;
    }
    json_t *spec = json_deep_copy(cl->spec), *ctl = json_object_get(spec, "controller");
    const char *was = json_string_value(json_object_get(ctl, "address"));
    char old[256];
    snprintf(old, sizeof(old), "%s", was ? was : "the default address");
    if (!ctl)
        json_object_set_new(spec, "controller", ctl = json_object());
    json_object_set_new(ctl, "address", json_string(addr));
    struct store_op op;
    control_op_init(&op, cl->project, cl->location, cl->id,
                    CONTROL_NAME(control_op_kind_enum, CONTROL_UPDATE));
    op.request = spec;
    /* stored only: control_start resumes it with the other pending ones */
    if (store_op_begin(c->st, &op, CONTROL_NAME(cluster_state_enum, CLUSTER_STATE_UPDATING), busy) <
        0)
        snprintf(msg, len,
                 "restored from a backup taken %s: its controller was %s, this machine is %s, "
                 "and the update that moves it could not start (%s): update controller.address",
                 when, old, addr, busy[0] ? busy : strerror(errno));
    else
        snprintf(msg, len,
                 "restored from a backup taken %s: its controller was %s; operation %s moves "
                 "it to this machine, %s",
                 when, old, op.id, addr);
    json_decref(spec);
}

int control_adopt_restored(struct control *c, const char *home, mtc_error_t *err)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/restored.json", home);
    json_t *mark = json_load_file(path, 0, NULL);
    if (!mark) /* none: nothing was restored */
        return mtc_path_exists(path)
                   ? errprintf(err, "%s: not the record `mtc daemon restore` writes", path)
                   : 0;
    char when[40];
    mtc_time_rfc3339(json_integer_value(json_object_get(mark, "created")), when, sizeof(when));
    json_t *ids = store_cluster_ids(c->st);
    size_t i;
    json_t *v;
    json_array_foreach(ids, i, v)
    {
        const char *id = json_string_value(v);
        struct store_cluster cl;
        if (store_cluster_get(c->st, id, &cl) < 0)
            continue;
        char msg[600];
        const char *kind = provider_kind(c->prov, id, cl.spec);
        if (!strcmp(kind, "local")) {
            /* its nodes were processes of the machine the backup came from */
            snprintf(msg, sizeof(msg),
                     "restored from a backup taken %s: its nodes were on the lost machine; "
                     "delete it or create it again",
                     when);
            store_cluster_set_state(c->st, id, schema_enum_name(&cluster_state_enum, CLUSTER_STATE_ERROR));
        } else {
            adopt_elsewhere(c, &cl, when, msg, sizeof(msg));
        }
        store_event_add(c->st, id, "RESTORED", NULL, msg);
        log_msg(LOG_NOTICE, "cluster %s (%s): %s", id, kind, msg);
        store_cluster_release(&cl);
    }
    json_decref(ids);
    json_t *e;
    json_array_foreach(json_object_get(mark, "external"), i, e)
    log_msg(LOG_NOTICE, "restored from a backup: %s was %s (put it back where mtcd's options "
                        "or a spec name it)",
            mtc_json_str_or(e, "restored", "?"), mtc_json_str_or(e, "origin", "?"));
    json_decref(mark);
    if (unlink(path) < 0)
        return errprintf(err, "cannot remove %s: %s", path, strerror(errno));
    return 0;
}

void control_backup_prepare(struct control *c)
{
    json_t *ids = store_cluster_ids(c->st);
    size_t i;
    json_t *v;
    json_array_foreach(ids, i, v)
    {
        mtc_error_t e = {""};
        if (provider_backup_prepare(c->prov, json_string_value(v), &e) < 0)
            log_msg(LOG_WARNING, "backup: %s (the backup holds the last dump, if any)", e.text);
    }
    json_decref(ids);
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
        if (control_resume_op(c, json_string_value(v), &e) < 0) {
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
