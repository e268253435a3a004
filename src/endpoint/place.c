/* place: where a deployed model's replicas run. On a local cluster the
 * replicas are this machine's processes: mtc-serve beside mtcd, the
 * registry's own directory, logs under <home>/endpoints. On a cluster on
 * hosts they run on other machines, which see neither: mtc-serve is the copy
 * the hosts provider put on every host (MTC_SERVE in the cluster's
 * environment), and the model and the replicas' logs live on the cluster's
 * shared storage, under <experimentRoot>/.mtc — the version's files copied
 * there once (models/<version directory>/), removed when no deployed model
 * names them any more. */
#include "endpoint/internal.h"
#include "cluster/cluster.h"
#include "provider/provider.h"
#include "registry/registry.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *endpoint_cluster_env(const struct endpoint_config *cfg, const char *cluster,
                           mtc_error_t *err)
{
    if (!cfg->cluster_env) {
        errprintf(err, "cluster %s: no environment to ask (no control plane)", cluster);
        return NULL;
    }
    return cfg->cluster_env(cfg->env_arg, cluster, err);
}

int endpoint_cluster_conf(const struct endpoint_config *cfg, const char *cluster, char *conf,
                          size_t len, mtc_error_t *err)
{
    char *env = endpoint_cluster_env(cfg, cluster, err);
    if (!env)
        return -1;
    const char *p = strstr(env, "export SLURM_CONF='");
    int rc = -1;
    if (p) {
        p += strlen("export SLURM_CONF='");
        size_t n = strcspn(p, "'\n");
        if (n > 0 && n < len) {
            snprintf(conf, len, "%.*s", (int)n, p);
            rc = 0;
        }
    }
    if (rc < 0)
        errprintf(err, "cluster %s: no slurm.conf in its environment", cluster);
    free(env);
    return rc;
}

int endpoint_place_get(const struct endpoint_config *cfg, const char *cluster,
                       const char *local_serve, struct endpoint_place *pl, mtc_error_t *err)
{
    memset(pl, 0, sizeof(*pl));
    struct store_cluster cl;
    if (store_cluster_get(cfg->store, cluster, &cl) < 0) {
        errno = ENOENT;
        return errprintf(err, "cluster %s not found", cluster);
    }
    pl->hosts = cluster_spec_on_hosts(cl.spec);
    const char *root = json_string_value(json_object_get(cl.spec, "experimentRoot"));
    snprintf(pl->root, sizeof(pl->root), "%s", root && pl->hosts ? root : "");
    store_cluster_release(&cl);
    if (!pl->hosts) {
        snprintf(pl->serve, sizeof(pl->serve), "%s", local_serve ? local_serve : "");
        if (!*pl->serve || access(pl->serve, X_OK) < 0) {
            errno = EBUSY;
            return errprintf(err, "mtc-serve is not installed beside mtcd");
        }
        return 0;
    }
    if (!*pl->root || pl->root[0] != '/' || strchr(pl->root, '\'')) {
        errno = EBUSY;
        return errprintf(err,
                         "cluster %s runs on hosts and its spec sets no experimentRoot: replicas "
                         "read the model from storage every host shares (docs/hosts.md, "
                         "\"Shared storage\")",
                         cluster);
    }
    char *env = endpoint_cluster_env(cfg, cluster, err);
    if (!env) {
        errno = EBUSY;
        return -1;
    }
    int rc = provider_env_get(env, "MTC_SERVE", pl->serve, sizeof(pl->serve));
    free(env);
    if (rc < 0 || pl->serve[0] != '/' || strchr(pl->serve, '\'')) {
        errno = EBUSY;
        return errprintf(err,
                         "cluster %s: mtc-serve was not copied to its hosts (build it "
                         "beside mtcd's mtc-agent, then update the cluster)",
                         cluster);
    }
    return 0;
}

int endpoint_place_logdir(const struct endpoint_place *pl, const char *home, const char *project,
                          const char *location, const char *name, char *buf, size_t len)
{
    int n = pl->hosts ? snprintf(buf, len, "%s/.mtc/endpoints/%s/%s/%s", pl->root, project,
                                 location, name)
                      : snprintf(buf, len, "%s/endpoints/%s/%s/%s", home, project, location, name);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

/* The staged copy's directory for artifact art: <root>/.mtc/models/<name of
 * the version's directory> (an llm.c file: of the directory holding it). */
static int staged_dir(const struct endpoint_place *pl, const char *art, char *dir, size_t len,
                      const char **file)
{
    struct stat sb;
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", art);
    *file = NULL;
    if (stat(art, &sb) == 0 && S_ISREG(sb.st_mode)) {
        char *slash = strrchr(parent, '/');
        if (!slash || slash == parent)
            return -1;
        *slash = '\0';
        *file = strrchr(art, '/') + 1;
    }
    const char *base = strrchr(parent, '/');
    base = base ? base + 1 : parent;
    if (!*base || *base == '.')
        return -1;
    int n = snprintf(dir, len, "%s/.mtc/models/%s", pl->root, base);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

int endpoint_stage(const struct endpoint_place *pl, const char *art, char *model, size_t mlen,
                   char *staged, size_t slen, mtc_error_t *err)
{
    const char *file;
    char done[PATH_MAX + 64], tmp[PATH_MAX + 32], hex[9];
    if (staged_dir(pl, art, staged, slen, &file) < 0)
        return errprintf(err, "%.200s: cannot name its copy on the shared storage", art);
    int n =
        file ? snprintf(model, mlen, "%s/%s", staged, file) : snprintf(model, mlen, "%s", staged);
    if (n < 0 || (size_t)n >= mlen)
        return errprintf(err, "%.200s: path too long", staged);
    snprintf(done, sizeof(done), "%s/.staged", staged);
    if (mtc_path_exists(done))
        return 0;           /* a version's files never change: the copy made before serves */
    mtc_random_hex(hex, 4); /* two deploys of one version copy side by side */
    snprintf(tmp, sizeof(tmp), "%s.tmp-%s", staged, hex);
    mtc_rm_rf(tmp);
    if (registry_copy_artifact(art, tmp, err) < 0) {
        mtc_rm_rf(tmp);
        return -1;
    }
    snprintf(done, sizeof(done), "%s/.staged", tmp);
    if (mtc_write_file_atomic(done, art, strlen(art), 0644) < 0) {
        int e = errno;
        mtc_rm_rf(tmp);
        return errprintf(err, "%.200s: %s", done, strerror(e));
    }
    snprintf(done, sizeof(done), "%s/.staged", staged);
    if (mtc_path_exists(done)) { /* another deploy finished first */
        mtc_rm_rf(tmp);
        return 0;
    }
    mtc_rm_rf(staged); /* a copy interrupted before its marker */
    if (rename(tmp, staged) < 0) {
        int e = errno;
        mtc_rm_rf(tmp);
        if (mtc_path_exists(done)) /* another deploy renamed its copy in between */
            return 0;
        return errprintf(err, "%.200s: %s", staged, strerror(e));
    }
    return 0;
}

void endpoint_unstage(struct store *st, const char *staged)
{
    if (!staged || !*staged)
        return;
    int n = 0, used = 0;
    struct store_endpoint *all = store_endpoint_list(st, NULL, NULL, NULL, 1000, &n);
    for (int i = 0; i < n; i++) {
        size_t k;
        json_t *d;
        json_array_foreach(json_object_get(all[i].spec, "deployedModels"), k, d)
        {
            const char *s = json_string_value(json_object_get(d, "staged"));
            used |= s && strcmp(s, staged) == 0;
        }
        store_endpoint_release(&all[i]);
    }
    free(all);
    if (!used && mtc_rm_rf(staged) < 0 && errno != ENOENT)
        log_msg(LOG_WARNING, "endpoints: cannot remove %s: %s", staged, strerror(errno));
}
