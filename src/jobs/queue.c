/* queue: what the job monitor last saw of each cluster's Slurm — its jobs
 * waiting (by account and pending reason) and running (by account), from
 * the one `scontrol show job` a pass asks anyway, and its accounts' usage
 * (sacct, at most once a minute) — kept in memory for /metrics, which then
 * formats without asking Slurm. */
#include "jobs/jobs.h"
#include "cluster/cluster.h"
#include "provider/provider.h"
#include "slurm/slurm.h"
#include "store/store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* {cluster id: {"created": ms, "time": ms, "pending": {"account\nreason": n},
 *               "running": {account: n}, "usage": {account: [nodeH, gpuH]}?,
 *               "usageTime": ms}} */
static json_t *views;
static pthread_mutex_t views_lock = PTHREAD_MUTEX_INITIALIZER;

/* obj[key] += 1 */
static void tally(json_t *obj, const char *key)
{
    json_object_set_new(obj, key, json_integer(json_integer_value(json_object_get(obj, key)) + 1));
}

/* The waiting and running tallies of states (slurm_job_states' answer),
 * and the ids of the running jobs (space-separated) into ids. */
static void tallies(const json_t *states, json_t *pending, json_t *running, json_t **ids)
{
    char *list = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&list, &len);
    const char *id;
    json_t *j;
    json_object_foreach((json_t *)states, id, j)
    {
        const char *st = json_string_value(json_object_get(j, "state"));
        const char *acct = json_string_value(json_object_get(j, "account"));
        const char *why = json_string_value(json_object_get(j, "reason"));
        char key[256];
        snprintf(key, sizeof(key), "%s\n%s", acct ? acct : "", why && *why ? why : "None");
        if (st && strcmp(st, "PENDING") == 0)
            tally(pending, key);
        else if (st && strcmp(st, "RUNNING") == 0) {
            tally(running, acct ? acct : "");
            if (f)
                fprintf(f, "%s ", id);
        }
    }
    if (f)
        fclose(f);
    *ids = json_string(list ? list : "");
    free(list);
}

/* slurm_usage's rows per account and user summed per account, since since_ms. */
static json_t *usage_by_account(const char *conf, int64_t since_ms, mtc_error_t *err)
{
    time_t t = (time_t)(since_ms / 1000);
    struct tm tm;
    char since[32];
    localtime_r(&t, &tm); /* sacct -S reads local time */
    strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%S", &tm);
    json_t *rows = slurm_usage(conf, since, err);
    if (!rows)
        return NULL;
    json_t *by = json_object(), *row;
    size_t i;
    json_array_foreach(rows, i, row)
    {
        const char *a = json_string_value(json_object_get(row, "account"));
        json_t *sum = json_object_get(by, a ? a : "");
        if (!sum)
            json_object_set_new(by, a ? a : "", sum = json_pack("[f,f]", 0.0, 0.0));
        for (int k = 0; k < 2; k++)
            json_array_set_new(sum, k,
                               json_real(json_real_value(json_array_get(sum, k)) +
                                         json_number_value(json_object_get(
                                             row, k == 0 ? "nodeHours" : "gpuHours"))));
    }
    json_decref(rows);
    return by;
}

static int accounting_on(const json_t *spec)
{
    const json_t *a = json_object_get(
        json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec"), "accounting");
    return json_is_true(json_object_get(a, "enabled"));
}

/* The view of cluster id (created at created_ms), borrowed: the caller
 * holds views_lock. A new one when there is none or it was another
 * cluster's of the same id. */
static json_t *view_of(const char *id, int64_t created_ms)
{
    if (!views)
        views = json_object();
    json_t *v = json_object_get(views, id);
    if (!v || json_integer_value(json_object_get(v, "created")) != created_ms) {
        v = json_pack("{s:I}", "created", (json_int_t)created_ms);
        json_object_set_new(views, id, v);
    }
    return v;
}

/* Look at cluster id's Slurm: its jobs' states into pass (by slurm.conf,
 * as jobs_refresh_state reads them) and its view. */
static void look(struct store *st, const struct jobs_ops *ops, const char *id, json_t *pass)
{
    struct store_cluster cl;
    if (store_cluster_head(st, id, &cl) < 0)
        return;
    int s = schema_enum_parse(&cluster_state_enum, cl.state, 0);
    int64_t created = cl.create_ms;
    store_cluster_release(&cl);
    if (s != CLUSTER_STATE_RUNNING && s != CLUSTER_STATE_UPDATING)
        return; /* no slurmctld to ask */
    char conf[PATH_MAX];
    mtc_error_t err = {""};
    char *env = provider_env(ops->prov, id, &err); /* a simulated cluster has none */
    int rc = env ? provider_env_get(env, "SLURM_CONF", conf, sizeof(conf)) : -1;
    free(env);
    if (rc < 0)
        return;
    json_t *states = slurm_job_states(conf, NULL, &err);
    if (!states)
        log_msg(LOG_WARNING, "job monitor: cluster %s: %s", id, err.text);
    if (!json_object_get(pass, conf))
        json_object_set(pass, conf, states ? states : json_null());
    json_t *pending = json_object(), *running = json_object(), *ids = NULL;
    tallies(states, pending, running, &ids);
    int64_t now = mtc_now_ms();
    pthread_mutex_lock(&views_lock);
    json_t *v = view_of(id, created);
    json_int_t usage_at = json_integer_value(json_object_get(v, "usageTime"));
    int moved = !json_equal(ids, json_object_get(v, "usageRunning"));
    json_object_set_new(v, "time", json_integer(now));
    json_object_set_new(v, "pending", pending);
    json_object_set_new(v, "running", running);
    pthread_mutex_unlock(&views_lock);
    json_decref(states);
    /* usage sums every job since the cluster's creation: once a minute (a
     * failure too: an accounting database that is away is not asked each
     * pass), sooner when a job started or ended since */
    if ((now - usage_at < JOBS_USAGE_MS && !(moved && now - usage_at >= JOBS_USAGE_MOVED_MS)) ||
        store_cluster_get(st, id, &cl) < 0) {
        json_decref(ids);
        return;
    }
    int acct = accounting_on(cl.spec);
    store_cluster_release(&cl);
    json_t *u = acct ? usage_by_account(conf, created, &err) : NULL;
    if (acct && !u)
        log_msg(LOG_WARNING, "job monitor: usage of cluster %s: %s", id, err.text);
    pthread_mutex_lock(&views_lock);
    v = view_of(id, created);
    json_object_set_new(v, "usageTime", json_integer(now));
    json_object_set_new(v, "usageRunning", ids);
    if (u)
        json_object_set_new(v, "usage", u);
    else
        json_object_del(v, "usage");
    pthread_mutex_unlock(&views_lock);
}

void jobs_queue_look(struct store *st, const struct jobs_ops *ops, json_t *pass)
{
    json_t *ids = store_cluster_ids(st);
    size_t i;
    json_t *id;
    json_array_foreach(ids, i, id) look(st, ops, json_string_value(id), pass);
    pthread_mutex_lock(&views_lock); /* deleted clusters' views go */
    const char *k;
    json_t *v, *tmp;
    json_object_foreach_safe(views, tmp, k, v)
    {
        int found = 0;
        json_array_foreach(ids, i, id) found |= strcmp(json_string_value(id), k) == 0;
        if (!found)
            json_object_del(views, k);
    }
    pthread_mutex_unlock(&views_lock);
    json_decref(ids);
}

json_t *jobs_queue_view(const char *cluster, int64_t created_ms)
{
    pthread_mutex_lock(&views_lock);
    json_t *v = json_object_get(views, cluster);
    json_t *copy = v && json_integer_value(json_object_get(v, "created")) == created_ms &&
                           json_object_get(v, "time")
                       ? json_deep_copy(v)
                       : NULL;
    pthread_mutex_unlock(&views_lock);
    return copy;
}
