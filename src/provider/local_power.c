/* local_power: elastic nodes of the local provider. Nodes min..max-1 of a
 * pool are State=CLOUD; Slurm's power saving runs mtc-power (head_power.c
 * writes its wrappers), mtcd calls provider_power, and this file starts or
 * stops the node's daemons. run/power-<node>.on marks a node that is on:
 * apply and supervise start only the daemons of static nodes and marked ones.
 * Supervise also watches a powered-up node until Slurm has taken its
 * registration (local_power_watch). The port of a node that is off stays
 * held by mtcd for its cluster (mtc_port_hold), so no other cluster's pick
 * lands on it before Slurm resumes the node; the hold ends once the node's
 * slurmd listens beside it. */
#include "provider/local.h"
#include "spank/container.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "slurm/slurm.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* Everything of a node that is off: its processes and its runtime state
 * (the emulated hardware, its instance id and agent token are kept). */
static int power_off(const struct head *c, const char *node, mtc_error_t *err)
{
    static const char *const clear[] = {"spool/%s", "tmp/%s", "nodes/%s/agent"};
    char path[PLEN];
    if (local_node_kill(c, node, err) < 0)
        return -1;
    const char *const pidfiles[] = {"run/slurmd-%s.pid", "run/agent-%s.pid",
                                    "run/slurm/slurmd-%s.pid", "run/power-%s.watch"};
    for (size_t i = 0; i < sizeof(pidfiles) / sizeof(pidfiles[0]); i++)
        unlink(head_path(c, path, pidfiles[i], node));
    if (container_sweep(head_path(c, path, "nodes/%s/containers", node), err) < 0)
        return -1;
    for (size_t i = 0; i < sizeof(clear) / sizeof(clear[0]); i++)
        if (mtc_rm_rf(head_path(c, path, clear[i], node)) < 0 && errno != ENOENT)
            return errprintf(err, "cannot clear %s: %s", path, strerror(errno));
    return 0;
}

/* Node n is powering up: its port held by this process until its slurmd
 * listens beside the hold (held first where it was not: the hold is the
 * probe); -1 + err naming the port when something else has it (taken while
 * no mtcd held it). A node whose slurmd runs already: nothing to hold. */
static int port_hold_for(const struct head *c, const struct lnode *n, mtc_error_t *err)
{
    if (head_slurmd_running(c, n->name) || mtc_port_hold(n->port, c->id) == 0)
        return 0;
    return errprintf(err,
                     "%s cannot power up: its slurmd's port %d is in use: %s (something else "
                     "took it while it was off; `mtc cluster update %s` gives it a new one)",
                     n->name, n->port, strerror(errno), c->id);
}

void local_power_ports(const struct head *c, const struct layout *l, const struct layout *old)
{
    for (size_t i = 0; i < l->nnodes; i++) {
        const struct lnode *n = &l->nodes[i];
        if (n->cloud && !head_power_is_on(c, n->name))
            mtc_port_hold(n->port, c->id); /* (taken: power-up says so) */
        else
            mtc_port_release(n->port, c->id);
    }
    for (size_t i = 0; old && i < old->nnodes; i++) {
        const struct lnode *o = &old->nodes[i], *n = local_layout_find(l, o->name);
        if (!n || n->port != o->port)
            mtc_port_release(o->port, c->id);
    }
}

int local_power(struct provider *p, const char *id, const json_t *spec, const char *node, int on,
                mtc_error_t *err)
{
    struct head c;
    if (head_init(&c, p, id, err) < 0)
        return -1;
    const struct lnode *n;
    struct layout *l = local_layout_node(&c, node, "elastic node", &n, err);
    if (l && !n->cloud) {
        errno = EINVAL;
        errprintf(err, "cluster %s has no elastic node \"%.64s\"", id, node);
        free(l);
        l = NULL;
    }
    if (!l)
        return -1;
    int rc = -1;
    /* the lock keeps supervise (and an apply) from acting on a half-powered node */
    if (head_lock(&c, 1) < 0) {
        errprintf(err, "cannot lock %s: %s", c.dir, strerror(errno));
        free(l);
        return -1;
    }
    log_msg(LOG_NOTICE, "cluster %s: powering %s %s", id, n->name, on ? "up" : "down");
    /* on: the start path of a node action's restart, slurmd booting now;
     * supervise watches it afresh until it registers */
    char watch[PLEN];
    unlink(head_path(&c, watch, "run/power-%s.watch", n->name));
    if (on && ((rc = port_hold_for(&c, n, err)) < 0 ||
               (rc = head_power_mark(&c, n->name, 1, err)) < 0 ||
               (rc = local_node_up(p, &c, spec, n, 1, err)) < 0)) {
        /* a machine that did not boot stays off: nothing for supervise to
         * restart; Slurm marks it DOWN after ResumeTimeout */
        mtc_error_t e2;
        if (head_power_mark(&c, n->name, 0, &e2) < 0 || power_off(&c, n->name, &e2) < 0)
            log_msg(LOG_WARNING, "cluster %s: %s", id, e2.text);
        mtc_port_hold(n->port, c.id);
    } else if (on) {
        mtc_port_release(n->port, c.id); /* its slurmd listens there now */
    } else {
        rc = head_power_mark(&c, n->name, 0, err) < 0 ? -1 : power_off(&c, n->name, err);
        mtc_port_hold(n->port, c.id); /* (its slurmd is gone: nothing else binds it) */
    }
    head_unlock(&c);
    free(l);
    return rc;
}

/* ---- the registration watch ---- */

/* run/power-<node>.watch: how far the watch of a powered-up node got */
enum watch_stage { WATCH_START, WATCH_HUP, WATCH_UP };
static const char *const watch_names[] = {"start", "hup", "up"};

static void watch_read(const struct head *c, const char *node, enum watch_stage *stage,
                       int *restarts)
{
    char path[PLEN], name[16] = "";
    *stage = WATCH_START;
    *restarts = 0;
    char *t = mtc_read_file(head_path(c, path, "run/power-%s.watch", node), NULL);
    if (t && sscanf(t, "%15s %d", name, restarts) >= 1)
        for (size_t i = 0; i < sizeof(watch_names) / sizeof(watch_names[0]); i++)
            if (strcmp(name, watch_names[i]) == 0)
                *stage = (enum watch_stage)i;
    free(t);
}

static int watch_write(const struct head *c, const char *node, enum watch_stage stage, int restarts,
                       mtc_error_t *err)
{
    char path[PLEN];
    if (mtc_write_file_fmt(head_path(c, path, "run/power-%s.watch", node), 0644, "%s %d\n",
                           watch_names[stage], restarts) < 0)
        return errprintf(err, "%s: %s", path, strerror(errno));
    return 0;
}

/* ms since node's slurmd was started (its recorded pid file's mtime), or -1 */
static int64_t slurmd_age_ms(const struct head *c, const char *node)
{
    char path[PLEN];
    struct stat st;
    if (stat(head_path(c, path, "run/slurmd-%s.pid", node), &st) < 0)
        return -1;
    return mtc_now_ms() - ((int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000);
}

/* Restart the slurmd of node (booting now: a new boot time for Slurm). */
static int watch_restart(const struct head *c, const char *node, pid_t pid, int restarts,
                         provider_event_fn ev, void *arg, mtc_error_t *err)
{
    char msg[256];
    mtc_pid_stop(pid, 2000);
    if (local_slurmd_start(c, node, 1, err) < 0 ||
        watch_write(c, node, WATCH_START, restarts, err) < 0 ||
        local_slurmd_wait_up(c, node, err) < 0)
        return -1;
    snprintf(msg, sizeof(msg),
             "slurmd of %s ran %d s without Slurm taking its registration (still powering "
             "up); restarted (%d of %d)",
             node, LOCAL_WATCH_RESTART_S, restarts, LOCAL_WATCH_RESTARTS);
    log_msg(LOG_WARNING, "cluster %s: %s", c->id, msg);
    if (ev)
        ev(arg, "SLURMD_RESTART", node, msg);
    return 0;
}

int local_power_watch(const struct head *c, const struct layout *l, provider_event_fn ev, void *arg,
                      mtc_error_t *err)
{
    json_t *states = NULL;
    int rc = 0;
    for (size_t i = 0; i < l->nnodes && rc == 0; i++) {
        const char *node = l->nodes[i].name;
        enum watch_stage stage;
        int restarts;
        pid_t pid;
        if (!l->nodes[i].cloud || !head_power_is_on(c, node) ||
            !(pid = head_slurmd_running(c, node)))
            continue;
        watch_read(c, node, &stage, &restarts);
        int64_t age = slurmd_age_ms(c, node);
        if (stage == WATCH_UP || age < LOCAL_WATCH_NUDGE_S * 1000)
            continue; /* (a slurmd registers within a few seconds: one look at 5 s) */
        mtc_error_t e2;
        if (!states && !(states = slurm_node_states(c->conf, &e2)))
            return 0; /* slurmctld busy or restarting: the next pass looks again */
        const char *st = json_string_value(json_object_get(states, node));
        if (!st)
            continue;
        if (!strchr(st, '#')) { /* Slurm took it (or gave up on it: no longer powering up) */
            rc = watch_write(c, node, WATCH_UP, restarts, err);
        } else if (stage == WATCH_START && age >= LOCAL_WATCH_NUDGE_S * 1000) {
            /* slurmd's own way first: SIGHUP re-reads its config and sends
             * its registration again (one lost, or sent while slurmctld was
             * not yet listening) */
            log_msg(LOG_NOTICE,
                    "cluster %s: %s still powering up %d s after its slurmd started; "
                    "asking slurmd to register again",
                    c->id, node, (int)(age / 1000));
            if (kill(pid, SIGHUP) < 0 && errno != ESRCH)
                rc = errprintf(err, "SIGHUP to slurmd of %s: %s", node, strerror(errno));
            else
                rc = watch_write(c, node, WATCH_HUP, restarts, err);
        } else if (stage == WATCH_HUP && age >= LOCAL_WATCH_RESTART_S * 1000 &&
                   restarts < LOCAL_WATCH_RESTARTS) {
            /* a registration Slurm does not take (the boot time it carries
             * is before the resume request) is refused again at each
             * re-registration: only a new slurmd reports a new boot */
            rc = watch_restart(c, node, pid, restarts + 1, ev, arg, err);
        }
        /* past the restarts: Slurm ends it at ResumeTimeout (DOWN, the job
         * requeued, ResumeFailProgram: NODE_RESUME_FAILED) */
    }
    json_decref(states);
    return rc;
}

int local_power_plan(const struct head *c, const struct layout *old, const struct layout *l,
                     provider_progress_fn progress, void *arg, mtc_error_t *err)
{
    struct head_power_change *ch = calloc(old->nnodes + l->nnodes + 1, sizeof(*ch));
    if (!ch)
        return errprintf(err, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < old->nnodes; i++) {
        const struct lnode *o = &old->nodes[i], *n = local_layout_find(l, o->name);
        ch[k++] = (struct head_power_change){o->name, o->cloud, n && n->cloud, 1, n != NULL};
    }
    for (size_t i = 0; i < l->nnodes; i++)
        if (!local_layout_find(old, l->nodes[i].name))
            ch[k++] = (struct head_power_change){l->nodes[i].name, 0, l->nodes[i].cloud, 0, 1};
    int rc = head_power_refuse(c, ch, k, err);
    free(ch);
    if (rc < 0)
        return -1;
    for (size_t i = 0; i < l->nnodes; i++) {
        const struct lnode *n = &l->nodes[i], *o = local_layout_find(old, n->name);
        if (n->cloud && o && !o->cloud) {
            head_say(progress, arg, "powering down %s (now elastic)", n->name);
            if (head_power_mark(c, n->name, 0, err) < 0 || power_off(c, n->name, err) < 0)
                return -1;
        } else if (!n->cloud && head_power_mark(c, n->name, 0, err) < 0) {
            return -1; /* a static node is always on: no marker */
        }
    }
    return 0;
}
