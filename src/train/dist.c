/* dist: data parallelism over MPI (OpenMPI; mpirun or srun --mpi=pmix). A
 * process not started by a launcher runs as rank 0 of 1 without initialising
 * MPI at all, so a plain `mtc-train` never pays for (or depends on) the runtime. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "train/train.h"

static int g_mpi, g_rank, g_size = 1;

/* Launchers export these; their absence means a plain (singleton) run. */
static const char *const launcher_env[] = {
    "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", NULL,
};

int dist_init(int *argc, char ***argv, mtc_error_t *err)
{
    int launched = 0;
    for (int i = 0; launcher_env[i]; i++)
        if (getenv(launcher_env[i]))
            launched = 1;
    if (!launched)
        return 0;
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return errprintf(err, "MPI_Init failed");
    g_mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    return 0;
}

void dist_finalize(void)
{
    if (g_mpi)
        MPI_Finalize();
    g_mpi = 0;
}

int dist_rank(void)
{
    return g_rank;
}

int dist_size(void)
{
    return g_size;
}

/* Buckets bound the size of one MPI message (int counts). Overlapping with the
 * backward is not done: on CPU the backward keeps every core busy, and the
 * all-reduce's progress would take one from it (see docs/trainer-usage.md). */
#define BUCKET (16u << 20)

int dist_allreduce_sum(float *x, size_t n)
{
    if (g_size == 1)
        return 0;
    for (size_t off = 0; off < n; off += BUCKET) {
        int cnt = (int)(n - off < BUCKET ? n - off : BUCKET);
        if (MPI_Allreduce(MPI_IN_PLACE, x + off, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) !=
            MPI_SUCCESS)
            return -1;
    }
    return 0;
}

int dist_allreduce_sum_d(double *x, int n)
{
    if (g_size == 1)
        return 0;
    return MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS
               ? 0
               : -1;
}

int dist_bcast(void *buf, size_t nbytes)
{
    if (g_size == 1)
        return 0;
    return MPI_Bcast(buf, (int)nbytes, MPI_BYTE, 0, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

int dist_gather(const void *in, void *out, size_t nbytes)
{
    if (g_size == 1) {
        memcpy(out, in, nbytes);
        return 0;
    }
    return MPI_Gather(in, (int)nbytes, MPI_BYTE, out, (int)nbytes, MPI_BYTE, 0, MPI_COMM_WORLD) ==
                   MPI_SUCCESS
               ? 0
               : -1;
}

void dist_abort(int code)
{
    if (g_mpi)
        MPI_Abort(MPI_COMM_WORLD, code);
}

void dist_barrier(void)
{
    if (g_size > 1)
        MPI_Barrier(MPI_COMM_WORLD);
}
