/* mfu: the peak FLOP/s the trainer's MFU is measured against, and the MFU of a step — an
 * estimate of the peak from sgemm calls through the model's own matmul path, raised to any
 * rate a step achieves above it, so the MFU shown is never above 100% (docs/trainer.md). */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "train/cpu/kernels.h"
#include "train/train.h"

/* Timed calls per shape: at least MIN_CALLS and MIN_S seconds of them (a busy moment of a
 * few ms does not set the peak), at most MAX_S; one call at most MAX_FLOP (a big model's
 * product is sampled with fewer rows, not run for seconds). */
#define MIN_CALLS 3
#define MIN_S 0.1
#define MAX_S 1.0
#define MAX_FLOP 5e8

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The best FLOP/s of out (m,n) = in (m,k) @ w (n,k)^T through cpu_matmul_forward (OpenMP
 * blocks of single-threaded sgemm, as every linear layer of the model); 0 when out of memory. */
static double best_rate(int m, int n, int k)
{
    while (2.0 * m * n * k > MAX_FLOP && m > 16)
        m /= 2;
    float *in = malloc(sizeof(float) * ((size_t)m * k + (size_t)n * k + (size_t)m * n));
    if (!in)
        return 0;
    float *w = in + (size_t)m * k, *out = w + (size_t)n * k;
    for (size_t i = 0; i < (size_t)m * k + (size_t)n * k; i++)
        in[i] = (float)(i % 7) * 0.01f;
    cpu_matmul_forward(out, n, NULL, in, w, NULL, m, n, k); // warm-up: pages, the thread team
    double best = 0, t0 = now_s(), t = t0;
    for (int calls = 0; (calls < MIN_CALLS || t - t0 < MIN_S) && t - t0 < MAX_S; calls++) {
        double a = now_s();
        cpu_matmul_forward(out, n, NULL, in, w, NULL, m, n, k);
        t = now_s();
        double f = 2.0 * m * n * k / (t - a > 1e-9 ? t - a : 1e-9);
        best = f > best ? f : best;
    }
    free(in);
    return best;
}

double train_peak_flops(int m, int n, int k)
{
    const char *env = getenv("MTC_PEAK_FLOPS");
    if (env && atof(env) > 0)
        return atof(env);
    // a 512^3 cube (near the BLAS's best) and the model's own product when given: the
    // higher rate, so a model whose shapes suit the BLAS badly is not measured against that
    double peak = best_rate(512, 512, 512);
    if (m > 0 && n > 0 && k > 0) {
        double own = best_rate(m, n, k);
        peak = own > peak ? own : peak;
    }
    return peak > 0 ? peak : 1e11;
}

double train_mfu(double achieved, double *peak)
{
    if (!(achieved > 0) || !isfinite(achieved) || !(*peak > 0))
        return 0;
    if (achieved > *peak) // the estimate was low (measured at a busy moment): the step shows it
        *peak = achieved;
    return achieved / *peak;
}
