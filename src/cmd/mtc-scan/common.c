/* common: mtc-scan's shared helpers (scan_mpi.h): node names, idle waits,
 * the pool-median judge, report pieces, a check's NCCL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/mtc-scan/scan_mpi.h"
#include "health/health.h"

int scan_rank, scan_size;
char (*scan_names)[SCAN_NAME_LEN];

void scan_gather_names(void)
{
    char mine[SCAN_NAME_LEN];
    const char *n = getenv("SLURMD_NODENAME");
    if (n && *n)
        snprintf(mine, sizeof(mine), "%s", n);
    else {
        char host[48] = "";
        gethostname(host, sizeof(host) - 1);
        snprintf(mine, sizeof(mine), "%s:%d", host, scan_rank);
    }
    scan_names = calloc((size_t)scan_size, SCAN_NAME_LEN);
    MPI_Allgather(mine, SCAN_NAME_LEN, MPI_CHAR, scan_names, SCAN_NAME_LEN, MPI_CHAR,
                  MPI_COMM_WORLD);
}

void scan_wait_idle(MPI_Request *rq, int n)
{
    int done = 0;
    struct timespec ts = {0, 20000};
    for (;;) {
        MPI_Testall(n, rq, &done, MPI_STATUSES_IGNORE);
        if (done)
            return;
        nanosleep(&ts, NULL);
    }
}

void scan_wait_measured(MPI_Request *rq, int n)
{
    double t0 = MPI_Wtime();
    int done = 0;
    for (;;) {
        MPI_Testall(n, rq, &done, MPI_STATUSES_IGNORE);
        if (done)
            return;
        double w = MPI_Wtime() - t0;
        if (w < SCAN_SPIN_S)
            continue;
        double s = w / 64 < SCAN_NAP_S ? w / 64 : SCAN_NAP_S;
        struct timespec ts = {0, (long)(s * 1e9)};
        nanosleep(&ts, NULL);
    }
}

int scan_judge(const double *v, int n, int i, double fail, double *median, double *frac)
{
    double *peers = malloc(sizeof(double) * (size_t)(n > 1 ? n : 1));
    int np = 0;
    for (int j = 0; j < n; j++)
        if (j != i && v[j] > 0)
            peers[np++] = v[j];
    *median = 0;
    *frac = 0;
    double warn = fail + (1 - fail) / 2;
    int s;
    if (np == 1 && v[i] > 0) {
        /* two nodes: each judged against the other (a scan was asked for
         * them; the agents' continuous checks still want a majority) */
        *median = peers[0];
        *frac = v[i] / peers[0];
        s = *frac < fail ? HEALTH_FAIL : *frac < warn ? HEALTH_WARN : HEALTH_PASS;
    } else {
        s = health_speed_judge(v[i], peers, np, warn, fail, median, frac);
    }
    free(peers);
    return s < 0 ? HEALTH_UNKNOWN : s;
}

const char *scan_state_name(int s)
{
    return health_status_name((enum health_status)s);
}

json_t *scan_num(double v)
{
    return json_real(isfinite(v) ? v : 0);
}

json_t *scan_node(const char *name, int state, const char *reason)
{
    json_t *n = json_pack("{s:s, s:s}", "node", name, "state", scan_state_name(state));
    if (reason && *reason)
        json_object_set_new(n, "reason", json_string(reason));
    return n;
}

struct scan_nccl *scan_nccl_for(const struct scan_opts *o, char *why, size_t len)
{
    return o->nccl ? scan_nccl_open(MPI_COMM_WORLD, why, len) : NULL;
}

void scan_nccl_report(const struct scan_opts *o, json_t *report, const struct scan_nccl *nc,
                      const char *why)
{
    if (!o->nccl)
        return;
    char s[240];
    if (nc)
        snprintf(s, sizeof(s), "used: %d GPUs per node", scan_nccl_gpus(nc));
    else
        snprintf(s, sizeof(s), "not available: %s", why);
    json_object_set_new(report, "nccl", json_string(s));
}
