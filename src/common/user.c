/* user: the Unix users mtcd runs jobs as (a token bound to a user, an
 * admin's choice): names checked and looked up, and a thread's filesystem
 * identity switched to one of them while root reads or writes that user's
 * run directory (DESIGN.md, "Security model"). */
#include "common/common.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
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
    u->uid = pw.pw_uid;
    u->gid = pw.pw_gid;
    return 0;
}

/* setfsuid/setfsgid are per thread (glibc calls the system call directly,
 * with no broadcast to the other threads as setuid has); the capabilities
 * that bypass file permissions are off while the fsuid is not 0. */
void mtc_fsid_enter(const struct mtc_user *u, struct mtc_fsid *saved)
{
    saved->on = 0;
    if (!u || geteuid() != 0)
        return;
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
    saved->on = 0;
    errno = e;
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
