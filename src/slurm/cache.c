/* cache: the answers of Slurm commands that change only with a cluster's
 * configuration (`scontrol show partition`, `srun --help`), kept per
 * slurm.conf while that file is unchanged (mtime, size) and for at most a
 * given age, so that a training job's submission asks Slurm only to submit. */
#include "slurm/slurm.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CACHE_SLOTS 32

static struct slot {
    char key[PATH_MAX + 128]; /* conf '\n' the command line; "" unused */
    struct timespec mtime;    /* of conf when answered */
    off_t size;
    int64_t at_ms;
    char *out;
} slots[CACHE_SLOTS];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* conf '\n' argv joined by ' ' into key; 0, or -1 when it does not fit. */
static int make_key(const char *conf, char *const argv[], char *key, size_t len)
{
    int n = snprintf(key, len, "%s\n", conf ? conf : "");
    for (int i = 0; argv[i] && n >= 0 && (size_t)n < len; i++)
        n += snprintf(key + n, len - (size_t)n, "%s%s", i ? " " : "", argv[i]);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

int slurm_cmd_cached(const char *conf, char *const argv[], int max_age_ms, char **out,
                     const char *what, mtc_error_t *err)
{
    char key[sizeof(slots[0].key)];
    struct stat st = {0};
    if (make_key(conf, argv, key, sizeof(key)) < 0 || (conf && *conf && stat(conf, &st) < 0))
        return slurm_cmd_ok(conf, argv, out, what, err);
    int64_t now = mtc_now_ms();
    pthread_mutex_lock(&cache_lock);
    int pick = 0; /* this key's slot, else the oldest */
    for (int i = 0; i < CACHE_SLOTS; i++) {
        struct slot *s = &slots[i];
        if (strcmp(s->key, key) == 0) {
            if (now - s->at_ms < max_age_ms && s->size == st.st_size &&
                s->mtime.tv_sec == st.st_mtim.tv_sec && s->mtime.tv_nsec == st.st_mtim.tv_nsec) {
                *out = strdup(s->out);
                pthread_mutex_unlock(&cache_lock);
                if (!*out)
                    return errno = ENOMEM, errprintf(err, "%s: out of memory", what);
                return 0;
            }
            pick = i;
            break;
        }
        if (s->at_ms < slots[pick].at_ms)
            pick = i;
    }
    pthread_mutex_unlock(&cache_lock);
    /* asked outside the lock: a slow Slurm does not hold up other clusters */
    char *o = NULL;
    if (slurm_cmd_ok(conf, argv, &o, what, err) < 0)
        return -1; /* a failure is not kept: the next caller asks again */
    char *copy = strdup(o ? o : "");
    pthread_mutex_lock(&cache_lock);
    struct slot *s = &slots[pick];
    if (copy && (strcmp(s->key, key) == 0 || s->at_ms <= now)) {
        free(s->out);
        snprintf(s->key, sizeof(s->key), "%s", key);
        s->mtime = st.st_mtim;
        s->size = st.st_size;
        s->at_ms = now;
        s->out = copy;
        copy = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    free(copy);
    *out = o;
    return 0;
}
