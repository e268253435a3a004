/* watch: a running job's progress and early problems — one exp_track per
 * run (recipes/goodput.c), kept between calls so each reads only what the
 * run's metrics.jsonl and log gained since the last, and the alerts of
 * recipes/detect.c that start in those rows recorded as cluster events. The
 * monitor, GETs and /metrics all read through it. */
#include "jobs/jobs.h"
#include "recipes/recipes.h"
#include "store/store.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tracked {
    char task_dir[PATH_MAX];
    struct exp_track t;
    int64_t seen_rows; /* rows early problem detection's events have judged */
    int raised;        /* alerts that hold, an event recorded for each */
};
static struct tracked *tracks;
static size_t ntracks;
static pthread_mutex_t tracks_lock = PTHREAD_MUTEX_INITIALIZER;

int jobs_track(const json_t *cfg, double now, struct exp_track *out)
{
    const char *td = json_string_value(json_object_get(cfg, "taskDir"));
    if (!td)
        return -1;
    pthread_mutex_lock(&tracks_lock);
    struct tracked *k = NULL;
    for (size_t i = 0; i < ntracks && !k; i++)
        if (strcmp(tracks[i].task_dir, td) == 0)
            k = &tracks[i];
    if (!k) {
        struct tracked *nt = realloc(tracks, (ntracks + 1) * sizeof(*nt));
        if (!nt) {
            pthread_mutex_unlock(&tracks_lock);
            return -1;
        }
        tracks = nt;
        k = &tracks[ntracks++];
        snprintf(k->task_dir, sizeof(k->task_dir), "%s", td);
        exp_track_init(&k->t, cfg);
    }
    exp_track_update(&k->t, now);
    *out = k->t;
    pthread_mutex_unlock(&tracks_lock);
    return 0;
}

static void collect(void *arg, int kind, const char *msg)
{
    json_array_append_new(arg, json_pack("[s,s]", exp_alert_name(kind), msg));
}

void jobs_watch(struct store *st, const struct store_job *j, double now)
{
    const char *td = json_string_value(json_object_get(j->config, "taskDir"));
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
    pthread_mutex_lock(&tracks_lock);
    for (size_t i = 0; i < ntracks; i++)
        if (strcmp(tracks[i].task_dir, td) == 0)
            exp_monitor_scan(t, &mon, now, &tracks[i].seen_rows, &tracks[i].raised, collect, found);
    pthread_mutex_unlock(&tracks_lock);
    free(t);
    size_t i;
    json_t *e;
    const char *exp = json_string_value(json_object_get(j->config, "experiment"));
    json_array_foreach(found, i, e)
    {
        char type[64], msg[512];
        snprintf(type, sizeof(type), "TRAINING_%s", json_string_value(json_array_get(e, 0)));
        snprintf(msg, sizeof(msg), "trainingJob %s (experiment %s): %s", j->id, exp ? exp : j->id,
                 json_string_value(json_array_get(e, 1)));
        store_event_add(st, j->cluster_id, type, NULL, msg);
    }
    json_decref(found);
}
