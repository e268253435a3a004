/* squash: the squashfs side of images — the work directory and tool runner the
 * builders share, the config files an image carries, mksquashfs to write one
 * (on ENROOT_MAX_PROCESSORS processors) and unsquashfs + sha256 to inspect one. */
#include "image/internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOOL_TIMEOUT_MS (30 * 60 * 1000)

int image_workdir(char *buf, size_t len, mtc_error_t *err)
{
    const char *t = getenv("TMPDIR");
    if (snprintf(buf, len, "%s/mtc-image.XXXXXX", t && *t ? t : "/tmp") >= (int)len)
        return errprintf(err, "TMPDIR is too long");
    if (!mkdtemp(buf))
        return errprintf(err, "cannot make a temporary directory in %s: %s", t && *t ? t : "/tmp",
                         strerror(errno));
    return 0;
}

int image_out_check(const char *out, mtc_error_t *err)
{
    char tmp[PATH_MAX];
    struct stat st;
    if (!out || !*out)
        return errprintf(err, "no output file (-o NAME.sqsh)");
    if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
        return errprintf(err, "cannot write %s: it is a directory", out);
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", out) >= (int)sizeof(tmp))
        return errprintf(err, "cannot write %s: name too long", out);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return errprintf(err, "cannot write %s: %s", out, strerror(errno));
    close(fd);
    unlink(tmp);
    return 0;
}

/* The first non-empty line of s (a tool's reason; its last line is often
 * only "exiting with failure status") into buf. */
static void first_line(const char *s, char *buf, size_t len)
{
    buf[0] = '\0';
    while (s && (*s == '\n' || *s == ' '))
        s++;
    if (s && *s)
        snprintf(buf, len, "%.*s", (int)strcspn(s, "\n"), s);
}

int image_tool(char *const argv[], const char *what, char **out, mtc_error_t *err)
{
    struct mtc_io io = {.capture = out ? MTC_IO_OUT | MTC_IO_ERR : MTC_IO_MERGE};
    int rc = mtc_run_io(argv, NULL, &io, TOOL_TIMEOUT_MS);
    if (rc != 0) {
        char line[200];
        first_line(out ? io.err : io.out, line, sizeof(line));
        if (rc < 0)
            snprintf(line, sizeof(line), "cannot run %s: %s", argv[0], strerror(errno));
        else if (!line[0])
            snprintf(line, sizeof(line), "%s exited with status %d", argv[0], rc);
        free(io.out);
        free(io.err);
        return errprintf(err, "%s: %s", what, line);
    }
    if (out)
        *out = io.out;
    else
        free(io.out);
    free(io.err);
    return 0;
}

int image_parent_unsafe(const char *root, const char *rel)
{
    char path[PATH_MAX * 2];
    size_t rl = strlen(root);
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *p = path + rl + 1; (p = strchr(p, '/')); p++) {
        struct stat st;
        *p = '\0';
        int r = lstat(path, &st);
        *p = '/';
        if (r < 0)
            return 0;
        if (!S_ISDIR(st.st_mode))
            return 1;
    }
    return 0;
}

int image_root_dir(const char *root, const char *rel, mode_t mode, mtc_error_t *err)
{
    char path[PATH_MAX * 2];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    if (image_parent_unsafe(root, rel))
        return errprintf(err, "the image's /%s lies under a symlink", rel);
    if (lstat(path, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return errprintf(err, "the image's /%s is not a directory", rel);
        return 0;
    }
    if (mtc_mkdir_p(path, mode) < 0 || chmod(path, mode) < 0)
        return errprintf(err, "cannot make /%s in the image: %s", rel, strerror(errno));
    return 0;
}

static int put_file(const char *root, const char *rel, const char *text, mtc_error_t *err)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    if (image_parent_unsafe(root, rel))
        return errprintf(err, "the image's /%s lies under a symlink", rel);
    if (mtc_write_file_atomic(path, text, strlen(text), 0644) < 0)
        return errprintf(err, "cannot write /%s in the image: %s", rel, strerror(errno));
    return 0;
}

int image_write_config(const char *root, const json_t *meta, int keep_env, mtc_error_t *err)
{
    if (image_root_dir(root, "etc", 0755, err) < 0 || image_root_dir(root, ".mtc", 0755, err) < 0)
        return -1;
    if (!keep_env) {
        char *env = image_env_format(json_object_get(meta, "env"), err);
        int rc = env ? put_file(root, "etc/environment", env, err) : -1;
        free(env);
        if (rc < 0)
            return -1;
    }
    char *js = json_dumps(meta, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    int rc = -1;
    if (!js)
        errprintf(err, "out of memory");
    else if (put_file(root, ".mtc/image.json", js, err) == 0)
        rc = 0;
    free(js);
    return rc;
}

/* squashfs-tools before 4.5 lack -quiet. */
static int mksquashfs_quiet(void)
{
    char *help = NULL;
    char *argv[] = {"mksquashfs", "-help", NULL};
    mtc_run(argv, NULL, &help, 10000);
    int yes = help && strstr(help, "-quiet");
    free(help);
    return yes;
}

int image_max_processors(char *const env[], unsigned *procs, mtc_error_t *err)
{
    static const char name[] = "ENROOT_MAX_PROCESSORS";
    const char *v = NULL;
    *procs = 0;
    for (size_t i = 0; env && env[i]; i++)
        if (strncmp(env[i], name, sizeof(name) - 1) == 0 && env[i][sizeof(name) - 1] == '=')
            v = env[i] + sizeof(name);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (*end || errno || !isdigit((unsigned char)v[0]) || n > 65536)
        return errprintf(err,
                         "%s=%.40s: not a number of processors (a positive integer; 0 or unset: "
                         "every core)",
                         name, v);
    *procs = (unsigned)n;
    return 0;
}

int image_squash(const char *root, const char *out, unsigned procs, mtc_error_t *err)
{
    char tmp[PATH_MAX], nproc[16];
    snprintf(nproc, sizeof(nproc), "%u", procs);
    snprintf(tmp, sizeof(tmp), "%s.tmp", out);
    /* mkdtemp made the work directory 0700: the image's / must be 0755 */
    if (chmod(root, 0755) < 0)
        return errprintf(err, "chmod %s: %s", root, strerror(errno));
    /* zstd at level 1: on a 135 MB tree of libraries 0.6 CPU-s against gzip's 20
     * (mksquashfs's default), for a file 10% larger (enroot's default, lzo with
     * data uncompressed, took 4 CPU-s for a file 3.3 times larger); squashfuse
     * and the kernel (CONFIG_SQUASHFS_ZSTD, Linux 4.14+) read it */
    char *argv[] = {
        "mksquashfs", (char *)root,          tmp, "-noappend", "-all-root", "-no-progress", "-comp",
        "zstd",       "-Xcompression-level", "1", NULL,        NULL,        NULL,           NULL};
    size_t a = 10;
    if (procs) {
        argv[a++] = "-processors";
        argv[a++] = nproc;
    }
    if (mksquashfs_quiet())
        argv[a++] = "-quiet";
    if (image_tool(argv, "mksquashfs", NULL, err) < 0) {
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, out) < 0) {
        int e = errno;
        unlink(tmp);
        return errprintf(err, "cannot write %s: %s", out, strerror(e));
    }
    return 0;
}

/* --- inspect ------------------------------------------------------------- */

/* A file of the image, or NULL when it has none (unsquashfs fails). */
static char *cat_file(const char *image, const char *path)
{
    char *argv[] = {"unsquashfs", "-cat", (char *)image, (char *)path, NULL};
    struct mtc_io io = {.capture = MTC_IO_OUT | MTC_IO_ERR};
    int rc = mtc_run_io(argv, NULL, &io, 60000);
    free(io.err);
    if (rc != 0) {
        free(io.out);
        return NULL;
    }
    return io.out;
}

json_t *image_inspect(const char *path, mtc_error_t *err)
{
    char digest[72];
    int sq = mtc_is_squashfs(path);
    if (sq < 0)
        return errprintf(err, "%s: %s", path, strerror(errno)), NULL;
    if (!sq)
        return errprintf(err, "%s: not a squashfs image", path), NULL;
    struct stat st;
    if (stat(path, &st) < 0)
        return errprintf(err, "%s: %s", path, strerror(errno)), NULL;
    if (mtc_sha256_file(path, digest, err) < 0)
        return NULL;
    json_t *j = json_object();
    json_object_set_new(j, "path", json_string(path));
    json_object_set_new(j, "size", json_integer((json_int_t)st.st_size));
    json_object_set_new(j, "digest", json_string(digest));

    char *meta_text = cat_file(path, "/.mtc/image.json");
    char *env_text = cat_file(path, "/etc/environment");
    json_t *meta = meta_text ? json_loads(meta_text, 0, NULL) : NULL;
    json_t *env = env_text ? image_env_parse(env_text) : NULL;
    if (!env && json_is_array(json_object_get(meta, "env")))
        env = json_incref(json_object_get(meta, "env"));
    json_object_set_new(j, "env", env ? env : json_array());
    static const char *const strs[] = {"workingDir", "source", "created"};
    static const char *const lists[] = {"entrypoint", "cmd"};
    for (size_t i = 0; i < sizeof(strs) / sizeof(*strs); i++) {
        json_t *v = json_object_get(meta, strs[i]);
        json_object_set(j, strs[i], json_is_string(v) ? v : json_null());
    }
    for (size_t i = 0; i < sizeof(lists) / sizeof(*lists); i++) {
        json_t *v = json_object_get(meta, lists[i]);
        json_object_set_new(j, lists[i], json_is_array(v) ? json_deep_copy(v) : json_array());
    }
    json_decref(meta);
    free(meta_text);
    free(env_text);
    return j;
}
