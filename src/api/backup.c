/* backup: POST /v1/daemon:backup (admin) — a backup of mtcd's state
 * (backup/backup.h), taken while it serves writes, sent as the reply's body;
 * `mtc daemon backup FILE` writes it where the admin asked, as the admin.
 * It is written first into an unnamed file in the home's tmp/ (O_TMPFILE:
 * nothing to remove if mtcd stops meanwhile). */
#include "api/internal.h"
#include "backup/backup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int api_daemon_backup(struct api_req *r, struct api_resp *out)
{
    const char *home = r->cfg->home;
    if (!home)
        return api_error(out, 500, "mtcd has no home to back up");
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/tmp", home);
    if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
        return api_error(out, 500, "backup: cannot create %s: %s", tmp, strerror(errno));
    int fd = open(tmp, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return api_error(out, 500, "backup: cannot create a file in %s: %s", tmp, strerror(errno));
    struct backup_info info;
    mtc_error_t err = {""};
    if (r->ctl)
        control_backup_prepare(r->ctl);
    if (backup_write(r->st, home, r->cfg->backup ? r->cfg->backup->dir : NULL,
                     r->cfg->backup_extra, fd, &info, &err) < 0) {
        close(fd);
        log_msg(LOG_ERR, "backup failed: %s", err.text);
        return api_error(out, 500, "backup failed: %s", err.text);
    }
    log_msg(LOG_NOTICE, "backup taken for %s: %lld bytes, %d files, schema v%d",
            r->who.user[0] ? r->who.user : "an admin", (long long)info.bytes, info.files,
            info.schema);
    out->status = 200;
    out->has_file = 1;
    out->file_fd = fd;
    out->file_len = (uint64_t)info.bytes;
    out->text_type = "application/octet-stream";
    return 0;
}
