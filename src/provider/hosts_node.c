/* hosts_node: repairing one node of a cluster on hosts — restart (its
 * daemons), reboot (hostRemediation.rebootCommand on the host, then SSH and
 * slurmd back), reimage (hostRemediation.reimageCommand here, then a full
 * bring-up; without one the controller escalates to replace), replace (the
 * node moves to the pool's next spare host under the same Slurm name, the
 * old host is quarantined) — running a node's checks for the controller, and
 * powering elastic nodes on and off for Slurm's power saving
 * (hostRemediation.powerOnCommand / powerOffCommand, docs/hosts.md), and
 * faults injected on purpose (mtc chaos: mtc-host's "fault"). */
#include "provider/hosts.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "slurm/slurm.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define ACTION_OP_MS 60000
#define CHECK_TIMEOUT_MS 120000
#define POLL_MS 1000

struct act {
    struct provider *p;
    struct head *c;
    struct hstate *s;
    const json_t *spec;
    struct hnode *n;
    int boot_timeout_s;
};

static const json_t *remediation(const json_t *spec, const char *key)
{
    return json_object_get(json_object_get(spec, "hostRemediation"), key);
}

/* Run op on the node's host. 0/-1 + err. */
static int node_op(const struct act *a, const char *op, mtc_error_t *err)
{
    struct ssh_conn *ssh = hosts_ssh(a->p, a->s, a->n->host, err);
    int rc = ssh ? hosts_remote_op(ssh, a->s, op, a->n->name, hosts_fake_gpus(a->spec, a->n), NULL,
                                   ACTION_OP_MS, err)
                 : -1;
    ssh_free(ssh);
    return rc == 0 ? 0 : -1;
}

/* Wait (bootTimeoutSeconds) until the host answers over SSH and its
 * /run/mtc/<uid>/boot-mark is gone: it has rebooted (or was reinstalled). */
static int wait_booted(const struct act *a, mtc_error_t *err)
{
    char last[256] = "no answer yet";
    for (int64_t end = mtc_now_ms() + (int64_t)a->boot_timeout_s * 1000;;) {
        mtc_error_t e2 = {""};
        struct ssh_conn *ssh = hosts_ssh(a->p, a->s, a->n->host, &e2);
        int rc = ssh ? hosts_remote_op(ssh, a->s, "booted", "", -1, NULL, 10000, &e2) : -1;
        ssh_free(ssh);
        if (rc == 0)
            return 0;
        if (*e2.text)
            snprintf(last, sizeof(last), "%s", e2.text);
        else if (rc == 1)
            snprintf(last, sizeof(last), "host %s has not rebooted", a->n->host);
        if (mtc_now_ms() >= end) {
            errno = ETIMEDOUT;
            return errprintf(err, "host %s did not come back within %d s (%.150s)", a->n->host,
                             a->boot_timeout_s, last);
        }
        mtc_sleep_ms(POLL_MS);
    }
}

static int act_restart(const struct act *a, mtc_error_t *err)
{
    return node_op(a, "restart", err);
}

static int act_reboot(const struct act *a, mtc_error_t *err)
{
    const char *cmd = json_string_value(remediation(a->spec, "rebootCommand"));
    char line[2400];
    char *q = mtc_shell_quote(cmd ? cmd : HOSTS_REBOOT_DEFAULT);
    if (!q)
        return errprintf(err, "out of memory");
    if (node_op(a, "mark", err) < 0) {
        free(q);
        return -1;
    }
    /* detached, for the connection may die with the host; a command that
     * fails at once (not found, refused) fails the action at once */
    snprintf(line, sizeof(line),
             "r=" SLURM_HOST_RUN "; ( setsid sh -c %s </dev/null >$r/reboot.out 2>&1; echo $? "
             ">$r/reboot.rc ) </dev/null >/dev/null 2>&1 & sleep 2; if [ -s $r/reboot.rc ] && "
             "[ \"$(cat $r/reboot.rc)\" != 0 ]; then echo \"reboot command failed (exit $(cat "
             "$r/reboot.rc)): $(tail -n 1 $r/reboot.out)\" >&2; exit 3; fi",
             a->s->uid, q);
    free(q);
    struct ssh_conn *ssh = hosts_ssh(a->p, a->s, a->n->host, err);
    mtc_error_t e2 = {""};
    int rc = ssh ? ssh_run(ssh, line, NULL, 30000, 0, &e2) : -1;
    ssh_destroy(ssh); /* the master dies with the host anyway */
    /* 3: the command itself failed; anything else (255, a lost connection)
     * may be the host going down: its boot tells */
    if (rc == 3)
        return errprintf(err, "host %s: %s", a->n->host,
                         strstr(e2.text, "reboot command") ? strstr(e2.text, "reboot command")
                                                           : e2.text);
    if (!ssh)
        return errprintf(err, "%s", e2.text);
    log_msg(LOG_NOTICE, "cluster %s: reboot command sent to %s; waiting up to %d s", a->c->id,
            a->n->host, a->boot_timeout_s);
    if (wait_booted(a, err) < 0)
        return -1;
    return node_op(a, "up", err);
}

/* Bring the node up on its (fresh or new) host: preflight, files, daemons. */
static int full_up(const struct act *a, struct hfacts *f, mtc_error_t *err)
{
    struct hcontroller ctl;
    struct hbundle b;
    if (hosts_controller_facts(&ctl, err) < 0)
        return -1;
    struct ssh_conn *ssh = hosts_ssh(a->p, a->s, a->n->host, err);
    if (!ssh)
        return -1;
    int rc = -1, fd = -1;
    char path[PLEN];
    char users[CLUSTER_USERS_MAX * 64];
    if (cluster_users_args(a->spec, users, sizeof(users)) < 0)
        *users = '\0';
    if (hosts_preflight(ssh, a->s, &ctl, json_is_true(json_object_get(a->spec, "installPackages")),
                        users, f, err) < 0)
        goto out;
    /* the bundle is one directory for every node: nodes brought up beside
     * each other (power-ons, repairs under their node locks) take turns in
     * writing and sending it */
    fd = open(head_path(a->c, path, ".lock-bundle"), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) < 0) {
        errprintf(err, "cannot lock %s: %s", path, strerror(errno));
        goto out;
    }
    if (hosts_bundle(a->p, a->c, a->s, a->spec, &b, err) < 0)
        goto out;
    rc = hosts_remote_up(ssh, a->c, a->s, &b, a->n, hosts_bins_stale(&b, f),
                         hosts_fake_gpus(a->spec, a->n), err);
out:
    if (fd >= 0)
        close(fd);
    ssh_free(ssh);
    return rc;
}

/* Run command (a hostRemediation command: {host} {node} {cluster} are
 * replaced by validated names, safe on a command line) here, as mtcd, within
 * bootTimeoutSeconds; what: its name for the error ("reimage command").
 * 0/-1 + err with the last line it printed. */
static int run_here(const struct act *a, const char *what, const char *cmd, mtc_error_t *err)
{
    char line[2400] = "";
    for (const char *p = cmd; *p && strlen(line) + 300 < sizeof(line); p++) {
        const char *v = NULL;
        size_t skip = 0;
        if (!strncmp(p, "{host}", 6))
            v = a->n->host, skip = 5;
        else if (!strncmp(p, "{node}", 6))
            v = a->n->name, skip = 5;
        else if (!strncmp(p, "{cluster}", 9))
            v = a->c->id, skip = 8;
        if (v) {
            strcat(line, v);
            p += skip;
        } else {
            size_t k = strlen(line);
            line[k] = *p, line[k + 1] = '\0';
        }
    }
    log_msg(LOG_NOTICE, "cluster %s: %s for %s: %s", a->c->id, what, a->n->host, line);
    char *argv[] = {"sh", "-c", line, NULL}, *out = NULL;
    int rc = mtc_run(argv, NULL, &out, a->boot_timeout_s * 1000);
    if (rc != 0) {
        char *nl = out ? strrchr(out, '\n') : NULL;
        while (nl && nl > out && !nl[1]) { /* the last non-empty line */
            *nl = '\0';
            nl = strrchr(out, '\n');
        }
        errprintf(err, "%s for %s failed (exit %d): %.150s", what, a->n->host, rc,
                  nl    ? nl + 1
                  : out ? out
                        : "");
        free(out);
        return -1;
    }
    free(out);
    return 0;
}

static int act_reimage(const struct act *a, mtc_error_t *err)
{
    const char *cmd = json_string_value(remediation(a->spec, "reimageCommand"));
    if (!cmd || !*cmd) {
        errno = ENOTSUP;
        return errprintf(err,
                         "no hostRemediation.reimageCommand configured: escalating to replace");
    }
    /* a host that still answers gets the boot mark: mtc waits for the
     * reinstalled system, not the old one */
    mtc_error_t e2 = {""};
    if (node_op(a, "mark", &e2) < 0)
        log_msg(LOG_NOTICE, "cluster %s: reimage %s: no boot mark (%s)", a->c->id, a->n->host,
                e2.text);
    if (run_here(a, "reimage command", cmd, err) < 0)
        return -1;
    /* a reinstalled host has a new host key: forget the old one (trust on first use again) */
    char kh[PLEN], name[300];
    snprintf(kh, sizeof(kh), "%s/ssh/known_hosts", a->p->home);
    if (a->s->ssh_port && a->s->ssh_port != 22) /* known_hosts names it [host]:port */
        snprintf(name, sizeof(name), "[%s]:%d", a->n->host, a->s->ssh_port);
    else
        snprintf(name, sizeof(name), "%s", a->n->host);
    char *keygen[] = {"ssh-keygen", "-R", name, "-f", kh, NULL};
    mtc_run(keygen, NULL, NULL, 10000);
    if (wait_booted(a, err) < 0)
        return -1;
    struct hfacts f;
    if (hosts_node_files(a->p, a->c, a->s, a->spec, a->n, 1, err) < 0)
        return -1;
    return full_up(a, &f, err);
}

static int act_replace(const struct act *a, mtc_error_t *err)
{
    const char *spare = hosts_free_spare(a->s, a->n->pool);
    if (!spare) {
        errno = ENOSPC;
        return errprintf(err, "no free spare host in node pool %s (spareHosts)", a->n->pool);
    }
    char old[256], reason[200], ts[40], sha[65];
    snprintf(old, sizeof(old), "%s", a->n->host);
    snprintf(reason, sizeof(reason), "%s replaced by %s at %s", a->n->name, spare,
             mtc_time_rfc3339(mtc_now_ms(), ts, sizeof(ts)));
    /* the old host: stopped now, or when it answers again; never reused by itself */
    mtc_error_t e2 = {""};
    int stopped = node_op(a, "stop", &e2) == 0;
    if (!stopped)
        log_msg(LOG_WARNING, "cluster %s: %s not stopped now (%s); retried when it answers",
                a->c->id, old, e2.text);
    hosts_host_set(a->s, old, a->n->pool, HOST_QUARANTINED, reason);
    hosts_host_find(a->s, old)->stop_pending = !stopped;
    log_msg(LOG_NOTICE, "cluster %s: %s quarantined: %s", a->c->id, old, reason);
    snprintf(a->n->host, sizeof(a->n->host), "%s", spare);
    struct hcontroller ctl;
    struct hfacts f;
    struct ssh_conn *ssh = hosts_ssh(a->p, a->s, spare, err);
    char users[CLUSTER_USERS_MAX * 64];
    if (cluster_users_args(a->spec, users, sizeof(users)) < 0)
        *users = '\0';
    int rc = ssh && hosts_controller_facts(&ctl, err) == 0
                 ? hosts_preflight(ssh, a->s, &ctl,
                                   json_is_true(json_object_get(a->spec, "installPackages")),
                                   users, &f, err)
                 : -1;
    ssh_free(ssh);
    if (rc < 0 || hosts_size_node(a->spec, a->n, &f, err) < 0 ||
        hosts_node_files(a->p, a->c, a->s, a->spec, a->n, 1, err) < 0 ||
        hosts_write_conf(a->p, a->c, a->s, a->spec, sha, err) < 0) {
        /* the node stays where it was (drained); the old host stays quarantined */
        snprintf(a->n->host, sizeof(a->n->host), "%s", old);
        hosts_state_save(a->c, a->s, &e2);
        return -1;
    }
    /* slurmctld: the new address now, and the rewritten slurm.conf for good */
    char a1[96], a2[300], a3[300], *out = NULL;
    snprintf(a1, sizeof(a1), "NodeName=%s", a->n->name);
    snprintf(a2, sizeof(a2), "NodeAddr=%s", a->n->host);
    snprintf(a3, sizeof(a3), "NodeHostname=%s", a->n->hostname);
    char *argv[] = {"scontrol", "update", a1, a2, a3, NULL};
    if (slurm_cmd(a->c->conf, argv, &out, 0) != 0)
        log_msg(LOG_WARNING, "cluster %s: scontrol update %s %s: %s", a->c->id, a1, a2,
                out ? out : "");
    free(out);
    if (slurm_reconfigure(a->c->conf, err) < 0)
        return -1;
    snprintf(a->s->applied.sha, sizeof(a->s->applied.sha), "%s", sha);
    if (hosts_state_save(a->c, a->s, err) < 0)
        return -1;
    return full_up(a, &f, err);
}

static int (*const actions[PROVIDER_NACTIONS])(const struct act *a, mtc_error_t *err) = {
    [PROVIDER_RESTART] = act_restart,
    [PROVIDER_REBOOT] = act_reboot,
    [PROVIDER_REIMAGE] = act_reimage,
    [PROVIDER_REPLACE] = act_replace,
};

int hosts_node_action(struct provider *p, const char *id, const json_t *spec, const char *node,
                      const char *action, mtc_error_t *err)
{
    struct head c;
    int k = provider_action_find(action, err);
    if (k < 0 || head_init(&c, p, id, err) < 0)
        return -1;
    struct hstate *s = calloc(1, sizeof(*s));
    if (!s)
        return errprintf(err, "out of memory");
    int rc = -1, nfd = -1;
    /* a replace rewrites hosts.json and slurm.conf: alone; the other actions
     * touch their node only and run beside those on other nodes */
    int shared = k != PROVIDER_REPLACE && node && mtc_name_valid(node, 63);
    if (shared ? (nfd = head_lock_node(&c, node)) < 0 : head_lock(&c, 1) < 0) {
        free(s);
        return errprintf(err, "cannot lock %s: %s", c.dir, strerror(errno));
    }
    struct hnode *n = NULL;
    if (hosts_state_load(&c, s) < 0) {
        errno = ENOENT;
        errprintf(err, "cluster %s: no hosts.json (never applied?)", id);
        goto out;
    }
    if (!node || !(n = hosts_node_find(s, node))) {
        errno = EINVAL;
        errprintf(err, "cluster %s has no node \"%.64s\"", id, node ? node : "");
        goto out;
    }
    hosts_lc_socket(&c, s);
    const json_t *bt = remediation(spec, "bootTimeoutSeconds");
    struct act a = {p, &c, s, spec, n, bt ? (int)json_integer_value(bt) : HOSTS_BOOT_TIMEOUT_S};
    char old_start[64] = "";
    slurm_node_get(c.conf, n->name, "SlurmdStartTime", old_start, sizeof(old_start));
    log_msg(LOG_NOTICE, "cluster %s: %s node %s on %s", id, provider_action_names[k], n->name,
            n->host);
    if (actions[k](&a, err) < 0)
        goto out;
    rc = head_wait_new_slurmd(&c, n->name, n->host, old_start, err);
out:
    head_unlock_node(&c, nfd);
    free(s);
    return rc;
}

json_t *hosts_node_check(struct provider *p, const char *id, const json_t *spec, const char *node,
                         mtc_error_t *err)
{
    (void)spec;
    struct head c;
    if (head_init(&c, p, id, err) < 0)
        return NULL;
    struct hstate *s = calloc(1, sizeof(*s));
    struct hnode *n = NULL;
    json_t *res = NULL;
    if (!s || hosts_state_load(&c, s) < 0 || !node || !(n = hosts_node_find(s, node))) {
        errno = EINVAL;
        errprintf(err, "cluster %s: no node \"%.64s\"", id, node ? node : "");
        free(s);
        return NULL;
    }
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof(cmd),
             ". " SLURM_HOST_ETC "/nodes/%s/agent.env && exec " SLURM_HOST_VAR
             "/bin/mtc-agent check --json --config " SLURM_HOST_ETC "/nodes/%s/agent.json",
             s->uid, n->name, s->uid, s->uid, n->name);
    struct ssh_conn *ssh = hosts_ssh(p, s, n->host, err);
    mtc_error_t e2 = {""};
    int rc = ssh ? ssh_run(ssh, cmd, &out, CHECK_TIMEOUT_MS, 0, &e2) : -1;
    ssh_free(ssh);
    /* 0 all pass, 1 a check failed: both print the results */
    json_t *o = (rc == 0 || rc == 1) && out ? json_loads(out, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    if (!(res = head_check_results(o)))
        errprintf(err, "%s: mtc-agent check on %s failed: %.150s", node, n->host,
                  *e2.text ? e2.text : "no results");
    free(out);
    free(s);
    return res;
}

/* ---- faults injected on purpose (mtc chaos) ---- */

/* mtc-host fault's KIND for each fault */
static const char *const fault_kinds[] = {[PROVIDER_FAULT_HANG] = "hang",
                                          [PROVIDER_FAULT_KILL_TASK] = "kill",
                                          [PROVIDER_FAULT_KILL_SLURMD] = "slurmd"};

int hosts_node_fault(struct provider *p, const char *id, const json_t *spec, const char *node,
                     enum provider_fault f, const char *job, unsigned pick,
                     struct provider_fault_hit *hit, mtc_error_t *err)
{
    (void)spec;
    struct head c;
    if (head_init(&c, p, id, err) < 0)
        return -1;
    struct hstate *s = calloc(1, sizeof(*s));
    struct hnode *n = NULL;
    if (!s || hosts_state_load(&c, s) < 0 || !(n = hosts_node_find(s, node))) {
        free(s);
        errno = EINVAL;
        return errprintf(err, "cluster %s has no node \"%.64s\"", id, node);
    }
    /* job and node were checked by provider_node_fault: digits, a name */
    char args[64], *out = NULL;
    snprintf(args, sizeof(args), "%s %s %u", fault_kinds[f],
             f == PROVIDER_FAULT_KILL_SLURMD ? "-" : job, pick);
    struct ssh_conn *ssh = hosts_ssh(p, s, n->host, err);
    int rc = ssh ? hosts_remote_op_args(ssh, s, "fault", n->name, -1, args, &out, ACTION_OP_MS, err)
                 : -1;
    ssh_free(ssh);
    if (rc == 0 && (!out || sscanf(out, "pid=%ld rank=%d tasks=%d", &hit->pid, &hit->rank,
                                   &hit->tasks) != 3)) {
        errno = EIO;
        errprintf(err, "host %s: mtc-host fault answered \"%.80s\"", n->host, out ? out : "");
        rc = -1;
    } else if (rc != 0) {
        errno = rc == 4 ? ENOENT : EIO; /* 4: nothing of the job (or no slurmd) to hit */
        rc = -1;
    } else
        log_msg(LOG_NOTICE, "cluster %s: chaos: %s on %s (%s): pid %ld, rank %d", id,
                fault_kinds[f], n->name, n->host, hit->pid, hit->rank);
    free(out);
    free(s);
    return rc;
}

/* ---- power (Slurm's power saving of elastic nodes) ---- */

int hosts_power_wake(struct provider *p, struct head *c, struct hstate *s, const json_t *spec,
                     struct hnode *n, mtc_error_t *err)
{
    const json_t *bt = remediation(spec, "bootTimeoutSeconds");
    struct act a = {p, c, s, spec, n, bt ? (int)json_integer_value(bt) : HOSTS_BOOT_TIMEOUT_S};
    const char *cmd = json_string_value(remediation(spec, "powerOnCommand"));
    if (cmd && *cmd && run_here(&a, "power-on command", cmd, err) < 0)
        return -1;
    return wait_booted(&a, err);
}

int hosts_power_node(struct provider *p, struct head *c, struct hstate *s, const json_t *spec,
                     struct hnode *n, int on, mtc_error_t *err)
{
    const json_t *bt = remediation(spec, "bootTimeoutSeconds");
    struct act a = {p, c, s, spec, n, bt ? (int)json_integer_value(bt) : HOSTS_BOOT_TIMEOUT_S};
    const char *cmd =
        json_string_value(remediation(spec, on ? "powerOnCommand" : "powerOffCommand"));
    if (cmd && !*cmd)
        cmd = NULL;
    if (!on) {
        /* a powered-down host holds nothing of the cluster (the "clean" of a
         * delete: daemons, jobs' leftovers, files, its claim), so a delete
         * need not reach it; with a power-off command the boot mark makes the
         * next power-on wait for a host that really booted, not one still
         * shutting down */
        if (head_power_mark(c, n->name, 0, err) < 0)
            return -1;
        if (!cmd)
            return node_op(&a, "clean", err);
        mtc_error_t e2 = {""};
        struct ssh_conn *ssh = hosts_ssh(p, s, n->host, &e2);
        if (!ssh || hosts_remote_op(ssh, s, "clean", n->name, -1, NULL, ACTION_OP_MS, &e2) != 0 ||
            hosts_remote_op(ssh, s, "mark", n->name, -1, NULL, ACTION_OP_MS, &e2) != 0)
            log_msg(LOG_NOTICE, "cluster %s: %s before its power-off: %s", c->id, n->name,
                    e2.text); /* a host that does not answer runs nothing of ours */
        ssh_destroy(ssh);     /* the master would die with the host */
        return run_here(&a, "power-off command", cmd, err);
    }
    if (head_power_mark(c, n->name, 1, err) < 0)
        return -1;
    struct hfacts f;
    int rc = hosts_power_wake(p, c, s, spec, n, err) < 0 ? -1 : full_up(&a, &f, err);
    if (rc < 0) {
        /* a host that did not come up stays off: nothing for supervision to
         * restart; Slurm marks it DOWN after ResumeTimeout */
        mtc_error_t e2 = {""};
        if (head_power_mark(c, n->name, 0, &e2) < 0 || node_op(&a, "clean", &e2) < 0)
            log_msg(LOG_NOTICE, "cluster %s: %s after its failed power-on: %s", c->id, n->name,
                    e2.text);
    }
    return rc;
}

int hosts_power(struct provider *p, const char *id, const json_t *spec, const char *node, int on,
                mtc_error_t *err)
{
    struct head c;
    if (head_init(&c, p, id, err) < 0)
        return -1;
    struct hstate *s = calloc(1, sizeof(*s));
    if (!s)
        return errprintf(err, "out of memory");
    int rc = -1;
    /* the node's lock: a resume waits for the node's suspend to end, and
     * nodes power on and off beside each other */
    int nfd = node && mtc_name_valid(node, 63) ? head_lock_node(&c, node) : -1;
    struct hnode *n = NULL;
    if (nfd < 0) {
        errno = EINVAL;
        errprintf(err, "cluster %s has no elastic node \"%.64s\"", id, node ? node : "");
    } else if (hosts_state_load(&c, s) < 0) {
        errno = ENOENT;
        errprintf(err, "cluster %s: no hosts.json (never applied?)", id);
    } else if (!(n = hosts_node_find(s, node)) || !n->cloud) {
        errno = EINVAL;
        errprintf(err, "cluster %s has no elastic node \"%.64s\"", id, node);
    } else {
        hosts_lc_socket(&c, s);
        log_msg(LOG_NOTICE, "cluster %s: powering %s %s on %s", id, n->name, on ? "up" : "down",
                n->host);
        rc = hosts_power_node(p, &c, s, spec, n, on, err);
    }
    if (nfd >= 0)
        head_unlock_node(&c, nfd);
    free(s);
    return rc;
}
