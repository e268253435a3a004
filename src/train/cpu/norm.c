/* cpu norms: LayerNorm (GPT-2), RMSNorm (Llama; Gemma's (1 + w) form and its per-head
 * QK-norm), forward and backward. Row passes are parallel over rows; weight gradients are
 * parallel over column blocks (the QK-norm's: one serial pass), so their summation order
 * does not depend on the thread count. */
#include <math.h>
#include <string.h>

#include "train/cpu/kernels.h"

#define COL_BLOCK 64

void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                           const float *b, int M, int C, float eps)
{
#pragma omp parallel for schedule(static) if ((long)M * C > CPU_PAR_MIN)
    for (int r = 0; r < M; r++) {
        const float *xr = x + (size_t)r * C;
        float *o = out + (size_t)r * C;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int c = 0; c < C; c++)
            s += xr[c];
        float mu = s / C, v = 0.0f;
#pragma omp simd reduction(+ : v)
        for (int c = 0; c < C; c++)
            v += (xr[c] - mu) * (xr[c] - mu);
        float rs = 1.0f / sqrtf(v / C + eps);
        for (int c = 0; c < C; c++)
            o[c] = (xr[c] - mu) * rs * w[c] + b[c];
        mean[r] = mu;
        rstd[r] = rs;
    }
}

void cpu_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                            const float *w, const float *mean, const float *rstd, int M, int C)
{
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * w
#pragma omp parallel for schedule(static) if ((long)M * C > CPU_PAR_MIN)
    for (int r = 0; r < M; r++) {
        const float *xr = x + (size_t)r * C, *d = dout + (size_t)r * C;
        float *dxr = dx + (size_t)r * C;
        float mu = mean[r], rs = rstd[r], sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
        for (int c = 0; c < C; c++) {
            float g = d[c] * w[c];
            sg += g;
            sgx += g * (xr[c] - mu) * rs;
        }
        sg /= C;
        sgx /= C;
        for (int c = 0; c < C; c++) {
            float xhat = (xr[c] - mu) * rs;
            dxr[c] += rs * (d[c] * w[c] - sg - xhat * sgx);
        }
    }
    int nblocks = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if ((long)M * C > CPU_PAR_MIN)
    for (int bk = 0; bk < nblocks; bk++) {
        int c0 = bk * COL_BLOCK, n = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
        float aw[COL_BLOCK], ab[COL_BLOCK];
        memset(aw, 0, sizeof aw);
        memset(ab, 0, sizeof ab);
        for (int r = 0; r < M; r++) {
            const float *xr = x + (size_t)r * C + c0, *d = dout + (size_t)r * C + c0;
            float mu = mean[r], rs = rstd[r];
            for (int c = 0; c < n; c++) {
                aw[c] += d[c] * (xr[c] - mu) * rs;
                ab[c] += d[c];
            }
        }
        for (int c = 0; c < n; c++) {
            dw[c0 + c] += aw[c];
            db[c0 + c] += ab[c];
        }
    }
}

static void rms_forward(float *out, float *rstd, const float *x, const float *w, float woff, int M,
                        int C, float eps)
{
#pragma omp parallel for schedule(static) if ((long)M * C > CPU_PAR_MIN)
    for (int r = 0; r < M; r++) {
        const float *xr = x + (size_t)r * C;
        float *o = out + (size_t)r * C;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int c = 0; c < C; c++)
            ss += xr[c] * xr[c];
        float rs = 1.0f / sqrtf(ss / C + eps);
        for (int c = 0; c < C; c++)
            o[c] = xr[c] * rs * (woff + w[c]);
        rstd[r] = rs;
    }
}

static void rms_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                         float woff, const float *rstd, int M, int C)
{
    // dx = rstd * (g - xhat * mean(g * xhat)), g = dout * w, xhat = x * rstd
#pragma omp parallel for schedule(static) if ((long)M * C > CPU_PAR_MIN)
    for (int r = 0; r < M; r++) {
        const float *xr = x + (size_t)r * C, *d = dout + (size_t)r * C;
        float *dxr = dx + (size_t)r * C;
        float rs = rstd[r], sgx = 0.0f;
#pragma omp simd reduction(+ : sgx)
        for (int c = 0; c < C; c++)
            sgx += d[c] * (woff + w[c]) * xr[c] * rs;
        sgx /= C;
        for (int c = 0; c < C; c++)
            dxr[c] += rs * (d[c] * (woff + w[c]) - xr[c] * rs * sgx);
    }
    int nblocks = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if ((long)M * C > CPU_PAR_MIN)
    for (int bk = 0; bk < nblocks; bk++) {
        int c0 = bk * COL_BLOCK, n = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
        float aw[COL_BLOCK];
        memset(aw, 0, sizeof aw);
        for (int r = 0; r < M; r++) {
            const float *xr = x + (size_t)r * C + c0, *d = dout + (size_t)r * C + c0;
            float rs = rstd[r];
            for (int c = 0; c < n; c++)
                aw[c] += d[c] * xr[c] * rs;
        }
        for (int c = 0; c < n; c++)
            dw[c0 + c] += aw[c];
    }
}

void cpu_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int M, int C,
                         float eps)
{
    rms_forward(out, rstd, x, w, 0.0f, M, C, eps);
}

void cpu_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                          const float *rstd, int M, int C)
{
    rms_backward(dx, dw, dout, x, w, 0.0f, rstd, M, C);
}

void cpu_rmsnorm1p_forward(float *out, float *rstd, const float *x, const float *w, int M, int C,
                           float eps)
{
    rms_forward(out, rstd, x, w, 1.0f, M, C, eps);
}

void cpu_rmsnorm1p_backward(float *dx, float *dw, const float *dout, const float *x,
                            const float *w, const float *rstd, int M, int C)
{
    rms_backward(dx, dw, dout, x, w, 1.0f, rstd, M, C);
}

void cpu_headnorm_forward(float *x, int ld, float *saved, float *rstd, const float *wq,
                          const float *wk, int M, int H, int KV, int hd, float eps)
{
    int nh = H + KV;
#pragma omp parallel for schedule(static) if ((long)M * nh * hd > CPU_PAR_MIN)
    for (int r = 0; r < M; r++)
        for (int h = 0; h < nh; h++) {
            float *p = x + (size_t)r * ld + (size_t)h * hd;
            float *sv = saved + ((size_t)r * nh + h) * hd;
            const float *w = h < H ? wq : wk;
            float ss = 0.0f;
            for (int c = 0; c < hd; c++)
                ss += p[c] * p[c];
            float rs = 1.0f / sqrtf(ss / hd + eps);
            for (int c = 0; c < hd; c++) {
                sv[c] = p[c];
                p[c] = p[c] * rs * (1.0f + w[c]);
            }
            rstd[(size_t)r * nh + h] = rs;
        }
}

void cpu_headnorm_backward(float *dx, int ld, float *dwq, float *dwk, const float *saved,
                           const float *rstd, const float *wq, const float *wk, int M, int H,
                           int KV, int hd)
{
    int nh = H + KV;
    for (int r = 0; r < M; r++) // weight gradients first (serial: a fixed order), from d(out)
        for (int h = 0; h < nh; h++) {
            const float *d = dx + (size_t)r * ld + (size_t)h * hd;
            const float *sv = saved + ((size_t)r * nh + h) * hd;
            float rs = rstd[(size_t)r * nh + h], *dw = h < H ? dwq : dwk;
            for (int c = 0; c < hd; c++)
                dw[c] += d[c] * sv[c] * rs;
        }
#pragma omp parallel for schedule(static) if ((long)M * nh * hd > CPU_PAR_MIN)
    for (int r = 0; r < M; r++)
        for (int h = 0; h < nh; h++) {
            float *d = dx + (size_t)r * ld + (size_t)h * hd;
            const float *sv = saved + ((size_t)r * nh + h) * hd;
            const float *w = h < H ? wq : wk;
            float rs = rstd[(size_t)r * nh + h], sgx = 0.0f;
            for (int c = 0; c < hd; c++)
                sgx += d[c] * (1.0f + w[c]) * sv[c] * rs;
            sgx /= hd;
            for (int c = 0; c < hd; c++)
                d[c] = rs * (d[c] * (1.0f + w[c]) - sv[c] * rs * sgx);
        }
}
