/* recipe: recipe files — finding them (catalog names or a user's path), strict
 * validation against a field table (snake_case or camelCase keys, one-line
 * errors naming the field), and the catalog behind `mtc recipes list`. */
#include "experiment/experiment.h"
#include "recipes/recipes.h"
#include "registry/registry.h"
#include "schema/schema.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Tasks and cluster types a recipe may name. */
const struct schema_enum recipe_task_enum =
    SCHEMA_NAMES(NULL, [RECIPE_PRETRAIN] = "pretrain", [RECIPE_CPT] = "cpt", [RECIPE_SFT] = "sft",
                 [RECIPE_DPO] = "dpo", [RECIPE_GRPO] = "grpo", [RECIPE_CUSTOM] = "custom");
const struct schema_enum recipe_launcher_enum =
    SCHEMA_NAMES(NULL, [RECIPE_SRUN] = "srun", [RECIPE_TORCHRUN] = "torchrun");

int recipe_is_custom(const json_t *recipe)
{
    const char *t = json_string_value(json_object_get(recipe, "task"));
    return schema_enum_parse(&recipe_task_enum, t ? t : "", 0) == RECIPE_CUSTOM;
}
static const struct schema_enum cluster_types =
    SCHEMA_NAMES(NULL, "hcc-a3m", "hcc-a3u", "hcc-a4", "hcc-a3h", "local");

int recipe_cluster_type_known(const char *type)
{
    return schema_enum_parse(&cluster_types, type, 0) >= 0;
}

const char *recipe_cluster_types(void)
{
    static char list[128];
    return schema_enum_list(&cluster_types, list, sizeof(list));
}

/* ---- hooks for what the kinds cannot say ---- */

static int task_known(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    char list[64];
    if (schema_enum_parse(&recipe_task_enum, json_string_value(*v), 0) >= 0)
        return 0;
    return schema_error(err, path, "\"%s\" is not one of %s", json_string_value(*v),
                        schema_enum_list(&recipe_task_enum, list, sizeof(list)));
}

static int slurm_time(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *t = json_string_value(*v);
    if (strspn(t, "0123456789:-") == strlen(t))
        return 0;
    return schema_error(err, path, "\"%s\" is not a Slurm time (D-HH:MM:SS)", t);
}

static int env_name_ok(const char *k)
{
    if (!*k || isdigit((unsigned char)*k))
        return 0;
    for (; *k; k++)
        if (!isalnum((unsigned char)*k) && *k != '_')
            return 0;
    return 1;
}

/* Environment variables for the job: NAME: "one line". */
static int env_entry(json_t *out, const char *k, const json_t *x, const char *path, const void *arg,
                     mtc_error_t *err)
{
    (void)arg;
    char sub[300];
    schema_join(sub, sizeof(sub), path, k);
    if (!env_name_ok(k))
        return schema_error(err, sub, "not an environment variable name");
    if (!json_is_string(x))
        return schema_error(err, sub, "must be a string");
    if (strchr(json_string_value(x), '\n'))
        return schema_error(err, sub, "must not contain a newline");
    return json_object_set(out, k, (json_t *)x);
}

static int env_map(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    return schema_map(v, path, "NAME: \"value\"", env_entry, NULL, err);
}

/* Extra trainer flags: names reach its command line, [a-z][a-z0-9-]*. */
static int arg_entry(json_t *out, const char *k, const json_t *x, const char *path, const void *arg,
                     mtc_error_t *err)
{
    (void)arg;
    char sub[300];
    int ok = islower((unsigned char)k[0]);
    for (const char *p = k; ok && *p; p++)
        ok = islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-';
    schema_join(sub, sizeof(sub), path, k);
    if (!ok)
        return schema_error(err, sub, "flag names are lowercase words joined by '-'");
    if (!json_is_string(x) && !json_is_number(x) && !json_is_boolean(x))
        return schema_error(err, sub, "must be a string, number or boolean");
    return json_object_set(out, k, (json_t *)x);
}

static int args_map(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    return schema_map(v, path, "flag: value", arg_entry, NULL, err);
}

/* ---- the tables: canonical names are snake_case, matched in any case ---- */

#define RECIPE SCHEMA_ANYNAME
#define STR(n, fl) .name = n, .kind = SCHEMA_STR, .flags = SCHEMA_NONEMPTY | SCHEMA_ONELINE | (fl)
#define INT(n, fl, min) .name = n, .kind = SCHEMA_INT, .flags = SCHEMA_LO | (fl), .lo = min
#define NUM(n) .name = n, .kind = SCHEMA_NUM, .flags = SCHEMA_LO, .lo = 0
#define SECTION(n, fl, t) .name = n, .kind = SCHEMA_OBJ, .flags = (fl), .obj = &t
#define ENV(n) .name = n, .kind = SCHEMA_CUSTOM, .check = env_map

static const struct schema_field f_model[] = {
    {STR("preset", SCHEMA_REQUIRED)}, {.name = "config", .kind = SCHEMA_OBJ}, {.name = NULL}};
static const struct schema s_model = {f_model, RECIPE, NULL, NULL};

/* data: a prepared "path", or a "dataset" (builtin:NAME or a path) prepared by the job */
static int data_rules(json_t *d, const char *path, mtc_error_t *err)
{
    int has_path = json_object_get(d, "path") != NULL, has_ds = json_object_get(d, "dataset") != NULL;
    if (has_path == has_ds)
        return schema_error(err, path, "give one of \"path\" (prepared data) or \"dataset\" "
                                       "(builtin:NAME or a file, prepared by the job)");
    return 0;
}

static const struct schema_field f_data[] = {{STR("path", 0)},
                                             {STR("dataset", 0)},
                                             {STR("tokenizer", SCHEMA_REQUIRED)},
                                             {STR("source", 0)},
                                             {.name = NULL}};
static const struct schema s_data = {f_data, RECIPE, NULL, data_rules};

static int train_rules(json_t *tr, const char *path, mtc_error_t *err)
{
    char q[300];
    json_t *mb = json_object_get(tr, "micro_batch");
    if (mb && json_integer_value(mb) > json_integer_value(json_object_get(tr, "global_batch")))
        return schema_error(err, schema_join(q, sizeof(q), path, "micro_batch"),
                            "larger than train.global_batch");
    return 0;
}

static const struct schema_field f_train[] = {
    {INT("steps", SCHEMA_REQUIRED, 1)},
    {INT("global_batch", SCHEMA_REQUIRED, 1)},
    {INT("micro_batch", 0, 1)},
    {INT("seq_length", SCHEMA_REQUIRED, 1)},
    {NUM("lr")},
    {NUM("min_lr")},
    {INT("warmup", 0, 0)},
    {NUM("weight_decay")},
    {NUM("grad_clip")},
    {INT("seed", 0, 0)},
    {.name = "shuffle", .kind = SCHEMA_BOOL},
    {INT("log_every", 0, 1)},
    {INT("eval_every", 0, 0)},
    {INT("eval_batches", 0, 1)},
    {.name = NULL},
};
static const struct schema s_train = {f_train, RECIPE, NULL, train_rules};

static const struct schema_field f_checkpoint[] = {
    {INT("every", 0, 0)}, {INT("keep", 0, 1)}, {STR("init", 0)}, {.name = NULL}};
static const struct schema s_checkpoint = {f_checkpoint, RECIPE, NULL, NULL};

/* Early problem detection's thresholds (docs/observability.md): exp_monitor_from. */
/* monitor.log_rules[].pattern: compiles, with a named group (logrule.c) */
static int log_pattern(const struct schema_field *f, json_t **v, const char *path,
                       mtc_error_t *err)
{
    (void)f;
    struct exp_logrule r;
    mtc_error_t e2 = {""};
    if (strlen(json_string_value(*v)) >= 256)
        return schema_error(err, path, "longer than 255 characters");
    if (exp_logrule_compile(&r, json_string_value(*v), &e2) < 0)
        return schema_error(err, path, "%s", e2.text);
    exp_logrule_release(&r);
    return 0;
}

static const struct schema_field f_log_rule[] = {
    {.name = "pattern",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REQUIRED | SCHEMA_NONEMPTY | SCHEMA_ONELINE,
     .check = log_pattern},
    {.name = "name", .kind = SCHEMA_STR, .flags = SCHEMA_NONEMPTY | SCHEMA_ONELINE},
    {.name = NULL}};
static const struct schema s_log_rule = {f_log_rule, RECIPE, NULL, NULL};

static const struct schema_field f_monitor[] = {
    {.name = "spike_z", .kind = SCHEMA_NUM, .flags = SCHEMA_RANGE, .lo = 0.5, .hi = 1000},
    {.name = "spike_window",
     .kind = SCHEMA_INT,
     .flags = SCHEMA_RANGE,
     .lo = 10,
     .hi = EXP_TRACK_RING - 1},
    {.name = "throughput_drop", .kind = SCHEMA_NUM, .flags = SCHEMA_RANGE, .lo = 0, .hi = 1},
    {.name = "stall_factor", .kind = SCHEMA_NUM, .flags = SCHEMA_RANGE, .lo = 1, .hi = 1e6},
    {.name = "min_rows",
     .kind = SCHEMA_INT,
     .flags = SCHEMA_RANGE,
     .lo = 2,
     .hi = EXP_TRACK_RING - 1},
    {.name = "hang_timeout_s", .kind = SCHEMA_NUM, .flags = SCHEMA_RANGE, .lo = 1, .hi = 1e6},
    {.name = "max_restarts", .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .lo = 0, .hi = 100},
    /* a custom task's TensorBoard tags that are its loss (experiment/goodput.c's defaults) */
    {.name = "loss_tags",
     .kind = SCHEMA_STRS,
     .flags = SCHEMA_NONEMPTY | SCHEMA_ONELINE,
     .max_items = 8},
    /* progress from the program's log lines (experiment/logrule.c) */
    {.name = "log_rules", .kind = SCHEMA_OBJS, .obj = &s_log_rule, .max_items = EXP_LOG_RULES},
    {.name = NULL}};
static const struct schema s_monitor = {f_monitor, RECIPE, NULL, NULL};

static const struct schema_field f_resources[] = {
    {INT("nodes", 0, 1)},
    {.name = "time",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_NONEMPTY | SCHEMA_ONELINE,
     .check = slurm_time},
    {INT("signal_before_s", 0, 10)},
    {.name = NULL},
};
static const struct schema s_resources = {f_resources, RECIPE, NULL, NULL};

/* What a cluster type may override. */
static const struct schema_field f_override[] = {
    {INT("gpus_per_node", 0, 0)},
    {INT("ranks_per_node", 0, 1)},
    {INT("threads_per_rank", 0, 1)},
    {INT("micro_batch", 0, 1)},
    {INT("global_batch", 0, 1)},
    {INT("nodes", 0, 1)},
    {ENV("env")},
    {.name = NULL},
};
static const struct schema s_override = {f_override, RECIPE, NULL, NULL};

/* Per-cluster-type overrides: {"hcc-a3m": {...}, ...}. */
static int override_entry(json_t *out, const char *k, const json_t *x, const char *path,
                          const void *arg, mtc_error_t *err)
{
    (void)arg;
    char sub[300];
    schema_join(sub, sizeof(sub), path, k);
    if (!recipe_cluster_type_known(k))
        return schema_error(err, sub, "unknown cluster type (known: %s)", recipe_cluster_types());
    json_t *o = schema_normalize(x, &s_override, sub, err);
    return o ? json_object_set_new(out, k, o) : -1;
}

static int cluster_type_map(const struct schema_field *f, json_t **v, const char *path,
                            mtc_error_t *err)
{
    (void)f;
    return schema_map(v, path, "cluster type: overrides", override_entry, NULL, err);
}

/* A custom task's program (docs/any-framework.md): its command line (no
 * shell), how its ranks start, where it runs and what it gets. */
static const struct schema_field f_launch[] = {
    {.name = "command", .kind = SCHEMA_STRS, .flags = SCHEMA_REQUIRED | SCHEMA_NONEMPTY},
    {.name = "launcher", .kind = SCHEMA_ENUM, .enm = &recipe_launcher_enum, .dflt = "\"srun\""},
    {INT("tasks_per_node", 0, 1)},
    {STR("image", 0)},
    {STR("workdir", 0)},
    {ENV("env")},
    {.name = NULL},
};
static int launch_rules(json_t *l, const char *path, mtc_error_t *err)
{
    char q[300];
    const char *wd = json_string_value(json_object_get(l, "workdir"));
    if (wd && wd[0] != '/')
        return schema_error(err, schema_join(q, sizeof(q), path, "workdir"),
                            "must be an absolute path (the nodes resolve it)");
    if (json_array_size(json_object_get(l, "command")) == 0)
        return schema_error(err, schema_join(q, sizeof(q), path, "command"),
                            "the program and its arguments, at least one word");
    return 0;
}
static const struct schema s_launch = {f_launch, RECIPE, NULL, launch_rules};

/* register.path: a directory of the run's, named relative to it (it reaches
 * the job script and mtcd's path checks): no leading '/', no empty, "." or
 * ".." component, no quote, backslash or control character. */
static int run_relative_path(const struct schema_field *f, json_t **v, const char *path,
                             mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (strlen(s) > 1024)
        return schema_error(err, path, "longer than 1024 characters");
    if (s[0] == '/')
        return schema_error(err, path,
                            "\"%.100s\": must be relative to the run directory "
                            "(MTC_RUN_DIR), not absolute",
                            s);
    for (const char *c = s; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f || strchr("'\"`\\", *c))
            return schema_error(err, path,
                                "must not contain a quote, backslash or control "
                                "character");
    for (const char *c = s; *c;) {
        size_t n = strcspn(c, "/");
        if ((n == 0 && c[n]) || (n == 1 && c[0] == '.') || (n == 2 && !strncmp(c, "..", 2)))
            return schema_error(err, path,
                                "\"%.100s\": an empty, \".\" or \"..\" component "
                                "(want a directory within the run directory)",
                                s);
        c += n + (c[n] == '/');
    }
    return 0;
}

/* What a custom task's program trained, registered when the run completes. */
static const struct schema_field f_register[] = {
    {.name = "path",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REQUIRED | SCHEMA_NONEMPTY | SCHEMA_ONELINE,
     .check = run_relative_path},
    {.name = "format", .kind = SCHEMA_ENUM, .enm = &registry_format_enum, .dflt = "\"hf\""},
    {.name = NULL}};
static const struct schema s_register = {f_register, RECIPE, NULL, NULL};

/* register: true/false (mtc-train's final checkpoint), or {path, format}
 * (a custom task's directory; recipe_rules says which task takes which). */
static int register_value(const struct schema_field *f, json_t **v, const char *path,
                          mtc_error_t *err)
{
    (void)f;
    if (json_is_boolean(*v))
        return 0;
    if (!json_is_object(*v))
        return schema_error(err, path,
                            "must be true, false or {\"path\": \"DIR\", "
                            "\"format\": \"hf\"}");
    json_t *n = schema_normalize(*v, &s_register, path, err);
    if (!n)
        return -1;
    json_decref(*v);
    *v = n;
    return 0;
}

/* A custom task runs its own program: launch, not model/data/train; every
 * other task runs mtc-train on those three. What a run registers: mtc-train's
 * final checkpoint (register true, the default), a custom task's directory
 * (register {path, format}). */
static int recipe_rules(json_t *r, const char *path, mtc_error_t *err)
{
    (void)path;
    static const char *const trainer_only[] = {"model", "data", "train", "trainer_args"};
    const json_t *reg = json_object_get(r, "register");
    if (recipe_is_custom(r) && json_is_true(reg))
        return schema_error(err, "register",
                            "a custom task must name the path of what it trained: "
                            "{\"path\": \"DIR (relative to the run directory)\", \"format\": "
                            "\"hf\"}");
    if (!recipe_is_custom(r) && json_is_object(reg))
        return schema_error(err, "register",
                            "true or false for task %s (its final checkpoint registers); "
                            "{\"path\", \"format\"} is a custom task's",
                            json_string_value(json_object_get(r, "task")));
    if (recipe_is_custom(r)) {
        if (!json_object_get(r, "launch"))
            return schema_error(err, "launch", "required field missing (task custom)");
        for (size_t i = 0; i < sizeof(trainer_only) / sizeof(trainer_only[0]); i++)
            if (json_object_get(r, trainer_only[i]))
                return schema_error(err, trainer_only[i],
                                    "a custom task runs its own program: give it launch, not "
                                    "%s (that is mtc-train's)",
                                    trainer_only[i]);
        return 0;
    }
    for (size_t i = 0; i < 3; i++)
        if (!json_object_get(r, trainer_only[i]))
            return schema_error(err, trainer_only[i], "required field missing");
    if (json_object_get(r, "launch"))
        return schema_error(err, "launch", "only a custom task has one (task %s runs mtc-train)",
                            json_string_value(json_object_get(r, "task")));
    return 0;
}

static const struct schema_field f_recipe[] = {
    {STR("name", 0)},
    {STR("description", 0)},
    {.name = "task",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REQUIRED | SCHEMA_NONEMPTY | SCHEMA_ONELINE,
     .check = task_known},
    {SECTION("model", 0, s_model)},
    {SECTION("data", 0, s_data)},
    {SECTION("train", 0, s_train)},
    {SECTION("launch", 0, s_launch)},
    {SECTION("checkpoint", 0, s_checkpoint)},
    {SECTION("resources", 0, s_resources)},
    {SECTION("monitor", 0, s_monitor)},
    {.name = "cluster_types", .kind = SCHEMA_CUSTOM, .check = cluster_type_map},
    {.name = "trainer_args", .kind = SCHEMA_CUSTOM, .check = args_map},
    {ENV("env")},
    /* what a completed run registers in the model registry: true (default) /
     * false, mtc-train's final checkpoint; {path, format}: a custom task's */
    {.name = "register", .kind = SCHEMA_CUSTOM, .check = register_value},
    /* a run that exits non-zero on its own (an application error, not a
     * node fault) is requeued this many times at most (default 0: FAILED) */
    {.name = "retry_on_error", .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .lo = 0, .hi = 100},
    {.name = NULL},
};
static const struct schema s_recipe = {f_recipe, RECIPE, NULL, recipe_rules};

json_t *recipe_normalize(const json_t *r, mtc_error_t *err)
{
    if (!json_is_object(r)) {
        errprintf(err, "a recipe is a JSON object");
        return NULL;
    }
    return schema_normalize(r, &s_recipe, "", err);
}

int recipe_validate(const json_t *recipe, mtc_error_t *err)
{
    json_t *canon = recipe_normalize(recipe, err);
    json_decref(canon);
    return canon ? 0 : -1;
}

static json_t *parse_file(const char *path, mtc_error_t *err)
{
    json_error_t je;
    json_t *r = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!r) {
        errprintf(err, "%s:%d: %s", path, je.line, je.text);
        return NULL;
    }
    mtc_error_t e2 = {""};
    json_t *canon = recipe_normalize(r, &e2);
    json_decref(r);
    if (!canon)
        errprintf(err, "%s: %s", path, e2.text);
    return canon;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Catalog names: [a-z0-9_.-]+ segments joined by '/', no "..". */
static int catalog_name_ok(const char *s)
{
    if (!*s || *s == '/' || strstr(s, ".."))
        return 0;
    for (; *s; s++)
        if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && !strchr("_.-/", *s))
            return 0;
    return 1;
}

static void add_catalog(json_t *arr, const char *root, const char *rel)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s%s%s", root, *rel ? "/" : "", rel);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char sub[PATH_MAX], full[PATH_MAX + 300];
        snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(full, sizeof(full), "%s/%s", root, sub);
        struct stat st;
        if (stat(full, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            add_catalog(arr, root, sub);
        } else if (ends_with(sub, ".json")) {
            sub[strlen(sub) - 5] = '\0';
            json_t *r = parse_file(full, NULL);
            json_t *row = json_pack("{s:s, s:s}", "name", sub, "path", full);
            if (r) {
                json_object_set(row, "task", json_object_get(r, "task"));
                json_object_set(row, "model",
                                json_object_get(json_object_get(r, "model"), "preset"));
                json_t *desc = json_object_get(r, "description");
                json_object_set_new(row, "description", desc ? json_incref(desc) : json_string(""));
            } else {
                json_object_set_new(row, "task", json_string("?"));
                json_object_set_new(row, "model", json_string("?"));
                json_object_set_new(row, "description", json_string("(invalid recipe)"));
            }
            json_decref(r);
            json_array_append_new(arr, row);
        }
    }
    closedir(d);
}

static int by_name(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    return strcmp(json_string_value(json_object_get(x, "name")),
                  json_string_value(json_object_get(y, "name")));
}

json_t *recipe_catalog(mtc_error_t *err)
{
    char *root = mtc_data_path("recipes");
    if (!root) {
        errprintf(err, "no recipes/ directory found (set MTC_DATA_DIR or install mtc)");
        return NULL;
    }
    json_t *arr = json_array();
    add_catalog(arr, root, "");
    free(root);
    size_t n = json_array_size(arr);
    json_t **v = calloc(n ? n : 1, sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(arr, i));
    qsort(v, n, sizeof(*v), by_name);
    json_t *out = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(out, v[i]);
    free(v);
    json_decref(arr);
    return out;
}

/* "unknown recipe X; known: a, b, c": the recipes of X's task folder first, as
 * many as fit in err; errno ENOENT so a caller can print the whole catalog. */
static void unknown_recipe(const char *name, mtc_error_t *err)
{
    char list[200] = "";
    size_t used = 0, plen = strchr(name, '/') ? (size_t)(strchr(name, '/') - name + 1) : 0;
    json_t *cat = recipe_catalog(NULL);
    int full = 0;
    for (int pass = 0; pass < 2 && !full; pass++) {
        size_t i;
        json_t *row;
        json_array_foreach(cat, i, row)
        {
            const char *n = json_string_value(json_object_get(row, "name"));
            int same = plen && strncmp(n, name, plen) == 0;
            if (same != (pass == 0) && plen)
                continue;
            if (!plen && pass == 1)
                break;
            int w = snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "", n);
            if (w < 0 || used + (size_t)w >= sizeof(list) - 8) {
                strcpy(list + used, ", ...");
                full = 1;
                break;
            }
            used += (size_t)w;
        }
    }
    json_decref(cat);
    errprintf(err, "unknown recipe \"%s\"; known recipes: %s", name, *list ? list : "(none)");
    errno = ENOENT;
}

json_t *recipe_load_catalog(const char *name, char *path, size_t len, mtc_error_t *err)
{
    char base[PATH_MAX], file[PATH_MAX];
    snprintf(base, sizeof(base), "%s", name);
    if (ends_with(base, ".py") || ends_with(base, ".json"))
        *strrchr(base, '.') = '\0';
    if (!catalog_name_ok(base)) {
        unknown_recipe(name, err);
        return NULL;
    }
    char rel[PATH_MAX + 16];
    snprintf(rel, sizeof(rel), "recipes/%s.json", base);
    char *p = mtc_data_path(rel);
    if (!p) {
        unknown_recipe(name, err);
        return NULL;
    }
    snprintf(file, sizeof(file), "%s", p);
    free(p);
    json_t *r = parse_file(file, err);
    if (r) /* the catalog name is the recipe's name */
        json_object_set_new(r, "name", json_string(base));
    if (r && path)
        snprintf(path, len, "%s", file);
    return r;
}

json_t *recipe_load(const char *name, char *path, size_t len, mtc_error_t *err)
{
    char file[PATH_MAX];
    struct stat st;
    if ((strchr(name, '/') || ends_with(name, ".json")) && stat(name, &st) == 0 &&
        S_ISREG(st.st_mode)) {
        snprintf(file, sizeof(file), "%s", name);
        if (!realpath(name, file))
            snprintf(file, sizeof(file), "%s", name);
    } else if (name[0] == '/' || strncmp(name, "./", 2) == 0 || strncmp(name, "../", 3) == 0) {
        errprintf(err, "recipe file %s: %s", name, strerror(errno ? errno : ENOENT));
        return NULL;
    } else {
        return recipe_load_catalog(name, path, len, err);
    }
    json_t *r = parse_file(file, err);
    if (r && !json_object_get(r, "name")) {
        const char *b = strrchr(file, '/');
        char n[PATH_MAX];
        snprintf(n, sizeof(n), "%s", b ? b + 1 : file);
        if (ends_with(n, ".json"))
            n[strlen(n) - 5] = '\0';
        json_object_set_new(r, "name", json_string(n));
    }
    if (r && path)
        snprintf(path, len, "%s", file);
    return r;
}
