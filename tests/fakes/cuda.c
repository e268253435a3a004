/* Fake CUDA driver library (built as build/fakes/libcuda.so, soname
 * libcuda.so.1): the three entry points a device query needs, answering as
 * the real libcuda does inside a container — the GPUs are those of
 * /proc/driver/nvidia/gpus whose /dev/nvidiaN the process can see, narrowed
 * by CUDA_VISIBLE_DEVICES (ordinals of that list); the driver's CUDA version
 * is 12.2 (FAKE_CUDA_VERSION at build time). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FAKE_CUDA_VERSION
#define FAKE_CUDA_VERSION 12020
#endif

enum { CUDA_SUCCESS = 0, CUDA_ERROR_NOT_INITIALIZED = 3, CUDA_ERROR_NO_DEVICE = 100 };

static int initialised, ndev;

/* The GPUs this process may use: those with a device file, then CUDA_VISIBLE_DEVICES. */
static int count_devices(void)
{
    int n = 0;
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[512], t[1024] = "";
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "/proc/driver/nvidia/gpus/%s/information", e->d_name);
        FILE *f = fopen(p, "r");
        size_t r = f ? fread(t, 1, sizeof(t) - 1, f) : 0;
        if (f)
            fclose(f);
        t[r] = '\0';
        const char *m = strstr(t, "Device Minor:");
        snprintf(p, sizeof(p), "/dev/nvidia%d", m ? atoi(m + 13) : -1);
        if (m && access(p, F_OK) == 0)
            n++;
    }
    if (d)
        closedir(d);
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (!cvd)
        return n;
    /* CUDA stops at the first entry that names no device */
    int k = 0;
    for (const char *p = cvd; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= n)
            break;
        k++;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            break;
    }
    return k;
}

int cuInit(unsigned flags)
{
    (void)flags;
    if (access("/proc/driver/nvidia/version", R_OK) != 0)
        return CUDA_ERROR_NO_DEVICE;
    ndev = count_devices();
    initialised = 1;
    return ndev ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

int cuDeviceGetCount(int *count)
{
    if (!initialised)
        return CUDA_ERROR_NOT_INITIALIZED;
    *count = ndev;
    return CUDA_SUCCESS;
}

int cuDriverGetVersion(int *version)
{
    *version = FAKE_CUDA_VERSION;
    return CUDA_SUCCESS;
}
