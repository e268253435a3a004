/* cluster: `mtc cluster create|get|list|update|delete` and `mtc operations`. */
#include "cli.h"
#include "cluster/cluster.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void clusters_path(struct cli *c, char *buf, size_t len, const char *id, const char *suffix)
{
    snprintf(buf, len, "/v1beta1/projects/%s/locations/%s/modelDevelopmentClusters%s%s%s",
             c->project, c->location, id ? "/" : "", id ? id : "", suffix ? suffix : "");
}

static json_t *load_spec(const char *file, mtc_error_t *err)
{
    json_error_t jerr;
    json_t *j = strcmp(file, "-") == 0 ? json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr)
                                       : json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
    if (!j)
        errprintf(err, "%s: %s (line %d)", file, jerr.text, jerr.line);
    else if (!json_is_object(j)) {
        errprintf(err, "%s: a cluster spec must be a JSON object", file);
        json_decref(j);
        j = NULL;
    }
    return j;
}

/* "cluster demo RUNNING (2 nodes, partitions: a3m)" from a cluster JSON. */
static void summary(const json_t *cl, char *buf, size_t len)
{
    const char *name = json_string_value(json_object_get(cl, "name"));
    const char *id = name && strrchr(name, '/') ? strrchr(name, '/') + 1 : "?";
    const char *state =
        json_string_value(json_object_get(json_object_get(cl, "clusterStatus"), "state"));
    char *parts = cluster_spec_partitions(cl);
    int n = cluster_spec_node_count(cl);
    snprintf(buf, len, "cluster %s %s (%d node%s, partitions: %s)", id, state ? state : "?", n,
             n == 1 ? "" : "s", parts && *parts ? parts : "none");
    free(parts);
}

/* Print the outcome of a (finished or not) operation; exit status. */
static int report_op(struct cli *c, json_t *op, int wait)
{
    mtc_error_t err = {""};
    const char *name = json_string_value(json_object_get(op, "name"));
    json_t *final = NULL;
    if (wait && !json_is_true(json_object_get(op, "done"))) {
        if (cli_wait_op(c, name, 0, &final, &err) < 0)
            return cli_fail("%s", err.text);
        op = final;
    }
    int rc = 0;
    if (c->json) {
        cli_print_json(op);
    } else if (!json_is_true(json_object_get(op, "done"))) {
        printf("operation %s started\n", name);
    } else if (json_object_get(op, "error")) {
        rc = cli_fail("operation %s failed: %s", name,
                      json_string_value(json_object_get(json_object_get(op, "error"), "message")));
    } else {
        json_t *resp = json_object_get(op, "response");
        char line[512] = "cluster deleted";
        if (json_object_get(resp, "name"))
            summary(resp, line, sizeof(line));
        else if (json_object_get(resp, "nodes"))
            snprintf(line, sizeof(line), "remediation finished (see `mtc cluster nodes`)");
        printf("operation %s done: %s\n", name, line);
    }
    if (c->json && json_object_get(op, "error"))
        rc = 1;
    json_decref(final);
    return rc;
}

static const struct option write_opts[] = {{"file", required_argument, 0, 'f'},
                                           {"id", required_argument, 0, 'i'},
                                           {"update-mask", required_argument, 0, 'm'},
                                           {"no-wait", no_argument, 0, 'n'},
                                           {"json", no_argument, 0, 'j'},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};

struct write_args {
    const char *file, *id, *mask;
    int no_wait;
};

/* Parse options of create/update/delete; positional ID allowed. -1 on error, 1 on --help. */
static int parse_write(struct cli *c, int argc, char **argv, struct write_args *a, const char *use)
{
    int o;
    optind = 0;
    while ((o = getopt_long(argc, argv, "f:h", write_opts, NULL)) != -1) {
        switch (o) {
        case 'f':
            a->file = optarg;
            break;
        case 'i':
            a->id = optarg;
            break;
        case 'm':
            a->mask = optarg;
            break;
        case 'n':
            a->no_wait = 1;
            break;
        case 'j':
            c->json = 1;
            break;
        case 'h':
            printf("usage: %s\n", use);
            return 1;
        default:
            fprintf(stderr, "usage: %s\n", use);
            return -1;
        }
    }
    if (optind < argc && !a->id)
        a->id = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "mtc: unexpected argument \"%s\"\nusage: %s\n", argv[optind], use);
        return -1;
    }
    return 0;
}

/* Send the spec in file to path (create or update) and report the operation. */
static int send_spec(struct cli *c, const char *method, const char *path, const char *file,
                     int wait)
{
    mtc_error_t err = {""};
    json_t *spec = load_spec(file, &err), *op = NULL;
    if (!spec)
        return cli_fail("%s", err.text);
    int rc = cli_call_ok(c, method, path, spec, &op, &err);
    json_decref(spec);
    if (rc < 0)
        return cli_fail("%s", err.text);
    rc = report_op(c, op, wait);
    json_decref(op);
    return rc;
}

static int c_create(struct cli *c, int argc, char **argv)
{
    struct write_args a = {0};
    const char *use = "mtc cluster create -f SPEC.json --id ID [--no-wait] [--json]";
    int p = parse_write(c, argc, argv, &a, use);
    if (p)
        return p > 0 ? 0 : 2;
    if (!a.file || !a.id)
        return cli_fail("cluster create needs -f SPEC.json and --id ID\nusage: %s", use), 2;
    char path[512], q[128];
    clusters_path(c, path, sizeof(path), NULL, NULL);
    snprintf(q, sizeof(q), "?modelDevelopmentClusterId=%s", a.id);
    strncat(path, q, sizeof(path) - strlen(path) - 1);
    return send_spec(c, "POST", path, a.file, !a.no_wait);
}

static int c_update(struct cli *c, int argc, char **argv)
{
    struct write_args a = {0};
    const char *use = "mtc cluster update ID -f SPEC.json [--update-mask a,b] [--no-wait] [--json]";
    int p = parse_write(c, argc, argv, &a, use);
    if (p)
        return p > 0 ? 0 : 2;
    if (!a.file || !a.id)
        return cli_fail("cluster update needs ID and -f SPEC.json\nusage: %s", use), 2;
    if (!cluster_id_valid(a.id))
        return cli_fail("cluster id \"%s\": must match ^[a-z][a-z0-9]{0,9}$", a.id);
    char path[1024], q[512] = "";
    if (a.mask)
        snprintf(q, sizeof(q), "?updateMask=%s", a.mask);
    clusters_path(c, path, sizeof(path), a.id, q);
    return send_spec(c, "PATCH", path, a.file, !a.no_wait);
}

static int c_delete(struct cli *c, int argc, char **argv)
{
    struct write_args a = {0};
    const char *use = "mtc cluster delete ID [--no-wait] [--json]";
    int p = parse_write(c, argc, argv, &a, use);
    if (p)
        return p > 0 ? 0 : 2;
    if (!a.id)
        return cli_fail("cluster delete needs ID\nusage: %s", use), 2;
    if (!cluster_id_valid(a.id))
        return cli_fail("cluster id \"%s\": must match ^[a-z][a-z0-9]{0,9}$", a.id);
    char path[512];
    clusters_path(c, path, sizeof(path), a.id, NULL);
    mtc_error_t err = {""};
    json_t *op = NULL;
    if (cli_call_ok(c, "DELETE", path, NULL, &op, &err) < 0)
        return cli_fail("%s", err.text);
    int rc = report_op(c, op, !a.no_wait);
    json_decref(op);
    return rc;
}

/* Options shared by get/list: --json only, plus one positional. */
static int simple_args(struct cli *c, int argc, char **argv, const char **pos, const char *use)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            c->json = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return printf("usage: %s\n", use), 1;
        else if (argv[i][0] != '-' && pos && !*pos)
            *pos = argv[i];
        else
            return fprintf(stderr, "mtc: unexpected argument \"%s\"\nusage: %s\n", argv[i], use),
                   -1;
    }
    return 0;
}

static int c_get(struct cli *c, int argc, char **argv)
{
    const char *id = NULL, *use = "mtc cluster get ID [--json]";
    int p = simple_args(c, argc, argv, &id, use);
    if (p)
        return p > 0 ? 0 : 2;
    if (!id)
        return cli_fail("cluster get needs ID\nusage: %s", use), 2;
    if (!cluster_id_valid(id))
        return cli_fail("cluster id \"%s\": must match ^[a-z][a-z0-9]{0,9}$", id);
    char path[512];
    clusters_path(c, path, sizeof(path), id, NULL);
    mtc_error_t err = {""};
    json_t *cl = NULL;
    if (cli_call_ok(c, "GET", path, NULL, &cl, &err) < 0)
        return cli_fail("%s", err.text);
    if (c->json) {
        cli_print_json(cl);
        json_decref(cl);
        return 0;
    }
    char line[512], age[16];
    summary(cl, line, sizeof(line));
    cli_age(json_string_value(json_object_get(cl, "createTime")), age, sizeof(age));
    printf("%s, created %s ago\n\n%-24s %-10s %-10s %s\n", line, age, "NODE", "POOL", "STATE",
           "SLURM");
    json_t *nodes = json_object_get(json_object_get(cl, "clusterStatus"), "nodesStatus"), *n;
    size_t i;
    json_array_foreach(nodes, i, n)
    {
        printf("%-24s %-10s %-10s %s\n", json_string_value(json_object_get(n, "instanceName")),
               json_string_value(json_object_get(n, "nodePoolId")),
               json_string_value(json_object_get(n, "nodeState")),
               json_string_value(json_object_get(n, "slurmState"))
                   ? json_string_value(json_object_get(n, "slurmState"))
                   : "-");
    }
    json_t *events = json_object_get(cl, "clusterEvents");
    if (json_array_size(events) > 0)
        printf("\nEVENTS\n");
    json_array_foreach(events, i, n)
    {
        printf("%s %-22s %-16s %s\n", json_string_value(json_object_get(n, "eventTime")),
               json_string_value(json_object_get(n, "eventType")),
               json_object_get(n, "nodeName") ? json_string_value(json_object_get(n, "nodeName"))
                                              : "-",
               json_string_value(json_object_get(n, "description")));
    }
    json_decref(cl);
    return 0;
}

static int c_list(struct cli *c, int argc, char **argv)
{
    const char *use = "mtc cluster list [--json]";
    int p = simple_args(c, argc, argv, NULL, use);
    if (p)
        return p > 0 ? 0 : 2;
    mtc_error_t err = {""};
    char path[512];
    clusters_path(c, path, sizeof(path), NULL, "");
    json_t *all = cli_list_all(c, path, "modelDevelopmentClusters", &err);
    if (!all)
        return cli_fail("%s", err.text);
    if (c->json) {
        json_t *out = json_pack("{s:o}", "modelDevelopmentClusters", all);
        cli_print_json(out);
        json_decref(out);
        return 0;
    }
    printf("%-12s %-13s %-6s %-24s %s\n", "ID", "STATE", "NODES", "PARTITIONS", "AGE");
    size_t i;
    json_t *cl;
    json_array_foreach(all, i, cl)
    {
        const char *name = json_string_value(json_object_get(cl, "name"));
        char age[16], *parts = cluster_spec_partitions(cl);
        cli_age(json_string_value(json_object_get(cl, "createTime")), age, sizeof(age));
        printf("%-12s %-13s %-6d %-24s %s\n", strrchr(name, '/') + 1,
               json_string_value(json_object_get(json_object_get(cl, "clusterStatus"), "state")),
               cluster_spec_node_count(cl), parts ? parts : "", age);
        free(parts);
    }
    json_decref(all);
    return 0;
}

/* GET a cluster for nodes/events: id validated, --json honoured. NULL on error (printed). */
static json_t *get_cluster(struct cli *c, int argc, char **argv, const char *use)
{
    const char *id = NULL;
    int p = simple_args(c, argc, argv, &id, use);
    if (p > 0)
        exit(0);
    if (p < 0 || !id) {
        cli_fail("usage: %s", use);
        exit(2);
    }
    if (!cluster_id_valid(id)) {
        cli_fail("cluster id \"%s\": must match ^[a-z][a-z0-9]{0,9}$", id);
        return NULL;
    }
    char path[512];
    clusters_path(c, path, sizeof(path), id, NULL);
    mtc_error_t err = {""};
    json_t *cl = NULL;
    if (cli_call_ok(c, "GET", path, NULL, &cl, &err) < 0)
        cli_fail("%s", err.text);
    return cl;
}

static const struct cli_col node_cols[] = {{"NODE", "instanceName", 22, "?"},
                                           {"POOL", "nodePoolId", 8, "-"},
                                           {"STATE", "nodeState", 12, "-"},
                                           {"SLURM", "slurmState", 10, "-"},
                                           {"HEALTH", "health", 7, "-"},
                                           {"REMEDIATION", "remediation", 12, "-"},
                                           {"LAST SCAN", "lastScan", 10, "-"},
                                           {"LAST FAILING CHECK", "failingCheck", 22, "-"},
                                           {"REASON", "failingReason", 0, ""},
                                           {NULL, NULL, 0, NULL}};

static int c_nodes(struct cli *c, int argc, char **argv)
{
    json_t *cl = get_cluster(c, argc, argv, "mtc cluster nodes ID [--json]");
    if (!cl)
        return 1;
    json_t *nodes = json_object_get(json_object_get(cl, "clusterStatus"), "nodesStatus");
    /* the table's LAST SCAN column: the last health scan's verdict */
    json_t *rows = json_deep_copy(nodes), *n;
    size_t i;
    json_array_foreach(rows, i, n)
    {
        json_t *scan = json_object_get(n, "lastHealthScan");
        if (scan)
            json_object_set(n, "lastScan", json_object_get(scan, "state"));
    }
    cli_print_list(c, nodes, rows, node_cols);
    json_decref(rows);
    json_decref(cl);
    return 0;
}

static const struct cli_col event_cols[] = {{"TIME", "eventTime", 24, "?"},
                                            {"TYPE", "eventType", 26, "?"},
                                            {"NODE", "nodeName", 20, "-"},
                                            {"DESCRIPTION", "description", 0, ""},
                                            {NULL, NULL, 0, NULL}};

static int c_events(struct cli *c, int argc, char **argv)
{
    json_t *cl = get_cluster(c, argc, argv, "mtc cluster events ID [--json]");
    if (!cl)
        return 1;
    json_t *events = json_object_get(cl, "clusterEvents");
    cli_print_list(c, events, events, event_cols);
    json_decref(cl);
    return 0;
}

/* With Slurm's backup controller: a line each, and which is in control. */
static void print_controllers(const json_t *ctl)
{
    if (!ctl)
        return;
    const char *in = json_string_value(json_object_get(ctl, "inControl"));
    printf("\n");
    for (int k = 0; k < 2; k++) {
        const char *role = k ? "backup" : "primary";
        const json_t *o = json_object_get(ctl, role);
        const json_t *up = json_object_get(o, "up");
        printf("slurmctld %-8s %-20s %-24s %s\n", role,
               json_string_value(json_object_get(o, "host")) ?: "?",
               json_string_value(json_object_get(o, "address")) ?: "?",
               !up ? "not looked at yet" : json_is_true(up) ? "UP" : "DOWN");
    }
    if (in)
        printf("in control: %s since %s (failoverSeconds %lld)\n", in,
               json_string_value(json_object_get(ctl, "since")) ?: "?",
               (long long)json_integer_value(json_object_get(ctl, "failoverSeconds")));
}

static int c_hosts(struct cli *c, int argc, char **argv)
{
    json_t *cl = get_cluster(c, argc, argv, "mtc cluster hosts ID [--json]");
    if (!cl)
        return 1;
    json_t *hosts = json_object_get(json_object_get(cl, "clusterStatus"), "hosts");
    if (!hosts) {
        const char *name = json_string_value(json_object_get(cl, "name"));
        cli_fail("cluster %s runs on this host (local provider): it has no hosts",
                 name && strrchr(name, '/') ? strrchr(name, '/') + 1 : "?");
        json_decref(cl);
        return 1;
    }
    static const struct cli_col cols[] = {{"HOST", "host", 24, "?"},
                                          {"HOSTNAME", "hostname", 20, "-"},
                                          {"POOL", "nodePoolId", 8, "-"},
                                          {"NODE", "node", 22, "-"},
                                          {"ROLE", "role", 12, "?"},
                                          {"REASON", "reason", 0, ""},
                                          {NULL, NULL, 0, NULL}};
    cli_print_list(c, hosts, hosts, cols);
    if (!c->json)
        print_controllers(json_object_get(json_object_get(cl, "clusterStatus"), "controller"));
    json_decref(cl);
    return 0;
}

static int c_report_faulty(struct cli *c, int argc, char **argv)
{
    const char *use = "mtc cluster report-faulty ID NODE [--behavior PERFORMANCE|"
                      "SILENT_DATA_CORRUPTION|UNRECOVERABLE_GPU_ERROR|BEHAVIOR_UNSPECIFIED] "
                      "[--description TEXT] [--delete] [--no-wait] [--json]";
    const char *id = NULL, *node = NULL, *behavior = "BEHAVIOR_UNSPECIFIED", *desc = "";
    int del = 0, no_wait = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--behavior") == 0 && i + 1 < argc)
            behavior = argv[++i];
        else if (strcmp(argv[i], "--description") == 0 && i + 1 < argc)
            desc = argv[++i];
        else if (strcmp(argv[i], "--delete") == 0)
            del = 1;
        else if (strcmp(argv[i], "--no-wait") == 0)
            no_wait = 1;
        else if (strcmp(argv[i], "--json") == 0)
            c->json = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return printf("usage: %s\n", use), 0;
        else if (argv[i][0] != '-' && !id)
            id = argv[i];
        else if (argv[i][0] != '-' && !node)
            node = argv[i];
        else
            return cli_fail("unexpected argument \"%s\"\nusage: %s", argv[i], use), 2;
    }
    if (!id || !node)
        return cli_fail("usage: %s", use), 2;
    if (!cluster_id_valid(id))
        return cli_fail("cluster id \"%s\": must match ^[a-z][a-z0-9]{0,9}$", id);
    json_t *action = json_pack("{s:s}", "nodeId", node);
    if (!del)
        json_object_set_new(action, "reportFaultyHost",
                            json_pack("{s:[{s:s, s:s}]}", "faultReasons", "behavior", behavior,
                                      "description", desc));
    json_t *body = json_pack("{s:[o]}", "nodeActions", action), *op = NULL;
    char path[512];
    clusters_path(c, path, sizeof(path), id, ":reportFaultyNodes");
    mtc_error_t err = {""};
    int rc = cli_call_ok(c, "POST", path, body, &op, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    rc = report_op(c, op, !no_wait);
    json_decref(op);
    return rc;
}

static const struct cli_cmd cluster_cmds[] = {
    {"create", c_create, "create a cluster from a JSON spec (-f FILE --id ID)", NULL},
    {"get", c_get, "show a cluster, its nodes and events", NULL},
    {"list", c_list, "list clusters: ID STATE NODES PARTITIONS AGE", NULL},
    {"update", c_update, "change a cluster to a new spec (-f FILE)", NULL},
    {"delete", c_delete, "stop a cluster's daemons and remove it", NULL},
    {"nodes", c_nodes, "each node's Slurm state, health, failing check, remediation", NULL},
    {"events", c_events, "the cluster's events (last 100)", NULL},
    {"hosts", c_hosts, "a cluster on hosts: each host's node or role (spare, quarantined)", NULL},
    {"report-faulty", c_report_faulty, "report a faulty node: drain, requeue, repair", NULL},
    {NULL, NULL, NULL, NULL},
};

int cmd_cluster(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc cluster", cluster_cmds, argc - 1, argv + 1);
}

/* --- operations --------------------------------------------------------- */

static int o_get_or_wait(struct cli *c, int argc, char **argv, int wait)
{
    const char *name = NULL;
    int timeout = 0;
    const char *use = wait ? "mtc operations wait NAME [--timeout SECONDS] [--json]"
                           : "mtc operations get NAME [--json]";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            c->json = 1;
        else if (wait && strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
            timeout = atoi(argv[++i]);
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return printf("usage: %s\n", use), 0;
        else if (argv[i][0] != '-' && !name)
            name = argv[i];
        else
            return cli_fail("unexpected argument \"%s\"\nusage: %s", argv[i], use), 2;
    }
    if (!name)
        return cli_fail("usage: %s", use), 2;
    mtc_error_t err = {""};
    json_t *op = NULL;
    if (wait) {
        if (cli_wait_op(c, name, timeout, &op, &err) < 0)
            return cli_fail("%s", err.text);
    } else {
        char path[512];
        cli_op_path(c, name, path, sizeof(path));
        if (cli_call_ok(c, "GET", path, NULL, &op, &err) < 0)
            return cli_fail("%s", err.text);
    }
    int rc = 0;
    if (c->json) {
        cli_print_json(op);
    } else {
        json_t *md = json_object_get(op, "metadata");
        json_t *e = json_object_get(op, "error");
        printf("%s %s: %s%s%s\n", json_string_value(json_object_get(op, "name")),
               json_is_true(json_object_get(op, "done")) ? (e ? "FAILED" : "DONE") : "RUNNING",
               json_string_value(json_object_get(md, "progressMessage")), e ? " — " : "",
               e ? json_string_value(json_object_get(e, "message")) : "");
    }
    if (json_object_get(op, "error"))
        rc = 1;
    json_decref(op);
    return rc;
}

static int o_get(struct cli *c, int argc, char **argv)
{
    return o_get_or_wait(c, argc, argv, 0);
}

static int o_wait(struct cli *c, int argc, char **argv)
{
    return o_get_or_wait(c, argc, argv, 1);
}

static const struct cli_cmd op_cmds[] = {
    {"get", o_get, "show an operation", NULL},
    {"wait", o_wait, "wait for an operation to finish", NULL},
    {NULL, NULL, NULL, NULL},
};

int cmd_operations(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc operations", op_cmds, argc - 1, argv + 1);
}
