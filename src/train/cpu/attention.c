/* cpu attention: fused causal multi-head attention with grouped-query heads, and RoPE
 * (HF rotate_half layout, Llama 3 frequency scaling). Forward keeps only the per-row
 * log-sum-exp; backward recomputes probabilities row by row (O(T) scratch, no (T,T)). */
#include <math.h>
#include <string.h>

#include "train/cpu/kernels.h"

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

void cpu_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int H, int KV,
                           int hd)
{
    size_t ld = (size_t)(H + 2 * KV) * hd, ldo = (size_t)H * hd;
    int group = H / KV;
    float scale = 1.0f / sqrtf((float)hd);
    // Online softmax (running max and sum): one pass over keys, no score scratch.
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *base = qkv + (size_t)b * T * ld;
            const float *k0 = base + (size_t)(H + h / group) * hd;
            const float *v0 = base + (size_t)(H + KV + h / group) * hd;
            for (int t = 0; t < T; t++) {
                const float *q = base + t * ld + (size_t)h * hd;
                float *o = out + ((size_t)b * T + t) * ldo + (size_t)h * hd;
                float mx = -INFINITY, sum = 0.0f;
                memset(o, 0, sizeof(float) * hd);
                for (int j = 0; j <= t; j++) {
                    float sc = dot(q, k0 + j * ld, hd) * scale;
                    if (sc > mx) {
                        float c = expf(mx - sc); // 0 on the first key
                        sum *= c;
                        for (int i = 0; i < hd; i++)
                            o[i] *= c;
                        mx = sc;
                    }
                    float p = expf(sc - mx);
                    sum += p;
                    axpy(o, p, v0 + j * ld, hd);
                }
                float inv = 1.0f / sum;
                for (int i = 0; i < hd; i++)
                    o[i] *= inv;
                lse[((size_t)b * H + h) * T + t] = mx + logf(sum);
            }
        }
}

void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out,
                            const float *lse, int B, int T, int H, int KV, int hd)
{
    size_t ld = (size_t)(H + 2 * KV) * hd, ldo = (size_t)H * hd;
    int group = H / KV;
    float scale = 1.0f / sqrtf((float)hd);
    // One unit per (b, kv head): it owns dk, dv of that head and dq of its query
    // heads, so no two threads write the same gradient.
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int kh = 0; kh < KV; kh++) {
            const float *base = qkv + (size_t)b * T * ld;
            float *dbase = dqkv + (size_t)b * T * ld;
            const float *k0 = base + (size_t)(H + kh) * hd, *v0 = base + (size_t)(H + KV + kh) * hd;
            float *dk0 = dbase + (size_t)(H + kh) * hd, *dv0 = dbase + (size_t)(H + KV + kh) * hd;
            for (int j = 0; j < T; j++) {
                memset(dk0 + j * ld, 0, sizeof(float) * hd);
                memset(dv0 + j * ld, 0, sizeof(float) * hd);
            }
            for (int h = kh * group; h < (kh + 1) * group; h++)
                for (int t = 0; t < T; t++) {
                    const float *q = base + t * ld + (size_t)h * hd;
                    float *dq = dbase + t * ld + (size_t)h * hd;
                    const float *o = out + ((size_t)b * T + t) * ldo + (size_t)h * hd;
                    const float *dout_t = dout + ((size_t)b * T + t) * ldo + (size_t)h * hd;
                    float l = lse[((size_t)b * H + h) * T + t];
                    float D = dot(dout_t, o, hd); // sum_j p_j dp_j
                    memset(dq, 0, sizeof(float) * hd);
                    for (int j = 0; j <= t; j++) {
                        const float *k = k0 + j * ld, *v = v0 + j * ld;
                        float p = expf(dot(q, k, hd) * scale - l);
                        float ds = p * (dot(dout_t, v, hd) - D) * scale;
                        axpy(dq, ds, k, hd);
                        axpy(dk0 + j * ld, ds, q, hd);
                        axpy(dv0 + j * ld, p, dout_t, hd);
                    }
                }
        }
}
