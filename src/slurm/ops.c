/* ops: Slurm node and job operations — drain/resume/down, the jobs on a node,
 * a job's state and nodes, requeue/release/cancel, partitions and sbatch — the
 * one place the controller, the CLI and mtc-agent drive scontrol and squeue. */
#include "slurm/slurm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPS_TIMEOUT_MS 30000

static const char *const node_op_names[] = {
    [SLURM_NODE_DRAIN] = "drain", [SLURM_NODE_RESUME] = "resume", [SLURM_NODE_DOWN] = "down"};

static void trim(char *s)
{
    size_t n = s ? strlen(s) : 0;
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
        s[--n] = '\0';
}

int slurm_node_set(const char *conf, const char *node, enum slurm_node_op op, const char *reason,
                   mtc_error_t *err)
{
    char arg_node[96], arg_state[32], arg_reason[400] = "";
    snprintf(arg_node, sizeof(arg_node), "nodename=%s", node);
    snprintf(arg_state, sizeof(arg_state), "state=%s", node_op_names[op]);
    if (reason && op != SLURM_NODE_RESUME) {
        snprintf(arg_reason, sizeof(arg_reason), "reason=%.380s", reason);
        for (char *p = arg_reason; *p; p++) /* one line, no quotes for scontrol's parser */
            if (*p == '\n' || *p == '\r' || *p == '"')
                *p = ' ';
    }
    char *argv[] = {"scontrol", "update", arg_node, arg_state, *arg_reason ? arg_reason : NULL,
                    NULL};
    char what[160];
    snprintf(what, sizeof(what), "scontrol update %s %s", arg_node, arg_state);
    return slurm_cmd_ok(conf, argv, NULL, what, err);
}

/* Lines of out as a JSON array of strings (out freed). */
static json_t *lines(char *out)
{
    json_t *arr = json_array();
    char *save = NULL;
    for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (*l)
            json_array_append_new(arr, json_string(l));
    free(out);
    return arr;
}

json_t *slurm_node_jobs(const char *conf, const char *node, mtc_error_t *err)
{
    char arg_w[96], *out = NULL;
    snprintf(arg_w, sizeof(arg_w), "--nodelist=%s", node);
    char *argv[] = {"squeue", "-h", "-o", "%i", arg_w, NULL};
    if (slurm_cmd_ok(conf, argv, &out, "squeue", err) < 0)
        return NULL;
    return lines(out);
}

json_t *slurm_jobs(const char *conf, mtc_error_t *err)
{
    char *out = NULL;
    char *argv[] = {"squeue", "-h", "-o", "%A", NULL};
    if (slurm_cmd_ok(conf, argv, &out, "squeue", err) < 0)
        return NULL;
    return lines(out);
}

int slurm_job_state(const char *conf, const char *job, char *state, size_t len)
{
    char arg_j[64], *out = NULL;
    snprintf(arg_j, sizeof(arg_j), "--jobs=%s", job);
    char *argv[] = {"squeue", "-h", "-o", "%T", arg_j, NULL};
    *state = '\0';
    if (slurm_cmd_ok(conf, argv, &out, "squeue", NULL) == 0) {
        trim(out);
        if (out && *out && !strpbrk(out, " \n"))
            snprintf(state, len, "%s", out);
        free(out);
    }
    if (*state)
        return 0;
    /* finished jobs leave squeue; slurmctld still knows them for a while */
    out = NULL;
    char *sc[] = {"scontrol", "show", "job", "-o", (char *)job, NULL};
    if (slurm_cmd_ok(conf, sc, &out, "scontrol show job", NULL) == 0 && out) {
        const char *p = strstr(out, "JobState=");
        if (p)
            snprintf(state, len, "%.*s", (int)strcspn(p + 9, " \n"), p + 9);
    }
    free(out);
    if (*state)
        return 0;
    errno = ENOENT;
    return -1;
}

int slurm_job_restarts(const char *conf, const char *job)
{
    char *out = NULL;
    char *sc[] = {"scontrol", "show", "job", "-o", (char *)job, NULL};
    int n = -1;
    if (slurm_cmd_ok(conf, sc, &out, "scontrol show job", NULL) == 0 && out) {
        const char *p = strstr(out, " Restarts=");
        if (p)
            n = atoi(p + 10);
    }
    free(out);
    return n;
}

json_t *slurm_job_states(const char *conf, const char *job, mtc_error_t *err)
{
    char *out = NULL;
    char *all[] = {"scontrol", "show", "job", "-o", NULL};
    char *one[] = {"scontrol", "show", "job", "-o", (char *)job, NULL};
    mtc_error_t e2 = {""};
    json_t *o = json_object();
    if (slurm_cmd_ok(conf, job ? one : all, &out, "scontrol show job", &e2) < 0) {
        /* a job slurmctld has forgotten is not an error: it knows none of them */
        if (job && strstr(e2.text, "Invalid job id"))
            return o;
        json_decref(o);
        errprintf(err, "%s", e2.text);
        errno = EIO;
        return NULL;
    }
    json_decref(o);
    o = slurm_job_states_parse(out);
    free(out);
    return o;
}

json_t *slurm_job_states_parse(const char *text)
{
    json_t *o = json_object();
    char *copy = strdup(text ? text : "");
    for (char *line = copy, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        const char *st = strstr(line, " JobState="), *rs = strstr(line, " Restarts=");
        const char *why = strstr(line, " Reason="), *ac = strstr(line, " Account=");
        if (strncmp(line, "JobId=", 6) != 0 || !st)
            continue; /* "No jobs in the system" */
        char id[32], state[32], reason[64], account[128];
        snprintf(id, sizeof(id), "%.*s", (int)strcspn(line + 6, " "), line + 6);
        snprintf(state, sizeof(state), "%.*s", (int)strcspn(st + 10, " "), st + 10);
        snprintf(reason, sizeof(reason), "%.*s", why ? (int)strcspn(why + 8, " ") : 0,
                 why ? why + 8 : "");
        snprintf(account, sizeof(account), "%.*s", ac ? (int)strcspn(ac + 9, " ") : 0,
                 ac ? ac + 9 : "");
        if (strcmp(account, "(null)") == 0) /* no accounting */
            account[0] = '\0';
        json_t *j = json_pack("{s:s, s:i, s:s, s:s}", "state", state, "restarts",
                              rs ? atoi(rs + 10) : 0, "reason", reason, "account", account);
        if (j)
            json_object_set_new(o, id, j);
    }
    free(copy);
    return o;
}

int slurm_job_requeue(const char *conf, const char *job, mtc_error_t *err)
{
    char *argv[] = {"scontrol", "requeue", (char *)job, NULL};
    return slurm_cmd_ok(conf, argv, NULL, "scontrol requeue", err);
}

int slurm_job_release(const char *conf, const char *job, mtc_error_t *err)
{
    char arg_id[64];
    snprintf(arg_id, sizeof(arg_id), "JobId=%s", job);
    char *argv[] = {"scontrol", "update", arg_id, "StartTime=now+1", NULL};
    return slurm_cmd_ok(conf, argv, NULL, "scontrol update StartTime=now+1", err);
}

int slurm_job_cancel(const char *conf, const char *job, mtc_error_t *err)
{
    char *argv[] = {"scancel", (char *)job, NULL};
    return slurm_cmd_ok(conf, argv, NULL, "scancel", err);
}

int slurm_cancel_all(const char *conf, int wait_ms)
{
    json_t *jobs = slurm_jobs(conf, NULL);
    if (!jobs || json_array_size(jobs) == 0) {
        json_decref(jobs);
        return 0;
    }
    size_t i, n = json_array_size(jobs);
    char **argv = calloc(n + 2, sizeof(*argv));
    if (!argv) {
        json_decref(jobs);
        return -1;
    }
    argv[0] = "scancel";
    json_t *j;
    json_array_foreach(jobs, i, j) argv[i + 1] = (char *)json_string_value(j);
    slurm_cmd(conf, argv, NULL, OPS_TIMEOUT_MS);
    free(argv);
    json_decref(jobs);
    for (int64_t end = mtc_now_ms() + wait_ms; mtc_now_ms() < end; mtc_sleep_ms(200)) {
        json_t *left = slurm_jobs(conf, NULL);
        size_t k = left ? json_array_size(left) : 0;
        json_decref(left);
        if (k == 0)
            return 0;
    }
    errno = ETIMEDOUT;
    return -1;
}

json_t *slurm_job_nodes(const char *conf, const char *job, mtc_error_t *err)
{
    char *out = NULL;
    char *sq[] = {"squeue", "-h", "-j", (char *)job, "-o", "%N", NULL};
    if (slurm_cmd_ok(conf, sq, &out, "squeue", err) < 0)
        return NULL;
    trim(out);
    if (!out || !*out) {
        free(out);
        errno = ENOENT;
        errprintf(err, "job %s is not running", job);
        return NULL;
    }
    char *hosts = NULL;
    char *hl[] = {"scontrol", "show", "hostnames", out, NULL};
    int rc = slurm_cmd_ok(conf, hl, &hosts, "scontrol show hostnames", err);
    free(out);
    return rc < 0 ? NULL : lines(hosts);
}

json_t *slurm_partitions(const char *conf, mtc_error_t *err)
{
    return slurm_partitions_cached(conf, 0, err);
}

json_t *slurm_partitions_cached(const char *conf, int max_age_ms, mtc_error_t *err)
{
    char *out = NULL;
    char *argv[] = {"scontrol", "show", "partition", "-o", NULL};
    if (slurm_cmd_cached(conf, argv, max_age_ms, &out, "scontrol show partition", err) < 0)
        return NULL;
    json_t *parts = json_object();
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *p = strstr(line, "PartitionName=");
        if (!p)
            continue;
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(p + 14, " "), p + 14);
        char *t = strstr(line, " TotalNodes=");
        char *d = strstr(line, " Default=YES");
        json_object_set_new(
            parts, name,
            json_pack("{s:i, s:b}", "nodes", t ? atoi(t + 12) : 0, "default", d != NULL));
    }
    free(out);
    return parts;
}

/* sbatch's answer (exit status rc, output o, owned) into job and *out (or
 * freed): 0, or -1 + errno EIO when it submitted nothing. */
static int submitted(int rc, char *o, char job[32], char **out)
{
    trim(o);
    *job = '\0';
    if (rc == 0 && o) {
        /* --parsable prints "JOBID" or "JOBID;CLUSTER" on its last line */
        const char *last = strrchr(o, '\n');
        last = last ? last + 1 : o;
        snprintf(job, 32, "%.*s", (int)strspn(last, "0123456789"), last);
    }
    if (out)
        *out = o;
    else
        free(o);
    if (rc != 0 || !*job) {
        errno = EIO;
        return -1;
    }
    return 0;
}

int slurm_submit(const char *conf, const char *script, char job[32], char **out)
{
    char *argv[] = {"sbatch", "--parsable", (char *)script, NULL};
    char *o = NULL;
    int rc = slurm_cmd_env(conf, NULL, argv, &o, 60000);
    return submitted(rc, o, job, out);
}

int slurm_submit_env(const char *conf, char *const env[], const struct mtc_user *as,
                     const char *script, char job[32], char **out)
{
    char *o = NULL;
    char *plain[] = {"sbatch", "--parsable", (char *)script, NULL};
    /* util-linux's setpriv (Essential in Debian): the ids and the user's
     * groups are set, then sbatch runs — nothing of root's stays */
    char uid[24], gid[24];
    char *setpriv[] = {"setpriv", "--reuid", uid,           "--regid", gid, "--init-groups",
                       "--",      "sbatch",  "--parsable", (char *)script, NULL};
    /* sbatch exports its environment into the job: the user's login
     * environment, SLURM_CONF and what the run sets — nothing of mtcd's */
    struct mtc_login_env login;
    mtc_error_t e2 = {""};
    if (mtc_login_env(as, &login, &e2) < 0) {
        if (out)
            *out = strdup(e2.text);
        errno = EIO;
        return -1;
    }
    char cenv[4200];
    char *all[48] = {NULL};
    int n = 0;
    for (int i = 0; login.env[i]; i++)
        all[n++] = login.env[i];
    if (conf && *conf) {
        snprintf(cenv, sizeof(cenv), "SLURM_CONF=%s", conf);
        all[n++] = cenv;
    }
    for (int i = 0; env && env[i] && n < 47; i++)
        all[n++] = env[i];
    if (as) {
        snprintf(uid, sizeof(uid), "%u", (unsigned)as->uid);
        snprintf(gid, sizeof(gid), "%u", (unsigned)as->gid);
    }
    struct mtc_io io = {.capture = MTC_IO_MERGE, .only_env = 1};
    int rc = mtc_run_io(as ? setpriv : plain, all, &io, 60000);
    o = io.out;
    return submitted(rc, o, job, out);
}

