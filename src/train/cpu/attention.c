/* cpu attention: causal multi-head attention with grouped-query heads (Gemma's query
 * scale, logit soft-capping and sliding window included), and RoPE (HF rotate_half
 * layout, Llama 3 and linear frequency scaling). Works in query tiles with sgemm; forward
 * keeps only the per-row log-sum-exp, backward recomputes the probabilities tile by tile
 * (O(64*T) scratch per thread, never (T,T) per head). The _pos variants take rows packed
 * with several sequences (block-diagonal causal attention, positions per sequence). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "train/cpu/kernels.h"
#include "train/cpu/vmath.h"

static void rope_tables(float *cos_t, float *sin_t, int T, int hd, float theta, float factor,
                        float low_freq, float high_freq, int orig_max, float linear)
{
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        double freq = 1.0 / pow(theta, (2.0 * i) / hd);
        if (factor > 0) {
            // Llama 3: keep high frequencies, divide low ones by factor, blend between.
            double low_wavelen = orig_max / low_freq, high_wavelen = orig_max / high_freq;
            double wavelen = 2.0 * M_PI / freq;
            if (wavelen > low_wavelen) {
                freq = freq / factor;
            } else if (wavelen >= high_wavelen) {
                double smooth = (orig_max / wavelen - low_freq) / (high_freq - low_freq);
                freq = (1.0 - smooth) * freq / factor + smooth * freq;
            }
        }
        if (linear > 0)
            freq /= linear;
        for (int t = 0; t < T; t++) {
            double a = t * freq;
            cos_t[(size_t)t * half + i] = (float)cos(a);
            sin_t[(size_t)t * half + i] = (float)sin(a);
        }
    }
}

void cpu_rope_tables(float *cos_t, float *sin_t, int T, int hd, float theta, float factor,
                     float low_freq, float high_freq, int orig_max)
{
    rope_tables(cos_t, sin_t, T, hd, theta, factor, low_freq, high_freq, orig_max, 0.0f);
}

void cpu_rope_tables_linear(float *cos_t, float *sin_t, int T, int hd, float theta, float linear)
{
    rope_tables(cos_t, sin_t, T, hd, theta, 0.0f, 0, 0, 0, linear);
}

void cpu_rope(float *x, int ld, const float *cos_t, const float *sin_t, int B, int T, int nheads,
              int hd, int inverse)
{
    int half = hd / 2;
    float sgn = inverse ? -1.0f : 1.0f;
#pragma omp parallel for collapse(2) schedule(static) if ((long)B * T * nheads * hd > CPU_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *row = x + ((size_t)b * T + t) * ld;
            const float *c = cos_t + (size_t)t * half, *s = sin_t + (size_t)t * half;
            for (int h = 0; h < nheads; h++) {
                float *p = row + (size_t)h * hd;
                // out1 = x1 cos - x2 sin ; out2 = x2 cos + x1 sin (inverse: sin → -sin)
                for (int i = 0; i < half; i++) {
                    float x1 = p[i], x2 = p[i + half], si = sgn * s[i];
                    p[i] = x1 * c[i] - x2 * si;
                    p[i + half] = x2 * c[i] + x1 * si;
                }
            }
        }
}

void cpu_rope_pos(float *x, int ld, const float *cos_t, const float *sin_t, const int32_t *pos,
                  int M, int nheads, int hd, int inverse)
{
    int half = hd / 2;
#pragma omp parallel for schedule(static) if ((long)M * nheads * hd > CPU_PAR_MIN)
    for (int i = 0; i < M; i++) // a row at position p rotates as row p of a one-sequence row
        cpu_rope(x + (size_t)i * ld, ld, cos_t + (size_t)pos[i] * half,
                 sin_t + (size_t)pos[i] * half, 1, 1, nheads, hd, inverse);
}

/* Query rows per tile: scores of a tile are a (QTILE, keys) block in scratch. */
#define QTILE 64

size_t cpu_attention_scratch_floats(int T, int hd)
{
    (void)hd;
    return 3 * (size_t)QTILE * T + 64;
}

/* The attention of one call: scale, cap, window (0 = none). */
static struct cpu_attn attn_opts(const struct cpu_attn *opt, int hd)
{
    struct cpu_attn o = {1.0f / sqrtf((float)hd), 0.0f, 0};
    return opt ? *opt : o;
}

/* First key a query tile starting at r0 needs (keys before it are outside every row's
 * window). */
static int tile_klo(int r0, int window)
{
    return window > 0 && r0 - window + 1 > 0 ? r0 - window + 1 : 0;
}

/* Softmax of each row i of s (R, n) — keys klo..klo+n-1 — over the keys query r0+i sees
 * (causal, and within the window), in place; the other keys become 0. Soft-capping first
 * when cap > 0, its tanh kept in th (R, n) when th is given (0 for hidden keys). With lse
 * NULL computes and stores lse (forward); with lse given uses it (backward recompute:
 * p = exp(s - lse)). */
static void masked_softmax(float *s, int R, int n, int r0, int klo, int window, float cap,
                           float *th, float *lse_out, const float *lse_in)
{
    for (int i = 0; i < R; i++) {
        float *row = s + (size_t)i * n;
        int q = r0 + i, hi = q - klo + 1; // visible keys [lo, hi) of this row
        int lo = window > 0 && q - window + 1 > klo ? q - window + 1 - klo : 0;
        if (cap > 0) {
            float *t = th ? th + (size_t)i * n : NULL;
            for (int j = lo; j < hi; j++) {
                float tj = tanhf(row[j] / cap);
                row[j] = cap * tj;
                if (t)
                    t[j] = tj;
            }
            if (t) {
                memset(t, 0, sizeof(float) * lo);
                memset(t + hi, 0, sizeof(float) * (n - hi));
            }
        }
        float l;
        if (lse_in) {
            l = lse_in[i];
        } else {
            float mx = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : mx)
            for (int j = lo; j < hi; j++)
                mx = row[j] > mx ? row[j] : mx;
#pragma omp simd reduction(+ : sum)
            for (int j = lo; j < hi; j++)
                sum += vexpf(row[j] - mx);
            l = mx + logf(sum);
            lse_out[i] = l;
        }
        memset(row, 0, sizeof(float) * lo);
#pragma omp simd
        for (int j = lo; j < hi; j++)
            row[j] = vexpf(row[j] - l);
        memset(row + hi, 0, sizeof(float) * (n - hi));
    }
}

/* The end (exclusive) of the run of rows from r0 up to r1 that lies in one sequence: the
 * next sequence starts where pos is 0. pos NULL: the row is one sequence. */
static int seg_end(const int32_t *pos, int r0, int r1)
{
    int e = r0 + 1;
    if (!pos)
        return r1;
    while (e < r1 && pos[e] != 0)
        e++;
    return e;
}

/* First key of the query rows a.. of one sequence (it began at a - pos[a]): the later of the
 * sequence's start and the window's. */
static int piece_klo(const int32_t *pos, int a, int window)
{
    int k = tile_klo(a, window), s = pos ? a - pos[a] : 0;
    return s > k ? s : k;
}

/* The blocks below are small single-threaded sgemm calls made from inside the OpenMP
 * loop (OpenBLAS runs single-threaded, see matmul.c). Per query tile of rows r0..r1 (and
 * with pos, per piece of the tile inside one sequence): S = Q K^T * scale over keys
 * klo..r1 only (klo: the first key inside the piece's sequence and windows), so the causal
 * mask and the window waste at most one tile and keys of other sequences are never
 * multiplied. */
static void attention_forward(float *out, float *lse, const float *qkv, const int32_t *pos, int B,
                              int T, int H, int KV, int hd, const struct cpu_attn *opt,
                              float *scratch, int nslots)
{
    int ld = (H + 2 * KV) * hd, ldo = H * hd, group = H / KV;
    struct cpu_attn o = attn_opts(opt, hd);
    size_t per = cpu_attention_scratch_floats(T, hd);
    int ntiles = (T + QTILE - 1) / QTILE;
    cpu_blas_single_thread();
#pragma omp parallel for collapse(3) schedule(dynamic) num_threads(nslots) \
    if ((long)B * H * T * T * hd > CPU_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int tile = 0; tile < ntiles; tile++) {
                float *s = scratch + per * omp_get_thread_num(); // (R, n)
                const float *base = qkv + (size_t)b * T * ld;
                const int32_t *bp = pos ? pos + (size_t)b * T : NULL;
                int t1 = tile * QTILE + QTILE < T ? tile * QTILE + QTILE : T;
                for (int r0 = tile * QTILE, e; r0 < t1; r0 = e) {
                    e = seg_end(bp, r0, t1);
                    int R = e - r0, klo = piece_klo(bp, r0, o.window), n = e - klo;
                    const float *k0 = base + (size_t)klo * ld + (size_t)(H + h / group) * hd;
                    const float *v0 = base + (size_t)klo * ld + (size_t)(H + KV + h / group) * hd;
                    const float *q = base + (size_t)r0 * ld + (size_t)h * hd;
                    // s (R,n) = scale * q (R,hd) @ k (n,hd)^T
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, n, hd, o.scale, q, ld,
                                k0, ld, 0.0f, s, n);
                    masked_softmax(s, R, n, r0, klo, o.window, o.softcap, NULL,
                                   lse + ((size_t)b * H + h) * T + r0, NULL);
                    // out (R,hd) = p (R,n) @ v (n,hd)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, hd, n, 1.0f, s, n, v0,
                                ld, 0.0f, out + ((size_t)b * T + r0) * ldo + (size_t)h * hd, ldo);
                }
            }
}

static void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out,
                               const float *lse, const int32_t *pos, int B, int T, int H, int KV,
                               int hd, const struct cpu_attn *opt, float *scratch, int nslots)
{
    int ld = (H + 2 * KV) * hd, ldo = H * hd, group = H / KV;
    struct cpu_attn o = attn_opts(opt, hd);
    float scale = o.scale;
    size_t per = cpu_attention_scratch_floats(T, hd);
    cpu_blas_single_thread();
    // One unit per (b, kv head): it owns dk, dv of that head and dq of its query
    // heads, so no two threads write the same gradient.
#pragma omp parallel for collapse(2) schedule(static) num_threads(nslots) \
    if ((long)B * H * T * T * hd > CPU_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int kh = 0; kh < KV; kh++) {
            float *p = scratch + per * omp_get_thread_num(); // (R, n) probabilities
            float *ds = p + (size_t)QTILE * T;               // (R, n) dP, then dS
            float *th = ds + (size_t)QTILE * T;              // (R, n) tanh of the soft-cap
            const float *base = qkv + (size_t)b * T * ld;
            float *dbase = dqkv + (size_t)b * T * ld;
            const int32_t *bp = pos ? pos + (size_t)b * T : NULL;
            const float *k00 = base + (size_t)(H + kh) * hd, *v00 = base + (size_t)(H + KV + kh) * hd;
            float *dk00 = dbase + (size_t)(H + kh) * hd, *dv00 = dbase + (size_t)(H + KV + kh) * hd;
            for (int j = 0; j < T; j++) {
                memset(dk00 + (size_t)j * ld, 0, sizeof(float) * hd);
                memset(dv00 + (size_t)j * ld, 0, sizeof(float) * hd);
            }
            for (int h = kh * group; h < (kh + 1) * group; h++)
                for (int r0 = 0, e; r0 < T; r0 = e) {
                    int t1 = (r0 / QTILE + 1) * QTILE < T ? (r0 / QTILE + 1) * QTILE : T;
                    e = seg_end(bp, r0, t1);
                    int R = e - r0, klo = piece_klo(bp, r0, o.window), n = e - klo;
                    const float *k0 = k00 + (size_t)klo * ld, *v0 = v00 + (size_t)klo * ld;
                    float *dk0 = dk00 + (size_t)klo * ld, *dv0 = dv00 + (size_t)klo * ld;
                    const float *q = base + (size_t)r0 * ld + (size_t)h * hd;
                    float *dq = dbase + (size_t)r0 * ld + (size_t)h * hd;
                    const float *oo = out + ((size_t)b * T + r0) * ldo + (size_t)h * hd;
                    const float *g = dout + ((size_t)b * T + r0) * ldo + (size_t)h * hd;
                    // recompute p (R,n) from the saved log-sum-exp
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, n, hd, scale, q, ld,
                                k0, ld, 0.0f, p, n);
                    masked_softmax(p, R, n, r0, klo, o.window, o.softcap, th, NULL,
                                   lse + ((size_t)b * H + h) * T + r0);
                    // dP (R,n) = g (R,hd) @ v (n,hd)^T
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, n, hd, 1.0f, g, ldo,
                                v0, ld, 0.0f, ds, n);
                    // dS = p * (dP - D) * scale [* (1 - tanh^2)], D_i = g_i . o_i
                    for (int i = 0; i < R; i++) {
                        const float *gi = g + (size_t)i * ldo, *oi = oo + (size_t)i * ldo;
                        float D = 0.0f;
#pragma omp simd reduction(+ : D)
                        for (int c = 0; c < hd; c++)
                            D += gi[c] * oi[c];
                        float *pr = p + (size_t)i * n, *dr = ds + (size_t)i * n;
                        if (o.softcap > 0) {
                            const float *tr = th + (size_t)i * n;
#pragma omp simd
                            for (int j = 0; j < n; j++)
                                dr[j] = pr[j] * (dr[j] - D) * scale * (1.0f - tr[j] * tr[j]);
                        } else {
#pragma omp simd
                            for (int j = 0; j < n; j++)
                                dr[j] = pr[j] * (dr[j] - D) * scale;
                        }
                    }
                    // dq (R,hd) = dS (R,n) @ k (n,hd)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, hd, n, 1.0f, ds, n,
                                k0, ld, 0.0f, dq, ld);
                    // dk (n,hd) += dS^T @ q ; dv (n,hd) += p^T @ g
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, hd, R, 1.0f, ds, n, q,
                                ld, 1.0f, dk0, ld);
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, hd, R, 1.0f, p, n, g,
                                ldo, 1.0f, dv0, ld);
                }
        }
}

void cpu_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int H, int KV,
                           int hd, const struct cpu_attn *opt, float *scratch, int nslots)
{
    attention_forward(out, lse, qkv, NULL, B, T, H, KV, hd, opt, scratch, nslots);
}

void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out,
                            const float *lse, int B, int T, int H, int KV, int hd,
                            const struct cpu_attn *opt, float *scratch, int nslots)
{
    attention_backward(dqkv, dout, qkv, out, lse, NULL, B, T, H, KV, hd, opt, scratch, nslots);
}

void cpu_attention_forward_pos(float *out, float *lse, const float *qkv, const int32_t *pos, int B,
                               int T, int H, int KV, int hd, const struct cpu_attn *opt,
                               float *scratch, int nslots)
{
    attention_forward(out, lse, qkv, pos, B, T, H, KV, hd, opt, scratch, nslots);
}

void cpu_attention_backward_pos(float *dqkv, const float *dout, const float *qkv, const float *out,
                                const float *lse, const int32_t *pos, int B, int T, int H, int KV,
                                int hd, const struct cpu_attn *opt, float *scratch, int nslots)
{
    attention_backward(dqkv, dout, qkv, out, lse, pos, B, T, H, KV, hd, opt, scratch, nslots);
}
