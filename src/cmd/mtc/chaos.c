/* chaos: `mtc chaos CLUSTER --job JOB --fault node|hang|kill-rank|slurmd
 * --every DURATION --count N [--seed S]` — prove a job survives faults: mtcd
 * injects each one (a trainingJob's :injectFault, admin only; an event of
 * the cluster each), a line here for each; then the wait for the job's end
 * and what the faults cost it: its state, restarts, steps lost and
 * repeated, goodput and the breakdown of its time (the trainingJob's
 * progress). Exit 0 when the job COMPLETED. */
#include "cluster/cluster.h"
#include "cli.h"
#include "jobs/jobs.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char use[] =
    "mtc chaos CLUSTER --job JOB --fault node|hang|kill-rank|slurmd [--every DURATION] "
    "[--count N] [--seed S] [--node NODE] [--timeout DURATION] [--json]";
static const char help[] =
    "  --job JOB          the trainingJob: its id, its Slurm job id or its experiment name\n"
    "  --fault F          node: one of the job's nodes reported faulty (drained, the job\n"
    "                     requeued, the node rebooted); hang: one rank stopped (SIGSTOP);\n"
    "                     kill-rank: one rank killed (SIGKILL); slurmd: the node's slurmd\n"
    "                     killed -9\n"
    "  --every DURATION   before each fault, from the job seen running (default 60s;\n"
    "                     20s, 2m, 1h, or seconds)\n"
    "  --count N          faults to inject (default 1)\n"
    "  --seed S           picks the nodes and ranks: the same seed, the same picks\n"
    "                     (default: a random one, printed)\n"
    "  --node NODE        always this node of the job\n"
    "  --timeout DURATION the longest wait for the job to run again and to end (default 1h)\n"
    "needs an admin (the unix socket's owner, or an admin token); exit 0 when the job\n"
    "COMPLETED.\n";

#define POLL_MS 1000

struct chaos {
    struct cli *c;
    const char *cluster;
    char job[64];   /* the trainingJob's id */
    char path[512]; /* …/trainingJobs/<job> */
    int fault, count, seed;
    const char *node;
    int64_t every_ms, timeout_ms, t0;
    json_t *faults; /* what each injection answered */
};

/* "[+42s] " before a line: time since the chaos began. */
static void stamp(const struct chaos *x)
{
    printf("[+%llds] ", (long long)((mtc_now_ms() - x->t0) / 1000));
}

/* A flag's value as a duration into *ms (2: the exit status, said why). */
static int duration_arg(const char *flag, const char *v, int64_t *ms)
{
    if (mtc_duration_ms(v, ms) == 0)
        return 0;
    return cli_fail("--%s \"%s\": not a duration (20s, 2m, 1h, or seconds; at most 30 days)",
                    flag, v),
           2;
}

/* A flag's value as an integer from lo to hi into *out (2 on error). */
static int int_arg(const char *flag, const char *v, long lo, long hi, int *out)
{
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < lo || n > hi)
        return cli_fail("--%s \"%s\": want an integer from %ld to %ld", flag, v, lo, hi), 2;
    *out = (int)n;
    return 0;
}

static int parse(int argc, char **argv, struct chaos *x)
{
    static const struct option opts[] = {
        {"job", required_argument, 0, 'j'},   {"fault", required_argument, 0, 'f'},
        {"every", required_argument, 0, 'e'}, {"count", required_argument, 0, 'n'},
        {"seed", required_argument, 0, 's'},  {"node", required_argument, 0, 'N'},
        {"timeout", required_argument, 0, 'T'}, {"json", no_argument, 0, 'J'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    const char *job = NULL, *fault = NULL;
    int o, rc = 0;
    optind = 1;
    opterr = 0;
    while (rc == 0 && (o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (o) {
        case 'j':
            job = optarg;
            break;
        case 'f':
            fault = optarg;
            break;
        case 'e':
            rc = duration_arg("every", optarg, &x->every_ms);
            break;
        case 'T':
            rc = duration_arg("timeout", optarg, &x->timeout_ms);
            if (rc == 0 && x->timeout_ms == 0)
                return cli_fail("--timeout 0: the wait for the job needs some time"), 2;
            break;
        case 'n':
            rc = int_arg("count", optarg, 1, 1000, &x->count);
            break;
        case 's':
            rc = int_arg("seed", optarg, 0, 2147483647, &x->seed);
            break;
        case 'N':
            x->node = optarg;
            break;
        case 'J':
            x->c->json = 1;
            break;
        case 'h':
            printf("usage: %s\n%s", use, help);
            return -1;
        case ':':
            return cli_fail("%s needs a value (mtc chaos --help)", argv[optind - 1]), 2;
        default:
            return cli_fail("unknown option \"%s\" (mtc chaos --help)", argv[optind - 1]), 2;
        }
    }
    if (rc)
        return rc;
    char names[80];
    if (optind != argc - 1)
        return cli_fail("usage: %s", use), 2;
    x->cluster = argv[optind];
    if (!cluster_id_valid(x->cluster))
        return cli_fail("cluster id \"%s\": must match ^[a-z][a-z0-9]{0,9}$", x->cluster), 2;
    if (!job || !*job)
        return cli_fail("--job JOB is required: the trainingJob to put faults into"), 2;
    if (!fault)
        return cli_fail("--fault is required: one of %s",
                        schema_enum_list(&jobs_fault_enum, names, sizeof(names))),
               2;
    if ((x->fault = schema_enum_parse(&jobs_fault_enum, fault, 0)) < 0)
        return cli_fail("--fault \"%s\": unknown fault (one of %s)", fault,
                        schema_enum_list(&jobs_fault_enum, names, sizeof(names))),
               2;
    if (x->node && !mtc_name_valid(x->node, 63))
        return cli_fail("--node \"%s\": not a node name", x->node), 2;
    if (strlen(job) >= sizeof(x->job) || strpbrk(job, "/?#%&\\ "))
        return cli_fail("--job \"%s\": not a trainingJob id, Slurm job id or experiment name", job),
               2;
    snprintf(x->job, sizeof(x->job), "%s", job);
    return 0;
}

/* The trainingJob --job names: its id, else the newest job of the cluster
 * whose Slurm job id or experiment name it is. x->job and x->path set. 0, or 1. */
static int resolve_job(struct chaos *x)
{
    char jobs[400];
    snprintf(jobs, sizeof(jobs),
             "/v1beta1/projects/%s/locations/%s/modelDevelopmentClusters/%s/trainingJobs",
             x->c->project, x->c->location, x->cluster);
    mtc_error_t err = {""};
    json_t *all = cli_list_all(x->c, jobs, "trainingJobs", &err), *j, *found = NULL;
    if (!all)
        return cli_fail("%s", err.text);
    size_t i;
    json_array_foreach(all, i, j)
    {
        const char *id = mtc_json_str(j, "id"), *slurm = mtc_json_str(j, "slurmJobId"),
                   *exp = mtc_json_str(j, "experimentName");
        if (id && strcmp(id, x->job) == 0) {
            found = j;
            break;
        }
        if ((slurm && strcmp(slurm, x->job) == 0) || (exp && strcmp(exp, x->job) == 0))
            found = j; /* the list is oldest first: the newest wins */
    }
    if (found)
        snprintf(x->job, sizeof(x->job), "%s", mtc_json_str(found, "id"));
    json_decref(all);
    if (!found)
        return cli_fail("cluster %s has no trainingJob \"%s\" (an id, a Slurm job id or an "
                        "experiment name)",
                        x->cluster, x->job);
    snprintf(x->path, sizeof(x->path), "%s/%s", jobs, x->job);
    return 0;
}

/* The trainingJob now (caller decrefs), or NULL after saying why. */
static json_t *get_job(struct chaos *x)
{
    mtc_error_t err = {""};
    json_t *j = NULL;
    if (cli_call_ok(x->c, "GET", x->path, NULL, &j, &err) < 0)
        cli_fail("%s", err.text);
    return j;
}

/* Wait until the job is RUNNING (1) or final (0), at most until deadline
 * (-1 after saying so, or when mtcd cannot be asked). */
static int wait_running(struct chaos *x, int64_t deadline, char *last, size_t len)
{
    for (;;) {
        json_t *j = get_job(x);
        if (!j)
            return -1;
        const char *st = mtc_json_str_or(j, "state", "");
        int r = strcmp(st, "RUNNING") == 0 ? 1 : jobs_state_final(st) ? 0 : -2;
        if (strcmp(st, last) != 0 && !x->c->json) {
            stamp(x);
            printf("trainingJob %s: %s\n", x->job, st);
            fflush(stdout);
        }
        snprintf(last, len, "%s", st);
        json_decref(j);
        if (r >= 0)
            return r;
        if (mtc_now_ms() >= deadline)
            return cli_fail("trainingJob %s still %s after %lld s; giving up", x->job, last,
                            (long long)(x->timeout_ms / 1000)),
                   -1;
        mtc_sleep_ms(POLL_MS);
    }
}

/* :injectFault's body for fault number k. */
static json_t *fault_body(const struct chaos *x, int k, int validate_only)
{
    json_t *body = json_pack("{s:s, s:i, s:i}", "fault", schema_enum_name(&jobs_fault_enum, x->fault),
                             "seed", x->seed, "index", k);
    if (x->node)
        json_object_set_new(body, "node", json_string(x->node));
    if (validate_only)
        json_object_set_new(body, "validateOnly", json_true());
    return body;
}

/* Before anything: may this caller inject faults (an admin), into this job?
 * 0 with what the job lacks to survive them into warning ("" when nothing),
 * or 1 after saying why. */
static int may_inject(struct chaos *x, char *warning, size_t len)
{
    char path[600];
    snprintf(path, sizeof(path), "%s:injectFault", x->path);
    json_t *body = fault_body(x, 1, 1), *out = NULL;
    mtc_error_t err = {""};
    int rc = cli_call_ok(x->c, "POST", path, body, &out, &err);
    snprintf(warning, len, "%s", rc == 0 ? mtc_json_str_or(out, "warning", "") : "");
    json_decref(body);
    json_decref(out);
    return rc < 0 ? cli_fail("%s", err.text) : 0;
}

/* Inject fault number k: 1 done, 0 the job ended first, -1 an error (said). */
static int inject(struct chaos *x, int k, char *state, size_t len)
{
    json_t *body = fault_body(x, k, 0);
    char path[600];
    snprintf(path, sizeof(path), "%s:injectFault", x->path);
    int64_t deadline = mtc_now_ms() + x->timeout_ms;
    int rc = -1;
    for (;;) {
        int r = wait_running(x, deadline, state, len);
        if (r <= 0) {
            rc = r;
            break;
        }
        mtc_error_t err = {""};
        json_t *out = NULL;
        int http = cli_call(x->c, "POST", path, body, &out, &err);
        const json_t *e = json_object_get(out, "error");
        if (http == 200) {
            if (!x->c->json) {
                stamp(x);
                printf("fault %d/%d: %s on %s: %s\n", k, x->count, mtc_json_str(out, "fault"),
                       mtc_json_str(out, "node"), mtc_json_str(out, "hit"));
                fflush(stdout);
            }
            json_array_append(x->faults, out);
            json_decref(out);
            rc = 1;
            break;
        }
        /* not running after all, its ranks not started yet, its node still
         * being repaired: try again while the job lives */
        int again =
            http > 0 && strcmp(mtc_json_str_or(e, "status", ""), "FAILED_PRECONDITION") == 0;
        if (!again) {
            cli_fail("fault %d: %s", k,
                     http < 0 ? err.text
                              : mtc_json_str_or(e, "message", "unexpected reply from mtcd"));
            json_decref(out);
            break;
        }
        json_decref(out);
        if (mtc_now_ms() >= deadline) {
            cli_fail("fault %d: %s (still, after %lld s)", k, mtc_json_str(e, "message"),
                     (long long)(x->timeout_ms / 1000));
            break;
        }
        mtc_sleep_ms(POLL_MS);
    }
    json_decref(body);
    return rc;
}

/* The job's end and what the faults cost it. */
static void print_summary(const struct chaos *x, const json_t *j, int made)
{
    const json_t *p = json_object_get(j, "progress"), *bd = json_object_get(p, "breakdown"), *v;
    const char *k, *exp = mtc_json_str(j, "experimentName");
    printf("trainingJob %s (experiment %s, Slurm job %s): %s after %d of %d %s fault(s), seed "
           "%d\n",
           x->job, exp ? exp : "-", mtc_json_str_or(j, "slurmJobId", "-"), mtc_json_str(j, "state"),
           made, x->count, schema_enum_name(&jobs_fault_enum, x->fault), x->seed);
    printf("  restarts: %lld (Slurm requeued it %lld times)\n",
           (long long)json_integer_value(json_object_get(p, "restarts")),
           (long long)json_integer_value(json_object_get(j, "restartCount")));
    if (!p) {
        printf("  no progress recorded (the program wrote no metrics rows or events)\n");
        return;
    }
    printf("  step %lld; steps repeated %lld, steps lost %lld\n",
           (long long)json_integer_value(json_object_get(p, "step")),
           (long long)json_integer_value(json_object_get(p, "stepsRepeated")),
           (long long)json_integer_value(json_object_get(p, "stepsLost")));
    printf("  goodput %.1f%% (productive %.1f s of %.1f s)\n",
           100 * json_number_value(json_object_get(p, "goodput")),
           json_number_value(json_object_get(p, "productiveSeconds")),
           json_number_value(json_object_get(p, "wallSeconds")));
    if (json_object_size(bd))
        printf("  breakdown:\n");
    json_object_foreach((json_t *)bd, k, v)
    {
        if (json_is_number(v))
            printf("    %-20s %10.1f\n", k, json_number_value(v));
        else {
            char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            printf("    %-20s %10s\n", k, t ? t : "?");
            free(t);
        }
    }
}

int cmd_chaos(struct cli *c, int argc, char **argv)
{
    struct chaos x = {.c = c, .count = 1, .seed = -1, .every_ms = 60000, .timeout_ms = 3600000};
    int rc = parse(argc, argv, &x);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (x.seed < 0) { /* shown, so that the same faults can be asked for again */
        char hex[9] = "0";
        mtc_random_hex(hex, 4);
        x.seed = (int)(strtoul(hex, NULL, 16) & 0x7fffffff);
    }
    char warning[256];
    if (resolve_job(&x) || may_inject(&x, warning, sizeof(warning)))
        return 1;
    x.t0 = mtc_now_ms();
    x.faults = json_array();
    if (!c->json) {
        printf("chaos: %d %s fault(s) into trainingJob %s of cluster %s, every %.1f s, seed %d\n",
               x.count, schema_enum_name(&jobs_fault_enum, x.fault), x.job, x.cluster,
               (double)x.every_ms / 1000, x.seed);
        if (*warning) /* a proof that must fail: said at once, not after the timeout */
            printf("note: %s\n", warning);
        fflush(stdout);
    }
    char state[32] = "";
    int made = 0, r = 1;
    for (int k = 1; k <= x.count && r == 1; k++) {
        /* every: from the job seen running (the first) or the fault before */
        if ((r = wait_running(&x, mtc_now_ms() + x.timeout_ms, state, sizeof(state))) != 1)
            break;
        for (int64_t left = x.every_ms; left > 0; left -= 1000000000)
            mtc_sleep_ms((int)(left < 1000000000 ? left : 1000000000));
        r = inject(&x, k, state, sizeof(state));
        made += r == 1;
    }
    if (r < 0) {
        json_decref(x.faults);
        return 1;
    }
    if (made < x.count && !c->json) {
        stamp(&x);
        printf("the job ended (%s) before fault %d\n", state, made + 1);
    }
    /* the end: final, or the timeout */
    json_t *j = NULL;
    for (int64_t end = mtc_now_ms() + x.timeout_ms;; mtc_sleep_ms(2 * POLL_MS)) {
        json_decref(j);
        if (!(j = get_job(&x))) {
            json_decref(x.faults);
            return 1;
        }
        const char *st = mtc_json_str_or(j, "state", "");
        if (strcmp(st, state) != 0 && !c->json) {
            stamp(&x);
            printf("trainingJob %s: %s\n", x.job, st);
        }
        snprintf(state, sizeof(state), "%s", st);
        if (jobs_state_final(st) || mtc_now_ms() >= end)
            break;
    }
    int completed = strcmp(state, "COMPLETED") == 0;
    if (c->json) {
        json_t *o = json_pack("{s:s, s:i, s:i, s:i, s:O, s:O}", "fault",
                              schema_enum_name(&jobs_fault_enum, x.fault), "count", x.count,
                              "seed", x.seed, "injected", made, "faults", x.faults, "trainingJob", j);
        cli_print_json(o);
        json_decref(o);
    } else
        print_summary(&x, j, made);
    if (!jobs_state_final(state))
        cli_fail("trainingJob %s still %s after %lld s", x.job, state,
                 (long long)(x.timeout_ms / 1000));
    json_decref(j);
    json_decref(x.faults);
    return completed ? 0 : 1;
}
