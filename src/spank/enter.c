/* enter: the task side of a container. As root in the task's own process,
 * before Slurm drops to the user: a private mount namespace (so every mount
 * below dies with the task, SIGKILL included), /proc, /sys, a small /dev
 * (with the step's GPU files; InfiniBand's, ib.c), /tmp, /dev/shm, home,
 * PMIx's directories and the requested mounts bound into the container's
 * root (the NVIDIA driver's files first, driver.c), then pivot_root.
 * As the user, just before exec: the image's environment and workdir, and the
 * optional user namespace that maps the user to root. */
#include "spank/container.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The flags a remount of the bind at target must keep (a remount replaces
 * them all: dropping the source's noexec or rdonly would loosen it). */
static unsigned long kept_flags(const char *target)
{
    struct statvfs v;
    if (statvfs(target, &v) < 0)
        return 0;
    static const struct {
        unsigned long st, ms;
    } map[] = {{ST_RDONLY, MS_RDONLY},   {ST_NOSUID, MS_NOSUID},         {ST_NODEV, MS_NODEV},
               {ST_NOEXEC, MS_NOEXEC},   {ST_NOATIME, MS_NOATIME},       {ST_NODIRATIME, MS_NODIRATIME},
               {ST_RELATIME, MS_RELATIME}};
    unsigned long ms = 0;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (v.f_flag & map[i].st)
            ms |= map[i].ms;
    return ms;
}

/* A bind at path inside the root just made gets the per-mount flags add
 * (MS_RDONLY, MS_NOSUID, MS_NODEV) by a remount, which reaches the new mount
 * through the path opened again. */
static int remount_in(int rootfd, const char *path, unsigned long add)
{
    char target[64];
    int fd = container_open_in(rootfd, path, O_PATH);
    if (fd < 0)
        return -1;
    snprintf(target, sizeof(target), "/proc/self/fd/%d", fd);
    int rc = mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | kept_flags(target) | add, NULL);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* Mount src (fstype NULL: a bind, recursive, of a path only root and Slurm
 * name) onto path inside the root at rootfd, resolved inside it; a bind then
 * gets the flags add. */
static int mount_in(int rootfd, const char *src, const char *path, const char *fstype,
                    unsigned long flags, const char *data, unsigned long add, mtc_error_t *err)
{
    int fd = container_open_in(rootfd, path, O_PATH);
    if (fd < 0)
        return errprintf(err, "%.200s in the container: %s", path, strerror(errno));
    char target[64];
    snprintf(target, sizeof(target), "/proc/self/fd/%d", fd);
    int rc = mount(src, target, fstype, fstype ? flags : flags | MS_BIND | MS_REC, data);
    int e = errno;
    close(fd);
    if (rc == 0 && !fstype && add && remount_in(rootfd, path, add) < 0)
        rc = -1, e = errno;
    if (rc < 0)
        return errprintf(err, "cannot mount %.200s on %.200s: %s", src, path, strerror(e));
    return 0;
}

/* A copy of the tree at fd (opened by the user), detached: made in the host's
 * namespace (a bind's source must be in the caller's), attached after the
 * task's own namespace exists. fd or -1 + err. */
static int clone_tree(int fd, const char *shown, mtc_error_t *err)
{
    int t = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (t < 0)
        return errprintf(err, "cannot bind %.200s: %s", shown, strerror(errno));
    return t;
}

/* The detached tree onto path inside the root, then the flags add. */
static int attach_in(int rootfd, int tree, const char *shown, const char *path, unsigned long add,
                     mtc_error_t *err)
{
    int fd = container_open_in(rootfd, path, O_PATH);
    if (fd < 0)
        return errprintf(err, "%.200s in the container: %s", path, strerror(errno));
    int rc = move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
    int e = errno;
    close(fd);
    if (rc == 0 && add && remount_in(rootfd, path, add) < 0)
        rc = -1, e = errno;
    if (rc < 0)
        return errprintf(err, "cannot mount %.200s on %.200s: %s", shown, path, strerror(e));
    return 0;
}

/* A small /dev: the usual character devices, pts, shm, the standard links,
 * and the step's GPUs (the node's /dev/nvidia* or its emulated files; with
 * the driver, nvidia-caps for MIG too). */
static int make_dev(int rootfd, const char *gpu_dir, const char *gpus, int driver, mtc_error_t *err)
{
    if (mount_in(rootfd, "tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=1m", 0,
                 err) < 0)
        return -1;
    int dev = container_open_in(rootfd, "/dev", O_PATH | O_DIRECTORY);
    if (dev < 0)
        return errprintf(err, "/dev in the container: %s", strerror(errno));
    char names[48][64];
    const char *srcs[48];
    char srcbuf[48][1100];
    size_t n = 0;
    static const char *const chars[] = {"null",           "zero",          "full",
                                        "random",         "urandom",       "tty",
                                        "nvidiactl",      "nvidia-uvm",    "nvidia-uvm-tools",
                                        "nvidia-modeset"};
    for (size_t i = 0; i < sizeof(chars) / sizeof(chars[0]); i++) {
        snprintf(srcbuf[n], sizeof(srcbuf[n]), "/dev/%s", chars[i]);
        if (access(srcbuf[n], F_OK) < 0)
            continue;
        snprintf(names[n], sizeof(names[n]), "%s", chars[i]);
        srcs[n] = srcbuf[n];
        n++;
    }
    for (const char *p = gpus; p && *p && n < 48;) {
        char *end;
        long g = strtol(p, &end, 10);
        if (end == p || g < 0 || g > 1023)
            break;
        if (gpu_dir)
            snprintf(srcbuf[n], sizeof(srcbuf[n]), "%s/nvidia%ld", gpu_dir, g);
        else
            snprintf(srcbuf[n], sizeof(srcbuf[n]), "/dev/nvidia%ld", g);
        if (access(srcbuf[n], F_OK) == 0) {
            snprintf(names[n], sizeof(names[n]), "nvidia%ld", g);
            srcs[n] = srcbuf[n];
            n++;
        }
        p = *end == ',' ? end + 1 : end;
    }
    snprintf(srcbuf[n], sizeof(srcbuf[n]), "%s/nvidia-caps", gpu_dir ? gpu_dir : "/dev");
    int caps = driver && n < 48 && access(srcbuf[n], F_OK) == 0;
    if (caps) {
        snprintf(names[n], sizeof(names[n]), "nvidia-caps");
        srcs[n] = srcbuf[n];
        n++;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (caps && i == n - 1) {
            mkdirat(dev, names[i], 0755);
        } else {
            int f = openat(dev, names[i], O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0666);
            if (f >= 0)
                close(f);
        }
        char path[80];
        snprintf(path, sizeof(path), "/dev/%s", names[i]);
        rc = mount_in(rootfd, srcs[i], path, NULL, 0, NULL, 0, err);
    }
    static const char *const dirs[][2] = {{"pts", "/dev/pts"}, {"shm", "/dev/shm"}};
    for (size_t i = 0; i < 2 && rc == 0; i++) {
        mkdirat(dev, dirs[i][0], 0755);
        rc = mount_in(rootfd, dirs[i][1], dirs[i][1], NULL, 0, NULL, 0, err);
    }
    static const char *const links[][2] = {{"pts/ptmx", "ptmx"},         {"/proc/self/fd", "fd"},
                                           {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"},
                                           {"/proc/self/fd/2", "stderr"}};
    for (size_t i = 0; i < 5 && rc == 0; i++)
        if (symlinkat(links[i][0], dev, links[i][1]) < 0 && errno != EEXIST)
            rc = errprintf(err, "/dev/%s in the container: %s", links[i][1], strerror(errno));
    close(dev);
    return rc;
}

int container_enter(const struct container_step *s, const struct container_opts *o,
                    const char *gpu_dir, const char *gpus, const struct container_driver *drv,
                    const struct container_ib *ib, mtc_error_t *err)
{
    char mine[512];
    int driver = drv && drv->inject;
    if (driver) {
        container_driver_gpus(drv, mine, sizeof(mine));
        gpus = mine;
    }
    /* the user's sources, cloned while this process is in the host's namespace */
    int trees[CONTAINER_MAX_MOUNTS + 1], rc = 0;
    size_t n = 0;
    for (; n < o->nmounts && rc >= 0; n++)
        rc = trees[n] = clone_tree(s->mount_fds[n], o->mounts[n].src, err);
    int home = rc < 0 || s->home_fd < 0 ? -1 : (rc = clone_tree(s->home_fd, s->home, err));
    int rootfd = -1;
    if (rc >= 0 && unshare(CLONE_NEWNS) < 0)
        rc = errprintf(err, "cannot make a mount namespace: %s", strerror(errno));
    /* nothing mounted from here on reaches the host; the host's unmounts still
     * reach here */
    if (rc >= 0 && mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
        rc = errprintf(err, "cannot make / a slave mount: %s", strerror(errno));
    if (rc >= 0 && (rootfd = container_root_open(s, err)) < 0)
        rc = -1;
    /* the driver's files and ldconfig while the root holds only the image */
    if (rc >= 0 && driver)
        rc = container_driver_files(drv, s, rootfd, err);
    if (rc >= 0)
        rc = mount_in(rootfd, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, 0,
                      err);
    if (rc == 0 && driver)
        rc = container_driver_proc(drv, rootfd, err);
    if (rc == 0)
        rc = mount_in(rootfd, "/sys", "/sys", NULL, 0, NULL, 0, err);
    if (rc == 0)
        rc = make_dev(rootfd, gpu_dir, gpus, driver, err);
    if (rc == 0 && ib && ib->ndevs)
        rc = container_ib_dev(ib, rootfd, err);
    if (rc == 0)
        rc = mount_in(rootfd, "/tmp", "/tmp", NULL, 0, NULL, MS_NOSUID | MS_NODEV, err);
    if (rc == 0 && driver)
        rc = container_driver_ipc(drv, rootfd, err);
    if (rc == 0 && home >= 0)
        rc = attach_in(rootfd, home, s->home, s->home, MS_NOSUID | MS_NODEV, err);
    for (size_t i = 0; i < s->nbinds && rc == 0; i++)
        if (access(s->binds[i], F_OK) == 0)
            rc = mount_in(rootfd, s->binds[i], s->binds[i], NULL, 0, NULL, MS_NOSUID | MS_NODEV,
                          err);
    for (size_t i = 0; i < o->nmounts && rc == 0; i++)
        rc = attach_in(rootfd, trees[i], o->mounts[i].src, o->mounts[i].dst,
                       MS_NOSUID | MS_NODEV | (o->mounts[i].ro ? MS_RDONLY : 0), err);
    if (rc == 0 && !s->writable && remount_in(rootfd, "/", MS_RDONLY | MS_NOSUID | MS_NODEV) < 0)
        rc = errprintf(err, "cannot make the container read-only: %s", strerror(errno));
    for (size_t i = 0; i < n; i++)
        if (trees[i] >= 0)
            close(trees[i]);
    if (home >= 0)
        close(home);
    /* pivot_root with the old root stacked under the new one, then detached */
    if (rc == 0 && (fchdir(rootfd) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
                    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0))
        rc = errprintf(err, "cannot enter the container: %s", strerror(errno));
    if (rootfd >= 0)
        close(rootfd);
    return rc < 0 ? -1 : 0;
}

int container_env_apply(const struct container_opts *o, const char *(*getenv_fn)(void *, const char *),
                        int (*set_fn)(void *, const char *, const char *), void *arg,
                        mtc_error_t *err)
{
    FILE *f = fopen("/etc/environment", "re");
    if (!f)
        return 0; /* an image without defaults */
    char line[8192];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *k = line;
        while (*k == ' ' || *k == '\t')
            k++;
        if (strncmp(k, "export ", 7) == 0)
            k += 7;
        char *eq = strchr(k, '=');
        if (!*k || *k == '#' || !eq || eq == k)
            continue;
        *eq = '\0';
        char *v = eq + 1;
        size_t vl = strlen(v);
        if (vl >= 2 && (v[0] == '"' || v[0] == '\'') && v[vl - 1] == v[0]) {
            v[vl - 1] = '\0';
            v++;
        }
        int keep_job = 0;
        for (size_t i = 0; i < o->nenv && !keep_job; i++)
            keep_job = strcmp(o->env[i], k) == 0 && getenv_fn(arg, k) != NULL;
        if (!keep_job && set_fn(arg, k, v) < 0)
            rc = errprintf(err, "cannot set %.100s from the image", k);
    }
    fclose(f);
    return rc;
}

int container_remap_root(uid_t uid, gid_t gid, mtc_error_t *err)
{
    /* a process that changed its uid is not dumpable, and its /proc files
     * stay root's: it could not write its own maps */
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    if (unshare(CLONE_NEWUSER) < 0)
        return errprintf(err, "--container-remap-root: cannot make a user namespace: %s",
                         strerror(errno));
    /* setgroups must be denied before an unprivileged gid_map (absent: old kernels) */
    int fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t w = write(fd, "deny", 4);
        close(fd);
        if (w < 0)
            return errprintf(err, "--container-remap-root: setgroups: %s", strerror(errno));
    }
    char map[64];
    static const char *const files[] = {"/proc/self/uid_map", "/proc/self/gid_map"};
    for (int i = 0; i < 2; i++) {
        snprintf(map, sizeof(map), "0 %u 1\n", i == 0 ? (unsigned)uid : (unsigned)gid);
        fd = open(files[i], O_WRONLY | O_CLOEXEC);
        ssize_t w = fd < 0 ? -1 : write(fd, map, strlen(map));
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (w < 0)
            return errprintf(err, "--container-remap-root: %s: %s", files[i], strerror(e));
    }
    return 0;
}

int container_find_command(const char *argv0, const char *path)
{
    if (!argv0 || !*argv0)
        return 0;
    if (strchr(argv0, '/'))
        return access(argv0, X_OK) == 0;
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        char full[4096];
        snprintf(full, sizeof(full), "%.*s/%s", (int)(n ? n : 1), n ? p : ".", argv0);
        struct stat st;
        if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0)
            return 1;
        p += n;
        if (*p == ':')
            p++;
    }
    return 0;
}
