/* monitor: a thread of mtcd that follows every unfinished training job on its
 * own — its state from Slurm, its metrics' early problem detection — so the
 * stored state and the TRAINING_* events move while no client reads them (a
 * job that stalls at night raises its event at night). Each pass reads the
 * jobs not yet final from the store and refreshes them (jobs_refresh: one
 * Slurm query per cluster for the whole pass, new metrics rows only, from
 * the cached track); with the control, it first asks every cluster whose
 * Slurm is up for its jobs once (queue.c), which both the refresh and
 * /metrics' queue figures read. */
#include "jobs/jobs.h"
#include "store/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* jobs read from the store at a time */
#define MONITOR_PAGE 64

/* passes completed by this process's monitor (mtc_job_monitor_passes_total) */
static atomic_llong passes_done;

struct jobs_monitor {
    struct store *st;
    struct jobs_ops ops; /* ops.prov NULL: only the clusters of unfinished jobs are asked */
    int interval_ms;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_int stop;
};

/* Refresh every unfinished job, page by page; stops early when *stop is set
 * (mtcd shutting down mid-pass). */
static void pass(struct store *st, const struct jobs_ops *ops, atomic_int *stop)
{
    int64_t after = 0;
    json_t *slurm = json_object(); /* what each cluster's Slurm said this pass */
    if (ops->prov)
        jobs_queue_look(st, ops, slurm);
    for (;;) {
        int n = 0;
        struct store_job *jobs = store_job_list_unfinished(st, after, MONITOR_PAGE, &n);
        for (int i = 0; i < n; i++) {
            if (!atomic_load(stop))
                jobs_refresh(st, &jobs[i], slurm);
            after = jobs[i].seq;
            store_job_release(&jobs[i]);
        }
        free(jobs);
        if (n < MONITOR_PAGE || atomic_load(stop))
            break;
    }
    json_decref(slurm);
}

static void *loop(void *arg)
{
    struct jobs_monitor *m = arg;
    pthread_mutex_lock(&m->lock);
    while (!m->stop) {
        pthread_mutex_unlock(&m->lock);
        pass(m->st, &m->ops, &m->stop);
        atomic_fetch_add(&passes_done, 1);
        pthread_mutex_lock(&m->lock);
        struct timespec ts = mtc_deadline_ms(m->interval_ms);
        if (!m->stop)
            pthread_cond_timedwait(&m->wake, &m->lock, &ts);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

struct jobs_monitor *jobs_monitor_start(struct store *st, const struct jobs_ops *ops, int interval_ms,
                                        mtc_error_t *err)
{
    struct jobs_monitor *m = calloc(1, sizeof(*m));
    if (!m) {
        errprintf(err, "out of memory");
        return NULL;
    }
    m->st = st;
    if (ops)
        m->ops = *ops;
    m->interval_ms = interval_ms > 0 ? interval_ms : JOBS_MONITOR_MS;
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->wake, NULL);
    if ((errno = pthread_create(&m->thread, NULL, loop, m)) != 0) {
        errprintf(err, "cannot start the training job monitor: %s", strerror(errno));
        pthread_mutex_destroy(&m->lock);
        pthread_cond_destroy(&m->wake);
        free(m);
        return NULL;
    }
    return m;
}

long long jobs_monitor_passes(void)
{
    return atomic_load(&passes_done);
}

void jobs_monitor_stop(struct jobs_monitor *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    atomic_store(&m->stop, 1);
    pthread_cond_signal(&m->wake);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->thread, NULL);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->wake);
    free(m);
}
