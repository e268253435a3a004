/* nvidia: the driver files by capability (one table, after
 * libnvidia-container's nvc_info.c), capability and requirement parsing, the
 * loader cache's format, NVML's brand names, and the container's view of its
 * GPUs. Pure. */
#include "nvidia/nvidia.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define C NVIDIA_CAP_COMPUTE
#define U NVIDIA_CAP_UTILITY
#define V NVIDIA_CAP_VIDEO
#define G NVIDIA_CAP_GRAPHICS
#define D NVIDIA_CAP_DISPLAY
const struct nvidia_file nvidia_files[] = {
    /* utility */
    {"libnvidia-ml.so", NVIDIA_LIB, U},
    {"libnvidia-cfg.so", NVIDIA_LIB, U},
    {"libnvidia-nscq.so", NVIDIA_LIB, U},
    {"nvidia-smi", NVIDIA_BIN, U},
    {"nvidia-debugdump", NVIDIA_BIN, U},
    {"nvidia-persistenced", NVIDIA_BIN, U},
    /* compute */
    {"libcuda.so", NVIDIA_LIB, C},
    {"libcudadebugger.so", NVIDIA_LIB, C},
    {"libnvidia-opencl.so", NVIDIA_LIB, C},
    {"libnvidia-gpucomp.so", NVIDIA_LIB, C},
    {"libnvidia-ptxjitcompiler.so", NVIDIA_LIB, C},
    {"libnvidia-fatbinaryloader.so", NVIDIA_LIB, C},
    {"libnvidia-allocator.so", NVIDIA_LIB, C},
    {"libnvidia-compiler.so", NVIDIA_LIB, C},
    {"libnvidia-pkcs11.so", NVIDIA_LIB, C},
    {"libnvidia-pkcs11-openssl3.so", NVIDIA_LIB, C},
    {"libnvidia-nvvm.so", NVIDIA_LIB, C},
    {"nvidia-cuda-mps-control", NVIDIA_BIN, C},
    {"nvidia-cuda-mps-server", NVIDIA_BIN, C},
    /* video */
    {"libvdpau_nvidia.so", NVIDIA_LIB, V},
    {"libnvidia-encode.so", NVIDIA_LIB, V},
    {"libnvidia-opticalflow.so", NVIDIA_LIB, V},
    {"libnvcuvid.so", NVIDIA_LIB, V},
    /* graphics (display: the same, for an X server's clients) */
    {"libnvidia-eglcore.so", NVIDIA_LIB, G | D},
    {"libnvidia-glcore.so", NVIDIA_LIB, G | D},
    {"libnvidia-tls.so", NVIDIA_LIB, G | D},
    {"libnvidia-glsi.so", NVIDIA_LIB, G | D},
    {"libnvidia-fbc.so", NVIDIA_LIB, G | D},
    {"libnvidia-ifr.so", NVIDIA_LIB, G | D},
    {"libnvidia-rtcore.so", NVIDIA_LIB, G | D},
    {"libnvoptix.so", NVIDIA_LIB, G | D},
    {"libGLX_nvidia.so", NVIDIA_LIB, G | D},
    {"libEGL_nvidia.so", NVIDIA_LIB, G | D},
    {"libGLESv2_nvidia.so", NVIDIA_LIB, G | D},
    {"libGLESv1_CM_nvidia.so", NVIDIA_LIB, G | D},
    {"libnvidia-glvkspirv.so", NVIDIA_LIB, G | D},
    {"libnvidia-cbl.so", NVIDIA_LIB, G | D},
    {"libnvidia-ngx.so", NVIDIA_LIB, NVIDIA_CAP_NGX},
    /* the daemons' sockets and MPS's pipes, when present */
    {"/run/nvidia-persistenced/socket", NVIDIA_SOCKET, C | U},
    {"/run/nvidia-fabricmanager/socket", NVIDIA_SOCKET, C | U},
    {"/tmp/nvidia-mps", NVIDIA_IPC_DIR, C},
    /* the GPU System Processor's firmware */
    {"gsp", NVIDIA_FIRMWARE, C | U},
};
const size_t nvidia_nfiles = sizeof(nvidia_files) / sizeof(nvidia_files[0]);
#undef C
#undef U
#undef V
#undef G
#undef D

int nvidia_caps_parse(const char *s, unsigned *caps, mtc_error_t *err)
{
    static const struct {
        const char *name;
        unsigned bit;
    } words[] = {{"compute", NVIDIA_CAP_COMPUTE},   {"utility", NVIDIA_CAP_UTILITY},
                 {"video", NVIDIA_CAP_VIDEO},       {"graphics", NVIDIA_CAP_GRAPHICS},
                 {"display", NVIDIA_CAP_DISPLAY},   {"ngx", NVIDIA_CAP_NGX},
                 {"compat32", NVIDIA_CAP_COMPAT32}, {"all", NVIDIA_CAP_ALL}};
    *caps = 0;
    if (!s || !*s) {
        *caps = NVIDIA_CAP_DEFAULT;
        return 0;
    }
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, ",");
        size_t i = 0;
        while (i < sizeof(words) / sizeof(words[0]) &&
               !(strlen(words[i].name) == n && strncmp(words[i].name, p, n) == 0))
            i++;
        if (n && i == sizeof(words) / sizeof(words[0]))
            return errprintf(err,
                             "NVIDIA_DRIVER_CAPABILITIES: unknown capability '%.*s' "
                             "(compute, utility, video, graphics, display, ngx, compat32, all)",
                             (int)(n > 40 ? 40 : n), p);
        if (n)
            *caps |= words[i].bit;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

int nvidia_driver_version(const char *text, char *out, size_t len)
{
    /* the first word after "Kernel Module" made of digits and dots, with a
     * dot ("Open Kernel Module for x86_64  570.86.15": not "x86_64") */
    const char *k = text ? strstr(text, "Kernel Module") : NULL;
    for (const char *p = k ? k + strlen("Kernel Module") : NULL; p && *p && *p != '\n';) {
        p += strspn(p, " \t");
        size_t w = strcspn(p, " \t\n");
        size_t d = strspn(p, "0123456789.");
        if (w && d == w && memchr(p, '.', w) && isdigit((unsigned char)p[0]) &&
            isdigit((unsigned char)p[w - 1]) && w < len) {
            memcpy(out, p, w);
            out[w] = '\0';
            return 0;
        }
        p += w;
    }
    errno = EINVAL;
    return -1;
}

/* glibc's cache layouts (elf/cache.h) */
#define OLD_MAGIC "ld.so-1.7.0"
#define NEW_MAGIC "glibc-ld.so.cache1.1"
#define FLAG_ELF_LIBC6 0x0003
#define FLAG_TYPE_MASK 0x00ff
#define FLAG_ARCH_MASK 0xff00
#define FLAG_X8664_LIB64 0x0300

static uint32_t u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* A NUL-terminated string at offset off of the len bytes at base, or NULL. */
static const char *str_at(const unsigned char *base, size_t len, uint32_t off)
{
    if (off >= len || !memchr(base + off, '\0', len - off))
        return NULL;
    return (const char *)base + off;
}

int nvidia_ldcache_each(const void *buf, size_t len,
                        int (*fn)(void *arg, const char *soname, const char *path), void *arg)
{
    const unsigned char *b = buf, *nw = b;
    size_t nlen = len;
    if (len >= 16 && memcmp(b, OLD_MAGIC, sizeof(OLD_MAGIC) - 1) == 0) {
        /* the old header (12 bytes of magic, a count), 12-byte entries, then
         * the new format aligned to 8 */
        size_t nold = u32(b + 12);
        if (nold > len / 12)
            goto bad;
        size_t off = 16 + nold * 12;
        off = (off + 7) & ~(size_t)7;
        if (off > len)
            goto bad;
        nw = b + off;
        nlen = len - off;
    }
    /* magic 20, nlibs 4, len_strings 4, flags 1 + pad 3, extension offset 4,
     * unused 12: 48 bytes; entries of 24 (flags 4, key 4, value 4, osversion
     * 4, hwcap 8); string offsets count from the new header */
    if (nlen < 48 || memcmp(nw, NEW_MAGIC, sizeof(NEW_MAGIC) - 1) != 0)
        goto bad;
    size_t n = u32(nw + 20);
    if (n > (nlen - 48) / 24)
        goto bad;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *e = nw + 48 + i * 24;
        int32_t flags = (int32_t)u32(e);
        const char *key = str_at(nw, nlen, u32(e + 4)), *val = str_at(nw, nlen, u32(e + 8));
        if (!key || !val)
            goto bad;
        if ((flags & FLAG_TYPE_MASK) != FLAG_ELF_LIBC6 ||
            (flags & FLAG_ARCH_MASK) != FLAG_X8664_LIB64)
            continue;
        int rc = fn(arg, key, val);
        if (rc)
            return rc;
    }
    return 0;
bad:
    errno = EINVAL;
    return -1;
}

int nvidia_version_cmp(const char *a, const char *b)
{
    while (*a || *b) {
        unsigned long x = strtoul(a, (char **)&a, 10), y = strtoul(b, (char **)&b, 10);
        if (x != y)
            return x < y ? -1 : 1;
        a += *a == '.';
        b += *b == '.';
        if (!isdigit((unsigned char)*a) && !isdigit((unsigned char)*b))
            break;
    }
    return 0;
}

const char *nvidia_brand_name(int b)
{
    /* nvmlBrandType_t's values, in order (nvml.h) */
    static const char *const names[] = {
        "Unknown",   "Quadro",      "Tesla",     "NVS",        "GRID",      "GeForce",
        "TITAN",     "NVIDIAVApps", "NVIDIAVPC", "NVIDIAVCS",  "NVIDIAVWS", "NVIDIACloudGaming",
        "QuadroRTX", "NVIDIARTX",   "NVIDIA",    "GeForceRTX", "TITANRTX"};
    return b >= 0 && (size_t)b < sizeof(names) / sizeof(names[0]) ? names[b] : "Unknown";
}

/* One condition KEY OP VALUE of len n at p: 1 holds, 0 not, -1 + err; *key
 * the index of its key (cuda, driver, arch, brand). */
static int condition(const char *p, size_t n, const struct nvidia_facts *f, int *key,
                     mtc_error_t *err)
{
    static const char *const keys[] = {"cuda", "driver", "arch", "brand"};
    char c[128];
    if (n == 0 || n >= sizeof(c))
        return errprintf(err, "bad condition '%.*s'", (int)(n > 60 ? 60 : n), p);
    memcpy(c, p, n);
    c[n] = '\0';
    size_t k = strcspn(c, "=!<>");
    size_t i = 0;
    while (i < 4 && !(strlen(keys[i]) == k && strncmp(keys[i], c, k) == 0))
        i++;
    char *op = c + k;
    size_t ol = strspn(op, "=!<>");
    char *val = op + ol;
    static const char *const ops[] = {"=", "==", "!=", "<", "<=", ">", ">="};
    size_t o = 0;
    while (o < 7 && !(strlen(ops[o]) == ol && strncmp(ops[o], op, ol) == 0))
        o++;
    if (i == 4 || o == 7 || !*val)
        return errprintf(err,
                         "bad condition '%s' (KEY OP VALUE: cuda, driver, arch or brand; "
                         "= != < <= > >=)",
                         c);
    *key = (int)i;
    const char *fact = i == 0 ? f->cuda : i == 1 ? f->driver : i == 2 ? f->arch : f->brand;
    if (!*fact)
        return 1;
    int cmp = i == 3 ? strcasecmp(fact, val) : nvidia_version_cmp(fact, val);
    switch (o) {
    case 0:
    case 1:
        return cmp == 0;
    case 2:
        return cmp != 0;
    case 3:
        return cmp < 0;
    case 4:
        return cmp <= 0;
    case 5:
        return cmp > 0;
    default:
        return cmp >= 0;
    }
}

int nvidia_require_check(const char *expr, const struct nvidia_facts *f, char *why, size_t whylen,
                         mtc_error_t *err)
{
    int any = 0;
    if (why && whylen)
        why[0] = '\0';
    for (const char *p = expr; p && *p;) {
        p += strspn(p, " \t");
        size_t alt = strcspn(p, " \t");
        if (!alt)
            break;
        any = 1;
        int holds = 1;
        for (const char *q = p; q < p + alt && holds;) {
            size_t n = strcspn(q, ",");
            if (q + n > p + alt)
                n = (size_t)(p + alt - q);
            int key = 0;
            int r = condition(q, n, f, &key, err);
            if (r < 0)
                return -1;
            if (!r) {
                holds = 0;
                int cut = (int)(n > 60 ? 60 : n);
                if (why && whylen && !why[0] && key < 2)
                    snprintf(why, whylen, "%.*s (this node's driver: CUDA %s, driver %s)", cut, q,
                             f->cuda[0] ? f->cuda : "unknown",
                             f->driver[0] ? f->driver : "unknown");
                else if (why && whylen && !why[0])
                    snprintf(why, whylen, "%.*s (GPU %s: %s %s)", cut, q, f->gpu[0] ? f->gpu : "?",
                             key == 2 ? "compute capability" : "brand",
                             key == 2 ? f->arch : f->brand);
            }
            q += n;
            if (q < p + alt && *q == ',')
                q++;
        }
        if (holds)
            return 1;
        p += alt;
    }
    return any ? 0 : 1;
}

int nvidia_require_gpus(const char *expr, const struct nvidia_facts *f,
                        const struct nvidia_gpu *gpus, size_t n, char *why, size_t whylen,
                        mtc_error_t *err)
{
    struct nvidia_facts g = *f;
    g.arch[0] = g.brand[0] = g.gpu[0] = '\0';
    if (n == 0)
        return nvidia_require_check(expr, &g, why, whylen, err);
    for (size_t i = 0; i < n; i++) {
        snprintf(g.arch, sizeof(g.arch), "%s", gpus[i].arch);
        snprintf(g.brand, sizeof(g.brand), "%s", gpus[i].brand);
        snprintf(g.gpu, sizeof(g.gpu), "%d", gpus[i].minor);
        int r = nvidia_require_check(expr, &g, why, whylen, err);
        if (r <= 0)
            return r;
    }
    return 1;
}

/* Is minor m in the comma list s of minors? */
static int in_list(const char *s, int m)
{
    for (const char *p = s; p && *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            return 0;
        if (v == m)
            return 1;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return 0;
    }
    return 0;
}

int nvidia_visible(const char *nvd, const char *step, const struct nvidia_gpu *node, size_t nnode,
                   int *out, size_t max, size_t *n, mtc_error_t *err)
{
    *n = 0;
    if (nvd && (!*nvd || strcmp(nvd, "void") == 0))
        return 0;
    int all = !nvd || strcmp(nvd, "all") == 0, none = nvd && strcmp(nvd, "none") == 0;
    /* the named minors first (checked), then the step's, in ascending order */
    char chosen[1024] = "";
    if (!all && !none) {
        size_t o = 0;
        for (const char *p = nvd; *p;) {
            size_t l = strcspn(p, ",");
            char tok[80];
            if (l == 0 || l >= sizeof(tok))
                return errprintf(err, "NVIDIA_VISIBLE_DEVICES: bad entry in '%.100s'", nvd);
            memcpy(tok, p, l);
            tok[l] = '\0';
            int m = -1;
            char *end;
            long v = strtol(tok, &end, 10);
            if (!*end && end != tok && v >= 0 && v < 1024)
                m = (int)v;
            for (size_t i = 0; m < 0 && i < nnode; i++)
                if (node[i].uuid[0] && strcasecmp(node[i].uuid, tok) == 0)
                    m = node[i].minor;
            if (m < 0)
                return errprintf(err, "NVIDIA_VISIBLE_DEVICES: '%s' is no GPU of this node", tok);
            o += (size_t)snprintf(chosen + o, sizeof(chosen) - o, "%s%d", o ? "," : "", m);
            if (o >= sizeof(chosen))
                return errprintf(err, "NVIDIA_VISIBLE_DEVICES: too long");
            p += l;
            if (*p == ',')
                p++;
        }
    }
    if (none)
        return 1;
    /* ascending minors of the step (duplicates once) */
    for (int m = 0; m < 1024 && *n < max; m++)
        if (in_list(step, m) && (all || in_list(chosen, m)))
            out[(*n)++] = m;
    return 1;
}

int nvidia_cuda_visible(const char *cvd, const int *minors, size_t n, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    if (!cvd) {
        for (size_t i = 0; i < n; i++) {
            o += (size_t)snprintf(out + o, len - o, "%s%zu", i ? "," : "", i);
            if (o >= len)
                return -1;
        }
        return 0;
    }
    /* are all numeric entries minors of the container's GPUs? */
    int host = 1, any = 0;
    for (const char *p = cvd; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        size_t l = strcspn(p, ",");
        if (end == p + l && l) {
            int found = 0;
            for (size_t i = 0; i < n; i++)
                found |= minors[i] == v;
            host &= found;
            any = 1;
        }
        p += l;
        if (*p == ',')
            p++;
    }
    host &= any;
    for (const char *p = cvd; *p;) {
        size_t l = strcspn(p, ",");
        char *end;
        long v = strtol(p, &end, 10);
        int w = -1;
        if (l && end == p + l) {
            for (size_t i = 0; host && i < n; i++)
                if (minors[i] == v)
                    w = (int)i;
            if (!host && v >= 0 && (size_t)v < n)
                w = (int)v;
            if (w >= 0)
                o += (size_t)snprintf(out + o, len - o, "%s%d", o ? "," : "", w);
        } else if (l) { /* a UUID, or what CUDA reads as one */
            o += (size_t)snprintf(out + o, len - o, "%s%.*s", o ? "," : "", (int)l, p);
        }
        if (o >= len)
            return -1;
        p += l;
        if (*p == ',')
            p++;
    }
    return 0;
}
