/* mtc-scan: the health scanner's MPI workload, one rank per node (srun or
 * mpirun). Checks (src/cmd/mtc-scan/, one file each):
 *   pipeline  the straggler check: a ring of sends over many microbatches,
 *             each node's rate judged against the pool's median, heatmap.
 *   pairs     pairwise bandwidth: all pairs up to --all-pairs-max nodes,
 *             else a random pairing (--seed) and a second one; suspects
 *             retested against passing nodes; bad node vs bad link.
 *   ring      all_reduce / all_gather bus bandwidth, 8 KiB..--max-bytes
 *             (nccl-tests' conventions), MPI or NCCL (--nccl).
 *   gpu       NVML checks and dcgmi diag on GPU nodes; on the others a
 *             burn-in (compute, memory bandwidth, bit-exact probe) judged
 *             against the pool's median.
 * Rank 0 prints one JSON report on stdout. Every report has "check", "state"
 * (PASS|WARN|FAIL) and "nodes": [{"node", "state", "reason" (when not PASS),
 * figures...}]; pairs also has "pairs": [{"nodes": [A, B], "state",
 * "busGBps", "thresholdGBps", "reason"}]. Thresholds: absolute with
 * --min-bus-gbps (pairs, ring), else measured-relative (--fail-fraction of
 * the pool's median). Exit 0 when nothing FAILed, 1 when something did, 2
 * on bad usage (one line on stderr). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/mtc-scan/scan_mpi.h"

typedef int (*check_fn)(const struct scan_opts *, json_t **);

static const struct {
    const char *name;
    check_fn fn;
} checks[] = {
    {"pipeline", scan_pipeline},
    {"pairs", scan_pairs},
    {"ring", scan_ring},
    {"gpu", scan_gpu},
};

/* Option setters: 0, or -1 when the value is out of range. */
static int set_size(struct scan_opts *o, const char *v)
{
    char *end;
    unsigned long long x = strtoull(v, &end, 0);
    o->max_bytes = (size_t)x;
    return *v && !*end && *v != '-' && x >= 8192 && x <= (256u << 20) ? 0 : -1;
}

static int set_int(int *dst, const char *v, long lo, long hi)
{
    char *end;
    long x = strtol(v, &end, 10);
    *dst = (int)x;
    return *v && !*end && x >= lo && x <= hi ? 0 : -1;
}

static int set_microbatches(struct scan_opts *o, const char *v)
{
    return set_int(&o->microbatches, v, 10, 100000);
}

static int set_fail(struct scan_opts *o, const char *v)
{
    char *end;
    o->fail_fraction = strtod(v, &end);
    return *v && !*end && o->fail_fraction > 0 && o->fail_fraction < 1 ? 0 : -1;
}

static int set_min_bus(struct scan_opts *o, const char *v)
{
    char *end;
    o->min_bus_gbps = strtod(v, &end);
    return *v && !*end && o->min_bus_gbps > 0 && o->min_bus_gbps <= 100000 ? 0 : -1;
}

static int set_all_pairs_max(struct scan_opts *o, const char *v)
{
    return set_int(&o->all_pairs_max, v, 2, 1000000);
}

static int set_seed(struct scan_opts *o, const char *v)
{
    char *end;
    o->seed = strtoull(v, &end, 10);
    o->seed_given = 1;
    return *v && !*end && isdigit((unsigned char)*v) ? 0 : -1;
}

static int set_seconds(struct scan_opts *o, const char *v)
{
    return set_int(&o->seconds, v, 1, 86400);
}

static int set_level(struct scan_opts *o, const char *v)
{
    return set_int(&o->level, v, 1, 3);
}

static int set_expected_gpus(struct scan_opts *o, const char *v)
{
    return set_int(&o->expected_gpus, v, 0, 64);
}

/* A library name or path of [A-Za-z0-9/._+-] (healthPolicy.nvmlLibrary's
 * rule): it reaches dlopen. */
static int set_nvml(struct scan_opts *o, const char *v)
{
    if (!*v || strlen(v) >= sizeof(o->nvml_library))
        return -1;
    for (const char *s = v; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("/._+-", *s))
            return -1;
    snprintf(o->nvml_library, sizeof(o->nvml_library), "%s", v);
    return 0;
}

/* The directory of a node's emulated hardware (the local provider's
 * nodes/%n/hw): an absolute path of [A-Za-z0-9/._+-%], "%n" the only escape. */
static int set_gpu_dir(struct scan_opts *o, const char *v)
{
    if (v[0] != '/' || strlen(v) >= sizeof(o->gpu_dir) || strstr(v, ".."))
        return -1;
    for (const char *s = v; *s; s++)
        if ((!isalnum((unsigned char)*s) && !strchr("/._+-%", *s)) || (*s == '%' && s[1] != 'n'))
            return -1;
    snprintf(o->gpu_dir, sizeof(o->gpu_dir), "%s", v);
    return 0;
}

static const struct {
    const char *flag;
    int (*set)(struct scan_opts *, const char *);
    const char *range; /* for the error line */
} options[] = {
    {"--max-bytes", set_size, "8192..268435456"},
    {"--microbatches", set_microbatches, "10..100000"},
    {"--fail-fraction", set_fail, "between 0 and 1"},
    {"--min-bus-gbps", set_min_bus, "a positive number of GB/s up to 100000"},
    {"--all-pairs-max", set_all_pairs_max, "2..1000000"},
    {"--seed", set_seed, "a non-negative integer"},
    {"--seconds", set_seconds, "1..86400"},
    {"--level", set_level, "1..3 (dcgmi diag -r)"},
    {"--expected-gpus", set_expected_gpus, "0..64"},
    {"--nvml-library", set_nvml, "a library name or path of up to 255 of [A-Za-z0-9/._+-]"},
    {"--gpu-dir", set_gpu_dir, "an absolute directory of [A-Za-z0-9/._+-], %n the node's name"},
};

#define USAGE                                                                                      \
    "usage: mtc-scan pipeline|pairs|ring|gpu [--max-bytes N] [--microbatches N] "                  \
    "[--fail-fraction F] [--min-bus-gbps X] [--all-pairs-max N] [--seed N] [--nccl] "              \
    "[--seconds S] [--level 1-3] [--expected-gpus N] [--nvml-library PATH] [--gpu-dir DIR]\n"

/* 0, 1 after --help (the usage on stdout), or -1 after saying what is wrong. */
static int parse(int argc, char **argv, struct scan_opts *o, check_fn *fn)
{
    *o = (struct scan_opts){.max_bytes = 16u << 20,
                            .microbatches = 300,
                            .fail_fraction = 0.5,
                            .all_pairs_max = 8,
                            .seconds = 10,
                            .level = 1};
    *fn = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return fputs(USAGE, stdout), 1;
        size_t k;
        for (k = 0; k < sizeof(options) / sizeof(options[0]); k++)
            if (strcmp(argv[i], options[k].flag) == 0)
                break;
        if (k < sizeof(options) / sizeof(options[0])) {
            if (i + 1 >= argc)
                return fprintf(stderr, "mtc-scan: %s needs a value\n", argv[i]), -1;
            if (options[k].set(o, argv[i + 1]) < 0)
                return fprintf(stderr, "mtc-scan: %s %.80s: %s\n", argv[i], argv[i + 1],
                               options[k].range),
                       -1;
            i++;
            continue;
        }
        if (strcmp(argv[i], "--nccl") == 0) {
            o->nccl = 1;
            continue;
        }
        int found = 0;
        for (k = 0; k < sizeof(checks) / sizeof(checks[0]) && !o->check && !found; k++)
            if (strcmp(argv[i], checks[k].name) == 0) {
                o->check = checks[k].name;
                *fn = checks[k].fn;
                found = 1;
            }
        if (found)
            continue;
        return fprintf(stderr, "mtc-scan: unknown argument \"%.80s\"\n", argv[i]), -1;
    }
    if (!o->check)
        return fprintf(stderr, USAGE), -1;
    return 0;
}

int main(int argc, char **argv)
{
    struct scan_opts o;
    check_fn fn;
    int p = parse(argc, argv, &o, &fn);
    if (p)
        return p < 0 ? 2 : 0; /* 1: --help */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &scan_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &scan_size);
    if (!o.seed_given) { /* rank 0's clock, shared (the report names it) */
        unsigned long long s = (unsigned long long)time(NULL);
        MPI_Bcast(&s, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
        o.seed = s;
    }
    scan_gather_names();
    json_t *report = NULL;
    int failed = fn(&o, &report);
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD); /* rank 0 judged */
    if (scan_rank == 0 && report) {
        json_dumpf(report, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(6));
        fputc('\n', stdout);
    }
    json_decref(report);
    fflush(stdout);
    free(scan_names);
    MPI_Finalize();
    return failed ? 1 : 0;
}
