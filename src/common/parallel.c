/* parallel: run one task per index on a few threads — the providers' way of
 * starting, stopping and checking many nodes at once. The tasks are mostly
 * waits (children, ssh, files), so a few threads overlap them even on one core. */
#include "common/common.h"

#include <pthread.h>
#include <stdlib.h>

struct par {
    pthread_mutex_t lock;
    size_t next, n;
    mtc_task_fn fn;
    void *arg;
    mtc_error_t *errs;
    int *rcs;
};

static void *worker(void *arg)
{
    struct par *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        size_t i = p->next++;
        pthread_mutex_unlock(&p->lock);
        if (i >= p->n)
            return NULL;
        p->errs[i].text[0] = '\0';
        p->rcs[i] = p->fn(p->arg, i, &p->errs[i]);
    }
}

long mtc_parallel(size_t n, size_t threads, mtc_task_fn fn, void *arg, mtc_error_t *errs)
{
    if (n == 0)
        return -1;
    struct par p = {.n = n, .fn = fn, .arg = arg, .errs = errs, .rcs = calloc(n, sizeof(int))};
    if (!p.rcs) {
        errprintf(&errs[0], "out of memory");
        return 0;
    }
    pthread_t *t = calloc(threads ? threads : 1, sizeof(*t));
    size_t nt = 0;
    pthread_mutex_init(&p.lock, NULL);
    for (; t && nt < n && nt < threads; nt++)
        if (pthread_create(&t[nt], NULL, worker, &p) != 0)
            break;
    if (nt == 0) /* no thread: run them here */
        worker(&p);
    for (size_t i = 0; i < nt; i++)
        pthread_join(t[i], NULL);
    pthread_mutex_destroy(&p.lock);
    free(t);
    long first = -1;
    for (size_t i = 0; i < n && first < 0; i++)
        if (p.rcs[i] < 0)
            first = (long)i;
    free(p.rcs);
    return first;
}
