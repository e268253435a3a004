/* mtc-simload: plays the mtc-agents of a simulated cluster (provider "sim",
 * docs/scale.md) against mtcd — each node reports its health on its policy's
 * schedule with the agent's own request (health_report_post), some nodes
 * fail (a rate per node-day, and/or a burst), a failed node reports FAIL until
 * the sim provider has rebooted it — and measures: per-report latency, and
 * optionally API GET latency. Bounded in time and count; prints one JSON
 * summary (counts, p50/p99/max latency, the failures and when mtcd had them). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "health/health.h"
#include "provider/provider.h"

#define MAX_AGENTS 100000
#define MAX_THREADS 64

struct agent {
    char node[96];
    char token[128];
    int64_t next_report; /* ms: the next periodic report */
    int64_t fail_at;     /* ms: when it fails (INT64_MAX: never) */
    int failing;         /* reports FAIL until booted again */
    int64_t next_check;  /* ms: a failing node's next look at its state */
    int64_t due;         /* ms: when the report being sent was due */
    const char *check;   /* the failing check */
    long boots0;         /* its boots when it failed */
    int64_t failed_ms;   /* when its FAIL report was answered */
    size_t fidx;         /* its failure in g.failures */
};

/* Latencies (ms) of one kind of request; how many mtcd answered with an
 * error status, and how many it did not answer in time. */
struct lat {
    double *v;
    size_t n, cap;
    long errors, timeouts;
    pthread_mutex_t lock;
};

static struct {
    struct health_reporter rep; /* token set per request */
    json_t *policy;             /* the cluster's healthPolicy */
    char state_path[PATH_MAX];  /* the sim provider's node state */
    struct agent *agents;
    int nagents, nthreads;
    int64_t start, end;
    int report_every_ms, pass_ms; /* the agent's report period and check pass */
    struct lat reports, gets, late; /* late: how long after its time a report went */
    int get_every_ms;
    json_t *failures; /* [{"node","check","timeMs","answeredMs"?}] */
    long fixed;
    pthread_mutex_t lock;
} g = {.reports = {.lock = PTHREAD_MUTEX_INITIALIZER},
       .gets = {.lock = PTHREAD_MUTEX_INITIALIZER},
       .late = {.lock = PTHREAD_MUTEX_INITIALIZER},
       .lock = PTHREAD_MUTEX_INITIALIZER};

static volatile sig_atomic_t stopping;
static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("mtc-simload: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* status: the HTTP status, 0 when there was no answer. */
static void lat_add(struct lat *l, double ms, long status)
{
    pthread_mutex_lock(&l->lock);
    if (status == 0)
        l->timeouts++;
    else if (status < 200 || status > 299)
        l->errors++;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4096;
        double *v = realloc(l->v, cap * sizeof(*v));
        if (v) {
            l->v = v;
            l->cap = cap;
        }
    }
    if (l->n < l->cap)
        l->v[l->n++] = ms;
    pthread_mutex_unlock(&l->lock);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* {"count","errors","timeouts","p50Ms","p99Ms","maxMs"} (sorts l). */
static json_t *lat_json(struct lat *l)
{
    qsort(l->v, l->n, sizeof(double), cmp_double);
#define PCT(p) (l->n ? l->v[(size_t)((double)(l->n - 1) * (p))] : 0.0)
    return json_pack("{s:I, s:I, s:I, s:f, s:f, s:f}", "count", (json_int_t)l->n, "errors",
                     (json_int_t)l->errors, "timeouts", (json_int_t)l->timeouts, "p50Ms",
                     PCT(0.5), "p99Ms", PCT(0.99), "maxMs", PCT(1.0));
#undef PCT
}

/* splitmix64: a seeded, reproducible draw in [0, 1). */
static uint64_t rng_state;
static double draw(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / (double)(1ULL << 53);
}

/* The node's boots and whether an action runs on it now, from the sim
 * provider's state file. -1 when it cannot be read. */
static long node_boots(const char *node, int *acting)
{
    json_t *s = json_load_file(g.state_path, 0, NULL);
    json_t *n = json_object_get(json_object_get(s, "nodes"), node);
    long boots = n ? (long)json_integer_value(json_object_get(n, "boots")) : -1;
    const char *act = json_string_value(json_object_get(n, "action"));
    *acting = act && *act;
    json_decref(s);
    return boots;
}

/* One report of agent a: its results (FAIL while failing), timed. 0 when
 * mtcd answered 2xx. */
static int send_report(struct agent *a)
{
    mtc_error_t err = {""};
    json_t *res = provider_sim_results(g.policy, a->failing ? a->check : NULL,
                                       a->failing ? "simulated failure (mtc-simload)" : NULL, &err);
    json_t *body = res ? health_report_body(a->node, HEALTH_MODE_HEALTH, res) : NULL;
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        fprintf(stderr, "mtc-simload: %s: %s\n", a->node, *err.text ? err.text : "out of memory");
        lat_add(&g.reports, 0, 0);
        return -1;
    }
    struct health_reporter rep = g.rep;
    snprintf(rep.token, sizeof(rep.token), "%s", a->token);
    int64_t t0 = mtc_now_ms();
    long status = 0;
    int rc = health_report_post(&rep, text, &status, &err);
    int64_t t1 = mtc_now_ms();
    free(text);
    lat_add(&g.reports, (double)(t1 - t0), status);
    lat_add(&g.late, (double)(t0 - a->due), 200);
    if (rc < 0)
        fprintf(stderr, "mtc-simload: %s: %s\n", a->node, err.text);
    if (rc == 0 && a->failing && !a->failed_ms) { /* mtcd acknowledged the failure */
        a->failed_ms = t1;
        pthread_mutex_lock(&g.lock);
        json_object_set_new(json_array_get(g.failures, a->fidx), "answeredMs", json_integer(t1));
        pthread_mutex_unlock(&g.lock);
    }
    /* like the agent, one that did not get through is sent again next pass */
    if (rc < 0)
        a->next_report = t1 + g.pass_ms;
    return rc;
}

/* What agent a does at now: fail, come back after a reboot, or report. A
 * failing node looks at its state every 0.5 s: once the sim provider booted
 * it again its fresh agent reports at once; while an action runs on it, its
 * agent is down and reports nothing. */
static void step(struct agent *a, int64_t now)
{
    int acting = 0;
    if (!a->failing && now >= a->fail_at) {
        a->due = a->fail_at;
        a->fail_at = INT64_MAX;
        a->boots0 = node_boots(a->node, &acting);
        a->failing = 1;
        a->next_check = now + 500;
        a->next_report = now + g.report_every_ms;
        pthread_mutex_lock(&g.lock); /* the failure, from the moment its report goes */
        a->fidx = json_array_size(g.failures);
        json_array_append_new(g.failures, json_pack("{s:s, s:s, s:I}", "node", a->node, "check",
                                                    a->check, "timeMs", (json_int_t)now));
        pthread_mutex_unlock(&g.lock);
        send_report(a); /* a changed result is reported at once */
        return;
    }
    if (a->failing && now >= a->next_check) {
        long b = node_boots(a->node, &acting);
        a->next_check = now + 500;
        if (b > a->boots0 && !acting) {
            a->due = now;
            a->failing = 0;
            pthread_mutex_lock(&g.lock);
            g.fixed++;
            pthread_mutex_unlock(&g.lock);
            a->next_report = now + g.report_every_ms;
            send_report(a);
            return;
        }
        if (acting && now >= a->next_report)
            a->next_report = now + g.report_every_ms; /* rebooting: no agent */
    }
    if (now >= a->next_report) {
        a->due = a->next_report;
        a->next_report += g.report_every_ms; /* on schedule, as the agent's loop */
        if (a->next_report < now)
            a->next_report = now;
        send_report(a);
    }
}

static void *agents_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    while (!stopping) {
        int64_t now = mtc_now_ms(), next = INT64_MAX;
        if (now >= g.end)
            break;
        for (int i = t; i < g.nagents && !stopping; i += g.nthreads) {
            struct agent *a = &g.agents[i];
            step(a, now);
            int64_t due = a->next_report < a->fail_at ? a->next_report : a->fail_at;
            if (a->failing && a->next_check < due)
                due = a->next_check;
            if (due < next)
                next = due;
        }
        now = mtc_now_ms();
        if (next > now)
            mtc_sleep_ms((int)(next - now < 100 ? next - now : 100));
    }
    return NULL;
}

static size_t discard(char *p, size_t size, size_t n, void *u)
{
    (void)p, (void)u;
    return size * n;
}

/* API GETs as an operator's tools make them: the cluster (with nodesStatus)
 * and the cluster list, alternately, every get_every_ms. */
static void *gets_thread(void *arg)
{
    (void)arg;
    char url[2][1024];
    snprintf(url[0], sizeof(url[0]),
             "http://localhost/v1beta1/projects/%s/locations/%s/modelDevelopmentClusters/%s",
             g.rep.project, g.rep.location, g.rep.cluster);
    snprintf(url[1], sizeof(url[1]),
             "http://localhost/v1beta1/projects/%s/locations/%s/modelDevelopmentClusters",
             g.rep.project, g.rep.location);
    for (int k = 0; !stopping && mtc_now_ms() < g.end; k++) {
        int64_t t0 = mtc_now_ms();
        CURL *h = curl_easy_init();
        if (!h)
            break;
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, g.rep.socket);
        curl_easy_setopt(h, CURLOPT_URL, url[k % 2]);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        long code = 0;
        if (curl_easy_perform(h) == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(h);
        int64_t t1 = mtc_now_ms();
        lat_add(&g.gets, (double)(t1 - t0), code);
        int64_t wait = t0 + g.get_every_ms - t1;
        if (wait > 0)
            mtc_sleep_ms((int)wait);
    }
    return NULL;
}

/* ---- set-up ---- */

static int load_agents(const char *dir)
{
    char path[PATH_MAX];
    json_error_t je;
    if (snprintf(path, sizeof(path), "%s/sim-agents.json", dir) >= (int)sizeof(path) ||
        snprintf(g.state_path, sizeof(g.state_path), "%s/sim-state.json", dir) >=
            (int)sizeof(g.state_path))
        return fail("--cluster-dir: path too long");
    json_t *cfg = json_load_file(path, 0, &je);
    if (!cfg)
        return fail("%s: %s (is it a simulated cluster's directory?)", path, je.text);
    const char *p = json_string_value(json_object_get(cfg, "project"));
    const char *l = json_string_value(json_object_get(cfg, "location"));
    const char *c = json_string_value(json_object_get(cfg, "clusterId"));
    const char *s = json_string_value(json_object_get(cfg, "socket"));
    json_t *nodes = json_object_get(cfg, "nodes");
    if (!p || !l || !c || !s || !json_is_array(nodes) || json_array_size(nodes) > MAX_AGENTS) {
        json_decref(cfg);
        return fail("%s: want {project, location, clusterId, socket, nodes[] (at most %d)}",
                    path, MAX_AGENTS);
    }
    snprintf(g.rep.project, sizeof(g.rep.project), "%s", p);
    snprintf(g.rep.location, sizeof(g.rep.location), "%s", l);
    snprintf(g.rep.cluster, sizeof(g.rep.cluster), "%s", c);
    snprintf(g.rep.socket, sizeof(g.rep.socket), "%s", s);
    g.policy = json_incref(json_object_get(cfg, "healthPolicy"));
    g.nagents = (int)json_array_size(nodes);
    g.agents = calloc((size_t)g.nagents + 1, sizeof(*g.agents));
    size_t i;
    json_t *n;
    json_array_foreach(nodes, i, n)
    {
        const char *node = json_string_value(json_object_get(n, "nodeId"));
        const char *tok = json_string_value(json_object_get(n, "token"));
        snprintf(g.agents[i].node, sizeof(g.agents[i].node), "%s", node ? node : "");
        snprintf(g.agents[i].token, sizeof(g.agents[i].token), "%s", tok ? tok : "");
        g.agents[i].fail_at = INT64_MAX;
    }
    json_decref(cfg);
    return 0;
}

/* Failures: a Poisson process of rate per node-day over the run (at most
 * max), plus burst nodes failing together at burst_at; distinct nodes. */
static int plan_failures(double rate, int max, int burst, double burst_at, char **checks,
                         int nchecks)
{
    int planned = 0;
    double run_s = (double)(g.end - g.start) / 1000.0;
    double per_s = rate * g.nagents / 86400.0;
    int64_t at = burst > 0 ? g.start + (int64_t)(burst_at * 1000) : 0;
    double t = 0;
    for (int k = 0; k < burst + max && planned < g.nagents; k++) {
        int64_t when;
        if (k < burst) {
            when = at;
        } else {
            if (per_s <= 0)
                break;
            t += -log(1.0 - draw()) / per_s;
            if (t >= run_s)
                break;
            when = g.start + (int64_t)(t * 1000);
        }
        int i, tries = 0;
        do
            i = (int)(draw() * g.nagents);
        while (g.agents[i].fail_at != INT64_MAX && ++tries < 1000);
        if (g.agents[i].fail_at != INT64_MAX)
            break;
        g.agents[i].fail_at = when;
        g.agents[i].check = checks[planned % nchecks];
        planned++;
    }
    return planned;
}

static const char usage[] =
    "usage: mtc-simload --cluster-dir DIR --seconds S [options]\n"
    "  plays every node's mtc-agent of the simulated cluster in DIR ($MTC_HOME/clusters/ID)\n"
    "  --seconds S              run S seconds (1..86400)\n"
    "  --report-every S         report period (default healthPolicy.reportEverySeconds)\n"
    "  --failures-per-node-day R  node failure rate (default 0)\n"
    "  --max-failures N         at most N such failures (default 100)\n"
    "  --burst K --burst-at S   K nodes fail together S seconds in\n"
    "  --checks a,b             the checks that fail, in turn (default gpu.ecc,gpu.xid,disk,nic)\n"
    "  --get-every-ms M         also GET the cluster and the cluster list every M ms\n"
    "  --threads T              sender threads (default 32)\n"
    "  --seed N                 seed of the draws (default 1)\n";

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"cluster-dir", 1, 0, 'd'},   {"seconds", 1, 0, 's'},       {"report-every", 1, 0, 'r'},
        {"failures-per-node-day", 1, 0, 'f'}, {"max-failures", 1, 0, 'm'}, {"burst", 1, 0, 'b'},
        {"burst-at", 1, 0, 'a'},      {"checks", 1, 0, 'c'},        {"get-every-ms", 1, 0, 'g'},
        {"threads", 1, 0, 't'},       {"seed", 1, 0, 'S'},          {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    const char *dir = NULL, *checks_arg = "gpu.ecc,gpu.xid,disk,nic";
    double seconds = 0, rate = 0, burst_at = 0, every = 0;
    long max_failures = 100, burst = 0, threads = 32, get_ms = 0, seed = 1;
    int o;
    struct {
        int opt;
        double *d;
        long *l;
        double lo, hi;
        const char *name;
    } const nums[] = {{'s', &seconds, NULL, 1, 86400, "seconds"},
                      {'r', &every, NULL, 1, 3600, "report-every"},
                      {'f', &rate, NULL, 0, 1e6, "failures-per-node-day"},
                      {'m', NULL, &max_failures, 0, 100000, "max-failures"},
                      {'b', NULL, &burst, 0, 100000, "burst"},
                      {'a', &burst_at, NULL, 0, 86400, "burst-at"},
                      {'g', NULL, &get_ms, 10, 3600000, "get-every-ms"},
                      {'t', NULL, &threads, 1, MAX_THREADS, "threads"},
                      {'S', NULL, &seed, 0, 1e15, "seed"}};
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (o == 'h') {
            fputs(usage, stdout);
            return 0;
        } else if (o == 'd') {
            dir = optarg;
        } else if (o == 'c') {
            checks_arg = optarg;
        } else {
            size_t k = 0;
            while (k < sizeof(nums) / sizeof(nums[0]) && nums[k].opt != o)
                k++;
            if (k == sizeof(nums) / sizeof(nums[0]))
                return fail("unknown or incomplete option \"%s\" (mtc-simload --help)",
                            argv[optind - 1]);
            char *end;
            double v = strtod(optarg, &end);
            if (!*optarg || *end || !(v >= nums[k].lo && v <= nums[k].hi) ||
                (nums[k].l && v != floor(v)))
                return fail("--%s: must be a%s number from %g to %g", nums[k].name,
                            nums[k].l ? "n integer" : "", nums[k].lo, nums[k].hi);
            if (nums[k].d)
                *nums[k].d = v;
            else
                *nums[k].l = (long)v;
        }
    }
    if (optind < argc)
        return fail("unexpected argument \"%s\"", argv[optind]);
    if (!dir || seconds <= 0)
        return fail("--cluster-dir and --seconds are required (mtc-simload --help)");
    if (load_agents(dir) != 0)
        return 2;
    /* the checks that fail: names of the check table */
    char *checks[HEALTH_MAX_CHECKS], *save = NULL, *list = strdup(checks_arg);
    int nchecks = 0;
    for (char *c = strtok_r(list, ",", &save); c && nchecks < HEALTH_MAX_CHECKS;
         c = strtok_r(NULL, ",", &save)) {
        mtc_error_t err = {""};
        json_t *r = provider_sim_results(g.policy, c, NULL, &err);
        if (!r)
            return fail("--checks: %s", err.text);
        json_decref(r);
        checks[nchecks++] = c;
    }
    if (!nchecks)
        return fail("--checks: name at least one check");
    struct health_policy pol;
    mtc_error_t perr = {""};
    if (health_policy_parse(g.policy, &pol, &perr) < 0)
        return fail("healthPolicy: %s", perr.text);
    g.report_every_ms = (int)((every > 0 ? every : pol.report_every_seconds) * 1000);
    g.pass_ms = pol.interval_seconds * 1000;
    g.nthreads = (int)threads;
    g.get_every_ms = (int)get_ms;
    g.failures = json_array();
    rng_state = (uint64_t)seed;
    g.start = mtc_now_ms();
    g.end = g.start + (int64_t)(seconds * 1000);
    /* agents start at random moments of one period, as a cluster's do */
    for (int i = 0; i < g.nagents; i++)
        g.agents[i].next_report = g.start + (int64_t)(draw() * g.report_every_ms);
    int planned = plan_failures(rate, (int)max_failures, (int)burst, burst_at, checks, nchecks);

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    pthread_t th[MAX_THREADS + 1];
    int started = 0;
    for (int t = 0; t < g.nthreads; t++)
        if (pthread_create(&th[started], NULL, agents_thread, (void *)(intptr_t)t) == 0)
            started++;
    pthread_t gt;
    int have_gets = g.get_every_ms > 0 && pthread_create(&gt, NULL, gets_thread, NULL) == 0;
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    if (have_gets)
        pthread_join(gt, NULL);
    curl_global_cleanup();

    json_t *sum = json_pack(
        "{s:s, s:i, s:f, s:i, s:i, s:o, s:o, s:i, s:I}", "cluster", g.rep.cluster, "agents",
        g.nagents, "seconds", (double)(mtc_now_ms() - g.start) / 1000.0, "reportEveryMs",
        g.report_every_ms, "failuresPlanned", planned, "reports", lat_json(&g.reports), "failures",
        g.failures, "failuresFixed", (int)g.fixed, "stopped", (json_int_t)stopping);
    json_object_set_new(sum, "lateness", lat_json(&g.late));
    if (g.get_every_ms > 0)
        json_object_set_new(sum, "gets", lat_json(&g.gets));
    char *text = json_dumps(sum, JSON_INDENT(2));
    puts(text ? text : "{}");
    free(text);
    json_decref(sum);
    json_decref(g.policy);
    free(g.agents);
    free(list);
    return 0;
}
