/* experiment: one run of a workload — its config.json and its experiment
 * directory ($MTC_HOME/experiments/<name>/<name>_<ts>/<task>/), the state of
 * its job, and its observation: progress rows, goodput and the breakdown of
 * its time, early problem detection, preemptions and log rules. recipes
 * writes a run; jobs, control, api and cmd ask this module about it and
 * read none of its keys or files themselves. */
#ifndef MTC_EXPERIMENT_H
#define MTC_EXPERIMENT_H

#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"

/* ---- experiments (experiment.c) ---- */

/* Valid experiment/task name: [A-Za-z0-9][A-Za-z0-9._-]{0,63}. */
int exp_name_valid(const char *name);

/* Create <home>/experiments/<name>/<name>_<ts>/<task>/ and the directories the
 * resolved config names (checkpoints, logs; links to them when they live
 * elsewhere), and write script and config.json there. The run directory
 * <name>_<ts> must not exist yet (-1, errno EEXIST: another run's). 0/-1 + err. */
int exp_create(const json_t *resolved, const char *script, mtc_error_t *err);
/* The same for a run whose exp_set_job follows at once (a submission): the
 * files are written whole but not fsync'd, but for the script's data;
 * exp_set_job's durable config.json makes the task directory durable for
 * both (one directory fsync instead of four fsyncs). */
int exp_create_submitting(const json_t *resolved, const char *script, mtc_error_t *err);

/* Nothing ran: remove the run's directory, and the experiment's and
 * experiments/ with it when that was all they held. */
void exp_remove(const json_t *cfg);

/* Record the job id in config.json (after submission). 0/-1 + err. */
int exp_set_job(json_t *resolved, const char *job_id, mtc_error_t *err);

/* Find the newest run of an experiment: ref is a name ("demo-run"), a run id
 * ("demo-run_1764424800") or a task directory path. Returns its config.json
 * (caller decrefs) or NULL + err listing the known experiments. */
json_t *exp_find(const char *home, const char *ref, mtc_error_t *err);

/* Every run under home, newest first: an array of config objects. */
json_t *exp_list(const char *home, mtc_error_t *err);

/* Current state of a run's job: "PENDING", "RUNNING", "COMPLETED", "FAILED",
 * "CANCELLED", "REQUEUED", ... from squeue, then `scontrol show job`, then the
 * exit-status file the script writes, for local runs the pid. into buf. */
const char *exp_job_state(const json_t *cfg, char *buf, size_t len);
/* Write CANCELLED into the exit file (a local run stopped by `mtc experiment
 * cancel`): 0/-1 + errno. */
int exp_record_cancelled(const json_t *cfg);
/* A Slurm run's state given what its cluster's Slurm said of its job (slurm:
 * its JobState; NULL: Slurm knows it no more, or did not answer): Slurm's,
 * else the exit-status file's, else "UNKNOWN". into buf. */
const char *exp_job_state_of(const json_t *cfg, const char *slurm, char *buf, size_t len);
/* TASK_DIR/JOB.exit, what the job script records when it ends (its exit
 * status, or CANCELLED from `mtc experiment cancel`); NULL when there is none.
 * Caller frees. */
char *exp_exit_record(const json_t *cfg, const char *job);
/* The run's own cluster for src/slurm's operations: *conf = the slurm.conf
 * recorded at submit, else NULL (the environment's). 0, or -1 + ENOENT when
 * that cluster's slurm.conf is gone (a deleted cluster). */
int exp_slurm_conf(const json_t *cfg, const char **conf);

/* 1 when a state is final (the job will write no more). */
int exp_state_final(const char *state);

/* The status block `mtc run` and `mtc experiment status` print. */
void exp_print_status(FILE *f, const json_t *cfg, const char *state);

/* ---- one run as a typed thing (run.c) ---- */

/* A run's config.json fields by name, NULL when absent: its task directory,
 * experiment name, run id (<experiment>_<timestamp>) and Slurm job id; its
 * checkpoint directory and the checkpoint it started from (init), the
 * slurm.conf of its cluster as recorded at submit, the model name it
 * registers under, its log directory (metrics, TensorBoard). For callers
 * that hold the JSON (a stored trainingJob's config); struct exp_run names
 * them all. */
const char *exp_task_dir(const json_t *cfg);
const char *exp_experiment(const json_t *cfg);
const char *exp_run_id(const json_t *cfg);
const char *exp_job_id(const json_t *cfg);
const char *exp_checkpoint_dir(const json_t *cfg);
const char *exp_checkpoint_init(const json_t *cfg);
const char *exp_recorded_conf(const json_t *cfg);
const char *exp_register_model(const json_t *cfg);
const char *exp_log_dir(const json_t *cfg);
/* 1 when the run is a custom task's (a program of the user's, not mtc-train). */
int exp_is_custom(const json_t *cfg);
/* 1 when the run is the local executor's (the script run by bash here, no
 * Slurm: its job id is a pid). */
int exp_is_local(const json_t *cfg);
/* Its run directory, <experiments>/<name>/<name>_<ts> (the task directory's
 * parent; "" without one), into buf. */
const char *exp_run_dir(const json_t *cfg, char *buf, size_t len);
/* The user a run (or an upload's request) runs as: its runAs, set when mtcd
 * as root submits for a user, into u (name, uid, gid); 0, or -1 when it
 * runs as mtcd's own user. */
int exp_run_as(const json_t *cfg, struct mtc_user *u);

/* Path of the run's log (<task dir>/<JOB_ID>.log) into buf. */
const char *exp_log_path(const json_t *cfg, char *buf, size_t len);
/* Path of the run's progress rows (<log dir>/metrics.jsonl, what mtc-train
 * writes and MTC_METRICS_FILE names) into buf; NULL (buf "") when the run
 * has no log directory or the path does not fit. */
const char *exp_metrics_path(const json_t *cfg, char *buf, size_t len);

/* Thresholds of early problem detection (a recipe's "monitor" section). */
struct exp_monitor {
    int window;           /* loss rows the spike's median/MAD look back over */
    double spike_z;       /* robust z-score ((loss - median) / (1.4826 MAD)) above: a spike */
    double drop_fraction; /* tokens/s below this fraction of the run's median: a drop */
    double stall_factor;  /* no row for this many median step times: a stall */
    int min_rows;         /* rows needed before spikes and drops are judged */
    int stall_hangs;      /* the recipe gave stall_factor: a stall is a hang too */
    double hang_timeout_s; /* no progress this long after a row or a start: a hang, and mtcd
                            * requeues the job (0: no hang detection, stalls are events only) */
    int max_restarts;      /* a hang requeues a job that restarted fewer times than this */
};

/* One run: every field of its config.json by name (strings borrowed from
 * cfg; NULL or 0 when absent) and the paths built from them. */
struct exp_run {
    json_t *cfg; /* its config.json: owned after exp_run_load, borrowed after exp_run_of */
    int owned;
    const char *task, *recipe, *executor, *cluster_type, *partition, *image, *time;
    int64_t nodes;
    int64_t retry_on_error;            /* a failed job is requeued this many times */
    const char *experiment, *run_id;   /* <experiment>_<timestamp> */
    const char *task_dir, *log_dir;    /* <run dir>/<task>, metrics and TensorBoard */
    const char *job_id;                /* Slurm's (or the local executor's pid) */
    const char *slurm_conf;            /* its cluster's, as recorded at submit */
    const char *training_job;          /* the API's trainingJob id (NULL: `mtc run`'s) */
    const char *from_model, *from_model_version; /* --from-model, and the version it meant */
    const char *checkpoint_dir, *checkpoint_init;
    const char *data_path, *tokenizer; /* its data section's */
    struct mtc_user user;              /* whom it runs as, when has_user (runAs) */
    int has_user;
    struct {
        const char *model, *dir; /* the registry model its result registers under, and from */
    } reg;
    const json_t *train, *model, *overrides, *launch; /* sections, borrowed */
    struct exp_monitor monitor;                        /* its thresholds (defaults filled) */
    char run_dir[PATH_MAX];                            /* the task directory's parent */
    char log_path[PATH_MAX + 16], metrics_path[PATH_MAX + 16]; /* "" when not known */
};
/* r as a view of cfg (which must outlive it). */
void exp_run_of(const json_t *cfg, struct exp_run *r);
/* <task_dir>/config.json read with the thread's ids (a regular file only)
 * into r, which owns it: 0, or -1 + err naming the file. Release it. */
int exp_run_load(const char *task_dir, struct exp_run *r, mtc_error_t *err);
/* r's config.json written whole (temp + rename, fsync'd): 0, or -1 + err. */
int exp_run_save(const struct exp_run *r, mtc_error_t *err);
void exp_run_release(struct exp_run *r);
/* The same for the JSON: NULL + errno; flags as mtc_write_file_atomic_opt's. */
json_t *exp_config_load(const char *task_dir);
int exp_config_save(const json_t *cfg, int flags, mtc_error_t *err);
/* The registry a run's result registers in (its "register" section, when it
 * has one): mtcd's home (NULL: leave it out — the job registers over TCP),
 * project and location. */
void exp_register_where(json_t *cfg, const char *home, const char *project, const char *location);
/* ... and over HTTPS: mtcd's URL and its CA certificate (NULL: none). */
void exp_register_via(json_t *cfg, const char *url, const char *ca_cert);
/* What a client knows of a run it cannot read (mtcd on another host): the
 * trainingJob resource's run id, experiment, Slurm job and task directory,
 * as a config for exp_print_status. New reference. */
json_t *exp_config_of_job(const char *run_id, const char *experiment, const char *job_id,
                          const char *task_dir);
/* Record whom the run runs as (mtcd as root submitting for a user). */
void exp_set_run_as(json_t *cfg, const struct mtc_user *u);
/* --from-model NAME@alias resolved: "NAME@<version>" recorded. */
void exp_set_from_model_version(json_t *cfg, const char *from_model, int version);
/* The slurm.conf of the cluster it is submitted to. */
void exp_set_recorded_conf(json_t *cfg, const char *slurm_conf);
/* The API's trainingJob it is (its resource name or id). */
void exp_set_training_job(json_t *cfg, const char *name);

/* ---- what a run wrote (files.c): read with the calling thread's ids ---- */

/* Its training curve: metrics.jsonl's rows after step after, at most max. */
json_t *exp_curve(const json_t *cfg, int64_t after, size_t max);
/* The last EXP_LOG_TAIL bytes of its log as a JSON string ("" when it
 * cannot be read), cut at a character, bytes that are not UTF-8 as '?'. */
#define EXP_LOG_TAIL 8192
json_t *exp_log_tail(const json_t *cfg);
/* The last line of its log the program wrote (not mtc's, srun's or
 * slurmstepd's), from its last 16 KiB, into buf ("" when none). */
const char *exp_last_line(const json_t *cfg, char *buf, size_t len);
/* The names in its checkpoint directory, at most max. */
json_t *exp_checkpoints(const json_t *cfg, size_t max);

/* ---- goodput (goodput.c) and early problem detection (detect.c) ---- */

#define EXP_TRACK_RING 256 /* rows the detectors look back over */
#define EXP_SEGS 64        /* a run's starts kept apart; later ones merge into the last */
#define EXP_LOG_RULES 4    /* monitor.log_rules at most */

/* One start of a run (a segment of its wall time), from its log: the start
 * and end lines, the progress rows that came while it ran, the steps it
 * reached and resumed from, the checkpoint saves it reported. */
struct exp_seg {
    double start, end;       /* epoch s of its start line and end line (0: none) */
    double first, first_dt;  /* its first progress row's time and step time (0: none) */
    double last;             /* its last progress row's time */
    double ckpt_s;           /* checkpoint saves reported (rows, log rules) */
    int64_t first_step, max_step; /* first and highest step seen (rows, progress lines) */
    int64_t resume;          /* the step it resumed from (-1: not said) */
    int64_t nrows;
};

/* A preemption of the run's job (PreemptMode=REQUEUE): when, and by which
 * job of which QoS. */
#define EXP_PREEMPTS 8
struct exp_preempt {
    double time;  /* epoch s */
    char by[32];  /* the preempting Slurm job ("": not known) */
    char qos[64]; /* its QoS ("": not known) */
};

/* Where a run's time went: the parts sum to total_s, the time since the job
 * was submitted; all but queue_s sum to wall_s, since its first start. */
struct exp_breakdown {
    double queue_s;      /* submitted → first start */
    double startup_s;    /* each start → its first step */
    double productive_s; /* steps that were kept */
    double checkpoint_s; /* checkpoint saves, and the final save and exit */
    double lost_s;       /* steps done again after a restart, and the step in flight */
    double restart_s;    /* a start's end → the next start (requeue, node replaced) */
    double hang_s;       /* no progress while holding the nodes, beyond a step's time */
    double total_s;
    /* not parts (they are in restart_s): the starts that ended in a
     * preemption, and their gaps to the next start */
    int preemptions;
    double preempted_s;
};
/* One run's progress, read incrementally: exp_track_init once, then
 * exp_track_update (metrics.jsonl from the last offset; the log whole). */
struct exp_track {
    char metrics_path[PATH_MAX + 16], log_path[PATH_MAX + 16];
    double tok_per_step;  /* train.global_batch × train.seq_length */
    unsigned long ino;    /* metrics.jsonl's inode: a resume replaces the file */
    long long off;        /* bytes of it read */
    double m_wall;        /* its last row's time, given or placed (a row that says
                           * neither time nor step time: goodput.c's read_metrics) */
    int64_t rows, step;   /* rows read, the highest step */
    double loss, tokens_per_s, mfu; /* the last row's */
    int64_t nonfinite;    /* rows whose loss was NaN/Inf */
    double kept_s;        /* Σ tok_per_step / tokens_per_s: time of the kept steps */
    size_t ring_n, ring_pos;
    double ring_loss[EXP_TRACK_RING], ring_tps[EXP_TRACK_RING], ring_dt[EXP_TRACK_RING];
    int64_t ring_step[EXP_TRACK_RING];
    /* from the log: epoch seconds of the first start and of the end (0: running) */
    double first_start, end, last_row;
    double last_start; /* epoch seconds of the latest start */
    /* a custom task's TensorBoard events (read when it writes no metrics rows):
     * the newest event file under MTC_TENSORBOARD_DIR, read on from tb_off;
     * scalars whose tag is one of tb_tags are its loss rows */
    char tb_dir[PATH_MAX + 16], tb_file[PATH_MAX + 64];
    long long tb_off;
    double tb_wall;  /* the previous row's time and step (TensorBoard, log rules): */
    int64_t tb_step; /* a step time where the row says none */
    char tb_tags[8][64];
    int tb_ntags;
    double tb_mtime; /* the event file's mtime: the last row's time */
    int starts, restarts;
    int64_t repeated, lost;
    unsigned long log_ino;
    long long log_off;
    double wall_s, goodput; /* goodput = kept_s / wall_s, the chaos benchmark's ETTR */
    /* the breakdown's inputs: the submit time (config's submitTime), the
     * starts, the newest row time given to them (a rewritten metrics.jsonl
     * is reread: older rows were counted), and the log rules' patterns */
    double submit, seg_time;
    struct exp_seg segs[EXP_SEGS];
    int nsegs;
    double rank_hung;       /* when the log said a process stopped or turned zombie (0: not
                             * since the latest start) — mtc-agent ranks' line, in rank_msg */
    char rank_msg[160];
    char log_rules[EXP_LOG_RULES][256];
    int nlog_rules, log_rows; /* log_rows: a rule gives step or loss */
    /* the run's preemptions, as Slurm says them (exp_track_preemptions;
     * nothing reads them from the log) */
    struct exp_preempt preempt[EXP_PREEMPTS];
    int npreempt;
    int stopped; /* starts whose end line gave no exit status (a signal, a requeue):
                  * the run's preemptions are asked for only once there is one */
    struct exp_breakdown bd;
};
void exp_track_init(struct exp_track *t, const json_t *cfg);
void exp_track_update(struct exp_track *t, double now);
/* Add one metrics row (exp_track_update's reader, and tests). */
void exp_track_row(struct exp_track *t, int64_t step, double loss, double tps, double mfu);

/* The breakdown's segments (breakdown.c): a start line, an end line, a
 * progress row at time (0: unknown — its step time after the last) taking
 * dt, a step reached (a progress line) or resumed from, a checkpoint save. */
void exp_seg_start(struct exp_track *t, double when);
void exp_seg_end(struct exp_track *t, double when);
void exp_seg_row(struct exp_track *t, int64_t step, double time, double dt);
void exp_seg_step(struct exp_track *t, int64_t step);
void exp_seg_resume(struct exp_track *t, int64_t step);
void exp_seg_checkpoint(struct exp_track *t, double seconds);
/* Steps done again after restarts: per start, the highest step before the
 * next one less the step that one resumed from. */
int64_t exp_seg_repeated(const struct exp_track *t);
/* The median step time of the recent rows (0: none known). */
double exp_track_step_time(const struct exp_track *t);
/* t->bd as of now (the run's end when it ended). */
void exp_breakdown_update(struct exp_track *t, double now);
/* The run's preemptions (preempt.c): what slurmctld's log says of
 * its job (slurm_job_preemptions) into t->preempt, and the breakdown
 * updated to now. The count, or -1 (not a Slurm run, no job yet, the log
 * not readable here: t is left as it was). */
int exp_track_preemptions(struct exp_track *t, const json_t *cfg, double now);
/* Which start of the run a preemption at when ended: the number of starts
 * at or before it (1: the first), 0 before any (breakdown.c: the starts are
 * its segments). */
int exp_track_attempt(const struct exp_track *t, double when);
/* "preempted by 7 (qos high)" into buf (qos left out when not known; no
 * preemptor known: "preempted (by a job only slurmctld's log names)"). */
const char *exp_preempt_text(const struct exp_preempt *p, char *buf, size_t len);
/* The API's progress.breakdown object (queueSeconds … totalSeconds). */
json_t *exp_breakdown_json(const struct exp_breakdown *b);

/* monitor.log_rules (logrule.c): a POSIX extended regex whose named groups
 * (?<step>…) (?<loss>…) (?<step_time_s>…) (?<checkpoint_s>…) take a value
 * from a matching log line; matched in time linear in the line (no
 * back-references, no nested quantifiers: refused by exp_logrule_compile). */
enum exp_capture { EXP_CAP_STEP, EXP_CAP_LOSS, EXP_CAP_STEP_TIME, EXP_CAP_CHECKPOINT, EXP_CAP_N };
#define EXP_LOGRULE_GROUPS 16
#define EXP_LOGRULE_DUP 32 /* the largest {m,n} count (regcomp copies the atom) */
/* A rule sees a line's first EXP_LOGRULE_LINE_MAX - 1 bytes (and `$` never
 * matches where they are cut): the longest line goodput.c reads from a log,
 * which skips longer ones whole. */
#define EXP_LOGRULE_LINE_MAX 4096
#define EXP_LOGRULE_NEEDS 4 /* literals kept for the prefilter */
struct exp_logrule {
    void *re; /* TRE's regex_t, owned (exp_logrule_release frees it) */
    int compiled;
    int group[EXP_CAP_N]; /* the group of each name (0: not in the pattern) */
    /* Strings every match holds (runs of literal characters the pattern's
     * top level requires, longest first): a line without one of them is no
     * match, found by memmem before the matcher runs. Owned. */
    char *need[EXP_LOGRULE_NEEDS];
    int nneed;
};
int exp_logrule_compile(struct exp_logrule *r, const char *pattern, mtc_error_t *err);
void exp_logrule_release(struct exp_logrule *r);
/* The EXP_CAP_* bits line's match gives (0: no match), their values in v. */
int exp_logrule_match(const struct exp_logrule *r, const char *line, double v[EXP_CAP_N]);

extern const struct exp_monitor exp_monitor_default;
/* The run's thresholds: the defaults with config.json's "monitor" section
 * (the recipe's, validated by recipe_normalize) over them. */
void exp_monitor_from(const json_t *cfg, struct exp_monitor *m);
enum exp_alert { EXP_ALERT_NONFINITE = 1, EXP_ALERT_SPIKE = 2, EXP_ALERT_DROP = 4, EXP_ALERT_STALL = 8 };
/* The alerts (EXP_ALERT_* bits) the newest row and now raise; msg: the first's text. */
int exp_monitor_check(const struct exp_track *t, const struct exp_monitor *m, double now,
                      char *msg, size_t len);
/* The API's "progress" object (goodput, productiveSeconds, wallSeconds, step,
 * restarts, stepsRepeated, stepsLost, loss, tokensPerSecond, mfu, alerts,
 * alertMessage) and the status block's lines (none before the first start). */
json_t *exp_track_json(const struct exp_track *t, int alerts, const char *msg);
/* Each alert that starts among the rows read since the last call (each row
 * judged once, as if it were the newest; a stall judged now): fn(kind, its
 * one-line message) once per occurrence — an alert raised again only after a
 * row without it. *raised: the caller's state between calls (0 at first). */
void exp_monitor_scan(const struct exp_track *t, const struct exp_monitor *m, double now,
                      int64_t *seen_rows, int *raised,
                      void (*fn)(void *arg, int kind, const char *msg), void *arg);
/* The alert's name (NONFINITE, LOSS_SPIKE, THROUGHPUT_DROP, STALL). */
const char *exp_alert_name(int kind);
void exp_track_print(FILE *f, const struct exp_track *t, int alerts, const char *msg);

#endif
