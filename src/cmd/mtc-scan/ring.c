/* ring: all_reduce and all_gather bus bandwidth over message sizes
 * 8 KiB..--max-bytes (x4 steps), nccl-tests' conventions: all_reduce of
 * `bytes`, all_gather producing `bytes` (each rank contributes bytes/ranks);
 * busbw = algbw x 2(n-1)/n (all_reduce), algbw x (n-1)/n (all_gather).
 * With --nccl and NCCL/CUDA on every node, NCCL over every GPU; else MPI
 * (one rank per node), the report saying why. Results are checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/mtc-scan/scan_mpi.h"
#include "health/health.h"

/* Seconds per MPI collective (the slowest rank's), result checked. */
static double mpi_time(int gather, size_t bytes, int iters, float *in, float *out, int *wrong)
{
    int size = scan_size;
    size_t n = gather ? bytes / sizeof(float) / (size_t)size : bytes / sizeof(float);
    n = n ? n : 1;
    for (size_t i = 0; i < n; i++)
        in[i] = (float)(scan_rank + 1);
    MPI_Request rq;
    MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    scan_wait_idle(&rq, 1);
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
        if (gather)
            MPI_Iallgather(in, (int)n, MPI_FLOAT, out, (int)n, MPI_FLOAT, MPI_COMM_WORLD, &rq);
        else
            MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
        scan_wait_measured(&rq, 1);
    }
    double mine = (MPI_Wtime() - t0) / iters, t = 0;
    MPI_Allreduce(&mine, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (!gather && out[n - 1] != (float)size * (float)(size + 1) / 2)
        *wrong = 1;
    if (gather && out[n * (size_t)size - 1] != (float)size)
        *wrong = 1;
    return t;
}

int scan_ring(const struct scan_opts *o, json_t **report)
{
    int size = scan_size, wrong = 0, anywrong = 0;
    char nccl_why[200] = "", err[200] = "";
    struct scan_nccl *nc = scan_nccl_for(o, nccl_why, sizeof(nccl_why));
    size_t cap = o->max_bytes + (size_t)size * sizeof(float) + 64;
    float *in = nc ? NULL : malloc(cap), *out = nc ? NULL : malloc(cap);
    json_t *sizes = json_array();
    double last_ar = 0; /* all_reduce bus bandwidth at the largest size */
    for (size_t bytes = 8192; bytes <= o->max_bytes && !*err; bytes *= 4) {
        int iters = (int)((16u << 20) / bytes);
        iters = iters < 3 ? 3 : iters > 200 ? 200 : iters;
        double bw[2];
        for (int c = 0; c < 2 && !*err; c++) {
            if (nc) {
                bw[c] =
                    scan_nccl_busbw(nc, MPI_COMM_WORLD, c, bytes, iters, &wrong, err, sizeof(err));
            } else {
                double t = mpi_time(c, bytes, iters, in, out, &wrong);
                bw[c] = (double)bytes / t / 1e9 * (c ? 1.0 : 2.0) * (size - 1) / size;
            }
        }
        if (*err)
            break;
        last_ar = bw[0];
        json_array_append_new(sizes, json_pack("{s:I, s:i, s:o, s:o}", "bytes", (json_int_t)bytes,
                                               "iters", iters, "allReduceBusGBps", scan_num(bw[0]),
                                               "allGatherBusGBps", scan_num(bw[1])));
    }
    MPI_Allreduce(&wrong, &anywrong, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int slow = o->min_bus_gbps > 0 && last_ar < o->min_bus_gbps;
    char reason[300] = "";
    if (*err)
        snprintf(reason, sizeof(reason), "NCCL failed: %s", err);
    else if (anywrong)
        snprintf(reason, sizeof(reason), "wrong collective result");
    else if (slow)
        snprintf(reason, sizeof(reason),
                 "all_reduce bus bandwidth %.3f GB/s below the threshold %.3f GB/s", last_ar,
                 o->min_bus_gbps);
    int state = *reason ? HEALTH_FAIL : HEALTH_PASS;
    if (scan_rank == 0) {
        json_t *nodes = json_array();
        char nreason[320] = "";
        if (*reason)
            snprintf(nreason, sizeof(nreason), "ring: %s", reason);
        /* a ring's verdict is the whole ring's: every node shares it */
        for (int i = 0; i < size; i++)
            json_array_append_new(nodes, scan_node(scan_names[i], state, nreason));
        *report =
            json_pack("{s:s, s:s, s:i, s:s, s:o, s:o, s:o, s:o}", "check", "collective.ring",
                      "state", scan_state_name(state), "ranks", size, "transport",
                      nc ? "nccl" : "mpi", "allReduceBusGBps", scan_num(last_ar), "thresholdGBps",
                      scan_num(o->min_bus_gbps), "sizes", sizes, "nodes", nodes);
        if (*reason)
            json_object_set_new(*report, "reason", json_string(reason));
        scan_nccl_report(o, *report, nc, nccl_why);
    } else {
        json_decref(sizes);
    }
    scan_nccl_close(nc);
    free(in);
    free(out);
    return state == HEALTH_FAIL;
}
