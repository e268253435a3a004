/* models: `mtc models list|show|versions|alias|export|delete|upload` — the
 * model registry through mtcd's API. References are NAME (the default
 * version), NAME@3 or NAME@alias; every bad one is refused here in one line. */
#include "cli.h"
#include "registry/registry.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void models_path(struct cli *c, char *buf, size_t len, const char *ref, const char *suffix)
{
    snprintf(buf, len, "/v1beta1/projects/%s/locations/%s/models%s%s%s", c->project, c->location,
             ref ? "/" : "", ref ? ref : "", suffix ? suffix : "");
}

/* "default,prod" of a version's aliases into buf. */
static const char *aliases_text(const json_t *v, char *buf, size_t len)
{
    size_t i, o = 0;
    json_t *a;
    buf[0] = '\0';
    json_array_foreach(json_object_get(v, "versionAliases"), i, a)
        o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", o ? "," : "",
                              json_string_value(a));
    return buf;
}

/* A human size: 1.5M. */
static const char *size_text(const json_t *v, char *buf, size_t len)
{
    double b = (double)json_integer_value(json_object_get(json_object_get(v, "artifact"), "sizeBytes"));
    const char *u = "B";
    static const char *const units[] = {"K", "M", "G", "T"};
    for (int i = 0; i < 4 && b >= 1024; i++) {
        b /= 1024;
        u = units[i];
    }
    snprintf(buf, len, *u == 'B' ? "%.0f%s" : "%.1f%s", b, u);
    return buf;
}

static json_t *row(const json_t *v)
{
    const char *name = mtc_json_str(v, "name");
    char al[256], sz[32], age[16];
    cli_age(mtc_json_str(v, "versionCreateTime"), age, sizeof(age));
    json_t *r = json_pack("{s:s, s:s?, s:s, s:s?, s:s, s:s}", "name",
                          name && strrchr(name, '/') ? strrchr(name, '/') + 1 : "?", "version",
                          mtc_json_str(v, "versionId"), "aliases", aliases_text(v, al, sizeof(al)),
                          "format", mtc_json_str(json_object_get(v, "artifact"), "format"), "size",
                          size_text(v, sz, sizeof(sz)), "age", age);
    const json_t *lin = json_object_get(v, "lineage");
    if (mtc_json_str(lin, "experiment"))
        json_object_set_new(r, "from", json_sprintf("run %s", mtc_json_str(lin, "runId")));
    if (json_object_get(v, "versionCount"))
        json_object_set_new(r, "versions",
                            json_sprintf("%lld", (long long)json_integer_value(
                                                     json_object_get(v, "versionCount"))));
    return r;
}

static const char m_list_use[] = "mtc models list [--json]";

static int m_list(struct cli *c, int argc, char **argv)
{
    int p = cli_json_only(c, argc, argv, m_list_use);
    if (p)
        return p;
    mtc_error_t err = {""};
    char path[512];
    models_path(c, path, sizeof(path), NULL, "");
    json_t *all = cli_list_all(c, path, "models", &err);
    if (!all)
        return cli_fail("%s", err.text);
    static const struct cli_col cols[] = {
        {"NAME", "name", 24, "?"},   {"DEFAULT", "version", 8, "-"}, {"VERSIONS", "versions", 9, "-"},
        {"FORMAT", "format", 7, "-"}, {"SIZE", "size", 8, "-"},      {"AGE", "age", 5, "-"},
        {"ALIASES", "aliases", 0, ""}, {NULL, NULL, 0, NULL}};
    json_t *rows = json_array(), *v;
    size_t i;
    json_array_foreach(all, i, v) json_array_append_new(rows, row(v));
    json_t *out = json_pack("{s:o}", "models", all);
    cli_print_list(c, out, rows, cols);
    json_decref(out);
    json_decref(rows);
    return 0;
}

/* Positional arguments (up to max) and --json; the first is a model
 * reference, checked. 0, or the exit status after saying why. */
static int args(struct cli *c, int argc, char **argv, const char *use, const char **pos, int min,
                int max, int *npos)
{
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            c->json = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return printf("usage: %s\n", use), -1;
        else if (*npos < max && (argv[i][0] != '-' || *npos > 0))
            pos[(*npos)++] = argv[i];
        else
            return cli_fail("unexpected argument \"%s\"\nusage: %s", argv[i], use), 2;
    }
    if (*npos < min)
        return cli_fail("usage: %s", use), 2;
    struct registry_ref ref;
    mtc_error_t err = {""};
    if (registry_ref_parse(pos[0], &ref, &err) < 0)
        return cli_fail("%s", err.text);
    return 0;
}

static void print_version(const json_t *v)
{
    char al[256], sz[32];
    const json_t *a = json_object_get(v, "artifact"), *lin = json_object_get(v, "lineage");
    printf("%s@%s\n", mtc_json_str(v, "name"), mtc_json_str(v, "versionId"));
    printf("  aliases:     %s\n", aliases_text(v, al, sizeof(al)));
    printf("  created:     %s\n", mtc_json_str(v, "versionCreateTime"));
    printf("  artifact:    %s, %s, digest %.16s, %s\n", mtc_json_str(a, "format"),
           size_text(v, sz, sizeof(sz)), mtc_json_str(a, "digest"), mtc_json_str(v, "artifactUri"));
    static const char *const keys[] = {"experiment", "runId",      "slurmJobId",  "cluster",
                                       "recipe",     "task",       "parentModel", "parentCheckpoint",
                                       "tokenizer",  "dataset",    "datasetFingerprint", NULL};
    for (int i = 0; keys[i]; i++)
        if (mtc_json_str(lin, keys[i]))
            printf("  %-18s %s\n", keys[i], mtc_json_str(lin, keys[i]));
    static const char *const nums[] = {"finalTrainLoss", "finalValLoss", "tokensSeen", "step", NULL};
    for (int i = 0; nums[i]; i++)
        if (json_is_number(json_object_get(lin, nums[i])))
            printf("  %-18s %g\n", nums[i], json_number_value(json_object_get(lin, nums[i])));
}

static int m_show(struct cli *c, int argc, char **argv)
{
    const char *pos[1];
    int n, p = args(c, argc, argv, "mtc models show NAME[@VERSION|@ALIAS] [--json]", pos, 1, 1, &n);
    if (p)
        return p < 0 ? 0 : p;
    char path[512];
    models_path(c, path, sizeof(path), pos[0], NULL);
    json_t *v = NULL;
    mtc_error_t err = {""};
    if (cli_call_ok(c, "GET", path, NULL, &v, &err) < 0)
        return cli_fail("%s", err.text);
    if (c->json) {
        cli_print_json(v);
    } else {
        printf("%s (%s)\n", mtc_json_str(v, "displayName"), mtc_json_str(v, "name"));
        if (mtc_json_str(v, "description"))
            printf("  %s\n", mtc_json_str(v, "description"));
        print_version(v);
    }
    json_decref(v);
    return 0;
}

static int m_versions(struct cli *c, int argc, char **argv)
{
    const char *pos[1];
    int n, p = args(c, argc, argv, "mtc models versions NAME [--json]", pos, 1, 1, &n);
    if (p)
        return p < 0 ? 0 : p;
    if (strchr(pos[0], '@'))
        return cli_fail("versions takes a model name, not a version (%s)", pos[0]);
    char path[512];
    models_path(c, path, sizeof(path), pos[0], ":listVersions");
    json_t *r = NULL;
    mtc_error_t err = {""};
    if (cli_call_ok(c, "GET", path, NULL, &r, &err) < 0)
        return cli_fail("%s", err.text);
    static const struct cli_col cols[] = {
        {"VERSION", "version", 8, "?"}, {"FORMAT", "format", 7, "-"}, {"SIZE", "size", 8, "-"},
        {"AGE", "age", 5, "-"},         {"FROM", "from", 28, "-"},    {"ALIASES", "aliases", 0, ""},
        {NULL, NULL, 0, NULL}};
    json_t *rows = json_array(), *v;
    size_t i;
    json_array_foreach(json_object_get(r, "models"), i, v) json_array_append_new(rows, row(v));
    cli_print_list(c, r, rows, cols);
    json_decref(rows);
    json_decref(r);
    return 0;
}

static int m_alias(struct cli *c, int argc, char **argv)
{
    const char *use = "mtc models alias NAME@VERSION ALIAS... (-ALIAS removes one) [--json]";
    const char *pos[33];
    int n, p = args(c, argc, argv, use, pos, 2, 33, &n);
    if (p)
        return p < 0 ? 0 : p;
    json_t *list = json_array();
    for (int i = 1; i < n; i++) {
        const char *a = pos[i] + (pos[i][0] == '-');
        if (!registry_alias_valid(a)) {
            json_decref(list);
            return cli_fail("alias \"%s\": must match [a-z][a-z0-9-]{0,126} (not a number)",
                            pos[i]);
        }
        json_array_append_new(list, json_string(pos[i]));
    }
    char path[512];
    models_path(c, path, sizeof(path), pos[0], ":mergeVersionAliases");
    json_t *body = json_pack("{s:o}", "versionAliases", list), *v = NULL;
    mtc_error_t err = {""};
    int rc = cli_call_ok(c, "POST", path, body, &v, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    char al[256];
    if (c->json)
        cli_print_json(v);
    else
        printf("%s@%s: %s\n", strrchr(mtc_json_str(v, "name"), '/') + 1,
               mtc_json_str(v, "versionId"), aliases_text(v, al, sizeof(al)));
    json_decref(v);
    return 0;
}

/* --format F among the arguments: its value (removed from argv), or NULL. */
static int take_opt(int *argc, char **argv, const char *opt, const char **val)
{
    for (int i = 1; i < *argc; i++)
        if (strcmp(argv[i], opt) == 0) {
            if (i + 1 >= *argc)
                return cli_fail("%s needs a value", opt);
            *val = argv[i + 1];
            memmove(&argv[i], &argv[i + 2], (size_t)(*argc - i - 2) * sizeof(char *));
            *argc -= 2;
            return 0;
        }
    return 0;
}

static int check_format(const char *f)
{
    if (f && schema_enum_parse(&registry_format_enum, f, 0) < 0)
        return cli_fail("--format %s: want native, hf or llmc", f);
    return 0;
}

/* An absolute path of p (which need not exist yet) into buf. */
static void absolute(const char *p, char *buf, size_t len)
{
    char cwd[PATH_MAX];
    if (realpath(p, buf))
        return;
    if (p[0] == '/' || !getcwd(cwd, sizeof(cwd)))
        snprintf(buf, len, "%s", p);
    else
        snprintf(buf, len, "%s/%s", cwd, p);
}

static int m_export(struct cli *c, int argc, char **argv)
{
    const char *use = "mtc models export NAME[@VERSION|@ALIAS] DIR [--format native|hf|llmc]";
    const char *format = NULL, *pos[2];
    if (take_opt(&argc, argv, "--format", &format) || check_format(format))
        return 1;
    int n, p = args(c, argc, argv, use, pos, 2, 2, &n);
    if (p)
        return p < 0 ? 0 : p;
    char dir[PATH_MAX + 256], path[512];
    absolute(pos[1], dir, sizeof(dir));
    models_path(c, path, sizeof(path), pos[0], ":export");
    json_t *body = json_pack("{s:s, s:s?}", "outputDir", dir, "format", format), *r = NULL;
    mtc_error_t err = {""};
    int rc = cli_call_ok(c, "POST", path, body, &r, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    if (c->json)
        cli_print_json(r);
    else
        printf("exported %s (version %s, %s) to %s\n", pos[0], mtc_json_str(r, "versionId"),
               mtc_json_str(r, "format"), mtc_json_str(r, "outputDir"));
    json_decref(r);
    return 0;
}

static int m_delete(struct cli *c, int argc, char **argv)
{
    const char *pos[1];
    int n, p = args(c, argc, argv, "mtc models delete NAME[@VERSION|@ALIAS]", pos, 1, 1, &n);
    if (p)
        return p < 0 ? 0 : p;
    char path[512];
    models_path(c, path, sizeof(path), pos[0], NULL);
    json_t *r = NULL;
    mtc_error_t err = {""};
    if (cli_call_ok(c, "DELETE", path, NULL, &r, &err) < 0)
        return cli_fail("%s", err.text);
    json_decref(r);
    printf("deleted %s%s\n", strchr(pos[0], '@') ? "version " : "model ", pos[0]);
    return 0;
}

static int m_upload(struct cli *c, int argc, char **argv)
{
    const char *use = "mtc models upload DIR --name NAME [--format native|hf|llmc] "
                      "[--description TEXT] [--run TASK_DIR]";
    const char *format = NULL, *name = NULL, *desc = NULL, *run = NULL;
    if (take_opt(&argc, argv, "--format", &format) || take_opt(&argc, argv, "--name", &name) ||
        take_opt(&argc, argv, "--description", &desc) || take_opt(&argc, argv, "--run", &run) ||
        check_format(format))
        return 1;
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return printf("usage: %s\n", use), 0;
    int json = 0;
    if (argc == 3 && strcmp(argv[2], "--json") == 0)
        json = 1, argc--;
    if (argc != 2 || argv[1][0] == '-' || !name)
        return cli_fail("usage: %s", use), 2;
    c->json |= json;
    mtc_error_t err = {""};
    if (!registry_name_valid(name))
        return registry_name_error(name, &err), cli_fail("--name: %s", err.text);
    char dir[PATH_MAX + 256], rdir[PATH_MAX + 256], path[512];
    absolute(argv[1], dir, sizeof(dir));
    if (run)
        absolute(run, rdir, sizeof(rdir));
    json_t *model = json_pack("{s:s, s:s?, s:s?, s:s?}", "artifactUri", dir, "format", format,
                              "description", desc, "sourceRun", run ? rdir : NULL);
    json_t *body = json_pack("{s:s, s:o}", "modelId", name, "model", model), *r = NULL;
    models_path(c, path, sizeof(path), NULL, ":upload");
    int rc = cli_call_ok(c, "POST", path, body, &r, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    /* an operation: the files are stored in the background */
    json_t *op = NULL, *v = NULL;
    char opname[256];
    snprintf(opname, sizeof(opname), "%s", mtc_json_str_or(r, "name", ""));
    json_decref(r);
    if (cli_wait_op(c, opname, 0, &op, &err) < 0)
        return cli_fail("%s", err.text);
    const json_t *e = json_object_get(op, "error");
    if (e) {
        cli_fail("%s", mtc_json_str_or(e, "message", "the upload failed"));
        json_decref(op);
        return 1;
    }
    const json_t *resp = json_object_get(op, "response");
    char ref[128];
    snprintf(ref, sizeof(ref), "%s@%s", name, mtc_json_str(resp, "modelVersionId"));
    models_path(c, path, sizeof(path), ref, NULL);
    if (cli_call_ok(c, "GET", path, NULL, &v, &err) < 0) {
        json_decref(op);
        return cli_fail("%s", err.text);
    }
    if (c->json) {
        json_t *o = json_pack("{s:O, s:O, s:O}", "model", json_object_get(resp, "model"),
                              "modelVersionId", json_object_get(resp, "modelVersionId"), "version",
                              v);
        cli_print_json(o);
        json_decref(o);
    } else {
        char al[256], sz[32];
        printf("registered %s (%s, %s; aliases: %s)\n", ref,
               mtc_json_str(json_object_get(v, "artifact"), "format"), size_text(v, sz, sizeof(sz)),
               aliases_text(v, al, sizeof(al)));
    }
    json_decref(v);
    json_decref(op);
    return 0;
}

static const struct cli_cmd models_cmds[] = {
    {"list", m_list, "the registered models and their default versions", m_list_use},
    {"show", m_show, "a version (NAME = the default one, NAME@3, NAME@alias) with its lineage",
     NULL},
    {"versions", m_versions, "every version of a model with its aliases", NULL},
    {"alias", m_alias, "give a version aliases (-ALIAS removes one): alias NAME@3 prod -old", NULL},
    {"export", m_export, "write a version to a directory: export REF DIR [--format hf]", NULL},
    {"delete", m_delete, "delete a model (NAME) or one version (NAME@3)", NULL},
    {"upload", m_upload, "register a checkpoint, HF directory or llm.c file: upload DIR --name N",
     NULL},
    {NULL, NULL, NULL, NULL}};

int cmd_models(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc models", models_cmds, argc - 1, argv + 1);
}
