/* run: `mtc run` (a recipe as a Slurm job or a local process, NeMo-Run-style
 * flags), `mtc recipes list|show`, `mtc rl launch` and `mtc attach`. The
 * recipe logic lives in src/recipes; this file is flags, checks and output. */
#include "cli.h"
#include "dataset/dataset.h"
#include "experiment/experiment.h"
#include "jobs/jobs.h"
#include "cluster/cluster.h"
#include "recipes/recipes.h"
#include "slurm/slurm.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A program next to this mtc binary (build/bin, PREFIX/bin), else from PATH;
 * absolute either way because the job runs it on other (emulated) nodes. */
static int sibling_program(const char *name, char *buf, size_t len)
{
    if (cli_sibling(name, buf, len) == 0)
        return 0;
    const char *path = getenv("PATH");
    char *copy = strdup(path ? path : "/usr/bin:/bin"), *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        if (snprintf(buf, len, "%s/%s", d, name) < (int)len && d[0] == '/' &&
            access(buf, X_OK) == 0) {
            free(copy);
            return 0;
        }
    }
    free(copy);
    return -1;
}

static void chomp(char *s)
{
    size_t n = s ? strlen(s) : 0;
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
}

/* Partitions from `scontrol show partition -o`: {"name": {"nodes":N,"default":bool}}.
 * NULL + err when no Slurm answers in this shell. */
static json_t *partitions(mtc_error_t *err)
{
    /* Slurm's clients retry a missing slurm.conf for a minute: say it now */
    const char *conf = getenv("SLURM_CONF");
    if (!conf || !*conf)
        conf = "/etc/slurm/slurm.conf";
    if (!mtc_path_exists(conf)) {
        errprintf(err,
                  "no Slurm cluster in this shell (%s does not exist); run eval \"$(mtc env ID)\" "
                  "first, or use -e local",
                  conf);
        return NULL;
    }
    mtc_error_t e2 = {""};
    json_t *parts = slurm_partitions(NULL, &e2);
    if (!parts)
        errprintf(err,
                  "no Slurm cluster answers in this shell (%s); run eval \"$(mtc env ID)\" "
                  "first, or use -e local",
                  e2.text);
    return parts;
}

static const char run_use[] =
    "usage: mtc run -s RECIPE [-e slurm|local] [--slurm-type TYPE] [-p PARTITION] [-n NODES]\n"
    "               [-A|--account ACCOUNT] [-q|--qos QOS] [--user UNIX_USER]\n"
    "       mtc run --command 'PROGRAM ARGS' [--launcher srun|torchrun] [-i IMAGE.sqsh] [-n NODES] ...\n"
    "               [--experiment-name NAME] [-d WORK_DIR] [-i IMAGE.sqsh] [--data-dir DIR]\n"
    "               [--log-dir DIR] [--cache-dir DIR] [--time D-HH:MM:SS]\n"
    "               [--from-checkpoint PATH | --from-experiment NAME | --from-model NAME@ALIAS]\n"
    "               [--data PATH | --dataset NAME[@VERSION]] [--model-name NAME] [--dry-run]\n"
    "  RECIPE is a catalog name (mtc recipes list), e.g. pretrain/tiny_gpt2_pt, or a path\n"
    "  to your own recipe file. TYPE: hcc-a3m, hcc-a3u, hcc-a4, hcc-a3h, local (default).\n"
    "  --data: your own dataset (.txt/.jsonl/.csv or a directory of splits), prepared by\n"
    "  the job into --cache-dir (default $MTC_HOME/cache); --from-experiment: start from\n"
    "  that experiment's final checkpoint; --from-model: from a registered model version;\n"
    "  --dataset: a dataset of `mtc data list`, its latest (or the given) version's\n"
    "  prepared data as it is.\n"
    "  --command: any training program as a job (docs/any-framework.md): one task per\n"
    "  rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (srun), or one torchrun a node;\n"
    "  it runs in this directory and resumes from MTC_CHECKPOINT_DIR.\n"
    "  --user: mtcd runs the job as that Unix user (an admin's choice; a token bound to a\n"
    "  user runs its jobs as that user only).\n"
    "  A run that completes registers its final checkpoint as a new version of the model\n"
    "  --model-name (default: the experiment's name) unless the recipe says \"register\": false.\n";

struct run_flags {
    struct recipe_run r;     /* from body, through the request table */
    struct jobs_paths paths; /* what r points into */
    json_t *body;            /* the flags as a trainingJobs request (recipe_request_schema) */
    int dry_run;
    const char *command, *launcher; /* --command, --launcher: a custom task's program */
};

/* A path flag's value made absolute against this shell's cwd (the job, or
 * mtcd, resolves it elsewhere). Caller frees. */
static char *absolute_path(const char *p)
{
    char buf[PATH_MAX], cwd[PATH_MAX];
    if (realpath(p, buf))
        return strdup(buf);
    if (p[0] == '/' || !getcwd(cwd, sizeof(cwd)))
        return strdup(p);
    char *out = NULL;
    return asprintf(&out, "%s/%s", cwd, p) < 0 ? NULL : out;
}

/* --command 'PROGRAM ARGS' [--launcher srun|torchrun]: a custom task's recipe
 * (docs/any-framework.md), sent as the request's recipe object; the
 * program runs in this shell's directory. 0, or -1 after saying why. */
static int custom_recipe(struct run_flags *f)
{
    mtc_error_t err = {""};
    char cwd[PATH_MAX];
    if (json_object_get(f->body, "recipe"))
        return fprintf(stderr, "mtc: -s and --command: give one of them\n"), -1;
    json_t *words = recipe_split_command(f->command, &err);
    if (!words)
        return fprintf(stderr, "mtc: %s\n", err.text), -1;
    if (!getcwd(cwd, sizeof(cwd))) {
        json_decref(words);
        return fprintf(stderr, "mtc: getcwd: %s\n", strerror(errno)), -1;
    }
    json_t *launch = json_pack("{s:o, s:s, s:s}", "command", words, "launcher",
                               f->launcher ? f->launcher : "srun", "workdir", cwd);
    json_object_set_new(f->body, "recipe",
                        json_pack("{s:s, s:s, s:o}", "name", "custom", "task", "custom", "launch",
                                  launch));
    return 0;
}

/* The flags into f->body: each value-taking flag is a row of the request
 * table (recipe_flags), so the CLI and the API take the same fields. */
static int parse_run(int argc, char **argv, struct run_flags *f)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return fputs(run_use, stdout), 1;
        if (strcmp(a, "--dry-run") == 0) {
            f->dry_run = 1;
            continue;
        }
        if ((strcmp(a, "--command") == 0 || strcmp(a, "--launcher") == 0) && i + 1 < argc) {
            *(a[2] == 'c' ? &f->command : &f->launcher) = argv[++i];
            continue;
        }
        const struct recipe_flag *fl = a[0] == '-' ? recipe_flag_find(a) : NULL;
        if (!fl)
            return fprintf(stderr, "mtc: unknown option \"%s\"\n%s", a, run_use), -1;
        if (i + 1 >= argc)
            return fprintf(stderr, "mtc: %s needs a value\n%s", a, run_use), -1;
        const char *v = argv[++i];
        // a built-in dataset (--data builtin:tiny-rl) is a name, not a path
        char *abs = fl->path && *v && strncmp(v, "builtin:", 8) != 0 ? absolute_path(v) : NULL;
        json_object_set_new(f->body, fl->field, json_string(abs ? abs : v));
        free(abs);
    }
    if (f->command)
        return custom_recipe(f);
    if (f->launcher)
        return fprintf(stderr, "mtc: --launcher goes with --command\n"), -1;
    if (!json_object_get(f->body, "recipe"))
        return fprintf(stderr, "mtc: run needs -s RECIPE or --command PROGRAM\n%s", run_use), -1;
    return 0;
}

/* Wait briefly for a just-submitted job to start so the status block says RUNNING. */
static const char *settle(const json_t *cfg, char *state, size_t len)
{
    for (int i = 0; i < 25; i++) {
        exp_job_state(cfg, state, len);
        if (strcmp(state, "PENDING") != 0 && strcmp(state, "CONFIGURING") != 0)
            break;
        mtc_sleep_ms(200);
    }
    return state;
}

static int submit_local(json_t *cfg, const char *script_path, mtc_error_t *err)
{
    /* the shell's own pid names the log: exec keeps it, so it is the job id */
    char *argv[] = {"/bin/bash",
                    "-c",
                    "exec /bin/bash \"$0\" >>\"$1/$$.log\" 2>&1",
                    (char *)script_path,
                    (char *)exp_task_dir(cfg),
                    NULL};
    char *env[] = {"SLURM_JOB_ID=", NULL};
    pid_t pid = mtc_spawn(argv, env, NULL);
    if (pid < 0)
        return errprintf(err, "cannot start bash: %s", strerror(errno));
    char job[32];
    snprintf(job, sizeof(job), "%d", (int)pid);
    return exp_set_job(cfg, job, err);
}

/* The recipe -s names; for an unknown name, the catalog's names too. NULL
 * after saying why. */
static json_t *load_recipe(const char *name)
{
    mtc_error_t err = {""};
    json_t *recipe = recipe_load(name, NULL, 0, &err);
    if (recipe)
        return recipe;
    cli_fail("%s", err.text);
    if (strncmp(err.text, "unknown recipe", 14) == 0) {
        json_t *cat = recipe_catalog(NULL);
        size_t i;
        json_t *row;
        fprintf(stderr, "recipes (-s NAME, or -s FILE for your own copy):\n");
        json_array_foreach(cat, i, row)
            fprintf(stderr, "  %s\n", json_string_value(json_object_get(row, "name")));
        json_decref(cat);
    }
    return NULL;
}

/* The run's resolved config.json (*cfg, with this shell's SLURM_CONF) and its
 * sbatch script (*script); trainer[len] holds the mtc-train they name. The
 * steps are mtcd's (jobs_from_model, jobs_resolve). 0, or -1 after saying why. */
static int prepare_job(struct cli *c, struct run_flags *f, char *trainer, size_t len, json_t **cfg,
                       char **script)
{
    mtc_error_t verr = {""};
    json_t *recipe = f->r.recipe ? load_recipe(f->r.recipe)
                                 : recipe_normalize(json_object_get(f->body, "recipe"), &verr);
    if (!recipe)
        return *verr.text ? cli_fail("recipe: %s", verr.text), -1 : -1;
    const char *limage = json_string_value(json_object_get(json_object_get(recipe, "launch"), "image"));
    if (!f->r.image && limage) /* a custom task's image, unless -i names one */
        f->r.image = limage;
    mtc_error_t err = {""};
    char text[sizeof(err.text) + 32];
    /* a cluster on hosts: the trainer mtc copied to them, MPI over TCP on
     * their network (from `mtc env`) */
    const char *remote = getenv("MTC_TRAINER"), *net = getenv("MTC_MPI_NETWORK");
    f->r.mpi_network = net && *net ? net : NULL;
    if (f->r.image && jobs_image_path(f->r.image, NULL, &f->paths, &err) < 0) {
        json_decref(recipe);
        return cli_fail("%s", recipe_request_cli_text(err.text, text, sizeof(text))), -1;
    }
    if (f->r.image) { /* the image's own trainer, found in its PATH */
        f->r.image = f->paths.image;
        snprintf(trainer, len, "mtc-train");
    } else if (remote && remote[0] == '/' && strlen(remote) < len) {
        snprintf(trainer, len, "%s", remote);
    } else if (sibling_program("mtc-train", trainer, len) < 0) {
        if (!f->dry_run) {
            json_decref(recipe);
            return cli_fail("mtc-train not found next to mtc or in PATH (build it with make)"), -1;
        }
        snprintf(trainer, len, "mtc-train");
    }
    f->r.trainer = trainer;
    /* --from-model: the registered version's files are the initial weights */
    if (f->r.from_model && (f->r.from_checkpoint || f->r.from_experiment)) {
        json_decref(recipe);
        return cli_fail("--from-model and --from-%s: give one of them",
                        f->r.from_checkpoint ? "checkpoint" : "experiment"),
               -1;
    }
    struct jobs_where w = {.home = c->home,
                           .project = c->project,
                           .location = c->location,
                           .slurm_conf = getenv("SLURM_CONF")};
    if (jobs_from_model(&w, &f->r, &f->paths, &err) < 0) {
        json_decref(recipe);
        return cli_fail("--from-model %s: %s", f->r.from_model, err.text), -1;
    }
    /* the job's last step registers the final checkpoint with this mtc */
    if (cli_sibling("mtc", f->paths.registrar, sizeof(f->paths.registrar)) == 0)
        f->r.registrar = f->paths.registrar;
    *cfg = jobs_resolve(&w, recipe, &f->r, 0, &err);
    json_decref(recipe);
    if (!*cfg)
        return cli_fail("%s", err.text), -1;
    *script = recipe_render_sbatch(*cfg, &err);
    if (!*script) {
        json_decref(*cfg);
        return cli_fail("%s", err.text), -1;
    }
    return 0;
}

/* --dataset NAME[@VERSION] for a run resolved here (-e local, --dry-run; mtcd
 * resolves the ones it submits): the registered dataset's version, of the
 * recipe's kind, from mtcd; its prepared directory becomes the run's data.
 * 0, or 1 after saying why. */
static int resolve_dataset(struct cli *c, struct run_flags *f)
{
    char *dir = f->paths.dataset;
    char name[DATASET_NAME_MAX + 1], path[512];
    int version;
    mtc_error_t err = {""};
    if (!f->r.dataset)
        return 0;
    if (dataset_ref_parse("dataset", f->r.dataset, name, &version, &err) < 0)
        return cli_fail("%s", err.text);
    json_t *recipe = load_recipe(f->r.recipe), *ds = NULL;
    if (!recipe)
        return 1;
    snprintf(path, sizeof(path), "/v1beta1/projects/%s/locations/%s/datasets/%s", c->project,
             c->location, name);
    int rc = cli_call_ok(c, "GET", path, NULL, &ds, &err) < 0 ||
             dataset_pick("dataset", ds, f->r.dataset,
                          recipe_task_kind(json_string_value(json_object_get(recipe, "task"))), dir,
                          sizeof(f->paths.dataset), &err) < 0;
    json_decref(recipe);
    json_decref(ds);
    if (rc)
        return cli_fail("dataset: %s; nothing submitted",
                        strncmp(err.text, "dataset: ", 9) ? err.text : err.text + 9);
    f->r.dataset_path = dir;
    return 0;
}

/* --dry-run: the script on stdout once the batch fits the ranks; missing
 * inputs are only a note. */
static int dry_run(const json_t *cfg, const char *script)
{
    mtc_error_t err = {""};
    if (recipe_check_batch(cfg, &err) < 0)
        return cli_fail("%s", err.text);
    fputs(script, stdout);
    if (recipe_check_inputs(cfg, &err) < 0)
        fprintf(stderr, "mtc: note: %s\n", err.text);
    return 0;
}

/* -e local: the experiment directory, then bash. */
static int submit(json_t *cfg, const char *script, mtc_error_t *err)
{
    if (recipe_check_batch(cfg, err) < 0 || exp_create(cfg, script, err) < 0)
        return -1;
    char spath[PATH_MAX + 16];
    snprintf(spath, sizeof(spath), "%s/sbatch.sh",
             exp_task_dir(cfg));
    if (submit_local(cfg, spath, err) < 0) {
        exp_remove(cfg);
        return -1;
    }
    return 0;
}

/* The status block (or --json: the run's config with its state). */
static void show_status(struct cli *c, json_t *cfg)
{
    char state[64];
    if (c->json) {
        json_object_set_new(cfg, "state", json_string(settle(cfg, state, sizeof(state))));
        cli_print_json(cfg);
    } else {
        exp_print_status(stdout, cfg, settle(cfg, state, sizeof(state)));
    }
}

/* -e local: check what the job needs here, start it, and show its status. */
static int launch(struct cli *c, json_t *cfg, const char *script)
{
    mtc_error_t err = {""};
    struct exp_run r;
    exp_run_of(cfg, &r);
    const char *image = r.image;
    if (image)
        return cli_fail("-i %s: containers run through Slurm (srun --container-image); "
                        "use -e slurm",
                        image);
    if (recipe_check_inputs(cfg, &err) < 0 || submit(cfg, script, &err) < 0)
        return cli_fail("%s", err.text);
    show_status(c, cfg);
    return 0;
}

/* The cluster this shell's Slurm is (…/clusters/ID/slurm.conf from `mtc env`),
 * else $MTC_CLUSTER, into id. 0, or 1 after saying why. */
static int shell_cluster(char *id, size_t len)
{
    const char *conf = getenv("SLURM_CONF"), *env = getenv("MTC_CLUSTER");
    if (conf && *conf && !mtc_path_exists(conf))
        return cli_fail("no Slurm cluster in this shell (%s does not exist); run eval "
                        "\"$(mtc env ID)\" first, or use -e local",
                        conf);
    const char *p = conf ? strstr(conf, "/clusters/") : NULL;
    if (p) {
        p += 10;
        snprintf(id, len, "%.*s", (int)strcspn(p, "/"), p);
        if (cluster_id_valid(id) && strcmp(p + strlen(id), "/slurm.conf") == 0)
            return 0;
    }
    if (env && cluster_id_valid(env)) {
        snprintf(id, len, "%s", env);
        return 0;
    }
    return cli_fail("no cluster in this shell: run eval \"$(mtc env ID)\" first (or set "
                    "MTC_CLUSTER), or use -e local");
}

/* The run's config.json, read from the directory mtcd made; without it (mtcd
 * on another host), what the job resource says. Caller decrefs. */
static json_t *job_config(const json_t *job)
{
    const char *dir = mtc_json_str(job, "taskDir");
    json_t *cfg = dir ? exp_config_load(dir) : NULL;
    if (cfg)
        return cfg;
    return exp_config_of_job(mtc_json_str(job, "runId"), mtc_json_str(job, "experimentName"),
                             mtc_json_str(job, "slurmJobId"), dir);
}

/* -e slurm: the run as a trainingJobs request to mtcd, which checks it,
 * submits it to the cluster's Slurm and says what it did. */
static int launch_api(struct cli *c, struct run_flags *f, json_t *req)
{
    char id[16];
    if (shell_cluster(id, sizeof(id)) != 0)
        return 1;
    /* a recipe file of the user's is sent as its content: mtcd reads no client path */
    const char *name = f->r.recipe ? f->r.recipe : "";
    struct stat st;
    json_t *body = json_deep_copy(req);
    if ((strchr(name, '/') || strstr(name, ".json")) && stat(name, &st) == 0 &&
        S_ISREG(st.st_mode)) {
        json_t *recipe = load_recipe(name);
        if (!recipe) {
            json_decref(body);
            return 1;
        }
        json_object_set_new(body, "recipe", recipe);
    }
    /* secrets reach the job through sbatch's environment, as they did from this shell */
    json_t *secrets = json_object();
    for (int i = 0; recipe_secrets[i]; i++)
        if (getenv(recipe_secrets[i]))
            json_object_set_new(secrets, recipe_secrets[i], json_string(getenv(recipe_secrets[i])));
    if (json_object_size(secrets))
        json_object_set(body, "secretEnv", secrets);
    json_decref(secrets);
    char path[512];
    snprintf(path, sizeof(path),
             "/v1beta1/projects/%s/locations/%s/modelDevelopmentClusters/%s/trainingJobs",
             c->project, c->location, id);
    mtc_error_t err = {""};
    json_t *job = NULL;
    int rc = cli_call_ok(c, "POST", path, body, &job, &err);
    json_decref(body);
    if (rc < 0) {
        char text[sizeof(err.text) + 32];
        cli_fail("%s", recipe_request_cli_text(err.text, text, sizeof(text)));
        if (strstr(err.text, "unknown recipe"))
            json_decref(load_recipe(name)); /* lists the catalog */
        return 1;
    }
    json_t *cfg = job_config(job);
    if (mtc_json_str(job, "name"))
        exp_set_training_job(cfg, mtc_json_str(job, "name"));
    json_decref(job);
    show_status(c, cfg);
    json_decref(cfg);
    return 0;
}

/* The cluster's experiment root (from `mtc env`): the experiment directories
 * (with the checkpoints, without -d) go there. On a cluster on hosts it is required, -d must be in
 * it, and mtcd checks that every host sees it (:checkStorage) before anything
 * is submitted. 0, or 1 after saying why. */
static int shared_storage(struct cli *c, struct run_flags *f)
{
    const char *root = getenv("MTC_EXPERIMENT_ROOT"), *kind = getenv("MTC_PROVIDER");
    const char *id = getenv("MTC_CLUSTER");
    int hosts = kind && strcmp(kind, "hosts") == 0;
    int slurm = !f->r.executor || strcmp(f->r.executor, "slurm") == 0;
    if (root && root[0] == '/') /* the run's directory (and, without -d, its checkpoints) */
        f->r.home = root;
    if (!hosts || !slurm)
        return 0;
    if (!root || root[0] != '/')
        return cli_fail("cluster %s runs on hosts and its spec sets no experimentRoot: every "
                        "host must see the job's files; set experimentRoot to a directory on "
                        "storage shared by all of them (docs/hosts.md, \"Shared storage\")",
                        id ? id : "?");
    if (f->r.work_dir && !mtc_path_under(f->r.work_dir, root))
        return cli_fail("-d %s is not under the cluster's experimentRoot %s, the directory every "
                        "host is checked to share",
                        f->r.work_dir, root);
    if (f->dry_run || !id || !cluster_id_valid(id))
        return 0;
    char path[512];
    snprintf(path, sizeof(path),
             "/v1beta1/projects/%s/locations/%s/modelDevelopmentClusters/%s:checkStorage",
             c->project, c->location, id);
    mtc_error_t err = {""};
    json_t *r = NULL, *body = json_object();
    int rc = cli_call_ok(c, "POST", path, body, &r, &err);
    json_decref(body);
    json_decref(r);
    return rc < 0 ? cli_fail("%s; nothing submitted", err.text) : 0;
}

int cmd_run(struct cli *c, int argc, char **argv)
{
    struct run_flags f = {.body = json_object()};
    int p = parse_run(argc, argv, &f);
    json_t *req = NULL;
    mtc_error_t err = {""};
    char text[sizeof(err.text) + 32];
    int rc = 1;
    if (p) {
        rc = p > 0 ? 0 : 2;
        goto out;
    }
    if (recipe_request_parse(f.body, &f.r, &req, &err) < 0) {
        cli_fail("%s", recipe_request_cli_text(err.text, text, sizeof(text)));
        if (strstr(err.text, "unknown option"))
            fputs(run_use, stderr);
        goto out;
    }
    f.r.home = c->home;
    f.r.timestamp = (int64_t)time(NULL);
    if (shared_storage(c, &f) != 0)
        goto out;
    if (!f.dry_run && (!f.r.executor || strcmp(f.r.executor, "slurm") == 0)) {
        rc = launch_api(c, &f, req);
        goto out;
    }
    if (f.r.user) { /* mtcd runs a job as a user; here it would be you */
        rc = cli_fail("--user %s: only mtcd runs a job as another user (-e slurm, no --dry-run)",
                      f.r.user);
        goto out;
    }
    char trainer[PATH_MAX];
    json_t *cfg = NULL;
    char *script = NULL;
    if (resolve_dataset(c, &f) != 0 ||
        prepare_job(c, &f, trainer, sizeof(trainer), &cfg, &script) < 0)
        goto out;
    rc = f.dry_run ? dry_run(cfg, script) : launch(c, cfg, script);
    free(script);
    json_decref(cfg);
out:
    json_decref(req);
    json_decref(f.body);
    return rc;
}

/* --- recipes ------------------------------------------------------------ */

static const char r_list_use[] = "mtc recipes list [--json]",
                  r_show_use[] = "mtc recipes show NAME|FILE";

static int r_list(struct cli *c, int argc, char **argv)
{
    if (cli_json_only(c, argc, argv, r_list_use))
        return 2;
    mtc_error_t err = {""};
    json_t *cat = recipe_catalog(&err);
    if (!cat)
        return cli_fail("%s", err.text);
    static const struct cli_col cols[] = {{"NAME", "name", 30, NULL},
                                          {"TASK", "task", 9, NULL},
                                          {"MODEL", "model", 12, NULL},
                                          {"DESCRIPTION", "description", 0, NULL},
                                          {NULL, NULL, 0, NULL}};
    cli_print_list(c, cat, cat, cols);
    json_decref(cat);
    return 0;
}

static int r_show(struct cli *c, int argc, char **argv)
{
    (void)c;
    if (argc != 2 || argv[1][0] == '-')
        return cli_fail("usage: %s", r_show_use), 2;
    mtc_error_t err = {""};
    char path[PATH_MAX];
    json_t *r = recipe_load(argv[1], path, sizeof(path), &err);
    if (!r)
        return cli_fail("%s", err.text);
    printf("# %s\n", path);
    cli_print_json(r);
    json_decref(r);
    return 0;
}

static const struct cli_cmd recipes_cmds[] = {
    {"list", r_list, "list the prebuilt recipes", r_list_use},
    {"show", r_show, "print a recipe (copy it, edit it, pass the file to mtc run -s)", r_show_use},
    {NULL, NULL, NULL, NULL},
};

int cmd_recipes(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc recipes", recipes_cmds, argc - 1, argv + 1);
}

/* --- rl launch, attach ---------------------------------------------------- */

static const char rl_use[] =
    "usage: mtc rl launch -N NODES --job-script SCRIPT [--cluster-type TYPE] [-p PARTITION]\n"
    "                     [--time D-HH:MM:SS] [-i IMAGE.sqsh] [--interactive]\n"
    "  creates <job_id>/ here with checkpoints/, logs/, output.log; --interactive holds\n"
    "  the allocation until `scancel JOB` and writes <job_id>/attach.sh. With -i, every\n"
    "  srun of the job script runs in the image (PYXIS_CONTAINER_IMAGE), this directory\n"
    "  mounted at the same path.\n";

struct rl_flags {
    const char *script, *ctype, *part, *tlimit, *image;
    int nodes, interactive;
};

/* rl launch's command line into r. 0, 1 when --help was printed, or 2 (the exit
 * status) after saying what is wrong. */
static int parse_rl(int argc, char **argv, struct rl_flags *r)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--interactive") == 0)
            r->interactive = 1;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return fputs(rl_use, stdout), 1;
        else if (i + 1 >= argc)
            return cli_fail("%s needs a value\n%s", a, rl_use), 2;
        else if (strcmp(a, "-N") == 0 || strcmp(a, "--nodes") == 0) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            r->nodes = *argv[i] && !*end && n > 0 && n <= 100000 ? (int)n : 0;
        } else if (strcmp(a, "--job-script") == 0 || strcmp(a, "--job_script") == 0)
            r->script = argv[++i];
        else if (strcmp(a, "--cluster-type") == 0 || strcmp(a, "--cluster_type") == 0)
            r->ctype = argv[++i];
        else if (strcmp(a, "-p") == 0 || strcmp(a, "--partition") == 0)
            r->part = argv[++i];
        else if (strcmp(a, "--time") == 0)
            r->tlimit = argv[++i];
        else if (strcmp(a, "-i") == 0 || strcmp(a, "--image") == 0 ||
                 strcmp(a, "--container-image") == 0)
            r->image = argv[++i];
        else
            return cli_fail("unknown option \"%s\"\n%s", a, rl_use), 2;
    }
    return 0;
}

/* The values that reach #SBATCH lines, with mtc run's rules. 0, or 2 after
 * saying what is wrong. */
static int check_rl(const struct rl_flags *r)
{
    if (r->nodes < 1)
        return cli_fail("-N: want a node count"), 2;
    mtc_error_t bad = {""}; /* errprintf keeps a newline in the value from breaking the line */
    if (r->part && !recipe_partition_valid(r->part))
        errprintf(&bad, "-p %.80s: not a partition name ([A-Za-z0-9_.-], 1-64)", r->part);
    else if (!recipe_time_valid(r->tlimit))
        errprintf(&bad, "--time %.80s: want minutes, HH:MM:SS or D-HH:MM:SS", r->tlimit);
    if (*bad.text)
        return cli_fail("%s", bad.text), 2;
    if (!recipe_cluster_type_known(r->ctype))
        return cli_fail("--cluster-type %s: unknown (known: %s)", r->ctype, recipe_cluster_types()),
               2;
    if (!r->script && !r->interactive)
        return cli_fail("rl launch needs --job-script SCRIPT or --interactive\n%s", rl_use), 2;
    return 0;
}

/* The wrapper job script (malloc'd into *body, *blen): it makes <job_id>/ under
 * cwd itself (the job may start before sbatch returns), runs the job script
 * sabs ("" none) and, --interactive, writes attach.sh and holds the allocation. */
static void rl_script(const struct rl_flags *r, const char *sabs, const char *cwd,
                      const char *image, char **body, size_t *blen)
{
    int gpus = strcmp(r->ctype, "local") == 0 ? 0 : 8;
    FILE *f = open_memstream(body, blen);
    char self[PATH_MAX];
    if (sibling_program("mtc", self, sizeof(self)) < 0)
        snprintf(self, sizeof(self), "mtc");
    char *qs = mtc_shell_quote(sabs), *qc = mtc_shell_quote(cwd);
    char *qm = mtc_shell_quote(self);
    fprintf(f, "#!/bin/bash\n# mtc rl launch: %s job on cluster type %s.\n",
            r->interactive ? "interactive" : "batch", r->ctype);
    fprintf(f, "#SBATCH --job-name=mtc-rl\n#SBATCH --nodes=%d\n#SBATCH --time=%s\n", r->nodes,
            r->tlimit);
    fprintf(f, "#SBATCH --output=/dev/null\n");
    if (r->part)
        fprintf(f, "#SBATCH --partition=%s\n", r->part);
    if (gpus)
        fprintf(f, "#SBATCH --gpus-per-node=%d\n", gpus);
    fprintf(f, "D=%s/$SLURM_JOB_ID\nmkdir -p \"$D/checkpoints\" \"$D/logs\"\ncd \"$D\"\n", qc);
    fprintf(f,
            "export MTC_CHECKPOINT_DIR=\"$D/checkpoints\" MTC_LOG_DIR=\"$D/logs\" "
            "MTC_CLUSTER_TYPE=%s GPUS_PER_NODE=%d NNODES=%d\n",
            r->ctype, gpus, r->nodes);
    if (*image) { /* pyxis's environment forms: each srun of the job script */
        char *qi = mtc_shell_quote(image);
        fprintf(f, "export PYXIS_CONTAINER_IMAGE=%s PYXIS_CONTAINER_MOUNTS=%s\n", qi, qc);
        free(qi);
    }
    fprintf(f, "exec >>\"$D/output.log\" 2>&1\n");
    fprintf(f, "echo \"mtc: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, restart "
               "${SLURM_RESTART_COUNT:-0}\"\n");
    if (r->interactive) {
        fprintf(f,
                "cat >\"$D/attach.sh\" <<EOF\n#!/bin/bash\n"
                "# a shell inside job $SLURM_JOB_ID on node \\${1:-0} (of $SLURM_JOB_NODELIST)\n"
                "exec %s attach $SLURM_JOB_ID \"\\${1:-0}\"\nEOF\nchmod +x \"$D/attach.sh\"\n",
                qm);
    }
    if (*sabs)
        fprintf(f, "bash %s\nrc=$?\necho \"mtc: job script exited $rc\"\n", qs);
    if (r->interactive)
        fprintf(f, "echo \"mtc: allocation held; attach with bash $D/attach.sh [N]; release "
                   "with scancel $SLURM_JOB_ID\"\nwhile :; do sleep 60; done\n");
    else
        fprintf(f, "exit $rc\n");
    fclose(f);
    free(qs);
    free(qc);
    free(qm);
}

/* sbatch the script text through a temporary file; job[32] gets its id.
 * 0, or 1 after saying why. */
static int rl_submit(const char *body, size_t blen, char job[32])
{
    char tmpl[] = "/tmp/mtc-rl.XXXXXX";
    int fd = mkstemp(tmpl);
    int w = fd >= 0 && write(fd, body, blen) == (ssize_t)blen;
    if (fd >= 0)
        close(fd);
    if (!w)
        return cli_fail("cannot write a temporary script: %s", strerror(errno));
    char *out = NULL;
    int rc = slurm_submit(NULL, tmpl, job, &out);
    unlink(tmpl);
    chomp(out);
    if (rc != 0) {
        cli_fail("%s", out && *out ? out : "sbatch failed");
        free(out);
        return 1;
    }
    free(out);
    return 0;
}

static int rl_launch(struct cli *c, int argc, char **argv)
{
    (void)c;
    struct rl_flags r = {.ctype = "local", .tlimit = "01:00:00", .nodes = 1};
    int p = parse_rl(argc, argv, &r);
    if (p)
        return p == 1 ? 0 : p;
    if ((p = check_rl(&r)) != 0)
        return p;
    char sabs[PATH_MAX] = "";
    if (r.script && !realpath(r.script, sabs))
        return cli_fail("--job-script %s: %s", r.script, strerror(errno));
    mtc_error_t err = {""};
    json_t *parts = partitions(&err);
    if (!parts)
        return cli_fail("%s", err.text);
    json_t *pi = r.part ? json_object_get(parts, r.part) : NULL;
    if (pi && r.nodes > json_integer_value(json_object_get(pi, "nodes"))) {
        int have = (int)json_integer_value(json_object_get(pi, "nodes"));
        json_decref(parts);
        return cli_fail("-N %d: partition %s has %d nodes", r.nodes, r.part, have);
    }
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd))) {
        json_decref(parts);
        return cli_fail("getcwd: %s", strerror(errno));
    }
    struct jobs_paths paths;
    char *image = paths.image, text[sizeof(err.text) + 32];
    *image = '\0';
    if (r.image && jobs_check_image(NULL, r.image, NULL, &paths, &err) < 0) {
        json_decref(parts);
        return cli_fail("%s", recipe_request_cli_text(err.text, text, sizeof(text)));
    }
    if (r.image && strpbrk(cwd, ",:")) {
        json_decref(parts);
        return cli_fail("-i: %s cannot be mounted into a container (',' or ':' in it)", cwd);
    }
    char *body = NULL, job[32];
    size_t blen = 0;
    rl_script(&r, sabs, cwd, image, &body, &blen);
    json_decref(parts);
    int rc = rl_submit(body, blen, job);
    free(body);
    if (rc != 0)
        return rc;
    char d[PATH_MAX + 64];
    snprintf(d, sizeof(d), "%s/%s/checkpoints", cwd, job);
    mtc_mkdir_p(d, 0755);
    snprintf(d, sizeof(d), "%s/%s/logs", cwd, job);
    mtc_mkdir_p(d, 0755);
    printf("Submitted job %s: %s/%s/ (checkpoints/, logs/, output.log%s)\n", job, cwd, job,
           r.interactive ? ", attach.sh once it runs" : "");
    return 0;
}

static const struct cli_cmd rl_cmds[] = {
    {"launch", rl_launch, "submit an RL-style job script (or hold an interactive allocation)",
     NULL},
    {NULL, NULL, NULL, NULL},
};

int cmd_rl(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc rl", rl_cmds, argc - 1, argv + 1);
}

int cmd_attach(struct cli *c, int argc, char **argv)
{
    (void)c;
    const char *use = "mtc attach JOB [N]   (a shell in job JOB's allocation on its node N)";
    if (mtc_wants_help(argc, argv))
        return printf("usage: %s\n", use), 0;
    if (argc < 2 || argc > 3 || argv[1][0] == '-')
        return cli_fail("usage: %s", use), 2;
    const char *job = argv[1];
    if (strspn(job, "0123456789") != strlen(job))
        return cli_fail("JOB: a Slurm job id"), 2;
    int n = argc == 3 ? atoi(argv[2]) : 0;
    mtc_error_t err = {""};
    json_t *nodes = slurm_job_nodes(NULL, job, &err);
    if (!nodes)
        return cli_fail("%s", err.text), 1;
    char node[128] = "";
    int i = (int)json_array_size(nodes);
    if (n >= 0 && n < i)
        snprintf(node, sizeof(node), "%s", json_string_value(json_array_get(nodes, (size_t)n)));
    json_decref(nodes);
    if (!*node)
        return cli_fail("job %s has %d node%s; N is 0..%d", job, i, i == 1 ? "" : "s", i - 1);
    char jarg[64], warg[160];
    snprintf(jarg, sizeof(jarg), "--jobid=%s", job);
    snprintf(warg, sizeof(warg), "--nodelist=%s", node);
    fflush(NULL);
    execlp("srun", "srun", jarg, "--overlap", warg, "-N1", "-n1", "--pty", "bash", "-i",
           (char *)NULL);
    return cli_fail("cannot run srun: %s", strerror(errno));
}
