/* image: `mtc image import|build-trainer|inspect` — squashfs images for the
 * container plugin (srun --container-image=NAME.sqsh). The work is the image
 * module's; this file parses arguments and prints. */
#include "cli.h"
#include "image/image.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static int i_import(struct cli *c, int argc, char **argv)
{
    const char *src = NULL, *out = NULL;
    if (args(c, argc, argv, 1, &src, &out,
             "mtc image import OCI_ARCHIVE|DIR -o NAME.sqsh [--json]"))
        return 2;
    mtc_error_t err = {""};
    catch_signals();
    return finish(c, image_import(src, out, &err), out, &err);
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
    {NULL, NULL, NULL, NULL},
};

int cmd_image(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc image", image_cmds, argc - 1, argv + 1);
}
