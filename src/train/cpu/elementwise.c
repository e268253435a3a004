/* cpu elementwise layers: GELU (tanh approximation, GPT-2), SwiGLU (Llama MLP), GeGLU
 * (Gemma MLP), scaling, and the
 * token (+ position) embedding lookup with its scatter-add backward. */
#include <math.h>
#include <string.h>

#include "train/cpu/kernels.h"
#include "train/cpu/vmath.h"

#define GELU_K 0.7978845608028654f // sqrt(2/pi)
#define COL_BLOCK 64

/* tanh through exp: glibc's tanhf is several times slower and GELU runs on every
 * (token, d_ff) element twice per step. Absolute error ~1e-7, all GELU needs. */
static inline float fast_tanh(float u)
{
    return 1.0f - 2.0f / (1.0f + vexpf(2.0f * u));
}

void cpu_gelu_forward(float *out, const float *x, long n)
{
#pragma omp parallel for simd schedule(static) if (n > CPU_PAR_MIN)
    for (long i = 0; i < n; i++) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + fast_tanh(GELU_K * (v + 0.044715f * v * v * v)));
    }
}

void cpu_gelu_backward(float *dx, const float *dout, const float *x, long n)
{
#pragma omp parallel for simd schedule(static) if (n > CPU_PAR_MIN)
    for (long i = 0; i < n; i++) {
        float v = x[i], u = GELU_K * (v + 0.044715f * v * v * v);
        float th = fast_tanh(u), sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * v * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
        dx[i] = dout[i] * g;
    }
}

void cpu_swiglu_forward(float *out, const float *gu, int M, int F)
{
#pragma omp parallel for schedule(static) if ((long)M * F > CPU_PAR_MIN)
    for (int r = 0; r < M; r++) {
        const float *g = gu + (size_t)r * 2 * F, *u = g + F;
        float *o = out + (size_t)r * F;
#pragma omp simd
        for (int i = 0; i < F; i++)
            o[i] = g[i] / (1.0f + vexpf(-g[i])) * u[i];
    }
}

void cpu_swiglu_backward(float *dgu, const float *dout, const float *gu, int M, int F)
{
    // silu(g) = g*s, s = sigmoid(g); silu'(g) = s * (1 + g*(1-s))
#pragma omp parallel for schedule(static) if ((long)M * F > CPU_PAR_MIN)
    for (int r = 0; r < M; r++) {
        const float *g = gu + (size_t)r * 2 * F, *u = g + F, *d = dout + (size_t)r * F;
        float *dg = dgu + (size_t)r * 2 * F, *du = dg + F;
#pragma omp simd
        for (int i = 0; i < F; i++) {
            float s = 1.0f / (1.0f + vexpf(-g[i]));
            du[i] = d[i] * g[i] * s;
            dg[i] = d[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
        }
    }
}

static inline float gelu_tanh(float v)
{
    return 0.5f * v * (1.0f + fast_tanh(GELU_K * (v + 0.044715f * v * v * v)));
}

void cpu_geglu_forward(float *out, const float *gu, int M, int F)
{
#pragma omp parallel for schedule(static) if ((long)M * F > CPU_PAR_MIN)
    for (int r = 0; r < M; r++) {
        const float *g = gu + (size_t)r * 2 * F, *u = g + F;
        float *o = out + (size_t)r * F;
        for (int i = 0; i < F; i++)
            o[i] = gelu_tanh(g[i]) * u[i];
    }
}

void cpu_geglu_backward(float *dgu, const float *dout, const float *gu, int M, int F)
{
#pragma omp parallel for schedule(static) if ((long)M * F > CPU_PAR_MIN)
    for (int r = 0; r < M; r++) {
        const float *g = gu + (size_t)r * 2 * F, *u = g + F, *d = dout + (size_t)r * F;
        float *dg = dgu + (size_t)r * 2 * F, *du = dg + F;
        for (int i = 0; i < F; i++) {
            float v = g[i], k = GELU_K * (v + 0.044715f * v * v * v);
            float th = fast_tanh(k), sech2 = 1.0f - th * th;
            float gl = 0.5f * v * (1.0f + th);
            float dgl = 0.5f * (1.0f + th) +
                        0.5f * v * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
            float di = d[i];
            du[i] = di * gl;
            dg[i] = di * u[i] * dgl;
        }
    }
}

void cpu_scale(float *x, long n, float s)
{
#pragma omp parallel for simd schedule(static) if (n > CPU_PAR_MIN)
    for (long i = 0; i < n; i++)
        x[i] *= s;
}

void cpu_embedding_forward(float *out, const int32_t *x, const float *wte, const float *wpe, int B,
                           int T, int C)
{
#pragma omp parallel for collapse(2) schedule(static) if ((long)B * T * C > CPU_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *e = wte + (size_t)x[b * T + t] * C;
            if (wpe) {
                const float *p = wpe + (size_t)t * C;
                for (int c = 0; c < C; c++)
                    o[c] = e[c] + p[c];
            } else {
                memcpy(o, e, sizeof(float) * C);
            }
        }
}

void cpu_embedding_backward(float *dwte, float *dwpe, const float *dout, const int32_t *x, int B,
                            int T, int C)
{
    // Threads split the channels, every thread walks all tokens in order: repeated
    // token ids never race and the sum order is fixed.
    int nblocks = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if ((long)B * T * C > CPU_PAR_MIN)
    for (int bk = 0; bk < nblocks; bk++) {
        int c0 = bk * COL_BLOCK, c1 = c0 + COL_BLOCK < C ? c0 + COL_BLOCK : C;
        for (int i = 0; i < B * T; i++) {
            const float *d = dout + (size_t)i * C;
            float *e = dwte + (size_t)x[i] * C;
            for (int c = c0; c < c1; c++)
                e[c] += d[c];
            if (dwpe) {
                float *p = dwpe + (size_t)(i % T) * C;
                for (int c = c0; c < c1; c++)
                    p[c] += d[c];
            }
        }
    }
}

void cpu_embedding_forward_pos(float *out, const int32_t *x, const int32_t *pos, const float *wte,
                               const float *wpe, int M, int C)
{
#pragma omp parallel for schedule(static) if ((long)M * C > CPU_PAR_MIN)
    for (int i = 0; i < M; i++) {
        float *o = out + (size_t)i * C;
        const float *e = wte + (size_t)x[i] * C;
        if (wpe) {
            const float *p = wpe + (size_t)pos[i] * C;
            for (int c = 0; c < C; c++)
                o[c] = e[c] + p[c];
        } else {
            memcpy(o, e, sizeof(float) * C);
        }
    }
}

void cpu_embedding_backward_pos(float *dwte, float *dwpe, const float *dout, const int32_t *x,
                                const int32_t *pos, int M, int C)
{
    // as cpu_embedding_backward: threads split the channels, tokens in order
    int nblocks = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if ((long)M * C > CPU_PAR_MIN)
    for (int bk = 0; bk < nblocks; bk++) {
        int c0 = bk * COL_BLOCK, c1 = c0 + COL_BLOCK < C ? c0 + COL_BLOCK : C;
        for (int i = 0; i < M; i++) {
            const float *d = dout + (size_t)i * C;
            float *e = dwte + (size_t)x[i] * C;
            for (int c = c0; c < c1; c++)
                e[c] += d[c];
            if (dwpe) {
                float *p = dwpe + (size_t)pos[i] * C;
                for (int c = c0; c < c1; c++)
                    p[c] += d[c];
            }
        }
    }
}
