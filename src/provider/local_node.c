/* local_node: one emulated node of the local provider — its mtc-agent (config,
 * start, supervision), its emulated hardware (nodes/<node>/hw: GPU device
 * files, NVML state, kernel log, environment) and the repair actions restart, reboot,
 * reimage and replace, plus running its checks once for the controller. */
#include "provider/local.h"
#include "spank/container.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "health/health.h"
#include "slurm/slurm.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define REAL_NVML "libnvidia-ml.so.1"
#define CHECK_TIMEOUT_MS 120000
#define KILL_WAIT_MS 5000
/* a starting slurmd writes its pid file: as long as its registration may take */
#define SLURMD_UP_WAIT_MS REGISTER_WAIT_MS
/* keys of agent.env that hw/env may not set: they mark the node's processes
 * (node_pids) and point at its NVML state; a sh case pattern */
#define HW_ENV_RESERVED_SH "MTC_NODE|SLURM_CONF|FAKE_NVML_STATE"
static const char *const hw_env_reserved[] = {"MTC_NODE", "SLURM_CONF", "FAKE_NVML_STATE"};

/* ---- emulated hardware ---- */

static int new_instance(const struct head *c, const char *node, mtc_error_t *err)
{
    char path[PLEN], hex[17];
    if (mtc_random_hex(hex, 8) < 0)
        return errprintf(err, "cannot make an instance id");
    if (mtc_write_file_fmt(head_path(c, path, "nodes/%s/instance", node), 0644, "i-%s\n", hex) < 0)
        return errprintf(err, "%s: %s", path, strerror(errno));
    /* a new instance is a new machine: its agent gets a new token */
    if (unlink(head_path(c, path, "nodes/%s/agent.token", node)) < 0 && errno != ENOENT)
        return errprintf(err, "%s: %s", path, strerror(errno));
    return 0;
}

int local_node_provision(const struct head *c, const char *node, int gpus, int fake_devices,
                         int fresh, mtc_error_t *err)
{
    char path[PLEN], hw[PLEN];
    head_path(c, hw, "nodes/%s/hw", node);
    if (fresh && mtc_rm_rf(hw) < 0 && errno != ENOENT)
        return errprintf(err, "cannot remove %s: %s", hw, strerror(errno));
    if (mtc_mkdir_p(hw, 0755) < 0)
        return errprintf(err, "mkdir %s: %s", hw, strerror(errno));
    if (fresh || !mtc_path_exists(head_path(c, path, "nodes/%s/instance", node)))
        if (new_instance(c, node, err) < 0)
            return -1;
    /* the emulated GPUs' NVML state (read by an NVML library named in
     * healthPolicy.nvmlLibrary through $FAKE_NVML_STATE): healthy, all visible */
    snprintf(path, sizeof(path), "%s/nvml.state", hw);
    if (!mtc_path_exists(path) &&
        mtc_write_file_fmt(path, 0644, "# emulated GPUs of %s (see docs/health.md)\ncount %d\n",
                           node, gpus) < 0)
        return errprintf(err, "%s: %s", path, strerror(errno));
    /* the node's kernel log: XID lines land here */
    snprintf(path, sizeof(path), "%s/kernel.log", hw);
    if (!mtc_path_exists(path) && mtc_write_file_atomic(path, "", 0, 0644) < 0)
        return errprintf(err, "%s: %s", path, strerror(errno));
    for (int g = 0; fake_devices && g < gpus; g++) {
        snprintf(path, sizeof(path), "%s/nvidia%d", hw, g);
        if (mtc_path_exists(path))
            continue;
        /* Slurm wants a character device; 195 is the NVIDIA major, and with
         * no driver loaded opening one fails harmlessly. Without CAP_MKNOD a
         * plain file still gives Slurm the GPU count. */
        if (mknod(path, S_IFCHR | 0666, makedev(195, (unsigned)g)) < 0 &&
            mtc_write_file_atomic(path, "", 0, 0666) < 0)
            return errprintf(err, "%s: %s", path, strerror(errno));
    }
    return 0;
}

/* ---- the agent ---- */

static const json_t *spec_policy(const json_t *spec)
{
    return json_object_get(spec, "healthPolicy");
}

/* The node's pool's GPU count from the spec (node names are <id>-<pool>-<k>). */
static int node_gpus(const json_t *spec, const struct lnode *n)
{
    const json_t *pool = cluster_spec_pool(spec, n->pool);
    return (int)json_integer_value(
        json_object_get(json_object_get(pool, "machineSpec"), "acceleratorCount"));
}

/* Which NVML and kernel log the node's agent reads, and whether the NVML is
 * an emulation that reads hw/nvml.state. */
static void node_sources(const struct head *c, const json_t *spec, const char *node, char *nvml,
                         char *klog, int *emulated)
{
    const json_t *pol = spec_policy(spec);
    const char *lib = json_string_value(json_object_get(pol, "nvmlLibrary"));
    const char *kl = json_string_value(json_object_get(pol, "kernelLog"));
    snprintf(nvml, PLEN, "%s", lib && *lib ? lib : REAL_NVML);
    *emulated = strcmp(nvml, REAL_NVML) != 0;
    /* a host with GPUs has their kernel log; an emulated node has its own */
    if (kl && *kl)
        snprintf(klog, PLEN, "%s", kl);
    else if (local_host_gpus() > 0)
        snprintf(klog, PLEN, "/dev/kmsg");
    else
        head_path(c, klog, "nodes/%s/hw/kernel.log", node);
}

/* The node's token file (0600), minted through the provider's identity when
 * missing; "" into path when there is no identity to mint one. */
static int node_token_file(const struct provider *p, const struct head *c, const char *node,
                           char *path, mtc_error_t *err)
{
    head_path(c, path, "nodes/%s/agent.token", node);
    if (mtc_path_exists(path))
        return 0;
    char token[128];
    if (!p->identity.node_token) {
        *path = '\0';
        return 0;
    }
    if (p->identity.node_token(p->identity.arg, c->id, node, token, sizeof(token)) < 0)
        return errprintf(err, "cannot mint a node token for %s", node);
    int rc = mtc_write_file_atomic(path, token, strlen(token), 0600);
    explicit_bzero(token, sizeof(token));
    if (rc < 0)
        return errprintf(err, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

int local_agent_config(const struct provider *p, const struct head *c, const json_t *spec,
                       const char *node, int port, mtc_error_t *err)
{
    char path[PLEN], nvml[PLEN], klog[PLEN], sock[PLEN], home[PLEN], local[PLEN], state[PLEN],
        pidf[PLEN];
    int emulated, gpus = 0;
    struct layout *l = calloc(1, sizeof(*l));
    if (!l)
        return errprintf(err, "out of memory");
    const struct lnode *n = local_layout_load(c, l) == 0 ? local_layout_find(l, node) : NULL;
    if (n)
        gpus = node_gpus(spec, n);
    free(l);
    node_sources(c, spec, node, nvml, klog, &emulated);
    /* the real NVML sees only the host's GPUs; with none and no emulated
     * NVML there is nothing to ask, so the GPU checks skip */
    if (!emulated && gpus > local_host_gpus())
        gpus = local_host_gpus();
    char token[PLEN], project[64] = "local", location[64] = "local";
    if (node_token_file(p, c, node, token, err) < 0)
        return -1;
    if (p->identity.parent && p->identity.parent(p->identity.arg, c->id, project, location) < 0)
        return errprintf(err, "cluster %s: unknown to mtcd's store", c->id);
    snprintf(sock, sizeof(sock), "%s/mtcd.sock", p->home);
    head_path(c, home, "home");
    head_path(c, local, "tmp/%s", node);
    head_path(c, state, "nodes/%s/agent", node);
    head_path(c, pidf, "run/slurm/slurmd-%s.pid", node);
    mtc_mkdir_p(state, 0755);
    json_t *pol = spec_policy(spec) ? json_deep_copy(spec_policy(spec)) : json_object();
    json_t *cfg = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:i, s:s, s:s, s:o}",
        "nodeId", node, "clusterId", c->id, "project", project, "location", location, "socket",
        sock, "homeDir", home, "localDir", local, "nvmlLibrary", nvml, "kernelLog", klog,
        "stateDir", state, "expectedGpus", gpus, "slurmdPidFile", pidf, "slurmdPort", port,
        "mungeSocket", c->munge_socket, "slurmConf", c->conf, "healthPolicy", pol);
    if (cfg && *token)
        json_object_set_new(cfg, "tokenFile", json_string(token));
    int rc = head_json_write_if_changed(head_path(c, path, "nodes/%s/agent.json", node), cfg, err);
    if (rc < 0)
        return -1;
    /* the environment of every mtc-agent run on the node (sourced by the
     * Slurm hooks through {nodedir}/agent.env): MTC_NODE and SLURM_CONF mark
     * the processes as the node's (node_pids) */
    char env[3 * PLEN];
    char containers[PLEN];
    head_path(c, containers, "nodes/%s/containers", node);
    head_agent_env(env, sizeof(env), node, c->conf, containers,
                   emulated ? head_path(c, path, "nodes/%s/hw/nvml.state", node) : NULL);
    /* hw/env for the Slurm hooks, read as agent_env does (taken as is, no
     * expansion; a bad line skipped); agent_env itself reads only the
     * export lines above, then hw/env */
    snprintf(env + strlen(env), sizeof(env) - strlen(env),
             "# the emulated hardware's environment: nodes/<node>/hw/env, KEY=VALUE lines\n"
             "_mtc_hw='%s/nodes/%s/hw/env' _mtc_cr=$(printf '\\r')\n"
             "if [ -r \"$_mtc_hw\" ]; then while IFS= read -r _mtc_l || [ -n \"$_mtc_l\" ]; do\n"
             "  _mtc_l=${_mtc_l%%\"$_mtc_cr\"}\n"
             "  case $_mtc_l in ''|'#'*|*\"$_mtc_cr\"*) continue ;; *=*) ;; *) continue ;; esac\n"
             "  case ${_mtc_l%%%%=*} in ''|[0-9]*|*[!A-Z0-9_]*|%s) continue ;; esac\n"
             "  export \"$_mtc_l\"\n"
             "done <\"$_mtc_hw\"; fi\n",
             c->dir, node, HW_ENV_RESERVED_SH);
    int rc2 = mtc_write_if_changed(head_path(c, path, "nodes/%s/agent.env", node), env, err);
    if (rc2 < 0)
        return -1;
    return rc || rc2;
}

/* The environment of the node's agent runs, as "K=V" strings into env
 * (NULL-terminated, at most NODE_ENV_MAX), their text in buf: agent.env's
 * exports (generated by mtc), then the emulated hardware's hw/env, KEY=VALUE
 * lines set by hand or by a test (e.g. LD_PRELOAD of a faulty libm). A bad
 * hw/env line is skipped with a warning rather than failing the agent start,
 * so one node's typo does not stop supervise from restarting the others. */
#define NODE_ENV_MAX 32
#define NODE_ENV_BUF (4 * PLEN)

static int env_add(char *buf, size_t len, size_t *used, char *env[], size_t *n, const char *k,
                   int klen, const char *v, int vlen)
{
    int w = snprintf(buf + *used, len - *used, "%.*s=%.*s", klen, k, vlen, v);
    if (*n >= NODE_ENV_MAX || w < 0 || *used + (size_t)w + 1 >= len)
        return -1;
    env[(*n)++] = buf + *used;
    *used += (size_t)w + 1;
    return 0;
}

/* 1 when the first klen bytes of k are ^[A-Z_][A-Z0-9_]*$ */
static int env_key_valid(const char *k, size_t klen)
{
    if (klen == 0 || isdigit((unsigned char)k[0]))
        return 0;
    for (size_t i = 0; i < klen; i++)
        if (!(isupper((unsigned char)k[i]) || isdigit((unsigned char)k[i]) || k[i] == '_'))
            return 0;
    return 1;
}

static void agent_env(const struct head *c, const char *node, char *buf, size_t len,
                      char *env[NODE_ENV_MAX + 1])
{
    char path[PLEN];
    size_t n = 0, used = 0;
    char *s = mtc_read_file(head_path(c, path, "nodes/%s/agent.env", node), NULL), *save = NULL;
    for (char *line = s ? strtok_r(s, "\n", &save) : NULL; line;
         line = strtok_r(NULL, "\n", &save)) {
        char *eq = strncmp(line, "export ", 7) == 0 ? strchr(line, '=') : NULL;
        if (!eq || eq[1] != '\'' || !strchr(eq + 2, '\''))
            continue;
        if (env_add(buf, len, &used, env, &n, line + 7, (int)(eq - line - 7), eq + 2,
                    (int)(strchr(eq + 2, '\'') - eq - 2)) < 0)
            break;
    }
    free(s);
    /* hw/env: one KEY=VALUE a line, the value taken as is (no quotes, no
     * expansion); blank lines and lines starting with '#' are comments */
    s = mtc_read_file(head_path(c, path, "nodes/%s/hw/env", node), NULL);
    int lineno = 0;
    for (char *line = s, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        lineno++;
        size_t ll = strlen(line);
        if (ll && line[ll - 1] == '\r')
            line[--ll] = '\0';
        if (!ll || line[0] == '#')
            continue;
        char *eq = strchr(line, '=');
        const char *why = NULL;
        if (!eq || !env_key_valid(line, (size_t)(eq - line)))
            why = "not KEY=VALUE with KEY ^[A-Z_][A-Z0-9_]*$";
        else if (strchr(eq + 1, '\r'))
            why = "value is not one line";
        for (size_t i = 0; !why && i < sizeof(hw_env_reserved) / sizeof(*hw_env_reserved); i++)
            if (strlen(hw_env_reserved[i]) == (size_t)(eq - line) &&
                strncmp(hw_env_reserved[i], line, (size_t)(eq - line)) == 0)
                why = "key is set by mtc (agent.env)";
        if (!why && env_add(buf, len, &used, env, &n, line, (int)(eq - line), eq + 1,
                            (int)strlen(eq + 1)) < 0)
            why = "too many or too long entries";
        if (why)
            log_msg(LOG_WARNING, "%s line %d: %s; line ignored", path, lineno, why);
    }
    free(s);
    env[n] = NULL;
}

pid_t local_agent_running(const struct head *c, const char *node)
{
    char name[96], cfg[PLEN];
    snprintf(name, sizeof(name), "agent-%s", node);
    head_path(c, cfg, "nodes/%s/agent.json", node);
    /* no pid file of its own: the argv check alone guards against reuse */
    return head_running(c, name, "run/none", cfg, "run");
}

int local_agent_start(const struct provider *p, const struct head *c, const char *node,
                      mtc_error_t *err)
{
    char cfg[PLEN], logp[PLEN], name[96], envbuf[NODE_ENV_BUF], *env[NODE_ENV_MAX + 1];
    head_path(c, cfg, "nodes/%s/agent.json", node);
    agent_env(c, node, envbuf, sizeof(envbuf), env);
    char *argv[] = {p->agent, "run", "--config", cfg, NULL};
    pid_t pid = mtc_spawn(argv, env, head_path(c, logp, "log/agent-%s.log", node));
    if (pid < 0)
        return errprintf(err, "cannot start %s for %s: %s", p->agent, node, strerror(errno));
    snprintf(name, sizeof(name), "agent-%s", node);
    head_record_pid(c, name, pid);
    return 0;
}

void local_agent_stop(const struct head *c, const char *node)
{
    char name[96];
    snprintf(name, sizeof(name), "agent-%s", node);
    head_stop_pidfile(c, name, local_agent_running(c, node));
}

/* ---- every process of an emulated node ---- */

/* 1 when pid's initial environment has both "K=V" strings (b may be NULL). */
static int environ_has(pid_t pid, const char *a, const char *b)
{
    return mtc_proc_has(pid, "environ", a, b);
}

/* 1 when pid's initial environment has the entry a and an entry starting
 * with one of the prefixes p1, p2. */
static int environ_has_prefix(pid_t pid, const char *a, const char *p1, const char *p2)
{
    char path[64];
    size_t len = 0;
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    char *s = mtc_read_file(path, &len);
    if (!s)
        return 0;
    int fa = 0, fp = 0;
    for (size_t i = 0; i < len; i += strlen(s + i) + 1) {
        fa |= strcmp(s + i, a) == 0;
        fp |= strncmp(s + i, p1, strlen(p1)) == 0 || strncmp(s + i, p2, strlen(p2)) == 0;
    }
    free(s);
    return fa && fp;
}

/* What marks a process as a node's (node_pids). */
struct node_mark {
    const char *node; /* NULL: any node of the cluster */
    char conf[PLEN + 16], mark[128], task[128];
    pid_t roots[2];
};

static int node_mine(pid_t pid, void *arg)
{
    const struct node_mark *m = arg;
    if (!m->node)
        return environ_has_prefix(pid, m->conf, "MTC_NODE=", "SLURMD_NODENAME=");
    return pid == m->roots[0] || pid == m->roots[1] || environ_has(pid, m->conf, m->mark) ||
           environ_has(pid, m->conf, m->task);
}

/* The processes of node: its slurmd and agent (recorded pids), every process
 * whose environment says it belongs to the node — slurmstepd inherits
 * slurmd's MTC_NODE, job tasks get SLURMD_NODENAME — with this cluster's
 * SLURM_CONF, and all their descendants (mtc_proc_tree: a job's children are
 * found even with a cleaned environment). No cgroups, no name patterns.
 * node NULL: the processes of every node of the cluster. Returns the count
 * written to out. */
static size_t node_pids(const struct head *c, const char *node, pid_t *out, size_t max)
{
    struct node_mark m = {.node = node};
    snprintf(m.conf, sizeof(m.conf), "SLURM_CONF=%s", c->conf);
    snprintf(m.mark, sizeof(m.mark), "MTC_NODE=%s", node ? node : "");
    snprintf(m.task, sizeof(m.task), "SLURMD_NODENAME=%s", node ? node : "");
    m.roots[0] = node ? head_slurmd_running(c, node) : 0;
    m.roots[1] = node ? local_agent_running(c, node) : 0;
    return mtc_proc_tree(node_mine, &m, out, max);
}

int local_node_kill(const struct head *c, const char *node, mtc_error_t *err)
{
    static __thread pid_t pids[4 * MAX_NODES + 1024];
    size_t n = 0;
    for (int round = 0; round < 5; round++) {
        size_t before = n;
        n = node_pids(c, node, pids, sizeof(pids) / sizeof(pids[0]));
        for (size_t i = 0; i < n; i++)
            kill(pids[i], SIGSTOP);
        if (n == before && round > 0)
            break;
    }
    for (size_t i = 0; i < n; i++)
        kill(pids[i], SIGKILL);
    for (int64_t end = mtc_now_ms() + KILL_WAIT_MS;; mtc_sleep_ms(50)) {
        size_t alive = 0;
        for (size_t i = 0; i < n; i++)
            alive += mtc_pid_alive(pids[i]);
        if (!alive)
            break;
        if (mtc_now_ms() >= end)
            return errprintf(err, "%s: %zu process(es) survived SIGKILL", node ? node : "nodes",
                             alive);
    }
    if (n && node)
        log_msg(LOG_NOTICE, "cluster %s: node %s powered off (%zu processes)", c->id, node, n);
    else if (n)
        log_msg(LOG_NOTICE, "cluster %s: every node powered off (%zu processes)", c->id, n);
    return 0;
}

/* ---- actions ---- */

struct act_ctx {
    struct provider *p;
    const struct head *c;
    const json_t *spec;
    const struct lnode *n;
};

/* slurmd and agent (gracefully): a daemon restart leaves the jobs running */
static int stop_daemons(const struct act_ctx *a, mtc_error_t *err)
{
    char name[96];
    (void)err;
    snprintf(name, sizeof(name), "slurmd-%s", a->n->name);
    head_stop_pidfile(a->c, name, head_slurmd_running(a->c, a->n->name));
    local_agent_stop(a->c, a->n->name);
    return 0;
}

/* A reboot loses the kernel's ring buffer and the agent's per-boot state
 * (latched XIDs); the emulated hardware itself (nvml.state) is kept. */
static int power_cycle(const struct act_ctx *a, mtc_error_t *err)
{
    char path[PLEN];
    if (local_node_kill(a->c, a->n->name, err) < 0)
        return -1;
    mtc_rm_rf(head_path(a->c, path, "nodes/%s/agent", a->n->name));
    /* the node's jobs died with it: so do their container mounts */
    if (container_sweep(head_path(a->c, path, "nodes/%s/containers/jobs", a->n->name), err) < 0)
        return -1;
    if (truncate(head_path(a->c, path, "nodes/%s/hw/kernel.log", a->n->name), 0) < 0 &&
        errno != ENOENT)
        return errprintf(err, "%s: %s", path, strerror(errno));
    return 0;
}

/* Wipe the node's disks: Slurm spool, TmpFS scratch, agent state. */
static int wipe_local(const struct act_ctx *a, mtc_error_t *err)
{
    static const char *const dirs[] = {"spool/%s", "tmp/%s", "nodes/%s/agent"};
    char path[PLEN];
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        if (mtc_rm_rf(head_path(a->c, path, dirs[i], a->n->name)) < 0 && errno != ENOENT)
            return errprintf(err, "cannot wipe %s: %s", path, strerror(errno));
    return 0;
}

static int act_restart(const struct act_ctx *a, mtc_error_t *err)
{
    return stop_daemons(a, err);
}

static int act_reboot(const struct act_ctx *a, mtc_error_t *err)
{
    return power_cycle(a, err);
}

static int act_reimage(const struct act_ctx *a, mtc_error_t *err)
{
    return power_cycle(a, err) < 0 ? -1 : wipe_local(a, err);
}

static int act_replace(const struct act_ctx *a, mtc_error_t *err)
{
    if (power_cycle(a, err) < 0 || wipe_local(a, err) < 0)
        return -1;
    int gpus = node_gpus(a->spec, a->n);
    return local_node_provision(a->c, a->n->name, gpus, gpus > local_host_gpus(), 1, err);
}

static int (*const actions[PROVIDER_NACTIONS])(const struct act_ctx *a, mtc_error_t *err) = {
    [PROVIDER_RESTART] = act_restart,
    [PROVIDER_REBOOT] = act_reboot,
    [PROVIDER_REIMAGE] = act_reimage,
    [PROVIDER_REPLACE] = act_replace,
};

int local_node_action(struct provider *p, const char *id, const json_t *spec, const char *node,
                      const char *action, mtc_error_t *err)
{
    struct head c;
    int k = provider_action_find(action, err);
    if (k < 0 || head_init(&c, p, id, err) < 0)
        return -1;
    const struct lnode *n;
    struct layout *l = local_layout_node(&c, node, "compute node", &n, err);
    if (!l)
        return -1;
    int rc = -1;
    /* the lock keeps supervise from restarting what the action stops, and
     * another action off this node; actions on other nodes run beside it */
    int nfd = head_lock_node(&c, n->name);
    if (nfd < 0) {
        errprintf(err, "cannot lock %s: %s", c.dir, strerror(errno));
        free(l);
        return -1;
    }
    char old_start[64] = "";
    slurm_node_get(c.conf, n->name, "SlurmdStartTime", old_start, sizeof(old_start));
    log_msg(LOG_NOTICE, "cluster %s: %s node %s", id, provider_action_names[k], n->name);
    struct act_ctx a = {p, &c, spec, n};
    if (actions[k](&a, err) < 0)
        goto out;
    /* slurmctld shows the start time to the second: a new slurmd must start
     * in a later second than the old one to be told apart from it */
    for (int64_t end = mtc_now_ms() + 2000; mtc_now_ms() < end; mtc_sleep_ms(50)) {
        char now[64];
        time_t t = time(NULL);
        struct tm tm;
        strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%S", localtime_r(&t, &tm));
        if (strcmp(now, old_start) > 0)
            break;
    }
    /* up again: fresh config for a re-provisioned node, slurmd, then its agent */
    if (local_node_up(p, &c, spec, n, 0, err) < 0)
        goto out;
    rc = head_wait_new_slurmd(&c, n->name, NULL, old_start, err);
out:
    head_unlock_node(&c, nfd);
    free(l);
    return rc;
}

json_t *local_node_check(struct provider *p, const char *id, const json_t *spec, const char *node,
                         mtc_error_t *err)
{
    struct head c;
    char cfg[PLEN], envbuf[NODE_ENV_BUF], *env[NODE_ENV_MAX + 1];
    (void)spec;
    if (head_init(&c, p, id, err) < 0)
        return NULL;
    if (!node || !mtc_name_valid(node, 63) ||
        !mtc_path_exists(head_path(&c, cfg, "nodes/%s/agent.json", node))) {
        errno = EINVAL;
        errprintf(err, "cluster %s: node \"%.64s\" has no agent config", id, node ? node : "");
        return NULL;
    }
    agent_env(&c, node, envbuf, sizeof(envbuf), env);
    char *argv[] = {p->agent ? p->agent : "mtc-agent", "check", "--json", "--config", cfg, NULL};
    char *out = NULL;
    int rc = mtc_run(argv, env, &out, CHECK_TIMEOUT_MS);
    /* 0 all pass, 1 a check failed: both print the results; 2 is a usage error */
    json_t *o = NULL;
    if ((rc == 0 || rc == 1) && out) {
        /* stderr is merged in: the JSON object starts on a line of its own */
        char *s = out[0] == '{' ? out : strstr(out, "\n{");
        if (s)
            o = json_loads(s + (*s == '\n'), JSON_DISABLE_EOF_CHECK, NULL);
    }
    json_t *res = head_check_results(o);
    if (!res) {
        char *nl = out ? strchr(out, '\n') : NULL;
        if (nl)
            *nl = '\0';
        errprintf(err, "%s: mtc-agent check failed (exit %d): %.150s", node, rc,
                  out && *out ? out : strerror(errno));
    }
    free(out);
    return res;
}

int local_slurmd_wait_up(const struct head *c, const char *node, mtc_error_t *err)
{
    char own[PLEN], rec[PLEN];
    head_path(c, own, "run/slurm/slurmd-%s.pid", node);
    head_path(c, rec, "run/slurmd-%s.pid", node);
    for (int64_t end = mtc_now_ms() + SLURMD_UP_WAIT_MS;; mtc_sleep_ms(50)) {
        pid_t pid = mtc_pid_read(own);
        if (pid > 0 && mtc_pid_alive(pid))
            return 0;
        /* by pid alone: right after the spawn its command line is in flux */
        if (!mtc_pid_alive(mtc_pid_read(rec)))
            return errprintf(err, "%s: slurmd exited at start (see %s/log/slurmd-%s.log)", node,
                             c->dir, node);
        if (mtc_now_ms() >= end)
            return errprintf(err, "%s: slurmd wrote no pid file within %d s", node,
                             SLURMD_UP_WAIT_MS / 1000);
    }
}

int local_node_up(const struct provider *p, const struct head *c, const json_t *spec,
                  const struct lnode *n, int boot, mtc_error_t *err)
{
    int gpus = node_gpus(spec, n);
    if (local_node_provision(c, n->name, gpus, gpus > local_host_gpus(), 0, err) < 0 ||
        local_agent_config(p, c, spec, n->name, n->port, err) < 0)
        return -1;
    if (!head_slurmd_running(c, n->name) && local_slurmd_start(c, n->name, boot, err) < 0)
        return -1;
    /* a booting node's agent checks slurmd through its own pid file at once:
     * wait for it; a slurmd that cannot start fails the resume here (Slurm
     * then gives up on the node after ResumeTimeout) */
    if (boot && local_slurmd_wait_up(c, n->name, err) < 0)
        return -1;
    if (p->agent && !local_agent_running(c, n->name) && local_agent_start(p, c, n->name, err) < 0)
        return -1;
    return 0;
}

/* A node's slurmd started (boot: as a machine that boots now), its pid
 * recorded. */
int local_slurmd_start(const struct head *c, const char *node, int boot, mtc_error_t *err)
{
    char path[PLEN], name[96];
    mtc_mkdir_p(head_path(c, path, "spool/%s", node), 0755);
    mtc_mkdir_p(head_path(c, path, "tmp/%s", node), 01777); /* TmpFS=<dir>/tmp/%n */
    head_path(c, path, "log/slurmd-%s.out", node);
    /* an elastic node's slurmd starts as a machine that boots now: Slurm
     * takes a resumed node only when it booted after the resume request */
    pid_t pid =
        boot ? slurm_slurmd_boot(c->conf, node, path) : slurm_slurmd_start(c->conf, node, path);
    if (pid < 0)
        return errprintf(err, "cannot start slurmd for %s: %s", node, strerror(errno));
    snprintf(name, sizeof(name), "slurmd-%s", node);
    head_record_pid(c, name, pid);
    return 0;
}

/* NVIDIA devices this host has (/dev/nvidia0, 1, ... in a row). */
int local_host_gpus(void)
{
    int n = 0;
    char path[64];
    for (;; n++) {
        snprintf(path, sizeof(path), "/dev/nvidia%d", n);
        if (!mtc_path_exists(path))
            return n;
    }
}
