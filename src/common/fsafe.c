/* fsafe: directories root opens, creates and removes for users by descriptor
 * (DESIGN.md, "Security model"): a path is walked once, component by
 * component, checking who may change each directory; what follows is
 * relative to the descriptors it gave, so a symlink or rename made meanwhile
 * by someone else cannot point root elsewhere. */
#include "common/common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Close fd on an error path, keeping the errno that says what failed; -1. */
static int close_failed(int fd)
{
    int e = errno;
    if (fd >= 0)
        close(fd);
    errno = e;
    return -1;
}

/* A directory only root (or this process's euid) can change: owned by one of
 * them, writable by no one else unless sticky (then others may add entries,
 * never rename or remove ours: the next component is checked in turn). */
static int trusted(const struct stat *st)
{
    if (st->st_uid != 0 && st->st_uid != geteuid())
        return 0;
    if (st->st_mode & S_ISVTX)
        return 1;
    return !(st->st_mode & S_IWOTH) && !((st->st_mode & S_IWGRP) && st->st_gid != 0);
}

static int check_dir(int fd, const char *shown, mtc_error_t *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return errprintf(err, "%.200s: %s", shown, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return errprintf(err, "%.200s: not a directory", shown);
    }
    if (!trusted(&st)) {
        errno = EPERM;
        return errprintf(err,
                         "%.200s: owned by uid %u, mode %04o: others than root could change it "
                         "(root works only in directories no one else can write)",
                         shown, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
    }
    return 0;
}

int mtc_dir_open_trusted(const char *path, int create, mode_t mode, mtc_error_t *err)
{
    if (!path || path[0] != '/') {
        errno = EINVAL;
        return errprintf(err, "%.200s: not an absolute path", path ? path : "(none)");
    }
    /* rest: what is left to walk; a symlink's target is put in front of it */
    char rest[PATH_MAX], shown[PATH_MAX] = "";
    if (snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest)) {
        errno = ENAMETOOLONG;
        return errprintf(err, "%.200s: path too long", path);
    }
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), links = 0;
    if (fd < 0 || check_dir(fd, "/", err) < 0)
        goto error;
    char *p = rest;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        char *end = strchrnul(p, '/');
        char name[NAME_MAX + 1];
        if ((size_t)(end - p) > NAME_MAX) {
            errno = ENAMETOOLONG;
            errprintf(err, "%.200s: a component is too long", path);
            goto error;
        }
        memcpy(name, p, (size_t)(end - p));
        name[end - p] = '\0';
        p = end;
        if (strcmp(name, ".") == 0)
            continue;
        if (strcmp(name, "..") == 0) {
            errno = EINVAL;
            errprintf(err, "%.200s: \"..\" in a directory root works in", path);
            goto error;
        }
        size_t sl = strlen(shown);
        snprintf(shown + sl, sizeof(shown) - sl, "/%s", name);
        struct stat st;
        if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT || !create ||
                ((mkdirat(fd, name, mode) < 0 && errno != EEXIST) ||
                 fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)) {
                errprintf(err, "%.200s: %s", shown, strerror(errno));
                goto error;
            }
        }
        if (S_ISLNK(st.st_mode)) {
            /* its directory is trusted; in a sticky one, so must its owner be */
            char target[PATH_MAX];
            ssize_t n = readlinkat(fd, name, target, sizeof(target) - 1);
            if ((st.st_uid != 0 && st.st_uid != geteuid()) || ++links > 40 || n <= 0) {
                errno = n <= 0 ? errno : links > 40 ? ELOOP : EPERM;
                errprintf(err, "%.200s: a symlink root does not follow", shown);
                goto error;
            }
            target[n] = '\0';
            char next[PATH_MAX];
            if (snprintf(next, sizeof(next), "%s/%s", target, p) >= (int)sizeof(next)) {
                errno = ENAMETOOLONG;
                errprintf(err, "%.200s: path too long", path);
                goto error;
            }
            snprintf(rest, sizeof(rest), "%s", next);
            p = rest;
            shown[sl] = '\0';
            if (target[0] == '/') {
                close(fd);
                shown[0] = '\0';
                if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
                    goto error;
            }
            continue;
        }
        int next = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            errprintf(err, "%.200s: %s", shown, strerror(errno));
            goto error;
        }
        close(fd);
        fd = next;
        if (check_dir(fd, shown, err) < 0)
            goto error;
    }
    return fd;
error:
    return close_failed(fd);
}

int mtc_dir_at(int dirfd, const char *name, int create, mode_t mode, mtc_error_t *err)
{
    if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        errno = EINVAL;
        return errprintf(err, "\"%.100s\": not a directory name", name);
    }
    if (create && mkdirat(dirfd, name, mode) < 0 && errno != EEXIST)
        return errprintf(err, "%.100s: %s", name, strerror(errno));
    int fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errprintf(err, "%.100s: %s", name, strerror(errno));
    if (check_dir(fd, name, err) < 0)
        return close_failed(fd);
    return fd;
}

int mtc_is_mount_at(int dirfd, const char *name)
{
    struct statx sx, up;
    int flags = AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH);
    if (statx(dirfd, name, flags, STATX_BASIC_STATS | STATX_MNT_ID, &sx) < 0)
        return 0;
    if (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
        return !!(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
    /* older kernels: another mount id or device than its parent's */
    if (statx(dirfd, *name ? "." : "..", AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_MNT_ID,
              &up) < 0)
        return 0;
    if ((sx.stx_mask & up.stx_mask & STATX_MNT_ID) && sx.stx_mnt_id != up.stx_mnt_id)
        return 1;
    return sx.stx_dev_major != up.stx_dev_major || sx.stx_dev_minor != up.stx_dev_minor;
}

/* ---- removal ---- */

/* A tree deeper than this is not descended: the subtree is moved up to the
 * top of the removal (same filesystem) and emptied from there, so the
 * descriptors held stay bounded whatever depth a user built. */
#define RM_DEPTH 48

struct rm {
    int top;         /* the directory being removed */
    unsigned moved;  /* subtrees moved up (their names: .mtc-rm-N) */
    unsigned seen;   /* entries of top seen by a pass, mount points aside */
    int busy;        /* a mount point was found below: not entered */
    char where[200]; /* the first such mount point's name */
};

static int empty_dir(struct rm *r, int fd, int depth, mtc_error_t *err);

/* name under fd, whatever it is now: a directory emptied then removed, else
 * unlinked. Anything swapped in meanwhile is opened without following a link,
 * so at worst an entry of this tree is removed: never a file outside it. */
static int remove_entry(struct rm *r, int fd, const char *name, int depth, mtc_error_t *err)
{
    struct stat st;
    if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : errprintf(err, "%.150s: %s", name, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(fd, name, 0) == 0 || errno == ENOENT)
            return 0;
        if (errno != EISDIR) /* else it became a directory meanwhile: go on as one */
            return errprintf(err, "cannot remove %.150s: %s", name, strerror(errno));
    }
    if (mtc_is_mount_at(fd, name)) {
        if (!r->where[0])
            snprintf(r->where, sizeof(r->where), "%s", name);
        r->busy = 1;
        return 0;
    }
    if (depth >= RM_DEPTH) {
        for (int tries = 0; tries < 64; tries++) {
            char up[32];
            snprintf(up, sizeof(up), ".mtc-rm-%u", r->moved++);
            if (renameat2(fd, name, r->top, up, RENAME_NOREPLACE) == 0)
                return 0;
            if (errno != EEXIST)
                break;
        }
        return errprintf(err, "cannot move %.150s up to remove it: %s", name, strerror(errno));
    }
    int c = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (c < 0) {
        if (errno == ENOENT)
            return 0;
        if (errno == ENOTDIR || errno == ELOOP) /* swapped for a file or a link */
            return unlinkat(fd, name, 0) < 0 && errno != ENOENT
                       ? errprintf(err, "cannot remove %.150s: %s", name, strerror(errno))
                       : 0;
        return errprintf(err, "%.150s: %s", name, strerror(errno));
    }
    struct stat cs;
    int rc = fstat(c, &cs) < 0 ? errprintf(err, "%.150s: %s", name, strerror(errno)) : 0;
    if (rc == 0 && cs.st_dev != st.st_dev) { /* a mount moved here meanwhile */
        r->busy = 1;
        close(c);
        return 0;
    }
    if (rc == 0)
        rc = empty_dir(r, c, depth + 1, err);
    close(c);
    if (rc == 0 && unlinkat(fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
        if (errno == EBUSY) {
            r->busy = 1;
            return 0;
        }
        rc = errprintf(err, "cannot remove %.150s: %s", name, strerror(errno));
    }
    return rc;
}

static int empty_dir(struct rm *r, int fd, int depth, mtc_error_t *err)
{
    /* its own open file description: a dup would share the read position */
    int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return errprintf(err, "cannot read a directory: %s", strerror(errno));
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        int busy = r->busy;
        r->busy = 0;
        rc = remove_entry(r, fd, e->d_name, depth, err);
        if (depth == 0 && !r->busy)
            r->seen++;
        r->busy |= busy;
    }
    closedir(d);
    return rc;
}

int mtc_remove_at(int dirfd, const char *name, mtc_error_t *err)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : errprintf(err, "%.150s: %s", name, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT
                   ? errprintf(err, "cannot remove %.150s: %s", name, strerror(errno))
                   : 0;
    if (mtc_is_mount_at(dirfd, name)) {
        errno = EBUSY;
        return errprintf(err, "%.150s is a mount point: not removed", name);
    }
    struct rm r = {.top = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
    if (r.top < 0)
        return errprintf(err, "%.150s: %s", name, strerror(errno));
    int rc = 0;
    /* each pass empties what it sees; subtrees moved up (or entries a live
     * process adds meanwhile) need another */
    for (int pass = 0; rc == 0 && pass < 16; pass++) {
        r.seen = 0;
        rc = empty_dir(&r, r.top, 0, err);
        if (r.seen == 0)
            break;
    }
    close(r.top);
    if (rc < 0)
        return -1;
    if (r.busy) {
        errno = EBUSY;
        return errprintf(err, "%.150s: a mount point below it (%.100s) was left", name, r.where);
    }
    if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return errprintf(err, "cannot remove %.150s: %s", name, strerror(errno));
    return 0;
}

int mtc_rm_rf(const char *path)
{
    char dir[PATH_MAX];
    if (!path || snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
        errno = path ? ENAMETOOLONG : EINVAL;
        return -1;
    }
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        dir[--n] = '\0';
    char *slash = strrchr(dir, '/');
    const char *name = slash ? slash + 1 : dir;
    if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        errno = EINVAL; /* "/", "", "x/.": not a tree of its own */
        return -1;
    }
    const char *parent = !slash ? "." : slash == dir ? "/" : (*slash = '\0', dir);
    int fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    int rc = mtc_remove_at(fd, name, NULL);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* ---- reaching a request's files (struct mtc_reach) ---- */

static int fail(int e, mtc_error_t *err, const char *fmt, const char *shown)
{
    errno = e;
    return errprintf(err, fmt, shown);
}

/* name under fd as the walk finds it: an O_PATH descriptor of whatever it is
 * (a link itself, not its target) and its stat. */
static int peek(int fd, const char *name, struct stat *st)
{
    int p = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (p >= 0 && fstat(p, st) < 0)
        return close_failed(p);
    return p;
}

/* The last component, opened for use: what peek saw (the same inode, else
 * it changed meanwhile), a regular file or a directory (O_DIRECTORY: only
 * that). FIFOs and devices are never opened (O_PATH saw them first). */
static int open_last(int fd, const char *name, const struct stat *seen, int flags,
                     const char *shown, mtc_error_t *err)
{
    if (!S_ISDIR(seen->st_mode) && (flags & O_DIRECTORY))
        return fail(ENOTDIR, err, "%.200s: not a directory", shown);
    if (!S_ISDIR(seen->st_mode) && !S_ISREG(seen->st_mode))
        return fail(EINVAL, err, "%.200s: not a directory or a regular file", shown);
    int o = openat(fd, name, (S_ISDIR(seen->st_mode) ? O_RDONLY | O_DIRECTORY : O_RDONLY) |
                                 O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (o < 0 && (errno == ELOOP || errno == ENOTDIR)) /* it was what peek saw */
        return fail(EAGAIN, err, "%.200s: changed while it was being opened", shown);
    if (o < 0)
        return errprintf(err, "%.200s: %s", shown, strerror(errno));
    if (fstat(o, &st) < 0 || st.st_dev != seen->st_dev || st.st_ino != seen->st_ino) {
        close(o);
        return fail(EAGAIN, err, "%.200s: changed while it was being opened", shown);
    }
    fcntl(o, F_SETFL, fcntl(o, F_GETFL) & ~O_NONBLOCK);
    return o;
}

/* Walk rel (relative, no "..") from fd (taken: closed on return) and open its
 * end. follow: a link is followed only when it and the directory holding it
 * are root's and no one else can change that directory; else no link is.
 * need_trusted: every directory on the way (fd's too) only root can change.
 * mkdir: the end is a directory made (0755) when missing. */
static int walk(int fd, const char *rel, const char *path, int follow, int need_trusted, int flags,
                int mkdir_last, mtc_error_t *err)
{
    char rest[PATH_MAX], shown[PATH_MAX];
    int links = 0;
    struct stat st;
    snprintf(shown, sizeof(shown), "%s", path);
    if (snprintf(rest, sizeof(rest), "%s", rel) >= (int)sizeof(rest)) {
        fail(ENAMETOOLONG, err, "%.200s: path too long", path);
        goto error;
    }
    if (fstat(fd, &st) < 0 || (need_trusted && check_dir(fd, "the directory it lies beneath", err) < 0))
        goto error;
    int here_trusted = trusted(&st);
    char *p = rest;
    for (;;) {
        while (*p == '/')
            p++;
        char *end = strchrnul(p, '/');
        char name[NAME_MAX + 1];
        if ((size_t)(end - p) > NAME_MAX) {
            fail(ENAMETOOLONG, err, "%.200s: a component is too long", path);
            goto error;
        }
        memcpy(name, p, (size_t)(end - p));
        name[end - p] = '\0';
        p = end;
        while (*p == '/')
            p++;
        int last = !*p;
        if (!*name || strcmp(name, ".") == 0) {
            if (!last)
                continue;
            snprintf(name, sizeof(name), ".");
        }
        if (strcmp(name, "..") == 0) {
            fail(EINVAL, err, "%.200s: \"..\" in a path mtcd opens for you", path);
            goto error;
        }
        if (last && mkdir_last && strcmp(name, ".") != 0 && mkdirat(fd, name, 0755) < 0 &&
            errno != EEXIST) {
            errprintf(err, "%.200s: %s", path, strerror(errno));
            goto error;
        }
        int nfd = peek(fd, name, &st);
        if (nfd < 0) {
            errprintf(err, "%.200s: %s", path, strerror(errno));
            goto error;
        }
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX], next[PATH_MAX];
            ssize_t n = -1;
            if (follow && here_trusted && (st.st_uid == 0 || st.st_uid == geteuid()) &&
                ++links <= 40)
                n = readlinkat(nfd, "", target, sizeof(target) - 1);
            close(nfd);
            if (n <= 0) {
                fail(EACCES, err,
                     "%.200s: a symbolic link on the way, not followed (mtcd follows none that "
                     "someone other than root could make: it leads outside what you may reach "
                     "as easily as not)",
                     path);
                goto error;
            }
            target[n] = '\0';
            if (snprintf(next, sizeof(next), "%s/%s", target, p) >= (int)sizeof(next)) {
                fail(ENAMETOOLONG, err, "%.200s: path too long", path);
                goto error;
            }
            snprintf(rest, sizeof(rest), "%s", next);
            p = rest;
            if (target[0] == '/') {
                close(fd);
                if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0)
                    goto error;
                here_trusted = trusted(&st);
            }
            continue;
        }
        if (!last) {
            if (!S_ISDIR(st.st_mode)) {
                close(nfd);
                fail(ENOTDIR, err, "%.200s: a component is not a directory", path);
                goto error;
            }
            if (need_trusted && check_dir(nfd, shown, err) < 0) {
                close(nfd);
                goto error;
            }
            here_trusted = trusted(&st);
            close(fd);
            fd = nfd;
            continue;
        }
        close(nfd);
        if (need_trusted && S_ISDIR(st.st_mode)) {
            struct stat dst = st;
            if (!trusted(&dst)) {
                fail(EPERM, err,
                     "%.200s: others than root could change it (root writes only in "
                     "directories no one else can)",
                     path);
                goto error;
            }
        }
        int o = open_last(fd, name, &st, flags | (mkdir_last ? O_DIRECTORY : 0), path, err);
        close(fd);
        return o;
    }
error:
    return close_failed(fd);
}

/* Which of roots (cleaned) path (cleaned) lies beneath: its length, or -1. */
static int root_of(const char *path, const char *const *roots, char *root, size_t len)
{
    for (const char *const *r = roots; *r; r++) {
        if (mtc_path_clean(*r, 1, root, len) < 0)
            continue;
        size_t n = strlen(root); /* cleaned: "/" is the one root of length 1 */
        if (n == 1 || mtc_path_under(path, root))
            return (int)(n == 1 ? 0 : n);
    }
    return -1;
}

int mtc_reach_open(const char *path, const struct mtc_reach *how, int flags, mtc_error_t *err)
{
    char clean[PATH_MAX], root[PATH_MAX];
    if (!path || path[0] != '/' || mtc_path_clean(path, 0, clean, sizeof(clean)) < 0)
        return fail(EINVAL, err, "%.200s: not an absolute path without \"..\"",
                    path ? path : "(none)");
    const char *rel = clean;
    int fd, follow = 1;
    if (how->roots) {
        int n = root_of(clean, how->roots, root, sizeof(root));
        if (n < 0)
            return fail(EACCES, err,
                        "%.200s lies outside the directories mtcd reads and writes for you "
                        "(MTC_HOME/data, mtcd --data-root, MTC_HOME/experiments); only an admin "
                        "may name other paths",
                        path);
        /* the root itself is the admin's choice: opened as root */
        fd = walk(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), root + 1, root, 1, 0,
                  O_DIRECTORY, 0, err);
        if (fd < 0)
            return -1;
        rel = clean + n;
        follow = 0; /* beneath it, nothing a user could make is followed */
    } else if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
        return errprintf(err, "/: %s", strerror(errno));
    }
    struct mtc_fsid saved;
    mtc_fsid_enter(how->as, &saved);
    int o = walk(fd, *rel ? rel : ".", path, follow, how->trusted, flags & ~MTC_REACH_MKDIR,
                 !!(flags & MTC_REACH_MKDIR), err);
    mtc_fsid_leave(&saved);
    return o;
}

int mtc_reach_at(int dirfd, const char *name, const struct mtc_reach *how, int flags,
                 mtc_error_t *err)
{
    if (!*name || strchr(name, '/') || strcmp(name, "..") == 0)
        return fail(EINVAL, err, "\"%.100s\": not a file name", name);
    struct mtc_fsid saved;
    struct stat st;
    mtc_fsid_enter(how->as, &saved);
    int o = -1, p = peek(dirfd, name, &st);
    if (p < 0)
        errprintf(err, "%.200s: %s", name, strerror(errno));
    else if (S_ISLNK(st.st_mode))
        fail(EACCES, err,
             "%.200s is a symbolic link: mtcd follows none in what it reads for you (it leads "
             "outside what you may reach as easily as not)",
             name);
    else
        o = open_last(dirfd, name, &st, flags, name, err);
    if (p >= 0)
        close(p);
    mtc_fsid_leave(&saved);
    return o;
}

int mtc_copy_fd(int in, int out, char hex[65])
{
    enum { BUF = 1 << 20 };
    char *buf = malloc(BUF);
    ssize_t r = 0;
    EVP_MD_CTX *md = hex ? EVP_MD_CTX_new() : NULL;
    int ok = buf != NULL && (!hex || (md && EVP_DigestInit_ex(md, EVP_sha256(), NULL)));
    while (ok && (r = read(in, buf, BUF)) > 0) {
        ok = !md || EVP_DigestUpdate(md, buf, (size_t)r);
        for (ssize_t off = 0; ok && off < r;) {
            ssize_t w = write(out, buf + off, (size_t)(r - off));
            ok = w > 0;
            off += w > 0 ? w : 0;
        }
    }
    ok = ok && r == 0 && fsync(out) == 0;
    unsigned char sum[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (ok && md) {
        ok = EVP_DigestFinal_ex(md, sum, &n) && n == 32;
        for (unsigned int i = 0; ok && i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", sum[i]);
    }
    int e = errno;
    EVP_MD_CTX_free(md);
    free(buf);
    if (!ok) {
        errno = e ? e : EIO;
        return -1;
    }
    return 0;
}

int mtc_copy_into(int in, int dirfd, const char *name, mode_t mode, mtc_error_t *err)
{
    char tmp[64], hex[17];
    int out = -1;
    for (int tries = 0; out < 0 && tries < 16; tries++) {
        mtc_random_hex(hex, 8);
        snprintf(tmp, sizeof(tmp), ".mtc-tmp-%s", hex);
        out = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (out < 0 && errno != EEXIST)
            break;
    }
    if (out < 0)
        return errprintf(err, "%.150s: cannot create a file beside it: %s", name, strerror(errno));
    int rc = mtc_copy_fd(in, out, NULL);
    int e = errno;
    if (close(out) < 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    /* renameat replaces name itself: a link planted there is replaced, never followed */
    if (rc == 0 && renameat(dirfd, tmp, dirfd, name) < 0) {
        rc = -1;
        e = errno;
    }
    if (rc < 0) {
        unlinkat(dirfd, tmp, 0);
        errno = e;
        return errprintf(err, "cannot write %.150s: %s", name, strerror(e));
    }
    return 0;
}
