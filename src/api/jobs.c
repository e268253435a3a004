/* jobs: the trainingJobs resource of a cluster — create (the body is
 * recipes' request table; jobs_submit checks and submits it), get, list
 * with pages and a state filter, :cancel, :metrics and :injectFault. The handlers parse
 * and answer; the jobs module (src/jobs) submits, follows and cancels. */
#include "api/internal.h"
#include "experiment/experiment.h"
#include "jobs/jobs.h"
#include "recipes/recipes.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Whether the caller may read a job's log and metrics and cancel it: an
 * admin, for any job; a token bound to a user, for the jobs that run as that
 * user; an unbound token, for the jobs that run as mtcd's own user (no
 * person's: an admin's, or any job of an mtcd that is not root), never a
 * user's (docs/api.md, "Roles"). */
static int job_owner(const struct api_req *r, const struct store_job *j)
{
    char owner[33];
    return api_owner_sees(&r->who, jobs_owner(j->config, owner));
}

/* 403 naming the job and whose it is; returns -1. */
static int not_owner(struct api_req *r, struct api_resp *out, const struct store_job *j,
                     const char *what)
{
    struct mtc_user as;
    if (exp_run_as(j->config, &as) == 0)
        return api_error(out, 403,
                         "trainingJob %s runs as %s: only a token bound to %s or an admin may %s",
                         j->id, as.name, as.name, what),
               -1;
    return api_error(out, 403,
                     "trainingJob %s runs as mtcd's own user, not as %s: a token bound to a user "
                     "may %s only that user's jobs",
                     j->id, r->who.user, what),
           -1;
}

/* The trainingJob resource; full: with its progress (read from the run's
 * metrics and log), for the job's owner only. */
static json_t *job_json(const struct store_job *j, int full)
{
    char name[400];
    snprintf(name, sizeof(name),
             "projects/%s/locations/%s/modelDevelopmentClusters/%s/trainingJobs/%s", j->project,
             j->location, j->cluster_id, j->id);
    struct exp_run run; /* its config.json's fields */
    exp_run_of(j->config, &run);
    const json_t *req = j->request;
    json_t *o = json_pack("{s:s, s:s}", "name", name, "id", j->id);
    json_t *recipe = json_object_get(req, "recipe");
    json_object_set_new(o, "recipe", json_string(json_is_string(recipe) ? json_string_value(recipe)
                                                                         : run.recipe));
    if (json_object_get(req, "overrides"))
        json_object_set(o, "overrides", json_object_get(req, "overrides"));
    json_object_set_new(o, "nodeCount", json_integer(run.nodes));
    const struct {
        const char *field, *value;
    } copy[] = {
        {"partition", run.partition},   {"containerImage", run.image},
        {"clusterType", run.cluster_type}, {"time", run.time},
        {"task", run.task},             {"experimentName", run.experiment},
        {"runId", run.run_id},          {"taskDir", run.task_dir},
        {"logDir", run.log_dir},        {"slurmJobId", run.job_id},
    };
    for (size_t i = 0; i < sizeof(copy) / sizeof(copy[0]); i++)
        if (copy[i].value)
            json_object_set_new(o, copy[i].field, json_string(copy[i].value));
    json_object_set_new(o, "experimentDir", json_string(run.run_dir));
    if (run.has_user) /* whom it runs as, when mtcd acts for a user */
        json_object_set_new(o, "user", json_string(run.user.name));
    /* the registry model its final checkpoint registers under (docs/models.md) */
    if (run.reg.model)
        json_object_set_new(o, "model", json_sprintf("projects/%s/locations/%s/models/%s",
                                                     j->project, j->location, run.reg.model));
    json_object_set_new(o, "state", json_string(j->state));
    json_object_set_new(o, "restartCount", json_integer(j->restart_count));
    /* goodput, steps and early problem detection (docs/observability.md) */
    struct exp_track *tr = full ? malloc(sizeof(*tr)) : NULL;
    double now = (double)mtc_now_ms() / 1000.0;
    if (tr && jobs_track(j->config, now, tr) == 0) {
        char msg[256];
        int alerts = exp_monitor_check(tr, &run.monitor, now, msg, sizeof(msg));
        json_object_set_new(o, "progress", exp_track_json(tr, alerts, msg));
    }
    free(tr);
    char t[40];
    json_object_set_new(o, "createTime", json_string(mtc_time_rfc3339(j->create_ms, t, sizeof(t))));
    json_object_set_new(o, "updateTime", json_string(mtc_time_rfc3339(j->update_ms, t, sizeof(t))));
    return o;
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

/* Whom a job runs as: the token's Unix user, or the one an admin names
 * (run->user); *as set when mtcd (as root) acts for that user, else left
 * NULL (mtcd's own user). Jobs never run as root for a non-admin. 0, or -1
 * with out filled (403 not allowed, 400 no such user). */
static int run_as(struct api_req *r, struct api_resp *out, const struct recipe_run *run,
                  struct mtc_user *u, const struct mtc_user **as)
{
    const char *bound = *r->who.user ? r->who.user : NULL, *name = run->user ? run->user : bound;
    *as = NULL;
    if (bound && run->user && strcmp(bound, run->user) != 0)
        return api_error(out, 403, "user: this token's jobs run as %s, not %.40s", bound,
                         run->user),
               -1;
    if (!bound && run->user && r->who.role < ROLE_ADMIN)
        return api_error(out, 403, "user: only an admin may choose whom a job runs as"), -1;
    if (!name) {
        if (geteuid() == 0 && r->who.role < ROLE_ADMIN)
            return api_error(out, 403,
                             "trainingJobs: mtcd runs as root, so its jobs would run as root: "
                             "only an admin may create one, or a token bound to a Unix user "
                             "(mtc token create --user)"),
                   -1;
        return 0;
    }
    mtc_error_t err = {""};
    if (mtc_user_lookup(name, u, &err) < 0)
        return api_error(out, 400, "%s", err.text), -1;
    if (u->uid == 0)
        return api_error(out, 400,
                         "user %s: uid 0: a job runs as root only when an admin names no user",
                         name),
               -1;
    if (geteuid() == 0)
        *as = u;
    else if (u->uid != geteuid())
        return api_error(out, 400,
                         "user %s: mtcd does not run as root, so its jobs run as its own user "
                         "(uid %u) only",
                         name, (unsigned)geteuid()),
               -1;
    return 0;
}

int api_job_create(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    char id[64];
    json_t *req = NULL, *cfg = NULL;
    struct recipe_run run = {0};
    struct jobs_paths paths; /* what run points into */
    mtc_error_t err = {""};
    struct store_job j = {0};
    if (schema_enum_parse(&cluster_state_enum, cl.state, 0) != CLUSTER_STATE_RUNNING) {
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
    struct mtc_user user;
    const struct mtc_user *as = NULL;
    if (run_as(r, out, &run, &user, &as) < 0)
        goto done;
    if (run.executor && strcmp(run.executor, "slurm") != 0) {
        api_error(out, 400,
                  "executor: %s: a training job runs on the cluster's Slurm (slurm); `mtc run -e "
                  "local` runs on your own machine",
                  run.executor);
        goto done;
    }
    struct jobs_ops ops;
    control_jobs_ops(r->ctl, &ops);
    struct jobs_request q = {.st = r->st,
                             .ops = &ops,
                             .home = r->cfg->home,
                             .cl = &cl,
                             .req = req,
                             .as = as};
    if (jobs_submit(&q, &run, &paths, &cfg, &err) < 0) {
        api_error(out, errno == EINVAL ? 400 : errno == ENOENT ? 404 : 500, "%s", err.text);
        goto done;
    }
    json_object_del(req, "secretEnv"); /* never stored */
    snprintf(j.id, sizeof(j.id), "%s", id);
    snprintf(j.project, sizeof(j.project), "%s", cl.project);
    snprintf(j.location, sizeof(j.location), "%s", cl.location);
    snprintf(j.cluster_id, sizeof(j.cluster_id), "%s", cl.id);
    snprintf(j.slurm_job, sizeof(j.slurm_job), "%s", exp_job_id(cfg));
    snprintf(j.state, sizeof(j.state), "PENDING");
    j.request = req;
    j.config = cfg;
    if (store_job_create(r->st, &j) < 0) {
        int e = errno;
        slurm_job_cancel(exp_recorded_conf(cfg), j.slurm_job, NULL);
        struct mtc_fsid as;
        jobs_fs_enter(cfg, &as);
        exp_remove(cfg);
        mtc_fsid_leave(&as);
        api_error(out, e == EEXIST ? 409 : 500, "trainingJob %s: %s", id,
                  e == EEXIST ? "already exists" : "cannot be stored; the job was cancelled");
        j.request = j.config = NULL;
        goto done;
    }
    j.create_ms = j.update_ms = mtc_now_ms();
    /* PENDING with the id sbatch printed: the job monitor's next pass (or a
     * GET) asks Slurm what became of it */
    out->body = job_json(&j, 1);
    j.request = j.config = NULL;
done:
    store_job_release(&j);
    json_decref(req);
    json_decref(cfg);
    store_cluster_release(&cl);
    return 0;
}

/* The job the path names and its cluster (the caller releases both), or -1
 * with out filled (400 bad id, 404 no such job in that cluster). */
static int load_cluster_job(struct api_req *r, struct api_resp *out, struct store_cluster *cl,
                            struct store_job *j)
{
    if (api_load_cluster(r, out, cl) < 0)
        return -1;
    if (!mtc_name_valid(r->cap[3], 63)) {
        store_cluster_release(cl);
        return api_error(out, 400, "trainingJob id \"%.64s\": must match [a-z][a-z0-9-]{0,62}",
                         r->cap[3]),
               -1;
    }
    if (store_job_get(r->st, r->cap[2], r->cap[3], j) < 0) {
        store_cluster_release(cl);
        return api_error(out, errno == ENOENT ? 404 : 500, "trainingJob %s %s", r->cap[3],
                         errno == ENOENT ? "not found in this cluster" : "cannot be read"),
               -1;
    }
    return 0;
}

static int load_job(struct api_req *r, struct api_resp *out, struct store_job *j)
{
    struct store_cluster cl;
    if (load_cluster_job(r, out, &cl, j) < 0)
        return -1;
    store_cluster_release(&cl);
    return 0;
}

int api_job_get(struct api_req *r, struct api_resp *out)
{
    struct store_job j;
    if (load_job(r, out, &j) < 0)
        return 0;
    jobs_refresh(r->st, &j, NULL);
    out->body = job_json(&j, job_owner(r, &j)); /* another's: without its progress */
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
    if (schema_enum_parse(&jobs_state_enum, v, 0) < 0)
        return api_error(out, 400, "filter \"%.60s\": want state=STATE, one of %s", f,
                         schema_enum_list(&jobs_state_enum, names, sizeof(names))),
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
    json_t *pass = json_object(); /* one Slurm query for them all */
    for (int i = 0; i < n; i++) {
        jobs_refresh(r->st, &all[i], pass);
        store_job_release(&all[i]);
    }
    json_decref(pass);
    free(all);
    /* one extra row tells whether another page follows */
    struct store_job *arr =
        store_job_list(r->st, r->cap[2], *state ? state : NULL, after, size + 1, &n);
    json_t *items = json_array();
    for (int i = 0; i < n && i < size; i++)
        json_array_append_new(items, job_json(&arr[i], job_owner(r, &arr[i])));
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
    mtc_error_t err = {""};
    if (!job_owner(r, &j))
        not_owner(r, out, &j, "cancel it");
    else if (jobs_cancel(r->st, &j, &err) < 0)
        api_error(out, errno == EALREADY ? 400 : 500, "%s%s", errno == EALREADY ? "precondition: " : "",
                  err.text);
    else
        out->body = job_json(&j, 1);
    store_job_release(&j);
    return 0;
}

/* :injectFault (admin: root signals the job's processes, or a node is
 * rebooted) — one fault into the running job, `mtc chaos` (jobs/chaos.c). */
int api_job_inject_fault(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    struct store_job j;
    if (load_cluster_job(r, out, &cl, &j) < 0)
        return 0;
    int http = 500;
    mtc_error_t err = {""};
    struct jobs_ops ops;
    control_jobs_ops(r->ctl, &ops);
    json_t *res = jobs_inject_fault(r->st, &ops, &cl, &j, r->body, &http, &err);
    if (res)
        out->body = res;
    else
        api_error(out, http, "%s", err.text);
    store_job_release(&j);
    store_cluster_release(&cl);
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
    if (!job_owner(r, &j)) {
        not_owner(r, out, &j, "read its log and metrics");
        store_job_release(&j);
        return 0;
    }
    jobs_refresh(r->st, &j, NULL);
    /* what the job wrote, read as its user (runas.c), never from /proc */
    struct mtc_fsid as;
    jobs_fs_enter(j.config, &as);
    json_t *points = exp_curve(j.config, after, 2000), *tail = exp_log_tail(j.config),
           *ckpts = exp_checkpoints(j.config, 200);
    mtc_fsid_leave(&as);
    out->body =
        json_pack("{s:s, s:i, s:o, s:o, s:o}", "state", j.state, "restartCount", j.restart_count,
                  "points", points, "logTail", tail, "checkpoints", ckpts);
    store_job_release(&j);
    return 0;
}
