/* accounts: `mtc accounts create|list|show|update|delete` and `mtc users
 * add|remove|list` — a cluster's accounts and their users in Slurm's
 * accounting database, through mtcd (api/accounts.c). Subcommands are a
 * table; the flags map onto the account resource's fields. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* …/clusters/CLUSTER/KIND[/NAME][REST] (KIND: accounts, qos). */
static void kind_path(struct cli *c, char *buf, size_t len, const char *cluster, const char *kind,
                      const char *name, const char *rest)
{
    snprintf(buf, len, "/v1beta1/projects/%s/locations/%s/modelDevelopmentClusters/%s/%s%s%s%s",
             c->project, c->location, cluster, kind, name ? "/" : "", name ? name : "",
             rest ? rest : "");
}

static void path_of(struct cli *c, char *buf, size_t len, const char *cluster, const char *account,
                    const char *rest)
{
    kind_path(c, buf, len, cluster, "accounts", account, rest);
}

/* `mtc KIND list CLUSTER [--json]`: the collection (caller decrefs), or NULL
 * after saying why (*rc: the exit status). */
static json_t *list_of(struct cli *c, int argc, char **argv, const char *kind, const char *use,
                       int *rc)
{
    *rc = 1;
    if (argc < 2 || argv[1][0] == '-')
        return cli_fail("usage: %s", use), NULL;
    if (cli_json_only(c, argc - 1, argv + 1, use) != 0)
        return *rc = 2, NULL;
    char path[1024];
    kind_path(c, path, sizeof(path), argv[1], kind, NULL, NULL);
    json_t *out = NULL;
    mtc_error_t err = {""};
    if (cli_call_ok(c, "GET", path, NULL, &out, &err) < 0)
        return cli_fail("%s", err.text), NULL;
    *rc = 0;
    if (c->json) {
        cli_print_json(out);
        json_decref(out);
        return NULL;
    }
    return out;
}

/* An integer flag's value into obj[key]; 0, or 1 after saying why. */
static int int_flag(json_t *obj, const char *key, const char *flag, const char *v)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 0 || n > 1000000)
        return cli_fail("%s: want a whole number from 0 to 1000000, not \"%s\"", flag, v);
    json_object_set_new(obj, key, json_integer(n));
    return 0;
}

/* "a,b,c" as a JSON array of strings. */
static json_t *csv_array(const char *s)
{
    json_t *a = json_array();
    while (*s) {
        size_t k = strcspn(s, ",");
        json_array_append_new(a, json_stringn(s, k));
        s += k + (s[k] == ',');
    }
    return a;
}

/* A limit flag (--max-nodes, --max-gpus, --max-running-jobs, --max-wall)
 * into lim: 1 when flag is one (*rc: 0, or the exit status after saying
 * why), 0 when it is not. */
static int limit_flag(json_t *lim, const char *flag, const char *v, int *rc)
{
    static const struct {
        const char *flag, *key;
    } ints[] = {{"--max-nodes", "maxNodes"},
                {"--max-gpus", "maxGpus"},
                {"--max-running-jobs", "maxRunningJobs"}};
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
        if (strcmp(flag, ints[i].flag) == 0)
            return *rc = int_flag(lim, ints[i].key, flag, v), 1;
    if (strcmp(flag, "--max-wall") != 0)
        return 0;
    json_object_set_new(lim, "maxWall", json_string(v));
    return *rc = 0, 1;
}

/* The account's fields from flags (argv[i..]); the positional words into
 * pos[0..1]. 0, or the exit status after saying why. */
static int account_flags(struct cli *c, int argc, char **argv, json_t *body, const char *pos[2],
                         const char *use)
{
    json_t *lim = json_object();
    int npos = 0, rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = strcmp(a, "--json") != 0 && a[0] == '-';
        if (takes && !v) {
            rc = cli_fail("%s: needs a value\nusage: %s", a, use);
            break;
        }
        if (strcmp(a, "--json") == 0)
            c->json = 1;
        else if (strcmp(a, "--description") == 0)
            json_object_set_new(body, "description", json_string(v));
        else if (strcmp(a, "--parent") == 0)
            json_object_set_new(body, "parent", json_string(v));
        else if (strcmp(a, "--fairshare") == 0)
            rc = int_flag(body, "fairshare", a, v);
        else if (limit_flag(lim, a, v, &rc))
            ;
        else if (strcmp(a, "--qos") == 0)
            json_object_set_new(body, "qos", csv_array(v));
        else if (a[0] == '-')
            rc = cli_fail("unknown flag \"%s\"\nusage: %s", a, use);
        else if (npos < 2)
            pos[npos++] = a;
        else
            rc = cli_fail("unexpected argument \"%s\"\nusage: %s", a, use);
        if (takes && rc == 0)
            i++;
    }
    if (json_object_size(lim))
        json_object_set(body, "limits", lim);
    json_decref(lim);
    return rc;
}

static void print_account(const json_t *a)
{
    const json_t *l = json_object_get(a, "limits");
    printf("%s: parent %s, fairshare %lld", json_string_value(json_object_get(a, "name")),
           json_string_value(json_object_get(a, "parent")),
           (long long)json_integer_value(json_object_get(a, "fairshare")));
    if (json_object_get(l, "maxNodes"))
        printf(", max nodes %lld", (long long)json_integer_value(json_object_get(l, "maxNodes")));
    if (json_object_get(l, "maxGpus"))
        printf(", max GPUs %lld", (long long)json_integer_value(json_object_get(l, "maxGpus")));
    if (json_object_get(l, "maxRunningJobs"))
        printf(", max running jobs %lld",
               (long long)json_integer_value(json_object_get(l, "maxRunningJobs")));
    if (json_object_get(l, "maxWall"))
        printf(", max wall %s", json_string_value(json_object_get(l, "maxWall")));
    printf("\n  users:");
    size_t i;
    json_t *u;
    json_array_foreach(json_object_get(a, "users"), i, u) printf(" %s", json_string_value(u));
    printf(json_array_size(json_object_get(a, "users")) ? "\n" : " (none)\n");
}

/* create/update/show/delete: one account. */
static int one(struct cli *c, int argc, char **argv, const char *method, const char *use,
               int with_body)
{
    json_t *body = json_object(), *out = NULL;
    const char *pos[2] = {NULL, NULL};
    int rc = account_flags(c, argc, argv, body, pos, use);
    if (rc == 0 && (!pos[0] || !pos[1]))
        rc = cli_fail("usage: %s", use);
    if (rc) {
        json_decref(body);
        return rc;
    }
    char path[1024];
    int create = strcmp(method, "POST") == 0;
    path_of(c, path, sizeof(path), pos[0], create ? NULL : pos[1], NULL);
    if (create)
        json_object_set_new(body, "name", json_string(pos[1]));
    mtc_error_t err = {""};
    rc = cli_call_ok(c, method, path, with_body ? body : NULL, &out, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    if (c->json)
        cli_print_json(out);
    else if (strcmp(method, "DELETE") == 0)
        printf("account %s deleted\n", pos[1]);
    else
        print_account(out);
    json_decref(out);
    return 0;
}

static const char a_create_use[] =
    "mtc accounts create CLUSTER NAME [--description D] [--parent P] [--fairshare N] "
    "[--max-nodes N] [--max-gpus N] [--max-running-jobs N] [--max-wall T] [--qos A,B]";
static const char a_update_use[] =
    "mtc accounts update CLUSTER NAME [--description D] [--parent P] [--fairshare N] "
    "[--max-nodes N] [--max-gpus N] [--max-running-jobs N] [--max-wall T] [--qos A,B]";
static const char a_show_use[] = "mtc accounts show CLUSTER NAME [--json]";
static const char a_delete_use[] = "mtc accounts delete CLUSTER NAME";
static const char a_list_use[] = "mtc accounts list CLUSTER [--json]";
static const char a_usage_use[] =
    "mtc accounts usage CLUSTER [--since 2026-12-01|now-7days] [--json]";

static int a_create(struct cli *c, int argc, char **argv)
{
    return one(c, argc, argv, "POST", a_create_use, 1);
}

static int a_update(struct cli *c, int argc, char **argv)
{
    return one(c, argc, argv, "PATCH", a_update_use, 1);
}

static int a_show(struct cli *c, int argc, char **argv)
{
    return one(c, argc, argv, "GET", a_show_use, 0);
}

static int a_delete(struct cli *c, int argc, char **argv)
{
    return one(c, argc, argv, "DELETE", a_delete_use, 0);
}

static int a_list(struct cli *c, int argc, char **argv)
{
    int rc;
    json_t *out = list_of(c, argc, argv, "accounts", a_list_use, &rc);
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(out, "accounts"), i, a) print_account(a);
    json_decref(out);
    return rc;
}

static int a_usage(struct cli *c, int argc, char **argv)
{
    const char *use = a_usage_use;
    const char *cluster = NULL, *since = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--since") == 0 && i + 1 < argc)
            since = argv[++i];
        else if (strcmp(argv[i], "--json") == 0)
            c->json = 1;
        else if (argv[i][0] != '-' && !cluster)
            cluster = argv[i];
        else
            return cli_fail("unexpected argument \"%s\"\nusage: %s", argv[i], use);
    }
    if (!cluster)
        return cli_fail("usage: %s", use);
    char path[1024];
    path_of(c, path, sizeof(path), cluster, NULL, ":usage");
    if (since) { /* a date or now-N<unit>: nothing to escape, mtcd checks the rest */
        if (strspn(since, "abcdefghijklmnopqrstuvwxyz0123456789-:T") != strlen(since))
            return cli_fail("--since %.40s: a date (2026-12-01[T08:00]) or now-N(days|hours|minutes)",
                            since);
        snprintf(path + strlen(path), sizeof(path) - strlen(path), "?since=%s", since);
    }
    json_t *out = NULL;
    mtc_error_t err = {""};
    if (cli_call_ok(c, "GET", path, NULL, &out, &err) < 0)
        return cli_fail("%s", err.text);
    if (c->json) {
        cli_print_json(out);
    } else {
        printf("since %s\n%-16s %-12s %6s %12s %12s\n", json_string_value(json_object_get(out, "since")),
               "ACCOUNT", "USER", "JOBS", "NODE-HOURS", "GPU-HOURS");
        size_t i;
        json_t *u;
        json_array_foreach(json_object_get(out, "usage"), i, u)
            printf("%-16s %-12s %6lld %12.3f %12.3f\n", json_string_value(json_object_get(u, "account")),
                   json_string_value(json_object_get(u, "user")),
                   (long long)json_integer_value(json_object_get(u, "jobs")),
                   json_real_value(json_object_get(u, "nodeHours")),
                   json_real_value(json_object_get(u, "gpuHours")));
    }
    json_decref(out);
    return 0;
}

static const struct cli_cmd account_cmds[] = {
    {"usage", a_usage, "node-hours and GPU-hours per account and user (from the database)",
     a_usage_use},
    {"create", a_create, "create an account: limits, fair share, QoS", a_create_use},
    {"list", a_list, "the cluster's accounts with their limits and users", a_list_use},
    {"show", a_show, "one account", a_show_use},
    {"update", a_update, "change an account's settings", a_update_use},
    {"delete", a_delete, "delete an account (refused while it has jobs)", a_delete_use},
    {NULL, NULL, NULL, NULL},
};

int cmd_accounts(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc accounts", account_cmds, argc - 1, argv + 1);
}

static const char u_list_use[] = "mtc users list CLUSTER --account A [--json]",
                  u_change_use[] = "mtc users add|remove CLUSTER --account A USER";

/* users add|remove CLUSTER --account A USER; users list CLUSTER --account A */
static int users(struct cli *c, int argc, char **argv, const char *verb)
{
    const char *use = strcmp(verb, "list") == 0 ? u_list_use : u_change_use;
    const char *cluster = NULL, *account = NULL, *user = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--account") == 0 && i + 1 < argc)
            account = argv[++i];
        else if (strcmp(argv[i], "--json") == 0)
            c->json = 1;
        else if (argv[i][0] == '-')
            return cli_fail("unknown flag \"%s\"\nusage: %s", argv[i], use);
        else if (!cluster)
            cluster = argv[i];
        else if (!user && strcmp(verb, "list") != 0)
            user = argv[i];
        else
            return cli_fail("unexpected argument \"%s\"\nusage: %s", argv[i], use);
    }
    if (!cluster || !account || (strcmp(verb, "list") != 0 && !user))
        return cli_fail("usage: %s", use);
    char path[1024], rest[128];
    snprintf(rest, sizeof(rest), "/users%s%s", strcmp(verb, "remove") == 0 ? "/" : "",
             strcmp(verb, "remove") == 0 ? user : "");
    path_of(c, path, sizeof(path), cluster, account, rest);
    json_t *body = strcmp(verb, "add") == 0 ? json_pack("{s:s}", "name", user) : NULL, *out = NULL;
    mtc_error_t err = {""};
    const char *method = strcmp(verb, "add") == 0 ? "POST" : strcmp(verb, "remove") == 0 ? "DELETE" : "GET";
    int rc = cli_call_ok(c, method, path, body, &out, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    if (c->json)
        cli_print_json(out);
    else if (strcmp(verb, "list") == 0) {
        size_t i;
        json_t *u;
        json_array_foreach(json_object_get(out, "users"), i, u) printf("%s\n", json_string_value(u));
    } else
        printf("user %s %s account %s\n", user, strcmp(verb, "add") == 0 ? "added to" : "removed from",
               account);
    json_decref(out);
    return 0;
}

static int u_add(struct cli *c, int argc, char **argv)
{
    return users(c, argc, argv, "add");
}
static int u_remove(struct cli *c, int argc, char **argv)
{
    return users(c, argc, argv, "remove");
}
static int u_list(struct cli *c, int argc, char **argv)
{
    return users(c, argc, argv, "list");
}

static const struct cli_cmd user_cmds[] = {
    {"add", u_add, "add a user to an account", u_change_use},
    {"remove", u_remove, "remove a user from an account", u_change_use},
    {"list", u_list, "an account's users", u_list_use},
    {NULL, NULL, NULL, NULL},
};

int cmd_users(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc users", user_cmds, argc - 1, argv + 1);
}

/* mtc qos create|list|delete */
static const char q_create_use[] =
    "mtc qos create CLUSTER NAME [--priority N] [--preempt QOS,...] "
    "[--max-nodes N] [--max-gpus N] [--max-wall T] [--grace SECONDS]",
                  q_list_use[] = "mtc qos list CLUSTER [--json]",
                  q_delete_use[] = "mtc qos delete CLUSTER NAME";

static int q_create(struct cli *c, int argc, char **argv)
{
    const char *use = q_create_use;
    json_t *body = json_object(), *lim = json_object();
    const char *pos[2] = {NULL, NULL};
    int npos = 0, rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] != '-') {
            if (npos < 2)
                pos[npos++] = a;
            else
                rc = cli_fail("unexpected argument \"%s\"\nusage: %s", a, use);
            continue;
        }
        if (!v) {
            rc = cli_fail("%s: needs a value\nusage: %s", a, use);
            break;
        }
        i++;
        if (strcmp(a, "--priority") == 0)
            rc = int_flag(body, "priority", a, v);
        else if (strcmp(a, "--grace") == 0)
            rc = int_flag(body, "graceSeconds", a, v);
        else if (strcmp(a, "--max-running-jobs") != 0 && limit_flag(lim, a, v, &rc))
            ;
        else if (strcmp(a, "--preempt") == 0)
            json_object_set_new(body, "preempt", csv_array(v));
        else
            rc = cli_fail("unknown flag \"%s\"\nusage: %s", a, use);
    }
    if (rc == 0 && (!pos[0] || !pos[1]))
        rc = cli_fail("usage: %s", use);
    if (json_object_size(lim))
        json_object_set(body, "limits", lim);
    json_decref(lim);
    if (rc) {
        json_decref(body);
        return rc;
    }
    json_object_set_new(body, "name", json_string(pos[1]));
    char path[1024];
    kind_path(c, path, sizeof(path), pos[0], "qos", NULL, NULL);
    json_t *out = NULL;
    mtc_error_t err = {""};
    rc = cli_call_ok(c, "POST", path, body, &out, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    if (c->json)
        cli_print_json(out);
    else
        printf("qos %s created\n", pos[1]);
    json_decref(out);
    return 0;
}

static int q_list(struct cli *c, int argc, char **argv)
{
    int rc;
    json_t *out = list_of(c, argc, argv, "qos", q_list_use, &rc);
    size_t i, k;
    json_t *q, *p;
    json_array_foreach(json_object_get(out, "qos"), i, q)
    {
        printf("%s: priority %lld, preempts", json_string_value(json_object_get(q, "name")),
               (long long)json_integer_value(json_object_get(q, "priority")));
        json_array_foreach(json_object_get(q, "preempt"), k, p) printf(" %s", json_string_value(p));
        printf(json_array_size(json_object_get(q, "preempt")) ? "\n" : " none\n");
    }
    json_decref(out);
    return rc;
}

static int q_delete(struct cli *c, int argc, char **argv)
{
    if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-')
        return cli_fail("usage: %s", q_delete_use);
    char path[1024];
    kind_path(c, path, sizeof(path), argv[1], "qos", argv[2], NULL);
    mtc_error_t err = {""};
    json_t *out = NULL;
    if (cli_call_ok(c, "DELETE", path, NULL, &out, &err) < 0)
        return cli_fail("%s", err.text);
    json_decref(out);
    printf("qos %s deleted\n", argv[2]);
    return 0;
}

static const struct cli_cmd qos_cmds[] = {
    {"create", q_create, "create a QoS: priority, limits, the QoS it preempts", q_create_use},
    {"list", q_list, "the cluster's QoS", q_list_use},
    {"delete", q_delete, "delete a QoS", q_delete_use},
    {NULL, NULL, NULL, NULL},
};

int cmd_qos(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc qos", qos_cmds, argc - 1, argv + 1);
}
