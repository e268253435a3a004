/* runtime: the node side of a container, as root in the host's mount
 * namespace — the image's digest (cached), its read-only mount (the kernel's
 * squashfs on a loop device that frees itself on the last unmount), each
 * container's overlay, the mount points a task needs, and the sweep that
 * removes all of a job's mounts. See container.h for the layout. */
#include "spank/container.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/loop.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- the image's digest ---- */

int container_image_digest(const char *runtime, const char *path, char out[72], mtc_error_t *err)
{
    struct stat st;
    char key[1024] = "";
    if (stat(path, &st) < 0)
        return errprintf(err, "image %.200s: %s", path, strerror(errno));
    if (runtime)
        snprintf(key, sizeof(key), "%s/digests/%llx-%llx-%lld-%lld.%09ld", runtime,
                 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                 (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    char *cached = key[0] ? mtc_read_file(key, NULL) : NULL;
    if (cached && strncmp(cached, "sha256:", 7) == 0 && strlen(cached) >= 71) {
        memcpy(out, cached, 71);
        out[71] = '\0';
        free(cached);
        return 0;
    }
    free(cached);
    int rc = mtc_sha256_file(path, out, err);
    if (rc == 0 && key[0]) {
        char dir[600];
        snprintf(dir, sizeof(dir), "%s/digests", runtime);
        if (mtc_mkdir_p(dir, 0755) == 0)
            mtc_write_file_fmt(key, 0644, "%s\n", out);
    }
    return rc;
}

/* ---- mounts ---- */

/* The squashfs at image on a fresh loop device, read-only, at dir. */
static int mount_squashfs(const char *image, const char *dir, mtc_error_t *err)
{
    int ffd = open(image, O_RDONLY | O_CLOEXEC);
    if (ffd < 0)
        return errprintf(err, "image %.200s: %s", image, strerror(errno));
    char magic[4];
    if (pread(ffd, magic, 4, 0) != 4 || memcmp(magic, "hsqs", 4) != 0) {
        close(ffd);
        return errprintf(err, "image %.200s is not a squashfs image", image);
    }
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0) {
        close(ffd);
        return errprintf(err, "/dev/loop-control: %s", strerror(errno));
    }
    int rc = -1;
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
        snprintf((char *)cfg.info.lo_file_name, LO_NAME_SIZE, "%.63s", image);
        if (ioctl(lfd, LOOP_CONFIGURE, &cfg) < 0) {
            int e = errno;
            close(lfd);
            if (e == EBUSY) /* another process took it first */
                continue;
            errprintf(err, "%s: cannot attach the image: %s", dev, strerror(e));
            break;
        }
        if (mount(dev, dir, "squashfs", MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
            errprintf(err, "image %.200s: cannot mount it (corrupt squashfs?): %s", image,
                      strerror(errno));
        else
            rc = 0;
        close(lfd); /* autoclear: the device goes with the last unmount (or now) */
        break;
    }
    close(ctl);
    close(ffd);
    return rc;
}

/* 1 when dir is a mount point (its device differs from its parent's). */
static int is_mount(const char *dir)
{
    struct stat a, b;
    char parent[1300];
    snprintf(parent, sizeof(parent), "%s/..", dir);
    return stat(dir, &a) == 0 && stat(parent, &b) == 0 && (a.st_dev != b.st_dev);
}

int container_open_in(int rootfd, const char *path, int flags)
{
    struct open_how how = {.flags = (unsigned long long)(flags | O_CLOEXEC),
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    return (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
}

/* path (absolute, normalized) inside the container rooted at rootfd:
 * directories created as needed, the last one a file when file is set. */
static int mkpath_in(int rootfd, const char *path, int file, mtc_error_t *err)
{
    char prefix[1024];
    size_t len = strlen(path);
    if (len >= sizeof(prefix))
        return errprintf(err, "%.200s: too long", path);
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
            return errprintf(err, "cannot create %.200s in the container: %s", path, strerror(e));
    }
    return 0;
}

/* Every mount point the task will bind onto, made in the container's root. */
static int make_mount_points(const struct container_step *s, const struct container_opts *o,
                             mtc_error_t *err)
{
    int rootfd = open(s->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return errprintf(err, "%s: %s", s->root, strerror(errno));
    static const char *const fixed[] = {"/proc", "/sys", "/dev", "/tmp"};
    int rc = 0;
    for (size_t i = 0; i < 4 && rc == 0; i++)
        rc = mkpath_in(rootfd, fixed[i], 0, err);
    if (rc == 0 && o->mount_home != 0 && s->home[0] && strcmp(s->home, "/") != 0)
        rc = mkpath_in(rootfd, s->home, 0, err);
    for (size_t i = 0; i < s->nbinds && rc == 0; i++)
        if (access(s->binds[i], F_OK) == 0)
            rc = mkpath_in(rootfd, s->binds[i], 0, err);
    for (size_t i = 0; i < o->nmounts && rc == 0; i++) {
        struct stat st;
        if (stat(o->mounts[i].src, &st) < 0)
            rc = errprintf(err, "--container-mounts: %.200s: %s", o->mounts[i].src,
                           strerror(errno));
        else
            rc = mkpath_in(rootfd, o->mounts[i].dst, !S_ISDIR(st.st_mode), err);
    }
    /* slurmstepd changes to the step's directory after entering: have it */
    char cwd[1024];
    if (rc == 0 && s->cwd[0] && container_path_normalize("cwd", s->cwd, cwd, sizeof(cwd), NULL) == 0)
        mkpath_in(rootfd, cwd, 0, NULL);
    close(rootfd);
    return rc;
}

/* The job's mount of the image (made once per job and node). */
static int image_mount(const struct container_step *s, const char *image, const char *digest,
                       char *dir, size_t len, mtc_error_t *err)
{
    snprintf(dir, len, "%s/jobs/%u/images/%s", s->runtime, s->job, digest + 7);
    if (is_mount(dir))
        return 0;
    if (mtc_mkdir_p(dir, 0755) < 0)
        return errprintf(err, "%s: %s", dir, strerror(errno));
    return mount_squashfs(image, dir, err);
}

/* A container directory d: upper/ work/ root/, root an overlay on the image. */
static int overlay_mount(const char *d, const char *lower, const struct container_step *s,
                         int writable, mtc_error_t *err)
{
    char upper[1300], work[1300], root[1300], opts[4096];
    snprintf(upper, sizeof(upper), "%s/upper", d);
    snprintf(work, sizeof(work), "%s/work", d);
    snprintf(root, sizeof(root), "%s/root", d);
    if (mtc_mkdir_p(upper, 0755) < 0 || mtc_mkdir_p(work, 0700) < 0 || mtc_mkdir_p(root, 0755) < 0)
        return errprintf(err, "%s: %s", d, strerror(errno));
    /* a writable container's / belongs to its user (the image's files stay root's) */
    if (writable && chown(upper, s->uid, s->gid) < 0)
        return errprintf(err, "%s: %s", upper, strerror(errno));
    snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
    if (mount("overlay", root, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
        return errprintf(err, "cannot mount the container's overlay: %s", strerror(errno));
    return 0;
}

int container_meta_read(struct container_step *s)
{
    char path[1300];
    snprintf(path, sizeof(path), "%.1200s/../meta", s->root);
    char *t = mtc_read_file(path, NULL);
    if (!t)
        return -1;
    int w = 0;
    int n = sscanf(t, "%71s %d", s->image_digest, &w);
    free(t);
    s->writable = w;
    return n == 2 ? 0 : -1;
}

void container_step_root(struct container_step *s, const struct container_opts *o)
{
    if (o->name[0])
        snprintf(s->root, sizeof(s->root), "%s/jobs/%u/named/%s/root", s->runtime, s->job, o->name);
    else
        snprintf(s->root, sizeof(s->root), "%s/jobs/%u/steps/%u/root", s->runtime, s->job,
                 s->step);
}

int container_prepare(struct container_step *s, const struct container_opts *o, mtc_error_t *err)
{
    char d[1100], lockpath[1100];
    snprintf(lockpath, sizeof(lockpath), "%s/jobs/%u", s->runtime, s->job);
    if (mtc_mkdir_p(lockpath, 0755) < 0)
        return errprintf(err, "%s: %s", lockpath, strerror(errno));
    strcat(lockpath, "/lock");
    int lock = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0 || flock(lock, LOCK_EX) < 0) {
        if (lock >= 0)
            close(lock);
        return errprintf(err, "%s: %s", lockpath, strerror(errno));
    }
    int rc = -1, writable = o->writable != 0; /* writable unless --container-readonly */
    container_step_root(s, o);
    snprintf(d, sizeof(d), "%.1090s", s->root);
    *strrchr(d, '/') = '\0';
    int exists = o->name[0] && is_mount(s->root);
    if (exists && o->name_mode == CONTAINER_NAME_CREATE) {
        if (container_sweep(d, err) < 0)
            goto out;
        exists = 0;
    }
    if (exists) {
        if (container_meta_read(s) < 0) {
            errprintf(err, "container %s: its record is missing", o->name);
            goto out;
        }
        rc = make_mount_points(s, o, err);
        goto out;
    }
    if (o->name[0] &&
        (o->name_mode == CONTAINER_NAME_EXEC || o->name_mode == CONTAINER_NAME_NO_EXEC)) {
        errprintf(err, "--container-name: no container named %s in this job on this node",
                  o->name);
        goto out;
    }
    if (!o->image[0]) {
        errprintf(err, "--container-name=%s: no such container yet, and no --container-image",
                  o->name);
        goto out;
    }
    char lower[1300];
    if (container_image_digest(s->runtime, o->image, s->image_digest, err) < 0 ||
        image_mount(s, o->image, s->image_digest, lower, sizeof(lower), err) < 0)
        goto out;
    if (mtc_mkdir_p(d, 0755) < 0) {
        errprintf(err, "%s: %s", d, strerror(errno));
        goto out;
    }
    if (overlay_mount(d, lower, s, writable, err) < 0) {
        container_sweep(d, NULL);
        goto out;
    }
    s->writable = writable;
    if (o->name[0]) {
        char meta[1300];
        snprintf(meta, sizeof(meta), "%s/meta", d);
        mtc_write_file_fmt(meta, 0644, "%s %d\n", s->image_digest, writable);
    }
    rc = make_mount_points(s, o, err);
    if (rc < 0 && !o->name[0])
        container_sweep(d, NULL);
out:
    close(lock); /* and the flock with it */
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

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
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
            if (points[i] && umount2(points[i], MNT_DETACH) == 0)
                removed++;
            free(points[i]);
        }
    }
    /* FTW_MOUNT: never into a mount the passes above could not remove */
    if (mtc_path_exists(prefix) && nftw(prefix, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0)
        return errprintf(err, "cannot remove %.200s: %s", prefix, strerror(errno));
    return removed;
}
