/* metrics: /healthz (ok, mtc's version and the store's schema version) and mtcd's
 * Prometheus /metrics (text exposition format 0.0.4, names prefixed mtc_):
 * clusters and nodes by state, health check results, node remediation,
 * operations, API requests and their latency by route, each cluster's Slurm
 * jobs waiting (by account and reason) and running (by account) and its
 * accounts' usage (node- and GPU-hours from sacct), and per running
 * training run its step, loss, tokens/s, MFU, restarts, goodput and
 * early-problem alerts (experiment/detect.c). A scrape asks Slurm nothing: the
 * queues, usage and training jobs' states are what the job monitor's last
 * pass saw (jobs/queue.c, jobs/monitor.c), the nodes what the supervisor
 * stored. Runs are followed by jobs_track (jobs/watch.c), one exp_track per
 * run kept between scrapes, so a scrape reads only what the run's
 * metrics.jsonl and log gained since the last. */
#include "api/internal.h"
#include "backup/backup.h"
#include "control/reports.h"
#include "cluster/cluster.h"
#include "endpoint/endpoint.h"
#include "experiment/experiment.h"
#include "jobs/jobs.h"
#include "recipes/recipes.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- API requests: counts by route and status class, latency histogram ---- */

static const double bucket_le[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5};
#define NBUCKETS (sizeof(bucket_le) / sizeof(bucket_le[0]))
#define MAX_ROUTES 128
static struct route_stat {
    const struct api_route *route; /* set by its first request */
    unsigned long long code[6];    /* by status / 100 */
    unsigned long long bucket[NBUCKETS + 1];
    double sum;
} route_stats[MAX_ROUTES];
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;

void api_metrics_observe(size_t i, const struct api_route *route, int status, double seconds)
{
    if (i >= MAX_ROUTES)
        return;
    pthread_mutex_lock(&stats_lock);
    struct route_stat *s = &route_stats[i];
    s->route = route;
    s->code[status / 100 < 6 && status >= 0 ? status / 100 : 5]++;
    size_t b = 0;
    while (b < NBUCKETS && seconds > bucket_le[b])
        b++;
    s->bucket[b]++;
    s->sum += seconds;
    pthread_mutex_unlock(&stats_lock);
}

/* ---- the text ---- */

struct text {
    char *buf;
    size_t len, cap;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n) * 2;
        char *nb = realloc(t->buf, cap);
        if (!nb)
            return;
        t->buf = nb, t->cap = cap;
    }
}

/* A label value escaped as the format wants (\\, \", \n) into a static-size buffer. */
static const char *esc(const char *s, char *buf, size_t len)
{
    size_t o = 0;
    for (; s && *s && o + 3 < len; s++) {
        if (*s == '\\' || *s == '"')
            buf[o++] = '\\', buf[o++] = *s;
        else if (*s == '\n')
            buf[o++] = '\\', buf[o++] = 'n';
        else
            buf[o++] = *s;
    }
    buf[o] = '\0';
    return buf;
}

static void head(struct text *t, const char *name, const char *type, const char *help)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A sample value: Prometheus spells the non-finite ones NaN, +Inf, -Inf. */
static const char *num(double v, char *buf, size_t len)
{
    if (isnan(v))
        return "NaN";
    if (isinf(v))
        return v > 0 ? "+Inf" : "-Inf";
    snprintf(buf, len, "%.17g", v);
    return buf;
}

/* ---- clusters, nodes, health, remediation, operations ---- */

/* One row of store_scrape_*'s into the text: the metric's line for a
 * cluster (its label value escaped). */
struct row_ctx {
    struct text *t;
    const char *cluster;
};

static void node_row(void *arg, const char *const *col)
{
    struct row_ctx *x = arg;
    char n[160], p[160], s[64];
    put(x->t, "mtc_nodes{cluster=\"%s\",node=\"%s\",pool=\"%s\",state=\"%s\"} 1\n", x->cluster,
        esc(col[0], n, sizeof(n)), esc(col[1], p, sizeof(p)),
        esc(api_node_state(col[2], col[3]), s, sizeof(s)));
}

/* Each node's mtc_health_check lines, kept between scrapes with the time of
 * the report they were made from: {cluster: {node: [time_ms, "lines"]}}. A
 * scrape makes again only the lines of the nodes that reported since the
 * last, so its cost follows the reports, not the cluster's size. */
static json_t *check_lines;
static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER;

/* One scrape's pass over a cluster's health rows. */
struct check_ctx {
    const char *cluster;    /* escaped */
    json_t *old, *now;      /* {node: [time_ms, lines]}: the last scrape's, this one's */
    json_t *order;          /* nodes, in the store's order */
    json_t *fresh;          /* {node: true}: the nodes whose lines are made again */
    int64_t since;          /* the oldest report not made into lines yet; INT64_MAX none */
    char node[160];         /* checks: the node whose lines are being made */
    int64_t node_ms;
    struct text lines;
};

static void report_time(void *arg, const char *const *col)
{
    struct check_ctx *x = arg;
    int64_t ms = strtoll(col[1], NULL, 10);
    json_t *had = json_object_get(x->old, col[0]);
    json_array_append_new(x->order, json_string(col[0]));
    if (had && json_integer_value(json_array_get(had, 0)) == ms) {
        json_object_set(x->now, col[0], had);
        return;
    }
    /* none until its results are read (a report without results has none) */
    json_object_set_new(x->now, col[0], json_pack("[I, s]", (json_int_t)ms, ""));
    json_object_set_new(x->fresh, col[0], json_true());
    if (ms < x->since)
        x->since = ms;
}

/* The lines made for x->node go into x->now. */
static void node_done(struct check_ctx *x)
{
    if (*x->node)
        json_object_set_new(x->now, x->node,
                            json_pack("[I, s%]", (json_int_t)x->node_ms, x->lines.buf, x->lines.len));
    x->lines.len = 0;
    *x->node = '\0';
}

static void check_row(void *arg, const char *const *col)
{
    struct check_ctx *x = arg;
    int64_t ms = strtoll(col[1], NULL, 10);
    if (strcmp(col[0], x->node) != 0) {
        node_done(x);
        if (!json_object_get(x->fresh, col[0]))
            return; /* its lines are of its latest report already (or of the next scrape) */
        snprintf(x->node, sizeof(x->node), "%s", col[0]);
        x->node_ms = ms;
    }
    char n[160], k[160], st[32];
    put(&x->lines, "mtc_health_check{cluster=\"%s\",node=\"%s\",check=\"%s\",status=\"%s\"} 1\n",
        x->cluster, esc(col[0], n, sizeof(n)), esc(col[2], k, sizeof(k)),
        esc(col[3], st, sizeof(st)));
}

/* mtc_health_check of every cluster in ids, from check_lines and the
 * reports made since. */
static void checks(struct api_req *r, struct text *t, const json_t *ids)
{
    pthread_mutex_lock(&check_lock); /* one scrape at a time makes lines */
    json_t *all = json_object();
    size_t i, k;
    json_t *id, *node;
    char c[64];
    json_array_foreach(ids, i, id)
    {
        const char *cid = json_string_value(id);
        struct check_ctx x = {.cluster = esc(cid, c, sizeof(c)),
                              .old = json_object_get(check_lines, cid),
                              .now = json_object(),
                              .order = json_array(),
                              .fresh = json_object(),
                              .since = INT64_MAX,
                              .lines = {malloc(4096), 0, 4096}};
        if (!x.lines.buf)
            x.lines.cap = 0;
        if (store_scrape_report_times(r->st, cid, report_time, &x) == 0 && x.since != INT64_MAX) {
            store_scrape_checks(r->st, cid, x.since, check_row, &x);
            node_done(&x);
        }
        free(x.lines.buf);
        json_decref(x.fresh);
        json_array_foreach(x.order, k, node)
        {
            json_t *have = json_array_get(json_object_get(x.now, json_string_value(node)), 1);
            if (have)
                put(t, "%s", json_string_value(have));
        }
        json_decref(x.order);
        json_object_set_new(all, cid, x.now); /* a node or cluster gone is dropped */
    }
    json_decref(check_lines);
    check_lines = all;
    pthread_mutex_unlock(&check_lock);
}

static void remediation_row(void *arg, const char *const *col)
{
    struct row_ctx *x = arg;
    char n[160], s[64];
    put(x->t, "mtc_node_remediation{cluster=\"%s\",node=\"%s\",state=\"%s\"} 1\n", x->cluster,
        esc(col[0], n, sizeof(n)), esc(col[1], s, sizeof(s)));
}

/* The rows of every cluster in ids, by one of store_scrape_*. */
static void cluster_rows(struct api_req *r, struct text *t, const json_t *ids,
                         int (*scrape)(struct store *, const char *, store_row_fn, void *),
                         store_row_fn fn)
{
    size_t i;
    json_t *id;
    char c[64];
    json_array_foreach(ids, i, id)
    {
        struct row_ctx x = {t, esc(json_string_value(id), c, sizeof(c))};
        scrape(r->st, json_string_value(id), fn, &x);
    }
}

/* Clusters with Slurm's backup controller: each slurmctld, whether it
 * answered supervision's last ping (family 0) and whether it is in control
 * (family 1), each family's samples together as the text format wants. */
static const char *const ctl_family[][2] = {
    {"mtc_slurmctld_up",
     "Slurm controllers of clusters with a backup: 1 when it answered supervision's last ping."},
    {"mtc_slurmctld_in_control",
     "Slurm controllers of clusters with a backup: 1 for the one in control."}};

/* Family f's two samples (primary, backup) of one cluster's controllers. */
static void controller_rows(struct text *t, int f, const char *cluster, const json_t *ctl)
{
    char c[64];
    for (int k = 0; k < 2; k++) {
        const char *role = k ? "backup" : "primary";
        int v = f ? !strcmp(json_string_value(json_object_get(ctl, "inControl")), role)
                  : json_is_true(json_object_get(json_object_get(ctl, role), "up"));
        put(t, "%s{cluster=\"%s\",controller=\"%s\"} %d\n", ctl_family[f][0],
            esc(cluster, c, sizeof(c)), role, v);
    }
}

static void controllers(struct api_req *r, struct text *t, json_t *ids)
{
    size_t i;
    json_t *id, *seen = json_object();
    json_array_foreach(ids, i, id)
    {
        json_t *ctl = r->prov ? provider_controller(r->prov, json_string_value(id)) : NULL;
        if (json_object_get(ctl, "inControl"))
            json_object_set(seen, json_string_value(id), ctl);
        json_decref(ctl);
    }
    for (int f = 0; f < 2 && json_object_size(seen); f++) {
        head(t, ctl_family[f][0], "gauge", ctl_family[f][1]);
        const char *cid;
        json_t *ctl;
        json_object_foreach(seen, cid, ctl) controller_rows(t, f, cid, ctl);
    }
    json_decref(seen);
}

/* Nodes and health straight from the store's rows (store_scrape_*): what
 * the supervisor and the agents' reports keep current, no JSON made. */
static void clusters(struct api_req *r, struct text *t)
{
    json_t *ids = store_cluster_ids(r->st);
    size_t i;
    json_t *id;
    int count[CLUSTER_STATE_ERROR + 1] = {0};
    json_array_foreach(ids, i, id)
    {
        struct store_cluster cl;
        if (store_cluster_head(r->st, json_string_value(id), &cl) < 0)
            continue;
        int k = schema_enum_parse(&cluster_state_enum, cl.state, 0);
        if (k >= 0)
            count[k]++;
        store_cluster_release(&cl);
    }
    head(t, "mtc_clusters", "gauge", "Clusters by state.");
    for (int k = 0; k <= CLUSTER_STATE_ERROR; k++)
        put(t, "mtc_clusters{state=\"%s\"} %d\n", schema_enum_name(&cluster_state_enum, k),
            count[k]);
    head(t, "mtc_nodes", "gauge", "Nodes by cluster, pool and state (1 per node).");
    cluster_rows(r, t, ids, store_scrape_nodes, node_row);
    controllers(r, t, ids);
    head(t, "mtc_health_check", "gauge",
         "Latest health check results by cluster, node, check and status (1 per result).");
    checks(r, t, ids);
    head(t, "mtc_node_remediation", "gauge",
         "Nodes with a remediation queued, under way or failed, by state (QUEUED, PENDING, REMEDIATING, FAILED).");
    cluster_rows(r, t, ids, store_scrape_remediations, remediation_row);
    json_decref(ids);

    char c[64], k[160], s[64];
    json_t *row;
    head(t, "mtc_remediation_actions_total", "counter", "Remediation actions taken, by cluster and action.");
    json_t *tal = store_remediation_tally(r->st);
    json_array_foreach(tal, i, row)
    put(t, "mtc_remediation_actions_total{cluster=\"%s\",action=\"%s\"} %lld\n",
        esc(json_string_value(json_array_get(row, 0)), c, sizeof(c)),
        esc(json_string_value(json_array_get(row, 1)), k, sizeof(k)),
        (long long)json_integer_value(json_array_get(row, 2)));
    json_decref(tal);
    head(t, "mtc_health_reports_total", "counter",
         "Agents' health reports stored since mtcd started, by cluster.");
    json_t *counts = control_report_counts();
    const char *cid;
    json_t *cv;
    json_object_foreach(counts, cid, cv)
    put(t, "mtc_health_reports_total{cluster=\"%s\"} %lld\n", esc(cid, c, sizeof(c)),
        (long long)json_integer_value(cv));
    json_decref(counts);
    head(t, "mtc_job_monitor_passes_total", "counter",
         "Passes of the training job monitor over every unfinished job since mtcd started.");
    put(t, "mtc_job_monitor_passes_total %lld\n", jobs_monitor_passes());
    head(t, "mtc_endpoint_ticks_total", "counter",
         "Passes of the endpoints controller (health, routing, autoscaling) since mtcd started.");
    put(t, "mtc_endpoint_ticks_total %lld\n", endpoint_ticks());
    head(t, "mtc_supervision_passes_total", "counter",
         "Supervision passes over a cluster's daemons and nodes completed since mtcd started.");
    counts = r->ctl ? control_supervision_passes(r->ctl) : json_object();
    json_object_foreach(counts, cid, cv)
    put(t, "mtc_supervision_passes_total{cluster=\"%s\"} %lld\n", esc(cid, c, sizeof(c)),
        (long long)json_integer_value(cv));
    json_decref(counts);
    head(t, "mtc_operations", "gauge", "Operations by kind and outcome (RUNNING, SUCCEEDED, FAILED).");
    tal = store_op_tally(r->st);
    json_array_foreach(tal, i, row)
    put(t, "mtc_operations{kind=\"%s\",outcome=\"%s\"} %lld\n",
        esc(json_string_value(json_array_get(row, 0)), k, sizeof(k)),
        esc(json_string_value(json_array_get(row, 1)), s, sizeof(s)),
        (long long)json_integer_value(json_array_get(row, 2)));
    json_decref(tal);
}

/* ---- Slurm queues and accounting usage (issue 31, point 4) ---- */

/* What the job monitor's last pass saw (jobs_queue_view): no Slurm command
 * runs in a scrape. */
static void queues(struct api_req *r, struct text *t)
{
    json_t *ids = store_cluster_ids(r->st);
    json_t *pending = json_array(), *running = json_array(), *usage = json_array();
    size_t i;
    json_t *id;
    json_array_foreach(ids, i, id)
    {
        struct store_cluster cl;
        if (store_cluster_head(r->st, json_string_value(id), &cl) < 0)
            continue;
        json_t *view = api_slurm_up(cl.state) ? jobs_queue_view(cl.id, cl.create_ms) : NULL;
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(view, "pending"), k, v)
        {
            size_t cut = strcspn(k, "\n");
            json_array_append_new(pending, json_pack("[s, s%, s, O]", cl.id, k, cut,
                                                     k[cut] ? k + cut + 1 : "None", v));
        }
        json_object_foreach(json_object_get(view, "running"), k, v)
            json_array_append_new(running, json_pack("[s, s, O]", cl.id, k, v));
        json_object_foreach(json_object_get(view, "usage"), k, v)
            json_array_append_new(usage, json_pack("[s, s, O]", cl.id, k, v));
        json_decref(view);
        store_cluster_release(&cl);
    }
    json_decref(ids);
    char c[64], a[160], why[160], b[40];
    json_t *row;
    head(t, "mtc_slurm_jobs_pending", "gauge",
         "Jobs waiting in Slurm's queue, by cluster, account and pending reason.");
    json_array_foreach(pending, i, row)
    put(t, "mtc_slurm_jobs_pending{cluster=\"%s\",account=\"%s\",reason=\"%s\"} %lld\n",
        esc(json_string_value(json_array_get(row, 0)), c, sizeof(c)),
        esc(json_string_value(json_array_get(row, 1)), a, sizeof(a)),
        esc(json_string_value(json_array_get(row, 2)), why, sizeof(why)),
        (long long)json_integer_value(json_array_get(row, 3)));
    head(t, "mtc_slurm_jobs_running", "gauge", "Jobs running in Slurm, by cluster and account.");
    json_array_foreach(running, i, row)
    put(t, "mtc_slurm_jobs_running{cluster=\"%s\",account=\"%s\"} %lld\n",
        esc(json_string_value(json_array_get(row, 0)), c, sizeof(c)),
        esc(json_string_value(json_array_get(row, 1)), a, sizeof(a)),
        (long long)json_integer_value(json_array_get(row, 2)));
    static const char *const usage_name[] = {"mtc_account_usage_node_hours",
                                             "mtc_account_usage_gpu_hours"};
    static const char *const usage_help[] = {
        "Node-hours of the account's jobs since the cluster was created (accounting database).",
        "GPU-hours of the account's jobs since the cluster was created (accounting database)."};
    for (int m = 0; m < 2; m++) {
        head(t, usage_name[m], "gauge", usage_help[m]);
        json_array_foreach(usage, i, row)
        put(t, "%s{cluster=\"%s\",account=\"%s\"} %s\n", usage_name[m],
            esc(json_string_value(json_array_get(row, 0)), c, sizeof(c)),
            esc(json_string_value(json_array_get(row, 1)), a, sizeof(a)),
            num(json_real_value(json_array_get(json_array_get(row, 2), m)), b, sizeof(b)));
    }
    json_decref(pending);
    json_decref(running);
    json_decref(usage);
}

/* ---- training runs ---- */

static const struct {
    const char *name, *type, *help;
} run_metrics[] = {
    {"mtc_experiment_step", "gauge", "The highest training step logged."},
    {"mtc_experiment_loss", "gauge", "Training loss at the last logged step."},
    {"mtc_experiment_tokens_per_second", "gauge", "Tokens per second at the last logged step."},
    {"mtc_experiment_mfu", "gauge", "Model FLOPs utilization (0-1) at the last logged step."},
    {"mtc_experiment_restarts", "gauge", "Times the job started again after its first start."},
    {"mtc_experiment_goodput", "gauge",
     "Time of the kept steps / wall time since the first start (the chaos benchmark's ETTR)."},
    {"mtc_experiment_steps_repeated", "gauge", "Steps trained again after resuming (sampled)."},
    {"mtc_experiment_steps_lost", "gauge", "Steps below the highest with no kept row."},
    {"mtc_experiment_alert", "gauge",
     "Early problem detection: 1 while the kind (nonfinite, loss_spike, throughput_drop, stall) holds."},
    {"mtc_experiment_time_seconds", "gauge",
     "The run's time since it was submitted, by part (queue, startup, productive, checkpoint, "
     "lost, restart, hang): the parts sum to the whole."},
};

struct run_row {
    char cluster[64], experiment[160], job[160];
    struct exp_track t;
    struct exp_monitor mon;
    int alerts;
};

static void runs(struct api_req *r, struct text *t)
{
    double now = (double)mtc_now_ms() / 1000.0;
    size_t nrows = 0, cap = 8;
    struct run_row *rows = calloc(cap, sizeof(*rows));
    json_t *seen = json_object();
    size_t i;
    /* the states the job monitor keeps (no Slurm command in a scrape) */
    for (int64_t after = 0;;) {
        int n = 0;
        struct store_job *jobs = store_job_list_unfinished(r->st, after, 256, &n);
        for (int k = 0; k < n; k++) {
            after = jobs[k].seq;
            const char *td = exp_task_dir(jobs[k].config);
            char owner[33];
            /* another's run: no series of it (its metrics are its owner's) */
            int mine = api_owner_sees(&r->who, jobs_owner(jobs[k].config, owner));
            if (td && !mine)
                json_object_set_new(seen, td, json_true());
            if (td && mine && !exp_state_final(jobs[k].state) &&
                strcmp(jobs[k].state, "PENDING") != 0 && rows &&
                (nrows < cap || (rows = realloc(rows, (cap *= 2) * sizeof(*rows))))) {
                struct run_row *w = &rows[nrows];
                memset(w, 0, sizeof(*w));
                if (jobs_track(jobs[k].config, now, &w->t) == 0) {
                    exp_monitor_from(jobs[k].config, &w->mon);
                    snprintf(w->cluster, sizeof(w->cluster), "%s", jobs[k].cluster_id);
                    snprintf(w->job, sizeof(w->job), "%s", jobs[k].id);
                    const char *e = exp_experiment(jobs[k].config);
                    snprintf(w->experiment, sizeof(w->experiment), "%s", e ? e : jobs[k].id);
                    json_object_set_new(seen, td, json_true());
                    nrows++;
                }
            }
            store_job_release(&jobs[k]);
        }
        free(jobs);
        if (n < 256)
            break;
    }
    /* runs started with `mtc run` under mtcd's home: those whose log has a
     * start and no end after it */
    mtc_error_t err = {""};
    json_t *all = r->cfg->home ? exp_list(r->cfg->home, &err) : NULL;
    json_t *cfg;
    json_array_foreach(all, i, cfg)
    {
        const char *td = exp_task_dir(cfg);
        char owner[33];
        if (!td || json_object_get(seen, td) || !rows ||
            !api_owner_sees(&r->who, jobs_owner(cfg, owner)))
            continue;
        if (nrows == cap && !(rows = realloc(rows, (cap *= 2) * sizeof(*rows))))
            break;
        struct run_row *w = &rows[nrows];
        memset(w, 0, sizeof(*w));
        if (jobs_track(cfg, now, &w->t) < 0 || w->t.first_start == 0 || w->t.end > 0)
            continue;
        exp_monitor_from(cfg, &w->mon);
        const char *e = exp_experiment(cfg);
        snprintf(w->experiment, sizeof(w->experiment), "%s", e ? e : "");
        const char *run = exp_run_id(cfg);
        snprintf(w->job, sizeof(w->job), "%s", run ? run : "");
        nrows++;
    }
    json_decref(all);
    json_decref(seen);
    char msg[256];
    for (size_t k = 0; k < nrows; k++)
        rows[k].alerts = exp_monitor_check(&rows[k].t, &rows[k].mon, now, msg, sizeof(msg));
    static const char *const alert_kind[] = {"nonfinite", "loss_spike", "throughput_drop", "stall"};
    static const char *const time_part[] = {"queue", "startup", "productive", "checkpoint",
                                            "lost",  "restart", "hang"};
    char c[96], e[256], j[256], b[40];
    for (size_t m = 0; m < sizeof(run_metrics) / sizeof(run_metrics[0]); m++) {
        head(t, run_metrics[m].name, run_metrics[m].type, run_metrics[m].help);
        for (size_t k = 0; k < nrows; k++) {
            const struct exp_track *x = &rows[k].t;
            esc(rows[k].cluster, c, sizeof(c));
            esc(rows[k].experiment, e, sizeof(e));
            esc(rows[k].job, j, sizeof(j));
            if (m == 8) {
                for (int a = 0; a < 4; a++)
                    put(t, "%s{cluster=\"%s\",experiment=\"%s\",training_job=\"%s\",kind=\"%s\"} %d\n",
                        run_metrics[m].name, c, e, j, alert_kind[a], (rows[k].alerts >> a) & 1);
                continue;
            }
            if (m == 9) {
                const struct exp_breakdown *d = &x->bd;
                const double part[] = {d->queue_s,  d->startup_s, d->productive_s, d->checkpoint_s,
                                       d->lost_s,   d->restart_s, d->hang_s};
                for (int p = 0; p < 7; p++)
                    put(t, "%s{cluster=\"%s\",experiment=\"%s\",training_job=\"%s\",part=\"%s\"} %s\n",
                        run_metrics[m].name, c, e, j, time_part[p], num(part[p], b, sizeof(b)));
                continue;
            }
            double v = m == 0   ? (double)x->step
                       : m == 1 ? (x->rows ? x->loss : NAN)
                       : m == 2 ? x->tokens_per_s
                       : m == 3 ? x->mfu
                       : m == 4 ? x->restarts
                       : m == 5 ? x->goodput
                       : m == 6 ? (double)x->repeated
                                : (double)x->lost;
            put(t, "%s{cluster=\"%s\",experiment=\"%s\",training_job=\"%s\"} %s\n", run_metrics[m].name, c,
                e, j, num(v, b, sizeof(b)));
        }
    }
    free(rows);
}

static void requests(struct text *t)
{
    struct route_stat snap[MAX_ROUTES];
    pthread_mutex_lock(&stats_lock);
    memcpy(snap, route_stats, sizeof(snap));
    pthread_mutex_unlock(&stats_lock);
    char rt[320];
    head(t, "mtc_api_requests_total", "counter", "API requests answered by a handler, by route and status class.");
    for (size_t i = 0; i < MAX_ROUTES; i++) {
        if (!snap[i].route)
            continue;
        snprintf(rt, sizeof(rt), "%s %s", snap[i].route->method, snap[i].route->pattern);
        for (int k = 1; k < 6; k++)
            if (snap[i].code[k])
                put(t, "mtc_api_requests_total{route=\"%s\",code=\"%dxx\"} %llu\n", rt, k,
                    snap[i].code[k]);
    }
    head(t, "mtc_api_request_duration_seconds", "histogram", "API request latency by route.");
    char b[40];
    for (size_t i = 0; i < MAX_ROUTES; i++) {
        unsigned long long cum = 0;
        for (size_t k = 0; k <= NBUCKETS; k++)
            cum += snap[i].bucket[k];
        if (!cum || !snap[i].route)
            continue;
        snprintf(rt, sizeof(rt), "%s %s", snap[i].route->method, snap[i].route->pattern);
        cum = 0;
        for (size_t k = 0; k < NBUCKETS; k++) {
            cum += snap[i].bucket[k];
            put(t, "mtc_api_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n", rt,
                bucket_le[k], cum);
        }
        cum += snap[i].bucket[NBUCKETS];
        put(t, "mtc_api_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n", rt, cum);
        put(t, "mtc_api_request_duration_seconds_sum{route=\"%s\"} %s\n", rt,
            num(snap[i].sum, b, sizeof(b)));
        put(t, "mtc_api_request_duration_seconds_count{route=\"%s\"} %llu\n", rt, cum);
    }
}

/* mtcd --backup-dir: the periodic backups' outcome */
static void backups(struct api_req *r, struct text *t)
{
    if (!r->cfg->backup)
        return;
    struct backup_sched *s = r->cfg->backup;
    pthread_mutex_lock(&s->lock);
    int64_t ok = s->ok_total, failed = s->failed_total, ok_ms = s->last_ok_ms,
            bytes = s->last_bytes;
    pthread_mutex_unlock(&s->lock);
    head(t, "mtc_backups_total", "counter",
         "Periodic backups of mtcd's state since it started, by outcome.");
    put(t, "mtc_backups_total{outcome=\"ok\"} %lld\n", (long long)ok);
    put(t, "mtc_backups_total{outcome=\"failed\"} %lld\n", (long long)failed);
    head(t, "mtc_backup_last_success_timestamp_seconds", "gauge",
         "When the last periodic backup that succeeded was taken (0: none yet).");
    put(t, "mtc_backup_last_success_timestamp_seconds %.3f\n", (double)ok_ms / 1000.0);
    head(t, "mtc_backup_last_bytes", "gauge", "The size of the last periodic backup written.");
    put(t, "mtc_backup_last_bytes %lld\n", (long long)bytes);
}

int api_healthz(struct api_req *r, struct api_resp *out)
{
    out->body = json_pack("{s:s, s:s, s:i}", "status", "ok", "version", mtc_version(),
                          "schemaVersion", store_schema_version(r->st));
    if (r->cfg->backup) /* mtcd --backup-dir: the last periodic backup */
        json_object_set_new(out->body, "backup", backup_sched_json(r->cfg->backup));
    return 0;
}

int api_metrics(struct api_req *r, struct api_resp *out)
{
    struct text t = {0};
    t.cap = 16384;
    t.buf = malloc(t.cap);
    if (!t.buf)
        return api_error(out, 500, "out of memory");
    t.buf[0] = '\0';
    clusters(r, &t);
    queues(r, &t);
    runs(r, &t);
    requests(&t);
    backups(r, &t);
    out->text = t.buf;
    out->text_len = t.len;
    return 0;
}
