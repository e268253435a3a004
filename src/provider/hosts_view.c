/* hosts_view: a cluster on hosts seen from mtcd — supervision (the
 * controller's daemons every pass; each host's, at most every HOSTS_CHECK_MS,
 * in one ssh command per host that restarts what died and says so, run in a
 * thread of its own so an unreachable host never stalls other clusters), the
 * nodes and hosts lists, `mtc env` and how `mtc login` reaches the login host. */
#include "provider/hosts.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slurm/slurm.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* ---- supervise ---- */

struct sup {
    struct provider *p;
    const struct head *c;
    struct hstate *s;
    char *out[HOSTS_MAX];         /* each node's host's answer to "check" */
    int rc[HOSTS_MAX];            /* its status (-1: not reached) */
    const char *hosts[HOSTS_MAX]; /* quarantined hosts to stop */
};

static int t_check(void *arg, size_t i, mtc_error_t *err)
{
    struct sup *u = arg;
    const struct hnode *n = &u->s->nodes[i];
    if (hosts_node_off(u->c, n)) { /* powered down: nothing to restart */
        u->rc[i] = 0;
        return 0;
    }
    struct ssh_conn *ssh = hosts_ssh(u->p, u->s, n->host, err);
    int rc = ssh ? hosts_remote_op(ssh, u->s, "check", n->name, -1, &u->out[i], 20000, err) : -1;
    ssh_free(ssh);
    u->rc[i] = rc;
    return rc == 0 ? 0 : -1;
}

static int t_fence(void *arg, size_t i, mtc_error_t *err)
{
    struct sup *u = arg;
    struct ssh_conn *ssh = hosts_ssh(u->p, u->s, u->hosts[i], err);
    int rc = ssh ? hosts_remote_op(ssh, u->s, "stop", "", -1, NULL, 20000, err) : -1;
    ssh_free(ssh);
    return rc == 0 ? 0 : -1;
}

static const struct {
    const char *line, *event, *what;
} restarts[] = {
    {"mtc-host: restarted munged", "MUNGED_RESTART", "munged"},
    {"mtc-host: restarted slurmd", "SLURMD_RESTART", "slurmd"},
    {"mtc-host: restarted agent", "AGENT_RESTART", "mtc-agent"},
    {"mtc-host: restarted slurmctld", "SLURMCTLD_RESTART", "the backup slurmctld"},
};

/* ---- the hosts' pass, in a thread of its own ----
 * An unreachable host costs a pass many seconds of ssh timeouts; in its own
 * thread it never stalls the supervision of the other clusters (one control
 * thread walks them all). Its findings wait in the cluster's slot and are
 * reported by the next supervise call. */

#define CHECK_SLOTS 64
#define CHECK_EVENTS (HOSTS_MAX + 8)
struct check_event {
    char type[24], node[64], msg[400];
};
struct check_slot {
    char dir[PLEN];      /* the cluster's directory ("" = free slot) */
    int running;         /* a pass is at work */
    int64_t last_ms;     /* when the last pass started */
    int64_t done_ms;     /* when the last pass that ended started */
    int64_t reported_ms; /* when the last pass whose findings were reported started */
    int64_t ping_ms;     /* when the controllers were last pinged (controller_watch) */
    size_t nev;          /* findings not yet reported */
    struct check_event ev[CHECK_EVENTS];
};
static pthread_mutex_t checks_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t checks_cv = PTHREAD_COND_INITIALIZER;
static struct check_slot checks[CHECK_SLOTS];
static int checks_running;

/* The slot of the cluster in dir (made when absent); NULL when all are taken.
 * checks_mu held. */
static struct check_slot *slot_of(const char *dir)
{
    struct check_slot *free_slot = NULL;
    for (size_t i = 0; i < CHECK_SLOTS; i++) {
        if (!strcmp(checks[i].dir, dir))
            return &checks[i];
        if (!checks[i].dir[0] && !free_slot)
            free_slot = &checks[i];
    }
    if (free_slot) {
        memset(free_slot, 0, sizeof(*free_slot));
        snprintf(free_slot->dir, sizeof(free_slot->dir), "%s", dir);
    }
    return free_slot;
}

/* A finding of the pass (provider_event_fn): kept in the slot. */
static void keep_event(void *arg, const char *type, const char *node, const char *msg)
{
    struct check_slot *slot = arg;
    pthread_mutex_lock(&checks_mu);
    if (slot->nev < CHECK_EVENTS) {
        struct check_event *e = &slot->ev[slot->nev++];
        snprintf(e->type, sizeof(e->type), "%s", type);
        snprintf(e->node, sizeof(e->node), "%s", node ? node : "");
        snprintf(e->msg, sizeof(e->msg), "%s", msg);
    }
    pthread_mutex_unlock(&checks_mu);
}

/* What mtc-host's answer out says it restarted: an event each (for node,
 * NULL: none), "<daemon> <where> was not running; restarted". */
static void report_restarts(const char *out, const char *node, const char *where,
                            provider_event_fn ev, void *arg)
{
    char msg[400];
    for (size_t k = 0; out && ev && k < sizeof(restarts) / sizeof(restarts[0]); k++)
        if (strstr(out, restarts[k].line)) {
            snprintf(msg, sizeof(msg), "%s %s was not running; restarted", restarts[k].what,
                     where);
            ev(arg, restarts[k].event, node, msg);
        }
}

/* The backup controller's host when it runs no node: its munged and
 * slurmctld (mtc-host ctld restarts what is dead and says so). */
static void check_backup(struct provider *p, const struct hstate *s, provider_event_fn ev,
                         void *arg)
{
    struct hbackup bk;
    if (!hosts_backup_of(s, &bk) || bk.node)
        return;
    mtc_error_t err = {""};
    char *out = NULL, where[320];
    struct ssh_conn *ssh = hosts_ssh(p, s, bk.host, &err);
    int rc = ssh ? hosts_remote_op(ssh, s, "ctld", "", -1, &out, 20000, &err) : -1;
    ssh_free(ssh);
    if (rc != 0 && ev)
        ev(arg, rc < 0 ? "HOST_UNREACHABLE" : "DAEMON_START_FAILED", NULL, err.text);
    snprintf(where, sizeof(where), "on %s (the backup controller's host)", bk.host);
    if (rc == 0)
        report_restarts(out, NULL, where, ev, arg);
    free(out);
}

/* One pass over the hosts: each restarts what is dead and says so. */
static void supervise_hosts(struct provider *p, const struct head *c, struct hstate *s,
                            provider_event_fn ev, void *arg)
{
    struct sup *u = calloc(1, sizeof(*u));
    mtc_error_t *errs = calloc(HOSTS_MAX, sizeof(*errs));
    char msg[400];
    if (!u || !errs)
        goto out;
    u->p = p, u->c = c, u->s = s;
    hosts_parallel(s->nnodes, t_check, u, errs);
    for (size_t i = 0; i < s->nnodes; i++) {
        const struct hnode *n = &s->nodes[i];
        if (errs[i].text[0] && ev) /* the transport logged it */
            ev(arg, u->rc[i] < 0 ? "HOST_UNREACHABLE" : "DAEMON_START_FAILED", n->name,
               errs[i].text);
        /* a vanished shared mount: a node fault (the agent's storage.shared
         * drains the node; its restart remounts) */
        for (const char *l = u->out[i]; l && ev && (l = strstr(l, "mtc-host: lost mount "));) {
            l += 21;
            snprintf(msg, sizeof(msg), "shared mount %.*s of %s on %s is gone",
                     (int)strcspn(l, "\n"), l, n->name, n->host);
            ev(arg, "STORAGE_MOUNT_LOST", n->name, msg);
        }
        char where[400];
        snprintf(where, sizeof(where), "of %s on %s", n->name, n->host);
        report_restarts(u->out[i], n->name, where, ev, arg);
        free(u->out[i]);
    }
    check_backup(p, s, ev, arg);
    /* quarantined hosts that could not be stopped then: try again */
    size_t nq = 0;
    for (size_t i = 0; i < s->nhosts && nq < HOSTS_MAX; i++)
        if (s->hosts[i].role == HOST_QUARANTINED && s->hosts[i].stop_pending)
            u->hosts[nq++] = s->hosts[i].host;
    if (nq) {
        mtc_error_t e2;
        hosts_parallel(nq, t_fence, u, errs);
        for (size_t i = 0; i < nq; i++)
            if (!errs[i].text[0])
                hosts_host_find(s, u->hosts[i])->stop_pending = 0;
        hosts_state_save(c, s, &e2);
    }
out:
    free(u);
    free(errs);
}

struct check_job {
    struct provider *p;
    struct head c;
    struct check_slot *slot;
    int64_t started;
};

/* The pass, under the cluster's lock (an apply, delete or node action in
 * between waits for it; one that holds the lock makes the pass wait). */
static void *check_thread(void *arg)
{
    struct check_job *j = arg;
    struct hstate *s = calloc(1, sizeof(*s));
    if (s && head_lock(&j->c, 1) == 0) {
        if (mtc_path_exists(j->c.dir) && hosts_state_load(&j->c, s) == 0)
            supervise_hosts(j->p, &j->c, s, keep_event, j->slot);
        head_unlock(&j->c);
    }
    free(s);
    pthread_mutex_lock(&checks_mu);
    j->slot->running = 0;
    j->slot->done_ms = j->started;
    checks_running--;
    pthread_cond_broadcast(&checks_cv);
    pthread_mutex_unlock(&checks_mu);
    free(j);
    return NULL;
}

/* Report what the last pass found (ev), and start the next one unless one is
 * at work or the hosts were looked at within HOSTS_CHECK_MS. */
static void check_hosts(struct provider *p, const struct head *c, provider_event_fn ev, void *arg)
{
    struct check_event *found = calloc(CHECK_EVENTS, sizeof(*found));
    size_t n = 0;
    int start = 0;
    pthread_mutex_lock(&checks_mu);
    struct check_slot *slot = slot_of(c->dir);
    if (slot && found) {
        n = slot->nev;
        memcpy(found, slot->ev, n * sizeof(*found));
        slot->nev = 0;
        slot->reported_ms = slot->done_ms; /* reported below */
        int64_t now = mtc_now_ms();
        start = !slot->running && (now - slot->last_ms >= HOSTS_CHECK_MS || now < slot->last_ms);
        if (start) {
            slot->last_ms = now;
            slot->running = 1;
            checks_running++;
        }
    }
    pthread_mutex_unlock(&checks_mu);
    for (size_t i = 0; ev && i < n; i++)
        ev(arg, found[i].type, found[i].node, found[i].msg);
    free(found);
    if (!start)
        return;
    struct check_job *j = calloc(1, sizeof(*j));
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (j) {
        j->p = p, j->slot = slot;
        j->c = *c;
        j->c.lockfd = -1;
        j->started = slot->last_ms; /* set above, under checks_mu */
    }
    if (!j || pthread_create(&t, &attr, check_thread, j) != 0) {
        free(j);
        pthread_mutex_lock(&checks_mu);
        slot->running = 0;
        checks_running--;
        pthread_cond_broadcast(&checks_cv);
        pthread_mutex_unlock(&checks_mu);
    }
    pthread_attr_destroy(&attr);
}

int64_t hosts_supervised_at(struct provider *p, const char *id)
{
    struct head c;
    if (head_init(&c, p, id, NULL) < 0)
        return 0;
    pthread_mutex_lock(&checks_mu);
    struct check_slot *slot = slot_of(c.dir);
    int64_t at = slot ? slot->reported_ms : 0;
    pthread_mutex_unlock(&checks_mu);
    return at;
}

void hosts_checks_wait(void)
{
    pthread_mutex_lock(&checks_mu);
    while (checks_running > 0)
        pthread_cond_wait(&checks_cv, &checks_mu);
    pthread_mutex_unlock(&checks_mu);
}

void hosts_checks_forget(const char *dir)
{
    pthread_mutex_lock(&checks_mu);
    for (size_t i = 0; i < CHECK_SLOTS; i++)
        if (!strcmp(checks[i].dir, dir)) {
            checks[i].nev = 0;
            if (!checks[i].running)
                checks[i].dir[0] = '\0';
        }
    pthread_mutex_unlock(&checks_mu);
}

/* ---- which controller is in control (a cluster with a backup) ---- */

static const char *const in_control_names[] = {"none", "primary", "backup"};

/* clusters/<id>/controller.json: {"inControl", "sinceMs", "primaryUp", "backupUp"}. */
static int controller_load(const struct head *c, int *in_control, int64_t *since, int up[2])
{
    char path[PLEN];
    json_t *j = json_load_file(head_path(c, path, "controller.json"), 0, NULL);
    if (!j)
        return -1;
    const char *n = json_string_value(json_object_get(j, "inControl"));
    *in_control = 0;
    for (int k = 0; n && k < 3; k++)
        if (!strcmp(n, in_control_names[k]))
            *in_control = k;
    *since = (int64_t)json_integer_value(json_object_get(j, "sinceMs"));
    up[0] = json_is_true(json_object_get(j, "primaryUp"));
    up[1] = json_is_true(json_object_get(j, "backupUp"));
    json_decref(j);
    return 0;
}

/* Ping both controllers — when the controller's slurmctld is not running
 * (before supervision starts it again: the backup may be in control) or
 * at most every HOSTS_CHECK_MS — and record which one is in control: the
 * primary when it answers, else the backup when it does (Slurm hands
 * control over after SlurmctldTimeout), else none. A change is an event. */
static void controller_watch(const struct head *c, const struct hstate *s, provider_event_fn ev,
                             void *arg)
{
    int64_t now = mtc_now_ms();
    int due = !head_ctld_running(c);
    pthread_mutex_lock(&checks_mu);
    struct check_slot *slot = slot_of(c->dir);
    if (slot && (due || now - slot->ping_ms >= HOSTS_CHECK_MS || now < slot->ping_ms)) {
        slot->ping_ms = now;
        due = 1;
    }
    pthread_mutex_unlock(&checks_mu);
    struct slurm_ping ping;
    if (!due || slurm_ping(c->conf, &ping) < 0)
        return;
    int was = -1, up[2] = {0, 0}, now_in = ping.primary_up ? 1 : ping.backup_up ? 2 : 0;
    int64_t since = now;
    int have = controller_load(c, &was, &since, up) == 0;
    if (have && was == now_in && up[0] == ping.primary_up && up[1] == ping.backup_up)
        return;
    if (!have || was != now_in)
        since = now;
    char path[PLEN];
    mtc_error_t e2;
    json_t *j =
        json_pack("{s:s,s:I,s:b,s:b}", "inControl", in_control_names[now_in], "sinceMs",
                  (json_int_t)since, "primaryUp", ping.primary_up, "backupUp", ping.backup_up);
    if (head_json_save(head_path(c, path, "controller.json"), j, 0644, &e2) < 0)
        log_msg(LOG_WARNING, "cluster %s: %s", c->id, e2.text);
    if (!have || was == now_in || !ev)
        return;
    char msg[400];
    if (now_in == 2)
        snprintf(msg, sizeof(msg),
                 "the backup slurmctld on %s is in control: the primary on %s does not answer",
                 s->backup_addr, s->ctld_addr);
    else if (now_in == 1)
        snprintf(msg, sizeof(msg), "the primary slurmctld on %s is in control%s", s->ctld_addr,
                 was == 2 ? ", taken back from the backup" : "");
    else
        snprintf(msg, sizeof(msg), "neither slurmctld answers (primary %s, backup %s)",
                 s->ctld_addr, s->backup_addr);
    ev(arg,
       now_in == 2   ? "CONTROLLER_FAILOVER"
       : now_in == 1 ? "CONTROLLER_FAILBACK"
                     : "CONTROLLER_DOWN",
       NULL, msg);
}

json_t *hosts_controller(struct provider *p, const char *id)
{
    struct head c;
    if (head_init(&c, p, id, NULL) < 0)
        return NULL;
    struct hstate *s = calloc(1, sizeof(*s));
    json_t *o = NULL;
    struct hbackup bk;
    if (!s || hosts_state_load(&c, s) < 0 || !hosts_backup_of(s, &bk))
        goto out;
    int in = 0, up[2] = {0, 0};
    int64_t since = 0;
    int have = controller_load(&c, &in, &since, up) == 0;
    char name[256], ts[40];
    mtc_short_hostname(name, sizeof(name));
    o = json_pack("{s:{s:s,s:s},s:{s:s,s:s},s:i}", "primary", "host", name, "address", s->ctld_addr,
                  "backup", "host", bk.hostname, "address", bk.host, "failoverSeconds",
                  s->failover_s);
    if (o && have) {
        json_object_set_new(json_object_get(o, "primary"), "up", json_boolean(up[0]));
        json_object_set_new(json_object_get(o, "backup"), "up", json_boolean(up[1]));
        json_object_set_new(o, "inControl", json_string(in_control_names[in]));
        json_object_set_new(o, "since", json_string(mtc_time_rfc3339(since, ts, sizeof(ts))));
    }
out:
    free(s);
    return o;
}

int hosts_supervise(struct provider *p, const char *id, const json_t *spec, provider_event_fn ev,
                    void *arg, mtc_error_t *err)
{
    (void)spec;
    struct head c;
    int rc = -1;
    if (head_init(&c, p, id, err) < 0)
        return -1;
    if (!mtc_path_exists(c.dir))
        return errprintf(err, "cluster %s has no directory %s", id, c.dir);
    if (head_lock(&c, 0) < 0)
        return 0; /* an apply, delete or node action is at work */
    struct hstate *s = calloc(1, sizeof(*s));
    if (!s || hosts_state_load(&c, s) < 0) {
        errprintf(err, "cluster %s: no hosts.json (never applied?)", id);
        goto out;
    }
    hosts_lc_socket(&c, s);
    /* which controller is in control, before a dead slurmctld here is
     * started again (it takes control back); scontrol needs munged */
    if (s->backup_addr[0]) {
        if (head_supervise_munged(&c, ev, arg, err) < 0)
            goto out;
        controller_watch(&c, s, ev, arg);
    }
    int ctld_restarted;
    if (head_supervise(&c, ev, arg, &ctld_restarted, err) < 0)
        goto out;
    check_hosts(p, &c, ev, arg);
    head_supervise_end(&c, ctld_restarted);
    rc = 0;
out:
    free(s);
    head_unlock(&c);
    return rc;
}

/* ---- views ---- */

json_t *hosts_nodes(struct provider *p, const char *id, const json_t *spec, mtc_error_t *err)
{
    (void)spec;
    struct head c;
    if (head_init(&c, p, id, err) < 0)
        return NULL;
    struct hstate *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    int have = hosts_state_load(&c, s) == 0;
    json_t *out = json_array();
    mtc_error_t e2;
    if (have)
        hosts_lc_socket(&c, s);
    json_t *st = have && head_ctld_running(&c) ? slurm_node_states(c.conf, &e2) : NULL;
    int busy = have && head_lock(&c, 0) < 0;
    head_unlock(&c);
    for (size_t i = 0; i < s->nnodes; i++) {
        const struct hnode *n = &s->nodes[i];
        const char *v = json_string_value(json_object_get(st, n->name));
        /* an elastic node: Slurm's power state while it is not on */
        int ps = !n->cloud                       ? SLURM_POWER_ON
                 : v                             ? (int)slurm_power_state_of(v)
                 : head_power_is_on(&c, n->name) ? SLURM_POWER_ON
                                                 : SLURM_POWERED_DOWN;
        const char *ns = ps != SLURM_POWER_ON        ? schema_enum_name(&slurm_power_state_enum, ps)
                         : slurm_state_registered(v) ? "RUNNING"
                         : busy                      ? "UPDATING"
                                                     : "ERROR";
        json_array_append_new(
            out,
            json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "instanceName", n->name, "nodePoolId",
                      n->pool, "nodePoolType",
                      n->login ? "NODE_POOL_TYPE_LOGIN" : "NODE_POOL_TYPE_COMPUTE", "nodeState", ns,
                      "slurmState", v ? v : "unknown", "host", n->host, "hostname", n->hostname));
    }
    json_decref(st);
    free(s);
    return out;
}

json_t *hosts_hosts(struct provider *p, const char *id)
{
    struct head c;
    if (head_init(&c, p, id, NULL) < 0)
        return NULL;
    struct hstate *s = calloc(1, sizeof(*s));
    if (!s || hosts_state_load(&c, s) < 0) {
        free(s);
        return NULL;
    }
    json_t *out = json_array();
    for (size_t i = 0; i < s->nnodes; i++)
        json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:s,s:s}", "host", s->nodes[i].host,
                                             "hostname", s->nodes[i].hostname, "nodePoolId",
                                             s->nodes[i].pool, "node", s->nodes[i].name, "role",
                                             "node"));
    for (size_t i = 0; i < s->nhosts; i++) {
        const struct hhost *h = &s->hosts[i];
        if (h->role == HOST_TOUCHED || hosts_in_use(s, h->host))
            continue;
        char ts[40];
        json_t *o = json_pack("{s:s,s:s}", "host", h->host, "role",
                              h->role == HOST_SPARE    ? "spare"
                              : h->role == HOST_BACKUP ? "backup"
                                                       : "quarantined");
        if (h->pool[0]) /* the backup controller's host is in no pool */
            json_object_set_new(o, "nodePoolId", json_string(h->pool));
        if (h->role == HOST_BACKUP && s->backup_hostname[0])
            json_object_set_new(o, "hostname", json_string(s->backup_hostname));
        if (h->role == HOST_QUARANTINED) {
            json_object_set_new(o, "reason", json_string(h->reason));
            json_object_set_new(o, "since",
                                json_string(mtc_time_rfc3339(h->since_ms, ts, sizeof(ts))));
        }
        json_array_append_new(out, o);
    }
    free(s);
    return out;
}

/* The login node's host (else the first node's), from s. */
static const struct hnode *login_node(const struct hstate *s)
{
    for (size_t i = 0; i < s->nnodes; i++)
        if (s->nodes[i].login)
            return &s->nodes[i];
    return s->nnodes ? &s->nodes[0] : NULL;
}

/* The network (CIDR, into buf) of the controller's interface that holds
 * address addr: where the hosts reach each other's addresses too. 0, or -1
 * when no interface here holds addr. */
static int addr_network(const char *addr, char *buf, size_t len)
{
    unsigned char want[16];
    int family = strchr(addr, ':') ? AF_INET6 : AF_INET;
    size_t alen = family == AF_INET6 ? 16 : 4;
    struct ifaddrs *all, *i;
    if (inet_pton(family, addr, want) != 1 || getifaddrs(&all) < 0)
        return -1;
    int rc = -1;
    for (i = all; i && rc < 0; i = i->ifa_next) {
        if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != family)
            continue;
        const unsigned char *a, *m;
        if (family == AF_INET6) {
            a = ((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr.s6_addr;
            m = ((struct sockaddr_in6 *)i->ifa_netmask)->sin6_addr.s6_addr;
        } else {
            a = (const unsigned char *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            m = (const unsigned char *)&((struct sockaddr_in *)i->ifa_netmask)->sin_addr;
        }
        if (memcmp(a, want, alen) != 0)
            continue;
        unsigned char net[16];
        int bits = 0;
        for (size_t k = 0; k < alen; k++) {
            net[k] = a[k] & m[k];
            bits += __builtin_popcount(m[k]);
        }
        char text[INET6_ADDRSTRLEN];
        if (inet_ntop(family, net, text, sizeof(text)))
            rc = snprintf(buf, len, "%s/%d", text, bits) < (int)len ? 0 : -1;
    }
    freeifaddrs(all);
    return rc;
}

char *hosts_env(struct provider *p, const char *id, mtc_error_t *err)
{
    struct head c;
    char *out = NULL;
    if (head_init(&c, p, id, err) < 0)
        return NULL;
    struct hstate *s = calloc(1, sizeof(*s));
    if (!s || hosts_state_load(&c, s) < 0 || !mtc_path_exists(c.conf)) {
        free(s);
        errno = ENOENT;
        errprintf(err, "cluster %s has no slurm.conf (not created?)", id);
        return NULL;
    }
    hosts_lc_socket(&c, s);
    const struct hnode *l = login_node(s);
    /* mtc run's jobs: MPI over TCP on the hosts' network, the trainer mtc
     * copied to every host (when it was built beside mtcd) */
    char net[64] = "", train[PLEN] = "", mpi[160] = "", trainer[PLEN + 1024] = "";
    if (addr_network(s->ctld_addr, net, sizeof(net)) == 0)
        snprintf(mpi, sizeof(mpi), "export MTC_MPI_NETWORK='%s'\n", net);
    head_path(&c, train, "image/var/lib/mtc/%s/bin/mtc-train", s->uid);
    if (access(train, X_OK) == 0)
        snprintf(trainer, sizeof(trainer),
                 "export MTC_TRAINER='" SLURM_HOST_VAR "/bin/mtc-train'\n", s->uid);
    /* the health scanner's workload (mtc healthscan), mtc-serve (endpoint
     * replicas) and mtc (a job's registration), copied the same way */
    static const char *const more[][2] = {
        {"MTC_SCAN", "mtc-scan"}, {"MTC_SERVE", "mtc-serve"}, {"MTC_HOSTS_MTC", "mtc"}};
    for (size_t k = 0; k < sizeof(more) / sizeof(more[0]); k++) {
        head_path(&c, train, "image/var/lib/mtc/%s/bin/%s", s->uid, more[k][1]);
        if (access(train, X_OK) == 0)
            snprintf(trainer + strlen(trainer), sizeof(trainer) - strlen(trainer),
                     "export %s='" SLURM_HOST_VAR "/bin/%s'\n", more[k][0], s->uid, more[k][1]);
    }
    /* mtcd as the hosts reach it (a job registers its checkpoint there) */
    char url[512];
    mtc_error_t uerr = {""};
    if (hosts_api_url(p, s, url, sizeof(url), &uerr) == 0 && !strchr(url, '\'')) {
        snprintf(trainer + strlen(trainer), sizeof(trainer) - strlen(trainer),
                 "export MTC_HOSTS_URL='%s'\n", url);
        if (p->tls && p->ca_file)
            snprintf(trainer + strlen(trainer), sizeof(trainer) - strlen(trainer),
                     "export MTC_HOSTS_CA='" SLURM_HOST_ETC "/ca.pem'\n", s->uid);
    }
    if (asprintf(&out,
                 "export SLURM_CONF='%s'\n"
                 "export MTC_CLUSTER='%s'\n"
                 "export MTC_CLUSTER_DIR='%s'\n"
                 "export MTC_CLUSTER_HOME='%s/home'\n"
                 "# munge and unmunge need: --socket=%s\n"
                 "export MTC_MUNGE_SOCKET='%s'\n"
                 "# the cluster runs on hosts; its login node: mtc login %s\n"
                 "export MTC_PROVIDER='hosts'\n"
                 "export MTC_LOGIN_HOST='%s'\n"
                 "# mtc run: the trainer on the hosts, MPI between them over TCP\n%s%s",
                 c.conf, id, c.dir, c.dir, c.munge_socket, c.munge_socket, id, l ? l->host : "",
                 trainer, mpi) < 0) {
        errprintf(err, "out of memory");
        out = NULL;
    }
    free(s);
    return out;
}

int hosts_controller_moved(struct provider *p, const char *id, char *addr, size_t len,
                           mtc_error_t *err)
{
    struct head c;
    unsigned char bin[16];
    char net[64];
    if (head_init(&c, p, id, err) < 0)
        return -1;
    struct hstate *s = calloc(1, sizeof(*s));
    if (!s)
        return errprintf(err, "out of memory");
    int rc = 0;
    /* a name follows DNS */
    if (hosts_state_load(&c, s) < 0 ||
        (inet_pton(AF_INET, s->ctld_addr, bin) != 1 && inet_pton(AF_INET6, s->ctld_addr, bin) != 1))
        goto out;
    /* mtcd listening on one address of this machine says where the hosts
     * reach it now; else (a wildcard, a name) the controller moved when
     * this machine does not hold its address, to the address it uses
     * towards the first host, as at a create */
    const char *colon = p->listen ? strrchr(p->listen, ':') : NULL;
    char host[256] = "";
    if (colon)
        snprintf(host, sizeof(host), "%.*s", (int)(colon - p->listen), p->listen);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = '\0';
    }
    if (addr_network(host, net, sizeof(net)) == 0)
        snprintf(addr, len, "%s", host);
    else if (addr_network(s->ctld_addr, net, sizeof(net)) == 0)
        goto out;
    else if (hosts_route_source(s->nnodes ? s->nodes[0].host : "", addr, len, err) < 0) {
        rc = -1;
        goto out;
    }
    rc = strcasecmp(addr, s->ctld_addr) != 0;
out:
    free(s);
    return rc;
}

json_t *hosts_login(struct provider *p, const char *id, mtc_error_t *err)
{
    struct head c;
    if (head_init(&c, p, id, err) < 0)
        return NULL;
    struct hstate *s = calloc(1, sizeof(*s));
    if (!s || hosts_state_load(&c, s) < 0 || !login_node(s)) {
        free(s);
        errno = ENOENT;
        errprintf(err, "cluster %s has no node on a host yet", id);
        return NULL;
    }
    const struct hnode *l = login_node(s);
    char var[64], env[1600], kh[PLEN], servers[600];
    snprintf(var, sizeof(var), SLURM_HOST_VAR, s->uid);
    /* the login node's slurmd keeps the config; its controllers as a fallback */
    const char *addrs[] = {s->ctld_addr, s->backup_addr};
    size_t n = 0;
    for (int k = 0; k < 2 && addrs[k][0]; k++)
        n += (size_t)snprintf(servers + n, sizeof(servers) - n, "%s%s%s%s:%d", k ? "," : "",
                              strchr(addrs[k], ':') ? "[" : "", addrs[k],
                              strchr(addrs[k], ':') ? "]" : "", s->ctld_port);
    snprintf(env, sizeof(env),
             "if [ -r %s/spool/conf-cache/slurm.conf ]; then export "
             "SLURM_CONF=%s/spool/conf-cache/slurm.conf; else export SLURM_CONF_SERVER=%s; "
             "fi; export MTC_CLUSTER=%s",
             var, var, servers, id);
    snprintf(kh, sizeof(kh), "%s/ssh/known_hosts", p->home);
    json_t *o =
        json_pack("{s:s,s:s,s:s,s:i,s:s,s:s,s:s}", "node", l->name, "host", l->host, "user",
                  s->ssh_user[0] ? s->ssh_user : "root", "port", s->ssh_port ? s->ssh_port : 22,
                  "knownHosts", kh, "remoteEnv", env, "cluster", id);
    if (o && s->ssh_key[0])
        json_object_set_new(o, "keyFile", json_string(s->ssh_key));
    free(s);
    return o;
}
