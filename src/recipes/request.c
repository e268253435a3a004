/* request: one run of a recipe as JSON — the single field table behind both
 * `mtc run`'s flags and the API's trainingJobs body, so the two cannot drift:
 * every member of struct recipe_run has a row (checked when this compiles). */
#include "experiment/experiment.h"
#include "recipes/recipes.h"
#include "slurm/slurm.h"
#include "dataset/dataset.h"
#include "registry/registry.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* recipe: a catalog name (or, for `mtc run`, a file) — or a recipe object. */
static int check_recipe(const struct schema_field *f, json_t **v, const char *path,
                        mtc_error_t *err)
{
    (void)f;
    if (json_is_object(*v))
        return 0;
    const char *s = json_string_value(*v);
    if (!s || !*s)
        return schema_error(err, path, "must be a recipe name or a recipe object");
    if (strpbrk(s, "\n\r"))
        return schema_error(err, path, "a recipe name must not contain a newline");
    return 0;
}

static int check_executor(const struct schema_field *f, json_t **v, const char *path,
                          mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (strcmp(s, "slurm") == 0 || strcmp(s, "local") == 0)
        return 0;
    return schema_error(err, path, "%.60s: want slurm or local", s);
}

static int check_ctype(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (recipe_cluster_type_known(s))
        return 0;
    return schema_error(err, path, "%.60s: unknown cluster type (known: %s)", s,
                        recipe_cluster_types());
}

static int check_partition(const struct schema_field *f, json_t **v, const char *path,
                           mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (recipe_partition_valid(s))
        return 0;
    return schema_error(err, path, "%.80s: not a partition name ([A-Za-z0-9_.-], 1-64)", s);
}

/* account and qos: names sacctmgr accepts (they reach #SBATCH lines) */
static int check_acct_name(const struct schema_field *f, json_t **v, const char *path,
                           mtc_error_t *err)
{
    (void)f;
    if (slurm_acct_name_valid(json_string_value(*v)))
        return 0;
    return schema_error(err, path, "%.40s: must match [a-z][a-z0-9_-]{0,31}",
                        json_string_value(*v));
}

static int check_user(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    if (mtc_user_name_valid(json_string_value(*v)))
        return 0;
    return schema_error(err, path, "%.40s: must match [a-z_][a-z0-9_-]{0,31}",
                        json_string_value(*v));
}

static int check_time(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (recipe_time_valid(s))
        return 0;
    return schema_error(err, path, "%.80s: want minutes, HH:MM:SS or D-HH:MM:SS", s);
}

/* Paths reach the script and the job's command lines: absolute (the submitter
 * and the nodes agree on them), one line, no "..". */
static int check_path(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (s[0] != '/')
        return schema_error(err, path, "%.200s: want an absolute path", s);
    if (strpbrk(s, "\n\r"))
        return schema_error(err, path, "a path must not contain a newline");
    if (strstr(s, "/../") || (strlen(s) >= 3 && strcmp(s + strlen(s) - 3, "/..") == 0))
        return schema_error(err, path, "%.200s: \"..\" is not allowed in a path", s);
    return 0;
}

/* --dataset: NAME or NAME@VERSION of a registered dataset (src/dataset). */
static int check_dataset(const struct schema_field *f, json_t **v, const char *path,
                         mtc_error_t *err)
{
    (void)f;
    char name[DATASET_NAME_MAX + 1];
    int version;
    return dataset_ref_parse(path, json_string_value(*v), name, &version, err);
}

/* data: a built-in dataset (builtin:NAME; the trainer knows the names) or a path. */
static int check_source(const struct schema_field *f, json_t **v, const char *path,
                        mtc_error_t *err)
{
    const char *s = json_string_value(*v);
    if (strncmp(s, "builtin:", 8) != 0)
        return check_path(f, v, path, err);
    size_t n = strlen(s + 8);
    if (n == 0 || n > 64 || strspn(s + 8, "abcdefghijklmnopqrstuvwxyz0123456789-") != n)
        return schema_error(err, path, "%.80s: want builtin:NAME ([a-z0-9-]) or an absolute path",
                            s);
    return 0;
}

static int check_experiment(const struct schema_field *f, json_t **v, const char *path,
                            mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (exp_name_valid(s))
        return 0;
    return schema_error(err, path, "%.80s: want [A-Za-z0-9][A-Za-z0-9._-]{0,63}", s);
}

/* modelName: a registry model name. */
static int check_model_name(const struct schema_field *f, json_t **v, const char *path,
                            mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (registry_name_valid(s))
        return 0;
    return schema_error(err, path, "%.80s: want a model name [a-z][a-z0-9-]{0,62}", s);
}

/* fromModel: NAME, NAME@N or NAME@alias. */
static int check_model_ref(const struct schema_field *f, json_t **v, const char *path,
                           mtc_error_t *err)
{
    (void)f;
    struct registry_ref ref;
    mtc_error_t e2 = {""};
    if (registry_ref_parse(json_string_value(*v), &ref, &e2) == 0)
        return 0;
    return schema_error(err, path, "%s", e2.text);
}

/* secretEnv: {"HF_TOKEN": "..."} — only recipe_secrets, one-line strings. */
static int secret_entry(json_t *out, const char *k, const json_t *v, const char *path,
                        const void *arg, mtc_error_t *err)
{
    (void)arg;
    char sub[300];
    schema_join(sub, sizeof(sub), path, k);
    int known = 0;
    for (int i = 0; recipe_secrets[i]; i++)
        known |= strcmp(recipe_secrets[i], k) == 0;
    if (!known)
        return schema_error(err, sub, "not a secret mtc passes (HF_TOKEN, WANDB_API_KEY)");
    if (!json_is_string(v) || strpbrk(json_string_value(v), "\n\r"))
        return schema_error(err, sub, "must be a one-line string");
    return json_object_set(out, k, (json_t *)v);
}

static int check_secrets(const struct schema_field *f, json_t **v, const char *path,
                         mtc_error_t *err)
{
    (void)f;
    return schema_map(v, path, "secrets", secret_entry, NULL, err);
}

#define RUN(m) SCHEMA_MEMBER(struct recipe_run, m)
#define STR(field, m, hook)                                                                        \
    {                                                                                              \
        .name = field, .kind = SCHEMA_STR, .flags = SCHEMA_REF | SCHEMA_NONEMPTY | SCHEMA_ONELINE, \
        .check = hook, RUN(m)                                                                      \
    }
#define SERVER(field, m)                                                                           \
    {                                                                                              \
        .name = field, .kind = SCHEMA_STR, .flags = SCHEMA_REF | SCHEMA_NOINPUT, RUN(m)            \
    }

static const char *const image_aliases[] = {"image", NULL};
static const char *const ctype_aliases[] = {"slurmType", NULL};
static const char *const nodes_aliases[] = {"nodes", NULL};
static const char *const exp_aliases[] = {"experiment", NULL};

/* In struct recipe_run's member order (the checks below rely on it). */
static const struct schema_field f_request[] = {
    {.name = "recipe",
     .kind = SCHEMA_CUSTOM,
     .flags = SCHEMA_REQUIRED | SCHEMA_REF,
     .check = check_recipe,
     RUN(recipe)},
    STR("executor", executor, check_executor),
    {.name = "clusterType",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REF | SCHEMA_NONEMPTY,
     .aliases = ctype_aliases,
     .check = check_ctype,
     RUN(cluster_type)},
    STR("partition", partition, check_partition),
    STR("account", account, check_acct_name),
    STR("qos", qos, check_acct_name),
    STR("user", user, check_user),
    STR("workDir", work_dir, check_path),
    {.name = "containerImage",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REF | SCHEMA_NONEMPTY,
     .aliases = image_aliases,
     .check = check_path,
     RUN(image)},
    STR("logDir", log_dir, check_path),
    STR("cacheDir", cache_dir, check_path),
    STR("dataDir", data_dir, check_path),
    STR("time", time, check_time),
    STR("fromCheckpoint", from_checkpoint, check_path),
    STR("fromExperiment", from_experiment, check_experiment),
    STR("data", data, check_source),
    STR("dataset", dataset, check_dataset),
    SERVER("datasetPath", dataset_path),
    SERVER("trainer", trainer),
    SERVER("mpiNetwork", mpi_network),
    SERVER("home", home),
    {.name = "experimentName",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REF | SCHEMA_NONEMPTY,
     .aliases = exp_aliases,
     .check = check_experiment,
     RUN(experiment)},
    STR("modelName", model_name, check_model_name),
    STR("fromModel", from_model, check_model_ref),
    SERVER("registrar", registrar),
    {.name = "nodeCount",
     .kind = SCHEMA_INT,
     .flags = SCHEMA_RANGE,
     .lo = 1,
     .hi = 4096,
     .aliases = nodes_aliases,
     RUN(nodes)},
    {.name = "timestamp", .kind = SCHEMA_INT, .flags = SCHEMA_NOINPUT, RUN(timestamp)},
    {.name = "overrides", .kind = SCHEMA_OBJ},
    {.name = "secretEnv", .kind = SCHEMA_CUSTOM, .check = check_secrets},
    {.name = NULL},
};

/* The build breaks when struct recipe_run gains a member without a row:
 * each member listed must start where the one before it ends (give or take
 * alignment), and the last must end the struct. Add the new member's row to
 * f_request and its name to this chain. */
#define M_OFF(m) offsetof(struct recipe_run, m)
#define M_END(m) (M_OFF(m) + sizeof(((struct recipe_run *)0)->m))
#define M_ALIGN(m) _Alignof(__typeof__(((struct recipe_run *)0)->m))
#define ALIGN_UP(n, a) (((n) + (a)-1) / (a) * (a))
#define FOLLOWS(a, b)                                                                              \
    _Static_assert(M_OFF(b) == ALIGN_UP(M_END(a), M_ALIGN(b)),                                     \
                   "struct recipe_run: a member between " #a " and " #b                            \
                   " has no row in request.c's f_request")
_Static_assert(M_OFF(recipe) == 0, "struct recipe_run: a member before recipe has no row");
FOLLOWS(recipe, executor);
FOLLOWS(executor, cluster_type);
FOLLOWS(cluster_type, partition);
FOLLOWS(partition, account);
FOLLOWS(account, qos);
FOLLOWS(qos, user);
FOLLOWS(user, work_dir);
FOLLOWS(work_dir, image);
FOLLOWS(image, log_dir);
FOLLOWS(log_dir, cache_dir);
FOLLOWS(cache_dir, data_dir);
FOLLOWS(data_dir, time);
FOLLOWS(time, from_checkpoint);
FOLLOWS(from_checkpoint, from_experiment);
FOLLOWS(from_experiment, data);
FOLLOWS(data, dataset);
FOLLOWS(dataset, dataset_path);
FOLLOWS(dataset_path, trainer);
FOLLOWS(trainer, mpi_network);
FOLLOWS(mpi_network, home);
FOLLOWS(home, experiment);
FOLLOWS(experiment, model_name);
FOLLOWS(model_name, from_model);
FOLLOWS(from_model, registrar);
FOLLOWS(registrar, nodes);
FOLLOWS(nodes, timestamp);
_Static_assert(sizeof(struct recipe_run) == ALIGN_UP(M_END(timestamp), _Alignof(struct recipe_run)),
               "struct recipe_run: a member after timestamp has no row in request.c's f_request");

/* proto3 JSON: quoted integers and null accepted, as for every API body. */
const struct schema recipe_request_schema = {f_request, SCHEMA_PROTO3, NULL, NULL};

const struct recipe_flag recipe_flags[] = {
    {"recipe", "-s", "--recipe", 0},
    {"executor", "-e", "--executor", 0},
    {"clusterType", NULL, "--slurm-type", 0},
    {"partition", "-p", "--partition", 0},
    {"account", "-A", "--account", 0},
    {"qos", "-q", "--qos", 0},
    {"user", NULL, "--user", 0},
    {"workDir", "-d", "--work-dir", 1},
    {"containerImage", "-i", "--image", 1},
    {"logDir", NULL, "--log-dir", 1},
    {"cacheDir", NULL, "--cache-dir", 1},
    {"dataDir", NULL, "--data-dir", 1},
    {"time", NULL, "--time", 0},
    {"fromCheckpoint", NULL, "--from-checkpoint", 1},
    {"fromExperiment", NULL, "--from-experiment", 0},
    {"data", NULL, "--data", 1},
    {"dataset", NULL, "--dataset", 0},
    {"experimentName", NULL, "--experiment-name", 0},
    {"modelName", NULL, "--model-name", 0},
    {"fromModel", NULL, "--from-model", 0},
    {"nodeCount", "-n", "--nodes", 0},
    {NULL, NULL, NULL, 0},
};

const struct recipe_flag *recipe_flag_find(const char *name)
{
    for (const struct recipe_flag *f = recipe_flags; f->field; f++)
        if (strcmp(f->field, name) == 0 || (f->short_ && strcmp(f->short_, name) == 0) ||
            strcmp(f->long_, name) == 0)
            return f;
    return NULL;
}

int recipe_request_parse(const json_t *body, struct recipe_run *run, json_t **canon,
                         mtc_error_t *err)
{
    *canon = schema_normalize(body, &recipe_request_schema, "", err);
    if (!*canon)
        return -1;
    json_t *fill = *canon;
    if (json_is_object(json_object_get(*canon, "recipe"))) {
        /* the object stays in canon; only a name fills run->recipe */
        fill = json_copy(*canon);
        json_object_del(fill, "recipe");
    }
    int rc = schema_fill(fill, &recipe_request_schema, run);
    if (fill != *canon)
        json_decref(fill);
    if (rc < 0) {
        json_decref(*canon);
        *canon = NULL;
        return errprintf(err, "request: the field table does not fit struct recipe_run");
    }
    return 0;
}

json_t *recipe_request_json(const struct recipe_run *run)
{
    return schema_dump(&recipe_request_schema, run);
}

const char *recipe_request_cli_text(const char *msg, char *buf, size_t len)
{
    size_t n = strcspn(msg, ":. ");
    char field[64];
    snprintf(buf, len, "%s", msg);
    if (msg[n] != ':' || msg[n + 1] != ' ' || n >= sizeof(field))
        return buf;
    snprintf(field, sizeof(field), "%.*s", (int)n, msg);
    const struct recipe_flag *f = recipe_flag_find(field);
    if (f && strcmp(f->field, field) == 0)
        snprintf(buf, len, "%s %s", f->short_ ? f->short_ : f->long_, msg + n + 2);
    return buf;
}
