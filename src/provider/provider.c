/* provider: the table of provider kinds and the dispatching entry points,
 * which pick each cluster's kind: the one recorded in its directory (file
 * "provider", written by every kind but the default), else its spec's. */
#include "provider/provider.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "provider/hosts.h"

static const struct provider_ops *const kinds[] = {&provider_local_ops, &provider_hosts_ops,
                                                   &provider_sim_ops, NULL};

static const struct provider_ops *find_kind(const char *kind)
{
    for (size_t i = 0; kinds[i]; i++)
        if (kind && strcmp(kinds[i]->kind, kind) == 0)
            return kinds[i];
    return NULL;
}

/* The kind recorded for cluster id: the directory's "provider" file, the
 * default kind for a directory without one, NULL when there is no directory. */
static const struct provider_ops *recorded(struct provider *p, const char *id)
{
    char dir[4096], path[4200];
    if (provider_cluster_dir(p, id, dir, sizeof(dir), NULL) < 0 || !mtc_path_exists(dir))
        return NULL;
    snprintf(path, sizeof(path), "%s/provider", dir);
    char *s = mtc_read_file(path, NULL);
    if (!s)
        return p->ops;
    s[strcspn(s, "\n")] = '\0';
    const struct provider_ops *ops = find_kind(s);
    free(s);
    return ops ? ops : p->ops;
}

/* The kind a spec asks for. */
static const struct provider_ops *wanted(struct provider *p, const json_t *spec)
{
    if (spec && cluster_spec_simulated(spec))
        return &provider_sim_ops;
    return spec && cluster_spec_on_hosts(spec) ? &provider_hosts_ops : p->ops;
}

static const struct provider_ops *ops_for(struct provider *p, const char *id, const json_t *spec)
{
    const struct provider_ops *ops = recorded(p, id);
    return ops ? ops : wanted(p, spec);
}

const char *provider_kind(struct provider *p, const char *id, const json_t *spec)
{
    return ops_for(p, id, spec)->kind;
}

struct provider *provider_create(const char *kind, const char *home, mtc_error_t *err)
{
    const struct provider_ops *ops = find_kind(kind);
    if (!ops) {
        errno = EINVAL;
        errprintf(err, "unknown provider kind \"%s\"", kind ? kind : "(null)");
        return NULL;
    }
    if (!home || !*home) {
        errno = EINVAL;
        errprintf(err, "provider needs a home directory ($MTC_HOME)");
        return NULL;
    }
    struct provider *p = calloc(1, sizeof(*p));
    if (!p || !(p->home = strdup(home))) {
        free(p);
        errprintf(err, "out of memory");
        return NULL;
    }
    p->ops = ops;
    return p;
}

void provider_destroy(struct provider *p)
{
    if (!p)
        return;
    int saved = errno;
    hosts_checks_wait(); /* passes over hosts use p */
    free(p->home);
    free(p->hook_health);
    free(p->hook_prolog);
    free(p->hook_epilog);
    free(p->agent);
    free(p->power);
    free(p->spank);
    free(p->listen);
    free(p->ca_file);
    free(p);
    errno = saved;
}

void provider_set_identity(struct provider *p, const struct provider_identity *id)
{
    if (id)
        p->identity = *id;
    else
        memset(&p->identity, 0, sizeof(p->identity));
}

int provider_apply(struct provider *p, const char *id, const json_t *spec,
                   provider_progress_fn progress, void *arg, mtc_error_t *err)
{
    const struct provider_ops *was = recorded(p, id), *want = wanted(p, spec);
    if (was && was != want) {
        errno = EINVAL;
        return errprintf(err,
                         "cluster %s runs on %s; a cluster cannot move between local, hosts "
                         "and sim (delete it and create it again)",
                         id, was->kind);
    }
    return want->apply(p, id, spec, progress, arg, err);
}

int provider_delete(struct provider *p, const char *id, mtc_error_t *err)
{
    return ops_for(p, id, NULL)->delete_(p, id, err);
}

json_t *provider_nodes(struct provider *p, const char *id, const json_t *spec, mtc_error_t *err)
{
    return ops_for(p, id, spec)->nodes(p, id, spec, err);
}

int provider_supervise(struct provider *p, const char *id, const json_t *spec, provider_event_fn ev,
                       void *arg, mtc_error_t *err)
{
    return ops_for(p, id, spec)->supervise(p, id, spec, ev, arg, err);
}

int64_t provider_supervised_at(struct provider *p, const char *id, int64_t pass_ms)
{
    const struct provider_ops *ops = ops_for(p, id, NULL);
    return ops->supervised_at ? ops->supervised_at(p, id) : pass_ms;
}

int provider_env_get(const char *env, const char *key, char *buf, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "export %s='", key);
    const char *p = strstr(env, pat);
    if (!p)
        return -1;
    p += strlen(pat);
    size_t n = strcspn(p, "'\n");
    if (n == 0 || n >= len)
        return -1;
    snprintf(buf, len, "%.*s", (int)n, p);
    return 0;
}

char *provider_env(struct provider *p, const char *id, mtc_error_t *err)
{
    return ops_for(p, id, NULL)->env(p, id, err);
}

json_t *provider_hosts(struct provider *p, const char *id)
{
    const struct provider_ops *ops = ops_for(p, id, NULL);
    return ops->hosts ? ops->hosts(p, id) : NULL;
}

json_t *provider_controller(struct provider *p, const char *id)
{
    const struct provider_ops *ops = ops_for(p, id, NULL);
    return ops->controller ? ops->controller(p, id) : NULL;
}

int provider_backup_prepare(struct provider *p, const char *id, mtc_error_t *err)
{
    struct head h;
    if (head_init(&h, p, id, err) < 0)
        return -1;
    return mtc_path_exists(h.dir) ? head_acct_dump(&h, err) : 0;
}

int provider_controller_moved(struct provider *p, const char *id, char *addr, size_t len,
                              mtc_error_t *err)
{
    const struct provider_ops *ops = ops_for(p, id, NULL);
    return ops->controller_moved ? ops->controller_moved(p, id, addr, len, err) : 0;
}

json_t *provider_login(struct provider *p, const char *id, mtc_error_t *err)
{
    const struct provider_ops *ops = ops_for(p, id, NULL);
    return ops->login ? ops->login(p, id, err) : NULL;
}

int provider_check_storage(struct provider *p, const char *id, const json_t *spec, mtc_error_t *err)
{
    const struct provider_ops *ops = ops_for(p, id, spec);
    return ops->check_storage ? ops->check_storage(p, id, spec, err) : 0;
}

int provider_exists(struct provider *p, const char *id)
{
    char dir[4096];
    if (provider_cluster_dir(p, id, dir, sizeof(dir), NULL) < 0)
        return 0;
    return mtc_path_exists(dir);
}

static int dup_hook(char **dst, const char *src)
{
    char *d = src && *src ? strdup(src) : NULL;
    if (src && *src && !d)
        return -1;
    free(*dst);
    *dst = d;
    return 0;
}

int provider_set_hooks(struct provider *p, const struct provider_hooks *h, mtc_error_t *err)
{
    if (dup_hook(&p->hook_health, h ? h->health_check : NULL) < 0 ||
        dup_hook(&p->hook_prolog, h ? h->prolog : NULL) < 0 ||
        dup_hook(&p->hook_epilog, h ? h->epilog : NULL) < 0 ||
        dup_hook(&p->agent, h ? h->agent : NULL) < 0 ||
        dup_hook(&p->power, h ? h->power : NULL) < 0 ||
        dup_hook(&p->spank, h ? h->spank : NULL) < 0 ||
        dup_hook(&p->listen, h ? h->listen : NULL) < 0 ||
        dup_hook(&p->ca_file, h ? h->ca_file : NULL) < 0)
        return errprintf(err, "out of memory");
    p->tls = h ? h->tls : 0;
    p->hook_health_interval = h && h->health_interval_s > 0 ? h->health_interval_s : 60;
    return 0;
}

int provider_node_action(struct provider *p, const char *id, const json_t *spec, const char *node,
                         const char *action, mtc_error_t *err)
{
    const struct provider_ops *ops = ops_for(p, id, spec);
    if (!ops->node_action)
        return errprintf(err, "provider %s cannot %s nodes", ops->kind, action);
    return ops->node_action(p, id, spec, node, action, err);
}

int provider_power(struct provider *p, const char *id, const json_t *spec, const char *node, int on,
                   mtc_error_t *err)
{
    const struct provider_ops *ops = ops_for(p, id, spec);
    if (!ops->power) {
        errno = ENOTSUP;
        return errprintf(err, "provider %s has no elastic nodes to power %s", ops->kind,
                         on ? "on" : "off");
    }
    return ops->power(p, id, spec, node, on, err);
}

int provider_node_fault(struct provider *p, const char *id, const json_t *spec, const char *node,
                        enum provider_fault f, const char *job, unsigned pick,
                        struct provider_fault_hit *hit, mtc_error_t *err)
{
    const struct provider_ops *ops = ops_for(p, id, spec);
    if (!ops->node_fault) {
        errno = ENOTSUP;
        return errprintf(err, "provider %s has no processes to inject faults into: not supported",
                         ops->kind);
    }
    /* both reach /proc scans and command lines: checked here, once for every kind */
    if (!node || !mtc_name_valid(node, 63)) {
        errno = EINVAL;
        return errprintf(err, "node \"%.64s\": not a node name", node ? node : "");
    }
    if (f != PROVIDER_FAULT_KILL_SLURMD &&
        (!job || !*job || strlen(job) > 12 || strspn(job, "0123456789") != strlen(job))) {
        errno = EINVAL;
        return errprintf(err, "Slurm job id \"%.20s\": must be digits", job ? job : "");
    }
    *hit = (struct provider_fault_hit){0, -1, 0};
    return ops->node_fault(p, id, spec, node, f, job, pick, hit, err);
}

json_t *provider_node_check(struct provider *p, const char *id, const json_t *spec,
                            const char *node, mtc_error_t *err)
{
    const struct provider_ops *ops = ops_for(p, id, spec);
    if (!ops->node_check) {
        errprintf(err, "provider %s cannot check nodes", ops->kind);
        return NULL;
    }
    return ops->node_check(p, id, spec, node, err);
}

int provider_node_set(struct provider *p, const char *id, const char *conf, const char *node,
                      enum slurm_node_op op, const char *reason, mtc_error_t *err)
{
    const struct provider_ops *ops = ops_for(p, id, NULL);
    if (ops->node_set)
        return ops->node_set(p, id, node, op, reason, err);
    return slurm_node_set(conf, node, op, reason, err);
}

int provider_has_slurm(struct provider *p, const char *id)
{
    return ops_for(p, id, NULL)->node_set == NULL;
}
