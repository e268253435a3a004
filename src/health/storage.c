/* storage: the shared storage check — the node's shared mounts are in place,
 * the experiment root is the controller's filesystem (it holds the marker the
 * controller wrote there, same content) and takes a small write + fsync. */
#include "health/health.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define PROBE_BYTES 4096

/* 1 when something is mounted at path in this mount namespace (a bind mount
 * of the same filesystem too, which st_dev would miss). */
static int mounted(const char *path)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[4096], point[PATH_MAX];
    int found = 0;
    while (f && !found && fgets(line, sizeof(line), f))
        found = sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1 && strcmp(point, path) == 0;
    if (f)
        fclose(f);
    return found;
}

/* Write PROBE_BYTES to a new file in dir, fsync, remove: ms, or -1 with
 * errno. The agent is root and users write the experiment root: the file is
 * made with a random name and O_EXCL (mkostemp), so a symlink planted there
 * is never followed. */
static double write_fsync_ms(const char *dir, const char *node)
{
    char path[PATH_MAX], buf[PROBE_BYTES];
    snprintf(path, sizeof(path), "%s/.probe-%s.XXXXXX", dir, node[0] ? node : "node");
    memset(buf, 'm', sizeof(buf));
    int64_t t0 = mtc_now_ms();
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0)
        return -1;
    int ok = write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf) && fsync(fd) == 0;
    int e = errno;
    close(fd);
    unlink(path);
    errno = e;
    return ok ? (double)(mtc_now_ms() - t0) : -1;
}

/* The first len bytes of the marker file at path into buf: a regular file,
 * opened without following a symlink and without waiting on a FIFO (users
 * write the experiment root). Bytes read, or -1. */
static ssize_t marker_read(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    ssize_t n = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, buf, len, 0) : -1;
    if (fd >= 0)
        close(fd);
    return n;
}

/* Mounts first (a lost one explains the rest), then the marker, then the write. */
int health_storage_shared(const struct health_ctx *ctx, struct health_result *r)
{
    if (ctx->nmounts == 0 && !ctx->experiment_root[0])
        return health_set(r, HEALTH_PASS, -1, "skipped: no shared storage configured");
    for (int i = 0; i < ctx->nmounts; i++)
        if (!mounted(ctx->mounts[i]))
            return health_set(r, HEALTH_FAIL, -1, "shared mount %s is gone (nothing mounted there)",
                              ctx->mounts[i]);
    if (!ctx->experiment_root[0])
        return health_set(r, HEALTH_PASS, -1, "%d shared mount(s) in place", ctx->nmounts);
    if (ctx->storage_marker[0]) {
        size_t want = strlen(ctx->storage_marker_content);
        char got[sizeof(ctx->storage_marker_content)];
        ssize_t n = marker_read(ctx->storage_marker, got, want);
        if (n < 0 || (size_t)n < want || memcmp(got, ctx->storage_marker_content, want) != 0)
            return health_set(r, HEALTH_FAIL, -1,
                              "experiment root %s is not the controller's shared storage here "
                              "(marker %s %s)",
                              ctx->experiment_root, ctx->storage_marker,
                              n >= 0 ? "holds other content" : "missing");
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/.mtc", ctx->experiment_root);
    double ms = write_fsync_ms(ctx->storage_marker[0] ? dir : ctx->experiment_root, ctx->node);
    if (ms < 0)
        return health_set(r, HEALTH_FAIL, -1, "experiment root %s is not writable: %s",
                          ctx->experiment_root, strerror(errno));
    r->value = ms;
    return health_set(r, HEALTH_PASS, -1,
                      "experiment root %s shared, %d mount(s) in place, %d-byte write+fsync %.0f ms",
                      ctx->experiment_root, ctx->nmounts, PROBE_BYTES, ms);
}
