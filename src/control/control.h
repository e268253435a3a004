/* control: runs mtcd's long-running operations (create, update, delete) in
 * worker threads from their persisted records, resumes unfinished ones after a
 * restart, and supervises running clusters (daemon restarts, node status). */
#ifndef MTC_CONTROL_H
#define MTC_CONTROL_H

#include <jansson.h>

#include "common/common.h"
#include "cluster/cluster.h"
#include "health/health.h"
#include "provider/provider.h"
#include "schema/schema.h"
#include "store/store.h"

/* An operation's kind (its metadata's verb; the store keeps its name). */
enum control_op_kind {
    CONTROL_CREATE,
    CONTROL_UPDATE,
    CONTROL_DELETE,
    CONTROL_REMEDIATE,
    CONTROL_PREPARE, /* a dataset's :prepare (its CREATE prepares too) */
    CONTROL_UPLOAD,  /* a model's upload: a new version in the registry */
    CONTROL_HEALTHSCAN /* a cluster's :healthScan (healthscan.c) */
};
extern const struct schema_enum control_op_kind_enum;

struct control;

/* Datasets: what mtcd's preparations run and where they read and write. */
struct control_datasets {
    const char *trainer;      /* mtc-train (absolute path), or NULL: none found */
    const char *cache_dir;    /* prepared data: mtc-train --cache-dir */
    const char *const *roots; /* NULL-terminated: where a non-admin's source or
                               * tokenizer file may lie */
};
/* Set them (borrowed: they must outlive c); before control_start. */
void control_set_datasets(struct control *c, const struct control_datasets *d);
const struct control_datasets *control_datasets(const struct control *c);

/* Record op, a dataset's CREATE or PREPARE (op->target "datasets/NAME",
 * op->request {"spec": the dataset's canonical request, "restricted": true
 * when its files must lie under the roots}), and start it. For a CREATE the
 * dataset row d is stored with it (-1, EEXIST when the name is taken); a
 * PREPARE needs the dataset (-1, ENOENT) and no operation running on it (-1,
 * EBUSY, busy gets its id). err says why. */
int control_dataset_begin(struct control *c, const struct store_dataset *d,
                          const struct store_op *op, char busy[48], mtc_error_t *err);

/* Record op, a model's UPLOAD (op->target "models/NAME", op->request
 * {"modelId", "model": the canonical Model of the request, "restricted": true
 * when its files must lie under the roots, "home": mtcd's home}), unless
 * another operation runs on that model (-1, EBUSY, busy gets its id), and
 * start it. err says why. */
int control_model_begin(struct control *c, const struct store_op *op, char busy[48],
                        mtc_error_t *err);
/* Rewrite the refs file (registry_refs_write) of project/location/name under
 * models from the store; dirs (may be NULL) gets its versions' directories.
 * Callers that change a model hold control_models_lock around the change and
 * this rewrite, so refs files are written in the order of the changes. */
void control_model_refs(struct store *st, const char *models, const char *project,
                        const char *location, const char *name, json_t *dirs);
void control_models_lock(void);
void control_models_unlock(void);

/* Neither st nor prov is owned; both must outlive the control. */
struct control *control_create(struct store *st, struct provider *prov, int supervise_ms,
                               mtc_error_t *err);
/* Resume every unfinished operation and start the supervisor. */
int control_start(struct control *c, mtc_error_t *err);
/* Stop the supervisor and wait up to wait_ms for running operations; returns
 * the number still running (their state is persisted; a restart resumes them). */
int control_stop(struct control *c, int wait_ms);
void control_destroy(struct control *c);

/* Fill op for a new operation of kind on cluster: a fresh "op-<hex>" id, progress
 * "queued", no request. */
void control_op_init(struct store_op *op, const char *project, const char *location,
                     const char *cluster, const char *kind);

/* Run a stored operation in the background; one begun (in the store) while its
 * cluster's or model's previous worker was still letting go starts right after. */
int control_submit(struct control *c, const char *op_id, mtc_error_t *err);

/* Record op, a new operation on an existing cluster, setting the cluster's
 * state, and start it (if it cannot start now it resumes when mtcd restarts).
 * -1 with errno EBUSY (another operation runs: busy gets its id), ENOENT (no
 * such cluster) or EIO, and a one-line err. */
int control_begin_op(struct control *c, const struct store_op *op, enum cluster_state state,
                     char busy[48], mtc_error_t *err);
/* Store a new cluster with its CREATE operation atomically and start it.
 * -1 with errno EEXIST (the id is taken) or EIO, and err. */
int control_create_cluster(struct control *c, const struct store_cluster *cl,
                           const struct store_op *op, mtc_error_t *err);
/* Shell text for `eval "$(mtc env ID)"`. Caller frees. */
char *control_env(struct control *c, const char *cluster_id, mtc_error_t *err);
/* A cluster on hosts: its hosts and what each is (provider_hosts), else NULL.
 * Caller owns. */
json_t *control_hosts(struct control *c, const char *cluster_id);
/* The cluster's experiment root is seen by every host (provider_check_storage;
 * spec: the cluster's canonical spec). 0, or -1 + err naming the hosts. */
int control_check_storage(struct control *c, const char *cluster_id, const json_t *spec,
                          mtc_error_t *err);
/* A fault injected on purpose into node of cluster_id (`mtc chaos`:
 * provider_node_fault; spec: the cluster's canonical spec). 0 with *hit, or
 * -1 + errno + err as provider_node_fault. */
int control_node_fault(struct control *c, const char *cluster_id, const json_t *spec,
                       const char *node, enum provider_fault f, const char *job, unsigned pick,
                       struct provider_fault_hit *hit, mtc_error_t *err);
/* How `mtc login` reaches a cluster's login node on another host
 * (provider_login), or NULL when it is this host. Caller owns. */
json_t *control_login(struct control *c, const char *cluster_id, mtc_error_t *err);

/* A node's health results as its agent reported them (results: the
 * reportHealth array) in mode: judged (speed probes against the pool),
 * summarized and stored; a FAIL wakes the supervisor. Returns the worst
 * status (enum health_status), or -1 + err (bad results, store failure). */
int control_report_health(struct control *c, const struct store_cluster *cl, const char *node,
                          enum health_mode mode, const json_t *results, mtc_error_t *err);

/* Agents' health reports stored since mtcd started, {cluster id: count}.
 * Caller owns. */
json_t *control_report_counts(void);
/* Supervision passes completed since mtcd started, by cluster: a new
 * object {"ID": N} the caller owns (never NULL). */
json_t *control_supervision_passes(struct control *c);

/* Wake the supervisor now (a node reported a failure). */
void control_poke(struct control *c);
/* Start a REMEDIATE operation for items [{"node","check","reason","severity","mode"?}].
 * -1 + errno EBUSY when another operation runs on the cluster. op_id gets its id. */
int control_start_remediation(struct control *c, const char *project, const char *location,
                              const char *id, json_t *items, char op_id[48], mtc_error_t *err);
/* What the jobs service asks of control (jobs.h): its provider, its
 * datasets' trainer and control_start_remediation; c NULL: none of them
 * (a monitor then asks only the clusters of unfinished jobs). */
struct jobs_ops;
void control_jobs_ops(struct control *c, struct jobs_ops *ops);

/* Elastic nodes (power.c): what Slurm's power saving asks for. */
enum control_power { CONTROL_POWER_RESUME, CONTROL_POWER_SUSPEND, CONTROL_POWER_RESUME_FAILED };
extern const struct schema_enum control_power_enum;
/* Power each of nodes (a JSON array of names) of cl up (RESUME) or down
 * (SUSPEND, RESUME_FAILED) through the provider, recording an event per node
 * (NODE_POWERED_UP, NODE_POWERED_DOWN, NODE_RESUME_FAILED; a failure:
 * NODE_POWER_FAILED). 0, or -1 + err naming the first failure. */
int control_power_nodes(struct control *c, const struct store_cluster *cl,
                        enum control_power action, const json_t *nodes, mtc_error_t *err);

/* Stragglers: a node's speed.* results against its node pool's median
 * (health_speed_judge). */
struct health_result;
/* Judge res[0..n)'s speed.compute / speed.membw results of node against the
 * latest values stored for the other nodes of its node pool (the cluster's
 * healthPolicy fractions); a worse verdict rewrites the result (FAIL: severity
 * REBOOT, the reason names the median). Returns how many results changed. */
int control_speed_compare(struct store *st, const struct store_cluster *cl, const char *node,
                          struct health_result *res, int n);

/* Health scans (healthscan.c, docs/healthscan.md): the checks a scan runs. */
enum control_scan_check { CONTROL_SCAN_GPU, CONTROL_SCAN_COLLECTIVE, CONTROL_SCAN_STRAGGLER };
extern const struct schema_enum control_scan_check_enum;
/* The :healthScan request: checks (names or "all"), nodes (names or Slurm
 * hostlists), partition, drainBadNodes, force, maxBytes, microbatches,
 * failFraction. */
extern const struct schema control_scan_request_schema;
/* A HEALTH_SCAN operation's request for the canonical request req on cluster
 * cl (caller owns): the nodes resolved (given, else the partition's or every
 * compute node; at least 2, all of the cluster's compute nodes) and idle in
 * Slurm unless req's force (never down or drained ones). NULL with err (one
 * line, "precondition: ..." for a state that forbids it) and *http (400, 404,
 * 500, 503). */
json_t *control_healthscan_prepare(struct control *c, const struct store_cluster *cl,
                                   const json_t *req, int *http, mtc_error_t *err);

/* google.rpc canonical codes used in operation errors. */
enum {
    RPC_INVALID_ARGUMENT = 3,
    RPC_NOT_FOUND = 5,
    RPC_PERMISSION_DENIED = 7,
    RPC_FAILED_PRECONDITION = 9,
    RPC_ABORTED = 10,
    RPC_INTERNAL = 13
};

#endif
