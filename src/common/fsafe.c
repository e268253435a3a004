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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    if (fd >= 0) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return -1;
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
    if (check_dir(fd, name, err) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
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
