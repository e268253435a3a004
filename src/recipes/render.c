/* render: one run of a recipe — cluster-type overrides and `mtc run` options
 * resolved into config.json, inputs checked before submitting, and the sbatch
 * script (requeue, signal before the time limit, srun --mpi=pmix ranks). */
#include "experiment/experiment.h"
#include "recipes/recipes.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What each cluster type is, before a recipe's own overrides. Ranks follow
 * GPUs (one rank per GPU); a type without GPUs runs ranks_per_node CPU ranks. */
static const struct ctype {
    const char *name;
    int gpus_per_node;
    int ranks_per_node; /* used when gpus_per_node == 0 */
    int threads_per_rank;
    const char *what;
} ctypes[] = {
    {"hcc-a3m", 8, 0, 8, "A3 Mega, 8x H100 80GB"},
    {"hcc-a3u", 8, 0, 8, "A3 Ultra, 8x H200 141GB"},
    {"hcc-a4", 8, 0, 8, "A4, 8x B200"},
    {"hcc-a3h", 8, 0, 8, "A3 High, 8x H100 80GB"},
    {"local", 0, 1, 1, "CPU nodes of a local (emulated) cluster"},
};

static const struct ctype *ctype_find(const char *name)
{
    for (size_t i = 0; i < sizeof(ctypes) / sizeof(ctypes[0]); i++)
        if (strcmp(ctypes[i].name, name) == 0)
            return &ctypes[i];
    return NULL;
}

/* Recipe train/checkpoint keys → mtc-train flags. */
static const struct tflag {
    const char *section, *key, *flag;
} tflags[] = {
    {"train", "steps", "steps"},
    {"train", "global_batch", "batch"},
    {"train", "micro_batch", "micro-batch"},
    {"train", "seq_length", "seq"},
    {"train", "lr", "lr"},
    {"train", "min_lr", "min-lr"},
    {"train", "warmup", "warmup"},
    {"train", "weight_decay", "weight-decay"},
    {"train", "grad_clip", "grad-clip"},
    {"train", "seed", "seed"},
    {"train", "shuffle", "shuffle"},
    {"train", "log_every", "log-every"},
    {"train", "eval_every", "eval-every"},
    {"train", "eval_batches", "eval-batches"},
    {"checkpoint", "every", "checkpoint-every"},
    {"checkpoint", "keep", "keep"},
    {"checkpoint", "init", "init"},
};

static int geti(const json_t *o, const char *k, int dflt)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int)json_integer_value(v) : dflt;
}

/* An absolute path for p: as is when absolute, else under base. */
static json_t *abs_under(const char *base, const char *p)
{
    if (p[0] == '/' || !base)
        return json_string(p);
    char buf[PATH_MAX * 2];
    snprintf(buf, sizeof(buf), "%s/%s", base, p);
    return json_string(buf);
}

static char *absolute(const char *p)
{
    char buf[PATH_MAX];
    if (realpath(p, buf))
        return strdup(buf);
    if (p[0] == '/')
        return strdup(p);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd)))
        return strdup(p);
    char *out = NULL;
    if (asprintf(&out, "%s/%s", cwd, p) < 0)
        return NULL;
    return out;
}

int recipe_network_valid(const char *cidr)
{
    const char *slash = strchr(cidr, '/');
    unsigned char addr[16];
    char a[INET6_ADDRSTRLEN];
    if (!slash || (size_t)(slash - cidr) >= sizeof(a) || !slash[1] || strlen(slash + 1) > 3 ||
        strspn(slash + 1, "0123456789") != strlen(slash + 1))
        return 0;
    snprintf(a, sizeof(a), "%.*s", (int)(slash - cidr), cidr);
    int v6 = strchr(a, ':') != NULL;
    return inet_pton(v6 ? AF_INET6 : AF_INET, a, addr) == 1 && atoi(slash + 1) <= (v6 ? 128 : 32);
}

int recipe_partition_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 64)
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("_.-", *s))
            return 0;
    return 1;
}

/* 1..3 colon-separated groups of 1..2 digits (the first up to 6: minutes). */
static int clock_ok(const char *s, int max_groups)
{
    int groups = 0;
    while (*s) {
        size_t n = strspn(s, "0123456789");
        if (n == 0 || n > (groups == 0 ? 6u : 2u) || ++groups > max_groups)
            return 0;
        s += n;
        if (*s == ':' && s[1])
            s++;
        else if (*s)
            return 0;
    }
    return groups > 0;
}

int recipe_time_valid(const char *s)
{
    if (!s || !*s || strlen(s) > 32)
        return 0;
    if (strcmp(s, "UNLIMITED") == 0 || strcmp(s, "infinite") == 0)
        return 1;
    const char *dash = strchr(s, '-');
    if (!dash) /* minutes, minutes:seconds, hours:minutes:seconds */
        return clock_ok(s, 3);
    /* days-hours, days-hours:minutes, days-hours:minutes:seconds */
    size_t nd = (size_t)(dash - s);
    if (nd == 0 || nd > 4 || strspn(s, "0123456789") != nd)
        return 0;
    return clock_ok(dash + 1, 3) && strlen(dash + 1) <= 8;
}

/* Values that reach #SBATCH lines: Slurm names and times, paths without
 * newlines (a newline would start a new script line). */
static int check_run(const struct recipe_run *run, mtc_error_t *err)
{
    if (run->partition && !recipe_partition_valid(run->partition))
        return errprintf(err, "-p %.80s: not a partition name ([A-Za-z0-9_.-], 1-64)",
                         run->partition);
    if (run->time && !recipe_time_valid(run->time))
        return errprintf(err, "--time %.80s: want minutes, HH:MM:SS or D-HH:MM:SS", run->time);
    if (run->mpi_network && !recipe_network_valid(run->mpi_network))
        return errprintf(err, "MTC_MPI_NETWORK %.80s: want an address/prefix (10.20.0.0/24)",
                         run->mpi_network);
    const struct {
        const char *flag, *v;
    } paths[] = {{"--home", run->home},
                 {"-d", run->work_dir},
                 {"--log-dir", run->log_dir},
                 {"--cache-dir", run->cache_dir},
                 {"--data-dir", run->data_dir},
                 {"-i", run->image},
                 {"--from-checkpoint", run->from_checkpoint},
                 {"--from-experiment", run->from_experiment},
                 {"--data", run->data}};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        if (paths[i].v && strpbrk(paths[i].v, "\n\r"))
            return errprintf(err, "%s: a path must not contain a newline", paths[i].flag);
    return 0;
}

/* What recipe_resolve works out, phase by phase, before config.json is assembled. */
struct resolved {
    const struct ctype *ct;
    const char *ctname, *exec, *exp;
    char exp_buf[128];
    int gpus, rpn, threads, nodes, ranks;
    char run_id[160], task_dir[PATH_MAX], base[PATH_MAX];
    char ckdir[PATH_MAX + 16], logdir[PATH_MAX + 200];
    json_t *train, *data, *ck, *env; /* config.json's sections (owned) */
};

/* The cluster type (--slurm-type, default local) and the executor (-e: slurm or local). */
static int resolve_target(const struct recipe_run *run, struct resolved *v, mtc_error_t *err)
{
    v->ctname = run->cluster_type ? run->cluster_type : "local";
    v->ct = ctype_find(v->ctname);
    if (!v->ct)
        return errprintf(err, "--slurm-type %s: unknown cluster type (known: %s)", v->ctname,
                         recipe_cluster_types());
    v->exec = run->executor ? run->executor : "slurm";
    if (strcmp(v->exec, "slurm") != 0 && strcmp(v->exec, "local") != 0)
        return errprintf(err, "-e %s: the executor is slurm or local", v->exec);
    return 0;
}

/* --experiment-name, else the recipe's name: "pretrain/tiny_gpt2_pt" → "tiny-gpt2-pt". */
static int resolve_experiment(const json_t *recipe, const struct recipe_run *run,
                              struct resolved *v, mtc_error_t *err)
{
    v->exp = run->experiment;
    if (!v->exp) {
        const char *rname = json_string_value(json_object_get(recipe, "name"));
        const char *b = strrchr(rname, '/');
        snprintf(v->exp_buf, sizeof(v->exp_buf), "%s", b ? b + 1 : rname);
        for (char *p = v->exp_buf; *p; p++)
            if (*p == '_')
                *p = '-';
        v->exp = v->exp_buf;
    }
    if (!exp_name_valid(v->exp))
        return errprintf(
            err, "--experiment-name \"%s\": use letters, digits, '.', '_' or '-' (max 64)", v->exp);
    return 0;
}

/* Nodes, ranks per node (one per GPU, else the type's CPU ranks) and threads per
 * rank: the cluster type's, the recipe's overrides for it (ov), then -n. */
static void resolve_layout(const json_t *recipe, const json_t *ov, const struct recipe_run *run,
                           struct resolved *v)
{
    json_t *res = json_object_get(recipe, "resources");
    v->gpus = geti(ov, "gpus_per_node", v->ct->gpus_per_node);
    v->rpn = v->gpus > 0 ? v->gpus : geti(ov, "ranks_per_node", v->ct->ranks_per_node);
    v->threads = geti(ov, "threads_per_rank", v->ct->threads_per_rank);
    v->nodes = run->nodes > 0 ? (int)run->nodes : geti(ov, "nodes", geti(res, "nodes", 1));
    if (strcmp(v->exec, "local") == 0 && v->nodes > 1) {
        /* the local executor runs every rank on this machine */
        v->rpn *= v->nodes;
        v->nodes = 1;
    }
    v->ranks = v->nodes * v->rpn;
}

/* The recipe's train section with the cluster type's batch overrides (ov);
 * micro_batch defaults to global_batch / ranks, at least 1. */
static json_t *resolve_train(const json_t *recipe, const json_t *ov, int ranks)
{
    json_t *train = json_deep_copy(json_object_get(recipe, "train"));
    if (json_object_get(ov, "global_batch"))
        json_object_set(train, "global_batch", json_object_get(ov, "global_batch"));
    if (json_object_get(ov, "micro_batch"))
        json_object_set(train, "micro_batch", json_object_get(ov, "micro_batch"));
    int gb = geti(train, "global_batch", 0);
    int mb = geti(train, "micro_batch", 0);
    if (mb <= 0)
        mb = gb / ranks > 0 ? gb / ranks : 1;
    json_object_set_new(train, "micro_batch", json_integer(mb));
    return train;
}

/* The run's directories: its task directory under --home; the base of its
 * checkpoints and logs (the task directory, or the same path under -d); its
 * log directory (under the base, or RUN_ID under --log-dir). */
static void resolve_dirs(const struct recipe_run *run, struct resolved *v)
{
    snprintf(v->run_id, sizeof(v->run_id), "%s_%lld", v->exp, (long long)run->timestamp);
    snprintf(v->task_dir, sizeof(v->task_dir), "%s/experiments/%s/%s/%s", run->home, v->exp,
             v->run_id, v->exp);
    if (run->work_dir) {
        char *wd = absolute(run->work_dir);
        snprintf(v->base, sizeof(v->base), "%s/experiments/%s/%s/%s", wd ? wd : run->work_dir,
                 v->exp, v->run_id, v->exp);
        free(wd);
    } else {
        snprintf(v->base, sizeof(v->base), "%s", v->task_dir);
    }
    snprintf(v->ckdir, sizeof(v->ckdir), "%s/checkpoints", v->base);
    if (run->log_dir) {
        char *ld = absolute(run->log_dir);
        snprintf(v->logdir, sizeof(v->logdir), "%s/%s", ld ? ld : run->log_dir, v->run_id);
        free(ld);
    } else {
        snprintf(v->logdir, sizeof(v->logdir), "%s/logs", v->base);
    }
}

/* The checkpoint section: init from --from-checkpoint, else the recipe's init
 * under the data directory; dir under the run's base. */
static json_t *resolve_checkpoint(const json_t *recipe, const struct recipe_run *run,
                                  const json_t *rdata, const char *ckdir)
{
    json_t *ck = json_deep_copy(json_object_get(recipe, "checkpoint"));
    if (!ck)
        ck = json_object();
    if (run->from_checkpoint) {
        char *p = absolute(run->from_checkpoint);
        json_object_set_new(ck, "init", json_string(p ? p : run->from_checkpoint));
        free(p);
    } else if (json_object_get(ck, "init")) {
        json_object_set_new(ck, "init",
                            abs_under(json_string_value(json_object_get(rdata, "dataDir")),
                                      json_string_value(json_object_get(ck, "init"))));
    }
    json_object_set_new(ck, "dir", json_string(ckdir));
    return ck;
}

/* The job's environment: the recipe's, the cluster type's (ov), OMP_NUM_THREADS,
 * and --cache-dir as HF_HOME and MTC_CACHE_DIR. */
static json_t *resolve_env(const json_t *recipe, const json_t *ov, const struct recipe_run *run,
                           int threads)
{
    json_t *env = json_object();
    json_object_update(env, json_object_get(recipe, "env"));
    json_object_update(env, json_object_get(ov, "env"));
    json_object_set_new(env, "OMP_NUM_THREADS", json_sprintf("%d", threads));
    if (run->cache_dir) {
        char *cd = absolute(run->cache_dir);
        json_object_set_new(env, "HF_HOME", json_string(cd ? cd : run->cache_dir));
        json_object_set_new(env, "MTC_CACHE_DIR", json_string(cd ? cd : run->cache_dir));
        free(cd);
    }
    return env;
}

/* config.json from what the phases resolved; it takes v's sections (released on failure). */
/* With hang detection (monitor.hang_timeout_s, or stall_factor given), the
 * job script watches its processes on each node with mtc-agent (beside the
 * trainer: its directory, else PATH); a stop or zombie is said after 5 s
 * (less when the hang timeout is shorter). */
/* mtc-agent beside the trainer (its directory), else from PATH, into buf. */
static const char *agent_path(const char *trainer, char *buf, size_t len)
{
    const char *slash = trainer ? strrchr(trainer, '/') : NULL;
    if (slash)
        snprintf(buf, len, "%.*s/mtc-agent", (int)(slash - trainer), trainer);
    else
        snprintf(buf, len, "mtc-agent");
    return buf;
}

static void put_rank_watch(json_t *out, const json_t *recipe, const char *trainer)
{
    const json_t *m = json_object_get(recipe, "monitor");
    double hang = json_number_value(json_object_get(m, "hang_timeout_s"));
    if (!(hang > 0) && !json_object_get(m, "stall_factor"))
        return;
    char agent[PATH_MAX];
    int after = hang > 0 && hang < 5 ? (int)hang : 5;
    json_object_set_new(out, "rankWatch",
                        json_pack("{s:s, s:i}", "agent", agent_path(trainer, agent, sizeof(agent)),
                                  "after", after));
}

static json_t *assemble(const json_t *recipe, const struct recipe_run *run, struct resolved *v,
                        mtc_error_t *err)
{
    json_t *res = json_object_get(recipe, "resources");
    const char *time = run->time ? run->time : json_string_value(json_object_get(res, "time"));
    json_t *out = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:s, s:i}",
        "recipe", json_string_value(json_object_get(recipe, "name")), "task",
        json_string_value(json_object_get(recipe, "task")), "experiment", v->exp, "runId",
        v->run_id, "taskName", v->exp, "taskDir", v->task_dir, "timestamp",
        (json_int_t)run->timestamp, "executor", v->exec, "clusterType", v->ctname,
        "clusterTypeInfo", v->ct->what, "nodes", v->nodes, "ranksPerNode", v->rpn, "gpusPerNode",
        v->gpus, "threadsPerRank", v->threads, "ranks", v->ranks, "time", time ? time : "01:00:00",
        "signalBeforeS", geti(res, "signal_before_s", 120));
    if (!out) {
        errprintf(err, "out of memory");
        json_decref(v->train), json_decref(v->data), json_decref(v->ck), json_decref(v->env);
        return NULL;
    }
    if (run->partition)
        json_object_set_new(out, "partition", json_string(run->partition));
    if (run->account)
        json_object_set_new(out, "account", json_string(run->account));
    if (run->qos)
        json_object_set_new(out, "qos", json_string(run->qos));
    if (run->image)
        json_object_set_new(out, "image", json_string(run->image));
    if (run->work_dir)
        json_object_set_new(out, "workDir", json_string(v->base));
    if (run->cache_dir)
        json_object_set(out, "cacheDir", json_object_get(v->env, "HF_HOME"));
    json_object_set_new(out, "trainer", json_string(run->trainer ? run->trainer : "mtc-train"));
    put_rank_watch(out, recipe, run->trainer);
    if (run->mpi_network)
        json_object_set_new(out, "mpiNetwork", json_string(run->mpi_network));
    if (json_object_get(recipe, "model"))
        json_object_set(out, "model", json_object_get(recipe, "model"));
    if (recipe_is_custom(recipe)) {
        json_t *launch = recipe_resolve_launch(recipe, v->rpn);
        char agent[PATH_MAX]; /* picks MASTER_PORT on the first node (launch.c) */
        json_object_set_new(launch, "agent",
                            json_string(agent_path(run->trainer, agent, sizeof(agent))));
        json_object_set_new(out, "launch", launch);
        json_object_update(v->env, json_object_get(json_object_get(recipe, "launch"), "env"));
    }
    if (json_object_get(recipe, "monitor"))
        json_object_set(out, "monitor", json_object_get(recipe, "monitor"));
    json_object_set_new(out, "data", v->data);
    if (v->train)
        json_object_set_new(out, "train", v->train);
    json_object_set_new(out, "checkpoint", v->ck);
    json_object_set_new(out, "logDir", json_string(v->logdir));
    char ts[40]; /* when it was submitted: the breakdown's queue time starts here */
    json_object_set_new(out, "submitTime", json_string(mtc_time_rfc3339(mtc_now_ms(), ts, sizeof(ts))));
    json_object_set_new(out, "env", v->env);
    json_object_set_new(out, "trainerArgs", json_object());
    json_object_update(json_object_get(out, "trainerArgs"),
                       json_object_get(recipe, "trainer_args"));
    if (run->from_model)
        json_object_set_new(out, "fromModel", json_string(run->from_model));
    if (geti(recipe, "retry_on_error", 0) > 0)
        json_object_set_new(out, "retryOnError", json_integer(geti(recipe, "retry_on_error", 0)));
    /* the job's last step registers what the run trained (register.c); the
     * submitter adds mtcd's home, project and location */
    json_t *reg = recipe_resolve_register(recipe, run, v->exp, v->task_dir, v->ckdir);
    if (reg)
        json_object_set_new(out, "register", reg);
    return out;
}

json_t *recipe_resolve(const json_t *recipe, const struct recipe_run *run, mtc_error_t *err)
{
    struct resolved v;
    if (check_run(run, err) < 0 || resolve_target(run, &v, err) < 0 ||
        resolve_experiment(recipe, run, &v, err) < 0)
        return NULL;
    json_t *ov = json_object_get(json_object_get(recipe, "cluster_types"), v.ctname);
    int custom = recipe_is_custom(recipe);
    resolve_layout(recipe, ov, run, &v);
    if (custom) { /* the program's ranks per node: launch.tasks_per_node when given */
        json_t *tpn = json_object_get(json_object_get(recipe, "launch"), "tasks_per_node");
        if (tpn) {
            v.rpn = (int)json_integer_value(tpn);
            v.ranks = v.nodes * v.rpn;
        }
    }
    v.train = custom ? NULL : resolve_train(recipe, ov, v.ranks);
    resolve_dirs(run, &v);
    v.data = custom ? json_object() : recipe_resolve_data(recipe, run, err);
    if (!v.data) {
        json_decref(v.train);
        return NULL;
    }
    v.ck = resolve_checkpoint(recipe, run, v.data, v.ckdir);
    if (recipe_resolve_chain(run, v.ck, err) < 0) {
        json_decref(v.train), json_decref(v.data), json_decref(v.ck);
        return NULL;
    }
    v.env = resolve_env(recipe, ov, run, v.threads);
    return assemble(recipe, run, &v, err);
}

int recipe_check_batch(const json_t *cfg, mtc_error_t *err)
{
    json_t *train = json_object_get(cfg, "train");
    int gb = geti(train, "global_batch", 0), mb = geti(train, "micro_batch", 1);
    int ranks = geti(cfg, "ranks", 1);
    if (mb > 0 && gb % (mb * ranks) == 0)
        return 0;
    return errprintf(err,
                     "train.global_batch %d is not a multiple of micro_batch %d x %d ranks "
                     "(%d nodes x %d per node on %s); change -n or the recipe",
                     gb, mb, ranks, geti(cfg, "nodes", 1), geti(cfg, "ranksPerNode", 1),
                     json_string_value(json_object_get(cfg, "clusterType")));
}

static int has_shards(const char *dir)
{
    char pat[PATH_MAX + 32];
    snprintf(pat, sizeof(pat), "%s/train_000000.bin", dir);
    return mtc_path_exists(pat);
}

int recipe_check_inputs(const json_t *cfg, mtc_error_t *err)
{
    if (recipe_is_custom(cfg)) /* the program reads what it reads */
        return 0;
    json_t *data = json_object_get(cfg, "data");
    const char *path = json_string_value(json_object_get(data, "path"));
    const char *tok = json_string_value(json_object_get(data, "tokenizer"));
    int task =
        schema_enum_parse(&recipe_task_enum, json_string_value(json_object_get(cfg, "task")), 0);
    struct stat st;
    if (json_is_true(json_object_get(data, "prepare"))) // the job prepares it
        goto init;
    if (stat(path, &st) < 0)
        return errprintf(err,
                         "data.path: %s does not exist (recipe's \"%s\" under --data-dir %s); "
                         "prepare it with `mtc-train prepare`",
                         path, json_string_value(json_object_get(data, "recipePath")),
                         json_string_value(json_object_get(data, "dataDir")));
    if ((task == RECIPE_PRETRAIN || task == RECIPE_CPT) && S_ISDIR(st.st_mode) && !has_shards(path))
        return errprintf(
            err, "data.path: %s has no train_000000.bin shard (run `mtc-train prepare`)", path);
    if (stat(tok, &st) < 0 || !S_ISREG(st.st_mode))
        return errprintf(err, "data.tokenizer: %s does not exist", tok);
init:;
    const char *init =
        json_string_value(json_object_get(json_object_get(cfg, "checkpoint"), "init"));
    if (init && stat(init, &st) < 0)
        return errprintf(err, "checkpoint.init (--from-checkpoint): %s does not exist", init);
    return recipe_check_data(cfg, err);
}

static int push(char ***v, size_t *n, const char *s)
{
    char **nv = realloc(*v, (*n + 2) * sizeof(char *));
    if (!nv)
        return -1;
    *v = nv;
    nv[*n] = strdup(s);
    nv[*n + 1] = NULL;
    return nv[(*n)++] ? 0 : -1;
}

static int push_val(char ***v, size_t *n, const char *flag, const json_t *val)
{
    char f[128], buf[64];
    snprintf(f, sizeof(f), "--%s", flag);
    if (json_is_true(val))
        return push(v, n, f);
    if (json_is_false(val) || json_is_null(val))
        return 0;
    if (push(v, n, f) < 0)
        return -1;
    if (json_is_string(val))
        return push(v, n, json_string_value(val));
    if (json_is_integer(val))
        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(val));
    else
        snprintf(buf, sizeof(buf), "%.10g", json_number_value(val));
    return push(v, n, buf);
}

/* A NULL-terminated vector of malloc'd strings, and the strings (argv may be NULL). */
static void free_argv(char **argv)
{
    for (size_t i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
}

char **recipe_trainer_argv(const json_t *cfg, mtc_error_t *err)
{
    char **v = NULL;
    size_t n = 0;
    int rc = 0;
    json_t *model = json_object_get(cfg, "model");
    rc |= push(&v, &n, json_string_value(json_object_get(cfg, "trainer")));
    rc |= push(&v, &n, "train");
    rc |= push_val(&v, &n, "model", json_object_get(model, "preset"));
    if (json_object_get(model, "config")) {
        char *s = json_dumps(json_object_get(model, "config"), JSON_COMPACT | JSON_SORT_KEYS);
        rc |= push(&v, &n, "--config");
        rc |= s ? push(&v, &n, s) : -1;
        free(s);
    }
    json_t *data = json_object_get(cfg, "data");
    if (json_is_true(json_object_get(data, "prepare"))) { // the job's data step sets MTC_DATA
        rc |= push(&v, &n, "--data") | push(&v, &n, RECIPE_DATA_ARG);
        rc |= push(&v, &n, "--tokenizer") | push(&v, &n, RECIPE_TOKENIZER_ARG);
    } else {
        rc |= push_val(&v, &n, "data", json_object_get(data, "path"));
        rc |= push_val(&v, &n, "tokenizer", json_object_get(data, "tokenizer"));
    }
    for (size_t i = 0; i < sizeof(tflags) / sizeof(tflags[0]); i++) {
        json_t *val = json_object_get(json_object_get(cfg, tflags[i].section), tflags[i].key);
        if (val)
            rc |= push_val(&v, &n, tflags[i].flag, val);
    }
    const char *k;
    json_t *val;
    json_object_foreach(json_object_get(cfg, "trainerArgs"), k, val) rc |= push_val(&v, &n, k, val);
    rc |= push(&v, &n, "--resume");
    rc |= push(&v, &n, "auto");
    rc |= push_val(&v, &n, "checkpoint-dir",
                   json_object_get(json_object_get(cfg, "checkpoint"), "dir"));
    rc |= push_val(&v, &n, "log-dir", json_object_get(cfg, "logDir"));
    if (rc) {
        free_argv(v);
        errprintf(err, "out of memory");
        return NULL;
    }
    return v;
}

/* Variables the job needs but whose values must never be written down: the job
 * inherits them from the environment of `mtc run` (sbatch exports it). */
const char *const recipe_secrets[] = {"HF_TOKEN", "WANDB_API_KEY", NULL};

#define NMOUNTS 5

/* The directories a container sees, as pyxis's SRC:DST[,SRC:DST] list (NULL
 * where unset); with an image, a ',' or ':' in one is refused. */
static int container_mounts(const json_t *cfg, const char *image, const char *mounts[NMOUNTS],
                            mtc_error_t *err)
{
    mounts[0] = json_string_value(json_object_get(cfg, "workDir"));
    mounts[1] = json_string_value(json_object_get(cfg, "logDir"));
    mounts[2] = json_string_value(json_object_get(cfg, "cacheDir"));
    mounts[3] = json_string_value(json_object_get(json_object_get(cfg, "data"), "dataDir"));
    mounts[4] = json_string_value(json_object_get(json_object_get(cfg, "data"), "cacheDir"));
    if (mounts[4] && mounts[2] && !strcmp(mounts[4], mounts[2]))
        mounts[4] = NULL; // --cache-dir holds the datasets too: mounted once
    for (size_t i = 0; image && i < NMOUNTS; i++)
        if (mounts[i] && strpbrk(mounts[i], ",:"))
            return errprintf(
                err, "-i: %.200s cannot be mounted into a container (',' or ':' in the path)",
                mounts[i]);
    return 0;
}

/* The #SBATCH lines: name, partition, nodes and what each takes, time, output,
 * requeue and the signal before the time limit. */
static void put_header(FILE *f, const json_t *cfg)
{
    const char *part = json_string_value(json_object_get(cfg, "partition"));
    int rpn = geti(cfg, "ranksPerNode", 1);
    int gpus = geti(cfg, "gpusPerNode", 0), threads = geti(cfg, "threadsPerRank", 1);
    fprintf(f, "#!/bin/bash\n");
    fprintf(f, "# mtc run: recipe %s, experiment %s (run %s), cluster type %s.\n",
            json_string_value(json_object_get(cfg, "recipe")),
            json_string_value(json_object_get(cfg, "experiment")),
            json_string_value(json_object_get(cfg, "runId")),
            json_string_value(json_object_get(cfg, "clusterType")));
    fprintf(f, "# Rendered by mtc; the resolved configuration is config.json beside it.\n");
    fprintf(f, "#SBATCH --job-name=%s\n", json_string_value(json_object_get(cfg, "experiment")));
    if (part)
        fprintf(f, "#SBATCH --partition=%s\n", part);
    static const char *const charge[] = {"account", "qos"}; /* checked names */
    for (int i = 0; i < 2; i++)
        if (json_string_value(json_object_get(cfg, charge[i])))
            fprintf(f, "#SBATCH --%s=%s\n", charge[i], json_string_value(json_object_get(cfg, charge[i])));
    fprintf(f, "#SBATCH --nodes=%d\n", geti(cfg, "nodes", 1));
    /* GPU nodes are taken whole and srun starts one rank per GPU (below); CPU
     * ranks ask for their threads */
    if (gpus > 0)
        fprintf(f, "#SBATCH --gpus-per-node=%d\n#SBATCH --exclusive\n", gpus);
    else
        fprintf(f, "#SBATCH --ntasks-per-node=%d\n#SBATCH --cpus-per-task=%d\n", rpn, threads);
    fprintf(f, "#SBATCH --time=%s\n", json_string_value(json_object_get(cfg, "time")));
    fprintf(f, "#SBATCH --output=%s/%%j.log\n#SBATCH --open-mode=append\n",
            json_string_value(json_object_get(cfg, "taskDir")));
    int custom = recipe_is_custom(cfg);
    if (custom)
        fprintf(f, "# requeued after node failure or preemption; the program resumes from the newest\n"
                   "# checkpoint in MTC_CHECKPOINT_DIR. TERM before the time limit lets it save.\n");
    else
        fprintf(f, "# requeued after node failure or preemption; the trainer resumes from its newest\n"
                   "# checkpoint. USR1 before the time limit makes it checkpoint and exit 75.\n");
    fprintf(f, "#SBATCH --requeue\n#SBATCH --signal=%s@%d\n", custom ? "TERM" : "USR1",
            geti(cfg, "signalBeforeS", 120));
}

/* TASK_DIR, JOB_ID, the start line, the job's environment, and which secrets
 * pass through from the submitting environment. */
static void put_environment(FILE *f, const json_t *cfg)
{
    fprintf(f, "\nset -u\nTASK_DIR=");
    recipe_put_quoted(f, json_string_value(json_object_get(cfg, "taskDir")));
    fprintf(f, "\nJOB_ID=${SLURM_JOB_ID:-$$}\n");
    fprintf(f, "echo \"mtc: job $JOB_ID start $(date -u +%%Y-%%m-%%dT%%H:%%M:%%SZ) on "
               "${SLURM_JOB_NODELIST:-$(hostname)}, restart ${SLURM_RESTART_COUNT:-0}\"\n");
    /* a requeue or cancel: the end of this start, in the log, before the shell dies */
    fprintf(f, "trap 'echo \"mtc: job $JOB_ID end $(date -u +%%Y-%%m-%%dT%%H:%%M:%%SZ), signal "
               "TERM\"; trap - TERM; kill -TERM $$' TERM\n");
    fprintf(f, "\n# environment of the job\n");
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(cfg, "env"), k, v)
    {
        fprintf(f, "export %s=", k);
        recipe_put_quoted(f, json_string_value(v));
        fprintf(f, "\n");
    }
    fprintf(f, "export MTC_EXPERIMENT=");
    recipe_put_quoted(f, json_string_value(json_object_get(cfg, "runId")));
    fprintf(f, " MTC_TASK_DIR=\"$TASK_DIR\"\n");
    fprintf(f,
            "# secrets come from the submitting environment and are never written here\nfor v in");
    for (int i = 0; recipe_secrets[i]; i++)
        fprintf(f, " %s", recipe_secrets[i]);
    fprintf(f, "; do\n    [ -n \"${!v:-}\" ] && echo \"mtc: $v is set (passed through)\"\ndone\n");
    if (json_string_value(json_object_get(json_object_get(cfg, "register"), "url")))
        fprintf(f, "# the registrar token the submitter minted for this run's registration (never\n"
                   "# written here): kept for the last step, out of the trainer's environment\n"
                   "REGISTER_TOKEN=${MTC_REGISTER_TOKEN:-}\nunset MTC_REGISTER_TOKEN\n");
}

/* TRAIN=(...): the trainer's command line, one flag (and its value) per line. */
static void put_train_array(FILE *f, char *const argv[])
{
    fprintf(f, "\nTRAIN=(");
    for (size_t i = 0; argv[i]; i++) {
        fprintf(f, "%s", i == 0 ? "" : strncmp(argv[i], "--", 2) == 0 || i == 1 ? "\n    " : " ");
        if (!strcmp(argv[i], RECIPE_DATA_ARG) || !strcmp(argv[i], RECIPE_TOKENIZER_ARG))
            fprintf(f, "\"%s\"", argv[i]); // set by the data step; ours, never user text
        else
            recipe_put_quoted(f, argv[i]);
    }
    fprintf(f, ")\n\n");
}

/* srun's flags that run a step in the image, with the mounts (none without one). */
static void put_container(FILE *f, const char *image, const char *const mounts[NMOUNTS])
{
    if (!image)
        return;
    fprintf(f, " --container-image=");
    recipe_put_quoted(f, image);
    /* "$TASK_DIR:$TASK_DIR" then each path quoted on its own (adjacent
     * shell words join): no path text is ever inside double quotes */
    fprintf(f, " --container-mounts=\"$TASK_DIR:$TASK_DIR\"");
    for (size_t i = 0; i < NMOUNTS; i++) {
        if (!mounts[i] || !*mounts[i])
            continue;
        fputc(',', f);
        recipe_put_quoted(f, mounts[i]);
        fputc(':', f);
        recipe_put_quoted(f, mounts[i]);
    }
}

/* The ranks: srun under Slurm (in the image, with the mounts, when there is one),
 * mpirun for several local ranks, else the trainer itself. */
static void put_launch(FILE *f, const json_t *cfg, const char *image,
                       const char *const mounts[NMOUNTS])
{
    int nodes = geti(cfg, "nodes", 1), rpn = geti(cfg, "ranksPerNode", 1);
    const char *net = json_string_value(json_object_get(cfg, "mpiNetwork"));
    fprintf(f, "if [ -n \"${SLURM_JOB_ID:-}\" ]; then\n");
    if (net) { /* ranks on several hosts: Open MPI over TCP on the cluster's network */
        fprintf(f, "    export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=");
        recipe_put_quoted(f, net);
        fprintf(f, "\n");
    }
    /* --overcommit: emulated GPU nodes may have fewer CPUs than GPUs */
    if (geti(cfg, "gpusPerNode", 0) > 0)
        fprintf(f, "    srun --mpi=pmix --ntasks-per-node=%d --overcommit", rpn);
    else
        fprintf(f, "    srun --mpi=pmix");
    put_container(f, image, mounts);
    fprintf(f, " \"${TRAIN[@]}\"\n");
    fprintf(f, "elif [ %d -gt 1 ]; then\n", nodes * rpn);
    fprintf(f, "    # local executor: every rank on this machine\n");
    fprintf(f, "    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n");
    fprintf(f, "    mpirun -np %d --oversubscribe --bind-to none \"${TRAIN[@]}\"\n", nodes * rpn);
    fprintf(f, "else\n    \"${TRAIN[@]}\"\nfi\nrc=$?\n");
}

/* The log's line that ends this start of the job, why: "exit status $rc",
 * "requeued" (the breakdown's segments, experiment/breakdown.c). */
static void put_end_line(FILE *f, const char *indent, const char *why)
{
    fprintf(f, "%secho \"mtc: job $JOB_ID end $(date -u +%%Y-%%m-%%dT%%H:%%M:%%SZ), %s\"\n", indent,
            why);
}

/* Exit 75 (checkpointed on a signal) requeues the job; else the exit status is
 * recorded atomically in TASK_DIR/JOB_ID.exit and becomes the job's. */
static void put_epilogue(FILE *f, const json_t *cfg)
{
    fprintf(f, "if [ $rc -eq 75 ] && [ -n \"${SLURM_JOB_ID:-}\" ]; then\n"
               "    echo \"mtc: trainer checkpointed on a signal; requeueing job $JOB_ID\"\n");
    put_end_line(f, "    ", "requeued");
    fprintf(f, "    scontrol requeue \"$JOB_ID\" && exit 0\nfi\n");
    int retries = geti(cfg, "retryOnError", 0);
    if (retries > 0) { /* an application error, retried: the run resumes from its checkpoint */
        fprintf(f,
                "if [ $rc -ne 0 ] && [ -n \"${SLURM_JOB_ID:-}\" ] && "
                "[ \"${SLURM_RESTART_COUNT:-0}\" -lt %d ]; then\n"
                "    echo \"mtc: job $JOB_ID failed (exit status $rc); retry_on_error %d: "
                "requeueing it (restart $((${SLURM_RESTART_COUNT:-0} + 1)))\"\n",
                retries, retries);
        put_end_line(f, "    ", "requeued");
        fprintf(f, "    scontrol requeue \"$JOB_ID\" && exit 0\nfi\n");
    }
    fprintf(f,
            "echo \"$rc\" >\"$TASK_DIR/$JOB_ID.exit.tmp\" && mv -f \"$TASK_DIR/$JOB_ID.exit.tmp\" "
            "\"$TASK_DIR/$JOB_ID.exit\"\n");
    put_end_line(f, "", "exit status $rc");
    fprintf(f, "exit $rc\n");
}

char *recipe_render_sbatch(const json_t *cfg, mtc_error_t *err)
{
    const char *image = json_string_value(json_object_get(cfg, "image"));
    const char *mounts[NMOUNTS];
    if (container_mounts(cfg, image, mounts, err) < 0)
        return NULL;
    int custom = recipe_is_custom(cfg);
    char **argv = custom ? NULL : recipe_trainer_argv(cfg, err);
    if (!custom && !argv)
        return NULL;
    char *buf = NULL, *ctr = NULL;
    size_t len = 0, clen = 0;
    FILE *f = open_memstream(&buf, &len), *cf = custom ? open_memstream(&ctr, &clen) : NULL;
    if (!f || (custom && !cf)) {
        if (f)
            fclose(f), free(buf);
        free_argv(argv);
        errprintf(err, "out of memory");
        return NULL;
    }
    put_header(f, cfg);
    put_environment(f, cfg);
    recipe_put_watch(f, cfg, 1);
    if (custom) { /* a program of the user's (launch.c) */
        recipe_put_contract(f, cfg);
        put_container(cf, image, mounts);
        fclose(cf);
        recipe_put_custom_launch(f, cfg, ctr ? ctr : "");
        free(ctr);
    } else {
        int prep = recipe_put_prepare(f, cfg);
        put_train_array(f, argv);
        if (prep)
            fprintf(f, "if [ $rc -eq 0 ]; then\n");
        put_launch(f, cfg, image, mounts);
        if (prep)
            fprintf(f, "fi\n");
    }
    recipe_put_watch(f, cfg, 0);
    recipe_put_register(f, cfg);
    put_epilogue(f, cfg);
    free_argv(argv);
    if (fclose(f) != 0) {
        free(buf);
        errprintf(err, "out of memory");
        return NULL;
    }
    return buf;
}
