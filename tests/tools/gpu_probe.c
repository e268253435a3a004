/* gpu_probe: what a program in a GPU container sees of the driver, for the
 * container tests — dlopen("libcuda.so.1") and dlopen("libnvidia-ml.so.1")
 * as CUDA programs and NVML users do, one line each:
 *   cuda COUNT VERSION | cuda: WHY        nvml COUNT DRIVER | nvml: WHY
 * Installed as nvidia-smi (a driver tree's stand-in), `nvidia-smi -L` lists
 * NVML's GPUs as the real one does ("GPU 0: ..."). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static void cuda(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        printf("cuda: %s\n", dlerror());
        return;
    }
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
    int (*version)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
    int n = 0, v = 0, rc = init ? init(0) : -1;
    if (rc != 0 || !count || count(&n) != 0 || !version || version(&v) != 0)
        printf("cuda: cuInit %d\n", rc);
    else
        printf("cuda %d %d.%d\n", n, v / 1000, (v % 1000) / 10);
}

static int nvml(int list)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!h) {
        printf("nvml: %s\n", dlerror());
        return 1;
    }
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    int (*count)(unsigned *) = (int (*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2");
    int (*driver)(char *, unsigned) =
        (int (*)(char *, unsigned))dlsym(h, "nvmlSystemGetDriverVersion");
    unsigned n = 0;
    char ver[80] = "unknown";
    int rc = init ? init() : -1;
    if (rc != 0 || !count || count(&n) != 0) {
        printf("nvml: nvmlInit %d\n", rc);
        return 1;
    }
    if (driver)
        driver(ver, sizeof(ver));
    if (list)
        for (unsigned i = 0; i < n; i++)
            printf("GPU %u: Emulated GPU (driver %s)\n", i, ver);
    else
        printf("nvml %u %s\n", n, ver);
    return 0;
}

int main(int argc, char **argv)
{
    const char *me = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (strcmp(me, "nvidia-smi") == 0)
        return nvml(argc > 1 && strcmp(argv[1], "-L") == 0);
    cuda();
    nvml(0);
    return 0;
}
