/* nccl: NCCL collectives through dlopen (libnccl.so.2 and libcudart), for
 * the ring and pairs checks on GPU nodes: ncclGetUniqueId on the
 * communicator's first rank, broadcast over MPI, ncclCommInitRank for every
 * GPU of every rank (one rank per node drives all its GPUs, as nccl-tests
 * -g N does), then timed ncclAllReduce / ncclAllGather on CUDA buffers and
 * bus bandwidth the nccl-tests way. Nothing here is linked at build time:
 * the types below are NCCL's and CUDA's published ABI. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/mtc-scan/scan_mpi.h"

#define MAX_GPUS 16
#define WHY_LEN 160

typedef struct {
    char internal[128]; /* NCCL_UNIQUE_ID_BYTES */
} nccl_id_t;
typedef void *nccl_comm_t;
typedef void *cuda_stream_t;
enum { NCCL_FLOAT32 = 7, NCCL_SUM = 0, CUDA_H2D = 1, CUDA_D2H = 2 };

struct nccl_api {
    int (*get_unique_id)(nccl_id_t *);
    int (*comm_init_rank)(nccl_comm_t *, int, nccl_id_t, int);
    int (*comm_destroy)(nccl_comm_t);
    int (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t, cuda_stream_t);
    int (*all_gather)(const void *, void *, size_t, int, nccl_comm_t, cuda_stream_t);
    int (*group_start)(void);
    int (*group_end)(void);
    const char *(*nccl_error)(int);
    int (*device_count)(int *);
    int (*set_device)(int);
    int (*cuda_malloc)(void **, size_t);
    int (*cuda_free)(void *);
    int (*memcpy)(void *, const void *, size_t, int);
    int (*stream_create)(cuda_stream_t *);
    int (*stream_sync)(cuda_stream_t);
    int (*stream_destroy)(cuda_stream_t);
    const char *(*cuda_error)(int);
};

struct scan_nccl {
    void *nccl, *cudart;
    struct nccl_api api;
    int ngpus; /* per rank: the fewest any rank has */
    MPI_Comm bound;
    int nranks; /* GPUs in the bound communicator */
    nccl_comm_t comms[MAX_GPUS];
    cuda_stream_t streams[MAX_GPUS];
};

static void *sym(void *h, const char *name, int *missing, char *why, size_t len)
{
    void *p = dlsym(h, name);
    if (!p && !*missing) {
        *missing = 1;
        snprintf(why, len, "%s missing", name);
    }
    return p;
}

/* Load both libraries and count this rank's GPUs; 0, or -1 with why. */
static int load(struct scan_nccl *nc, char *why, size_t len)
{
    static const char *const cudarts[] = {"libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0",
                                          "libcudart.so"};
    nc->nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!nc->nccl) {
        snprintf(why, len, "libnccl.so.2: %s", dlerror());
        return -1;
    }
    for (size_t i = 0; i < sizeof(cudarts) / sizeof(cudarts[0]) && !nc->cudart; i++)
        nc->cudart = dlopen(cudarts[i], RTLD_NOW | RTLD_LOCAL);
    if (!nc->cudart) {
        snprintf(why, len, "no CUDA runtime (libcudart.so.12/13/11.0): %s", dlerror());
        return -1;
    }
    int m = 0;
    struct nccl_api *a = &nc->api;
    *(void **)&a->get_unique_id = sym(nc->nccl, "ncclGetUniqueId", &m, why, len);
    *(void **)&a->comm_init_rank = sym(nc->nccl, "ncclCommInitRank", &m, why, len);
    *(void **)&a->comm_destroy = sym(nc->nccl, "ncclCommDestroy", &m, why, len);
    *(void **)&a->all_reduce = sym(nc->nccl, "ncclAllReduce", &m, why, len);
    *(void **)&a->all_gather = sym(nc->nccl, "ncclAllGather", &m, why, len);
    *(void **)&a->group_start = sym(nc->nccl, "ncclGroupStart", &m, why, len);
    *(void **)&a->group_end = sym(nc->nccl, "ncclGroupEnd", &m, why, len);
    *(void **)&a->nccl_error = sym(nc->nccl, "ncclGetErrorString", &m, why, len);
    *(void **)&a->device_count = sym(nc->cudart, "cudaGetDeviceCount", &m, why, len);
    *(void **)&a->set_device = sym(nc->cudart, "cudaSetDevice", &m, why, len);
    *(void **)&a->cuda_malloc = sym(nc->cudart, "cudaMalloc", &m, why, len);
    *(void **)&a->cuda_free = sym(nc->cudart, "cudaFree", &m, why, len);
    *(void **)&a->memcpy = sym(nc->cudart, "cudaMemcpy", &m, why, len);
    *(void **)&a->stream_create = sym(nc->cudart, "cudaStreamCreate", &m, why, len);
    *(void **)&a->stream_sync = sym(nc->cudart, "cudaStreamSynchronize", &m, why, len);
    *(void **)&a->stream_destroy = sym(nc->cudart, "cudaStreamDestroy", &m, why, len);
    *(void **)&a->cuda_error = sym(nc->cudart, "cudaGetErrorString", &m, why, len);
    if (m)
        return -1;
    int n = 0, rc = a->device_count(&n);
    if (rc != 0 || n < 1) {
        snprintf(why, len, "no CUDA device: %s", rc ? a->cuda_error(rc) : "0 GPUs");
        return -1;
    }
    nc->ngpus = n < MAX_GPUS ? n : MAX_GPUS;
    return 0;
}

void scan_nccl_unbind(struct scan_nccl *nc)
{
    for (int g = 0; g < MAX_GPUS; g++) {
        if (nc->comms[g])
            nc->api.comm_destroy(nc->comms[g]);
        if (nc->streams[g]) {
            nc->api.set_device(g);
            nc->api.stream_destroy(nc->streams[g]);
        }
        nc->comms[g] = nc->streams[g] = NULL;
    }
    nc->bound = MPI_COMM_NULL;
}

int scan_nccl_gpus(const struct scan_nccl *nc)
{
    return nc->ngpus;
}

void scan_nccl_close(struct scan_nccl *nc)
{
    if (!nc)
        return;
    if (nc->api.comm_destroy)
        scan_nccl_unbind(nc);
    if (nc->nccl)
        dlclose(nc->nccl);
    if (nc->cudart)
        dlclose(nc->cudart);
    free(nc);
}

struct scan_nccl *scan_nccl_open(MPI_Comm comm, char *why, size_t len)
{
    struct scan_nccl *nc = calloc(1, sizeof(*nc));
    char mine[WHY_LEN] = "";
    int ok = nc && load(nc, mine, sizeof(mine)) == 0, all = 0, size, rank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all) { /* the first rank lacking it says why */
        char(*whys)[WHY_LEN] = calloc((size_t)size, WHY_LEN);
        int *oks = calloc((size_t)size, sizeof(int));
        MPI_Allgather(mine, WHY_LEN, MPI_CHAR, whys, WHY_LEN, MPI_CHAR, comm);
        MPI_Allgather(&ok, 1, MPI_INT, oks, 1, MPI_INT, comm);
        for (int r = 0; r < size; r++)
            if (!oks[r]) {
                snprintf(why, len, "%s: %s", scan_names[r], whys[r]);
                break;
            }
        free(whys);
        free(oks);
        scan_nccl_close(nc);
        return NULL;
    }
    int fewest = 0;
    MPI_Allreduce(&nc->ngpus, &fewest, 1, MPI_INT, MPI_MIN, comm);
    nc->ngpus = fewest;
    nc->bound = MPI_COMM_NULL;
    (void)rank;
    return nc;
}

/* Communicators for every GPU of every rank of comm; collective. 0 or -1. */
static int bind(struct scan_nccl *nc, MPI_Comm comm, char *why, size_t len)
{
    if (nc->bound == comm)
        return 0;
    scan_nccl_unbind(nc);
    int rank, size, rc = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    nccl_id_t id;
    memset(&id, 0, sizeof(id));
    if (rank == 0)
        rc = nc->api.get_unique_id(&id);
    MPI_Bcast(&rc, 1, MPI_INT, 0, comm);
    if (rc) {
        snprintf(why, len, "ncclGetUniqueId: %s", nc->api.nccl_error(rc));
        return -1;
    }
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
    nc->nranks = size * nc->ngpus;
    for (int g = 0; g < nc->ngpus && !rc; g++) {
        nc->api.set_device(g);
        rc = nc->api.stream_create(&nc->streams[g]);
    }
    if (rc) {
        snprintf(why, len, "cudaStreamCreate: %s", nc->api.cuda_error(rc));
        return -1;
    }
    nc->api.group_start();
    for (int g = 0; g < nc->ngpus && !rc; g++) {
        nc->api.set_device(g);
        rc = nc->api.comm_init_rank(&nc->comms[g], nc->nranks, id, rank * nc->ngpus + g);
    }
    int end = nc->api.group_end();
    rc = rc ? rc : end;
    if (rc) {
        snprintf(why, len, "ncclCommInitRank: %s", nc->api.nccl_error(rc));
        return -1;
    }
    nc->bound = comm;
    return 0;
}

/* One collective on every GPU, as a group. */
static int launch(struct scan_nccl *nc, int gather, void **send, void **recv, size_t count)
{
    int rc = nc->api.group_start();
    for (int g = 0; g < nc->ngpus && !rc; g++)
        rc = gather ? nc->api.all_gather(send[g], recv[g], count, NCCL_FLOAT32, nc->comms[g],
                                         nc->streams[g])
                    : nc->api.all_reduce(send[g], recv[g], count, NCCL_FLOAT32, NCCL_SUM,
                                         nc->comms[g], nc->streams[g]);
    int end = nc->api.group_end();
    return rc ? rc : end;
}

static int sync_all(struct scan_nccl *nc)
{
    int rc = 0;
    for (int g = 0; g < nc->ngpus && !rc; g++) {
        nc->api.set_device(g);
        rc = nc->api.stream_sync(nc->streams[g]);
    }
    return rc;
}

double scan_nccl_busbw(struct scan_nccl *nc, MPI_Comm comm, int gather, size_t bytes, int iters,
                       int *wrong, char *why, size_t len)
{
    int ok = bind(nc, comm, why, len) == 0, all = 0, rank;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all) {
        if (ok)
            snprintf(why, len, "NCCL communicator setup failed on another node");
        return -1;
    }
    MPI_Comm_rank(comm, &rank);
    /* nccl-tests' sizes: all_reduce of bytes; all_gather's output is bytes */
    int n = nc->nranks;
    size_t count = gather ? bytes / sizeof(float) / (size_t)n : bytes / sizeof(float);
    count = count ? count : 1;
    size_t out = gather ? count * (size_t)n : count;
    void *send[MAX_GPUS] = {0}, *recv[MAX_GPUS] = {0};
    float *host = malloc(sizeof(float) * (out > count ? out : count));
    int rc = 0, crc = 0;
    for (int g = 0; g < nc->ngpus && !crc; g++) {
        nc->api.set_device(g);
        for (size_t i = 0; i < count; i++)
            host[i] = (float)(rank * nc->ngpus + g + 1);
        crc = nc->api.cuda_malloc(&send[g], count * sizeof(float));
        crc = crc ? crc : nc->api.cuda_malloc(&recv[g], out * sizeof(float));
        crc = crc ? crc : nc->api.memcpy(send[g], host, count * sizeof(float), CUDA_H2D);
    }
    double t = 0;
    if (!crc) {
        rc = launch(nc, gather, send, recv, count); /* warm-up */
        crc = rc ? 0 : sync_all(nc);
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        for (int it = 0; it < iters && !rc; it++)
            rc = launch(nc, gather, send, recv, count);
        crc = rc || crc ? crc : sync_all(nc);
        t = (MPI_Wtime() - t0) / iters;
    }
    if (!rc && !crc) { /* check GPU 0's result */
        nc->api.set_device(0);
        crc = nc->api.memcpy(host, recv[0], out * sizeof(float), CUDA_D2H);
        float want = gather ? (float)n : (float)n * (float)(n + 1) / 2;
        if (!crc && host[out - 1] != want)
            *wrong = 1;
    }
    for (int g = 0; g < nc->ngpus; g++) {
        nc->api.set_device(g);
        if (send[g])
            nc->api.cuda_free(send[g]);
        if (recv[g])
            nc->api.cuda_free(recv[g]);
    }
    free(host);
    ok = !rc && !crc;
    if (rc)
        snprintf(why, len, "%s: %s", gather ? "ncclAllGather" : "ncclAllReduce",
                 nc->api.nccl_error(rc));
    else if (crc)
        snprintf(why, len, "CUDA: %s", nc->api.cuda_error(crc));
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
    double tmax = 0;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, comm);
    if (!ok) {
        if (!rc && !crc)
            snprintf(why, len, "a NCCL collective failed on another node");
        return -1;
    }
    double total = gather ? (double)out * sizeof(float) : (double)count * sizeof(float);
    double algbw = total / tmax / 1e9;
    return gather ? algbw * (n - 1) / n : algbw * 2.0 * (n - 1) / n;
}
