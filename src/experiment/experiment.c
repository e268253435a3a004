/* experiment: experiment directories ($MTC_HOME/experiments/<name>/<name>_<ts>/
 * <task>/ with the script, config.json, <JOB_ID>.log, checkpoints and logs) and
 * the state of their jobs from squeue, `scontrol show job`, or the exit file. */
#include "experiment/experiment.h"
#include "slurm/slurm.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int exp_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 64 || !isalnum((unsigned char)name[0]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
            return 0;
    return 1;
}

/* A directory the job writes that lives outside the task directory gets a
 * link from it, so the experiment directory shows everything. */
static int dir_and_link(const char *task_dir, const char *name, const char *target,
                        mtc_error_t *err)
{
    if (mtc_mkdir_p(target, 0755) < 0)
        return errprintf(err, "cannot create %s: %s", target, strerror(errno));
    char link[PATH_MAX + 64];
    snprintf(link, sizeof(link), "%s/%s", task_dir, name);
    if (strcmp(link, target) == 0)
        return 0;
    if (symlink(target, link) < 0 && errno != EEXIST)
        return errprintf(err, "cannot link %s: %s", link, strerror(errno));
    return 0;
}

static int create(const json_t *cfg, const char *script, int submitting, mtc_error_t *err)
{
    const char *td = exp_task_dir(cfg);
    /* the run directory (<exp>/<exp>_<ts>) is claimed: two runs never share one */
    char run_dir[PATH_MAX];
    exp_run_dir(cfg, run_dir, sizeof(run_dir));
    char *slash = strrchr(run_dir, '/');
    if (slash) {
        *slash = '\0';
        int rc = mtc_mkdir_p(run_dir, 0755);
        *slash = '/';
        if (rc < 0)
            return errprintf(err, "cannot create %s: %s", run_dir, strerror(errno));
    }
    if (mkdir(run_dir, 0755) < 0) {
        int e = errno;
        errprintf(err, "%s: %s", run_dir,
                  e == EEXIST ? "another run of this experiment started this second"
                              : strerror(e));
        errno = e;
        return -1;
    }
    if (mtc_mkdir_p(td, 0755) < 0)
        return errprintf(err, "cannot create %s: %s", td, strerror(errno));
    if (dir_and_link(td, "checkpoints", exp_checkpoint_dir(cfg), err) < 0 ||
        dir_and_link(td, "logs", exp_log_dir(cfg), err) < 0)
        return -1;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/sbatch.sh", td);
    if (mtc_write_file_atomic_opt(path, script, strlen(script), 0755,
                                  submitting ? MTC_WRITE_NO_DIRSYNC : 0) < 0)
        return errprintf(err, "cannot write %s: %s", path, strerror(errno));
    return exp_config_save(cfg, submitting ? MTC_WRITE_NO_FSYNC : 0, err);
}

int exp_create(const json_t *cfg, const char *script, mtc_error_t *err)
{
    return create(cfg, script, 0, err);
}

int exp_create_submitting(const json_t *cfg, const char *script, mtc_error_t *err)
{
    return create(cfg, script, 1, err);
}

void exp_remove(const json_t *cfg)
{
    char run_dir[PATH_MAX], *slash;
    exp_run_dir(cfg, run_dir, sizeof(run_dir));
    mtc_rm_rf(run_dir);
    for (int up = 0; up < 2 && (slash = strrchr(run_dir, '/')); up++) {
        *slash = '\0';
        if (rmdir(run_dir) < 0)
            break;
    }
}

int exp_set_job(json_t *cfg, const char *job_id, mtc_error_t *err)
{
    json_object_set_new(cfg, "jobId", json_string(job_id));
    return exp_config_save(cfg, 0, err);
}

/* A run's file, in a directory its user may write: opened with the
 * thread's ids (mtcd: the job's user) as a regular file only, so a FIFO
 * planted there never blocks the reader and /proc is never read
 * (mtc_open_as_user). An fd, or -1 + errno. */
static int open_run_file(const char *dir, const char *name, const char *suffix)
{
    char path[PATH_MAX + 80];
    if (snprintf(path, sizeof(path), "%s/%s%s", dir, name, suffix) >= (int)sizeof(path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mtc_open_as_user(path, 0);
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Runs of one experiment (their config objects) appended to out. */
static void add_runs(json_t *out, const char *exps, const char *name)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof(dir), "%s/%s", exps, name) >= (int)sizeof(dir))
        return;
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char td[PATH_MAX * 2];
        if (snprintf(td, sizeof(td), "%s/%s/%s", dir, e->d_name, name) >= (int)sizeof(td))
            continue;
        json_t *c = exp_config_load(td);
        if (c)
            json_array_append_new(out, c);
    }
    closedir(d);
}

static int newest_first(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "timestamp"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "timestamp"));
    return x < y ? 1 : x > y ? -1 : 0;
}

static json_t *sorted(json_t *arr)
{
    size_t n = json_array_size(arr);
    json_t **v = calloc(n ? n : 1, sizeof(*v));
    for (size_t i = 0; v && i < n; i++)
        v[i] = json_incref(json_array_get(arr, i));
    if (v)
        qsort(v, n, sizeof(*v), newest_first);
    json_t *out = json_array();
    for (size_t i = 0; v && i < n; i++)
        json_array_append_new(out, v[i]);
    free(v);
    json_decref(arr);
    return out;
}

json_t *exp_list(const char *home, mtc_error_t *err)
{
    char exps[PATH_MAX];
    snprintf(exps, sizeof(exps), "%s/experiments", home);
    json_t *out = json_array();
    DIR *d = opendir(exps);
    if (!d) {
        if (errno == ENOENT)
            return out;
        json_decref(out);
        errprintf(err, "cannot read %s: %s", exps, strerror(errno));
        return NULL;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            add_runs(out, exps, e->d_name);
    closedir(d);
    return sorted(out);
}

json_t *exp_find(const char *home, const char *ref, mtc_error_t *err)
{
    if (strchr(ref, '/')) {
        json_t *c = is_dir(ref) ? exp_config_load(ref) : NULL;
        if (!c)
            errprintf(err, "%s: not an experiment task directory (no config.json)", ref);
        return c;
    }
    if (!exp_name_valid(ref)) {
        errprintf(err, "experiment \"%s\": not a valid name", ref);
        return NULL;
    }
    json_t *all = exp_list(home, err);
    if (!all)
        return NULL;
    size_t i;
    json_t *c;
    json_array_foreach(all, i, c)
    {
        if (strcmp(exp_experiment(c), ref) == 0 ||
            strcmp(exp_run_id(c), ref) == 0) {
            json_incref(c);
            json_decref(all);
            return c;
        }
    }
    char list[200] = "";
    size_t used = 0;
    json_array_foreach(all, i, c)
    {
        const char *n = exp_experiment(c);
        if (strstr(list, n))
            continue;
        int w = snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "", n);
        if (w < 0 || used + (size_t)w >= sizeof(list))
            break;
        used += (size_t)w;
    }
    json_decref(all);
    errprintf(err, "no experiment \"%s\" in %s/experiments (known: %s)", ref, home,
              *list ? list : "none");
    return NULL;
}

int exp_slurm_conf(const json_t *cfg, const char **conf)
{
    /* the run's own cluster, whatever cluster this shell points at */
    const char *c = exp_recorded_conf(cfg);
    *conf = c && *c ? c : NULL;
    if (!*conf) {
        c = getenv("SLURM_CONF");
        if (!c || !*c)
            c = "/etc/slurm/slurm.conf";
    }
    /* a deleted cluster: Slurm's clients would retry its missing config for a minute */
    if (!mtc_path_exists(c)) {
        errno = ENOENT;
        return -1;
    }
    return 0;
}

char *exp_exit_record(const json_t *cfg, const char *job)
{
    const char *td = exp_task_dir(cfg);
    int fd = td && job ? open_run_file(td, job, ".exit") : -1;
    if (fd < 0)
        return NULL;
    char buf[256]; /* a status or CANCELLED: a line */
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0)
        return NULL;
    buf[n] = '\0';
    return strdup(buf);
}

int exp_record_cancelled(const json_t *cfg)
{
    const char *td = exp_task_dir(cfg), *job = exp_job_id(cfg);
    char path[PATH_MAX + 64];
    if (!td || !job ||
        snprintf(path, sizeof(path), "%s/%s.exit", td, job) >= (int)sizeof(path)) {
        errno = ENOENT;
        return -1;
    }
    return mtc_write_file_atomic(path, "CANCELLED\n", 10, 0644);
}

static const char *from_exit_file(const json_t *cfg, const char *job, char *buf, size_t len)
{
    char *s = exp_exit_record(cfg, job);
    if (!s)
        return NULL;
    /* the script writes its exit status; `mtc experiment cancel` writes CANCELLED */
    snprintf(buf, len, "%s",
             strncmp(s, "CANCELLED", 9) == 0 ? "CANCELLED"
             : atoi(s) == 0                  ? "COMPLETED"
                                             : "FAILED");
    free(s);
    return buf;
}

const char *exp_job_state(const json_t *cfg, char *buf, size_t len)
{
    const char *job = exp_job_id(cfg);
    if (!job) {
        snprintf(buf, len, "NOT_SUBMITTED");
        return buf;
    }
    if (exp_is_local(cfg)) {
        if (from_exit_file(cfg, job, buf, len))
            return buf;
        snprintf(buf, len, "%s", mtc_pid_alive((pid_t)atoi(job)) ? "RUNNING" : "FAILED");
        return buf;
    }
    const char *conf;
    char slurm[64];
    int known = exp_slurm_conf(cfg, &conf) == 0 &&
                slurm_job_state(conf, job, slurm, sizeof(slurm)) == 0;
    return exp_job_state_of(cfg, known ? slurm : NULL, buf, len);
}

const char *exp_job_state_of(const json_t *cfg, const char *slurm, char *buf, size_t len)
{
    const char *job = exp_job_id(cfg);
    if (slurm)
        snprintf(buf, len, "%s", slurm);
    else if (!job || !from_exit_file(cfg, job, buf, len))
        snprintf(buf, len, "UNKNOWN");
    return buf;
}

int exp_state_final(const char *s)
{
    static const char *const live[] = {
        "PENDING",     "RUNNING",      "CONFIGURING",   "COMPLETING",    "REQUEUED",
        "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING",      "SUSPENDED",     "STOPPED",
        "SIGNALING",   "STAGE_OUT",    "RESV_DEL_HOLD", "NOT_SUBMITTED", NULL};
    for (int i = 0; live[i]; i++)
        if (strcmp(s, live[i]) == 0)
            return 0;
    return 1;
}

void exp_print_status(FILE *f, const json_t *cfg, const char *state)
{
    int local = exp_is_local(cfg);
    fprintf(f, "Experiment Status for %s\n\n", exp_run_id(cfg));
    fprintf(f, "Task 0: %s\n", mtc_json_str(cfg, "taskName"));
    fprintf(f, "- Status: %s\n", state);
    fprintf(f, "- Executor: %s\n", local ? "LocalExecutor" : "SlurmExecutor on @localhost");
    fprintf(f, "- Job id: %s\n", exp_job_id(cfg) ?: "-");
    fprintf(f, "- Local Directory: %s\n", exp_task_dir(cfg));
}
