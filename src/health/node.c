/* node: the host checks — free space and inodes on the cluster's
 * directories, the primary NIC, and the Slurm daemons (slurmd, munged). */
#include "health/health.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <unistd.h>

/* Paths and messages go into fixed buffers; a truncated one only shortens a
 * reason line, so the truncation warning is noise here. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* Every distinct filesystem among /, shared, local and checkpoint dirs is
 * measured once; the worst one decides. value = lowest free % seen. */
int health_disk(const struct health_ctx *ctx, struct health_result *r)
{
    const char *paths[] = {"/", ctx->home_dir, ctx->local_dir, ctx->checkpoint_dir};
    dev_t seen[4];
    int nseen = 0;
    const struct health_policy *p = &ctx->policy;
    r->value = 100;
    health_set(r, HEALTH_PASS, -1, "all filesystems above %g%% free", p->disk_warn_free_percent);
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        struct statvfs vs;
        struct stat st;
        if (!*paths[i])
            continue;
        if (stat(paths[i], &st) < 0 || statvfs(paths[i], &vs) < 0) {
            /* a configured directory that vanished is a broken mount */
            health_set(r, HEALTH_FAIL, HEALTH_SEV_REBOOT, "%s: %s", paths[i], strerror(errno));
            return 0;
        }
        int dup = 0;
        for (int k = 0; k < nseen; k++)
            dup |= seen[k] == st.st_dev;
        if (dup)
            continue;
        seen[nseen++] = st.st_dev;
        double free_pct = vs.f_blocks ? 100.0 * (double)vs.f_bavail / (double)vs.f_blocks : 100;
        /* some filesystems (tmpfs without nr_inodes, btrfs) report no inode limit */
        double ifree_pct = vs.f_files ? 100.0 * (double)vs.f_favail / (double)vs.f_files : 100;
        if (free_pct < r->value)
            r->value = free_pct;
        enum health_status st2 = HEALTH_PASS;
        char why[240];
        if (free_pct < p->disk_min_free_percent) {
            st2 = HEALTH_FAIL;
            snprintf(why, sizeof(why), "%s: %.1f%% space free (min %g%%)", paths[i], free_pct,
                     p->disk_min_free_percent);
        } else if (ifree_pct < p->disk_min_free_inodes_percent) {
            st2 = HEALTH_FAIL;
            snprintf(why, sizeof(why), "%s: %.1f%% inodes free (min %g%%)", paths[i], ifree_pct,
                     p->disk_min_free_inodes_percent);
        } else if (free_pct < p->disk_warn_free_percent) {
            st2 = HEALTH_WARN;
            snprintf(why, sizeof(why), "%s: %.1f%% space free (warn below %g%%)", paths[i],
                     free_pct, p->disk_warn_free_percent);
        }
        if (st2 > r->status)
            health_set(r, st2, -1, "%s", why);
    }
    return 0;
}

/* The interface carrying the default route (/proc/net/route), or "". */
static void default_route_if(char *out, size_t len)
{
    FILE *f = fopen("/proc/net/route", "r");
    char line[256], ifn[64];
    unsigned long dest, flags;
    *out = '\0';
    if (!f)
        return;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "%63s %lx %*x %lx", ifn, &dest, &flags) == 3 && dest == 0 &&
            (flags & 1 /* RTF_UP */)) {
            snprintf(out, len, "%s", ifn);
            break;
        }
    fclose(f);
}

int health_nic(const struct health_ctx *ctx, struct health_result *r)
{
    struct ifaddrs *ifs, *a;
    char name[IF_NAMESIZE + 1];
    snprintf(name, sizeof(name), "%s", ctx->policy.nic_interface);
    if (!*name)
        default_route_if(name, sizeof(name));
    if (getifaddrs(&ifs) < 0)
        return health_set(r, HEALTH_FAIL, -1, "getifaddrs: %s", strerror(errno));
    if (!*name) /* no default route: the first non-loopback interface that is up with IPv4 */
        for (a = ifs; a && !*name; a = a->ifa_next)
            if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && (a->ifa_flags & IFF_UP) &&
                !(a->ifa_flags & IFF_LOOPBACK))
                snprintf(name, sizeof(name), "%s", a->ifa_name);
    int exists = 0, up = 0;
    char addr[INET_ADDRSTRLEN] = "";
    for (a = ifs; a; a = a->ifa_next) {
        if (strcmp(a->ifa_name, name) != 0)
            continue;
        exists = 1;
        up |= (a->ifa_flags & IFF_UP) && (a->ifa_flags & IFF_RUNNING);
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && !*addr)
            inet_ntop(AF_INET, &((struct sockaddr_in *)a->ifa_addr)->sin_addr, addr, sizeof(addr));
    }
    freeifaddrs(ifs);
    r->value = up && *addr;
    if (!*name)
        return health_set(r, HEALTH_FAIL, -1,
                          "no primary interface (no default route, no "
                          "non-loopback interface up with IPv4)");
    if (!exists)
        return health_set(r, HEALTH_FAIL, -1, "%s: no such interface", name);
    if (!up)
        return health_set(r, HEALTH_FAIL, -1, "%s is down", name);
    if (!*addr)
        return health_set(r, HEALTH_FAIL, -1, "%s has no IPv4 address", name);
    return health_set(r, HEALTH_PASS, -1, "%s up, %s", name, addr);
}

/* A TCP connect to 127.0.0.1:port within ~1 s. */
static int port_answers(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct timeval tv = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

int health_daemon_slurmd(const struct health_ctx *ctx, struct health_result *r)
{
    if (!*ctx->slurmd_pid_file)
        return health_set(r, HEALTH_PASS, -1, "skipped: no slurmdPidFile configured");
    pid_t pid = mtc_pid_read(ctx->slurmd_pid_file);
    r->value = pid;
    if (pid <= 0 || !mtc_pid_alive(pid))
        return health_set(r, HEALTH_FAIL, -1, "slurmd not running (pid file %s)",
                          ctx->slurmd_pid_file);
    if (ctx->slurmd_port > 0 && !port_answers(ctx->slurmd_port))
        return health_set(r, HEALTH_FAIL, -1, "slurmd (pid %d) not accepting on port %d", (int)pid,
                          ctx->slurmd_port);
    return health_set(r, HEALTH_PASS, -1, "slurmd pid %d alive", (int)pid);
}

/* How long munge and unmunge may each take. */
#define MUNGE_MS 5000

/* A credential round trip is the only proof munged works (a hung munged
 * still accepts connections): `munge -n -S sock | unmunge -S sock`, the
 * credential passed through memory (no file for a killed check to leave). */
int health_daemon_munged(const struct health_ctx *ctx, struct health_result *r)
{
    if (!*ctx->munge_socket)
        return health_set(r, HEALTH_PASS, -1, "skipped: no mungeSocket configured");
    char *enc[] = {"munge", "-n", "-S", (char *)ctx->munge_socket, NULL};
    char *dec[] = {"unmunge", "-S", (char *)ctx->munge_socket, NULL};
    struct mtc_io e = {.capture = MTC_IO_OUT | MTC_IO_ERR}, d = {.capture = MTC_IO_MERGE};
    char *out = NULL;
    int64_t t0 = mtc_now_ms();
    int rc = mtc_run_io(enc, NULL, &e, MUNGE_MS);
    if (rc == 0) {
        d.in = e.out;
        d.in_len = e.out_len;
        rc = mtc_run_io(dec, NULL, &d, MUNGE_MS);
        out = d.out;
    } else {
        out = e.err;
        e.err = NULL;
    }
    int timed_out = rc < 0 && errno == ETIMEDOUT;
    free(e.out);
    free(e.err);
    r->value = (double)(mtc_now_ms() - t0);
    if (timed_out) /* a hung munged, or a slow host name lookup in it */
        health_set(r, HEALTH_FAIL, -1,
                   "munged on %s: munge round trip took longer than %d s (is the host's own "
                   "name slow to resolve?)",
                   ctx->munge_socket, MUNGE_MS / 1000);
    else if (rc != 0) {
        char *nl = out ? strchr(out, '\n') : NULL;
        if (nl)
            *nl = '\0';
        health_set(r, HEALTH_FAIL, -1, "munged not answering on %s: %s", ctx->munge_socket,
                   out && *out ? out
                   : rc < 0    ? strerror(errno)
                               : "no output");
    } else {
        health_set(r, HEALTH_PASS, -1, "munge round trip in %.0f ms", r->value);
    }
    free(out);
    return 0;
}
