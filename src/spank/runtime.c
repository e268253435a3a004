/* runtime: the node side of a container, as root in the host's mount
 * namespace — the image's digest (cached, the cache kept to a size as the
 * loader-cache stash is: container_lru_trim), its read-only mount (the kernel's
 * squashfs on a loop device that frees itself on the last unmount), each
 * container's overlay, the mount points a task needs, and the sweep that
 * removes all of a job's mounts. See container.h for the layout. */
#include "spank/container.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int container_node_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 63 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
            return 0;
    return 1;
}

void container_step_init(struct container_step *s)
{
    memset(s, 0, sizeof(*s));
    s->image_fd = s->home_fd = -1;
    for (size_t i = 0; i < CONTAINER_MAX_MOUNTS; i++)
        s->mount_fds[i] = -1;
}

void container_close_sources(struct container_step *s)
{
    int *fds[2 + CONTAINER_MAX_MOUNTS] = {&s->image_fd, &s->home_fd};
    for (size_t i = 0; i < CONTAINER_MAX_MOUNTS; i++)
        fds[2 + i] = &s->mount_fds[i];
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (*fds[i] >= 0) {
            close(*fds[i]);
            *fds[i] = -1;
        }
}

/* May the caller read (and, a directory, search) what fd is? The inode's own
 * permissions with the effective ids, reached through the descriptor. */
static int fd_readable(int fd, int dir)
{
    char self[40];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    return faccessat(AT_FDCWD, self, dir ? R_OK | X_OK : R_OK, AT_EACCESS);
}

int container_open_sources(struct container_step *s, const struct container_opts *o,
                           mtc_error_t *err)
{
    struct stat st;
    if (o->image[0]) {
        /* non-blocking: a FIFO must not hold root (it is refused below) */
        s->image_fd = open(o->image, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        char magic[4];
        if (s->image_fd < 0 || fstat(s->image_fd, &st) < 0) {
            errprintf(err, "--container-image: %s: %s", o->image, strerror(errno));
            goto error;
        }
        if (!S_ISREG(st.st_mode)) {
            errprintf(err, "--container-image: %s is not a regular file", o->image);
            goto error;
        }
        if (pread(s->image_fd, magic, 4, 0) != 4 || memcmp(magic, "hsqs", 4) != 0) {
            errprintf(err, "--container-image: %s is not a squashfs image", o->image);
            goto error;
        }
        fcntl(s->image_fd, F_SETFL, 0);
    }
    for (size_t i = 0; i < o->nmounts; i++) {
        int fd = s->mount_fds[i] = open(o->mounts[i].src, O_PATH | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0 || fd_readable(fd, S_ISDIR(st.st_mode)) < 0) {
            errprintf(err, "--container-mounts: %s: %s", o->mounts[i].src, strerror(errno));
            goto error;
        }
        s->mount_dir[i] = S_ISDIR(st.st_mode);
    }
    if (o->mount_home != 0 && s->home[0] && strcmp(s->home, "/") != 0) {
        s->home_fd = open(s->home, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (s->home_fd >= 0 && fd_readable(s->home_fd, 1) < 0) { /* not theirs: not bound */
            close(s->home_fd);
            s->home_fd = -1;
        }
    }
    return 0;
error:
    container_close_sources(s);
    return -1;
}

/* ---- caches kept to a size ---- */

struct lru_entry {
    char *name;
    struct timespec used;
};

static int lru_older(const void *a, const void *b)
{
    const struct timespec *x = &((const struct lru_entry *)a)->used,
                          *y = &((const struct lru_entry *)b)->used;
    return x->tv_sec != y->tv_sec ? (x->tv_sec < y->tv_sec ? -1 : 1)
                                  : (x->tv_nsec > y->tv_nsec) - (x->tv_nsec < y->tv_nsec);
}

void container_lru_trim(int dirfd, size_t max,
                        int (*pick)(int dirfd, const char *name, const struct stat *st, void *arg),
                        void (*drop)(int dirfd, const char *name, void *arg), void *arg)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct lru_entry *e = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    struct stat st;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0 ||
            fstatat(dirfd, nm, &st, AT_SYMLINK_NOFOLLOW) < 0 || !pick(dirfd, nm, &st, arg))
            continue;
        if (n == cap) {
            struct lru_entry *m = realloc(e, (cap = cap ? cap * 2 : 128) * sizeof(*e));
            if (!m)
                break;
            e = m;
        }
        if (!(e[n].name = strdup(nm)))
            break;
        e[n++].used = st.st_mtim;
    }
    closedir(d);
    if (n > max) {
        qsort(e, n, sizeof(*e), lru_older);
        for (size_t i = 0; i < n - max; i++)
            drop(dirfd, e[i].name, arg);
    }
    for (size_t i = 0; i < n; i++)
        free(e[i].name);
    free(e);
}

/* ---- the image's digest ---- */

/* R/digests/ entries: a key (hex, digits, '-' and '.'); a writer's
 * temporary (KEY.tmpPID) a minute old goes. */
static int digest_pick(int dfd, const char *nm, const struct stat *st, void *arg)
{
    (void)arg;
    if (!strstr(nm, ".tmp") && S_ISREG(st->st_mode))
        return 1;
    if (st->st_mtim.tv_sec < time(NULL) - 60)
        unlinkat(dfd, nm, S_ISDIR(st->st_mode) ? AT_REMOVEDIR : 0);
    return 0;
}

static void digest_drop(int dfd, const char *nm, void *arg)
{
    (void)arg;
    unlinkat(dfd, nm, 0);
}

int container_image_digest(int rtfd, int fd, char out[72], mtc_error_t *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return errprintf(err, "the image: %s", strerror(errno));
    char key[200], tmp[220], cached[80];
    snprintf(key, sizeof(key), "%llx-%llx-%lld-%lld.%09ld-%lld.%09ld",
             (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, (long long)st.st_size,
             (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec,
             st.st_ctim.tv_nsec);
    int dfd = rtfd >= 0 ? mtc_dir_at(rtfd, "digests", 1, 0755, NULL) : -1;
    int cfd = dfd >= 0 ? openat(dfd, key, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    ssize_t n = cfd >= 0 ? read(cfd, cached, sizeof(cached) - 1) : -1;
    int hit = n >= 71 && strncmp(cached, "sha256:", 7) == 0;
    if (hit)
        futimens(cfd, NULL); /* used now: the last to go */
    if (cfd >= 0)
        close(cfd);
    if (hit) {
        memcpy(out, cached, 71);
        out[71] = '\0';
        close(dfd);
        return 0;
    }
    int rc = mtc_sha256_fd(fd, out);
    if (rc < 0)
        errprintf(err, "the image: cannot read or hash it: %s", strerror(errno));
    if (rc == 0 && dfd >= 0) { /* written aside, then renamed: a reader sees all or nothing */
        snprintf(tmp, sizeof(tmp), "%s.tmp%d", key, (int)getpid());
        int w = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (w >= 0) {
            int ok = write(w, out, 71) == 71 && write(w, "\n", 1) == 1;
            close(w);
            if (!ok || renameat(dfd, tmp, dfd, key) < 0)
                unlinkat(dfd, tmp, 0);
            container_lru_trim(dfd, CONTAINER_DIGESTS_MAX, digest_pick, digest_drop, NULL);
        }
    }
    if (dfd >= 0)
        close(dfd);
    return rc;
}

/* ---- mounts ---- */

/* mount(2)'s target for a directory descriptor. */
static const char *fd_path(int fd, char buf[40])
{
    snprintf(buf, 40, "/proc/self/fd/%d", fd);
    return buf;
}

/* The squashfs of the open image on a fresh loop device, read-only, on the
 * directory dirfd. shown: the image's name for messages. */
static int mount_squashfs(int ffd, const char *shown, int dirfd, mtc_error_t *err)
{
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        return errprintf(err, "/dev/loop-control: %s", strerror(errno));
    int rc = -1;
    char target[40];
    for (int attempt = 0; attempt < 16 && rc < 0; attempt++) {
        int n = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0) {
            errprintf(err, "no free loop device: %s", strerror(errno));
            break;
        }
        char dev[32];
        snprintf(dev, sizeof(dev), "/dev/loop%d", n);
        int lfd = open(dev, O_RDONLY | O_CLOEXEC);
        if (lfd < 0) {
            errprintf(err, "%s: %s", dev, strerror(errno));
            break;
        }
        struct loop_config cfg = {.fd = (unsigned)ffd};
        cfg.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
        snprintf((char *)cfg.info.lo_file_name, LO_NAME_SIZE, "%.63s", shown);
        if (ioctl(lfd, LOOP_CONFIGURE, &cfg) < 0) {
            int e = errno;
            close(lfd);
            if (e == EBUSY) /* another process took it first */
                continue;
            errprintf(err, "%s: cannot attach the image: %s", dev, strerror(e));
            break;
        }
        if (mount(dev, fd_path(dirfd, target), "squashfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
                  NULL) < 0)
            errprintf(err, "image %.200s: cannot mount it (corrupt squashfs?): %s", shown,
                      strerror(errno));
        else
            rc = 0;
        close(lfd); /* autoclear: the device goes with the last unmount (or now) */
        break;
    }
    close(ctl);
    return rc;
}

int container_open_in(int rootfd, const char *path, int flags)
{
    struct open_how how = {.flags = (unsigned long long)(flags | O_CLOEXEC),
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    return (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
}

int container_mkpath_in(int rootfd, const char *path, int file, mtc_error_t *err)
{
    char prefix[PATH_MAX];
    size_t len = strlen(path);
    if (len >= sizeof(prefix))
        return errno = ENAMETOOLONG, errprintf(err, "%.200s: too long", path);
    for (size_t i = 1; i <= len; i++) {
        if (i < len && path[i] != '/')
            continue;
        memcpy(prefix, path, i);
        prefix[i] = '\0';
        int last = i == len;
        int fd = container_open_in(rootfd, prefix, O_PATH);
        if (fd >= 0) {
            close(fd);
            continue;
        }
        if (errno != ENOENT)
            return errprintf(err, "%.200s in the container: %s", prefix, strerror(errno));
        char *slash = strrchr(prefix, '/');
        *slash = '\0';
        int pfd = container_open_in(rootfd, prefix[0] ? prefix : "/", O_PATH | O_DIRECTORY);
        if (pfd < 0)
            return errprintf(err, "%.200s in the container: %s", path, strerror(errno));
        int rc;
        if (last && file) {
            int f = openat(pfd, slash + 1, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
            rc = f < 0 ? -1 : close(f);
        } else {
            rc = mkdirat(pfd, slash + 1, 0755);
        }
        int e = errno;
        close(pfd);
        if (rc < 0 && e != EEXIST)
            return errno = e,
                   errprintf(err, "cannot create %.200s in the container: %s", path, strerror(e));
    }
    return 0;
}

int container_bind_in(int rootfd, const char *src, const char *dst, int file, unsigned long flags,
                      int keep_nodev, const char *what, mtc_error_t *err)
{
    if (container_mkpath_in(rootfd, dst, file, NULL) < 0)
        return errprintf(err, "%.200s in the container: %s", dst, strerror(errno));
    int fd = container_open_in(rootfd, dst, O_PATH | O_NOFOLLOW);
    if (fd < 0)
        return errprintf(err, "%.200s in the container: %s", dst, strerror(errno));
    char target[64];
    snprintf(target, sizeof(target), "/proc/self/fd/%d", fd);
    int rc = mount(src, target, NULL, MS_BIND, NULL);
    int e = errno;
    close(fd);
    /* the remount reaches the new mount through the path opened again (fd
     * was the file under it) */
    fd = rc < 0 ? -1 : container_open_in(rootfd, dst, O_PATH | O_NOFOLLOW);
    if (rc == 0 && fd < 0)
        rc = -1, e = errno;
    snprintf(target, sizeof(target), "/proc/self/fd/%d", fd);
    struct statvfs v = {0};
    if (rc == 0 && keep_nodev && statvfs(target, &v) < 0)
        rc = -1, e = errno;
    if (rc == 0 && mount(NULL, target, NULL,
                         MS_BIND | MS_REMOUNT | flags | (v.f_flag & ST_NODEV ? MS_NODEV : 0),
                         NULL) < 0)
        rc = -1, e = errno;
    if (fd >= 0)
        close(fd);
    if (rc < 0) {
        errno = e;
        return errprintf(err, "cannot mount %s%.200s on %.200s: %s", what, src, dst, strerror(e));
    }
    return 0;
}

/* Every mount point the task will bind onto, made in the container's root. */
static int make_mount_points(int rootfd, const struct container_step *s,
                             const struct container_opts *o, mtc_error_t *err)
{
    static const char *const fixed[] = {"/proc", "/sys", "/dev", "/tmp"};
    int rc = 0;
    for (size_t i = 0; i < 4 && rc == 0; i++)
        rc = container_mkpath_in(rootfd, fixed[i], 0, err);
    if (rc == 0 && s->home_fd >= 0)
        rc = container_mkpath_in(rootfd, s->home, 0, err);
    for (size_t i = 0; i < s->nbinds && rc == 0; i++)
        if (access(s->binds[i], F_OK) == 0)
            rc = container_mkpath_in(rootfd, s->binds[i], 0, err);
    for (size_t i = 0; i < o->nmounts && rc == 0; i++)
        rc = container_mkpath_in(rootfd, o->mounts[i].dst, !s->mount_dir[i], err);
    /* slurmstepd changes to the step's directory after entering: have it */
    char cwd[1024];
    if (rc == 0 && s->cwd[0] && container_path_normalize("cwd", s->cwd, cwd, sizeof(cwd), NULL) == 0)
        container_mkpath_in(rootfd, cwd, 0, NULL);
    return rc;
}

/* The job's mount of the image under jobfd (made once per job and node): an
 * O_PATH fd of the mounted image into *lower. */
static int image_mount(int jobfd, const struct container_step *s, const char *shown, int *lower,
                       mtc_error_t *err)
{
    int rc = -1, imgs = mtc_dir_at(jobfd, "images", 1, 0700, err);
    int d = imgs < 0 ? -1 : mtc_dir_at(imgs, s->image_digest + 7, 1, 0755, err);
    if (d >= 0 && (mtc_is_mount_at(d, "") || mount_squashfs(s->image_fd, shown, d, err) == 0)) {
        /* d is the directory under the mount: reopen it to reach the image */
        *lower = openat(imgs, s->image_digest + 7, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        rc = *lower < 0 ? errprintf(err, "the image's mount: %s", strerror(errno)) : 0;
    }
    if (d >= 0)
        close(d);
    if (imgs >= 0)
        close(imgs);
    return rc;
}

/* The container directory dfd: upper/ work/ root/, root an overlay on the
 * image (lower). A writable container's upper belongs to its user. */
static int overlay_mount(int dfd, int lower, const struct container_step *s, int writable,
                         mtc_error_t *err)
{
    int upper = mtc_dir_at(dfd, "upper", 1, 0755, err);
    int work = upper < 0 ? -1 : mtc_dir_at(dfd, "work", 1, 0700, err);
    int root = work < 0 ? -1 : mtc_dir_at(dfd, "root", 1, 0755, err);
    int rc = root < 0 ? -1 : 0;
    /* a writable container's / belongs to its user (the image's files stay root's) */
    if (rc == 0 && writable && fchownat(upper, "", s->uid, s->gid, AT_EMPTY_PATH) < 0)
        rc = errprintf(err, "the container's upper directory: %s", strerror(errno));
    char opts[200], a[40], b[40], c[40], t[40];
    snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", fd_path(lower, a),
             fd_path(upper, b), fd_path(work, c));
    if (rc == 0 && mount("overlay", fd_path(root, t), "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
        rc = errprintf(err, "cannot mount the container's overlay: %s", strerror(errno));
    int fds[] = {upper, work, root};
    for (size_t i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return rc;
}

void container_step_root(struct container_step *s, const struct container_opts *o)
{
    if (o->name[0])
        snprintf(s->root, sizeof(s->root), "%s/jobs/%u/named/%s/root", s->runtime, s->job, o->name);
    else
        snprintf(s->root, sizeof(s->root), "%s/jobs/%u/steps/%u/root", s->runtime, s->job,
                 s->step);
}

int container_root_open(const struct container_step *s, mtc_error_t *err)
{
    char d[1200];
    snprintf(d, sizeof(d), "%s", s->root);
    char *slash = strrchr(d, '/');
    if (!slash || slash == d)
        return errprintf(err, "%s: not a container's root", s->root);
    *slash = '\0';
    int dfd = mtc_dir_open_trusted(d, 0, 0, err);
    if (dfd < 0)
        return -1;
    int fd = openat(dfd, "root", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(dfd);
    if (fd < 0)
        return errprintf(err, "%s: %s", s->root, strerror(e));
    return fd;
}

/* A named container's record: its image's digest and whether writable. */
static int meta_read(int dfd, struct container_step *s)
{
    char t[128] = "";
    int fd = openat(dfd, "meta", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, t, sizeof(t) - 1);
    if (fd >= 0)
        close(fd);
    int w = 0;
    if (n <= 0 || (t[n] = '\0', sscanf(t, "%71s %d", s->image_digest, &w)) != 2)
        return -1;
    s->writable = w;
    return 0;
}

static int meta_write(int dfd, const struct container_step *s)
{
    int fd = openat(dfd, "meta", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    char t[128];
    int n = snprintf(t, sizeof(t), "%s %d\n", s->image_digest, s->writable);
    int ok = write(fd, t, (size_t)n) == n;
    close(fd);
    return ok ? 0 : -1;
}

/* The container directory (named/NAME or steps/STEP) under jobfd, with its
 * kind's directory: fds into *kind and the return value. */
static int container_dir(int jobfd, const struct container_step *s, const struct container_opts *o,
                         int *kind, mtc_error_t *err)
{
    char step[16];
    snprintf(step, sizeof(step), "%u", s->step);
    *kind = mtc_dir_at(jobfd, o->name[0] ? "named" : "steps", 1, 0700, err);
    return *kind < 0 ? -1 : mtc_dir_at(*kind, o->name[0] ? o->name : step, 1, 0700, err);
}

/* s->root's directory (the container's) as a path, into d. */
static void container_path(const struct container_step *s, char *d, size_t len)
{
    snprintf(d, len, "%s", s->root);
    *strrchr(d, '/') = '\0';
}

/* With the job's lock held: the container of s under the job's directory
 * (rt: the runtime directory, for the digests' cache). */
static int prepare_locked(int rt, int jobfd, struct container_step *s,
                          const struct container_opts *o, mtc_error_t *err)
{
    int kind = -1, lower = -1, rootfd = -1, rc = -1;
    const char *name = o->name[0] ? o->name : NULL;
    char d[1200];
    container_path(s, d, sizeof(d));
    int dfd = container_dir(jobfd, s, o, &kind, err);
    if (dfd < 0)
        goto out;
    int exists = name && mtc_is_mount_at(dfd, "root");
    if (exists && o->name_mode == CONTAINER_NAME_CREATE) {
        close(dfd);
        close(kind);
        kind = dfd = -1;
        if (container_sweep(d, err) < 0 || (dfd = container_dir(jobfd, s, o, &kind, err)) < 0)
            goto out;
        exists = 0;
    }
    if (exists) {
        if (meta_read(dfd, s) < 0) {
            errprintf(err, "container %s: its record is missing", name);
            goto out;
        }
    } else if (name && (o->name_mode == CONTAINER_NAME_EXEC ||
                        o->name_mode == CONTAINER_NAME_NO_EXEC)) {
        errprintf(err, "--container-name: no container named %s in this job on this node", name);
        goto out;
    } else if (s->image_fd < 0) {
        errprintf(err, "--container-name=%s: no such container yet, and no --container-image",
                  name ? name : "");
        goto out;
    } else {
        s->writable = o->writable != 0; /* writable unless --container-readonly */
        if (container_image_digest(rt, s->image_fd, s->image_digest, err) < 0 ||
            image_mount(jobfd, s, o->image, &lower, err) < 0 ||
            overlay_mount(dfd, lower, s, s->writable, err) < 0 ||
            (name && meta_write(dfd, s) < 0 && errprintf(err, "container %s: cannot record it", name)))
            goto undo;
    }
    rootfd = openat(dfd, "root", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rootfd < 0) {
        errprintf(err, "%s: %s", s->root, strerror(errno));
        goto undo;
    }
    rc = make_mount_points(rootfd, s, o, err);
    if (rc == 0 || exists)
        goto out;
undo: /* a container this call made: nothing of it stays */
    container_sweep(d, NULL);
    rc = -1;
out:
    if (rootfd >= 0)
        close(rootfd);
    if (lower >= 0)
        close(lower);
    if (dfd >= 0)
        close(dfd);
    if (kind >= 0)
        close(kind);
    return rc;
}

int container_prepare(struct container_step *s, const struct container_opts *o, mtc_error_t *err)
{
    container_step_root(s, o);
    char job[16];
    snprintf(job, sizeof(job), "%u", s->job);
    int rt = mtc_dir_open_trusted(s->runtime, 1, 0755, err);
    int jobs = rt < 0 ? -1 : mtc_dir_at(rt, "jobs", 1, 0700, err);
    int jobfd = jobs < 0 ? -1 : mtc_dir_at(jobs, job, 1, 0700, err);
    int lock = jobfd < 0 ? -1 : openat(jobfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = -1;
    if (jobfd >= 0 && (lock < 0 || flock(lock, LOCK_EX) < 0))
        errprintf(err, "%s/jobs/%s/lock: %s", s->runtime, job, strerror(errno));
    else if (jobfd >= 0)
        rc = prepare_locked(rt, jobfd, s, o, err);
    int fds[] = {lock, jobfd, jobs, rt}; /* the flock goes with its fd */
    for (size_t i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return rc;
}

void container_step_done(const char *runtime, unsigned job, unsigned step)
{
    char d[1100];
    snprintf(d, sizeof(d), "%s/jobs/%u/steps/%u", runtime, job, step);
    if (mtc_path_exists(d))
        container_sweep(d, NULL);
}

/* mountinfo's octal escapes (\040 for a space) undone in place. */
static void unescape(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] && s[3]) {
            *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
}

int container_sweep(const char *prefix, mtc_error_t *err)
{
    size_t plen = strlen(prefix);
    int removed = 0;
    /* a pass unmounts what it sees deepest first; mounts stacked on one
     * point need more passes */
    for (int pass = 0; pass < 8; pass++) {
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
            return errprintf(err, "/proc/self/mountinfo: %s", strerror(errno));
        char line[4096], *points[256];
        size_t n = 0;
        while (n < 256 && fgets(line, sizeof(line), f)) {
            char mp[4096];
            if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
                continue;
            unescape(mp);
            if (strncmp(mp, prefix, plen) == 0 && (mp[plen] == '/' || mp[plen] == '\0'))
                points[n++] = strdup(mp);
        }
        fclose(f);
        if (n == 0)
            break;
        /* deepest first: longer paths are below shorter ones */
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (points[j] && points[i] && strlen(points[j]) > strlen(points[i])) {
                    char *t = points[i];
                    points[i] = points[j];
                    points[j] = t;
                }
        for (size_t i = 0; i < n; i++) {
            if (points[i] && umount2(points[i], MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
                removed++;
            free(points[i]);
        }
    }
    /* then the tree, by descriptor from a trusted walk to its directory */
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", prefix);
    char *slash = strrchr(dir, '/');
    if (!slash || !slash[1])
        return errprintf(err, "%.200s: not a directory to sweep", prefix);
    *slash = '\0';
    int dfd = mtc_dir_open_trusted(slash == dir ? "/" : dir, 0, 0, err);
    if (dfd < 0)
        return errno == ENOENT ? removed : -1;
    int rc = mtc_remove_at(dfd, slash + 1, err);
    close(dfd);
    return rc < 0 ? -1 : removed;
}
