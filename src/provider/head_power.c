/* head_power: elastic nodes' share of the cluster head (head.h), for both
 * providers. Nodes min..max-1 of a pool are State=CLOUD; Slurm's power
 * saving runs mtc-power through the etc/power-*.sh wrappers written here,
 * with power.json beside slurm.conf saying how to reach mtcd; mtcd calls
 * provider_power. run/power-<node>.on marks a node that is on. */
#include "provider/head.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "slurm/slurm.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* the wrappers slurm.conf names, in the order of struct slurm_power's programs */
static const struct {
    const char *file, *action;
} programs[] = {{"etc/power-suspend.sh", "suspend"},
                {"etc/power-resume.sh", "resume"},
                {"etc/power-resume-fail.sh", "resume-fail"}};

int head_power_is_on(const struct head *c, const char *node)
{
    char path[PLEN];
    return mtc_path_exists(head_path(c, path, "run/power-%s.on", node));
}

int head_power_mark(const struct head *c, const char *node, int on, mtc_error_t *err)
{
    char path[PLEN];
    head_path(c, path, "run/power-%s.on", node);
    if (on ? mtc_write_file_fmt(path, 0644, "on\n") < 0 : unlink(path) < 0 && errno != ENOENT)
        return errprintf(err, "%s: %s", path, strerror(errno));
    return 0;
}

/* Power saving's times over the elastic pools: the shortest SuspendTime
 * (-1 only when every pool says never) and the longest ResumeTimeout
 * (slurm.conf has one of each; docs/design-notes.md). */
static void power_times(const json_t *spec, struct slurm_power *pw)
{
    int suspend = -1, resume = 0;
    size_t i;
    json_t *pool;
    json_array_foreach(json_object_get(spec, "nodePools"), i, pool)
    {
        const json_t *sc = json_object_get(pool, "scalingSpec");
        json_t *st = json_object_get(sc, "suspendTimeSeconds");
        json_t *rt = json_object_get(sc, "resumeTimeoutSeconds");
        if (!st || json_integer_value(json_object_get(sc, "maxNodeCount")) <=
                       json_integer_value(json_object_get(sc, "minNodeCount")))
            continue; /* a fixed pool */
        int s = (int)json_integer_value(st), r = (int)json_integer_value(rt);
        if (s > 0 && (suspend < 0 || s < suspend))
            suspend = s;
        if (r > resume)
            resume = r;
    }
    pw->suspend_time = suspend;
    pw->resume_timeout = resume;
}

/* power.token (0600): the programs' node token, minted through the provider's
 * identity when missing; "" into path when there is none to mint (mtcd's
 * unix socket then takes them as its owner). */
static int power_token(const struct provider *p, const struct head *c, char *path, mtc_error_t *err)
{
    head_path(c, path, "power.token");
    if (mtc_path_exists(path))
        return 0;
    if (!p->identity.node_token) {
        *path = '\0';
        return 0;
    }
    char token[128];
    if (p->identity.node_token(p->identity.arg, c->id, PROVIDER_POWER_PRINCIPAL, token,
                               sizeof(token)) < 0)
        return errprintf(err, "cannot mint the power programs' token for cluster %s", c->id);
    int rc = mtc_write_file_atomic(path, token, strlen(token), 0600);
    explicit_bzero(token, sizeof(token));
    if (rc < 0)
        return errprintf(err, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

int head_power_setup(const struct provider *p, const struct head *c, const json_t *spec,
                     int suspend_timeout, struct slurm_layout *sl, mtc_error_t *err)
{
    static char progs[3][PLEN]; /* slurm.conf is rendered before the next call */
    int any = 0;
    for (size_t i = 0; i < sl->nnodes; i++)
        any |= sl->nodes[i].cloud;
    if (!any)
        return 0;
    if (!p->power)
        return errprintf(err, "elastic node pools (maxNodeCount > minNodeCount) need mtc-power "
                              "next to mtcd; none was found");
    char path[PLEN], token[PLEN], sock[PLEN], project[64] = "local", location[64] = "local";
    if (p->identity.parent && p->identity.parent(p->identity.arg, c->id, project, location) < 0)
        return errprintf(err, "cluster %s: unknown to mtcd's store", c->id);
    if (power_token(p, c, token, err) < 0)
        return -1;
    snprintf(sock, sizeof(sock), "%s/mtcd.sock", p->home);
    /* slurmctld runs the programs with an almost empty environment: all they
     * need is in this file (0600: it names the token) */
    json_t *cfg = json_pack("{s:s, s:s, s:s, s:s}", "clusterId", c->id, "project", project,
                            "location", location, "socket", sock);
    if (cfg && *token)
        json_object_set_new(cfg, "tokenFile", json_string(token));
    if (head_json_save(head_path(c, path, "power.json"), cfg, 0600, err) < 0)
        return -1;
    for (size_t i = 0; i < 3; i++) {
        char text[4 * PLEN];
        snprintf(text, sizeof(text),
                 "#!/bin/sh\n# generated by mtc: Slurm's power saving for cluster %s "
                 "(docs/clusters.md)\nexec '%s' --config '%s/power.json' %s \"$@\" "
                 ">>'%s/log/power.log' 2>&1\n",
                 c->id, p->power, c->dir, programs[i].action, c->dir);
        head_path(c, progs[i], "%s", programs[i].file);
        if (mtc_write_if_changed(progs[i], text, err) < 0)
            return -1;
        if (chmod(progs[i], 0755) < 0)
            return errprintf(err, "chmod %s: %s", progs[i], strerror(errno));
    }
    sl->power.suspend_program = progs[0];
    sl->power.resume_program = progs[1];
    sl->power.resume_fail_program = progs[2];
    power_times(spec, &sl->power);
    /* Slurm keeps a suspended node POWERING_DOWN (idle%) this long whatever
     * the program does */
    sl->power.suspend_timeout = suspend_timeout;
    return 0;
}

int head_power_refuse(const struct head *c, const struct head_power_change *ch, size_t n,
                      mtc_error_t *err)
{
    /* an elastic node that is on runs (or is about to run) jobs: removing it
     * would kill them, so a lowered max waits until Slurm powers it down */
    for (size_t i = 0; i < n; i++)
        if (ch[i].was_cloud && ch[i].existed && !ch[i].stays && head_power_is_on(c, ch[i].name)) {
            errno = EBUSY;
            return errprintf(err,
                             "node %s is powered up; lower maxNodeCount once Slurm has powered "
                             "it down (idle~)",
                             ch[i].name);
        }
    /* a static node that becomes elastic (a lowered min) is powered down by
     * the update: only when it runs no job */
    int ctld = head_ctld_running(c) > 0;
    for (size_t i = 0; i < n && ctld; i++) {
        if (!ch[i].is_cloud || !ch[i].stays || !ch[i].existed || ch[i].was_cloud)
            continue;
        mtc_error_t e2;
        json_t *jobs = slurm_node_jobs(c->conf, ch[i].name, &e2);
        size_t nj = json_array_size(jobs);
        json_decref(jobs);
        if (!jobs)
            return errprintf(err, "node %s: %s", ch[i].name, e2.text);
        if (nj) {
            errno = EBUSY;
            return errprintf(err, "node %s runs %zu job(s); lower minNodeCount once it is idle",
                             ch[i].name, nj);
        }
    }
    return 0;
}
