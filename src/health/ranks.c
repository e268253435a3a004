/* ranks: a job's processes on this node that stopped (SIGSTOP, state T) or
 * died unreaped (zombies, state Z) — what `mtc-agent ranks` watches beside a
 * training job with hang detection, so a hung rank is named at once instead
 * of after its lost progress times out (issue 30, point 4). The job's
 * processes are those whose environment says SLURM_JOB_ID=job and
 * SLURMD_NODENAME=node (emulated nodes share one host), less the watcher's
 * own step; a zombie is a child of one of them. Each problem is reported
 * once, after it lasted `after` seconds. */
#include "health/health.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* /proc/PID/stat's state and parent. 0, or -1 when it is gone. */
static int proc_state(int pid, char *state, int *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    if (!rp || sscanf(rp + 1, " %c %d", state, ppid) != 2)
        return -1;
    return 0;
}

/* Whether pid belongs to the job on this node, and its rank (-1: unknown). */
static int of_job(int pid, const struct health_rank_watch *w, int *rank)
{
    char path[64], env[65536];
    snprintf(path, sizeof(path), "/proc/%d/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, env, sizeof(env) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    env[n] = '\0';
    const char *job = mtc_environ_get(env, (size_t)n, "SLURM_JOB_ID");
    const char *node = mtc_environ_get(env, (size_t)n, "SLURMD_NODENAME");
    const char *step = mtc_environ_get(env, (size_t)n, "SLURM_STEP_ID");
    if (!job || strcmp(job, w->job) != 0 || !node || strcmp(node, w->node) != 0 ||
        (step && *w->own_step && strcmp(step, w->own_step) == 0))
        return 0;
    const char *r = mtc_environ_get(env, (size_t)n, "RANK");
    if (!r)
        r = mtc_environ_get(env, (size_t)n, "SLURM_PROCID");
    *rank = r ? atoi(r) : -1;
    return 1;
}

/* The entry of pid in the table of problems seen (a new one when absent). */
static struct health_rank_seen *seen_of(struct health_rank_watch *w, int pid, char state)
{
    for (int i = 0; i < w->nseen; i++)
        if (w->seen[i].pid == pid && w->seen[i].state == state)
            return &w->seen[i];
    if (w->nseen == HEALTH_RANKS_MAX)
        return NULL;
    struct health_rank_seen *s = &w->seen[w->nseen++];
    memset(s, 0, sizeof(*s));
    s->pid = pid, s->state = state;
    return s;
}

int health_ranks_scan(struct health_rank_watch *w, double now, health_rank_fn fn, void *arg)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    int pids[HEALTH_RANKS_MAX], ranks[HEALTH_RANKS_MAX], n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < HEALTH_RANKS_MAX) {
        int pid = atoi(e->d_name), rank;
        if (pid > 0 && isdigit((unsigned char)e->d_name[0]) && of_job(pid, w, &rank))
            pids[n] = pid, ranks[n++] = rank;
    }
    /* the problems of this pass: the job's stopped processes, its zombie children */
    for (int i = 0; i < w->nseen; i++)
        w->seen[i].live = 0;
    rewinddir(d);
    while ((e = readdir(d))) {
        int pid = atoi(e->d_name), ppid, rank = -1, mine = 0;
        char st;
        if (pid <= 0 || proc_state(pid, &st, &ppid) < 0 || (st != 'T' && st != 'Z'))
            continue;
        for (int i = 0; i < n && !mine; i++) {
            if (st == 'T' && pids[i] == pid)
                mine = 1, rank = ranks[i];
            else if (st == 'Z' && pids[i] == ppid)
                mine = 1, rank = ranks[i];
        }
        struct health_rank_seen *s = mine ? seen_of(w, pid, st) : NULL;
        if (!s)
            continue;
        s->live = 1;
        if (s->since == 0)
            s->since = now, s->rank = rank;
    }
    closedir(d);
    /* report what lasted; forget what ended */
    int out = 0;
    for (int i = 0; i < w->nseen;) {
        struct health_rank_seen *s = &w->seen[i];
        if (!s->live) {
            *s = w->seen[--w->nseen];
            continue;
        }
        if (!s->reported && now - s->since >= w->after) {
            s->reported = 1;
            fn(arg, s->pid, s->rank, s->state, now - s->since);
            out++;
        }
        i++;
    }
    return out;
}
