/* cache: registry images converted once and kept by manifest digest, for
 * every node that shares the directory (a cluster's shared storage, else the
 * node's own) — a lock per digest so N nodes' first use pulls once, the
 * squashfs written aside and renamed, a size limit with least-recently-used
 * eviction of images no step holds, and the listing and pruning
 * `mtc image cache` shows. Layout under the cache directory C (root's):
 *   C/images/HEX.sqsh   an image (0644; mtime: last use), HEX.ref its name
 *   C/locks/HEX         the pull lock of a digest;  C/tmp/  work in progress
 *   C/pulls.log         one line a pull: TIME DIGEST REFERENCE */
#include "image/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The cache's directory fd and its images/ locks/ tmp/ (root: trusted, made
 * when missing; a user: only opened). */
struct cdirs {
    int dir, images, locks, tmp;
};

static void cdirs_close(struct cdirs *c)
{
    int *fds[] = {&c->dir, &c->images, &c->locks, &c->tmp};
    for (size_t i = 0; i < 4; i++)
        if (*fds[i] >= 0)
            close(*fds[i]), *fds[i] = -1;
}

static int cdirs_open(const char *dir, int create, struct cdirs *c, mtc_error_t *err)
{
    c->dir = c->images = c->locks = c->tmp = -1;
    if (create) {
        c->dir = mtc_dir_open_trusted(dir, 1, 0755, err);
        if (c->dir < 0)
            return errprintf(err, "image cache %s: %s", dir, err->text);
        c->images = mtc_dir_at(c->dir, "images", 1, 0755, err);
        c->locks = c->images >= 0 ? mtc_dir_at(c->dir, "locks", 1, 0700, err) : -1;
        c->tmp = c->locks >= 0 ? mtc_dir_at(c->dir, "tmp", 1, 0700, err) : -1;
        if (c->tmp < 0) {
            cdirs_close(c);
            return errprintf(err, "image cache %s: %s", dir, err->text);
        }
        return 0;
    }
    c->dir = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    c->images = c->dir >= 0 ? openat(c->dir, "images", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                            : -1;
    if (c->images < 0) {
        int e = errno;
        cdirs_close(c);
        return errprintf(err, "image cache %s: %s", dir, strerror(e));
    }
    return 0;
}

/* An entry of images/: a regular file of root's (or of the cache's owner). */
static int entry_ok(int images, const char *name, struct stat *st)
{
    struct stat d;
    return fstatat(images, name, st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st->st_mode) &&
           fstat(images, &d) == 0 && st->st_uid == d.st_uid;
}

/* 1 when a step holds the image (a shared flock on it), 0 when not, with
 * *lfd the file locked exclusively (caller closes) when want_lock. */
static int in_use(int images, const char *name, int *lfd)
{
    int fd = openat(images, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        close(fd);
        return 1;
    }
    if (lfd)
        *lfd = fd;
    else
        close(fd);
    return 0;
}

struct centry {
    char name[80];
    long long size;
    struct timespec used;
};

static int by_use(const void *a, const void *b)
{
    const struct centry *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    return x->used.tv_nsec < y->used.tv_nsec ? -1 : x->used.tv_nsec > y->used.tv_nsec;
}

/* The images of the cache (caller frees *out). */
static int entries(int images, struct centry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int fd = openat(images, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        struct stat st;
        if (l != 69 || strcmp(e->d_name + 64, ".sqsh") != 0 || !entry_ok(images, e->d_name, &st))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            struct centry *nc = realloc(*out, cap * sizeof(**out));
            if (!nc)
                break;
            *out = nc;
        }
        struct centry *c = &(*out)[(*n)++];
        snprintf(c->name, sizeof(c->name), "%s", e->d_name);
        c->size = (long long)st.st_size;
        c->used = st.st_mtim;
    }
    closedir(d);
    qsort(*out, *n, sizeof(**out), by_use);
    return 0;
}

/* Remove least recently used images no step holds (never keep, the name of
 * one just made) until the cache holds at most limit bytes. The bytes left. */
static long long evict(int images, long long limit, const char *keep, size_t *removed)
{
    struct centry *es = NULL;
    size_t n = 0;
    long long total = 0;
    if (entries(images, &es, &n) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        total += es[i].size;
    for (size_t i = 0; i < n && total > limit; i++) {
        int lfd = -1;
        if ((keep && strcmp(es[i].name, keep) == 0) || in_use(images, es[i].name, &lfd))
            continue;
        char ref[80];
        snprintf(ref, sizeof(ref), "%.64s.ref", es[i].name);
        if (unlinkat(images, es[i].name, 0) == 0) {
            total -= es[i].size;
            unlinkat(images, ref, 0);
            if (removed)
                (*removed)++;
        }
        close(lfd);
    }
    free(es);
    return total;
}

static int hex_of(const char *digest, char hex[65])
{
    if (!image_digest_valid(digest))
        return -1;
    memcpy(hex, digest + 7, 64);
    hex[64] = '\0';
    return 0;
}

int image_cache_get(const char *dir, double max_gb, const char *refstr,
                    const struct image_pull_opts *o, char *path, size_t len, int *pulled,
                    mtc_error_t *err)
{
    struct image_ref r;
    char digest[72], hex[65], name[80], tmpname[120], tar[PATH_MAX], out[PATH_MAX];
    struct cdirs c;
    struct stat st;
    if (pulled)
        *pulled = 0;
    if (image_ref_parse(refstr, &r, err) < 0 || image_pull_resolve(&r, o, refstr, digest, err) < 0)
        return -1;
    hex_of(digest, hex);
    snprintf(name, sizeof(name), "%s.sqsh", hex);
    if (snprintf(path, len, "%s/images/%s", dir, name) >= (int)len)
        return errprintf(err, "image cache %s: path too long", dir);
    if (cdirs_open(dir, 1, &c, err) < 0)
        return -1;
    int rc = -1, lock = -1;
    struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    if (entry_ok(c.images, name, &st)) { /* a hit: one inspect, no pull */
        utimensat(c.images, name, now, AT_SYMLINK_NOFOLLOW);
        rc = 0;
        goto out;
    }
    if (fstatat(c.images, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        errprintf(err, "image cache entry %s is not a regular file of the cache's owner: refused",
                  path);
        goto out;
    }
    /* the digest's lock: every node sharing the cache waits for one pull */
    lock = openat(c.locks, hex, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lock < 0 || flock(lock, LOCK_EX) < 0) {
        errprintf(err, "image cache %s: lock: %s", dir, strerror(errno));
        goto out;
    }
    if (entry_ok(c.images, name, &st)) { /* another node pulled it meanwhile */
        utimensat(c.images, name, now, AT_SYMLINK_NOFOLLOW);
        rc = 0;
        goto out;
    }
    long long limit = (long long)(max_gb * 1024 * 1024 * 1024);
    if (limit > 0 && evict(c.images, limit, NULL, NULL) >= limit) {
        errprintf(err, "image %s: the image cache %s is full (%.0f GB) of images in use", refstr,
                  dir, max_gb);
        goto out;
    }
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(tmpname, sizeof(tmpname), "%s.%.40s.%d", hex, host, (int)getpid());
    /* by name under the trusted walk's directory (tar and mksquashfs are
     * other processes: this one's descriptors are not theirs) */
    snprintf(tar, sizeof(tar), "%s/tmp/%s.tar", dir, tmpname);
    snprintf(out, sizeof(out), "%s/tmp/%s.sqsh", dir, tmpname);
    struct image_pull_opts lo = *o;
    lo.max_bytes = limit; /* the user's side cannot fill the disk beyond the cache's limit */
    if (image_pull_fetch(&r, &lo, refstr, digest, tar, out, err) < 0)
        goto out;
    char tmpsq[140];
    snprintf(tmpsq, sizeof(tmpsq), "%s.sqsh", tmpname);
    int ofd = openat(c.tmp, tmpsq, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (ofd < 0 || fchmod(ofd, 0644) < 0 || renameat(c.tmp, tmpsq, c.images, name) < 0) {
        errprintf(err, "image cache %s: cannot store the image: %s", dir, strerror(errno));
        if (ofd >= 0)
            close(ofd);
        unlinkat(c.tmp, tmpsq, 0);
        goto out;
    }
    long long size = fstat(ofd, &st) == 0 ? (long long)st.st_size : 0;
    close(ofd);
    char refname[80];
    snprintf(refname, sizeof(refname), "%s.ref", hex);
    int rfd = openat(c.images, refname, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (rfd >= 0) {
        dprintf(rfd, "%s\n", refstr);
        close(rfd);
    }
    int log = openat(c.dir, "pulls.log", O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
                     0644);
    if (log >= 0) {
        dprintf(log, "%lld %s %s %s\n", (long long)time(NULL), digest, host, refstr);
        close(log);
    }
    if (pulled)
        *pulled = 1;
    if (limit > 0 && evict(c.images, limit, name, NULL) > limit && size <= limit) {
        ; /* over only by images in use: they go when released */
    } else if (limit > 0 && size > limit) {
        unlinkat(c.images, name, 0);
        unlinkat(c.images, refname, 0);
        errprintf(err, "image %s: %lld bytes is more than the image cache's limit (%.0f GB)",
                  refstr, size, max_gb);
        goto out;
    }
    rc = 0;
out:
    if (lock >= 0)
        close(lock);
    cdirs_close(&c);
    return rc;
}

json_t *image_cache_list(const char *dir, mtc_error_t *err)
{
    struct cdirs c;
    if (cdirs_open(dir, 0, &c, err) < 0)
        return NULL;
    struct centry *es = NULL;
    size_t n = 0;
    json_t *a = json_array();
    if (entries(c.images, &es, &n) < 0) {
        errprintf(err, "image cache %s: %s", dir, strerror(errno));
        json_decref(a);
        a = NULL;
    }
    for (size_t i = n; a && i-- > 0;) { /* most recently used first */
        char ref[80], *text;
        snprintf(ref, sizeof(ref), "%.64s.ref", es[i].name);
        int fd = openat(c.images, ref, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        text = fd >= 0 ? mtc_read_fd(fd, NULL) : NULL;
        if (fd >= 0)
            close(fd);
        if (text)
            text[strcspn(text, "\n")] = '\0';
        char digest[80], path[PATH_MAX];
        snprintf(digest, sizeof(digest), "sha256:%.64s", es[i].name);
        snprintf(path, sizeof(path), "%s/images/%s", dir, es[i].name);
        json_array_append_new(
            a, json_pack("{s:s,s:s,s:s,s:I,s:I,s:b}", "digest", digest, "reference",
                         text ? text : "", "path", path, "size", (json_int_t)es[i].size,
                         "lastUsed", (json_int_t)es[i].used.tv_sec, "inUse",
                         in_use(c.images, es[i].name, NULL)));
        free(text);
    }
    free(es);
    cdirs_close(&c);
    return a;
}

int image_cache_prune(const char *dir, double keep_gb, size_t *removed, mtc_error_t *err)
{
    struct cdirs c;
    *removed = 0;
    if (cdirs_open(dir, 1, &c, err) < 0)
        return -1;
    long long left = evict(c.images, (long long)(keep_gb * 1024 * 1024 * 1024), NULL, removed);
    /* work a killed pull left (older than a day: not one in progress) */
    int fd = openat(c.tmp, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct stat st;
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.' && fstatat(c.tmp, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            st.st_mtime < time(NULL) - 86400)
            mtc_remove_at(c.tmp, e->d_name, NULL);
    if (d)
        closedir(d);
    else if (fd >= 0)
        close(fd);
    cdirs_close(&c);
    if (left < 0)
        return errprintf(err, "image cache %s: %s", dir, strerror(errno));
    return 0;
}
