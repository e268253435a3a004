/* runas: the Unix user a training job runs as (its config's runAs, set when
 * mtcd as root submitted it for a user), and root's file accesses to that
 * job's directories made as that user. */
#include "jobs/jobs.h"

#include <stdio.h>
#include <string.h>

int jobs_run_as(const json_t *cfg, struct mtc_user *u)
{
    const json_t *a = json_object_get(cfg, "runAs");
    const char *name = json_string_value(json_object_get(a, "user"));
    json_t *uid = json_object_get(a, "uid"), *gid = json_object_get(a, "gid");
    if (!name || !json_is_integer(uid) || !json_is_integer(gid) || json_integer_value(uid) <= 0 ||
        json_integer_value(gid) < 0)
        return -1;
    memset(u, 0, sizeof(*u));
    snprintf(u->name, sizeof(u->name), "%s", name);
    u->uid = (uid_t)json_integer_value(uid);
    u->gid = (gid_t)json_integer_value(gid);
    return 0;
}

void jobs_fs_enter(const json_t *cfg, struct mtc_fsid *saved)
{
    struct mtc_user u;
    saved->on = 0;
    if (jobs_run_as(cfg, &u) == 0)
        mtc_fsid_enter(&u, saved);
}
