/* local_fault: faults injected on purpose into an emulated node (`mtc
 * chaos`, provider_node_fault): one task of a job stopped or killed with its
 * descendants — a task is found by what /proc says of it, never by name: its
 * environment names the job, the node and this cluster's slurm.conf, and its
 * SLURM_TASK_PID is its own pid (the batch script and srun have none of
 * their own) — or the node's slurmd (its recorded pid) killed -9, which
 * supervision restarts. */
#include "provider/local.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TASKS 1024
#define MAX_TREE 4096

struct task {
    pid_t pid;
    int rank; /* SLURM_PROCID */
};

static int all_digits(const char *s)
{
    return s && *s && strspn(s, "0123456789") == strlen(s);
}

/* 1 when pid's environment makes it a task of job on node of the cluster
 * whose slurm.conf is conf; *rank gets its SLURM_PROCID. */
static int is_task(pid_t pid, const char *conf, const char *node, const char *job, int *rank)
{
    char path[64], self[24];
    size_t len = 0;
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    char *env = mtc_read_file(path, &len);
    if (!env)
        return 0;
    snprintf(self, sizeof(self), "%d", (int)pid);
    const char *c = mtc_environ_get(env, len, "SLURM_CONF"), *n = mtc_environ_get(env, len, "SLURMD_NODENAME"),
               *j = mtc_environ_get(env, len, "SLURM_JOB_ID"), *t = mtc_environ_get(env, len, "SLURM_TASK_PID"),
               *step = mtc_environ_get(env, len, "SLURM_STEP_ID"), *r = mtc_environ_get(env, len, "SLURM_PROCID");
    /* the job's rank watcher (MTC_RANK_WATCH, recipes/launch.c) is a task but no rank */
    int yes = c && n && j && t && strcmp(c, conf) == 0 && strcmp(n, node) == 0 &&
              strcmp(j, job) == 0 && strcmp(t, self) == 0 && all_digits(step) && all_digits(r) &&
              !mtc_environ_get(env, len, "MTC_RANK_WATCH");
    if (yes)
        *rank = atoi(r);
    free(env);
    return yes;
}

static int by_rank(const void *a, const void *b)
{
    const struct task *x = a, *y = b;
    return x->rank != y->rank ? (x->rank > y->rank) - (x->rank < y->rank)
                              : (x->pid > y->pid) - (x->pid < y->pid);
}

/* The tasks of job on node, in rank order, into out (at most max). */
static size_t job_tasks(const struct head *c, const char *node, const char *job, struct task *out,
                        size_t max)
{
    size_t n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && n < max && (e = readdir(d))) {
        int rank;
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(e->d_name);
        if (is_task(pid, c->conf, node, job, &rank) && mtc_pid_alive(pid))
            out[n++] = (struct task){pid, rank};
    }
    if (d)
        closedir(d);
    qsort(out, n, sizeof(*out), by_rank);
    return n;
}

static int is_pid(pid_t pid, void *arg)
{
    return pid == *(const pid_t *)arg;
}

/* Stop (hang) or kill the task and its descendants: all stopped first, so
 * that none reacts to the others' end before it is killed itself. */
static void signal_tree(pid_t root, int kill_it)
{
    pid_t one = root, *pids = malloc(MAX_TREE * sizeof(*pids));
    size_t n = pids ? mtc_proc_tree(is_pid, &root, pids, MAX_TREE) : 0;
    if (n == 0) { /* out of memory, or it ended meanwhile: the task alone */
        free(pids);
        pids = &one;
        n = 1;
    }
    for (size_t i = 0; i < n; i++)
        kill(pids[i], SIGSTOP);
    for (size_t i = 0; kill_it && i < n; i++)
        kill(pids[i], SIGKILL);
    if (pids != &one)
        free(pids);
}

int local_node_fault(struct provider *p, const char *id, const json_t *spec, const char *node,
                     enum provider_fault f, const char *job, unsigned pick,
                     struct provider_fault_hit *hit, mtc_error_t *err)
{
    (void)spec;
    struct head c;
    if (head_init(&c, p, id, err) < 0)
        return -1;
    const struct lnode *ln;
    struct layout *l = local_layout_node(&c, node, "node", &ln, err);
    if (!l)
        return -1;
    free(l);
    if (f == PROVIDER_FAULT_KILL_SLURMD) {
        pid_t pid = head_slurmd_running(&c, node);
        if (pid <= 0 || kill(pid, SIGKILL) < 0) {
            errno = ENOENT;
            return errprintf(err, "node %s: no slurmd runs", node);
        }
        hit->pid = pid;
        log_msg(LOG_NOTICE, "cluster %s: chaos: slurmd of %s (pid %d) killed", id, node, (int)pid);
        return 0;
    }
    struct task *tasks = malloc(MAX_TASKS * sizeof(*tasks));
    if (!tasks)
        return errprintf(err, "out of memory");
    size_t n = job_tasks(&c, node, job, tasks, MAX_TASKS);
    if (n == 0) {
        free(tasks);
        errno = ENOENT;
        return errprintf(err, "node %s runs no task of Slurm job %s now", node, job);
    }
    struct task t = tasks[pick % n];
    free(tasks);
    signal_tree(t.pid, f == PROVIDER_FAULT_KILL_TASK);
    *hit = (struct provider_fault_hit){t.pid, t.rank, (int)n};
    log_msg(LOG_NOTICE, "cluster %s: chaos: rank %d of job %s on %s (pid %d) %s", id, t.rank, job,
            node, (int)t.pid, f == PROVIDER_FAULT_KILL_TASK ? "killed" : "stopped");
    return 0;
}
