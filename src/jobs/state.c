/* state: a training job's state as Slurm and the experiment's exit record
 * say, kept in the store — refreshed one job at a time (a GET) or for all
 * the jobs of a pass with one Slurm query per cluster (the monitor, a
 * list), a TRAINING_FAILED event when it fails, a TRAINING_PREEMPTED one
 * for each requeue that was a preemption, a requeued job released
 * from Slurm's requeue hold, and :cancel. */
#include "experiment/experiment.h"
#include "jobs/jobs.h"
#include "recipes/recipes.h"
#include "slurm/slurm.h"
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct schema_enum jobs_state_enum = SCHEMA_NAMES(
    NULL, [JOBS_PENDING] = "PENDING", [JOBS_RUNNING] = "RUNNING", [JOBS_COMPLETED] = "COMPLETED",
    [JOBS_FAILED] = "FAILED", [JOBS_CANCELLED] = "CANCELLED", [JOBS_REQUEUED] = "REQUEUED");

/* Slurm's job states (scontrol JobState) and the experiment's exit record →
 * the API's. Not listed: FAILED (TIMEOUT, NODE_FAIL, OUT_OF_MEMORY ...). */
static const struct {
    const char *slurm;
    enum jobs_state state;
} slurm_states[] = {
    {"PENDING", JOBS_PENDING},       {"CONFIGURING", JOBS_RUNNING},  {"RUNNING", JOBS_RUNNING},
    {"COMPLETING", JOBS_RUNNING},    {"SUSPENDED", JOBS_RUNNING},    {"STOPPED", JOBS_RUNNING},
    {"SIGNALING", JOBS_RUNNING},     {"STAGE_OUT", JOBS_RUNNING},    {"RESIZING", JOBS_RUNNING},
    {"COMPLETED", JOBS_COMPLETED},   {"CANCELLED", JOBS_CANCELLED},  {"REQUEUED", JOBS_REQUEUED},
    {"REQUEUE_HOLD", JOBS_REQUEUED}, {"REQUEUE_FED", JOBS_REQUEUED},
};

static enum jobs_state state_of(const char *slurm, int restarts)
{
    for (size_t i = 0; i < sizeof(slurm_states) / sizeof(slurm_states[0]); i++)
        if (strcmp(slurm_states[i].slurm, slurm) == 0)
            /* requeued and waiting to run again */
            return slurm_states[i].state == JOBS_PENDING && restarts > 0 ? JOBS_REQUEUED
                                                                         : slurm_states[i].state;
    return JOBS_FAILED;
}

int jobs_state_final(const char *s)
{
    int v = schema_enum_parse(&jobs_state_enum, s, 0);
    return v == JOBS_COMPLETED || v == JOBS_FAILED || v == JOBS_CANCELLED;
}

/* What Slurm says of j's job — {"state", "restarts"}, borrowed from pass or
 * *own (caller decrefs) — or NULL when it knows it no more, does not answer
 * or its cluster is gone. */
static const json_t *slurm_says(const struct store_job *j, json_t *pass, json_t **own)
{
    const char *conf = NULL;
    *own = NULL;
    if (exp_slurm_conf(j->config, &conf) < 0)
        return NULL; /* a deleted cluster */
    const char *key = conf ? conf : "";
    json_t *states = pass ? json_object_get(pass, key) : NULL;
    if (!states) {
        states = slurm_job_states(conf, pass ? NULL : j->slurm_job, NULL);
        if (!states)
            states = json_null(); /* no answer: asked once a pass */
        if (pass)
            json_object_set_new(pass, key, states);
        else
            *own = states;
    }
    return json_object_get(states, j->slurm_job);
}

/* TRAINING_FAILED: why, as far as mtc can tell — the program's exit status
 * (its exit record) or Slurm's state, and the last line it wrote. */
static void failed_event(struct store *st, const struct store_job *j, const char *slurm)
{
    char why[64], last[256], msg[1024], brief[512];
    const char *exp = exp_experiment(j->config);
    struct mtc_fsid as;
    jobs_fs_enter(j->config, &as);
    char *rec = exp_exit_record(j->config, j->slurm_job);
    mtc_fsid_leave(&as);
    if (rec && atoi(rec) != 0)
        snprintf(why, sizeof(why), "exit status %d", atoi(rec));
    else
        snprintf(why, sizeof(why), "Slurm says %.40s", slurm);
    free(rec);
    jobs_last_line(j->config, last, sizeof(last));
    snprintf(msg, sizeof(msg), "trainingJob %s (experiment %s) FAILED (%s); last line: %.240s",
             j->id, exp ? exp : j->id, why, *last ? last : "(none)");
    snprintf(brief, sizeof(brief), "trainingJob %s (experiment %s) FAILED", j->id,
             exp ? exp : j->id);
    jobs_event(st, j, "TRAINING_FAILED", brief, msg);
}

/* TRAINING_PREEMPTED, once per preemption: of the requeues r0+1..r1 Slurm
 * counted since the last look, each that ended a start slurmctld's log says
 * was preempted (requeue r ends the run's r-th start). */
static void preempted_events(struct store *st, const struct store_job *j, int r0, int r1)
{
    struct exp_track *t = malloc(sizeof(*t));
    if (!t || jobs_track_preempted(j->config, (double)mtc_now_ms() / 1000.0, t) < 0) {
        free(t);
        return;
    }
    const char *exp = exp_experiment(j->config);
    for (int i = 0; i < t->npreempt; i++) {
        int a = exp_track_attempt(t, t->preempt[i].time);
        if (a <= r0 || a > r1)
            continue;
        char what[160], when[40], msg[512], brief[512];
        exp_preempt_text(&t->preempt[i], what, sizeof(what));
        mtc_time_rfc3339((int64_t)(t->preempt[i].time * 1000), when, sizeof(when));
        snprintf(msg, sizeof(msg),
                 "trainingJob %s (experiment %s): %s at %s after step %lld; requeued, it "
                 "resumes from its checkpoint",
                 j->id, exp ? exp : j->id, what, when, (long long)t->segs[a - 1].max_step);
        snprintf(brief, sizeof(brief), "trainingJob %s (experiment %s): %s at %s; requeued",
                 j->id, exp ? exp : j->id, what, when);
        jobs_event(st, j, "TRAINING_PREEMPTED", brief, msg);
    }
    free(t);
}

void jobs_refresh_state(struct store *st, struct store_job *j, json_t *pass)
{
    if (jobs_state_final(j->state) || !j->config || !*j->slurm_job)
        return;
    json_t *own;
    const json_t *said = slurm_says(j, pass, &own);
    char slurm[64];
    exp_job_state_of(j->config, json_string_value(json_object_get(said, "state")), slurm,
                     sizeof(slurm));
    int restarts = j->restart_count;
    int n = said ? (int)json_integer_value(json_object_get(said, "restarts")) : -1;
    if (n > restarts)
        restarts = n;
    /* requeued (a hang, retry_on_error, a checkpoint on a signal, remediation):
     * it resumes now, not after Slurm's hold of about two minutes — once it
     * is PENDING (no longer COMPLETING) its old steps are over; it starts a
     * second later (slurm_job_release) */
    const char *conf = NULL, *reason = json_string_value(json_object_get(said, "reason"));
    if (n > 0 && strcmp(slurm, "PENDING") == 0 && reason && strcmp(reason, "BeginTime") == 0 &&
        exp_slurm_conf(j->config, &conf) == 0)
        slurm_job_release(conf, j->slurm_job, NULL);
    json_decref(own);
    if (strcmp(slurm, "UNKNOWN") == 0)
        return;
    const char *now = schema_enum_name(&jobs_state_enum, state_of(slurm, restarts));
    if (strcmp(now, j->state) == 0 && restarts == j->restart_count)
        return;
    if (store_job_set_state(st, j->cluster_id, j->id, now, restarts) == 0) {
        if (strcmp(now, "FAILED") == 0)
            failed_event(st, j, slurm);
        if (restarts > j->restart_count)
            preempted_events(st, j, j->restart_count, restarts);
        snprintf(j->state, sizeof(j->state), "%s", now);
        j->restart_count = restarts;
    }
}

void jobs_refresh(struct store *st, struct store_job *j, json_t *pass)
{
    if (jobs_state_final(j->state) || !j->config)
        return;
    jobs_refresh_state(st, j, pass);
    if (strcmp(j->state, "PENDING") != 0)
        jobs_watch(st, j, (double)mtc_now_ms() / 1000.0);
}

int jobs_cancel(struct store *st, struct store_job *j, mtc_error_t *err)
{
    jobs_refresh(st, j, NULL);
    if (jobs_state_final(j->state)) {
        errno = EALREADY;
        return errprintf(err, "trainingJob %s is already %s", j->id, j->state);
    }
    const char *conf = NULL;
    mtc_error_t e2 = {""};
    if (exp_slurm_conf(j->config, &conf) < 0 || slurm_job_cancel(conf, j->slurm_job, &e2) < 0) {
        errno = EIO;
        return errprintf(err, "trainingJob %s: %s", j->id,
                         *e2.text ? e2.text : "its cluster's slurm.conf is gone");
    }
    /* Slurm says CANCELLED within moments; the caller shows it when it has */
    for (int i = 0; i < 20 && !jobs_state_final(j->state); i++) {
        mtc_sleep_ms(100);
        jobs_refresh(st, j, NULL);
    }
    return 0;
}
