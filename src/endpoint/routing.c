/* routing: the endpoints' routing table in memory — per deployed model its
 * ready replicas with their addresses, the split's weight and the requests
 * running — rebuilt from the store after each change and tick
 * (endpoint_rt_rebuild); endpoint_pick chooses a replica for a request
 * (smooth weighted round robin by the split, then the least busy replica),
 * endpoint_done ends it; endpoint_json shows an endpoint with its replicas. */
#include "endpoint/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct endpoint_rt_dep *endpoint_rt_find(struct endpoint_ctl *c, const char *key, const char *id)
{
    for (int i = 0; i < c->ndeps; i++)
        if (strcmp(c->deps[i].key, key) == 0 && strcmp(c->deps[i].id, id) == 0)
            return &c->deps[i];
    return NULL;
}

/* Requests running on replica id of deployed model dep now. */
int endpoint_rt_running(struct endpoint_ctl *c, const char *key, const char *dep, const char *id)
{
    int n = 0;
    pthread_mutex_lock(&c->rt_lock);
    struct endpoint_rt_dep *d = endpoint_rt_find(c, key, dep);
    for (int k = 0; d && k < d->nrep; k++)
        if (strcmp(d->rep[k].id, id) == 0)
            n = d->rep[k].running;
    pthread_mutex_unlock(&c->rt_lock);
    return n;
}

/* Rebuild key's entries from the stored spec and status: ready replicas with
 * their addresses, the split's weights; running counts carry over by id. */
void endpoint_rt_rebuild(struct endpoint_ctl *c, const char *key, const struct store_endpoint *e)
{
    pthread_mutex_lock(&c->rt_lock);
    struct endpoint_rt_dep old[ENDPOINT_MAX_DEPLOYED];
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
        if (c->ndeps >= ENDPOINT_RT_DEPS)
            break;
        struct endpoint_rt_dep *n = &c->deps[c->ndeps++];
        memset(n, 0, sizeof(*n));
        snprintf(n->key, sizeof(n->key), "%s", key);
        snprintf(n->id, sizeof(n->id), "%s", sget(d, "id"));
        snprintf(n->model, sizeof(n->model), "%s", sget(d, "modelVersion"));
        n->weight = iget(split, n->id);
        n->busy_ms = mtc_now_ms();
        struct endpoint_rt_dep *o = NULL;
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
            struct endpoint_rt_rep *p = &n->rep[n->nrep++];
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
    endpoint_key(key, sizeof(key), project, location, name);
    pthread_mutex_lock(&c->rt_lock);
    struct endpoint_rt_dep *cand[ENDPOINT_MAX_DEPLOYED];
    int nc = 0, known = 0, total = 0;
    for (int i = 0; i < c->ndeps && nc < ENDPOINT_MAX_DEPLOYED; i++) {
        struct endpoint_rt_dep *d = &c->deps[i];
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
    struct endpoint_rt_dep *best = NULL;
    for (int i = 0; i < nc; i++) {
        cand[i]->cur += cand[i]->weight;
        if (!best || cand[i]->cur > best->cur)
            best = cand[i];
    }
    best->cur -= total;
    /* the replica with the fewest requests running, round robin among equals */
    struct endpoint_rt_rep *rep = NULL;
    unsigned at = 0;
    for (int k = 0; k < best->nrep; k++) {
        unsigned idx = (best->rr + (unsigned)k) % (unsigned)best->nrep;
        struct endpoint_rt_rep *r = &best->rep[idx];
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
    struct endpoint_rt_dep *d = endpoint_rt_find(c, p->key, p->deployed);
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

json_t *endpoint_json(struct endpoint_ctl *c, const struct store_endpoint *e)
{
    char key[200], ct[40], ut[40];
    endpoint_key(key, sizeof(key), e->project, e->location, e->name);
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
                                                  sget(r, "state"), "address", sget(r, "address")));
        }
        pthread_mutex_lock(&c->rt_lock);
        struct endpoint_rt_dep *rd = endpoint_rt_find(c, key, sget(d, "id"));
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
