/* ctl: the endpoints controller's thread and its tick. Every tick, for each
 * endpoint, each replica (replica.c) is checked — its job still in the
 * queue, its address once it listens, /health — and each deployed model is
 * scaled between min and max replicas on the most requests it had running
 * since the last tick (up at once, down one replica per idle period). The
 * routing table (routing.c) lives in memory for endpoint_pick; the store
 * holds the spec and the replicas, so a restarted mtcd adopts them. The
 * mutations (mutate.c) take the same lock as the tick. */
#include "endpoint/internal.h"
#include "slurm/slurm.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEF_TICK_MS 500
#define STARTUP_MS (180 * 1000) /* a replica not ready by then is replaced */
#define HEALTH_FAILS 3          /* failed /health checks in a row that replace a ready replica */
#define HEALTH_GRACE_MS                                                                            \
    10000 /* ... over at least this long: a replica starved of CPU for a                           \
           * moment (a busy node) is not one that hangs */
#define DRAIN_MS (60 * 1000)    /* a draining replica is stopped by then, requests or not */

/* ---- the tick ---- */

static int job_listed(const json_t *jobs, const char *job)
{
    size_t i;
    json_t *j;
    json_array_foreach((json_t *)jobs, i, j) if (strcmp(json_string_value(j), job) == 0) return 1;
    return 0;
}

struct cluster_cache {
    char id[16];
    char conf[PATH_MAX];
    json_t *jobs; /* squeue's ids, or NULL: unknown this tick */
    int ok;
};

static struct cluster_cache *cache_get(struct endpoint_ctl *c, struct cluster_cache *cc, int *n,
                                       const char *id)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(cc[i].id, id) == 0)
            return &cc[i];
    if (*n >= 16)
        return NULL;
    struct cluster_cache *x = &cc[(*n)++];
    memset(x, 0, sizeof(*x));
    snprintf(x->id, sizeof(x->id), "%s", id);
    mtc_error_t err = {""};
    x->ok = endpoint_cluster_conf(&c->cfg, id, x->conf, sizeof(x->conf), &err) == 0;
    if (x->ok)
        x->jobs = slurm_jobs(x->conf, NULL);
    return x;
}

static void tick_endpoint(struct endpoint_ctl *c, struct store_endpoint *e,
                          struct cluster_cache *cc, int *ncc)
{
    char key[200];
    endpoint_key(key, sizeof(key), e->project, e->location, e->name);
    json_t *before = json_deep_copy(e->status);
    json_t *deps = jget(e->spec, "deployedModels");
    if (!json_is_array(jget(e->status, "replicas")))
        json_object_set_new(e->status, "replicas", json_array());
    json_t *reps = jget(e->status, "replicas");
    int64_t now = mtc_now_ms();
    for (size_t i = json_array_size(reps); i-- > 0;) {
        json_t *r = json_array_get(reps, i);
        json_t *dep = endpoint_find_id(deps, sget(r, "deployedModelId"));
        const char *cluster = dep ? sget(dep, "cluster") : sget(r, "cluster");
        struct cluster_cache *x = cache_get(c, cc, ncc, cluster);
        if (!dep) {
            endpoint_replica_stop(c, reps, i, x && x->ok ? x->conf : NULL);
            continue;
        }
        if (!x || !x->ok || !x->jobs)
            continue; /* the cluster does not answer now: judge nothing */
        if (!job_listed(x->jobs, sget(r, "slurmJobId"))) {
            endpoint_replica_event(c, e, r, cluster, "ENDPOINT_REPLICA_LOST",
                                   "its job ended; replacing it");
            json_array_remove(reps, i);
            continue;
        }
        int64_t age = now - json_integer_value(jget(r, "startMs"));
        if (strcmp(sget(r, "state"), "DRAINING") == 0) {
            if (endpoint_rt_running(c, key, sget(dep, "id"), sget(r, "id")) == 0 ||
                now - json_integer_value(jget(r, "drainMs")) > DRAIN_MS)
                endpoint_replica_stop(c, reps, i, x->conf);
            continue;
        }
        if (!*sget(r, "address")) {
            char addr[80];
            if (endpoint_replica_address(x->conf, r, addr, sizeof(addr)) == 0)
                json_object_set_new(r, "address", json_string(addr));
        }
        int ok = *sget(r, "address") && endpoint_replica_healthy(sget(r, "address"));
        const char *state = sget(r, "state");
        if (ok) {
            json_object_set_new(r, "state", json_string("READY"));
            json_object_set_new(r, "failedChecks", json_integer(0));
            json_object_del(r, "failingSinceMs");
        } else if (strcmp(state, "READY") == 0) {
            int f = iget(r, "failedChecks") + 1;
            json_object_set_new(r, "failedChecks", json_integer(f));
            if (!jget(r, "failingSinceMs"))
                json_object_set_new(r, "failingSinceMs", json_integer((json_int_t)now));
            int64_t since = json_integer_value(jget(r, "failingSinceMs"));
            if (f >= HEALTH_FAILS && now - since >= HEALTH_GRACE_MS) {
                char why[96];
                snprintf(why, sizeof(why),
                         "/health failed %d times in a row over %lld s; "
                         "replacing it",
                         f, (long long)((now - since) / 1000));
                endpoint_replica_event(c, e, r, cluster, "ENDPOINT_REPLICA_UNHEALTHY", why);
                endpoint_replica_stop(c, reps, i, x->conf);
            }
        } else if (age > STARTUP_MS) {
            endpoint_replica_event(c, e, r, cluster, "ENDPOINT_REPLICA_UNHEALTHY",
                                   "not ready 180 s after its start; replacing it");
            endpoint_replica_stop(c, reps, i, x->conf);
        }
    }
    /* scaling, per deployed model */
    size_t di;
    json_t *dep;
    json_array_foreach(deps, di, dep)
    {
        const char *id = sget(dep, "id");
        int lo = iget(dep, "minReplicaCount"), hi = iget(dep, "maxReplicaCount");
        json_t *as = jget(dep, "autoscaling");
        int target = iget(as, "targetConcurrentRequests");
        int64_t delay = (int64_t)iget(as, "scaleDownDelaySeconds") * 1000;
        target = target > 0 ? target : 1;
        int n = 0;
        size_t i;
        json_t *r;
        json_array_foreach(reps, i, r) n += strcmp(sget(r, "deployedModelId"), id) == 0 &&
                                           strcmp(sget(r, "state"), "DRAINING") != 0;
        pthread_mutex_lock(&c->rt_lock);
        struct endpoint_rt_dep *d = endpoint_rt_find(c, key, id);
        int peak = d ? d->peak : 0;
        int64_t busy = d ? d->busy_ms : now;
        if (d)
            d->peak = d->running;
        pthread_mutex_unlock(&c->rt_lock);
        int need = (peak + target - 1) / target;
        int want = need < lo ? lo : need > hi ? hi : need;
        struct cluster_cache *x = cache_get(c, cc, ncc, sget(dep, "cluster"));
        if (!x || !x->ok)
            continue;
        if (want > n) {
            for (int k = n; k < want; k++) {
                mtc_error_t err = {""};
                if (endpoint_replica_start(c, e, dep, x->conf, &err) < 0) {
                    char msg[600];
                    snprintf(msg, sizeof(msg), "endpoint %s: deployed model %s: %s", e->name, id,
                             err.text);
                    store_event_add(c->cfg.store, x->id, "ENDPOINT_REPLICA_FAILED", NULL, msg);
                    break;
                }
            }
            busy = now;
        } else if (need >= n || n <= lo) {
            busy = now;
        } else if (now - busy >= delay || n > hi) {
            /* one down per idle period: a starting replica first (stopped now),
             * else the newest ready one, which drains first (no new requests;
             * stopped once those it has are done) */
            size_t victim = (size_t)-1, starting = (size_t)-1;
            json_array_foreach(reps, i, r)
            {
                if (strcmp(sget(r, "deployedModelId"), id))
                    continue;
                if (strcmp(sget(r, "state"), "STARTING") == 0)
                    starting = i;
                else if (strcmp(sget(r, "state"), "READY") == 0)
                    victim = i;
            }
            if (starting != (size_t)-1) {
                endpoint_replica_stop(c, reps, starting, x->conf);
            } else if (victim != (size_t)-1) {
                r = json_array_get(reps, victim);
                json_object_set_new(r, "state", json_string("DRAINING"));
                json_object_set_new(r, "drainMs", json_integer(now));
            }
            busy = now;
        }
        pthread_mutex_lock(&c->rt_lock);
        if ((d = endpoint_rt_find(c, key, id)))
            d->busy_ms = busy;
        pthread_mutex_unlock(&c->rt_lock);
    }
    if (!json_equal(before, e->status))
        store_endpoint_put(c->cfg.store, e);
    json_decref(before);
    endpoint_rt_rebuild(c, key, e);
}

static void tick(struct endpoint_ctl *c)
{
    int n = 0;
    struct store_endpoint *all = store_endpoint_list(c->cfg.store, NULL, NULL, NULL, 1000, &n);
    struct cluster_cache cc[16];
    int ncc = 0;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < n; i++) {
        /* re-read under the lock: a mutation may have come between */
        struct store_endpoint e;
        if (store_endpoint_get(c->cfg.store, all[i].project, all[i].location, all[i].name, &e) ==
            0) {
            tick_endpoint(c, &e, cc, &ncc);
            store_endpoint_release(&e);
        }
        store_endpoint_release(&all[i]);
    }
    pthread_mutex_unlock(&c->lock);
    free(all);
    for (int i = 0; i < ncc; i++)
        json_decref(cc[i].jobs);
}

/* ticks completed in this process (mtc_endpoint_ticks_total) */
static atomic_llong ticks_done;

long long endpoint_ticks(void)
{
    return atomic_load(&ticks_done);
}

static void *loop(void *arg)
{
    struct endpoint_ctl *c = arg;
    int ms = c->cfg.tick_ms > 0 ? c->cfg.tick_ms : DEF_TICK_MS;
    pthread_mutex_lock(&c->wake_lock);
    while (!c->stop) {
        pthread_mutex_unlock(&c->wake_lock);
        tick(c);
        atomic_fetch_add(&ticks_done, 1);
        pthread_mutex_lock(&c->wake_lock);
        if (c->stop)
            break;
        struct timespec ts = mtc_deadline_ms(ms);
        pthread_cond_timedwait(&c->wake, &c->wake_lock, &ts);
    }
    pthread_mutex_unlock(&c->wake_lock);
    return NULL;
}

void endpoint_kick(struct endpoint_ctl *c)
{
    pthread_mutex_lock(&c->wake_lock);
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->wake_lock);
}

struct endpoint_ctl *endpoint_ctl_create(const struct endpoint_config *cfg, mtc_error_t *err)
{
    struct endpoint_ctl *c = calloc(1, sizeof(*c));
    if (!c) {
        errprintf(err, "out of memory");
        return NULL;
    }
    c->cfg = *cfg;
    snprintf(c->home, sizeof(c->home), "%s", cfg->home);
    snprintf(c->serve, sizeof(c->serve), "%s", cfg->serve ? cfg->serve : "");
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->rt_lock, NULL);
    pthread_mutex_init(&c->wake_lock, NULL);
    pthread_cond_init(&c->wake, NULL);
    return c;
}

void endpoint_ctl_load(struct endpoint_ctl *c)
{
    int n = 0;
    struct store_endpoint *all = store_endpoint_list(c->cfg.store, NULL, NULL, NULL, 1000, &n);
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < n; i++) {
        char key[200];
        endpoint_key(key, sizeof(key), all[i].project, all[i].location, all[i].name);
        endpoint_rt_rebuild(c, key, &all[i]);
        store_endpoint_release(&all[i]);
    }
    pthread_mutex_unlock(&c->lock);
    free(all);
}

int endpoint_ctl_start(struct endpoint_ctl *c, mtc_error_t *err)
{
    endpoint_ctl_load(c);
    if (pthread_create(&c->thread, NULL, loop, c) != 0)
        return errprintf(err, "cannot start the endpoints controller: %s", strerror(errno));
    c->started = 1;
    return 0;
}

void endpoint_ctl_destroy(struct endpoint_ctl *c)
{
    if (!c)
        return;
    if (c->started) {
        pthread_mutex_lock(&c->wake_lock);
        c->stop = 1;
        pthread_cond_signal(&c->wake);
        pthread_mutex_unlock(&c->wake_lock);
        pthread_join(c->thread, NULL);
    }
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->rt_lock);
    pthread_mutex_destroy(&c->wake_lock);
    pthread_cond_destroy(&c->wake);
    free(c);
}
