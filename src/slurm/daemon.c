/* daemon: start slurmctld/slurmd for one cluster and talk to them through
 * Slurm's own commands, always with SLURM_CONF naming that cluster's config. */
#include "slurm/slurm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CMD_TIMEOUT_MS 15000

int slurm_cmd(const char *conf, char *const argv[], char **out, int timeout_ms)
{
    return slurm_cmd_env(conf, NULL, argv, out, timeout_ms);
}

int slurm_cmd_ok(const char *conf, char *const argv[], char **out, const char *what,
                 mtc_error_t *err)
{
    char *o = NULL;
    int rc = slurm_cmd(conf, argv, &o, SLURM_CMD_TIMEOUT_MS);
    if (rc != 0) {
        const char *t = o && *o ? o : "no output";
        while (*t == ' ') /* sacctmgr indents its complaints */
            t++;
        errprintf(err, "%s: %.*s", what, (int)strcspn(t, "\n"), t);
        free(o);
        errno = EIO;
        return -1;
    }
    if (out)
        *out = o;
    else
        free(o);
    return 0;
}

int slurm_cmd_env(const char *conf, char *const extra[], char *const argv[], char **out,
                  int timeout_ms)
{
    char env0[4200];
    snprintf(env0, sizeof(env0), "SLURM_CONF=%s", conf ? conf : "");
    char *env[34] = {NULL};
    int n = 0;
    if (conf && *conf)
        env[n++] = env0;
    for (int i = 0; extra && extra[i] && n < 33; i++)
        env[n++] = extra[i];
    return mtc_run(argv, n ? env : NULL, out, timeout_ms > 0 ? timeout_ms : CMD_TIMEOUT_MS);
}

pid_t slurm_ctld_start(const char *conf, const char *logpath)
{
    char env0[4200];
    snprintf(env0, sizeof(env0), "SLURM_CONF=%s", conf);
    char *env[] = {env0, NULL};
    /* -D: stay in the foreground so the pid we record is the daemon;
     * -i: a half-written state file after a kill -9 must not stop recovery;
     * -L: the log beside the conf (log/slurmctld.log), where slurm.conf
     * names the hosts' own when a backup controller shares it */
    char log[4200], *slash = strrchr(conf, '/');
    snprintf(log, sizeof(log), "%.*s/log/slurmctld.log", slash ? (int)(slash - conf) : 1,
             slash ? conf : ".");
    char *argv[] = {"slurmctld", "-D", "-i", "-f", (char *)conf, "-L", log, NULL};
    return mtc_spawn(argv, env, logpath);
}

pid_t slurm_slurmd_start(const char *conf, const char *node, const char *logpath)
{
    char env0[4200], env1[128];
    snprintf(env0, sizeof(env0), "SLURM_CONF=%s", conf);
    /* slurmstepd inherits slurmd's environment: with SLURM_CONF this marks
     * every process of an emulated node (slurm_node_pids) */
    snprintf(env1, sizeof(env1), "MTC_NODE=%s", node);
    char *env[] = {env0, env1, NULL};
    char *argv[] = {"slurmd", "-D", "-f", (char *)conf, "-N", (char *)node, NULL};
    return mtc_spawn(argv, env, logpath);
}

int slurm_ping(const char *conf, struct slurm_ping *p)
{
    char *out = NULL, *save = NULL;
    char *argv[] = {"scontrol", "ping", NULL};
    memset(p, 0, sizeof(*p));
    slurm_cmd(conf, argv, &out, 5000); /* exits 1 when one is DOWN */
    int seen = 0;
    /* "Slurmctld(primary) at NAME is UP", "Slurmctld(backup) at NAME is DOWN" */
    for (char *l = out ? strtok_r(out, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
        char role[16], name[64], state[16];
        if (sscanf(l, "Slurmctld(%15[^)]) at %63s is %15s", role, name, state) != 3)
            continue;
        int primary = strcmp(role, "primary") == 0;
        if (!primary && strcmp(role, "backup") != 0)
            continue; /* a second backup: mtc configures one */
        snprintf(primary ? p->primary : p->backup, sizeof(p->primary), "%s", name);
        *(primary ? &p->primary_up : &p->backup_up) = strcmp(state, "UP") == 0;
        seen++;
    }
    free(out);
    if (!seen) {
        errno = EIO;
        return -1;
    }
    return 0;
}

int slurm_ctld_up(const char *conf)
{
    struct slurm_ping p;
    return slurm_ping(conf, &p) == 0 && p.primary_up;
}

int slurm_ctld_wait(const char *conf, int ms)
{
    int64_t deadline = mtc_now_ms() + ms;
    for (;;) {
        if (slurm_ctld_up(conf))
            return 0;
        if (mtc_now_ms() >= deadline) {
            errno = ETIMEDOUT;
            return -1;
        }
        mtc_sleep_ms(200);
    }
}

int slurm_reconfigure(const char *conf, mtc_error_t *err)
{
    char *out = NULL;
    char *argv[] = {"scontrol", "reconfigure", NULL};
    int rc = slurm_cmd(conf, argv, &out, 0);
    if (rc != 0) {
        char *nl = out ? strchr(out, '\n') : NULL;
        if (nl)
            *nl = '\0';
        errprintf(err, "scontrol reconfigure failed: %s", out && *out ? out : "no output");
        free(out);
        return -1;
    }
    free(out);
    return 0;
}

int slurm_conf_check(const char *text, const char *check_path, mtc_error_t *err)
{
    if (mtc_write_file_atomic(check_path, text, strlen(text), 0644) < 0)
        return errprintf(err, "cannot write %s: %s", check_path, strerror(errno));
    char *out = NULL;
    char *argv[] = {"sinfo", "-V", NULL};
    int rc = slurm_cmd(check_path, argv, &out, 0);
    unlink(check_path);
    if (rc != 0) {
        /* "sinfo: error: Bad value "x" for MaxTime" → the part after "error: " */
        const char *e = out ? strstr(out, "error: ") : NULL;
        e = e ? e + 7 : (out && *out ? out : "rejected");
        errprintf(err, "slurm.conf: %.*s", (int)strcspn(e, "\n"), e);
        free(out);
        errno = EINVAL;
        return -1;
    }
    free(out);
    return 0;
}

json_t *slurm_node_states(const char *conf, mtc_error_t *err)
{
    char *out = NULL;
    /* sinfo only lists nodes that are in a partition; scontrol lists all */
    char *argv[] = {"sinfo", "-h", "-N", "-o", "%N %t", NULL};
    int rc = slurm_cmd(conf, argv, &out, 0);
    if (rc != 0) {
        errprintf(err, "sinfo failed: %.200s", out ? out : "");
        free(out);
        return NULL;
    }
    json_t *states = json_object();
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[128], st[64];
        if (sscanf(line, "%127s %63s", name, st) == 2)
            json_object_set_new(states, name, json_string(st));
    }
    free(out);
    out = NULL;
    char *argv2[] = {"scontrol", "show", "nodes", "-o", NULL};
    if (slurm_cmd(conf, argv2, &out, 0) == 0) {
        for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char name[128], st[128];
            char *s = strstr(line, " State=");
            if (sscanf(line, "NodeName=%127s", name) != 1 || !s || json_object_get(states, name))
                continue;
            if (sscanf(s, " State=%127s", st) != 1)
                continue;
            /* not in a partition: give scontrol's state in sinfo's lower case */
            for (char *c = st; *c; c++)
                *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
            if (strstr(st, "+not_responding")) {
                *strchr(st, '+') = '\0';
                strcat(st, "*");
            }
            json_object_set_new(states, name, json_string(st));
        }
    }
    free(out);
    return states;
}

int slurm_state_registered(const char *state)
{
    static const char *const bad[] = {"down", "unk", "inval", "fail", NULL};
    if (!state || !*state || strchr(state, '*'))
        return 0;
    for (const char *const *b = bad; *b; b++)
        if (strncmp(state, *b, strlen(*b)) == 0)
            return 0;
    return 1;
}

int slurm_host_resources(int *cpus, long *memory_mb, mtc_error_t *err)
{
    char *out = NULL;
    char *argv[] = {"slurmd", "-C", NULL};
    int rc = mtc_run(argv, NULL, &out, CMD_TIMEOUT_MS);
    char *c = out ? strstr(out, "CPUs=") : NULL, *m = out ? strstr(out, "RealMemory=") : NULL;
    if (rc != 0 || !c || !m) {
        free(out);
        return errprintf(err, "slurmd -C failed (is slurmd installed?)");
    }
    *cpus = atoi(c + 5);
    *memory_mb = atol(m + 11);
    free(out);
    return 0;
}

int slurm_node_get(const char *conf, const char *node, const char *key, char *buf, size_t len)
{
    char *out = NULL, pat[96];
    char *argv[] = {"scontrol", "show", "node", (char *)node, "-o", NULL};
    buf[0] = '\0';
    if (slurm_cmd(conf, argv, &out, 0) != 0 || !out) {
        free(out);
        errno = EIO;
        return -1;
    }
    snprintf(pat, sizeof(pat), " %s=", key);
    char *s = strstr(out, pat);
    if (!s && strncmp(out, pat + 1, strlen(pat + 1)) == 0)
        s = out - 1; /* the first key has no blank before it */
    if (!s) {
        free(out);
        errno = ENOENT;
        return -1;
    }
    s += strlen(pat);
    snprintf(buf, len, "%.*s", (int)strcspn(s, " \n"), s);
    free(out);
    return 0;
}
