/* internal: what the endpoint module's files (ctl.c, place.c) share. Not part
 * of the module's interface. */
#ifndef MTC_ENDPOINT_INTERNAL_H
#define MTC_ENDPOINT_INTERNAL_H

#include "endpoint/endpoint.h"

#include <limits.h>

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
