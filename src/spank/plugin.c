/* plugin: the SPANK entry points of spank_mtc.so, the container plugin every
 * mtc cluster's plugstack.conf loads:
 *
 *   required /path/spank_mtc.so runtime=DIR [gpus=DIR] [driver=DIR] [ib=DIR] \
 *            [bind=DIR]... [pull=MTC cache=DIR cachegb=N] [path=DIR]
 *
 * (driver=DIR: the NVIDIA driver's tree, for emulated GPUs; default "/";
 * ib=DIR: the tree of InfiniBand HCAs, DIR/sys/class/infiniband and
 * DIR/dev/infiniband, for emulated HCAs; default "/";
 * path=DIR: a dir holding mtc's enroot, appended to the PATH of a step
 * outside a container that has no enroot).
 * (%n in a path becomes the node's name: emulated nodes share one host).
 *   srun / sbatch (local, allocator): the options, checked, with a one-line
 *       "srun: error: mtc: ..." for bad input before anything is submitted
 *   slurmstepd user_init (once per step and node): a registry image resolved
 *       and pulled into the cache (`MTC image pull`, run as root, which
 *       reaches the registry as the user), the image mounted and the
 *       container's overlay made, by a child that regains root; a step
 *       outside a container gets path= on its PATH (no enroot of its own)
 *   task_init_privileged (each task, root): into the container
 *   task_init (each task, the user): environment, workdir, command check,
 *       user namespace for --container-remap-root
 *   exit (end of the step): the step's own container removed
 * What the job mounted on a node (its image, named containers) goes in the
 * node's Epilog: `mtc-agent check --mode epilog` sweeps R/jobs/JOB. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <slurm/spank.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spank/container.h"

SPANK_PLUGIN(mtc, 1);

#define NOPT 24
#define SLURM_BATCH_STEP 0xfffffffbu

static char *given[NOPT]; /* each option's value as given ("" for a flag) */
static struct spank_option spank_opts[NOPT + 1];
static struct container_opts opts;
static struct container_step step;
static int active;
/* what user_init could not do, said by each task (a failed task fails srun;
 * a failed user_init only makes Slurm report a launch failure, exit 0) */
static char deferred[sizeof(((mtc_error_t *)0)->text)];
static char arg_runtime[512], arg_gpus[512], arg_driver[512], arg_ib[512], arg_binds[4][512],
    arg_pull[512], arg_cache[512], arg_cachegb[32], arg_path[512];
/* the NVIDIA driver's plan for this task (task_init_privileged, then task_init) */
static struct container_driver driver;
/* the InfiniBand devices of this task's container (task_init_privileged) */
static struct container_ib ib;
static int save_fd = -1; /* --container-save's file, opened as the user */
static size_t arg_nbinds;
static char image_given[1024]; /* a registry reference as given (opts.image: its cached file) */

static int opt_given(int val, const char *optarg, int remote)
{
    (void)remote;
    if (val < 0 || (size_t)val >= container_noptdefs)
        return -1;
    const char *v = optarg ? optarg : "";
    /* Slurm may call twice with the same value */
    if (given[val] && strcmp(given[val], v) != 0) {
        slurm_error("mtc: --%s given twice with different values", container_optdefs[val].name);
        return -1;
    }
    free(given[val]);
    given[val] = strdup(v);
    return given[val] ? 0 : -1;
}

/* "key=value" plugin arguments from plugstack.conf. */
static int plugin_args(int ac, char **av)
{
    for (int i = 0; i < ac; i++) {
        char *dst = NULL;
        const char *v = NULL;
        if (strncmp(av[i], "runtime=", 8) == 0)
            dst = arg_runtime, v = av[i] + 8;
        else if (strncmp(av[i], "gpus=", 5) == 0)
            dst = arg_gpus, v = av[i] + 5;
        else if (strncmp(av[i], "driver=", 7) == 0)
            dst = arg_driver, v = av[i] + 7;
        else if (strncmp(av[i], "ib=", 3) == 0)
            dst = arg_ib, v = av[i] + 3;
        else if (strncmp(av[i], "bind=", 5) == 0 && arg_nbinds < 4)
            dst = arg_binds[arg_nbinds++], v = av[i] + 5;
        else if (strncmp(av[i], "pull=", 5) == 0)
            dst = arg_pull, v = av[i] + 5;
        else if (strncmp(av[i], "cache=", 6) == 0)
            dst = arg_cache, v = av[i] + 6;
        else if (strncmp(av[i], "path=", 5) == 0)
            dst = arg_path, v = av[i] + 5;
        else if (strncmp(av[i], "cachegb=", 8) == 0 && strlen(av[i] + 8) < sizeof(arg_cachegb))
            dst = arg_cachegb, v = av[i] + 8;
        if (!dst || strpbrk(v, ",:") || strlen(v) >= 512 ||
            (dst != arg_cachegb && v[0] != '/')) {
            slurm_error("mtc: plugstack.conf: bad argument '%s' (runtime=DIR gpus=DIR driver=DIR "
                        "ib=DIR bind=DIR pull=MTC cache=DIR cachegb=N path=DIR)",
                        av[i]);
            return -1;
        }
        snprintf(dst, dst == arg_cachegb ? sizeof(arg_cachegb) : 512, "%s", v);
    }
    return 0;
}

/* path with %n replaced by node, into out. -1 when path needs a node name
 * and there is none. */
static int expand(const char *path, const char *node, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = path; *p && o + 1 < len; p++) {
        if (p[0] == '%' && p[1] == 'n') {
            if (!node || !*node)
                return -1;
            o += (size_t)snprintf(out + o, len - o, "%s", node);
            p++;
        } else {
            out[o++] = *p;
        }
    }
    out[o < len ? o : len - 1] = '\0';
    return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    if (plugin_args(ac, av) < 0)
        return -1;
    spank_context_t ctx = spank_context();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR && ctx != S_CTX_REMOTE)
        return 0;
    for (size_t i = 0; i < container_noptdefs && i < NOPT; i++) {
        const struct container_optdef *d = &container_optdefs[i];
        spank_opts[i] = (struct spank_option){(char *)d->name, (char *)d->arginfo, (char *)d->usage,
                                              d->arginfo != NULL, (int)i, opt_given};
        if (spank_option_register(sp, &spank_opts[i]) != ESPANK_SUCCESS) {
            slurm_error("mtc: cannot register --%s", d->name);
            return -1;
        }
    }
    return 0;
}

/* getenv for the options' environment forms: the process's own in srun and
 * sbatch, the job's in slurmstepd. */
static const char *env_local(void *arg, const char *name)
{
    (void)arg;
    return getenv(name);
}

static const char *env_job(void *arg, const char *name)
{
    static char buf[8][PATH_MAX];
    static int slot;
    char *b = buf[slot++ % 8];
    return spank_getenv((spank_t)arg, name, b, PATH_MAX) == ESPANK_SUCCESS ? b : NULL;
}

/* The options from the command line and then the environment, checked.
 * 0 (active tells whether there is a container), or -1 after an error line. */
static int resolve(spank_t sp, const char *cwd)
{
    container_opts_init(&opts);
    mtc_error_t err;
    for (size_t i = 0; i < container_noptdefs; i++)
        if (given[i] && container_opt_set(&opts, container_optdefs[i].name, given[i], cwd, &err) < 0)
            goto error;
    if (container_opts_from_env(&opts, spank_remote(sp) ? env_job : env_local, sp, cwd, &err) < 0)
        goto error;
    active = container_opts_active(&opts);
    if (!active && (opts.nmounts || opts.workdir[0] || opts.nenv || opts.writable != -1 ||
                    opts.remap_root != -1 || opts.mount_home != -1 || opts.save[0] ||
                    opts.entrypoint != -1 || opts.entrypoint_log != -1)) {
        errprintf(&err, "container options need --container-image or --container-name");
        goto error;
    }
    return 0;
error:
    slurm_error("mtc: %s", err.text);
    return -1;
}

/* srun and sbatch: the options checked before anything is submitted; an
 * image that is here (the same files as the nodes, or shared storage) must
 * be a squashfs image. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    spank_context_t ctx = spank_context();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR)
        return 0;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd)))
        snprintf(cwd, sizeof(cwd), "/");
    if (resolve(sp, cwd) < 0)
        return -1;
    if (!active || !opts.image[0])
        return 0;
    int sq = opts.image_ref ? 1 : mtc_is_squashfs(opts.image); /* a reference: pulled on the nodes */
    if (sq < 0) {
        slurm_error("mtc: --container-image: %s: %s", opts.image, strerror(errno));
        return -1;
    }
    if (!sq) {
        slurm_error("mtc: --container-image: %s is not a squashfs image", opts.image);
        return -1;
    }
    for (size_t i = 0; i < opts.nmounts; i++)
        if (access(opts.mounts[i].src, F_OK) < 0) {
            slurm_error("mtc: --container-mounts: %s: %s", opts.mounts[i].src, strerror(errno));
            return -1;
        }
    return 0;
}

/* container_prepare in a child that takes back root (slurmstepd runs
 * user_init with the user's effective ids; its saved id is root's). The
 * child inherits the descriptors opened as the user; it answers "w0"/"w1"
 * (writable) or the error. */
static int prepare_as_root(mtc_error_t *err)
{
    int p[2];
    if (pipe(p) < 0)
        return errprintf(err, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return errprintf(err, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(p[0]);
        mtc_error_t e = {""};
        int rc = setresuid(0, 0, 0) < 0 || setresgid(0, 0, 0) < 0
                     ? errprintf(&e, "cannot regain root: %s", strerror(errno))
                     : container_prepare(&step, &opts, &e);
        if (rc == 0)
            snprintf(e.text, sizeof(e.text), "w%d", step.writable);
        if (write(p[1], e.text, strlen(e.text)) < 0)
            _exit(2);
        _exit(rc < 0 ? 1 : 0);
    }
    close(p[1]);
    char msg[sizeof(err->text)] = "";
    ssize_t n = read(p[0], msg, sizeof(msg) - 1);
    close(p[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    msg[n > 0 ? n : 0] = '\0';
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && msg[0] == 'w') {
        step.writable = msg[1] == '1';
        return 0;
    }
    return errprintf(err, "%s", msg[0] ? msg : "preparing the container failed");
}

/* This node's name, as plugstack.conf's %n means it: slurmd's MTC_NODE,
 * which mtc sets when it starts the node's slurmd and slurmstepd inherits —
 * this process's own environment, never the job's (SLURMD_NODENAME and
 * SLURM_TOPOLOGY_ADDR there are the user's to set). "" when absent or not
 * a node name. */
static const char *node_name(void)
{
    const char *n = getenv("MTC_NODE");
    return n && container_node_valid(n) ? n : "";
}

/* The step's identity, paths and the user's home. */
static int step_init(spank_t sp, mtc_error_t *err)
{
    container_step_init(&step);
    const char *node = node_name();
    if (!arg_runtime[0])
        return errprintf(err, "plugstack.conf gives no runtime= directory");
    if (expand(arg_runtime, node, step.runtime, sizeof(step.runtime)) < 0)
        return errprintf(err, "this node's name is unknown (its slurmd has no MTC_NODE): "
                              "plugstack.conf's %%n cannot be filled");
    uint32_t job = 0, stp = 0;
    if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_STEPID, &stp) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_UID, &step.uid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_GID, &step.gid) != ESPANK_SUCCESS)
        return errprintf(err, "cannot read the step's ids");
    step.job = job;
    step.step = stp;
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r(step.uid, &pw, buf, sizeof(buf), &res) == 0 && res && res->pw_dir)
        snprintf(step.home, sizeof(step.home), "%s", res->pw_dir);
    if (spank_getenv(sp, "PWD", step.cwd, sizeof(step.cwd)) != ESPANK_SUCCESS)
        step.cwd[0] = '\0';
    for (size_t i = 0; i < arg_nbinds; i++)
        if (expand(arg_binds[i], node, step.binds[step.nbinds], sizeof(step.binds[0])) == 0)
            step.nbinds++;
    /* a batch step runs its script from slurmd's spool: that directory too */
    int argc = 0;
    char **argv = NULL;
    if (stp == SLURM_BATCH_STEP && spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS &&
        argc > 0 && argv[0][0] == '/' && step.nbinds < 8) {
        snprintf(step.binds[step.nbinds], sizeof(step.binds[0]), "%s", argv[0]);
        char *slash = strrchr(step.binds[step.nbinds], '/');
        if (slash && slash != step.binds[step.nbinds])
            *slash = '\0', step.nbinds++;
    }
    return 0;
}

/* The job's variables a pull honours (enroot's and TLS's), passed to the
 * puller as --env: it gives them to the process that runs as the user only
 * (ENROOT_MAX_PROCESSORS is read by the import too: mksquashfs's -processors). */
static const char *const pull_vars[] = {
    "ENROOT_CONFIG_PATH", "ENROOT_ALLOW_HTTP", "ENROOT_MAX_PROCESSORS", "TMPDIR",
    "SSL_CERT_FILE",      "SSL_CERT_DIR",      "https_proxy",           "http_proxy",
    "no_proxy",           "HTTPS_PROXY",       "HTTP_PROXY",            "NO_PROXY"};
#define NPULLVARS (sizeof(pull_vars) / sizeof(pull_vars[0]))

/* A registry image: `MTC image pull REF --cache DIR --max-gb N --as UID:GID
 * --home HOME [--env NAME=VALUE]...` run by a child that regains root (the
 * cache is root's; mtc reaches the registry as the user), with an
 * environment of its own; the cached file's path replaces opts.image. */
static int pull_image(spank_t sp, mtc_error_t *err)
{
    char cache[600], ids[64], envs[NPULLVARS][PATH_MAX + 64], out[1200] = "", msg[1024] = "";
    if (!arg_pull[0] || !arg_cache[0])
        return errprintf(err, "--container-image: image %s: this cluster's plugstack.conf has no "
                              "pull= and cache= for registry images",
                         opts.image);
    if (expand(arg_cache, node_name(), cache, sizeof(cache)) < 0)
        return errprintf(err, "this node's name is unknown: plugstack.conf's %%n cannot be filled");
    snprintf(ids, sizeof(ids), "%u:%u", (unsigned)step.uid, (unsigned)step.gid);
    const char *argv[16 + 2 * NPULLVARS];
    size_t a = 0;
    argv[a++] = arg_pull;
    argv[a++] = "image";
    argv[a++] = "pull";
    argv[a++] = opts.image;
    argv[a++] = "--cache";
    argv[a++] = cache;
    argv[a++] = "--max-gb";
    argv[a++] = arg_cachegb[0] ? arg_cachegb : "200";
    argv[a++] = "--as";
    argv[a++] = ids;
    argv[a++] = "--home";
    argv[a++] = step.home[0] ? step.home : "/";
    for (size_t i = 0; i < NPULLVARS; i++) {
        char v[PATH_MAX];
        if (spank_getenv(sp, pull_vars[i], v, sizeof(v)) != ESPANK_SUCCESS || strchr(v, '\n'))
            continue;
        snprintf(envs[i], sizeof(envs[i]), "%s=%s", pull_vars[i], v);
        argv[a++] = "--env";
        argv[a++] = envs[i];
    }
    argv[a] = NULL;
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) < 0)
        return errprintf(err, "pipe: %s", strerror(errno));
    if (pipe2(pe, O_CLOEXEC) < 0) {
        close(po[0]);
        close(po[1]);
        return errprintf(err, "pipe: %s", strerror(errno));
    }
    pid_t pid = fork();
    if (pid == 0) {
        static char *const env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
        int devnull = open("/dev/null", O_RDONLY);
        if (setresuid(0, 0, 0) < 0 || setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 ||
            devnull < 0 || dup2(devnull, 0) < 0 || dup2(po[1], 1) < 0 || dup2(pe[1], 2) < 0)
            _exit(126);
        execve(arg_pull, (char *const *)argv, env);
        dprintf(2, "mtc: %s: %s\n", arg_pull, strerror(errno));
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    if (pid < 0) {
        close(po[0]);
        close(pe[0]);
        return errprintf(err, "fork: %s", strerror(errno));
    }
    size_t n = 0, m = 0;
    ssize_t k;
    while ((k = read(po[0], out + n, sizeof(out) - 1 - n)) > 0 || (k < 0 && errno == EINTR))
        n += k > 0 ? (size_t)k : 0;
    while ((k = read(pe[0], msg + m, sizeof(msg) - 1 - m)) > 0 || (k < 0 && errno == EINTR))
        m += k > 0 ? (size_t)k : 0;
    close(po[0]);
    close(pe[0]);
    out[n] = msg[m] = '\0';
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    out[strcspn(out, "\n")] = '\0';
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || out[0] != '/') {
        /* mtc's one line, less its "mtc: " */
        char *line = msg;
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "mtc: ", 5) == 0)
            line += 5;
        return errprintf(err, "%s", line[0] ? line : "the image pull failed");
    }
    snprintf(image_given, sizeof(image_given), "%s", opts.image);
    snprintf(opts.image, sizeof(opts.image), "%s", out);
    return 0;
}

/* plugstack.conf's path=DIR (hosts clusters): DIR/enroot is mtc's
 * (docs/containers.md, "The enroot command"). A step outside a container
 * whose PATH has no enroot gets DIR appended, so the cloud guide's
 * conversion job finds one; a real enroot on the PATH always wins. */
static void enroot_path(spank_t sp)
{
    char path[8192] = "", dirs[8192], probe[PATH_MAX + 16], *save = NULL;
    snprintf(probe, sizeof(probe), "%s/enroot", arg_path);
    if (!arg_path[0] || access(probe, X_OK) < 0)
        return;
    if (spank_getenv(sp, "PATH", path, sizeof(path)) != ESPANK_SUCCESS)
        path[0] = '\0';
    snprintf(dirs, sizeof(dirs), "%s", path);
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(probe, sizeof(probe), "%s/enroot", d);
        if (d[0] == '/' && access(probe, X_OK) == 0)
            return;
    }
    size_t n = strlen(path);
    if (n + strlen(arg_path) + 2 > sizeof(path))
        return;
    snprintf(path + n, sizeof(path) - n, "%s%s", n ? ":" : "", arg_path);
    spank_setenv(sp, "PATH", path, 1);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!spank_remote(sp))
        return 0;
    mtc_error_t err;
    char cwd[PATH_MAX] = "";
    spank_getenv(sp, "PWD", cwd, sizeof(cwd));
    if (resolve(sp, cwd[0] ? cwd : NULL) < 0)
        return -1;
    if (!active) {
        enroot_path(sp);
        return 0;
    }
    /* everything the user names is opened here, as the user (slurmstepd's
     * effective ids, groups included); root later uses these descriptors */
    if (step_init(sp, &err) < 0 || (opts.image_ref && pull_image(sp, &err) < 0) ||
        container_open_sources(&step, &opts, &err) < 0)
        goto error;
    /* a cached image in use: the cache evicts only files no step holds */
    if (opts.image_ref && step.image_fd >= 0)
        flock(step.image_fd, LOCK_SH);
    /* --container-save: the first node of the step saves, into a file the
     * user opens now */
    uint32_t nodeid = 1;
    if (opts.save[0] && spank_get_item(sp, S_JOB_NODEID, &nodeid) == ESPANK_SUCCESS &&
        nodeid == 0 && container_save_open(opts.save, &save_fd, &err) < 0)
        goto error;
    container_step_root(&step, &opts);
    if (prepare_as_root(&err) < 0)
        goto error;
    return 0;
error:
    snprintf(deferred, sizeof(deferred), "%s", err.text);
    return 0;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!spank_remote(sp) || !active)
        return 0;
    if (deferred[0]) {
        slurm_error("mtc: %s", deferred);
        return -1;
    }
    char gpu_dir[600] = "", gpus[256] = "";
    if (arg_gpus[0])
        expand(arg_gpus, node_name(), gpu_dir, sizeof(gpu_dir));
    if (spank_getenv(sp, "SLURM_STEP_GPUS", gpus, sizeof(gpus)) != ESPANK_SUCCESS &&
        spank_getenv(sp, "SLURM_JOB_GPUS", gpus, sizeof(gpus)) != ESPANK_SUCCESS)
        gpus[0] = '\0';
    mtc_error_t err;
    /* the node's NVIDIA driver: what of it this container gets, decided (and
     * its requirements checked) before anything of the task runs */
    char drv_root[600] = "";
    char **job_env = NULL;
    if (arg_driver[0])
        expand(arg_driver, node_name(), drv_root, sizeof(drv_root));
    char ib_root[600] = "";
    if (arg_ib[0])
        expand(arg_ib, node_name(), ib_root, sizeof(ib_root));
    spank_get_item(sp, S_JOB_ENV, &job_env);
    if (container_driver_probe(&driver, drv_root[0] ? drv_root : NULL, step.uid, step.gid,
                               &err) < 0 ||
        container_driver_plan(&driver, &step, job_env, gpus[0] ? gpus : NULL, &err) < 0 ||
        container_ib_plan(&ib, ib_root[0] ? ib_root : NULL, &step, job_env, &err) < 0 ||
        container_enter(&step, &opts, gpu_dir[0] ? gpu_dir : NULL, gpus[0] ? gpus : NULL, &driver,
                        &ib, &err) < 0) {
        container_driver_release(&driver);
        slurm_error("mtc: %s", err.text);
        return -1;
    }
    container_driver_release(&driver);
    return 0;
}

static int env_set(void *arg, const char *k, const char *v)
{
    return spank_setenv((spank_t)arg, k, v, 1) == ESPANK_SUCCESS ? 0 : -1;
}

/* The image's workingDir, from /.mtc/image.json ("" when none). */
static void image_workdir(char *out, size_t len)
{
    out[0] = '\0';
    char *t = mtc_read_file("/.mtc/image.json", NULL);
    const char *k = t ? strstr(t, "\"workingDir\"") : NULL;
    const char *q = k ? strchr(k + 12, '"') : NULL;
    const char *e = q ? strchr(q + 1, '"') : NULL;
    if (q && e && (size_t)(e - q - 1) < len && q[1] == '/') {
        memcpy(out, q + 1, (size_t)(e - q - 1));
        out[e - q - 1] = '\0';
    }
    free(t);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!spank_remote(sp) || !active)
        return 0;
    mtc_error_t err;
    if (container_env_apply(&opts, env_job, env_set, sp, &err) < 0)
        goto error;
    if (container_driver_env(&driver, env_job(sp, "CUDA_VISIBLE_DEVICES"), env_set, sp) < 0) {
        errprintf(&err, "cannot set CUDA_VISIBLE_DEVICES for the container's GPUs");
        goto error;
    }
    char wd[1024];
    snprintf(wd, sizeof(wd), "%s", opts.workdir);
    if (!wd[0])
        image_workdir(wd, sizeof(wd));
    if (wd[0] && chdir(wd) < 0) {
        errprintf(&err, "--container-workdir: %s: %s", wd, strerror(errno));
        goto error;
    }
    if (wd[0])
        spank_setenv(sp, "PWD", wd, 1);
    if (opts.entrypoint == 1) {
        char **env = NULL;
        char *json = mtc_read_file("/.mtc/image.json", NULL);
        spank_get_item(sp, S_JOB_ENV, &env);
        int rc = container_entrypoint_run(json, env, opts.entrypoint_log == 1, env_set, sp, &err);
        free(json);
        if (rc < 0)
            goto error;
    }
    int argc = 0;
    char **argv = NULL;
    char path[PATH_MAX] = "";
    spank_getenv(sp, "PATH", path, sizeof(path));
    if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS && argc > 0 &&
        !container_find_command(argv[0], path[0] ? path : NULL)) {
        errprintf(&err, "%s: command not found in the image %s", argv[0],
                  image_given[0] ? image_given : opts.image[0] ? opts.image : opts.name);
        goto error;
    }
    if (opts.remap_root == 1 && container_remap_root(step.uid, step.gid, &err) < 0)
        goto error;
    return 0;
error:
    slurm_error("mtc: %s", err.text);
    return -1;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    mtc_error_t err;
    if (spank_remote(sp) && active && !deferred[0] && save_fd >= 0 && getuid() == 0 &&
        geteuid() == 0 && container_save(&step, save_fd, &err) < 0)
        slurm_error("mtc: %s", err.text);
    if (save_fd >= 0)
        close(save_fd);
    save_fd = -1;
    if (spank_remote(sp) && active && !deferred[0] && getuid() == 0 && geteuid() == 0 &&
        !opts.name[0])
        container_step_done(step.runtime, step.job, step.step);
    if (spank_remote(sp) && active)
        container_close_sources(&step);
    for (size_t i = 0; i < NOPT; i++) {
        free(given[i]);
        given[i] = NULL;
    }
    return 0;
}
