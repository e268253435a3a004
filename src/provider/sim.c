/* sim: the "sim" provider — a simulated cluster for tests and capacity
 * planning (docs/scale.md), never for jobs: the spec's nodes with no daemons
 * behind them. It keeps each node's Slurm-like state (idle, drained, down)
 * itself, its node actions take the spec's `sim` times and fail at its rate,
 * and its node checks pass. mtc-simload plays the nodes' agents. */
#include "provider/provider.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "health/health.h"

/* One lock for every simulated cluster's state file: remediation workers,
 * the supervisor and the API read and change it from several threads. */
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;

/* A node's state as Slurm would name it (what provider_nodes reports). */
enum sim_state { SIM_IDLE, SIM_DRAINED, SIM_DOWN };
static const char *const state_names[] = {
    [SIM_IDLE] = "idle", [SIM_DRAINED] = "drained", [SIM_DOWN] = "down"};
/* enum slurm_node_op -> the state it leaves */
static const enum sim_state op_state[] = {
    [SLURM_NODE_DRAIN] = SIM_DRAINED, [SLURM_NODE_RESUME] = SIM_IDLE, [SLURM_NODE_DOWN] = SIM_DOWN};

/* Node actions: the spec's time for each (sim.<field>). */
static const struct {
    const char *action, *field;
} action_times[] = {{"restart", "restartSeconds"},
                   {"reboot", "rebootSeconds"},
                   {"reimage", "reimageSeconds"},
                   {"replace", "replaceSeconds"}};
#define N_ACTIONS (sizeof(action_times) / sizeof(action_times[0]))

static int sim_path(struct provider *p, const char *id, const char *name, char *buf, size_t len,
                    mtc_error_t *err)
{
    char dir[PATH_MAX];
    if (provider_cluster_dir(p, id, dir, sizeof(dir), err) < 0)
        return -1;
    if (snprintf(buf, len, "%s%s%s", dir, *name ? "/" : "", name) >= (int)len)
        return errprintf(err, "path too long");
    return 0;
}

/* The state file: {"nodes": {NAME: {"pool", "state", "reason", "boots", "action"}}}.
 * Caller holds state_lock and owns the result; an empty one when missing. */
static json_t *state_load(struct provider *p, const char *id, mtc_error_t *err)
{
    char path[PATH_MAX];
    if (sim_path(p, id, "sim-state.json", path, sizeof(path), err) < 0)
        return NULL;
    if (!mtc_path_exists(path))
        return json_pack("{s:{}}", "nodes");
    json_error_t je;
    json_t *s = json_load_file(path, 0, &je);
    if (!s || !json_is_object(json_object_get(s, "nodes"))) {
        json_decref(s);
        errno = EIO;
        errprintf(err, "%s: %s", path, s ? "no \"nodes\" object" : je.text);
        return NULL;
    }
    return s;
}

static int json_save(const char *path, const json_t *j, mode_t mode, mtc_error_t *err)
{
    char *text = json_dumps(j, JSON_COMPACT);
    if (!text)
        return errprintf(err, "out of memory");
    int rc = mtc_write_file_atomic(path, text, strlen(text), mode);
    free(text);
    if (rc < 0)
        return errprintf(err, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

static int state_save(struct provider *p, const char *id, const json_t *s, mtc_error_t *err)
{
    char path[PATH_MAX];
    if (sim_path(p, id, "sim-state.json", path, sizeof(path), err) < 0)
        return -1;
    return json_save(path, s, 0644, err);
}

/* The node's object in state s (borrowed), or NULL + err (EINVAL). */
static json_t *state_node(json_t *s, const char *id, const char *node, mtc_error_t *err)
{
    json_t *n = json_object_get(json_object_get(s, "nodes"), node ? node : "");
    if (!n) {
        errno = EINVAL;
        errprintf(err, "cluster %s has no node \"%.64s\"", id, node ? node : "");
    }
    return n;
}

/* ---- apply / delete ---- */

/* One node of the plan: its state kept from old, else a fresh idle node. */
static void plan_node(json_t *nodes, const json_t *old, const char *name, const char *pool)
{
    json_t *was = json_object_get(old, name);
    if (was && json_is_object(was)) {
        json_object_set(nodes, name, was);
        return;
    }
    json_object_set_new(nodes, name,
                        json_pack("{s:s, s:s, s:s, s:i, s:s}", "pool", pool, "state",
                                  state_names[SIM_IDLE], "reason", "", "boots", 0, "action", ""));
}

/* Each compute node's identity for mtc-simload: sim-agents.json (0600: it
 * holds the node tokens), {"project","location","clusterId","socket",
 * "healthPolicy","nodes":[{"nodeId","nodePoolId","token"}]}; tokens kept from
 * the previous file, minted for new nodes. */
static int write_agents(struct provider *p, const char *id, const json_t *spec,
                        const json_t *nodes, mtc_error_t *err)
{
    char path[PATH_MAX], project[64] = "local", location[64] = "local", sock[PATH_MAX];
    if (sim_path(p, id, "sim-agents.json", path, sizeof(path), err) < 0)
        return -1;
    if (p->identity.parent && p->identity.parent(p->identity.arg, id, project, location) < 0)
        return errprintf(err, "cluster %s: unknown to mtcd's store", id);
    json_t *old = mtc_path_exists(path) ? json_load_file(path, 0, NULL) : NULL;
    json_t *had = json_object(); /* node -> token */
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(old, "nodes"), i, e)
    {
        const char *n = json_string_value(json_object_get(e, "nodeId"));
        json_t *t = json_object_get(e, "token");
        if (n && json_is_string(t))
            json_object_set(had, n, t);
    }
    json_decref(old);
    snprintf(sock, sizeof(sock), "%s/mtcd.sock", p->home);
    const json_t *pol = json_object_get(spec, "healthPolicy");
    json_t *list = json_array();
    json_t *out = json_pack("{s:s, s:s, s:s, s:s, s:O, s:o}", "project", project, "location",
                            location, "clusterId", id, "socket", sock, "healthPolicy",
                            pol ? pol : json_null(), "nodes", list);
    const char *name;
    json_t *n;
    int rc = 0;
    json_object_foreach((json_t *)nodes, name, n)
    {
        char token[128] = "";
        json_t *t = json_object_get(had, name);
        if (t)
            snprintf(token, sizeof(token), "%s", json_string_value(t));
        else if (p->identity.node_token &&
                 p->identity.node_token(p->identity.arg, id, name, token, sizeof(token)) < 0) {
            rc = errprintf(err, "cannot mint a node token for %s", name);
            break;
        }
        json_array_append_new(list, json_pack("{s:s, s:O, s:s}", "nodeId", name, "nodePoolId",
                                              json_object_get(n, "pool"), "token", token));
        explicit_bzero(token, sizeof(token));
    }
    if (rc == 0)
        rc = json_save(path, out, 0600, err);
    json_decref(out);
    json_decref(had);
    return rc;
}

static int sim_apply(struct provider *p, const char *id, const json_t *spec,
                     provider_progress_fn progress, void *arg, mtc_error_t *err)
{
    char dir[PATH_MAX], path[PATH_MAX];
    if (sim_path(p, id, "", dir, sizeof(dir), err) < 0 ||
        sim_path(p, id, "provider", path, sizeof(path), err) < 0)
        return -1;
    if (mtc_mkdir_p(dir, 0755) < 0)
        return errprintf(err, "cannot create %s: %s", dir, strerror(errno));
    if (mtc_write_file_atomic(path, "sim\n", 4, 0644) < 0)
        return errprintf(err, "cannot write %s: %s", path, strerror(errno));
    const char *login = cluster_spec_login_pool(spec);
    pthread_mutex_lock(&state_lock);
    json_t *s = state_load(p, id, err);
    int rc = -1;
    if (!s)
        goto out;
    json_t *old = json_object_get(s, "nodes"), *nodes = json_object();
    size_t i;
    json_t *pool;
    json_array_foreach(json_object_get(spec, "nodePools"), i, pool)
    {
        const char *pid = json_string_value(json_object_get(pool, "id"));
        if (login && strcmp(pid, login) == 0)
            continue; /* the login pool: no compute nodes */
        json_int_t count =
            json_integer_value(json_object_get(json_object_get(pool, "scalingSpec"), "minNodeCount"));
        for (json_int_t k = 0; k < count; k++) {
            char name[96];
            snprintf(name, sizeof(name), "%s-%s-%lld", id, pid, (long long)k);
            plan_node(nodes, old, name, pid);
        }
    }
    json_object_set_new(s, "nodes", nodes);
    if (state_save(p, id, s, err) == 0 && write_agents(p, id, spec, nodes, err) == 0)
        rc = 0;
    if (rc == 0 && progress) {
        char msg[96];
        snprintf(msg, sizeof(msg), "%zu simulated nodes registered", json_object_size(nodes));
        progress(arg, msg);
    }
out:
    pthread_mutex_unlock(&state_lock);
    json_decref(s);
    return rc;
}

static int sim_delete(struct provider *p, const char *id, mtc_error_t *err)
{
    char dir[PATH_MAX];
    if (provider_cluster_dir(p, id, dir, sizeof(dir), err) < 0)
        return -1;
    pthread_mutex_lock(&state_lock);
    int rc = mtc_path_exists(dir) && mtc_rm_rf(dir) < 0 ? -1 : 0;
    pthread_mutex_unlock(&state_lock);
    if (rc < 0)
        return errprintf(err, "cannot remove %s: %s", dir, strerror(errno));
    return 0;
}

/* ---- what the control plane sees ---- */

static json_t *sim_nodes(struct provider *p, const char *id, const json_t *spec, mtc_error_t *err)
{
    pthread_mutex_lock(&state_lock);
    json_t *s = state_load(p, id, err);
    pthread_mutex_unlock(&state_lock);
    if (!s)
        return NULL;
    json_t *out = json_array();
    const char *name;
    json_t *n;
    json_object_foreach(json_object_get(s, "nodes"), name, n)
    {
        const char *st = json_string_value(json_object_get(n, "state"));
        const char *act = json_string_value(json_object_get(n, "action"));
        /* a node being acted on is not in service; otherwise it runs */
        json_array_append_new(out, json_pack("{s:s, s:O, s:s, s:s, s:s}", "instanceName", name,
                                             "nodePoolId", json_object_get(n, "pool"),
                                             "nodePoolType", "NODE_POOL_TYPE_COMPUTE", "nodeState",
                                             act && *act ? "UPDATING" : "RUNNING", "slurmState",
                                             st ? st : "unknown"));
    }
    json_decref(s);
    const char *login = cluster_spec_login_pool(spec);
    const json_t *lp = login ? cluster_spec_pool(spec, login) : NULL;
    json_int_t nlogin =
        lp ? json_integer_value(json_object_get(json_object_get(lp, "scalingSpec"), "minNodeCount"))
           : 0;
    for (json_int_t k = 0; k < nlogin; k++) {
        char nm[96];
        snprintf(nm, sizeof(nm), "%s-%s-%lld", id, login, (long long)k);
        json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:s,s:s}", "instanceName", nm,
                                             "nodePoolId", login, "nodePoolType",
                                             "NODE_POOL_TYPE_LOGIN", "nodeState", "RUNNING",
                                             "slurmState", "n/a"));
    }
    return out;
}

/* No daemons to supervise. */
static int sim_supervise(struct provider *p, const char *id, const json_t *spec,
                         provider_event_fn ev, void *arg, mtc_error_t *err)
{
    (void)p, (void)id, (void)spec, (void)ev, (void)arg, (void)err;
    return 0;
}

static char *sim_env(struct provider *p, const char *id, mtc_error_t *err)
{
    (void)p;
    errno = ENOTSUP;
    errprintf(err, "cluster %s is simulated (provider sim): it has no Slurm to use", id);
    return NULL;
}

static int sim_node_set(struct provider *p, const char *id, const char *node,
                        enum slurm_node_op op, const char *reason, mtc_error_t *err)
{
    pthread_mutex_lock(&state_lock);
    json_t *s = state_load(p, id, err), *n;
    int rc = -1;
    if (s && (n = state_node(s, id, node, err))) {
        json_object_set_new(n, "state", json_string(state_names[op_state[op]]));
        json_object_set_new(n, "reason",
                            json_string(op != SLURM_NODE_RESUME && reason ? reason : ""));
        rc = state_save(p, id, s, err);
    }
    pthread_mutex_unlock(&state_lock);
    json_decref(s);
    return rc;
}

/* Mark node's action (name, or "" when done; a success counts a boot). */
static int set_action(struct provider *p, const char *id, const char *node, const char *action,
                      int booted, mtc_error_t *err)
{
    pthread_mutex_lock(&state_lock);
    json_t *s = state_load(p, id, err), *n;
    int rc = -1;
    if (s && (n = state_node(s, id, node, err))) {
        json_object_set_new(n, "action", json_string(action));
        if (booted)
            json_object_set_new(
                n, "boots", json_integer(json_integer_value(json_object_get(n, "boots")) + 1));
        rc = state_save(p, id, s, err);
    }
    pthread_mutex_unlock(&state_lock);
    json_decref(s);
    return rc;
}

/* A uniform draw in [0, 100). */
static double percent_draw(void)
{
    char hex[17];
    if (mtc_random_hex(hex, 8) < 0)
        return 100.0; /* no randomness: never fail */
    return (double)(strtoull(hex, NULL, 16) >> 11) / (double)(1ULL << 53) * 100.0;
}

/* The action takes its simulated time (the worker waits, as it waits for a
 * real node), then succeeds — the node booted again — or fails at the
 * spec's actionFailurePercent. */
static int sim_node_action(struct provider *p, const char *id, const json_t *spec,
                           const char *node, const char *action, mtc_error_t *err)
{
    const json_t *sim = json_object_get(spec, "sim");
    size_t a = 0;
    while (a < N_ACTIONS && strcmp(action_times[a].action, action ? action : "") != 0)
        a++;
    if (a == N_ACTIONS) {
        errno = EINVAL;
        return errprintf(err, "unknown node action \"%.32s\"", action ? action : "");
    }
    if (set_action(p, id, node, action, 0, err) < 0)
        return -1;
    double secs = json_number_value(json_object_get(sim, action_times[a].field));
    mtc_sleep_ms((int)(secs * 1000.0));
    int ok = percent_draw() >= json_number_value(json_object_get(sim, "actionFailurePercent"));
    if (set_action(p, id, node, "", ok, err) < 0)
        return -1;
    if (!ok)
        return errprintf(err, "simulated %s of %s failed (sim.actionFailurePercent %g)", action,
                         node, json_number_value(json_object_get(sim, "actionFailurePercent")));
    return 0;
}

/* After an action the node is as good as new. */
static json_t *sim_node_check(struct provider *p, const char *id, const json_t *spec,
                              const char *node, mtc_error_t *err)
{
    pthread_mutex_lock(&state_lock);
    json_t *s = state_load(p, id, err);
    int known = s && state_node(s, id, node, err);
    pthread_mutex_unlock(&state_lock);
    json_decref(s);
    if (!known)
        return NULL;
    return provider_sim_results(json_object_get(spec, "healthPolicy"), NULL, NULL, err);
}

json_t *provider_sim_results(const json_t *policy, const char *failing, const char *reason,
                             mtc_error_t *err)
{
    struct health_policy pol;
    if (health_policy_parse(policy, &pol, err) < 0)
        return NULL;
    const struct health_check *bad = NULL;
    for (const struct health_check *c = health_checks; failing && c->name; c++)
        if (strcmp(c->name, failing) == 0)
            bad = c;
    if (failing && !bad) {
        errno = EINVAL;
        errprintf(err, "unknown check \"%.40s\" (see `mtc-agent checks`)", failing);
        return NULL;
    }
    struct health_result r[HEALTH_MAX_CHECKS];
    int n = 0;
    for (const struct health_check *c = health_checks; c->name && n < HEALTH_MAX_CHECKS; c++) {
        int on = c == bad;
        for (int i = 0; i < pol.nchecks && !c->slow && !c->costly; i++)
            on |= !strcmp(pol.checks[i], c->name) || !strcmp(pol.checks[i], c->family);
        if (!on)
            continue;
        struct health_result *x = &r[n++];
        memset(x, 0, sizeof(*x));
        snprintf(x->check, sizeof(x->check), "%s", c->name);
        x->status = c == bad ? HEALTH_FAIL : HEALTH_PASS;
        x->severity = c == bad ? c->severity : HEALTH_SEV_NONE;
        snprintf(x->reason, sizeof(x->reason), "%s",
                 c != bad ? "simulated node: ok" : reason ? reason : "simulated failure");
    }
    return health_results_json(r, n);
}

const struct provider_ops provider_sim_ops = {
    .kind = "sim",
    .apply = sim_apply,
    .delete_ = sim_delete,
    .nodes = sim_nodes,
    .supervise = sim_supervise,
    .env = sim_env,
    .node_action = sim_node_action,
    .node_check = sim_node_check,
    .node_set = sim_node_set,
};
