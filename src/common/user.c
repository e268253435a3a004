/* user: the Unix users mtcd runs jobs as (a token bound to a user, an
 * admin's choice): names checked and looked up, and a thread's filesystem
 * identity switched to one of them while root reads or writes that user's
 * run directory (DESIGN.md, "Security model"). */
#include "common/common.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

int mtc_user_name_valid(const char *s)
{
    /* useradd's default NAME_REGEX, without the trailing '$' of machine accounts */
    if (!s || !*s || strlen(s) > 32 || !((*s >= 'a' && *s <= 'z') || *s == '_'))
        return 0;
    return s[strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-")] == '\0';
}

int mtc_user_lookup(const char *name, struct mtc_user *u, mtc_error_t *err)
{
    if (!mtc_user_name_valid(name))
        return errno = EINVAL,
               errprintf(err, "user \"%.40s\": must match [a-z_][a-z0-9_-]{0,31}", name ? name : "");
    struct passwd pw, *r = NULL;
    char buf[4096];
    int e = getpwnam_r(name, &pw, buf, sizeof(buf), &r);
    if (!r)
        return errno = e ? e : ENOENT,
               errprintf(err, "user %s: no such user on mtcd's machine%s%s", name, e ? ": " : "",
                         e ? strerror(e) : "");
    snprintf(u->name, sizeof(u->name), "%s", name);
    snprintf(u->home, sizeof(u->home), "%s", pw.pw_dir ? pw.pw_dir : "/");
    snprintf(u->shell, sizeof(u->shell), "%s", pw.pw_shell && *pw.pw_shell ? pw.pw_shell : "/bin/sh");
    u->uid = pw.pw_uid;
    u->gid = pw.pw_gid;
    return 0;
}

/* setfsuid/setfsgid are per thread (glibc calls the system call directly,
 * with no broadcast to the other threads as setuid has); the capabilities
 * that bypass file permissions are off while the fsuid is not 0. The
 * supplementary groups are the user's too, set by the raw system call (the
 * kernel's is per thread; glibc's setgroups would set every thread's): with
 * root's kept, a file readable by group root would be the user's to read. */
void mtc_fsid_enter(const struct mtc_user *u, struct mtc_fsid *saved)
{
    saved->on = 0;
    if (!u || geteuid() != 0)
        return;
    saved->ngroups = getgroups(MTC_FSID_GROUPS, saved->groups);
    gid_t groups[MTC_FSID_GROUPS];
    int n = MTC_FSID_GROUPS;
    /* a user in more groups than that reads with fewer of them, never more */
    if (getgrouplist(u->name, u->gid, groups, &n) < 0)
        n = MTC_FSID_GROUPS;
    if (!*u->name)
        groups[0] = u->gid, n = 1;
    syscall(SYS_setgroups, (size_t)n, groups);
    saved->gid = (gid_t)setfsgid(u->gid);
    saved->uid = (uid_t)setfsuid(u->uid);
    saved->on = 1;
}

void mtc_fsid_leave(struct mtc_fsid *saved)
{
    if (!saved->on)
        return;
    int e = errno;
    setfsuid(saved->uid);
    setfsgid(saved->gid);
    if (saved->ngroups >= 0)
        syscall(SYS_setgroups, (size_t)saved->ngroups, saved->groups);
    saved->on = 0;
    errno = e;
}

/* KEY's PATH in /etc/login.defs ("ENV_PATH PATH=/usr/bin:/bin" or
 * "ENV_PATH /usr/bin:/bin") into buf; 0 when it says none. */
static int login_defs_path(const char *key, char *buf, size_t len)
{
    FILE *f = fopen("/etc/login.defs", "re");
    char line[600];
    int found = 0;
    size_t klen = strlen(key);
    while (f && !found && fgets(line, sizeof(line), f)) {
        if (strncmp(line, key, klen) != 0 || !isspace((unsigned char)line[klen]))
            continue;
        char *v = line + klen;
        v += strspn(v, " \t");
        if (strncmp(v, "PATH=", 5) == 0)
            v += 5;
        v[strcspn(v, " \t\r\n")] = '\0';
        if (*v == '/' && strlen(v) < len) {
            snprintf(buf, len, "%s", v);
            found = 1;
        }
    }
    if (f)
        fclose(f);
    return found;
}

int mtc_login_env(const struct mtc_user *u, struct mtc_login_env *e, mtc_error_t *err)
{
    struct mtc_user self;
    if (!u) {
        struct passwd pw, *r = NULL;
        char buf[4096];
        int rc = getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &r);
        if (!r)
            return errno = rc ? rc : ENOENT,
                   errprintf(err, "uid %u: no password entry", (unsigned)geteuid());
        snprintf(self.name, sizeof(self.name), "%s", pw.pw_name);
        snprintf(self.home, sizeof(self.home), "%s", pw.pw_dir ? pw.pw_dir : "/");
        snprintf(self.shell, sizeof(self.shell), "%s",
                 pw.pw_shell && *pw.pw_shell ? pw.pw_shell : "/bin/sh");
        self.uid = pw.pw_uid, self.gid = pw.pw_gid;
        u = &self;
    }
    char path[sizeof(e->path) - 5];
    int root = u->uid == 0;
    if (!login_defs_path(root ? "ENV_SUPATH" : "ENV_PATH", path, sizeof(path)))
        snprintf(path, sizeof(path), "%s",
                 root ? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
                      : "/usr/local/bin:/usr/bin:/bin");
    snprintf(e->home, sizeof(e->home), "HOME=%s", u->home);
    snprintf(e->user, sizeof(e->user), "USER=%s", u->name);
    snprintf(e->logname, sizeof(e->logname), "LOGNAME=%s", u->name);
    snprintf(e->shell, sizeof(e->shell), "SHELL=%s", *u->shell ? u->shell : "/bin/sh");
    snprintf(e->path, sizeof(e->path), "PATH=%s", path);
    e->env[0] = e->home, e->env[1] = e->user, e->env[2] = e->logname;
    e->env[3] = e->shell, e->env[4] = e->path, e->env[5] = NULL;
    return 0;
}

/* Kernel filesystems whose files describe a process or the machine, not
 * anything a user stored: whoever opens one in mtcd reads mtcd's view. */
static int kernel_fs(int fd)
{
    struct statfs sf;
    if (fstatfs(fd, &sf) < 0)
        return 1;
    switch ((unsigned long)sf.f_type) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
    case SECURITYFS_MAGIC:
    case BPF_FS_MAGIC:
        return 1;
    }
    return 0;
}

int mtc_open_as_user(const char *path, int dir)
{
    /* O_PATH first: nothing is opened for real (no device's open, no FIFO
     * wait) until the file is known to be a regular one on a filesystem of
     * files; the real open is of that inode, with this thread's ids */
    struct open_how how = {.flags = O_PATH | O_CLOEXEC | (dir ? O_DIRECTORY : 0),
                           .resolve = RESOLVE_NO_MAGICLINKS};
    int pfd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
    if (pfd < 0 && errno == ENOSYS) /* before Linux 5.6: the checks below still hold */
        pfd = open(path, (int)how.flags);
    if (pfd < 0)
        return -1;
    struct stat st;
    int e = fstat(pfd, &st) < 0 ? errno
            : kernel_fs(pfd)    ? EPERM
            : !(dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) ? EINVAL
                                                                  : 0;
    int fd = -1;
    if (!e) {
        char self[40];
        snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
        fd = open(self, O_RDONLY | O_NOCTTY | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
        e = fd < 0 ? errno : 0;
    }
    close(pfd);
    errno = e;
    return fd;
}

void mtc_user_nobody(struct mtc_user *u)
{
    mtc_error_t err;
    if (mtc_user_lookup("nobody", u, &err) == 0 && u->uid != 0)
        return;
    memset(u, 0, sizeof(*u));
    snprintf(u->name, sizeof(u->name), "nobody");
    snprintf(u->home, sizeof(u->home), "/nonexistent");
    u->uid = 65534;
    u->gid = 65534;
}
