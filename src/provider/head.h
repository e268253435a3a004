/* head: the cluster head both providers build on — a cluster's directory
 * under $MTC_HOME/clusters/<id> and its lock, the controller's daemons
 * (munged with the cluster's own key and socket, slurmctld) found by pid
 * file and checked against their command line, slurm.conf and gres.conf
 * written only when Slurm accepts them, the wait for nodes to register, the
 * controller's supervision and the cluster's delete; the agent's environment
 * head and its check results (head.c); the controller's daemons converged
 * and supervised (head_daemons.c); elastic nodes' power marks, Slurm's
 * power-saving programs and the checks an update of them must pass
 * (head_power.c). The local provider runs its nodes beside it on this host,
 * the hosts provider on servers over ssh. Not part of the provider
 * interface. */
#ifndef MTC_PROVIDER_HEAD_H
#define MTC_PROVIDER_HEAD_H

#include <jansson.h>
#include <sys/types.h>

#include "provider/provider.h"

#define PLEN 4096
#define CTLD_WAIT_MS 30000
#define REGISTER_WAIT_MS 60000
#define STOP_WAIT_MS 10000

/* A cluster's head: its paths and its lock. */
struct head {
    char id[16];
    char dir[PLEN];          /* $MTC_HOME/clusters/<id> */
    char conf[PLEN];         /* <dir>/slurm.conf */
    char munge_socket[PLEN]; /* <dir>/munge/socket */
    int lockfd;
};

/* What slurmctld last loaded: kept in each provider's state file. */
struct head_applied {
    char sha[65];     /* sha256 of the slurm.conf (and gres.conf) it runs with */
    char nodes[PLEN]; /* the node names it knows, comma list (a change needs a restart) */
};

int head_init(struct head *h, struct provider *p, const char *id, mtc_error_t *err);
/* <cluster dir>/<fmt...> into buf (PLEN bytes); returns buf. */
const char *head_path(const struct head *h, char *buf, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A line of an apply's progress: logged (LOG_INFO) and passed to progress
 * (may be NULL). */
void head_say(provider_progress_fn progress, void *arg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The cluster directory's subdirectories (state, log, run, munge ...). 0/-1 + err. */
int head_make_dirs(const struct head *h, mtc_error_t *err);

/* Cluster lock (apply/supervise/delete/node actions). wait 0: fail when held. 0/-1. */
int head_lock(struct head *h, int wait);
void head_unlock(struct head *h);
/* A node action's lock: the cluster lock shared (actions on other nodes run
 * beside it; apply, supervise and delete wait for them all, or skip) and the
 * node's own exclusive. Waits. The node lock's fd, or -1 + errno. */
int head_lock_node(struct head *h, const char *node);
/* Release both (fd: head_lock_node's). */
void head_unlock_node(struct head *h, int fd);

/* Delete cluster id (provider_delete): under its lock, stop(p, h, err) stops
 * what runs, then the directory is removed (with what containers left
 * mounted under it). No directory: 0. A stop that fails leaves the
 * directory. 0/-1 + err. */
typedef int (*head_stop_fn)(struct provider *p, struct head *h, mtc_error_t *err);
int head_delete_with(struct provider *p, const char *id, head_stop_fn stop, mtc_error_t *err);

/* ---- daemons by pid file ---- */

/* The live pid recorded in run/<name>.pid (or the daemon's own pid file own)
 * whose argv has a (and b), else 0. */
pid_t head_running(const struct head *h, const char *name, const char *own, const char *a,
                   const char *b);
int head_record_pid(const struct head *h, const char *name, pid_t pid);
/* Stop pid (when > 0; STOP_WAIT_MS) and remove run/<name>.pid. */
void head_stop_pidfile(const struct head *h, const char *name, pid_t pid);
/* The slurmd of node run on this host (run/slurmd-<node>.pid), else 0. */
pid_t head_slurmd_running(const struct head *h, const char *node);
/* munged on h->munge_socket with the key <dir>/munge/key (made when missing). */
pid_t head_munged_running(const struct head *h);
int head_munged_start(const struct head *h, mtc_error_t *err);
/* slurmctld on h->conf; start waits until it answers. */
pid_t head_ctld_running(const struct head *h);
int head_ctld_start(const struct head *h, mtc_error_t *err);
/* munged, then slurmctld running the config of sha for the node set names
 * (a comma list): started when down, reconfigured when only the config
 * changed, restarted when the node set changed (Slurm 22.05 learns of added,
 * removed or elastic nodes only at start). slurmds: running slurmds read an
 * earlier config (after a restart or a start with a new config they are told
 * to re-read it). a (what it last ran with) is updated. 0/-1 + err. */
int head_controller_converge(const struct head *h, struct head_applied *a, const char *sha,
                             const char *names, int slurmds, provider_progress_fn progress,
                             void *arg, mtc_error_t *err);
/* munged started again when dead (MUNGED_RESTART through ev, may be NULL):
 * head_supervise's first step, on its own for a caller that asks Slurm
 * something before slurmctld is looked at. 0/-1 + err. */
int head_supervise_munged(const struct head *h, provider_event_fn ev, void *arg, mtc_error_t *err);
/* A supervision pass over the controller: munged and slurmctld started again
 * when dead, each reported through ev (may be NULL). 0 (*ctld_restarted: 1
 * when slurmctld was), or -1 + err. */
int head_supervise(const struct head *h, provider_event_fn ev, void *arg, int *ctld_restarted,
                   mtc_error_t *err);
/* The end of a supervision pass that restarted slurmctld (ctld_restarted):
 * a reconfigure makes the slurmds register at once instead of at the next
 * ping (never waited for: the supervisor has other daemons to look after);
 * a failure is logged. */
void head_supervise_end(const struct head *h, int ctld_restarted);

/* ---- accounting: slurmdbd and its database (head_acct.c) ---- */

/* The spec's accounting settled in db/acct.json (ports chosen, the private
 * database's password made once; an external database's credentials read
 * from its root-only file) and what slurm.conf needs into out (port 0:
 * accounting off; addr: where slurmdbd is reached, NULL: 127.0.0.1; it
 * must outlive out). 0/-1 + err. */
struct slurm_accounting;
int head_acct_setup(const struct head *h, const json_t *spec, const char *addr,
                    struct slurm_accounting *out, mtc_error_t *err);
/* 1 when the cluster's accounting is on (db/acct.json). */
int head_acct_enabled(const struct head *h);
/* With accounting on: the private MariaDB (made once) and slurmdbd running
 * and the cluster registered, before slurmctld starts; off: both stopped
 * (the data kept). 0/-1 + err. */
int head_acct_start(const struct head *h, provider_progress_fn progress, void *arg,
                    mtc_error_t *err);
/* A supervision pass over them: started again when dead, each an event
 * (MARIADB_RESTART, SLURMDBD_RESTART). 0/-1 + err. */
int head_acct_supervise(const struct head *h, provider_event_fn ev, void *arg, mtc_error_t *err);
/* The private accounting database dumped, in one transaction while
 * slurmdbd writes on, to db/dump.sql (0600; what a backup of mtcd holds
 * instead of the datadir's files, loaded when a restored home makes the
 * datadir again). Accounting off, an external database or mariadbd not
 * running: nothing (0). 0/-1 + err. */
int head_acct_dump(const struct head *h, mtc_error_t *err);
/* Stop slurmdbd, then the private mariadbd (delete, accounting turned off). */
void head_acct_stop(const struct head *h);

/* ---- Slurm's configuration and the nodes' registration ---- */

/* Render slurm.conf and gres.conf (and plugstack.conf with the container
 * plugin) for spec and sl, have Slurm check them, and write each that
 * differs; sha: the sha256 of them all. 0/-1 + err. */
struct slurm_layout;
int head_conf_write(const struct head *h, const json_t *spec, const struct slurm_layout *sl,
                    char sha[65], mtc_error_t *err);
/* HealthCheckInterval for the spec: healthPolicy.slurmIntervalSeconds when
 * the spec has a policy, else fallback. */
int head_health_interval(const json_t *spec, int fallback);
/* Wait (REGISTER_WAIT_MS) until slurmctld shows the n nodes names[]
 * registered. hosts[] (NULL: this host, whose log directory the error
 * names): where each runs, named in the error. 0/-1 + err. */
int head_wait_registered(const struct head *h, const char *const *names, const char *const *hosts,
                         size_t n, mtc_error_t *err);
/* Wait (REGISTER_WAIT_MS) until slurmctld shows node's slurmd with a start
 * time other than old_start, and registered. host: where it runs, named in
 * the error; NULL: this host, where a slurmd that exited ends the wait at
 * once. 0/-1 + err (ETIMEDOUT). */
int head_wait_new_slurmd(const struct head *h, const char *node, const char *host,
                         const char *old_start, mtc_error_t *err);

/* ---- the nodes' agents ---- */

/* The lines every node's agent.env starts with, into buf: MTC_NODE, SLURM_CONF
 * (conf), MTC_CONTAINERS (the container plugin's runtime directory, swept at
 * each job's end) and, with emulated GPUs (nvml_state set), FAKE_NVML_STATE. */
void head_agent_env(char *buf, size_t len, const char *node, const char *conf,
                    const char *containers, const char *nvml_state);
/* The "results" array of `mtc-agent check --json`'s output object o
 * (consumed; may be NULL), or NULL when it has none. */
json_t *head_check_results(json_t *o);

/* ---- state files ---- */

/* j (consumed; NULL: out of memory) as indented JSON text, written atomically
 * to path with mode. 0/-1 + err. */
int head_json_save(const char *path, json_t *j, mode_t mode, mtc_error_t *err);
/* mtc_write_if_changed with j (consumed; NULL: out of memory) as indented JSON text. */
int head_json_write_if_changed(const char *path, json_t *j, mtc_error_t *err);

/* ---- head_power.c: elastic nodes ---- */

/* 1 when the elastic node is powered on (run/power-<node>.on). */
int head_power_is_on(const struct head *h, const char *node);
/* Mark the elastic node on (run/power-<node>.on) or off. 0/-1 + err. */
int head_power_mark(const struct head *h, const char *node, int on, mtc_error_t *err);
/* With cloud nodes in sl: power.json, the token and the etc/power-*.sh
 * wrappers Slurm runs, and sl->power set from the spec with SuspendTimeout
 * suspend_timeout (s: how long stopping a node may take). 0/-1 + err. */
int head_power_setup(const struct provider *p, const struct head *h, const json_t *spec,
                     int suspend_timeout, struct slurm_layout *sl, mtc_error_t *err);
/* One node as an update sees it, for head_power_refuse. */
struct head_power_change {
    const char *name;
    int was_cloud, is_cloud; /* elastic before / after */
    int existed, stays;      /* in the cluster before / after */
};
/* Refuse an update (EBUSY, one line) that removes an elastic node that is
 * powered up (a lowered maxNodeCount: wait for Slurm to power it down) or
 * makes a static node that runs jobs elastic (a lowered minNodeCount).
 * 0/-1 + err. */
int head_power_refuse(const struct head *h, const struct head_power_change *ch, size_t n,
                      mtc_error_t *err);

#endif
