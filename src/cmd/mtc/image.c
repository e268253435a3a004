/* image: `mtc image import|build-trainer|inspect|pull|cache` — squashfs
 * images for the container plugin (srun --container-image=NAME.sqsh or a
 * registry reference). The work is the image module's; this file parses
 * arguments and prints. */
#include "cli.h"
#include "image/image.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A signal ends the tools (tar, mksquashfs) of the terminal's process group;
 * mtc itself lives on to remove its work directory, then exits 128+signal. */
static volatile sig_atomic_t caught;
static void on_signal(int sig)
{
    caught = sig;
}
static void catch_signals(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* [SRC] -o OUT [--json]. want_src: 1 when SRC is required. 0, or 2 after usage. */
static int args(struct cli *c, int argc, char **argv, int want_src, const char **src,
                const char **out, const char *use)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) {
            if (i + 1 >= argc)
                return cli_fail("%s needs a file name\nusage: %s", argv[i], use), 2;
            *out = argv[++i];
        } else if (strcmp(argv[i], "--json") == 0) {
            c->json = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n", use);
            exit(0);
        } else if (argv[i][0] == '-' || !want_src || *src) {
            return cli_fail("unexpected argument \"%s\"\nusage: %s", argv[i], use), 2;
        } else {
            *src = argv[i];
        }
    }
    if (want_src && !*src)
        return cli_fail("missing %s\nusage: %s", want_src == 2 ? "the image" : "the source", use),
               2;
    if (out && !*out)
        return cli_fail("missing -o NAME.sqsh (the image to write)\nusage: %s", use), 2;
    return 0;
}

static void human_size(long long n, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(*units)) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static void print_list(const char *label, const json_t *a)
{
    char *s = json_dumps(a, JSON_COMPACT);
    printf("%-12s%s\n", label, s ? s : "[]");
    free(s);
}

static void print_image(const json_t *j)
{
    char hs[32];
    const char *s;
    human_size((long long)json_integer_value(json_object_get(j, "size")), hs, sizeof(hs));
    printf("%-12s%s\n", "image", json_string_value(json_object_get(j, "path")));
    printf("%-12s%lld bytes (%s)\n", "size",
           (long long)json_integer_value(json_object_get(j, "size")), hs);
    printf("%-12s%s\n", "digest", json_string_value(json_object_get(j, "digest")));
    static const char *const strs[] = {"source", "created", "workingDir"};
    for (size_t i = 0; i < sizeof(strs) / sizeof(*strs); i++)
        printf("%-12s%s\n", strs[i],
               (s = json_string_value(json_object_get(j, strs[i]))) ? s : "-");
    print_list("entrypoint", json_object_get(j, "entrypoint"));
    print_list("cmd", json_object_get(j, "cmd"));
    json_t *env = json_object_get(j, "env"), *e;
    size_t i;
    if (json_array_size(env) == 0)
        printf("%-12s-\n", "env");
    json_array_foreach(env, i, e) printf("%-12s%s\n", i == 0 ? "env" : "", json_string_value(e));
}

/* After a build: the image (or its facts, --json), or the failure. */
static int finish(struct cli *c, int rc, const char *out, mtc_error_t *err)
{
    if (caught) {
        if (rc == 0)
            unlink(out);
        fprintf(stderr, "mtc: interrupted; %s not written\n", out);
        return 128 + caught;
    }
    if (rc < 0)
        return cli_fail("%s", err->text);
    json_t *j = image_inspect(out, err);
    if (!j)
        return cli_fail("%s", err->text);
    if (c->json)
        cli_print_json(j);
    else
        printf("wrote %s (%lld bytes, %s)\n", out,
               (long long)json_integer_value(json_object_get(j, "size")),
               json_string_value(json_object_get(j, "digest")));
    json_decref(j);
    return 0;
}

extern char **environ;

/* 1 when src names a registry image rather than a file here: docker://, or
 * not shaped like a path (pyxis's rule) and no such file. */
static int is_reference(const char *src)
{
    struct stat st;
    return strncmp(src, "docker://", 9) == 0 || (!image_ref_is_path(src) && stat(src, &st) < 0);
}

int image_cli_pull(const char *src, const char *out, const char *arch, mtc_error_t *err)
{
    struct image_ref r;
    char digest[72], work[4096], tar[4200];
    const char *home = getenv("HOME");
    struct image_pull_opts o = {.uid = (uid_t)-1, .gid = (gid_t)-1, .home = home ? home : "",
                                .env = environ, .arch = arch};
    if (image_ref_parse(src, &r, err) < 0 || image_pull_resolve(&r, &o, src, digest, err) < 0)
        return -1;
    const char *t = getenv("TMPDIR");
    snprintf(work, sizeof(work), "%s/mtc-pull.XXXXXX", t && *t == '/' ? t : "/tmp");
    if (!mkdtemp(work))
        return errprintf(err, "cannot make a temporary directory: %s", strerror(errno));
    snprintf(tar, sizeof(tar), "%s/layout.tar", work);
    int rc = image_pull_fetch(&r, &o, src, digest, tar, out, err);
    rmdir(work);
    return rc;
}

static int i_import(struct cli *c, int argc, char **argv)
{
    const char *src = NULL, *out = NULL;
    if (args(c, argc, argv, 1, &src, &out,
             "mtc image import OCI_ARCHIVE|DIR|docker://[USER@][REGISTRY#]IMAGE[:TAG] -o NAME.sqsh "
             "[--json]"))
        return 2;
    mtc_error_t err = {""};
    catch_signals();
    if (is_reference(src))
        return finish(c, image_cli_pull(src, out, NULL, &err), out, &err);
    unsigned procs;
    if (image_max_processors(environ, &procs, &err) < 0)
        return finish(c, -1, out, &err);
    return finish(c, image_import_procs(src, out, NULL, procs, &err), out, &err);
}

/* mtc image pull REF --cache DIR [--max-gb N] [--as UID:GID --home DIR]
 * [--env NAME=VALUE]...: the image cache's entry for REF, pulled when
 * missing; prints its path. The container plugin runs it as root for a
 * step's user (the registry is reached as that user). */
static int i_pull(struct cli *c, int argc, char **argv)
{
    static const char *use = "mtc image pull REF --cache DIR [--max-gb N] [--as UID:GID "
                             "--home DIR] [--env NAME=VALUE]... [--json]";
    const char *ref = NULL, *dir = NULL, *home = getenv("HOME");
    double max_gb = 0;
    struct image_pull_opts o = {.uid = (uid_t)-1, .gid = (gid_t)-1, .env = environ};
    char *envs[24] = {NULL};
    size_t nenv = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: %s\n", use);
            return 0;
        }
        if (strcmp(a, "--json") == 0) {
            c->json = 1;
            continue;
        }
        if (a[0] != '-') {
            if (ref)
                return cli_fail("unexpected argument \"%s\"\nusage: %s", a, use), 2;
            ref = a;
            continue;
        }
        if (!v)
            return cli_fail("%s needs a value\nusage: %s", a, use), 2;
        i++;
        unsigned u, g;
        char *end;
        if (strcmp(a, "--cache") == 0) {
            dir = v;
        } else if (strcmp(a, "--max-gb") == 0) {
            max_gb = strtod(v, &end);
            if (*end || max_gb < 0)
                return cli_fail("--max-gb: '%s' is not a size in GB", v), 2;
        } else if (strcmp(a, "--as") == 0 && sscanf(v, "%u:%u", &u, &g) == 2) {
            o.uid = u;
            o.gid = g;
        } else if (strcmp(a, "--home") == 0) {
            home = v;
        } else if (strcmp(a, "--env") == 0 && strchr(v, '=') && nenv + 1 < 24) {
            envs[nenv++] = (char *)v;
        } else {
            return cli_fail("bad option %s %s\nusage: %s", a, v, use), 2;
        }
    }
    if (!ref || !dir || dir[0] != '/')
        return cli_fail("missing REF or --cache /DIR\nusage: %s", use), 2;
    if (o.uid != (uid_t)-1) { /* for another user: only root, with that user's list only */
        if (geteuid() != 0)
            return cli_fail("--as: only root pulls for another user"), 2;
        o.env = envs;
    }
    o.home = home ? home : "";
    char path[4096];
    int pulled = 0;
    mtc_error_t err = {""};
    if (image_cache_get(dir, max_gb, ref, &o, path, sizeof(path), &pulled, &err) < 0)
        return cli_fail("%s", err.text);
    if (c->json) {
        json_t *j = json_pack("{s:s,s:b}", "path", path, "pulled", pulled);
        cli_print_json(j);
        json_decref(j);
    } else {
        printf("%s\n", path);
    }
    return 0;
}

/* mtc image cache list|prune (-c CLUSTER | --dir DIR) [--keep-gb N]: -c is
 * a local cluster's cache (its directory's images/) */
static int i_cache(struct cli *c, int argc, char **argv)
{
    static const char *use =
        "mtc image cache list|prune (-c CLUSTER | --dir DIR) [--keep-gb N] [--json]";
    const char *what = argc > 1 ? argv[1] : NULL, *dir = NULL;
    char cdir[4096];
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n", use);
            return 0;
        }
    double keep = 0;
    for (int i = 2; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--json") == 0)
            c->json = 1;
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if ((strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--cluster") == 0) &&
                 i + 1 < argc) {
            const char *id = argv[++i];
            if (!mtc_name_valid(id, 63))
                return cli_fail("-c %s: not a cluster id", id), 2;
            snprintf(cdir, sizeof(cdir), "%s/clusters/%s/images", c->home, id);
            dir = cdir;
        }
        else if (strcmp(argv[i], "--keep-gb") == 0 && i + 1 < argc &&
                 (keep = strtod(argv[i + 1], &end)) >= 0 && !*end)
            i++;
        else
            return cli_fail("unexpected argument \"%s\"\nusage: %s", argv[i], use), 2;
    }
    if (!what || (strcmp(what, "list") != 0 && strcmp(what, "prune") != 0) || !dir)
        return cli_fail("usage: %s", use), 2;
    mtc_error_t err = {""};
    if (strcmp(what, "prune") == 0) {
        size_t n = 0;
        if (image_cache_prune(dir, keep, &n, &err) < 0)
            return cli_fail("%s", err.text);
        printf("removed %zu image%s\n", n, n == 1 ? "" : "s");
        return 0;
    }
    json_t *a = image_cache_list(dir, &err), *e;
    if (!a)
        return cli_fail("%s", err.text);
    if (c->json) {
        cli_print_json(a);
    } else {
        size_t i;
        printf("%-19s %10s %-6s %-20s %s\n", "DIGEST", "SIZE", "IN USE", "LAST USED", "REFERENCE");
        json_array_foreach(a, i, e)
        {
            char hs[32], when[32];
            human_size((long long)json_integer_value(json_object_get(e, "size")), hs, sizeof(hs));
            time_t t = (time_t)json_integer_value(json_object_get(e, "lastUsed"));
            struct tm tm;
            strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", gmtime_r(&t, &tm));
            printf("%-19.19s %10s %-6s %-20s %s\n", json_string_value(json_object_get(e, "digest")),
                   hs, json_is_true(json_object_get(e, "inUse")) ? "yes" : "no", when,
                   json_string_value(json_object_get(e, "reference")));
        }
    }
    json_decref(a);
    return 0;
}

static int i_build_trainer(struct cli *c, int argc, char **argv)
{
    const char *src = NULL, *out = NULL;
    char trainer[4096];
    if (args(c, argc, argv, 0, &src, &out, "mtc image build-trainer -o NAME.sqsh [--json]"))
        return 2;
    if (cli_sibling("mtc-train", trainer, sizeof(trainer)) < 0)
        return cli_fail("mtc-train is not next to this mtc binary (build it, or install mtc)");
    mtc_error_t err = {""};
    catch_signals();
    return finish(c, image_build_trainer(trainer, NULL, out, &err), out, &err);
}

static int i_inspect(struct cli *c, int argc, char **argv)
{
    const char *img = NULL;
    if (args(c, argc, argv, 2, &img, NULL, "mtc image inspect NAME.sqsh [--json]"))
        return 2;
    mtc_error_t err = {""};
    json_t *j = image_inspect(img, &err);
    if (!j)
        return cli_fail("%s", err.text);
    if (c->json)
        cli_print_json(j);
    else
        print_image(j);
    json_decref(j);
    return 0;
}

static const struct cli_cmd image_cmds[] = {
    {"import", i_import, "an OCI layout, docker-save archive or root directory → NAME.sqsh", NULL},
    {"build-trainer", i_build_trainer, "the image of mtc-train, Open MPI and a small userland",
     NULL},
    {"inspect", i_inspect, "size, digest and config of an image", NULL},
    {"pull", i_pull, "a registry image into an image cache (what the container plugin runs)",
     NULL},
    {"cache", i_cache, "list|prune an image cache: the registry images converted for jobs", NULL},
    {NULL, NULL, NULL, NULL},
};

int cmd_image(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc image", image_cmds, argc - 1, argv + 1);
}
