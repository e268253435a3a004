/* mtc-scan: the health scanner's MPI workload, one rank per node (srun or
 * mpirun). Checks:
 *   pipeline  each rank computes a fixed microbatch, then passes it to the
 *             next rank (a ring of sends, many microbatches); every node's
 *             microbatch rate is judged against the median of the others
 *             (control_speed_judge, like the agent's straggler check) and a
 *             text heatmap shows each node's time per bucket of microbatches.
 *   pairs     every pair of nodes in turn ping-pongs a buffer; each pair's
 *             bandwidth is judged against the median of the other pairs; a
 *             node whose pairs all fail is a bad node, a lone failing pair a
 *             bad link.
 *   ring      MPI_Allreduce and MPI_Allgather bus bandwidth (nccl-tests
 *             convention) over message sizes 8 KiB..--max-bytes, results
 *             checked.
 * Rank 0 prints one JSON report on stdout; exit 0 when every verdict is PASS,
 * 1 when something FAILed, 2 on bad usage.
 * Every report has "check", "state" (PASS|WARN|FAIL) and "nodes": [{"node",
 * "state", "reason" (when not PASS), figures...}]; pairs also has "pairs":
 * [{"nodes": [A, B], "state", "busGBps", "thresholdGBps", "reason"}].
 * Thresholds: absolute with --min-bus-gbps (pairs, ring), else measured-
 * relative (--fail-fraction of the pool's median).
 * Usage: mtc-scan pipeline|pairs|ring [--max-bytes N] [--microbatches N]
 *        [--fail-fraction F] [--min-bus-gbps X] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control/control.h"

#define NAME_LEN 64
#define BUCKETS 10

struct scan_opts {
    const char *check;
    size_t max_bytes;
    int microbatches;
    double fail_fraction;
    double min_bus_gbps; /* absolute threshold (pairs, ring); 0 = measured-relative */
};

static int rank, size;
static char (*names)[NAME_LEN];

/* This rank's node: Slurm's node name under srun, else host:rank. */
static void gather_names(void)
{
    char mine[NAME_LEN];
    const char *n = getenv("SLURMD_NODENAME");
    if (n && *n)
        snprintf(mine, sizeof(mine), "%s", n);
    else {
        char host[48] = "";
        gethostname(host, sizeof(host) - 1);
        snprintf(mine, sizeof(mine), "%s:%d", host, rank);
    }
    names = calloc((size_t)size, NAME_LEN);
    MPI_Allgather(mine, NAME_LEN, MPI_CHAR, names, NAME_LEN, MPI_CHAR, MPI_COMM_WORLD);
}

/* The health state's name (health_status_enum). */
static const char *state_name(int s)
{
    return health_status_name((enum health_status)s);
}

/* Judge v[i] against the median of the others; returns the health state. */
static int judge(const double *v, int n, int i, double fail, double *median, double *frac)
{
    double *peers = malloc(sizeof(double) * (size_t)(n > 1 ? n : 1));
    int np = 0;
    for (int j = 0; j < n; j++)
        if (j != i && v[j] > 0)
            peers[np++] = v[j];
    *median = 0;
    *frac = 0;
    int s = control_speed_judge(v[i], peers, np, fail + (1 - fail) / 2, fail, median, frac);
    free(peers);
    return s < 0 ? HEALTH_UNKNOWN : s;
}

/* A fixed amount of arithmetic on buf (the microbatch's compute). */
static void compute(float *buf, int n)
{
    for (int r = 0; r < 512; r++)
        for (int i = 0; i < n; i++)
            buf[i] = buf[i] * 0.999f + 0.001f * (float)r;
}

/* Wait for requests sleeping between polls: a waiting rank spends little CPU,
 * so a throttled node's CPU time goes to its compute, where it is measured. */
static void wait_idle(MPI_Request *rq, int n)
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

static int scan_pipeline(const struct scan_opts *o)
{
    const int n = 1 << 15, mb = o->microbatches;
    float *buf = calloc((size_t)n, sizeof(float)), *in = calloc((size_t)n, sizeof(float));
    double *mine = calloc((size_t)mb, sizeof(double));
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), busy = 0;
    for (int m = 0; m < mb; m++) {
        double c0 = MPI_Wtime();
        compute(buf, n);
        mine[m] = MPI_Wtime() - c0;
        busy += mine[m];
        MPI_Request rq[2];
        MPI_Irecv(in, n, MPI_FLOAT, prev, m, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(buf, n, MPI_FLOAT, next, m, MPI_COMM_WORLD, &rq[1]);
        wait_idle(rq, 2);
        memcpy(buf, in, sizeof(float) * (size_t)n);
    }
    double wall = MPI_Wtime() - t0;
    double *all = rank == 0 ? calloc((size_t)size * (size_t)mb, sizeof(double)) : NULL;
    MPI_Gather(mine, mb, MPI_DOUBLE, all, mb, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double *busys = rank == 0 ? calloc((size_t)size, sizeof(double)) : NULL;
    MPI_Gather(&busy, 1, MPI_DOUBLE, busys, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int failed = 0;
    if (rank == 0) {
        double *rate = calloc((size_t)size, sizeof(double));
        for (int i = 0; i < size; i++)
            rate[i] = busys[i] > 0 ? mb / busys[i] : 0;
        int worst = HEALTH_PASS;
        for (int i = 0; i < size; i++) {
            double med, frac;
            int s = judge(rate, size, i, o->fail_fraction, &med, &frac);
            worst = s > worst && s != HEALTH_UNKNOWN ? s : worst;
        }
        printf("{\"check\": \"straggler\", \"state\": \"%s\", \"microbatches\": %d, "
               "\"wallSeconds\": %.3f, \"failFraction\": %.2f, \"nodes\": [",
               state_name(worst), mb, wall, o->fail_fraction);
        for (int i = 0; i < size; i++) {
            double med, frac;
            int s = judge(rate, size, i, o->fail_fraction, &med, &frac);
            failed |= s == HEALTH_FAIL;
            printf("%s\n  {\"node\": \"%s\", \"state\": \"%s\", \"microbatchesPerSecond\": %.1f, "
                   "\"poolMedian\": %.1f, \"fractionOfMedian\": %.3f",
                   i ? "," : "", names[i], state_name(s), rate[i], med, frac);
            if (s == HEALTH_FAIL)
                printf(", \"reason\": \"straggler: %.0f%% of the pool median\"", frac * 100);
            printf("}");
        }
        /* heatmap: per node and bucket of microbatches, time / the bucket's median */
        printf("],\n \"heatmap\": [");
        int per = mb / BUCKETS > 0 ? mb / BUCKETS : 1, nb = mb / per;
        double *bt = calloc((size_t)size * (size_t)nb, sizeof(double));
        for (int i = 0; i < size; i++)
            for (int b = 0; b < nb; b++)
                for (int m = b * per; m < (b + 1) * per; m++)
                    bt[i * nb + b] += all[(size_t)i * (size_t)mb + (size_t)m];
        double *col = calloc((size_t)size, sizeof(double));
        for (int i = 0; i < size; i++) {
            char row[BUCKETS + 1] = "";
            for (int b = 0; b < nb && b < BUCKETS; b++) {
                for (int j = 0; j < size; j++)
                    col[j] = bt[j * nb + b];
                double med = control_median(col, size), r = med > 0 ? bt[i * nb + b] / med : 1;
                row[b] = r < 1.25 ? '.' : r < 2 ? 'o' : '#';
            }
            printf("%s\"%-20s %s\"", i ? ", " : "", names[i], row);
        }
        printf("]}\n");
        free(col);
        free(bt);
        free(rate);
    }
    free(all);
    free(busys);
    free(mine);
    free(buf);
    free(in);
    return failed;
}

/* Bandwidth (GB/s) of a ping-pong of bytes between ranks a and b (0 elsewhere). */
static double pingpong(int a, int b, char *buf, size_t bytes, int iters)
{
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
        if (rank == a) {
            MPI_Send(buf, (int)bytes, MPI_CHAR, b, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)bytes, MPI_CHAR, b, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == b) {
            MPI_Recv(buf, (int)bytes, MPI_CHAR, a, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)bytes, MPI_CHAR, a, 2, MPI_COMM_WORLD);
        }
    }
    double t = MPI_Wtime() - t0;
    return rank == a ? 2.0 * (double)bytes * iters / t / 1e9 : 0;
}

static int scan_pairs(const struct scan_opts *o)
{
    size_t bytes = o->max_bytes < (4u << 20) ? o->max_bytes : (4u << 20);
    char *buf = calloc(bytes, 1);
    int np = size * (size - 1) / 2, k = 0, failed = 0;
    double *bw = calloc((size_t)(np > 0 ? np : 1), sizeof(double));
    int(*pr)[2] = calloc((size_t)(np > 0 ? np : 1), sizeof(*pr));
    for (int a = 0; a < size; a++)
        for (int b = a + 1; b < size; b++, k++) {
            /* the ranks not in the pair wait idle, leaving the CPU to it */
            MPI_Request rq;
            MPI_Ibarrier(MPI_COMM_WORLD, &rq);
            wait_idle(&rq, 1);
            pingpong(a, b, buf, bytes, 2); /* warm-up */
            double g = 0, got = 0;         /* the best of 3 rounds: noise only slows */
            for (int round = 0; round < 3; round++) {
                double x = pingpong(a, b, buf, bytes, 4);
                g = x > g ? x : g;
            }
            MPI_Ireduce(&g, &got, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD, &rq);
            wait_idle(&rq, 1);
            bw[k] = got;
            pr[k][0] = a;
            pr[k][1] = b;
        }
    if (rank == 0) {
        int *bad = calloc((size_t)size, sizeof(int)), *cnt = calloc((size_t)size, sizeof(int));
        int *st = calloc((size_t)(np > 0 ? np : 1), sizeof(int));
        double *thr = calloc((size_t)(np > 0 ? np : 1), sizeof(double));
        double *med = calloc((size_t)(np > 0 ? np : 1), sizeof(double));
        for (k = 0; k < np; k++) {
            double frac;
            if (o->min_bus_gbps > 0) {
                st[k] = bw[k] < o->min_bus_gbps ? HEALTH_FAIL : HEALTH_PASS;
                thr[k] = o->min_bus_gbps;
            } else {
                st[k] = judge(bw, np, k, o->fail_fraction, &med[k], &frac);
                thr[k] = med[k] * o->fail_fraction;
            }
            cnt[pr[k][0]]++;
            cnt[pr[k][1]]++;
            if (st[k] == HEALTH_FAIL) {
                bad[pr[k][0]]++;
                bad[pr[k][1]]++;
                failed = 1;
            }
        }
        printf("{\"check\": \"collective.pairs\", \"state\": \"%s\", \"bytes\": %zu, "
               "\"failFraction\": %.2f, \"minBusGBps\": %.3f, \"pairs\": [",
               failed ? "FAIL" : "PASS", bytes, o->fail_fraction, o->min_bus_gbps);
        for (k = 0; k < np; k++) {
            printf("%s\n  {\"nodes\": [\"%s\", \"%s\"], \"state\": \"%s\", \"busGBps\": %.3f, "
                   "\"thresholdGBps\": %.3f",
                   k ? "," : "", names[pr[k][0]], names[pr[k][1]], state_name(st[k]), bw[k],
                   thr[k]);
            if (o->min_bus_gbps <= 0)
                printf(", \"median\": %.3f", med[k]);
            if (st[k] == HEALTH_FAIL)
                printf(", \"reason\": \"%.3f GB/s below the threshold %.3f GB/s\"", bw[k], thr[k]);
            printf("}");
        }
        /* a node failing with every partner is the bad one; otherwise the link */
        printf("],\n \"nodes\": [");
        for (int i = 0; i < size; i++) {
            int node_bad = cnt[i] > 1 && bad[i] == cnt[i];
            printf("%s\n  {\"node\": \"%s\", \"state\": \"%s\"", i ? "," : "", names[i],
                   bad[i] ? "FAIL" : "PASS");
            if (bad[i])
                printf(", \"reason\": \"%s\"", node_bad ? "bad node: slow with every partner"
                                                        : "bad link: slow with some partners");
            printf("}");
        }
        printf("]}\n");
        free(bad);
        free(cnt);
        free(st);
        free(thr);
        free(med);
    }
    free(bw);
    free(pr);
    free(buf);
    return failed;
}

static int scan_ring(const struct scan_opts *o)
{
    float *in = malloc(o->max_bytes), *out = malloc(o->max_bytes * (size_t)size);
    int wrong = 0;
    double last_ar = 0; /* all_reduce bus bandwidth at the largest size */
    if (rank == 0)
        printf("{\"check\": \"collective.ring\", \"ranks\": %d, \"sizes\": [", size);
    for (size_t bytes = 8192, k = 0; bytes <= o->max_bytes; bytes *= 4, k++) {
        size_t n = bytes / sizeof(float);
        for (size_t i = 0; i < n; i++)
            in[i] = (float)(rank + 1);
        int iters = (int)((16u << 20) / bytes);
        iters = iters < 3 ? 3 : iters > 200 ? 200 : iters;
        double t[2];
        for (int c = 0; c < 2; c++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int it = 0; it < iters; it++) {
                if (c == 0)
                    MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                else
                    MPI_Allgather(in, (int)n, MPI_FLOAT, out, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
            }
            double mine = (MPI_Wtime() - t0) / iters;
            MPI_Allreduce(&mine, &t[c], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (c == 0 && out[n - 1] != (float)size * (float)(size + 1) / 2)
                wrong = 1;
            if (c == 1 && out[n * (size_t)size - 1] != (float)size)
                wrong = 1;
        }
        if (rank == 0) {
            double ar = (double)bytes / t[0] / 1e9 * 2.0 * (size - 1) / size;
            last_ar = ar;
            double ag = (double)bytes * size / t[1] / 1e9 * (size - 1) / size;
            printf("%s\n  {\"bytes\": %zu, \"iters\": %d, \"allReduceBusGBps\": %.3f, "
                   "\"allGatherBusGBps\": %.3f}",
                   k ? "," : "", bytes, iters, ar, ag);
        }
    }
    int anywrong = 0;
    MPI_Reduce(&wrong, &anywrong, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Bcast(&last_ar, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(&anywrong, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int slow = o->min_bus_gbps > 0 && last_ar < o->min_bus_gbps;
    if (rank == 0) {
        char reason[160] = "";
        if (anywrong)
            snprintf(reason, sizeof(reason), "wrong collective result");
        else if (slow)
            snprintf(reason, sizeof(reason),
                     "all_reduce bus bandwidth %.3f GB/s below the threshold %.3f GB/s", last_ar,
                     o->min_bus_gbps);
        const char *st = anywrong || slow ? "FAIL" : "PASS";
        printf("],\n \"state\": \"%s\", \"allReduceBusGBps\": %.3f, \"thresholdGBps\": %.3f", st,
               last_ar, o->min_bus_gbps);
        if (*reason)
            printf(", \"reason\": \"%s\"", reason);
        /* a ring's verdict is the whole ring's: every node shares it */
        printf(",\n \"nodes\": [");
        for (int i = 0; i < size; i++) {
            printf("%s\n  {\"node\": \"%s\", \"state\": \"%s\"", i ? "," : "", names[i], st);
            if (*reason)
                printf(", \"reason\": \"ring: %s\"", reason);
            printf("}");
        }
        printf("]}\n");
    }
    free(in);
    free(out);
    return anywrong || slow;
}

static int parse(int argc, char **argv, struct scan_opts *o)
{
    *o = (struct scan_opts){NULL, 16u << 20, 300, 0.5, 0};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (strcmp(argv[i], "--max-bytes") == 0 && v) {
            o->max_bytes = strtoull(v, &end, 0);
            if (*end || o->max_bytes < 8192 || o->max_bytes > (256u << 20))
                return fprintf(stderr, "mtc-scan: --max-bytes %s: 8192..268435456\n", v), -1;
            i++;
        } else if (strcmp(argv[i], "--microbatches") == 0 && v) {
            o->microbatches = (int)strtol(v, &end, 10);
            if (*end || o->microbatches < BUCKETS || o->microbatches > 100000)
                return fprintf(stderr, "mtc-scan: --microbatches %s: 10..100000\n", v), -1;
            i++;
        } else if (strcmp(argv[i], "--min-bus-gbps") == 0 && v) {
            o->min_bus_gbps = strtod(v, &end);
            if (*end || !(o->min_bus_gbps > 0) || o->min_bus_gbps > 100000)
                return fprintf(stderr, "mtc-scan: --min-bus-gbps %s: a positive number\n", v), -1;
            i++;
        } else if (strcmp(argv[i], "--fail-fraction") == 0 && v) {
            o->fail_fraction = strtod(v, &end);
            if (*end || o->fail_fraction <= 0 || o->fail_fraction >= 1)
                return fprintf(stderr, "mtc-scan: --fail-fraction %s: between 0 and 1\n", v), -1;
            i++;
        } else if (!o->check && (strcmp(argv[i], "pipeline") == 0 ||
                                 strcmp(argv[i], "pairs") == 0 || strcmp(argv[i], "ring") == 0))
            o->check = argv[i];
        else
            return fprintf(stderr, "mtc-scan: unknown argument \"%s\"\n", argv[i]), -1;
    }
    if (!o->check)
        return fprintf(stderr, "usage: mtc-scan pipeline|pairs|ring [--max-bytes N] "
                               "[--microbatches N] [--fail-fraction F] [--min-bus-gbps X]\n"),
               -1;
    return 0;
}

int main(int argc, char **argv)
{
    struct scan_opts o;
    if (parse(argc, argv, &o) < 0)
        return 2;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gather_names();
    int failed = strcmp(o.check, "pipeline") == 0 ? scan_pipeline(&o)
                 : strcmp(o.check, "pairs") == 0  ? scan_pairs(&o)
                                                  : scan_ring(&o);
    fflush(stdout);
    free(names);
    MPI_Finalize();
    return failed ? 1 : 0;
}
