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

/* Neither st nor prov is owned; both must outlive the control. */
struct control *control_create(struct store *st, struct provider *prov, int supervise_ms,
                               mtc_error_t *err);
/* A home `mtc daemon restore` just filled (its restored.json): each cluster
 * gets a RESTORED event; a local one, whose nodes were processes of the lost
 * machine, is ERROR. The record is removed. 0 (nothing restored: nothing
 * done), or -1 + err. Before control_start. */
int control_adopt_restored(struct control *c, const char *home, mtc_error_t *err);
/* Before a backup of mtcd: each cluster's head made copyable as files
 * (provider_backup_prepare: private accounting databases dumped); a
 * failure is logged, the backup goes on. */
void control_backup_prepare(struct control *c);
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
