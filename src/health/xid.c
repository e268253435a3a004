/* xid: the kernel-log reader behind gpu.xid. NVIDIA's driver logs GPU faults
 * as "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus";
 * the agent reads only what appears after it started (or after the position
 * saved in its state dir), from /dev/kmsg records or a plain log file. */
#include "health/health.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "health/runtime.h"

/* Paths and messages go into fixed buffers; a truncated one only shortens a
 * reason line, so the truncation warning is noise here. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* What a critical XID asks for (NVIDIA's XID catalog). XIDs in the policy's
 * xidFail list but not here ask for a reboot. */
static const struct {
    int xid, sev;
    const char *what;
} xid_table[] = {
    {48, HEALTH_SEV_REBOOT, "double-bit ECC error"},
    {63, HEALTH_SEV_REBOOT, "row remapping pending"},
    {64, HEALTH_SEV_REPLACE, "row remapping failure"},
    {74, HEALTH_SEV_REBOOT, "NVLink error"},
    {79, HEALTH_SEV_REBOOT, "GPU has fallen off the bus"},
    {92, HEALTH_SEV_REBOOT, "high single-bit ECC error rate"},
    {94, HEALTH_SEV_REBOOT, "contained ECC error"},
    {95, HEALTH_SEV_REBOOT, "uncontained ECC error"},
};

/* The kernel's boot id: kmsg sequence numbers and the XID latch are only
 * meaningful within one boot. */
static void boot_id(char out[40])
{
    char *s = mtc_read_file("/proc/sys/kernel/random/boot_id", NULL);
    snprintf(out, 40, "%.36s", s ? s : "unknown");
    free(s);
}

static void state_load(struct health_runtime *rt)
{
    char *s = mtc_read_file(rt->state_path, NULL);
    char boot[40], saved[40];
    long long pos, ino;
    int xid, sev, off = 0;
    if (!s)
        return;
    boot_id(boot);
    if (sscanf(s, "%lld %lld %d %d %39s %n", &pos, &ino, &xid, &sev, saved, &off) == 5 && off > 0 &&
        strcmp(saved, boot) == 0 && (rt->kmsg || (ino_t)ino == rt->ino)) {
        rt->pos = pos;
        rt->latched_xid = xid;
        rt->latched_sev = sev;
        snprintf(rt->latched_reason, sizeof(rt->latched_reason), "%.*s",
                 (int)strcspn(s + off, "\n"), s + off);
    }
    free(s);
}

static void state_save(const struct health_runtime *rt)
{
    char boot[40];
    if (!*rt->state_path)
        return;
    boot_id(boot);
    if (mtc_write_file_fmt(rt->state_path, 0644, "%lld %lld %d %d %s %s\n", rt->pos,
                           (long long)rt->ino, rt->latched_xid, rt->latched_sev, boot,
                           rt->latched_reason) < 0)
        log_msg(LOG_WARNING, "cannot save %s: %s", rt->state_path, strerror(errno));
}

/* Parse one kmsg record "pri,seq,usec,flags;text"; -1 if malformed. */
static long long kmsg_seq(const char *rec, const char **text)
{
    long long seq;
    const char *semi = strchr(rec, ';');
    if (!semi || sscanf(rec, "%*d,%lld,", &seq) != 1)
        return -1;
    *text = semi + 1;
    return seq;
}

/* Read every record to learn the newest sequence number. */
static void kmsg_skip_all(struct health_runtime *rt)
{
    char rec[8192];
    const char *text = NULL;
    lseek(rt->kfd, 0, SEEK_SET);
    for (;;) {
        ssize_t n = read(rt->kfd, rec, sizeof(rec) - 1);
        if (n < 0 && errno == EPIPE)
            continue; /* overwritten while reading: go on with the next */
        if (n <= 0)
            break;
        rec[n] = '\0';
        long long seq = kmsg_seq(rec, &text);
        if (seq > rt->pos)
            rt->pos = seq;
    }
}

struct health_runtime *health_rt_create(const struct health_ctx *ctx, mtc_error_t *err)
{
    struct health_runtime *rt = calloc(1, sizeof(*rt));
    struct stat st;
    if (!rt) {
        errprintf(err, "out of memory");
        return NULL;
    }
    rt->kfd = -1;
    rt->pos = -1;
    if (*ctx->state_dir)
        snprintf(rt->state_path, sizeof(rt->state_path), "%s/kernel-log.state", ctx->state_dir);
    rt->kfd = open(ctx->kernel_log, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (rt->kfd < 0 || fstat(rt->kfd, &st) < 0) {
        snprintf(rt->kerr, sizeof(rt->kerr), "cannot read %s: %s", ctx->kernel_log,
                 strerror(errno));
        if (rt->kfd >= 0)
            close(rt->kfd);
        rt->kfd = -1;
        return rt; /* gpu.xid reports it; the other checks still run */
    }
    rt->kmsg = S_ISCHR(st.st_mode);
    rt->ino = st.st_ino;
    if (*rt->state_path)
        state_load(rt);
    if (rt->pos < 0) { /* no saved position: start at the end, as of now */
        if (rt->kmsg)
            kmsg_skip_all(rt);
        else
            rt->pos = st.st_size;
    } else if (rt->kmsg) {
        lseek(rt->kfd, 0, SEEK_SET);
    }
    return rt;
}

void health_rt_destroy(struct health_runtime *rt)
{
    if (!rt)
        return;
    if (rt->kfd >= 0)
        close(rt->kfd);
    if (rt->nvml)
        dlclose(rt->nvml);
    free(rt);
}

/* A log line; returns the XID it reports or 0. */
static int xid_of(const char *line, char *pci, size_t len)
{
    const char *p = strstr(line, "NVRM: Xid (");
    if (!p)
        return 0;
    p += strlen("NVRM: Xid (");
    const char *close = strstr(p, "): ");
    if (!close)
        return 0;
    snprintf(pci, len, "%.*s", (int)(close - p), p);
    int xid = atoi(close + 3);
    return xid > 0 ? xid : 0;
}

struct scan {
    int warn_xid;
    char warn_reason[200];
};

static void on_line(const struct health_ctx *ctx, const char *line, struct scan *sc)
{
    struct health_runtime *rt = ctx->rt;
    char pci[64];
    int xid = xid_of(line, pci, sizeof(pci));
    if (!xid)
        return;
    int critical = 0, sev = HEALTH_SEV_REBOOT;
    const char *what = "see NVIDIA's XID catalog";
    for (int i = 0; i < ctx->policy.nxid_fail; i++)
        critical |= ctx->policy.xid_fail[i] == xid;
    for (size_t i = 0; i < sizeof(xid_table) / sizeof(xid_table[0]); i++)
        if (xid_table[i].xid == xid) {
            sev = xid_table[i].sev;
            what = xid_table[i].what;
        }
    if (critical && (sev > rt->latched_sev || !rt->latched_xid)) {
        rt->latched_xid = xid;
        rt->latched_sev = sev;
        snprintf(rt->latched_reason, sizeof(rt->latched_reason), "Xid %d on %s: %s", xid, pci,
                 what);
    } else if (!critical) {
        sc->warn_xid = xid;
        snprintf(sc->warn_reason, sizeof(sc->warn_reason), "Xid %d on %s (not critical)", xid, pci);
    }
}

static void scan_kmsg(const struct health_ctx *ctx, struct scan *sc)
{
    struct health_runtime *rt = ctx->rt;
    char rec[8192];
    const char *text = NULL;
    for (;;) {
        ssize_t n = read(rt->kfd, rec, sizeof(rec) - 1);
        if (n < 0 && errno == EPIPE)
            continue;
        if (n <= 0)
            break;
        rec[n] = '\0';
        long long seq = kmsg_seq(rec, &text);
        if (seq <= rt->pos)
            continue;
        rt->pos = seq;
        on_line(ctx, text, sc);
    }
}

/* Plain file: read whole lines from pos; a rotated or truncated file starts over. */
static void scan_file(const struct health_ctx *ctx, struct scan *sc)
{
    struct health_runtime *rt = ctx->rt;
    struct stat st;
    if (stat(ctx->kernel_log, &st) == 0 && st.st_ino != rt->ino) {
        int fd = open(ctx->kernel_log, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            close(rt->kfd);
            rt->kfd = fd;
            rt->ino = st.st_ino;
            rt->pos = 0;
        }
    }
    if (fstat(rt->kfd, &st) == 0 && st.st_size < rt->pos)
        rt->pos = 0;
    char buf[16384];
    size_t have = 0;
    for (;;) {
        ssize_t n = pread(rt->kfd, buf + have, sizeof(buf) - 1 - have, rt->pos + (off_t)have);
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = '\0';
        char *start = buf, *nl;
        while ((nl = strchr(start, '\n'))) {
            *nl = '\0';
            on_line(ctx, start, sc);
            start = nl + 1;
        }
        size_t used = (size_t)(start - buf);
        if (used == 0 && have == sizeof(buf) - 1)
            used = have; /* an overlong line: skip it */
        rt->pos += (long long)used;
        memmove(buf, buf + used, have - used);
        have -= used;
    }
}

int health_xid(const struct health_ctx *ctx, struct health_result *r)
{
    struct health_runtime *rt = ctx->rt;
    struct scan sc = {0};
    if (rt->kfd < 0)
        return health_set(r, ctx->expected_gpus ? HEALTH_WARN : HEALTH_PASS, -1, "%s", rt->kerr);
    long long before = rt->pos;
    int latched_before = rt->latched_xid;
    if (rt->kmsg)
        scan_kmsg(ctx, &sc);
    else
        scan_file(ctx, &sc);
    if (rt->pos != before || rt->latched_xid != latched_before)
        state_save(rt);
    if (rt->latched_xid) {
        r->value = rt->latched_xid;
        return health_set(r, HEALTH_FAIL, rt->latched_sev, "%s", rt->latched_reason);
    }
    if (sc.warn_xid) {
        r->value = sc.warn_xid;
        return health_set(r, HEALTH_WARN, -1, "%s", sc.warn_reason);
    }
    return health_set(r, HEALTH_PASS, -1, "no critical Xid");
}
