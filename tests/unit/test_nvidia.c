/* test_nvidia: the pure part of driver injection — the capability table,
 * NVIDIA_DRIVER_CAPABILITIES, the driver's version line, the loader cache
 * (the host's /etc/ld.so.cache against `ldconfig -p`, one the real ldconfig
 * makes here, and broken bytes), NVIDIA_REQUIRE_* checks, and the GPUs and
 * CUDA_VISIBLE_DEVICES a container sees. */
#include "check.h"
#include "nvidia/nvidia.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_table(void)
{
    unsigned caps = 0;
    mtc_error_t err;
    CHECK(nvidia_caps_parse(NULL, &caps, &err) == 0 &&
              caps == (NVIDIA_CAP_COMPUTE | NVIDIA_CAP_UTILITY),
          "unset capabilities: compute,utility");
    CHECK(nvidia_caps_parse("utility", &caps, &err) == 0 && caps == NVIDIA_CAP_UTILITY,
          "utility alone");
    CHECK(nvidia_caps_parse("all", &caps, &err) == 0 && caps == NVIDIA_CAP_ALL, "all");
    CHECK(nvidia_caps_parse("compute,video", &caps, &err) == 0 &&
              caps == (NVIDIA_CAP_COMPUTE | NVIDIA_CAP_VIDEO),
          "a list");
    CHECK(nvidia_caps_parse("compute,gpu", &caps, &err) < 0 && strstr(err.text, "'gpu'"),
          "an unknown capability is named (%s)", err.text);
    /* each file once, each with a capability; libcuda is compute, NVML utility */
    int dup = 0, nocap = 0;
    unsigned cuda = 0, ml = 0;
    for (size_t i = 0; i < nvidia_nfiles; i++) {
        nocap |= nvidia_files[i].caps == 0;
        for (size_t j = i + 1; j < nvidia_nfiles; j++)
            dup |= strcmp(nvidia_files[i].name, nvidia_files[j].name) == 0;
        if (strcmp(nvidia_files[i].name, "libcuda.so") == 0)
            cuda = nvidia_files[i].caps;
        if (strcmp(nvidia_files[i].name, "libnvidia-ml.so") == 0)
            ml = nvidia_files[i].caps;
    }
    CHECK(!dup && !nocap, "the table: no file twice, none without a capability");
    CHECK(cuda == NVIDIA_CAP_COMPUTE && ml == NVIDIA_CAP_UTILITY,
          "libcuda: compute; libnvidia-ml: utility");
}

static void test_version(void)
{
    char v[32];
    CHECK(nvidia_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat "
                                "Aug 19 01:15:15 UTC 2023\nGCC version:  gcc 12\n",
                                v, sizeof(v)) == 0 &&
              strcmp(v, "535.104.05") == 0,
          "the driver's version from /proc/driver/nvidia/version (%s)", v);
    CHECK(
        nvidia_driver_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  "
                              "Release Build\n",
                              v, sizeof(v)) == 0 &&
            strcmp(v, "570.86.15") == 0,
        "the open kernel module's line (%s)", v);
    CHECK(nvidia_driver_version("garbage", v, sizeof(v)) < 0 && errno == EINVAL,
          "no version: EINVAL");
    CHECK(nvidia_version_cmp("12.10", "12.4") > 0 && nvidia_version_cmp("12.2", "12.4") < 0 &&
              nvidia_version_cmp("535.104.05", "535.104.5") == 0 &&
              nvidia_version_cmp("12", "12.0") == 0,
          "versions compare by number, field by field");
}

struct find {
    const char *want;
    char path[512];
    int n;
};

static int find_cb(void *arg, const char *soname, const char *path)
{
    struct find *f = arg;
    f->n++;
    if (strcmp(soname, f->want) == 0)
        snprintf(f->path, sizeof(f->path), "%s", path);
    return 0;
}

static int stop_cb(void *arg, const char *soname, const char *path)
{
    (void)soname;
    (void)path;
    return ++*(int *)arg == 2 ? 7 : 0;
}

static void test_ldcache(void)
{
    /* the host's own cache: libc.so.6 where `ldconfig -p` says */
    size_t len = 0;
    char *buf = mtc_read_file("/etc/ld.so.cache", &len);
    struct find f = {"libc.so.6", "", 0};
    CHECK(buf && nvidia_ldcache_each(buf, len, find_cb, &f) == 0 && f.path[0],
          "the host's ld.so.cache: libc.so.6 -> %s (%d entries)", f.path, f.n);
    FILE *p = popen(
        "ldconfig -p | sed -n 's/^[[:space:]]*libc.so.6 (libc6,x86-64) => //p' | head -1", "r");
    char want[512] = "";
    if (p && fgets(want, sizeof(want), p))
        want[strcspn(want, "\n")] = '\0';
    if (p)
        pclose(p);
    CHECK_STR(f.path, want, "the same path as ldconfig -p");
    int count = 0;
    CHECK(buf && nvidia_ldcache_each(buf, len, stop_cb, &count) == 7 && count == 2,
          "a callback's non-zero return stops the walk");
    /* a cache the real ldconfig makes of a directory with a versioned library */
    char dir[] = "/tmp/test_nvidia.XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a directory");
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s/lib && printf 'int cuInit(int f){return f;}\\n' >%s/c.c && "
             "cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o %s/lib/libcuda.so.535.104.05 %s/c.c && "
             "printf '%s/lib\\n' >%s/ld.so.conf && ldconfig -f %s/ld.so.conf -C %s/ld.so.cache",
             dir, dir, dir, dir, dir, dir, dir, dir);
    CHECK(system(cmd) == 0, "ldconfig makes a cache of a libcuda.so.535.104.05");
    char path[600];
    snprintf(path, sizeof(path), "%s/ld.so.cache", dir);
    char *c2 = mtc_read_file(path, &len);
    struct find g = {"libcuda.so.1", "", 0};
    snprintf(path, sizeof(path), "%s/lib/libcuda.so.1", dir);
    CHECK(c2 && nvidia_ldcache_each(c2, len, find_cb, &g) == 0 && strcmp(g.path, path) == 0,
          "its libcuda.so.1 entry (%s)", g.path);
    /* broken bytes: a cache cut inside its header or entries is refused (the
     * sanitizer run checks that no cut is read past its end) */
    int bad = 0, cuts = 0;
    uint32_t nent = 0;
    if (c2 && len > 24)
        memcpy(&nent, c2 + 20, 4);
    for (size_t cut = 0; c2 && cut < 48 + (size_t)nent * 24 && cut < len; cut += 5, cuts++)
        bad += nvidia_ldcache_each(c2, cut, find_cb, &g) < 0;
    for (size_t cut = 48 + (size_t)nent * 24; c2 && cut < len; cut += 5)
        (void)nvidia_ldcache_each(c2, cut, find_cb, &g);
    CHECK(c2 && nent > 0 && bad == cuts,
          "a cache cut in its header or entries is refused (%d of %d cuts)", bad, cuts);
    if (c2 && len > 60) {
        c2[48 + 8] = (char)0xff; /* the first entry's value offset, far out */
        c2[48 + 11] = (char)0x7f;
        CHECK(nvidia_ldcache_each(c2, len, find_cb, &g) < 0 && errno == EINVAL,
              "an offset outside the cache is refused");
    }
    CHECK(nvidia_ldcache_each("not a cache at all, not at all....................................",
                              64, find_cb, &g) < 0,
          "other bytes are refused");
    free(c2);
    free(buf);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
}

static void test_require(void)
{
    struct nvidia_facts f = {"535.104.05", "12.2", "9.0", "tesla", "0"};
    char why[256];
    mtc_error_t err;
    CHECK(nvidia_require_check("cuda>=12.2", &f, why, sizeof(why), &err) == 1,
          "cuda>=12.2 on 12.2");
    CHECK(nvidia_require_check("cuda>=12.4", &f, why, sizeof(why), &err) == 0 &&
              strstr(why, "cuda>=12.4") && strstr(why, "CUDA 12.2") && strstr(why, "535.104.05"),
          "cuda>=12.4 on 12.2: not met, both versions named (%s)", why);
    CHECK(nvidia_require_check("cuda>=12.4 brand=tesla,driver>=535,driver<536", &f, why,
                               sizeof(why), &err) == 1,
          "alternatives: one that holds is enough");
    CHECK(nvidia_require_check("cuda>=12.4 brand=tesla,driver>=470,driver<471", &f, why,
                               sizeof(why), &err) == 0,
          "no alternative holds");
    CHECK(nvidia_require_check("arch>=8.0 brand!=geforce", &f, why, sizeof(why), &err) == 1,
          "arch and brand");
    struct nvidia_facts unknown = {"535.104.05", "12.2", "", "", ""};
    CHECK(nvidia_require_check("arch>=10.0", &unknown, why, sizeof(why), &err) == 1,
          "a condition on an unknown fact holds");
    CHECK(nvidia_require_check("", &f, why, sizeof(why), &err) == 1, "an empty requirement holds");
    CHECK(nvidia_require_check("cuda~12", &f, why, sizeof(why), &err) < 0 &&
              strstr(err.text, "cuda~12"),
          "a bad condition is named (%s)", err.text);
    CHECK(nvidia_require_check("gpu>=1", &f, why, sizeof(why), &err) < 0,
          "an unknown key is refused");
}

static void test_require_gpus(void)
{
    struct nvidia_facts f = {"535.104.05", "12.2", "", "", ""};
    struct nvidia_gpu g[2] = {{.minor = 4, .arch = "8.0", .brand = "Tesla"},
                              {.minor = 5, .arch = "9.0", .brand = "GeForce"}};
    char why[256];
    mtc_error_t err;
    CHECK(strcmp(nvidia_brand_name(2), "Tesla") == 0 &&
              strcmp(nvidia_brand_name(5), "GeForce") == 0 &&
              strcmp(nvidia_brand_name(14), "NVIDIA") == 0 &&
              strcmp(nvidia_brand_name(16), "TITANRTX") == 0 &&
              strcmp(nvidia_brand_name(99), "Unknown") == 0 &&
              strcmp(nvidia_brand_name(-1), "Unknown") == 0,
          "NVML brands by libnvidia-container's names");
    CHECK(nvidia_require_gpus("cuda>=12.0 arch>=8.0", &f, g, 2, why, sizeof(why), &err) == 1,
          "arch>=8.0 holds for 8.0 and 9.0");
    CHECK(nvidia_require_gpus("cuda>=12.0,arch>=9.0", &f, g, 2, why, sizeof(why), &err) == 0 &&
              strstr(why, "arch>=9.0 (GPU 4: compute capability 8.0)"),
          "arch>=9.0 must hold for every GPU: the 8.0 one is named (%s)", why);
    CHECK(nvidia_require_gpus("cuda>=12.0,arch>=9.0", &f, g + 1, 1, why, sizeof(why), &err) == 1,
          "only the 9.0 GPU: met");
    CHECK(nvidia_require_gpus("brand=tesla", &f, g, 2, why, sizeof(why), &err) == 0 &&
              strstr(why, "brand=tesla (GPU 5: brand GeForce)"),
          "brand=tesla on a GeForce: named, case aside for Tesla (%s)", why);
    CHECK(nvidia_require_gpus("brand=TESLA", &f, g, 1, why, sizeof(why), &err) == 1,
          "brands compare without regard to case");
    CHECK(nvidia_require_gpus("brand=tesla brand=geforce", &f, g, 2, why, sizeof(why), &err) == 1,
          "each GPU may meet a different alternative (one evaluation per GPU)");
    CHECK(nvidia_require_gpus("arch>=10.0,brand=quadro", &f, g, 0, why, sizeof(why), &err) == 1,
          "no GPU: arch and brand are unknown and hold");
    CHECK(nvidia_require_gpus("cuda>=12.4", &f, NULL, 0, why, sizeof(why), &err) == 0 &&
              strstr(why, "CUDA 12.2"),
          "no GPU: cuda still checked (%s)", why);
    struct nvidia_gpu unknown = {.minor = 0};
    CHECK(nvidia_require_gpus("arch>=9.0", &f, &unknown, 1, why, sizeof(why), &err) == 1,
          "a GPU NVML said nothing of holds");
    CHECK(nvidia_require_gpus("arch>>9.0", &f, g, 2, why, sizeof(why), &err) < 0,
          "a bad condition is refused");
    CHECK(nvidia_require_gpus("arch<8.0", &f, g, 2, why, sizeof(why), &err) == 0 &&
              strstr(why, "GPU 4"),
          "arch<8.0 on 8.0 fails (%s)", why);
}

static void test_visible(void)
{
    struct nvidia_gpu node[8];
    for (int i = 0; i < 8; i++) {
        node[i].minor = i;
        snprintf(node[i].uuid, sizeof(node[i].uuid), "GPU-0000000%d-aaaa", i);
        node[i].busid[0] = '\0';
    }
    int out[16];
    size_t n = 0;
    mtc_error_t err;
    CHECK(nvidia_visible(NULL, "6,7", node, 8, out, 16, &n, &err) == 1 && n == 2 && out[0] == 6 &&
              out[1] == 7,
          "unset: the step's GPUs");
    CHECK(nvidia_visible("all", "7,6", node, 8, out, 16, &n, &err) == 1 && n == 2 && out[0] == 6,
          "all: the step's, ascending");
    CHECK(nvidia_visible("none", "6,7", node, 8, out, 16, &n, &err) == 1 && n == 0,
          "none: the driver without GPUs");
    CHECK(nvidia_visible("void", "6,7", node, 8, out, 16, &n, &err) == 0, "void: no driver");
    CHECK(nvidia_visible("", "6,7", node, 8, out, 16, &n, &err) == 0, "empty: no driver");
    CHECK(nvidia_visible("7,2", "6,7", node, 8, out, 16, &n, &err) == 1 && n == 1 && out[0] == 7,
          "indexes: only those of the step");
    CHECK(nvidia_visible("GPU-00000006-aaaa", "6,7", node, 8, out, 16, &n, &err) == 1 && n == 1 &&
              out[0] == 6,
          "a UUID");
    CHECK(nvidia_visible("GPU-nope", "6,7", node, 8, out, 16, &n, &err) < 0 &&
              strstr(err.text, "GPU-nope"),
          "an unknown UUID is named (%s)", err.text);
    CHECK(nvidia_visible(NULL, NULL, node, 8, out, 16, &n, &err) == 1 && n == 0,
          "a step without GPUs");

    int last[] = {6, 7};
    char cvd[64];
    CHECK(nvidia_cuda_visible("6,7", last, 2, cvd, sizeof(cvd)) == 0 && strcmp(cvd, "0,1") == 0,
          "the node's last two GPUs: CUDA_VISIBLE_DEVICES 6,7 becomes 0,1 (%s)", cvd);
    CHECK(nvidia_cuda_visible("7", last, 2, cvd, sizeof(cvd)) == 0 && strcmp(cvd, "1") == 0,
          "7 alone becomes 1 (%s)", cvd);
    CHECK(nvidia_cuda_visible("0,1", last, 2, cvd, sizeof(cvd)) == 0 && strcmp(cvd, "0,1") == 0,
          "ordinals (a node that constrains devices) stay (%s)", cvd);
    CHECK(nvidia_cuda_visible(NULL, last, 2, cvd, sizeof(cvd)) == 0 && strcmp(cvd, "0,1") == 0,
          "unset: every container GPU (%s)", cvd);
    CHECK(nvidia_cuda_visible("GPU-00000006-aaaa", last, 2, cvd, sizeof(cvd)) == 0 &&
              strcmp(cvd, "GPU-00000006-aaaa") == 0,
          "a UUID stays");
    int four[] = {4, 5};
    CHECK(nvidia_cuda_visible("4,5", four, 2, cvd, sizeof(cvd)) == 0 && strcmp(cvd, "0,1") == 0,
          "GPUs 4,5 become 0,1 (%s)", cvd);
}

int main(void)
{
    test_table();
    test_version();
    test_ldcache();
    test_require();
    test_require_gpus();
    test_visible();
    return check_done();
}
