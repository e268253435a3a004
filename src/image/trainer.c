/* trainer: `mtc image build-trainer` — an image holding mtc-train, the shared
 * libraries ldd names for it, Open MPI's and PMIx's plugins (with theirs), and
 * a minimal Debian userland, so that `srun --mpi=pmix --container-image=`
 * runs the trainer with nothing else installed in the image. */
#include "image/internal.h"

#include <errno.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The userland: dash as /bin/sh and the coreutils a job script reaches for. */
static const char *const userland[] = {
    "/bin/sh",        "/bin/dash",      "/usr/bin/cat",      "/usr/bin/ls",
    "/usr/bin/env",   "/usr/bin/echo",  "/usr/bin/id",       "/usr/bin/pwd",
    "/usr/bin/mkdir", "/usr/bin/touch", "/usr/bin/true",     "/usr/bin/false",
    "/usr/bin/rm",    "/usr/bin/sleep", "/usr/bin/hostname", NULL,
};

/* Trees copied whole when the host has them; plugins: their .so files' libraries come too. */
static const struct tree {
    const char *path;
    int plugins;
} trees[] = {
    {"/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3", 1}, /* Open MPI 4 components */
    {"/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi", 1},  /* older Open MPI */
    {"/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix", 1},       /* PMIx plugins */
    {"/usr/lib/x86_64-linux-gnu/pmix2/share", 0},          /* PMIx help and params */
    {"/usr/share/openmpi", 0},                             /* Open MPI help files */
    {"/usr/share/pmix", 0},
    {"/etc/openmpi", 0}, /* mca params, default hostfile */
    {NULL, 0},
};

/* The host's merged-/usr links, recreated so that paths resolve alike. */
static const char *const usr_links[] = {"bin", "sbin", "lib", "lib64", NULL};

static const struct {
    const char *path, *text;
} files[] = {
    {"etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"
                   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
    {"etc/group", "root:x:0:\nnogroup:x:65534:\n"},
    {"etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files dns\n"},
    {NULL, NULL},
};

static const struct {
    const char *path;
    mode_t mode;
} dirs[] = {
    {"tmp", 01777}, {"var/tmp", 01777}, {"proc", 0755}, {"sys", 0755},     {"dev", 0755},
    {"home", 0755}, {"root", 0700},     {"run", 0755},  {"usr/bin", 0755}, {NULL, 0},
};

struct build {
    const char *root;
    json_t *seen;    /* host names installed */
    json_t *scan;    /* files whose libraries are required (array of paths) */
    json_t *plugins; /* files whose missing libraries are tolerated */
};

static int copy(const char *from, const char *to, mtc_error_t *err)
{
    char *argv[] = {"cp", "-L", "--preserve=mode,timestamps", (char *)from, (char *)to, NULL};
    return image_tool(argv, "copying into the image", NULL, err);
}

/* Install a host file by the name the program needs: its real file where it
 * lies in the same directory (and the name as a symlink to it), else the real
 * file under the name (Debian alternatives: /etc/alternatives/… links). */
static int install(struct build *b, const char *path, mtc_error_t *err)
{
    char dcopy[PATH_MAX], bcopy[PATH_MAX], dir[PATH_MAX], name[PATH_MAX * 2], real[PATH_MAX];
    char dst[PATH_MAX * 3];
    snprintf(dcopy, sizeof(dcopy), "%s", path);
    snprintf(bcopy, sizeof(bcopy), "%s", path);
    if (!realpath(dirname(dcopy), dir) || !realpath(path, real))
        return errprintf(err, "%s: %s", path, strerror(errno));
    snprintf(name, sizeof(name), "%s/%s", dir, basename(bcopy));
    if (json_object_get(b->seen, name))
        return 0;
    json_object_set_new(b->seen, name, json_true());
    if (image_root_dir(b->root, dir + 1, 0755, err) < 0)
        return -1;
    char rdir[PATH_MAX];
    snprintf(rdir, sizeof(rdir), "%s", real);
    const char *real_dir = dirname(rdir);
    if (strcmp(real_dir, dir) != 0 || strcmp(real, name) == 0) {
        snprintf(dst, sizeof(dst), "%s%s", b->root, name);
        return copy(real, dst, err);
    }
    snprintf(dst, sizeof(dst), "%s%s", b->root, real);
    if (!json_object_get(b->seen, real)) {
        json_object_set_new(b->seen, real, json_true());
        if (copy(real, dst, err) < 0)
            return -1;
    }
    snprintf(dst, sizeof(dst), "%s%s", b->root, name);
    snprintf(bcopy, sizeof(bcopy), "%s", real);
    unlink(dst);
    if (symlink(basename(bcopy), dst) < 0)
        return errprintf(err, "symlink %s: %s", name, strerror(errno));
    return 0;
}

/* Install the libraries ldd names for files (and the loader). required: a
 * library ldd cannot find is an error (else the plugin is left as it is: it
 * does not load on the host either). */
static int install_libs(struct build *b, const json_t *list, int required, mtc_error_t *err)
{
    size_t n = json_array_size(list), i;
    if (n == 0)
        return 0;
    char **argv = calloc(n + 2, sizeof(char *));
    if (!argv)
        return errprintf(err, "out of memory");
    argv[0] = "ldd";
    for (i = 0; i < n; i++)
        argv[i + 1] = (char *)json_string_value(json_array_get(list, i));
    struct mtc_io io = {.capture = MTC_IO_OUT | MTC_IO_ERR};
    int rc = mtc_run_io(argv, NULL, &io, 120000); /* non-zero when one is not dynamic */
    free(argv);
    free(io.err);
    if (rc < 0 || !io.out) {
        free(io.out);
        return errprintf(err, "cannot run ldd: %s", strerror(errno));
    }
    char current[PATH_MAX] = "";
    char *save = NULL;
    rc = 0;
    for (char *l = strtok_r(io.out, "\n", &save); l && rc == 0; l = strtok_r(NULL, "\n", &save)) {
        if (l[0] != '\t') {
            snprintf(current, sizeof(current), "%.*s", (int)strcspn(l, ":"), l);
            continue;
        }
        char *arrow = strstr(l, "=> "), *path = arrow ? arrow + 3 : l + 1;
        if (arrow && strncmp(path, "not found", 9) == 0) {
            if (required)
                rc = errprintf(err, "%s needs %.*s, which ldd cannot find", current,
                               (int)(arrow - l - 2), l + 1);
            continue;
        }
        if (path[0] != '/')
            continue; /* linux-vdso, "statically linked" */
        path[strcspn(path, " ")] = '\0';
        rc = install(b, path, err);
    }
    free(io.out);
    return rc;
}

static struct build *walk_build; /* nftw has no user pointer */
static int walk_so(const char *path, const struct stat *st, int type, struct FTW *f)
{
    (void)st;
    (void)f;
    size_t n = strlen(path);
    if (type == FTW_F && n > 3 && strcmp(path + n - 3, ".so") == 0)
        json_array_append_new(walk_build->plugins, json_string(path));
    return 0;
}

static int copy_tree(struct build *b, const struct tree *t, mtc_error_t *err)
{
    struct stat st;
    if (stat(t->path, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0;
    char parent[PATH_MAX], dst[PATH_MAX * 2];
    snprintf(parent, sizeof(parent), "%s", t->path);
    snprintf(dst, sizeof(dst), "%s%s/", b->root, dirname(parent));
    char *argv[] = {"cp", "-a", (char *)t->path, dst, NULL};
    if (image_root_dir(b->root, parent + 1, 0755, err) < 0 ||
        image_tool(argv, t->path, NULL, err) < 0)
        return -1;
    if (t->plugins) {
        walk_build = b;
        nftw(t->path, walk_so, 16, FTW_PHYS);
    }
    return 0;
}

static int skeleton(struct build *b, const char *version, mtc_error_t *err)
{
    char host[16], link[PATH_MAX], dst[PATH_MAX * 2];
    for (const char *const *l = usr_links; *l; l++) {
        snprintf(host, sizeof(host), "/%s", *l);
        ssize_t n = readlink(host, link, sizeof(link) - 1);
        if (n <= 0)
            continue;
        link[n] = '\0';
        snprintf(dst, sizeof(dst), "%s/%s", b->root, *l);
        if (symlink(link, dst) < 0)
            return errprintf(err, "symlink /%s: %s", *l, strerror(errno));
        snprintf(dst, sizeof(dst), "%s", link[0] == '/' ? link + 1 : link);
        if (image_root_dir(b->root, dst, 0755, err) < 0)
            return -1;
    }
    for (size_t i = 0; dirs[i].path; i++)
        if (image_root_dir(b->root, dirs[i].path, dirs[i].mode, err) < 0)
            return -1;
    if (image_root_dir(b->root, "etc", 0755, err) < 0)
        return -1;
    for (size_t i = 0; files[i].path; i++) {
        snprintf(dst, sizeof(dst), "%s/%s", b->root, files[i].path);
        if (mtc_write_file_atomic(dst, files[i].text, strlen(files[i].text), 0644) < 0)
            return errprintf(err, "/%s: %s", files[i].path, strerror(errno));
    }
    snprintf(dst, sizeof(dst), "%s/etc/os-release", b->root);
    char vline[128] = "";
    if (version && *version)
        snprintf(vline, sizeof(vline), "VERSION_ID=\"%s\"\nVERSION=\"%s\"\n", version, version);
    if (mtc_write_file_fmt(
            dst, 0644, "NAME=\"mtc trainer\"\nID=mtc-trainer\n%sPRETTY_NAME=\"mtc trainer%s%s\"\n",
            vline, vline[0] ? " " : "", vline[0] ? version : "") < 0)
        return errprintf(err, "/etc/os-release: %s", strerror(errno));
    return 0;
}

static int assemble(struct build *b, const char *trainer, const char *version, mtc_error_t *err)
{
    char dst[PATH_MAX * 2];
    if (skeleton(b, version, err) < 0)
        return -1;
    snprintf(dst, sizeof(dst), "%s/usr/bin/mtc-train", b->root);
    if (copy(trainer, dst, err) < 0)
        return -1;
    json_array_append_new(b->scan, json_string(trainer));
    for (const char *const *u = userland; *u; u++) {
        if (!mtc_path_exists(*u))
            return errprintf(err, "%s is not installed on this machine", *u);
        if (install(b, *u, err) < 0)
            return -1;
        json_array_append_new(b->scan, json_string(*u));
    }
    for (const struct tree *t = trees; t->path; t++)
        if (copy_tree(b, t, err) < 0)
            return -1;
    if (install_libs(b, b->scan, 1, err) < 0 || install_libs(b, b->plugins, 0, err) < 0)
        return -1;
    json_t *cfg = json_pack("{s:{s:[s], s:s, s:[s], s:[]}}", "config", "Env",
                            "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "WorkingDir", "/",
                            "Entrypoint", "mtc-train", "Cmd");
    json_t *meta = cfg ? image_meta_from_config(cfg, "mtc image build-trainer", err) : NULL;
    json_decref(cfg);
    int rc = meta ? image_write_config(b->root, meta, 0, err) : -1;
    json_decref(meta);
    return rc;
}

int image_build_trainer(const char *trainer, const char *version, const char *out, mtc_error_t *err)
{
    char work[PATH_MAX], root[PATH_MAX + 8];
    if (access(trainer, X_OK) < 0)
        return errprintf(err, "%s: %s", trainer, strerror(errno));
    if (image_out_check(out, err) < 0 || image_workdir(work, sizeof(work), err) < 0)
        return -1;
    snprintf(root, sizeof(root), "%s/root", work);
    struct build b = {
        .root = root, .seen = json_object(), .scan = json_array(), .plugins = json_array()};
    int rc = -1;
    if (mkdir(root, 0755) < 0)
        errprintf(err, "%s: %s", root, strerror(errno));
    else if (assemble(&b, trainer, version, err) == 0 && image_squash(root, out, 0, err) == 0)
        rc = 0;
    json_decref(b.seen);
    json_decref(b.scan);
    json_decref(b.plugins);
    mtc_rm_rf(work);
    return rc;
}
