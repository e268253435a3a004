/* registry source: what a source holds — an mtc-train checkpoint (a step_
 * directory or the newest complete one under a root), a Hugging Face
 * directory or an llm.c .bin — detected and opened once, as the caller's
 * user, each file a descriptor (DESIGN.md, "Security model"). */
#include "registry/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* fn over the entries of directory dir into k (zeroed first). 0/-1. */
static int pick_in(const char *dir, void (*fn)(int dir, const char *name, void *arg),
                   struct pick *k)
{
    *k = (struct pick){"", 0};
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        return -1;
    each_entry(d, fn, k);
    close(d);
    return 0;
}

/* The newest step_ directory of root with a DONE marker and a meta.json. */
int registry_newest_step(const char *root, char *out, size_t len)
{
    struct pick k;
    return pick_in(root, step_pick, &k) == 0 && *k.best &&
                   snprintf(out, len, "%s/%s", root, k.best) < (int)len
               ? 0
               : -1;
}

/* The one *.bin file of dir into out. */
int registry_one_bin(const char *dir, char *out, size_t len)
{
    struct pick k;
    return pick_in(dir, bin_pick, &k) == 0 && k.n == 1 &&
                   snprintf(out, len, "%s/%s", dir, k.best) < (int)len
               ? 0
               : -1;
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
