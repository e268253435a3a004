/* local: the "local" provider — a real Slurm cluster on this host. One munged
 * (own key and socket), one slurmctld and one `slurmd -N <node>` per compute
 * node on its own port, all under $MTC_HOME/clusters/<id>; pid files under
 * run/ let a restarted caller adopt the daemons instead of starting them twice. */
#include "provider/local.h"
#include "spank/container.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "slurm/slurm.h"

/* Paths go into fixed buffers; overlong ones are rejected up front
 * (provider_cluster_dir), so truncation warnings are noise here. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* "a,b,c~": an elastic node with "~" (slurmctld restarts when that changes) */
static void node_names(const struct layout *l, char *buf, size_t len)
{
    buf[0] = '\0';
    for (size_t i = 0; i < l->nnodes; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s%s", i ? "," : "", l->nodes[i].name,
                 l->nodes[i].cloud ? "~" : "");
}

static int port_taken(const struct layout *l, int port)
{
    if (port == l->ctld_port || port == l->slurmd_port)
        return 1;
    for (size_t i = 0; i < l->nnodes; i++)
        if (l->nodes[i].port == port)
            return 1;
    return 0;
}

/* Give node k of l, new in it, port p: held from now on when the node is
 * elastic (off until Slurm resumes it; local_power_ports). 0, or -1 + errno:
 * EADDRINUSE (taken since it was found free; port left 0, err untouched: try
 * another), else err says why. */
static int hold_new(const struct head *c, struct layout *l, size_t k, int p, mtc_error_t *err)
{
    if (l->nodes[k].cloud && mtc_port_hold(p, c->id) < 0) {
        int e = errno;
        if (e != EADDRINUSE)
            errprintf(err, "cannot hold port %d for %s: %s", p, l->nodes[k].name, strerror(e));
        errno = e;
        return -1;
    }
    l->nodes[k].port = p;
    return 0;
}

/* The nodes the spec asks for; ports kept from old, new ones allocated.
 * sizes[] gets each node's Slurm sizing. */
static int plan_nodes(const struct head *c, const json_t *spec, const struct layout *old,
                      struct layout *l, struct slurm_node *sizes, mtc_error_t *err)
{
    int host_cpus;
    long host_mem;
    if (slurm_host_resources(&host_cpus, &host_mem, err) < 0)
        return -1;
    const char *login = cluster_spec_login_pool(spec);
    size_t i;
    json_t *pool;
    json_array_foreach(json_object_get(spec, "nodePools"), i, pool)
    {
        const char *pid = json_string_value(json_object_get(pool, "id"));
        if (login && strcmp(pid, login) == 0)
            continue; /* the login pool is this host's shell: no slurmd */
        json_t *ms = json_object_get(pool, "machineSpec");
        struct cluster_machine_type mt;
        if (cluster_machine_type_lookup(json_string_value(json_object_get(ms, "machineType")), &mt,
                                        err) < 0)
            return -1;
        const json_t *sc = json_object_get(pool, "scalingSpec");
        int min = (int)json_integer_value(json_object_get(sc, "minNodeCount"));
        int count = (int)json_integer_value(json_object_get(sc, "maxNodeCount"));
        if (count < min)
            count = min;
        for (int k = 0; k < count; k++) {
            if (l->nnodes >= MAX_NODES)
                return errprintf(err, "more than %d nodes", MAX_NODES);
            struct lnode *n = &l->nodes[l->nnodes];
            struct slurm_node *s = &sizes[l->nnodes];
            l->nnodes++;
            snprintf(n->name, sizeof(n->name), "%s-%s-%d", c->id, pid, k);
            snprintf(n->pool, sizeof(n->pool), "%s", pid);
            n->cloud = k >= min; /* elastic: powered by Slurm's power saving */
            const struct lnode *was = old ? local_layout_find(old, n->name) : NULL;
            n->port = was ? was->port : 0;
            /* an elastic node that stays off keeps its port held; one that
             * something else took (while no mtcd held it) gets a new one */
            if (was && was->cloud && n->cloud && !head_power_is_on(c, n->name) &&
                mtc_port_hold(n->port, c->id) < 0 && errno == EADDRINUSE) {
                log_msg(LOG_WARNING, "cluster %s: port %d of powered-down %s is taken; a new one",
                        c->id, n->port, n->name);
                n->port = 0;
            }
            memset(s, 0, sizeof(*s));
            snprintf(s->name, sizeof(s->name), "%s", n->name);
            snprintf(s->pool, sizeof(s->pool), "%s", pid);
            s->cloud = n->cloud;
            /* never more than the host has: slurmd refuses to register a node
             * configured larger than what `slurmd -C` sees */
            s->cpus = mt.host_sized || mt.vcpus > host_cpus ? host_cpus : mt.vcpus;
            s->memory_mb = mt.host_sized || mt.memory_mb > host_mem ? host_mem : mt.memory_mb;
            s->gpus = (int)json_integer_value(json_object_get(ms, "acceleratorCount"));
            snprintf(s->gres_type, sizeof(s->gres_type), "%s",
                     mt.gres_type[0] ? mt.gres_type : "gpu");
        }
    }
    /* ports: one consecutive range on creation, single free ports for nodes added later */
    if (old && old->ctld_port > 0) {
        l->ctld_port = old->ctld_port;
        l->slurmd_port = old->slurmd_port;
    } else {
        int base = mtc_free_port_range((int)l->nnodes + 2);
        if (!base)
            return errprintf(err, "no free port range");
        l->ctld_port = base;
        l->slurmd_port = base + 1;
        for (size_t k = 0; k < l->nnodes; k++) /* (one taken meanwhile: a single port below) */
            if (hold_new(c, l, k, base + 2 + (int)k, err) < 0 && errno != EADDRINUSE)
                return -1;
    }
    for (size_t k = 0; k < l->nnodes; k++) {
        int tries = 0;
        while (!l->nodes[k].port && tries++ < 100) {
            int p = mtc_free_port();
            if (p && !port_taken(l, p) && !(old && port_taken(old, p)) &&
                hold_new(c, l, k, p, err) < 0 && errno != EADDRINUSE)
                return -1;
        }
        if (!l->nodes[k].port)
            return errprintf(err, "no free port for %s", l->nodes[k].name);
        sizes[k].port = l->nodes[k].port;
    }
    return 0;
}

/* ---- files ---- */

/* etc/prolog.sh, etc/epilog.sh, etc/health.sh from the provider's hooks and
 * the spec's scripts; sets which of them slurm.conf names. */
static int write_hooks(const struct provider *p, const struct head *c, const json_t *pro,
                       const json_t *epi, struct slurm_layout *sl, mtc_error_t *err)
{
    char *hp = provider_hook_expand(p->hook_prolog, c->id, c->dir, p->agent);
    char *he = provider_hook_expand(p->hook_epilog, c->id, c->dir, p->agent);
    char *hh = provider_hook_expand(p->hook_health, c->id, c->dir, p->agent);
    int rc = -1;
    if ((sl->prolog = slurm_scripts_write(c->dir, "prolog", hp, pro, err)) < 0 ||
        (sl->epilog = slurm_scripts_write(c->dir, "epilog", he, epi, err)) < 0 ||
        slurm_health_write(c->dir, hh, err) < 0)
        goto out;
    if (!hh)
        sl->health_interval = 0;
    rc = 0;
out:
    free(hp);
    free(he);
    free(hh);
    return rc;
}

/* ---- many nodes at once ---- */

/* Up to LOCAL_WORKERS threads run fn(arg, i) for i in 0..n-1, each index
 * once; errs[i] gets each one's error. Returns the first failed index, or -1
 * when all succeeded. Node starts and stops are mostly waits on children,
 * files and the store, so a few threads overlap them even on one core. */
#define LOCAL_WORKERS 8
static long local_parallel(size_t n, mtc_task_fn fn, void *arg, mtc_error_t *errs)
{
    return mtc_parallel(n, LOCAL_WORKERS, fn, arg, errs);
}

/* The nodes being stopped, and what each worker needs. */
struct stopping {
    const struct head *c;
    char (*names)[64];
};

/* A stopped node's leftovers: its steps, tasks and hook programs (whatever
 * outlived slurmd), pid files, container mounts and directories. */
static int node_remove(void *arg, size_t i, mtc_error_t *err)
{
    const struct stopping *st = arg;
    const struct head *c = st->c;
    const char *node = st->names[i];
    char path[PLEN];
    if (local_node_kill(c, node, err) < 0)
        log_msg(LOG_WARNING, "cluster %s: %s", c->id, err->text);
    unlink(head_path(c, path, "run/slurm/slurmd-%s.pid", node));
    container_sweep(head_path(c, path, "nodes/%s/containers", node), NULL);
    mtc_rm_rf(head_path(c, path, "spool/%s", node));
    mtc_rm_rf(head_path(c, path, "nodes/%s", node));
    mtc_rm_rf(head_path(c, path, "tmp/%s", node));
    return 0;
}

/* Stop every slurmd and mtc-agent that has a pid file (mtc's in run/ or
 * Slurm's in run/slurm/) and is not a node of keep (NULL: stop all), and remove the
 * node's directories. Scanning pid files rather than the saved layout also
 * catches nodes an update removed before it was interrupted. All at once:
 * SIGTERM to every daemon, one wait for all of them (SIGKILL after 10 s),
 * then the leftovers removed by a pool of workers. */
static void stop_other_slurmds(const struct head *c, const struct layout *keep,
                               provider_progress_fn progress, void *arg)
{
    static const char *const dirs[] = {"run", "run/slurm"};
    char path[PLEN];
    char(*names)[64] = calloc(2 * MAX_NODES, sizeof(*names));
    pid_t *pids = calloc(4 * MAX_NODES, sizeof(*pids));
    size_t n = 0, np = 0;
    for (size_t k = 0; names && pids && k < 2; k++) {
        DIR *d = opendir(head_path(c, path, "%s", dirs[k]));
        struct dirent *e;
        while (d && (e = readdir(d))) {
            size_t len = strlen(e->d_name);
            /* slurmd-<node>.pid or agent-<node>.pid */
            size_t pre = strncmp(e->d_name, "slurmd-", 7) == 0  ? 7
                         : strncmp(e->d_name, "agent-", 6) == 0 ? 6
                                                                : 0;
            if (!pre || len < pre + 5 || len - pre - 4 >= 64 ||
                strcmp(e->d_name + len - 4, ".pid") != 0)
                continue;
            char node[64];
            snprintf(node, sizeof(node), "%.*s", (int)(len - pre - 4), e->d_name + pre);
            int seen = keep && local_layout_find(keep, node);
            for (size_t i = 0; i < n; i++)
                seen |= strcmp(names[i], node) == 0;
            if (!seen && n < 2 * MAX_NODES)
                snprintf(names[n++], sizeof(names[0]), "%s", node);
        }
        if (d)
            closedir(d);
    }
    /* SIGTERM to all: a slurmd's clean stop leaves its jobs' steps running
     * (node_remove kills them) */
    for (size_t i = 0; i < n; i++) {
        if (keep)
            head_say(progress, arg, "removing node %s", names[i]);
        pid_t sd = head_slurmd_running(c, names[i]), ag = local_agent_running(c, names[i]);
        if (sd > 0 && kill(sd, SIGTERM) == 0)
            pids[np++] = sd;
        if (ag > 0 && kill(ag, SIGTERM) == 0)
            pids[np++] = ag;
    }
    for (int64_t end = mtc_now_ms() + STOP_WAIT_MS;; mtc_sleep_ms(20)) {
        size_t alive = 0;
        for (size_t i = 0; i < np; i++)
            alive += pids[i] > 0 && mtc_pid_alive(pids[i]);
        if (!alive)
            break;
        if (mtc_now_ms() >= end) {
            for (size_t i = 0; i < np; i++)
                if (pids[i] > 0)
                    kill(pids[i], SIGKILL);
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        char name[96];
        snprintf(name, sizeof(name), "slurmd-%s", names[i]);
        unlink(head_path(c, path, "run/%s.pid", name));
        snprintf(name, sizeof(name), "agent-%s", names[i]);
        unlink(head_path(c, path, "run/%s.pid", name));
    }
    if (n) {
        mtc_error_t *errs = calloc(n, sizeof(*errs));
        struct stopping st = {c, names};
        if (errs)
            local_parallel(n, node_remove, &st, errs);
        free(errs);
    }
    free(names);
    free(pids);
}

/* ---- convergence ---- */

/* Slurm's timeouts and fan-out for n slurmds on this host (slurm_sizing_for).
 * MTC_EMULATION_SIZING=fixed in the provider's environment keeps Slurm's
 * usual values whatever the size: the baseline bench/emulation.sh measures
 * against. */
static void emulation_sizing(size_t n, struct slurm_sizing *z)
{
    const char *mode = getenv("MTC_EMULATION_SIZING");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    memset(z, 0, sizeof(*z));
    if (mode && strcmp(mode, "fixed") == 0)
        return;
    slurm_sizing_for((int)n, cores > 0 ? (int)cores : 1, z);
}

/* Apply, phase 1: each node's directories, the hook scripts, slurm.conf and
 * gres.conf rendered, checked by Slurm and written; sha of both (what the
 * daemons must run). 0/-1 + err. */
static int write_config(struct provider *p, struct head *c, const json_t *spec, struct layout *l,
                        struct slurm_node *sizes, char sha[65], mtc_error_t *err)
{
    char hostname[256];
    mtc_short_hostname(hostname, sizeof(hostname));
    const json_t *ss = json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec");
    struct slurm_layout sl = {
        .cluster = c->id,
        .dir = c->dir,
        .hostname = hostname,
        .ctld_port = l->ctld_port,
        .slurmd_port = l->slurmd_port,
        .nodes = sizes,
        .nnodes = l->nnodes,
        .fake_gpus = 0,
        .spank = p->spank,
        .image_cache_gb = json_number_value(
            json_object_get(json_object_get(spec, "containers"), "cacheMaxGb")),
        .health_interval =
            p->hook_health ? head_health_interval(spec, p->hook_health_interval) : 0};
    emulation_sizing(l->nnodes, &sl.sizing);
    /* real devices only when the host has as many as a node claims; an
     * 8-GPU node emulated on a 1-GPU host gets device files of its own */
    for (size_t i = 0; i < l->nnodes; i++)
        if (sizes[i].gpus > local_host_gpus())
            sl.fake_gpus = 1;
    for (size_t i = 0; i < l->nnodes; i++)
        if (local_node_provision(c, sizes[i].name, sizes[i].gpus, sl.fake_gpus, 0, err) < 0)
            return -1;
    if (write_hooks(p, c, json_object_get(ss, "prologBashScripts"),
                    json_object_get(ss, "epilogBashScripts"), &sl, err) < 0)
        return -1;
    if (head_power_setup(p, c, spec, LOCAL_SUSPEND_TIMEOUT, &sl, err) < 0 ||
        head_acct_setup(c, spec, NULL, &sl.acct, err) < 0)
        return -1;
    if (head_conf_write(c, spec, &sl, sha, err) < 0 || local_layout_save(c, l, err) < 0)
        return -1;
    return 0;
}

/* Apply, phase 2: munged, and slurmctld running the config of sha —
 * reconfigured, or restarted when the node set changed (slurmds of removed
 * nodes stopped first). 0/-1 + err. */
static int start_controller(struct head *c, struct layout *l, const char *sha,
                            provider_progress_fn progress, void *arg, mtc_error_t *err)
{
    char names[PLEN];
    node_names(l, names, sizeof(names));
    /* nodes no longer in the spec: stop their slurmd first */
    stop_other_slurmds(c, l, progress, arg);
    int any_slurmd = 0;
    for (size_t i = 0; i < l->nnodes; i++)
        any_slurmd |= head_slurmd_running(c, l->nodes[i].name) > 0;

    if (head_controller_converge(c, &l->applied, sha, names, any_slurmd, progress, arg, err) < 0)
        return -1;
    return local_layout_save(c, l, err);
}

/* 1 for an elastic node that is powered down: no daemons to start. */
static int node_off(const struct head *c, const struct lnode *n)
{
    return n->cloud && !head_power_is_on(c, n->name);
}

/* What the workers of start_nodes share. */
struct starting {
    struct provider *p;
    const struct head *c;
    const json_t *spec;
    const struct layout *l;
};

/* A node's agent: its config, and the agent restarted for a new policy,
 * stopped when agents are off, started when missing. */
static int node_agent(void *arg, size_t i, mtc_error_t *err)
{
    const struct starting *st = arg;
    const struct head *c = st->c;
    const char *nn = st->l->nodes[i].name;
    if (node_off(c, &st->l->nodes[i]))
        return 0; /* a powered-down elastic node: power-on configures it */
    int changed = local_agent_config(st->p, c, st->spec, nn, st->l->nodes[i].port, err);
    if (changed < 0)
        return -1;
    pid_t agent = local_agent_running(c, nn);
    if (agent && (changed || !st->p->agent))
        local_agent_stop(c, nn); /* a new policy, or agents turned off */
    if (!st->p->agent || (!changed && agent))
        return 0;
    /* a fresh agent checks slurmd through slurmd's own pid file at once: a
     * slurmd start_nodes has just spawned (a raised minNodeCount's node, a
     * new node) must have written it first, or the check fails and
     * remediation reboots a healthy node */
    if (local_slurmd_wait_up(c, nn, err) < 0 || local_agent_start(st->p, c, nn, err) < 0)
        return -1;
    return 0;
}

/* Apply, phase 3: a slurmd per node (spawned, not waited for), then the
 * agents by a pool of workers (node_agent: minting a token, writing the
 * config, spawning). 0/-1 + err (the first failure). */
static int start_nodes(struct provider *p, struct head *c, const json_t *spec,
                       const struct layout *l, provider_progress_fn progress, void *arg,
                       mtc_error_t *err)
{
    if (l->nnodes == 0)
        return 0;
    size_t down = 0;
    for (size_t i = 0; i < l->nnodes; i++)
        down += !head_slurmd_running(c, l->nodes[i].name) && !node_off(c, &l->nodes[i]);
    if (down)
        head_say(progress, arg, "starting %zu slurmd(s)", down);
    for (size_t i = 0; i < l->nnodes; i++)
        if (!head_slurmd_running(c, l->nodes[i].name) && !node_off(c, &l->nodes[i]) &&
            local_slurmd_start(c, l->nodes[i].name, l->nodes[i].cloud, err) < 0)
            return -1;
    mtc_error_t *errs = calloc(l->nnodes, sizeof(*errs));
    if (!errs)
        return errprintf(err, "out of memory");
    struct starting st = {p, c, spec, l};
    long bad = local_parallel(l->nnodes, node_agent, &st, errs);
    if (bad >= 0)
        errprintf(err, "%s", errs[bad].text);
    free(errs);
    return bad >= 0 ? -1 : 0;
}

static int local_apply(struct provider *p, const char *id, const json_t *spec,
                       provider_progress_fn progress, void *arg, mtc_error_t *err)
{
    struct head c;
    struct layout *old = NULL, *l = NULL;
    struct slurm_node *sizes = NULL;
    char sha[65];
    int rc = -1;

    if (head_init(&c, p, id, err) < 0)
        return -1;
    /* callers pass the canonical form; normalizing again is cheap and
     * guarantees every name below was validated */
    json_t *norm = cluster_spec_normalize(spec, err);
    if (!norm)
        return -1;
    spec = norm;
    if (head_make_dirs(&c, err) < 0) {
        json_decref(norm);
        return -1;
    }
    if (head_lock(&c, 1) < 0) {
        json_decref(norm);
        return errprintf(err, "cannot lock %s: %s", c.dir, strerror(errno));
    }
    old = calloc(1, sizeof(*old));
    l = calloc(1, sizeof(*l));
    sizes = calloc(MAX_NODES, sizeof(*sizes));
    if (!old || !l || !sizes) {
        errprintf(err, "out of memory");
        goto out;
    }
    int have_old = local_layout_load(&c, old) == 0;
    head_say(progress, arg, have_old ? "updating cluster %s" : "creating cluster %s", id);
    if (plan_nodes(&c, spec, have_old ? old : NULL, l, sizes, err) < 0)
        goto out;
    snprintf(l->applied.sha, sizeof(l->applied.sha), "%s", have_old ? old->applied.sha : "");
    snprintf(l->applied.nodes, sizeof(l->applied.nodes), "%s", have_old ? old->applied.nodes : "");
    if (have_old && local_power_plan(&c, old, l, progress, arg, err) < 0)
        goto out;
    local_power_ports(&c, l, have_old ? old : NULL);
    if (write_config(p, &c, spec, l, sizes, sha, err) < 0 ||
        start_controller(&c, l, sha, progress, arg, err) < 0 ||
        start_nodes(p, &c, spec, l, progress, arg, err) < 0)
        goto out;
    const char *names[MAX_NODES];
    size_t nup = 0; /* elastic nodes that are off register when Slurm resumes them */
    for (size_t i = 0; i < l->nnodes; i++)
        if (!node_off(&c, &l->nodes[i]))
            names[nup++] = l->nodes[i].name;
    head_say(progress, arg, "waiting for %zu node(s) to register", nup);
    if (head_wait_registered(&c, names, NULL, nup, err) < 0)
        goto out;
    head_say(progress, arg, "cluster %s is ready", id);
    rc = 0;
out:
    if (rc < 0 && l && old) { /* the ports held for what was not recorded go */
        if (local_layout_load(&c, old) < 0)
            old->nnodes = 0;
        local_power_ports(&c, old, l);
    }
    head_unlock(&c);
    json_decref(norm);
    free(old);
    free(l);
    free(sizes);
    return rc;
}

/* Delete, under the lock: every node's processes killed, then the
 * controller's daemons stopped. */
#define DELETE_CTLD_MS 2000
static int delete_stop(struct provider *p, struct head *c, mtc_error_t *err)
{
    (void)p, (void)err;
    /* every process of every node at once (slurmds, agents, steps, jobs,
     * prologs and epilogs: one /proc scan a round, SIGSTOP then SIGKILL):
     * nothing of the cluster is kept, so neither the job queue nor a clean
     * slurmd stop is waited for; the directory goes with the mounts under it */
    if (local_node_kill(c, NULL, err) < 0)
        return -1;
    mtc_port_release_owner(c->id); /* the powered-down nodes' ports go */
    /* its saved state goes with the directory: a slurmctld still waiting on
     * the dead nodes' RPCs gets 2 s to stop, not 10 */
    pid_t ctld = head_ctld_running(c);
    if (ctld > 0)
        mtc_pid_stop(ctld, DELETE_CTLD_MS);
    head_stop_pidfile(c, "slurmctld", 0);
    head_acct_stop(c);
    head_stop_pidfile(c, "munged", head_munged_running(c));
    return 0;
}

static int local_delete(struct provider *p, const char *id, mtc_error_t *err)
{
    return head_delete_with(p, id, delete_stop, err);
}

static int local_supervise(struct provider *p, const char *id, const json_t *spec,
                           provider_event_fn ev, void *arg, mtc_error_t *err)
{
    struct head c;
    struct layout *l = NULL;
    char msg[256];
    int rc = -1, ctld_restarted = 0;
    if (head_init(&c, p, id, err) < 0)
        return -1;
    if (!mtc_path_exists(c.dir))
        return errprintf(err, "cluster %s has no directory %s", id, c.dir);
    if (head_lock(&c, 0) < 0)
        return 0; /* an apply or delete is at work; it starts what is missing */
    if (!(l = calloc(1, sizeof(*l))) || local_layout_load(&c, l) < 0) {
        errprintf(err, "cluster %s: no cluster.json (never applied?)", id);
        goto out;
    }
    local_power_ports(&c, l, NULL); /* (again after mtcd restarted) */
    if (head_supervise(&c, ev, arg, &ctld_restarted, err) < 0)
        goto out;
    for (size_t i = 0; i < l->nnodes; i++) {
        if (head_slurmd_running(&c, l->nodes[i].name) || node_off(&c, &l->nodes[i]))
            continue;
        if (local_slurmd_start(&c, l->nodes[i].name, l->nodes[i].cloud, err) < 0)
            goto out;
        snprintf(msg, sizeof(msg), "slurmd of %s was not running; restarted", l->nodes[i].name);
        if (ev)
            ev(arg, "SLURMD_RESTART", l->nodes[i].name, msg);
    }
    for (size_t i = 0; p->agent && i < l->nnodes; i++) {
        const char *nn = l->nodes[i].name;
        if (local_agent_running(&c, nn) || node_off(&c, &l->nodes[i]))
            continue;
        if (local_agent_config(p, &c, spec, nn, l->nodes[i].port, err) < 0 ||
            local_agent_start(p, &c, nn, err) < 0)
            goto out;
        snprintf(msg, sizeof(msg), "mtc-agent of %s was not running; restarted", nn);
        if (ev)
            ev(arg, "AGENT_RESTART", nn, msg);
    }
    if (local_power_watch(&c, l, ev, arg, err) < 0)
        goto out;
    head_supervise_end(&c, ctld_restarted);
    rc = 0;
out:
    free(l);
    head_unlock(&c);
    return rc;
}

static json_t *local_nodes(struct provider *p, const char *id, const json_t *spec, mtc_error_t *err)
{
    struct head c;
    struct layout *l = NULL;
    if (head_init(&c, p, id, err) < 0)
        return NULL;
    if (!(l = calloc(1, sizeof(*l))))
        return NULL;
    int have = local_layout_load(&c, l) == 0;
    json_t *out = json_array();
    mtc_error_t e2;
    json_t *st = have && head_ctld_running(&c) ? slurm_node_states(c.conf, &e2) : NULL;
    int busy = 0;
    if (have && head_lock(&c, 0) < 0)
        busy = 1;
    head_unlock(&c);
    for (size_t i = 0; i < l->nnodes; i++) {
        const char *s = json_string_value(json_object_get(st, l->nodes[i].name));
        /* an elastic node: Slurm's power state while it is not on */
        int ps = !l->nodes[i].cloud                       ? SLURM_POWER_ON
                 : s                                      ? (int)slurm_power_state_of(s)
                 : head_power_is_on(&c, l->nodes[i].name) ? SLURM_POWER_ON
                                                          : SLURM_POWERED_DOWN;
        const char *ns =
            ps != SLURM_POWER_ON ? schema_enum_name(&slurm_power_state_enum, ps) : NULL;
        if (!ns)
            ns = !head_slurmd_running(&c, l->nodes[i].name) ? (busy ? "PREPARING" : "ERROR")
                 : slurm_state_registered(s)                ? "RUNNING"
                 : busy                                     ? "UPDATING"
                                                            : "PREPARING";
        json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:s,s:s}", "instanceName",
                                             l->nodes[i].name, "nodePoolId", l->nodes[i].pool,
                                             "nodePoolType", "NODE_POOL_TYPE_COMPUTE", "nodeState",
                                             ns, "slurmState", s ? s : "unknown"));
    }
    const char *login = cluster_spec_login_pool(spec);
    const json_t *lp = login ? cluster_spec_pool(spec, login) : NULL;
    int nlogin = lp ? (int)json_integer_value(
                          json_object_get(json_object_get(lp, "scalingSpec"), "minNodeCount"))
                    : 0;
    for (int k = 0; k < nlogin; k++) {
        char name[64];
        snprintf(name, sizeof(name), "%s-%s-%d", id, login, k);
        /* the login node is this host with the cluster's environment */
        const char *ns = have && head_munged_running(&c) && head_ctld_running(&c) ? "RUNNING"
                         : busy                                                   ? "PREPARING"
                                                                                  : "ERROR";
        json_array_append_new(out,
                              json_pack("{s:s,s:s,s:s,s:s,s:s}", "instanceName", name, "nodePoolId",
                                        login, "nodePoolType", "NODE_POOL_TYPE_LOGIN", "nodeState",
                                        ns, "slurmState", "n/a"));
    }
    json_decref(st);
    free(l);
    return out;
}

static char *local_env(struct provider *p, const char *id, mtc_error_t *err)
{
    struct head c;
    char *s = NULL;
    if (head_init(&c, p, id, err) < 0)
        return NULL;
    if (!mtc_path_exists(c.conf)) {
        errno = ENOENT;
        errprintf(err, "cluster %s has no slurm.conf (not created?)", id);
        return NULL;
    }
    if (asprintf(&s,
                 "export SLURM_CONF='%s'\n"
                 "export MTC_CLUSTER='%s'\n"
                 "export MTC_CLUSTER_DIR='%s'\n"
                 "export MTC_CLUSTER_HOME='%s/home'\n"
                 "# munge and unmunge need: --socket=%s\n"
                 "export MTC_MUNGE_SOCKET='%s'\n"
                 /* every node is this host: ranks on two nodes are remote to
                  * Open MPI (no vader) and, left alone, its TCP BTL stripes
                  * over every interface up at start, a test's bridge too;
                  * that bridge deleted, the job hangs. Loopback only. */
                 "export MTC_MPI_NETWORK='127.0.0.0/8'\n",
                 c.conf, id, c.dir, c.dir, c.munge_socket, c.munge_socket) < 0) {
        errprintf(err, "out of memory");
        return NULL;
    }
    return s;
}

const struct provider_ops provider_local_ops = {
    .kind = "local",
    .apply = local_apply,
    .delete_ = local_delete,
    .nodes = local_nodes,
    .supervise = local_supervise,
    .env = local_env,
    .node_action = local_node_action,
    .node_check = local_node_check,
    .power = local_power,
    .node_fault = local_node_fault,
};
