/* healthscan internal: what the health scan's files share — the request
 * checks (healthscan_request.c), the job (healthscan_job.c), the report
 * (healthscan_report.c) and the operation that runs them (healthscan.c).
 * Included by those four only. */
#ifndef MTC_CONTROL_HEALTHSCAN_INTERNAL_H
#define MTC_CONTROL_HEALTHSCAN_INTERNAL_H

#include <limits.h>

#include "control/healthscan.h"
#include "control/internal.h"

/* A scan job waits at most this long to start, and runs at most this long. */
#define SCAN_PENDING_S 120
#define SCAN_LIMIT_S 1800
/* One mode (an srun step) at most this long: a rank that never starts must
 * not hold the others. */
#define SCAN_STEP_S 600

/* The mtc-scan modes each check (enum control_scan_check) runs, in order,
 * NULL-terminated. */
extern const char *const healthscan_modes[][3];

/* The cluster's slurm.conf (and, on hosts, the mtc-scan copied there and the
 * MPI network). */
struct healthscan_target {
    char conf[PATH_MAX], scan[PATH_MAX], net[64];
};

/* cluster id's slurm.conf, and on hosts the mtc-scan copied there and the
 * MPI network, into t. 0, or -1 + err. */
int healthscan_target(struct control *c, const char *id, struct healthscan_target *t,
                      mtc_error_t *err);

/* What the nodes' machine type asks of mtc-scan: the catalog's absolute
 * thresholds (NCCL bus bandwidth) for GPU types — on hosts only: emulated GPU
 * nodes have no NCCL and are judged measured-relative — its GPU count, and the
 * NVML library the cluster's healthPolicy names. Mixed types: none of these. */
struct healthscan_machine {
    double min_pair, min_allreduce;
    int gpus;
    const char *nvml; /* borrowed from the spec */
    /* a local cluster's emulated hardware, nodes/%n/hw: mtc-scan checks an
     * emulated node as its agent does (its device files or emulated NVML) */
    char gpu_dir[PATH_MAX];
};
void healthscan_machine_opts(const struct store_cluster *cl, const json_t *nodes,
                             struct healthscan_machine *m);

/* ---- the job (healthscan_job.c) ---- */

/* The scan's directory for operation op_id, made 0700 and root's: the
 * cluster's own directory on a local cluster, else
 * <experimentRoot>/.mtc-healthscans with every directory from / to it
 * checked. 0, or -1 + err. */
int healthscan_dir(struct control *c, const struct store_cluster *cl, const char *op_id, char *dir,
                   size_t len, mtc_error_t *err);
/* The batch script at path: one srun step per mode, each writing MODE.json,
 * MODE.err and MODE.rc into dir; "done" at the end. 0, or -1 + err. */
int healthscan_write_script(const char *path, const char *dir, const char *scan,
                            const struct healthscan_target *t, const struct healthscan_machine *mo,
                            const json_t *req, mtc_error_t *err);
/* The mtc-scan the nodes run into buf: the copy on the hosts, else the one
 * built beside mtcd. 0, or -1 + err. */
int healthscan_program(const struct control *c, const struct store_cluster *cl,
                       const struct healthscan_target *t, char *buf, size_t len, mtc_error_t *err);
/* A file the scan job wrote under dir, at most 4 MiB (NULL: missing or
 * larger); caller frees. */
char *healthscan_read_text(const char *dir, const char *name);
/* Wait for job to leave Slurm's queue; op's progress names its step. 0, or
 * -1 + err (cancelled after waiting too long to start or running too long). */
int healthscan_wait_job(struct control *c, const struct store_op *op, const char *conf,
                        const char *job, const char *dir, mtc_error_t *err);

/* ---- the report (healthscan_report.c) ---- */

/* The last line of text that names an error, else its last non-empty line,
 * into buf ("" for none). */
void healthscan_last_line(const char *text, char *buf, size_t len);
/* The report of the files under dir for req's checks (caller owns). */
json_t *healthscan_build_report(const json_t *req, const char *dir, const char *job);

#endif
