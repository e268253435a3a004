/* pipeline: the straggler check. Each rank computes a fixed microbatch, then
 * passes it to the next rank (a ring of sends, many microbatches); every
 * node's microbatch rate is judged against the median of the others and a
 * text heatmap shows each node's time per bucket of microbatches. A
 * microbatch is calibrated to about MICROBATCH_S of compute on the fastest
 * rank: one much shorter than a CPU quota's budget per period (or than a
 * scheduler slice) lets a throttled node do all its compute between stops,
 * which then land in the waits for its neighbours and go unmeasured. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/mtc-scan/scan_mpi.h"
#include "health/health.h"

#define BUCKETS 10
#define MICROBATCH_S 0.005

/* A fixed amount of arithmetic on buf (the microbatch's compute). */
static void compute(float *buf, int n)
{
    for (int r = 0; r < 512; r++)
        for (int i = 0; i < n; i++)
            buf[i] = buf[i] * 0.999f + 0.001f * (float)r;
}

/* Repetitions of compute() that make a microbatch about MICROBATCH_S on the
 * fastest rank (every rank does the same work); its time per repetition
 * into *t. */
static int calibrate(float *buf, int n, double *t)
{
    compute(buf, n); /* the buffer's pages touched, the code warm */
    double t0 = MPI_Wtime();
    compute(buf, n);
    *t = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, t, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    int reps = *t > 0 ? (int)(MICROBATCH_S / *t + 0.999) : 1;
    return reps < 1 ? 1 : reps > 10000 ? 10000 : reps;
}

/* The heatmap rows: per node and bucket, time / the bucket's median. */
static json_t *heatmap(const double *all, int size, int mb)
{
    json_t *rows = json_array();
    int per = mb / BUCKETS > 0 ? mb / BUCKETS : 1, nb = mb / per;
    double *bt = calloc((size_t)size * (size_t)nb, sizeof(double));
    double *col = calloc((size_t)size, sizeof(double));
    for (int i = 0; i < size; i++)
        for (int b = 0; b < nb; b++)
            for (int m = b * per; m < (b + 1) * per; m++)
                bt[i * nb + b] += all[(size_t)i * (size_t)mb + (size_t)m];
    for (int i = 0; i < size; i++) {
        char row[BUCKETS + 1] = "", line[SCAN_NAME_LEN + BUCKETS + 8];
        for (int b = 0; b < nb && b < BUCKETS; b++) {
            for (int j = 0; j < size; j++)
                col[j] = bt[j * nb + b];
            double med = health_median(col, size), r = med > 0 ? bt[i * nb + b] / med : 1;
            row[b] = r < 1.25 ? '.' : r < 2 ? 'o' : '#';
        }
        snprintf(line, sizeof(line), "%-20s %s", scan_names[i], row);
        json_array_append_new(rows, json_string(line));
    }
    free(col);
    free(bt);
    return rows;
}

int scan_pipeline(const struct scan_opts *o, json_t **report)
{
    const int n = 1 << 15, mb = o->microbatches, size = scan_size;
    float *buf = calloc((size_t)n, sizeof(float)), *in = calloc((size_t)n, sizeof(float));
    double *mine = calloc((size_t)mb, sizeof(double));
    int next = (scan_rank + 1) % size, prev = (scan_rank + size - 1) % size;
    double once = 0;
    int reps = calibrate(buf, n, &once);
    MPI_Request brq;
    MPI_Ibarrier(MPI_COMM_WORLD, &brq);
    scan_wait_idle(&brq, 1);
    double t0 = MPI_Wtime(), busy = 0;
    for (int m = 0; m < mb; m++) {
        double c0 = MPI_Wtime();
        for (int k = 0; k < reps; k++)
            compute(buf, n);
        mine[m] = MPI_Wtime() - c0;
        busy += mine[m];
        MPI_Request rq[2];
        MPI_Irecv(in, n, MPI_FLOAT, prev, m, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(buf, n, MPI_FLOAT, next, m, MPI_COMM_WORLD, &rq[1]);
        scan_wait_idle(rq, 2);
        memcpy(buf, in, sizeof(float) * (size_t)n);
    }
    double wall = MPI_Wtime() - t0;
    double *all = scan_rank == 0 ? calloc((size_t)size * (size_t)mb, sizeof(double)) : NULL;
    MPI_Gather(mine, mb, MPI_DOUBLE, all, mb, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double *busys = scan_rank == 0 ? calloc((size_t)size, sizeof(double)) : NULL;
    MPI_Gather(&busy, 1, MPI_DOUBLE, busys, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int worst = HEALTH_PASS;
    if (scan_rank == 0) {
        double *rate = calloc((size_t)size, sizeof(double));
        json_t *nodes = json_array();
        for (int i = 0; i < size; i++)
            rate[i] = busys[i] > 0 ? mb / busys[i] : 0;
        for (int i = 0; i < size; i++) {
            double med, frac;
            char reason[80] = "";
            int s = scan_judge(rate, size, i, o->fail_fraction, &med, &frac);
            if (s == HEALTH_FAIL || s == HEALTH_WARN) /* a WARN says why too */
                snprintf(reason, sizeof(reason), "straggler: %.0f%% of the %s", frac * 100,
                         size == 2 ? "other node" : "pool median");
            else if (s == HEALTH_UNKNOWN)
                snprintf(reason, sizeof(reason),
                         "straggler: no other node measured to judge against");
            worst = s > worst && s != HEALTH_UNKNOWN ? s : worst;
            json_t *nd = scan_node(scan_names[i], s, reason);
            json_object_set_new(nd, "microbatchesPerSecond", scan_num(rate[i]));
            if (med > 0) { /* with two nodes: the other's rate */
                json_object_set_new(nd, "poolMedian", scan_num(med));
                json_object_set_new(nd, "fractionOfMedian", scan_num(frac));
            }
            json_array_append_new(nodes, nd);
        }
        *report = json_pack("{s:s, s:s, s:i, s:o, s:o, s:o, s:o, s:o}", "check", "straggler",
                            "state", scan_state_name(worst), "microbatches", mb,
                            "microbatchMs", scan_num(once * reps * 1000), "wallSeconds",
                            scan_num(wall), "failFraction", scan_num(o->fail_fraction), "nodes",
                            nodes, "heatmap", heatmap(all, size, mb));
        free(rate);
    }
    free(all);
    free(busys);
    free(mine);
    free(buf);
    free(in);
    return worst == HEALTH_FAIL;
}
