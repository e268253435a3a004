/* remediate: the hardware-resilience controller. A node whose health fails
 * (mtc-agent report, Slurm says it is down, or a manual reportFaultyNodes) is
 * drained, its jobs requeued, then restarted → rebooted → reimaged → replaced
 * (escalating with the node's recent history) until its checks pass and it is
 * resumed — or the per-node limit is reached and it stays drained in ERROR.
 * Each node's remediation is its own persisted REMEDIATE operation, several
 * at once within the healthPolicy's limits (the rest wait QUEUED: remqueue.h);
 * every step is an event. */
#include "control/internal.h"
#include "control/remqueue.h"
#include "health/health.h"
#include "jobs/jobs.h"
#include "slurm/slurm.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Actions in escalation order: the name the provider and the history know
 * them by, and the event each one records. */
enum action_kind { ACT_RESTART, ACT_REBOOT, ACT_REIMAGE, ACT_REPLACE, N_ACTIONS };
static const struct action {
    const char *name;
    const char *event;
    int kills; /* every process of the node dies (a power cycle) */
} actions[] = {
    [ACT_RESTART] = {"restart", "VM_RESTART", 0},
    [ACT_REBOOT] = {"reboot", "VM_REBOOT", 1},
    [ACT_REIMAGE] = {"reimage", "VM_REIMAGE", 1},
    [ACT_REPLACE] = {"replace", "VM_REPORT_AND_REPLACEMENT", 1},
};

/* The first action a severity asks for: the ladders run in step. */
static enum action_kind action_for(enum health_severity sev)
{
    return sev > HEALTH_SEV_RESTART ? (enum action_kind)(sev - HEALTH_SEV_RESTART) : ACT_RESTART;
}

/* The detection event for a failing check. */
static const char *detect_event(const char *check, enum health_mode mode)
{
    static const char *const by_mode[] = {
        [HEALTH_MODE_PROLOG] = "VM_PROLOG_ERROR", [HEALTH_MODE_EPILOG] = "VM_EPILOG_ERROR"};
    if (by_mode[mode])
        return by_mode[mode];
    if (strncmp(check, "gpu", 3) == 0 || strncmp(check, "xid", 3) == 0)
        return "VM_CONTINUOUS_GPU_ERROR";
    return "VM_SCAN_ERROR";
}

static int conf_path(struct control *c, const char *id, char *buf, size_t len, mtc_error_t *err)
{
    char dir[PATH_MAX];
    if (provider_cluster_dir(c->prov, id, dir, sizeof(dir), err) < 0)
        return -1;
    if (snprintf(buf, len, "%s/slurm.conf", dir) >= (int)len)
        return errprintf(err, "path too long");
    return 0;
}

/* Slurm holds a requeued job about two minutes (its credential lifetime)
 * before it may start again; a job moved off a bad node should resume at once
 * on the healthy ones. Once it is PENDING again (its old steps ended: up to
 * 15 s), StartTime=now+1 releases it (slurm_job_release). Best effort: a job that does not become
 * pending in time merely waits out Slurm's hold. */
static void release_requeued(const char *conf, const char *job)
{
    for (int64_t end = mtc_now_ms() + 15000; mtc_now_ms() < end; mtc_sleep_ms(200)) {
        char state[32];
        if (slurm_job_state(conf, job, state, sizeof(state)) == 0 && strcmp(state, "PENDING") == 0) {
            slurm_job_release(conf, job, NULL);
            return;
        }
    }
}

/* A node whose slurmd is dead or unreachable (and stays so: one the
 * supervisor restarts is left alone, control_slurmd_supervised) cannot stop its jobs: Slurm
 * would requeue them and start them elsewhere while the old tasks still run
 * (two trainers writing one checkpoint directory). Such a node is fenced
 * first — at least a reboot, which kills every process of the node — and its
 * jobs are requeued only after that. */
static int needs_fence(const char *check)
{
    return strcmp(check, "daemon.slurmd") == 0 || strcmp(check, "slurm.node") == 0;
}
#define FENCE_ACTION ACT_REBOOT

static void requeue_jobs(struct control *c, const char *id, const char *conf, const char *node,
                         int fenced);

/* The drain reason naming the failed check (why: 400 bytes). */
static void drain_reason(char *why, const char *check, const char *reason)
{
    snprintf(why, 400, "mtc: %s: %.300s", check, reason);
}

/* Drain with a reason naming the check, then requeue the node's running jobs
 * (unless the node must be fenced first). */
static int drain_and_requeue(struct control *c, const char *id, const char *conf, const char *node,
                             const char *check, const char *reason)
{
    char why[400];
    mtc_error_t err = {""};
    drain_reason(why, check, reason);
    if (provider_node_set(c->prov, id, conf, node, SLURM_NODE_DRAIN, why, &err) < 0) {
        log_msg(LOG_ERR, "cluster %s: drain %s failed: %s", id, node, err.text);
        return -1;
    }
    control_event(c, id, "VM_SLURM_DRAIN", node, "drained: %s: %s", check, reason);
    if (!needs_fence(check))
        requeue_jobs(c, id, conf, node, 0);
    return 0;
}

static void requeue_jobs(struct control *c, const char *id, const char *conf, const char *node,
                         int fenced)
{
    if (!provider_has_slurm(c->prov, id)) /* a simulated cluster runs no jobs */
        return;
    json_t *jobs = slurm_node_jobs(conf, node, NULL);
    if (!jobs)
        return;
    if (fenced) /* slurmctld would wait for the dead slurmd to confirm the kill before
                 * letting the jobs go; DOWN tells it the node's processes are gone
                 * (Slurm requeues a --requeue job itself, as after a node failure) */
        provider_node_set(c->prov, id, conf, node, SLURM_NODE_DOWN,
                       "mtc: fenced after the node's slurmd failed: every process killed", NULL);
    size_t i;
    json_t *j;
    json_array_foreach(jobs, i, j)
    {
        const char *job = json_string_value(j);
        char st[32] = "";
        int already = fenced && slurm_job_state(conf, job, st, sizeof(st)) == 0 &&
                      strcmp(st, "RUNNING") != 0 && strcmp(st, "COMPLETING") != 0;
        mtc_error_t jerr = {""};
        if (already || slurm_job_requeue(conf, job, &jerr) == 0) {
            control_event(c, id, "JOB_REQUEUED", node, "job %s requeued (was running on %s)", job, node);
            release_requeued(conf, job);
        } else {
            control_event(c, id, "JOB_NOT_REQUEUED", node, "job %s not requeued: %s", job, jerr.text);
        }
    }
    json_decref(jobs);
}

/* After a power cycle: jobs requeued off the node whose old steps had not
 * ended yet (a slow node's trainer still writing its checkpoint when
 * release_requeued gave up) were killed with the node, but slurmctld keeps
 * them COMPLETING there until its periodic retry reaches the new slurmd —
 * minutes in which the node is not idle once resumed and the jobs wait out
 * Slurm's requeue hold. DOWN tells slurmctld those steps are gone (as after a
 * fence), DRAIN (reason why) keeps the node out until its checks pass, and
 * the jobs are released. (A job still RUNNING there was not requeued:
 * Slurm ends it when the new slurmd registers without it, as before.) */
static void release_killed(struct control *c, const char *id, const char *conf, const char *node,
                           const char *action, const char *why)
{
    if (!provider_has_slurm(c->prov, id))
        return;
    json_t *jobs = slurm_node_jobs(conf, node, NULL), *completing = json_array(), *j;
    size_t i;
    json_array_foreach(jobs, i, j)
    {
        char st[32];
        if (slurm_job_state(conf, json_string_value(j), st, sizeof(st)) == 0 &&
            strcmp(st, "COMPLETING") == 0)
            json_array_append(completing, j);
    }
    if (json_array_size(completing) > 0) {
        char down[128];
        snprintf(down, sizeof(down), "mtc: %s killed every process of the node", action);
        log_msg(LOG_NOTICE, "cluster %s: %s: %zu job(s) still completing after %s; setting it DOWN",
                id, node, json_array_size(completing), action);
        provider_node_set(c->prov, id, conf, node, SLURM_NODE_DOWN, down, NULL);
        provider_node_set(c->prov, id, conf, node, SLURM_NODE_DRAIN, why, NULL);
        json_array_foreach(completing, i, j)
        {
            release_requeued(conf, json_string_value(j));
        }
    }
    json_decref(completing);
    json_decref(jobs);
}

/* Run the node's checks after an action and store them as its health.
 * 1 pass, 0 fail (err names the failing check), -1 error (err). */
static int verify(struct control *c, const struct store_cluster *cl, const char *node,
                  mtc_error_t *err)
{
    json_t *results = provider_node_check(c->prov, cl->id, cl->spec, node, err);
    if (!results)
        return -1;
    struct health_result r[HEALTH_MAX_CHECKS * 2];
    mtc_error_t perr;
    int n = health_results_parse(results, r, (int)(sizeof(r) / sizeof(r[0])), &perr);
    if (n < 0) {
        json_decref(results);
        return errprintf(err, "%s", perr.text);
    }
    enum health_status worst =
        control_record_health(c, cl, node, HEALTH_MODE_HEALTH, 0, r, n, results);
    json_decref(results);
    for (int i = 0; worst == HEALTH_FAIL && i < n; i++)
        if (r[i].status == HEALTH_FAIL)
            return errprintf(err, "%s: %s", r[i].check, r[i].reason), 0;
    return worst != HEALTH_FAIL;
}

/* One node: detect event, drain + requeue, escalate through the actions. */
static int remediate_node(struct control *c, struct store_op *op, const struct store_cluster *cl,
                          const char *conf, const json_t *item, mtc_error_t *err)
{
    const json_t *spec = cl->spec;
    const char *id = op->cluster_id;
    const char *node = json_string_value(json_object_get(item, "node"));
    const char *check = json_string_value(json_object_get(item, "check"));
    const char *reason = json_string_value(json_object_get(item, "reason"));
    /* the item is JSON (the operation's stored request): names to enums here */
    int sev = schema_enum_parse(&health_severity_enum,
                                json_string_value(json_object_get(item, "severity")), 0);
    int mode =
        schema_enum_parse(&health_mode_enum, json_string_value(json_object_get(item, "mode")), 0);
    char progress[256];

    control_set_remediation(c, id, node, CONTROL_REM_REMEDIATING);
    control_event(c, id, detect_event(check, mode < 0 ? HEALTH_MODE_HEALTH : (enum health_mode)mode), node,
          "%s failed: %s", check, reason);
    snprintf(progress, sizeof(progress), "%s: draining and requeueing jobs", node);
    store_op_progress(c->st, op->id, progress);
    if (drain_and_requeue(c, id, conf, node, check, reason) < 0)
        return errprintf(err, "%s: cannot drain the node", node);

    int64_t since = mtc_now_ms() - (int64_t)REMEDIATION_WINDOW_S * 1000;
    int done = store_remediation_count(c->st, id, node, since);
    int a = (int)action_for(sev < 0 ? HEALTH_SEV_NONE : (enum health_severity)sev);
    if (done > a)
        a = done; /* the same node failing again within the window escalates */
    int fence = needs_fence(check);
    if (fence && a < FENCE_ACTION)
        a = FENCE_ACTION;
    /* a resumed operation (mtcd died in the middle of an action) repeats the
     * action it had recorded, without counting it twice toward the limit */
    int again = -1;
    char last[16] = "", last_op[48] = "";
    if (store_remediation_last(c->st, id, node, last, last_op) == 0 &&
        strcmp(last_op, op->id) == 0)
        for (int k = 0; k < N_ACTIONS; k++)
            if (strcmp(actions[k].name, last) == 0)
                a = again = k;
    for (;; a++, again = -1) {
        if (a != again && (done >= REMEDIATION_LIMIT || a >= N_ACTIONS)) {
            char why[300];
            snprintf(why, sizeof(why),
                     "mtc: remediation limit reached (%d actions in %d s); last failure %.200s",
                     done, REMEDIATION_WINDOW_S, check);
            provider_node_set(c->prov, id, conf, node, SLURM_NODE_DRAIN, why, NULL);
            control_set_remediation(c, id, node, CONTROL_REM_FAILED);
            control_event(c, id, "VM_REMEDIATION_FAILED", node,
                  "left drained in ERROR after %d actions in %d s: %s", done, REMEDIATION_WINDOW_S,
                  check);
            return 0; /* the operation did what policy allows */
        }
        if (a != again) {
            store_remediation_add(c->st, id, node, actions[a].name, check, op->id);
            done++;
        }
        snprintf(progress, sizeof(progress), "%s: %s (attempt %d)", node, actions[a].name, done);
        store_op_progress(c->st, op->id, progress);
        control_event(c, id, actions[a].event, node, "%s %s after %s", actions[a].name, node, check);
        mtc_error_t aerr = {""};
        int arc = provider_node_action(c->prov, id, spec, node, actions[a].name, &aerr);
        if (fence) { /* the node's processes are gone (even when its slurmd did not come back) */
            requeue_jobs(c, id, conf, node, 1);
            fence = 0;
        } else if (arc == 0 && actions[a].kills) {
            char why[400];
            drain_reason(why, check, reason);
            release_killed(c, id, conf, node, actions[a].name, why);
        }
        if (arc < 0) {
            control_event(c, id, "VM_ACTION_FAILED", node, "%s failed: %s", actions[a].name, aerr.text);
            continue;
        }
        /* a replace moves the node to another host */
        json_decref(control_refresh_nodes(c, id, spec, cl->nodes));
        mtc_error_t verr = {""};
        int ok = verify(c, cl, node, &verr);
        if (ok == 1) {
            /* the event first: a job Slurm starts on the node the moment it is
             * resumed never appears to start before the node came back */
            control_event(c, id, "VM_RESUMED", node, "checks pass after %s; node back in service",
                  actions[a].name);
            mtc_error_t rerr = {""};
            if (provider_node_set(c->prov, id, conf, node, SLURM_NODE_RESUME, NULL, &rerr) < 0)
                log_msg(LOG_ERR, "cluster %s: resume %s: %s", id, node, rerr.text);
            control_set_remediation(c, id, node, CONTROL_REM_NONE);
            return 0;
        }
        control_event(c, id, "VM_HEALTH_CHECK_FAILED", node, "after %s: %s", actions[a].name,
              ok < 0 ? verr.text : verr.text);
    }
}

int control_run_remediate(struct control *c, struct store_op *op, json_t **response,
                          mtc_error_t *err)
{
    struct store_cluster cl;
    char conf[PATH_MAX + 16];
    if (store_cluster_get(c->st, op->cluster_id, &cl) < 0)
        return errprintf(err, "cluster %s no longer exists", op->cluster_id);
    int rc = conf_path(c, op->cluster_id, conf, sizeof(conf), err);
    json_t *nodes = json_object_get(op->request, "nodes"), *item;
    size_t i;
    json_array_foreach(nodes, i, item)
    {
        if (rc < 0)
            break;
        rc = remediate_node(c, op, &cl, conf, item, err);
    }
    store_cluster_release(&cl);
    if (rc == 0)
        *response = json_pack("{s:O}", "nodes", nodes);
    return rc;
}
