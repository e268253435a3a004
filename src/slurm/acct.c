/* acct: a cluster's accounts and their users in Slurm's accounting database,
 * through sacctmgr (issue 31, point 2) — an account's description, parent,
 * fair-share weight, limits (GrpTRES nodes and GPUs, GrpJobs running jobs,
 * MaxWall) and allowed QoS; the users of an account. Names reach sacctmgr's
 * command line as words of their own, never through a shell; the caller
 * validates them (slurm_acct_name_valid). */
#include "slurm/slurm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int slurm_acct_name_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 32 || !(s[0] >= 'a' && s[0] <= 'z'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '-'))
            return 0;
    return 1;
}

/* sacctmgr -i -n -P ARGS on conf; its output into out (may be NULL). */
static int sacctmgr(const char *conf, char *const args[], char **out, mtc_error_t *err)
{
    char *argv[32] = {"sacctmgr", "-i", "-n", "-P"};
    int n = 4;
    for (int i = 0; args[i] && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return slurm_cmd_ok(conf, argv, out, "sacctmgr", err);
}

/* line's '|'-separated fields into f[0..max) (the line is cut); their count. */
static int split_fields(char *line, char **f, int max)
{
    int n = 0;
    for (char *p = line; p && n < max;) {
        f[n++] = p;
        p = strchr(p, '|');
        if (p)
            *p++ = '\0';
    }
    return n;
}

/* "a,b,c" as a JSON array of strings. */
static json_t *csv_array(const char *s)
{
    json_t *a = json_array();
    while (s && *s) {
        size_t k = strcspn(s, ",");
        json_array_append_new(a, json_stringn(s, k));
        s += k + (s[k] == ',');
    }
    return a;
}

/* "GrpTRES=node=N,gres/gpu=G" for the limits given (SLURM_ACCT_UNSET: not
 * given, -1: cleared) into *w; 1 when made, 0 when neither is given. */
static int grp_tres(int nodes, int gpus, char **w)
{
    if (nodes == SLURM_ACCT_UNSET && gpus == SLURM_ACCT_UNSET)
        return 0;
    char tres[96] = "";
    if (nodes != SLURM_ACCT_UNSET)
        snprintf(tres, sizeof(tres), "node=%d", nodes);
    if (gpus != SLURM_ACCT_UNSET)
        snprintf(tres + strlen(tres), sizeof(tres) - strlen(tres), "%sgres/gpu=%d", *tres ? "," : "",
                 gpus);
    return asprintf(w, "GrpTRES=%s", tres) > 0;
}

/* The settings sacctmgr takes for an account: "Key=value" words into w
 * (each malloc'd), their count. */
static int set_words(const struct slurm_account *a, char *w[16])
{
    int n = 0;
    if (a->description)
        n += asprintf(&w[n], "Description=%s", a->description) > 0;
    if (a->fairshare > 0)
        n += asprintf(&w[n], "Fairshare=%d", a->fairshare) > 0;
    n += grp_tres(a->max_nodes, a->max_gpus, &w[n]);
    if (a->max_running_jobs != SLURM_ACCT_UNSET)
        n += asprintf(&w[n], "GrpJobs=%d", a->max_running_jobs) > 0;
    if (a->max_wall && *a->max_wall)
        n += asprintf(&w[n], "MaxWall=%s", a->max_wall) > 0;
    if (a->qos && *a->qos)
        n += asprintf(&w[n], "QOS=%s", a->qos) > 0;
    return n;
}

/* sacctmgr HEAD... W...: the fixed words, then the settings w (freed). */
static int sacctmgr_words(const char *conf, char *const head[], char **w, int n, mtc_error_t *err)
{
    char *args[28];
    int k = 0;
    for (int i = 0; head[i] && k < 10; i++)
        args[k++] = head[i];
    for (int i = 0; i < n && k < 27; i++)
        args[k++] = w[i];
    args[k] = NULL;
    int rc = sacctmgr(conf, args, NULL, err);
    for (int i = 0; i < n; i++)
        free(w[i]);
    return rc;
}

int slurm_account_add(const char *conf, const char *cluster, const struct slurm_account *a,
                      mtc_error_t *err)
{
    char *w[16], cl[96], parent[96];
    int n = set_words(a, w);
    snprintf(cl, sizeof(cl), "Cluster=%s", cluster);
    snprintf(parent, sizeof(parent), "Parent=%s", a->parent && *a->parent ? a->parent : "root");
    char *head[] = {"add", "account", (char *)a->name, cl, parent, NULL};
    return sacctmgr_words(conf, head, w, n, err);
}

int slurm_account_modify(const char *conf, const char *cluster, const struct slurm_account *a,
                         mtc_error_t *err)
{
    char *w[16], name[96], cl[96];
    int n = set_words(a, w);
    if (a->parent && *a->parent)
        n += asprintf(&w[n], "Parent=%s", a->parent) > 0;
    if (n == 0)
        return 0;
    snprintf(name, sizeof(name), "Name=%s", a->name);
    snprintf(cl, sizeof(cl), "Cluster=%s", cluster);
    char *head[] = {"modify", "account", "where", name, cl, "set", NULL};
    return sacctmgr_words(conf, head, w, n, err);
}

int slurm_account_delete(const char *conf, const char *cluster, const char *name,
                         mtc_error_t *err)
{
    char n[96], cl[96];
    snprintf(n, sizeof(n), "Name=%s", name);
    snprintf(cl, sizeof(cl), "Cluster=%s", cluster);
    char *args[] = {"delete", "account", "where", n, cl, NULL};
    if (sacctmgr(conf, args, NULL, err) < 0)
        return -1;
    /* the account itself, once no cluster of the database has it (best effort) */
    char *all[] = {"delete", "account", "where", n, NULL};
    sacctmgr(conf, all, NULL, NULL);
    return 0;
}

int slurm_account_user(const char *conf, const char *cluster, const char *account,
                       const char *user, int add, mtc_error_t *err)
{
    char a[96], cl[96], u[96];
    snprintf(a, sizeof(a), "Account=%s", account);
    snprintf(cl, sizeof(cl), "Cluster=%s", cluster);
    snprintf(u, sizeof(u), "Name=%s", user);
    char *add_args[] = {"add", "user", (char *)user, a, cl, NULL};
    char *del_args[] = {"delete", "user", "where", u, a, cl, NULL};
    return sacctmgr(conf, add ? add_args : del_args, NULL, err);
}

/* A GrpTRES value's count of key ("node=2,gres/gpu=8"), or -1. */
static int tres_of(const char *tres, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = tres; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, key, k) == 0 && p[k] == '=')
            return atoi(p + k + 1);
    return -1;
}

/* The values of obj (consumed), in its order, as an array. */
static json_t *values_of(json_t *obj)
{
    json_t *out = json_array(), *v;
    const char *k;
    json_object_foreach(obj, k, v) json_array_append(out, v);
    json_decref(obj);
    return out;
}

json_t *slurm_accounts(const char *conf, const char *cluster, mtc_error_t *err)
{
    char cl[96], *assoc = NULL, *desc = NULL;
    snprintf(cl, sizeof(cl), "Cluster=%s", cluster);
    char *a1[] = {"show", "assoc", "where", cl,
                  "format=Account,User,ParentName,Fairshare,GrpTRES,GrpJobs,MaxWall,QOS", NULL};
    char *a2[] = {"show", "account", "format=Account,Description", NULL};
    if (sacctmgr(conf, a1, &assoc, err) < 0 || sacctmgr(conf, a2, &desc, err) < 0) {
        free(assoc);
        return NULL;
    }
    json_t *byname = json_object();
    for (char *line = strtok(assoc, "\n"); line; line = strtok(NULL, "\n")) {
        char *f[8] = {0};
        if (split_fields(line, f, 8) < 8 || !*f[0] || strcmp(f[0], "root") == 0)
            continue; /* root is Slurm's own */
        json_t *a = json_object_get(byname, f[0]);
        if (!a) {
            a = json_pack("{s:s, s:[]}", "name", f[0], "users");
            json_object_set_new(byname, f[0], a);
        }
        if (*f[1]) { /* a user's association */
            json_array_append_new(json_object_get(a, "users"), json_string(f[1]));
            continue;
        }
        json_object_set_new(a, "parent", json_string(*f[2] ? f[2] : "root"));
        json_object_set_new(a, "fairshare", json_integer(atoi(f[3])));
        json_t *lim = json_object();
        if (tres_of(f[4], "node") >= 0)
            json_object_set_new(lim, "maxNodes", json_integer(tres_of(f[4], "node")));
        if (tres_of(f[4], "gres/gpu") >= 0)
            json_object_set_new(lim, "maxGpus", json_integer(tres_of(f[4], "gres/gpu")));
        if (*f[5])
            json_object_set_new(lim, "maxRunningJobs", json_integer(atoi(f[5])));
        if (*f[6])
            json_object_set_new(lim, "maxWall", json_string(f[6]));
        json_object_set_new(a, "limits", lim);
        json_object_set_new(a, "qos", csv_array(f[7]));
    }
    for (char *line = strtok(desc, "\n"); line; line = strtok(NULL, "\n")) {
        char *bar = strchr(line, '|');
        if (!bar)
            continue;
        *bar = '\0';
        json_t *a = json_object_get(byname, line);
        if (a)
            json_object_set_new(a, "description", json_string(bar + 1));
    }
    free(assoc);
    free(desc);
    return values_of(byname);
}

json_t *slurm_account_jobs(const char *conf, const char *account, mtc_error_t *err)
{
    char *argv[] = {"squeue", "-h", "-A", (char *)account, "-t", "RUNNING,PENDING,SUSPENDED",
                    "-o", "%i", NULL};
    char *o = NULL;
    if (slurm_cmd_ok(conf, argv, &o, "squeue", err) < 0)
        return NULL;
    json_t *ids = json_array();
    for (char *line = strtok(o, "\n"); line; line = strtok(NULL, "\n"))
        if (*line)
            json_array_append_new(ids, json_string(line));
    free(o);
    return ids;
}

/* ---- quality of service ---- */

int slurm_qos_add(const char *conf, const struct slurm_qos *q, mtc_error_t *err)
{
    char *w[8];
    int n = 0;
    n += asprintf(&w[n], "Priority=%d", q->priority) > 0;
    n += grp_tres(q->max_nodes < 0 ? SLURM_ACCT_UNSET : q->max_nodes,
                  q->max_gpus < 0 ? SLURM_ACCT_UNSET : q->max_gpus, &w[n]);
    if (q->max_wall && *q->max_wall)
        n += asprintf(&w[n], "MaxWall=%s", q->max_wall) > 0;
    if (q->preempt && *q->preempt)
        n += asprintf(&w[n], "Preempt=%s", q->preempt) > 0;
    if (q->grace_s > 0)
        n += asprintf(&w[n], "GraceTime=%d", q->grace_s) > 0;
    char *head[] = {"add", "qos", (char *)q->name, NULL};
    return sacctmgr_words(conf, head, w, n, err);
}

int slurm_qos_delete(const char *conf, const char *name, mtc_error_t *err)
{
    char n[96];
    snprintf(n, sizeof(n), "Name=%s", name);
    char *args[] = {"delete", "qos", "where", n, NULL};
    return sacctmgr(conf, args, NULL, err);
}

json_t *slurm_qos_list(const char *conf, mtc_error_t *err)
{
    char *o = NULL;
    char *args[] = {"show", "qos", "format=Name,Priority,GrpTRES,MaxWall,Preempt,GraceTime", NULL};
    if (sacctmgr(conf, args, &o, err) < 0)
        return NULL;
    json_t *out = json_array();
    for (char *line = strtok(o, "\n"); line; line = strtok(NULL, "\n")) {
        char *f[6] = {0};
        if (split_fields(line, f, 6) < 6 || !*f[0])
            continue;
        json_t *q = json_pack("{s:s, s:i}", "name", f[0], "priority", atoi(f[1]));
        json_t *lim = json_object();
        if (tres_of(f[2], "node") >= 0)
            json_object_set_new(lim, "maxNodes", json_integer(tres_of(f[2], "node")));
        if (tres_of(f[2], "gres/gpu") >= 0)
            json_object_set_new(lim, "maxGpus", json_integer(tres_of(f[2], "gres/gpu")));
        if (*f[3])
            json_object_set_new(lim, "maxWall", json_string(f[3]));
        json_object_set_new(q, "limits", lim);
        json_object_set_new(q, "preempt", csv_array(f[4]));
        json_array_append_new(out, q);
    }
    free(o);
    return out;
}

/* ---- usage ---- */

/* A TRES list's count of key ("cpu=4,mem=1G,node=2,billing=4,gres/gpu=8"). */
static double tres_count(const char *tres, const char *key)
{
    int n = tres_of(tres, key);
    return n > 0 ? n : 0;
}

json_t *slurm_usage(const char *conf, const char *since, mtc_error_t *err)
{
    char *argv[] = {"sacct", "-a", "-X", "-n", "-P", "-S", (char *)since, "-E", "now",
                    "-o", "Account,User,ElapsedRaw,AllocTRES", NULL};
    char *o = NULL;
    if (slurm_cmd_ok(conf, argv, &o, "sacct", err) < 0)
        return NULL;
    json_t *by = json_object(); /* "account|user" → {account, user, jobs, nodeHours, gpuHours} */
    for (char *line = strtok(o, "\n"); line; line = strtok(NULL, "\n")) {
        char *f[4] = {0};
        if (split_fields(line, f, 4) < 4 || !*f[0])
            continue;
        char key[160];
        snprintf(key, sizeof(key), "%s|%s", f[0], f[1]);
        json_t *u = json_object_get(by, key);
        if (!u) {
            u = json_pack("{s:s, s:s, s:i, s:f, s:f}", "account", f[0], "user", f[1], "jobs", 0,
                          "nodeHours", 0.0, "gpuHours", 0.0);
            json_object_set_new(by, key, u);
        }
        double secs = atof(f[2]);
        json_object_set_new(u, "jobs", json_integer(json_integer_value(json_object_get(u, "jobs")) + 1));
        json_object_set_new(u, "nodeHours", json_real(json_real_value(json_object_get(u, "nodeHours")) +
                                                      secs * tres_count(f[3], "node") / 3600));
        json_object_set_new(u, "gpuHours", json_real(json_real_value(json_object_get(u, "gpuHours")) +
                                                     secs * tres_count(f[3], "gres/gpu") / 3600));
    }
    free(o);
    return values_of(by);
}
