/* registry blobs: an artifact's files stored once by content under
 * <models>/blobs/sha256, a directory of hard links per version, and their
 * removal and the sweep of what no version links. */
#include "registry/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Ingest and removal link and unlink blobs: one at a time in a process. */
static pthread_mutex_t blob_lock = PTHREAD_MUTEX_INITIALIZER;

/* Copy from to a new file to (mode), both mtcd's own (under models). */
int registry_copy_file(const char *from, const char *to, mode_t mode, mtc_error_t *err)
{
    int in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return errprintf(err, "%.200s: %s", from, strerror(errno));
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    int rc = out < 0 ? -1 : mtc_copy_fd(in, out, NULL);
    int e = errno;
    close(in);
    if (out >= 0 && close(out) < 0 && rc == 0)
        rc = -1, e = errno;
    if (rc < 0) {
        if (out >= 0)
            unlink(to);
        errno = e;
        return errprintf(err, "cannot copy %.150s to %.150s: %s", from, to, strerror(e));
    }
    return 0;
}

/* The bytes of in stored as a blob under models: copied once into a
 * temporary file while hashed, then linked as blobs/sha256/<hex> (a blob
 * there already is the same bytes). Under blob_lock. hex[65], blob: its
 * name. 0/-1 + err. */
static int put_blob(const char *models, int in, const char *shown, char hex[65], char *blob,
                    size_t len, mtc_error_t *err)
{
    char tmp[PATH_MAX], r[17];
    mtc_random_hex(r, 8);
    snprintf(tmp, sizeof(tmp), "%s/blobs/tmp/%s", models, r);
    int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (out < 0)
        return errprintf(err, "%.200s: %s", tmp, strerror(errno));
    int rc = lseek(in, 0, SEEK_SET) < 0 ? -1 : mtc_copy_fd(in, out, hex);
    int e = errno;
    if (close(out) < 0 && rc == 0)
        rc = -1, e = errno;
    if (rc == 0) {
        snprintf(blob, len, "%s/blobs/sha256/%s", models, hex);
        if (link(tmp, blob) < 0 && errno != EEXIST)
            rc = -1, e = errno;
    }
    unlink(tmp);
    if (rc < 0) {
        errno = e;
        return errprintf(err, "cannot store %.200s: %s", shown, strerror(e));
    }
    return 0;
}

int registry_ingest_source(const char *models, const struct registry_source *s,
                           json_t **manifest, mtc_error_t *err)
{
    char sub[PATH_MAX], vdir[PATH_MAX], tmpdir[PATH_MAX], hex[17];
    *manifest = NULL;
    static const char *const subs[] = {"blobs/sha256", "blobs/tmp", "versions", "tmp"};
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
        snprintf(sub, sizeof(sub), "%s/%s", models, subs[i]);
        if (mtc_mkdir_p(sub, 0700) < 0)
            return errprintf(err, "%.200s: %s", sub, strerror(errno));
    }
    /* sorted by name (the tokenizer added last): a stable digest */
    int order[REGISTRY_SOURCE_FILES];
    for (int i = 0; i < s->n; i++) {
        int j = i;
        for (; j > 0 && strcmp(s->files[order[j - 1]].name, s->files[i].name) > 0; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    mtc_random_hex(hex, 8);
    snprintf(tmpdir, sizeof(tmpdir), "%s/tmp/%s", models, hex);
    snprintf(vdir, sizeof(vdir), "%s/versions/%s", models, hex);
    json_t *files = json_array();
    int64_t total = 0;
    char listing[8192] = "";
    int rc = -1;
    pthread_mutex_lock(&blob_lock);
    if (mkdir(tmpdir, 0700) < 0) {
        errprintf(err, "%.200s: %s", tmpdir, strerror(errno));
        goto out;
    }
    for (int k = 0; k < s->n; k++) {
        const char *name = s->files[order[k]].name;
        char digest[65], blob[PATH_MAX], ln[PATH_MAX + 256], shown[PATH_MAX + 256];
        struct stat sb;
        snprintf(shown, sizeof(shown), "%s/%s", s->path, name);
        if (put_blob(models, s->files[order[k]].fd, shown, digest, blob, sizeof(blob), err) < 0)
            goto out;
        snprintf(ln, sizeof(ln), "%s/%s", tmpdir, name);
        if (link(blob, ln) < 0 || stat(blob, &sb) < 0) {
            errprintf(err, "%.200s: %s", ln, strerror(errno));
            goto out;
        }
        total += (int64_t)sb.st_size;
        json_array_append_new(files, json_pack("{s:s, s:s, s:I}", "path", name, "sha256", digest,
                                               "size", (json_int_t)sb.st_size));
        size_t l = strlen(listing);
        snprintf(listing + l, sizeof(listing) - l, "%s %s\n", digest, name);
    }
    if (rename(tmpdir, vdir) < 0) {
        errprintf(err, "%.200s: %s", vdir, strerror(errno));
        goto out;
    }
    char sum[65];
    mtc_sha256_hex(listing, sum);
    *manifest = json_pack("{s:s, s:s, s:o, s:s, s:I}", "format",
                          schema_enum_name(&registry_format_enum, s->format), "dir", vdir, "files",
                          files, "digest", sum, "sizeBytes", (json_int_t)total);
    files = NULL;
    rc = 0;
out:;
    int e = errno;
    if (rc < 0)
        mtc_rm_rf(tmpdir);
    pthread_mutex_unlock(&blob_lock);
    json_decref(files);
    errno = e;
    return rc;
}

int registry_ingest(const char *models, const char *real, int format, const char *tokenizer,
                    const char *const *roots, json_t **manifest, mtc_error_t *err)
{
    struct registry_source s;
    struct mtc_reach how = {roots, NULL, 0};
    *manifest = NULL;
    if (registry_source_open(real, &how, format, &s, err) < 0)
        return -1;
    int rc = registry_source_tokenizer(&s, tokenizer, &how) < 0
                 ? errprintf(err, "source: %.200s: too many files", s.path)
                 : registry_ingest_source(models, &s, manifest, err);
    registry_source_close(&s);
    return rc;
}

/* models/versions/X with X a plain name: the only directories removed. */
static int version_dir_ok(const char *models, const char *dir)
{
    size_t n = strlen(models);
    if (!dir || strncmp(dir, models, n) != 0 || strncmp(dir + n, "/versions/", 10) != 0)
        return 0;
    const char *x = dir + n + 10;
    return *x && x[0] != '.' && !strchr(x, '/');
}

int registry_remove(const char *models, const json_t *manifest, mtc_error_t *err)
{
    const char *dir = json_string_value(json_object_get(manifest, "dir"));
    const char *digest = json_string_value(json_object_get(manifest, "digest"));
    if (!version_dir_ok(models, dir)) {
        errno = EINVAL;
        return errprintf(err, "artifact directory %.200s is not in %.200s/versions",
                         dir ? dir : "(none)", models);
    }
    int rc = 0, shared = 0;
    pthread_mutex_lock(&blob_lock);
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(manifest, "files"), i, f)
    {
        const char *hex = json_string_value(json_object_get(f, "sha256"));
        char blob[PATH_MAX];
        struct stat sb;
        if (!hex || strspn(hex, "0123456789abcdef") != 64 || strlen(hex) != 64)
            continue;
        snprintf(blob, sizeof(blob), "%s/blobs/sha256/%s", models, hex);
        /* the version's own link goes with its directory below: one link
         * more than this means another version holds the blob */
        if (stat(blob, &sb) == 0 && sb.st_nlink <= 2) {
            if (unlink(blob) < 0)
                rc = errprintf(err, "%.200s: %s", blob, strerror(errno));
        } else {
            shared = 1;
        }
    }
    if (mtc_rm_rf(dir) < 0 && errno != ENOENT)
        rc = errprintf(err, "%.200s: %s", dir, strerror(errno));
    /* conversions go with the last version of this content */
    for (int fmt = 0; !shared && digest && fmt < registry_format_enum.n; fmt++) {
        char conv[PATH_MAX];
        snprintf(conv, sizeof(conv), "%s/converted/%.64s-%s", models, digest,
                 schema_enum_name(&registry_format_enum, fmt));
        mtc_rm_rf(conv);
    }
    pthread_mutex_unlock(&blob_lock);
    return rc;
}

/* Remove every entry of dir (a temporary area); 0/-1. */
static int empty_dir(const char *dir, int *removed)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
        char p[PATH_MAX * 2 + 512];
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        if (mtc_rm_rf(p) < 0)
            rc = -1;
        else
            (*removed)++;
    }
    closedir(d);
    return rc;
}

int registry_sweep(const char *models, const json_t *dirs, int *removed, mtc_error_t *err)
{
    char p[PATH_MAX + 512];
    int rc = 0;
    *removed = 0;
    pthread_mutex_lock(&blob_lock);
    /* what an ingest or a conversion cut short left behind */
    static const char *const tmps[] = {"tmp", "blobs/tmp"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof(p), "%s/%s", models, tmps[i]);
        if (empty_dir(p, removed) < 0)
            rc = errprintf(err, "%.200s: %s", p, strerror(errno));
    }
    /* version directories no stored version names (made, then not recorded) */
    snprintf(p, sizeof(p), "%s/versions", models);
    DIR *d = opendir(p);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        char v[PATH_MAX + 256];
        int known = 0;
        if (de->d_name[0] == '.')
            continue;
        snprintf(v, sizeof(v), "%s/versions/%s", models, de->d_name);
        size_t i;
        json_t *x;
        json_array_foreach(dirs, i, x) known |= json_is_string(x) && !strcmp(json_string_value(x), v);
        if (!known && mtc_rm_rf(v) == 0)
            (*removed)++;
    }
    if (d)
        closedir(d);
    /* blobs no version links to any more */
    snprintf(p, sizeof(p), "%s/blobs/sha256", models);
    d = opendir(p);
    while (d && (de = readdir(d)) != NULL) {
        char b[PATH_MAX * 2 + 512];
        struct stat sb;
        snprintf(b, sizeof(b), "%s/%s", p, de->d_name);
        if (de->d_name[0] != '.' && lstat(b, &sb) == 0 && S_ISREG(sb.st_mode) &&
            sb.st_nlink == 1 && unlink(b) == 0)
            (*removed)++;
    }
    if (d)
        closedir(d);
    snprintf(p, sizeof(p), "%s/converted", models);
    d = opendir(p);
    while (d && (de = readdir(d)) != NULL) /* conversions cut short */
        if (strncmp(de->d_name, ".tmp-", 5) == 0) {
            char c[PATH_MAX * 2 + 512];
            snprintf(c, sizeof(c), "%s/%s", p, de->d_name);
            if (mtc_rm_rf(c) == 0)
                (*removed)++;
        }
    if (d)
        closedir(d);
    pthread_mutex_unlock(&blob_lock);
    return rc;
}
