/* health: node health checks (GPU via NVML loaded with dlopen, kernel-log XIDs,
 * disk, NIC, speed and silent-data-corruption probes, Slurm daemons, shared
 * storage), the
 * healthPolicy section of the cluster spec, and the mtc-agent config file. */
#ifndef MTC_HEALTH_H
#define MTC_HEALTH_H

#include <jansson.h>
#include <limits.h>
#include <stdint.h>

#include "common/common.h"
#include "schema/schema.h"

/* A check's verdict; a node no report has reached yet (only its remediation
 * state is known) is UNKNOWN. Names: health_status_enum (PASS, WARN, FAIL,
 * UNKNOWN); a check result is one of the first three (health_result_status_enum). */
enum health_status { HEALTH_PASS, HEALTH_WARN, HEALTH_FAIL, HEALTH_UNKNOWN };
extern const struct schema_enum health_status_enum, health_result_status_enum;

/* The remediation a failure asks for, in escalating order; the controller
 * may escalate further (restart limits) but never de-escalate. */
enum health_severity {
    HEALTH_SEV_NONE,
    HEALTH_SEV_RESTART, /* restart a daemon / requeue the job */
    HEALTH_SEV_REBOOT,  /* reboot the node (GPU reset) */
    HEALTH_SEV_REIMAGE, /* wipe local disks and reinstall */
    HEALTH_SEV_REPLACE, /* the hardware is bad: replace the node */
};
/* NONE, RESTART, REBOOT, REIMAGE, REPLACE */
extern const struct schema_enum health_severity_enum;

/* Why a check runs: the agent's loop / HealthCheckProgram, or a job's
 * prolog/epilog. Slow checks (gpu.dcgm) run only in the prolog or by name. */
enum health_mode { HEALTH_MODE_HEALTH, HEALTH_MODE_PROLOG, HEALTH_MODE_EPILOG };
/* HEALTH, PROLOG, EPILOG (reportHealth's "mode") */
extern const struct schema_enum health_mode_enum;

struct health_result {
    char check[32]; /* table name, e.g. "gpu.ecc" */
    enum health_status status;
    int severity;     /* enum health_severity; NONE unless FAIL */
    char reason[256]; /* one line; says what was measured against what */
    double value;     /* the measured figure (count, °C, GFLOP/s, %free, ...) */
};

#define HEALTH_MAX_CHECKS 32
#define HEALTH_MAX_XIDS 32
#define HEALTH_MAX_MOUNTS 33 /* the home storage and 16 filestores and 16 lustres */

/* The canonical healthPolicy as C values (see docs/health.md for each field). */
struct health_policy {
    char checks[HEALTH_MAX_CHECKS][32]; /* enabled check names or families */
    int nchecks;
    int interval_seconds;        /* agent loop period */
    int slurm_interval_seconds;  /* Slurm HealthCheckInterval */
    int report_every_seconds;    /* report at least this often */
    int gpu_max_uncorrected_ecc; /* volatile uncorrected ECC errors allowed */
    int gpu_max_retired_pages;   /* double-bit retired pages allowed */
    int gpu_temp_warn_c, gpu_temp_fail_c;
    int gpu_throttle_fail;         /* hardware slowdown: FAIL instead of WARN */
    int xid_fail[HEALTH_MAX_XIDS]; /* XIDs that FAIL; others WARN */
    int nxid_fail;
    int dcgm_diag_level; /* dcgmi diag -r N in the prolog; 0 = off */
    double disk_warn_free_percent, disk_min_free_percent, disk_min_free_inodes_percent;
    char nic_interface[32];                          /* "" = the default-route interface */
    double speed_warn_fraction, speed_fail_fraction; /* of the baseline */
    int probe_interval_seconds;                      /* costly probes rerun at most this often */
    int max_concurrent_remediations; /* per cluster, at once (mtcd; docs/health.md) */
    double max_drained_fraction;     /* of a node pool out of service at once (mtcd) */
};

struct health_runtime; /* kernel-log position, latched XIDs, NVML handle */

struct health_ctx {
    enum health_mode mode;
    char node[64];
    char home_dir[PATH_MAX];       /* cluster's shared dir ("" = skip) */
    char local_dir[PATH_MAX];      /* node-local scratch ("" = skip) */
    char checkpoint_dir[PATH_MAX]; /* ("" = skip) */
    char nvml_library[PATH_MAX];   /* dlopen name/path, default "libnvidia-ml.so.1" */
    char kernel_log[PATH_MAX];     /* default "/dev/kmsg"; a plain file works too */
    char state_dir[PATH_MAX];      /* "" = keep the kernel-log position in memory only */
    int expected_gpus;
    char slurmd_pid_file[PATH_MAX];            /* "" = skip */
    int slurmd_port;                           /* 0 = do not probe the port */
    char munge_socket[PATH_MAX];               /* "" = skip */
    double baseline_gflops, baseline_mem_gbps; /* 0 = no baseline: report only */
    char mounts[HEALTH_MAX_MOUNTS][256];       /* shared mounts that must be in place */
    int nmounts;
    char experiment_root[PATH_MAX];            /* shared by every node ("" = skip) */
    char storage_marker[PATH_MAX];             /* the controller's marker in it */
    char storage_marker_content[64];           /* what the marker must hold */
    struct health_policy policy;
    struct health_runtime *rt; /* owned; created by health_ctx_init */
};

/* One row of the check table. */
struct health_check {
    const char *name;
    const char *family; /* "gpu", "disk", "nic", "speed", "sdc", "daemon", "storage" */
    int (*fn)(const struct health_ctx *ctx, struct health_result *r);
    int severity;     /* default severity of a FAIL */
    int slow;         /* runs only in the prolog or when named */
    int costly;       /* a probe: re-run at most every probeIntervalSeconds per ctx */
    const char *what; /* one line for `mtc-agent checks` and the docs */
};

/* The static check table, terminated by a row with name NULL. */
extern const struct health_check health_checks[];

/* Defaults everywhere, canonical default policy, and the runtime (which
 * remembers the kernel log's end as of now). 0, or -1 with err. */
int health_ctx_init(struct health_ctx *ctx, mtc_error_t *err);
/* Frees the runtime (closes the kernel log, unloads NVML). NULL-safe. */
void health_ctx_release(struct health_ctx *ctx);

/* Apply an mtc-agent config object (format in docs/health.md; snake_case or
 * camelCase; unknown fields are errors naming the field) to an initialised
 * ctx. Cluster/transport fields (clusterId, socket, url, ...) are ignored
 * here; the agent reads them. 0, or -1 + errno EINVAL and err. */
int health_ctx_configure(struct health_ctx *ctx, const json_t *config, mtc_error_t *err);

/* Run the enabled checks (only == NULL) or the ones named in `only`
 * (comma-separated check names or families). Fills out[0..n) and returns n;
 * -1 + err for an unknown name in `only` or max too small. */
int health_run(const struct health_ctx *ctx, const char *only, struct health_result *out, int max,
               mtc_error_t *err);

/* Names for the wire: "PASS"/"WARN"/"FAIL"/"UNKNOWN" ("FAIL" for a value out
 * of range), "NONE"/"RESTART"/.../"REPLACE" ("NONE" out of range). */
const char *health_status_name(enum health_status s);
const char *health_severity_name(int sev);

/* [{"check","status","severity","reason","value"}...]; caller owns. */
json_t *health_results_json(const struct health_result *r, int n);

/* An agent's side of :reportHealth (report.c): where and as whom it reports —
 * mtcd's unix socket, or its URL (https trusting ca_file when set), and the
 * node's token ("" = none). */
struct health_reporter {
    char project[64], location[64], cluster[64];
    char socket[PATH_MAX], url[1024], token[512], ca_file[PATH_MAX];
};
/* The body {"nodeId","mode","results"}; results (health_results_json) is
 * stolen. Caller owns. */
json_t *health_report_body(const char *node, enum health_mode mode, json_t *results);
/* POST body (JSON text) to the cluster's :reportHealth. 0 on a 2xx answer,
 * else -1 + err; *status (may be NULL) gets the HTTP status, 0 when mtcd
 * did not answer (5 s timeout). */
int health_report_post(const struct health_reporter *rep, const char *body, long *status,
                       mtc_error_t *err);

/* mtcd's side of :reportHealth: parse a "results" array strictly (known
 * check names, PASS/WARN/FAIL, NONE..REPLACE, reason a string up to 255
 * bytes, value a number; unknown fields rejected). Returns the count, or -1 +
 * errno EINVAL and err naming the element ("results[2].status: must be one
 * of PASS, WARN, FAIL"). */
int health_results_parse(const json_t *results, struct health_result *out, int max,
                         mtc_error_t *err);

/* reportFaultyNodes' faultReasons[].behavior for a failed check:
 * gpu.* -> UNRECOVERABLE_GPU_ERROR, sdc -> SILENT_DATA_CORRUPTION,
 * speed.* -> PERFORMANCE, others -> BEHAVIOR_UNSPECIFIED. */
const char *health_fault_behavior(const char *check);

/* Worst status over r[0..n) and, among FAILs, the highest severity. */
enum health_status health_worst(const struct health_result *r, int n, int *severity);

/* The healthPolicy field table (the cluster spec's nests it). */
extern const struct schema health_policy_schema;

/* Validate a healthPolicy object (snake_case or camelCase; NULL = all
 * defaults) and return its canonical camelCase form with every default
 * filled in. NULL + errno EINVAL and a one-line err naming the field
 * ("healthPolicy.diskMinFreePercent: must be a number from 0 to 100").
 * Caller owns the result. */
json_t *health_policy_normalize(const json_t *in, mtc_error_t *err);

/* Canonical (or raw: it is normalized first) policy JSON -> C struct. 0/-1+err. */
int health_policy_parse(const json_t *in, struct health_policy *out, mtc_error_t *err);

/* ---- internal to the module (one file per check family) ---- */
int health_gpu_count(const struct health_ctx *, struct health_result *);
int health_gpu_ecc(const struct health_ctx *, struct health_result *);
int health_gpu_remap(const struct health_ctx *, struct health_result *);
int health_gpu_temp(const struct health_ctx *, struct health_result *);
int health_gpu_throttle(const struct health_ctx *, struct health_result *);
int health_gpu_dcgm(const struct health_ctx *, struct health_result *);
int health_xid(const struct health_ctx *, struct health_result *);
int health_disk(const struct health_ctx *, struct health_result *);
int health_nic(const struct health_ctx *, struct health_result *);
int health_daemon_slurmd(const struct health_ctx *, struct health_result *);
int health_daemon_munged(const struct health_ctx *, struct health_result *);
int health_speed_compute(const struct health_ctx *, struct health_result *);
int health_speed_membw(const struct health_ctx *, struct health_result *);
int health_sdc(const struct health_ctx *, struct health_result *);
int health_storage_shared(const struct health_ctx *, struct health_result *);
/* The SDC probe's digest (the check compares it with the known answer). */
uint64_t health_sdc_digest(void);
/* The speed probes' kernels, for repeated use (mtc-scan's burn-in): the best
 * GFLOP/s of reps n x n float matrix products, the best GB/s (read + write)
 * of reps copies of bytes; 0 when out of memory. */
double health_probe_gflops(int n, int reps);
double health_probe_membw(size_t bytes, int reps);

struct health_runtime *health_rt_create(const struct health_ctx *ctx, mtc_error_t *err);
void health_rt_destroy(struct health_runtime *rt);
/* A costly check's result from less than probeIntervalSeconds ago, or NULL. */
struct health_result *health_rt_cached(const struct health_ctx *ctx, int idx);
void health_rt_cache(const struct health_ctx *ctx, int idx, const struct health_result *r);
/* End of one pass: shut NVML down if a GPU check opened it. */
void health_gpu_end(const struct health_ctx *ctx);
/* Reporting helper for check functions: printf into r->reason, set status
 * (and severity when sev >= 0). Returns 0. */
int health_set(struct health_result *r, enum health_status st, int sev, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- speeds against peers (judge.c): the agent's straggler comparison, the
 * scanner's pairs and burn-in ---- */
#define HEALTH_SPEED_MIN_PEERS 2
/* Median of v[0..n) (sorts v in place); 0 when n is 0. */
double health_median(double *v, int n);
/* value against the median of peers[0..npeers) (sorted in place): HEALTH_FAIL
 * below fail_fraction x median, HEALTH_WARN below warn_fraction x median, else
 * HEALTH_PASS; -1 (no verdict) with fewer than HEALTH_SPEED_MIN_PEERS peers or
 * a zero median. Sets *median and *fraction (value / median) on a verdict. */
int health_speed_judge(double value, double *peers, int npeers, double warn_fraction,
                       double fail_fraction, double *median, double *fraction);

/* ---- a job's stopped and zombie processes on this node (ranks.c) ---- */

#define HEALTH_RANKS_MAX 256
struct health_rank_seen {
    int pid, rank;  /* rank: RANK or SLURM_PROCID of the process (its parent's for a zombie) */
    char state;     /* 'T' stopped, 'Z' zombie */
    double since;   /* first seen so */
    int live, reported;
};
struct health_rank_watch {
    char job[32], node[64], own_step[32]; /* own_step: the watcher's, left out */
    double after;                         /* seconds a problem lasts before it is reported */
    struct health_rank_seen seen[HEALTH_RANKS_MAX];
    int nseen;
};
typedef void (*health_rank_fn)(void *arg, int pid, int rank, char state, double for_s);
/* One pass over /proc: fn once for each problem that has lasted w->after
 * seconds by now. The number reported, or -1 when /proc cannot be read. */
int health_ranks_scan(struct health_rank_watch *w, double now, health_rank_fn fn, void *arg);

#endif
