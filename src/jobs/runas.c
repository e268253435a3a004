/* runas: root's file accesses to a training job's directories made as the
 * user it runs as (exp_run_as: its config's runAs, set when mtcd as root
 * submitted it for a user), and whose job it is for the events about it. */
#include "experiment/experiment.h"
#include "jobs/jobs.h"
#include "recipes/recipes.h"
#include "store/store.h"

#include <stdio.h>
#include <string.h>

void jobs_fs_enter(const json_t *cfg, struct mtc_fsid *saved)
{
    struct mtc_user u;
    saved->on = 0;
    if (exp_run_as(cfg, &u) == 0)
        mtc_fsid_enter(&u, saved);
}

const char *jobs_owner(const json_t *cfg, char owner[33])
{
    struct mtc_user u;
    snprintf(owner, 33, "%s", exp_run_as(cfg, &u) == 0 ? u.name : "");
    return owner;
}

int jobs_event(struct store *st, const struct store_job *j, const char *type, const char *brief,
               const char *message)
{
    char owner[33];
    return store_event_add_job(st, j->cluster_id, type, jobs_owner(j->config, owner), brief,
                               message);
}
