/* registry conversions: a version in another format (native, hf, llmc)
 * made once through mtc-train and kept beside it, and an artifact copied out
 * for a user (export, copy). */
#include "registry/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int run_trainer(const char *trainer, char *const argv[], mtc_error_t *err)
{
    char *out = NULL;
    int st = mtc_run(argv, NULL, &out, 30 * 60 * 1000);
    if (st != 0) {
        /* mtc-train's last line says why */
        char *last = out ? out : "";
        size_t n = out ? strlen(out) : 0;
        while (n > 0 && (out[n - 1] == '\n'))
            out[--n] = '\0';
        char *nl = out ? strrchr(out, '\n') : NULL;
        if (nl)
            last = nl + 1;
        errprintf(err, "%s %s failed: %.180s", trainer, argv[1],
                  st < 0 ? strerror(errno) : last);
        free(out);
        errno = EIO;
        return -1;
    }
    free(out);
    return 0;
}

/* The directory holding a manifest's files in its own format. */
static const char *own_dir(const json_t *manifest)
{
    return json_string_value(json_object_get(manifest, "dir"));
}

/* An llm.c artifact's file: dir/<its one file>. */
static int llmc_file(const char *dir, char *out, size_t len)
{
    return registry_one_bin(dir, out, len);
}

/* Convert src (format from, a directory or an llm.c file) into the new
 * directory tmp in format to (one step: either side native). */
static int convert(const char *trainer, const char *src, int from, int to, const char *tmp,
                   mtc_error_t *err)
{
    if (to == REGISTRY_NATIVE) {
        char *argv[] = {(char *)trainer, "import", "--from",
                        from == REGISTRY_HF ? "hf" : "llmc", (char *)src, "--output",
                        (char *)tmp, NULL};
        return run_trainer(trainer, argv, err);
    }
    char out[PATH_MAX + 16];
    snprintf(out, sizeof(out), "%s%s", tmp, to == REGISTRY_LLMC ? "/model.bin" : "");
    if (to == REGISTRY_LLMC && mkdir(tmp, 0700) < 0)
        return errprintf(err, "%.200s: %s", tmp, strerror(errno));
    char *argv[] = {(char *)trainer, "export",       "--checkpoint",
                    (char *)src,     "--format",     to == REGISTRY_HF ? "safetensors" : "llmc",
                    "--output",      (char *)out,    NULL};
    return run_trainer(trainer, argv, err);
}

/* The trainer next to the running program when none is given. */
static const char *find_trainer(const char *trainer, char *buf, size_t len)
{
    if (trainer)
        return trainer;
    if (mtc_exe_dir(buf, len - 16) == 0) {
        strcat(buf, "/mtc-train");
        if (access(buf, X_OK) == 0)
            return buf;
    }
    return NULL;
}

int registry_materialize(const char *models, const json_t *manifest, int format,
                         const char *trainer, char *out, size_t len, mtc_error_t *err)
{
    int from = schema_enum_parse(&registry_format_enum,
                                 json_string_value(json_object_get(manifest, "format")), 0);
    const char *dir = own_dir(manifest), *digest = json_string_value(json_object_get(manifest, "digest"));
    if (from < 0 || !dir || !digest || strspn(digest, "0123456789abcdef") != 64) {
        errno = EINVAL;
        return errprintf(err, "a stored version's manifest is malformed");
    }
    if (format < 0)
        format = from;
    char src[PATH_MAX], tb[PATH_MAX];
    if (from == REGISTRY_LLMC) {
        if (llmc_file(dir, src, sizeof(src)) < 0)
            return errprintf(err, "%.200s: the stored llm.c file is missing", dir);
    } else {
        snprintf(src, sizeof(src), "%s", dir);
    }
    if (format == from) {
        if (strlen(src) >= len)
            return errprintf(err, "path too long");
        memcpy(out, src, strlen(src) + 1);
        return 0;
    }
    char conv[PATH_MAX], tmp[PATH_MAX], hex[17], mid[PATH_MAX];
    const char *fname = schema_enum_name(&registry_format_enum, format);
    snprintf(conv, sizeof(conv), "%s/converted/%s-%s", models, digest, fname);
    if (!mtc_path_exists(conv)) {
        trainer = find_trainer(trainer, tb, sizeof(tb));
        if (!trainer) {
            errno = ENOENT;
            return errprintf(err, "no mtc-train to convert %s to %s",
                             schema_enum_name(&registry_format_enum, from), fname);
        }
        /* hf <-> llmc goes through the native checkpoint */
        if (from != REGISTRY_NATIVE && format != REGISTRY_NATIVE) {
            if (registry_materialize(models, manifest, REGISTRY_NATIVE, trainer, mid, sizeof(mid),
                                     err) < 0)
                return -1;
            snprintf(src, sizeof(src), "%s", mid);
            from = REGISTRY_NATIVE;
        }
        snprintf(tmp, sizeof(tmp), "%s/converted", models);
        if (mtc_mkdir_p(tmp, 0700) < 0)
            return errprintf(err, "%.200s: %s", tmp, strerror(errno));
        mtc_random_hex(hex, 8);
        snprintf(tmp, sizeof(tmp), "%s/converted/.tmp-%s", models, hex);
        if (convert(trainer, src, from, format, tmp, err) < 0) {
            mtc_rm_rf(tmp);
            return -1;
        }
        /* the tokenizer stays with the weights (not for llm.c: one file) */
        char tok[PATH_MAX + 32], tto[PATH_MAX + 64];
        snprintf(tok, sizeof(tok), "%s/tokenizer.json", own_dir(manifest));
        /* mtc-train import writes <out>/step_00000000 */
        char step[PATH_MAX];
        const char *made = tmp;
        if (format == REGISTRY_NATIVE) {
            if (registry_newest_step(tmp, step, sizeof(step)) < 0) {
                mtc_rm_rf(tmp);
                return errprintf(err, "mtc-train import left no checkpoint in %.200s", tmp);
            }
            made = step;
        }
        snprintf(tto, sizeof(tto), "%s/tokenizer.json", made);
        if (format != REGISTRY_LLMC && mtc_path_exists(tok) && !mtc_path_exists(tto) &&
            registry_copy_file(tok, tto, 0644, err) < 0) {
            mtc_rm_rf(tmp);
            return -1;
        }
        if (rename(made, conv) < 0 && errno != EEXIST && errno != ENOTEMPTY) {
            int e = errno;
            mtc_rm_rf(tmp);
            errno = e;
            return errprintf(err, "%.200s: %s", conv, strerror(e));
        }
        mtc_rm_rf(tmp);
    }
    if (format == REGISTRY_LLMC)
        return llmc_file(conv, out, len) < 0 ? errprintf(err, "%.200s: no .bin", conv) : 0;
    if (strlen(conv) >= len)
        return errprintf(err, "path too long");
    memcpy(out, conv, strlen(conv) + 1);
    return 0;
}

/* src (mtcd's own: an artifact under models, or a conversion) copied into
 * out, files written as as (NULL: root). 0, or -1 + err. */
static int copy_artifact_fd(const char *src, int out, const struct mtc_user *as,
                            mtc_error_t *err)
{
    int sfd = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat sb;
    if (sfd < 0 || fstat(sfd, &sb) < 0) {
        int e = errno;
        if (sfd >= 0)
            close(sfd);
        errno = e;
        return errprintf(err, "%.200s: %s", src, strerror(e));
    }
    struct mtc_fsid saved;
    int rc = 0;
    if (S_ISREG(sb.st_mode)) { /* llm.c: one file */
        mtc_fsid_enter(as, &saved);
        rc = mtc_copy_into(sfd, out, strrchr(src, '/') + 1, 0644, err);
        mtc_fsid_leave(&saved);
        close(sfd);
        return rc;
    }
    int d2 = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = d2 < 0 ? NULL : fdopendir(d2);
    if (!d) {
        int e = errno;
        if (d2 >= 0)
            close(d2);
        close(sfd);
        return errprintf(err, "%.200s: %s", src, strerror(e));
    }
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || fstatat(sfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(sb.st_mode))
            continue;
        int in = openat(sfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (in < 0) {
            rc = errprintf(err, "%.200s/%.100s: %s", src, de->d_name, strerror(errno));
            break;
        }
        mtc_fsid_enter(as, &saved);
        rc = mtc_copy_into(in, out, de->d_name, 0644, err);
        mtc_fsid_leave(&saved);
        close(in);
    }
    closedir(d);
    close(sfd);
    return rc;
}

int registry_copy_artifact(const char *src, const char *dir, mtc_error_t *err)
{
    struct mtc_reach root = {NULL, NULL, 0};
    if (mtc_mkdir_p(dir, 0755) < 0)
        return errprintf(err, "%.200s: %s", dir, strerror(errno));
    int out = mtc_reach_open(dir, &root, O_DIRECTORY, err);
    if (out < 0)
        return -1;
    int rc = copy_artifact_fd(src, out, NULL, err);
    close(out);
    return rc;
}

int registry_export(const char *models, const json_t *manifest, int format, const char *trainer,
                    const char *dir, const struct mtc_reach *how, mtc_error_t *err)
{
    char src[PATH_MAX];
    /* the output directory first: a refusal costs no conversion */
    int out = mtc_reach_open(dir, how, MTC_REACH_MKDIR, err);
    if (out < 0) {
        int e = errno;
        char why[256];
        snprintf(why, sizeof(why), "%s", err->text);
        errprintf(err, "outputDir: %s", why);
        errno = e;
        return -1;
    }
    int rc = registry_materialize(models, manifest, format, trainer, src, sizeof(src), err);
    if (rc == 0)
        rc = copy_artifact_fd(src, out, how->as, err);
    close(out);
    return rc;
}
