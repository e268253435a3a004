/* internal: what the control module's files share — control.c (lifetime,
 * supervisor), triggers.c (what starts a remediation), ops.c (operations
 * and their worker), the operation kinds' files (remediate.c, prepare.c,
 * upload.c, healthscan*.c), power.c, report.c and shared.c (the services
 * below them all). Not part of the module's interface. Calls go control.c
 * -> triggers.c -> ops.c -> the kinds -> report.c, shared.c
 * (scripts/check-circles). */
#ifndef MTC_CONTROL_INTERNAL_H
#define MTC_CONTROL_INTERNAL_H

#include <pthread.h>

#include "control/control.h"
#include "control/datasets.h"
#include "health/health.h"

/* Remediation policy: at most REMEDIATION_LIMIT actions per node within
 * REMEDIATION_WINDOW_S; a node Slurm has had down for NODE_DOWN_GRACE_S (and
 * that the supervisor could not restart) is treated as failed. */
#define REMEDIATION_LIMIT 4
#define REMEDIATION_WINDOW_S 3600
#define NODE_DOWN_GRACE_S 10
/* A dead slurmd is the supervisor's first: a report of it is acted on only
 * after a supervise pass that began later has looked at the node's daemons
 * and reported what it restarted (provider_supervised_at: on hosts, not
 * every pass looks), and not while the slurmd the supervisor restarted
 * (within SLURMD_START_GRACE_MS before the report, or after it) comes up —
 * unless it was restarted twice within SLURMD_FLAP_MS. */
#define SLURMD_START_GRACE_MS 10000
#define SLURMD_FLAP_MS 600000

/* A node's remediation state (the store keeps its name; "" is none). */
enum control_remediation {
    CONTROL_REM_NONE,
    CONTROL_REM_PENDING,
    CONTROL_REM_REMEDIATING,
    CONTROL_REM_FAILED,
    CONTROL_REM_QUEUED, /* waiting for a slot (remqueue.h) */
};
extern const struct schema_enum control_remediation_enum;
/* The name of a value of one of the module's enums (never NULL for a valid one). */
#define CONTROL_NAME(e, v) schema_enum_name(&(e), (v))

struct control {
    struct store *st;
    struct provider *prov;
    int supervise_ms;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    json_t *busy;         /* cluster id -> op id, clusters with a running worker */
    json_t *waiting;      /* busy key -> op id stored while that worker was letting go of the key */
    json_t *down;         /* "cluster/node" -> ms first seen down by Slurm */
    json_t *recent;       /* "cluster/type/node" -> ms a supervisor event was last recorded */
    json_t *failed_since; /* "cluster/node" -> ms its failure was first seen: the queue's order */
    json_t *supervised;   /* cluster id -> ms the last supervise pass over its daemons began */
    json_t *passes;       /* cluster id -> supervise passes completed since mtcd started */
    int64_t started_ms;   /* when control_create ran (mtcd started) */
    json_t
        *restarts; /* "cluster/node" -> [previous, last] ms the supervisor restarted its slurmd */
    int running;   /* worker threads alive */
    int stopping;
    int poked; /* wake the supervisor early */
    int supervisor_started;
    pthread_t supervisor;
    struct control_datasets datasets;
};

struct health_result;
/* Store res[0..n) as node's health (results: the reported JSON, or NULL to
 * store res itself), its speed probes first judged against the pool when
 * judge_speed; wakes the supervisor on a FAIL. The worst status, or -1 when
 * the store failed. */
enum health_status control_record_health(struct control *c, const struct store_cluster *cl,
                                         const char *node, enum health_mode mode, int judge_speed,
                                         struct health_result *res, int n, const json_t *results);

int control_run_remediate(struct control *c, struct store_op *op, json_t **response,
                          mtc_error_t *err);
/* Set a node's remediation state (shared.c; the store keeps its name). */
void control_set_remediation(struct control *c, const char *id, const char *node,
                             enum control_remediation state);
/* Record an event of cluster id about node and log it (shared.c). */
void control_event(struct control *c, const char *id, const char *type, const char *node,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Start a stored operation again after a restart (ops.c): control_submit
 * without waiting for its key's turn (-1, EBUSY when it is held). */
int control_resume_op(struct control *c, const char *op_id, mtc_error_t *err);
/* Whether a daemon.slurmd failure reported at report_ms is the supervisor's
 * to fix (see SLURMD_START_GRACE_MS): 1 to leave the node alone for now. */
int control_slurmd_supervised(struct control *c, const char *cluster, const char *node,
                              int64_t report_ms);
/* A dataset's CREATE or PREPARE (prepare.c): 0 with *response, or -1 with err
 * and *code, the google.rpc code of the failure. */
int control_run_dataset(struct control *c, struct store_op *op, json_t **response, int *code,
                        mtc_error_t *err);
/* A model's UPLOAD (upload.c): 0 with *response, or -1 with err and *code. */
int control_run_model(struct control *c, struct store_op *op, json_t **response, int *code,
                      mtc_error_t *err);
/* A cluster's HEALTH_SCAN (healthscan.c): 0 with *response (the report), or
 * -1 with err and *code. */
int control_run_healthscan(struct control *c, struct store_op *op, json_t **response, int *code,
                           mtc_error_t *err);
void control_check_health(struct control *c, const struct store_cluster *cl);
/* The provider's view of the cluster's nodes, stored when it differs from
 * stored (a node moved to another host, a state). Returns it (NULL when the
 * provider has none); caller decrefs. */
json_t *control_refresh_nodes(struct control *c, const char *id, const json_t *spec,
                              const json_t *stored);
void control_node_down(struct control *c, const char *id, const char *node, const char *state);

#endif
