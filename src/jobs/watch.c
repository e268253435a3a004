/* watch: a running job's progress and early problems — one exp_track per
 * run (experiment/goodput.c), kept between calls so each reads only what the
 * run's metrics.jsonl and log gained since the last; the alerts of
 * experiment/detect.c that start in those rows recorded as cluster events; and
 * a hang (a rank the job's watcher saw stopped or zombie, or no progress for
 * the recipe's monitor.hang_timeout_s or stall_factor median steps) acted
 * on: TRAINING_HANG, then the job requeued to resume from its checkpoint.
 * The monitor, GETs and /metrics all read through it. */
#include "experiment/experiment.h"
#include "jobs/jobs.h"
#include "recipes/recipes.h"
#include "slurm/slurm.h"
#include "store/store.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tracked {
    char task_dir[PATH_MAX];
    struct exp_track t;
    int64_t seen_rows; /* rows early problem detection's events have judged */
    int raised;        /* alerts that hold, an event recorded for each */
    double hang_ref;   /* the progress (row or start) a hang was acted on after */
    int stopped;       /* t.stopped when its preemptions were last asked for */
    int busy;          /* a caller is updating a copy of t, outside the lock */
};
static struct tracked *tracks;
static size_t ntracks;
static pthread_mutex_t tracks_lock = PTHREAD_MUTEX_INITIALIZER;

static struct tracked *find(const char *td)
{
    for (size_t i = 0; i < ntracks; i++)
        if (strcmp(tracks[i].task_dir, td) == 0)
            return &tracks[i];
    return NULL;
}

/* The run's preemptions asked of Slurm (outside the lock: it reads
 * slurmctld's log) into out and its cached track. */
static void ask_preemptions(const char *td, const json_t *cfg, double now, struct exp_track *out)
{
    if (exp_track_preemptions(out, cfg, now) < 0)
        return;
    pthread_mutex_lock(&tracks_lock);
    struct tracked *k = find(td);
    if (k) {
        memcpy(k->t.preempt, out->preempt, sizeof(out->preempt));
        k->t.npreempt = out->npreempt;
        exp_breakdown_update(&k->t, now);
    }
    pthread_mutex_unlock(&tracks_lock);
}

/* The run's track brought up to date. Reading the run's files and matching
 * its log rules (a user's patterns) happen on a copy outside tracks_lock, so
 * no reader waits on them: a caller that finds an update under way gets the
 * last stored track at once. */
static int track(const json_t *cfg, double now, struct exp_track *out, int force)
{
    const char *td = exp_task_dir(cfg);
    if (!td)
        return -1;
    pthread_mutex_lock(&tracks_lock);
    struct tracked *k = find(td);
    if (!k) {
        struct tracked *nt = realloc(tracks, (ntracks + 1) * sizeof(*nt));
        if (!nt) {
            pthread_mutex_unlock(&tracks_lock);
            return -1;
        }
        tracks = nt;
        k = &tracks[ntracks++];
        memset(k, 0, sizeof(*k));
        snprintf(k->task_dir, sizeof(k->task_dir), "%s", td);
        exp_track_init(&k->t, cfg);
    }
    *out = k->t;
    int busy = k->busy;
    k->busy = 1;
    pthread_mutex_unlock(&tracks_lock);
    if (busy) {
        if (force)
            ask_preemptions(td, cfg, now, out);
        return 0;
    }
    struct mtc_fsid as; /* what the job wrote, read as its user */
    jobs_fs_enter(cfg, &as);
    exp_track_update(out, now);
    mtc_fsid_leave(&as);
    pthread_mutex_lock(&tracks_lock);
    k = find(td); /* tracks may have moved meanwhile */
    /* preemptions asked for meanwhile are newer than the copy's */
    if (out->npreempt != k->t.npreempt ||
        memcmp(out->preempt, k->t.preempt, sizeof(out->preempt)) != 0) {
        memcpy(out->preempt, k->t.preempt, sizeof(out->preempt));
        out->npreempt = k->t.npreempt;
        exp_breakdown_update(out, now);
    }
    k->t = *out;
    k->busy = 0;
    /* a start stopped by a signal or requeued since they were last asked: preempted? */
    int ask = force || k->t.stopped != k->stopped;
    k->stopped = k->t.stopped;
    pthread_mutex_unlock(&tracks_lock);
    if (ask && (force || out->stopped > 0))
        ask_preemptions(td, cfg, now, out);
    return 0;
}

int jobs_track(const json_t *cfg, double now, struct exp_track *out)
{
    return track(cfg, now, out, 0);
}

int jobs_track_preempted(const json_t *cfg, double now, struct exp_track *out)
{
    return track(cfg, now, out, 1);
}

static void collect(void *arg, int kind, const char *msg)
{
    json_array_append_new(arg, json_pack("[s,s]", exp_alert_name(kind), msg));
}

const char *jobs_last_line(const json_t *cfg, char *buf, size_t len)
{
    struct mtc_fsid as; /* as the job's user, never from /proc */
    jobs_fs_enter(cfg, &as);
    exp_last_line(cfg, buf, len);
    mtc_fsid_leave(&as);
    return buf;
}

/* A hang: the job runs, the run's log shows no end after its latest start,
 * and the log says one of its processes stopped or turned zombie, or
 * neither a progress row nor that start came for hang_timeout_s (or
 * stall_factor × the median step time, when the recipe gives it; whichever
 * is shorter). The time of that progress, or 0; why in why. */
static double hang_ref(const struct exp_track *t, const struct exp_monitor *m,
                       const struct store_job *j, double now, char *why, size_t len)
{
    double ref = t->last_row > t->last_start ? t->last_row : t->last_start;
    if (strcmp(j->state, "RUNNING") != 0 || t->end > 0 || ref <= 0)
        return 0;
    if (t->rank_hung > 0 && (m->hang_timeout_s > 0 || m->stall_hangs)) {
        snprintf(why, len, "%s", t->rank_msg);
        return ref;
    }
    double limit = m->hang_timeout_s > 0 ? m->hang_timeout_s : INFINITY;
    double step = exp_track_step_time(t);
    int stall = m->stall_hangs && step > 0 && m->stall_factor * step < limit;
    if (stall)
        limit = m->stall_factor * step > 1 ? m->stall_factor * step : 1;
    if (!isfinite(limit) || now - ref <= limit)
        return 0;
    if (stall)
        snprintf(why, len, "no progress for %.0f s (stall_factor %g x the median step time %.2f s)",
                 now - ref, m->stall_factor, step);
    else
        snprintf(why, len, "no progress for %.0f s (hang_timeout_s %.0f)", now - ref,
                 m->hang_timeout_s);
    return ref;
}

/* TRAINING_HANG with the last progress and the log's last line, then the
 * job requeued (it resumes through the contract) unless it restarted
 * max_restarts times already. */
static void act_on_hang(struct store *st, const struct store_job *j, const struct exp_track *t,
                        const struct exp_monitor *m, const char *why)
{
    char last[200], msg[1024], what[160], brief[512];
    const char *exp = exp_experiment(j->config);
    const char *conf = NULL;
    mtc_error_t err = {""};
    jobs_last_line(j->config, last, sizeof(last));
    if (j->restart_count >= m->max_restarts)
        snprintf(what, sizeof(what), "not requeued: it restarted %d times (max_restarts %d)",
                 j->restart_count, m->max_restarts);
    else if (exp_slurm_conf(j->config, &conf) < 0 ||
             slurm_job_requeue(conf, j->slurm_job, &err) < 0)
        snprintf(what, sizeof(what), "requeue failed: %.120s",
                 *err.text ? err.text : "its cluster's slurm.conf is gone");
    else /* it starts again without Slurm's hold: the next pass lifts it (state.c) */
        snprintf(what, sizeof(what), "requeued (restart %d of at most %d)", j->restart_count + 1,
                 m->max_restarts);
    snprintf(msg, sizeof(msg),
             "trainingJob %s (experiment %s): hung: %s after step %lld; %s; last line: %.200s",
             j->id, exp ? exp : j->id, why, (long long)t->step, what, *last ? last : "(none)");
    snprintf(brief, sizeof(brief), "trainingJob %s (experiment %s): hung; %s", j->id,
             exp ? exp : j->id, what);
    jobs_event(st, j, "TRAINING_HANG", brief, msg);
}

void jobs_watch(struct store *st, const struct store_job *j, double now)
{
    const char *td = exp_task_dir(j->config);
    struct exp_track *t = malloc(sizeof(*t));
    json_t *found = json_array();
    if (!td || !t || !found || jobs_track(j->config, now, t) < 0) {
        free(t);
        json_decref(found);
        return;
    }
    struct exp_monitor mon;
    exp_monitor_from(j->config, &mon);
    /* the judging state lives with the cached track (events outside the lock) */
    double hung = 0;
    char why[200] = "";
    pthread_mutex_lock(&tracks_lock);
    for (size_t i = 0; i < ntracks; i++)
        if (strcmp(tracks[i].task_dir, td) == 0) {
            exp_monitor_scan(t, &mon, now, &tracks[i].seen_rows, &tracks[i].raised, collect, found);
            double ref = hang_ref(t, &mon, j, now, why, sizeof(why));
            if (ref > 0 && ref != tracks[i].hang_ref)
                hung = tracks[i].hang_ref = ref;
        }
    pthread_mutex_unlock(&tracks_lock);
    if (hung > 0)
        act_on_hang(st, j, t, &mon, why);
    free(t);
    size_t i;
    json_t *e;
    const char *exp = exp_experiment(j->config);
    json_array_foreach(found, i, e)
    {
        char type[64], msg[512], brief[512];
        snprintf(type, sizeof(type), "TRAINING_%s", json_string_value(json_array_get(e, 0)));
        snprintf(msg, sizeof(msg), "trainingJob %s (experiment %s): %s", j->id, exp ? exp : j->id,
                 json_string_value(json_array_get(e, 1)));
        snprintf(brief, sizeof(brief),
                 "trainingJob %s (experiment %s): an early warning from its metrics", j->id,
                 exp ? exp : j->id);
        jobs_event(st, j, type, brief, msg);
    }
    json_decref(found);
}
