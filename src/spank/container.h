/* container: run Slurm tasks inside squashfs images, the way pyxis does, for
 * the SPANK plugin (plugin.c) and the providers' cleanup.
 *
 * opts.c     the pyxis options (--container-image, -mounts, -name, ...) and
 *            their PYXIS_CONTAINER_* environment forms, parsed and checked
 * runtime.c  the node side, as root in the host's mount namespace: the image
 *            mounted read-only (kernel squashfs on a loop device) once per job
 *            and node, keyed by the image's sha256, and each container's
 *            overlay (per step, or per --container-name for the whole job);
 *            the sweep that unmounts a job's leftovers
 * driver.c   the node's NVIDIA driver in a GPU container (libraries,
 *            programs, firmware, sockets, /proc/driver/nvidia)
 * ib.c       the node's InfiniBand HCAs (/dev/infiniband) by
 *            MELLANOX_VISIBLE_DEVICES, as enroot's 99-mellanox hook
 * ldcache.c  a GPU container's loader cache: ldconfig, or the node's stash
 *            of what it made
 * entry.c    --container-entrypoint (the image's, run before the task) and
 *            --container-save (mksquashfs of the root when the step ends)
 * enter.c    the task side: a private mount namespace with /proc, /sys, /dev
 *            (GPU files too), /tmp, home and the requested mounts bound in,
 *            pivot_root into the container, the image's environment
 *
 * On a node, under the runtime directory R (plugstack.conf's runtime=):
 *   R/digests/DEV-INO-SIZE-MTIME-CTIME  sha256 of an image file (a cache)
 *   R/ldcache/HASH.cache, .links   a GPU container's loader cache for an
 *                                  image and driver (root's, 0700; the 64
 *                                  most recently used kept)
 *   R/jobs/JOB/images/SHA256       the image, mounted ro,nosuid,nodev
 *                                  (R/jobs and below: root's, mode 0700)
 *   R/jobs/JOB/named/NAME/         a named container: upper/ work/ root/ + meta
 *   R/jobs/JOB/steps/STEP/         a step's container: upper/ work/ root/
 * Everything under R/jobs/JOB is unmounted and removed when the job ends. */
#ifndef MTC_CONTAINER_H
#define MTC_CONTAINER_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/common.h"
#include "nvidia/mellanox.h"
#include "nvidia/nvidia.h"

/* --container-name=NAME[:FLAG] */
enum container_name_mode {
    CONTAINER_NAME_AUTO,    /* reuse the job's container of that name, else create it */
    CONTAINER_NAME_CREATE,  /* a fresh container, replacing one of that name */
    CONTAINER_NAME_EXEC,    /* the existing one (an error when there is none) */
    CONTAINER_NAME_NO_EXEC, /* the same here: every step enters a new namespace */
};

/* One --container-mounts entry, SRC:DST[:FLAGS]. */
struct container_mount {
    char src[1024]; /* absolute host path (made absolute against the job's cwd) */
    char dst[1024]; /* absolute path inside the container, normalized, no ".." */
    int ro;         /* 1: read-only */
};

#define CONTAINER_MAX_MOUNTS 32
#define CONTAINER_MAX_ENV 64

/* The options of one step, as given (-1: unset for the tri-states). */
struct container_opts {
    char image[1024];
    int image_ref; /* 1: image is a registry reference (pulled on the node), 0: a file */
    char workdir[1024];
    char name[64];
    enum container_name_mode name_mode;
    struct container_mount mounts[CONTAINER_MAX_MOUNTS];
    size_t nmounts;
    char env[CONTAINER_MAX_ENV][128]; /* --container-env names */
    size_t nenv;
    int writable, mount_home, remap_root; /* -1 unset, 0, 1 */
    char save[1024];                      /* --container-save (absolute; "" none) */
    int entrypoint, entrypoint_log;       /* -1 unset, 0, 1 */
    int have_mounts, have_env;            /* given (so an environment form does not add) */
};

/* The option table, one row per user-visible option: its name, what it
 * takes (NULL: a flag), its help text, and the value a flag sets. */
struct container_optdef {
    const char *name, *arginfo, *usage;
    int val;
};
extern const struct container_optdef container_optdefs[];
extern const size_t container_noptdefs;

/* 1 when an image argument is a registry reference rather than a file, by
 * pyxis's rule: "docker://", or not absolute, not ./ or ../, not ending in
 * .sqsh or .squashfs. Pure. */
int container_image_is_ref(const char *arg);

/* Reset o to "nothing given". */
void container_opts_init(struct container_opts *o);
/* Apply option `name` (a row of container_optdefs) with arg (NULL for a flag);
 * cwd makes relative mount sources and images absolute (NULL: refused).
 * 0, or -1 with err naming the option and what is wrong. */
int container_opt_set(struct container_opts *o, const char *name, const char *arg, const char *cwd,
                      mtc_error_t *err);
/* Fill what the command line left unset from PYXIS_CONTAINER_* variables,
 * read through getenv_fn (a NULL return: unset). 0/-1 + err. */
int container_opts_from_env(struct container_opts *o, const char *(*getenv_fn)(void *, const char *),
                            void *arg, const char *cwd, mtc_error_t *err);
/* 1 when the step runs in a container (an image or a name was given). */
int container_opts_active(const struct container_opts *o);
/* Parse one --container-mounts value (comma-separated entries) into o. */
int container_mounts_parse(struct container_opts *o, const char *spec, const char *cwd,
                           mtc_error_t *err);
/* A path inside the container: absolute, "." and "//" folded, ".." refused.
 * Into out (len bytes); 0/-1 + err naming what. */
int container_path_normalize(const char *what, const char *in, char *out, size_t len,
                             mtc_error_t *err);

/* Where a step's container lives on a node, and what it needs. */
struct container_step {
    char runtime[512]; /* R: a directory only root can change (checked) */
    unsigned job, step;
    uid_t uid;
    gid_t gid;
    char home[1024];  /* the user's home ("" when none) */
    char cwd[1024];   /* the step's working directory on the host */
    char binds[8][1024]; /* host directories seen at the same path inside (PMIx's,
                            the batch script's) */
    size_t nbinds;
    char root[1200];  /* out: the container's root (an overlay mount) */
    char image_digest[72];
    int writable; /* out: resolved */
    /* Opened as the user (container_open_sources), used by root: never a
     * path root resolves again. -1: none. */
    int image_fd;                          /* the image, a regular squashfs file */
    int home_fd;                           /* the home, when the user may read it */
    int mount_fds[CONTAINER_MAX_MOUNTS];   /* each --container-mounts source (O_PATH) */
    unsigned char mount_dir[CONTAINER_MAX_MOUNTS]; /* 1: that source is a directory */
};

/* A node name as plugstack.conf's %n becomes (slurmd's MTC_NODE): a short
 * word of [A-Za-z0-9._-], never "." or "..": it becomes a directory. */
int container_node_valid(const char *name);
/* s zeroed, its descriptors -1. */
void container_step_init(struct container_step *s);
/* With the caller's own ids (the user's, in user_init): the image opened
 * (non-blocking, then checked: a regular file with squashfs's magic), each
 * mount source opened O_PATH and checked readable (and searchable, a
 * directory), the home opened when readable. Into s's descriptors (O_CLOEXEC).
 * 0, or -1 + err naming the option and path (nothing left open). */
int container_open_sources(struct container_step *s, const struct container_opts *o,
                           mtc_error_t *err);
/* Close what container_open_sources opened. */
void container_close_sources(struct container_step *s);
/* openat2 of path under rootfd with every symlink resolved inside it
 * (RESOLVE_IN_ROOT, no magic links): how both sides reach a path in the
 * container. An fd (O_CLOEXEC added) or -1 + errno. */
int container_open_in(int rootfd, const char *path, int flags);
/* path (absolute, normalized) inside the container rooted at rootfd: its
 * directories created as root needs, each reached by container_open_in (never
 * a symlink out of the root), the last one a file when file is set (a mount
 * point). 0, or -1 with errno and, when err is given, err naming the path. */
int container_mkpath_in(int rootfd, const char *path, int file, mtc_error_t *err);
/* The host path src (in the caller's namespace) bound at dst inside the
 * container rooted at rootfd (its mount point made by container_mkpath_in, a
 * file when file is set, reached with O_NOFOLLOW), then remounted with
 * MS_BIND | MS_REMOUNT | flags, MS_NODEV added when keep_nodev and the source
 * has it. 0, or -1 + errno and err ("cannot mount WHAT SRC on DST: ...", what
 * "" or e.g. "the driver's "). */
int container_bind_in(int rootfd, const char *src, const char *dst, int file, unsigned long flags,
                      int keep_nodev, const char *what, mtc_error_t *err);
/* s->root: R/jobs/JOB/named/NAME/root or R/jobs/JOB/steps/STEP/root. */
void container_step_root(struct container_step *s, const struct container_opts *o);
/* s->root opened (O_PATH) through a trusted walk of its directory: the
 * container's root mount. fd or -1 + err. */
int container_root_open(const struct container_step *s, mtc_error_t *err);
/* As root, in the host's mount namespace: mount the image (once per job, from
 * s->image_fd), create or find the container's overlay and the mount points
 * the task will need (proc, sys, dev, tmp, home, each mount's destination,
 * the step's cwd and the workdir). Everything under R by descriptor. Fills
 * s->root and s->writable. 0, or -1 + err (nothing is left mounted that this
 * call mounted). */
int container_prepare(struct container_step *s, const struct container_opts *o, mtc_error_t *err);
/* At the end of a step: unmount and remove the step's own container. */
void container_step_done(const char *runtime, unsigned job, unsigned step);
/* Unmount (lazily, deepest first) every mount under prefix, then remove
 * prefix by descriptor (mtc_remove_at, its directory reached by a trusted
 * walk: a user's symlink inside never leads the removal out). For the end of
 * a job (R/jobs/JOB) and for a node being reset (R). Returns the number of
 * mounts removed, or -1 + err. */
int container_sweep(const char *prefix, mtc_error_t *err);
/* sha256 of the open image fd as "sha256:<hex>", cached under the runtime
 * directory rtfd's digests/ (rtfd -1: no cache) by the file's identity (dev,
 * inode, size, mtime and ctime, which no user can set), at most
 * CONTAINER_DIGESTS_MAX entries: the least recently used go (an image file
 * rewritten in place, as --container-save does, is a new one each time).
 * 0/-1 + err. */
#define CONTAINER_DIGESTS_MAX 256
int container_image_digest(int rtfd, int fd, char out[72], mtc_error_t *err);
/* A directory used as a cache kept to max entries (the loader-cache stash,
 * R/digests): pick(dirfd, name, st, arg) says whether a name is an entry (1)
 * — it may remove what is none itself, a temporary left behind — and the
 * least recently used (mtime: written, or touched at a hit) beyond max go
 * through drop(dirfd, name, arg). */
void container_lru_trim(int dirfd, size_t max,
                        int (*pick)(int dirfd, const char *name, const struct stat *st, void *arg),
                        void (*drop)(int dirfd, const char *name, void *arg), void *arg);

#define CONTAINER_MAX_GPUS 64

/* The node's NVIDIA driver and what one step's container gets of it. */
struct container_driver {
    char root[512];      /* the driver's tree: "/", or plugstack.conf's driver=DIR */
    int present;         /* 1: the tree has a driver (ROOT/proc/driver/nvidia/version) */
    struct nvidia_facts facts;
    struct nvidia_gpu gpus[CONTAINER_MAX_GPUS]; /* the node's */
    size_t ngpus;
    char *ldcache;       /* ROOT/etc/ld.so.cache's bytes (owned; NULL: none) */
    size_t ldcache_len;
    uid_t uid;           /* the job's ids: libcuda is asked with these only */
    gid_t gid;
    int cuda_asked;      /* facts.cuda and the GPUs' arch and brand asked already */
    /* the plan */
    int inject;          /* 1: the driver goes into the container */
    unsigned caps;       /* NVIDIA_DRIVER_CAPABILITIES */
    int minors[CONTAINER_MAX_GPUS]; /* the container's GPUs, ascending */
    size_t nminors;
};

/* As root: what the driver tree at root (NULL or "": "/") holds — version,
 * GPUs, loader cache; the CUDA version libcuda says is asked later, in a
 * child with only uid/gid, when a requirement needs it. No driver is no
 * error (d->present 0). 0/-1 + err. */
int container_driver_probe(struct container_driver *d, const char *root, uid_t uid, gid_t gid,
                           mtc_error_t *err);
void container_driver_release(struct container_driver *d);
/* As root, the container prepared: whether and what of the driver the
 * container gets, from NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES,
 * NVIDIA_DISABLE_REQUIRE (the job's value, else the image's) and every
 * NVIDIA_REQUIRE_* of the image and the job; step_gpus: Slurm's minors
 * ("4,5"). -1 + err for a requirement the node does not meet (naming the
 * condition and the versions, or the GPU's arch or brand) or a bad value. */
int container_driver_plan(struct container_driver *d, const struct container_step *s, char **job_env,
                          const char *step_gpus, mtc_error_t *err);
/* In the task's namespace, the container's root at rootfd (s's), nothing
 * of the host mounted in it yet: the libraries, programs and firmware bound
 * read-only, then the container's loader cache made (the host's ldconfig
 * chrooted in it, or what it made for an earlier step on the node with the
 * same image and driver, stashed under R/ldcache). */
int container_driver_files(const struct container_driver *d, const struct container_step *s,
                           int rootfd, mtc_error_t *err);
/* (ldcache.c) Under a flock on the container's root: nothing when its
 * loader cache was made for key (the driver's version, capabilities and
 * library directory: ldconfig's mark), else the node's stash for key and s's
 * image copied in, else the host's ldconfig run chrooted in it and stashed.
 * Before anything of the host is mounted in the root. 0/-1 + err. */
int container_loader_cache(const struct container_step *s, int rootfd, const char *key,
                           mtc_error_t *err);
/* After the container's /proc: a read-only /proc/driver/nvidia of its GPUs. */
int container_driver_proc(const struct container_driver *d, int rootfd, mtc_error_t *err);
/* After /tmp: the driver daemons' sockets and MPS's pipes, when present. */
int container_driver_ipc(const struct container_driver *d, int rootfd, mtc_error_t *err);
/* As the user: NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES (Slurm's cvd,
 * renumbered) as the container sees its GPUs. 0/-1. */
int container_driver_env(const struct container_driver *d, const char *cvd,
                         int (*set_fn)(void *, const char *, const char *), void *arg);
/* The container's GPU minors as "4,5" into out. */
void container_driver_gpus(const struct container_driver *d, char *out, size_t len);

/* The image's /etc/environment (KEY=VALUE lines), read as root through the
 * container's root at s (never followed out of it, never a FIFO) into *text
 * (malloc'd; NULL when it has none). 0/-1 + err. */
int container_image_environ(const struct container_step *s, char **text, mtc_error_t *err);
/* NAME=value of such text into out ("" when unset), quotes removed. 1 set, 0 not. */
int container_image_var(const char *text, const char *name, char *out, size_t len);
/* name's value in the job's environment (NULL-terminated), or NULL. */
const char *container_job_var(char **env, const char *name);

/* The /dev/infiniband files one step's container gets (ib.c). */
#define CONTAINER_MAX_IB_DEVS 128
struct container_ib {
    char root[512]; /* the node's tree: "/", or plugstack.conf's ib=DIR */
    mlx_name_t hcas[MLX_MAX_HCAS]; /* ROOT/sys/class/infiniband, sorted */
    size_t nhcas;
    /* the plan: names under ROOT/dev/infiniband, each a character device */
    char devs[CONTAINER_MAX_IB_DEVS][16];
    size_t ndevs;
};
/* As root: the HCAs of the tree at root (NULL or "": "/"), then the plan
 * from MELLANOX_VISIBLE_DEVICES (the job's value, else the image's; unset:
 * none, enroot's default): rdma_cm and each chosen HCA's uverbsN, umadN and
 * issmN (its device's infiniband_verbs/ and infiniband_mad/ entries in
 * sysfs). -1 + err in one line for a value that names no HCA, or a device
 * file that is missing or no character device. */
int container_ib_plan(struct container_ib *ib, const char *root, const struct container_step *s,
                      char **job_env, mtc_error_t *err);
/* In the task's namespace, after the container's /dev: the plan's device
 * files bound at /dev/infiniband/NAME. 0/-1 + err. */
int container_ib_dev(const struct container_ib *ib, int rootfd, mtc_error_t *err);

/* The task side, as root in the task's process before privileges are
 * dropped: a private mount namespace, the binds (the user's sources from the
 * descriptors container_open_sources opened, cloned with open_tree before the
 * namespace is made), pivot_root into s->root.
 * gpu_dir: where emulated GPU device files are (NULL: none); gpus: the
 * step's GPU indices ("0,1,..", NULL: none); drv: the driver's plan (NULL:
 * none), whose GPUs then replace gpus; ib: the InfiniBand plan (NULL:
 * none). 0/-1 + err. */
int container_enter(const struct container_step *s, const struct container_opts *o,
                    const char *gpu_dir, const char *gpus, const struct container_driver *drv,
                    const struct container_ib *ib, mtc_error_t *err);
/* The image's default environment (/etc/environment in the container,
 * KEY=VALUE lines), merged into the task's by pyxis's rule: the image's value
 * wins, except for the --container-env names, where the job's value (when it
 * has one) wins. set_fn(arg, key, value) sets one variable. 0/-1 + err. */
int container_env_apply(const struct container_opts *o, const char *(*getenv_fn)(void *, const char *),
                        int (*set_fn)(void *, const char *, const char *), void *arg,
                        mtc_error_t *err);
/* As the user, just before exec: map the user to root in a new user
 * namespace (--container-remap-root). 0/-1 + err. */
int container_remap_root(uid_t uid, gid_t gid, mtc_error_t *err);
/* The image's entrypoint (image.json's "entrypoint" array) into out (max
 * words); *n 0 when it has none. 0, or -1 when it does not parse. */
int container_image_entrypoint(const char *json, char out[][1024], size_t max, size_t *n);
/* As the user, in the container, before the task: the entrypoint of json
 * (image.json's text) run with the task's environment env and the arguments
 * /bin/sh -c 'kill -STOP $$'; the environment of the shell it exec's set
 * for the task through set_fn. Its output goes to stderr when log, or when
 * it fails. 0, or -1 + err (it failed, or is not in the image). */
int container_entrypoint_run(const char *json, char **env, int log,
                             int (*set_fn)(void *, const char *, const char *), void *arg,
                             mtc_error_t *err);
/* As the user: path opened for writing (created 0644, never through a
 * symlink, a regular file) into *fd, for container_save. 0/-1 + err. */
int container_save_open(const char *path, int *fd, mtc_error_t *err);
/* As root, at the end of the step: the container's root (s->root) written by
 * mksquashfs into fd (emptied first). 0/-1 + err. */
int container_save(const struct container_step *s, int fd, mtc_error_t *err);

/* argv0 as the container would run it: a path, or found in PATH (path).
 * 1 found, 0 not. */
int container_find_command(const char *argv0, const char *path);

#endif
