/* enroot: `enroot import`, `version` and `list` as NVIDIA's enroot has them,
 * for the jobs and guides that convert registry images on the cluster
 * (`ENROOT_CONFIG_PATH=$DIR enroot import -o X.sqsh docker://…`). mtc runs
 * as enroot through a link of that name, installed only where no real enroot
 * is; the pull is mtc's (image_cli_pull). Other subcommands say in one line
 * that mtc's runtime does not provide them. */
#include "cli.h"
#include "image/image.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The enroot release whose import interface (flags, variables, exit codes) this follows. */
#define ENROOT_COMPAT "3.5.0"

static int enroot_err(const char *fmt, const char *a)
{
    fprintf(stderr, "[ERROR] ");
    fprintf(stderr, fmt, a);
    fputc('\n', stderr);
    return 1;
}

static void usage_import(FILE *f)
{
    fprintf(f, "Usage: enroot import [options] [--] URI\n\n"
               "Import a container image from a specific location.\n\n"
               " Schemes:\n"
               "   docker://[USER@][REGISTRY#]IMAGE[:TAG]  Import a Docker image from a registry\n\n"
               " Options:\n"
               "   -a, --arch    Architecture of the image (defaults to host architecture)\n"
               "   -o, --output  Name of the output image file (defaults to \"URI.sqsh\")\n");
}

/* enroot's default name: the reference after its registry, '/', ':' and '@' → '+'. */
static void default_output(const char *uri, char *out, size_t len)
{
    const char *p = uri;
    if (strncmp(p, "docker://", 9) == 0)
        p += 9;
    const char *h = strchr(p, '#');
    if (h)
        p = h + 1;
    else if (strchr(p, '@') && !strstr(p, "@sha256:"))
        p = strchr(p, '@') + 1;
    size_t o = 0;
    for (; *p && o + 6 < len; p++)
        out[o++] = strchr("/:@", *p) ? '+' : *p;
    snprintf(out + o, len - o, ".sqsh");
}

static int e_import(int argc, char **argv)
{
    const char *out = NULL, *arch = NULL, *uri = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && i + 1 < argc)
            out = argv[++i];
        else if (strncmp(a, "--output=", 9) == 0)
            out = a + 9;
        else if ((strcmp(a, "-a") == 0 || strcmp(a, "--arch") == 0) && i + 1 < argc)
            arch = argv[++i];
        else if (strncmp(a, "--arch=", 7) == 0)
            arch = a + 7;
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            return usage_import(stdout), 0;
        else if (strcmp(a, "--") == 0 && i + 1 < argc && !uri)
            uri = argv[++i];
        else if (a[0] == '-' || uri)
            return usage_import(stderr), 1;
        else
            uri = a;
    }
    if (!uri)
        return usage_import(stderr), 1;
    if (strncmp(uri, "docker://", 9) != 0)
        return enroot_err(strstr(uri, "://") ? "Invalid argument: %s (mtc's enroot imports "
                                               "docker:// only)"
                                             : "Invalid argument: %s",
                          uri);
    /* enroot's architecture names: x86_64 and aarch64 too */
    if (arch && (strcmp(arch, "x86_64") == 0 || strcmp(arch, "amd64") == 0))
        arch = "amd64";
    else if (arch && (strcmp(arch, "aarch64") == 0 || strcmp(arch, "arm64") == 0))
        arch = "arm64";
    char def[1024];
    if (!out) {
        default_output(uri, def, sizeof(def));
        out = def;
    }
    struct stat st;
    if (lstat(out, &st) == 0)
        return enroot_err("File already exists: %s", out);
    fprintf(stderr, "[INFO] Querying registry for permission grant\n");
    mtc_error_t err = {""};
    if (image_cli_pull(uri, out, arch, &err) < 0)
        return enroot_err("%s", err.text);
    fprintf(stderr, "[INFO] Created %s\n", out);
    return 0;
}

static int e_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("%s\n", ENROOT_COMPAT);
    return 0;
}

/* mtc keeps no enroot container root filesystems: the list is empty. */
static int e_list(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--fancy") == 0)
            printf("NAME  PID  COMM  STATE  STARTED  TIME  MNTNS  USERNS  COMMAND\n");
        else
            return fprintf(stderr, "Usage: enroot list [options]\n"), 1;
    }
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
} cmds[] = {
    {"import", e_import},
    {"version", e_version},
    {"list", e_list},
};

int cmd_enroot(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc < 2 ? stderr : stdout,
                "Usage: enroot COMMAND [ARG...]\n\nmtc's enroot: import, version and list. Images "
                "run with srun --container-image (docs/containers.md).\n");
        return argc < 2 ? 1 : 0;
    }
    if (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)
        return e_version(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (strcmp(argv[1], cmds[i].name) == 0)
            return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr,
            "[ERROR] enroot %s: not provided by mtc's runtime (it provides import, version and "
            "list; run images with srun --container-image)\n",
            argv[1]);
    return 1;
}
