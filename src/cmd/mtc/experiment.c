/* experiment: `mtc experiment list|status|logs|cancel` over the experiment
 * directories `mtc run` creates under $MTC_HOME/experiments (the cluster's
 * experiment root's experiments/ when `mtc env` names one). */
#include "cli.h"
#include "experiment/experiment.h"
#include "recipes/recipes.h"
#include "slurm/slurm.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* $MTC_EXPERIMENT_ROOT when `mtc env` set one, else $MTC_HOME. */
const char *cli_experiments_home(const struct cli *c)
{
    const char *root = getenv("MTC_EXPERIMENT_ROOT");
    return root && root[0] == '/' ? root : c->home;
}

static const char list_use[] = "mtc experiment list [--json]",
                  status_use[] = "mtc experiment status NAME|RUN_ID [--json]",
                  logs_use[] = "mtc experiment logs [-f] NAME|RUN_ID",
                  cancel_use[] = "mtc experiment cancel NAME|RUN_ID";

static int e_list(struct cli *c, int argc, char **argv)
{
    if (cli_json_only(c, argc, argv, list_use))
        return 2;
    mtc_error_t err = {""};
    json_t *all = exp_list(cli_experiments_home(c), &err);
    if (!all)
        return cli_fail("%s", err.text);
    size_t i;
    json_t *e;
    char state[64];
    if (!c->json)
        printf("%-34s %-28s %-8s %-8s %s\n", "RUN", "RECIPE", "EXECUTOR", "JOB", "STATUS");
    json_array_foreach(all, i, e)
    {
        exp_job_state(e, state, sizeof(state));
        if (c->json)
            json_object_set_new(e, "state", json_string(state));
        else
            printf("%-34s %-28s %-8s %-8s %s\n", exp_run_id(e) ?: "-",
                   mtc_json_str_or(e, "recipe", "-"), mtc_json_str_or(e, "executor", "-"),
                   exp_job_id(e) ?: "-", state);
    }
    if (c->json)
        cli_print_json(all);
    json_decref(all);
    return 0;
}

/* The one argument naming an experiment (name, run id or task directory). */
static json_t *one(struct cli *c, int argc, char **argv, const char *use, int *follow)
{
    const char *ref = NULL;
    for (int i = 1; i < argc; i++) {
        if (follow && (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--follow") == 0))
            *follow = 1;
        else if (strcmp(argv[i], "--json") == 0)
            c->json = 1;
        else if (argv[i][0] == '-' || ref)
            return cli_fail("unexpected argument \"%s\"\nusage: %s", argv[i], use), NULL;
        else
            ref = argv[i];
    }
    if (!ref)
        return cli_fail("usage: %s", use), NULL;
    mtc_error_t err = {""};
    json_t *cfg = exp_find(cli_experiments_home(c), ref, &err);
    if (!cfg)
        cli_fail("%s", err.text);
    return cfg;
}

static int e_status(struct cli *c, int argc, char **argv)
{
    json_t *cfg = one(c, argc, argv, status_use, NULL);
    if (!cfg)
        return 1;
    char state[64], msg[256];
    exp_job_state(cfg, state, sizeof(state));
    struct exp_track *t = malloc(sizeof(*t));
    if (!t)
        return json_decref(cfg), 1;
    exp_track_init(t, cfg);
    double now = (double)mtc_now_ms() / 1000.0;
    exp_track_update(t, now);
    if (t->stopped > 0) /* a start stopped by a signal or requeued: preempted? */
        exp_track_preemptions(t, cfg, now);
    struct exp_monitor mon;
    exp_monitor_from(cfg, &mon);
    int alerts = exp_monitor_check(t, &mon, now, msg, sizeof(msg));
    if (c->json) {
        json_object_set_new(cfg, "state", json_string(state));
        json_object_set_new(cfg, "progress", exp_track_json(t, alerts, msg));
        cli_print_json(cfg);
    } else {
        exp_print_status(stdout, cfg, state);
        exp_track_print(stdout, t, alerts, msg);
    }
    free(t);
    json_decref(cfg);
    return 0;
}

/* Copy what was appended to path since *off to stdout. */
static void drain(const char *path, long *off)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fseek(f, *off, SEEK_SET) == 0) {
        char buf[8192];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
            fwrite(buf, 1, n, stdout);
            *off += (long)n;
        }
        fflush(stdout);
    }
    fclose(f);
}

static int e_logs(struct cli *c, int argc, char **argv)
{
    int follow = 0;
    json_t *cfg = one(c, argc, argv, logs_use, &follow);
    if (!cfg)
        return 1;
    char path[PATH_MAX + 64], state[64];
    exp_log_path(cfg, path, sizeof(path));
    long off = 0;
    if (!follow && !mtc_path_exists(path)) {
        json_decref(cfg);
        return cli_fail("%s: no log yet (the job has not started)", path);
    }
    drain(path, &off);
    /* Follow until the job is over, then print what it wrote last. A requeued
     * job keeps its id and appends to the same log. */
    while (follow) {
        exp_job_state(cfg, state, sizeof(state));
        if (exp_state_final(state)) {
            mtc_sleep_ms(300);
            drain(path, &off);
            break;
        }
        for (int i = 0; i < 10; i++) {
            mtc_sleep_ms(100);
            drain(path, &off);
        }
    }
    json_decref(cfg);
    return 0;
}

static int e_cancel(struct cli *c, int argc, char **argv)
{
    json_t *cfg = one(c, argc, argv, cancel_use, NULL);
    if (!cfg)
        return 1;
    const char *job = exp_job_id(cfg);
    int rc = 0;
    if (!job) {
        rc = cli_fail("%s was never submitted", exp_run_id(cfg) ?: "-");
    } else if (exp_is_local(cfg)) {
        pid_t pid = (pid_t)atoi(job);
        /* the script runs in its own session: signal the group (trainer and mpirun too) */
        if (pid > 1 && mtc_pid_alive(pid)) {
            if (kill(-pid, SIGTERM) < 0 && kill(pid, SIGTERM) < 0)
                rc = cli_fail("cannot stop pid %d: %s", (int)pid, strerror(errno));
            else
                exp_record_cancelled(cfg);
        }
    } else {
        const char *conf;
        mtc_error_t err = {""};
        if (exp_slurm_conf(cfg, &conf) < 0)
            rc = cli_fail("job %s: the run's Slurm cluster is gone (no slurm.conf)", job);
        else if (slurm_job_cancel(conf, job, &err) < 0)
            rc = cli_fail("%s", err.text);
    }
    if (rc == 0)
        printf("cancelled %s (job %s)\n", exp_run_id(cfg) ?: "-", job);
    json_decref(cfg);
    return rc;
}

static const struct cli_cmd exp_cmds[] = {
    {"list", e_list, "runs under $MTC_HOME/experiments, newest first, with their job state",
     list_use},
    {"status", e_status, "the status block of an experiment's newest run", status_use},
    {"logs", e_logs, "print (-f: follow) the run's <JOB_ID>.log", logs_use},
    {"cancel", e_cancel, "cancel the run's job", cancel_use},
    {NULL, NULL, NULL, NULL},
};

int cmd_experiment(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc experiment", exp_cmds, argc - 1, argv + 1);
}
