/* scan_mpi: what mtc-scan's checks share — the options, this rank and the
 * ranks' node names, idle waiting, the pool-median judge and the report
 * helpers. Each check builds its JSON report (jansson) on rank 0. */
#ifndef MTC_SCAN_MPI_H
#define MTC_SCAN_MPI_H

#include <jansson.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#define SCAN_NAME_LEN 64

struct scan_opts {
    const char *check;
    size_t max_bytes;
    int microbatches;
    double fail_fraction;
    double min_bus_gbps; /* absolute threshold (pairs, ring); 0 = measured-relative */
    int all_pairs_max;   /* pairs: all pairs up to this many nodes */
    uint64_t seed;       /* pairs: the random pairing's seed */
    int seed_given;
    int seconds;            /* gpu: burn-in time */
    int level;              /* gpu: dcgmi diag -r LEVEL */
    char nvml_library[256]; /* gpu: dlopen name or path ("" = libnvidia-ml.so.1) */
    int expected_gpus;      /* gpu: per node; 0 = what NVML reports */
    char gpu_dir[256];      /* gpu: the node's emulated hardware ("%n": its name; "" = none) */
    int nccl;               /* ring, pairs: NCCL when present */
};

extern int scan_rank, scan_size;
extern char (*scan_names)[SCAN_NAME_LEN];

/* Fill scan_names (SLURMD_NODENAME, else host:rank) on every rank. */
void scan_gather_names(void);
/* Wait for requests sleeping between polls (a waiting rank leaves its CPU
 * to the ranks being measured). */
void scan_wait_idle(MPI_Request *rq, int n);
/* Wait for the requests of a measurement: polled flat out for SCAN_SPIN_S —
 * a fast transfer is timed exactly, and one over shared memory, which moves
 * a fragment only while both ends poll, is not slowed by naps when its
 * partner is descheduled for a time slice or two on a busy node — then with
 * sleeps of 1/64 of the time waited so far, SCAN_NAP_S at most: each step of
 * a transfer on a slow link (a collective's rounds progress only when
 * polled) is noticed within 1.6% or 250 us, and its ranks leave their CPUs
 * to the node's work instead of spinning in Open MPI's progress loop for
 * the whole transfer. */
#define SCAN_SPIN_S 0.02
#define SCAN_NAP_S 0.00025
void scan_wait_measured(MPI_Request *rq, int n);
/* Judge v[i] against the median of the others — with one other, against
 * it: enum health_status (UNKNOWN with no other measured, *median then 0);
 * *median, *frac set. */
int scan_judge(const double *v, int n, int i, double fail, double *median, double *frac);
/* "PASS", "WARN", "FAIL", "UNKNOWN" */
const char *scan_state_name(int s);
/* A JSON number (0 for inf/nan; printed with 6 significant digits). */
json_t *scan_num(double v);
/* {"node": NAME, "state": S} plus "reason" when reason is non-empty. */
json_t *scan_node(const char *name, int state, const char *reason);

int scan_pipeline(const struct scan_opts *o, json_t **report);
int scan_pairs(const struct scan_opts *o, json_t **report);
int scan_ring(const struct scan_opts *o, json_t **report);
int scan_gpu(const struct scan_opts *o, json_t **report);

/* NCCL through dlopen (nccl.c). */
struct scan_nccl;
/* Load libnccl.so.2 and libcudart and find this rank's GPUs, collectively
 * over comm: NULL on every rank unless every rank has them, with why (on
 * this rank) saying what was missing where. */
struct scan_nccl *scan_nccl_open(MPI_Comm comm, char *why, size_t len);
void scan_nccl_close(struct scan_nccl *nc);
/* Drop the communicators made for the last comm (before that comm is freed:
 * a later comm may reuse its handle). */
void scan_nccl_unbind(struct scan_nccl *nc);
/* GPUs each rank drives. */
int scan_nccl_gpus(const struct scan_nccl *nc);
/* Bus bandwidth (GB/s, nccl-tests' formula) of all_reduce (gather = 0) or
 * all_gather (gather = 1) of bytes per GPU over every GPU of comm's ranks;
 * the result checked (*wrong set when not). -1 with why on a NCCL/CUDA
 * error. Collective over comm. */
double scan_nccl_busbw(struct scan_nccl *nc, MPI_Comm comm, int gather, size_t bytes, int iters,
                       int *wrong, char *why, size_t len);
/* A check's NCCL (common.c): with --nccl, scan_nccl_open over every rank
 * (NULL with why when some rank lacks it); without, NULL. Collective. */
struct scan_nccl *scan_nccl_for(const struct scan_opts *o, char *why, size_t len);
/* With --nccl, the report's "nccl": "used: N GPUs per node" or
 * "not available: WHY". */
void scan_nccl_report(const struct scan_opts *o, json_t *report, const struct scan_nccl *nc,
                      const char *why);

#endif
