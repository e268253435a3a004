/* allreduce: MPI_Allreduce (MPI_SUM) of float buffers from 1 KiB to 16 MiB
 * (x4 per step), each timed over a few iterations after a warm-up; rank 0
 * prints one line per size: bytes, iterations, mean time per call, algorithm
 * bandwidth (bytes / time) and bus bandwidth (algbw * 2(n-1)/n, the nccl-tests
 * convention: what each rank's link carries), in GB/s (1e9 B/s). The result
 * is checked (every element must equal the sum of the ranks' values).
 * Usage: allreduce [MAX_BYTES [MIN_ITERS]]. Built by bench/mpi_hosts.sh with
 * mpicc; run under `srun --mpi=pmix` or mpirun. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t max = argc > 1 ? strtoull(argv[1], NULL, 0) : (16u << 20);
    int min_iters = argc > 2 ? atoi(argv[2]) : 5;
    float *in = malloc(max), *out = malloc(max);
    if (!in || !out) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    char all[16][64] = {{0}};
    char mine[64];
    snprintf(mine, sizeof(mine), "%s", host);
    if (size <= 16)
        MPI_Gather(mine, 64, MPI_CHAR, all, 64, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# %d ranks:", size);
        for (int i = 0; i < size && i < 16; i++)
            printf(" %s", all[i]);
        printf("\n# %10s %6s %12s %12s %12s\n", "bytes", "iters", "time_us", "algbw_GB/s",
               "busbw_GB/s");
    }
    int bad = 0;
    for (size_t bytes = 1024; bytes <= max; bytes *= 4) {
        size_t n = bytes / sizeof(float);
        for (size_t i = 0; i < n; i++)
            in[i] = (float)(rank + 1);
        /* about 64 MiB through each size, at least min_iters, at most 1000 */
        int iters = (int)((64u << 20) / bytes);
        if (iters < min_iters)
            iters = min_iters;
        if (iters > 1000)
            iters = 1000;
        for (int w = 0; w < 2; w++)
            MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int it = 0; it < iters; it++)
            MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t = (MPI_Wtime() - t0) / iters, tmax;
        /* the slowest rank's time is the collective's */
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        float want = (float)size * (float)(size + 1) / 2.0f;
        for (size_t i = 0; i < n; i++)
            if (out[i] != want) {
                bad = 1;
                break;
            }
        if (rank == 0) {
            double alg = (double)bytes / tmax / 1e9;
            printf("  %10zu %6d %12.1f %12.3f %12.3f\n", bytes, iters, tmax * 1e6, alg,
                   alg * 2.0 * (size - 1) / size);
            fflush(stdout);
        }
    }
    int anybad = 0;
    MPI_Reduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf(anybad ? "# RESULT WRONG\n" : "# result checked\n");
    free(in);
    free(out);
    MPI_Finalize();
    return anybad;
}
