/* ldcache: a GPU container's loader cache made to hold the NVIDIA driver's
 * files (driver.c binds them): ldconfig's mark in the container, the host's
 * static ldconfig run chrooted in it, and the node's stash of what it made,
 * which later steps and jobs copy in instead of running it again. */
#include "spank/container.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The loader cache of the container already holds this driver's files: the
 * mark ldconfig's last run left (/.mtc/driver-ldconfig: the driver's version,
 * the capabilities, the library directory) matches key, and /etc/ld.so.cache
 * has not changed since. Another task of the step, a named container's next
 * step. */
static int ldcache_current(int rootfd, const char *key)
{
    int m = container_open_in(rootfd, "/.mtc/driver-ldconfig", O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    int c = container_open_in(rootfd, "/etc/ld.so.cache", O_PATH | O_NOFOLLOW);
    char buf[512];
    struct stat ms, cs;
    ssize_t n = m < 0 ? -1 : read(m, buf, sizeof(buf) - 1);
    int ok = n >= 0 && c >= 0 && fstat(m, &ms) == 0 && fstat(c, &cs) == 0 && S_ISREG(ms.st_mode) &&
             S_ISREG(cs.st_mode) &&
             (cs.st_mtim.tv_sec < ms.st_mtim.tv_sec ||
              (cs.st_mtim.tv_sec == ms.st_mtim.tv_sec && cs.st_mtim.tv_nsec <= ms.st_mtim.tv_nsec));
    if (ok) {
        buf[n] = '\0';
        ok = strcmp(buf, key) == 0;
    }
    if (m >= 0)
        close(m);
    if (c >= 0)
        close(c);
    return ok;
}

static void ldcache_mark(int rootfd, const char *key)
{
    int top = container_open_in(rootfd, "/", O_PATH | O_DIRECTORY);
    if (top >= 0)
        mkdirat(top, ".mtc", 0755);
    if (top >= 0)
        close(top);
    int dfd = container_open_in(rootfd, "/.mtc", O_PATH | O_DIRECTORY);
    int f = dfd < 0 ? -1
                    : openat(dfd, "driver-ldconfig",
                             O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f >= 0) {
        if (write(f, key, strlen(key)) < 0)
            (void)0;
        close(f);
    }
    if (dfd >= 0)
        close(dfd);
}

/* The host's static ldconfig, chrooted in the container. 0/-1 + err. */
static int ldconfig_exec(int rootfd, mtc_error_t *err)
{
    static const char *const progs[] = {"/sbin/ldconfig.real", "/sbin/ldconfig",
                                        "/usr/sbin/ldconfig"};
    int prog = -1;
    for (size_t i = 0; i < 3 && prog < 0; i++)
        prog = open(progs[i], O_PATH | O_CLOEXEC);
    if (prog < 0)
        return errprintf(err, "no ldconfig on this node");
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        /* no descriptor of slurmstepd's reaches the chroot (prog is
         * O_CLOEXEC already: execveat runs it all the same) */
        close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
        if (fchdir(rootfd) < 0 || chroot(".") < 0 || chdir("/") < 0)
            _exit(126);
        char *argv[] = {"ldconfig", NULL}, *envp[] = {NULL};
        syscall(SYS_execveat, prog, "", argv, envp, AT_EMPTY_PATH);
        _exit(127);
    }
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    close(prog);
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return errprintf(err,
                         "the loader cache of the container could not be rebuilt (ldconfig: %s %d)",
                         pid < 0             ? "fork"
                         : WIFEXITED(status) ? "exit"
                                             : "signal",
                         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return 0;
}

/* The node's stash of loader caches, R/ldcache (root's, 0700, beside
 * R/jobs): what ldconfig made for an image, a driver and its capabilities,
 * which a later step — of the job or of a later one — copies instead of
 * running ldconfig again: the same image and driver give the same cache.
 * At most STASH_MAX entries, the least recently used evicted. fd or -1. */
#define STASH_MAX 64

static int stash_dir(const struct container_step *s)
{
    mtc_error_t e;
    int r = mtc_dir_open_trusted(s->runtime, 0, 0, &e);
    if (r < 0)
        return -1;
    int d = mtc_dir_at(r, "ldcache", 1, 0700, &e);
    close(r);
    return d;
}

/* key + the image file's identity (the step's image descriptor: device,
 * inode, size, mtime and ctime, which no user can set — as the digest cache
 * keys it) as a file name (FNV-1a, 64 bits, hex). 0, or -1 without an image. */
static int stash_name(const struct container_step *s, const char *key, char out[24])
{
    struct stat st;
    char id[160];
    if (s->image_fd < 0 || fstat(s->image_fd, &st) < 0)
        return -1;
    snprintf(id, sizeof(id), "%llu-%llu-%lld-%lld.%ld-%lld.%ld", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
             st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
    unsigned long long h = 1469598103934665603ULL;
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    for (const char *p = id; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    snprintf(out, 24, "%016llx", h);
    return 0;
}

/* A whole small file at dfd/name, or NULL; own: only one root wrote (root's,
 * not writable by others, one link) — what is read from the stash. */
static char *read_at(int dfd, const char *name, int own, size_t *len)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    char *t = NULL;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (16 << 20) &&
        (!own || (st.st_uid == geteuid() && !(st.st_mode & 022) && st.st_nlink == 1)))
        t = mtc_read_fd(fd, len);
    if (fd >= 0)
        close(fd);
    return t;
}

/* data written to dfd/name through a temporary name and a rename. */
static int write_at(int dfd, const char *name, const void *data, size_t len)
{
    char tmp[160];
    snprintf(tmp, sizeof(tmp), ".%s.%d~", name, (int)getpid());
    int f = openat(dfd, tmp, O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f < 0)
        return -1;
    ssize_t w = write(f, data, len);
    close(f);
    if (w != (ssize_t)len || renameat(dfd, tmp, dfd, name) < 0) {
        unlinkat(dfd, tmp, 0);
        return -1;
    }
    return 0;
}

/* The stashed cache for name, put into the container: the links ldconfig
 * made ("PATH\tTARGET" lines, PATH absolute in the container), then
 * /etc/ld.so.cache. 1 done, 0 none stashed or it did not fit (then ldconfig
 * runs, and makes what a half-done copy left right). */
static int stash_use(int stash, const char *name, int rootfd)
{
    char f[64];
    size_t clen = 0, llen = 0;
    snprintf(f, sizeof(f), "%s.cache", name);
    char *cache = read_at(stash, f, 1, &clen);
    snprintf(f, sizeof(f), "%s.links", name);
    char *links = cache ? read_at(stash, f, 1, &llen) : NULL;
    int ok = links != NULL, dfd = -1;
    char dir[PATH_MAX] = "";
    for (char *l = links, *nl; ok && l && *l; l = nl ? nl + 1 : NULL) {
        nl = strchr(l, '\n');
        if (nl)
            *nl = '\0';
        char *tab = strchr(l, '\t'), *slash;
        if (!tab || l[0] != '/')
            continue;
        *tab = '\0';
        slash = strrchr(l, '/');
        *slash = '\0';
        if (strcmp(dir, l) != 0) { /* the cache lists a directory's entries together */
            if (dfd >= 0)
                close(dfd);
            snprintf(dir, sizeof(dir), "%s", l);
            dfd = container_open_in(rootfd, l[0] ? l : "/", O_PATH | O_DIRECTORY);
        }
        char cur[PATH_MAX];
        ssize_t n = dfd < 0 ? -1 : readlinkat(dfd, slash + 1, cur, sizeof(cur) - 1);
        if (n >= 0) {
            cur[n] = '\0';
            if (strcmp(cur, tab + 1) == 0)
                continue;
            unlinkat(dfd, slash + 1, 0);
        }
        /* a file of the image there stays (EEXIST), as ldconfig leaves it */
        if (dfd < 0 || (symlinkat(tab + 1, dfd, slash + 1) < 0 && errno != EEXIST))
            ok = 0;
    }
    if (dfd >= 0)
        close(dfd);
    int etc = ok ? container_open_in(rootfd, "/etc", O_PATH | O_DIRECTORY) : -1;
    ok = etc >= 0 && write_at(etc, "ld.so.cache", cache, clen) == 0;
    if (etc >= 0)
        close(etc);
    free(cache);
    free(links);
    if (ok) { /* used now: the last the eviction takes */
        snprintf(f, sizeof(f), "%s.cache", name);
        utimensat(stash, f, NULL, AT_SYMLINK_NOFOLLOW);
    }
    return ok;
}

struct links_ctx {
    int rootfd;
    struct timespec since;
    char *out;
    size_t len, cap;
};

/* A cache entry's path that is a link ldconfig made (changed since it
 * started), as a "PATH\tTARGET" line. */
static int link_made(void *arg, const char *soname, const char *path)
{
    (void)soname;
    struct links_ctx *c = arg;
    struct stat st;
    char t[PATH_MAX];
    int fd = container_open_in(c->rootfd, path, O_PATH | O_NOFOLLOW);
    ssize_t n = -1;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode) &&
        (st.st_ctim.tv_sec > c->since.tv_sec ||
         (st.st_ctim.tv_sec == c->since.tv_sec && st.st_ctim.tv_nsec >= c->since.tv_nsec)))
        n = readlinkat(fd, "", t, sizeof(t) - 1);
    if (fd >= 0)
        close(fd);
    if (n <= 0 || strpbrk(path, "\t\n"))
        return 0;
    t[n] = '\0';
    if (strpbrk(t, "\t\n"))
        return 0;
    size_t need = strlen(path) + (size_t)n + 3;
    if (c->len + need > c->cap) {
        size_t cap = (c->cap + need) * 2;
        char *o = realloc(c->out, cap);
        if (!o)
            return -1;
        c->out = o;
        c->cap = cap;
    }
    c->len += (size_t)snprintf(c->out + c->len, c->cap - c->len, "%s\t%s\n", path, t);
    return 0;
}

/* What ldconfig made (started at since: the coarse clock the filesystems
 * stamp with), stashed for the job's later steps under name: the cache, and
 * every link of it made since. */
static void stash_save(int stash, const char *name, int rootfd, struct timespec since)
{
    int etc = container_open_in(rootfd, "/etc", O_PATH | O_DIRECTORY);
    size_t clen = 0;
    char *cache = etc >= 0 ? read_at(etc, "ld.so.cache", 0, &clen) : NULL;
    if (etc >= 0)
        close(etc);
    struct links_ctx c = {rootfd, since, NULL, 0, 0};
    char f[64];
    snprintf(f, sizeof(f), "%s.links", name);
    if (cache && nvidia_ldcache_each(cache, clen, link_made, &c) == 0 &&
        write_at(stash, f, c.out ? c.out : "", c.len) == 0) {
        snprintf(f, sizeof(f), "%s.cache", name);
        write_at(stash, f, cache, clen);
    }
    free(c.out);
    free(cache);
}

/* The stash's entries (container_lru_trim): NAME.cache, 16 hex digits, with
 * its NAME.links; what is no entry — a temporary or a .links without its
 * .cache, left by a writer gone a minute since — goes. */
static int stash_pick(int stash, const char *nm, const struct stat *st, void *arg)
{
    (void)arg;
    const char *dot = strchr(nm, '.');
    int entry = dot == nm + 16 && strspn(nm, "0123456789abcdef") == 16 &&
                (strcmp(dot, ".cache") == 0 || strcmp(dot, ".links") == 0);
    int stale = st->st_mtim.tv_sec < time(NULL) - 60;
    if (!entry) {
        if (stale)
            unlinkat(stash, nm, S_ISDIR(st->st_mode) ? AT_REMOVEDIR : 0);
        return 0;
    }
    if (strcmp(dot, ".links") == 0) { /* goes with its .cache, written after it */
        char c[32];
        snprintf(c, sizeof(c), "%.16s.cache", nm);
        if (faccessat(stash, c, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT && stale)
            unlinkat(stash, nm, 0);
        return 0;
    }
    return 1;
}

/* An entry evicted: both its files. */
static void stash_drop(int stash, const char *nm, void *arg)
{
    (void)arg;
    char f[32];
    snprintf(f, sizeof(f), "%.16s.cache", nm);
    unlinkat(stash, f, 0);
    snprintf(f, sizeof(f), "%.16s.links", nm);
    unlinkat(stash, f, 0);
}

/* The container's loader cache made to hold the driver's files: nothing to do
 * when ldconfig's mark says so (another task of the step, a named
 * container's later step), else the node's stash for this image and driver
 * copied in, else the host's ldconfig run chrooted in the container (then
 * stashed) — before anything of the host (/proc, /tmp, home) is mounted in
 * it, so what it follows stays in the image. One task at a time (flock on
 * the root). */
int container_loader_cache(const struct container_step *s, int rootfd, const char *key,
                           mtc_error_t *err)
{
    int lock = container_open_in(rootfd, "/", O_RDONLY | O_DIRECTORY);
    if (lock >= 0)
        flock(lock, LOCK_EX);
    int rc = 0;
    if (!ldcache_current(rootfd, key)) {
        char name[24];
        int stash = stash_name(s, key, name) == 0 ? stash_dir(s) : -1;
        if (stash < 0 || !stash_use(stash, name, rootfd)) {
            struct timespec since;
            clock_gettime(CLOCK_REALTIME_COARSE, &since);
            rc = ldconfig_exec(rootfd, err);
            if (rc == 0 && stash >= 0) {
                stash_save(stash, name, rootfd, since);
                /* the least recently used go (the .cache's mtime: written,
                 * or copied from last) */
                container_lru_trim(stash, STASH_MAX, stash_pick, stash_drop, NULL);
            }
        }
        if (stash >= 0)
            close(stash);
        if (rc == 0)
            ldcache_mark(rootfd, key);
    }
    if (lock >= 0)
        close(lock);
    return rc;
}
