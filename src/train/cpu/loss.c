/* cpu loss: fused log-softmax + cross-entropy over the vocabulary (with Gemma 2's
 * final-logit soft-capping). Forward keeps only
 * the log-sum-exp per row; backward turns the logits into dlogits in place, so the
 * (rows, vocab) buffer exists once. */
#include <math.h>
#include <string.h>

#include "train/cpu/kernels.h"
#include "train/cpu/vmath.h"

void cpu_logsoftmax_forward(float *logits, int ld, int V, const int32_t *y, float *lse, float *logp,
                            int M)
{
#pragma omp parallel for schedule(static) if ((long)M * V > CPU_PAR_MIN)
    for (int r = 0; r < M; r++) {
        float *l = logits + (size_t)r * ld;
        for (int v = V; v < ld; v++)
            l[v] = -INFINITY;
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int v = 0; v < V; v++)
            mx = l[v] > mx ? l[v] : mx;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int v = 0; v < V; v++)
            sum += vexpf(l[v] - mx);
        lse[r] = mx + logf(sum);
        if (logp)
            logp[r] = (y && y[r] >= 0) ? l[y[r]] - lse[r] : 0.0f;
    }
}

void cpu_softcap_forward(float *logits, int ld, int V, int M, float cap)
{
#pragma omp parallel for schedule(static) if ((long)M * V > CPU_PAR_MIN)
    for (int r = 0; r < M; r++) {
        float *l = logits + (size_t)r * ld;
        for (int v = 0; v < V; v++)
            l[v] = cap * tanhf(l[v] / cap);
    }
}

void cpu_logsoftmax_softcap_backward(float *logits, int ld, int V, const int32_t *y,
                                     const float *lse, const float *dlogp, int M, float cap)
{
    // d/d raw = d/d capped * (1 - (capped/cap)^2)
#pragma omp parallel for schedule(static) if ((long)M * V > CPU_PAR_MIN)
    for (int r = 0; r < M; r++) {
        float *l = logits + (size_t)r * ld;
        float g = dlogp[r], m = lse[r];
        if (y[r] < 0 || g == 0.0f) {
            memset(l, 0, sizeof(float) * ld);
            continue;
        }
        for (int v = 0; v < V; v++) {
            float c = l[v], t = c / cap;
            float d = -g * vexpf(c - m) + (v == y[r] ? g : 0.0f);
            l[v] = d * (1.0f - t * t);
        }
        for (int v = V; v < ld; v++)
            l[v] = 0.0f;
    }
}

void cpu_logsoftmax_backward(float *logits, int ld, int V, const int32_t *y, const float *lse,
                             const float *dlogp, int M)
{
    // d logp_y / d logit_v = onehot(v == y) - p_v
#pragma omp parallel for schedule(static) if ((long)M * V > CPU_PAR_MIN)
    for (int r = 0; r < M; r++) {
        float *l = logits + (size_t)r * ld;
        float g = dlogp[r], m = lse[r];
        if (y[r] < 0 || g == 0.0f) {
            memset(l, 0, sizeof(float) * ld);
            continue;
        }
#pragma omp simd
        for (int v = 0; v < V; v++)
            l[v] = -g * vexpf(l[v] - m);
        l[y[r]] += g;
        for (int v = V; v < ld; v++)
            l[v] = 0.0f;
    }
}
