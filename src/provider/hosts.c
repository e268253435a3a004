/* hosts: the "hosts" provider — one Slurm cluster across real servers over
 * ssh. This host is the controller (munged and slurmctld, configless, from
 * the cluster directory, as the local provider runs them); each node runs on
 * its own host (slurmd --conf-server, munged on the cluster's socket path,
 * mtc-agent reporting over TCP), everything under /run/mtc, /var/lib/mtc and
 * /etc/mtc/<uid> there. State in clusters/<id>/hosts.json (hosts_state.c). */
#include "provider/hosts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "slurm/slurm.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define REAL_NVML "libnvidia-ml.so.1"

/* ---- per-host work, in parallel ---- */

struct host_work {
    struct provider *p;
    const struct head *c;
    struct hstate *s;
    const json_t *spec;
    const struct hcontroller *ctl;
    const struct hbundle *b;
    const char *hosts[2 * HOSTS_MAX]; /* clean: these hosts */
    struct hfacts facts[HOSTS_MAX];
    char *out[HOSTS_MAX];
    const char *op;
    int install, close_ssh;
    /* per node: a powered-down elastic node (no bring-up), and one whose
     * host is left alone altogether (known already: no preflight either) */
    unsigned char off[HOSTS_MAX], skip[HOSTS_MAX];
};

/* hosts_preflight of host with the work's settings and the spec's users. */
static int preflight(struct host_work *j, const char *host, struct hfacts *facts, mtc_error_t *err)
{
    struct ssh_conn *ssh = hosts_ssh(j->p, j->s, host, err);
    char users[CLUSTER_USERS_MAX * 64];
    if (cluster_users_args(j->spec, users, sizeof(users)) < 0)
        *users = '\0'; /* the spec's check keeps the list short */
    int rc = ssh ? hosts_preflight(ssh, j->s, j->ctl, j->install, users, facts, err) : -1;
    ssh_free(ssh);
    return rc;
}

static int t_preflight(void *arg, size_t i, mtc_error_t *err)
{
    struct host_work *j = arg;
    return j->skip[i] ? 0 : preflight(j, j->s->nodes[i].host, &j->facts[i], err);
}

static int t_up(void *arg, size_t i, mtc_error_t *err)
{
    struct host_work *j = arg;
    const struct hnode *n = &j->s->nodes[i];
    if (j->off[i])
        return 0; /* powered down: Slurm's resume brings it up (hosts_power) */
    struct ssh_conn *ssh = hosts_ssh(j->p, j->s, n->host, err);
    int rc = ssh ? hosts_remote_up(ssh, j->c, j->s, j->b, n, hosts_bins_stale(j->b, &j->facts[i]),
                                   hosts_fake_gpus(j->spec, n), err)
                 : -1;
    ssh_free(ssh);
    return rc;
}

/* j->op ("stop", "clean") on j->hosts[i]. */
static int t_op(void *arg, size_t i, mtc_error_t *err)
{
    struct host_work *j = arg;
    struct ssh_conn *ssh = hosts_ssh(j->p, j->s, j->hosts[i], err);
    int rc = ssh ? hosts_remote_op(ssh, j->s, j->op, "", -1, NULL, 30000, err) : -1;
    if (j->close_ssh)
        ssh_destroy(ssh);
    else
        ssh_free(ssh);
    return rc == 0 ? 0 : -1;
}

/* Every host s knows but no node uses (touched, or all with every_host): cleaned
 * (its record dropped) or, when unreachable, kept for the next time. */
static void clean_unused(struct provider *p, const struct head *c, struct hstate *s, int every_host,
                         provider_progress_fn progress, void *arg)
{
    struct host_work *j = calloc(1, sizeof(*j));
    mtc_error_t *errs = calloc(2 * HOSTS_MAX + HOSTS_MAX, sizeof(*errs));
    size_t n = 0;
    if (!j || !errs)
        goto out;
    j->p = p, j->c = c, j->s = s, j->op = "clean", j->close_ssh = every_host;
    for (size_t i = 0; i < s->nhosts; i++)
        if (every_host || (s->hosts[i].role == HOST_TOUCHED && !hosts_in_use(s, s->hosts[i].host)))
            j->hosts[n++] = s->hosts[i].host;
    for (size_t i = 0; every_host && i < s->nnodes; i++) /* powered down: cleaned then */
        if (!hosts_host_find(s, s->nodes[i].host) && !hosts_node_off(c, &s->nodes[i]))
            j->hosts[n++] = s->nodes[i].host;
    if (n == 0)
        goto out;
    head_say(progress, arg, "cleaning %zu host(s)", n);
    hosts_parallel(n, t_op, j, errs);
    for (size_t i = 0; i < n; i++) {
        if (errs[i].text[0]) {
            log_msg(LOG_WARNING, "cluster %s: could not clean %s: %s", c->id, j->hosts[i],
                    errs[i].text);
            continue;
        }
        if (!every_host)
            hosts_host_forget(s, j->hosts[i]);
    }
out:
    free(j);
    free(errs);
}

/* ---- apply ---- */

/* The spec's ssh settings and controller (address, backup, state) into s. */
static int settings(const struct head *c, const json_t *spec, const struct hstate *old,
                    struct hstate *s, mtc_error_t *err)
{
    const json_t *ssh = json_object_get(spec, "ssh");
    snprintf(s->ssh_user, sizeof(s->ssh_user), "%s",
             json_string_value(json_object_get(ssh, "user")) ?: "root");
    s->ssh_port = (int)json_integer_value(json_object_get(ssh, "port"));
    if (!s->ssh_port)
        s->ssh_port = 22;
    snprintf(s->ssh_key, sizeof(s->ssh_key), "%s",
             json_string_value(json_object_get(ssh, "keyFile")) ?: "");
    const json_t *ctl = json_object_get(spec, "controller");
    const char *addr = json_string_value(json_object_get(ctl, "address"));
    const char *backup = json_string_value(json_object_get(ctl, "backupHost"));
    const char *state = json_string_value(json_object_get(ctl, "stateSaveLocation"));
    snprintf(s->backup_addr, sizeof(s->backup_addr), "%s", backup ?: "");
    s->failover_s = (int)json_integer_value(json_object_get(ctl, "failoverSeconds"));
    if (!s->failover_s)
        s->failover_s = HOSTS_FAILOVER_S;
    /* slurmctld's state: where the spec says, else with a backup under
     * the experiment root (the spec's check wants one of them), else here */
    const char *root = hosts_experiment_root(spec);
    if (state)
        snprintf(s->state_dir, sizeof(s->state_dir), "%s", state);
    else if (backup && root)
        snprintf(s->state_dir, sizeof(s->state_dir), "%s/.mtc/%s-%s.slurmctld", root, c->id,
                 s->uid);
    else
        s->state_dir[0] = '\0';
    if (addr)
        snprintf(s->ctld_addr, sizeof(s->ctld_addr), "%s", addr);
    else if (old && old->ctld_addr[0])
        snprintf(s->ctld_addr, sizeof(s->ctld_addr), "%s", old->ctld_addr);
    /* the address this host uses towards the first host */
    else if (hosts_route_source(s->nnodes ? s->nodes[0].host : "", s->ctld_addr,
                                sizeof(s->ctld_addr), err) < 0)
        return -1;
    if (backup && strcasecmp(backup, s->ctld_addr) == 0)
        return errprintf(err,
                         "controller.backupHost: \"%s\" is the controller itself; the backup "
                         "controller runs on another host",
                         backup);
    return 0;
}

/* Controller: munged on /run/mtc/<uid>/..., slurmctld with the new conf. */
static int controller_up(const struct head *c, struct hstate *s, const char *sha,
                         provider_progress_fn progress, void *arg, mtc_error_t *err)
{
    char names[PLEN], dir[PLEN];
    snprintf(dir, sizeof(dir), SLURM_HOST_RUN "/munge", s->uid);
    if (mtc_mkdir_p(dir, 0755) < 0)
        return errprintf(err, "mkdir %s: %s (the controller needs /run/mtc writable)", dir,
                         strerror(errno));
    hosts_node_names(s, names, sizeof(names));
    /* slurmctld learns of another backup controller only at start, like
     * another node set: the backup is part of what it was started with */
    if (s->backup_addr[0])
        snprintf(names + strlen(names), sizeof(names) - strlen(names), " backup=%s",
                 s->backup_addr);
    /* slurmds that ran an earlier config fetch the new one */
    return head_controller_converge(c, &s->applied, sha, names, s->applied.sha[0] != 0, progress,
                                    arg, err);
}

/* The controller or slurmctld's state moves (a restored head at another
 * address; a backup controller added or removed, another
 * stateSaveLocation): the old backup's slurmctld stopped first (it would
 * take control from a primary it no longer knows, or run on state that
 * moved), then, for the state, the controller's (a clean stop saves the
 * queue) and its files copied to the new place, where controller_up starts
 * it. 0/-1 + err. */
static int state_move(struct provider *p, const struct head *c, const struct hstate *old,
                      const struct hstate *s, provider_progress_fn progress, void *arg,
                      mtc_error_t *err)
{
    char from[PLEN], to[PLEN + 2];
    hosts_state_dir(c, old, from);
    hosts_state_dir(c, s, to);
    int state = strcmp(from, to) != 0, moved = strcasecmp(old->ctld_addr, s->ctld_addr) != 0;
    int other = strcasecmp(old->backup_addr, s->backup_addr) != 0; /* another backup, or none */
    if (!old->applied.sha[0] || (!state && !moved && !other))
        return 0;
    struct hbackup bk;
    if (hosts_backup_of(old, &bk)) {
        mtc_error_t e2;
        struct ssh_conn *ssh = hosts_ssh(p, old, bk.host, &e2);
        if (!ssh || hosts_remote_op(ssh, old, "noctld", "", -1, NULL, 30000, &e2) != 0)
            log_msg(LOG_WARNING, "cluster %s: could not stop the backup slurmctld on %s: %s", c->id,
                    bk.host, e2.text);
        ssh_free(ssh);
    }
    if (moved)
        head_say(progress, arg, "the controller moves from %s to %s", old->ctld_addr, s->ctld_addr);
    if (!state)
        return 0;
    head_say(progress, arg, "moving slurmctld's state from %s to %s", from, to);
    head_stop_pidfile(c, "slurmctld", head_ctld_running(c));
    /* the new place's marker (this apply's nonce) is kept over the old one's */
    char mark[PLEN + 32];
    snprintf(mark, sizeof(mark), "%s/" HOSTS_STATE_MARKER, to);
    size_t mlen = 0;
    char *keep = mtc_read_file(mark, &mlen);
    strcat(from, "/."); /* the contents */
    char *out = NULL, *argv[] = {"cp", "-a", "--", from, to, NULL};
    int rc = mtc_run(argv, NULL, &out, 120000);
    if (rc != 0)
        errprintf(err, "cannot copy slurmctld's state to %s: %.200s", to, out ? out : "");
    else if (keep && mtc_write_file_atomic(mark, keep, mlen, 0644) < 0)
        rc = errprintf(err, "cannot write %s: %s", mark, strerror(errno));
    else if (!keep)
        unlink(mark); /* <cluster dir>/state: no marker */
    free(keep);
    free(out);
    if (rc != 0)
        return -1;
    hosts_state_dir_forget(c, old); /* the old place, when it was the cluster's own */
    return 0;
}

/* The backup controller, once the nodes run and its host is known to see
 * the state directory (nonce: hosts_state_dir_prepare's marker): slurmctld
 * started there, and waited for until `scontrol ping` shows it UP. */
static int backup_up(struct provider *p, const struct head *c, const struct hstate *s,
                     const struct hbundle *b, const char *nonce, provider_progress_fn progress,
                     void *arg, mtc_error_t *err)
{
    struct hbackup bk;
    if (!hosts_backup_of(s, &bk))
        return 0;
    /* a host in no pool: the bundle and munged first (its storage is the
     * admin's to mount: the marker below says whether it sees the state) */
    if (!bk.node) {
        head_say(progress, arg, "bringing up %s (the backup controller's host)", bk.host);
        struct ssh_conn *ssh = hosts_ssh(p, s, bk.host, err);
        int rc = ssh ? hosts_remote_up(ssh, c, s, b, NULL, 0, -1, err) : -1;
        ssh_free(ssh);
        if (rc < 0)
            return -1;
    }
    head_say(progress, arg, "checking that %s sees slurmctld's state directory", bk.host);
    if (hosts_state_dir_verify(p, c, s, nonce, err) < 0)
        return -1;
    /* A new slurmctld saves its jobs and nodes at once but its partitions,
     * associations and TRES (part_state, assoc_mgr_state, last_tres) only
     * at a clean stop or its 5-minute checkpoint; a backup that takes over
     * before then has no TRES and, with accounting down too, exits
     * ("we have no TRES from it"). One clean restart writes them all. */
    char dir[PLEN], part[PLEN + 16];
    hosts_state_dir(c, s, dir);
    snprintf(part, sizeof(part), "%s/part_state", dir);
    if (!mtc_path_exists(part)) {
        head_say(progress, arg, "restarting slurmctld once to save its whole state for the backup");
        head_stop_pidfile(c, "slurmctld", head_ctld_running(c));
        if (head_ctld_start(c, err) < 0 || slurm_reconfigure(c->conf, err) < 0)
            return -1;
    }
    head_say(progress, arg, "starting the backup slurmctld on %s", bk.host);
    struct ssh_conn *ssh = hosts_ssh(p, s, bk.host, err);
    int rc = ssh ? hosts_remote_op(ssh, s, "ctld", bk.node ? bk.node->name : "", -1, NULL, 60000,
                                   err)
                 : -1;
    ssh_free(ssh);
    if (rc != 0)
        return -1;
    struct slurm_ping ping = {0};
    for (int64_t end = mtc_now_ms() + CTLD_WAIT_MS; mtc_now_ms() < end; mtc_sleep_ms(200))
        if (slurm_ping(c->conf, &ping) == 0 && ping.backup_up)
            return 0;
    return errprintf(err,
                     "the backup slurmctld on %s does not answer within %d s (see "
                     "/var/lib/mtc/%s/log/slurmctld.log there)",
                     bk.host, CTLD_WAIT_MS / 1000, s->uid);
}

/* Nodes that moved host: tell slurmctld their new address (with the rewritten
 * slurm.conf this survives a restart). */
static void move_nodes(const struct head *c, const struct hstate *old, const struct hstate *s)
{
    for (size_t i = 0; old && i < s->nnodes; i++) {
        const struct hnode *n = &s->nodes[i];
        for (size_t k = 0; k < old->nnodes; k++) {
            if (strcmp(old->nodes[k].name, n->name) || !strcmp(old->nodes[k].host, n->host))
                continue;
            char a1[96], a2[300], a3[300], *out = NULL;
            snprintf(a1, sizeof(a1), "NodeName=%s", n->name);
            snprintf(a2, sizeof(a2), "NodeAddr=%s", n->host);
            snprintf(a3, sizeof(a3), "NodeHostname=%s", n->hostname);
            char *argv[] = {"scontrol", "update", a1, a2, a3, NULL};
            if (slurm_cmd(c->conf, argv, &out, 0) != 0)
                log_msg(LOG_WARNING, "cluster %s: scontrol update %s %s: %s", c->id, a1, a2,
                        out ? out : "");
            free(out);
        }
    }
}

/* Stop everything of the cluster: jobs, the hosts' daemons and files, the
 * controller's daemons and directory. Best effort on unreachable hosts. */
static void teardown(struct provider *p, struct head *c, struct hstate *s)
{
    if (head_ctld_running(c))
        slurm_cancel_all(c->conf, 10000);
    clean_unused(p, c, s, 1, NULL, NULL);
    head_stop_pidfile(c, "slurmctld", head_ctld_running(c));
    head_acct_stop(c);
    head_stop_pidfile(c, "munged", head_munged_running(c));
    hosts_storage_forget(c);
    hosts_state_dir_forget(c, s);
    char run[64], etc[64];
    snprintf(run, sizeof(run), SLURM_HOST_RUN, s->uid);
    snprintf(etc, sizeof(etc), SLURM_HOST_ETC, s->uid);
    if (s->uid[0]) {
        mtc_rm_rf(run);
        mtc_rm_rf(etc); /* the plugstack.conf link (plugstack_write); /etc/mtc itself stays */
    }
}

/* The backup controller's host when it runs no node: its own preflight
 * (reachable, Slurm's versions: slurmctld too, its name), and a record
 * (HOST_BACKUP) so that a delete, or another backup, cleans it. */
static int backup_preflight(struct host_work *j, mtc_error_t *err)
{
    struct hbackup bk;
    struct hstate *s = j->s;
    if (!hosts_backup_of(s, &bk) || bk.node)
        return 0;
    struct hfacts *f = calloc(1, sizeof(*f));
    int rc = f ? preflight(j, bk.host, f, err) : errprintf(err, "out of memory");
    if (rc == 0) {
        snprintf(s->backup_hostname, sizeof(s->backup_hostname), "%s", f->hostname);
        hosts_host_set(s, bk.host, "", HOST_BACKUP, "Slurm's backup controller");
    }
    free(f);
    return rc;
}

/* Preflight every node's host in parallel, size the nodes, and record the
 * hosts before anything is written to them. 0/-1 + err. */
static int check_hosts(struct host_work *j, const json_t *spec, mtc_error_t *errs,
                       provider_progress_fn progress, void *arg, mtc_error_t *err)
{
    struct hstate *s = j->s;
    size_t n = 0;
    /* an elastic host is checked and sized when it joins the cluster (it
     * must be on then) and at each power-on; while powered down, never */
    for (size_t i = 0; i < s->nnodes; i++) {
        j->off[i] = (unsigned char)hosts_node_off(j->c, &s->nodes[i]);
        j->skip[i] = j->off[i] && s->nodes[i].cpus > 0;
        n += !j->skip[i];
    }
    head_say(progress, arg, "checking %zu host(s)", n);
    long bad = hosts_parallel(s->nnodes, t_preflight, j, errs);
    if (bad >= 0)
        return errprintf(err, "%s", errs[bad].text);
    for (size_t i = 0; i < s->nnodes; i++)
        if (!j->skip[i] && hosts_size_node(spec, &s->nodes[i], &j->facts[i], err) < 0)
            return -1;
    for (size_t i = 0; i < s->nnodes; i++)
        if (!hosts_host_find(s, s->nodes[i].host))
            hosts_host_set(s, s->nodes[i].host, s->nodes[i].pool, HOST_TOUCHED, NULL);
    if (backup_preflight(j, err) < 0)
        return -1;
    return hosts_state_save(j->c, s, err);
}

/* The controller's files: node files, munge key (munged), the image, the
 * experiment root's marker, slurm.conf. */
static int write_files(struct host_work *j, struct hbundle *b, char sha[65], mtc_error_t *err)
{
    char dir[PLEN];
    for (size_t i = 0; i < j->s->nnodes; i++)
        if (hosts_node_files(j->p, j->c, j->s, j->spec, &j->s->nodes[i], 0, err) < 0)
            return -1;
    snprintf(dir, sizeof(dir), SLURM_HOST_RUN "/munge", j->s->uid);
    if (mtc_mkdir_p(dir, 0755) < 0)
        return errprintf(err, "mkdir %s: %s (the controller needs /run/mtc writable)", dir,
                         strerror(errno));
    if (!head_munged_running(j->c) && head_munged_start(j->c, err) < 0) /* makes the key */
        return -1;
    if (hosts_bundle(j->p, j->c, j->s, j->spec, b, err) < 0 ||
        hosts_storage_write(j->c, j->s, j->spec, err) < 0)
        return -1;
    return hosts_write_conf(j->p, j->c, j->s, j->spec, sha, err);
}

/* Before an update: a powered-up elastic node leaves the cluster (a lowered
 * maxNodeCount) only once Slurm has powered it down (its host, cleaned then,
 * is not cleaned again), a static node becomes elastic (a lowered
 * minNodeCount) only when it runs no job (EBUSY); static nodes carry no
 * power mark. old NULL: a create. 0/-1 + err. */
static int power_plan(const struct head *c, struct hstate *old, struct hstate *s, mtc_error_t *err)
{
    struct head_power_change *ch = calloc((old ? old->nnodes : 0) + s->nnodes + 1, sizeof(*ch));
    if (!ch)
        return errprintf(err, "out of memory");
    size_t k = 0;
    for (size_t i = 0; old && i < old->nnodes; i++) {
        const struct hnode *o = &old->nodes[i], *n = hosts_node_find(s, o->name);
        ch[k++] = (struct head_power_change){o->name, o->cloud, n && n->cloud, 1, n != NULL};
    }
    for (size_t i = 0; i < s->nnodes; i++)
        if (!old || !hosts_node_find(old, s->nodes[i].name))
            ch[k++] = (struct head_power_change){s->nodes[i].name, 0, s->nodes[i].cloud, 0, 1};
    int rc = head_power_refuse(c, ch, k, err);
    free(ch);
    if (rc < 0)
        return -1;
    /* a powered-down node that leaves: its host holds nothing to clean */
    for (size_t i = 0; old && i < old->nnodes; i++) {
        const struct hnode *o = &old->nodes[i];
        if (hosts_node_find(s, o->name))
            continue;
        const struct hhost *h = hosts_host_find(s, o->host);
        if (hosts_node_off(c, o) && h && h->role == HOST_TOUCHED && !hosts_in_use(s, o->host))
            hosts_host_forget(s, o->host);
        if (head_power_mark(c, o->name, 0, err) < 0)
            return -1;
    }
    for (size_t i = 0; i < s->nnodes; i++)
        if (!s->nodes[i].cloud && head_power_mark(c, s->nodes[i].name, 0, err) < 0)
            return -1; /* a static node is always on: no marker */
    return 0;
}

/* The body of apply, with the cluster locked; *touched tells whether hosts were written to. */
static int apply_locked(struct provider *p, struct head *c, const json_t *spec, struct hstate *old,
                        int have_old, struct hstate *s, int *touched, provider_progress_fn progress,
                        void *arg, mtc_error_t *err)
{
    struct hcontroller ctl;
    struct hbundle b;
    char sha[65], url[512], nonce[33];
    mtc_error_t *errs = calloc(HOSTS_MAX, sizeof(*errs));
    struct host_work *j = calloc(1, sizeof(*j));
    int rc = -1;
    if (!errs || !j) {
        errprintf(err, "out of memory");
        goto out;
    }
    if (hosts_plan(c->id, spec, have_old ? old : NULL, s, err) < 0 ||
        settings(c, spec, have_old ? old : NULL, s, err) < 0 ||
        hosts_controller_facts(&ctl, err) < 0 ||
        (p->agent && hosts_api_url(p, s, url, sizeof(url), err) < 0))
        goto out;
    hosts_lc_socket(c, s);
    /* elastic nodes that become static (a raised minNodeCount) while powered
     * down: their hosts powered on for the preflight and bring-up below */
    unsigned char wake[HOSTS_MAX] = {0};
    for (size_t i = 0; have_old && i < s->nnodes; i++) {
        const struct hnode *o = hosts_node_find(old, s->nodes[i].name);
        wake[i] = !s->nodes[i].cloud && o && hosts_node_off(c, o) &&
                  !strcasecmp(o->host, s->nodes[i].host);
    }
    if (power_plan(c, have_old ? old : NULL, s, err) < 0)
        goto out;
    for (size_t i = 0; i < s->nnodes; i++) {
        if (!wake[i])
            continue;
        head_say(progress, arg, "powering up %s (now static)", s->nodes[i].name);
        if (hosts_power_wake(p, c, s, spec, &s->nodes[i], err) < 0)
            goto out;
    }
    *j = (struct host_work){.p = p,
                            .c = c,
                            .s = s,
                            .spec = spec,
                            .ctl = &ctl,
                            .b = &b,
                            .install = json_is_true(json_object_get(spec, "installPackages"))};
    if (check_hosts(j, spec, errs, progress, arg, err) < 0)
        goto out;
    *touched = 1;
    if (write_files(j, &b, sha, err) < 0 || hosts_state_dir_prepare(c, s, nonce, err) < 0)
        goto out;
    clean_unused(p, c, s, 0, progress, arg); /* nodes leave old hosts before starting on new ones */
    if ((have_old && state_move(p, c, old, s, progress, arg, err) < 0) ||
        controller_up(c, s, sha, progress, arg, err) < 0)
        goto out;
    move_nodes(c, have_old ? old : NULL, s);
    head_say(progress, arg, "starting %zu node(s) on their hosts", s->nnodes);
    long bad = hosts_parallel(s->nnodes, t_up, j, errs);
    if (bad >= 0) {
        errprintf(err, "%s", errs[bad].text);
        goto out;
    }
    head_say(progress, arg, "waiting for %zu node(s) to register", s->nnodes);
    if (hosts_wait_registered(c, s, err) < 0)
        goto out;
    /* elastic hosts that just joined (checked on) or a static node that
     * became elastic: powered down now; Slurm resumes them for jobs */
    for (size_t i = 0; i < s->nnodes; i++) {
        struct hnode *n = &s->nodes[i];
        const struct hnode *o = have_old ? hosts_node_find(old, n->name) : NULL;
        if (!j->off[i] || (j->skip[i] && (!o || o->cloud)))
            continue;
        head_say(progress, arg, "powering down %s (elastic)", n->name);
        if (hosts_power_node(p, c, s, spec, n, 0, err) < 0)
            goto out;
    }
    if (hosts_experiment_root(spec)) {
        head_say(progress, arg, "checking that every host sees the experiment root");
        if (hosts_storage_verify(p, c, s, spec, err) < 0)
            goto out;
    }
    if (backup_up(p, c, s, &b, nonce, progress, arg, err) < 0)
        goto out;
    for (size_t i = 0; i < s->nhosts;) /* hosts in use need no cleaning record */
        if (s->hosts[i].role == HOST_TOUCHED && hosts_in_use(s, s->hosts[i].host))
            hosts_host_forget(s, s->hosts[i].host);
        else
            i++;
    rc = hosts_state_save(c, s, err);
out:
    free(errs);
    free(j);
    return rc;
}

static int hosts_apply(struct provider *p, const char *id, const json_t *spec_in,
                       provider_progress_fn progress, void *arg, mtc_error_t *err)
{
    struct head c;
    char path[PLEN];
    if (head_init(&c, p, id, err) < 0)
        return -1;
    json_t *spec = cluster_spec_normalize(spec_in, err);
    if (!spec)
        return -1;
    struct hstate *old = calloc(1, sizeof(*old)), *s = calloc(1, sizeof(*s));
    int rc = -1, touched = 0, locked = 0, have_old = 0;
    if (!old || !s) {
        errprintf(err, "out of memory");
        goto out;
    }
    if (head_make_dirs(&c, err) < 0 ||
        mtc_write_if_changed(head_path(&c, path, "provider"), "hosts\n", err) < 0)
        goto out;
    if (head_lock(&c, 1) < 0) {
        errprintf(err, "cannot lock %s: %s", c.dir, strerror(errno));
        goto out;
    }
    locked = 1;
    have_old = hosts_state_load(&c, old) == 0;
    if (have_old) {
        snprintf(s->uid, sizeof(s->uid), "%s", old->uid);
        s->ctld_port = old->ctld_port;
        snprintf(s->applied.sha, sizeof(s->applied.sha), "%s", old->applied.sha);
        snprintf(s->applied.nodes, sizeof(s->applied.nodes), "%s", old->applied.nodes);
    } else if (mtc_random_hex(s->uid, 6) < 0 || !(s->ctld_port = mtc_free_port())) {
        errprintf(err, "cannot pick a cluster uid and port");
        goto out;
    }
    head_say(progress, arg, "%s cluster %s on hosts (uid %s)", have_old ? "updating" : "creating",
             id, s->uid);
    rc = apply_locked(p, &c, spec, old, have_old, s, &touched, progress, arg, err);
    if (rc == 0) {
        head_say(progress, arg, "cluster %s is ready", id);
    } else if (!have_old || !old->applied.sha[0]) {
        /* a create that failed leaves nothing behind, here or on any host */
        log_msg(LOG_WARNING, "cluster %s: create failed (%s); removing what was started", id,
                err->text);
        if (touched || have_old)
            teardown(p, &c, s);
        head_unlock(&c);
        locked = 0;
        mtc_rm_rf(c.dir);
    }
out:
    if (locked)
        head_unlock(&c);
    free(old);
    free(s);
    json_decref(spec);
    return rc;
}

/* ---- delete ---- */

/* Delete, under the lock: what runs on the hosts and here stopped (teardown). */
static int delete_stop(struct provider *p, struct head *c, mtc_error_t *err)
{
    struct hstate *s = calloc(1, sizeof(*s));
    if (!s)
        return errprintf(err, "out of memory");
    if (hosts_state_load(c, s) == 0) {
        hosts_lc_socket(c, s);
        teardown(p, c, s);
    }
    free(s);
    return 0;
}

static int hosts_delete(struct provider *p, const char *id, mtc_error_t *err)
{
    int rc = head_delete_with(p, id, delete_stop, err);
    struct head c;
    mtc_error_t e2;
    if (head_init(&c, p, id, &e2) == 0)
        hosts_checks_forget(c.dir);
    return rc;
}

const struct provider_ops provider_hosts_ops = {
    .kind = "hosts",
    .apply = hosts_apply,
    .delete_ = hosts_delete,
    .nodes = hosts_nodes,
    .supervise = hosts_supervise,
    .supervised_at = hosts_supervised_at,
    .env = hosts_env,
    .node_action = hosts_node_action,
    .node_check = hosts_node_check,
    .hosts = hosts_hosts,
    .login = hosts_login,
    .controller = hosts_controller,
    .controller_moved = hosts_controller_moved,
    .check_storage = hosts_check_storage,
    .power = hosts_power,
    .node_fault = hosts_node_fault,
};
