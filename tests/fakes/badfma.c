/* Fake faulty FPU (build/fakes/libbadfma.so): LD_PRELOAD it to make libm's
 * fma() return a result with its lowest mantissa bit flipped once every
 * 65536 calls — the kind of silent data corruption a bad core produces.
 * The sdc health check must notice. */
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

static double (*real_fma)(double, double, double);
static unsigned long calls;

double fma(double x, double y, double z)
{
    if (!real_fma)
        *(void **)&real_fma = dlsym(RTLD_NEXT, "fma");
    double r = real_fma(x, y, z);
    if ((++calls & 0xffff) == 0) {
        uint64_t bits;
        memcpy(&bits, &r, sizeof(bits));
        bits ^= 1;
        memcpy(&r, &bits, sizeof(bits));
    }
    return r;
}
