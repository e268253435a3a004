/* local_power: elastic nodes of the local provider. Nodes min..max-1 of a
 * pool are State=CLOUD; Slurm's power saving runs mtc-power (head_power.c
 * writes its wrappers), mtcd calls provider_power, and this file starts or
 * stops the node's daemons. run/power-<node>.on marks a node that is on:
 * apply and supervise start only the daemons of static nodes and marked ones. */
#include "provider/local.h"
#include "spank/container.h"

#include <errno.h>
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
                                    "run/slurm/slurmd-%s.pid"};
    for (size_t i = 0; i < 3; i++)
        unlink(head_path(c, path, pidfiles[i], node));
    if (container_sweep(head_path(c, path, "nodes/%s/containers", node), err) < 0)
        return -1;
    for (size_t i = 0; i < sizeof(clear) / sizeof(clear[0]); i++)
        if (mtc_rm_rf(head_path(c, path, clear[i], node)) < 0 && errno != ENOENT)
            return errprintf(err, "cannot clear %s: %s", path, strerror(errno));
    return 0;
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
    /* on: the start path of a node action's restart, slurmd booting now */
    if (on && ((rc = head_power_mark(&c, n->name, 1, err)) < 0 ||
               (rc = local_node_up(p, &c, spec, n, 1, err)) < 0)) {
        /* a machine that did not boot stays off: nothing for supervise to
         * restart; Slurm marks it DOWN after ResumeTimeout */
        mtc_error_t e2;
        if (head_power_mark(&c, n->name, 0, &e2) < 0 || power_off(&c, n->name, &e2) < 0)
            log_msg(LOG_WARNING, "cluster %s: %s", id, e2.text);
    } else if (!on) {
        rc = head_power_mark(&c, n->name, 0, err) < 0 ? -1 : power_off(&c, n->name, err);
    }
    head_unlock(&c);
    free(l);
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
