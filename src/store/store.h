/* store: mtcd's state in SQLite (WAL) — clusters, long-running operations,
 * cluster events, API tokens, node health, health scans and remediations,
 * training jobs, datasets, models and endpoints — with a versioned schema and
 * migrations (store.c; one file per resource, store_*.c, internal.h).
 * One connection guarded by a mutex; every accessor is one transaction. */
#ifndef MTC_STORE_H
#define MTC_STORE_H

#include <jansson.h>
#include <stdint.h>

#include "common/common.h"

struct store;

/* Open (creating and migrating) the database at path. NULL + err on failure. */
struct store *store_open(const char *path, mtc_error_t *err);
void store_close(struct store *st);
int store_schema_version(struct store *st);
/* The schema version this build migrates to (what store_open leaves). */
int store_schema_latest(void);
/* A consistent copy of the whole database written to dest (a new file),
 * taken while st serves writes: VACUUM INTO on a second, read-only
 * connection (one snapshot of the WAL). 0, or -1 + err. */
int store_copy_to(struct store *st, const char *dest, mtc_error_t *err);
/* The database file path whole and sound (PRAGMA integrity_check is "ok"),
 * opened read-only; *schema (may be NULL) its schema version. 0/-1 + err. */
int store_check(const char *path, int *schema, mtc_error_t *err);
/* A count that moves with every row the store inserts, updates or deletes
 * (mtcd's one connection: the only writer). What was read after taking it
 * is still current while it has not moved — the API's view cache. */
int64_t store_changes(struct store *st);

struct store_cluster {
    char id[16];
    char project[64];
    char location[64];
    char state[16]; /* PROVISIONING | RUNNING | UPDATING | STOPPING | ERROR */
    json_t *spec;   /* canonical spec (owned) */
    json_t *nodes;  /* last observed nodesStatus array (owned, may be NULL) */
    int64_t create_ms, update_ms;
};
void store_cluster_release(struct store_cluster *c);

struct store_op {
    char id[48]; /* op-<hex> */
    char project[64];
    char location[64];
    char cluster_id[16]; /* the cluster it is about, "" when it is about target */
    char kind[16];       /* CREATE | UPDATE | DELETE | REMEDIATE | PREPARE ... */
    int done;
    char progress[256];
    json_t *request;  /* owned; e.g. the target spec of an UPDATE */
    json_t *response; /* owned; set when done without error */
    int err_code;     /* google.rpc code when done with error, else 0 */
    char err_message[256];
    int64_t create_ms, update_ms;
    char target[96]; /* another resource it is about, relative to its location
                      * ("datasets/NAME"), or "" for a cluster's operation */
};
void store_op_release(struct store_op *op);

/* Clusters. Lookups return -1 with errno ENOENT when absent. */
/* Insert the cluster and its first operation atomically; EEXIST if the id is taken. */
int store_cluster_create(struct store *st, const struct store_cluster *c, const struct store_op *op,
                         mtc_error_t *err);
int store_cluster_get(struct store *st, const char *id, struct store_cluster *out);
/* Up to limit clusters of project/location with id > after (NULL = from the start), by id.
 * Returns a malloc'd array (caller releases each and frees), *n gets the count. */
struct store_cluster *store_cluster_list(struct store *st, const char *project,
                                         const char *location, const char *after, int limit,
                                         int *n);
/* Ids of every cluster in any state (for the supervisor). Caller json_decref's. */
json_t *store_cluster_ids(struct store *st);
int store_cluster_set_state(struct store *st, const char *id, const char *state);
int store_cluster_set_spec(struct store *st, const char *id, const json_t *spec, const char *state);
int store_cluster_set_nodes(struct store *st, const char *id, const json_t *nodes);
/* The cluster's row without its spec and nodesStatus (both NULL): a cheap
 * lookup for paths that need only its id, place and state. */
int store_cluster_head(struct store *st, const char *id, struct store_cluster *out);
/* Whether node is a node of the cluster as its stored nodesStatus names it,
 * by index (no JSON parsed): 0 and its node pool id ("" when none) into pool,
 * or -1 with errno ENOENT. */
int store_cluster_node_pool(struct store *st, const char *cluster_id, const char *node, char *pool,
                            size_t len);
/* Start an operation on an existing cluster, setting its state, unless another
 * operation on it is still running (then -1, errno EBUSY, busy_op gets its id). */
int store_op_begin(struct store *st, const struct store_op *op, const char *cluster_state,
                   char busy_op[48]);
/* Start an operation that shares the cluster with others of its kind (op->kind:
 * remediations of different nodes run at once): -1, errno EBUSY, busy_op
 * named, when an operation of another kind runs on the cluster (an UPDATE or
 * DELETE is exclusive) or one of its kind names a node of op's (request
 * {"nodes": [{"node"}...]}); else as store_op_begin. */
int store_op_begin_shared(struct store *st, const struct store_op *op, const char *cluster_state,
                          char busy_op[48]);
/* The nodes named in the requests of the cluster's unfinished operations of
 * kind (request {"nodes": [{"node"}...]}), as an array of strings. Caller
 * json_decref's. */
json_t *store_ops_active_nodes(struct store *st, const char *cluster_id, const char *kind);
/* Remove the cluster row and revoke its node tokens. */
int store_cluster_delete(struct store *st, const char *id);

/* Operations. */
/* out is zeroed first, so store_op_release(out) is safe after a failure;
 * -1 with errno ENOENT (no such operation) or EIO (the database failed). */
int store_op_get(struct store *st, const char *id, struct store_op *out);
int store_op_progress(struct store *st, const char *id, const char *message);
/* Mark done: with response (err_code 0) or with an error. */
int store_op_finish(struct store *st, const char *id, const json_t *response, int err_code,
                    const char *err_message);
/* Ids of operations not done, oldest first. Caller json_decref's. */
json_t *store_ops_pending(struct store *st);

/* Datasets: a name in a project/location, the canonical request it was made
 * from ({source, kind, tokenizer, description, labels}) and its state; its
 * versions are what each preparation produced (mtc-train's record). Lookups
 * return -1 with errno ENOENT when absent. */
struct store_dataset {
    char project[64];
    char location[64];
    char name[64];
    char state[16]; /* PREPARING | READY */
    json_t *spec;   /* owned */
    int64_t create_ms, update_ms;
};
void store_dataset_release(struct store_dataset *d);
struct store_dataset_version {
    int version; /* 1, 2, ... per dataset */
    char key[160];
    json_t *record; /* owned: the preparation record */
    int64_t create_ms;
};
void store_dataset_versions_free(struct store_dataset_version *v, int n);
/* Insert the dataset and its first operation (op->target names it)
 * atomically; -1 with errno EEXIST when the name is taken in its location. */
int store_dataset_create(struct store *st, const struct store_dataset *d, const struct store_op *op,
                         mtc_error_t *err);
int store_dataset_get(struct store *st, const char *project, const char *location,
                      const char *name, struct store_dataset *out);
/* Up to limit datasets of project/location with name > after (NULL: from the
 * start), by name: a malloc'd array (release each, free it), *n its length. */
struct store_dataset *store_dataset_list(struct store *st, const char *project,
                                         const char *location, const char *after, int limit,
                                         int *n);
/* The dataset's versions, oldest first: a malloc'd array (free with
 * store_dataset_versions_free), *n its length; NULL when there are none. */
struct store_dataset_version *store_dataset_versions(struct store *st, const char *project,
                                                     const char *location, const char *name,
                                                     int *n);
/* Start op (op->target names the dataset) on an existing dataset, setting it
 * PREPARING, unless another operation on it is still running: -1 with errno
 * EBUSY (busy_op gets its id), ENOENT or EIO. */
int store_dataset_op_begin(struct store *st, const struct store_op *op, const char *name,
                           char busy_op[48]);
/* Record a preparation of the dataset with key and record: when key is the
 * latest version's, nothing is added and *version is that version (*added 0);
 * else version latest+1 is added (*added 1). spec (may be NULL) replaces the
 * stored request; the state becomes READY. One transaction. */
int store_dataset_record(struct store *st, const char *project, const char *location,
                         const char *name, const json_t *spec, const char *key,
                         const json_t *record, int *version, int *added);
int store_dataset_set_state(struct store *st, const char *project, const char *location,
                            const char *name, const char *state);
/* Remove the dataset and its versions unless an operation other than
 * except_op (may be NULL) runs on it (-1, EBUSY, busy_op gets its id).
 * *orphans (may be NULL) gets the records of its versions whose key no other
 * version (of any dataset) uses, one per key: their prepared data may go. */
int store_dataset_delete(struct store *st, const char *project, const char *location,
                         const char *name, const char *except_op, char busy_op[48],
                         json_t **orphans);

/* Models (the registry): a name in a project/location with meta
 * ({displayName, description, labels}); versions numbered 1, 2, ... (never
 * reused while the model lives), each with its aliases (a JSON array; exactly
 * one version holds "default"), the artifact's manifest and its lineage.
 * Lookups return -1 with errno ENOENT when absent. */
struct store_model {
    char project[64];
    char location[64];
    char name[64];
    json_t *meta; /* owned */
    int64_t create_ms, update_ms;
};
void store_model_release(struct store_model *m);
struct store_model_version {
    int version;
    json_t *aliases, *manifest, *lineage; /* owned; lineage may be NULL */
    int64_t create_ms, update_ms;
};
void store_model_versions_free(struct store_model_version *v, int n);
int store_model_get(struct store *st, const char *project, const char *location,
                    const char *name, struct store_model *out);
/* Up to limit models with name > after, by name (release each, free the array). */
struct store_model *store_model_list(struct store *st, const char *project, const char *location,
                                     const char *after, int limit, int *n);
/* Oldest first (free with store_model_versions_free); NULL and *n 0 when none. */
struct store_model_version *store_model_versions(struct store *st, const char *project,
                                                 const char *location, const char *name, int *n);
/* Add the next version (*version gets its number), creating the model with
 * meta when it does not exist; the model's first version gets "default". One
 * transaction. 0/-1 + errno. */
int store_model_add_version(struct store *st, const char *project, const char *location,
                            const char *name, const json_t *meta, const json_t *manifest,
                            const json_t *lineage, int *version);
/* Replace the model's meta. 0/-1 (ENOENT). */
int store_model_set_meta(struct store *st, const char *project, const char *location,
                         const char *name, const json_t *meta);
/* Give version the aliases of add (each moves from the version that held it)
 * and take those of remove from it (arrays of valid alias strings). -1 with
 * errno ENOENT (no such version) or EPERM (removing "default" from the
 * version holding it: move it by adding it to another). One transaction. */
int store_model_aliases(struct store *st, const char *project, const char *location,
                        const char *name, int version, const json_t *add, const json_t *remove);
/* Delete one version (*manifest gets its manifest, caller decrefs); a
 * "default" it held moves to the newest remaining version. -1 with errno
 * ENOENT, or EBUSY when it is the model's only version (delete the model). */
int store_model_delete_version(struct store *st, const char *project, const char *location,
                               const char *name, int version, json_t **manifest);
/* Record op (op->target "models/NAME": an upload) unless another operation
 * runs on that target: -1 with errno EBUSY (busy_op gets its id) or EIO. */
int store_model_op_begin(struct store *st, const struct store_op *op, char busy_op[48]);
/* Every model: [{"project","location","name"}], sorted (caller decrefs). */
json_t *store_model_all(struct store *st);
/* Delete the model and its versions; *manifests gets theirs (an array). -1, ENOENT. */
int store_model_delete(struct store *st, const char *project, const char *location,
                       const char *name, json_t **manifests);

/* Endpoints: a name in a project/location; spec ({displayName,
 * deployedModels, trafficSplit, nextId}) is what was asked, status
 * ({replicas}) what mtcd runs for it — both JSON objects, owned. Lookups
 * return -1 with errno ENOENT when absent; create EEXIST when present. */
struct store_endpoint {
    char project[64];
    char location[64];
    char name[64];
    json_t *spec, *status;
    int64_t create_ms, update_ms;
};
void store_endpoint_release(struct store_endpoint *e);
int store_endpoint_create(struct store *st, const struct store_endpoint *e);
int store_endpoint_get(struct store *st, const char *project, const char *location,
                       const char *name, struct store_endpoint *out);
/* Replace spec and status. 0/-1 (ENOENT). */
int store_endpoint_put(struct store *st, const struct store_endpoint *e);
int store_endpoint_delete(struct store *st, const char *project, const char *location,
                          const char *name);
/* Up to limit endpoints with name > after, by name; project NULL: every
 * endpoint (release each, free the array). */
struct store_endpoint *store_endpoint_list(struct store *st, const char *project,
                                           const char *location, const char *after, int limit,
                                           int *n);

/* Events: one line each about a cluster (node may be NULL). An event about
 * a training job's run (store_event_add_job) also records whose job it is
 * (owner: the Unix user it runs as, "" for mtcd's own) and brief, the line
 * shown to anyone else: message may quote the run's log and metrics. */
struct store_event {
    int64_t time_ms;
    char type[64];
    char node[64]; /* "" when about the whole cluster */
    char message[512];
    int of_job;      /* 1: a job's, owner and brief set */
    char owner[33];  /* the job's Unix user, "" for mtcd's own */
    char brief[512]; /* what others than its owner see */
};
int store_event_add(struct store *st, const char *cluster_id, const char *type, const char *node,
                    const char *message);
int store_event_add_job(struct store *st, const char *cluster_id, const char *type,
                        const char *owner, const char *brief, const char *message);
/* The newest limit events, oldest first: a malloc'd array (caller frees), *n
 * its length; NULL on allocation failure. */
struct store_event *store_events(struct store *st, const char *cluster_id, int limit, int *n);

/* Tokens: only the SHA-256 of a token is stored. */
/* user: the Unix user its training jobs run as ("" or NULL: none). */
int store_token_add(struct store *st, const char *id, const char *name, const char *role,
                    const char *user, const char *hash);
/* Who a live token is: its role ("viewer" | "editor" | "admin" | "node" |
 * "registrar") and, for a node token, the one node of one cluster it speaks
 * for; for a registrar token, the cluster of its run and its scope (JSON:
 * project, location, model, run, checkpoint) ("" otherwise). */
struct store_principal {
    char role[16];
    char cluster[16];
    char node[64];
    char scope[2048];
    char user[33]; /* a Unix user the token's jobs run as, or "" */
};
/* The principal of the live token with this hash into out; -1/ENOENT if none. */
int store_token_lookup(struct store *st, const char *hash, struct store_principal *out);
/* A registrar token: role "registrar", bound to cluster_id (revoked with it)
 * and scope (JSON text, at most 2047 bytes). */
int store_registrar_token_add(struct store *st, const char *id, const char *name,
                              const char *cluster_id, const char *scope, const char *hash);
/* Make hash the one live node token of (cluster_id, node), revoking the ones
 * before it (a replaced or reimaged node gets a new token). id: "tok-<hex>". */
int store_node_token_set(struct store *st, const char *cluster_id, const char *node,
                         const char *id, const char *hash);
struct store_token {
    char id[24];
    char name[128];
    struct store_principal who;
    int64_t create_ms;
};
/* Live tokens, oldest first: malloc'd array (caller frees), *n its length. */
struct store_token *store_token_list(struct store *st, int *n);
int store_token_revoke(struct store *st, const char *id_or_name);

/* Node health: the latest report per node (mtc-agent or a manual report) and
 * the node's remediation state ("" | "PENDING" | "REMEDIATING" | "FAILED"). */
struct store_health {
    char node[64];
    int64_t time_ms;
    char status[8];         /* PASS | WARN | FAIL | UNKNOWN */
    char failing_check[64]; /* first FAIL (else WARN) check, "" when all pass */
    char reason[256];
    char severity[16]; /* NONE | RESTART | REBOOT | REIMAGE | REPLACE */
    json_t *results;   /* the reported results array (owned, may be NULL) */
    char remediation[16];
};
/* Insert or replace the report (keeps the remediation state). */
int store_health_put(struct store *st, const char *cluster_id, const char *node,
                     const struct store_health *h);
int store_health_set_remediation(struct store *st, const char *cluster_id, const char *node,
                                 const char *state);
/* Every node's health row; free with store_health_free. */
struct store_health *store_health_list(struct store *st, const char *cluster_id, int *n);
/* The same rows without their results (NULL), which are not parsed: for
 * views that show a node's status only. Free with store_health_free. */
struct store_health *store_health_status_list(struct store *st, const char *cluster_id, int *n);
/* Rows for /metrics without JSON objects (store_scrape.c): fn(arg, cols)
 * for each row, its columns as text ("" for none), called under the
 * store's lock (fn must not use the store). 0, or -1 (EIO).
 * nodes: cluster_id's nodesStatus in order — instanceName, nodePoolId,
 * nodeState, the node's remediation state ("" none); report_times: each
 * node's latest report, by node — node, time_ms; checks: the results of
 * the latest reports made at since_ms or later, by node — node, time_ms,
 * check, status; remediations: the nodes with a remediation state, by node
 * — node, state. */
typedef void (*store_row_fn)(void *arg, const char *const *cols);
int store_scrape_nodes(struct store *st, const char *cluster_id, store_row_fn fn, void *arg);
int store_scrape_report_times(struct store *st, const char *cluster_id, store_row_fn fn,
                              void *arg);
int store_scrape_checks(struct store *st, const char *cluster_id, int64_t since_ms,
                        store_row_fn fn, void *arg);
int store_scrape_remediations(struct store *st, const char *cluster_id, store_row_fn fn,
                              void *arg);
void store_health_free(struct store_health *arr, int n);
/* Forget a deleted cluster's health, scans and remediation history. */
int store_health_delete(struct store *st, const char *cluster_id);
/* A node's last health scan (mtc healthscan): its verdict, the checks run
 * ("straggler,collective"), the first failing check's reason, the operation. */
struct store_scan {
    char node[64];
    int64_t time_ms;
    char state[8]; /* PASS | WARN | FAIL */
    char checks[64];
    char reason[256];
    char op_id[48];
};
/* Insert or replace node sc->node's last scan. 0/-1. */
int store_scan_put(struct store *st, const char *cluster_id, const struct store_scan *sc);
/* Every node's last scan, by node; malloc'd array (caller frees), *n its length. */
struct store_scan *store_scan_list(struct store *st, const char *cluster_id, int *n);
/* Remediation history, for escalation and limits. */
int store_remediation_add(struct store *st, const char *cluster_id, const char *node,
                          const char *action, const char *check, const char *op_id);
int store_remediation_count(struct store *st, const char *cluster_id, const char *node,
                            int64_t since_ms);
/* The node's latest recorded action and the operation that took it: 0, or -1
 * when it has none. */
int store_remediation_last(struct store *st, const char *cluster_id, const char *node,
                           char action[16], char op_id[48]);

/* Training jobs (the API's trainingJobs): one Slurm job submitted from a
 * recipe, with the request it came from and the resolved config.json. */
struct store_job {
    int64_t seq; /* creation order: list pages continue after it */
    char id[64]; /* unique within its cluster */
    char project[64];
    char location[64];
    char cluster_id[16];
    char slurm_job[32];
    char state[16]; /* last observed: PENDING | RUNNING | COMPLETED | ... */
    int restart_count;
    json_t *request; /* canonical request body (owned) */
    json_t *config;  /* the run's config.json (owned) */
    int64_t create_ms, update_ms;
};
void store_job_release(struct store_job *j);
/* Insert; -1 with errno EEXIST when the cluster has a job of this id. */
int store_job_create(struct store *st, const struct store_job *j);
/* out is zeroed first; -1 with errno ENOENT (no such job) or EIO. */
int store_job_get(struct store *st, const char *cluster_id, const char *id, struct store_job *out);
/* Up to limit jobs of a cluster with seq > after, oldest first, only those in
 * state when it is not NULL. A malloc'd array (caller releases each and
 * frees), *n its length. */
struct store_job *store_job_list(struct store *st, const char *cluster_id, const char *state,
                                 int64_t after, int limit, int *n);
/* Up to limit jobs of every cluster not in a final state (COMPLETED, FAILED,
 * CANCELLED) with seq > after, oldest first (the job monitor's pass). */
struct store_job *store_job_list_unfinished(struct store *st, int64_t after, int limit, int *n);
/* The SQL store_job_list_unfinished runs (parameters: after, limit): a test
 * asks SQLite's plan for exactly this statement. */
extern const char store_job_unfinished_sql[];
int store_job_set_state(struct store *st, const char *cluster_id, const char *id,
                        const char *state, int restart_count);

/* Tallies for mtcd's /metrics: arrays of [cluster, action, count] (every
 * remediation recorded) and [kind, RUNNING | SUCCEEDED | FAILED, count]
 * (every operation). Caller json_decref's. */
json_t *store_remediation_tally(struct store *st);
json_t *store_op_tally(struct store *st);

#endif
