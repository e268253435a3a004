/* sbatch: a resolved run onto a Slurm cluster — the checks said before
 * anything is submitted (inputs, the partition's nodes, the batch), the
 * experiment directory, sbatch — shared by mtcd's
 * trainingJobs and anything else that submits a recipe. */
#include "experiment/experiment.h"
#include "recipes/recipes.h"
#include "slurm/slurm.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How old the partitions a submission checks its node count against may be
 * (slurm_partitions_cached; a change of slurm.conf drops them sooner). */
#define PARTITIONS_MAX_AGE_MS 60000

static void partition_list(const json_t *parts, char *buf, size_t len)
{
    size_t used = 0;
    const char *k;
    json_t *v;
    buf[0] = '\0';
    json_object_foreach((json_t *)parts, k, v)
    {
        int w = snprintf(buf + used, len - used, "%s%s (%d nodes%s)", used ? ", " : "", k,
                         (int)json_integer_value(json_object_get(v, "nodes")),
                         json_is_true(json_object_get(v, "default")) ? ", default" : "");
        if (w < 0 || used + (size_t)w >= len)
            break;
        used += (size_t)w;
    }
}

/* nodeCount within the node count of the partition the job goes to (its
 * own, else the default one). 0/-1 + err. */
static int check_nodes(const json_t *cfg, const json_t *parts, mtc_error_t *err)
{
    const char *pname = json_string_value(json_object_get(cfg, "partition"));
    json_t *pi = NULL, *v;
    const char *k;
    if (pname) {
        pi = json_object_get(parts, pname);
    } else {
        json_object_foreach((json_t *)parts, k, v)
        {
            if (json_is_true(json_object_get(v, "default")))
                pi = v, pname = k;
        }
    }
    int have = pi ? (int)json_integer_value(json_object_get(pi, "nodes")) : 0;
    int want = (int)json_integer_value(json_object_get(cfg, "nodes"));
    if (pi && want > have)
        return errprintf(err, "nodeCount: %d: partition %s has %d node%s; ask for at most %d", want,
                         pname, have, have == 1 ? "" : "s", have);
    return 0;
}

/* sbatch's complaint, its first "error:" line (else its first line), into buf. */
static void first_error(const char *out, char *buf, size_t len)
{
    const char *p = out ? strstr(out, "error:") : NULL;
    if (p)
        while (p > out && p[-1] != '\n')
            p--;
    p = p ? p : out ? out : "";
    snprintf(buf, len, "%.*s", (int)strcspn(p, "\n"), p);
    if (!*buf)
        snprintf(buf, len, "sbatch failed");
}

/* exp_create, exp_set_job and exp_remove as the job's user (when given). */
static int create_as(const struct mtc_user *as, json_t *cfg, const char *script, mtc_error_t *err)
{
    struct mtc_fsid id;
    mtc_fsid_enter(as, &id);
    int rc = exp_create_submitting(cfg, script, err); /* exp_set_job makes it durable */
    mtc_fsid_leave(&id);
    return rc;
}

static int set_job_as(const struct mtc_user *as, json_t *cfg, const char *job, mtc_error_t *err)
{
    struct mtc_fsid id;
    mtc_fsid_enter(as, &id);
    int rc = exp_set_job(cfg, job, err);
    mtc_fsid_leave(&id);
    return rc;
}

static void remove_as(const struct mtc_user *as, const json_t *cfg)
{
    struct mtc_fsid id;
    mtc_fsid_enter(as, &id);
    exp_remove(cfg);
    mtc_fsid_leave(&id);
}

int recipe_submit(json_t *cfg, const char *script, const char *conf, const json_t *secrets,
                  const struct mtc_user *as, mtc_error_t *err)
{
    struct mtc_fsid id;
    mtc_fsid_enter(as, &id); /* the user's inputs: what the user may read */
    int ok = recipe_check_inputs(cfg, err);
    mtc_fsid_leave(&id);
    if (ok < 0)
        return -1;
    mtc_error_t e2 = {""};
    /* the partitions change with the cluster's configuration only: the
     * answer of the last minute, unless it would refuse the job */
    json_t *parts = slurm_partitions_cached(conf, PARTITIONS_MAX_AGE_MS, &e2);
    if (parts && check_nodes(cfg, parts, err) < 0) {
        json_decref(parts);
        parts = slurm_partitions(conf, &e2);
    }
    if (!parts)
        return errprintf(err, "no Slurm cluster answers (%s)", e2.text);
    if (check_nodes(cfg, parts, err) < 0 || recipe_check_batch(cfg, err) < 0 ||
        create_as(as, cfg, script, err) < 0) {
        json_decref(parts);
        return -1;
    }
    char spath[PATH_MAX + 16], job[32], *out = NULL;
    snprintf(spath, sizeof(spath), "%s/sbatch.sh",
             json_string_value(json_object_get(cfg, "taskDir")));
    char *env[8] = {NULL};
    int nenv = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)secrets, k, v)
    {
        if (nenv < 7 && asprintf(&env[nenv], "%s=%s", k, json_string_value(v)) >= 0)
            nenv++;
    }
    int rc = slurm_submit_env(conf, env, as, spath, job, &out);
    for (int i = 0; i < nenv; i++) {
        explicit_bzero(env[i], strlen(env[i]));
        free(env[i]);
    }
    if (rc < 0) {
        char first[256], list[200];
        json_t *now = slurm_partitions(conf, &e2); /* the list as Slurm has it now */
        if (now) {
            json_decref(parts);
            parts = now;
        }
        first_error(out, first, sizeof(first));
        partition_list(parts, list, sizeof(list));
        int bad_part = out && strstr(out, "partition");
        errprintf(err, "submission failed: %s%s%s", first, bad_part ? "; partitions: " : "",
                  bad_part ? list : "");
        free(out);
        json_decref(parts);
        remove_as(as, cfg);
        errno = EIO;
        return -1;
    }
    free(out);
    json_decref(parts);
    if (set_job_as(as, cfg, job, err) < 0) {
        /* the job runs but its record is incomplete: stop it rather than orphan it */
        slurm_job_cancel(conf, job, NULL);
        remove_as(as, cfg);
        return -1;
    }
    return 0;
}
