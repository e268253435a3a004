/* cpu attention: fused causal multi-head attention with grouped-query heads, and RoPE
 * (HF rotate_half layout, Llama 3 frequency scaling). Forward keeps only the per-row
 * log-sum-exp; backward recomputes probabilities row by row (O(T) scratch, no (T,T)). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "train/cpu/kernels.h"
#include "train/cpu/vmath.h"

void cpu_rope_tables(float *cos_t, float *sin_t, int T, int hd, float theta, float factor,
                     float low_freq, float high_freq, int orig_max)
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
        for (int t = 0; t < T; t++) {
            double a = t * freq;
            cos_t[(size_t)t * half + i] = (float)cos(a);
            sin_t[(size_t)t * half + i] = (float)sin(a);
        }
    }
}

void cpu_rope(float *x, int ld, const float *cos_t, const float *sin_t, int B, int T, int nheads,
              int hd, int inverse)
{
    int half = hd / 2;
    float sgn = inverse ? -1.0f : 1.0f;
#pragma omp parallel for collapse(2) schedule(static)
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

static inline float dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static inline void axpy(float *y, float a, const float *x, int n)
{
#pragma omp simd
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

size_t cpu_attention_scratch_floats(int T, int hd)
{
    return 5 * (size_t)T * hd + 3 * (size_t)T + 64;
}

/* Gather the rows of one kv head into contiguous (T,hd) and transposed (hd,T) copies,
 * so score and gradient loops run over contiguous memory. */
static void gather(float *rows, float *cols, const float *src, size_t ld, int T, int hd)
{
    for (int j = 0; j < T; j++) {
        const float *r = src + j * ld;
        if (rows)
            memcpy(rows + (size_t)j * hd, r, sizeof(float) * hd);
        if (cols)
            for (int i = 0; i < hd; i++)
                cols[(size_t)i * T + j] = r[i];
    }
}

/* s[0..n) = scale * q . kt[:, j] with kt (hd, T): vectorized over keys j. */
static void scores(float *s, const float *q, const float *kt, int T, int hd, int n, float scale)
{
    memset(s, 0, sizeof(float) * n);
    for (int i = 0; i < hd; i++) {
        const float *row = kt + (size_t)i * T;
        float qi = q[i] * scale;
#pragma omp simd
        for (int j = 0; j < n; j++)
            s[j] += qi * row[j];
    }
}

void cpu_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int H, int KV,
                           int hd, float *scratch, int nslots)
{
    size_t ld = (size_t)(H + 2 * KV) * hd, ldo = (size_t)H * hd;
    int group = H / KV;
    float scale = 1.0f / sqrtf((float)hd);
    size_t per = cpu_attention_scratch_floats(T, hd);
    // One unit per (b, kv head): its K and V are gathered once for the whole group.
#pragma omp parallel for collapse(2) schedule(static) num_threads(nslots)
    for (int b = 0; b < B; b++)
        for (int kh = 0; kh < KV; kh++) {
            float *kt = scratch + per * omp_get_thread_num(); // (hd, T)
            float *vr = kt + (size_t)T * hd;                   // (T, hd)
            float *s = vr + (size_t)T * hd;                    // (T)
            const float *base = qkv + (size_t)b * T * ld;
            gather(NULL, kt, base + (size_t)(H + kh) * hd, ld, T, hd);
            gather(vr, NULL, base + (size_t)(H + KV + kh) * hd, ld, T, hd);
            for (int h = kh * group; h < (kh + 1) * group; h++)
                for (int t = 0; t < T; t++) {
                    const float *q = base + t * ld + (size_t)h * hd;
                    float *o = out + ((size_t)b * T + t) * ldo + (size_t)h * hd;
                    int n = t + 1; // causal: keys 0..t
                    scores(s, q, kt, T, hd, n, scale);
                    float mx = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : mx)
                    for (int j = 0; j < n; j++)
                        mx = s[j] > mx ? s[j] : mx;
#pragma omp simd reduction(+ : sum)
                    for (int j = 0; j < n; j++) {
                        s[j] = vexpf(s[j] - mx);
                        sum += s[j];
                    }
                    float inv = 1.0f / sum;
                    memset(o, 0, sizeof(float) * hd);
                    for (int j = 0; j < n; j++)
                        axpy(o, s[j] * inv, vr + (size_t)j * hd, hd);
                    lse[((size_t)b * H + h) * T + t] = mx + logf(sum);
                }
        }
}

void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out,
                            const float *lse, int B, int T, int H, int KV, int hd, float *scratch,
                            int nslots)
{
    size_t ld = (size_t)(H + 2 * KV) * hd, ldo = (size_t)H * hd, Thd = (size_t)T * hd;
    int group = H / KV;
    float scale = 1.0f / sqrtf((float)hd);
    size_t per = cpu_attention_scratch_floats(T, hd);
    // One unit per (b, kv head): it owns dk, dv of that head and dq of its query
    // heads, so no two threads write the same gradient.
#pragma omp parallel for collapse(2) schedule(static) num_threads(nslots)
    for (int b = 0; b < B; b++)
        for (int kh = 0; kh < KV; kh++) {
            float *kt = scratch + per * omp_get_thread_num(); // (hd, T)
            float *kr = kt + Thd, *vt = kr + Thd;            // (T, hd), (hd, T)
            float *dkt = vt + Thd, *dvt = dkt + Thd;         // (hd, T) accumulators
            float *p = dvt + Thd, *ds = p + T;               // (T) each
            const float *base = qkv + (size_t)b * T * ld;
            float *dbase = dqkv + (size_t)b * T * ld;
            gather(kr, kt, base + (size_t)(H + kh) * hd, ld, T, hd);
            gather(NULL, vt, base + (size_t)(H + KV + kh) * hd, ld, T, hd);
            memset(dkt, 0, sizeof(float) * 2 * Thd);
            for (int h = kh * group; h < (kh + 1) * group; h++)
                for (int t = 0; t < T; t++) {
                    const float *q = base + t * ld + (size_t)h * hd;
                    float *dq = dbase + t * ld + (size_t)h * hd;
                    const float *o = out + ((size_t)b * T + t) * ldo + (size_t)h * hd;
                    const float *g = dout + ((size_t)b * T + t) * ldo + (size_t)h * hd;
                    float l = lse[((size_t)b * H + h) * T + t], D = dot(g, o, hd);
                    int n = t + 1;
                    scores(p, q, kt, T, hd, n, scale);
#pragma omp simd
                    for (int j = 0; j < n; j++)
                        p[j] = vexpf(p[j] - l); // probabilities, recomputed
                    scores(ds, g, vt, T, hd, n, 1.0f); // dp_j = g . v_j
#pragma omp simd
                    for (int j = 0; j < n; j++)
                        ds[j] = p[j] * (ds[j] - D) * scale;
                    memset(dq, 0, sizeof(float) * hd);
                    for (int j = 0; j < n; j++)
                        axpy(dq, ds[j], kr + (size_t)j * hd, hd);
                    for (int i = 0; i < hd; i++) {
                        float *dkr = dkt + (size_t)i * T, *dvr = dvt + (size_t)i * T;
                        float qi = q[i], gi = g[i];
#pragma omp simd
                        for (int j = 0; j < n; j++) {
                            dkr[j] += qi * ds[j];
                            dvr[j] += gi * p[j];
                        }
                    }
                }
            for (int j = 0; j < T; j++) { // scatter dk, dv back into their rows
                float *dk = dbase + j * ld + (size_t)(H + kh) * hd;
                float *dv = dbase + j * ld + (size_t)(H + KV + kh) * hd;
                for (int i = 0; i < hd; i++) {
                    dk[i] = dkt[(size_t)i * T + j];
                    dv[i] = dvt[(size_t)i * T + j];
                }
            }
        }
}
