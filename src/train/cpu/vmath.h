/* vmath: a vectorizable expf for the kernels' hot loops (softmax, attention, SwiGLU).
 * glibc's expf is a function call per element; this inlines into `omp simd` loops.
 * Cephes polynomial, about 2 ulp; exp(x) = 0 below -87.3 (so -inf gives 0). */
#ifndef MTC_TRAIN_CPU_VMATH_H
#define MTC_TRAIN_CPU_VMATH_H

#include <stdint.h>
#include <string.h>

#pragma omp declare simd notinbranch
static inline float vexpf(float x)
{
    float xc = x > 88.3f ? 88.3f : (x < -87.3f ? -87.3f : x);
    // n = round(x / ln2) via the 1.5*2^23 trick (no rintf call, so it vectorizes)
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    return x < -87.3f ? 0.0f : p * s;
}

#endif
