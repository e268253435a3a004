/* shared: what every provider kind calls back — a cluster's directory under
 * MTC_HOME (its id and the home checked for what would break slurm.conf or
 * shell text), the hooks' {cluster}/{dir}/{nodedir}/{agent} expanded, and
 * the names of the node actions. Calls nothing of provider's above it. */
#include "provider/provider.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"

int provider_cluster_dir(const struct provider *p, const char *id, char *buf, size_t len,
                         mtc_error_t *err)
{
    if (!cluster_id_valid(id)) {
        errno = EINVAL;
        return errprintf(err, "invalid cluster id \"%.40s\" (want ^[a-z][a-z0-9]{0,9}$)",
                         id ? id : "");
    }
    /* the path goes into slurm.conf and shell text unquoted or in '' */
    for (const char *c = p->home; *c; c++)
        if (*c <= ' ' || strchr("'\"#\\$`;&|<>()*?[]{}%", *c)) {
            errno = EINVAL;
            if (*c <= ' ')
                return errprintf(err,
                                 "MTC_HOME %.100s: blanks and control characters are not supported",
                                 p->home);
            return errprintf(
                err,
                "MTC_HOME %.100s: '%c' is not supported (it would reach slurm.conf and shell text)",
                p->home, *c);
        }
    int n = snprintf(buf, len, "%s/clusters/%s", p->home, id);
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return errprintf(err, "cluster directory path too long");
    }
    return 0;
}

char *provider_hook_expand(const char *hook, const char *id, const char *dir, const char *agent)
{
    if (!hook || !*hook)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    for (const char *s = hook; *s; s++) {
        if (strncmp(s, "{cluster}", 9) == 0) {
            fputs(id, f);
            s += 8;
        } else if (strncmp(s, "{dir}", 5) == 0) {
            fputs(dir, f);
            s += 4;
        } else if (strncmp(s, "{nodedir}", 9) == 0) {
            fprintf(f, "%s/nodes/$SLURMD_NODENAME", dir);
            s += 8;
        } else if (strncmp(s, "{agent}", 7) == 0) {
            fputs(agent ? agent : "mtc-agent", f);
            s += 6;
        } else {
            fputc(*s, f);
        }
    }
    fclose(f);
    return buf;
}

const char *const provider_action_names[PROVIDER_NACTIONS] = {
    [PROVIDER_RESTART] = "restart",
    [PROVIDER_REBOOT] = "reboot",
    [PROVIDER_REIMAGE] = "reimage",
    [PROVIDER_REPLACE] = "replace",
};

int provider_action_find(const char *action, mtc_error_t *err)
{
    for (int k = 0; action && k < PROVIDER_NACTIONS; k++)
        if (strcmp(provider_action_names[k], action) == 0)
            return k;
    errno = EINVAL;
    return errprintf(err, "unknown node action \"%.40s\" (restart, reboot, reimage, replace)",
                     action ? action : "");
}
