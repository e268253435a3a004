/* recipes: prebuilt training workloads as data — loading and validating recipe
 * files, applying cluster-type overrides and `mtc run` options, rendering the
 * sbatch script, and the experiment directories and job status behind it. */
#ifndef MTC_RECIPES_H
#define MTC_RECIPES_H

#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/common.h"
#include "schema/schema.h"

/* ---- recipe files (recipe.c) ---- */

/* A recipe's task ("task" in the file; names in recipe_task_enum). CUSTOM
 * runs a program of the user's (the recipe's "launch" section; any training
 * framework, docs/any-framework.md) instead of mtc-train. */
enum recipe_task { RECIPE_PRETRAIN, RECIPE_CPT, RECIPE_SFT, RECIPE_DPO, RECIPE_GRPO, RECIPE_CUSTOM };
/* How a custom task's ranks start (launch.launcher). */
enum recipe_launcher { RECIPE_SRUN, RECIPE_TORCHRUN };
extern const struct schema_enum recipe_launcher_enum;
/* 1 when the recipe (or resolved config) runs a program of its own. */
int recipe_is_custom(const json_t *recipe);
extern const struct schema_enum recipe_task_enum;

/* Load and validate a recipe. name is a path to a file (contains '/' and exists,
 * or ends in .json), or a catalog name such as "pretrain/llama3p1_2b_pt" (a
 * trailing ".py" or ".json" is ignored) looked up under the recipes/ data
 * directory. path (optional, len bytes) gets the file used. Returns the recipe
 * object (caller decrefs) with "name" set, or NULL + err: an unknown recipe
 * lists the known ones; a bad field is named ("train.lr: must be a number"). */
json_t *recipe_load(const char *name, char *path, size_t len, mtc_error_t *err);

/* The same for catalog names only (never a file path: what mtcd accepts). */
json_t *recipe_load_catalog(const char *name, char *path, size_t len, mtc_error_t *err);

/* Validate a parsed recipe object; unknown fields are errors naming the path.
 * Keys may be snake_case or camelCase. 0/-1 + err. */
int recipe_validate(const json_t *recipe, mtc_error_t *err);
/* The same, returning the canonical recipe (snake_case names in table order;
 * normalizing it again gives it back). Caller owns it; NULL + err. */
json_t *recipe_normalize(const json_t *recipe, mtc_error_t *err);

/* The catalog: an array of {"name","task","model","description","path"}
 * sorted by name. Caller decrefs. NULL + err when no recipes/ directory. */
json_t *recipe_catalog(mtc_error_t *err);

/* Cluster types the launcher knows (hcc-a3m, hcc-a3u, hcc-a4, hcc-a3h, local). */
int recipe_cluster_type_known(const char *type);
/* "hcc-a3m, hcc-a3u, ..." for error messages. */
const char *recipe_cluster_types(void);

/* ---- resolving a run (render.c) ---- */

/* The options of one `mtc run` — and the body of an API trainingJobs create:
 * request.c's field table has a row for every member (the build checks it).
 * NULL/0 fields take the recipe's defaults. */
struct recipe_run {
    const char *recipe;          /* -s: a catalog name, or (CLI) a recipe file */
    const char *executor;        /* "slurm" (default) | "local" */
    const char *cluster_type;    /* --slurm-type; default "local" */
    const char *partition;       /* -p */
    const char *account;         /* --account: the Slurm account it is charged to */
    const char *qos;             /* --qos: its quality of service (priority, preemption) */
    const char *user;            /* API: the Unix user it runs as (an admin's choice; a
                                  * token bound to a user gives it) */
    const char *work_dir;        /* -d: checkpoints and logs go under it when set */
    const char *image;           /* -i: container image (.sqsh) */
    const char *log_dir;         /* --log-dir: metrics + TensorBoard */
    const char *cache_dir;       /* --cache-dir: HF_HOME / MTC_CACHE_DIR in the job */
    const char *data_dir;        /* --data-dir: base of relative data/tokenizer paths */
    const char *time;            /* --time: Slurm time limit */
    const char *from_checkpoint; /* --from-checkpoint: initial weights (--init) */
    const char *from_experiment; /* --from-experiment: its newest run's final checkpoint */
    const char *data;            /* --data: the user's own dataset source (file or dir) */
    const char *dataset;         /* --dataset: a registered dataset, NAME[@VERSION] */
    const char *dataset_path;    /* its version's prepared data (mtcd or mtc resolves it) */
    const char *trainer;         /* absolute path of mtc-train */
    const char *mpi_network;     /* CIDR the ranks' MPI uses (a cluster on hosts), or NULL */
    const char *home;            /* $MTC_HOME */
    const char *experiment;      /* --experiment-name */
    const char *model_name;      /* --model-name: the registry model the final checkpoint
                                  * registers under (default: from the experiment's name) */
    const char *from_model;      /* --from-model NAME@alias|NAME@N: initial weights from the
                                  * registry (whoever submits resolves it into from_checkpoint) */
    const char *registrar;       /* the mtc program the job's last step registers with; NULL:
                                  * no registration */
    int64_t nodes;               /* -n; 0 = recipe's (64 bits: the struct has no padding,
                                  * so request.c's layout check sees any new member) */
    int64_t timestamp;           /* unix seconds of this run (names the run directory) */
};

/* Resolve a recipe for one run: cluster-type overrides applied, ranks and
 * micro-batch computed, paths made absolute, the experiment's directories
 * named. Returns the resolved config (what config.json holds; caller decrefs)
 * or NULL + err. Touches no files. Check it with recipe_check_batch. */
json_t *recipe_resolve(const json_t *recipe, const struct recipe_run *run, mtc_error_t *err);

/* The global batch must be a multiple of micro-batch x ranks (the trainer's
 * rule), said before submitting. 0/-1 + err. */
int recipe_check_batch(const json_t *resolved, mtc_error_t *err);

/* Check what the job will read before submitting: the data directory (with
 * train_*.bin shards for pretraining), the tokenizer, an --init checkpoint.
 * 0/-1 + err naming the missing path and the recipe field it came from. */
int recipe_check_inputs(const json_t *resolved, mtc_error_t *err);

/* The trainer's command line for a resolved config: a NULL-terminated argv
 * (caller frees each string and the array) or NULL + err. */
char **recipe_trainer_argv(const json_t *resolved, mtc_error_t *err);

/* The sbatch script for a resolved config (also run by bash for the local
 * executor). Secrets (HF_TOKEN, WANDB_API_KEY) are never written into it: the
 * job inherits them from the submitting environment. Caller frees. */
char *recipe_render_sbatch(const json_t *resolved, mtc_error_t *err);

/* Variables a job needs whose values are never written down (script,
 * config.json, store): HF_TOKEN, WANDB_API_KEY; NULL-terminated. */
extern const char *const recipe_secrets[];

/* 1 when cidr is an IPv4 or IPv6 network as address/prefix ("10.20.0.0/24"). */
int recipe_network_valid(const char *cidr);
/* Names that reach #SBATCH lines, with the rules `mtc run` and `mtc rl launch`
 * share. A partition: [A-Za-z0-9_.-], 1-64. A time limit: minutes,
 * MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, UNLIMITED or infinite. 1 if valid. */
int recipe_partition_valid(const char *s);
int recipe_time_valid(const char *s);

/* ---- datasets and chaining (data.c; docs/datasets.md) ---- */

/* The data section of a resolved run. --dataset (run->dataset_path: a registered
 * dataset's version, prepared already) is read as it is: {"path": its directory,
 * "tokenizer": the tokenizer.json in it, "dataset": NAME[@VERSION], "cacheDir": the
 * directory again (a container mounts it)}. A recipe's "dataset"
 * (builtin:NAME or a path under --data-dir) or --data makes it a prepared one:
 * {"prepare":true, "source", "kind", "tokenizer" (builtin:tiny-corpus or an absolute
 * path), "cacheDir" (--cache-dir, else HOME/cache)}, which the job prepares as its first
 * step; otherwise {"path","tokenizer"} as before. Both keep "dataDir" and "recipePath". New reference; NULL + err. */
json_t *recipe_resolve_data(const json_t *recipe, const struct recipe_run *run, mtc_error_t *err);
/* The dataset kind a recipe task trains on ("pretrain" for pretrain and cpt, "sft", "dpo"). */
const char *recipe_task_kind(const char *task);
/* --from-experiment: ck's "init" becomes the final checkpoint of the experiment's newest
 * run, which must be COMPLETED and have one; "fromExperiment" names the run. 0 when
 * run->from_experiment is unset; 0, or -1 + err (one line). */
int recipe_resolve_chain(const struct recipe_run *run, json_t *ck, mtc_error_t *err);
/* The data checks before submitting: the source exists and is of the task's kind (the
 * trainer's `data check`: a bad JSONL line is named), the tokenizer exists, and an init
 * checkpoint's tokenizer is the run's. 0, or -1 + err. */
int recipe_check_data(const json_t *resolved, mtc_error_t *err);
/* The user a run (a stored job's config, an upload's request) runs as: its
 * runAs, set when mtcd as root submits for a user, into u (name, uid, gid);
 * 0, or -1 when it runs as mtcd's own user. */
int recipe_run_as(const json_t *cfg, struct mtc_user *u);
/* The resolved run's runAs ids (set when mtcd as root submits for a user)
 * as decimal strings (len bytes each): 0, or -1 when it has none. */
int recipe_run_as_ids(const json_t *resolved, char *uid, char *gid, size_t len);
/* The job script's data step (the prepared kind only; nothing otherwise): runs
 * `mtc-train data prepare` (in the image with image) and sets MTC_DATA to the prepared
 * directory, rc to non-zero on failure. Returns 1 when it wrote one, else 0. */
int recipe_put_prepare(FILE *f, const json_t *resolved);
/* s single-quoted for the job script (NULL: ''), as mtc_shell_quote writes it.
 * Inline: render.c and the files it calls (data.c, launch.c, register.c) all
 * write with it, and a function of render.c's would tie them in a circle. */
static inline void recipe_put_quoted(FILE *f, const char *s)
{
    char *q = mtc_shell_quote(s ? s : "");
    fputs(q ? q : "''", f);
    free(q);
}

/* ---- registration (register.c; docs/models.md) ---- */

/* What the run registers when it completes, config.json's "register":
 * {"model", "mtc" (run->registrar), "dir"} — dir the final checkpoint's
 * directory (ckdir), or for a custom task's "register": {"path", "format"}
 * task_dir/path, with "format" — or NULL when nothing registers (no
 * registrar, "register": false, a custom task without a path). The model is
 * run->model_name, else the experiment's name as a model name. Caller owns. */
json_t *recipe_resolve_register(const json_t *recipe, const struct recipe_run *run,
                                const char *experiment, const char *task_dir, const char *ckdir);
/* The job script's last step for the resolved config's "register" (nothing
 * without one): after rc 0, `mtc models upload DIR --name M --run TASK_DIR`
 * through mtcd (its socket under "home", or "url" with the registrar token
 * in MTC_REGISTER_TOKEN); a missing or wrong directory, or a failed upload,
 * is one line in the log and leaves rc as it is. */
void recipe_put_register(FILE *f, const json_t *resolved);

/* ---- custom tasks (launch.c; docs/any-framework.md) ---- */

/* The resolved "launch" section of a custom recipe: command, launcher,
 * tasksPerNode, workdir. Caller owns. */
json_t *recipe_resolve_launch(const json_t *recipe, int tasks_per_node);
/* The job script's resume-contract environment (MTC_CHECKPOINT_DIR, ...). */
void recipe_put_contract(FILE *f, const json_t *resolved);
/* The job script's launch of the program: rendezvous, then srun (one task a
 * rank) or torchrun (one a node); container: srun's image and mount flags
 * (" --container-image=..." or ""). Sets rc. */
void recipe_put_custom_launch(FILE *f, const json_t *resolved, const char *container);
/* A command line as words, the way a POSIX shell splits it without expanding
 * anything: blanks separate words, '...' and "..." quote, a backslash keeps
 * the next character (outside '...'). A JSON array (caller owns), or NULL +
 * err (an unmatched quote, no word). */
/* With hang detection (monitor.hang_timeout_s or stall_factor): the job
 * script's start (start 1) and stop (0) of `mtc-agent ranks` on each node. */
void recipe_put_watch(FILE *f, const json_t *cfg, int start);
json_t *recipe_split_command(const char *s, mtc_error_t *err);
/* The trainer arguments standing for the prepared data, expanded by the job's shell. */
#define RECIPE_DATA_ARG "${MTC_DATA}"
#define RECIPE_TOKENIZER_ARG "${MTC_DATA}/tokenizer.json"

/* ---- one run as a request (request.c) ---- */

/* The field table of struct recipe_run as JSON: the API's trainingJobs body
 * (camelCase, snake_case accepted) and what `mtc run`'s flags build. Besides
 * the members: "overrides", an object merged into the recipe, and
 * "secretEnv", values of recipe_secrets for the job's environment (never
 * stored: whoever keeps the request drops it first). trainer,
 * mpiNetwork, home and timestamp are set by whoever submits, never by a request. */
extern const struct schema recipe_request_schema;

/* One request field's `mtc run` flag. */
struct recipe_flag {
    const char *field;       /* the field's name in recipe_request_schema */
    const char *short_, *long_; /* "-p" (or NULL), "--partition" */
    int path;                   /* a path: `mtc run` makes it absolute before sending it */
};
/* `mtc run`'s flags that take a value, ending with a NULL field. */
extern const struct recipe_flag recipe_flags[];
/* The flag row of a field name, or of a flag ("-p", "--partition"); NULL if none. */
const struct recipe_flag *recipe_flag_find(const char *field_or_flag);

/* Check body against recipe_request_schema and fill *run from it: *canon gets
 * the canonical body (caller decrefs; run's strings point into it, so it
 * must outlive run). A recipe given as an object (not a name) leaves
 * run->recipe NULL: it is in (*canon)["recipe"]. 0, or -1 + err
 * ("nodeCount: must be <= 4096"). */
int recipe_request_parse(const json_t *body, struct recipe_run *run, json_t **canon,
                         mtc_error_t *err);
/* The request body of run (its set fields; not trainer, mpiNetwork, home,
 * timestamp). Caller decrefs. */
json_t *recipe_request_json(const struct recipe_run *run);
/* msg, an error naming a request field first ("nodeCount: 3: ..."), as
 * `mtc run` says it, naming the flag ("-n 3: ..."), into buf; returns buf. */
const char *recipe_request_cli_text(const char *msg, char *buf, size_t len);

/* ---- submitting to Slurm (sbatch.c) ---- */

/* The checks before anything is submitted, then the submission of a resolved
 * run (cfg, with its script) to the Slurm cluster of slurm.conf conf: the
 * batch fits the ranks, the inputs exist, the partition has the nodes asked
 * for; the experiment directory is created, the script sbatch'ed and the job
 * id recorded in cfg and config.json. On failure nothing is left behind.
 * 0, or -1 + err naming the request field or Slurm's complaint. */
/* secrets (may be NULL): {"HF_TOKEN": value, ...} put in sbatch's
 * environment, which the job inherits (the request's secretEnv).
 * as (may be NULL): the Unix user the job runs as — its inputs are checked,
 * its directories made and removed with that user's file identity, and it
 * submits it (mtcd as root acting for a user). */
int recipe_submit(json_t *cfg, const char *script, const char *conf, const json_t *secrets,
                  const struct mtc_user *as,
                  mtc_error_t *err);

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

/* A run's config.json fields by name, NULL when absent: its task directory,
 * experiment name, run id (<experiment>_<timestamp>) and Slurm job id. The
 * rest of mtc asks these, not the keys. */
const char *exp_task_dir(const json_t *cfg);
const char *exp_experiment(const json_t *cfg);
const char *exp_run_id(const json_t *cfg);
const char *exp_job_id(const json_t *cfg);
/* Its checkpoint directory and the checkpoint it started from (init), the
 * slurm.conf of its cluster as recorded at submit, the model name it
 * registers under; NULL when absent. */
const char *exp_checkpoint_dir(const json_t *cfg);
const char *exp_checkpoint_init(const json_t *cfg);
const char *exp_recorded_conf(const json_t *cfg);
const char *exp_register_model(const json_t *cfg);

/* Path of the run's log (<task dir>/<JOB_ID>.log) into buf. */
const char *exp_log_path(const json_t *cfg, char *buf, size_t len);
/* Path of the run's progress rows (<log dir>/metrics.jsonl, what mtc-train
 * writes and MTC_METRICS_FILE names) into buf; NULL (buf "") when the run
 * has no log directory or the path does not fit. */
const char *exp_metrics_path(const json_t *cfg, char *buf, size_t len);

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
/* The run's preemptions (recipes/preempt.c): what slurmctld's log says of
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
