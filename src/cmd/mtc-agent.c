/* mtc-agent: runs a node's health checks — once (`check`: Slurm's
 * HealthCheckProgram, Prolog, Epilog) or in a loop (`run`) reporting to mtcd's
 * :reportHealth — and lists them (`checks`); beside a job, watches its ranks
 * (`ranks`) and picks its rendezvous port (`port`). Subcommands are a table. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health/health.h"
#include "spank/container.h"
#include "slurm/slurm.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define MAX_RESULTS 64

struct agent {
    struct health_ctx ctx;
    char project[64], location[64], cluster[64];
    char socket[PATH_MAX], url[1024], token[512], slurm_conf[PATH_MAX], ca_file[PATH_MAX];
    char addr[256]; /* port: the address the ranks bind (MASTER_ADDR) */
    const char *only;
    int json, drain, report, interval_ms, after_s;
    unsigned long seed; /* port: where the search starts (the job id) */
};

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("mtc-agent: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* Copy a string field of the config object (snake_case or camelCase). */
static int cfg_str(const json_t *cfg, const char *camel, const char *snake, char *dst, size_t len)
{
    json_t *v = json_object_get(cfg, camel);
    if (!v)
        v = json_object_get(cfg, snake);
    if (!v)
        return 0;
    if (!json_is_string(v) || strlen(json_string_value(v)) >= len)
        return fail("config.%s: must be a string shorter than %zu", camel, len), -1;
    snprintf(dst, len, "%s", json_string_value(v));
    return 0;
}

/* "%n" in a config path is the Slurm node name, so one slurm.conf line
 * (Prolog=..., HealthCheckProgram=...) serves every emulated node. */
static void expand_node(const char *in, char *out, size_t len)
{
    const char *node = getenv("SLURMD_NODENAME");
    size_t j = 0;
    for (; *in && j + 1 < len; in++) {
        if (in[0] == '%' && in[1] == 'n' && node) {
            j += (size_t)snprintf(out + j, len - j, "%s", node);
            if (j >= len)
                j = len - 1;
            in++;
        } else {
            out[j++] = *in;
        }
    }
    out[j] = '\0';
}

static int load_config(struct agent *a, const char *arg)
{
    char path[PATH_MAX];
    json_error_t je;
    mtc_error_t err = {""};
    expand_node(arg, path, sizeof(path));
    json_t *cfg = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!cfg)
        return fail("%s:%d: %s", path, je.line, je.text), -1;
    char token_file[PATH_MAX] = "";
    int rc = -1;
    if (health_ctx_configure(&a->ctx, cfg, &err) < 0) {
        fail("%s: %s", path, err.text);
        goto out;
    }
    if (cfg_str(cfg, "project", "project", a->project, sizeof(a->project)) < 0 ||
        cfg_str(cfg, "location", "location", a->location, sizeof(a->location)) < 0 ||
        cfg_str(cfg, "clusterId", "cluster_id", a->cluster, sizeof(a->cluster)) < 0 ||
        cfg_str(cfg, "socket", "socket", a->socket, sizeof(a->socket)) < 0 ||
        cfg_str(cfg, "url", "url", a->url, sizeof(a->url)) < 0 ||
        cfg_str(cfg, "slurmConf", "slurm_conf", a->slurm_conf, sizeof(a->slurm_conf)) < 0 ||
        cfg_str(cfg, "tokenFile", "token_file", token_file, sizeof(token_file)) < 0 ||
        cfg_str(cfg, "caFile", "ca_file", a->ca_file, sizeof(a->ca_file)) < 0)
        goto out;
    if (*token_file && !*a->token) { /* $MTC_TOKEN wins */
        char *t = mtc_read_file(token_file, NULL);
        if (!t) {
            fail("%s: cannot read %s: %s", path, token_file, strerror(errno));
            goto out;
        }
        t[strcspn(t, "\r\n")] = '\0';
        snprintf(a->token, sizeof(a->token), "%s", t);
        free(t);
    }
    rc = 0;
out:
    json_decref(cfg);
    return rc;
}

/* The reportHealth body, also what `check --json` prints. "mode" lets mtcd
 * record PROLOG/EPILOG failures as VM_PROLOG_ERROR / VM_EPILOG_ERROR. */
static json_t *body_json(const struct agent *a, const struct health_result *r, int n)
{
    return health_report_body(a->ctx.node, a->ctx.mode, health_results_json(r, n));
}

static void print_results(const struct agent *a, const struct health_result *r, int n)
{
    if (a->json) {
        json_t *o = body_json(a, r, n);
        char *s = json_dumps(o, JSON_INDENT(2));
        puts(s ? s : "{}");
        free(s);
        json_decref(o);
        return;
    }
    for (int i = 0; i < n; i++)
        printf("%-4s  %-14s %-8s %s\n", health_status_name(r[i].status), r[i].check,
               r[i].status == HEALTH_FAIL ? health_severity_name(r[i].severity) : "", r[i].reason);
}

/* POST …:reportHealth (health_report_post). 0 on a 2xx answer, else -1 with err. */
static int report(const struct agent *a, const struct health_result *r, int n, mtc_error_t *err)
{
    static struct health_reporter rep;
    snprintf(rep.project, sizeof(rep.project), "%s", a->project);
    snprintf(rep.location, sizeof(rep.location), "%s", a->location);
    snprintf(rep.cluster, sizeof(rep.cluster), "%s", a->cluster);
    snprintf(rep.socket, sizeof(rep.socket), "%s", a->socket);
    snprintf(rep.url, sizeof(rep.url), "%s", a->url);
    snprintf(rep.token, sizeof(rep.token), "%s", a->token);
    snprintf(rep.ca_file, sizeof(rep.ca_file), "%s", a->ca_file);
    json_t *body = body_json(a, r, n);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!text)
        return errprintf(err, "out of memory");
    int rc = health_report_post(&rep, text, NULL, err);
    free(text);
    return rc;
}

/* Slurm ignores a HealthCheckProgram's exit status: the program drains its
 * own node. The first FAIL names the reason. */
static void drain_self(const struct agent *a, const struct health_result *r, int n)
{
    const char *node = getenv("SLURMD_NODENAME");
    if (!node || !*node)
        node = a->ctx.node;
    for (int i = 0; i < n; i++) {
        if (r[i].status != HEALTH_FAIL)
            continue;
        char reason[300];
        mtc_error_t err = {""};
        snprintf(reason, sizeof(reason), "mtc-agent: %s: %.200s", r[i].check, r[i].reason);
        if (slurm_node_set(a->slurm_conf, node, SLURM_NODE_DRAIN, reason, &err) < 0)
            fprintf(stderr, "mtc-agent: drain %s failed: %s\n", node, err.text);
        return;
    }
}

static int need_address(const struct agent *a, const char *cmd)
{
    if (!*a->cluster)
        return fail("%s: no cluster id (--cluster or clusterId in --config)", cmd);
    if (!*a->ctx.node)
        return fail("%s: no node name (--node or nodeId in --config)", cmd);
    if (!*a->url && !*a->socket)
        return fail("%s: no mtcd address (--socket PATH or --url URL)", cmd);
    return 0;
}

/* The Epilog's first duty: whatever the job's containers mounted on this node
 * (their image, named containers — also what a killed task or step left)
 * is unmounted, under $MTC_CONTAINERS/jobs/$SLURM_JOB_ID. */
static void sweep_job_containers(void)
{
    const char *dir = getenv("MTC_CONTAINERS"), *job = getenv("SLURM_JOB_ID");
    char path[PATH_MAX];
    if (!dir || !*dir || !job || !*job || strspn(job, "0123456789") != strlen(job) ||
        snprintf(path, sizeof(path), "%s/jobs/%s", dir, job) >= (int)sizeof(path) ||
        !mtc_path_exists(path))
        return;
    mtc_error_t err = {""};
    if (container_sweep(path, &err) < 0)
        fprintf(stderr, "mtc-agent: job %s's containers: %s\n", job, err.text);
}

static int cmd_check(struct agent *a)
{
    struct health_result r[MAX_RESULTS];
    mtc_error_t err = {""};
    if (a->ctx.mode == HEALTH_MODE_EPILOG)
        sweep_job_containers();
    if (a->report && need_address(a, "check --report"))
        return 2;
    int n = health_run(&a->ctx, a->only, r, MAX_RESULTS, &err);
    if (n < 0)
        return fail("%s", err.text);
    print_results(a, r, n);
    if (a->report && report(a, r, n, &err) < 0)
        fprintf(stderr, "mtc-agent: %s\n", err.text);
    int failed = health_worst(r, n, NULL) == HEALTH_FAIL;
    if (failed && a->drain)
        drain_self(a, r, n);
    return failed ? 1 : 0;
}

static volatile sig_atomic_t stopping;
static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

/* The part of a result that, when it changes, must reach mtcd now. */
static int changed(const struct health_result *a, int na, const struct health_result *b, int nb)
{
    if (na != nb)
        return 1;
    for (int i = 0; i < na; i++)
        if (strcmp(a[i].check, b[i].check) || a[i].status != b[i].status ||
            a[i].severity != b[i].severity)
            return 1;
    return 0;
}

static int cmd_run(struct agent *a)
{
    static struct health_result r[MAX_RESULTS], last[MAX_RESULTS];
    int nlast = -1;
    int64_t last_report = 0;
    mtc_error_t err = {""};
    if (need_address(a, "run"))
        return 2;
    int interval = a->interval_ms > 0 ? a->interval_ms : a->ctx.policy.interval_seconds * 1000;
    int64_t every = (int64_t)a->ctx.policy.report_every_seconds * 1000;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    log_msg(LOG_INFO, "mtc-agent: node %s, cluster %s, every %d ms", a->ctx.node, a->cluster,
            interval);
    while (!stopping) {
        int64_t t0 = mtc_now_ms();
        int n = health_run(&a->ctx, a->only, r, MAX_RESULTS, &err);
        if (n < 0)
            return fail("%s", err.text);
        int diff = changed(r, n, last, nlast);
        for (int i = 0; diff && i < n; i++)
            if (r[i].status != HEALTH_PASS)
                log_msg(LOG_WARNING, "%s %s: %s", health_status_name(r[i].status), r[i].check,
                        r[i].reason);
        if (diff || t0 - last_report >= every) {
            if (report(a, r, n, &err) == 0) {
                memcpy(last, r, sizeof(r[0]) * (size_t)n);
                nlast = n;
                last_report = t0;
            } else {
                log_msg(LOG_ERR, "%s", err.text); /* retried next pass */
            }
        }
        while (!stopping && mtc_now_ms() - t0 < interval)
            mtc_sleep_ms(interval - (int)(mtc_now_ms() - t0) < 100
                             ? interval - (int)(mtc_now_ms() - t0)
                             : 100);
    }
    log_msg(LOG_INFO, "mtc-agent: stopping");
    return 0;
}

static void say_rank(void *arg, int pid, int rank, char state, double for_s)
{
    const struct agent *a = arg;
    char who[32] = "a process";
    if (rank >= 0)
        snprintf(who, sizeof(who), "rank %d", rank);
    /* the run's log gets it (srun forwards it); mtcd's job monitor acts on it */
    printf("mtc: %s (pid %d on %s) is %s for %.0f s: hung\n", who, pid, a->ctx.node,
           state == 'T' ? "stopped" : "a zombie", for_s);
    fflush(stdout);
}

/* Beside a job with hang detection, one per node (the job script starts it
 * as an overlapping step): the job's stopped and zombie processes here. */
static int cmd_ranks(struct agent *a)
{
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    if (!job || !*a->ctx.node)
        return fail("ranks: runs as a step of the job (SLURM_JOB_ID, SLURMD_NODENAME)");
    struct health_rank_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return fail("out of memory");
    snprintf(w->job, sizeof(w->job), "%s", job);
    snprintf(w->node, sizeof(w->node), "%s", a->ctx.node);
    snprintf(w->own_step, sizeof(w->own_step), "%s", step ? step : "");
    w->after = a->after_s > 0 ? a->after_s : 5;
    int interval = a->interval_ms > 0 ? a->interval_ms : 1000;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    while (!stopping) {
        health_ranks_scan(w, (double)mtc_now_ms() / 1000.0, say_rank, a);
        for (int64_t t0 = mtc_now_ms(); !stopping && mtc_now_ms() - t0 < interval;)
            mtc_sleep_ms(50);
    }
    free(w);
    return 0;
}

/* The job script's MASTER_PORT: a port that binds on --addr (and the
 * wildcard) now, outside the ephemeral range, from --seed on (common/port.c). */
static int cmd_port(struct agent *a)
{
    mtc_error_t err = {""};
    struct mtc_port_rules *r = malloc(sizeof(*r));
    if (!r)
        return fail("out of memory");
    int p = mtc_port_rules_init(r, NULL, NULL, &err) < 0 ? -1
                                                         : mtc_port_pick(r, a->addr, a->seed, &err);
    free(r);
    if (p < 0)
        return fail("port: %s", err.text), 1;
    printf("%d\n", p);
    return 0;
}

static int cmd_checks(struct agent *a)
{
    for (const struct health_check *c = health_checks; c->name; c++) {
        int on = 0;
        for (int i = 0; i < a->ctx.policy.nchecks; i++)
            on |= !strcmp(a->ctx.policy.checks[i], c->name) ||
                  !strcmp(a->ctx.policy.checks[i], c->family);
        printf("%-14s %-7s %-8s %-3s %s\n", c->name, c->family, health_severity_name(c->severity),
               on ? (c->slow ? "pro" : "on") : "off", c->what);
    }
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(struct agent *);
    const char *help;
} commands[] = {
    {"check", cmd_check, "run the checks once; exit 1 when one FAILs"},
    {"run", cmd_run, "run the checks every interval and report them to mtcd"},
    {"checks", cmd_checks, "list the check table (name, family, severity, enabled, what)"},
    {"ranks", cmd_ranks, "watch a job's processes on this node: say which stop or turn zombie"},
    {"port", cmd_port,
     "print a port that binds on --addr, outside the ephemeral range (MASTER_PORT)"},
    {NULL, NULL, NULL},
};

static const char usage[] =
    "usage: mtc-agent check|run|checks|ranks|port [options]   (mtc-agent --version)\n"
    "  --config FILE        agent config (JSON; %n = $SLURMD_NODENAME)\n"
    "  --only NAME,...      only these checks or families\n"
    "  --json               print results as JSON (check)\n"
    "  --mode M             health|prolog|epilog (default from $SLURM_SCRIPT_CONTEXT)\n"
    "  --drain              on FAIL drain this node with scontrol (check)\n"
    "  --report             also send the results to mtcd (check)\n"
    "  --interval-ms N      loop period (run; default healthPolicy.intervalSeconds)\n"
    "  --after S            ranks: seconds a process stays stopped or zombie before it is said\n"
    "  --addr ADDR          port: the address the ranks bind (MASTER_ADDR; default: the wildcard)\n"
    "  --seed N             port: where the search starts (the job id)\n"
    "  --socket PATH | --url URL   mtcd address (token: $MTC_TOKEN)\n"
    "  --ca-file PEM        CA to trust for an https --url\n"
    "  --cluster ID --node NAME --project P --location L\n"
    "  --nvml LIB --kernel-log PATH --expected-gpus N --state-dir DIR\n"
    "  --home-dir D --local-dir D --checkpoint-dir D\n";

/* Options that set a string of struct agent; rebuild: the health runtime
 * reads it (kernel log, state dir) and must be made again. */
#define AT(m) offsetof(struct agent, m), sizeof(((struct agent *)0)->m)
static const struct str_opt {
    const char *name;
    size_t off, size;
    int rebuild;
} str_opts[] = {
    {"socket", AT(socket), 0},           {"url", AT(url), 0},
    {"cluster", AT(cluster), 0},         {"node", AT(ctx.node), 0},
    {"project", AT(project), 0},         {"location", AT(location), 0},
    {"nvml", AT(ctx.nvml_library), 0},   {"kernel-log", AT(ctx.kernel_log), 1},
    {"state-dir", AT(ctx.state_dir), 1}, {"home-dir", AT(ctx.home_dir), 0},
    {"local-dir", AT(ctx.local_dir), 0}, {"checkpoint-dir", AT(ctx.checkpoint_dir), 0},
    {"ca-file", AT(ca_file), 0},         {"addr", AT(addr), 0},
};
#define N_STR_OPTS (sizeof(str_opts) / sizeof(str_opts[0]))

/* Options that switch an int of struct agent on: --json, --drain, --report. */
#define FLAG(m)                                                                                    \
    {                                                                                              \
#m, offsetof(struct agent, m)                                                              \
    }
static const struct flag_opt {
    const char *name;
    size_t off;
} flag_opts[] = {FLAG(json), FLAG(drain), FLAG(report)};
#define N_FLAG_OPTS (sizeof(flag_opts) / sizeof(flag_opts[0]))

/* The rest take a value with a rule of its own. */
enum {
    O_CONFIG = 1,
    O_ONLY,
    O_MODE,
    O_INTERVAL,
    O_GPUS,
    O_AFTER,
    O_SEED,
    O_FLAG = 100,
    O_STR = 200
};

/* An integer option from lo to hi; 0, or 2 after saying why. */
static int int_opt(const char *v, const char *opt, int lo, int hi, int *out)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < lo || n > hi)
        return fail("--%s: must be an integer from %d to %d", opt, lo, hi);
    *out = (int)n;
    return 0;
}

/* Phase 1: what the environment says (defaults, Slurm's script context, token). */
static int agent_defaults(struct agent *a)
{
    mtc_error_t err = {""};
    log_open(NULL, "mtc-agent", LOG_INFO);
    if (health_ctx_init(&a->ctx, &err) < 0)
        return fail("%s", err.text);
    snprintf(a->project, sizeof(a->project), "local");
    snprintf(a->location, sizeof(a->location), "local");
    const char *ctxenv = getenv("SLURM_SCRIPT_CONTEXT");
    if (ctxenv && !strncmp(ctxenv, "prolog", 6))
        a->ctx.mode = HEALTH_MODE_PROLOG;
    else if (ctxenv && !strncmp(ctxenv, "epilog", 6))
        a->ctx.mode = HEALTH_MODE_EPILOG;
    const char *tok = getenv("MTC_TOKEN");
    if (tok)
        snprintf(a->token, sizeof(a->token), "%s", tok);
    return 0;
}

/* One option with a rule of its own. 0, or 2 after saying why. */
static int other_opt(struct agent *a, int o, const char *v)
{
    int m;
    switch (o) {
    case O_CONFIG: /* read before the others */
        return 0;
    case O_ONLY:
        a->only = v;
        return 0;
    case O_MODE:
        if ((m = schema_enum_parse(&health_mode_enum, v, SCHEMA_ENUM_ANYCASE)) < 0)
            return fail("--mode: must be health, prolog or epilog");
        a->ctx.mode = (enum health_mode)m;
        return 0;
    case O_INTERVAL:
        return int_opt(v, "interval-ms", 10, 3600000, &a->interval_ms);
    case O_GPUS:
        return int_opt(v, "expected-gpus", 0, 64, &a->ctx.expected_gpus);
    case O_AFTER:
        if (int_opt(v, "after", 1, 86400, &m) != 0)
            return 2;
        a->after_s = m;
        return 0;
    case O_SEED: {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        if (!*v || *end || *v == '-' || errno)
            return fail("--seed: must be a non-negative integer");
        a->seed = (unsigned long)n;
        return 0;
    }
    }
    return 2;
}

/* Phase 2: the options; --config first, so flags given with it override the
 * file. *rebuild: an option changed what the health runtime reads. */
static int agent_options(struct agent *a, int argc, char **argv, int *rebuild)
{
    static const struct option others[] = {
        {"config", 1, 0, O_CONFIG},      {"only", 1, 0, O_ONLY},
        {"mode", 1, 0, O_MODE},          {"interval-ms", 1, 0, O_INTERVAL},
        {"expected-gpus", 1, 0, O_GPUS}, {"after", 1, 0, O_AFTER},
        {"seed", 1, 0, O_SEED}};
    struct option opts[sizeof(others) / sizeof(others[0]) + N_FLAG_OPTS + N_STR_OPTS + 1];
    size_t n = 0;
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        opts[n++] = others[i];
    for (size_t i = 0; i < N_FLAG_OPTS; i++)
        opts[n++] = (struct option){flag_opts[i].name, 0, 0, O_FLAG + (int)i};
    for (size_t i = 0; i < N_STR_OPTS; i++)
        opts[n++] = (struct option){str_opts[i].name, 1, 0, O_STR + (int)i};
    opts[n] = (struct option){0, 0, 0, 0};

    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--config") && load_config(a, argv[i + 1]) < 0)
            return 2;
    int o;
    optind = 2;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o >= O_STR && o < O_STR + (int)N_STR_OPTS) {
            const struct str_opt *so = &str_opts[o - O_STR];
            if (strlen(optarg) >= so->size)
                return fail("--%s: too long", so->name);
            memcpy((char *)a + so->off, optarg, strlen(optarg) + 1);
            *rebuild |= so->rebuild;
        } else if (o >= O_FLAG && o < O_FLAG + (int)N_FLAG_OPTS) {
            *(int *)(void *)((char *)a + flag_opts[o - O_FLAG].off) = 1;
        } else if (o == '?' || o == ':') {
            return fail("unknown or incomplete option \"%s\" (mtc-agent --help)", argv[optind - 1]);
        } else if (other_opt(a, o, optarg) != 0) {
            return 2;
        }
    }
    if (optind < argc)
        return fail("unexpected argument \"%s\"", argv[optind]);
    return 0;
}

/* Phase 3: names checked, the runtime rebuilt if needed, the node named. */
static int agent_finish(struct agent *a, int rebuild)
{
    mtc_error_t err = {""};
    /* names reach URLs: validate them like every other name */
    if (!mtc_name_valid(a->project, 63) || !mtc_name_valid(a->location, 63) ||
        (*a->cluster && !mtc_name_valid(a->cluster, 10)))
        return fail("project, location and cluster id must match [a-z][a-z0-9-]*");
    if (rebuild) { /* the kernel log or state dir changed after init: reopen */
        health_rt_destroy(a->ctx.rt);
        if (!(a->ctx.rt = health_rt_create(&a->ctx, &err)))
            return fail("%s", err.text);
    }
    if (!*a->ctx.node) {
        const char *n = getenv("SLURMD_NODENAME");
        snprintf(a->ctx.node, sizeof(a->ctx.node), "%s", n ? n : "");
    }
    return 0;
}

/* The usage and the command table on f; returns status. */
static int print_usage(FILE *f, int status)
{
    fputs(usage, f);
    for (int i = 0; commands[i].name; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
    return status;
}

int main(int argc, char **argv)
{
    static struct agent a;
    if (argc < 2)
        return print_usage(stderr, 2);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
        return print_usage(stdout, 0);
    if (!strcmp(argv[1], "--version"))
        return printf("mtc-agent %s\n", mtc_version()), 0;
    int ci = 0, rebuild = 0;
    while (commands[ci].name && strcmp(commands[ci].name, argv[1]) != 0)
        ci++;
    if (!commands[ci].name)
        return fail("unknown command \"%s\" (check, run, checks, ranks, port)", argv[1]);
    for (int i = 2; i < argc; i++) /* COMMAND --help: the same usage, nothing run */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return print_usage(stdout, 0);
    if (agent_defaults(&a) != 0 || agent_options(&a, argc, argv, &rebuild) != 0 ||
        agent_finish(&a, rebuild) != 0)
        return 2;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = commands[ci].fn(&a);
    curl_global_cleanup();
    health_ctx_release(&a.ctx);
    return rc;
}
