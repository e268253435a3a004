/* data: `mtc data list|show|prepare|delete` — datasets as named, versioned
 * API objects; prepare creates the dataset or re-prepares it, and waits for
 * its operation, printing the trainer's progress. */
#include "cli.h"
#include "dataset/dataset.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void datasets_path(struct cli *c, char *buf, size_t len, const char *name,
                          const char *suffix)
{
    snprintf(buf, len, "/v1beta1/projects/%s/locations/%s/datasets%s%s%s", c->project, c->location,
             name ? "/" : "", name ? name : "", suffix ? suffix : "");
}

/* A JSON integer member as text ("-" when absent). */
static void num(const json_t *o, const char *key, char *buf, size_t len)
{
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v))
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else
        snprintf(buf, len, "-");
}

/* The row `mtc data list` shows for a dataset resource (all strings). */
static json_t *list_row(const json_t *ds)
{
    const char *name = json_string_value(json_object_get(ds, "name"));
    const json_t *v = json_object_get(ds, "latestVersion");
    char version[16], records[24], tokens[24], age[16];
    num(v, "versionId", version, sizeof(version));
    num(v, "records", records, sizeof(records));
    num(v, "trainTokens", tokens, sizeof(tokens));
    cli_age(json_string_value(json_object_get(ds, "createTime")), age, sizeof(age));
    return json_pack("{s:s, s:O, s:O, s:s, s:s, s:s, s:O, s:s}", "name",
                     name && strrchr(name, '/') ? strrchr(name, '/') + 1 : "?", "kind",
                     json_object_get(ds, "kind"), "state", json_object_get(ds, "state"), "version",
                     version, "records", records, "tokens", tokens, "source",
                     json_object_get(ds, "source"), "age", age);
}

static const char d_list_use[] = "mtc data list [--json]";

static int d_list(struct cli *c, int argc, char **argv)
{
    int p = cli_json_only(c, argc, argv, d_list_use);
    if (p)
        return p;
    mtc_error_t err = {""};
    char path[512];
    datasets_path(c, path, sizeof(path), NULL, "");
    json_t *all = cli_list_all(c, path, "datasets", &err);
    if (!all)
        return cli_fail("%s", err.text);
    static const struct cli_col cols[] = {
        {"NAME", "name", 20, "?"},      {"KIND", "kind", 9, "?"},
        {"STATE", "state", 10, "?"},    {"VERSION", "version", 8, "-"},
        {"RECORDS", "records", 9, "-"}, {"TRAIN TOKENS", "tokens", 13, "-"},
        {"AGE", "age", 5, "-"},         {"SOURCE", "source", 0, ""},
        {NULL, NULL, 0, NULL}};
    json_t *rows = json_array(), *ds;
    size_t i;
    json_array_foreach(all, i, ds) json_array_append_new(rows, list_row(ds));
    json_t *out = json_pack("{s:o}", "datasets", all);
    cli_print_list(c, out, rows, cols);
    json_decref(out);
    json_decref(rows);
    return 0;
}

/* The NAME argument of show/delete (with --json): validated. 0, or the exit status. */
static int name_arg(struct cli *c, int argc, char **argv, const char *use, const char **name)
{
    *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            c->json = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return printf("usage: %s\n", use), -1;
        else if (argv[i][0] != '-' && !*name)
            *name = argv[i];
        else
            return cli_fail("unexpected argument \"%s\"\nusage: %s", argv[i], use), 2;
    }
    if (!*name)
        return cli_fail("usage: %s", use), 2;
    mtc_error_t err = {""};
    if (!dataset_name_valid(*name))
        return dataset_name_error(*name, &err), cli_fail("%s", err.text);
    return 0;
}

static void print_version(const json_t *v)
{
    char id[16], records[24], train[24], val[24], bytes[24];
    num(v, "versionId", id, sizeof(id));
    num(v, "records", records, sizeof(records));
    num(v, "trainTokens", train, sizeof(train));
    num(v, "valTokens", val, sizeof(val));
    num(v, "bytes", bytes, sizeof(bytes));
    printf("%-8s %-24s %-9s %-13s %-11s %-11s %s\n", id,
           json_string_value(json_object_get(v, "createTime")), records, train, val, bytes,
           json_string_value(json_object_get(v, "key")));
}

static int d_show(struct cli *c, int argc, char **argv)
{
    const char *name, *use = "mtc data show NAME [--json]";
    int p = name_arg(c, argc, argv, use, &name);
    if (p)
        return p < 0 ? 0 : p;
    char path[512];
    datasets_path(c, path, sizeof(path), name, NULL);
    mtc_error_t err = {""};
    json_t *ds = NULL;
    if (cli_call_ok(c, "GET", path, NULL, &ds, &err) < 0)
        return cli_fail("%s", err.text);
    if (c->json) {
        cli_print_json(ds);
        json_decref(ds);
        return 0;
    }
    const char *tok = json_string_value(json_object_get(ds, "tokenizer"));
    const char *desc = json_string_value(json_object_get(ds, "description"));
    const json_t *latest = json_object_get(ds, "latestVersion");
    printf("dataset %s (%s) %s\nsource:    %s\ntokenizer: %s\n", name,
           json_string_value(json_object_get(ds, "kind")),
           json_string_value(json_object_get(ds, "state")),
           json_string_value(json_object_get(ds, "source")),
           tok ? tok
           : latest && json_string_value(json_object_get(latest, "tokenizer"))
               ? json_string_value(json_object_get(latest, "tokenizer"))
               : "(the trainer's default)");
    if (desc && *desc)
        printf("description: %s\n", desc);
    if (latest)
        printf("data:      %s\n", json_string_value(json_object_get(latest, "path")));
    printf("\n%-8s %-24s %-9s %-13s %-11s %-11s %s\n", "VERSION", "CREATED", "RECORDS",
           "TRAIN TOKENS", "VAL TOKENS", "BYTES", "KEY");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(ds, "versions"), i, v) print_version(v);
    json_decref(ds);
    return 0;
}

static int d_delete(struct cli *c, int argc, char **argv)
{
    const char *name, *use = "mtc data delete NAME [--json]";
    int p = name_arg(c, argc, argv, use, &name);
    if (p)
        return p < 0 ? 0 : p;
    char path[512];
    datasets_path(c, path, sizeof(path), name, NULL);
    mtc_error_t err = {""};
    json_t *out = NULL;
    if (cli_call_ok(c, "DELETE", path, NULL, &out, &err) < 0)
        return cli_fail("%s", err.text);
    if (c->json)
        cli_print_json(out);
    else
        printf("dataset %s deleted\n", name);
    json_decref(out);
    return 0;
}

/* Wait for the operation, printing each progress message on stderr once a
 * newer one follows it (the last one of a failed preparation is its error,
 * printed once, as the error); *final gets the finished operation. 0, or -1
 * with err. */
static int wait_progress(struct cli *c, const char *name, json_t **final, mtc_error_t *err)
{
    char path[512], shown[512] = "", pending[512] = "";
    cli_op_path(c, name, path, sizeof(path));
    int delay = 50; /* short: a cached preparation takes a fraction of a second */
    for (;;) {
        json_t *op = NULL;
        if (cli_call_ok(c, "GET", path, NULL, &op, err) < 0)
            return -1;
        const char *msg =
            json_string_value(json_object_get(json_object_get(op, "metadata"), "progressMessage"));
        int done = json_is_true(json_object_get(op, "done"));
        const char *failed =
            json_string_value(json_object_get(json_object_get(op, "error"), "message"));
        if (msg && *msg && strcmp(msg, pending) != 0 && strcmp(msg, shown) != 0 &&
            strcmp(msg, "queued") != 0) {
            if (*pending && !c->json)
                fprintf(stderr, "%s\n", pending);
            snprintf(shown, sizeof(shown), "%s", pending);
            snprintf(pending, sizeof(pending), "%s", msg);
        }
        if (done) {
            if (*pending && strcmp(pending, "done") != 0 && !c->json &&
                !(failed && strcmp(failed, pending) == 0))
                fprintf(stderr, "%s\n", pending);
            *final = op;
            return 0;
        }
        json_decref(op);
        mtc_sleep_ms(delay);
        if (delay < 250)
            delay += 50;
    }
}

/* A path argument made absolute (mtcd reads it from elsewhere); builtins as they are. */
static int absolute(const char *opt, const char *in, char *out, size_t len)
{
    char cwd[PATH_MAX];
    if (dataset_is_builtin(in) || in[0] == '/')
        return snprintf(out, len, "%s", in) < (int)len ? 0 : -1;
    if (realpath(in, out))
        return 0;
    if (!getcwd(cwd, sizeof(cwd)) || snprintf(out, len, "%s/%s", cwd, in) >= (int)len) {
        cli_fail("%s %s: %s", opt, in, strerror(errno));
        return -1;
    }
    return 0; /* mtcd says it does not exist, in its own words */
}

static int d_prepare(struct cli *c, int argc, char **argv)
{
    const char *use = "mtc data prepare NAME [--source FILE|DIR|builtin:NAME] "
                      "[--kind pretrain|sft|dpo|rl] [--tokenizer FILE|builtin:NAME] "
                      "[--description TEXT] [--no-wait] [--json]";
    const char *name = NULL, *source = NULL, *kind = NULL, *tok = NULL, *desc = NULL;
    int no_wait = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (strcmp(a, "--source") == 0 && has)
            source = argv[++i];
        else if (strcmp(a, "--kind") == 0 && has)
            kind = argv[++i];
        else if (strcmp(a, "--tokenizer") == 0 && has)
            tok = argv[++i];
        else if (strcmp(a, "--description") == 0 && has)
            desc = argv[++i];
        else if (strcmp(a, "--no-wait") == 0)
            no_wait = 1;
        else if (strcmp(a, "--json") == 0)
            c->json = 1;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return printf("usage: %s\n", use), 0;
        else if (a[0] != '-' && !name)
            name = a;
        else
            return cli_fail("unexpected argument \"%s\"\nusage: %s", a, use), 2;
    }
    mtc_error_t err = {""};
    if (!name)
        return cli_fail("usage: %s", use), 2;
    if (!dataset_name_valid(name))
        return dataset_name_error(name, &err), cli_fail("%s", err.text);
    char list[64];
    if (kind && schema_enum_parse(&dataset_kind_enum, kind, 0) < 0)
        return cli_fail("--kind \"%s\": must be one of %s", kind,
                        schema_enum_list(&dataset_kind_enum, list, sizeof(list)));
    char src[PATH_MAX], tk[PATH_MAX];
    if ((source && absolute("--source", source, src, sizeof(src)) < 0) ||
        (tok && absolute("--tokenizer", tok, tk, sizeof(tk)) < 0))
        return 1;
    json_t *body = json_object();
    if (source)
        json_object_set_new(body, "source", json_string(src));
    if (kind)
        json_object_set_new(body, "kind", json_string(kind));
    if (tok)
        json_object_set_new(body, "tokenizer", json_string(tk));
    if (desc)
        json_object_set_new(body, "description", json_string(desc));

    /* a known dataset is re-prepared, an unknown one created */
    char path[512];
    json_t *op = NULL, *ds = NULL;
    datasets_path(c, path, sizeof(path), name, NULL);
    int status = cli_call(c, "GET", path, NULL, &ds, &err);
    json_decref(ds);
    if (status < 0) {
        json_decref(body);
        return cli_fail("%s", err.text);
    }
    if (status == 404) {
        char q[128];
        if (!source || !kind) {
            json_decref(body);
            return cli_fail("dataset %s not found; creating it needs --source and --kind", name);
        }
        snprintf(q, sizeof(q), "?datasetId=%s", name);
        datasets_path(c, path, sizeof(path), NULL, q);
    } else {
        datasets_path(c, path, sizeof(path), name, ":prepare");
    }
    int rc = cli_call_ok(c, "POST", path, body, &op, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    const char *opname = json_string_value(json_object_get(op, "name"));
    if (no_wait) {
        if (c->json)
            cli_print_json(op);
        else
            printf("operation %s started\n", opname);
        json_decref(op);
        return 0;
    }
    json_t *final = NULL;
    rc = wait_progress(c, opname, &final, &err);
    json_decref(op);
    if (rc < 0)
        return cli_fail("%s", err.text);
    json_t *e = json_object_get(final, "error");
    if (c->json)
        cli_print_json(final);
    if (e) {
        rc = cli_fail("%s", json_string_value(json_object_get(e, "message")));
    } else if (!c->json) {
        json_t *resp = json_object_get(final, "response");
        json_t *v = json_object_get(resp, "version");
        char id[16], records[24], train[24], val[24];
        num(v, "versionId", id, sizeof(id));
        num(v, "records", records, sizeof(records));
        num(v, "trainTokens", train, sizeof(train));
        num(v, "valTokens", val, sizeof(val));
        printf("dataset %s version %s (%s%s): %s records, %s train + %s val tokens\n", name, id,
               json_is_true(json_object_get(resp, "newVersion")) ? "new" : "unchanged",
               json_is_true(json_object_get(resp, "cached")) ? ", cached" : "", records, train,
               val);
    }
    json_decref(final);
    return rc;
}

static const struct cli_cmd data_cmds[] = {
    {"list", d_list, "list datasets: NAME KIND STATE VERSION RECORDS TOKENS AGE SOURCE",
     d_list_use},
    {"show", d_show, "show a dataset and its versions", NULL},
    {"prepare", d_prepare, "create or re-prepare a dataset (--source --kind); waits", NULL},
    {"delete", d_delete, "remove a dataset (and prepared data no other dataset uses)", NULL},
    {NULL, NULL, NULL, NULL},
};

int cmd_data(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc data", data_cmds, argc - 1, argv + 1);
}
