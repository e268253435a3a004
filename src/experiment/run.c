/* run: one run's config.json as a typed thing — struct exp_run, whose named
 * fields are the keys recipes/render.c writes (the one place outside it that
 * names them), loaded from and saved to <task dir>/config.json, and the
 * accessors for callers that hold the JSON (a stored trainingJob's config).
 * The bottom of experiment/: it calls nothing above it. */
#include "experiment/experiment.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int exp_is_custom(const json_t *cfg)
{
    const char *task = mtc_json_str(cfg, "task");
    return task && !strcmp(task, "custom"); /* recipe_task_enum's name of RECIPE_CUSTOM */
}

const char *exp_task_dir(const json_t *cfg)
{
    return mtc_json_str(cfg, "taskDir");
}

const char *exp_experiment(const json_t *cfg)
{
    return mtc_json_str(cfg, "experiment");
}

const char *exp_run_id(const json_t *cfg)
{
    return mtc_json_str(cfg, "runId");
}

const char *exp_job_id(const json_t *cfg)
{
    return mtc_json_str(cfg, "jobId");
}

const char *exp_checkpoint_dir(const json_t *cfg)
{
    return mtc_json_str(json_object_get(cfg, "checkpoint"), "dir");
}

const char *exp_checkpoint_init(const json_t *cfg)
{
    return mtc_json_str(json_object_get(cfg, "checkpoint"), "init");
}

const char *exp_recorded_conf(const json_t *cfg)
{
    return mtc_json_str(cfg, "slurmConf");
}

const char *exp_register_model(const json_t *cfg)
{
    return mtc_json_str(json_object_get(cfg, "register"), "model");
}

const char *exp_log_dir(const json_t *cfg)
{
    return mtc_json_str(cfg, "logDir");
}

int exp_is_local(const json_t *cfg)
{
    const char *e = mtc_json_str(cfg, "executor");
    return e && !strcmp(e, "local");
}

const char *exp_run_dir(const json_t *cfg, char *buf, size_t len)
{
    snprintf(buf, len, "%s", exp_task_dir(cfg) ?: "");
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    return buf;
}

const char *exp_log_path(const json_t *cfg, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s.log", exp_task_dir(cfg), exp_job_id(cfg) ?: "");
    return buf;
}

const char *exp_metrics_path(const json_t *cfg, char *buf, size_t len)
{
    const char *dir = exp_log_dir(cfg);
    int n = dir ? snprintf(buf, len, "%s/metrics.jsonl", dir) : -1;
    if (n < 0 || (size_t)n >= len) {
        if (len)
            buf[0] = '\0';
        return NULL;
    }
    return buf;
}

int exp_run_as(const json_t *cfg, struct mtc_user *u)
{
    const json_t *a = json_object_get(cfg, "runAs");
    const char *name = mtc_json_str(a, "user");
    json_t *uid = json_object_get(a, "uid"), *gid = json_object_get(a, "gid");
    if (!name || !json_is_integer(uid) || !json_is_integer(gid) || json_integer_value(uid) <= 0 ||
        json_integer_value(gid) < 0)
        return -1;
    memset(u, 0, sizeof(*u));
    snprintf(u->name, sizeof(u->name), "%s", name);
    u->uid = (uid_t)json_integer_value(uid);
    u->gid = (gid_t)json_integer_value(gid);
    return 0;
}

void exp_run_of(const json_t *cfg, struct exp_run *r)
{
    memset(r, 0, sizeof(*r));
    r->cfg = (json_t *)cfg;
    r->task = mtc_json_str(cfg, "task");
    r->recipe = mtc_json_str(cfg, "recipe");
    r->executor = mtc_json_str(cfg, "executor");
    r->cluster_type = mtc_json_str(cfg, "clusterType");
    r->partition = mtc_json_str(cfg, "partition");
    r->image = mtc_json_str(cfg, "image");
    r->time = mtc_json_str(cfg, "time");
    r->nodes = json_integer_value(json_object_get(cfg, "nodes"));
    r->retry_on_error = json_integer_value(json_object_get(cfg, "retryOnError"));
    r->experiment = exp_experiment(cfg);
    r->run_id = exp_run_id(cfg);
    r->task_dir = exp_task_dir(cfg);
    r->log_dir = exp_log_dir(cfg);
    r->job_id = exp_job_id(cfg);
    r->slurm_conf = exp_recorded_conf(cfg);
    r->training_job = mtc_json_str(cfg, "trainingJob");
    r->from_model = mtc_json_str(cfg, "fromModel");
    r->from_model_version = mtc_json_str(cfg, "fromModelVersion");
    r->checkpoint_dir = exp_checkpoint_dir(cfg);
    r->checkpoint_init = exp_checkpoint_init(cfg);
    r->has_user = exp_run_as(cfg, &r->user) == 0;
    const json_t *data = json_object_get(cfg, "data");
    r->data_path = mtc_json_str(data, "path");
    r->tokenizer = mtc_json_str(data, "tokenizer");
    const json_t *reg = json_object_get(cfg, "register");
    r->reg.model = mtc_json_str(reg, "model");
    r->reg.dir = mtc_json_str(reg, "dir");
    r->train = json_object_get(cfg, "train");
    r->model = json_object_get(cfg, "model");
    r->overrides = json_object_get(cfg, "overrides");
    r->launch = json_object_get(cfg, "launch");
    exp_monitor_from(cfg, &r->monitor);
    exp_run_dir(cfg, r->run_dir, sizeof(r->run_dir));
    if (r->task_dir)
        exp_log_path(cfg, r->log_path, sizeof(r->log_path));
    exp_metrics_path(cfg, r->metrics_path, sizeof(r->metrics_path));
}

json_t *exp_config_load(const char *task_dir)
{
    char path[PATH_MAX + 16];
    if (snprintf(path, sizeof(path), "%s/config.json", task_dir) >= (int)sizeof(path)) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    /* with the thread's ids (mtcd: the run's user), a regular file only */
    int fd = mtc_open_as_user(path, 0);
    json_t *c = fd < 0 ? NULL : json_loadfd(fd, 0, NULL);
    if (fd >= 0)
        close(fd);
    if (fd >= 0 && !c)
        errno = EINVAL;
    return c;
}

int exp_run_load(const char *task_dir, struct exp_run *r, mtc_error_t *err)
{
    json_t *cfg = exp_config_load(task_dir);
    if (!cfg)
        return errprintf(err, "cannot read %s/config.json: %s", task_dir,
                         errno == EINVAL ? "not a JSON object" : strerror(errno));
    exp_run_of(cfg, r);
    r->owned = 1;
    return 0;
}

int exp_config_save(const json_t *cfg, int flags, mtc_error_t *err)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/config.json", exp_task_dir(cfg) ?: ".");
    char *s = json_dumps(cfg, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!s)
        return errprintf(err, "out of memory");
    size_t n = strlen(s);
    s[n] = '\n'; /* the terminating NUL becomes the file's final newline */
    int rc = mtc_write_file_atomic_opt(path, s, n + 1, 0644, flags);
    free(s);
    if (rc < 0)
        return errprintf(err, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

int exp_run_save(const struct exp_run *r, mtc_error_t *err)
{
    return exp_config_save(r->cfg, 0, err);
}

void exp_run_release(struct exp_run *r)
{
    if (r->owned)
        json_decref(r->cfg);
    memset(r, 0, sizeof(*r));
}

void exp_register_where(json_t *cfg, const char *home, const char *project, const char *location)
{
    json_t *reg = json_object_get(cfg, "register");
    if (!reg)
        return;
    if (home)
        json_object_set_new(reg, "home", json_string(home));
    json_object_set_new(reg, "project", json_string(project));
    json_object_set_new(reg, "location", json_string(location));
}

void exp_register_via(json_t *cfg, const char *url, const char *ca_cert)
{
    json_t *reg = json_object_get(cfg, "register");
    if (!reg)
        return;
    json_object_set_new(reg, "url", json_string(url));
    if (ca_cert)
        json_object_set_new(reg, "caCert", json_string(ca_cert));
}

void exp_set_run_as(json_t *cfg, const struct mtc_user *u)
{
    json_object_set_new(cfg, "runAs", json_pack("{s:s, s:I, s:I}", "user", u->name, "uid",
                                                (json_int_t)u->uid, "gid", (json_int_t)u->gid));
}

void exp_set_from_model_version(json_t *cfg, const char *from_model, int version)
{
    json_object_set_new(cfg, "fromModelVersion", json_sprintf("%.*s@%d",
                                                              (int)strcspn(from_model, "@"),
                                                              from_model, version));
}

void exp_set_recorded_conf(json_t *cfg, const char *slurm_conf)
{
    json_object_set_new(cfg, "slurmConf", json_string(slurm_conf));
}

void exp_set_training_job(json_t *cfg, const char *name)
{
    json_object_set_new(cfg, "trainingJob", json_string(name));
}

json_t *exp_config_of_job(const char *run_id, const char *experiment, const char *job_id,
                          const char *task_dir)
{
    return json_pack("{s:s?, s:s?, s:s?, s:s?, s:s}", "runId", run_id, "taskName", experiment,
                     "jobId", job_id, "taskDir", task_dir, "executor", "slurm");
}
