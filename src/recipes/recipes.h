/* recipes: prebuilt training workloads as data — loading and validating recipe
 * files, applying cluster-type overrides and `mtc run` options, rendering the
 * sbatch script and submitting it; the run it makes is experiment/'s. */
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

#endif
