/* backup: `mtc daemon backup FILE` (mtcd's state into one file, taken while it
 * serves; admin) and `mtc daemon restore FILE --home DIR` (into an empty
 * home, mtcd stopped; then `mtcd --home DIR`). docs/operations.md is the
 * runbook. */
#include "cli.h"
#include "backup/backup.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char cli_backup_use[] = "mtc daemon backup FILE   (admin; FILE is written mode 0600, "
                              "outside mtcd's home)",
           cli_restore_use[] = "mtc daemon restore FILE --home DIR   (DIR empty or new; "
                               "mtcd stopped; then `mtcd --home DIR`)";

/* 1 when path (whose directory exists) is dir or below it. */
static int inside(const char *path, const char *dir)
{
    char d[PATH_MAX], p[PATH_MAX], parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", path);
    if (!realpath(dir, d) || !realpath(dirname(parent), p))
        return 0;
    return mtc_path_under(p, d);
}

int cli_daemon_backup(struct cli *c, int argc, char **argv)
{
    if (argc != 2 || !argv[1][0])
        return cli_fail("usage: %s", cli_backup_use), 2;
    const char *file = argv[1];
    if (inside(file, c->home))
        return cli_fail("%s: inside mtcd's home %s, which it backs up: write it elsewhere "
                        "(another disk, another machine)",
                        file, c->home);
    char tmp[PATH_MAX + 32];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", file, (int)getpid()) >= (int)sizeof(tmp))
        return cli_fail("%s: path too long", file);
    struct stat st;
    if (lstat(file, &st) == 0 && !S_ISREG(st.st_mode))
        return cli_fail("%s: exists and is not a regular file", file);
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return cli_fail("cannot create %s: %s", tmp, strerror(errno));
    mtc_error_t err = {""};
    struct backup_info info;
    int rc = cli_call_to_fd(c, "POST", "/v1/daemon:backup", fd, &err);
    /* what came is checked whole before it takes the name */
    if (rc == 0 && (fsync(fd) < 0 || backup_check(fd, &info, &err) < 0)) {
        if (!*err.text)
            errprintf(&err, "%s", strerror(errno));
        rc = -1;
    }
    close(fd);
    if (rc == 0 && (rename(tmp, file) < 0 || mtc_fsync_parent(file) < 0)) {
        rc = errprintf(&err, "cannot rename %s: %s", tmp, strerror(errno));
    }
    if (rc < 0) {
        unlink(tmp);
        return cli_fail("backup: %s", err.text);
    }
    char t[40];
    printf("backup written: %s (%lld bytes, %d files, mtc %s, schema v%d, taken %s)\n", file,
           (long long)info.bytes, info.files, info.mtc_version, info.schema,
           mtc_time_rfc3339(info.created_ms, t, sizeof(t)));
    return 0;
}

int cli_daemon_restore(struct cli *c, int argc, char **argv)
{
    (void)c;
    const char *file = NULL, *home = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--home") && i + 1 < argc)
            home = argv[++i];
        else if (!strncmp(argv[i], "--home=", 7))
            home = argv[i] + 7;
        else if (argv[i][0] != '-' && !file)
            file = argv[i];
        else
            return cli_fail("usage: %s", cli_restore_use), 2;
    }
    if (!file || !home || !*home)
        return cli_fail("usage: %s", cli_restore_use), 2;
    char pid[PATH_MAX + 16];
    snprintf(pid, sizeof(pid), "%s/mtcd.pid", home);
    pid_t p = mtc_pid_read(pid);
    if (p > 0 && mtc_pid_alive(p))
        return cli_fail("mtcd (pid %d) runs on %s: stop it first", (int)p, home);
    mtc_error_t err = {""};
    struct backup_info info;
    if (backup_restore(file, home, &info, &err) < 0)
        return cli_fail("restore: %s", err.text);
    char t[40];
    printf("restored %s into %s (%d files, mtc %s, schema v%d, taken %s); start it with "
           "`mtcd --home %s` (its clusters are adopted; local ones come back as ERROR)\n",
           file, home, info.files, info.mtc_version, info.schema,
           mtc_time_rfc3339(info.created_ms, t, sizeof(t)), home);
    /* files mtcd was given from outside its home: where to put them back */
    char rec[PATH_MAX + 32];
    snprintf(rec, sizeof(rec), "%s/restored.json", home);
    json_t *mark = json_load_file(rec, 0, NULL), *e;
    size_t i;
    json_array_foreach(json_object_get(mark, "external"), i, e)
    printf("put back %s: restored at %s\n", mtc_json_str_or(e, "origin", "?"),
           mtc_json_str_or(e, "restored", "?"));
    json_decref(mark);
    return 0;
}
