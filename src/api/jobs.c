/* jobs: a cluster's trainingJobs — a recipe run submitted to the cluster's
 * Slurm by mtcd (create), its state as Slurm and the experiment's exit record
 * say (get, list with pages and a state filter), and :cancel (scancel). The
 * body is recipes' request table; everything is checked before anything is
 * submitted, and a failed submission leaves nothing behind. */
#include "api/internal.h"
#include "cluster/cluster.h"
#include "dataset/dataset.h"
#include "recipes/recipes.h"
#include "registry/registry.h"
#include "slurm/slurm.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A training job's state as the API says it. */
enum job_state { JOB_PENDING, JOB_RUNNING, JOB_COMPLETED, JOB_FAILED, JOB_CANCELLED, JOB_REQUEUED };
static const struct schema_enum job_state_enum = SCHEMA_NAMES(
    NULL, [JOB_PENDING] = "PENDING", [JOB_RUNNING] = "RUNNING", [JOB_COMPLETED] = "COMPLETED",
    [JOB_FAILED] = "FAILED", [JOB_CANCELLED] = "CANCELLED", [JOB_REQUEUED] = "REQUEUED");

/* Slurm's job states (squeue %T, scontrol JobState) and the experiment's exit
 * record → the API's. Not listed: FAILED (TIMEOUT, NODE_FAIL, OUT_OF_MEMORY ...). */
static const struct {
    const char *slurm;
    enum job_state state;
} slurm_states[] = {
    {"PENDING", JOB_PENDING},       {"CONFIGURING", JOB_RUNNING},  {"RUNNING", JOB_RUNNING},
    {"COMPLETING", JOB_RUNNING},    {"SUSPENDED", JOB_RUNNING},    {"STOPPED", JOB_RUNNING},
    {"SIGNALING", JOB_RUNNING},     {"STAGE_OUT", JOB_RUNNING},    {"RESIZING", JOB_RUNNING},
    {"COMPLETED", JOB_COMPLETED},   {"CANCELLED", JOB_CANCELLED},  {"REQUEUED", JOB_REQUEUED},
    {"REQUEUE_HOLD", JOB_REQUEUED}, {"REQUEUE_FED", JOB_REQUEUED},
};

static enum job_state state_of(const char *slurm, int restarts)
{
    for (size_t i = 0; i < sizeof(slurm_states) / sizeof(slurm_states[0]); i++)
        if (strcmp(slurm_states[i].slurm, slurm) == 0)
            /* requeued and waiting to run again */
            return slurm_states[i].state == JOB_PENDING && restarts > 0 ? JOB_REQUEUED
                                                                        : slurm_states[i].state;
    return JOB_FAILED;
}

static int state_final(const char *s)
{
    int v = schema_enum_parse(&job_state_enum, s, 0);
    return v == JOB_COMPLETED || v == JOB_FAILED || v == JOB_CANCELLED;
}

static void refresh_state(struct store *st, struct store_job *j);

/* Look at Slurm (then the experiment's exit record) and store what changed.
 * A final state is kept; a job nobody knows keeps its last state. A job that
 * was not final has its progress read and each problem that starts recorded
 * as a cluster event (api_metrics_watch). */
void api_job_refresh(struct store *st, struct store_job *j)
{
    if (state_final(j->state) || !j->config)
        return;
    refresh_state(st, j);
    if (strcmp(j->state, "PENDING") != 0)
        api_metrics_watch(st, j, (double)mtc_now_ms() / 1000.0);
}

static void refresh_state(struct store *st, struct store_job *j)
{
    if (state_final(j->state) || !j->config)
        return;
    char slurm[64];
    exp_job_state(j->config, slurm, sizeof(slurm));
    if (strcmp(slurm, "UNKNOWN") == 0 || strcmp(slurm, "NOT_SUBMITTED") == 0)
        return;
    const char *conf = NULL;
    int restarts = j->restart_count;
    if (exp_slurm_conf(j->config, &conf) == 0) {
        int n = slurm_job_restarts(conf, j->slurm_job);
        if (n > restarts)
            restarts = n;
    }
    const char *now = schema_enum_name(&job_state_enum, state_of(slurm, restarts));
    if (strcmp(now, j->state) == 0 && restarts == j->restart_count)
        return;
    if (store_job_set_state(st, j->cluster_id, j->id, now, restarts) == 0) {
        snprintf(j->state, sizeof(j->state), "%s", now);
        j->restart_count = restarts;
    }
}

static const char *cget(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* The trainingJob resource. */
static json_t *job_json(const struct store_job *j)
{
    char name[400], t[40], dir[PATH_MAX];
    snprintf(name, sizeof(name),
             "projects/%s/locations/%s/modelDevelopmentClusters/%s/trainingJobs/%s", j->project,
             j->location, j->cluster_id, j->id);
    const json_t *cfg = j->config, *req = j->request;
    json_t *o = json_pack("{s:s, s:s}", "name", name, "id", j->id);
    json_t *recipe = json_object_get(req, "recipe");
    json_object_set_new(
        o, "recipe",
        json_string(json_is_string(recipe) ? json_string_value(recipe) : cget(cfg, "recipe")));
    if (json_object_get(req, "overrides"))
        json_object_set(o, "overrides", json_object_get(req, "overrides"));
    json_object_set_new(o, "nodeCount",
                        json_integer(json_integer_value(json_object_get(cfg, "nodes"))));
    static const char *const copy[][2] = {
        {"partition", "partition"},
        {"containerImage", "image"},
        {"clusterType", "clusterType"},
        {"time", "time"},
        {"task", "task"},
        {"experimentName", "experiment"},
        {"runId", "runId"},
        {"taskDir", "taskDir"},
        {"logDir", "logDir"},
        {"slurmJobId", "jobId"},
    };
    for (size_t i = 0; i < sizeof(copy) / sizeof(copy[0]); i++)
        if (cget(cfg, copy[i][1]))
            json_object_set_new(o, copy[i][0], json_string(cget(cfg, copy[i][1])));
    /* the run's directory: <experiments>/<name>/<name>_<ts> */
    snprintf(dir, sizeof(dir), "%s", cget(cfg, "taskDir") ? cget(cfg, "taskDir") : "");
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    json_object_set_new(o, "experimentDir", json_string(dir));
    /* the registry model its final checkpoint registers under (docs/models.md) */
    const char *model = cget(json_object_get(cfg, "register"), "model");
    if (model)
        json_object_set_new(o, "model", json_sprintf("projects/%s/locations/%s/models/%s",
                                                     j->project, j->location, model));
    json_object_set_new(o, "state", json_string(j->state));
    json_object_set_new(o, "restartCount", json_integer(j->restart_count));
    /* goodput, steps and early problem detection (docs/observability.md) */
    struct exp_track *tr = malloc(sizeof(*tr));
    double now = (double)mtc_now_ms() / 1000.0;
    if (tr && api_metrics_track(cfg, now, tr) == 0) {
        char msg[256];
        struct exp_monitor mon;
        exp_monitor_from(cfg, &mon);
        int alerts = exp_monitor_check(tr, &mon, now, msg, sizeof(msg));
        json_object_set_new(o, "progress", exp_track_json(tr, alerts, msg));
    }
    free(tr);
    json_object_set_new(o, "createTime", json_string(mtc_time_rfc3339(j->create_ms, t, sizeof(t))));
    json_object_set_new(o, "updateTime", json_string(mtc_time_rfc3339(j->update_ms, t, sizeof(t))));
    return o;
}

/* The cluster's Slurm for a job: its slurm.conf, and on hosts the trainer
 * mtc copied there, the MPI network, and for the job's registration the mtc
 * copied there and mtcd's URL (and CA) as the hosts reach it. */
struct target {
    char conf[PATH_MAX], trainer[PATH_MAX], mpi[64];
    char hosts_mtc[PATH_MAX], hosts_url[512], hosts_ca[PATH_MAX];
};

static int cluster_target(struct api_req *r, struct api_resp *out, struct target *t)
{
    mtc_error_t err = {""};
    char *env = control_env(r->ctl, r->cap[2], &err);
    if (!env)
        return api_error(out, 400, "precondition: cluster %s: %s", r->cap[2], err.text), -1;
    int rc = provider_env_get(env, "SLURM_CONF", t->conf, sizeof(t->conf));
    if (provider_env_get(env, "MTC_TRAINER", t->trainer, sizeof(t->trainer)) < 0) {
        /* the trainer built beside mtcd, as `mtc run` finds it beside mtc */
        char self[PATH_MAX] = "";
        mtc_exe_dir(self, sizeof(self));
        snprintf(t->trainer, sizeof(t->trainer), "%.4000s/mtc-train", self);
        if (access(t->trainer, X_OK) < 0)
            rc = -1, snprintf(err.text, sizeof(err.text), "mtc-train is not installed beside mtcd");
    }
    if (provider_env_get(env, "MTC_MPI_NETWORK", t->mpi, sizeof(t->mpi)) < 0)
        t->mpi[0] = '\0';
    if (provider_env_get(env, "MTC_HOSTS_MTC", t->hosts_mtc, sizeof(t->hosts_mtc)) < 0 ||
        provider_env_get(env, "MTC_HOSTS_URL", t->hosts_url, sizeof(t->hosts_url)) < 0)
        t->hosts_mtc[0] = t->hosts_url[0] = '\0';
    if (provider_env_get(env, "MTC_HOSTS_CA", t->hosts_ca, sizeof(t->hosts_ca)) < 0)
        t->hosts_ca[0] = '\0';
    free(env);
    if (rc < 0)
        return api_error(out, 500, "cluster %s: %s", r->cap[2],
                         *err.text ? err.text : "no slurm.conf in its environment"),
               -1;
    return 0;
}

/* Objects merged member by member (overrides into a recipe); anything else replaced. */
static void merge(json_t *dst, const json_t *src)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)src, k, v)
    {
        json_t *d = json_object_get(dst, k);
        if (json_is_object(d) && json_is_object(v))
            merge(d, v);
        else
            json_object_set(dst, k, v);
    }
}

/* The recipe of a request: a catalog name (never a file: mtcd reads no path a
 * client names) or an object, with the overrides merged in and validated. */
static json_t *request_recipe(const json_t *req, struct api_resp *out)
{
    mtc_error_t err = {""};
    json_t *given = json_object_get(req, "recipe"), *recipe;
    if (json_is_string(given)) {
        recipe = recipe_load_catalog(json_string_value(given), NULL, 0, &err);
        if (!recipe)
            return api_error(out, 400, "recipe: %s", err.text), NULL;
    } else {
        recipe = json_deep_copy(given);
        if (!json_object_get(recipe, "name"))
            json_object_set_new(recipe, "name", json_string("custom"));
    }
    json_t *ov = json_object_get(req, "overrides");
    if (ov)
        merge(recipe, ov);
    if (recipe_validate(recipe, &err) < 0) {
        json_decref(recipe);
        return api_error(out, 400, "%s: %s", ov ? "overrides" : "recipe", err.text), NULL;
    }
    return recipe;
}

/* -i: a squashfs image, and a srun on the cluster that can run it. */
static int check_image(const char *conf, const char *image, char *full, size_t len,
                       struct api_resp *out)
{
    char buf[PATH_MAX];
    if (!realpath(image, buf))
        return api_error(out, 400, "containerImage: %.200s: %s", image, strerror(errno)), -1;
    if (mtc_is_squashfs(buf) != 1)
        return api_error(out, 400,
                         "containerImage: %.200s: not a squashfs image (make one with mtc image "
                         "import)",
                         image),
               -1;
    if (strpbrk(buf, ",:") || strlen(buf) >= len)
        return api_error(out, 400,
                         "containerImage: %.200s: the path cannot be passed to srun (',' or ':' "
                         "in it)",
                         image),
               -1;
    char *o = NULL;
    char *argv[] = {"srun", "--help", NULL};
    slurm_cmd(conf, argv, &o, 10000);
    int ok = o && strstr(o, "--container-image");
    free(o);
    if (!ok)
        return api_error(out, 400,
                         "containerImage: %.200s: this cluster's srun has no --container-image (no "
                         "container plugin in its plugstack.conf)",
                         image),
               -1;
    snprintf(full, len, "%s", buf);
    return 0;
}

/* The job's id: ?trainingJobId=, else job-<hex>. */
static int job_id(struct api_req *r, struct api_resp *out, char *id, size_t len)
{
    const char *q = api_query(r, "trainingJobId");
    if (!q)
        q = api_query(r, "training_job_id");
    if (!q) {
        char hex[9];
        mtc_random_hex(hex, 4);
        snprintf(id, len, "job-%s", hex);
        return 0;
    }
    if (!mtc_name_valid(q, 63))
        return api_error(out, 400, "trainingJobId \"%.64s\": must match [a-z][a-z0-9-]{0,62}", q),
               -1;
    snprintf(id, len, "%s", q);
    return 0;
}

/* --dataset NAME[@VERSION]: the registered dataset's version (in the job's
 * project and location) whose prepared data the run reads, of the recipe's
 * kind, into path; on a cluster on hosts it must lie under the experiment
 * root, the storage every host shares. 0, or -1 with out a 400 naming the
 * field. */
static int resolve_dataset(struct api_req *r, struct api_resp *out, const struct store_cluster *cl,
                           const json_t *recipe, const char *ref, char *path, size_t len)
{
    char name[DATASET_NAME_MAX + 1];
    int version;
    mtc_error_t err = {""};
    struct store_dataset d;
    if (dataset_ref_parse("dataset", ref, name, &version, &err) < 0)
        return api_error(out, 400, "%s", err.text), -1;
    if (store_dataset_get(r->st, r->cap[0], r->cap[1], name, &d) < 0)
        return api_error(out, 400, "dataset: dataset %s not found (mtc data list)", name), -1;
    json_t *ds = api_dataset_json(r->st, &d, 1);
    store_dataset_release(&d);
    const char *kind = recipe_task_kind(json_string_value(json_object_get(recipe, "task")));
    int rc = dataset_pick("dataset", ds, ref, kind, path, len, &err);
    json_decref(ds);
    if (rc < 0)
        return api_error(out, 400, "%s", err.text), -1;
    const char *root = cget(cl->spec, "experimentRoot");
    size_t n = root ? strlen(root) : 0;
    if (cluster_spec_on_hosts(cl->spec) &&
        (!n || strncmp(path, root, n) != 0 || (path[n] != '/' && root[n - 1] != '/')))
        return api_error(out, 400,
                         "dataset: %s's data %.120s is not on the storage cluster %s's hosts "
                         "share (its experimentRoot); start mtcd with --cache-dir under it and "
                         "prepare the dataset again",
                         name, path, cl->id),
               -1;
    return 0;
}

/* One attempt of submit_run's: resolve the run (its timestamp names the
 * run directory), render and submit. 0, or -1 + err (errno EEXIST: that run
 * directory is another run's). */
static int resolve_submit(struct api_req *r, struct recipe_run *run, const json_t *recipe,
                          const json_t *req, const struct target *t, json_t **cfg,
                          mtc_error_t *err)
{
    *cfg = recipe_resolve(recipe, run, err);
    if (!*cfg) {
        errno = EINVAL;
        return -1;
    }
    int fv = 0;
    if (run->from_model && registry_resolve_version(r->cfg->home, r->cap[0], r->cap[1],
                                                    run->from_model, &fv, NULL) == 0)
        json_object_set_new(*cfg, "fromModelVersion",
                            json_sprintf("%.*s@%d", (int)strcspn(run->from_model, "@"),
                                         run->from_model, fv));
    json_t *reg = json_object_get(*cfg, "register");
    json_t *env = json_deep_copy(json_object_get(req, "secretEnv"));
    char tok[80] = "", tok_id[24] = "";
    if (reg) {
        json_object_set_new(reg, "project", json_string(r->cap[0]));
        json_object_set_new(reg, "location", json_string(r->cap[1]));
        if (*t->hosts_url) {
            /* on hosts: mtcd's TCP listener, with a token for this run's model only */
            const char *ck = cget(json_object_get(*cfg, "checkpoint"), "dir");
            if (api_registrar_mint(r->st, r->cap[2], r->cap[0], r->cap[1], cget(reg, "model"),
                                   cget(*cfg, "taskDir"), ck ? ck : "", tok, tok_id, err) < 0) {
                json_decref(env);
                json_decref(*cfg);
                *cfg = NULL;
                errno = EINVAL;
                return -1;
            }
            json_object_set_new(reg, "url", json_string(t->hosts_url));
            if (*t->hosts_ca)
                json_object_set_new(reg, "caCert", json_string(t->hosts_ca));
            if (!env)
                env = json_object();
            json_object_set_new(env, "MTC_REGISTER_TOKEN", json_string(tok));
            explicit_bzero(tok, sizeof(tok));
        } else {
            json_object_set_new(reg, "home", json_string(r->cfg->home));
        }
    }
    json_object_set_new(*cfg, "slurmConf", json_string(t->conf));
    char *script = recipe_render_sbatch(*cfg, err);
    int rc = script ? recipe_submit(*cfg, script, t->conf, env, err) : -1;
    int e = script ? errno : EINVAL;
    free(script);
    if (env && json_object_get(env, "MTC_REGISTER_TOKEN")) /* no copy of it stays here */
        json_object_set_new(env, "MTC_REGISTER_TOKEN", json_string(""));
    json_decref(env);
    if (rc < 0 && *tok_id)
        store_token_revoke(r->st, tok_id);
    if (rc < 0) {
        json_decref(*cfg);
        *cfg = NULL;
        errno = e;
    }
    return rc;
}

/* Resolve, check and submit; *cfg gets the submitted run's config. 0, or -1
 * with out filled. */
static int submit_run(struct api_req *r, struct api_resp *out, const struct store_cluster *cl,
                      const json_t *req, struct recipe_run *run, json_t **cfg)
{
    struct target t;
    if (cluster_target(r, out, &t) < 0)
        return -1;
    json_t *recipe = request_recipe(req, out);
    if (!recipe)
        return -1;
    char image[PATH_MAX], dataset[PATH_MAX];
    if ((run->image && check_image(t.conf, run->image, image, sizeof(image), out) < 0) ||
        (run->dataset &&
         resolve_dataset(r, out, cl, recipe, run->dataset, dataset, sizeof(dataset)) < 0)) {
        json_decref(recipe);
        return -1;
    }
    run->dataset_path = run->dataset ? dataset : NULL;
    const char *root = cget(cl->spec, "experimentRoot");
    if ((!root || !*root) && !r->cfg->home) {
        json_decref(recipe);
        return api_error(out, 500, "mtcd has no home for experiments"), -1;
    }
    run->executor = "slurm";
    run->home = root && *root ? root : r->cfg->home;
    run->trainer = run->image ? "mtc-train" : t.trainer; /* the image's own, from its PATH */
    run->image = run->image ? image : NULL;
    run->mpi_network = *t.mpi ? t.mpi : NULL;
    run->timestamp = (int64_t)time(NULL);
    mtc_error_t err = {""};
    /* fromModel: a registered version's files are the initial weights */
    static __thread char init[PATH_MAX];
    static __thread char mtc[PATH_MAX]; /* run->registrar outlives this call */
    if (run->from_model && (run->from_checkpoint || run->from_experiment)) {
        json_decref(recipe);
        return api_error(out, 400, "fromModel and from%s: give one of them",
                         run->from_checkpoint ? "Checkpoint" : "Experiment"),
               -1;
    }
    if (run->from_model) {
        if (registry_resolve(r->cfg->home, r->cap[0], r->cap[1], run->from_model, -1,
                             control_datasets(r->ctl)->trainer, init, sizeof(init), &err) < 0) {
            json_decref(recipe);
            return api_error(out, errno == ENOENT ? 404 : 400, "fromModel: %s", err.text), -1;
        }
        run->from_checkpoint = init;
    }
    /* the job's last step registers the final checkpoint with mtc next to
     * mtcd, on hosts with the copy mtc put there (over TCP) */
    if (*t.hosts_url && *t.hosts_mtc) {
        snprintf(mtc, sizeof(mtc), "%s", t.hosts_mtc);
        run->registrar = mtc;
    } else if (mtc_exe_dir(mtc, sizeof(mtc) - 8) == 0) {
        strcat(mtc, "/mtc");
        if (access(mtc, X_OK) == 0)
            run->registrar = mtc;
    }
    /* a run directory is claimed, never shared: another run of this
     * experiment in the same second takes the next second's name */
    int rc = -1;
    int64_t base = run->timestamp;
    for (int i = 0; i < 60; i++) {
        run->timestamp = base + i;
        if ((rc = resolve_submit(r, run, recipe, req, &t, cfg, &err)) == 0 || errno != EEXIST)
            break;
    }
    json_decref(recipe);
    if (rc < 0)
        return api_error(out, 400, "%s", err.text), -1;
    return 0;
}

int api_job_create(struct api_req *r, struct api_resp *out)
{
    if (geteuid() == 0 && r->who.role < ROLE_ADMIN)
        return api_error(out, 403,
                         "trainingJobs: mtcd runs as root, so its jobs would run as root: only an "
                         "admin may create one");
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    char id[64];
    json_t *req = NULL, *cfg = NULL;
    struct recipe_run run = {0};
    mtc_error_t err = {""};
    struct store_job j = {0};
    if (schema_enum_parse(&control_state_enum, cl.state, 0) != CONTROL_RUNNING) {
        api_error(out, 400, "precondition: cluster %s is not RUNNING", cl.id);
        goto done;
    }
    if (job_id(r, out, id, sizeof(id)) < 0)
        goto done;
    if (store_job_get(r->st, cl.id, id, &j) == 0) {
        api_error(out, 409, "trainingJob %s already exists in cluster %s", id, cl.id);
        goto done;
    }
    if (!r->body) {
        api_error(out, 400, "request body: a TrainingJob object is required");
        goto done;
    }
    if (recipe_request_parse(r->body, &run, &req, &err) < 0) {
        api_error(out, 400, "%s", err.text);
        goto done;
    }
    if (run.executor && strcmp(run.executor, "slurm") != 0) {
        api_error(out, 400,
                  "executor: %s: a training job runs on the cluster's Slurm (slurm); `mtc run -e "
                  "local` runs on your own machine",
                  run.executor);
        goto done;
    }
    if (submit_run(r, out, &cl, req, &run, &cfg) < 0)
        goto done;
    json_object_del(req, "secretEnv"); /* never stored */
    snprintf(j.id, sizeof(j.id), "%s", id);
    snprintf(j.project, sizeof(j.project), "%s", cl.project);
    snprintf(j.location, sizeof(j.location), "%s", cl.location);
    snprintf(j.cluster_id, sizeof(j.cluster_id), "%s", cl.id);
    snprintf(j.slurm_job, sizeof(j.slurm_job), "%s", cget(cfg, "jobId"));
    snprintf(j.state, sizeof(j.state), "PENDING");
    j.request = req;
    j.config = cfg;
    if (store_job_create(r->st, &j) < 0) {
        int e = errno;
        slurm_job_cancel(cget(cfg, "slurmConf"), j.slurm_job, NULL);
        exp_remove(cfg);
        api_error(out, e == EEXIST ? 409 : 500, "trainingJob %s: %s", id,
                  e == EEXIST ? "already exists" : "cannot be stored; the job was cancelled");
        j.request = j.config = NULL;
        goto done;
    }
    j.create_ms = j.update_ms = mtc_now_ms();
    api_job_refresh(r->st, &j);
    out->body = job_json(&j);
    j.request = j.config = NULL;
done:
    store_job_release(&j);
    json_decref(req);
    json_decref(cfg);
    store_cluster_release(&cl);
    return 0;
}

static int load_job(struct api_req *r, struct api_resp *out, struct store_job *j)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return -1;
    store_cluster_release(&cl);
    if (!mtc_name_valid(r->cap[3], 63))
        return api_error(out, 400, "trainingJob id \"%.64s\": must match [a-z][a-z0-9-]{0,62}",
                         r->cap[3]),
               -1;
    if (store_job_get(r->st, r->cap[2], r->cap[3], j) < 0)
        return api_error(out, errno == ENOENT ? 404 : 500, "trainingJob %s %s", r->cap[3],
                         errno == ENOENT ? "not found" : "cannot be read"),
               -1;
    return 0;
}

int api_job_get(struct api_req *r, struct api_resp *out)
{
    struct store_job j;
    if (load_job(r, out, &j) < 0)
        return 0;
    api_job_refresh(r->st, &j);
    out->body = job_json(&j);
    store_job_release(&j);
    return 0;
}

/* filter=state=RUNNING (or state="RUNNING", state:RUNNING): the state, else NULL. */
static int state_filter(struct api_req *r, struct api_resp *out, char *state, size_t len)
{
    const char *f = api_query(r, "filter");
    *state = '\0';
    if (!f || !*f)
        return 0;
    char v[40] = "";
    if (strncmp(f, "state", 5) == 0 && (f[5] == '=' || f[5] == ':')) {
        const char *p = f + 6 + (f[6] == '=');
        while (*p == ' ')
            p++;
        snprintf(v, sizeof(v), "%.*s", (int)strcspn(p, "\" "), p + (*p == '"'));
        if (*p == '"')
            snprintf(v, sizeof(v), "%.*s", (int)strcspn(p + 1, "\""), p + 1);
    }
    char names[160];
    if (schema_enum_parse(&job_state_enum, v, 0) < 0)
        return api_error(out, 400, "filter \"%.60s\": want state=STATE, one of %s", f,
                         schema_enum_list(&job_state_enum, names, sizeof(names))),
               -1;
    snprintf(state, len, "%s", v);
    return 0;
}

/* A list's page token: the creation sequence number of the last job shown. */
static int page_token_valid(const char *t)
{
    return strlen(t) <= 18 && strspn(t, "0123456789") == strlen(t);
}

int api_job_list(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    store_cluster_release(&cl);
    int size;
    char state[40], token[128];
    if (api_page_args(r, out, page_token_valid, &size, token) < 0 ||
        state_filter(r, out, state, sizeof(state)) < 0)
        return 0;
    int64_t after = *token ? strtoll(token, NULL, 10) : 0;
    /* the states first, so the filter sees what Slurm says now */
    int n = 0;
    struct store_job *all = store_job_list(r->st, r->cap[2], NULL, after, 10000, &n);
    for (int i = 0; i < n; i++) {
        api_job_refresh(r->st, &all[i]);
        store_job_release(&all[i]);
    }
    free(all);
    /* one extra row tells whether another page follows */
    struct store_job *arr =
        store_job_list(r->st, r->cap[2], *state ? state : NULL, after, size + 1, &n);
    json_t *items = json_array();
    for (int i = 0; i < n && i < size; i++)
        json_array_append_new(items, job_json(&arr[i]));
    out->body = json_pack("{s:o}", "trainingJobs", items);
    if (n > size) {
        char tok[32];
        snprintf(tok, sizeof(tok), "%lld", (long long)arr[size - 1].seq);
        json_object_set_new(out->body, "nextPageToken", json_string(tok));
    }
    for (int i = 0; i < n; i++)
        store_job_release(&arr[i]);
    free(arr);
    return 0;
}

int api_job_cancel(struct api_req *r, struct api_resp *out)
{
    struct store_job j;
    if (load_job(r, out, &j) < 0)
        return 0;
    api_job_refresh(r->st, &j);
    if (state_final(j.state)) {
        api_error(out, 400, "precondition: trainingJob %s is already %s", j.id, j.state);
        store_job_release(&j);
        return 0;
    }
    const char *conf = NULL;
    mtc_error_t err = {""};
    if (exp_slurm_conf(j.config, &conf) < 0 || slurm_job_cancel(conf, j.slurm_job, &err) < 0) {
        api_error(out, 500, "trainingJob %s: %s", j.id,
                  *err.text ? err.text : "its cluster's slurm.conf is gone");
        store_job_release(&j);
        return 0;
    }
    /* Slurm says CANCELLED within moments; the reply shows it when it has */
    for (int i = 0; i < 20 && !state_final(j.state); i++) {
        mtc_sleep_ms(100);
        api_job_refresh(r->st, &j);
    }
    out->body = job_json(&j);
    store_job_release(&j);
    return 0;
}

/* :metrics — the run's training curve (the lines of <logDir>/metrics.jsonl
 * after step afterStep, at most 2000), the last 8 KiB of its log and its
 * checkpoint directory's entries: what the console's run page polls. */
int api_job_metrics(struct api_req *r, struct api_resp *out)
{
    const char *after_s = api_query(r, "afterStep");
    long long after = -1;
    if (after_s) {
        char *end;
        after = strtoll(after_s, &end, 10);
        if (!*after_s || *end || after < -1)
            return api_error(out, 400, "afterStep \"%.20s\": want a step number", after_s);
    }
    struct store_job j;
    if (load_job(r, out, &j) < 0)
        return 0;
    api_job_refresh(r->st, &j);
    json_t *points = json_array(), *ckpts = json_array();
    char path[PATH_MAX + 32];
    const char *logdir = cget(j.config, "logDir");
    FILE *f = NULL;
    if (logdir && snprintf(path, sizeof(path), "%s/metrics.jsonl", logdir) < (int)sizeof(path))
        f = fopen(path, "re");
    char line[4096];
    while (f && fgets(line, sizeof(line), f) && json_array_size(points) < 2000) {
        json_t *o = json_loads(line, 0, NULL);
        json_int_t step = json_integer_value(json_object_get(o, "step"));
        if (o && step > after)
            json_array_append(points, o);
        json_decref(o);
    }
    if (f)
        fclose(f);
    char *tail = NULL;
    if (j.config && exp_log_path(j.config, path, sizeof(path))) {
        size_t len = 0;
        char *text = mtc_read_file(path, &len);
        size_t from = len > 8192 ? len - 8192 : 0;
        tail = text ? strdup(text + from) : NULL;
        free(text);
    }
    const char *ckdir = cget(json_object_get(j.config, "checkpoint"), "dir");
    DIR *d = ckdir ? opendir(ckdir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) && json_array_size(ckpts) < 200)
        if (e->d_name[0] != '.')
            json_array_append_new(ckpts, json_string(e->d_name));
    if (d)
        closedir(d);
    out->body =
        json_pack("{s:s, s:i, s:o, s:s, s:o}", "state", j.state, "restartCount", j.restart_count,
                  "points", points, "logTail", tail ? tail : "", "checkpoints", ckpts);
    free(tail);
    store_job_release(&j);
    return 0;
}
