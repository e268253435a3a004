/* vmath: a vectorizable expf for the kernels' hot loops (softmax, attention, SwiGLU).
 * glibc's expf is a function call per element; this inlines into `omp simd` loops.
 * Cephes polynomial, about 1e-7 relative error on [-87.3, 88.3]; arguments are clamped to
 * that range (exp(-inf) gives ~1e-38, not 0), NaN stays NaN. Branch-free, so it vectorizes. */
#ifndef MTC_TRAIN_CPU_VMATH_H
#define MTC_TRAIN_CPU_VMATH_H

#include <stdint.h>
#include <string.h>

#pragma omp declare simd notinbranch
static inline float vexpf(float x)
{
    // Two unconditional clamps: a nested ?: would make the second comparison
    // conditional, which -ftrapping-math forbids if-converting.
    float xc = x > 88.3f ? 88.3f : x;
    xc = xc < -87.3f ? -87.3f : xc;
    // n = round(x / ln2) with the 1.5*2^23 trick: t's low mantissa bits hold n, so the
    // exponent bits of 2^n come from integer arithmetic (no float->int conversion,
    // which would keep the loop from vectorizing under -ftrapping-math).
    float t = xc * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    uint32_t bits = (tb - 0x4B400000u + 127u) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    return p * s;
}

#endif
