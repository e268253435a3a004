/* local.h: internal to the local provider (local.c: cluster daemons, apply,
 * supervise, delete; local_node.c: per-node agent, emulated hardware and the
 * node repair actions). The hosts provider reuses the controller side (the
 * cluster directory, its lock, munged and slurmctld by pid file). Not part of
 * the provider interface. */
#ifndef MTC_PROVIDER_LOCAL_H
#define MTC_PROVIDER_LOCAL_H

#include <jansson.h>
#include <sys/types.h>

#include "provider/provider.h"

#define PLEN 4096
#define CTLD_WAIT_MS 30000
#define REGISTER_WAIT_MS 60000
#define STOP_WAIT_MS 10000
#define MAX_NODES 256

/* One cluster's paths and its lock. */
struct lc {
    char id[16];
    char dir[PLEN];
    char conf[PLEN];
    char munge_socket[PLEN];
    int lockfd;
};

struct lnode {
    char name[64];
    char pool[32];
    int port;
    int cloud; /* an elastic node (State=CLOUD), on only while run/power-<node>.on exists */
};

/* cluster.json: what the daemons were set up with (ports are kept for the
 * life of the cluster) and what slurmctld last loaded. */
struct layout {
    int ctld_port, slurmd_port;
    struct lnode nodes[MAX_NODES];
    size_t nnodes;
    char applied_sha[65];     /* sha256 of the slurm.conf slurmctld runs with */
    char applied_nodes[PLEN]; /* node names it runs with, comma list */
};

/* <cluster dir>/<fmt...> into buf (PLEN bytes); returns buf. */
const char *local_path(const struct lc *c, char *buf, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A line of an apply's progress: logged (LOG_INFO) and passed to progress
 * (may be NULL). */
void local_say(provider_progress_fn progress, void *arg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int local_lc_init(struct lc *c, struct provider *p, const char *id, mtc_error_t *err);
/* Cluster lock (apply/supervise/delete/node actions). wait 0: fail when held. 0/-1. */
int local_lock(struct lc *c, int wait);
void local_unlock(struct lc *c);
/* A node action's lock: the cluster lock shared (actions on other nodes run
 * beside it; apply, supervise and delete wait for them all, or skip) and the
 * node's own exclusive. Waits. The node lock's fd, or -1 + errno. */
int local_lock_node(struct lc *c, const char *node);
/* Release both (fd: local_lock_node's). */
void local_unlock_node(struct lc *c, int fd);
/* Delete cluster id (provider_delete): under its lock, stop(p, c, err) stops
 * what runs, then the directory is removed. No directory: 0. A stop that
 * fails leaves the directory. 0/-1 + err. */
typedef int (*local_stop_fn)(struct provider *p, struct lc *c, mtc_error_t *err);
int local_delete_with(struct provider *p, const char *id, local_stop_fn stop, mtc_error_t *err);
/* 1 when pid's argv contains a and (if given) b as whole arguments. */
int local_proc_has(pid_t pid, const char *file, const char *a, const char *b);
int local_cmdline_has(pid_t pid, const char *a, const char *b);
/* The live pid recorded in run/<name>.pid (or the daemon's own pid file own)
 * whose argv has a (and b), else 0. */
pid_t local_running(const struct lc *c, const char *name, const char *own, const char *a,
                    const char *b);
int local_record_pid(const struct lc *c, const char *name, pid_t pid);
void local_stop_pidfile(const struct lc *c, const char *name, pid_t pid);
pid_t local_slurmd_running(const struct lc *c, const char *node);
/* The cluster directory's subdirectories (state, log, run, munge ...). 0/-1 + err. */
int local_make_dirs(const struct lc *c, mtc_error_t *err);
/* munged on c->munge_socket with the key <dir>/munge/key (made when missing). */
pid_t local_munged_running(const struct lc *c);
int local_munged_start(const struct lc *c, mtc_error_t *err);
/* slurmctld on c->conf; start waits until it answers. */
pid_t local_ctld_running(const struct lc *c);
int local_ctld_start(const struct lc *c, mtc_error_t *err);
/* A supervision pass over the controller: munged and slurmctld started again
 * when dead, each reported through ev (may be NULL). 0 (*ctld_restarted: 1
 * when slurmctld was), or -1 + err. */
int local_supervise_controller(const struct lc *c, provider_event_fn ev, void *arg,
                               int *ctld_restarted, mtc_error_t *err);
/* Start node's slurmd, its pid recorded; boot (an elastic node powering
 * up): as a machine that boots now (slurm_slurmd_boot). 0/-1 + err. */
int local_slurmd_start(const struct lc *c, const char *node, int boot, mtc_error_t *err);
/* Wait (up to 15 s) until node's slurmd has written its own pid file
 * (SlurmdPidFile, what the agent's daemon.slurmd check reads). 0, or -1 +
 * err when its recorded slurmd exited or wrote none in time. */
int local_slurmd_wait_up(const struct lc *c, const char *node, mtc_error_t *err);
int local_layout_load(const struct lc *c, struct layout *l);
const struct lnode *local_layout_find(const struct layout *l, const char *name);
/* Wait (REGISTER_WAIT_MS) until slurmctld shows the n nodes names[]
 * registered. hosts[] (NULL: this host, whose log directory the error
 * names): where each runs, named in the error. 0/-1 + err. */
int local_wait_registered(const struct lc *c, const char *const *names, const char *const *hosts,
                          size_t n, mtc_error_t *err);
/* This host's name up to the first dot (slurmctld matches SlurmctldHost
 * against it), "localhost" when it has none. */
void local_short_hostname(char *buf, size_t len);
/* Render slurm.conf and gres.conf for spec and sl, have Slurm check them, and
 * write each that differs; sha: the sha256 of both. 0/-1 + err. */
struct slurm_layout;
int local_conf_write(const struct lc *c, const json_t *spec, const struct slurm_layout *sl,
                     char sha[65], mtc_error_t *err);
/* NVIDIA devices this host has (/dev/nvidia0, 1, ... in a row). */
int local_host_gpus(void);
/* Write path when its content differs. 1 changed, 0 same, -1 + err. */
int local_write_if_changed(const char *path, const char *text, mtc_error_t *err);
/* j (consumed; NULL: out of memory) as indented JSON text, written atomically
 * to path with mode. 0/-1 + err. */
int local_json_save(const char *path, json_t *j, mode_t mode, mtc_error_t *err);
/* local_write_if_changed with j (consumed; NULL: out of memory) as indented JSON text. */
int local_json_write_if_changed(const char *path, json_t *j, mtc_error_t *err);

/* ---- local_node.c ---- */

/* Emulated hardware of a node (nodes/<node>/hw: GPU device files when fake,
 * nvml.state, kernel.log) and its instance id; created when missing, or
 * afresh when fresh is set (a replacement machine). 0/-1 + err. */
int local_node_provision(const struct lc *c, const char *node, int gpus, int fake_devices,
                         int fresh, mtc_error_t *err);
/* Write nodes/<node>/agent.json and agent.env from the spec. 1 when changed,
 * 0 same, -1 + err. */
int local_agent_config(const struct provider *p, const struct lc *c, const json_t *spec,
                       const char *node, int port, mtc_error_t *err);
/* The lines every node's agent.env starts with, into buf: MTC_NODE, SLURM_CONF
 * (conf), MTC_CONTAINERS (the container plugin's runtime directory, swept at
 * each job's end) and, with emulated GPUs (nvml_state set), FAKE_NVML_STATE. */
void local_agent_env_head(char *buf, size_t len, const char *node, const char *conf,
                          const char *containers, const char *nvml_state);
pid_t local_agent_running(const struct lc *c, const char *node);
/* Start `mtc-agent run` for node (p->agent must be set). 0/-1 + err. */
int local_agent_start(const struct provider *p, const struct lc *c, const char *node,
                      mtc_error_t *err);
/* Stop the node's agent, if any. */
void local_agent_stop(const struct lc *c, const char *node);
/* Bring node n up (a node action's restart, an elastic node's power-on): its
 * emulated hardware (made when missing) and agent config, then its slurmd
 * when not running — boot: as a machine that boots now (local_slurmd_start),
 * waited for until it writes its pid file — then its agent when missing
 * (p->agent). 0/-1 + err. */
int local_node_up(const struct provider *p, const struct lc *c, const json_t *spec,
                  const struct lnode *n, int boot, mtc_error_t *err);
/* Power the node off: freeze every process of it (slurmd, agent, slurmstepd,
 * job tasks, hook programs — found by recorded pid, environment marker and
 * parent pid, never by name) so none forks away, look again until nothing
 * new appears, then SIGKILL them all and wait (5 s). node NULL: every node
 * of the cluster at once (one /proc scan a round). 0/-1 + err. */
int local_node_kill(const struct lc *c, const char *node, mtc_error_t *err);
/* HealthCheckInterval for the spec: healthPolicy.slurmIntervalSeconds when
 * the spec has a policy, else fallback. */
int local_health_interval(const json_t *spec, int fallback);

/* ---- local_power.c: elastic nodes ---- */

/* 1 when the elastic node is powered on (run/power-<node>.on). */
int local_power_is_on(const struct lc *c, const char *node);
/* Mark the elastic node on (run/power-<node>.on) or off. 0/-1 + err. */
int local_power_mark(const struct lc *c, const char *node, int on, mtc_error_t *err);
/* With cloud nodes in sl: power.json, the token and the etc/power-*.sh
 * wrappers Slurm runs, and sl->power set from the spec. 0/-1 + err. */
int local_power_setup(const struct provider *p, const struct lc *c, const json_t *spec,
                      struct slurm_layout *sl, mtc_error_t *err);
/* One node as an update sees it, for local_power_refuse (both providers). */
struct power_change {
    const char *name;
    int was_cloud, is_cloud; /* elastic before / after */
    int existed, stays;      /* in the cluster before / after */
};
/* Refuse an update (EBUSY, one line) that removes an elastic node that is
 * powered up (a lowered maxNodeCount: wait for Slurm to power it down) or
 * makes a static node that runs jobs elastic (a lowered minNodeCount).
 * 0/-1 + err. */
int local_power_refuse(const struct lc *c, const struct power_change *ch, size_t n,
                       mtc_error_t *err);
/* Before an apply changes old into l: refuse to remove an elastic node that
 * is on, or to make a static node that runs jobs elastic (EBUSY); power down
 * static nodes that become elastic. 0/-1 + err. */
int local_power_plan(const struct lc *c, const struct layout *old, const struct layout *l,
                     provider_progress_fn progress, void *arg, mtc_error_t *err);
/* provider_power for the local provider. */
int local_power(struct provider *p, const char *id, const json_t *spec, const char *node, int on,
                mtc_error_t *err);

/* The node repair actions (provider_node_action), in escalating order; each
 * provider has its own table of them. */
enum local_action { LOCAL_RESTART, LOCAL_REBOOT, LOCAL_REIMAGE, LOCAL_REPLACE, LOCAL_NACTIONS };
extern const char *const local_action_names[LOCAL_NACTIONS];
/* action's index in local_action_names, or -1 + err (EINVAL) when it is none. */
int local_action_find(const char *action, mtc_error_t *err);
/* Wait (REGISTER_WAIT_MS) until slurmctld shows node's slurmd with a start
 * time other than old_start, and registered. host: where it runs, named in
 * the error; NULL: this host, where a slurmd that exited ends the wait at
 * once. 0/-1 + err (ETIMEDOUT). */
int local_wait_new_slurmd(const struct lc *c, const char *node, const char *host,
                          const char *old_start, mtc_error_t *err);
/* The "results" array of `mtc-agent check --json`'s output object o
 * (consumed; may be NULL), or NULL when it has none. */
json_t *local_check_results(json_t *o);

int local_node_action(struct provider *p, const char *id, const json_t *spec, const char *node,
                      const char *action, mtc_error_t *err);
json_t *local_node_check(struct provider *p, const char *id, const json_t *spec, const char *node,
                         mtc_error_t *err);

#endif
