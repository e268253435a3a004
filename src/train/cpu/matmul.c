/* cpu matmul: linear layers forward and backward through OpenBLAS cblas_sgemm, plus
 * the column sums used for bias gradients. Weights are (out,in) row-major. */
#include <cblas.h>
#include <string.h>

#include "train/cpu/kernels.h"

/* Column block width for reductions over rows: each thread owns whole blocks, so
 * the summation order is fixed whatever the thread count. */
#define COL_BLOCK 64

void cpu_matmul_forward(float *out, int ldo, const float *resid, const float *in, const float *w,
                        const float *bias, int M, int N, int K)
{
    float beta = 0.0f;
    if (resid || bias) {
        // Prefill out with resid + bias, then let sgemm accumulate (beta 1).
#pragma omp parallel for schedule(static)
        for (int r = 0; r < M; r++) {
            float *o = out + (size_t)r * ldo;
            const float *a = resid ? resid + (size_t)r * ldo : NULL;
            for (int c = 0; c < N; c++)
                o[c] = (a ? a[c] : 0.0f) + (bias ? bias[c] : 0.0f);
        }
        beta = 1.0f;
    }
    // out (M,N) = in (M,K) @ w^T (K,N)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, in, K, w, K, beta, out,
                ldo);
}

void cpu_matmul_backward(float *din, int din_accumulate, float *dw, float *dbias,
                         const float *dout, int lddo, const float *in, const float *w, int M,
                         int N, int K)
{
    // din (M,K) = dout (M,N) @ w (N,K)
    if (din)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, dout, lddo, w, K,
                    din_accumulate ? 1.0f : 0.0f, din, K);
    // dw (N,K) += dout^T (N,M) @ in (M,K)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, dout, lddo, in, K, 1.0f,
                dw, K);
    if (dbias)
        cpu_colsum_add(dbias, dout, M, N, lddo);
}

void cpu_colsum_add(float *dst, const float *src, int M, int N, int ld)
{
    int nblocks = (N + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static)
    for (int bk = 0; bk < nblocks; bk++) {
        int c0 = bk * COL_BLOCK, c1 = c0 + COL_BLOCK < N ? c0 + COL_BLOCK : N;
        float acc[COL_BLOCK];
        memset(acc, 0, sizeof acc);
        for (int r = 0; r < M; r++) {
            const float *s = src + (size_t)r * ld;
            for (int c = c0; c < c1; c++)
                acc[c - c0] += s[c];
        }
        for (int c = c0; c < c1; c++)
            dst[c] += acc[c - c0];
    }
}
