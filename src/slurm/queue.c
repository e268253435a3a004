/* queue: a cluster's Slurm queue as squeue shows it — each running or
 * waiting job with its user, account, QoS, state, nodes and pending reason
 * (issue 31, point 4: the console's cluster page and /metrics). */
#include "slurm/slurm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* squeue's fields, in this order, '|' between them; the job name last, since
 * it is the only one a user may write a '|' into. */
#define QUEUE_FORMAT "%i|%P|%u|%a|%q|%T|%D|%N|%r|%M|%j"
enum { F_ID, F_PART, F_USER, F_ACCOUNT, F_QOS, F_STATE, F_NODES, F_LIST, F_REASON, F_TIME, F_NAME,
       NFIELDS };

/* s as a JSON string ("" when it is not UTF-8). */
static json_t *str(const char *s)
{
    json_t *j = json_string(s);
    return j ? j : json_string("");
}

/* squeue's placeholder for a field with no value ("(null)" for the account
 * without accounting, "None" as a running job's reason) as "". */
static json_t *field(const char *s)
{
    return str(strcmp(s, "(null)") == 0 || strcmp(s, "None") == 0 ? "" : s);
}

json_t *slurm_queue_parse(const char *text)
{
    json_t *jobs = json_array();
    char *copy = strdup(text ? text : "");
    char *save = NULL;
    for (char *line = copy ? strtok_r(copy, "\n", &save) : NULL; line;
         line = strtok_r(NULL, "\n", &save)) {
        char *f[NFIELDS];
        int n = 0;
        for (char *p = line; n < NFIELDS; n++) {
            f[n] = p;
            if (n == F_NAME)
                break; /* the name keeps the rest of the line */
            if (!(p = strchr(p, '|')))
                break;
            *p++ = '\0';
        }
        if (n != F_NAME || !*f[F_ID] || strspn(f[F_ID], "0123456789") == 0)
            continue; /* not a job's line (a message, a name's stray newline) */
        json_t *j = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:o, s:o, s:o}",
                              "jobId", str(f[F_ID]), "name", str(f[F_NAME]), "user",
                              field(f[F_USER]), "account", field(f[F_ACCOUNT]), "qos",
                              field(f[F_QOS]), "partition", field(f[F_PART]), "state",
                              str(f[F_STATE]), "nodeCount", atoi(f[F_NODES]), "nodes",
                              field(f[F_LIST]), "reason", field(f[F_REASON]), "time",
                              str(f[F_TIME]));
        if (j)
            json_array_append_new(jobs, j);
    }
    free(copy);
    return jobs;
}

json_t *slurm_queue(const char *conf, mtc_error_t *err)
{
    char *argv[] = {"squeue", "-h", "-a", "-o", QUEUE_FORMAT, NULL};
    char *o = NULL;
    if (slurm_cmd_ok(conf, argv, &o, "squeue", err) < 0)
        return NULL;
    json_t *jobs = slurm_queue_parse(o);
    free(o);
    return jobs;
}
