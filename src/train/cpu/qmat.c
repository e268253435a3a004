/* qmat: decoding's matrix products over f32, bf16 and q8_0 weights (see qmat.h). One dot
 * kernel per (ISA, dtype) in a table; the ISA is chosen once from what the CPU has, so the
 * file is built without -march and still uses AVX-512 VNNI where it exists. */
#include <cblas.h>
#include <errno.h>
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train/cpu/kernels.h"
#include "train/cpu/qmat.h"

#define TILE 64  // rows of w dequantized for one sgemm (prompts)
#define ALIGN 16 // rows per thread are a multiple of this (whole cache lines of out)

static const char *const dtype_names[CPU_NDTYPES] = {"f32", "bf16", "q8_0"};

const char *cpu_dtype_name(enum cpu_dtype dt)
{
    return (unsigned)dt < CPU_NDTYPES ? dtype_names[dt] : "?";
}

int cpu_dtype_parse(const char *s, enum cpu_dtype *dt)
{
    for (int i = 0; s && i < CPU_NDTYPES; i++)
        if (strcmp(s, dtype_names[i]) == 0) {
            *dt = (enum cpu_dtype)i;
            return 0;
        }
    errno = EINVAL;
    return -1;
}

size_t cpu_dtype_row_bytes(enum cpu_dtype dt, int K)
{
    if (K <= 0)
        return 0;
    switch (dt) {
    case CPU_F32: return (size_t)K * 4;
    case CPU_BF16: return (size_t)K * 2;
    case CPU_Q8_0:
        return K % CPU_Q8_BLOCK ? 0 : (size_t)K / CPU_Q8_BLOCK * sizeof(struct cpu_q8_block);
    default: return 0;
    }
}

float cpu_half_to_float(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
    float f;
    if (e == 0) { // zero or subnormal: m * 2^-24, exact in float
        f = (float)m * 0x1p-24f;
        memcpy(&u, &f, 4);
        u |= s;
    } else if (e == 31) {
        u = s | 0x7f800000u | (m << 13);
    } else {
        u = s | ((e + 112) << 23) | (m << 13);
    }
    memcpy(&f, &u, 4);
    return f;
}

uint16_t cpu_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t s = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u)
        return s | 0x7e00u; // NaN
    if (x >= 0x477ff000u)  // rounds to 65536 or more
        return s | 0x7c00u;
    if (x < 0x38800000u) { // below 2^-14: a subnormal half (1024 becomes the smallest normal)
        float a;
        memcpy(&a, &x, 4);
        return s | (uint16_t)lrintf(a * 0x1p24f);
    }
    uint32_t r = x - 0x38000000u; // exponent bias 127 → 15
    r += 0xfffu + ((r >> 13) & 1u);
    return s | (uint16_t)(r >> 13);
}

uint16_t cpu_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u); // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* One q8_0 block of 32 floats (d = max|x| / 127 rounded to a half; q = round(x / d)). */
static void q8_block(struct cpu_q8_block *b, const float *x)
{
    float amax = 0;
    for (int i = 0; i < CPU_Q8_BLOCK; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    b->d = cpu_float_to_half(amax / 127.0f);
    float d = cpu_half_to_float(b->d), id = d > 0 ? 1.0f / d : 0.0f;
    for (int i = 0; i < CPU_Q8_BLOCK; i++) {
        float q = roundf(x[i] * id);
        b->q[i] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
    }
}

void cpu_qmat_pack(enum cpu_dtype dt, void *dst, const float *w, int N, int K)
{
    size_t n = (size_t)N * K;
    if (dt == CPU_F32) {
        memcpy(dst, w, n * sizeof(float));
    } else if (dt == CPU_BF16) {
        uint16_t *o = dst;
#pragma omp parallel for schedule(static) if (n > CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            o[i] = cpu_float_to_bf16(w[i]);
    } else if (dt == CPU_Q8_0) {
        struct cpu_q8_block *o = dst;
        long nb = (long)(n / CPU_Q8_BLOCK);
#pragma omp parallel for schedule(static) if (n > CPU_PAR_MIN)
        for (long i = 0; i < nb; i++)
            q8_block(o + i, w + (size_t)i * CPU_Q8_BLOCK);
    }
}

void cpu_qmat_row(const struct cpu_qmat *w, int n, float *out)
{
    const char *row = (const char *)w->data + (size_t)n * cpu_dtype_row_bytes(w->dtype, w->K);
    if (w->dtype == CPU_F32) {
        memcpy(out, row, (size_t)w->K * sizeof(float));
    } else if (w->dtype == CPU_BF16) {
        const uint16_t *b = (const uint16_t *)row;
        for (int k = 0; k < w->K; k++)
            out[k] = cpu_bf16_to_float(b[k]);
    } else {
        const struct cpu_q8_block *b = (const struct cpu_q8_block *)row;
        for (int i = 0; i < w->K / CPU_Q8_BLOCK; i++) {
            float d = cpu_half_to_float(b[i].d);
            for (int j = 0; j < CPU_Q8_BLOCK; j++)
                out[i * CPU_Q8_BLOCK + j] = d * b[i].q[j];
        }
    }
}

/* An input row of a q8_0 product: K/32 float scales and K int8 values. */
struct qrow {
    const float *d;
    const int8_t *q;
};

/* dot of one weight row (in the dtype) and one input row (f32, or a struct qrow for q8_0) */
typedef float (*dot_fn)(const void *w, const void *a, int K);

/* ---- portable C: fixed order, vectorized only as far as omp simd allows ---- */

static float dot_f32_c(const void *w, const void *a, int K)
{
    const float *x = w, *y = a;
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int k = 0; k < K; k++)
        s += x[k] * y[k];
    return s;
}

static float dot_bf16_c(const void *w, const void *a, int K)
{
    const uint16_t *x = w;
    const float *y = a;
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int k = 0; k < K; k++)
        s += cpu_bf16_to_float(x[k]) * y[k];
    return s;
}

static float dot_q8_c(const void *w, const void *a, int K)
{
    const struct cpu_q8_block *b = w;
    const struct qrow *x = a;
    float s = 0;
    for (int i = 0; i < K / CPU_Q8_BLOCK; i++) {
        int32_t d = 0; // exact
        for (int j = 0; j < CPU_Q8_BLOCK; j++)
            d += b[i].q[j] * x->q[i * CPU_Q8_BLOCK + j];
        s += (float)d * (cpu_half_to_float(b[i].d) * x->d[i]);
    }
    return s;
}

/* ---- AVX2 + FMA + F16C ---- */

#define T_AVX2 __attribute__((target("avx2,fma,f16c")))

T_AVX2 static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

T_AVX2 static float dot_f32_avx2(const void *w, const void *a, int K)
{
    const float *x = w, *y = a;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(y + k), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), _mm256_loadu_ps(y + k + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 16), _mm256_loadu_ps(y + k + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 24), _mm256_loadu_ps(y + k + 24), s3);
    }
    for (; k + 8 <= K; k += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(y + k), s0);
    float s = hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; k < K; k++)
        s += x[k] * y[k];
    return s;
}

T_AVX2 static inline __m256 bf16x8(const uint16_t *p)
{
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

T_AVX2 static float dot_bf16_avx2(const void *w, const void *a, int K)
{
    const uint16_t *x = w;
    const float *y = a;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        s0 = _mm256_fmadd_ps(bf16x8(x + k), _mm256_loadu_ps(y + k), s0);
        s1 = _mm256_fmadd_ps(bf16x8(x + k + 8), _mm256_loadu_ps(y + k + 8), s1);
        s2 = _mm256_fmadd_ps(bf16x8(x + k + 16), _mm256_loadu_ps(y + k + 16), s2);
        s3 = _mm256_fmadd_ps(bf16x8(x + k + 24), _mm256_loadu_ps(y + k + 24), s3);
    }
    for (; k + 8 <= K; k += 8)
        s0 = _mm256_fmadd_ps(bf16x8(x + k), _mm256_loadu_ps(y + k), s0);
    float s = hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; k < K; k++)
        s += cpu_bf16_to_float(x[k]) * y[k];
    return s;
}

/* 8 int32 partial sums of one block's 32 products: |w| * (a * sign(w)) through maddubs, whose
 * int16 pairs cannot saturate (|q| <= 127: 2 * 127 * 127 < 32768). */
T_AVX2 static inline __m256i q8dot_avx2(__m256i wq, __m256i aq)
{
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(aq, wq));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

T_AVX2 static float dot_q8_avx2(const void *w, const void *a, int K)
{
    const struct cpu_q8_block *b = w;
    const struct qrow *x = a;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int nb = K / CPU_Q8_BLOCK, i = 0;
    for (; i + 2 <= nb; i += 2) {
        __m256i p0 = q8dot_avx2(_mm256_loadu_si256((const __m256i *)b[i].q),
                                _mm256_loadu_si256((const __m256i *)(x->q + i * 32)));
        __m256i p1 = q8dot_avx2(_mm256_loadu_si256((const __m256i *)b[i + 1].q),
                                _mm256_loadu_si256((const __m256i *)(x->q + i * 32 + 32)));
        s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(b[i].d) * x->d[i]),
                             s0);
        s1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1),
                             _mm256_set1_ps(_cvtsh_ss(b[i + 1].d) * x->d[i + 1]), s1);
    }
    for (; i < nb; i++) {
        __m256i p = q8dot_avx2(_mm256_loadu_si256((const __m256i *)b[i].q),
                               _mm256_loadu_si256((const __m256i *)(x->q + i * 32)));
        s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(_cvtsh_ss(b[i].d) * x->d[i]),
                             s0);
    }
    return hsum256(_mm256_add_ps(s0, s1));
}

/* ---- AVX-512 (F, BW, VL, VNNI) ---- */

#define T_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

T_AVX512 static float dot_f32_avx512(const void *w, const void *a, int K)
{
    const float *x = w, *y = a;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int k = 0;
    for (; k + 64 <= K; k += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k), _mm512_loadu_ps(y + k), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 16), _mm512_loadu_ps(y + k + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 32), _mm512_loadu_ps(y + k + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 48), _mm512_loadu_ps(y + k + 48), s3);
    }
    for (; k < K; k += 16) { // masked tail
        __mmask16 m = K - k >= 16 ? 0xffff : (__mmask16)((1u << (K - k)) - 1);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + k), _mm512_maskz_loadu_ps(m, y + k), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

T_AVX512 static inline __m512 bf16x16(__m256i v)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

T_AVX512 static float dot_bf16_avx512(const void *w, const void *a, int K)
{
    const uint16_t *x = w;
    const float *y = a;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int k = 0;
    for (; k + 64 <= K; k += 64) {
        s0 = _mm512_fmadd_ps(bf16x16(_mm256_loadu_si256((const __m256i *)(x + k))),
                             _mm512_loadu_ps(y + k), s0);
        s1 = _mm512_fmadd_ps(bf16x16(_mm256_loadu_si256((const __m256i *)(x + k + 16))),
                             _mm512_loadu_ps(y + k + 16), s1);
        s2 = _mm512_fmadd_ps(bf16x16(_mm256_loadu_si256((const __m256i *)(x + k + 32))),
                             _mm512_loadu_ps(y + k + 32), s2);
        s3 = _mm512_fmadd_ps(bf16x16(_mm256_loadu_si256((const __m256i *)(x + k + 48))),
                             _mm512_loadu_ps(y + k + 48), s3);
    }
    for (; k < K; k += 16) {
        __mmask16 m = K - k >= 16 ? 0xffff : (__mmask16)((1u << (K - k)) - 1);
        s0 = _mm512_fmadd_ps(bf16x16(_mm256_maskz_loadu_epi16(m, x + k)),
                             _mm512_maskz_loadu_ps(m, y + k), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

/* As q8dot_avx2 with VNNI: one vpdpbusd instead of maddubs + madd. */
T_AVX512 static inline __m256i q8dot_vnni(__m256i wq, __m256i aq)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(wq),
                               _mm256_sign_epi8(aq, wq));
}

T_AVX512 static float dot_q8_avx512(const void *w, const void *a, int K)
{
    const struct cpu_q8_block *b = w;
    const struct qrow *x = a;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int nb = K / CPU_Q8_BLOCK, i = 0;
    for (; i + 2 <= nb; i += 2) {
        __m256i p0 = q8dot_vnni(_mm256_loadu_si256((const __m256i *)b[i].q),
                                _mm256_loadu_si256((const __m256i *)(x->q + i * 32)));
        __m256i p1 = q8dot_vnni(_mm256_loadu_si256((const __m256i *)b[i + 1].q),
                                _mm256_loadu_si256((const __m256i *)(x->q + i * 32 + 32)));
        s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(b[i].d) * x->d[i]),
                             s0);
        s1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1),
                             _mm256_set1_ps(_cvtsh_ss(b[i + 1].d) * x->d[i + 1]), s1);
    }
    for (; i < nb; i++) {
        __m256i p = q8dot_vnni(_mm256_loadu_si256((const __m256i *)b[i].q),
                               _mm256_loadu_si256((const __m256i *)(x->q + i * 32)));
        s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(_cvtsh_ss(b[i].d) * x->d[i]),
                             s0);
    }
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(_mm256_add_ps(s0, s1)),
                          _mm256_extractf128_ps(_mm256_add_ps(s0, s1), 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- the variants and the choice ---- */

static int has_portable(void)
{
    return 1;
}

static int has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static int has_avx512(void)
{
    __builtin_cpu_init();
    return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

static const struct isa {
    const char *name;
    int (*supported)(void);
    dot_fn dot[CPU_NDTYPES];
} isas[CPU_NISAS] = {
    [CPU_ISA_PORTABLE] = {"portable", has_portable, {dot_f32_c, dot_bf16_c, dot_q8_c}},
    [CPU_ISA_AVX2] = {"avx2", has_avx2, {dot_f32_avx2, dot_bf16_avx2, dot_q8_avx2}},
    [CPU_ISA_AVX512] = {"avx512", has_avx512, {dot_f32_avx512, dot_bf16_avx512, dot_q8_avx512}},
};

static int isa_now = -1;
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

static void isa_init(void)
{
    int best = CPU_ISA_PORTABLE;
    for (int i = 0; i < CPU_NISAS; i++)
        if (isas[i].supported())
            best = i;
    const char *env = getenv("MTC_CPU_ISA");
    for (int i = 0; env && i < CPU_NISAS; i++)
        if (strcmp(env, isas[i].name) == 0 && isas[i].supported())
            best = i;
    __atomic_store_n(&isa_now, best, __ATOMIC_RELEASE);
}

const char *cpu_isa_name(enum cpu_isa isa)
{
    return (unsigned)isa < CPU_NISAS ? isas[isa].name : "?";
}

int cpu_isa_supported(enum cpu_isa isa)
{
    return (unsigned)isa < CPU_NISAS && isas[isa].supported();
}

enum cpu_isa cpu_isa_get(void)
{
    pthread_once(&isa_once, isa_init);
    return (enum cpu_isa)__atomic_load_n(&isa_now, __ATOMIC_ACQUIRE);
}

int cpu_isa_set(enum cpu_isa isa)
{
    pthread_once(&isa_once, isa_init);
    if ((unsigned)isa >= CPU_NISAS) {
        errno = EINVAL;
        return -1;
    }
    if (!isas[isa].supported()) {
        errno = ENOTSUP;
        return -1;
    }
    __atomic_store_n(&isa_now, (int)isa, __ATOMIC_RELEASE);
    return 0;
}

/* ---- the products ---- */

size_t cpu_qmat_scratch_floats(int K, int nthreads)
{
    return (size_t)(nthreads > 0 ? nthreads : 1) * TILE * K + (size_t)K;
}

/* M <= CPU_QMAT_SMALL_M rows: every output is one dot (no split reduction), so the result
 * does not depend on the thread count or on which thread computes it. */
struct small_job {
    float *out;
    int ldo, M;
    const float *resid, *bias;
    const void *act[CPU_QMAT_SMALL_M];
    const struct cpu_qmat *w;
    dot_fn dot;
};

static void small_rows(void *ctx, int n0, int n1)
{
    const struct small_job *j = ctx;
    int K = j->w->K;
    size_t rb = cpu_dtype_row_bytes(j->w->dtype, K);
    const char *base = j->w->data;
    for (int n = n0; n < n1; n++) {
        const void *row = base + (size_t)n * rb;
        float b = j->bias ? j->bias[n] : 0.0f;
        for (int m = 0; m < j->M; m++) {
            size_t o = (size_t)m * j->ldo + n;
            j->out[o] = (j->resid ? j->resid[o] + b : b) + j->dot(row, j->act[m], K);
        }
    }
}

/* The decode pool: OMP_NUM_THREADS-1 helper threads that take chunks of a product from a
 * shared counter while the caller takes them too. The caller waits only for chunks a helper
 * has claimed, never for a helper to wake up: on a loaded machine a descheduled helper costs
 * nothing (an OpenMP team's barrier waits a scheduler slice for it). Helpers spin SPIN_NS
 * after a product (the next one follows within microseconds while decoding), then sleep. */
#define POOL_MAX 64
#define SPIN_NS 200000L
static struct {
    pthread_mutex_t busy; // one product at a time; a second caller runs alone
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int nhelpers, sleepers;
    uint64_t state; // generation << 32 | chunks << 16 | next chunk
    int done;       // chunks finished in this generation
    int nworkers;   // helpers allowed in this generation (0 .. nhelpers)
    void (*fn)(void *ctx, int lo, int hi); // the task: [0, n) in chunks of per
    void *ctx;
    int n, per;
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER,
          .cv = PTHREAD_COND_INITIALIZER};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Claim and run chunks of the current generation while there are any; 1 if it ran one. */
static int pool_work(void)
{
    int ran = 0;
    for (;;) {
        uint64_t s = __atomic_load_n(&pool.state, __ATOMIC_ACQUIRE);
        int nch = (int)(s >> 16 & 0xffff), next = (int)(s & 0xffff);
        if (next >= nch)
            return ran;
        if (!__atomic_compare_exchange_n(&pool.state, &s, s + 1, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue;
        // chunk next is ours: the job cannot change until it is counted done
        int n0 = next * pool.per, n1 = n0 + pool.per < pool.n ? n0 + pool.per : pool.n;
        pool.fn(pool.ctx, n0, n1);
        __atomic_add_fetch(&pool.done, 1, __ATOMIC_RELEASE);
        ran = 1;
    }
}

static void *pool_helper(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t seen = 0;
    for (;;) {
        double t0 = now_ns();
        for (long spin = 0;; spin++) {
            uint64_t s = __atomic_load_n(&pool.state, __ATOMIC_ACQUIRE);
            if (s >> 32 != seen >> 32) {
                seen = s;
                if (id < __atomic_load_n(&pool.nworkers, __ATOMIC_ACQUIRE))
                    pool_work();
                t0 = now_ns();
            }
            _mm_pause();
            if ((spin & 255) == 0 && now_ns() - t0 > SPIN_NS)
                break;
        }
        pthread_mutex_lock(&pool.mu);
        __atomic_add_fetch(&pool.sleepers, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&pool.state, __ATOMIC_SEQ_CST) >> 32 == seen >> 32)
            pthread_cond_wait(&pool.cv, &pool.mu);
        __atomic_sub_fetch(&pool.sleepers, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&pool.mu);
    }
    return NULL;
}

/* fn over [0, N) on the caller and up to threads-1 helpers (started on first need), in
 * about 4 chunks per thread, multiples of grain. The caller holds pool.busy. */
static void pool_run(void (*fn)(void *, int, int), void *ctx, int N, int grain, int threads)
{
    while (pool.nhelpers < threads - 1 && pool.nhelpers < POOL_MAX) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &a, pool_helper, (void *)(intptr_t)pool.nhelpers);
        pthread_attr_destroy(&a);
        if (rc)
            break;
        pool.nhelpers++;
    }
    int workers = threads - 1 < pool.nhelpers ? threads - 1 : pool.nhelpers;
    int per = ((N + 4 * threads - 1) / (4 * threads) + grain - 1) / grain * grain;
    int nch = (N + per - 1) / per;
    if (workers == 0 || nch < 2 || nch > 0xffff) {
        fn(ctx, 0, N);
        return;
    }
    pool.fn = fn, pool.ctx = ctx, pool.n = N, pool.per = per;
    __atomic_store_n(&pool.done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&pool.nworkers, workers, __ATOMIC_RELEASE);
    uint64_t gen = (__atomic_load_n(&pool.state, __ATOMIC_RELAXED) >> 32) + 1;
    __atomic_store_n(&pool.state, gen << 32 | (uint64_t)nch << 16, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&pool.sleepers, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.cv);
        pthread_mutex_unlock(&pool.mu);
    }
    pool_work();
    while (__atomic_load_n(&pool.done, __ATOMIC_ACQUIRE) < nch)
        _mm_pause(); // only chunks a running helper holds
}

void cpu_pool_for(void (*fn)(void *ctx, int lo, int hi), void *ctx, int n, int grain, long work)
{
    int threads = omp_get_max_threads();
    if (threads < 2 || work <= CPU_PAR_MIN || pthread_mutex_trylock(&pool.busy)) {
        fn(ctx, 0, n);
        return;
    }
    pool_run(fn, ctx, n, grain > 0 ? grain : 1, threads);
    pthread_mutex_unlock(&pool.busy);
}

static void small_forward(float *out, int ldo, const float *resid, const void *const *act,
                          const struct cpu_qmat *w, const float *bias, int M, dot_fn dot)
{
    struct small_job j = {out, ldo, M, resid, bias, {0}, w, dot};
    memcpy(j.act, act, sizeof(void *) * M);
    cpu_pool_for(small_rows, &j, w->N, ALIGN, (long)w->N * w->K);
}

/* in (M,K) as q8_0 blocks: q (M,K) int8 and d (M,K/32) into scratch (bytes q, then d). */
static void quantize_rows(struct qrow *rows, const float *in, int M, int K, float *scratch)
{
    int nb = K / CPU_Q8_BLOCK;
    float *d = scratch;
    int8_t *q = (int8_t *)(scratch + (size_t)M * nb);
    for (int m = 0; m < M; m++) {
        for (int i = 0; i < nb; i++) {
            struct cpu_q8_block b;
            q8_block(&b, in + (size_t)m * K + (size_t)i * CPU_Q8_BLOCK);
            d[(size_t)m * nb + i] = cpu_half_to_float(b.d);
            memcpy(q + (size_t)m * K + (size_t)i * CPU_Q8_BLOCK, b.q, CPU_Q8_BLOCK);
        }
        rows[m] = (struct qrow){d + (size_t)m * nb, q + (size_t)m * K};
    }
}

void cpu_qmat_forward(float *out, int ldo, const float *resid, const float *in,
                      const struct cpu_qmat *w, const float *bias, int M, float *scratch)
{
    int N = w->N, K = w->K;
    if (M <= CPU_QMAT_SMALL_M) {
        const void *act[CPU_QMAT_SMALL_M];
        struct qrow rows[CPU_QMAT_SMALL_M];
        if (w->dtype == CPU_Q8_0) {
            quantize_rows(rows, in, M, K, scratch);
            for (int m = 0; m < M; m++)
                act[m] = &rows[m];
        } else {
            for (int m = 0; m < M; m++)
                act[m] = in + (size_t)m * K;
        }
        small_forward(out, ldo, resid, act, w, bias, M, isas[cpu_isa_get()].dot[w->dtype]);
        return;
    }
    if (w->dtype == CPU_F32) {
        cpu_matmul_forward(out, ldo, resid, in, w->data, bias, M, N, K);
        return;
    }
    // out = resid + bias, then sgemm accumulates each dequantized tile of TILE rows
    cpu_matmul_prefill(out, ldo, resid, bias, M, N);
    cpu_blas_single_thread();
    int ntiles = (N + TILE - 1) / TILE;
#pragma omp parallel for schedule(static) if ((double)M * N * K > 32.0 * CPU_PAR_MIN)
    for (int t = 0; t < ntiles; t++) {
        float *tile = scratch + (size_t)omp_get_thread_num() * TILE * K;
        int n0 = t * TILE, rows = N - n0 < TILE ? N - n0 : TILE;
        for (int i = 0; i < rows; i++)
            cpu_qmat_row(w, n0 + i, tile + (size_t)i * K);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, rows, K, 1.0f, in, K, tile, K,
                    1.0f, out + n0, ldo);
    }
}
