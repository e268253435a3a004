/* gpu: the gpu check. A node whose NVML sees GPUs (or that is expected to
 * have --expected-gpus) gets the agent's NVML checks (count, ECC, remapped
 * rows; src/health/gpu.c) and `dcgmi diag -r --level` when dcgmi is on PATH.
 * A node without GPUs runs mtc's burn-in for --seconds: the speed probes'
 * compute and memory-copy kernels and the bit-exact correctness probe
 * (src/health/probe.c), repeated until the time is up; its sustained
 * GFLOP/s and GB/s are judged against the pool's median (a throttled node
 * FAILs) and any wrong digest FAILs the node regardless.
 * An emulated node (--gpu-dir: the local provider's nodes/NODE/hw) is checked
 * as its agent checks it: with an emulated NVML library (--nvml-library) it
 * reads the node's nvml.state ($FAKE_NVML_STATE, as the agent's environment
 * has it); without one, its GPUs are the device files there — counted
 * against --expected-gpus — and it runs the burn-in ("emulated" in the
 * report). A node with no such files and no NVML stays a FAIL. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/mtc-scan/scan_mpi.h"
#include "health/health.h"

#define BURN_GEMM_N 256
#define BURN_COPY_BYTES (32u << 20)
#define GPU_CHECKS "gpu.count,gpu.ecc,gpu.remap,gpu.dcgm"
#define MAX_RES 4

/* One node's result, gathered to rank 0 as bytes. */
struct gpu_node {
    int gpus;     /* GPUs NVML sees (GPU path); the device files (emulated) */
    int burnin;   /* no GPUs: the burn-in ran */
    int emulated; /* emulated device files, no NVML: counted, then the burn-in */
    int state;  /* GPU path: the worst result; burn-in: the correctness probe's */
    int nres;
    struct health_result res[MAX_RES];
    char reason[300];
    int iterations, sdc_bad;
    double gflops, membw, seconds;
};

static void burn_in(const struct scan_opts *o, const struct health_ctx *ctx, struct gpu_node *g)
{
    const double flops = 2.0 * BURN_GEMM_N * BURN_GEMM_N * BURN_GEMM_N;
    double t_gemm = 0, t_copy = 0, t0 = MPI_Wtime();
    g->burnin = 1;
    g->state = HEALTH_PASS;
    do { /* one iteration each at least; wall time, so a throttled node shows */
        double c0 = MPI_Wtime(), gf = health_probe_gflops(BURN_GEMM_N, 1);
        t_gemm += gf > 0 ? flops / gf / 1e9 : MPI_Wtime() - c0;
        double bw = health_probe_membw(BURN_COPY_BYTES, 1);
        t_copy += bw > 0 ? 2.0 * BURN_COPY_BYTES / bw / 1e9 : 0;
        struct health_result r = {.status = HEALTH_PASS};
        health_sdc(ctx, &r);
        if (r.status == HEALTH_FAIL && !g->sdc_bad++)
            snprintf(g->reason, sizeof(g->reason), "sdc: %s", r.reason);
        g->iterations++;
    } while (MPI_Wtime() - t0 < o->seconds);
    g->seconds = MPI_Wtime() - t0;
    g->gflops = t_gemm > 0 ? flops * g->iterations / t_gemm / 1e9 : 0;
    g->membw = t_copy > 0 ? 2.0 * BURN_COPY_BYTES * g->iterations / t_copy / 1e9 : 0;
    if (g->sdc_bad)
        g->state = HEALTH_FAIL;
}

/* o->gpu_dir with %n as this node's name (SLURMD_NODENAME, set by Slurm for
 * the task), into out; "" when there is none to use. */
static void node_gpu_dir(const struct scan_opts *o, char *out, size_t len)
{
    const char *node = getenv("SLURMD_NODENAME");
    size_t w = 0;
    out[0] = '\0';
    for (const char *p = o->gpu_dir; *p && w + 1 < len; p++) {
        if (p[0] == '%' && p[1] == 'n') {
            if (!node || !*node || strchr(node, '/') || strstr(node, ".."))
                return (void)(out[0] = '\0');
            w += (size_t)snprintf(out + w, len - w, "%s", node);
            p++;
        } else {
            out[w++] = *p;
        }
    }
    out[w < len ? w : len - 1] = '\0';
}

/* The emulated GPU device files nvidia0..N-1 in dir. */
static int device_files(const char *dir)
{
    char path[PATH_MAX];
    int n = 0;
    for (;; n++) {
        snprintf(path, sizeof(path), "%s/nvidia%d", dir, n);
        if (access(path, F_OK) < 0)
            return n;
    }
}

static void run_node(const struct scan_opts *o, struct gpu_node *g)
{
    struct health_ctx ctx;
    mtc_error_t err;
    char hw[PATH_MAX] = "", state[PATH_MAX + 16];
    if (o->gpu_dir[0])
        node_gpu_dir(o, hw, sizeof(hw));
    /* an emulated NVML reads the node's state file, as the agent's does */
    snprintf(state, sizeof(state), "%s/nvml.state", hw);
    if (*hw && *o->nvml_library && access(state, R_OK) == 0)
        setenv("FAKE_NVML_STATE", state, 1);
    if (*hw && !*o->nvml_library && device_files(hw) > 0) {
        /* emulated devices, no NVML: the count the files give, then the burn-in */
        g->emulated = 1;
        g->gpus = device_files(hw);
    }
    if (health_ctx_init(&ctx, &err) < 0) {
        g->state = HEALTH_FAIL;
        snprintf(g->reason, sizeof(g->reason), "health checks unavailable: %s", err.text);
        return;
    }
    if (*o->nvml_library)
        snprintf(ctx.nvml_library, sizeof(ctx.nvml_library), "%s", o->nvml_library);
    ctx.expected_gpus = o->expected_gpus;
    ctx.policy.dcgm_diag_level = o->level;
    if (g->emulated) {
        burn_in(o, &ctx, g);
        if (o->expected_gpus && g->gpus != o->expected_gpus && g->state != HEALTH_FAIL) {
            g->state = HEALTH_FAIL;
            snprintf(g->reason, sizeof(g->reason),
                     "gpu.count: emulated: %d GPU device files, %d expected", g->gpus,
                     o->expected_gpus);
        }
        health_ctx_release(&ctx);
        return;
    }
    struct health_result count = {.status = HEALTH_PASS};
    health_gpu_count(&ctx, &count);
    g->gpus = (int)count.value;
    if (g->gpus == 0 && o->expected_gpus == 0) {
        health_gpu_end(&ctx);
        burn_in(o, &ctx, g);
    } else {
        if (ctx.expected_gpus == 0)
            ctx.expected_gpus = g->gpus;
        g->nres = health_run(&ctx, GPU_CHECKS, g->res, MAX_RES, &err);
        g->state = HEALTH_PASS;
        if (g->nres < 0) {
            g->nres = 0;
            g->state = HEALTH_FAIL;
            snprintf(g->reason, sizeof(g->reason), "%s", err.text);
        }
        for (int i = 0; i < g->nres; i++) /* the worst result names the reason */
            if ((int)g->res[i].status > g->state && g->res[i].status != HEALTH_UNKNOWN) {
                g->state = g->res[i].status;
                snprintf(g->reason, sizeof(g->reason), "%s: %s", g->res[i].check, g->res[i].reason);
            }
    }
    health_ctx_release(&ctx);
}

int scan_gpu(const struct scan_opts *o, json_t **report)
{
    struct gpu_node mine, *all = NULL;
    memset(&mine, 0, sizeof(mine));
    run_node(o, &mine);
    int size = scan_size, worst = HEALTH_PASS;
    if (scan_rank == 0)
        all = calloc((size_t)size, sizeof(*all));
    MPI_Request rq;
    MPI_Igather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine), MPI_BYTE, 0, MPI_COMM_WORLD, &rq);
    scan_wait_idle(&rq, 1);
    if (scan_rank == 0) {
        double *gf = calloc((size_t)size, sizeof(double)),
               *bw = calloc((size_t)size, sizeof(double));
        for (int i = 0; i < size; i++)
            if (all[i].burnin) {
                gf[i] = all[i].gflops;
                bw[i] = all[i].membw;
            }
        json_t *nodes = json_array();
        int burners = 0;
        for (int i = 0; i < size; i++) {
            struct gpu_node *g = &all[i];
            int s = g->state;
            char reason[400];
            snprintf(reason, sizeof(reason), "%s", g->reason);
            json_t *figs = json_object();
            if (g->burnin) {
                double mg, fg, mb, fb;
                int sg = scan_judge(gf, size, i, o->fail_fraction, &mg, &fg);
                int sb = scan_judge(bw, size, i, o->fail_fraction, &mb, &fb);
                burners++;
                /* emulated nodes share this host's CPUs: their speeds differ
                 * by scheduling, not hardware, and never fail a node (a WARN
                 * says it); a wrong digest still does */
                if (g->emulated) {
                    sg = sg == HEALTH_FAIL ? HEALTH_WARN : sg;
                    sb = sb == HEALTH_FAIL ? HEALTH_WARN : sb;
                }
                /* a wrong digest already FAILed and names itself; else the slower figure */
                if (s != HEALTH_FAIL && (sg == HEALTH_FAIL || sb == HEALTH_FAIL)) {
                    s = HEALTH_FAIL;
                    snprintf(reason, sizeof(reason), "burn-in: %s %.0f%% of the pool median",
                             sg == HEALTH_FAIL ? "compute" : "memory bandwidth",
                             100 * (sg == HEALTH_FAIL ? fg : fb));
                } else if (s == HEALTH_PASS && (sg == HEALTH_WARN || sb == HEALTH_WARN)) {
                    s = HEALTH_WARN;
                    snprintf(reason, sizeof(reason), "burn-in: %s %.0f%% of the pool median",
                             sg == HEALTH_WARN ? "compute" : "memory bandwidth",
                             100 * (sg == HEALTH_WARN ? fg : fb));
                }
                json_object_set_new(figs, "mode", json_string("burn-in"));
                if (g->emulated) { /* said in the reason too: a PASS keeps it */
                    json_object_set_new(figs, "emulated", json_true());
                    json_object_set_new(figs, "gpus", json_integer(g->gpus));
                    char r[200];
                    snprintf(r, sizeof(r), "emulated: %d GPU device files, no NVML to ask; %.120s",
                             g->gpus, s == HEALTH_PASS ? "the burn-in passed" : reason);
                    snprintf(reason, sizeof(reason), "%s", r);
                }
                json_object_set_new(figs, "seconds", scan_num(g->seconds));
                json_object_set_new(figs, "iterations", json_integer(g->iterations));
                json_object_set_new(figs, "gflops", scan_num(g->gflops));
                if (mg > 0) /* with two nodes: the other's figure */
                    json_object_set_new(figs, "gflopsPoolMedian", scan_num(mg));
                json_object_set_new(figs, "memGBps", scan_num(g->membw));
                if (mb > 0)
                    json_object_set_new(figs, "memGBpsPoolMedian", scan_num(mb));
                json_object_set_new(figs, "sdcMismatches", json_integer(g->sdc_bad));
            } else {
                json_object_set_new(figs, "mode", json_string("nvml"));
                json_object_set_new(figs, "gpus", json_integer(g->gpus));
                json_object_set_new(figs, "results", health_results_json(g->res, g->nres));
            }
            if (s == HEALTH_PASS && !g->emulated)
                *reason = 0;
            worst = s > worst && s != HEALTH_UNKNOWN ? s : worst;
            json_t *nd = scan_node(scan_names[i], s, reason);
            json_object_update(nd, figs);
            json_decref(figs);
            json_array_append_new(nodes, nd);
        }
        *report = json_pack("{s:s, s:s, s:i, s:i, s:i, s:o, s:o}", "check", "gpu", "state",
                            scan_state_name(worst), "burnInNodes", burners, "seconds", o->seconds,
                            "level", o->level, "failFraction", scan_num(o->fail_fraction), "nodes",
                            nodes);
        free(gf);
        free(bw);
    }
    free(all);
    return worst == HEALTH_FAIL;
}
