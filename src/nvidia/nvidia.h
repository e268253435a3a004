/* nvidia: what a container on GPUs gets of the host's NVIDIA driver, decided
 * the way libnvidia-container decides it — pure logic, no mounts: the table
 * of driver files by capability, NVIDIA_DRIVER_CAPABILITIES, the driver's
 * version, the loader cache (/etc/ld.so.cache), NVIDIA_REQUIRE_* checks,
 * NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES as the container sees them.
 * The container plugin (src/spank/driver.c) does the mounting. */
#ifndef MTC_NVIDIA_H
#define MTC_NVIDIA_H

#include <stddef.h>

#include "common/common.h"

/* NVIDIA_DRIVER_CAPABILITIES, as bits. */
enum {
    NVIDIA_CAP_COMPUTE = 1,
    NVIDIA_CAP_UTILITY = 2,
    NVIDIA_CAP_VIDEO = 4,
    NVIDIA_CAP_GRAPHICS = 8,
    NVIDIA_CAP_DISPLAY = 16,
    NVIDIA_CAP_NGX = 32,
    NVIDIA_CAP_COMPAT32 = 64,
    NVIDIA_CAP_ALL = 127,
};
/* compute,utility: what NVIDIA_DRIVER_CAPABILITIES unset or empty means */
#define NVIDIA_CAP_DEFAULT (NVIDIA_CAP_COMPUTE | NVIDIA_CAP_UTILITY)

enum nvidia_kind {
    NVIDIA_LIB,      /* a library found in the loader cache by its name's prefix */
    NVIDIA_BIN,      /* a program in /usr/bin, /usr/sbin, /bin or /sbin */
    NVIDIA_SOCKET,   /* a daemon's socket, at the same path inside */
    NVIDIA_IPC_DIR,  /* a directory of pipes (MPS), at the same path inside */
    NVIDIA_FIRMWARE, /* /lib/firmware/nvidia/<version>/<name>*.bin */
};

/* One driver file a container may get: its name (a library's prefix up to
 * ".so", a program's name, a socket's or directory's absolute path, a
 * firmware file's prefix) and the capabilities that bring it. */
struct nvidia_file {
    const char *name;
    enum nvidia_kind kind;
    unsigned caps;
};
extern const struct nvidia_file nvidia_files[];
extern const size_t nvidia_nfiles;

/* NVIDIA_DRIVER_CAPABILITIES (NULL or "": the default; "all"; a comma list
 * of compute, utility, video, graphics, display, ngx, compat32) into *caps.
 * 0, or -1 + err naming the unknown word. */
int nvidia_caps_parse(const char *s, unsigned *caps, mtc_error_t *err);

/* The driver's version ("535.104.05") from /proc/driver/nvidia/version's
 * text ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  ...")
 * into out (len bytes). 0, or -1 (EINVAL) when the text holds none. */
int nvidia_driver_version(const char *text, char *out, size_t len);

/* Each x86-64 entry of a loader cache (the bytes of /etc/ld.so.cache, glibc's
 * "glibc-ld.so.cache1.1" format, alone or after the old "ld.so-1.7.0" one):
 * fn(arg, soname, path); a non-zero return stops the walk and is returned.
 * 0 when the walk ended, or -1 (EINVAL) for bytes that are not such a cache
 * or point outside it. */
int nvidia_ldcache_each(const void *buf, size_t len,
                        int (*fn)(void *arg, const char *soname, const char *path), void *arg);

/* Dotted numeric versions compared field by field ("12.10" > "12.4");
 * <0, 0, >0. */
int nvidia_version_cmp(const char *a, const char *b);

/* What the node's driver and one GPU offer to a requirement: versions as
 * text ("" when unknown: a condition on an unknown fact holds, as it cannot
 * be judged). */
struct nvidia_facts {
    char driver[32]; /* "535.104.05" */
    char cuda[16];   /* "12.2", from cuDriverGetVersion */
    char arch[16];   /* the GPU's compute capability, "9.0" */
    char brand[32];  /* the GPU's brand, nvidia_brand_name's: "Tesla", "NVIDIA", ... */
    char gpu[32];    /* which GPU arch and brand are of, for messages ("4") */
};

/* libnvidia-container's name of an NVML brand (nvmlDeviceGetBrand's
 * nvmlBrandType_t: 2 "Tesla", 5 "GeForce", 14 "NVIDIA", ...); "Unknown" for
 * a value it does not know. A requirement's brand=NAME compares it without
 * regard to case. */
const char *nvidia_brand_name(int nvml_brand);

/* One NVIDIA_REQUIRE_* value, as libnvidia-container reads it: alternatives
 * separated by spaces, each a comma list of conditions KEY OP VALUE (keys
 * cuda, driver, arch, brand; ops = == != < <= > >=) that must all hold.
 * 1 met, 0 not (why: the first failed condition and the fact it compared,
 * "cuda>=12.4 (this node's driver: CUDA 12.2, driver 535.104.05)",
 * "arch>=9.0 (GPU 4: compute capability 8.0)"), -1 + err for a condition
 * that does not parse. */
int nvidia_require_check(const char *expr, const struct nvidia_facts *f, char *why, size_t whylen,
                         mtc_error_t *err);

/* A GPU of the node: its device minor (/dev/nvidiaN) and UUID ("" unknown). */
struct nvidia_gpu {
    int minor;
    char uuid[64];
    char busid[32]; /* its /proc/driver/nvidia/gpus/ entry ("" unknown) */
    char arch[16];  /* compute capability from NVML, "8.0" ("" unknown) */
    char brand[32]; /* nvidia_brand_name of NVML's brand ("" unknown) */
};

/* expr (as nvidia_require_check) checked as libnvidia-container checks it:
 * once for each of the n GPUs of gpus[] (the container's) with that GPU's
 * arch and brand, and must hold for every one; without GPUs (n 0) once,
 * arch and brand unknown. The driver's facts are f's. 1 met, 0 not (why: as
 * nvidia_require_check's, for the first GPU it fails on), -1 + err. */
int nvidia_require_gpus(const char *expr, const struct nvidia_facts *f,
                        const struct nvidia_gpu *gpus, size_t n, char *why, size_t whylen,
                        mtc_error_t *err);

/* The GPUs a container gets: those of the step (step: the node's minors
 * Slurm gave it, "4,5"; NULL or "": none) that NVIDIA_VISIBLE_DEVICES (nvd)
 * selects — unset or "all": all of them; "none": none (the driver's files
 * still come); "void" or "": no driver at all; else a comma list of minors
 * or UUIDs (node: the node's GPUs, for the UUIDs), those outside the step
 * left out. Into out[] (max entries, ascending minors); *n their count.
 * Returns 1 when the driver comes into the container, 0 when it does not
 * (void), -1 + err for an entry that names no GPU of the node. */
int nvidia_visible(const char *nvd, const char *step, const struct nvidia_gpu *node, size_t nnode,
                   int *out, size_t max, size_t *n, mtc_error_t *err);

/* CUDA_VISIBLE_DEVICES inside the container: Slurm's value (cvd; host
 * minors when the node does not constrain devices, "4,5", else ordinals
 * "0,1") renumbered to the container's view, where the n GPUs of minors[]
 * (ascending) are ordinals 0..n-1: each entry that is one of minors[] becomes
 * its position; when not all are, entries are kept as ordinals below n; a
 * UUID stays. cvd NULL: every container GPU. Into out (len bytes); 0/-1. */
int nvidia_cuda_visible(const char *cvd, const int *minors, size_t n, char *out, size_t len);

#endif
