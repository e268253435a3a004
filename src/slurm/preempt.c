/* preempt: which job preempted a job, and when — from slurmctld's own log,
 * the one place Slurm 22.05 names the preemptor. slurm_job_preempt() logs
 * (at info, which mtc's slurm.conf sets)
 *
 *   [2026-12-03T14:40:01.250] preempted JobId=5 has been requeued to reclaim resources for JobId=7
 *
 * or, when the preempted job's QoS has a GraceTime, at the moment of the
 * preemption: "setting 30 sec preemption grace time for JobId=5 to reclaim
 * resources for JobId=7" (its requeue at the end of the grace names no
 * preemptor). sacct records the preempted attempt as PREEMPTED but not by
 * whom, and scontrol shows a PreemptTime only until the job starts again:
 * neither says which job took the nodes. The preemptor's QoS comes from
 * scontrol (sacct once slurmctld forgot the job). Where the log cannot be
 * read (not the controller's host, not root), sacct's PREEMPTED attempts
 * still say when the job was preempted, not by whom. */
#include "slurm/slurm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* 1 when %pJ's rendering tok ("JobId=5", an array task's "JobId=4_1(5)")
 * names job. */
static int names_job(const char *tok, size_t n, const char *job)
{
    size_t j = strlen(job);
    if (n == j && strncmp(tok, job, n) == 0)
        return 1;
    return n > j + 2 && tok[n - 1] == ')' && tok[n - j - 2] == '(' &&
           strncmp(tok + n - j - 1, job, j) == 0;
}

/* slurmctld's "[YYYY-MM-DDTHH:MM:SS.mmm]" (LogTimeFormat iso8601_ms, local
 * time) as epoch seconds; 0 when the line has none. */
static double line_time(const char *line)
{
    struct tm tm = {0};
    const char *rest = line[0] == '[' ? strptime(line + 1, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!rest)
        return 0;
    double frac = *rest == '.' ? strtod(rest, NULL) : 0;
    tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    return t == (time_t)-1 ? 0 : (double)t + frac;
}

int slurm_preemptions_parse(FILE *log, const char *job, struct slurm_preemption *out, int max)
{
    static const char *const marks[] = {"preempted JobId=", "preemption grace time for JobId="};
    static const char for_[] = " to reclaim resources for JobId=";
    char line[1024], prev[32] = "";
    int n = 0;
    while (fgets(line, sizeof(line), log)) {
        const char *p = NULL, *f = strstr(line, for_);
        for (size_t i = 0; f && !p && i < sizeof(marks) / sizeof(marks[0]); i++)
            if ((p = strstr(line, marks[i])))
                p += strlen(marks[i]);
        if (!p || p > f || !names_job(p, strcspn(p, " "), job))
            continue;
        const char *by = f + sizeof(for_) - 1;
        size_t len = strcspn(by, " \n");
        if (len == 0 || len >= sizeof(out->by))
            continue;
        /* a grace line, then the requeue that names the same preemptor: one */
        if (strncmp(prev, by, len) == 0 && prev[len] == '\0')
            continue;
        snprintf(prev, sizeof(prev), "%.*s", (int)len, by);
        if (n < max) {
            memset(&out[n], 0, sizeof(out[n]));
            out[n].time = line_time(line);
            snprintf(out[n].by, sizeof(out[n].by), "%.*s", (int)len, by);
        }
        n++;
    }
    return n;
}

/* The value of key in slurm.conf's text ("SlurmctldLogFile"), into buf. */
static int conf_value(const char *conf, const char *key, char *buf, size_t len)
{
    FILE *f = fopen(conf, "re");
    char line[4096];
    size_t k = strlen(key);
    *buf = '\0';
    while (f && fgets(line, sizeof(line), f))
        if (strncasecmp(line, key, k) == 0 && line[k] == '=') {
            snprintf(buf, len, "%.*s", (int)strcspn(line + k + 1, " \t\n#"), line + k + 1);
            break;
        }
    if (f)
        fclose(f);
    return *buf ? 0 : -1;
}

/* The QoS of job by (scontrol's QOS=, else sacct's) into q ("" unknown). */
static void qos_of(const char *conf, const char *by, char *q, size_t len)
{
    char *out = NULL;
    *q = '\0';
    char *sc[] = {"scontrol", "show", "job", "-o", (char *)by, NULL};
    if (slurm_cmd_ok(conf, sc, &out, "scontrol show job", NULL) == 0 && out) {
        const char *p = strstr(out, " QOS=");
        if (p)
            snprintf(q, len, "%.*s", (int)strcspn(p + 5, " \n"), p + 5);
    }
    free(out);
    out = NULL;
    char arg_j[64];
    snprintf(arg_j, sizeof(arg_j), "--jobs=%s", by);
    char *sa[] = {"sacct", "-n", "-X", "-P", "-o", "qos", arg_j, NULL};
    if (!*q && slurm_cmd_ok(conf, sa, &out, "sacct", NULL) == 0 && out)
        snprintf(q, len, "%.*s", (int)strcspn(out, " \n"), out);
    free(out);
    if (strcmp(q, "(null)") == 0)
        *q = '\0';
}

int slurm_preempted_parse(const char *text, struct slurm_preemption *out, int max)
{
    int n = 0;
    const char *line = text ? text : "";
    while (*line) {
        size_t len = strcspn(line, "\n");
        if (len > 10 && strncmp(line, "PREEMPTED|", 10) == 0) {
            if (n < max) { /* its end, as a log line's time */
                char when[64];
                snprintf(when, sizeof(when), "[%.*s", (int)(len - 10 < 40 ? len - 10 : 40),
                         line + 10);
                memset(&out[n], 0, sizeof(out[n]));
                out[n].time = line_time(when);
            }
            n++;
        }
        line += len + (line[len] == '\n');
    }
    return n;
}

/* Without slurmctld's log: the attempts sacct records as PREEMPTED. */
static int from_sacct(const char *conf, const char *job, struct slurm_preemption *out, int max)
{
    char arg_j[64], *text = NULL;
    snprintf(arg_j, sizeof(arg_j), "--jobs=%s", job);
    char *argv[] = {"sacct", "-n", "-X", "-P", "-D", "-o", "state,end", arg_j, NULL};
    if (slurm_cmd_ok(conf, argv, &text, "sacct", NULL) < 0)
        return -1;
    int n = slurm_preempted_parse(text, out, max);
    free(text);
    return n < max ? n : max;
}

int slurm_job_preemptions(const char *conf, const char *job, struct slurm_preemption *out, int max,
                          mtc_error_t *err)
{
    char path[4096];
    const char *c = conf && *conf ? conf : getenv("SLURM_CONF");
    if (!c || conf_value(c, "SlurmctldLogFile", path, sizeof(path)) < 0) {
        errno = ENOENT;
        return errprintf(err, "%s names no SlurmctldLogFile", c ? c : "(no slurm.conf)");
    }
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno, n = from_sacct(conf, job, out, max);
        if (n >= 0)
            return n;
        errno = e;
        return errprintf(err, "cannot read slurmctld's log %s: %s", path, strerror(e));
    }
    int n = slurm_preemptions_parse(f, job, out, max);
    fclose(f);
    for (int i = 0; i < n && i < max; i++)
        qos_of(conf, out[i].by, out[i].qos, sizeof(out[i].qos));
    return n < max ? n : max;
}
