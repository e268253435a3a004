/* Unit tests for fsafe's request files (mtc_reach_open, mtc_reach_at,
 * mtc_copy_fd, mtc_copy_into): beneath the roots only, no link followed
 * but root's, as the user acting, never a FIFO, a link at a target replaced
 * and never followed. As root, the user is nobody. */
#include "check.h"
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char top[64];

static const char *at(const char *rel)
{
    static char buf[4][PATH_MAX + 64];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", top, rel);
    return buf[k];
}

static void put(const char *rel, const char *text, mode_t mode)
{
    FILE *f = fopen(at(rel), "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    chmod(at(rel), mode);
}

/* The first bytes of fd, or "" */
static const char *head(int fd)
{
    static char buf[64];
    ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof(buf) - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

int main(void)
{
    snprintf(top, sizeof(top), "/tmp/test_fsafe.XXXXXX");
    if (!mkdtemp(top))
        return 1;
    chmod(top, 0755);
    int root = geteuid() == 0;
    mkdir(at("data"), 0755);
    mkdir(at("data/pub"), 0755);
    mkdir(at("data/priv"), 0700);
    mkdir(at("outside"), 0700);
    put("data/pub/a.txt", "public", 0644);
    put("data/pub/secret", "root-only", 0600);
    put("data/priv/x", "hidden", 0644);
    put("outside/s", "outside", 0644);
    symlink(at("outside/s"), at("data/pub/link"));
    symlink(at("outside"), at("data/out"));
    mkfifo(at("data/pub/fifo"), 0666);
    char data[PATH_MAX];
    snprintf(data, sizeof(data), "%s", at("data"));
    const char *roots[] = {data, NULL};
    struct mtc_user nobody;
    mtc_user_nobody(&nobody);
    struct mtc_reach rooted = {roots, NULL, 0}, as_nobody = {roots, &nobody, 0},
                     admin = {NULL, NULL, 0}, trusted = {roots, NULL, 1};
    mtc_error_t err = {""};

    int fd = mtc_reach_open(at("data/pub/a.txt"), &rooted, 0, &err);
    CHECK(fd >= 0 && strcmp(head(fd), "public") == 0, "a file beneath a root opens: %s",
          err.text);
    close(fd);
    fd = mtc_reach_open(at("outside/s"), &rooted, 0, &err);
    CHECK(fd < 0 && errno == EACCES && strstr(err.text, "lies outside"),
          "a path outside the roots: EACCES (%s)", err.text);
    fd = mtc_reach_open(at("data/pub/link"), &rooted, 0, &err);
    CHECK(fd < 0 && errno == EACCES && strstr(err.text, "symbolic link"),
          "a link beneath a root (to a file outside): EACCES naming it (%s)", err.text);
    fd = mtc_reach_open(at("data/out/s"), &rooted, 0, &err);
    CHECK(fd < 0 && errno == EACCES, "a linked directory on the way: EACCES (%s)", err.text);
    fd = mtc_reach_open(at("data/pub/../../outside/s"), &rooted, 0, &err);
    CHECK(fd < 0 && errno == EINVAL, "\"..\": EINVAL (%s)", err.text);
    fd = mtc_reach_open(at("data/pub/fifo"), &admin, 0, &err);
    CHECK(fd < 0 && errno == EINVAL, "a FIFO is never opened (no hang): EINVAL (%s)", err.text);
    fd = mtc_reach_open(at("data/pub/a.txt"), &rooted, O_DIRECTORY, &err);
    CHECK(fd < 0 && errno == ENOTDIR, "O_DIRECTORY on a file: ENOTDIR");
    fd = mtc_reach_open(at("data/pub"), &rooted, O_DIRECTORY, &err);
    CHECK(fd >= 0, "a directory beneath a root opens");
    int f2 = fd < 0 ? -1 : mtc_reach_at(fd, "link", &rooted, 0, &err);
    CHECK(f2 < 0 && errno == EACCES && strstr(err.text, "symbolic link"),
          "mtc_reach_at: a link, not followed (%s)", err.text);
    f2 = fd < 0 ? -1 : mtc_reach_at(fd, "a.txt", &rooted, 0, &err);
    CHECK(f2 >= 0 && strcmp(head(f2), "public") == 0, "mtc_reach_at: a file under the fd");
    if (f2 >= 0)
        close(f2);
    f2 = fd < 0 ? -1 : mtc_reach_at(fd, "../pub/a.txt", &rooted, 0, &err);
    CHECK(f2 < 0 && errno == EINVAL, "mtc_reach_at: one component only");
    if (fd >= 0)
        close(fd);

    /* as a user: the user's rights, root's none */
    if (root) {
        fd = mtc_reach_open(at("data/pub/a.txt"), &as_nobody, 0, &err);
        CHECK(fd >= 0, "as nobody: a world-readable file opens (%s)", err.text);
        if (fd >= 0)
            close(fd);
        fd = mtc_reach_open(at("data/pub/secret"), &as_nobody, 0, &err);
        CHECK(fd < 0 && errno == EACCES, "as nobody: root's 0600 file refused (%s)", err.text);
        fd = mtc_reach_open(at("data/priv/x"), &as_nobody, 0, &err);
        CHECK(fd < 0 && errno == EACCES, "as nobody: a file in a 0700 directory refused (%s)",
              err.text);
        fd = mtc_reach_open(at("data/made"), &as_nobody, MTC_REACH_MKDIR, &err);
        CHECK(fd < 0 && errno == EACCES && access(at("data/made"), F_OK) < 0,
              "as nobody: no directory made where nobody cannot write (%s)", err.text);
        mkdir(at("data/theirs"), 0755);
        chown(at("data/theirs"), nobody.uid, nobody.gid);
        fd = mtc_reach_open(at("data/theirs/new"), &as_nobody, MTC_REACH_MKDIR, &err);
        struct stat sb;
        CHECK(fd >= 0 && fstat(fd, &sb) == 0 && sb.st_uid == nobody.uid,
              "as nobody: a directory made in its own, owned by it (%s)", err.text);
        if (fd >= 0)
            close(fd);
        fd = mtc_reach_open(at("data/theirs/t"), &trusted, MTC_REACH_MKDIR, &err);
        CHECK(fd < 0 && errno == EPERM && access(at("data/theirs/t"), F_OK) < 0,
              "trusted: root makes nothing in a directory a user owns (%s)", err.text);
        /* an admin's walk follows links root made in root's directories only */
        symlink(at("data/pub"), at("data/theirs/l"));
        lchown(at("data/theirs/l"), nobody.uid, nobody.gid);
        fd = mtc_reach_open(at("data/theirs/l/a.txt"), &admin, 0, &err);
        CHECK(fd < 0 && errno == EACCES, "admin: a user's link is not followed (%s)", err.text);
    } else {
        for (int i = 0; i < 7; i++)
            CHECK(1, "# SKIP not root: no other user to act as");
    }
    symlink(at("data/pub"), at("data/rootlink"));
    fd = mtc_reach_open(at("data/rootlink/a.txt"), &admin, 0, &err);
    CHECK(fd >= 0, "admin: a link root made in root's directory is followed (%s)", err.text);
    if (fd >= 0)
        close(fd);
    fd = mtc_reach_open(at("data/made2"), &trusted, MTC_REACH_MKDIR, &err);
    CHECK(fd >= 0, "trusted: root makes a directory in root's own (%s)", err.text);

    /* copies */
    int in = open(at("data/pub/a.txt"), O_RDONLY);
    char hex[65];
    int w = open(at("outside/copy"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(mtc_copy_fd(in, w, hex) == 0 &&
              strcmp(hex, "efa1f375d76194fa51a3556a97e641e61685f914d446979da50a551a4333ffd7") == 0,
          "mtc_copy_fd: the bytes' sha256 (%s)", hex);
    close(w);
    symlink(at("outside/s"), at("data/made2/model.bin"));
    lseek(in, 0, SEEK_SET);
    CHECK(fd >= 0 && mtc_copy_into(in, fd, "model.bin", 0644, &err) == 0,
          "mtc_copy_into over a link: written (%s)", err.text);
    struct stat sb;
    char *s = mtc_read_file(at("outside/s"), NULL);
    CHECK(lstat(at("data/made2/model.bin"), &sb) == 0 && S_ISREG(sb.st_mode) && s &&
              strcmp(s, "outside") == 0,
          "... the link replaced, its target untouched");
    free(s);
    if (fd >= 0)
        close(fd);
    close(in);
    mtc_rm_rf(top);
    return check_done();
}
