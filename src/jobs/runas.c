/* runas: root's file accesses to a training job's directories made as the
 * user it runs as (recipe_run_as: its config's runAs, set when mtcd as root
 * submitted it for a user). */
#include "jobs/jobs.h"
#include "recipes/recipes.h"

#include <stdio.h>
#include <string.h>

void jobs_fs_enter(const json_t *cfg, struct mtc_fsid *saved)
{
    struct mtc_user u;
    saved->on = 0;
    if (recipe_run_as(cfg, &u) == 0)
        mtc_fsid_enter(&u, saved);
}
