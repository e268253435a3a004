/* Fake NVML (built as build/fakes/libnvml.so): exports the NVML entry points
 * mtc-agent uses, answering from a state file named by $FAKE_NVML_STATE that
 * is re-read on every call, so a test can break a GPU while the agent runs.
 *
 * State file, one directive per line ('#' comments):
 *   unreachable 1          nvmlInit_v2 fails (driver not loaded)
 *   count N                GPUs visible (default 0)
 *   gpu I key=value ...    per GPU I: ecc=N (volatile uncorrected), temp=C,
 *                          throttle=0xBITS, remap_pending=0|1, remap_failure=0|1,
 *                          remap_unc=N, retired=N, lost=0|1, no_remap=1
 *                          (remapped rows unsupported: use retired pages)
 *                          cc_major=N cc_minor=N (compute capability, 8.0),
 *                          brand=N (nvmlBrandType_t, 2: Tesla)
 * Without $FAKE_NVML_STATE it answers as the real NVML of the driver it lies
 * in: the GPUs are the entries of ROOT/proc/driver/nvidia/gpus, in order,
 * the driver's version that of ROOT/proc/driver/nvidia/version, where ROOT
 * is the tree above the directory this library was loaded from when that is
 * ROOT/usr/lib/x86_64-linux-gnu or ROOT/lib/x86_64-linux-gnu (an emulated
 * node's driver tree, seen from the host; "" inside a container, where
 * /proc/driver/nvidia is the container's), else "". A GPU's compute
 * capability and brand are its entry's file fake-nvml ("arch 9.0",
 * "brand 5"; without it 8.0 and 2, Tesla).
 * $FAKE_NVML_CALLS, when set, names a file that gets a line per nvmlInit_v2
 * ("init SECONDS", the wall clock): mtc-agent opens NVML once a pass, so a
 * test counts the agent's passes and knows when each began. */
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXGPU 16

struct gpu {
    unsigned long long ecc, throttle;
    unsigned temp, remap_pending, remap_failure, remap_unc, retired, lost, no_remap;
    unsigned cc_major, cc_minor, brand;
    char busid[64];
};
struct state {
    int unreachable;
    unsigned count;
    struct gpu g[MAXGPU];
};

static int initialised;

/* ROOT + path into out: ROOT the driver tree this library lies in. */
static void in_tree(const char *path, char *out, size_t len)
{
    static const char *const dirs[] = {"/usr/lib/x86_64-linux-gnu/", "/lib/x86_64-linux-gnu/"};
    Dl_info di;
    char root[PATH_MAX] = "";
    if (dladdr((void *)in_tree, &di) && di.dli_fname) {
        const char *slash = strrchr(di.dli_fname, '/');
        for (size_t i = 0; slash && i < 2; i++) {
            size_t dl = strlen(dirs[i]), at = (size_t)(slash + 1 - di.dli_fname);
            if (at >= dl && strncmp(slash + 1 - dl, dirs[i], dl) == 0 && at - dl < sizeof(root)) {
                snprintf(root, sizeof(root), "%.*s", (int)(at - dl), di.dli_fname);
                break;
            }
        }
    }
    snprintf(out, len, "%s%s", root, path);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct gpu *)a)->busid, ((const struct gpu *)b)->busid);
}

static void load(struct state *s)
{
    memset(s, 0, sizeof(*s));
    for (int i = 0; i < MAXGPU; i++) {
        s->g[i].temp = 40;
        s->g[i].cc_major = 8;
        s->g[i].brand = 2;
    }
    const char *path = getenv("FAKE_NVML_STATE");
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[512], gpus[PATH_MAX];
    in_tree("/proc/driver/nvidia/gpus", gpus, sizeof(gpus));
    DIR *d = path ? NULL : opendir(gpus);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.' && s->count < MAXGPU)
            snprintf(s->g[s->count++].busid, sizeof(s->g[0].busid), "%.63s", e->d_name);
    if (d)
        closedir(d);
    qsort(s->g, s->count, sizeof(s->g[0]), by_name);
    for (unsigned i = 0; !path && i < s->count; i++) {
        char p[PATH_MAX + 128];
        snprintf(p, sizeof(p), "%s/%s/fake-nvml", gpus, s->g[i].busid);
        FILE *g = fopen(p, "r");
        while (g && fgets(line, sizeof(line), g)) {
            unsigned a, b;
            if (sscanf(line, "arch %u.%u", &a, &b) == 2)
                s->g[i].cc_major = a, s->g[i].cc_minor = b;
            else if (sscanf(line, "brand %u", &a) == 1)
                s->g[i].brand = a;
        }
        if (g)
            fclose(g);
    }
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        unsigned idx;
        int off = 0;
        if (sscanf(line, "unreachable %d", &s->unreachable) == 1)
            continue;
        if (sscanf(line, "count %u", &s->count) == 1) {
            if (s->count > MAXGPU)
                s->count = MAXGPU;
            continue;
        }
        if (sscanf(line, "gpu %u %n", &idx, &off) != 1 || idx >= MAXGPU)
            continue;
        struct gpu *g = &s->g[idx];
        for (char *tok = strtok(line + off, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
            char *eq = strchr(tok, '=');
            if (!eq)
                continue;
            *eq = '\0';
            unsigned long long v = strtoull(eq + 1, NULL, 0);
            static const struct {
                const char *k;
                size_t off;
                int wide;
            } keys[] = {
                {"ecc", offsetof(struct gpu, ecc), 1},
                {"throttle", offsetof(struct gpu, throttle), 1},
                {"temp", offsetof(struct gpu, temp), 0},
                {"remap_pending", offsetof(struct gpu, remap_pending), 0},
                {"remap_failure", offsetof(struct gpu, remap_failure), 0},
                {"remap_unc", offsetof(struct gpu, remap_unc), 0},
                {"retired", offsetof(struct gpu, retired), 0},
                {"lost", offsetof(struct gpu, lost), 0},
                {"no_remap", offsetof(struct gpu, no_remap), 0},
                {"cc_major", offsetof(struct gpu, cc_major), 0},
                {"cc_minor", offsetof(struct gpu, cc_minor), 0},
                {"brand", offsetof(struct gpu, brand), 0},
            };
            for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
                if (strcmp(keys[k].k, tok) == 0) {
                    if (keys[k].wide)
                        *(unsigned long long *)((char *)g + keys[k].off) = v;
                    else
                        *(unsigned *)((char *)g + keys[k].off) = (unsigned)v;
                }
        }
    }
    fclose(f);
}

/* NVML return codes (nvml.h) */
enum {
    OK = 0,
    UNINIT = 1,
    INVALID = 2,
    NOT_SUPPORTED = 3,
    INSUFFICIENT = 7,
    NOT_FOUND = 6,
    NO_DRIVER = 9,
    LOST = 15
};

/* A device handle is index+1 disguised as a pointer. */
static int gpu_of(void *dev, struct state *s, struct gpu **g)
{
    uintptr_t i = (uintptr_t)dev;
    load(s);
    if (!initialised)
        return UNINIT;
    if (i == 0 || i > s->count)
        return INVALID;
    *g = &s->g[i - 1];
    return (*g)->lost ? LOST : OK;
}

int nvmlInit_v2(void)
{
    const char *calls = getenv("FAKE_NVML_CALLS");
    FILE *c = calls ? fopen(calls, "a") : NULL;
    if (c) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        fprintf(c, "init %lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
        fclose(c);
    }
    struct state s;
    load(&s);
    if (s.unreachable)
        return NO_DRIVER;
    initialised = 1;
    return OK;
}

int nvmlShutdown(void)
{
    if (!initialised)
        return UNINIT;
    initialised = 0;
    return OK;
}

const char *nvmlErrorString(int rc)
{
    switch (rc) {
    case OK:
        return "Success";
    case UNINIT:
        return "Uninitialized";
    case INVALID:
        return "Invalid Argument";
    case NOT_SUPPORTED:
        return "Not Supported";
    case INSUFFICIENT:
        return "Insufficient Size";
    case NO_DRIVER:
        return "Driver Not Loaded";
    case LOST:
        return "GPU is lost";
    default:
        return "Unknown Error";
    }
}

/* The version of the driver /proc/driver/nvidia/version names. */
int nvmlSystemGetDriverVersion(char *out, unsigned len)
{
    char t[512] = "", p[PATH_MAX];
    in_tree("/proc/driver/nvidia/version", p, sizeof(p));
    FILE *f = fopen(p, "r");
    size_t n = f ? fread(t, 1, sizeof(t) - 1, f) : 0;
    if (f)
        fclose(f);
    t[n] = '\0';
    const char *k = strstr(t, "Kernel Module");
    unsigned v[3];
    if (!initialised)
        return UNINIT;
    if (!k || sscanf(k, "Kernel Module %u.%u.%u", &v[0], &v[1], &v[2]) != 3)
        return NOT_SUPPORTED;
    if ((unsigned)snprintf(out, len, "%u.%u.%02u", v[0], v[1], v[2]) >= len)
        return INSUFFICIENT;
    return OK;
}

int nvmlDeviceGetCount_v2(unsigned *count)
{
    struct state s;
    load(&s);
    if (!initialised)
        return UNINIT;
    *count = s.count;
    return OK;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev)
{
    struct state s;
    load(&s);
    if (!initialised)
        return UNINIT;
    if (i >= s.count)
        return INVALID;
    *dev = (void *)(uintptr_t)(i + 1);
    return OK;
}

int nvmlDeviceGetTotalEccErrors(void *dev, int type, int counter, unsigned long long *n)
{
    struct state s;
    struct gpu *g;
    int rc = gpu_of(dev, &s, &g);
    if (rc != OK)
        return rc;
    /* only volatile (0) uncorrected (1) counts are modelled */
    *n = (type == 1 && counter == 0) ? g->ecc : 0;
    return OK;
}

int nvmlDeviceGetRemappedRows(void *dev, unsigned *corr, unsigned *unc, unsigned *pending,
                              unsigned *failure)
{
    struct state s;
    struct gpu *g;
    int rc = gpu_of(dev, &s, &g);
    if (rc != OK)
        return rc;
    if (g->no_remap)
        return NOT_SUPPORTED;
    *corr = 0;
    *unc = g->remap_unc;
    *pending = g->remap_pending;
    *failure = g->remap_failure;
    return OK;
}

int nvmlDeviceGetRetiredPages(void *dev, int cause, unsigned *count, unsigned long long *addrs)
{
    struct state s;
    struct gpu *g;
    int rc = gpu_of(dev, &s, &g);
    if (rc != OK)
        return rc;
    unsigned n = cause == 1 ? g->retired : 0;
    if (*count < n) {
        *count = n;
        return INSUFFICIENT;
    }
    for (unsigned i = 0; i < n && addrs; i++)
        addrs[i] = 0x1000ULL * (i + 1);
    *count = n;
    return OK;
}

int nvmlDeviceGetTemperature(void *dev, int sensor, unsigned *temp)
{
    struct state s;
    struct gpu *g;
    int rc = gpu_of(dev, &s, &g);
    if (rc != OK)
        return rc;
    if (sensor != 0)
        return INVALID;
    *temp = g->temp;
    return OK;
}

int nvmlDeviceGetCurrentClocksThrottleReasons(void *dev, unsigned long long *reasons)
{
    struct state s;
    struct gpu *g;
    int rc = gpu_of(dev, &s, &g);
    if (rc != OK)
        return rc;
    *reasons = g->throttle;
    return OK;
}

/* A PCI bus id's parts ("0000:03:00.0" or "00000000:03:00.0"). */
static int pci_parse(const char *id, unsigned v[4])
{
    return sscanf(id, "%x:%x:%x.%x", &v[0], &v[1], &v[2], &v[3]) == 4;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *busid, void **dev)
{
    struct state s;
    unsigned want[4], have[4];
    load(&s);
    if (!initialised)
        return UNINIT;
    if (!busid || !pci_parse(busid, want))
        return INVALID;
    for (unsigned i = 0; i < s.count; i++)
        if (pci_parse(s.g[i].busid, have) && memcmp(want, have, sizeof(want)) == 0) {
            *dev = (void *)(uintptr_t)(i + 1);
            return OK;
        }
    return NOT_FOUND;
}

int nvmlDeviceGetCudaComputeCapability(void *dev, int *major, int *minor)
{
    struct state s;
    struct gpu *g;
    int rc = gpu_of(dev, &s, &g);
    if (rc != OK)
        return rc;
    *major = (int)g->cc_major;
    *minor = (int)g->cc_minor;
    return OK;
}

int nvmlDeviceGetBrand(void *dev, int *brand)
{
    struct state s;
    struct gpu *g;
    int rc = gpu_of(dev, &s, &g);
    if (rc != OK)
        return rc;
    *brand = (int)g->brand;
    return OK;
}
