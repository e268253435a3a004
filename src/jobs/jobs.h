/* jobs: training jobs as a service, between the API (and the CLI, the API's
 * client) and recipes/Slurm. A job is a recipe run submitted to a cluster's
 * Slurm: jobs_submit checks a trainingJobs request and submits it
 * (submit.c; jobs_from_model and jobs_resolve are the steps `mtc run -e
 * local` and --dry-run share with it); jobs_refresh follows a job's state
 * from Slurm and its exit record into the store (state.c, one Slurm query
 * per cluster and pass; a requeue that was a preemption becomes a
 * TRAINING_PREEMPTED event naming the preemptor); jobs_watch reads a running job's new metrics rows
 * and records each early problem that starts as an event (watch.c); the
 * monitor does both for every unfinished job on its own (monitor.c);
 * jobs_inject_fault puts a fault into a running job on purpose (chaos.c,
 * `mtc chaos`). The HTTP handlers (api/jobs.c) parse and answer. */
#ifndef MTC_JOBS_H
#define MTC_JOBS_H

#include <jansson.h>
#include <limits.h>

#include "common/common.h"
#include "experiment/experiment.h"
#include "schema/schema.h"

struct store;
struct store_job;
struct store_cluster;
struct provider;
struct recipe_run;
struct exp_track;

/* What jobs asks of the modules beside and above it, given by whoever owns
 * them (mtcd's server fills it from its control: control_jobs_ops): the
 * provider, for a cluster's Slurm environment and faults put into its nodes;
 * the trainer that converts datasets; and a REMEDIATE operation started for
 * a node (`mtc chaos --fault node`, as :reportFaultyNodes). */
struct jobs_ops {
    struct provider *prov;
    const char *trainer; /* dataset conversions' mtc-train (NULL: the PATH's) */
    /* items: [{node, check, reason, severity}] of cluster (project,
     * location); the operation's id into op_id, also with EBUSY (the node's
     * running one). 0, or -1 + errno + err. */
    int (*remediate)(void *arg, const char *project, const char *location, const char *cluster,
                     json_t *items, char op_id[48], mtc_error_t *err);
    void *arg;
};

/* ---- state (state.c) ---- */

/* A training job's state as the API says it. */
enum jobs_state {
    JOBS_PENDING,
    JOBS_RUNNING,
    JOBS_COMPLETED,
    JOBS_FAILED,
    JOBS_CANCELLED,
    JOBS_REQUEUED
};
extern const struct schema_enum jobs_state_enum;
/* 1 for COMPLETED, FAILED and CANCELLED. */
int jobs_state_final(const char *state);

/* Look at Slurm (then the experiment's exit record) and store a job's state
 * and restarts when they changed (each new restart that slurmctld's log
 * calls a preemption: one TRAINING_PREEMPTED event, "trainingJob J
 * (experiment E): preempted by 7 (qos high) at TIME after step N; requeued,
 * it resumes from its checkpoint"); a final state is kept, a job nobody knows
 * keeps its last; a job seen requeued and pending again is released from
 * Slurm's requeue hold (StartTime=now+1). pass: what Slurm said this pass, by
 * slurm.conf (a JSON object the caller makes and frees; the first job of a
 * cluster asks Slurm for all its jobs at once, later ones read the answer);
 * NULL: ask about this job alone. */
void jobs_refresh_state(struct store *st, struct store_job *j, json_t *pass);
/* jobs_refresh_state, then, for a job past PENDING, jobs_watch. */
void jobs_refresh(struct store *st, struct store_job *j, json_t *pass);
/* scancel the job and wait (2 s at most) for Slurm to say it is final.
 * 0, or -1 + err: EALREADY (already final: a precondition), EIO (Slurm or
 * its cluster is gone). */
int jobs_cancel(struct store *st, struct store_job *j, mtc_error_t *err);

/* ---- submission (submit.c) ---- */

/* Where a run is resolved: the registry its --from-model names and its
 * final checkpoint registers in (home, project, location), the trainer
 * conversions use (may be NULL), and the cluster's slurm.conf the job
 * names (NULL: none). */
struct jobs_where {
    const char *home, *project, *location;
    const char *convert_trainer;
    const char *slurm_conf;
    /* whom mtcd (as root) resolves the request's paths for (realpath of its
     * directories, --from-experiment's runs and checkpoints): NULL, itself */
    const struct mtc_user *as;
};

/* What a run's recipe_run points into (it holds pointers): owned by the
 * caller, alive as long as the run. */
struct jobs_paths {
    char image[PATH_MAX];     /* -i, absolute and checked */
    char dataset[PATH_MAX];   /* --dataset's prepared data */
    char init[PATH_MAX];      /* --from-model's files, the initial weights */
    char registrar[PATH_MAX]; /* the mtc the job's last step registers with */
};

/* The recipe of a request: a catalog name (never a file: mtcd reads no path
 * a client names) or an object, with its overrides merged in and validated.
 * NULL + err (EINVAL). Caller decrefs. */
json_t *jobs_recipe(const json_t *req, mtc_error_t *err);
/* -i: a squashfs image, its absolute path (nodes resolve it, not the
 * caller) into p->image, the file opened as as (NULL: this process's user;
 * mtc_open_as_user): whatever as cannot read is one answer, "cannot read
 * IMAGE as user U", so that a missing file, a forbidden one and one that is
 * no image are told apart only by a user who may read them;
 * jobs_check_image: on a cluster whose srun (conf; NULL: the environment's)
 * knows --container-image. 0, or -1 + err (EINVAL) naming containerImage. */
int jobs_image_path(const char *image, const struct mtc_user *as, struct jobs_paths *p,
                    mtc_error_t *err);
int jobs_check_image(const char *conf, const char *image, const struct mtc_user *as,
                     struct jobs_paths *p, mtc_error_t *err);
/* fromModel: the registered version's files become run->from_checkpoint
 * (p->init; the caller has refused it beside fromCheckpoint or
 * fromExperiment). 0 (also without fromModel), or -1 + err (ENOENT: no such
 * model or alias). The error names no field: the caller does, as its user
 * spells it. */
int jobs_from_model(const struct jobs_where *w, struct recipe_run *run, struct jobs_paths *p,
                    mtc_error_t *err);
/* The run's config: recipe_resolve, the fromModel version it starts from,
 * the registry its final checkpoint registers in (home, unless on_hosts:
 * mtcd's URL is added by jobs_submit), and w->slurm_conf. NULL + err. */
json_t *jobs_resolve(const struct jobs_where *w, const json_t *recipe, const struct recipe_run *run,
                     int on_hosts, mtc_error_t *err);

/* A trainingJobs request, checked and submitted. */
struct jobs_request {
    struct store *st;
    const struct jobs_ops *ops;
    const char *home; /* mtcd's: the registry, and experiments without experimentRoot */
    const struct store_cluster *cl; /* the cluster, RUNNING */
    const json_t *req;              /* recipe_request_parse's canonical request */
    /* the Unix user the job runs as (mtcd as root: its directory under
     * <experiment root>/users/NAME, made and submitted as that user), or NULL */
    const struct mtc_user *as;
};
/* Resolve, check and submit the run of q (run: parsed from q->req; its
 * paths point into p). *cfg gets the submitted run's config. 0, or -1 +
 * err + errno: EINVAL the request is wrong, ENOENT what it names is not
 * there (fromModel), anything else mtcd's or the cluster's side. */
int jobs_submit(const struct jobs_request *q, struct recipe_run *run, struct jobs_paths *p,
                json_t **cfg, mtc_error_t *err);

/* Registrar tokens: a new one for run's directory checkpoint (the one it
 * registers: its checkpoints, or what a custom task's program wrote) as
 * model (cluster in project/location), its secret into token and id into id; 0, or -1 +
 * errno + err (registrar.c; api/registrar.c checks what one may do). */
int jobs_registrar_mint(struct store *st, const char *cluster, const char *project,
                        const char *location, const char *model, const char *run,
                        const char *checkpoint, char token[80], char id[24], mtc_error_t *err);

/* This thread's file accesses as the user a stored job runs as
 * (recipe_run_as; none when it runs as mtcd's own user), mtc_fsid_enter,
 * for reading or removing what the job wrote — a symlink its user made then
 * reaches only what that user could. */
void jobs_fs_enter(const json_t *cfg, struct mtc_fsid *saved);
/* Whose a job is: the Unix user it runs as, "" when it runs as mtcd's own
 * (into owner; returned). jobs_event: an event about j's run, stored with
 * its owner: message (it may quote the run's log and metrics) for the
 * owner's eyes, brief for anyone else's (store_event_add_job). */
const char *jobs_owner(const json_t *cfg, char owner[33]);
int jobs_event(struct store *st, const struct store_job *j, const char *type, const char *brief,
               const char *message);

/* ---- progress and early problems (watch.c) ---- */

/* The run's exp_track (kept between calls, read on from where it stopped)
 * updated to now, copied to out. 0/-1. */
int jobs_track(const json_t *cfg, double now, struct exp_track *out);
/* The same, its preemptions asked of Slurm now (jobs_track asks once a start
 * of the run ended without an exit status, and again after each such end). */
int jobs_track_preempted(const json_t *cfg, double now, struct exp_track *out);
/* Early problem detection's events: each alert that starts in the job's
 * rows read since the last call becomes one event of the job's cluster
 * (TRAINING_NONFINITE, TRAINING_LOSS_SPIKE, TRAINING_THROUGHPUT_DROP,
 * TRAINING_STALL) with a one-line message naming the job; and with the
 * recipe's monitor.hang_timeout_s, a running job without progress for that
 * long gets TRAINING_HANG and is requeued (at most monitor.max_restarts,
 * default 3, restarts). */
void jobs_watch(struct store *st, const struct store_job *j, double now);
/* The last line the program wrote to the run's log (mtc's, srun's and
 * slurmstepd's own lines passed over; "" when none), into buf. */
const char *jobs_last_line(const json_t *cfg, char *buf, size_t len);

/* ---- chaos (chaos.c): faults injected on purpose, `mtc chaos` ---- */

/* The faults, by the mechanisms mtc's fault tests use: node (one of the
 * job's nodes reported faulty: drained, its jobs requeued, rebooted, as
 * :reportFaultyNodes does), hang (one rank SIGSTOPped), kill-rank (one rank
 * SIGKILLed), slurmd (the node's slurmd killed -9; supervision restarts it). */
enum jobs_fault { JOBS_FAULT_NODE, JOBS_FAULT_HANG, JOBS_FAULT_KILL_RANK, JOBS_FAULT_SLURMD };
extern const struct schema_enum jobs_fault_enum;
/* :injectFault's body (proto3): {"fault" (required), "node" (one of the
 * job's nodes; absent: picked), "seed" (0..2^31-1; absent: a random one),
 * "index" (which fault of a run this is, 1..10^6, default 1),
 * "validateOnly" (true: the request is checked, nothing is injected)}. */
extern const struct schema jobs_fault_request_schema;
/* The pick for fault index of a run with seed: what 0 the node (modulo the
 * job's node count), 1 the rank (modulo the node's tasks). The same
 * arguments give the same pick on every machine. */
unsigned jobs_fault_pick(int seed, int index, int what);
/* Inject the fault body asks for (jobs_fault_request_schema) into job j of
 * cluster cl, which must be RUNNING (its state is refreshed from Slurm
 * first), and record it as a CHAOS_FAULT event of the cluster naming the
 * fault, the node, what was hit and the fault's index and seed. Returns
 * {"fault", "index", "seed", "node", "trainingJob", "slurmJobId", "rank"?,
 * "pid"?, "operation"? (node: the REMEDIATE operation's id), "hit" (what
 * it did, one line), "warning"? (what the job lacks to survive the fault:
 * monitor.hang_timeout_s for a hang, retry_on_error for a killed rank),
 * "description" (the event's text)} (caller owns; validateOnly: fault,
 * index, seed, trainingJob, validateOnly, warning?), or NULL with err (one line) and *http: 400
 * (bad body, a node not the job's; "precondition: " when the job is not
 * running, its tasks have not started on the node or the node is being
 * remediated: try again), 501 (the cluster's provider cannot), 500. */
json_t *jobs_inject_fault(struct store *st, const struct jobs_ops *ops, const struct store_cluster *cl,
                          struct store_job *j, const json_t *body, int *http, mtc_error_t *err);

/* ---- the monitor (monitor.c) and its view of the queues (queue.c) ---- */

/* A thread that refreshes every unfinished job each interval_ms (0:
 * JOBS_MONITOR_MS), one Slurm query per cluster and pass; with ops, every
 * cluster whose Slurm is up (RUNNING, UPDATING) is asked that once a pass,
 * jobs or not, and what it said kept for jobs_queue_view; stop joins it. */
#define JOBS_MONITOR_MS 5000
struct jobs_monitor;
struct jobs_monitor *jobs_monitor_start(struct store *st, const struct jobs_ops *ops, int interval_ms,
                                        mtc_error_t *err);
/* How often a cluster's accounts' usage is asked of its accounting
 * database: each JOBS_USAGE_MS, or JOBS_USAGE_MOVED_MS after the last when
 * the cluster's running jobs are others than then (one started or ended). */
#define JOBS_USAGE_MS 60000
#define JOBS_USAGE_MOVED_MS 10000
/* One look of a monitor pass at every cluster's Slurm: one `scontrol show
 * job` each, its answer put into pass (by slurm.conf, as jobs_refresh reads
 * it: JSON null when Slurm did not answer) and tallied into the cluster's
 * view; its usage (slurm_usage since the cluster's creation, summed per
 * account; clusters with accounting) as JOBS_USAGE_MS says. */
void jobs_queue_look(struct store *st, const struct jobs_ops *ops, json_t *pass);
/* What the last look saw of cluster (created at created_ms: a cluster made
 * again under the same id has none until the next look): {"time": ms of
 * the look, "pending": {"ACCOUNT\nREASON": n}, "running": {ACCOUNT: n},
 * "usage"?: {ACCOUNT: [nodeHours, gpuHours]}, "usageTime"?: ms} (ACCOUNT ""
 * without accounting, REASON "None" before the scheduler's first look), or
 * NULL when none. Caller owns. */
json_t *jobs_queue_view(const char *cluster, int64_t created_ms);
void jobs_monitor_stop(struct jobs_monitor *m);
/* Passes the job monitor has completed in this process: what a client waits
 * on to know every unfinished job was looked at since some moment
 * (mtc_job_monitor_passes_total). */
long long jobs_monitor_passes(void);

#endif
