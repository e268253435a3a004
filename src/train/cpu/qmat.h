/* qmat: weight matrices for decoding in f32, bf16 or q8_0 (ggml's block format: 32 weights
 * and one fp16 scale) and the products out = [resid +] [bias +] in @ W^T that stream them.
 * Kernels are built for several ISAs in one file and chosen once at run time. */
#ifndef MTC_TRAIN_CPU_QMAT_H
#define MTC_TRAIN_CPU_QMAT_H

#include <stddef.h>
#include <stdint.h>

enum cpu_dtype { CPU_F32, CPU_BF16, CPU_Q8_0, CPU_NDTYPES };

/* "f32", "bf16", "q8_0" (a static string; "?" out of range). */
const char *cpu_dtype_name(enum cpu_dtype dt);
/* The dtype named s into *dt. 0, or -1 with errno EINVAL. */
int cpu_dtype_parse(const char *s, enum cpu_dtype *dt);
/* Bytes of one row of K weights; 0 when K does not fit the dtype (q8_0: K % 32 != 0). */
size_t cpu_dtype_row_bytes(enum cpu_dtype dt, int K);

/* q8_0 block: weight i is d * q[i], d an IEEE half. 34 bytes, as ggml's block_q8_0. */
#define CPU_Q8_BLOCK 32
struct cpu_q8_block {
    uint16_t d;
    int8_t q[CPU_Q8_BLOCK];
};

/* A weight matrix of N rows of K (nn.Linear's (out,in)), each row cpu_dtype_row_bytes(dtype,
 * K) bytes at data + n * that; data is borrowed (an f32 matrix may be the model's
 * parameters themselves). */
struct cpu_qmat {
    enum cpu_dtype dtype;
    int N, K;
    const void *data;
};

/* Pack w (N,K) f32 into dst (N * cpu_dtype_row_bytes(dt, K) bytes): bf16 and the q8_0
 * scales round to nearest even; q8_0 d = max|w| / 127 of each block, q = round(w / d). */
void cpu_qmat_pack(enum cpu_dtype dt, void *dst, const float *w, int N, int K);
/* Row n of w as f32 into out (K). */
void cpu_qmat_row(const struct cpu_qmat *w, int n, float *out);

/* Floats of scratch cpu_qmat_forward needs for rows of up to K inputs on nthreads threads. */
size_t cpu_qmat_scratch_floats(int K, int nthreads);
/* out (M,N) row stride ldo = [resid (M,N, stride ldo) +] [bias (N) +] in (M,K) @ w^T; resid
 * may equal out. M <= CPU_QMAT_SMALL_M (decoding): each thread streams its share of w's rows
 * once for all M rows with the ISA's dot kernel; q8_0 quantizes in to q8_0 blocks first and
 * takes integer dot products, as ggml does. Larger M (prompts): f32 goes to cpu_matmul_forward,
 * bf16 and q8_0 are dequantized 64 rows at a time into scratch and multiplied by sgemm.
 * scratch: cpu_qmat_scratch_floats(K, omp_get_max_threads()) floats. */
#define CPU_QMAT_SMALL_M 4
void cpu_qmat_forward(float *out, int ldo, const float *resid, const float *in,
                      const struct cpu_qmat *w, const float *bias, int M, float *scratch);

/* fn(ctx, lo, hi) over [0, n) in chunks (multiples of grain) on the caller and the decode
 * pool's OMP_NUM_THREADS-1 helper threads; returns when every chunk is done. Serial when
 * work <= CPU_PAR_MIN, one thread, or another caller holds the pool. The caller never waits
 * for a helper to wake (see docs/design-notes.md); results must not depend on the chunking.
 * Decoding's steps use it instead of OpenMP so an OpenMP team is never woken (and left
 * spinning) between them. */
void cpu_pool_for(void (*fn)(void *ctx, int lo, int hi), void *ctx, int n, int grain, long work);

/* The kernel variants: portable C, AVX2+FMA+F16C, AVX-512 (F, BW, VL, VNNI). The best the CPU
 * has is used unless MTC_CPU_ISA=portable|avx2|avx512 names another it has (read once) or
 * cpu_isa_set picks one. */
enum cpu_isa { CPU_ISA_PORTABLE, CPU_ISA_AVX2, CPU_ISA_AVX512, CPU_NISAS };
const char *cpu_isa_name(enum cpu_isa isa);
int cpu_isa_supported(enum cpu_isa isa); // 1 or 0
enum cpu_isa cpu_isa_get(void);
/* 0, or -1 with errno ENOTSUP when this CPU lacks it (EINVAL out of range). */
int cpu_isa_set(enum cpu_isa isa);

/* IEEE half and bfloat16 conversions (exact widening; narrowing rounds to nearest even). */
float cpu_half_to_float(uint16_t h);
uint16_t cpu_float_to_half(float f);
static inline float cpu_bf16_to_float(uint16_t b)
{
    union {
        uint32_t u;
        float f;
    } x = {.u = (uint32_t)b << 16};
    return x.f;
}
uint16_t cpu_float_to_bf16(float f);

#endif
