/* upload: the operation that registers a model version (an upload) — the
 * artifact's files stored once by content (src/registry), the version and its
 * lineage (the run's config.json, checkpoint and metrics.jsonl) recorded, the
 * model's refs file rewritten — and the refs files themselves. A resumed
 * operation finds the version it already recorded. */
#include "control/internal.h"
#include "control/models.h"
#include "dataset/dataset.h"
#include "experiment/experiment.h"
#include "recipes/recipes.h"
#include "registry/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A change to a model and the rewrite of its refs file, one at a time. */
static pthread_mutex_t refs_lock = PTHREAD_MUTEX_INITIALIZER;

void control_models_lock(void)
{
    pthread_mutex_lock(&refs_lock);
}

void control_models_unlock(void)
{
    pthread_mutex_unlock(&refs_lock);
}

void control_model_refs(struct store *st, const char *models, const char *project,
                        const char *location, const char *name, json_t *dirs)
{
    int n = 0;
    struct store_model_version *v = store_model_versions(st, project, location, name, &n);
    json_t *versions = json_object(), *aliases = json_object();
    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof(key), "%d", v[i].version);
        json_object_set(versions, key, v[i].manifest);
        if (dirs)
            json_array_append(dirs, json_object_get(v[i].manifest, "dir"));
        size_t k;
        json_t *a;
        json_array_foreach(v[i].aliases, k, a)
            json_object_set_new(aliases, json_string_value(a), json_integer(v[i].version));
    }
    if (registry_refs_write(models, project, location, name, versions, aliases) < 0)
        log_msg(LOG_ERR, "model %s: cannot write its refs file: %s", name, strerror(errno));
    json_decref(versions);
    json_decref(aliases);
    store_model_versions_free(v, n);
}

/* The last value of key in a metrics.jsonl (read from fd, which stays open)
 * and the step of its line. */
static json_t *last_metric(int fd, const char *key, json_int_t *step)
{
    int d = fd < 0 ? -1 : dup(fd);
    FILE *f = d < 0 ? NULL : fdopen(d, "r");
    if (!f) {
        if (d >= 0)
            close(d);
        return NULL;
    }
    lseek(d, 0, SEEK_SET);
    char line[4096];
    json_t *found = NULL;
    while (fgets(line, sizeof(line), f)) {
        json_t *o = json_loads(line, 0, NULL);
        json_t *v = json_object_get(o, key);
        if (json_is_number(v)) {
            json_decref(found);
            found = json_incref(v);
            *step = json_integer_value(json_object_get(o, "step"));
        }
        json_decref(o);
    }
    fclose(f);
    return found;
}

/* A JSON file name under dir, opened as how allows; NULL when it cannot be. */
static json_t *load_at(int dir, const char *name, const struct mtc_reach *how)
{
    mtc_error_t e = {""};
    int fd = dir < 0 ? -1 : mtc_reach_at(dir, name, how, 0, &e);
    json_t *o = fd < 0 ? NULL : json_loadfd(fd, 0, NULL);
    if (fd >= 0)
        close(fd);
    return o;
}

/* A file's text (at most 1 MiB) from fd; NULL when it cannot be read. */
static char *read_text(int fd)
{
    size_t n = 0, cap = 1 << 20;
    char *buf = fd < 0 ? NULL : malloc(cap + 1);
    ssize_t r = 0;
    while (buf && n < cap && (r = read(fd, buf + n, cap - n)) > 0)
        n += (size_t)r;
    if (buf && r < 0) {
        free(buf);
        return NULL;
    }
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* A prepared dataset's fingerprint: mtc-train data prepare's manifest says
 * its source's; a directory from mtc-train prepare gets "sha256:" of its
 * meta.json (token counts, tokenizer) and its shards' names and sizes. */
static int data_fingerprint(const char *dir, const struct mtc_reach *how, char fp[72])
{
    mtc_error_t e = {""};
    int dfd = mtc_reach_open(dir, how, O_DIRECTORY, &e);
    json_t *m = load_at(dfd, "manifest.json", how);
    const char *src = mtc_json_str(m, "sourceFingerprint");
    if (src) {
        snprintf(fp, 72, "%s", src);
        json_decref(m);
        close(dfd);
        return 0;
    }
    json_decref(m);
    int mfd = dfd < 0 ? -1 : mtc_reach_at(dfd, "meta.json", how, 0, &e);
    char *meta = read_text(mfd);
    if (mfd >= 0)
        close(mfd);
    int d2 = meta ? openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    DIR *d = d2 < 0 ? NULL : fdopendir(d2);
    if (!d) {
        if (d2 >= 0)
            close(d2);
        if (dfd >= 0)
            close(dfd);
        free(meta);
        return -1;
    }
    json_t *files = json_object();
    struct dirent *de;
    struct mtc_fsid saved;
    mtc_fsid_enter(how->as, &saved);
    while ((de = readdir(d)) != NULL) {
        struct stat sb;
        size_t n = strlen(de->d_name);
        if (n > 4 && strcmp(de->d_name + n - 4, ".bin") == 0 &&
            fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode))
            json_object_set_new(files, de->d_name, json_integer((json_int_t)sb.st_size));
    }
    mtc_fsid_leave(&saved);
    closedir(d);
    close(dfd);
    char *listing = json_dumps(files, JSON_SORT_KEYS | JSON_COMPACT), hex[65];
    char *all = NULL;
    int ok = listing && asprintf(&all, "%s\n%s", meta, listing) >= 0;
    if (ok) {
        mtc_sha256_hex(all, hex);
        snprintf(fp, 72, "sha256:%s", hex);
    }
    free(all);
    free(listing);
    free(meta);
    json_decref(files);
    return ok ? 0 : -1;
}

/* The lineage of a version made by the run whose task directory is run
 * (its config.json, the checkpoint stored, metrics.jsonl). */
static json_t *run_lineage(const char *run, const struct mtc_reach *run_how,
                           const struct registry_source *src, const struct mtc_reach *how)
{
    mtc_error_t e = {""};
    int rfd = mtc_reach_open(run, run_how, O_DIRECTORY, &e);
    json_t *cfg = load_at(rfd, "config.json", run_how), *l = json_object();
    if (rfd >= 0)
        close(rfd);
    if (!cfg)
        return l;
    struct exp_run r; /* its config.json's fields */
    exp_run_of(cfg, &r);
    const struct {
        const char *field, *value;
    } copy[] = {
        {"experiment", r.experiment}, {"runId", r.run_id},   {"slurmJobId", r.job_id},
        {"recipe", r.recipe},         {"task", r.task},      {"taskDir", r.task_dir},
        {"parentModel", r.from_model}, {"executor", r.executor},
        {"parentModel", r.from_model_version}, {"trainingJob", r.training_job},
        {"tokenizer", r.tokenizer},   {"dataset", r.data_path},
    };
    for (size_t i = 0; i < sizeof(copy) / sizeof(copy[0]); i++)
        if (copy[i].value)
            json_object_set_new(l, copy[i].field, json_string(copy[i].value));
    /* the cluster: the trainingJob's, else the slurm.conf's .../clusters/ID/ */
    const char *p = r.slurm_conf ? strstr(r.slurm_conf, "/clusters/") : NULL;
    if (p)
        json_object_set_new(l, "cluster", json_sprintf("%.*s", (int)strcspn(p + 10, "/"), p + 10));
    if (r.overrides)
        json_object_set(l, "recipeOverrides", (json_t *)r.overrides);
    json_object_set(l, "train", (json_t *)r.train);
    json_object_set(l, "modelConfig", (json_t *)r.model);
    char fp[72];
    if (r.data_path && data_fingerprint(r.data_path, how, fp) == 0)
        json_object_set_new(l, "datasetFingerprint", json_string(fp));
    if (r.checkpoint_init && !json_object_get(l, "parentModel"))
        json_object_set_new(l, "parentCheckpoint", json_string(r.checkpoint_init));
    json_object_set_new(l, "checkpoint", json_string(src->path));
    json_t *meta = load_at(src->dir, "meta.json", how);
    if (json_object_get(meta, "tokens_seen"))
        json_object_set_new(l, "tokensSeen",
                            json_integer((json_int_t)json_number_value(
                                json_object_get(meta, "tokens_seen"))));
    if (json_object_get(meta, "step"))
        json_object_set(l, "step", json_object_get(meta, "step"));
    json_decref(meta);
    if (*r.metrics_path) {
        json_int_t step = 0;
        int mfd = mtc_reach_open(r.metrics_path, run_how, 0, &e);
        json_t *v = last_metric(mfd, "loss", &step);
        if (v)
            json_object_set_new(l, "finalTrainLoss", v);
        if (v && step > 0 && !json_object_get(l, "step")) /* a custom task's: no meta.json */
            json_object_set_new(l, "step", json_integer(step));
        v = last_metric(mfd, "val_loss", &step);
        if (v)
            json_object_set_new(l, "finalValLoss", v);
        if (mfd >= 0)
            close(mfd);
    }
    json_decref(cfg);
    return l;
}

/* A registration (failed: why set) in mtcd's log and, for a run on one of
 * mtcd's clusters, in that cluster's events. */
static void report(struct store *st, const json_t *lineage, const char *name, int version,
                   const char *why)
{
    char msg[400];
    if (why)
        snprintf(msg, sizeof(msg), "model %s: registration of %s failed: %s", name,
                 mtc_json_str_or(lineage, "runId", "an upload"), why);
    else
        snprintf(msg, sizeof(msg), "model %s: version %d registered from run %s", name, version,
                 mtc_json_str(lineage, "runId"));
    log_msg(why ? LOG_ERR : LOG_NOTICE, "%s", msg);
    struct store_cluster cl;
    const char *id = mtc_json_str(lineage, "cluster");
    if (id && store_cluster_get(st, id, &cl) == 0) {
        store_event_add(st, id, why ? "MODEL_REGISTRATION_FAILED" : "MODEL_REGISTERED", NULL,
                        msg);
        store_cluster_release(&cl);
    }
}


/* The version this operation recorded before mtcd stopped (0: none). */
static int recorded(struct store *st, const struct store_op *op, const char *name)
{
    int n = 0, found = 0;
    struct store_model_version *v = store_model_versions(st, op->project, op->location, name, &n);
    for (int i = 0; i < n; i++)
        if (mtc_json_str(v[i].lineage, "operation") &&
            !strcmp(mtc_json_str(v[i].lineage, "operation"), op->id))
            found = v[i].version;
    store_model_versions_free(v, n);
    return found;
}

/* Where a restricted request's files may lie: the request's own "roots" (a
 * registrar token's directory; for sourceRun, key "runRoots", its run's),
 * else mtcd's data roots and <home>/experiments. roots[] gets at most 65
 * entries and a NULL. */
static void roots_of(struct control *c, const json_t *req, const char *key, const char *home,
                     const char *roots[66], char exps[PATH_MAX])
{
    int n = 0;
    const json_t *own = json_object_get(req, key);
    if (!own) /* an upload recorded before runRoots: one list for both fields */
        own = json_object_get(req, "roots");
    if (json_is_array(own)) {
        for (size_t i = 0; i < json_array_size(own) && n < 64; i++)
            if (json_string_value(json_array_get(own, i)))
                roots[n++] = json_string_value(json_array_get(own, i));
        roots[n] = NULL;
        return;
    }
    for (const char *const *p = c->datasets.roots; p && *p && n < 64; p++)
        roots[n++] = *p;
    snprintf(exps, PATH_MAX, "%s/experiments", home);
    roots[n++] = exps;
    roots[n] = NULL;
}

/* Whom an upload reads its files as (fsafe's mtc_reach, as api/models.c
 * chose): the token's user when it was bound to one ("runAs"), root for an
 * admin's unbound token and for a registrar's (beneath its own directory),
 * nobody for an editor's unbound token. */
static void reach_of(const json_t *req, int restricted, const char *const *roots,
                     struct mtc_reach *how, struct mtc_user *u)
{
    memset(how, 0, sizeof(*how));
    how->roots = restricted ? roots : NULL;
    if (exp_run_as(req, u) == 0)
        how->as = u;
    else if (restricted && !json_object_get(req, "roots")) {
        mtc_user_nobody(u);
        how->as = u;
    }
}

/* The code of a refused path, by errno. */
static int path_code(int e)
{
    return e == EACCES || e == EPERM ? RPC_PERMISSION_DENIED
           : e == ENOENT             ? RPC_NOT_FOUND
                                     : RPC_INVALID_ARGUMENT;
}

int control_run_model(struct control *c, struct store_op *op, json_t **response, int *code,
                      mtc_error_t *err)
{
    const char *name = op->target + strlen("models/");
    const json_t *req = op->request, *model = json_object_get(req, "model");
    const char *home = mtc_json_str(req, "home");
    int restricted = json_is_true(json_object_get(req, "restricted"));
    char models[PATH_MAX];
    *code = RPC_INTERNAL;
    if (!registry_name_valid(name) || !home || home[0] != '/' ||
        !mtc_json_str(model, "artifactUri")) {
        *code = RPC_INVALID_ARGUMENT;
        return errprintf(err, "operation %s: a malformed upload request", op->id);
    }
    snprintf(models, sizeof(models), "%s/models", home);
    int version = recorded(c->st, op, name);
    if (version > 0)
        goto done; /* mtcd stopped after recording it */
    int format = mtc_json_str(model, "format")
                     ? schema_enum_parse(&registry_format_enum, mtc_json_str(model, "format"), 0)
                     : -1;
    const char *roots[66], *run_roots[66];
    char exps[PATH_MAX];
    roots_of(c, req, "roots", home, roots, exps);
    roots_of(c, req, "runRoots", home, run_roots, exps);
    struct mtc_reach how, run_how;
    struct mtc_user u;
    struct registry_source src;
    reach_of(req, restricted, roots, &how, &u);
    run_how = how;
    run_how.roots = restricted ? run_roots : NULL;
    /* the source opened once: what is stored is read from these descriptors */
    if (registry_source_open(mtc_json_str(model, "artifactUri"), &how, format, &src, err) < 0) {
        *code = path_code(errno);
        return -1;
    }
    json_t *lineage = mtc_json_str(model, "sourceRun")
                          ? run_lineage(mtc_json_str(model, "sourceRun"), &run_how, &src, &how)
                          : json_object();
    json_object_set_new(lineage, "operation", json_string(op->id));
    char progress[PATH_MAX + 64];
    snprintf(progress, sizeof(progress), "storing %.200s (%s)", src.path,
             schema_enum_name(&registry_format_enum, src.format));
    store_op_progress(c->st, op->id, progress);
    json_t *manifest = NULL, *meta = json_object();
    int stored = registry_source_tokenizer(&src, mtc_json_str(lineage, "tokenizer"), &how) < 0
                     ? errprintf(err, "source: %.200s: too many files", src.path)
                     : registry_ingest_source(models, &src, &manifest, err);
    registry_source_close(&src);
    if (stored < 0) {
        *code = errno == EACCES ? RPC_PERMISSION_DENIED : RPC_INTERNAL;
        report(c->st, lineage, name, 0, err->text);
        json_decref(lineage);
        json_decref(meta);
        return -1;
    }
    static const char *const keep[] = {"displayName", "description", "labels"};
    for (size_t i = 0; i < 3; i++)
        if (json_object_get(model, keep[i]))
            json_object_set(meta, keep[i], json_object_get(model, keep[i]));
    control_models_lock();
    int rc = store_model_add_version(c->st, op->project, op->location, name, meta, manifest,
                                     lineage, &version);
    if (rc == 0 && json_array_size(json_object_get(model, "versionAliases")))
        rc = store_model_aliases(c->st, op->project, op->location, name, version,
                                 json_object_get(model, "versionAliases"), NULL);
    if (rc == 0)
        control_model_refs(c->st, models, op->project, op->location, name, NULL);
    control_models_unlock();
    if (rc < 0) {
        mtc_error_t e2 = {""};
        registry_remove(models, manifest, &e2);
        errprintf(err, "model %s: cannot store the new version", name);
        report(c->st, lineage, name, 0, err->text);
    } else {
        if (mtc_json_str(lineage, "runId"))
            report(c->st, lineage, name, version, NULL);
        log_msg(LOG_NOTICE, "model %s: version %d registered (%s, %lld bytes, digest %.12s)", name,
                version, mtc_json_str(manifest, "format"),
                (long long)json_integer_value(json_object_get(manifest, "sizeBytes")),
                mtc_json_str(manifest, "digest"));
    }
    json_decref(manifest);
    json_decref(lineage);
    json_decref(meta);
    if (rc < 0)
        return -1;
done:
    /* UploadModelResponse */
    *response = json_pack("{s:o, s:o}", "model",
                          json_sprintf("projects/%s/locations/%s/models/%s", op->project,
                                       op->location, name),
                          "modelVersionId", json_sprintf("%d", version));
    return 0;
}
