/* runtime: private to src/health (gpu.c, xid.c, probecache.c) —
 * what a health context keeps between passes: the loaded NVML library, the
 * kernel-log reader's position and the costly probes' last results. */
#ifndef MTC_HEALTH_RUNTIME_H
#define MTC_HEALTH_RUNTIME_H

#include <stdint.h>
#include <sys/types.h>

#include "health/health.h"

/* NVML entry points (signatures from nvml.h; handles are opaque pointers). */
struct nvml_api {
    int (*init)(void);
    int (*shutdown)(void);
    const char *(*error_string)(int);
    int (*get_count)(unsigned *);
    int (*get_handle)(unsigned, void **);
    int (*ecc)(void *, int, int, unsigned long long *);
    int (*remapped_rows)(void *, unsigned *, unsigned *, unsigned *, unsigned *);
    int (*retired_pages)(void *, int, unsigned *, unsigned long long *);
    int (*temperature)(void *, int, unsigned *);
    int (*throttle)(void *, unsigned long long *);
};

struct health_runtime {
    void *nvml;           /* dlopen handle, NULL until loaded */
    char nvml_path[4096]; /* what nvml was loaded from */
    struct nvml_api api;
    int pass_tried, pass_up; /* nvmlInit attempted / succeeded in this pass */
    unsigned gpu_count;
    char nvml_why[200];

    int kfd;        /* kernel log, -1 when it cannot be opened */
    int kmsg;       /* 1: /dev/kmsg records (pos = last sequence number) */
    long long pos;  /* plain file: byte offset of the next unread line */
    ino_t ino;      /* plain file: to notice rotation */
    char kerr[160]; /* why the kernel log cannot be read */
    /* A critical XID latches: the GPU stays suspect until the node reboots
     * (which restarts the agent) or the state file is removed. */
    int latched_xid, latched_sev;
    char latched_reason[200];
    char state_path[4200]; /* "" = position kept in memory only */

    /* costly probes' last results, by check-table index */
    struct health_result cache[HEALTH_MAX_CHECKS];
    int64_t cache_ms[HEALTH_MAX_CHECKS]; /* 0 = none */
};

#endif
