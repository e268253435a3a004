/* healthscan: `mtc healthscan CLUSTER -c CHECK…` — starts a cluster's
 * :healthScan operation, waits for it and prints its report as a per-node and
 * per-pair table (the JSON with --json); exit 1 when the scan failed. */
#include "cluster/cluster.h"
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char use[] =
    "mtc healthscan CLUSTER -c gpu|collective|straggler|all [-c …] [-n NODELIST] "
    "[--partition P] [--drain-bad-nodes] [--force] [--max-bytes N] [--microbatches N] "
    "[--fail-fraction F] [--burn-in-seconds S] [--no-wait] [--json]";

/* The figures of a result: its numbers as "key=value", space separated. */
static void figures(const json_t *res, char *buf, size_t len)
{
    const char *k;
    json_t *v;
    size_t n = 0;
    *buf = '\0';
    json_object_foreach((json_t *)res, k, v)
    {
        if (!json_is_number(v) || n >= len)
            continue;
        n += (size_t)snprintf(buf + n, len - n, "%s%s=%.4g", n ? " " : "", k, json_number_value(v));
    }
}

static void print_report(const char *op, const json_t *r)
{
    size_t i, k;
    json_t *n, *res;
    printf("health scan %s: %s (checks", op, json_string_value(json_object_get(r, "state")));
    json_array_foreach(json_object_get(r, "checks"), i, n) printf(" %s", json_string_value(n));
    printf("; Slurm job %s)\n", json_string_value(json_object_get(r, "jobId")));
    printf("%-22s %-7s %-16s %s\n", "NODE", "STATE", "CHECK", "REASON / FIGURES");
    json_array_foreach(json_object_get(r, "nodes"), i, n)
    {
        const char *node = json_string_value(json_object_get(n, "node"));
        json_t *results = json_object_get(n, "results");
        if (json_array_size(results) == 0)
            printf("%-22s %-7s %-16s %s\n", node, json_string_value(json_object_get(n, "state")),
                   "-", json_string_value(json_object_get(n, "reason")));
        json_array_foreach(results, k, res)
        {
            char fig[256], what[32];
            const char *reason = json_string_value(json_object_get(res, "reason"));
            figures(res, fig, sizeof(fig));
            /* the check, and its mode when it has several (collective/pairs) */
            const char *check = json_string_value(json_object_get(res, "check"));
            const char *mode = json_string_value(json_object_get(res, "mode"));
            snprintf(what, sizeof(what), "%s%s%s", check,
                     strcmp(check, "collective") == 0 ? "/" : "",
                     strcmp(check, "collective") == 0 ? mode : "");
            printf("%-22s %-7s %-16s %s%s%s\n", k ? "" : node,
                   json_string_value(json_object_get(res, "state")), what, reason ? reason : "",
                   reason && *fig ? "; " : "", fig);
        }
        if (json_is_true(json_object_get(n, "drained")))
            printf("%-22s drained: healthscan: %s\n", "",
                   json_string_value(json_object_get(n, "reason")));
    }
    json_t *pairs = json_object_get(r, "pairs");
    if (json_array_size(pairs) > 0)
        printf("\n%-45s %-7s %-9s %-10s %s\n", "PAIR", "STATE", "GB/s", "THRESHOLD", "REASON");
    json_array_foreach(pairs, i, n)
    {
        json_t *ab = json_object_get(n, "nodes");
        char pair[64];
        snprintf(pair, sizeof(pair), "%s - %s", json_string_value(json_array_get(ab, 0)),
                 json_string_value(json_array_get(ab, 1)));
        const char *reason = json_string_value(json_object_get(n, "reason"));
        json_t *thr = json_object_get(n, "thresholdGBps");
        char t[32] = "-";
        if (json_is_number(thr))
            snprintf(t, sizeof(t), "%.3f", json_number_value(thr));
        printf("%-45s %-7s %-9.3f %-10s %s\n", pair, json_string_value(json_object_get(n, "state")),
               json_number_value(json_object_get(n, "busGBps")), t, reason ? reason : "");
    }
    json_t *ring = json_object_get(r, "ring");
    if (json_array_size(ring) > 0)
        printf("\n%-12s %-22s %s\n", "RING BYTES", "ALL_REDUCE BUS GB/s", "ALL_GATHER BUS GB/s");
    json_array_foreach(ring, i, n)
        printf("%-12lld %-22.3f %.3f\n", (long long)json_integer_value(json_object_get(n, "bytes")),
               json_number_value(json_object_get(n, "allReduceBusGBps")),
               json_number_value(json_object_get(n, "allGatherBusGBps")));
    json_array_foreach(json_object_get(r, "scans"), i, n)
    {
        const char *st = json_string_value(json_object_get(n, "state"));
        if (strcmp(st, "PASS") != 0 && json_object_get(n, "reason"))
            printf("%s (%s): %s: %s\n", json_string_value(json_object_get(n, "check")),
                   json_string_value(json_object_get(n, "mode")), st,
                   json_string_value(json_object_get(n, "reason")));
    }
}

int cmd_healthscan(struct cli *c, int argc, char **argv)
{
    static const struct option opts[] = {{"check", required_argument, 0, 'c'},
                                         {"nodes", required_argument, 0, 'n'},
                                         {"partition", required_argument, 0, 'p'},
                                         {"drain-bad-nodes", no_argument, 0, 'd'},
                                         {"force", no_argument, 0, 'F'},
                                         {"max-bytes", required_argument, 0, 'B'},
                                         {"microbatches", required_argument, 0, 'M'},
                                         {"fail-fraction", required_argument, 0, 'f'},
                                         {"burn-in-seconds", required_argument, 0, 'S'},
                                         {"no-wait", no_argument, 0, 'W'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    json_t *body = json_pack("{s:[]}", "checks");
    int o, no_wait = 0;
    optind = 1;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "c:n:p:h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (o) {
        case 'c': /* -c a,b or -c a -c b */
            for (char *save = NULL, *t = strtok_r(optarg, ",", &save); t;
                 t = strtok_r(NULL, ",", &save))
                json_array_append_new(json_object_get(body, "checks"), json_string(t));
            break;
        case 'n':
            json_object_set_new(body, "nodes", json_pack("[s]", optarg));
            break;
        case 'p':
            json_object_set_new(body, "partition", json_string(optarg));
            break;
        case 'd':
            json_object_set_new(body, "drainBadNodes", json_true());
            break;
        case 'F':
            json_object_set_new(body, "force", json_true());
            break;
        case 'B':
        case 'M':
        case 'S':
            json_object_set_new(body,
                                o == 'B'   ? "maxBytes"
                                : o == 'M' ? "microbatches"
                                           : "burnInSeconds",
                                json_integer(strtoll(optarg, &end, 10)));
            if (*end || !*optarg) {
                json_decref(body);
                return cli_fail("--%s %s: not an integer",
                                o == 'B'   ? "max-bytes"
                                : o == 'M' ? "microbatches"
                                           : "burn-in-seconds",
                                optarg),
                       2;
            }
            break;
        case 'f':
            json_object_set_new(body, "failFraction", json_real(strtod(optarg, &end)));
            if (*end || !*optarg) {
                json_decref(body);
                return cli_fail("--fail-fraction %s: not a number", optarg), 2;
            }
            break;
        case 'W':
            no_wait = 1;
            break;
        case 'j':
            c->json = 1;
            break;
        case 'h':
            json_decref(body);
            return printf("usage: %s\n", use), 0;
        default:
            json_decref(body);
            return cli_fail("unknown option \"%s\"\nusage: %s", argv[optind - 1], use), 2;
        }
    }
    if (optind != argc - 1 || json_array_size(json_object_get(body, "checks")) == 0) {
        json_decref(body);
        return cli_fail("usage: %s", use), 2;
    }
    const char *id = argv[optind];
    if (!cluster_id_valid(id)) {
        json_decref(body);
        return cli_fail("cluster id \"%s\": must match ^[a-z][a-z0-9]{0,9}$", id);
    }
    char path[512];
    snprintf(path, sizeof(path),
             "/v1beta1/projects/%s/locations/%s/modelDevelopmentClusters/%s:healthScan", c->project,
             c->location, id);
    mtc_error_t err = {""};
    json_t *op = NULL, *final = NULL;
    int rc = cli_call_ok(c, "POST", path, body, &op, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    char name[256];
    snprintf(name, sizeof(name), "%s", json_string_value(json_object_get(op, "name")));
    if (no_wait) {
        c->json ? cli_print_json(op) : (void)printf("operation %s started\n", name);
        json_decref(op);
        return 0;
    }
    if (cli_wait_op(c, name, 0, &final, &err) < 0) {
        json_decref(op);
        return cli_fail("%s", err.text);
    }
    json_decref(op);
    json_t *e = json_object_get(final, "error");
    json_t *r = json_object_get(final, "response");
    const char *st = json_string_value(json_object_get(r, "state"));
    if (c->json)
        cli_print_json(final);
    else if (e)
        cli_fail("health scan %s failed: %s", name,
                 json_string_value(json_object_get(e, "message")));
    else
        print_report(strrchr(name, '/') ? strrchr(name, '/') + 1 : name, r);
    rc = e || !st || strcmp(st, "FAIL") == 0 ? 1 : 0;
    json_decref(final);
    return rc;
}
