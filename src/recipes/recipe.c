/* recipe: recipe files — finding them (catalog names or a user's path), strict
 * validation against a field table (snake_case or camelCase keys, one-line
 * errors naming the field), and the catalog behind `mtc recipes list`. */
#include "recipes/recipes.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum ftype { F_STR, F_INT, F_NUM, F_BOOL, F_OBJ, F_SECTION, F_TYPES, F_ARGS, F_ENV };

struct field {
    const char *section; /* "" for the top level */
    const char *name;    /* canonical snake_case */
    enum ftype type;
    int required;
    double min; /* for numbers: smallest allowed value */
};

/* Every field a recipe may have. Sections are validated recursively; F_TYPES
 * is the per-cluster-type override map, F_ARGS extra trainer flags, F_ENV
 * environment variables for the job. */
static const struct field fields[] = {
    {"", "name", F_STR, 0, 0},
    {"", "description", F_STR, 0, 0},
    {"", "task", F_STR, 1, 0},
    {"", "model", F_SECTION, 1, 0},
    {"", "data", F_SECTION, 1, 0},
    {"", "train", F_SECTION, 1, 0},
    {"", "checkpoint", F_SECTION, 0, 0},
    {"", "resources", F_SECTION, 0, 0},
    {"", "cluster_types", F_TYPES, 0, 0},
    {"", "trainer_args", F_ARGS, 0, 0},
    {"", "env", F_ENV, 0, 0},
    {"model", "preset", F_STR, 1, 0},
    {"model", "config", F_OBJ, 0, 0},
    {"data", "path", F_STR, 1, 0},
    {"data", "tokenizer", F_STR, 1, 0},
    {"data", "source", F_STR, 0, 0},
    {"train", "steps", F_INT, 1, 1},
    {"train", "global_batch", F_INT, 1, 1},
    {"train", "micro_batch", F_INT, 0, 1},
    {"train", "seq_length", F_INT, 1, 1},
    {"train", "lr", F_NUM, 0, 0},
    {"train", "min_lr", F_NUM, 0, 0},
    {"train", "warmup", F_INT, 0, 0},
    {"train", "weight_decay", F_NUM, 0, 0},
    {"train", "grad_clip", F_NUM, 0, 0},
    {"train", "seed", F_INT, 0, 0},
    {"train", "shuffle", F_BOOL, 0, 0},
    {"train", "log_every", F_INT, 0, 1},
    {"train", "eval_every", F_INT, 0, 0},
    {"train", "eval_batches", F_INT, 0, 1},
    {"checkpoint", "every", F_INT, 0, 0},
    {"checkpoint", "keep", F_INT, 0, 1},
    {"checkpoint", "init", F_STR, 0, 0},
    {"resources", "nodes", F_INT, 0, 1},
    {"resources", "time", F_STR, 0, 0},
    {"resources", "signal_before_s", F_INT, 0, 10},
    {"override", "gpus_per_node", F_INT, 0, 0},
    {"override", "ranks_per_node", F_INT, 0, 1},
    {"override", "threads_per_rank", F_INT, 0, 1},
    {"override", "micro_batch", F_INT, 0, 1},
    {"override", "global_batch", F_INT, 0, 1},
    {"override", "nodes", F_INT, 0, 1},
    {"override", "env", F_ENV, 0, 0},
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static const char *const tasks[] = {"pretrain", "cpt", "sft", "dpo", NULL};
static const char *const cluster_types[] = {"hcc-a3m", "hcc-a3u", "hcc-a4", "hcc-a3h", "local",
                                            NULL};

int recipe_cluster_type_known(const char *type)
{
    for (int i = 0; type && cluster_types[i]; i++)
        if (strcmp(type, cluster_types[i]) == 0)
            return 1;
    return 0;
}

const char *recipe_cluster_types(void)
{
    return "hcc-a3m, hcc-a3u, hcc-a4, hcc-a3h, local";
}

/* "globalBatch", "global_batch" and "GLOBAL_BATCH" name the same field. */
static int key_eq(const char *key, const char *canon)
{
    while (*key || *canon) {
        if (*key == '_') {
            key++;
            continue;
        }
        if (*canon == '_') {
            canon++;
            continue;
        }
        if (tolower((unsigned char)*key) != tolower((unsigned char)*canon))
            return 0;
        key++, canon++;
    }
    return 1;
}

static const struct field *find_field(const char *section, const char *key)
{
    for (size_t i = 0; i < NFIELDS; i++)
        if (strcmp(fields[i].section, section) == 0 && key_eq(key, fields[i].name))
            return &fields[i];
    return NULL;
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

static int check_env(const json_t *v, const char *where, mtc_error_t *err)
{
    if (!json_is_object(v))
        return errprintf(err, "%s: must be an object of NAME: \"value\"", where);
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)v, k, x)
    {
        if (!env_name_ok(k))
            return errprintf(err, "%s.%s: not an environment variable name", where, k);
        if (!json_is_string(x))
            return errprintf(err, "%s.%s: must be a string", where, k);
        if (strchr(json_string_value(x), '\n'))
            return errprintf(err, "%s.%s: must not contain a newline", where, k);
    }
    return 0;
}

/* Flag names reach the trainer's command line: [a-z][a-z0-9-]*. */
static int check_args(const json_t *v, const char *where, mtc_error_t *err)
{
    if (!json_is_object(v))
        return errprintf(err, "%s: must be an object of flag: value", where);
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)v, k, x)
    {
        int ok = islower((unsigned char)k[0]);
        for (const char *p = k; ok && *p; p++)
            ok = islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-';
        if (!ok)
            return errprintf(err, "%s.%s: flag names are lowercase words joined by '-'", where, k);
        if (!json_is_string(x) && !json_is_number(x) && !json_is_boolean(x))
            return errprintf(err, "%s.%s: must be a string, number or boolean", where, k);
    }
    return 0;
}

static int normalize_section(json_t *obj, const char *section, const char *where,
                             mtc_error_t *err);

/* Check one value against its field; rewrite nested sections. */
static int check_value(const struct field *f, json_t *v, const char *where, mtc_error_t *err)
{
    switch (f->type) {
    case F_STR:
        if (!json_is_string(v) || !*json_string_value(v))
            return errprintf(err, "%s: must be a non-empty string", where);
        if (strchr(json_string_value(v), '\n'))
            return errprintf(err, "%s: must not contain a newline", where);
        return 0;
    case F_INT:
        if (!json_is_integer(v))
            return errprintf(err, "%s: must be an integer", where);
        if ((double)json_integer_value(v) < f->min)
            return errprintf(err, "%s: must be >= %g", where, f->min);
        return 0;
    case F_NUM:
        if (!json_is_number(v))
            return errprintf(err, "%s: must be a number", where);
        if (json_number_value(v) < f->min)
            return errprintf(err, "%s: must be >= %g", where, f->min);
        return 0;
    case F_BOOL:
        return json_is_boolean(v) ? 0 : errprintf(err, "%s: must be true or false", where);
    case F_OBJ:
        return json_is_object(v) ? 0 : errprintf(err, "%s: must be an object", where);
    case F_SECTION:
        if (!json_is_object(v))
            return errprintf(err, "%s: must be an object", where);
        return normalize_section(v, f->name, where, err);
    case F_ARGS:
        return check_args(v, where, err);
    case F_ENV:
        return check_env(v, where, err);
    case F_TYPES: {
        if (!json_is_object(v))
            return errprintf(err, "%s: must be an object of cluster type: overrides", where);
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x)
        {
            char w[256];
            if (snprintf(w, sizeof(w), "%s.%s", where, k) >= (int)sizeof(w))
                return errprintf(err, "%s: name too long", where);
            if (!recipe_cluster_type_known(k))
                return errprintf(err, "%s: unknown cluster type (known: %s)", w,
                                 recipe_cluster_types());
            if (!json_is_object(x))
                return errprintf(err, "%s: must be an object", w);
            if (normalize_section(x, "override", w, err) < 0)
                return -1;
        }
        return 0;
    }
    }
    return 0;
}

/* Validate obj's keys against the section's fields and rename them to the
 * canonical snake_case, so later code can use json_object_get. */
static int normalize_section(json_t *obj, const char *section, const char *where,
                             mtc_error_t *err)
{
    json_t *renamed = json_object();
    const char *k;
    json_t *v;
    void *tmp;
    int rc = 0;
    json_object_foreach_safe(obj, tmp, k, v)
    {
        char w[256];
        snprintf(w, sizeof(w), "%s%s%s", where, *where ? "." : "", k);
        const struct field *f = find_field(section, k);
        if (!f) {
            rc = errprintf(err, "%s: unknown field", w);
            break;
        }
        if (json_object_get(renamed, f->name)) {
            rc = errprintf(err, "%s: given twice (as %s too)", w, f->name);
            break;
        }
        if (check_value(f, v, w, err) < 0) {
            rc = -1;
            break;
        }
        json_object_set(renamed, f->name, v);
    }
    if (rc == 0) {
        for (size_t i = 0; i < NFIELDS; i++)
            if (strcmp(fields[i].section, section) == 0 && fields[i].required &&
                !json_object_get(renamed, fields[i].name)) {
                rc = errprintf(err, "%s%s%s: required field missing", where, *where ? "." : "",
                               fields[i].name);
                break;
            }
        json_object_clear(obj);
        json_object_update(obj, renamed);
    }
    json_decref(renamed);
    return rc;
}

static int normalize(json_t *r, mtc_error_t *err)
{
    if (!json_is_object(r))
        return errprintf(err, "a recipe is a JSON object");
    if (normalize_section(r, "", "", err) < 0)
        return -1;
    const char *task = json_string_value(json_object_get(r, "task"));
    int known = 0;
    for (int i = 0; tasks[i]; i++)
        known |= strcmp(task, tasks[i]) == 0;
    if (!known)
        return errprintf(err, "task: \"%s\" is not one of pretrain, cpt, sft, dpo", task);
    json_t *tr = json_object_get(r, "train");
    json_t *mb = json_object_get(tr, "micro_batch");
    if (mb && json_integer_value(mb) > json_integer_value(json_object_get(tr, "global_batch")))
        return errprintf(err, "train.micro_batch: larger than train.global_batch");
    const char *t = json_string_value(json_object_get(json_object_get(r, "resources"), "time"));
    if (t) {
        for (const char *p = t; *p; p++)
            if (!isdigit((unsigned char)*p) && *p != ':' && *p != '-')
                return errprintf(err, "resources.time: \"%s\" is not a Slurm time (D-HH:MM:SS)", t);
    }
    return 0;
}

int recipe_validate(const json_t *recipe, mtc_error_t *err)
{
    json_t *copy = json_deep_copy(recipe);
    if (!copy)
        return errprintf(err, "a recipe is a JSON object");
    int rc = normalize(copy, err);
    json_decref(copy);
    return rc;
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
    if (normalize(r, &e2) < 0) {
        errprintf(err, "%s: %s", path, e2.text);
        json_decref(r);
        return NULL;
    }
    return r;
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
                json_object_set_new(row, "description",
                                    desc ? json_incref(desc) : json_string(""));
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
        char base[PATH_MAX];
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
        name = base;
        json_t *r = parse_file(file, err);
        if (r) /* the catalog name is the recipe's name */
            json_object_set_new(r, "name", json_string(base));
        if (r && path)
            snprintf(path, len, "%s", file);
        return r;
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
