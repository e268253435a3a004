/* cpu matmul: linear layers forward and backward through OpenBLAS cblas_sgemm, plus
 * the column sums used for bias gradients. Weights are (out,in) row-major.
 * One thread pool does everything: OpenMP splits each product into blocks and every
 * thread runs a single-threaded sgemm on its own block. OpenBLAS's own pthread pool
 * would otherwise spin (sched_yield) between calls and steal the cores the OpenMP
 * loops need; OMP_NUM_THREADS governs both. */
#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <string.h>

#include "train/cpu/kernels.h"

/* Column block width for reductions over rows: each thread owns whole blocks, so
 * the summation order is fixed whatever the thread count. */
#define COL_BLOCK 64
/* Split granularity: blocks are multiples of this many rows/columns. */
#define SPLIT_ALIGN 32

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_single(void)
{
    openblas_set_num_threads(1); // see the file comment: threads come from OpenMP
}

void cpu_blas_single_thread(void)
{
    pthread_once(&blas_once, blas_single);
}

/* Number of blocks to split a dimension of n into, and the block size. */
static int split(int n, int *blk)
{
    int t = omp_get_max_threads();
    int b = (n + t - 1) / t;
    b = (b + SPLIT_ALIGN - 1) / SPLIT_ALIGN * SPLIT_ALIGN;
    *blk = b;
    return (n + b - 1) / b;
}

/* C (m,n) = alpha op(A) op(B) + beta C, row-major, split over the rows of C (by_rows)
 * or its columns; each block is one single-threaded sgemm. */
static void par_sgemm(int by_rows, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n,
                      int k, const float *a, int lda, const float *b, int ldb, float beta,
                      float *c, int ldc)
{
    cpu_blas_single_thread();
    int blk, nb = split(by_rows ? m : n, &blk);
#pragma omp parallel for schedule(static) if ((double)m * n * k > 32.0 * CPU_PAR_MIN)
    for (int i = 0; i < nb; i++) {
        int lo = i * blk, len = (by_rows ? m : n) - lo;
        len = len < blk ? len : blk;
        if (by_rows) { // rows lo.. of C use rows (or columns, when transposed) lo.. of A
            const float *ai = ta == CblasNoTrans ? a + (size_t)lo * lda : a + lo;
            cblas_sgemm(CblasRowMajor, ta, tb, len, n, k, 1.0f, ai, lda, b, ldb, beta,
                        c + (size_t)lo * ldc, ldc);
        } else { // columns lo.. of C use columns (or rows, when transposed) lo.. of B
            const float *bi = tb == CblasNoTrans ? b + lo : b + (size_t)lo * ldb;
            cblas_sgemm(CblasRowMajor, ta, tb, m, len, k, 1.0f, a, lda, bi, ldb, beta, c + lo,
                        ldc);
        }
    }
}

void cpu_matmul_prefill(float *out, int ldo, const float *resid, const float *bias, int M, int N)
{
#pragma omp parallel for schedule(static) if ((long)M * N > CPU_PAR_MIN)
    for (int r = 0; r < M; r++) {
        float *o = out + (size_t)r * ldo;
        const float *a = resid ? resid + (size_t)r * ldo : NULL;
        for (int c = 0; c < N; c++)
            o[c] = (a ? a[c] : 0.0f) + (bias ? bias[c] : 0.0f);
    }
}

void cpu_matmul_forward(float *out, int ldo, const float *resid, const float *in, const float *w,
                        const float *bias, int M, int N, int K)
{
    float beta = 0.0f;
    if (resid || bias) { // out = resid + bias, then sgemm accumulates (beta 1)
        cpu_matmul_prefill(out, ldo, resid, bias, M, N);
        beta = 1.0f;
    }
    // out (M,N) = in (M,K) @ w^T (K,N); split the larger side so w is read once
    par_sgemm(M > N, CblasNoTrans, CblasTrans, M, N, K, in, K, w, K, beta, out, ldo);
}

void cpu_matmul_backward(float *din, int din_accumulate, float *dw, float *dbias,
                         const float *dout, int lddo, const float *in, const float *w, int M,
                         int N, int K)
{
    // din (M,K) = dout (M,N) @ w (N,K)
    if (din)
        par_sgemm(M > K, CblasNoTrans, CblasNoTrans, M, K, N, dout, lddo, w, K,
                  din_accumulate ? 1.0f : 0.0f, din, K);
    // dw (N,K) += dout^T (N,M) @ in (M,K)
    par_sgemm(N > K, CblasTrans, CblasNoTrans, N, K, M, dout, lddo, in, K, 1.0f, dw, K);
    if (dbias)
        cpu_colsum_add(dbias, dout, M, N, lddo);
}

void cpu_colsum_add(float *dst, const float *src, int M, int N, int ld)
{
    int nblocks = (N + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if ((long)M * N > CPU_PAR_MIN)
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
