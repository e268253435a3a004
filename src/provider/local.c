/* local: the "local" provider — a real Slurm cluster on this host. One munged
 * (own key and socket), one slurmctld and one `slurmd -N <node>` per compute
 * node on its own port, all under $MTC_HOME/clusters/<id>; pid files under
 * run/ let a restarted caller adopt the daemons instead of starting them twice. */
#include "provider/local.h"
#include "spank/container.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "slurm/slurm.h"

/* Paths go into fixed buffers; overlong ones are rejected up front
 * (provider_cluster_dir), so truncation warnings are noise here. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

const char *local_path(const struct lc *c, char *buf, const char *fmt, ...)
{
    char rel[PLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof(rel), fmt, ap);
    va_end(ap);
    snprintf(buf, PLEN, "%s/%s", c->dir, rel);
    return buf;
}

/* Format, log and pass on one line of an apply's progress. */
void local_say(provider_progress_fn progress, void *arg, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    log_vformat(LOG_INFO, msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (progress)
        progress(arg, msg);
}

int local_lc_init(struct lc *c, struct provider *p, const char *id, mtc_error_t *err)
{
    memset(c, 0, sizeof(*c));
    c->lockfd = -1;
    if (provider_cluster_dir(p, id, c->dir, sizeof(c->dir), err) < 0)
        return -1;
    snprintf(c->id, sizeof(c->id), "%s", id);
    snprintf(c->conf, sizeof(c->conf), "%s/slurm.conf", c->dir);
    snprintf(c->munge_socket, sizeof(c->munge_socket), "%s/munge/socket", c->dir);
    /* unix socket paths are limited to 108 bytes */
    if (strlen(c->munge_socket) >= 100) {
        errno = ENAMETOOLONG;
        return errprintf(err, "munge socket path %s too long; use a shorter MTC_HOME",
                         c->munge_socket);
    }
    return 0;
}

/* Serialise apply/supervise/delete of one cluster across threads and processes. */
int local_lock(struct lc *c, int wait)
{
    char path[PLEN];
    c->lockfd = open(local_path(c, path, ".lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (c->lockfd < 0)
        return -1;
    if (flock(c->lockfd, wait ? LOCK_EX : LOCK_EX | LOCK_NB) < 0) {
        close(c->lockfd);
        c->lockfd = -1;
        return -1;
    }
    return 0;
}

int local_lock_node(struct lc *c, const char *node)
{
    char path[PLEN];
    c->lockfd = open(local_path(c, path, ".lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (c->lockfd < 0)
        return -1;
    int fd = -1;
    if (flock(c->lockfd, LOCK_SH) == 0 &&
        (fd = open(local_path(c, path, ".lock.%s", node), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) >=
            0 &&
        flock(fd, LOCK_EX) == 0)
        return fd;
    int e = errno;
    if (fd >= 0)
        close(fd);
    local_unlock(c);
    errno = e;
    return -1;
}

void local_unlock_node(struct lc *c, int fd)
{
    if (fd >= 0)
        close(fd);
    local_unlock(c);
}

void local_unlock(struct lc *c)
{
    if (c->lockfd >= 0)
        close(c->lockfd);
    c->lockfd = -1;
}

/* ---- daemons by pid file, checked against their command line ---- */

/* 1 when pid's argv contains a and (if given) b as whole arguments. */
int local_cmdline_has(pid_t pid, const char *a, const char *b)
{
    return local_proc_has(pid, "cmdline", a, b);
}

/* 1 when /proc/<pid>/<file> (NUL-separated: cmdline, environ) holds a and
 * (if given) b as whole entries. */
int local_proc_has(pid_t pid, const char *file, const char *a, const char *b)
{
    char path[64];
    size_t len = 0;
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    char *s = mtc_read_file(path, &len);
    if (!s)
        return 0;
    int fa = 0, fb = !b;
    for (size_t i = 0; i < len; i += strlen(s + i) + 1) {
        fa |= strcmp(s + i, a) == 0;
        fb |= b && strcmp(s + i, b) == 0;
    }
    free(s);
    return fa && fb;
}

/* The live pid recorded in run/<name>.pid whose argv has a (and b), else 0.
 * The argv check keeps a recycled pid from being taken for our daemon. When
 * the caller died between starting a daemon and recording its pid, the
 * daemon's own pid file (own, relative to the cluster dir) finds it. */
pid_t local_running(const struct lc *c, const char *name, const char *own, const char *a,
                    const char *b)
{
    char path[PLEN];
    pid_t pid = mtc_pid_read(local_path(c, path, "run/%s.pid", name));
    if (pid > 0 && mtc_pid_alive(pid) && local_cmdline_has(pid, a, b))
        return pid;
    pid = mtc_pid_read(local_path(c, path, "%s", own));
    if (pid > 0 && mtc_pid_alive(pid) && local_cmdline_has(pid, a, b)) {
        mtc_write_file_fmt(local_path(c, path, "run/%s.pid", name), 0644, "%d\n", (int)pid);
        return pid;
    }
    return 0;
}

int local_record_pid(const struct lc *c, const char *name, pid_t pid)
{
    char path[PLEN];
    return mtc_write_file_fmt(local_path(c, path, "run/%s.pid", name), 0644, "%d\n", (int)pid);
}

static void munge_arg(const struct lc *c, char *buf)
{
    snprintf(buf, PLEN, "--socket=%s", c->munge_socket);
}

pid_t local_munged_running(const struct lc *c)
{
    char a[PLEN];
    munge_arg(c, a);
    return local_running(c, "munged", "munge/pid", a, NULL);
}

pid_t local_ctld_running(const struct lc *c)
{
    return local_running(c, "slurmctld", "run/slurm/slurmctld.pid", c->conf, NULL);
}

pid_t local_slurmd_running(const struct lc *c, const char *node)
{
    char name[96], own[128];
    snprintf(name, sizeof(name), "slurmd-%s", node);
    snprintf(own, sizeof(own), "run/slurm/slurmd-%s.pid", node);
    return local_running(c, name, own, c->conf, node);
}

static int munge_key(const struct lc *c, mtc_error_t *err)
{
    char path[PLEN];
    unsigned char key[1024];
    if (mtc_path_exists(local_path(c, path, "munge/key")))
        return 0;
    if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key))
        return errprintf(err, "getrandom: %s", strerror(errno));
    if (mtc_write_file_atomic(path, key, sizeof(key), 0400) < 0)
        return errprintf(err, "%s: %s", path, strerror(errno));
    return 0;
}

int local_munged_start(const struct lc *c, mtc_error_t *err)
{
    char a_sock[PLEN], a_key[PLEN], a_pid[PLEN], a_log[PLEN], a_seed[PLEN], path[PLEN];
    if (munge_key(c, err) < 0)
        return -1;
    /* a stale socket or lock from a killed munged would block the new one */
    unlink(c->munge_socket);
    snprintf(path, sizeof(path), "%s.lock", c->munge_socket);
    unlink(path);
    munge_arg(c, a_sock);
    snprintf(a_key, PLEN, "--key-file=%s/munge/key", c->dir);
    snprintf(a_pid, PLEN, "--pid-file=%s/munge/pid", c->dir);
    snprintf(a_log, PLEN, "--log-file=%s/munge/log", c->dir);
    snprintf(a_seed, PLEN, "--seed-file=%s/munge/seed", c->dir);
    /* -f: MTC_HOME may sit below a directory others cannot enter, which munged
     * otherwise refuses; all clients here run as root */
    char *argv[] = {"munged", "-F", "-f", a_sock, a_key, a_pid, a_log, a_seed, NULL};
    pid_t pid = mtc_spawn(argv, NULL, local_path(c, path, "log/munged.out"));
    if (pid < 0)
        return errprintf(err, "cannot start munged: %s", strerror(errno));
    local_record_pid(c, "munged", pid);
    for (int64_t end = mtc_now_ms() + 10000; mtc_now_ms() < end; mtc_sleep_ms(50)) {
        if (mtc_path_exists(c->munge_socket))
            return 0;
        if (!mtc_pid_alive(pid))
            break;
    }
    return errprintf(err, "munged did not come up (see %s/munge/log)", c->dir);
}

int local_ctld_start(const struct lc *c, mtc_error_t *err)
{
    char path[PLEN];
    pid_t pid = slurm_ctld_start(c->conf, local_path(c, path, "log/slurmctld.out"));
    if (pid < 0)
        return errprintf(err, "cannot start slurmctld: %s", strerror(errno));
    local_record_pid(c, "slurmctld", pid);
    for (int64_t end = mtc_now_ms() + CTLD_WAIT_MS; mtc_now_ms() < end; mtc_sleep_ms(100)) {
        if (slurm_ctld_up(c->conf))
            return 0;
        if (!mtc_pid_alive(pid)) /* a config error: fail now, not after the wait */
            return errprintf(err, "slurmctld exited at start (see %s/log/slurmctld.log)", c->dir);
    }
    return errprintf(err, "slurmctld did not answer within %d s (see %s/log/slurmctld.log)",
                     CTLD_WAIT_MS / 1000, c->dir);
}

int local_slurmd_start(const struct lc *c, const char *node, int boot, mtc_error_t *err)
{
    char path[PLEN], name[96];
    mtc_mkdir_p(local_path(c, path, "spool/%s", node), 0755);
    mtc_mkdir_p(local_path(c, path, "tmp/%s", node), 01777); /* TmpFS=<dir>/tmp/%n */
    local_path(c, path, "log/slurmd-%s.out", node);
    /* an elastic node's slurmd starts as a machine that boots now: Slurm
     * takes a resumed node only when it booted after the resume request */
    pid_t pid = boot ? slurm_slurmd_boot(c->conf, node, path)
                     : slurm_slurmd_start(c->conf, node, path);
    if (pid < 0)
        return errprintf(err, "cannot start slurmd for %s: %s", node, strerror(errno));
    snprintf(name, sizeof(name), "slurmd-%s", node);
    local_record_pid(c, name, pid);
    return 0;
}

void local_stop_pidfile(const struct lc *c, const char *name, pid_t pid)
{
    char path[PLEN];
    if (pid > 0)
        mtc_pid_stop(pid, STOP_WAIT_MS);
    unlink(local_path(c, path, "run/%s.pid", name));
}

/* ---- layout (cluster.json) ---- */

int local_layout_load(const struct lc *c, struct layout *l)
{
    char path[PLEN];
    memset(l, 0, sizeof(*l));
    json_t *j = json_load_file(local_path(c, path, "cluster.json"), 0, NULL);
    if (!j)
        return -1;
    l->ctld_port = (int)json_integer_value(json_object_get(j, "ctldPort"));
    l->slurmd_port = (int)json_integer_value(json_object_get(j, "slurmdPort"));
    snprintf(l->applied_sha, sizeof(l->applied_sha), "%s",
             json_string_value(json_object_get(j, "appliedConfSha256")) ?: "");
    snprintf(l->applied_nodes, sizeof(l->applied_nodes), "%s",
             json_string_value(json_object_get(j, "appliedNodes")) ?: "");
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(j, "nodes"), i, n)
    {
        if (l->nnodes >= MAX_NODES)
            break;
        struct lnode *ln = &l->nodes[l->nnodes++];
        snprintf(ln->name, sizeof(ln->name), "%s",
                 json_string_value(json_object_get(n, "name")) ?: "");
        snprintf(ln->pool, sizeof(ln->pool), "%s",
                 json_string_value(json_object_get(n, "pool")) ?: "");
        ln->port = (int)json_integer_value(json_object_get(n, "port"));
        ln->cloud = json_is_true(json_object_get(n, "cloud"));
    }
    json_decref(j);
    return l->ctld_port > 0 ? 0 : -1;
}

static int layout_save(const struct lc *c, const struct layout *l, mtc_error_t *err)
{
    char path[PLEN];
    json_t *nodes = json_array();
    for (size_t i = 0; i < l->nnodes; i++) {
        json_t *n = json_pack("{s:s,s:s,s:i}", "name", l->nodes[i].name, "pool", l->nodes[i].pool,
                              "port", l->nodes[i].port);
        if (n && l->nodes[i].cloud)
            json_object_set_new(n, "cloud", json_true());
        json_array_append_new(nodes, n);
    }
    json_t *j = json_pack("{s:s,s:i,s:i,s:o,s:s,s:s}", "id", c->id, "ctldPort", l->ctld_port,
                          "slurmdPort", l->slurmd_port, "nodes", nodes, "appliedConfSha256",
                          l->applied_sha, "appliedNodes", l->applied_nodes);
    return local_json_save(local_path(c, path, "cluster.json"), j, 0644, err);
}

const struct lnode *local_layout_find(const struct layout *l, const char *name)
{
    for (size_t i = 0; i < l->nnodes; i++)
        if (strcmp(l->nodes[i].name, name) == 0)
            return &l->nodes[i];
    return NULL;
}

/* "a,b,c~": an elastic node with "~" (slurmctld restarts when that changes) */
static void node_names(const struct layout *l, char *buf, size_t len)
{
    buf[0] = '\0';
    for (size_t i = 0; i < l->nnodes; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s%s", i ? "," : "", l->nodes[i].name,
                 l->nodes[i].cloud ? "~" : "");
}

static int port_taken(const struct layout *l, int port)
{
    if (port == l->ctld_port || port == l->slurmd_port)
        return 1;
    for (size_t i = 0; i < l->nnodes; i++)
        if (l->nodes[i].port == port)
            return 1;
    return 0;
}

/* The nodes the spec asks for; ports kept from old, new ones allocated.
 * sizes[] gets each node's Slurm sizing. */
static int plan_nodes(const struct lc *c, const json_t *spec, const struct layout *old,
                      struct layout *l, struct slurm_node *sizes, mtc_error_t *err)
{
    int host_cpus;
    long host_mem;
    if (slurm_host_resources(&host_cpus, &host_mem, err) < 0)
        return -1;
    const char *login = cluster_spec_login_pool(spec);
    size_t i;
    json_t *pool;
    json_array_foreach(json_object_get(spec, "nodePools"), i, pool)
    {
        const char *pid = json_string_value(json_object_get(pool, "id"));
        if (login && strcmp(pid, login) == 0)
            continue; /* the login pool is this host's shell: no slurmd */
        json_t *ms = json_object_get(pool, "machineSpec");
        struct cluster_machine_type mt;
        if (cluster_machine_type_lookup(json_string_value(json_object_get(ms, "machineType")), &mt,
                                        err) < 0)
            return -1;
        const json_t *sc = json_object_get(pool, "scalingSpec");
        int min = (int)json_integer_value(json_object_get(sc, "minNodeCount"));
        int count = (int)json_integer_value(json_object_get(sc, "maxNodeCount"));
        if (count < min)
            count = min;
        for (int k = 0; k < count; k++) {
            if (l->nnodes >= MAX_NODES)
                return errprintf(err, "more than %d nodes", MAX_NODES);
            struct lnode *n = &l->nodes[l->nnodes];
            struct slurm_node *s = &sizes[l->nnodes];
            l->nnodes++;
            snprintf(n->name, sizeof(n->name), "%s-%s-%d", c->id, pid, k);
            snprintf(n->pool, sizeof(n->pool), "%s", pid);
            n->cloud = k >= min; /* elastic: powered by Slurm's power saving */
            const struct lnode *was = old ? local_layout_find(old, n->name) : NULL;
            n->port = was ? was->port : 0;
            memset(s, 0, sizeof(*s));
            snprintf(s->name, sizeof(s->name), "%s", n->name);
            snprintf(s->pool, sizeof(s->pool), "%s", pid);
            s->cloud = n->cloud;
            /* never more than the host has: slurmd refuses to register a node
             * configured larger than what `slurmd -C` sees */
            s->cpus = mt.host_sized || mt.vcpus > host_cpus ? host_cpus : mt.vcpus;
            s->memory_mb = mt.host_sized || mt.memory_mb > host_mem ? host_mem : mt.memory_mb;
            s->gpus = (int)json_integer_value(json_object_get(ms, "acceleratorCount"));
            snprintf(s->gres_type, sizeof(s->gres_type), "%s",
                     mt.gres_type[0] ? mt.gres_type : "gpu");
        }
    }
    /* ports: one consecutive range on creation, single free ports for nodes added later */
    if (old && old->ctld_port > 0) {
        l->ctld_port = old->ctld_port;
        l->slurmd_port = old->slurmd_port;
    } else {
        int base = mtc_free_port_range((int)l->nnodes + 2);
        if (!base)
            return errprintf(err, "no free port range");
        l->ctld_port = base;
        l->slurmd_port = base + 1;
        for (size_t k = 0; k < l->nnodes; k++)
            l->nodes[k].port = base + 2 + (int)k;
    }
    for (size_t k = 0; k < l->nnodes; k++) {
        int tries = 0;
        while (!l->nodes[k].port && tries++ < 100) {
            int p = mtc_free_port();
            if (p && !port_taken(l, p) && !(old && port_taken(old, p)))
                l->nodes[k].port = p;
        }
        if (!l->nodes[k].port)
            return errprintf(err, "no free port for %s", l->nodes[k].name);
        sizes[k].port = l->nodes[k].port;
    }
    return 0;
}

/* ---- files ---- */

int local_make_dirs(const struct lc *c, mtc_error_t *err)
{
    static const char *const sub[] = {"",     "state", "spool", "log", "run", "run/slurm",
                                      "home", "nodes", "etc",   "tmp", NULL};
    char path[PLEN];
    for (size_t i = 0; sub[i]; i++)
        if (mtc_mkdir_p(local_path(c, path, "%s", sub[i]), 0755) < 0)
            return errprintf(err, "mkdir %s: %s", path, strerror(errno));
    /* munged wants its socket directory enterable by everyone */
    if (mtc_mkdir_p(local_path(c, path, "munge"), 0755) < 0 || chmod(path, 0755) < 0)
        return errprintf(err, "mkdir %s: %s", path, strerror(errno));
    return 0;
}

/* etc/prolog.sh, etc/epilog.sh, etc/health.sh from the provider's hooks and
 * the spec's scripts; sets which of them slurm.conf names. */
static int write_hooks(const struct provider *p, const struct lc *c, const json_t *pro,
                       const json_t *epi, struct slurm_layout *sl, mtc_error_t *err)
{
    char *hp = provider_hook_expand(p->hook_prolog, c->id, c->dir, p->agent);
    char *he = provider_hook_expand(p->hook_epilog, c->id, c->dir, p->agent);
    char *hh = provider_hook_expand(p->hook_health, c->id, c->dir, p->agent);
    int rc = -1;
    if ((sl->prolog = slurm_scripts_write(c->dir, "prolog", hp, pro, err)) < 0 ||
        (sl->epilog = slurm_scripts_write(c->dir, "epilog", he, epi, err)) < 0 ||
        slurm_health_write(c->dir, hh, err) < 0)
        goto out;
    if (!hh)
        sl->health_interval = 0;
    rc = 0;
out:
    free(hp);
    free(he);
    free(hh);
    return rc;
}

/* NVIDIA devices this host has (/dev/nvidia0, 1, ... in a row). */
int local_host_gpus(void)
{
    int n = 0;
    char path[64];
    for (;; n++) {
        snprintf(path, sizeof(path), "/dev/nvidia%d", n);
        if (!mtc_path_exists(path))
            return n;
    }
}

/* Write path when its content differs. 1 changed, 0 same, -1 error. */
int local_write_if_changed(const char *path, const char *text, mtc_error_t *err)
{
    char *old = mtc_read_file(path, NULL);
    int same = old && strcmp(old, text) == 0;
    free(old);
    if (same)
        return 0;
    if (mtc_write_file_atomic(path, text, strlen(text), 0644) < 0)
        return errprintf(err, "cannot write %s: %s", path, strerror(errno));
    return 1;
}

/* A state file of either provider (local.h). */
int local_json_save(const char *path, json_t *j, mode_t mode, mtc_error_t *err)
{
    char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
    json_decref(j);
    if (!text)
        return errprintf(err, "cannot write %s: out of memory", path);
    int rc = mtc_write_file_atomic(path, text, strlen(text), mode);
    free(text);
    if (rc < 0)
        return errprintf(err, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

/* local_write_if_changed of j's indented text (local.h). */
int local_json_write_if_changed(const char *path, json_t *j, mtc_error_t *err)
{
    char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
    json_decref(j);
    if (!text)
        return errprintf(err, "out of memory");
    int rc = local_write_if_changed(path, text, err);
    free(text);
    return rc;
}

/* ---- many nodes at once ---- */

/* Up to LOCAL_WORKERS threads run fn(arg, i) for i in 0..n-1, each index
 * once; errs[i] gets each one's error. Returns the first failed index, or -1
 * when all succeeded. Node starts and stops are mostly waits on children,
 * files and the store, so a few threads overlap them even on one core. */
#define LOCAL_WORKERS 8
static long local_parallel(size_t n, mtc_task_fn fn, void *arg, mtc_error_t *errs)
{
    return mtc_parallel(n, LOCAL_WORKERS, fn, arg, errs);
}

/* The nodes being stopped, and what each worker needs. */
struct stopping {
    const struct lc *c;
    char (*names)[64];
};

/* A stopped node's leftovers: its steps, tasks and hook programs (whatever
 * outlived slurmd), pid files, container mounts and directories. */
static int node_remove(void *arg, size_t i, mtc_error_t *err)
{
    const struct stopping *st = arg;
    const struct lc *c = st->c;
    const char *node = st->names[i];
    char path[PLEN];
    if (local_node_kill(c, node, err) < 0)
        log_msg(LOG_WARNING, "cluster %s: %s", c->id, err->text);
    unlink(local_path(c, path, "run/slurm/slurmd-%s.pid", node));
    container_sweep(local_path(c, path, "nodes/%s/containers", node), NULL);
    mtc_rm_rf(local_path(c, path, "spool/%s", node));
    mtc_rm_rf(local_path(c, path, "nodes/%s", node));
    mtc_rm_rf(local_path(c, path, "tmp/%s", node));
    return 0;
}

/* Stop every slurmd and mtc-agent that has a pid file (mtc's in run/ or
 * Slurm's in run/slurm/) and is not a node of keep (NULL: stop all), and remove the
 * node's directories. Scanning pid files rather than the saved layout also
 * catches nodes an update removed before it was interrupted. All at once:
 * SIGTERM to every daemon, one wait for all of them (SIGKILL after 10 s),
 * then the leftovers removed by a pool of workers. */
static void stop_other_slurmds(const struct lc *c, const struct layout *keep,
                               provider_progress_fn progress, void *arg)
{
    static const char *const dirs[] = {"run", "run/slurm"};
    char path[PLEN];
    char(*names)[64] = calloc(2 * MAX_NODES, sizeof(*names));
    pid_t *pids = calloc(4 * MAX_NODES, sizeof(*pids));
    size_t n = 0, np = 0;
    for (size_t k = 0; names && pids && k < 2; k++) {
        DIR *d = opendir(local_path(c, path, "%s", dirs[k]));
        struct dirent *e;
        while (d && (e = readdir(d))) {
            size_t len = strlen(e->d_name);
            /* slurmd-<node>.pid or agent-<node>.pid */
            size_t pre = strncmp(e->d_name, "slurmd-", 7) == 0  ? 7
                         : strncmp(e->d_name, "agent-", 6) == 0 ? 6
                                                                : 0;
            if (!pre || len < pre + 5 || len - pre - 4 >= 64 ||
                strcmp(e->d_name + len - 4, ".pid") != 0)
                continue;
            char node[64];
            snprintf(node, sizeof(node), "%.*s", (int)(len - pre - 4), e->d_name + pre);
            int seen = keep && local_layout_find(keep, node);
            for (size_t i = 0; i < n; i++)
                seen |= strcmp(names[i], node) == 0;
            if (!seen && n < 2 * MAX_NODES)
                snprintf(names[n++], sizeof(names[0]), "%s", node);
        }
        if (d)
            closedir(d);
    }
    /* SIGTERM to all: a slurmd's clean stop leaves its jobs' steps running
     * (node_remove kills them) */
    for (size_t i = 0; i < n; i++) {
        if (keep)
            local_say(progress, arg, "removing node %s", names[i]);
        pid_t sd = local_slurmd_running(c, names[i]), ag = local_agent_running(c, names[i]);
        if (sd > 0 && kill(sd, SIGTERM) == 0)
            pids[np++] = sd;
        if (ag > 0 && kill(ag, SIGTERM) == 0)
            pids[np++] = ag;
    }
    for (int64_t end = mtc_now_ms() + STOP_WAIT_MS;; mtc_sleep_ms(20)) {
        size_t alive = 0;
        for (size_t i = 0; i < np; i++)
            alive += pids[i] > 0 && mtc_pid_alive(pids[i]);
        if (!alive)
            break;
        if (mtc_now_ms() >= end) {
            for (size_t i = 0; i < np; i++)
                if (pids[i] > 0)
                    kill(pids[i], SIGKILL);
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        char name[96];
        snprintf(name, sizeof(name), "slurmd-%s", names[i]);
        unlink(local_path(c, path, "run/%s.pid", name));
        snprintf(name, sizeof(name), "agent-%s", names[i]);
        unlink(local_path(c, path, "run/%s.pid", name));
    }
    if (n) {
        mtc_error_t *errs = calloc(n, sizeof(*errs));
        struct stopping st = {c, names};
        if (errs)
            local_parallel(n, node_remove, &st, errs);
        free(errs);
    }
    free(names);
    free(pids);
}

/* ---- convergence ---- */

/* Both providers' wait for a whole cluster to register (local.h). */
int local_wait_registered(const struct lc *c, const char *const *names, const char *const *hosts,
                          size_t n, mtc_error_t *err)
{
    int64_t end = mtc_now_ms() + REGISTER_WAIT_MS;
    char last[256] = "", see[PLEN + 16] = "";
    if (!hosts)
        snprintf(see, sizeof(see), " (see %s/log)", c->dir);
    for (;;) {
        mtc_error_t e2;
        json_t *st = slurm_node_states(c->conf, &e2);
        size_t ok = 0;
        for (size_t i = 0; st && i < n; i++) {
            const char *s = json_string_value(json_object_get(st, names[i]));
            if (slurm_state_registered(s))
                ok++;
            else if (!last[0] || ok == i)
                snprintf(last, sizeof(last), "%s%s%s is %s", names[i], hosts ? " on " : "",
                         hosts ? hosts[i] : "", s ? s : "missing");
        }
        json_decref(st);
        if (st && ok == n)
            return 0;
        if (mtc_now_ms() >= end)
            return errprintf(err, "nodes did not register within %d s: %s%s",
                             REGISTER_WAIT_MS / 1000, st ? last : e2.text, see);
        mtc_sleep_ms(250);
    }
}

/* The short host name, for both providers (local.h). */
void local_short_hostname(char *buf, size_t len)
{
    if (gethostname(buf, len) < 0)
        snprintf(buf, len, "localhost");
    buf[len - 1] = '\0';
    char *dot = strchr(buf, '.');
    if (dot)
        *dot = '\0';
}

/* Slurm's timeouts and fan-out for n slurmds on this host (slurm_sizing_for).
 * MTC_EMULATION_SIZING=fixed in the provider's environment keeps Slurm's
 * usual values whatever the size: the baseline bench/emulation.sh measures
 * against. */
static void emulation_sizing(size_t n, struct slurm_sizing *z)
{
    const char *mode = getenv("MTC_EMULATION_SIZING");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    memset(z, 0, sizeof(*z));
    if (mode && strcmp(mode, "fixed") == 0)
        return;
    slurm_sizing_for((int)n, cores > 0 ? (int)cores : 1, z);
}

/* Apply, phase 1: each node's directories, the hook scripts, slurm.conf and
 * gres.conf rendered, checked by Slurm and written; sha of both (what the
 * daemons must run). 0/-1 + err. */
static int write_config(struct provider *p, struct lc *c, const json_t *spec, struct layout *l,
                        struct slurm_node *sizes, char sha[65], mtc_error_t *err)
{
    char hostname[256];
    local_short_hostname(hostname, sizeof(hostname));
    const json_t *ss = json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec");
    struct slurm_layout sl = {
        .cluster = c->id,
        .dir = c->dir,
        .hostname = hostname,
        .ctld_port = l->ctld_port,
        .slurmd_port = l->slurmd_port,
        .nodes = sizes,
        .nnodes = l->nnodes,
        .fake_gpus = 0,
        .spank = p->spank,
        .health_interval =
            p->hook_health ? local_health_interval(spec, p->hook_health_interval) : 0};
    emulation_sizing(l->nnodes, &sl.sizing);
    /* real devices only when the host has as many as a node claims; an
     * 8-GPU node emulated on a 1-GPU host gets device files of its own */
    for (size_t i = 0; i < l->nnodes; i++)
        if (sizes[i].gpus > local_host_gpus())
            sl.fake_gpus = 1;
    for (size_t i = 0; i < l->nnodes; i++)
        if (local_node_provision(c, sizes[i].name, sizes[i].gpus, sl.fake_gpus, 0, err) < 0)
            return -1;
    if (write_hooks(p, c, json_object_get(ss, "prologBashScripts"),
                    json_object_get(ss, "epilogBashScripts"), &sl, err) < 0)
        return -1;
    if (local_power_setup(p, c, spec, &sl, err) < 0)
        return -1;
    if (local_conf_write(c, spec, &sl, sha, err) < 0 || layout_save(c, l, err) < 0)
        return -1;
    return 0;
}

/* Both providers' slurm.conf and gres.conf (local.h). */
int local_conf_write(const struct lc *c, const json_t *spec, const struct slurm_layout *sl,
                     char sha[65], mtc_error_t *err)
{
    char path[PLEN];
    char *conf = slurm_conf_render(spec, sl, err);
    char *gres = conf ? slurm_gres_render(sl, err) : NULL;
    char *plug = gres && sl->spank ? slurm_plugstack_render(sl, err) : NULL;
    char *both = NULL;
    int rc = -1;
    if (!gres || (sl->spank && !plug))
        goto out;
    if (plug && (mtc_mkdir_p(local_path(c, path, "etc"), 0755) < 0 ||
                 local_write_if_changed(local_path(c, path, "etc/plugstack.conf"), plug, err) < 0))
        goto out;
    /* a config Slurm would refuse never reaches the running daemons */
    if (slurm_conf_check(conf, local_path(c, path, "slurm.conf.check"), err) < 0 ||
        local_write_if_changed(local_path(c, path, "gres.conf"), gres, err) < 0 ||
        local_write_if_changed(c->conf, conf, err) < 0)
        goto out;
    /* both files: slurmd re-reads gres.conf on reconfigure too */
    if (asprintf(&both, "%s\n%s\n%s", conf, gres, plug ? plug : "") < 0) {
        both = NULL;
        errprintf(err, "out of memory");
        goto out;
    }
    mtc_sha256_hex(both, sha);
    rc = 0;
out:
    free(both);
    free(conf);
    free(gres);
    free(plug);
    return rc;
}

/* Apply, phase 2: munged, and slurmctld running the config of sha —
 * reconfigured, or restarted when the node set changed (slurmds of removed
 * nodes stopped first). 0/-1 + err. */
static int start_controller(struct lc *c, struct layout *l, const char *sha,
                            provider_progress_fn progress, void *arg, mtc_error_t *err)
{
    char names[PLEN];
    node_names(l, names, sizeof(names));
    if (!local_munged_running(c)) {
        local_say(progress, arg, "starting munged");
        if (local_munged_start(c, err) < 0)
            return -1;
    }
    /* nodes no longer in the spec: stop their slurmd first */
    stop_other_slurmds(c, l, progress, arg);
    int any_slurmd = 0;
    for (size_t i = 0; i < l->nnodes; i++)
        any_slurmd |= local_slurmd_running(c, l->nodes[i].name) > 0;

    pid_t ctld = local_ctld_running(c);
    int reconfigure_after = 0;
    if (ctld && strcmp(l->applied_sha, sha) != 0) {
        if (strcmp(l->applied_nodes, names) == 0) {
            local_say(progress, arg, "reconfiguring slurmctld");
            if (slurm_ctld_wait(c->conf, CTLD_WAIT_MS) < 0 || slurm_reconfigure(c->conf, err) < 0)
                return -1;
        } else {
            /* Slurm 22.05 only learns about added or removed nodes at start;
             * a clean stop saves the job queue in StateSaveLocation first */
            local_say(progress, arg, "restarting slurmctld for the new node set");
            local_stop_pidfile(c, "slurmctld", ctld);
            ctld = 0;
            reconfigure_after = any_slurmd;
        }
    }
    if (!ctld) {
        local_say(progress, arg, "starting slurmctld");
        if (local_ctld_start(c, err) < 0)
            return -1;
        if (strcmp(l->applied_sha, sha) != 0)
            reconfigure_after = any_slurmd;
    } else if (slurm_ctld_wait(c->conf, CTLD_WAIT_MS) < 0) {
        return errprintf(err, "slurmctld does not answer (see %s/log/slurmctld.log)", c->dir);
    }
    snprintf(l->applied_sha, sizeof(l->applied_sha), "%s", sha);
    snprintf(l->applied_nodes, sizeof(l->applied_nodes), "%s", names);
    if (layout_save(c, l, err) < 0)
        return -1;
    /* running slurmds re-read slurm.conf to learn the new node list */
    if (reconfigure_after && slurm_reconfigure(c->conf, err) < 0)
        return -1;
    return 0;
}

/* 1 for an elastic node that is powered down: no daemons to start. */
static int node_off(const struct lc *c, const struct lnode *n)
{
    return n->cloud && !local_power_is_on(c, n->name);
}

/* What the workers of start_nodes share. */
struct starting {
    struct provider *p;
    const struct lc *c;
    const json_t *spec;
    const struct layout *l;
};

/* A node's agent: its config, and the agent restarted for a new policy,
 * stopped when agents are off, started when missing. */
static int node_agent(void *arg, size_t i, mtc_error_t *err)
{
    const struct starting *st = arg;
    const struct lc *c = st->c;
    const char *nn = st->l->nodes[i].name;
    if (node_off(c, &st->l->nodes[i]))
        return 0; /* a powered-down elastic node: power-on configures it */
    int changed = local_agent_config(st->p, c, st->spec, nn, st->l->nodes[i].port, err);
    if (changed < 0)
        return -1;
    pid_t agent = local_agent_running(c, nn);
    if (agent && (changed || !st->p->agent))
        local_agent_stop(c, nn); /* a new policy, or agents turned off */
    if (!st->p->agent || (!changed && agent))
        return 0;
    /* a fresh agent checks slurmd through slurmd's own pid file at once: a
     * slurmd start_nodes has just spawned (a raised minNodeCount's node, a
     * new node) must have written it first, or the check fails and
     * remediation reboots a healthy node */
    if (local_slurmd_wait_up(c, nn, err) < 0 || local_agent_start(st->p, c, nn, err) < 0)
        return -1;
    return 0;
}

/* Apply, phase 3: a slurmd per node (spawned, not waited for), then the
 * agents by a pool of workers (node_agent: minting a token, writing the
 * config, spawning). 0/-1 + err (the first failure). */
static int start_nodes(struct provider *p, struct lc *c, const json_t *spec,
                       const struct layout *l, provider_progress_fn progress, void *arg,
                       mtc_error_t *err)
{
    if (l->nnodes == 0)
        return 0;
    size_t down = 0;
    for (size_t i = 0; i < l->nnodes; i++)
        down += !local_slurmd_running(c, l->nodes[i].name) && !node_off(c, &l->nodes[i]);
    if (down)
        local_say(progress, arg, "starting %zu slurmd(s)", down);
    for (size_t i = 0; i < l->nnodes; i++)
        if (!local_slurmd_running(c, l->nodes[i].name) && !node_off(c, &l->nodes[i]) &&
            local_slurmd_start(c, l->nodes[i].name, l->nodes[i].cloud, err) < 0)
            return -1;
    mtc_error_t *errs = calloc(l->nnodes, sizeof(*errs));
    if (!errs)
        return errprintf(err, "out of memory");
    struct starting st = {p, c, spec, l};
    long bad = local_parallel(l->nnodes, node_agent, &st, errs);
    if (bad >= 0)
        errprintf(err, "%s", errs[bad].text);
    free(errs);
    return bad >= 0 ? -1 : 0;
}

static int local_apply(struct provider *p, const char *id, const json_t *spec,
                       provider_progress_fn progress, void *arg, mtc_error_t *err)
{
    struct lc c;
    struct layout *old = NULL, *l = NULL;
    struct slurm_node *sizes = NULL;
    char sha[65];
    int rc = -1;

    if (local_lc_init(&c, p, id, err) < 0)
        return -1;
    /* callers pass the canonical form; normalizing again is cheap and
     * guarantees every name below was validated */
    json_t *norm = cluster_spec_normalize(spec, err);
    if (!norm)
        return -1;
    spec = norm;
    if (local_make_dirs(&c, err) < 0) {
        json_decref(norm);
        return -1;
    }
    if (local_lock(&c, 1) < 0) {
        json_decref(norm);
        return errprintf(err, "cannot lock %s: %s", c.dir, strerror(errno));
    }
    old = calloc(1, sizeof(*old));
    l = calloc(1, sizeof(*l));
    sizes = calloc(MAX_NODES, sizeof(*sizes));
    if (!old || !l || !sizes) {
        errprintf(err, "out of memory");
        goto out;
    }
    int have_old = local_layout_load(&c, old) == 0;
    local_say(progress, arg, have_old ? "updating cluster %s" : "creating cluster %s", id);
    if (plan_nodes(&c, spec, have_old ? old : NULL, l, sizes, err) < 0)
        goto out;
    snprintf(l->applied_sha, sizeof(l->applied_sha), "%s", have_old ? old->applied_sha : "");
    snprintf(l->applied_nodes, sizeof(l->applied_nodes), "%s", have_old ? old->applied_nodes : "");
    if (have_old && local_power_plan(&c, old, l, progress, arg, err) < 0)
        goto out;
    if (write_config(p, &c, spec, l, sizes, sha, err) < 0 ||
        start_controller(&c, l, sha, progress, arg, err) < 0 ||
        start_nodes(p, &c, spec, l, progress, arg, err) < 0)
        goto out;
    const char *names[MAX_NODES];
    size_t nup = 0; /* elastic nodes that are off register when Slurm resumes them */
    for (size_t i = 0; i < l->nnodes; i++)
        if (!node_off(&c, &l->nodes[i]))
            names[nup++] = l->nodes[i].name;
    local_say(progress, arg, "waiting for %zu node(s) to register", nup);
    if (local_wait_registered(&c, names, NULL, nup, err) < 0)
        goto out;
    local_say(progress, arg, "cluster %s is ready", id);
    rc = 0;
out:
    local_unlock(&c);
    json_decref(norm);
    free(old);
    free(l);
    free(sizes);
    return rc;
}

/* The delete of either provider: lock, stop, remove (local.h). */
int local_delete_with(struct provider *p, const char *id, local_stop_fn stop, mtc_error_t *err)
{
    struct lc c;
    if (local_lc_init(&c, p, id, err) < 0)
        return -1;
    if (!mtc_path_exists(c.dir))
        return 0;
    if (local_lock(&c, 1) < 0)
        return errprintf(err, "cannot lock %s: %s", c.dir, strerror(errno));
    int rc = stop(p, &c, err);
    /* with what containers left mounted under it (a sweep never crosses a
     * mount it could not remove) */
    if (rc == 0 && container_sweep(c.dir, err) < 0)
        rc = -1;
    local_unlock(&c);
    return rc;
}

/* Delete, under the lock: every node's processes killed, then the
 * controller's daemons stopped. */
#define DELETE_CTLD_MS 2000
static int delete_stop(struct provider *p, struct lc *c, mtc_error_t *err)
{
    (void)p, (void)err;
    /* every process of every node at once (slurmds, agents, steps, jobs,
     * prologs and epilogs: one /proc scan a round, SIGSTOP then SIGKILL):
     * nothing of the cluster is kept, so neither the job queue nor a clean
     * slurmd stop is waited for; the directory goes with the mounts under it */
    if (local_node_kill(c, NULL, err) < 0)
        return -1;
    /* its saved state goes with the directory: a slurmctld still waiting on
     * the dead nodes' RPCs gets 2 s to stop, not 10 */
    pid_t ctld = local_ctld_running(c);
    if (ctld > 0)
        mtc_pid_stop(ctld, DELETE_CTLD_MS);
    local_stop_pidfile(c, "slurmctld", 0);
    local_stop_pidfile(c, "munged", local_munged_running(c));
    return 0;
}

static int local_delete(struct provider *p, const char *id, mtc_error_t *err)
{
    return local_delete_with(p, id, delete_stop, err);
}

/* The controller's part of both providers' supervise (local.h). */
int local_supervise_controller(const struct lc *c, provider_event_fn ev, void *arg,
                               int *ctld_restarted, mtc_error_t *err)
{
    *ctld_restarted = 0;
    if (!local_munged_running(c)) {
        if (local_munged_start(c, err) < 0)
            return -1;
        if (ev)
            ev(arg, "MUNGED_RESTART", NULL, "munged was not running; restarted");
    }
    if (!local_ctld_running(c)) {
        if (local_ctld_start(c, err) < 0)
            return -1;
        if (ev)
            ev(arg, "SLURMCTLD_RESTART", NULL,
               "slurmctld was not running; restarted with saved state");
        *ctld_restarted = 1;
    }
    return 0;
}

static int local_supervise(struct provider *p, const char *id, const json_t *spec,
                           provider_event_fn ev, void *arg, mtc_error_t *err)
{
    struct lc c;
    struct layout *l = NULL;
    char msg[256];
    int rc = -1, ctld_restarted = 0;
    if (local_lc_init(&c, p, id, err) < 0)
        return -1;
    if (!mtc_path_exists(c.dir))
        return errprintf(err, "cluster %s has no directory %s", id, c.dir);
    if (local_lock(&c, 0) < 0)
        return 0; /* an apply or delete is at work; it starts what is missing */
    if (!(l = calloc(1, sizeof(*l))) || local_layout_load(&c, l) < 0) {
        errprintf(err, "cluster %s: no cluster.json (never applied?)", id);
        goto out;
    }
    if (local_supervise_controller(&c, ev, arg, &ctld_restarted, err) < 0)
        goto out;
    for (size_t i = 0; i < l->nnodes; i++) {
        if (local_slurmd_running(&c, l->nodes[i].name) || node_off(&c, &l->nodes[i]))
            continue;
        if (local_slurmd_start(&c, l->nodes[i].name, l->nodes[i].cloud, err) < 0)
            goto out;
        snprintf(msg, sizeof(msg), "slurmd of %s was not running; restarted", l->nodes[i].name);
        if (ev)
            ev(arg, "SLURMD_RESTART", l->nodes[i].name, msg);
    }
    for (size_t i = 0; p->agent && i < l->nnodes; i++) {
        const char *nn = l->nodes[i].name;
        if (local_agent_running(&c, nn) || node_off(&c, &l->nodes[i]))
            continue;
        if (local_agent_config(p, &c, spec, nn, l->nodes[i].port, err) < 0 ||
            local_agent_start(p, &c, nn, err) < 0)
            goto out;
        snprintf(msg, sizeof(msg), "mtc-agent of %s was not running; restarted", nn);
        if (ev)
            ev(arg, "AGENT_RESTART", nn, msg);
    }
    /* Never wait here: the supervisor has other daemons to look after. The
     * slurmds answer a restarted slurmctld's pings on their own; a
     * reconfigure makes them register at once. */
    mtc_error_t e2;
    if (ctld_restarted && slurm_reconfigure(c.conf, &e2) < 0)
        log_msg(LOG_WARNING, "cluster %s: %s", id, e2.text);
    rc = 0;
out:
    free(l);
    local_unlock(&c);
    return rc;
}

static json_t *local_nodes(struct provider *p, const char *id, const json_t *spec, mtc_error_t *err)
{
    struct lc c;
    struct layout *l = NULL;
    if (local_lc_init(&c, p, id, err) < 0)
        return NULL;
    if (!(l = calloc(1, sizeof(*l))))
        return NULL;
    int have = local_layout_load(&c, l) == 0;
    json_t *out = json_array();
    mtc_error_t e2;
    json_t *st = have && local_ctld_running(&c) ? slurm_node_states(c.conf, &e2) : NULL;
    int busy = 0;
    if (have && local_lock(&c, 0) < 0)
        busy = 1;
    local_unlock(&c);
    for (size_t i = 0; i < l->nnodes; i++) {
        const char *s = json_string_value(json_object_get(st, l->nodes[i].name));
        /* an elastic node: Slurm's power state while it is not on */
        int ps = !l->nodes[i].cloud ? SLURM_POWER_ON
                 : s                ? (int)slurm_power_state_of(s)
                 : local_power_is_on(&c, l->nodes[i].name) ? SLURM_POWER_ON
                                                            : SLURM_POWERED_DOWN;
        const char *ns = ps != SLURM_POWER_ON ? schema_enum_name(&slurm_power_state_enum, ps) : NULL;
        if (!ns)
            ns = !local_slurmd_running(&c, l->nodes[i].name) ? (busy ? "PREPARING" : "ERROR")
                 : slurm_state_registered(s)                 ? "RUNNING"
                 : busy                                      ? "UPDATING"
                                                             : "PREPARING";
        json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:s,s:s}", "instanceName",
                                             l->nodes[i].name, "nodePoolId", l->nodes[i].pool,
                                             "nodePoolType", "NODE_POOL_TYPE_COMPUTE", "nodeState",
                                             ns, "slurmState", s ? s : "unknown"));
    }
    const char *login = cluster_spec_login_pool(spec);
    const json_t *lp = login ? cluster_spec_pool(spec, login) : NULL;
    int nlogin = lp ? (int)json_integer_value(
                          json_object_get(json_object_get(lp, "scalingSpec"), "minNodeCount"))
                    : 0;
    for (int k = 0; k < nlogin; k++) {
        char name[64];
        snprintf(name, sizeof(name), "%s-%s-%d", id, login, k);
        /* the login node is this host with the cluster's environment */
        const char *ns = have && local_munged_running(&c) && local_ctld_running(&c) ? "RUNNING"
                         : busy                                                     ? "PREPARING"
                                                                                    : "ERROR";
        json_array_append_new(out,
                              json_pack("{s:s,s:s,s:s,s:s,s:s}", "instanceName", name, "nodePoolId",
                                        login, "nodePoolType", "NODE_POOL_TYPE_LOGIN", "nodeState",
                                        ns, "slurmState", "n/a"));
    }
    json_decref(st);
    free(l);
    return out;
}

static char *local_env(struct provider *p, const char *id, mtc_error_t *err)
{
    struct lc c;
    char *s = NULL;
    if (local_lc_init(&c, p, id, err) < 0)
        return NULL;
    if (!mtc_path_exists(c.conf)) {
        errno = ENOENT;
        errprintf(err, "cluster %s has no slurm.conf (not created?)", id);
        return NULL;
    }
    if (asprintf(&s,
                 "export SLURM_CONF='%s'\n"
                 "export MTC_CLUSTER='%s'\n"
                 "export MTC_CLUSTER_DIR='%s'\n"
                 "export MTC_CLUSTER_HOME='%s/home'\n"
                 "# munge and unmunge need: --socket=%s\n"
                 "export MTC_MUNGE_SOCKET='%s'\n",
                 c.conf, id, c.dir, c.dir, c.munge_socket, c.munge_socket) < 0) {
        errprintf(err, "out of memory");
        return NULL;
    }
    return s;
}

const struct provider_ops provider_local_ops = {
    .kind = "local",
    .apply = local_apply,
    .delete_ = local_delete,
    .nodes = local_nodes,
    .supervise = local_supervise,
    .env = local_env,
    .node_action = local_node_action,
    .node_check = local_node_check,
    .power = local_power,
};
