/* dset_src: a dataset's source — a .txt/.jsonl/.csv file, a directory (Hugging Face
 * train/validation/test splits, or text files) or a built-in generator — read into parts,
 * fingerprinted by content, and its records validated per kind with "file:line: why". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/dset_internal.h"

static const char *const kind_names[] = {
    [DSET_PRETRAIN] = "pretrain", [DSET_SFT] = "sft", [DSET_DPO] = "dpo", [DSET_RL] = "rl"};
const struct schema_enum dset_kind_enum = SCHEMA_ENUM(kind_names, NULL);

static const char *const fmt_names[] = {
    [DSET_TXT] = "text", [DSET_JSONL] = "jsonl", [DSET_CSV] = "csv"};

void dset_sha256(const void *data, size_t len, char out[72])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
    int at = snprintf(out, 72, "sha256:");
    for (unsigned i = 0; i < n && i < 32; i++)
        at += snprintf(out + at, 72 - (size_t)at, "%02x", md[i]);
}

void dset_source_release(struct dset_source *s)
{
    for (size_t i = 0; s && i < s->n; i++)
        free(s->parts[i].data);
    if (s)
        free(s->parts), memset(s, 0, sizeof *s);
}

static struct dset_part *add_part(struct dset_source *s, const char *name, const char *role,
                                  enum dset_fmt fmt, mtc_error_t *err)
{
    struct dset_part *np = realloc(s->parts, (s->n + 1) * sizeof *np);
    if (!np)
        return errprintf(err, "out of memory"), NULL;
    s->parts = np;
    struct dset_part *p = &s->parts[s->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->role, sizeof p->role, "%s", role);
    p->fmt = fmt;
    return p;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* A file part's bytes from fd; empty (or only whitespace) and binary files are refused. */
static int read_part(struct dset_part *p, int fd, mtc_error_t *err)
{
    if (!(p->data = mtc_read_fd(fd, &p->len)))
        return errprintf(err, "%s: %s", p->name, strerror(errno));
    if (strspn(p->data, " \t\r\n") == p->len)
        return errprintf(err, "%s: empty file", p->name);
    const char *nul = memchr(p->data, 0, p->len);
    if (nul)
        return errprintf(err, "%s: not a text file (a NUL byte at offset %zu)", p->name,
                         (size_t)(nul - p->data));
    return 0;
}

static int fmt_of_file(const char *path, enum dset_fmt *fmt)
{
    if (ends_with(path, ".jsonl"))
        *fmt = DSET_JSONL;
    else if (ends_with(path, ".csv"))
        *fmt = DSET_CSV;
    else if (ends_with(path, ".txt") || ends_with(path, ".md") ||
             !strchr(strrchr(path, '/') ? strrchr(path, '/') : path, '.'))
        *fmt = DSET_TXT;
    else
        return -1;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* How a directory's files are opened: by a user's own process (links followed, as a shell
 * would), or for mtcd (as: whom it reads for; no link followed, regular files only, with
 * as's file ids: fsafe's mtc_reach_at). */
struct opener {
    int given; /* the source came as a descriptor: mtcd's rules */
    const struct mtc_user *as;
};

/* name under the directory dfd (shown as dir/name), a regular file opened for reading: the
 * fd, or -1 with errno ENOENT (and err unset) when it is not there, or -1 with err. */
static int open_in(int dfd, const char *dir, const char *name, const struct opener *op,
                   mtc_error_t *err)
{
    mtc_error_t e = {""};
    struct stat st;
    int fd;
    if (!op->given) {
        fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT)
            return errprintf(err, "%s/%s: %s", dir, name, strerror(errno));
    } else if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
        errno = EACCES;
        return errprintf(err,
                         "%s/%s: a symbolic link (mtcd follows none in a source it reads for "
                         "you)",
                         dir, name);
    } else {
        struct mtc_reach how = {.as = op->as};
        fd = mtc_reach_at(dfd, name, &how, 0, &e);
        if (fd < 0 && errno == EACCES && op->as)
            return errprintf(err, "cannot read %s/%s as user %s", dir, name, op->as->name);
        if (fd < 0 && errno != ENOENT)
            return errprintf(err, "%s/%s", dir, e.text);
    }
    if (fd < 0)
        return -1; /* ENOENT */
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return errprintf(err, "%s/%s: not a regular file", dir, name);
    }
    return fd;
}

/* A directory (dfd, shown as dir): Hugging Face splits when it has any, else its *.txt
 * files in name order. */
static int load_dir(int dfd, const char *dir, const struct opener *op, struct dset_source *s,
                    mtc_error_t *err)
{
    static const struct {
        const char *file, *role;
        enum dset_fmt fmt;
    } splits[] = {
        {"train.jsonl", "train", DSET_JSONL},
        {"train.csv", "train", DSET_CSV},
        {"validation.jsonl", "validation", DSET_JSONL},
        {"validation.csv", "validation", DSET_CSV},
        {"val.jsonl", "validation", DSET_JSONL},
        {"test.jsonl", "test", DSET_JSONL},
        {"test.csv", "test", DSET_CSV},
    };
    int have_train = 0;
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
        int fd = open_in(dfd, dir, splits[i].file, op, err);
        if (fd < 0 && errno == ENOENT)
            continue;
        if (fd < 0)
            return -1;
        for (size_t j = 0; j < s->n; j++)
            if (!strcmp(s->parts[j].role, splits[i].role)) {
                close(fd);
                return errprintf(err, "%s: both %s and %s hold the %s split", dir, s->parts[j].name,
                                 splits[i].file, splits[i].role);
            }
        struct dset_part *p = add_part(s, splits[i].file, splits[i].role, splits[i].fmt, err);
        int rc = p ? read_part(p, fd, err) : -1;
        close(fd);
        if (rc < 0)
            return -1;
        have_train |= !strcmp(splits[i].role, "train");
    }
    if (s->n && !have_train)
        return errprintf(err, "%s: has %s but no train.jsonl", dir, s->parts[0].name);
    if (s->n)
        return 0;
    int lfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = lfd < 0 ? NULL : fdopendir(lfd);
    if (!d) {
        if (lfd >= 0)
            close(lfd);
        return errprintf(err, "%s: %s", dir, strerror(errno));
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !ends_with(e->d_name, ".txt"))
            continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn || !(nn[n] = strdup(e->d_name))) {
            names = nn ? nn : names;
            break;
        }
        names = nn, n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    int rc = n ? 0
               : errprintf(err,
                           "%s: no train.jsonl/validation.jsonl/test.jsonl splits and no "
                           "*.txt files",
                           dir);
    for (size_t i = 0; i < n && rc == 0; i++) {
        int fd = open_in(dfd, dir, names[i], op, err);
        if (fd < 0) {
            rc = errno == ENOENT ? errprintf(err, "%s/%s: %s", dir, names[i], strerror(errno)) : -1;
            break;
        }
        struct dset_part *p = add_part(s, names[i], "", DSET_TXT, err);
        rc = p ? read_part(p, fd, err) : -1;
        close(fd);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

static void fingerprint(struct dset_source *s)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    EVP_DigestUpdate(ctx, "mtc-source 1\n", 13);
    for (size_t i = 0; i < s->n; i++) {
        char h[64];
        int hl = snprintf(h, sizeof h, "%s\n%s\n%zu\n", s->parts[i].role,
                          fmt_names[s->parts[i].fmt], s->parts[i].len);
        EVP_DigestUpdate(ctx, h, (size_t)hl);
        EVP_DigestUpdate(ctx, s->parts[i].data, s->parts[i].len);
    }
    EVP_DigestFinal_ex(ctx, md, &n);
    EVP_MD_CTX_free(ctx);
    int at = snprintf(s->fp, sizeof s->fp, "sha256:");
    for (unsigned i = 0; i < n && i < 32; i++)
        at += snprintf(s->fp + at, sizeof s->fp - (size_t)at, "%02x", md[i]);
}

int dset_source_load(const char *src, int fd, const struct mtc_user *as, struct dset_source *s,
                     mtc_error_t *err)
{
    memset(s, 0, sizeof *s);
    if (!src || !*src)
        return errprintf(err, "no source given");
    if (fd <= 2 && !strncmp(src, "builtin:", 8)) {
        int kind = dset_generator_kind(src + 8);
        struct dset_part *p = NULL;
        if (kind >= 0 &&
            !(p = add_part(s, src, "", kind == DSET_PRETRAIN ? DSET_TXT : DSET_JSONL, err)))
            return -1;
        char *data = dset_generate(src + 8, p ? &p->len : &(size_t){0}, err);
        if (!data)
            return -1;
        p->data = data;
        s->builtin = src + 8;
    } else {
        /* a path is opened here, never blocking on a FIFO; a descriptor is mtcd's, opened
         * as the user it prepares for (fsafe's walk) */
        struct opener op = {.given = fd > 2, .as = as};
        int own = fd > 2 ? -1 : open(src, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        int at = fd > 2 ? fd : own, rc = 0;
        struct stat st;
        if (at < 0 || fstat(at, &st) < 0) {
            rc = errprintf(err, "%s: %s", src, strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            rc = load_dir(at, src, &op, s, err);
        } else {
            enum dset_fmt fmt;
            struct dset_part *p;
            if (!S_ISREG(st.st_mode))
                rc = errprintf(err, "%s: not a regular file or directory", src);
            else if (fmt_of_file(src, &fmt) < 0)
                rc = errprintf(err, "%s: unsupported file type (want .txt, .jsonl or .csv)", src);
            else if (!(p = add_part(s, src, "", fmt, err)) || read_part(p, at, err) < 0)
                rc = -1;
        }
        if (own >= 0)
            close(own);
        if (rc < 0)
            return -1;
    }
    for (size_t i = 0; i < s->n; i++)
        s->bytes += s->parts[i].len;
    fingerprint(s);
    return 0;
}

/* ---- records ---- */

void dset_records_release(struct dset_records *r)
{
    for (size_t i = 0; r && i < r->n; i++)
        json_decref(r->v[i]);
    if (r)
        free(r->v), memset(r, 0, sizeof *r);
}

static int push(struct dset_records *r, json_t *o, mtc_error_t *err)
{
    if (!o)
        return errprintf(err, "out of memory");
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        json_t **nv = realloc(r->v, cap * sizeof *nv);
        if (!nv) {
            json_decref(o);
            return errprintf(err, "out of memory");
        }
        r->v = nv, r->cap = cap;
    }
    r->v[r->n++] = o;
    return 0;
}

/* The kind a record looks like, from its fields (for "source changed kind" messages). */
static const char *looks_like(const json_t *o)
{
    if (json_object_get(o, "chosen") && json_object_get(o, "rejected"))
        return "dpo";
    if (json_object_get(o, "response") || json_object_get(o, "messages"))
        return "sft";
    if (json_object_get(o, "answer"))
        return "rl";
    if (json_object_get(o, "text"))
        return "pretrain";
    return NULL;
}

static const char *const kind_fields[][4] = {
    [DSET_PRETRAIN] = {"text"},
    [DSET_SFT] = {"prompt", "response"},
    [DSET_DPO] = {"prompt", "chosen", "rejected"},
    [DSET_RL] = {"prompt", "answer"},
};

/* A messages array: objects with string role (system|user|assistant) and content, at least
 * one assistant turn. */
static int check_messages(const json_t *m, const char *field, mtc_error_t *err)
{
    size_t i;
    json_t *x;
    int asst = 0;
    if (!json_is_array(m) || !json_array_size(m))
        return errprintf(err, "field \"%s\" must be a non-empty array of messages", field);
    json_array_foreach(m, i, x)
    {
        const char *role = json_string_value(json_object_get(x, "role"));
        if (!role || !json_is_string(json_object_get(x, "content")))
            return errprintf(err, "%s[%zu] needs string \"role\" and \"content\"", field, i);
        if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant"))
            return errprintf(err, "%s[%zu]: role \"%s\" is not system, user or assistant", field, i,
                             role);
        asst |= !strcmp(role, "assistant");
    }
    return asst ? 0 : errprintf(err, "field \"%s\" has no assistant message", field);
}

/* Validate one record object for kind; *norm gets its normalized form (new reference). */
static int check_record(const json_t *o, enum dset_kind kind, json_t **norm, mtc_error_t *err)
{
    *norm = NULL;
    if (!json_is_object(o))
        return errprintf(err, "not a JSON object");
    json_t *n = json_object();
    if (kind == DSET_SFT && json_object_get(o, "messages")) {
        if (check_messages(json_object_get(o, "messages"), "messages", err) < 0)
            goto bad;
        json_object_set(n, "messages", json_object_get(o, "messages"));
        *norm = n;
        return 0;
    }
    for (int i = 0; i < 4 && kind_fields[kind][i]; i++) {
        const char *f = kind_fields[kind][i];
        json_t *v = json_object_get(o, f);
        if (!v) {
            const char *like = looks_like(o);
            if (like && strcmp(like, kind_names[kind]))
                errprintf(err, "field \"%s\" missing (the record is %s data, not %s)", f, like,
                          kind_names[kind]);
            else
                errprintf(err, "field \"%s\" missing", f);
            goto bad;
        }
        if (kind == DSET_DPO && i > 0 && json_is_array(v)) {
            if (check_messages(v, f, err) < 0)
                goto bad;
        } else if (!json_is_string(v)) {
            errprintf(err, "field \"%s\" must be a string", f);
            goto bad;
        } else if (i > 0 && !json_string_length(v)) {
            errprintf(err, "field \"%s\" is empty", f);
            goto bad;
        }
        json_object_set(n, f, v);
    }
    *norm = n;
    return 0;
bad:
    json_decref(n);
    return -1;
}

/* JSONL: one object per line; blank lines skipped. A last line without its newline that
 * does not parse is a truncated file. */
static int jsonl_records(const struct dset_part *p, enum dset_kind kind, struct dset_records *out,
                         mtc_error_t *err)
{
    size_t line = 0, before = out->n;
    for (const char *s = p->data, *end = p->data + p->len, *nl; s < end; s = nl + 1) {
        nl = memchr(s, '\n', (size_t)(end - s));
        int last = !nl;
        if (!nl)
            nl = end;
        line++;
        if (strspn(s, " \t\r") >= (size_t)(nl - s))
            continue;
        json_error_t je;
        json_t *o = json_loadb(s, (size_t)(nl - s), JSON_REJECT_DUPLICATES, &je), *norm;
        if (!o)
            return errprintf(err, "%s:%zu: %s: %s", p->name, line,
                             last ? "truncated record (no newline, not valid JSON)"
                                  : "not a JSON object",
                             je.text);
        mtc_error_t e2 = {{0}};
        int rc = check_record(o, kind, &norm, &e2);
        json_decref(o);
        if (rc < 0)
            return errprintf(err, "%s:%zu: %s", p->name, line, e2.text);
        if (push(out, norm, err) < 0)
            return -1;
    }
    return out->n > before ? 0 : errprintf(err, "%s: no records", p->name);
}

/* One CSV field (RFC 4180: "..." with "" for a quote) from *s; NULL at a truncated quote.
 * *eol is set when the field ended its record. *line counts newlines consumed. */
static char *csv_field(const char **s, const char *end, int *eol, size_t *line)
{
    const char *q = *s;
    size_t cap = 64, n = 0;
    char *f = malloc(cap);
    int quoted = q < end && *q == '"';
    if (quoted)
        q++;
    for (; f; q++) {
        if (n + 2 > cap) {
            char *nf = realloc(f, cap *= 2);
            if (!nf) {
                free(f);
                return NULL;
            }
            f = nf;
        }
        if (q >= end) {
            if (quoted) {
                free(f);
                return NULL;
            }
            *eol = 1;
            break;
        }
        if (quoted && *q == '"') {
            if (q + 1 < end && q[1] == '"') {
                f[n++] = '"', q++;
                continue;
            }
            quoted = 0;
            continue;
        }
        if (!quoted && (*q == ',' || *q == '\n' || (*q == '\r' && q + 1 < end && q[1] == '\n'))) {
            *eol = *q != ',';
            if (*q == '\r')
                q++;
            if (*eol)
                (*line)++;
            q++;
            break;
        }
        if (*q == '\n')
            (*line)++;
        f[n++] = *q;
    }
    if (f)
        f[n] = 0;
    *s = q;
    return f;
}

/* CSV with a header row naming the columns; each row becomes an object of strings. */
static int csv_records(const struct dset_part *p, enum dset_kind kind, struct dset_records *out,
                       mtc_error_t *err)
{
    const char *s = p->data, *end = p->data + p->len;
    size_t line = 1, before = out->n;
    json_t *hdr = json_array();
    int rc = 0;
    for (int eol = 0; !eol && s < end;) {
        char *f = csv_field(&s, end, &eol, &line);
        if (!f) {
            rc = errprintf(err, "%s:1: truncated header (an unterminated quoted field)", p->name);
            goto out;
        }
        json_t *name = json_string(f);
        free(f);
        if (!name) {
            rc = errprintf(err, "%s:1: the header is not valid UTF-8", p->name);
            goto out;
        }
        json_array_append_new(hdr, name);
    }
    while (s < end && rc == 0) {
        size_t start = line;
        if (*s == '\n' || (*s == '\r' && s + 1 < end && s[1] == '\n')) {
            s += *s == '\r' ? 2 : 1;
            line++;
            continue;
        }
        json_t *o = json_object();
        size_t col = 0;
        for (int eol = 0; !eol;) {
            char *f = csv_field(&s, end, &eol, &line);
            if (!f) {
                json_decref(o);
                rc = errprintf(err, "%s:%zu: truncated record (an unterminated quoted field)",
                               p->name, start);
                goto out;
            }
            json_t *v = json_string(f);
            free(f);
            if (!v) {
                json_decref(o);
                rc =
                    errprintf(err, "%s:%zu: field %zu is not valid UTF-8", p->name, start, col + 1);
                goto out;
            }
            if (col < json_array_size(hdr))
                json_object_set_new(o, json_string_value(json_array_get(hdr, col)), v);
            else
                json_decref(v);
            col++;
        }
        if (col != json_array_size(hdr)) {
            json_decref(o);
            rc = errprintf(err, "%s:%zu: %zu fields, the header has %zu", p->name, start, col,
                           json_array_size(hdr));
            goto out;
        }
        json_t *norm;
        mtc_error_t e2 = {{0}};
        int bad = check_record(o, kind, &norm, &e2);
        json_decref(o);
        if (bad < 0)
            rc = errprintf(err, "%s:%zu: %s", p->name, start, e2.text);
        else
            rc = push(out, norm, err);
    }
    if (rc == 0 && out->n == before)
        rc = errprintf(err, "%s: no records", p->name);
out:
    json_decref(hdr);
    return rc;
}

int dset_part_records(const struct dset_part *p, enum dset_kind kind, struct dset_records *out,
                      mtc_error_t *err)
{
    if (p->fmt == DSET_TXT) {
        if (kind != DSET_PRETRAIN)
            return errprintf(err,
                             "%s: plain text is pretraining data, not %s (%s wants JSONL or CSV "
                             "records with %s)",
                             p->name, kind_names[kind], kind_names[kind],
                             kind == DSET_SFT   ? "\"prompt\",\"response\""
                             : kind == DSET_DPO ? "\"prompt\",\"chosen\",\"rejected\""
                                                : "\"prompt\",\"answer\"");
        // one document; its bytes are tokenized from the part (text need not be UTF-8)
        return push(out, json_pack("{s:I}", "bytes", (json_int_t)p->len), err);
    }
    return p->fmt == DSET_JSONL ? jsonl_records(p, kind, out, err) : csv_records(p, kind, out, err);
}
