/* head daemons: the controller's daemons brought to a cluster's config and
 * kept running — munged, slurmdbd and MariaDB when accounting is on
 * (head_acct.c), slurmctld reconfigured or restarted as the change needs —
 * for both providers' apply and supervise (head.h). */
#include "provider/head.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "slurm/slurm.h"

/* The controller's daemons running the config of sha for names (head.h). */
int head_controller_converge(const struct head *c, struct head_applied *a, const char *sha,
                             const char *names, int slurmds, provider_progress_fn progress,
                             void *arg, mtc_error_t *err)
{
    if (!head_munged_running(c)) {
        head_say(progress, arg, "starting munged");
        if (head_munged_start(c, err) < 0)
            return -1;
    }
    /* slurmdbd before slurmctld, which registers with it at start */
    if (head_acct_start(c, progress, arg, err) < 0)
        return -1;
    pid_t ctld = head_ctld_running(c);
    int changed = strcmp(a->sha, sha) != 0, reconfigure = 0;
    char flag[PLEN];
    int acct_changed = mtc_path_exists(head_path(c, flag, "db/ctld-restart"));
    if (ctld && changed) {
        if (strcmp(a->nodes, names) == 0 && !acct_changed) {
            head_say(progress, arg, "reconfiguring slurmctld");
            if (slurm_ctld_wait(c->conf, CTLD_WAIT_MS) < 0 || slurm_reconfigure(c->conf, err) < 0)
                return -1;
        } else {
            /* Slurm 22.05 learns of added, removed or elastic nodes (and
             * accounting turned on or off) only at start; a clean stop saves
             * the job queue in StateSaveLocation */
            head_say(progress, arg, "restarting slurmctld for the new %s",
                     acct_changed ? "accounting" : "node set");
            head_stop_pidfile(c, "slurmctld", ctld);
            ctld = 0;
        }
    }
    if (!ctld) {
        head_say(progress, arg, "starting slurmctld");
        if (head_ctld_start(c, err) < 0)
            return -1;
        reconfigure = changed && slurmds;
    } else if (slurm_ctld_wait(c->conf, CTLD_WAIT_MS) < 0) {
        return errprintf(err, "slurmctld does not answer (see %s/log/slurmctld.log)", c->dir);
    }
    /* running slurmds re-read slurm.conf to learn the new node list */
    if (reconfigure && slurm_reconfigure(c->conf, err) < 0)
        return -1;
    unlink(flag);
    snprintf(a->sha, sizeof(a->sha), "%s", sha);
    snprintf(a->nodes, sizeof(a->nodes), "%s", names);
    return 0;
}

int head_supervise_munged(const struct head *c, provider_event_fn ev, void *arg, mtc_error_t *err)
{
    if (head_munged_running(c))
        return 0;
    if (head_munged_start(c, err) < 0)
        return -1;
    if (ev)
        ev(arg, "MUNGED_RESTART", NULL, "munged was not running; restarted");
    return 0;
}

/* The controller's part of both providers' supervise (head.h). */
int head_supervise(const struct head *c, provider_event_fn ev, void *arg, int *ctld_restarted,
                   mtc_error_t *err)
{
    *ctld_restarted = 0;
    if (head_supervise_munged(c, ev, arg, err) < 0)
        return -1;
    if (head_acct_supervise(c, ev, arg, err) < 0)
        return -1;
    if (!head_ctld_running(c)) {
        if (head_ctld_start(c, err) < 0)
            return -1;
        if (ev)
            ev(arg, "SLURMCTLD_RESTART", NULL,
               "slurmctld was not running; restarted with saved state");
        *ctld_restarted = 1;
    }
    return 0;
}

void head_supervise_end(const struct head *c, int ctld_restarted)
{
    mtc_error_t e2;
    if (ctld_restarted && slurm_reconfigure(c->conf, &e2) < 0)
        log_msg(LOG_WARNING, "cluster %s: %s", c->id, e2.text);
}
