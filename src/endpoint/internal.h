/* internal: what the endpoint module's files (the controller: ctl.c,
 * replica.c, routing.c, mutate.c; place.c) share. Not part of the module's
 * interface. */
#ifndef MTC_ENDPOINT_INTERNAL_H
#define MTC_ENDPOINT_INTERNAL_H

#include "endpoint/endpoint.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* ---- the controller's state (ctl.c) and the routing table (routing.c) ---- */

#define ENDPOINT_RT_DEPS 256 /* deployed models in the routing table, all endpoints */

struct endpoint_rt_rep {
    char id[16];
    char address[80];
    int running;  /* requests now */
    int draining; /* scaled down: no new requests, stopped when running is 0 */
};
struct endpoint_rt_dep {
    char key[200];
    char id[16];
    char model[128]; /* modelVersion: the replicas' --served-name */
    int weight, cur; /* the split, and smooth weighted round robin's counter */
    int running, peak;
    int64_t busy_ms; /* last time every replica it has was needed */
    unsigned rr;
    int nrep;
    struct endpoint_rt_rep rep[ENDPOINT_MAX_REPLICAS];
};

struct endpoint_ctl {
    struct endpoint_config cfg;
    char home[PATH_MAX], serve[PATH_MAX];
    pthread_mutex_t lock;    /* mutations and ticks: the store's endpoints */
    pthread_mutex_t rt_lock; /* deps[] */
    struct endpoint_rt_dep deps[ENDPOINT_RT_DEPS];
    int ndeps;
    pthread_t thread;
    int started;
    pthread_mutex_t wake_lock;
    pthread_cond_t wake;
    int stop;
};

/* A member of o: as is, a string ("" when absent or not one), an int. */
static inline json_t *jget(const json_t *o, const char *k)
{
    return json_object_get(o, k);
}
static inline const char *sget(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}
static inline int iget(const json_t *o, const char *k)
{
    return (int)json_integer_value(json_object_get(o, k));
}
/* An endpoint's key in the routing table: project/location/name. */
static inline void endpoint_key(char *buf, size_t len, const char *p, const char *l, const char *n)
{
    snprintf(buf, len, "%s/%s/%s", p, l, n);
}
/* The member of arr (deployed models, replicas) whose "id" is id, or NULL. */
static inline json_t *endpoint_find_id(const json_t *arr, const char *id)
{
    size_t i;
    json_t *d;
    json_array_foreach((json_t *)arr, i, d) if (strcmp(sget(d, "id"), id) == 0) return d;
    return NULL;
}

/* Wake the controller's thread for a tick now (ctl.c). */
void endpoint_kick(struct endpoint_ctl *c);

/* Replicas (replica.c). endpoint_replica_start: write a replica's script
 * for deployed model dep and sbatch it on the cluster of slurm.conf conf,
 * the replica STARTING in e's status; 0, or -1 + err.
 * endpoint_replica_address: HOST:PORT of a running replica r, 0/-1 (not
 * listening yet). endpoint_replica_healthy: its GET /health answers 200
 * within 1 s. endpoint_replica_event: an event of the cluster (and a log
 * line) about replica r. endpoint_replica_stop: scancel replica i of reps
 * (conf NULL: the cluster does not answer; the job is left) and remove it. */
int endpoint_replica_start(struct endpoint_ctl *c, struct store_endpoint *e, const json_t *dep,
                           const char *conf, mtc_error_t *err);
int endpoint_replica_address(const char *conf, const json_t *r, char *buf, size_t len);
int endpoint_replica_healthy(const char *address);
void endpoint_replica_event(struct endpoint_ctl *c, const struct store_endpoint *e, const json_t *r,
                            const char *cluster, const char *type, const char *why);
void endpoint_replica_stop(struct endpoint_ctl *c, json_t *reps, size_t i, const char *conf);

/* The routing table (routing.c; callers hold c->rt_lock for rt_find).
 * endpoint_rt_find: deployed model id of endpoint key, or NULL.
 * endpoint_rt_running: requests running on replica id of deployed model dep
 * now. endpoint_rt_rebuild: key's entries from the stored spec and status
 * (e NULL: none); running counts carry over by id. */
struct endpoint_rt_dep *endpoint_rt_find(struct endpoint_ctl *c, const char *key, const char *id);
int endpoint_rt_running(struct endpoint_ctl *c, const char *key, const char *dep, const char *id);
void endpoint_rt_rebuild(struct endpoint_ctl *c, const char *key, const struct store_endpoint *e);

/* ---- placement (place.c) ---- */

/* Where the replicas of a model deployed on a cluster run (place.c). hosts:
 * the cluster is on hosts; serve: mtc-serve as the replicas' nodes see it;
 * root: the cluster's shared experiment root (hosts only, else ""). */
struct endpoint_place {
    int hosts;
    char serve[PATH_MAX];
    char root[PATH_MAX];
};
/* The cluster's environment through cfg->cluster_env, or NULL + err (place.c). */
char *endpoint_cluster_env(const struct endpoint_config *cfg, const char *cluster,
                           mtc_error_t *err);
/* The cluster's slurm.conf (SLURM_CONF in its environment) into conf, 0, or
 * -1 + err (place.c). */
int endpoint_cluster_conf(const struct endpoint_config *cfg, const char *cluster, char *conf,
                          size_t len, mtc_error_t *err);
/* The placement on cluster (local_serve: mtc-serve beside mtcd). 0, or -1 +
 * errno (ENOENT: no such cluster; EBUSY: what the replicas need is missing:
 * mtc-serve, or on hosts the experiment root) + err. */
int endpoint_place_get(const struct endpoint_config *cfg, const char *cluster,
                       const char *local_serve, struct endpoint_place *pl, mtc_error_t *err);
/* The directory of an endpoint's replica scripts' logs: <home>/endpoints/P/L/N
 * on a local cluster, <root>/.mtc/endpoints/P/L/N on hosts. 0/-1 (too long). */
int endpoint_place_logdir(const struct endpoint_place *pl, const char *home, const char *project,
                          const char *location, const char *name, char *buf, size_t len);
/* On hosts: the artifact art copied (once) to the shared storage; model gets
 * what --model names there, staged the copy's directory. 0, or -1 + err. */
int endpoint_stage(const struct endpoint_place *pl, const char *art, char *model, size_t mlen,
                   char *staged, size_t slen, mtc_error_t *err);
/* Remove a staged copy no deployed model of any endpoint names any more. */
void endpoint_unstage(struct store *st, const char *staged);

#endif
