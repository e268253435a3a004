/* endpoint: inference endpoints — the request tables (an endpoint, a deployed
 * model, the traffic split), and the controller that runs each deployed
 * model's replicas as Slurm jobs of mtc-serve, checks their health, scales
 * them between min and max on load, replaces dead ones, and picks the replica
 * for each request mtcd routes (weighted round robin by the split). */
#ifndef MTC_ENDPOINT_H
#define MTC_ENDPOINT_H

#include "common/common.h"
#include "store/store.h"

#include <jansson.h>

#define ENDPOINT_MAX_REPLICAS 32 /* maxReplicaCount's bound */
#define ENDPOINT_MAX_DEPLOYED 8  /* deployed models per endpoint */
#define ENDPOINT_REPLICA_CONNS 64 /* a replica's connections, all from mtcd */
#define ENDPOINT_REPLICA_REUSE_S 5 /* a kept connection's idle time, under mtc-serve's 10 s */

/* ---- requests (request.c) ---- */

/* The body of POST .../endpoints ({displayName}) in canonical form, or NULL + err. */
json_t *endpoint_spec_parse(const json_t *body, mtc_error_t *err);
/* deployModel's deployedModel in canonical form ({model, cluster, partition,
 * minReplicaCount, maxReplicaCount, autoscaling{targetConcurrentRequests,
 * scaleDownDelaySeconds}}), or NULL + err ("deployedModel.maxReplicaCount:
 * ..."). */
json_t *endpoint_deployed_parse(const json_t *in, mtc_error_t *err);
/* A trafficSplit ({deployedModelId: percent}) over the ids of deployed (an
 * array of deployed models; new_id: what "0" names, NULL: none): every key
 * a deployed id, integers 0..100 summing to 100 (or {} when deployed is
 * empty). Returns the split with every deployed id (absent: 0), or NULL + err. */
json_t *endpoint_split_check(const json_t *split, const json_t *deployed, const char *new_id,
                             mtc_error_t *err);

/* ---- the controller (ctl.c, replica.c, routing.c, mutate.c) ---- */

/* A cluster's environment as `mtc env` prints it ("export K='V'" lines:
 * SLURM_CONF, MTC_SERVE ...), malloc'd, or NULL + err. mtcd passes the
 * control plane's (control_env); the endpoint module knows no more of it. */
typedef char *(*endpoint_env_fn)(void *arg, const char *cluster, mtc_error_t *err);

struct endpoint_config {
    struct store *store;         /* not owned */
    endpoint_env_fn cluster_env; /* clusters' SLURM_CONF, MTC_SERVE */
    void *env_arg;
    const char *home;        /* $MTC_HOME: the registry, replicas' logs under endpoints/ */
    const char *serve;       /* mtc-serve (absolute path) */
    int tick_ms;             /* health/scaling period (0 → 500) */
};
struct endpoint_ctl;
struct endpoint_ctl *endpoint_ctl_create(const struct endpoint_config *cfg, mtc_error_t *err);
/* The routing table from the store as it is (READY replicas as recorded):
 * what a restarted mtcd routes to before its first check. */
void endpoint_ctl_load(struct endpoint_ctl *c);
/* Start the controller's thread (replicas stored by a previous mtcd are adopted). */
int endpoint_ctl_start(struct endpoint_ctl *c, mtc_error_t *err);
/* Stop the thread (replicas keep running: the next mtcd adopts them). */
void endpoint_ctl_destroy(struct endpoint_ctl *c);
/* Ticks (routing, health and autoscaling passes over every endpoint) the
 * controller has completed in this process (mtc_endpoint_ticks_total). */
long long endpoint_ticks(void);

/* Mutations, serialized with the controller. 0, or -1 + errno + err:
 * ENOENT (endpoint, deployed model, model or cluster absent), EEXIST,
 * EINVAL (bad input), EBUSY (precondition). */
int endpoint_create(struct endpoint_ctl *c, const char *project, const char *location,
                    const char *name, const json_t *spec, mtc_error_t *err);
/* deployed (canonical) joins the endpoint as a new deployed model (its id into
 * id); split (may be NULL: unchanged, the first model gets 100) is checked. */
int endpoint_deploy(struct endpoint_ctl *c, const char *project, const char *location,
                    const char *name, const json_t *deployed, const json_t *split,
                    char id[16], mtc_error_t *err);
int endpoint_undeploy(struct endpoint_ctl *c, const char *project, const char *location,
                      const char *name, const char *id, const json_t *split, mtc_error_t *err);
/* displayName (NULL: unchanged) and the split (NULL: unchanged; checked
 * over the deployed models) of an endpoint. */
int endpoint_update(struct endpoint_ctl *c, const char *project, const char *location,
                    const char *name, const char *display, const json_t *split,
                    mtc_error_t *err);
/* Cancel every replica's job and forget the endpoint. */
int endpoint_delete(struct endpoint_ctl *c, const char *project, const char *location,
                    const char *name, mtc_error_t *err);

/* Routing. endpoint_pick chooses a ready replica of the endpoint by the
 * split, skipping the replica ids in tried (n of them), and counts the
 * request as running on it. -1 + errno: ENOENT (no such endpoint), EAGAIN
 * (no ready replica), with err. endpoint_done ends it; failed marks the
 * replica not ready until its next health check passes. */
struct endpoint_pick {
    char key[200];     /* project/location/name */
    char deployed[16]; /* deployed model id */
    char replica[16];  /* replica id */
    char address[80];  /* HOST:PORT */
    char model[128];   /* the name its replicas serve (NAME@VERSION) */
};
int endpoint_pick(struct endpoint_ctl *c, const char *project, const char *location,
                  const char *name, char tried[][16], int ntried, struct endpoint_pick *p,
                  mtc_error_t *err);
void endpoint_done(struct endpoint_ctl *c, const struct endpoint_pick *p, int failed);

/* The endpoint's resource as the API shows it (status merged in: each
 * deployed model's replicas with their state and requests running). */
json_t *endpoint_json(struct endpoint_ctl *c, const struct store_endpoint *e);

#endif
