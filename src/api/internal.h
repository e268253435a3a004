/* internal: what the API's route table (routes.c) and its handler files
 * (clusters.c, jobs.c, datasets.c, ...) share. Not part of the module's
 * interface. */
#ifndef MTC_API_INTERNAL_H
#define MTC_API_INTERNAL_H

#include "api/api.h"

#include <limits.h>

#define CLUSTERS "/v1beta1/projects/*/locations/*/modelDevelopmentClusters"
#define DATASETS "/v1beta1/projects/*/locations/*/datasets"
#define MODELS "/v1beta1/projects/*/locations/*/models"
#define ENDPOINTS "/v1beta1/projects/*/locations/*/endpoints"

/* The project and location segments (r->cap[0], r->cap[1]) are valid names:
 * 0, else out is a 400 naming the bad one and -1 (call.c). */
int api_check_parent(struct api_req *r, struct api_resp *out);
/* pageSize (0..1000; 0 or absent: 50) and pageToken (absent: "", else it
 * must pass token_valid) of a list request, snake_case accepted. 0, else out
 * is a 400 naming the argument and -1. */
int api_page_args(struct api_req *r, struct api_resp *out, int (*token_valid)(const char *),
                  int *size, char token[128]);

/* Operations (operations.c). api_reply_op: reply with the stored operation
 * op_id; returns 0. api_op_get: GET …/operations/OP. */
int api_reply_op(struct api_req *r, struct api_resp *out, const char *op_id);
int api_op_get(struct api_req *r, struct api_resp *out);

/* /healthz (metrics.c): ok, and the store's schema version. */
int api_healthz(struct api_req *r, struct api_resp *out);
/* backup.c: POST /v1/daemon:backup, the backup file as the reply's body. */
int api_daemon_backup(struct api_req *r, struct api_resp *out);

/* Kept GET replies (viewcache.c), by key (the resource path and what
 * shapes the reply) and store_changes() taken before the reply's reads.
 * api_view_get: 1 with out->text a copy of the kept JSON text (the
 * transport frees it), else 0. api_view_put: keep body's JSON text (not a
 * cluster view listing hosts). api_view_forget: drop st's views (the API
 * stops). */
int api_view_get(struct store *st, const char *key, int64_t gen, struct api_resp *out);
void api_view_put(struct store *st, const char *key, int64_t gen, const json_t *body);
void api_view_forget(const struct store *st);

/* Clusters (clusters.c). api_load_cluster: the cluster named by the path's
 * captures 0-2 into cl (caller releases), or -1 with out filled (400 bad
 * name, 404 absent or under another parent); api_load_cluster_head: the
 * same without its spec and nodesStatus (store_cluster_head).
 * api_check_cluster_id: 0 when id is a valid cluster id, else a 400 into out
 * and -1. The handlers: create, get, list, patch, delete, :env,
 * :checkStorage. */
int api_load_cluster(struct api_req *r, struct api_resp *out, struct store_cluster *cl);
int api_load_cluster_head(struct api_req *r, struct api_resp *out, struct store_cluster *cl);
int api_check_cluster_id(const char *id, struct api_resp *out);
int api_cluster_create(struct api_req *r, struct api_resp *out);
int api_cluster_get(struct api_req *r, struct api_resp *out);
int api_cluster_list(struct api_req *r, struct api_resp *out);
int api_cluster_patch(struct api_req *r, struct api_resp *out);
int api_cluster_delete(struct api_req *r, struct api_resp *out);
int api_cluster_env(struct api_req *r, struct api_resp *out);
int api_cluster_check_storage(struct api_req *r, struct api_resp *out);

/* A cluster's nodes reported (reports.c): :reportHealth (node tokens, their
 * own node only) and :reportFaultyNodes. */
int api_cluster_report_health(struct api_req *r, struct api_resp *out);
int api_cluster_report_faulty(struct api_req *r, struct api_resp *out);

/* Tokens (tokens.c): create (a registrar token too), list, revoke. */
/* accounts.c: a cluster's accounts and users (Slurm's accounting database) */
int api_account_list(struct api_req *r, struct api_resp *out);
int api_account_get(struct api_req *r, struct api_resp *out);
int api_account_create(struct api_req *r, struct api_resp *out);
int api_account_patch(struct api_req *r, struct api_resp *out);
int api_account_delete(struct api_req *r, struct api_resp *out);
int api_account_users(struct api_req *r, struct api_resp *out);
int api_account_user_add(struct api_req *r, struct api_resp *out);
int api_account_user_remove(struct api_req *r, struct api_resp *out);
int api_account_usage(struct api_req *r, struct api_resp *out);
int api_qos_list(struct api_req *r, struct api_resp *out);
int api_qos_get(struct api_req *r, struct api_resp *out);
int api_qos_create(struct api_req *r, struct api_resp *out);
int api_qos_delete(struct api_req *r, struct api_resp *out);

int api_token_create(struct api_req *r, struct api_resp *out);
int api_token_list(struct api_req *r, struct api_resp *out);
int api_token_revoke(struct api_req *r, struct api_resp *out);

/* Registrar tokens (registrar.c; jobs_registrar_mint makes them).
 * api_registrar_scope: r's scope
 * into s (-1: malformed). api_registrar_model: 0 when r is not a registrar or
 * its scope is model in r's project and location (cap 0-1), else a 403 into
 * out and -1. api_registrar_upload: the same, and source_run is its run, not
 * registered yet (400 precondition once it is). */
struct api_registrar {
    char project[64], location[64], model[128];
    char run[PATH_MAX], checkpoint[PATH_MAX]; /* checkpoint: the directory it registers */
};
int api_registrar_scope(const struct api_req *r, struct api_registrar *s);
int api_registrar_model(const struct api_req *r, struct api_resp *out, const char *model);
int api_registrar_upload(const struct api_req *r, struct api_resp *out, const char *model,
                         const char *source_run);

/* :powerNodes (power.c): Slurm's power programs start and stop elastic nodes. */
int api_power_nodes(struct api_req *r, struct api_resp *out);

/* trainingJobs of a cluster (jobs.c): create, get, list, :cancel. */
int api_job_create(struct api_req *r, struct api_resp *out);
int api_job_get(struct api_req *r, struct api_resp *out);
int api_job_list(struct api_req *r, struct api_resp *out);
int api_job_cancel(struct api_req *r, struct api_resp *out);
/* :metrics (the console's run page): curve points after ?afterStep, log tail, checkpoints. */
int api_job_metrics(struct api_req *r, struct api_resp *out);
/* :injectFault (admin): one fault into a running job on purpose (`mtc chaos`). */
int api_job_inject_fault(struct api_req *r, struct api_resp *out);


/* A cluster's Slurm (slurmjobs.c). api_slurm_conf: the path of cluster
 * id's slurm.conf into conf: 0, or -1 + err. api_accounting_on: 1 when the
 * spec enables accounting (orchestratorSpec.slurmSpec.accounting.enabled).
 * api_slurm_up: 1 for the cluster states in which its slurmctld should
 * answer (RUNNING, UPDATING). api_slurm_jobs: GET …/slurmJobs, the queue. */
int api_slurm_conf(struct provider *prov, const char *id, char *conf, size_t len, mtc_error_t *err);
int api_accounting_on(const json_t *spec);
int api_slurm_up(const char *state);
int api_slurm_jobs(struct api_req *r, struct api_resp *out);

/* /metrics (metrics.c): the handler; api_metrics_observe counts a request a
 * handler answered, route the i-th of the route table (the caller's: call.c
 * reads the table, metrics.c only what it is given). */
int api_metrics(struct api_req *r, struct api_resp *out);
void api_metrics_observe(size_t i, const struct api_route *route, int status, double seconds);

/* :healthScan (healthscan.c): a HEALTH_SCAN operation on a cluster. */
int api_cluster_healthscan(struct api_req *r, struct api_resp *out);

/* Datasets (datasets.c): create, list, get, delete, :prepare. */
int api_dataset_create(struct api_req *r, struct api_resp *out);
int api_dataset_list(struct api_req *r, struct api_resp *out);
int api_dataset_get(struct api_req *r, struct api_resp *out);
int api_dataset_delete(struct api_req *r, struct api_resp *out);
int api_dataset_prepare(struct api_req *r, struct api_resp *out);

/* The model registry (models.c): upload, get, list, listVersions, patch,
 * mergeVersionAliases, delete (a model, or a version: NAME@V), export. */
int api_model_upload(struct api_req *r, struct api_resp *out);
int api_model_get(struct api_req *r, struct api_resp *out);
int api_model_list(struct api_req *r, struct api_resp *out);
int api_model_versions(struct api_req *r, struct api_resp *out);
int api_model_patch(struct api_req *r, struct api_resp *out);
int api_model_aliases(struct api_req *r, struct api_resp *out);
int api_model_delete(struct api_req *r, struct api_resp *out);
int api_model_export(struct api_req *r, struct api_resp *out);

/* Endpoints (endpoints.c): create, get, list, delete, patch, :deployModel,
 * :undeployModel; api_endpoint_route: the checks of a routed request. */
int api_endpoint_create(struct api_req *r, struct api_resp *out);
int api_endpoint_get(struct api_req *r, struct api_resp *out);
int api_endpoint_list(struct api_req *r, struct api_resp *out);
int api_endpoint_delete(struct api_req *r, struct api_resp *out);
int api_endpoint_patch(struct api_req *r, struct api_resp *out);
int api_endpoint_deploy(struct api_req *r, struct api_resp *out);
int api_endpoint_undeploy(struct api_req *r, struct api_resp *out);
int api_endpoint_route(struct api_req *r, struct api_resp *out);

#endif
