/* driver: the node's NVIDIA driver inside a container, what libnvidia-container
 * does for enroot: the driver's libraries, programs, firmware, sockets and a
 * /proc/driver/nvidia of the step's GPUs, read-only, then the loader cache
 * rebuilt in the container (ldcache.c). The driver's files come from a tree only root
 * and mtc's configuration name ("/" on a node with a driver, plugstack.conf's
 * driver=DIR for emulated GPUs); the decisions are src/nvidia's. */
#include "spank/container.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* a + b + c into out (len bytes), cut to fit (a cut path names nothing). */
static void join3(char *out, size_t len, const char *a, const char *b, const char *c)
{
    size_t o = 0;
    for (const char *p[] = {a, b, c}, **q = p; q < p + 3; q++)
        for (const char *s = *q; *s && o + 1 < len; s++)
            out[o++] = *s;
    out[o] = '\0';
}

/* ROOT + path into out. */
static void in_root(const struct container_driver *d, const char *path, char *out, size_t len)
{
    join3(out, len, strcmp(d->root, "/") == 0 ? "" : d->root, path, "");
}

/* A small file under the driver's tree, read whole ("" on failure). */
static void read_small(const struct container_driver *d, const char *path, char *out, size_t len)
{
    char p[PATH_MAX];
    in_root(d, path, p, sizeof(p));
    out[0] = '\0';
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, len - 1);
    close(fd);
    out[n > 0 ? n : 0] = '\0';
}

/* The node's GPUs from ROOT/proc/driver/nvidia/gpus/BUS/information. */
static void probe_gpus(struct container_driver *d)
{
    char p[PATH_MAX];
    in_root(d, "/proc/driver/nvidia/gpus", p, sizeof(p));
    DIR *dir = opendir(p);
    struct dirent *e;
    while (dir && (e = readdir(dir)) && d->ngpus < CONTAINER_MAX_GPUS) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof(d->gpus[0].busid))
            continue;
        char info[4096], rel[PATH_MAX];
        snprintf(rel, sizeof(rel), "/proc/driver/nvidia/gpus/%s/information", e->d_name);
        read_small(d, rel, info, sizeof(info));
        const char *m = strstr(info, "Device Minor:");
        const char *u = strstr(info, "GPU UUID:");
        if (!m)
            continue;
        struct nvidia_gpu *g = &d->gpus[d->ngpus++];
        g->minor = atoi(m + 13);
        snprintf(g->busid, sizeof(g->busid), "%s", e->d_name);
        g->uuid[0] = '\0';
        if (u && sscanf(u + 9, " %63s", g->uuid) != 1)
            g->uuid[0] = '\0';
    }
    if (dir)
        closedir(dir);
}

struct lib_find {
    const char *prefix; /* "libcuda.so" */
    char path[PATH_MAX];
    char soname[128]; /* "libcuda.so.1" ("" when only the bare .so is cached) */
};

/* A cache entry of the library: the soname's ("libcuda.so.1") ends the walk;
 * the bare development link ("libcuda.so") is kept only until one comes. */
static int lib_match(void *arg, const char *soname, const char *path)
{
    struct lib_find *f = arg;
    size_t n = strlen(f->prefix);
    if (strncmp(soname, f->prefix, n) != 0 || (soname[n] != '.' && soname[n] != '\0'))
        return 0;
    if (soname[n] == '\0' && f->path[0])
        return 0;
    snprintf(f->path, sizeof(f->path), "%s", path);
    snprintf(f->soname, sizeof(f->soname), "%s", soname[n] ? soname : "");
    return soname[n] == '.' && strlen(soname) < sizeof(f->soname);
}

/* path (in the driver's tree) with its symlinks followed inside the tree, into
 * out (a path in the tree). 0/-1. */
static int resolve_in_tree(const struct container_driver *d, const char *path, char *out,
                           size_t len)
{
    char cur[PATH_MAX];
    snprintf(cur, sizeof(cur), "%s", path);
    for (int hop = 0; hop < 16; hop++) {
        char host[PATH_MAX], t[PATH_MAX];
        in_root(d, cur, host, sizeof(host));
        ssize_t n = readlink(host, t, sizeof(t) - 1);
        if (n < 0) {
            if (errno != EINVAL)
                return -1;
            snprintf(out, len, "%s", cur);
            return 0;
        }
        t[n] = '\0';
        if (t[0] == '/') {
            snprintf(cur, sizeof(cur), "%s", t);
        } else {
            char *slash = strrchr(cur, '/');
            if (slash)
                slash[1] = '\0';
            size_t l = strlen(cur);
            snprintf(cur + l, sizeof(cur) - l, "%s", t);
        }
    }
    errno = ELOOP;
    return -1;
}

/* What the probe child learns: the CUDA version and, for each GPU of the
 * container, its compute capability and brand (ok 0: NVML did not say). */
struct probe_out {
    int cuda;
    struct {
        int ok, major, minor, brand;
    } g[CONTAINER_MAX_GPUS];
};

/* NVML's answers for the GPUs at the bus ids busid[0..n-1], into o. */
static void ask_nvml(const char *libnvml, char busid[][32], size_t n, struct probe_out *o)
{
    void *h = libnvml[0] ? dlopen(libnvml, RTLD_NOW | RTLD_LOCAL) : NULL;
    int (*init)(void) = h ? (int (*)(void))dlsym(h, "nvmlInit_v2") : NULL;
    int (*byid)(const char *, void **) =
        h ? (int (*)(const char *, void **))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2") : NULL;
    int (*cc)(void *, int *, int *) =
        h ? (int (*)(void *, int *, int *))dlsym(h, "nvmlDeviceGetCudaComputeCapability") : NULL;
    int (*brand)(void *, int *) = h ? (int (*)(void *, int *))dlsym(h, "nvmlDeviceGetBrand") : NULL;
    int (*shut)(void) = h ? (int (*)(void))dlsym(h, "nvmlShutdown") : NULL;
    if (!init || !byid || !cc || !brand || init() != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        void *dev = NULL;
        o->g[i].ok = busid[i][0] && byid(busid[i], &dev) == 0 &&
                     cc(dev, &o->g[i].major, &o->g[i].minor) == 0 &&
                     brand(dev, &o->g[i].brand) == 0;
    }
    if (shut)
        shut();
}

/* The CUDA version libcuda says (cuDriverGetVersion) and the container's
 * GPUs' compute capability and brand NVML says, in a child with the user's
 * ids only: the driver's code never runs in slurmstepd or as root. */
static void probe_driver(struct container_driver *d, const char *libcuda, const char *libnvml)
{
    char busid[CONTAINER_MAX_GPUS][32];
    size_t n = d->nminors;
    for (size_t k = 0; k < n; k++) {
        busid[k][0] = '\0';
        for (size_t i = 0; i < d->ngpus; i++)
            if (d->gpus[i].minor == d->minors[k])
                snprintf(busid[k], sizeof(busid[k]), "%s", d->gpus[i].busid);
    }
    int p[2];
    if (pipe(p) < 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        struct probe_out o;
        memset(&o, 0, sizeof(o));
        if (setresgid(d->gid, d->gid, d->gid) == 0 && setresuid(d->uid, d->uid, d->uid) == 0) {
            void *h = libcuda[0] ? dlopen(libcuda, RTLD_NOW | RTLD_LOCAL) : NULL;
            int (*get)(int *) = h ? (int (*)(int *))dlsym(h, "cuDriverGetVersion") : NULL;
            if (!get || get(&o.cuda) != 0)
                o.cuda = 0;
            ask_nvml(libnvml, busid, n, &o);
        }
        if (write(p[1], &o, sizeof(o)) < 0)
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    struct probe_out o;
    size_t got = 0;
    for (ssize_t r = 1; pid > 0 && got < sizeof(o) && r > 0; got += r > 0 ? (size_t)r : 0)
        while ((r = read(p[0], (char *)&o + got, sizeof(o) - got)) < 0 && errno == EINTR)
            ;
    if (got == sizeof(o)) {
        if (o.cuda > 0)
            snprintf(d->facts.cuda, sizeof(d->facts.cuda), "%d.%d", o.cuda / 1000,
                     (o.cuda % 1000) / 10);
        for (size_t k = 0; k < n; k++)
            for (size_t i = 0; o.g[k].ok && i < d->ngpus; i++)
                if (d->gpus[i].minor == d->minors[k]) {
                    snprintf(d->gpus[i].arch, sizeof(d->gpus[i].arch), "%d.%d", o.g[k].major,
                             o.g[k].minor);
                    snprintf(d->gpus[i].brand, sizeof(d->gpus[i].brand), "%s",
                             nvidia_brand_name(o.g[k].brand));
                }
    }
    close(p[0]);
    while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

int container_driver_probe(struct container_driver *d, const char *root, uid_t uid, gid_t gid,
                           mtc_error_t *err)
{
    memset(d, 0, sizeof(*d));
    snprintf(d->root, sizeof(d->root), "%s", root && *root ? root : "/");
    char text[1024];
    read_small(d, "/proc/driver/nvidia/version", text, sizeof(text));
    if (!text[0])
        return 0; /* no driver on this node */
    if (nvidia_driver_version(text, d->facts.driver, sizeof(d->facts.driver)) < 0)
        return errprintf(err, "%s/proc/driver/nvidia/version: no driver version in it", d->root);
    char cache[PATH_MAX];
    in_root(d, "/etc/ld.so.cache", cache, sizeof(cache));
    size_t len = 0;
    d->ldcache = mtc_read_file(cache, &len);
    d->ldcache_len = len;
    probe_gpus(d);
    d->uid = uid;
    d->gid = gid;
    d->present = 1;
    return 0;
}

void container_driver_release(struct container_driver *d)
{
    free(d->ldcache);
    d->ldcache = NULL;
}

int container_image_environ(const struct container_step *s, char **text, mtc_error_t *err)
{
    *text = NULL;
    int rootfd = container_root_open(s, err);
    if (rootfd < 0)
        return -1;
    int fd = container_open_in(rootfd, "/etc/environment", O_RDONLY | O_NONBLOCK);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (1 << 20))
        *text = mtc_read_fd(fd, NULL);
    if (fd >= 0)
        close(fd);
    close(rootfd);
    return 0;
}

int container_image_var(const char *text, const char *name, char *out, size_t len)
{
    out[0] = '\0';
    size_t nl = strlen(name);
    int found = 0;
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *k = l + strspn(l, " \t");
        if (strncmp(k, "export ", 7) == 0)
            k += 7;
        if (strncmp(k, name, nl) != 0 || k[nl] != '=')
            continue;
        const char *v = k + nl + 1;
        size_t vl = strcspn(v, "\n");
        if (vl >= 2 && (v[0] == '"' || v[0] == '\'') && v[vl - 1] == v[0])
            v++, vl -= 2;
        snprintf(out, len, "%.*s", (int)vl, v);
        found = 1;
    }
    return found;
}

const char *container_job_var(char **env, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; env && env[i]; i++)
        if (strncmp(env[i], name, nl) == 0 && env[i][nl] == '=')
            return env[i] + nl + 1;
    return NULL;
}

/* The host path of the driver library prefix (in the tree's loader cache)
 * into out ("" when the tree has none). */
static void driver_lib(const struct container_driver *d, const char *prefix, char *out, size_t len)
{
    struct lib_find f = {prefix, "", ""};
    char real[PATH_MAX];
    out[0] = '\0';
    if (d->ldcache && nvidia_ldcache_each(d->ldcache, d->ldcache_len, lib_match, &f) >= 0 &&
        f.path[0] && resolve_in_tree(d, f.path, real, sizeof(real)) == 0)
        in_root(d, real, out, len);
}

/* One requirement variable's value checked, for each of the container's
 * GPUs; 0, or -1 + err naming it. The CUDA version (libcuda) and the GPUs'
 * compute capability and brand (NVML) are asked the first time a
 * requirement needs them (a fork and two dlopens: not on every container
 * start). */
static int require_one(struct container_driver *d, const char *var, const char *val,
                       mtc_error_t *err)
{
    if (!d->cuda_asked) {
        char cuda[PATH_MAX], nvml[PATH_MAX];
        d->cuda_asked = 1;
        driver_lib(d, "libcuda.so", cuda, sizeof(cuda));
        driver_lib(d, "libnvidia-ml.so", nvml, sizeof(nvml));
        if (cuda[0] || nvml[0])
            probe_driver(d, cuda, nvml);
    }
    struct nvidia_gpu gpus[CONTAINER_MAX_GPUS];
    size_t n = 0;
    for (size_t k = 0; k < d->nminors; k++)
        for (size_t i = 0; i < d->ngpus; i++)
            if (d->gpus[i].minor == d->minors[k])
                gpus[n++] = d->gpus[i];
    char why[200];
    mtc_error_t e;
    int r = nvidia_require_gpus(val, &d->facts, gpus, n, why, sizeof(why), &e);
    if (r < 0)
        return errprintf(err, "%s: %s", var, e.text);
    if (r == 0)
        return errprintf(err, "%s: this node does not meet %s", var, why);
    return 0;
}

int container_driver_plan(struct container_driver *d, const struct container_step *s,
                          char **job_env, const char *step_gpus, mtc_error_t *err)
{
    d->inject = 0;
    d->nminors = 0;
    if (!d->present)
        return 0;
    /* the image's NVIDIA_* (its /etc/environment), read as root through the
     * container's root: never followed out of it, never a FIFO */
    char *img = NULL;
    if (container_image_environ(s, &img, err) < 0)
        return -1;
    /* the job's value wins over the image's for what the user chooses */
    char nvd[1024], caps[256], dis[16];
    const char *v;
    int have_nvd = (v = container_job_var(job_env, "NVIDIA_VISIBLE_DEVICES"))
                       ? (snprintf(nvd, sizeof(nvd), "%s", v), 1)
                       : container_image_var(img, "NVIDIA_VISIBLE_DEVICES", nvd, sizeof(nvd));
    if ((v = container_job_var(job_env, "NVIDIA_DRIVER_CAPABILITIES")))
        snprintf(caps, sizeof(caps), "%s", v);
    else
        container_image_var(img, "NVIDIA_DRIVER_CAPABILITIES", caps, sizeof(caps));
    if ((v = container_job_var(job_env, "NVIDIA_DISABLE_REQUIRE")))
        snprintf(dis, sizeof(dis), "%s", v);
    else
        container_image_var(img, "NVIDIA_DISABLE_REQUIRE", dis, sizeof(dis));
    int rc = 0;
    /* a step without GPUs gets the driver only when the job asks for it
     * (NVIDIA_VISIBLE_DEVICES): CUDA images say "all" for every container */
    if (!(step_gpus && *step_gpus) && !container_job_var(job_env, "NVIDIA_VISIBLE_DEVICES"))
        goto done;
    int in = nvidia_visible(have_nvd ? nvd : NULL, step_gpus, d->gpus, d->ngpus, d->minors,
                            CONTAINER_MAX_GPUS, &d->nminors, err);
    if (in <= 0) {
        rc = in;
        goto done;
    }
    if (nvidia_caps_parse(caps, &d->caps, err) < 0) {
        rc = -1;
        goto done;
    }
    /* NVIDIA_REQUIRE_*: the image's and the job's, each must hold */
    int disabled = dis[0] && strcmp(dis, "0") != 0 && strcasecmp(dis, "false") != 0;
    for (size_t i = 0; !disabled && job_env && job_env[i] && rc == 0; i++)
        if (strncmp(job_env[i], "NVIDIA_REQUIRE_", 15) == 0 && strchr(job_env[i], '=')) {
            char var[128];
            snprintf(var, sizeof(var), "%.*s", (int)(strchr(job_env[i], '=') - job_env[i]),
                     job_env[i]);
            rc = require_one(d, var, strchr(job_env[i], '=') + 1, err);
        }
    for (const char *l = img; !disabled && l && *l && rc == 0;
         l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *k = l + strspn(l, " \t");
        if (strncmp(k, "export ", 7) == 0)
            k += 7;
        if (strncmp(k, "NVIDIA_REQUIRE_", 15) != 0)
            continue;
        char var[128], val[1024];
        size_t n = strcspn(k, "=\n");
        if (k[n] != '=' || n >= sizeof(var))
            continue;
        snprintf(var, sizeof(var), "%.*s", (int)n, k);
        if (container_job_var(job_env, var))
            continue; /* the job's value of it was checked */
        container_image_var(img, var, val, sizeof(val));
        rc = require_one(d, var, val, err);
    }
    if (rc == 0)
        d->inject = 1;
done:
    free(img);
    return rc;
}

/* The host file src (a path in the host's namespace) bound read-only at dst
 * in the container. */
static int bind_ro(int rootfd, const char *src, const char *dst, int file, mtc_error_t *err)
{
    return container_bind_in(rootfd, src, dst, file, MS_RDONLY | MS_NOSUID | MS_NODEV, 0,
                             "the driver's ", err);
}

/* The first of the usual library directories the image has. */
static const char *lib_dir(int rootfd)
{
    static const char *const dirs[] = {"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu",
                                       "/usr/lib64", "/lib64", "/usr/lib"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        int fd = container_open_in(rootfd, dirs[i], O_PATH | O_DIRECTORY);
        if (fd >= 0) {
            close(fd);
            return dirs[i];
        }
    }
    return dirs[0];
}

struct libs_ctx {
    const struct container_driver *d;
    int rootfd;
    const char *libdir;
    mtc_error_t *err;
    char done[64][128]; /* basenames bound already */
    size_t ndone;
};

/* Each driver library of the capabilities, found in the tree's loader cache,
 * at its real (versioned) name in the image's library directory. */
static int bind_libs(struct libs_ctx *c)
{
    const struct container_driver *d = c->d;
    for (size_t i = 0; i < nvidia_nfiles; i++) {
        const struct nvidia_file *f = &nvidia_files[i];
        if (f->kind != NVIDIA_LIB || !(f->caps & d->caps))
            continue;
        struct lib_find lf = {f->name, "", ""};
        if (!d->ldcache || nvidia_ldcache_each(d->ldcache, d->ldcache_len, lib_match, &lf) < 0 ||
            !lf.path[0])
            continue;
        char real[PATH_MAX], host[PATH_MAX], dst[PATH_MAX];
        if (resolve_in_tree(d, lf.path, real, sizeof(real)) < 0)
            continue;
        const char *base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
        /* only the driver's own version (libnvidia-container's rule) */
        size_t bl = strlen(base), vl = strlen(d->facts.driver);
        if (bl <= vl || strcmp(base + bl - vl, d->facts.driver) != 0 || base[bl - vl - 1] != '.')
            continue;
        size_t k = 0;
        while (k < c->ndone && strcmp(c->done[k], base) != 0)
            k++;
        if (k < c->ndone || c->ndone == 64 || bl >= sizeof(c->done[0]))
            continue;
        snprintf(c->done[c->ndone++], sizeof(c->done[0]), "%s", base);
        in_root(d, real, host, sizeof(host));
        snprintf(dst, sizeof(dst), "%s/%s", c->libdir, base);
        if (bind_ro(c->rootfd, host, dst, 1, c->err) < 0)
            return -1;
    }
    return 0;
}

/* The programs (into /usr/bin) and the GSP firmware. */
static int bind_bins_firmware(const struct container_driver *d, int rootfd, mtc_error_t *err)
{
    static const char *const bindirs[] = {"/usr/bin", "/usr/sbin", "/bin", "/sbin"};
    char host[PATH_MAX], dst[PATH_MAX];
    for (size_t i = 0; i < nvidia_nfiles; i++) {
        const struct nvidia_file *f = &nvidia_files[i];
        if (!(f->caps & d->caps))
            continue;
        if (f->kind == NVIDIA_BIN) {
            for (size_t b = 0; b < 4; b++) {
                char rel[PATH_MAX];
                struct stat st;
                snprintf(rel, sizeof(rel), "%s/%s", bindirs[b], f->name);
                in_root(d, rel, host, sizeof(host));
                if (stat(host, &st) < 0 || !S_ISREG(st.st_mode))
                    continue;
                snprintf(dst, sizeof(dst), "/usr/bin/%s", f->name);
                if (bind_ro(rootfd, host, dst, 1, err) < 0)
                    return -1;
                break;
            }
        } else if (f->kind == NVIDIA_FIRMWARE) {
            char rel[PATH_MAX];
            snprintf(rel, sizeof(rel), "/lib/firmware/nvidia/%s", d->facts.driver);
            in_root(d, rel, host, sizeof(host));
            DIR *dir = opendir(host);
            struct dirent *e;
            while (dir && (e = readdir(dir))) {
                size_t l = strlen(e->d_name);
                if (strncmp(e->d_name, f->name, strlen(f->name)) != 0 || l < 5 ||
                    strcmp(e->d_name + l - 4, ".bin") != 0)
                    continue;
                char src[PATH_MAX];
                join3(src, sizeof(src), host, "/", e->d_name);
                join3(dst, sizeof(dst), rel, "/", e->d_name);
                if (bind_ro(rootfd, src, dst, 1, err) < 0) {
                    closedir(dir);
                    return -1;
                }
            }
            if (dir)
                closedir(dir);
        }
    }
    return 0;
}

/* CUDA's forward-compatibility libraries an image ships
 * (/usr/local/cuda/compat/libcuda.so.VERSION, ...), used only when newer
 * than the driver (libnvidia-container's rule): bound beside the driver's in
 * the library directory, where ldconfig links the soname to the highest
 * version. A file of the image into the image: nothing the user could not do. */
static int compat_libs(const struct container_driver *d, int rootfd, const char *libdir,
                       mtc_error_t *err)
{
    int fd = container_open_in(rootfd, "/usr/local/cuda/compat", O_RDONLY | O_DIRECTORY);
    DIR *dir = fd < 0 ? NULL : fdopendir(fd);
    if (!dir) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(dir))) {
        const char *v = strstr(e->d_name, ".so.");
        size_t k = 0, pl = v ? (size_t)(v + 3 - e->d_name) : 0;
        while (k < nvidia_nfiles &&
               !(nvidia_files[k].kind == NVIDIA_LIB && (nvidia_files[k].caps & d->caps) &&
                 strlen(nvidia_files[k].name) == pl &&
                 strncmp(nvidia_files[k].name, e->d_name, pl) == 0))
            k++;
        if (k == nvidia_nfiles || !strchr(v + 4, '.') ||
            nvidia_version_cmp(v + 4, d->facts.driver) <= 0)
            continue;
        char src[PATH_MAX], dst[PATH_MAX];
        join3(src, sizeof(src), "/usr/local/cuda/compat/", e->d_name, "");
        join3(dst, sizeof(dst), libdir, "/", e->d_name);
        int sfd = container_open_in(rootfd, src, O_PATH | O_NOFOLLOW);
        struct stat st;
        if (sfd < 0 || fstat(sfd, &st) < 0 || !S_ISREG(st.st_mode)) {
            if (sfd >= 0)
                close(sfd);
            continue;
        }
        char from[64];
        snprintf(from, sizeof(from), "/proc/self/fd/%d", sfd);
        rc = bind_ro(rootfd, from, dst, 1, err);
        close(sfd);
    }
    closedir(dir);
    return rc;
}

int container_driver_files(const struct container_driver *d, const struct container_step *s,
                           int rootfd, mtc_error_t *err)
{
    if (!d || !d->inject)
        return 0;
    struct libs_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return errprintf(err, "out of memory");
    const char *libdir = lib_dir(rootfd);
    c->d = d;
    c->rootfd = rootfd;
    c->libdir = libdir;
    c->err = err;
    int rc = bind_libs(c);
    if (rc == 0)
        rc = bind_bins_firmware(d, rootfd, err);
    if (rc == 0)
        rc = compat_libs(d, rootfd, libdir, err);
    char key[128];
    snprintf(key, sizeof(key), "driver=%s caps=%u libdir=%s\n", d->facts.driver, d->caps, libdir);
    if (rc == 0)
        rc = container_loader_cache(s, rootfd, key, err);
    free(c);
    return rc;
}

/* A file of the tree copied into the directory dfd as name (0444). */
static void copy_small(const struct container_driver *d, const char *rel, int dfd, const char *name)
{
    char text[8192];
    read_small(d, rel, text, sizeof(text));
    int f = openat(dfd, name, O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (f < 0)
        return;
    if (write(f, text, strlen(text)) < 0)
        (void)0;
    close(f);
}

int container_driver_proc(const struct container_driver *d, int rootfd, mtc_error_t *err)
{
    if (!d || !d->inject)
        return 0;
    /* a tmpfs over the container's /proc/driver: nvidia/version, params and
     * gpus/BUS/information of the container's GPUs only */
    int fd = container_open_in(rootfd, "/proc/driver", O_PATH | O_DIRECTORY);
    if (fd < 0)
        return errprintf(err, "/proc/driver in the container: %s", strerror(errno));
    char target[64];
    snprintf(target, sizeof(target), "/proc/self/fd/%d", fd);
    int rc =
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=555,size=256k");
    int e = errno;
    close(fd);
    if (rc < 0)
        return errprintf(err, "cannot mount /proc/driver in the container: %s", strerror(e));
    int pd = container_open_in(rootfd, "/proc/driver", O_PATH | O_DIRECTORY);
    int nv = -1, gp = -1;
    if (pd >= 0 && mkdirat(pd, "nvidia", 0555) == 0)
        nv = openat(pd, "nvidia", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (nv >= 0 && mkdirat(nv, "gpus", 0555) == 0)
        gp = openat(nv, "gpus", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (gp < 0)
        rc = errprintf(err, "/proc/driver/nvidia in the container: %s", strerror(errno));
    if (rc == 0) {
        copy_small(d, "/proc/driver/nvidia/version", nv, "version");
        copy_small(d, "/proc/driver/nvidia/params", nv, "params");
    }
    for (size_t i = 0; rc == 0 && i < d->ngpus; i++) {
        int mine = 0;
        for (size_t k = 0; k < d->nminors; k++)
            mine |= d->minors[k] == d->gpus[i].minor;
        if (!mine || mkdirat(gp, d->gpus[i].busid, 0555) < 0)
            continue;
        int g = openat(gp, d->gpus[i].busid, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        char rel[PATH_MAX];
        snprintf(rel, sizeof(rel), "/proc/driver/nvidia/gpus/%s/information", d->gpus[i].busid);
        if (g >= 0) {
            copy_small(d, rel, g, "information");
            close(g);
        }
    }
    for (int *p = (int[]){gp, nv, pd}, k = 0; k < 3; k++)
        if (p[k] >= 0)
            close(p[k]);
    if (rc == 0) {
        fd = container_open_in(rootfd, "/proc/driver", O_PATH | O_DIRECTORY);
        snprintf(target, sizeof(target), "/proc/self/fd/%d", fd);
        if (fd < 0 ||
            mount(NULL, target, NULL,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
            rc = errprintf(err, "cannot make /proc/driver read-only: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    return rc;
}

int container_driver_ipc(const struct container_driver *d, int rootfd, mtc_error_t *err)
{
    if (!d || !d->inject)
        return 0;
    for (size_t i = 0; i < nvidia_nfiles; i++) {
        const struct nvidia_file *f = &nvidia_files[i];
        if ((f->kind != NVIDIA_SOCKET && f->kind != NVIDIA_IPC_DIR) || !(f->caps & d->caps))
            continue;
        char host[PATH_MAX];
        struct stat st;
        in_root(d, f->name, host, sizeof(host));
        if (stat(host, &st) < 0 ||
            (f->kind == NVIDIA_SOCKET ? !S_ISSOCK(st.st_mode) : !S_ISDIR(st.st_mode)))
            continue;
        /* a socket is written to: bound without rdonly (the daemon checks).
         * MPS's directory is under /tmp, the host's own in the container:
         * only bound where it is there already, never made by root */
        int file = f->kind == NVIDIA_SOCKET;
        int there = container_open_in(rootfd, f->name, O_PATH);
        if (there >= 0)
            close(there);
        else if (!file)
            continue;
        if (container_mkpath_in(rootfd, f->name, file, NULL) < 0)
            return errprintf(err, "%s in the container: %s", f->name, strerror(errno));
        int fd = container_open_in(rootfd, f->name, O_PATH | O_NOFOLLOW);
        char target[64];
        snprintf(target, sizeof(target), "/proc/self/fd/%d", fd);
        int rc = fd < 0 ? -1 : mount(host, target, NULL, MS_BIND, NULL);
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (rc < 0)
            return errprintf(err, "cannot mount the driver's %s: %s", f->name, strerror(e));
    }
    return 0;
}

int container_driver_env(const struct container_driver *d, const char *cvd,
                         int (*set_fn)(void *, const char *, const char *), void *arg)
{
    if (!d || !d->inject)
        return 0;
    char out[1024] = "";
    size_t o = 0;
    /* NVIDIA_VISIBLE_DEVICES names what the container holds: UUIDs when known */
    for (size_t k = 0; k < d->nminors && o < sizeof(out) - 80; k++) {
        const char *uuid = "";
        for (size_t i = 0; i < d->ngpus; i++)
            if (d->gpus[i].minor == d->minors[k])
                uuid = d->gpus[i].uuid;
        o += (size_t)(uuid[0]
                          ? snprintf(out + o, sizeof(out) - o, "%s%s", o ? "," : "", uuid)
                          : snprintf(out + o, sizeof(out) - o, "%s%d", o ? "," : "", d->minors[k]));
    }
    if (set_fn(arg, "NVIDIA_VISIBLE_DEVICES", d->nminors ? out : "none") < 0)
        return -1;
    if (nvidia_cuda_visible(cvd, d->minors, d->nminors, out, sizeof(out)) < 0)
        return -1;
    return set_fn(arg, "CUDA_VISIBLE_DEVICES", out);
}

void container_driver_gpus(const struct container_driver *d, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t k = 0; d && k < d->nminors && o + 8 < len; k++)
        o += (size_t)snprintf(out + o, len - o, "%s%d", o ? "," : "", d->minors[k]);
}
