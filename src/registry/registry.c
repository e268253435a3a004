/* registry: names, references and aliases of registered models, and their
 * artifacts on disk — blobs stored once by content, a hard-link directory per
 * version, conversions between formats through mtc-train, and the refs files
 * registry_resolve reads. */
#include "registry/registry.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const struct schema_enum registry_format_enum = SCHEMA_NAMES(
    NULL, [REGISTRY_NATIVE] = "native", [REGISTRY_HF] = "hf", [REGISTRY_LLMC] = "llmc");

/* Ingest and removal link and unlink blobs: one at a time in a process. */
static pthread_mutex_t blob_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- names ---- */

int registry_name_valid(const char *name)
{
    return name && mtc_name_valid(name, REGISTRY_NAME_MAX);
}

int registry_name_error(const char *name, mtc_error_t *err)
{
    errno = EINVAL;
    return errprintf(err,
                     "model name \"%.64s\": must match [a-z][a-z0-9-]{0,62} (lowercase letters, "
                     "digits and '-', starting with a letter)",
                     name ? name : "");
}

int registry_name_from(const char *experiment, char out[REGISTRY_NAME_MAX + 1])
{
    size_t o = 0;
    if (experiment && isdigit((unsigned char)experiment[0])) {
        memcpy(out, "m-", 2);
        o = 2;
    }
    for (const char *p = experiment; p && *p && o < REGISTRY_NAME_MAX; p++) {
        int c = tolower((unsigned char)*p);
        if (c == '_' || c == '.')
            c = '-';
        if (!(islower(c) || isdigit(c) || c == '-'))
            continue;
        if (c == '-' && (o == 0 || out[o - 1] == '-'))
            continue;
        out[o++] = (char)c;
    }
    while (o > 0 && out[o - 1] == '-')
        o--;
    out[o] = '\0';
    if (!registry_name_valid(out)) {
        errno = EINVAL;
        return -1;
    }
    return 0;
}

int registry_alias_valid(const char *alias)
{
    size_t n = alias ? strlen(alias) : 0;
    if (n == 0 || n > REGISTRY_ALIAS_MAX || !islower((unsigned char)alias[0]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)alias[i]) && !isdigit((unsigned char)alias[i]) &&
            alias[i] != '-')
            return 0;
    return 1; /* a lowercase letter first: never a number */
}

int registry_ref_parse(const char *ref, struct registry_ref *out, mtc_error_t *err)
{
    memset(out, 0, sizeof(*out));
    errno = EINVAL;
    if (!ref || !*ref)
        return errprintf(err, "model reference: empty (want NAME, NAME@VERSION or NAME@ALIAS)");
    const char *at = strchr(ref, '@');
    size_t n = at ? (size_t)(at - ref) : strlen(ref);
    if (n > REGISTRY_NAME_MAX)
        return registry_name_error(ref, err);
    memcpy(out->name, ref, n);
    out->name[n] = '\0';
    if (!registry_name_valid(out->name))
        return registry_name_error(out->name, err);
    if (!at)
        return 0;
    const char *sel = at + 1;
    if (*sel && strspn(sel, "0123456789") == strlen(sel)) {
        long v = strtol(sel, NULL, 10);
        if (v < 1 || v > 1000000000 || sel[0] == '0')
            return errprintf(err, "model reference \"%.80s\": version must be 1 or more", ref);
        out->version = (int)v;
        return 0;
    }
    if (!registry_alias_valid(sel))
        return errprintf(err,
                         "model reference \"%.80s\": after '@' comes a version number or an alias "
                         "([a-z][a-z0-9-]{0,126})",
                         ref);
    snprintf(out->alias, sizeof(out->alias), "%s", sel);
    return 0;
}

/* ---- detecting what a source holds ---- */

/* name under dir: a regular file, or a link (so that opening it says why it
 * is not read). Relative to the descriptor: nothing is resolved again. */
static int has_file(int dir, const char *name)
{
    struct stat sb;
    return fstatat(dir, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
           (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode));
}

/* The entries of dir (its own read position), each passed to fn; 0/-1. */
static int each_entry(int dir, void (*fn)(int dir, const char *name, void *arg), void *arg)
{
    int d2 = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = d2 < 0 ? NULL : fdopendir(d2);
    if (!d) {
        if (d2 >= 0)
            close(d2);
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            fn(dir, de->d_name, arg);
    closedir(d);
    return 0;
}

struct pick {
    char best[256];
    int n;
};

static void step_pick(int dir, const char *name, void *arg)
{
    struct pick *k = arg;
    if (strncmp(name, "step_", 5) != 0 || strlen(name) >= sizeof(k->best) ||
        strcmp(name, k->best) <= 0)
        return;
    int s = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s >= 0 && has_file(s, "DONE") && has_file(s, "meta.json"))
        snprintf(k->best, sizeof(k->best), "%s", name);
    if (s >= 0)
        close(s);
}

static void bin_pick(int dir, const char *name, void *arg)
{
    struct pick *k = arg;
    size_t l = strlen(name);
    if (l > 4 && l < sizeof(k->best) && strcmp(name + l - 4, ".bin") == 0 && has_file(dir, name)) {
        snprintf(k->best, sizeof(k->best), "%s", name);
        k->n++;
    }
}

/* The newest step_ directory of root with a DONE marker and a meta.json. */
static int newest_step(const char *root, char *out, size_t len)
{
    int d = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct pick k = {"", 0};
    if (d < 0)
        return -1;
    each_entry(d, step_pick, &k);
    close(d);
    return *k.best && snprintf(out, len, "%s/%s", root, k.best) < (int)len ? 0 : -1;
}

/* The one *.bin file of dir into out. */
static int one_bin(const char *dir, char *out, size_t len)
{
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct pick k = {"", 0};
    if (d < 0)
        return -1;
    each_entry(d, bin_pick, &k);
    close(d);
    return k.n == 1 && snprintf(out, len, "%s/%s", dir, k.best) < (int)len ? 0 : -1;
}

static void source_add_name(int dir, const char *name, void *arg)
{
    json_t *names = arg;
    if (name[0] != '.' && has_file(dir, name))
        json_array_append_new(names, json_string(name));
}

/* The files of an artifact to store, under dir (or the one llm.c file): a
 * checkpoint's every regular file, an HF directory's weights, config and
 * tokenizer files. A JSON array of names, sorted for a stable digest. */
static json_t *artifact_files(int dir, int format)
{
    static const char *const hf_files[] = {
        "model.safetensors",       "config.json",  "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "vocab.json",   "merges.txt",     "generation_config.json",
        "chat_template.jinja",     NULL};
    json_t *names = json_array();
    if (format == REGISTRY_HF) {
        for (int i = 0; hf_files[i]; i++)
            if (has_file(dir, hf_files[i]))
                json_array_append_new(names, json_string(hf_files[i]));
        return names;
    }
    each_entry(dir, source_add_name, names);
    size_t n = json_array_size(names);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(json_string_value(json_array_get(names, j - 1)),
                                           json_string_value(json_array_get(names, j))) > 0;
             j--) {
            json_t *a = json_incref(json_array_get(names, j - 1));
            json_array_set(names, j - 1, json_array_get(names, j));
            json_array_set_new(names, j, a);
        }
    return names;
}

/* What src (opened as fd: a directory, or an llm.c file) holds in format
 * want (< 0: detect): the format, and the name under fd of the step or .bin
 * chosen ("" for fd itself) into sub. 0, or -1 + err. */
static int detect_at(int fd, const char *src, int *format, char sub[256], mtc_error_t *err)
{
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return errprintf(err, "source: %.200s: %s", src, strerror(errno));
    int want = *format, dir = S_ISDIR(sb.st_mode);
    struct pick step = {"", 0}, bin = {"", 0};
    size_t l = strlen(src);
    if (dir)
        each_entry(fd, step_pick, &step);
    int own = dir && has_file(fd, "meta.json") && has_file(fd, "DONE");
    int native = own || *step.best;
    int hf = dir && has_file(fd, "model.safetensors") && has_file(fd, "config.json");
    if (dir && !native)
        each_entry(fd, bin_pick, &bin);
    int llmc = (!dir && l > 4 && strcmp(src + l - 4, ".bin") == 0) || (dir && bin.n == 1);
    if (want < 0)
        want = native ? REGISTRY_NATIVE : hf ? REGISTRY_HF : llmc ? REGISTRY_LLMC : -1;
    errno = EINVAL;
    if (want < 0)
        return errprintf(err,
                         "source: %.200s holds no model: want a checkpoint (step_ directory or "
                         "its root), an HF directory (model.safetensors + config.json) or an "
                         "llm.c .bin file",
                         src);
    const char *what = NULL;
    if (want == REGISTRY_NATIVE && !native)
        what = "no complete checkpoint (meta.json + DONE, or step_ directories)";
    else if (want == REGISTRY_HF && !hf)
        what = "no model.safetensors + config.json";
    else if (want == REGISTRY_LLMC && !llmc)
        what = "not an llm.c .bin file (nor a directory with exactly one)";
    if (what)
        return errprintf(err, "source: %.200s: %s for format %s", src, what,
                         schema_enum_name(&registry_format_enum, want));
    sub[0] = '\0';
    if (want == REGISTRY_NATIVE && !own)
        snprintf(sub, 256, "%s", step.best); /* the root's newest complete step */
    else if (want == REGISTRY_LLMC && dir)
        snprintf(sub, 256, "%s", bin.best);
    *format = want;
    return 0;
}

int registry_source_add(struct registry_source *s, const char *name, int fd)
{
    if (s->n >= REGISTRY_SOURCE_FILES || strlen(name) >= sizeof(s->files[0].name)) {
        errno = E2BIG;
        return -1;
    }
    snprintf(s->files[s->n].name, sizeof(s->files[0].name), "%s", name);
    s->files[s->n++].fd = fd;
    return 0;
}

void registry_source_close(struct registry_source *s)
{
    int e = errno;
    for (int i = 0; i < s->n; i++)
        if (s->files[i].fd >= 0)
            close(s->files[i].fd);
    if (s->dir >= 0)
        close(s->dir);
    s->n = 0;
    s->dir = -1;
    errno = e;
}

int registry_source_open(const char *src, const struct mtc_reach *how, int format,
                         struct registry_source *s, mtc_error_t *err)
{
    char sub[256];
    memset(s, 0, sizeof(*s));
    s->dir = -1;
    s->format = format;
    int fd = mtc_reach_open(src ? src : "", how, 0, err);
    if (fd < 0) {
        if (errno == ENOTDIR)
            errno = ENOENT;
        return -1;
    }
    struct mtc_fsid saved;
    mtc_fsid_enter(how->as, &saved); /* what the source's descriptors show, as its reader */
    int rc = detect_at(fd, src, &s->format, sub, err);
    mtc_fsid_leave(&saved);
    if (rc < 0) {
        close(fd);
        return -1;
    }
    int n = snprintf(s->path, sizeof(s->path), "%s%s%s", src, *sub ? "/" : "", sub);
    if (n < 0 || (size_t)n >= sizeof(s->path)) {
        close(fd);
        errno = ENAMETOOLONG;
        return errprintf(err, "source: path too long");
    }
    struct stat sb;
    fstat(fd, &sb);
    if (!S_ISDIR(sb.st_mode)) { /* an llm.c file, opened already */
        registry_source_add(s, strrchr(src, '/') + 1, fd);
        return 0;
    }
    if (*sub) {
        s->dir = mtc_reach_at(fd, sub, how, s->format == REGISTRY_LLMC ? 0 : O_DIRECTORY, err);
        close(fd);
        if (s->dir < 0)
            return -1;
        if (s->format == REGISTRY_LLMC) {
            registry_source_add(s, sub, s->dir);
            s->dir = -1;
            return 0;
        }
    } else {
        s->dir = fd;
    }
    mtc_fsid_enter(how->as, &saved);
    json_t *names = artifact_files(s->dir, s->format);
    mtc_fsid_leave(&saved);
    size_t i;
    json_t *nm;
    rc = 0;
    json_array_foreach(names, i, nm)
    {
        const char *name = json_string_value(nm);
        int f = mtc_reach_at(s->dir, name, how, 0, err);
        if (f < 0 || registry_source_add(s, name, f) < 0) {
            if (f >= 0) {
                close(f);
                errprintf(err, "source: %.200s: more than %d files", s->path,
                          REGISTRY_SOURCE_FILES);
            } else if (errno == EACCES && !strstr(err->text, "symbolic link")) {
                char why[256];
                snprintf(why, sizeof(why), "%s", err->text);
                errprintf(err, "source: %.200s: %s", s->path, why);
            }
            rc = -1;
            break;
        }
    }
    json_decref(names);
    if (rc < 0)
        registry_source_close(s);
    return rc;
}

/* The tokenizer a checkpoint's meta.json (under dir) records, into out. */
static int meta_tokenizer(int dir, const struct mtc_reach *how, char *out, size_t len)
{
    mtc_error_t e = {""};
    int fd = mtc_reach_at(dir, "meta.json", how, 0, &e);
    json_t *m = fd < 0 ? NULL : json_loadfd(fd, 0, NULL);
    const char *t = json_string_value(json_object_get(m, "tokenizer"));
    int rc = t && *t && strlen(t) < len ? (snprintf(out, len, "%s", t), 0) : -1;
    json_decref(m);
    if (fd >= 0)
        close(fd);
    return rc;
}

int registry_source_tokenizer(struct registry_source *s, const char *tokenizer,
                              const struct mtc_reach *how)
{
    char recorded[PATH_MAX];
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->files[i].name, "tokenizer.json") == 0)
            return 0;
    mtc_error_t e = {""};
    int fd = tokenizer && *tokenizer ? mtc_reach_open(tokenizer, how, 0, &e) : -1;
    /* a run's own record may name a built-in ("builtin:tiny-corpus"): the
     * checkpoint's meta.json has the file it was made into */
    if (fd < 0 && s->format == REGISTRY_NATIVE && s->dir >= 0 &&
        meta_tokenizer(s->dir, how, recorded, sizeof(recorded)) == 0)
        fd = mtc_reach_open(recorded, how, 0, &e);
    if (fd < 0)
        return 0; /* none it may read: the artifact goes without */
    if (registry_source_add(s, "tokenizer.json", fd) < 0) {
        close(fd);
        return -1;
    }
    return 0;
}

int registry_detect(const char *src, int *format, char *real, size_t len, mtc_error_t *err)
{
    struct registry_source s;
    struct mtc_reach root = {NULL, NULL, 0};
    if (registry_source_open(src, &root, *format, &s, err) < 0)
        return -1;
    int rc = 0;
    if (strlen(s.path) >= len)
        rc = errno = ENAMETOOLONG, errprintf(err, "source: path too long");
    else
        memcpy(real, s.path, strlen(s.path) + 1), *format = s.format;
    registry_source_close(&s);
    return rc;
}

/* ---- blobs ---- */

/* Copy from to a new file to (mode), both mtcd's own (under models). */
static int copy_file(const char *from, const char *to, mode_t mode, mtc_error_t *err)
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

/* ---- conversions ---- */

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
    return one_bin(dir, out, len);
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
            if (newest_step(tmp, step, sizeof(step)) < 0) {
                mtc_rm_rf(tmp);
                return errprintf(err, "mtc-train import left no checkpoint in %.200s", tmp);
            }
            made = step;
        }
        snprintf(tto, sizeof(tto), "%s/tokenizer.json", made);
        if (format != REGISTRY_LLMC && mtc_path_exists(tok) && !mtc_path_exists(tto) &&
            copy_file(tok, tto, 0644, err) < 0) {
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

/* ---- refs ---- */

static void refs_path(const char *models, const char *project, const char *location,
                      const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/refs/%s/%s/%s.json", models, project, location, name);
}

int registry_refs_write(const char *models, const char *project, const char *location,
                        const char *name, const json_t *versions, const json_t *aliases)
{
    char path[PATH_MAX + 256], dir[PATH_MAX + 256];
    if (!mtc_name_valid(project, 63) || !mtc_name_valid(location, 63) ||
        !registry_name_valid(name)) {
        errno = EINVAL;
        return -1;
    }
    refs_path(models, project, location, name, path, sizeof(path));
    if (!versions || json_object_size(versions) == 0)
        return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
    snprintf(dir, sizeof(dir), "%s/refs/%s/%s", models, project, location);
    if (mtc_mkdir_p(dir, 0700) < 0)
        return -1;
    json_t *o = json_pack("{s:O, s:O}", "versions", versions, "aliases", aliases);
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (!text)
        return errno = ENOMEM, -1;
    int rc = mtc_write_file_atomic(path, text, strlen(text), 0600);
    free(text);
    return rc;
}

/* The refs file's version a reference names: its manifest (borrowed from
 * *refs, which the caller decrefs) and number. NULL + err, errno ENOENT. */
static const json_t *lookup(const char *home, const char *project, const char *location,
                            const char *ref, json_t **refs, int *number, mtc_error_t *err)
{
    struct registry_ref r;
    char models[PATH_MAX], path[PATH_MAX + 256];
    *refs = NULL;
    if (registry_ref_parse(ref, &r, err) < 0)
        return NULL;
    if (!home || !*home) {
        errno = EINVAL;
        return errprintf(err, "no MTC_HOME to find the registry in"), NULL;
    }
    snprintf(models, sizeof(models), "%s/models", home);
    refs_path(models, project ? project : "local", location ? location : "local", r.name, path,
              sizeof(path));
    *refs = json_load_file(path, 0, NULL);
    if (!*refs) {
        errno = ENOENT;
        return errprintf(err, "model %s not found", r.name), NULL;
    }
    int version = r.version;
    const char *alias = r.version ? NULL : *r.alias ? r.alias : "default";
    json_t *versions = json_object_get(*refs, "versions"), *aliases = json_object_get(*refs, "aliases");
    if (alias) {
        json_t *v = json_object_get(aliases, alias);
        if (!json_is_integer(v)) {
            char known[256] = "";
            const char *k;
            json_t *x;
            json_object_foreach(aliases, k, x)
            {
                size_t l = strlen(known);
                snprintf(known + l, sizeof(known) - l, "%s%s", l ? ", " : "", k);
            }
            errno = ENOENT;
            return errprintf(err, "model %s: no alias %s (aliases: %s)", r.name, alias, known),
                   NULL;
        }
        version = (int)json_integer_value(v);
    }
    char key[16];
    snprintf(key, sizeof(key), "%d", version);
    const json_t *manifest = json_object_get(versions, key);
    if (!manifest) {
        errno = ENOENT;
        return errprintf(err, "model %s: no version %d", r.name, version), NULL;
    }
    *number = version;
    return manifest;
}

int registry_resolve(const char *home, const char *project, const char *location, const char *ref,
                     int format, const char *trainer, char *out, size_t len, mtc_error_t *err)
{
    json_t *refs = NULL;
    int version = 0;
    char models[PATH_MAX];
    const json_t *manifest = lookup(home, project, location, ref, &refs, &version, err);
    int rc = -1;
    if (manifest) {
        snprintf(models, sizeof(models), "%s/models", home);
        rc = registry_materialize(models, manifest, format, trainer, out, len, err);
    }
    json_decref(refs);
    return rc;
}

int registry_resolve_version(const char *home, const char *project, const char *location,
                             const char *ref, int *version, mtc_error_t *err)
{
    json_t *refs = NULL;
    const json_t *manifest = lookup(home, project, location, ref, &refs, version, err);
    json_decref(refs);
    return manifest ? 0 : -1;
}

json_t *registry_version_aliases(const char *home, const char *project, const char *location,
                                 const char *ref, int *version, mtc_error_t *err)
{
    json_t *refs = NULL;
    if (!lookup(home, project, location, ref, &refs, version, err))
        return NULL;
    json_t *out = json_array(), *v;
    const char *k;
    json_object_foreach(json_object_get(refs, "aliases"), k, v)
    {
        if (json_is_integer(v) && json_integer_value(v) == *version)
            json_array_append_new(out, json_string(k));
    }
    json_decref(refs);
    return out;
}
