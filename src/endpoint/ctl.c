/* ctl: the endpoints controller. One thread, every tick: for each endpoint,
 * each replica (a Slurm job of mtc-serve) is checked — its job still in the
 * queue, its address once it listens (the node's NodeAddr and the port
 * mtc-serve prints into the job's log), /health — and each deployed model is
 * scaled between min and max replicas on the most requests it had running
 * since the last tick (up at once, down one replica per idle period). The
 * routing table (ready replicas and the split) lives in memory for
 * endpoint_pick; the store holds the spec and the replicas, so a restarted
 * mtcd adopts them. */
#include "endpoint/internal.h"
#include "cluster/cluster.h"
#include "registry/registry.h"
#include "slurm/slurm.h"

#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEF_TICK_MS 500
#define STARTUP_MS (180 * 1000) /* a replica not ready by then is replaced */
#define HEALTH_FAILS 3          /* failed /health checks in a row that replace a ready replica */
#define HEALTH_GRACE_MS                                                                            \
    10000 /* ... over at least this long: a replica starved of CPU for a                           \
           * moment (a busy node) is not one that hangs */
#define MAX_DEPS 256
#define DRAIN_MS (60 * 1000)    /* a draining replica is stopped by then, requests or not */

struct rt_rep {
    char id[16];
    char address[80];
    int running;  /* requests now */
    int draining; /* scaled down: no new requests, stopped when running is 0 */
};
struct rt_dep {
    char key[200];
    char id[16];
    char model[128]; /* modelVersion: the replicas' --served-name */
    int weight, cur; /* the split, and smooth weighted round robin's counter */
    int running, peak;
    int64_t busy_ms; /* last time every replica it has was needed */
    unsigned rr;
    int nrep;
    struct rt_rep rep[ENDPOINT_MAX_REPLICAS];
};

struct endpoint_ctl {
    struct endpoint_config cfg;
    char home[PATH_MAX], serve[PATH_MAX];
    pthread_mutex_t lock;    /* mutations and ticks: the store's endpoints */
    pthread_mutex_t rt_lock; /* deps[] */
    struct rt_dep deps[MAX_DEPS];
    int ndeps;
    pthread_t thread;
    int started;
    pthread_mutex_t wake_lock;
    pthread_cond_t wake;
    int stop;
};

static json_t *jget(const json_t *o, const char *k)
{
    return json_object_get(o, k);
}
static const char *sget(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}
static int iget(const json_t *o, const char *k)
{
    return (int)json_integer_value(json_object_get(o, k));
}

static void key_of(char *buf, size_t len, const char *p, const char *l, const char *n)
{
    snprintf(buf, len, "%s/%s/%s", p, l, n);
}

/* ---- clusters: their slurm.conf, whether on hosts ---- */

static int cluster_conf(struct endpoint_ctl *c, const char *cluster, char *conf, size_t len,
                        mtc_error_t *err)
{
    char *env = endpoint_cluster_env(&c->cfg, cluster, err);
    if (!env)
        return -1;
    const char *p = strstr(env, "export SLURM_CONF='");
    int rc = -1;
    if (p) {
        p += strlen("export SLURM_CONF='");
        size_t n = strcspn(p, "'\n");
        if (n > 0 && n < len) {
            snprintf(conf, len, "%.*s", (int)n, p);
            rc = 0;
        }
    }
    if (rc < 0)
        errprintf(err, "cluster %s: no slurm.conf in its environment", cluster);
    free(env);
    return rc;
}

/* ---- replicas ---- */

static int start_replica(struct endpoint_ctl *c, struct store_endpoint *e, const json_t *dep,
                         const char *conf, mtc_error_t *err)
{
    char dir[PATH_MAX], logdir[PATH_MAX], script[PATH_MAX + 32], logf[PATH_MAX + 32], rid[16],
        job[32];
    /* the placement: mtc-serve and the logs on the node's side (on hosts:
     * the copy on every host, the shared storage) */
    struct endpoint_place pl;
    if (endpoint_place_get(&c->cfg, sget(dep, "cluster"), c->serve, &pl, err) <
        0)
        return -1;
    /* the script stays here (sbatch reads it here), the log is written on the node */
    int n = snprintf(dir, sizeof(dir), "%s/endpoints/%s/%s/%s", c->home, e->project, e->location,
                     e->name);
    if (n < 0 || (size_t)n >= sizeof(dir) ||
        endpoint_place_logdir(&pl, c->home, e->project, e->location, e->name, logdir,
                              sizeof(logdir)) < 0)
        return errprintf(err, "the replica's directory: path too long");
    if (mtc_mkdir_p(dir, 0700) < 0 || mtc_mkdir_p(logdir, 0700) < 0)
        return errprintf(err, "%s: %s", mtc_path_exists(dir) ? logdir : dir, strerror(errno));
    int next = iget(e->status, "nextReplica");
    next = next > 0 ? next : 1;
    snprintf(rid, sizeof(rid), "r%d", next);
    json_object_set_new(e->status, "nextReplica", json_integer(next + 1));
    snprintf(script, sizeof(script), "%s/%s.sh", dir, rid);
    snprintf(logf, sizeof(logf), "%s/%s.log", logdir, rid);
    const char *art = sget(dep, "artifact"), *part = sget(dep, "partition");
    /* every value is a checked name or a path under mtc's home or the
     * experiment root without a quote */
    if (strchr(art, '\'') || strchr(dir, '\'') || strchr(logdir, '\'') || strchr(pl.serve, '\''))
        return errprintf(err, "a path holds a quote: cannot write the replica's script");
    /* loopback on the local provider (its nodes are this host's processes),
     * every interface on hosts (reached at the node's NodeAddr) */
    if (mtc_write_file_fmt(script, 0700,
                           "#!/bin/bash\n"
                           "# replica %s of deployed model %s of endpoint %s (written by mtcd)\n"
                           "#SBATCH --job-name=mtc-endpoint-%s\n"
                           "#SBATCH --output='%s'\n"
                           "#SBATCH --nodes=1\n"
                           "#SBATCH --ntasks=1\n"
                           "%s%s%s"
                           "exec '%s' --model '%s' --listen %s:0 --served-name '%s'\n",
                           rid, sget(dep, "id"), e->name, e->name, logf,
                           *part ? "#SBATCH --partition=" : "", part, *part ? "\n" : "", pl.serve,
                           art, pl.hosts ? "0.0.0.0" : "127.0.0.1", sget(dep, "modelVersion")) < 0)
        return errprintf(err, "%s: %s", script, strerror(errno));
    char *out = NULL;
    if (slurm_submit(conf, script, job, &out) < 0) {
        errprintf(err, "sbatch: %.200s", out ? out : "failed");
        free(out);
        return -1;
    }
    free(out);
    json_t *reps = jget(e->status, "replicas");
    json_array_append_new(reps, json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "id", rid,
                                          "deployedModelId", sget(dep, "id"), "slurmJobId", job,
                                          "state", "STARTING", "startMs",
                                          (json_int_t)mtc_now_ms(), "log", logf));
    return 0;
}

/* The port mtc-serve printed ("mtc-serve: serving NAME on HOST:PORT"), or 0. */
static int log_port(const char *logf)
{
    char *text = mtc_read_file(logf, NULL);
    int port = 0;
    const char *p = text ? strstr(text, "mtc-serve: serving ") : NULL;
    if (p) {
        size_t n = strcspn(p, "\n");
        const char *colon = memrchr(p, ':', n);
        if (colon)
            port = atoi(colon + 1);
    }
    free(text);
    return port > 0 && port < 65536 ? port : 0;
}

/* HOST:PORT of a running replica: its node's NodeAddr and the port in its log. */
static int replica_address(const char *conf, const json_t *r, char *buf, size_t len)
{
    int port = log_port(sget(r, "log"));
    if (!port)
        return -1;
    json_t *nodes = slurm_job_nodes(conf, sget(r, "slurmJobId"), NULL);
    const char *node = json_string_value(json_array_get(nodes, 0));
    char addr[64] = "";
    if (node)
        slurm_node_get(conf, node, "NodeAddr", addr, sizeof(addr));
    json_decref(nodes);
    if (!*addr)
        return -1;
    snprintf(buf, len, "%s:%d", addr, port);
    return 0;
}

static size_t discard(char *p, size_t s, size_t n, void *u)
{
    (void)p, (void)u;
    return s * n;
}

/* GET /health answers 200 within 1 s. */
static int healthy(const char *address)
{
    CURL *h = curl_easy_init();
    if (!h)
        return 0;
    char url[128];
    snprintf(url, sizeof(url), "http://%s/health", address);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 1000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    long code = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    return code == 200;
}

static int job_listed(const json_t *jobs, const char *job)
{
    size_t i;
    json_t *j;
    json_array_foreach((json_t *)jobs, i, j) if (strcmp(json_string_value(j), job) == 0) return 1;
    return 0;
}

static json_t *find_id(const json_t *arr, const char *id)
{
    size_t i;
    json_t *d;
    json_array_foreach((json_t *)arr, i, d) if (strcmp(sget(d, "id"), id) == 0) return d;
    return NULL;
}

static void replica_event(struct endpoint_ctl *c, const struct store_endpoint *e, const json_t *r,
                          const char *cluster, const char *type, const char *why)
{
    char msg[400];
    snprintf(msg, sizeof(msg), "endpoint %s: replica %s (job %s) of deployed model %s: %s",
             e->name, sget(r, "id"), sget(r, "slurmJobId"), sget(r, "deployedModelId"), why);
    store_event_add(c->cfg.store, cluster, type, NULL, msg);
    log_msg(LOG_INFO, "%s", msg);
}

/* ---- the routing table ---- */

static struct rt_dep *rt_find(struct endpoint_ctl *c, const char *key, const char *id)
{
    for (int i = 0; i < c->ndeps; i++)
        if (strcmp(c->deps[i].key, key) == 0 && strcmp(c->deps[i].id, id) == 0)
            return &c->deps[i];
    return NULL;
}

/* Requests running on replica id of deployed model dep now. */
static int rt_running(struct endpoint_ctl *c, const char *key, const char *dep, const char *id)
{
    int n = 0;
    pthread_mutex_lock(&c->rt_lock);
    struct rt_dep *d = rt_find(c, key, dep);
    for (int k = 0; d && k < d->nrep; k++)
        if (strcmp(d->rep[k].id, id) == 0)
            n = d->rep[k].running;
    pthread_mutex_unlock(&c->rt_lock);
    return n;
}

/* Rebuild key's entries from the stored spec and status: ready replicas with
 * their addresses, the split's weights; running counts carry over by id. */
static void rt_rebuild(struct endpoint_ctl *c, const char *key, const struct store_endpoint *e)
{
    pthread_mutex_lock(&c->rt_lock);
    struct rt_dep old[ENDPOINT_MAX_DEPLOYED];
    int nold = 0;
    for (int i = 0; i < c->ndeps;) {
        if (strcmp(c->deps[i].key, key) == 0) {
            if (nold < ENDPOINT_MAX_DEPLOYED)
                old[nold++] = c->deps[i];
            c->deps[i] = c->deps[--c->ndeps];
        } else {
            i++;
        }
    }
    json_t *deps = e ? jget(e->spec, "deployedModels") : NULL, *d;
    json_t *split = e ? jget(e->spec, "trafficSplit") : NULL;
    size_t i;
    json_array_foreach(deps, i, d)
    {
        if (c->ndeps >= MAX_DEPS)
            break;
        struct rt_dep *n = &c->deps[c->ndeps++];
        memset(n, 0, sizeof(*n));
        snprintf(n->key, sizeof(n->key), "%s", key);
        snprintf(n->id, sizeof(n->id), "%s", sget(d, "id"));
        snprintf(n->model, sizeof(n->model), "%s", sget(d, "modelVersion"));
        n->weight = iget(split, n->id);
        n->busy_ms = mtc_now_ms();
        struct rt_dep *o = NULL;
        for (int k = 0; k < nold; k++)
            if (strcmp(old[k].id, n->id) == 0)
                o = &old[k];
        if (o)
            n->cur = o->cur, n->running = o->running, n->peak = o->peak, n->busy_ms = o->busy_ms,
            n->rr = o->rr;
        size_t j;
        json_t *r;
        json_array_foreach(jget(e->status, "replicas"), j, r)
        {
            int draining = strcmp(sget(r, "state"), "DRAINING") == 0;
            if (strcmp(sget(r, "deployedModelId"), n->id) ||
                (strcmp(sget(r, "state"), "READY") && !draining) ||
                n->nrep >= ENDPOINT_MAX_REPLICAS)
                continue;
            struct rt_rep *p = &n->rep[n->nrep++];
            memset(p, 0, sizeof(*p));
            p->draining = draining;
            snprintf(p->id, sizeof(p->id), "%s", sget(r, "id"));
            snprintf(p->address, sizeof(p->address), "%s", sget(r, "address"));
            for (int k = 0; o && k < o->nrep; k++)
                if (strcmp(o->rep[k].id, p->id) == 0)
                    p->running = o->rep[k].running;
        }
    }
    pthread_mutex_unlock(&c->rt_lock);
}

int endpoint_pick(struct endpoint_ctl *c, const char *project, const char *location,
                  const char *name, char tried[][16], int ntried, struct endpoint_pick *p,
                  mtc_error_t *err)
{
    char key[200];
    key_of(key, sizeof(key), project, location, name);
    pthread_mutex_lock(&c->rt_lock);
    struct rt_dep *cand[ENDPOINT_MAX_DEPLOYED];
    int nc = 0, known = 0, total = 0;
    for (int i = 0; i < c->ndeps && nc < ENDPOINT_MAX_DEPLOYED; i++) {
        struct rt_dep *d = &c->deps[i];
        if (strcmp(d->key, key))
            continue;
        known = 1;
        int usable = 0;
        for (int k = 0; k < d->nrep && !usable; k++) {
            usable = !d->rep[k].draining;
            for (int t = 0; t < ntried; t++)
                if (strcmp(tried[t], d->rep[k].id) == 0)
                    usable = 0;
        }
        if (d->weight > 0 && usable)
            cand[nc++] = d, total += d->weight;
    }
    if (nc == 0) {
        pthread_mutex_unlock(&c->rt_lock);
        errno = known ? EAGAIN : ENOENT;
        if (!known)
            return errprintf(err, "endpoint %s has no deployed model (or does not exist)", name);
        return errprintf(err, "endpoint %s: no ready replica%s", name,
                         ntried ? " left to retry on" : " yet");
    }
    /* smooth weighted round robin (nginx's): exact shares, interleaved */
    struct rt_dep *best = NULL;
    for (int i = 0; i < nc; i++) {
        cand[i]->cur += cand[i]->weight;
        if (!best || cand[i]->cur > best->cur)
            best = cand[i];
    }
    best->cur -= total;
    /* the replica with the fewest requests running, round robin among equals */
    struct rt_rep *rep = NULL;
    unsigned at = 0;
    for (int k = 0; k < best->nrep; k++) {
        unsigned idx = (best->rr + (unsigned)k) % (unsigned)best->nrep;
        struct rt_rep *r = &best->rep[idx];
        int skip = r->draining;
        for (int t = 0; t < ntried; t++)
            if (strcmp(tried[t], r->id) == 0)
                skip = 1;
        if (!skip && (!rep || r->running < rep->running))
            rep = r, at = idx;
    }
    best->rr = at + 1; /* ties go round, from the one after the last chosen */
    rep->running++;
    best->running++;
    if (best->running > best->peak)
        best->peak = best->running;
    snprintf(p->key, sizeof(p->key), "%s", key);
    snprintf(p->deployed, sizeof(p->deployed), "%s", best->id);
    snprintf(p->replica, sizeof(p->replica), "%s", rep->id);
    snprintf(p->address, sizeof(p->address), "%s", rep->address);
    snprintf(p->model, sizeof(p->model), "%s", best->model);
    pthread_mutex_unlock(&c->rt_lock);
    return 0;
}

void endpoint_done(struct endpoint_ctl *c, const struct endpoint_pick *p, int failed)
{
    pthread_mutex_lock(&c->rt_lock);
    struct rt_dep *d = rt_find(c, p->key, p->deployed);
    for (int k = 0; d && k < d->nrep; k++) {
        if (strcmp(d->rep[k].id, p->replica))
            continue;
        if (d->rep[k].running > 0)
            d->rep[k].running--;
        if (failed) /* out of rotation until the next tick's health check */
            d->rep[k] = d->rep[--d->nrep];
        break;
    }
    if (d && d->running > 0)
        d->running--;
    pthread_mutex_unlock(&c->rt_lock);
}

/* ---- the tick ---- */

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
    x->ok = cluster_conf(c, id, x->conf, sizeof(x->conf), &err) == 0;
    if (x->ok)
        x->jobs = slurm_jobs(x->conf, NULL);
    return x;
}

static void stop_replica(struct endpoint_ctl *c, json_t *reps, size_t i, const char *conf)
{
    json_t *r = json_array_get(reps, i);
    if (conf)
        slurm_job_cancel(conf, sget(r, "slurmJobId"), NULL);
    (void)c;
    json_array_remove(reps, i);
}

static void tick_endpoint(struct endpoint_ctl *c, struct store_endpoint *e,
                          struct cluster_cache *cc, int *ncc)
{
    char key[200];
    key_of(key, sizeof(key), e->project, e->location, e->name);
    json_t *before = json_deep_copy(e->status);
    json_t *deps = jget(e->spec, "deployedModels");
    if (!json_is_array(jget(e->status, "replicas")))
        json_object_set_new(e->status, "replicas", json_array());
    json_t *reps = jget(e->status, "replicas");
    int64_t now = mtc_now_ms();
    for (size_t i = json_array_size(reps); i-- > 0;) {
        json_t *r = json_array_get(reps, i);
        json_t *dep = find_id(deps, sget(r, "deployedModelId"));
        const char *cluster = dep ? sget(dep, "cluster") : sget(r, "cluster");
        struct cluster_cache *x = cache_get(c, cc, ncc, cluster);
        if (!dep) {
            stop_replica(c, reps, i, x && x->ok ? x->conf : NULL);
            continue;
        }
        if (!x || !x->ok || !x->jobs)
            continue; /* the cluster does not answer now: judge nothing */
        if (!job_listed(x->jobs, sget(r, "slurmJobId"))) {
            replica_event(c, e, r, cluster, "ENDPOINT_REPLICA_LOST",
                          "its job ended; replacing it");
            json_array_remove(reps, i);
            continue;
        }
        int64_t age = now - json_integer_value(jget(r, "startMs"));
        if (strcmp(sget(r, "state"), "DRAINING") == 0) {
            if (rt_running(c, key, sget(dep, "id"), sget(r, "id")) == 0 ||
                now - json_integer_value(jget(r, "drainMs")) > DRAIN_MS)
                stop_replica(c, reps, i, x->conf);
            continue;
        }
        if (!*sget(r, "address")) {
            char addr[80];
            if (replica_address(x->conf, r, addr, sizeof(addr)) == 0)
                json_object_set_new(r, "address", json_string(addr));
        }
        int ok = *sget(r, "address") && healthy(sget(r, "address"));
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
                replica_event(c, e, r, cluster, "ENDPOINT_REPLICA_UNHEALTHY", why);
                stop_replica(c, reps, i, x->conf);
            }
        } else if (age > STARTUP_MS) {
            replica_event(c, e, r, cluster, "ENDPOINT_REPLICA_UNHEALTHY",
                          "not ready 180 s after its start; replacing it");
            stop_replica(c, reps, i, x->conf);
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
        struct rt_dep *d = rt_find(c, key, id);
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
                if (start_replica(c, e, dep, x->conf, &err) < 0) {
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
                stop_replica(c, reps, starting, x->conf);
            } else if (victim != (size_t)-1) {
                r = json_array_get(reps, victim);
                json_object_set_new(r, "state", json_string("DRAINING"));
                json_object_set_new(r, "drainMs", json_integer(now));
            }
            busy = now;
        }
        pthread_mutex_lock(&c->rt_lock);
        if ((d = rt_find(c, key, id)))
            d->busy_ms = busy;
        pthread_mutex_unlock(&c->rt_lock);
    }
    if (!json_equal(before, e->status))
        store_endpoint_put(c->cfg.store, e);
    json_decref(before);
    rt_rebuild(c, key, e);
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

static void *loop(void *arg)
{
    struct endpoint_ctl *c = arg;
    int ms = c->cfg.tick_ms > 0 ? c->cfg.tick_ms : DEF_TICK_MS;
    pthread_mutex_lock(&c->wake_lock);
    while (!c->stop) {
        pthread_mutex_unlock(&c->wake_lock);
        tick(c);
        pthread_mutex_lock(&c->wake_lock);
        if (c->stop)
            break;
        struct timespec ts = mtc_deadline_ms(ms);
        pthread_cond_timedwait(&c->wake, &c->wake_lock, &ts);
    }
    pthread_mutex_unlock(&c->wake_lock);
    return NULL;
}

static void kick(struct endpoint_ctl *c)
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
        key_of(key, sizeof(key), all[i].project, all[i].location, all[i].name);
        rt_rebuild(c, key, &all[i]);
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

/* ---- mutations ---- */


int endpoint_create(struct endpoint_ctl *c, const char *project, const char *location,
                    const char *name, const json_t *spec, mtc_error_t *err)
{
    struct store_endpoint e = {0};
    snprintf(e.project, sizeof(e.project), "%s", project);
    snprintf(e.location, sizeof(e.location), "%s", location);
    snprintf(e.name, sizeof(e.name), "%s", name);
    e.spec = json_deep_copy(spec);
    json_object_set_new(e.spec, "deployedModels", json_array());
    json_object_set_new(e.spec, "trafficSplit", json_object());
    json_object_set_new(e.spec, "nextId", json_integer(1));
    e.status = json_pack("{s:[], s:i}", "replicas", "nextReplica", 1);
    pthread_mutex_lock(&c->lock);
    int rc = store_endpoint_create(c->cfg.store, &e);
    pthread_mutex_unlock(&c->lock);
    if (rc < 0)
        errprintf(err, errno == EEXIST ? "endpoint %s already exists" : "store: cannot add %s",
                  name);
    store_endpoint_release(&e);
    return rc;
}

/* The version a reference names now (its number) and its artifact's path. */
static int resolve_model(struct endpoint_ctl *c, const char *project, const char *location,
                         const char *ref, char *version, size_t vlen, char *path, size_t plen,
                         mtc_error_t *err)
{
    if (registry_resolve(c->home, project, location, ref, -1, NULL, path, plen, err) < 0)
        return -1;
    struct registry_ref r;
    int v = 0;
    if (registry_ref_parse(ref, &r, err) < 0 ||
        registry_resolve_version(c->home, project, location, ref, &v, err) < 0)
        return -1;
    snprintf(version, vlen, "%s@%d", r.name, v);
    return 0;
}

int endpoint_deploy(struct endpoint_ctl *c, const char *project, const char *location,
                    const char *name, const json_t *deployed, const json_t *split, char id[16],
                    mtc_error_t *err)
{
    char version[128], path[PATH_MAX], conf[PATH_MAX];
    const char *cluster = sget(deployed, "cluster");
    struct store_cluster cl;
    if (store_cluster_get(c->cfg.store, cluster, &cl) < 0 || strcmp(cl.project, project) ||
        strcmp(cl.location, location)) {
        if (errno != ENOENT)
            store_cluster_release(&cl);
        errno = ENOENT;
        return errprintf(err, "deployedModel.cluster: cluster %s not found in projects/%s/locations/%s",
                         cluster, project, location);
    }
    store_cluster_release(&cl);
    struct endpoint_place pl;
    if (cluster_conf(c, cluster, conf, sizeof(conf), err) < 0) {
        errno = EBUSY;
        return -1;
    }
    if (endpoint_place_get(&c->cfg, cluster, c->serve, &pl, err) < 0)
        return -1;
    const char *part = sget(deployed, "partition");
    if (*part) {
        json_t *parts = slurm_partitions(conf, err);
        int known = parts && jget(parts, part);
        json_decref(parts);
        if (!known) {
            errno = EINVAL;
            return errprintf(err, "deployedModel.partition: cluster %s has no partition %s",
                             cluster, part);
        }
    }
    if (resolve_model(c, project, location, sget(deployed, "model"), version, sizeof(version),
                      path, sizeof(path), err) < 0) {
        char m[sizeof(err->text) + 32];
        snprintf(m, sizeof(m), "deployedModel.model: %s", err->text);
        int e = errno == ENOENT ? ENOENT : EINVAL;
        errprintf(err, "%.*s", (int)sizeof(err->text) - 1, m);
        errno = e;
        return -1;
    }
    /* on hosts the replicas read a copy on the shared storage (made here,
     * once per version: this request waits for the copy) */
    char staged[PATH_MAX] = "";
    if (pl.hosts) {
        char model[PATH_MAX];
        if (endpoint_stage(&pl, path, model, sizeof(model), staged, sizeof(staged), err) < 0) {
            errno = EBUSY;
            return -1;
        }
        snprintf(path, sizeof(path), "%s", model);
    }
    pthread_mutex_lock(&c->lock);
    struct store_endpoint e;
    int rc = -1;
    json_t *newsplit = NULL;
    if (store_endpoint_get(c->cfg.store, project, location, name, &e) < 0) {
        pthread_mutex_unlock(&c->lock);
        endpoint_unstage(c->cfg.store, staged);
        errno = ENOENT;
        return errprintf(err, "endpoint %s not found", name);
    }
    json_t *deps = jget(e.spec, "deployedModels");
    if (json_array_size(deps) >= ENDPOINT_MAX_DEPLOYED) {
        errprintf(err, "precondition: endpoint %s already has %d deployed models", name,
                  ENDPOINT_MAX_DEPLOYED);
        errno = EBUSY;
        goto out;
    }
    int next = iget(e.spec, "nextId");
    next = next > 0 ? next : 1;
    snprintf(id, 16, "d%d", next);
    json_t *d = json_deep_copy(deployed);
    char now[40];
    mtc_time_rfc3339(mtc_now_ms(), now, sizeof(now));
    json_object_set_new(d, "id", json_string(id));
    json_object_set_new(d, "modelVersion", json_string(version));
    json_object_set_new(d, "artifact", json_string(path));
    if (*staged)
        json_object_set_new(d, "staged", json_string(staged));
    json_object_set_new(d, "createTime", json_string(now));
    json_t *after = json_deep_copy(deps);
    json_array_append_new(after, d);
    if (split) {
        newsplit = endpoint_split_check(split, after, id, err);
    } else {
        newsplit = json_deep_copy(jget(e.spec, "trafficSplit"));
        json_object_set_new(newsplit, id, json_integer(json_array_size(deps) == 0 ? 100 : 0));
    }
    if (!newsplit) {
        json_decref(after);
        goto out;
    }
    json_object_set_new(e.spec, "deployedModels", after);
    json_object_set_new(e.spec, "trafficSplit", newsplit);
    json_object_set_new(e.spec, "nextId", json_integer(next + 1));
    rc = store_endpoint_put(c->cfg.store, &e);
    if (rc < 0)
        errprintf(err, "store: cannot update endpoint %s", name);
out:
    {
        char key[200];
        key_of(key, sizeof(key), project, location, name);
        if (rc == 0)
            rt_rebuild(c, key, &e);
    }
    store_endpoint_release(&e);
    pthread_mutex_unlock(&c->lock);
    if (rc == 0)
        kick(c);
    else
        endpoint_unstage(c->cfg.store, staged);
    return rc;
}

int endpoint_undeploy(struct endpoint_ctl *c, const char *project, const char *location,
                      const char *name, const char *id, const json_t *split, mtc_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    struct store_endpoint e;
    int rc = -1;
    if (store_endpoint_get(c->cfg.store, project, location, name, &e) < 0) {
        pthread_mutex_unlock(&c->lock);
        errno = ENOENT;
        return errprintf(err, "endpoint %s not found", name);
    }
    json_t *deps = jget(e.spec, "deployedModels");
    json_t *after = json_array(), *d, *newsplit = NULL;
    size_t i;
    int found = 0;
    json_array_foreach(deps, i, d)
    {
        if (strcmp(sget(d, "id"), id) == 0)
            found = 1;
        else
            json_array_append(after, d);
    }
    if (!found) {
        errno = ENOENT;
        errprintf(err, "deployedModelId %s: not deployed on endpoint %s", id, name);
        goto out;
    }
    if (split) {
        newsplit = endpoint_split_check(split, after, NULL, err);
    } else {
        newsplit = json_deep_copy(jget(e.spec, "trafficSplit"));
        int share = iget(newsplit, id);
        json_object_del(newsplit, id);
        if (json_array_size(after) == 1)
            json_object_set_new(newsplit, sget(json_array_get(after, 0), "id"), json_integer(100));
        else if (share > 0 && json_array_size(after) > 1) {
            json_decref(newsplit);
            newsplit = NULL;
            errno = EINVAL;
            errprintf(err, "trafficSplit: required: %s has %d%% of the traffic and %zu models "
                           "remain",
                      id, share, json_array_size(after));
        }
    }
    if (!newsplit)
        goto out;
    /* its replicas go now (the cluster read before deps is replaced) */
    json_t *reps = jget(e.status, "replicas");
    char conf[PATH_MAX];
    mtc_error_t e2 = {""};
    int have_conf = cluster_conf(c, sget(find_id(deps, id), "cluster"), conf, sizeof(conf), &e2) == 0;
    char staged[PATH_MAX];
    snprintf(staged, sizeof(staged), "%s", sget(find_id(deps, id), "staged"));
    json_object_set_new(e.spec, "deployedModels", json_incref(after));
    json_object_set_new(e.spec, "trafficSplit", newsplit);
    for (size_t k = json_array_size(reps); k-- > 0;)
        if (strcmp(sget(json_array_get(reps, k), "deployedModelId"), id) == 0)
            stop_replica(c, reps, k, have_conf ? conf : NULL);
    rc = store_endpoint_put(c->cfg.store, &e);
    if (rc < 0)
        errprintf(err, "store: cannot update endpoint %s", name);
    else
        endpoint_unstage(c->cfg.store, staged); /* its copy on hosts, unless another uses it */
    char key[200];
    key_of(key, sizeof(key), project, location, name);
    rt_rebuild(c, key, &e);
out:
    json_decref(after);
    store_endpoint_release(&e);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int endpoint_update(struct endpoint_ctl *c, const char *project, const char *location,
                    const char *name, const char *display, const json_t *split,
                    mtc_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    struct store_endpoint e;
    if (store_endpoint_get(c->cfg.store, project, location, name, &e) < 0) {
        pthread_mutex_unlock(&c->lock);
        errno = ENOENT;
        return errprintf(err, "endpoint %s not found", name);
    }
    int rc = -1;
    json_t *newsplit = NULL;
    if (split && !(newsplit = endpoint_split_check(split, jget(e.spec, "deployedModels"), NULL,
                                                   err)))
        goto out;
    if (newsplit)
        json_object_set_new(e.spec, "trafficSplit", newsplit);
    if (display)
        json_object_set_new(e.spec, "displayName", json_string(display));
    if ((rc = store_endpoint_put(c->cfg.store, &e)) < 0) {
        errprintf(err, "store: cannot update endpoint %s", name);
        goto out;
    }
    char key[200];
    key_of(key, sizeof(key), project, location, name);
    rt_rebuild(c, key, &e);
out:
    store_endpoint_release(&e);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int endpoint_delete(struct endpoint_ctl *c, const char *project, const char *location,
                    const char *name, mtc_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    struct store_endpoint e;
    if (store_endpoint_get(c->cfg.store, project, location, name, &e) < 0) {
        pthread_mutex_unlock(&c->lock);
        errno = ENOENT;
        return errprintf(err, "endpoint %s not found", name);
    }
    json_t *deps = jget(e.spec, "deployedModels"), *reps = jget(e.status, "replicas");
    for (size_t k = json_array_size(reps); k-- > 0;) {
        json_t *dep = find_id(deps, sget(json_array_get(reps, k), "deployedModelId"));
        char conf[PATH_MAX];
        mtc_error_t e2 = {""};
        int ok = dep && cluster_conf(c, sget(dep, "cluster"), conf, sizeof(conf), &e2) == 0;
        stop_replica(c, reps, k, ok ? conf : NULL);
    }
    int rc = store_endpoint_delete(c->cfg.store, project, location, name);
    size_t i;
    json_t *d;
    json_array_foreach(deps, i, d) if (rc == 0) endpoint_unstage(c->cfg.store, sget(d, "staged"));
    char key[200];
    key_of(key, sizeof(key), project, location, name);
    rt_rebuild(c, key, NULL);
    store_endpoint_release(&e);
    pthread_mutex_unlock(&c->lock);
    if (rc < 0)
        errprintf(err, "store: cannot delete endpoint %s", name);
    return rc;
}

json_t *endpoint_json(struct endpoint_ctl *c, const struct store_endpoint *e)
{
    char key[200], ct[40], ut[40];
    key_of(key, sizeof(key), e->project, e->location, e->name);
    mtc_time_rfc3339(e->create_ms, ct, sizeof(ct));
    mtc_time_rfc3339(e->update_ms, ut, sizeof(ut));
    json_t *o = json_pack("{s:s+++++, s:s, s:O, s:s, s:s}", "name", "projects/", e->project,
                          "/locations/", e->location, "/endpoints/", e->name, "displayName",
                          sget(e->spec, "displayName"), "trafficSplit",
                          jget(e->spec, "trafficSplit"), "createTime", ct, "updateTime", ut);
    json_t *deps = json_array(), *d;
    size_t i;
    json_array_foreach(jget(e->spec, "deployedModels"), i, d)
    {
        json_t *x = json_deep_copy(d);
        json_object_del(x, "artifact");
        json_object_del(x, "staged");
        json_t *reps = json_array(), *r;
        size_t k;
        int ready = 0, running = 0;
        json_array_foreach(jget(e->status, "replicas"), k, r)
        {
            if (strcmp(sget(r, "deployedModelId"), sget(d, "id")))
                continue;
            ready += strcmp(sget(r, "state"), "READY") == 0;
            json_array_append_new(reps, json_pack("{s:s, s:s, s:s, s:s}", "id", sget(r, "id"),
                                                  "slurmJobId", sget(r, "slurmJobId"), "state",
                                                  sget(r, "state"), "address",
                                                  sget(r, "address")));
        }
        pthread_mutex_lock(&c->rt_lock);
        struct rt_dep *rd = rt_find(c, key, sget(d, "id"));
        running = rd ? rd->running : 0;
        pthread_mutex_unlock(&c->rt_lock);
        json_object_set_new(x, "replicas", reps);
        json_object_set_new(x, "readyReplicaCount", json_integer(ready));
        json_object_set_new(x, "runningRequests", json_integer(running));
        json_array_append_new(deps, x);
    }
    json_object_set_new(o, "deployedModels", deps);
    return o;
}
