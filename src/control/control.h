/* control: runs mtcd's long-running operations (create, update, delete) in
 * worker threads from their persisted records, resumes unfinished ones after a
 * restart, and supervises running clusters (daemon restarts, node status). */
#ifndef MTC_CONTROL_H
#define MTC_CONTROL_H

#include <jansson.h>

#include "common/common.h"
#include "provider/provider.h"
#include "store/store.h"

struct control;

/* Neither st nor prov is owned; both must outlive the control. */
struct control *control_create(struct store *st, struct provider *prov, int supervise_ms,
                               mtc_error_t *err);
/* Resume every unfinished operation and start the supervisor. */
int control_start(struct control *c, mtc_error_t *err);
/* Stop the supervisor and wait up to wait_ms for running operations; returns
 * the number still running (their state is persisted; a restart resumes them). */
int control_stop(struct control *c, int wait_ms);
void control_destroy(struct control *c);

/* Run a stored operation in the background. */
int control_submit(struct control *c, const char *op_id, mtc_error_t *err);

/* The API's JSON for a stored cluster / operation. Caller owns the result.
 * with_events adds clusterEvents (the last 100). */
json_t *control_cluster_json(struct control *c, const struct store_cluster *cl, int with_events);
json_t *control_op_json(const struct store_op *op);
/* Shell text for `eval "$(mtc env ID)"`. Caller frees. */
char *control_env(struct control *c, const char *cluster_id, mtc_error_t *err);

/* Wake the supervisor now (a node reported a failure). */
void control_poke(struct control *c);
/* Start a REMEDIATE operation for items [{"node","check","reason","severity","mode"?}].
 * -1 + errno EBUSY when another operation runs on the cluster. op_id gets its id. */
int control_start_remediation(struct control *c, const char *project, const char *location,
                              const char *id, json_t *items, char op_id[48], mtc_error_t *err);

/* google.rpc canonical codes used in operation errors. */
enum { RPC_INVALID_ARGUMENT = 3, RPC_NOT_FOUND = 5, RPC_FAILED_PRECONDITION = 9,
       RPC_ABORTED = 10, RPC_INTERNAL = 13 };

#endif
