/* train_speed: CPU trainer throughput. `train_speed sgemm [N]` prints this machine's
 * sgemm GFLOP/s on N x N matrices (all threads); `train_speed model PRESET B T STEPS
 * PEAK_GFLOPS [CONFIG_JSON]` (CONFIG_JSON: overrides of the preset, e.g. '{"window":0}')
 * times forward+backward steps and prints tokens/s, achieved GFLOP/s, MFU
 * against the sgemm peak (the given one or one sampled between steps, the higher), and
 * peak RSS. Built and run by bench/train_speed.sh. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <jansson.h>

#include "common/common.h"
#include "train/cpu/kernels.h"
#include "train/model.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU seconds of all our threads: on a shared machine this counts the time we got. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct sq {
    int n;
    float *a, *b, *c;
};
static void sq_init(struct sq *q, int n)
{
    q->n = n;
    q->a = malloc(sizeof(float) * n * n), q->b = malloc(sizeof(float) * n * n);
    q->c = calloc((size_t)n * n, sizeof(float));
    for (long i = 0; i < (long)n * n; i++)
        q->a[i] = (float)(i % 7) * 0.1f, q->b[i] = (float)(i % 5) * 0.1f;
}
static void sq_free(struct sq *q)
{
    free(q->a), free(q->b), free(q->c);
}
/* GFLOP/s of one n^3 product the trainer's way (OpenMP blocks of single-threaded sgemm);
 * *per_cpu gets GFLOP per CPU-second. */
static double sq_rate(struct sq *q, double *per_cpu)
{
    int n = q->n;
    double t0 = now_s(), c0 = cpu_s();
    cpu_matmul_forward(q->c, n, NULL, q->a, q->b, NULL, n, n, n);
    double gf = 2.0 * n * n * (double)n / 1e9;
    if (per_cpu)
        *per_cpu = gf / (cpu_s() - c0);
    return gf / (now_s() - t0);
}

static int bench_sgemm(int n)
{
    struct sq q;
    sq_init(&q, n);
    float *a = q.a, *b = q.b, *c = q.c;
    // Two ways to use all threads: OpenBLAS's own pool (one threaded call), and the
    // trainer's way (OpenMP blocks, one single-threaded sgemm each). The peak is the
    // better of the two, best of several runs.
    double best_blas = 0, best_split = 0;
    for (int rep = 0; rep < 8; rep++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                    n);
        double gf = 2.0 * n * n * (double)n / (now_s() - t0) / 1e9;
        best_blas = gf > best_blas ? gf : best_blas;
    }
    for (int rep = 0; rep < 8; rep++) {
        double gf = sq_rate(&q, NULL);
        best_split = gf > best_split ? gf : best_split;
    }
    printf("sgemm_gflops %.1f openblas_threads %.1f openmp_blocks %.1f\n",
           best_blas > best_split ? best_blas : best_split, best_blas, best_split);
    sq_free(&q);
    return 0;
}

static int bench_model(const char *preset, int B, int T, int steps, double peak,
                       const char *overrides)
{
    struct model_config cfg;
    mtc_error_t err = {{0}};
    if (model_preset(preset, &cfg, &err) < 0) {
        fprintf(stderr, "%s\n", err.text);
        return 1;
    }
    if (overrides) {
        json_t *j = json_loads(overrides, 0, NULL);
        int rc = j ? model_config_apply_json(&cfg, j, &err) : -1;
        json_decref(j);
        if (rc < 0) {
            fprintf(stderr, "config %s: %s\n", overrides, j ? err.text : "not JSON");
            return 1;
        }
    }
    struct model *m = model_create(&cfg, &err);
    if (!m || model_reserve(m, B, T, &err) < 0) {
        fprintf(stderr, "%s\n", err.text);
        return 1;
    }
    model_init_weights(m, 1);
    int32_t *x = malloc(sizeof(int32_t) * (B * T + 1));
    for (int i = 0; i < B * T + 1; i++)
        x[i] = (int32_t)((i * 2654435761u) % (unsigned)cfg.vocab_size);
    // The best step is the figure: this machine may be shared, and other load only
    // ever slows a step down. The sgemm peak is sampled between the steps the same way
    // (best of), so both see the same machine. The mean step is printed too.
    struct sq q;
    sq_init(&q, 2048);
    double tf = 1e30, tb = 1e30, tsum = 0, loss = 0, cpu_step = 1e30, cpu_peak = 0;
    for (int s = -1; s < steps; s++) { // step -1 warms up (page faults, BLAS buffers)
        double pc, gf = sq_rate(&q, &pc);
        peak = gf > peak ? gf : peak;
        cpu_peak = pc > cpu_peak ? pc : cpu_peak;
        model_zero_grad(m);
        double t0 = now_s(), c0 = cpu_s();
        loss = model_forward(m, x, x + 1, NULL, 0, B, T);
        double t1 = now_s();
        model_backward(m, NULL);
        double t2 = now_s(), c2 = cpu_s();
        if (s >= 0 && c2 - c0 < cpu_step)
            cpu_step = c2 - c0;
        if (s >= 0 && t2 - t0 < tf + tb)
            tf = t1 - t0, tb = t2 - t1;
        if (s >= 0)
            tsum += t2 - t0;
    }
    sq_free(&q);
    double tok_s = (double)B * T / (tf + tb), tok_s_mean = (double)B * T * steps / tsum;
    double fpt = model_flops_per_token(m, T);
    double gflops = fpt * tok_s / 1e9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%s B=%d T=%d params=%zu loss=%.3f fwd_ms=%.1f bwd_ms=%.1f tokens_per_s=%.0f "
           "(mean %.0f) gflops=%.1f peak_gflops=%.1f mfu=%.1f%% sgemm_bound_tokens_per_s=%.0f ratio_to_bound=%.2fx "
           "peak_rss_mb=%.0f | cpu-time basis: %.1f GFLOP per cpu-s vs sgemm %.1f, "
           "ratio_to_bound=%.2fx\n",
           preset, B, T, model_nparams(m), loss, tf * 1e3, tb * 1e3, tok_s, tok_s_mean, gflops,
           peak, 100.0 * gflops / peak, peak * 1e9 / fpt, peak / gflops, ru.ru_maxrss / 1024.0,
           fpt * B * T / cpu_step / 1e9, cpu_peak, cpu_peak / (fpt * B * T / cpu_step / 1e9));
    free(x);
    model_destroy(m);
    return isfinite(loss) ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "sgemm") == 0)
        return bench_sgemm(argc > 2 ? atoi(argv[2]) : 2048);
    if ((argc == 7 || argc == 8) && strcmp(argv[1], "model") == 0)
        return bench_model(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atof(argv[6]),
                           argc == 8 ? argv[7] : NULL);
    fprintf(stderr, "usage: train_speed sgemm [N] | model PRESET B T STEPS PEAK_GFLOPS [JSON]\n");
    return 2;
}
