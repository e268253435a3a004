/* head: the cluster head both providers build on (head.h) — the cluster's
 * directory and lock, munged and slurmctld by pid file, slurm.conf, the
 * nodes' registration, the controller's supervision and the delete. */
#include "provider/head.h"
#include "spank/container.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "slurm/slurm.h"

/* Paths go into fixed buffers; overlong ones are rejected up front
 * (provider_cluster_dir), so truncation warnings are noise here. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

const char *head_path(const struct head *c, char *buf, const char *fmt, ...)
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
void head_say(provider_progress_fn progress, void *arg, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    log_vformat(LOG_INFO, msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (progress)
        progress(arg, msg);
}

int head_init(struct head *c, struct provider *p, const char *id, mtc_error_t *err)
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
int head_lock(struct head *c, int wait)
{
    char path[PLEN];
    c->lockfd = open(head_path(c, path, ".lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (c->lockfd < 0)
        return -1;
    if (flock(c->lockfd, wait ? LOCK_EX : LOCK_EX | LOCK_NB) < 0) {
        close(c->lockfd);
        c->lockfd = -1;
        return -1;
    }
    return 0;
}

int head_lock_node(struct head *c, const char *node)
{
    char path[PLEN];
    c->lockfd = open(head_path(c, path, ".lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (c->lockfd < 0)
        return -1;
    int fd = -1;
    if (flock(c->lockfd, LOCK_SH) == 0 &&
        (fd = open(head_path(c, path, ".lock.%s", node), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) >=
            0 &&
        flock(fd, LOCK_EX) == 0)
        return fd;
    int e = errno;
    if (fd >= 0)
        close(fd);
    head_unlock(c);
    errno = e;
    return -1;
}

void head_unlock_node(struct head *c, int fd)
{
    if (fd >= 0)
        close(fd);
    head_unlock(c);
}

void head_unlock(struct head *c)
{
    if (c->lockfd >= 0)
        close(c->lockfd);
    c->lockfd = -1;
}

/* The live pid recorded in run/<name>.pid whose argv has a (and b), else 0.
 * The argv check keeps a recycled pid from being taken for our daemon. When
 * the caller died between starting a daemon and recording its pid, the
 * daemon's own pid file (own, relative to the cluster dir) finds it — or,
 * before the daemon wrote that (or for one that writes none), its argv,
 * which a and b make this cluster's (they name its files): a restarted mtcd
 * must adopt it, never start a second one. */
pid_t head_running(const struct head *c, const char *name, const char *own, const char *a,
                   const char *b)
{
    char path[PLEN];
    pid_t pid = mtc_pid_read(head_path(c, path, "run/%s.pid", name));
    if (pid > 0 && mtc_pid_alive(pid) && mtc_cmdline_has(pid, a, b))
        return pid;
    pid = mtc_pid_read(head_path(c, path, "%s", own));
    if (!(pid > 0 && mtc_pid_alive(pid) && mtc_cmdline_has(pid, a, b)))
        pid = mtc_cmdline_find(a, b);
    if (pid > 0)
        mtc_write_file_fmt(head_path(c, path, "run/%s.pid", name), 0644, "%d\n", (int)pid);
    return pid;
}

int head_record_pid(const struct head *c, const char *name, pid_t pid)
{
    char path[PLEN];
    return mtc_write_file_fmt(head_path(c, path, "run/%s.pid", name), 0644, "%d\n", (int)pid);
}

static void munge_arg(const struct head *c, char *buf)
{
    snprintf(buf, PLEN, "--socket=%s", c->munge_socket);
}

pid_t head_munged_running(const struct head *c)
{
    char a[PLEN];
    munge_arg(c, a);
    return head_running(c, "munged", "munge/pid", a, NULL);
}

pid_t head_ctld_running(const struct head *c)
{
    /* "-i": slurmd's argv names the conf too (slurm_ctld_start's argv) */
    return head_running(c, "slurmctld", "run/slurm/slurmctld.pid", c->conf, "-i");
}

pid_t head_slurmd_running(const struct head *c, const char *node)
{
    char name[96], own[128];
    snprintf(name, sizeof(name), "slurmd-%s", node);
    snprintf(own, sizeof(own), "run/slurm/slurmd-%s.pid", node);
    return head_running(c, name, own, c->conf, node);
}

static int munge_key(const struct head *c, mtc_error_t *err)
{
    char path[PLEN];
    unsigned char key[1024];
    if (mtc_path_exists(head_path(c, path, "munge/key")))
        return 0;
    if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key))
        return errprintf(err, "getrandom: %s", strerror(errno));
    if (mtc_write_file_atomic(path, key, sizeof(key), 0400) < 0)
        return errprintf(err, "%s: %s", path, strerror(errno));
    return 0;
}

int head_munged_start(const struct head *c, mtc_error_t *err)
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
    pid_t pid = mtc_spawn(argv, NULL, head_path(c, path, "log/munged.out"));
    if (pid < 0)
        return errprintf(err, "cannot start munged: %s", strerror(errno));
    head_record_pid(c, "munged", pid);
    for (int64_t end = mtc_now_ms() + 10000; mtc_now_ms() < end; mtc_sleep_ms(50)) {
        if (mtc_path_exists(c->munge_socket))
            return 0;
        if (!mtc_pid_alive(pid))
            break;
    }
    return errprintf(err, "munged did not come up (see %s/munge/log)", c->dir);
}

int head_ctld_start(const struct head *c, mtc_error_t *err)
{
    char path[PLEN];
    pid_t pid = slurm_ctld_start(c->conf, head_path(c, path, "log/slurmctld.out"));
    if (pid < 0)
        return errprintf(err, "cannot start slurmctld: %s", strerror(errno));
    head_record_pid(c, "slurmctld", pid);
    for (int64_t end = mtc_now_ms() + CTLD_WAIT_MS; mtc_now_ms() < end; mtc_sleep_ms(100)) {
        if (slurm_ctld_up(c->conf))
            return 0;
        if (!mtc_pid_alive(pid)) /* a config error: fail now, not after the wait */
            return errprintf(err, "slurmctld exited at start (see %s/log/slurmctld.log)", c->dir);
    }
    return errprintf(err, "slurmctld did not answer within %d s (see %s/log/slurmctld.log)",
                     CTLD_WAIT_MS / 1000, c->dir);
}

void head_stop_pidfile(const struct head *c, const char *name, pid_t pid)
{
    char path[PLEN];
    if (pid > 0)
        mtc_pid_stop(pid, STOP_WAIT_MS);
    unlink(head_path(c, path, "run/%s.pid", name));
}
int head_make_dirs(const struct head *c, mtc_error_t *err)
{
    static const char *const sub[] = {"",     "state", "spool", "log", "run", "run/slurm",
                                      "home", "nodes", "etc",   "tmp", NULL};
    char path[PLEN];
    for (size_t i = 0; sub[i]; i++)
        if (mtc_mkdir_p(head_path(c, path, "%s", sub[i]), 0755) < 0)
            return errprintf(err, "mkdir %s: %s", path, strerror(errno));
    /* munged wants its socket directory enterable by everyone */
    if (mtc_mkdir_p(head_path(c, path, "munge"), 0755) < 0 || chmod(path, 0755) < 0)
        return errprintf(err, "mkdir %s: %s", path, strerror(errno));
    return 0;
}

/* A state file of either provider (head.h). */
int head_json_save(const char *path, json_t *j, mode_t mode, mtc_error_t *err)
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

/* mtc_write_if_changed of j's indented text (head.h). */
int head_json_write_if_changed(const char *path, json_t *j, mtc_error_t *err)
{
    char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
    json_decref(j);
    if (!text)
        return errprintf(err, "out of memory");
    int rc = mtc_write_if_changed(path, text, err);
    free(text);
    return rc;
}

/* Both providers' wait for a whole cluster to register (head.h). */
int head_wait_registered(const struct head *c, const char *const *names, const char *const *hosts,
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

/* Both providers' slurm.conf and gres.conf (head.h). */
int head_conf_write(const struct head *c, const json_t *spec, const struct slurm_layout *sl,
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
    if (plug && (mtc_mkdir_p(head_path(c, path, "etc"), 0755) < 0 ||
                 mtc_write_if_changed(head_path(c, path, "etc/plugstack.conf"), plug, err) < 0))
        goto out;
    /* a config Slurm would refuse never reaches the running daemons */
    if (slurm_conf_check(conf, head_path(c, path, "slurm.conf.check"), err) < 0 ||
        mtc_write_if_changed(head_path(c, path, "gres.conf"), gres, err) < 0 ||
        mtc_write_if_changed(c->conf, conf, err) < 0)
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

/* The delete of either provider: lock, stop, remove (head.h). */
int head_delete_with(struct provider *p, const char *id, head_stop_fn stop, mtc_error_t *err)
{
    struct head c;
    if (head_init(&c, p, id, err) < 0)
        return -1;
    if (!mtc_path_exists(c.dir))
        return 0;
    if (head_lock(&c, 1) < 0)
        return errprintf(err, "cannot lock %s: %s", c.dir, strerror(errno));
    int rc = stop(p, &c, err);
    /* with what containers left mounted under it (a sweep never crosses a
     * mount it could not remove) */
    if (rc == 0 && container_sweep(c.dir, err) < 0)
        rc = -1;
    head_unlock(&c);
    return rc;
}
int head_health_interval(const json_t *spec, int fallback)
{
    json_t *v = json_object_get(json_object_get(spec, "healthPolicy"), "slurmIntervalSeconds");
    return v ? (int)json_integer_value(v) : fallback;
}

/* agent.env's first lines, for both providers (head.h). */
void head_agent_env(char *buf, size_t len, const char *node, const char *conf,
                    const char *containers, const char *nvml_state)
{
    snprintf(buf, len,
             "# generated by mtc: the environment of this node's mtc-agent\n"
             "export MTC_NODE='%s'\nexport SLURM_CONF='%s'\nexport MTC_CONTAINERS='%s'\n",
             node, conf, containers);
    if (nvml_state)
        snprintf(buf + strlen(buf), len - strlen(buf), "export FAKE_NVML_STATE='%s'\n", nvml_state);
}

/* Both providers' wait for a node's new slurmd (head.h). */
int head_wait_new_slurmd(const struct head *c, const char *node, const char *host,
                         const char *old_start, mtc_error_t *err)
{
    char start[64] = "", state[128] = "";
    for (int64_t end = mtc_now_ms() + REGISTER_WAIT_MS;; mtc_sleep_ms(250)) {
        if (slurm_node_get(c->conf, node, "SlurmdStartTime", start, sizeof(start)) == 0 &&
            strcmp(start, old_start) != 0 && strcmp(start, "None") != 0 &&
            slurm_node_get(c->conf, node, "State", state, sizeof(state)) == 0) {
            /* scontrol spells it IDLE+DRAIN, DOWN+NOT_RESPONDING ...; the
             * compact form sinfo uses is what slurm_state_registered reads */
            for (char *s = state; *s; s++)
                *s = (char)tolower((unsigned char)*s);
            if (!strstr(state, "not_responding") && !strstr(state, "down") &&
                slurm_state_registered(state))
                return 0;
        }
        if (!host && !head_slurmd_running(c, node))
            return errprintf(err, "%s: slurmd exited at start (see %s/log/slurmd-%s.log)", node,
                             c->dir, node);
        if (mtc_now_ms() >= end) {
            errno = ETIMEDOUT;
            return errprintf(err, "%s: slurmd%s%s did not register within %d s (state %s)", node,
                             host ? " on " : "", host ? host : "", REGISTER_WAIT_MS / 1000,
                             state[0] ? state : "unknown");
        }
    }
}

/* The results of mtc-agent check for both providers (head.h). */
json_t *head_check_results(json_t *o)
{
    json_t *res = json_incref(json_object_get(o, "results"));
    json_decref(o);
    if (json_is_array(res))
        return res;
    json_decref(res);
    return NULL;
}
