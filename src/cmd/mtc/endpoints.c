/* endpoints: `mtc endpoints create|deploy|undeploy|list|predict|delete` —
 * inference endpoints through mtcd's API: deploy a registered model version
 * onto a cluster as replicas of mtc-serve, split traffic, send a completion. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ep_path(struct cli *c, char *buf, size_t len, const char *name, const char *suffix)
{
    snprintf(buf, len, "/v1beta1/projects/%s/locations/%s/endpoints%s%s%s", c->project,
             c->location, name ? "/" : "", name ? name : "", suffix ? suffix : "");
}

static const char create_use[] = "mtc endpoints create NAME [--display-name TEXT] [--json]",
                  deploy_use[] =
                      "mtc endpoints deploy NAME --model REF --cluster ID [--partition P] "
                      "[--min N] [--max N] [--target REQUESTS] [--scale-down-delay "
                      "SECONDS] [--split ID=PCT,new=PCT] [--json]",
                  undeploy_use[] =
                      "mtc endpoints undeploy NAME DEPLOYED_ID [--split ID=PCT,...] [--json]",
                  list_use[] = "mtc endpoints list [--json]",
                  predict_use[] = "mtc endpoints predict NAME PROMPT [--max-tokens N] "
                                  "[--temperature T] [--seed S] [--json]",
                  delete_use[] = "mtc endpoints delete NAME";

/* --opt VALUE pairs and up to max positionals; flags (no value): --json.
 * opts: NULL-terminated names (without "--"); vals gets each one's value. */
static int parse(struct cli *c, int argc, char **argv, const char *use, const char *const *opts,
                 const char **vals, const char **pos, int max, int min)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            c->json = 1;
            continue;
        }
        if (strncmp(a, "--", 2) == 0) {
            int k = -1;
            for (int j = 0; opts && opts[j]; j++)
                if (strcmp(a + 2, opts[j]) == 0)
                    k = j;
            if (k < 0)
                return fprintf(stderr, "mtc: unknown option %s\nusage: %s\n", a, use), 2;
            if (i + 1 >= argc)
                return fprintf(stderr, "mtc: %s needs a value\nusage: %s\n", a, use), 2;
            vals[k] = argv[++i];
            continue;
        }
        if (n >= max)
            return fprintf(stderr, "mtc: unexpected argument %s\nusage: %s\n", a, use), 2;
        pos[n++] = a;
    }
    if (n < min)
        return fprintf(stderr, "mtc: missing arguments\nusage: %s\n", use), 2;
    return 0;
}

static int print_reply(struct cli *c, json_t *reply, const char *line)
{
    if (c->json)
        cli_print_json(reply);
    else
        printf("%s\n", line);
    json_decref(reply);
    return 0;
}

static int e_create(struct cli *c, int argc, char **argv)
{
    static const char *const opts[] = {"display-name", NULL};
    const char *vals[1] = {NULL}, *pos[1];
    int rc = parse(c, argc, argv, create_use, opts, vals, pos, 1, 1);
    if (rc)
        return rc;
    char path[512], q[200];
    snprintf(q, sizeof(q), "?endpointId=%.120s", pos[0]);
    ep_path(c, path, sizeof(path), NULL, q);
    json_t *body = json_pack("{s:s}", "displayName", vals[0] ? vals[0] : "");
    json_t *out = NULL;
    mtc_error_t err = {""};
    rc = cli_call_ok(c, "POST", path, body, &out, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    char line[256];
    snprintf(line, sizeof(line), "created endpoint %s", pos[0]);
    return print_reply(c, out, line);
}

/* "d1=80,new=20" → {"d1":80,"0":20} ("new" and "0" name the model being deployed). */
static json_t *split_arg(const char *s, mtc_error_t *err)
{
    json_t *o = json_object();
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '='), *end;
        long v = eq ? strtol(eq + 1, &end, 10) : -1;
        if (!eq || eq == t || *end || v < 0 || v > 100) {
            json_decref(o);
            errprintf(err, "--split: \"%s\": expected ID=PERCENT[,ID=PERCENT...]", s);
            return NULL;
        }
        *eq = '\0';
        json_object_set_new(o, strcmp(t, "new") == 0 ? "0" : t, json_integer(v));
    }
    return o;
}

static int int_arg(const char *name, const char *v, json_t *obj, const char *key)
{
    if (!v)
        return 0;
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end)
        return cli_fail("--%s: \"%s\" is not an integer", name, v), -1;
    json_object_set_new(obj, key, json_integer(n));
    return 0;
}

static int e_deploy(struct cli *c, int argc, char **argv)
{
    static const char *const opts[] = {"model", "cluster", "partition", "min", "max", "target",
                                       "scale-down-delay", "split", NULL};
    const char *v[8] = {NULL}, *pos[1];
    const char *use = deploy_use;
    int rc = parse(c, argc, argv, use, opts, v, pos, 1, 1);
    if (rc)
        return rc;
    if (!v[0] || !v[1])
        return fprintf(stderr, "mtc: --model and --cluster are required\nusage: %s\n", use), 2;
    json_t *d = json_pack("{s:s, s:s}", "model", v[0], "cluster", v[1]);
    json_t *as = json_object();
    if (v[2])
        json_object_set_new(d, "partition", json_string(v[2]));
    if (int_arg("min", v[3], d, "minReplicaCount") < 0 ||
        int_arg("max", v[4], d, "maxReplicaCount") < 0 ||
        int_arg("target", v[5], as, "targetConcurrentRequests") < 0 ||
        int_arg("scale-down-delay", v[6], as, "scaleDownDelaySeconds") < 0) {
        json_decref(d), json_decref(as);
        return 1;
    }
    json_object_set_new(d, "autoscaling", as);
    json_t *body = json_pack("{s:o}", "deployedModel", d);
    mtc_error_t err = {""};
    if (v[7]) {
        json_t *s = split_arg(v[7], &err);
        if (!s) {
            json_decref(body);
            return cli_fail("%s", err.text);
        }
        json_object_set_new(body, "trafficSplit", s);
    }
    char path[512];
    ep_path(c, path, sizeof(path), pos[0], ":deployModel");
    json_t *out = NULL;
    rc = cli_call_ok(c, "POST", path, body, &out, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    json_t *dm = json_object_get(out, "deployedModel");
    char line[400];
    snprintf(line, sizeof(line),
             "deployed %s as %s on endpoint %s (cluster %s, %lld-%lld replicas)",
             mtc_json_str_or(dm, "modelVersion", ""), mtc_json_str_or(dm, "id", ""), pos[0],
             mtc_json_str_or(dm, "cluster", ""),
             (long long)json_integer_value(json_object_get(dm, "minReplicaCount")),
             (long long)json_integer_value(json_object_get(dm, "maxReplicaCount")));
    return print_reply(c, out, line);
}

static int e_undeploy(struct cli *c, int argc, char **argv)
{
    static const char *const opts[] = {"split", NULL};
    const char *v[1] = {NULL}, *pos[2];
    int rc = parse(c, argc, argv, undeploy_use, opts, v, pos, 2, 2);
    if (rc)
        return rc;
    json_t *body = json_pack("{s:s}", "deployedModelId", pos[1]);
    mtc_error_t err = {""};
    if (v[0]) {
        json_t *s = split_arg(v[0], &err);
        if (!s) {
            json_decref(body);
            return cli_fail("%s", err.text);
        }
        json_object_set_new(body, "trafficSplit", s);
    }
    char path[512];
    ep_path(c, path, sizeof(path), pos[0], ":undeployModel");
    json_t *out = NULL;
    rc = cli_call_ok(c, "POST", path, body, &out, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    char line[256];
    snprintf(line, sizeof(line), "undeployed %s from endpoint %s", pos[1], pos[0]);
    return print_reply(c, out, line);
}

static int e_delete(struct cli *c, int argc, char **argv)
{
    const char *pos[1];
    int rc = parse(c, argc, argv, delete_use, NULL, NULL, pos, 1, 1);
    if (rc)
        return rc;
    char path[512];
    ep_path(c, path, sizeof(path), pos[0], NULL);
    json_t *out = NULL;
    mtc_error_t err = {""};
    if (cli_call_ok(c, "DELETE", path, NULL, &out, &err) < 0)
        return cli_fail("%s", err.text);
    char line[256];
    snprintf(line, sizeof(line), "deleted endpoint %s", pos[0]);
    return print_reply(c, out, line);
}

/* One row per deployed model (an endpoint without one: a row of its own). */
static void rows_of(const json_t *e, json_t *rows)
{
    const char *name = strrchr(mtc_json_str_or(e, "name", ""), '/');
    name = name ? name + 1 : "?";
    json_t *deps = json_object_get(e, "deployedModels"), *d;
    size_t i;
    if (json_array_size(deps) == 0)
        json_array_append_new(rows, json_pack("{s:s}", "name", name));
    json_array_foreach(deps, i, d)
    {
        const char *id = mtc_json_str_or(d, "id", "");
        char split[16], reps[32];
        snprintf(split, sizeof(split), "%lld%%",
                 (long long)json_integer_value(
                     json_object_get(json_object_get(e, "trafficSplit"), id)));
        snprintf(reps, sizeof(reps), "%lld/%zu (%lld-%lld)",
                 (long long)json_integer_value(json_object_get(d, "readyReplicaCount")),
                 json_array_size(json_object_get(d, "replicas")),
                 (long long)json_integer_value(json_object_get(d, "minReplicaCount")),
                 (long long)json_integer_value(json_object_get(d, "maxReplicaCount")));
        json_array_append_new(rows, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "name", name, "id",
                                              id, "model", mtc_json_str_or(d, "modelVersion", ""),
                                              "cluster", mtc_json_str_or(d, "cluster", ""), "split",
                                              split, "replicas", reps));
    }
}

static int e_list(struct cli *c, int argc, char **argv)
{
    int p = cli_json_only(c, argc, argv, list_use);
    if (p)
        return p;
    mtc_error_t err = {""};
    char path[512];
    ep_path(c, path, sizeof(path), NULL, "");
    json_t *all = cli_list_all(c, path, "endpoints", &err);
    if (!all)
        return cli_fail("%s", err.text);
    static const struct cli_col cols[] = {
        {"ENDPOINT", "name", 20, "?"}, {"DEPLOYED", "id", 9, "-"}, {"MODEL", "model", 20, "-"},
        {"CLUSTER", "cluster", 10, "-"}, {"SPLIT", "split", 6, "-"},
        {"READY/REPLICAS (MIN-MAX)", "replicas", 0, "-"}, {NULL, NULL, 0, NULL}};
    json_t *rows = json_array(), *e;
    size_t i;
    json_array_foreach(all, i, e) rows_of(e, rows);
    json_t *out = json_pack("{s:o}", "endpoints", all);
    cli_print_list(c, out, rows, cols);
    json_decref(out);
    json_decref(rows);
    return 0;
}

static int e_predict(struct cli *c, int argc, char **argv)
{
    static const char *const opts[] = {"max-tokens", "temperature", "seed", NULL};
    const char *v[3] = {NULL}, *pos[2];
    int rc = parse(c, argc, argv, predict_use, opts, v, pos, 2, 2);
    if (rc)
        return rc;
    json_t *body = json_pack("{s:s}", "prompt", pos[1]);
    if (int_arg("max-tokens", v[0] ? v[0] : "32", body, "max_tokens") < 0 ||
        int_arg("seed", v[2], body, "seed") < 0) {
        json_decref(body);
        return 1;
    }
    if (v[1]) {
        char *end;
        double t = strtod(v[1], &end);
        if (!*v[1] || *end) {
            json_decref(body);
            return cli_fail("--temperature: \"%s\" is not a number", v[1]);
        }
        json_object_set_new(body, "temperature", json_real(t));
    }
    char path[512];
    ep_path(c, path, sizeof(path), pos[0], "/v1/completions");
    json_t *out = NULL;
    mtc_error_t err = {""};
    rc = cli_call_ok(c, "POST", path, body, &out, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    if (c->json) {
        cli_print_json(out);
    } else {
        json_t *ch = json_array_get(json_object_get(out, "choices"), 0);
        printf("%s\n", mtc_json_str_or(ch, "text", ""));
    }
    json_decref(out);
    return 0;
}

static const struct cli_cmd endpoints_cmds[] = {
    {"create", e_create, "create an endpoint: create NAME", create_use},
    {"deploy", e_deploy, "deploy a model version: deploy NAME --model REF --cluster ID",
     deploy_use},
    {"undeploy", e_undeploy, "remove a deployed model: undeploy NAME DEPLOYED_ID", undeploy_use},
    {"list", e_list, "endpoints with their deployed models, split and replicas", list_use},
    {"predict", e_predict, "send a completion and print it: predict NAME PROMPT", predict_use},
    {"delete", e_delete, "delete an endpoint and stop its replicas", delete_use},
    {NULL, NULL, NULL, NULL}};

int cmd_endpoints(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc endpoints", endpoints_cmds, argc - 1, argv + 1);
}
