/* backup: mtcd's home as one file (backup_write), checked (backup_check) and
 * restored into an empty home (backup_restore); periodic backups into a
 * directory (backup_sched_*). The format is in backup.h. */
#include "backup/backup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAGIC "MTC-BACKUP 1\n"
#define MAGIC_LEN (sizeof(MAGIC) - 1)
#define HEADER 512                     /* the header line's bytes, its '\n' included */
#define REST (MAGIC_LEN + HEADER)      /* where the checksummed rest begins */
#define FILE_MAX ((int64_t)256 << 20)  /* a file larger than this is left out, and listed */
#define DEPTH_MAX 24

/* Top-level names of a home never copied: the store (its copy is taken
 * online), what only a running mtcd uses, and what can be terabytes (the
 * manifest records where it was: keep it on shared storage). */
static const char *const runtime[] = {"mtcd.db", "mtcd.db-wal", "mtcd.db-shm", "mtcd.db-journal",
                                      "mtcd.sock", "mtcd.pid",   "mtcd.lock",   "log",
                                      "tmp",       NULL};
static const struct {
    const char *name, *what;
} artifacts[] = {
    {"models", "the model registry's artifacts"},
    {"experiments", "experiments: checkpoints, logs and metrics of every run"},
    {"data", "registered datasets' prepared data"},
    {"cache", "caches: prepared data, container images"},
    {"endpoints", "inference endpoints' replica directories (logs)"},
};
#define NARTIFACTS (sizeof(artifacts) / sizeof(artifacts[0]))
/* below clusters/<id>/: container images (pulled again when used) */
static const char *const cluster_skip[] = {"images", NULL};
/* below clusters/<id>/db/: the private accounting database's files, never
 * consistent as a copy while it runs (its dump, dump.sql, goes instead:
 * head_acct_dump), its socket and pid file */
static const char *const db_skip[] = {"data", "mariadb.sock", "mariadbd.pid", "dump.sql.new",
                                      NULL};

static int in(const char *const *list, const char *name)
{
    for (; *list; list++)
        if (!strcmp(*list, name))
            return 1;
    return 0;
}

/* ---- writing ---- */

struct writer {
    int fd;
    EVP_MD_CTX *md;
    int64_t bytes; /* of the rest */
    json_t *files, *skipped;
    const char *exclude;
    mtc_error_t *err;
};

static int put(struct writer *w, const void *buf, size_t n)
{
    if (mtc_write_all(w->fd, buf, n) < 0)
        return errprintf(w->err, "writing the backup: %s", strerror(errno));
    if (!EVP_DigestUpdate(w->md, buf, n))
        return errprintf(w->err, "hashing the backup");
    w->bytes += (int64_t)n;
    return 0;
}

/* Copy the file at fd (size bytes) into the backup. */
static int put_file(struct writer *w, int fd, int64_t size, const char *rel)
{
    char buf[1 << 16];
    int64_t left = size;
    while (left > 0) {
        ssize_t n = read(fd, buf, left < (int64_t)sizeof(buf) ? (size_t)left : sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errprintf(w->err, "reading %s: %s", rel, strerror(errno));
        if (n == 0) { /* it shrank since it was listed: zeros keep the layout */
            memset(buf, 0, sizeof(buf));
            n = left < (int64_t)sizeof(buf) ? (ssize_t)left : (ssize_t)sizeof(buf);
        }
        if (put(w, buf, (size_t)n) < 0)
            return -1;
        left -= n;
    }
    return 0;
}

/* The manifest: every entry under dir (path rel, depth) of the home. */
static int list(struct writer *w, const char *dir, const char *rel, int depth)
{
    if (depth > DEPTH_MAX)
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return errprintf(w->err, "reading %s: %s", dir, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, ".."))
            continue;
        if (depth == 0 && in(runtime, n))
            continue;
        int art = 0;
        for (size_t i = 0; depth == 0 && i < NARTIFACTS; i++)
            art |= !strcmp(artifacts[i].name, n);
        if (art)
            continue;
        if (depth == 2 && !strncmp(rel, "clusters/", 9) && in(cluster_skip, n))
            continue;
        size_t rl = strlen(rel);
        if (depth == 3 && !strncmp(rel, "clusters/", 9) && rl > 3 && !strcmp(rel + rl - 3, "/db") &&
            in(db_skip, n))
            continue;
        char path[PATH_MAX], r[PATH_MAX];
        if (snprintf(path, sizeof(path), "%s/%s", dir, n) >= (int)sizeof(path) ||
            snprintf(r, sizeof(r), "%s%s%s", rel, *rel ? "/" : "", n) >= (int)sizeof(r))
            continue;
        if (w->exclude && !strcmp(path, w->exclude))
            continue;
        struct stat st;
        if (lstat(path, &st) < 0)
            continue; /* gone meanwhile */
        if (S_ISDIR(st.st_mode)) {
            json_array_append_new(w->files, json_pack("{s:s, s:s, s:i}", "path", r, "type", "dir",
                                                      "mode", (int)(st.st_mode & 07777)));
            rc = list(w, path, r, depth + 1);
        } else if (S_ISLNK(st.st_mode)) {
            char to[PATH_MAX];
            ssize_t k = readlink(path, to, sizeof(to) - 1);
            if (k < 0)
                continue;
            to[k] = '\0';
            json_array_append_new(w->files,
                                  json_pack("{s:s, s:s, s:s}", "path", r, "type", "link", "to", to));
        } else if (S_ISREG(st.st_mode)) {
            size_t k = strlen(n);
            if (k > 4 && !strcmp(n + k - 4, ".log"))
                continue; /* daemons' logs: history, not state */
            if (st.st_size > FILE_MAX) {
                json_array_append_new(w->skipped, json_sprintf("%s (%lld bytes)", r,
                                                               (long long)st.st_size));
                continue;
            }
            json_array_append_new(w->files,
                                  json_pack("{s:s, s:s, s:i, s:I}", "path", r, "type", "file",
                                            "mode", (int)(st.st_mode & 07777), "size",
                                            (json_int_t)st.st_size));
        } /* sockets, FIFOs, devices: a running daemon's, never state */
    }
    closedir(d);
    return rc;
}

static void hex_of(EVP_MD_CTX *md, char out[72])
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(md, d, &n);
    memcpy(out, "sha256:", 8);
    for (unsigned int i = 0; i < n && i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
}

static json_t *header_json(const struct backup_info *info)
{
    return json_pack("{s:s, s:i, s:I, s:I, s:i, s:s}", "mtcVersion", info->mtc_version,
                     "schemaVersion", info->schema, "created", (json_int_t)info->created_ms,
                     "bytes", (json_int_t)info->bytes, "files", info->files, "sha256",
                     info->sha256);
}

/* Files mtcd is given from outside its home that a head needs: extra (its
 * TLS files), and the SSH key each cluster's spec names (ssh.keyFile). */
static void externals(struct writer *w, struct store *st, const char *const *extra)
{
    json_t *paths = json_array();
    for (; extra && *extra; extra++)
        if (**extra == '/')
            json_array_append_new(paths, json_string(*extra));
    json_t *ids = store_cluster_ids(st);
    size_t i;
    json_t *v;
    json_array_foreach(ids, i, v)
    {
        struct store_cluster cl;
        if (store_cluster_get(st, json_string_value(v), &cl) < 0)
            continue;
        const char *key = mtc_json_str(json_object_get(cl.spec, "ssh"), "keyFile");
        if (key && *key == '/') {
            json_array_append_new(paths, json_string(key));
            json_array_append_new(paths, json_sprintf("%s.pub", key));
        }
        store_cluster_release(&cl);
    }
    json_decref(ids);
    json_array_foreach(paths, i, v)
    {
        const char *p = json_string_value(v);
        char rel[PATH_MAX + 16];
        struct stat st;
        int dup = 0;
        for (size_t k = 0; k < i; k++)
            dup |= !strcmp(json_string_value(json_array_get(paths, k)), p);
        if (dup || lstat(p, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > FILE_MAX ||
            snprintf(rel, sizeof(rel), "external%s", p) >= (int)sizeof(rel))
            continue;
        json_array_append_new(w->files, json_pack("{s:s, s:s, s:i, s:I, s:s}", "path", rel, "type",
                                                  "file", "mode", (int)(st.st_mode & 07777),
                                                  "size", (json_int_t)st.st_size, "origin", p));
    }
    json_decref(paths);
}

int backup_write(struct store *st, const char *home, const char *exclude,
                 const char *const *extra, int fd, struct backup_info *info, mtc_error_t *err)
{
    struct backup_info local;
    if (!info)
        info = &local;
    memset(info, 0, sizeof(*info));
    char real_home[PATH_MAX], real_ex[PATH_MAX] = "";
    if (!realpath(home, real_home))
        return errprintf(err, "home %s: %s", home, strerror(errno));
    if (exclude && !realpath(exclude, real_ex))
        *real_ex = '\0';
    /* the store first: its snapshot, into the home's tmp/ (same filesystem,
     * owner-only), read back and removed */
    char tmpdir[PATH_MAX + 8], db[PATH_MAX + 64];
    snprintf(tmpdir, sizeof(tmpdir), "%s/tmp", real_home);
    if (mkdir(tmpdir, 0700) < 0 && errno != EEXIST)
        return errprintf(err, "cannot create %s: %s", tmpdir, strerror(errno));
    char rnd[17];
    mtc_random_hex(rnd, 8);
    snprintf(db, sizeof(db), "%s/backup-%s.db", tmpdir, rnd);
    if (store_copy_to(st, db, err) < 0) {
        unlink(db);
        return -1;
    }
    int schema = 0;
    if (store_check(db, &schema, err) < 0) {
        unlink(db);
        return -1;
    }
    struct writer w = {.fd = fd, .md = EVP_MD_CTX_new(), .exclude = *real_ex ? real_ex : NULL,
                       .err = err};
    w.files = json_array();
    w.skipped = json_array();
    int dbfd = open(db, O_RDONLY | O_CLOEXEC);
    unlink(db); /* the open fd keeps it for the copy */
    struct stat dst;
    int rc = -1;
    if (!w.md || !EVP_DigestInit_ex(w.md, EVP_sha256(), NULL)) {
        errprintf(err, "out of memory");
        goto out;
    }
    if (dbfd < 0 || fstat(dbfd, &dst) < 0) {
        errprintf(err, "reading the store's copy: %s", strerror(errno));
        goto out;
    }
    json_array_append_new(w.files, json_pack("{s:s, s:s, s:i, s:I}", "path", "mtcd.db", "type",
                                             "file", "mode", 0600, "size",
                                             (json_int_t)dst.st_size));
    if (list(&w, real_home, "", 0) < 0)
        goto out;
    externals(&w, st, extra);
    /* where what is not copied was */
    json_t *where = json_object();
    for (size_t i = 0; i < NARTIFACTS; i++) {
        char p[PATH_MAX + 64];
        snprintf(p, sizeof(p), "%s/%s", real_home, artifacts[i].name);
        if (mtc_path_exists(p))
            json_object_set_new(where, artifacts[i].name,
                                json_pack("{s:s, s:s}", "path", p, "what", artifacts[i].what));
    }
    json_t *manifest = json_pack("{s:s, s:O, s:o, s:O}", "home", real_home, "files", w.files,
                                 "artifacts", where, "skipped", w.skipped);
    char *m = json_dumps(manifest, JSON_COMPACT);
    json_decref(manifest);
    /* room for the header, written last */
    char blank[REST];
    memset(blank, ' ', sizeof(blank));
    blank[REST - 1] = '\n';
    if (!m || lseek(fd, 0, SEEK_SET) < 0 || mtc_write_all(fd, blank, sizeof(blank)) < 0) {
        errprintf(err, "writing the backup: %s", m ? strerror(errno) : "out of memory");
        free(m);
        goto out;
    }
    int bad = put(&w, m, strlen(m)) < 0 || put(&w, "\n", 1) < 0;
    free(m);
    if (bad)
        goto out;
    /* the files' bytes, in the manifest's order */
    json_t *f;
    size_t i;
    json_array_foreach(w.files, i, f)
    {
        if (strcmp(mtc_json_str(f, "type"), "file"))
            continue;
        const char *rel = mtc_json_str(f, "path");
        int64_t size = json_integer_value(json_object_get(f, "size"));
        int ffd = i == 0 ? dbfd : -1;
        if (i > 0) {
            char p[PATH_MAX * 2];
            const char *origin = mtc_json_str(f, "origin"); /* outside the home */
            snprintf(p, sizeof(p), "%s/%s", origin ? "" : real_home, origin ? origin + 1 : rel);
            ffd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        }
        /* a file changed since it was listed: its first size bytes, padded */
        int r = ffd < 0 ? errprintf(err, "reading %s: %s", rel, strerror(errno))
                        : put_file(&w, ffd, size, rel);
        if (ffd >= 0 && i > 0)
            close(ffd);
        if (r < 0)
            goto out;
        info->files++;
    }
    /* the header */
    snprintf(info->mtc_version, sizeof(info->mtc_version), "%s", mtc_version());
    info->schema = schema;
    info->created_ms = mtc_now_ms();
    info->bytes = (int64_t)REST + w.bytes;
    hex_of(w.md, info->sha256);
    json_t *h = header_json(info);
    char *hs = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    size_t hn = hs ? strlen(hs) : 0;
    if (!hs || hn > HEADER - 1) {
        free(hs);
        errprintf(err, "the backup's header does not fit");
        goto out;
    }
    char head[REST];
    memset(head, ' ', sizeof(head));
    memcpy(head, MAGIC, MAGIC_LEN);
    memcpy(head + MAGIC_LEN, hs, hn);
    head[REST - 1] = '\n';
    free(hs);
    if (pwrite(fd, head, sizeof(head), 0) != (ssize_t)sizeof(head) || fsync(fd) < 0) {
        errprintf(err, "writing the backup: %s", strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (dbfd >= 0)
        close(dbfd);
    json_decref(w.files);
    json_decref(w.skipped);
    EVP_MD_CTX_free(w.md);
    return rc;
}

/* ---- reading ---- */

/* The header of an open backup into info; *manifest (may be NULL) its
 * manifest. Checks everything backup_check says. */
static int read_backup(int fd, struct backup_info *info, json_t **manifest, mtc_error_t *err)
{
    memset(info, 0, sizeof(*info));
    char head[REST + 1];
    ssize_t n = pread(fd, head, REST, 0);
    if (n < (ssize_t)MAGIC_LEN || memcmp(head, MAGIC, MAGIC_LEN))
        return errprintf(err, "not an mtc backup (no \"MTC-BACKUP 1\" line)");
    if (n < (ssize_t)REST || head[REST - 1] != '\n')
        return errprintf(err, "truncated: the header is cut short");
    head[REST] = '\0';
    json_t *h = json_loads(head + MAGIC_LEN, JSON_DISABLE_EOF_CHECK, NULL);
    const char *ver = mtc_json_str(h, "mtcVersion"), *sum = mtc_json_str(h, "sha256");
    json_t *schema = json_object_get(h, "schemaVersion"), *bytes = json_object_get(h, "bytes");
    if (!ver || !sum || strlen(sum) != 71 || !json_is_integer(schema) || !json_is_integer(bytes)) {
        json_decref(h);
        return errprintf(err, "a damaged header (not the JSON an mtc backup starts with)");
    }
    snprintf(info->mtc_version, sizeof(info->mtc_version), "%s", ver);
    snprintf(info->sha256, sizeof(info->sha256), "%s", sum);
    info->schema = (int)json_integer_value(schema);
    info->bytes = json_integer_value(bytes);
    info->created_ms = json_integer_value(json_object_get(h, "created"));
    info->files = (int)json_integer_value(json_object_get(h, "files"));
    json_decref(h);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return errprintf(err, "%s", strerror(errno));
    if (st.st_size < info->bytes)
        return errprintf(err, "truncated: %lld of %lld bytes", (long long)st.st_size,
                         (long long)info->bytes);
    if (st.st_size > info->bytes)
        return errprintf(err, "%lld bytes where the header says %lld", (long long)st.st_size,
                         (long long)info->bytes);
    if (info->schema > store_schema_latest())
        return errprintf(err,
                         "schema version %d is newer than this mtc's %d (mtc %s wrote it; this "
                         "is %s)",
                         info->schema, store_schema_latest(), info->mtc_version, mtc_version());
    /* the checksum of the rest */
    char got[72];
    if (mtc_sha256_fd_from(fd, REST, got) < 0)
        return errprintf(err, "reading it: %s", strerror(errno));
    if (strcmp(got, info->sha256))
        return errprintf(err, "checksum mismatch: the header says %.19s…, its bytes are %.19s…",
                         info->sha256, got);
    if (!manifest)
        return 0;
    /* the manifest: the rest's first line */
    FILE *f = fdopen(dup(fd), "r");
    if (!f || fseeko(f, REST, SEEK_SET) < 0) {
        if (f)
            fclose(f);
        return errprintf(err, "reading it: %s", strerror(errno));
    }
    *manifest = json_loadf(f, JSON_DISABLE_EOF_CHECK, NULL);
    fclose(f);
    if (!json_is_array(json_object_get(*manifest, "files"))) {
        json_decref(*manifest);
        *manifest = NULL;
        return errprintf(err, "a damaged manifest");
    }
    return 0;
}

int backup_check(int fd, struct backup_info *info, mtc_error_t *err)
{
    struct backup_info local;
    return read_backup(fd, info ? info : &local, NULL, err);
}

/* The manifest line's length: where the files' bytes begin. */
static off_t data_start(int fd)
{
    char buf[4096];
    off_t at = REST;
    ssize_t n;
    while ((n = pread(fd, buf, sizeof(buf), at)) > 0) {
        char *nl = memchr(buf, '\n', (size_t)n);
        if (nl)
            return at + (nl - buf) + 1;
        at += n;
    }
    return -1;
}

/* A manifest path: relative, of plain components (no "", ".", ".."). */
static int rel_ok(const char *p)
{
    if (!p || !*p || *p == '/' || strlen(p) >= PATH_MAX)
        return 0;
    for (const char *c = p; *c;) {
        size_t k = strcspn(c, "/");
        if (k == 0 || (k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.'))
            return 0;
        c += k;
        if (*c == '/')
            c++;
        if (*c == '\0' && c[-1] == '/')
            return 0;
    }
    return 1;
}

/* The directory holding rel under the home at root, opened (made when
 * missing) component by component without following a link (an entry
 * restored before it may be one): an fd, *base the last component. -1 + errno. */
static int parent_of(int root, const char *rel, const char **base)
{
    int d = dup(root);
    const char *c = rel;
    for (;;) {
        size_t k = strcspn(c, "/");
        if (c[k] == '\0') {
            *base = c;
            return d;
        }
        char part[NAME_MAX + 1];
        if (k > NAME_MAX) {
            close(d);
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(part, c, k);
        part[k] = '\0';
        /* a directory the manifest does not list (external/...): made owner-only */
        if (mkdirat(d, part, 0700) < 0 && errno != EEXIST) {
            int e = errno;
            close(d);
            errno = e;
            return -1;
        }
        int nd = openat(d, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(d);
        if (nd < 0)
            return -1;
        d = nd;
        c += k + 1;
    }
}

static int restore_entries(int fd, int root, const json_t *files, off_t at, mtc_error_t *err)
{
    const json_t *f;
    size_t i;
    char buf[1 << 16];
    json_array_foreach(files, i, f)
    {
        const char *rel = mtc_json_str(f, "path"), *type = mtc_json_str(f, "type"), *base;
        if (!rel_ok(rel) || !type)
            return errprintf(err, "a damaged manifest: entry %zu", i);
        int mode = (int)json_integer_value(json_object_get(f, "mode")) & 07777;
        int d = parent_of(root, rel, &base);
        if (d < 0)
            return errprintf(err, "restoring %s: %s", rel, strerror(errno));
        int r = 0;
        if (!strcmp(type, "dir")) {
            r = mkdirat(d, base, 0700) < 0 && errno != EEXIST ? -1 : 0;
            if (r == 0) {
                int dd = openat(d, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r = dd < 0 || fchmod(dd, (mode_t)mode) < 0 ? -1 : 0;
                if (dd >= 0)
                    close(dd);
            }
        } else if (!strcmp(type, "link")) {
            const char *to = mtc_json_str(f, "to");
            r = to ? symlinkat(to, d, base) : (errno = EINVAL, -1);
        } else if (!strcmp(type, "file")) {
            int64_t left = json_integer_value(json_object_get(f, "size"));
            int out = openat(d, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
            r = out < 0 ? -1 : 0;
            while (r == 0 && left > 0) {
                ssize_t n = pread(fd, buf, left < (int64_t)sizeof(buf) ? (size_t)left : sizeof(buf),
                                  at);
                if (n <= 0) {
                    errno = n < 0 ? errno : EIO;
                    r = -1;
                    break;
                }
                r = mtc_write_all(out, buf, (size_t)n);
                at += n;
                left -= n;
            }
            if (r == 0)
                r = fchmod(out, (mode_t)mode) < 0 || fsync(out) < 0 ? -1 : 0;
            if (out >= 0)
                close(out);
        } else {
            errno = EINVAL;
            r = -1;
        }
        int e = errno;
        close(d);
        if (r < 0)
            return errprintf(err, "restoring %s: %s", rel, strerror(e));
    }
    return 0;
}

int backup_restore(const char *path, const char *home, struct backup_info *info, mtc_error_t *err)
{
    struct backup_info local;
    if (!info)
        info = &local;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return errprintf(err, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return errprintf(err, "%s: not a regular file", path);
    }
    if (st.st_mode & 077 || st.st_uid != geteuid()) {
        close(fd);
        return errprintf(err,
                         "%s: mode %04o, owner uid %d: a backup holds keys and must be its "
                         "owner's only (chmod 600; owned by the restoring user)",
                         path, (int)(st.st_mode & 07777), (int)st.st_uid);
    }
    json_t *manifest = NULL;
    if (read_backup(fd, info, &manifest, err) < 0) {
        close(fd);
        return errprintf(err, "%s: %s", path, err->text);
    }
    /* an empty home (or none yet): never mixed with another's state */
    int made = 0;
    if (mkdir(home, 0700) == 0)
        made = 1;
    else if (errno != EEXIST) {
        json_decref(manifest);
        close(fd);
        return errprintf(err, "cannot create %s: %s", home, strerror(errno));
    }
    int root = open(home, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *dir = root < 0 ? NULL : fdopendir(dup(root));
    struct dirent *e;
    int empty = dir != NULL;
    while (dir && (e = readdir(dir)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            empty = 0;
    if (dir)
        closedir(dir);
    int rc = -1;
    if (root < 0)
        errprintf(err, "%s: %s", home, strerror(errno));
    else if (!empty)
        errprintf(err, "%s is not empty: restore into an empty home (mtcd stopped)", home);
    else {
        off_t at = data_start(fd);
        rc = at < 0 ? errprintf(err, "%s: a damaged manifest", path)
                    : restore_entries(fd, root, json_object_get(manifest, "files"), at, err);
    }
    if (rc == 0) {
        /* what mtcd does with it at its next start (control_adopt_restored) */
        json_t *ext = json_array(), *f;
        size_t i;
        json_array_foreach(json_object_get(manifest, "files"), i, f)
        if (mtc_json_str(f, "origin"))
            json_array_append_new(ext, json_pack("{s:s++, s:s}", "restored", home, "/",
                                                 mtc_json_str(f, "path"), "origin",
                                                 mtc_json_str(f, "origin")));
        json_t *mark = json_pack("{s:s, s:I, s:O, s:o}", "from", path, "created",
                                 (json_int_t)info->created_ms, "artifacts",
                                 json_object_get(manifest, "artifacts"), "external", ext);
        char *s = json_dumps(mark, JSON_COMPACT);
        json_decref(mark);
        char p[PATH_MAX + 32];
        snprintf(p, sizeof(p), "%s/restored.json", home);
        if (!s || mtc_write_file_atomic(p, s, strlen(s), 0600) < 0)
            rc = errprintf(err, "cannot write %s: %s", p, strerror(errno));
        free(s);
        char db[PATH_MAX + 16];
        snprintf(db, sizeof(db), "%s/mtcd.db", home);
        if (rc == 0 && store_check(db, NULL, err) < 0)
            rc = -1;
        fchmod(root, 0700);
    }
    if (rc < 0 && root >= 0 && empty) {
        /* nothing half-restored stays */
        DIR *d = fdopendir(dup(root)); /* dup shares the offset the emptiness check moved */
        if (d)
            rewinddir(d);
        while (d && (e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                char p[PATH_MAX + 256];
                snprintf(p, sizeof(p), "%s/%s", home, e->d_name);
                mtc_rm_rf(p);
            }
        if (d)
            closedir(d);
        if (made)
            rmdir(home);
    }
    if (root >= 0)
        close(root);
    json_decref(manifest);
    close(fd);
    return rc;
}

/* ---- periodic backups ---- */

void backup_sched_init(struct backup_sched *s)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->lock, NULL);
}

void backup_sched_release(struct backup_sched *s)
{
    pthread_mutex_destroy(&s->lock);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The oldest backups in dir beyond keep removed (names sort by time). */
static void prune(const char *dir, int keep)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t k = strlen(e->d_name);
        if (strncmp(e->d_name, "mtcd-", 5) || k < 12 || strcmp(e->d_name + k - 7, ".mtcbak"))
            continue;
        if (n == cap) {
            char **m = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof(*names));
            if (!m)
                break;
            names = m;
        }
        if (!(names[n] = strdup(e->d_name)))
            break;
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof(*names), by_name);
    for (size_t i = 0; i < n; i++) {
        if (keep > 0 && i + (size_t)keep < n) {
            char p[PATH_MAX + 256];
            snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
            unlink(p);
        }
        free(names[i]);
    }
    free(names);
}

int backup_sched_run(struct backup_sched *s, struct store *st, const char *home, mtc_error_t *err)
{
    char name[64], path[sizeof(s->dir) + 64], tmp[sizeof(s->dir) + 80];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(name, sizeof(name), "mtcd-%Y%m%dT%H%M%SZ.mtcbak", &tm);
    snprintf(path, sizeof(path), "%s/%s", s->dir, name);
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", s->dir, name);
    struct backup_info info = {0};
    int rc = -1;
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        errprintf(err, "cannot create %s: %s", tmp, strerror(errno));
    else if (backup_write(st, home, s->dir, s->extra, fd, &info, err) == 0) {
        if (rename(tmp, path) < 0)
            errprintf(err, "cannot rename %s: %s", tmp, strerror(errno));
        else if (mtc_fsync_parent(path) < 0)
            errprintf(err, "cannot sync %s: %s", s->dir, strerror(errno));
        else
            rc = 0;
    }
    if (fd >= 0)
        close(fd);
    if (rc < 0)
        unlink(tmp);
    else
        prune(s->dir, s->keep);
    pthread_mutex_lock(&s->lock);
    s->last_ms = mtc_now_ms();
    s->last_ok = rc == 0;
    if (rc == 0) {
        s->ok_total++;
        s->last_ok_ms = s->last_ms;
        s->last_bytes = info.bytes;
        snprintf(s->last_file, sizeof(s->last_file), "%s", path);
        s->last_error[0] = '\0';
    } else {
        s->failed_total++;
        snprintf(s->last_error, sizeof(s->last_error), "%s", err->text);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

json_t *backup_sched_json(struct backup_sched *s)
{
    pthread_mutex_lock(&s->lock);
    json_t *o = json_pack("{s:s, s:I, s:i, s:I, s:I, s:I}", "dir", s->dir, "everySeconds",
                          (json_int_t)(s->every_ms / 1000), "keep", s->keep, "okTotal",
                          (json_int_t)s->ok_total, "failedTotal", (json_int_t)s->failed_total,
                          "lastBytes", (json_int_t)s->last_bytes);
    if (s->last_ok_ms) {
        char t[40];
        json_object_set_new(o, "lastSuccessTime",
                            json_string(mtc_time_rfc3339(s->last_ok_ms, t, sizeof(t))));
    }
    if (s->last_ms) {
        char t[40];
        json_object_set_new(o, "lastTime", json_string(mtc_time_rfc3339(s->last_ms, t, sizeof(t))));
        json_object_set_new(o, "lastOk", json_boolean(s->last_ok));
    }
    if (*s->last_file)
        json_object_set_new(o, "lastFile", json_string(s->last_file));
    if (*s->last_error)
        json_object_set_new(o, "lastError", json_string(s->last_error));
    pthread_mutex_unlock(&s->lock);
    return o;
}
