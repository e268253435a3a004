/* train_speed: CPU trainer throughput. `train_speed sgemm [N]` prints this machine's
 * sgemm GFLOP/s on N x N matrices (all threads); `train_speed model PRESET B T STEPS
 * PEAK_GFLOPS` times forward+backward steps and prints tokens/s, achieved GFLOP/s, MFU
 * against the given sgemm peak, and peak RSS. Built and run by bench/train_speed.sh. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common/common.h"
#include "train/model.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int bench_sgemm(int n)
{
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n);
    float *c = calloc((size_t)n * n, sizeof(float));
    for (long i = 0; i < (long)n * n; i++)
        a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.1f;
    double best = 0;
    for (int rep = 0; rep < 6; rep++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                    n);
        double dt = now_s() - t0, gf = 2.0 * n * n * (double)n / dt / 1e9;
        best = gf > best ? gf : best;
    }
    printf("sgemm_gflops %.1f\n", best);
    free(a), free(b), free(c);
    return 0;
}

static int bench_model(const char *preset, int B, int T, int steps, double peak)
{
    struct model_config cfg;
    mtc_error_t err = {{0}};
    if (model_preset(preset, &cfg, &err) < 0) {
        fprintf(stderr, "%s\n", err.text);
        return 1;
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
    double tf = 0, tb = 0, loss = 0;
    for (int s = -1; s < steps; s++) { // step -1 warms up (page faults, BLAS buffers)
        model_zero_grad(m);
        double t0 = now_s();
        loss = model_forward(m, x, x + 1, NULL, 0, B, T);
        double t1 = now_s();
        model_backward(m, NULL);
        double t2 = now_s();
        if (s >= 0)
            tf += t1 - t0, tb += t2 - t1;
    }
    double tok_s = (double)B * T * steps / (tf + tb);
    double fpt = model_flops_per_token(m, T);
    double gflops = fpt * tok_s / 1e9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%s B=%d T=%d params=%zu loss=%.3f fwd_ms=%.1f bwd_ms=%.1f tokens_per_s=%.0f "
           "gflops=%.1f mfu=%.1f%% sgemm_bound_tokens_per_s=%.0f ratio_to_bound=%.2fx "
           "peak_rss_mb=%.0f\n",
           preset, B, T, model_nparams(m), loss, tf / steps * 1e3, tb / steps * 1e3, tok_s, gflops,
           100.0 * gflops / peak, peak * 1e9 / fpt, peak / gflops, ru.ru_maxrss / 1024.0);
    free(x);
    model_destroy(m);
    return isfinite(loss) ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "sgemm") == 0)
        return bench_sgemm(argc > 2 ? atoi(argv[2]) : 2048);
    if (argc == 7 && strcmp(argv[1], "model") == 0)
        return bench_model(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atof(argv[6]));
    fprintf(stderr, "usage: train_speed sgemm [N] | model PRESET B T STEPS PEAK_GFLOPS\n");
    return 2;
}
