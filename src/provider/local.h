/* local.h: internal to the local provider (local.c: apply, supervise,
 * delete, the nodes' daemons on this host; local_layout.c: cluster.json;
 * local_node.c: a node's slurmd, per-node agent, emulated hardware and the
 * node repair actions; local_fault.c: faults injected on purpose;
 * local_power.c: elastic nodes). Built on the cluster head (head.h). Not
 * part of the provider interface. */
#ifndef MTC_PROVIDER_LOCAL_H
#define MTC_PROVIDER_LOCAL_H

#include <jansson.h>
#include <sys/types.h>

#include "provider/head.h"

#define MAX_NODES 256
#define LOCAL_SUSPEND_TIMEOUT 5 /* s: stopping an emulated node takes under one (hosts: 5 too) */
/* A powered-up node that Slurm still has POWERING_UP this long after its
 * slurmd started is asked to register again (SIGHUP), then its slurmd is
 * restarted, at most LOCAL_WATCH_RESTARTS times per power-up (s) */
#define LOCAL_WATCH_NUDGE_S 5
#define LOCAL_WATCH_RESTART_S 10
#define LOCAL_WATCH_RESTARTS 3

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
    struct head_applied applied;
};

/* Start node's slurmd, its pid recorded; boot (an elastic node powering
 * up): as a machine that boots now (slurm_slurmd_boot). 0/-1 + err. */
int local_slurmd_start(const struct head *c, const char *node, int boot, mtc_error_t *err);
/* Wait (up to 15 s) until node's slurmd has written its own pid file
 * (SlurmdPidFile, what the agent's daemon.slurmd check reads). 0, or -1 +
 * err when its recorded slurmd exited or wrote none in time. */
int local_slurmd_wait_up(const struct head *c, const char *node, mtc_error_t *err);
/* ---- local_layout.c ---- */
/* cluster.json into l: 0, or -1 (none, or no controller port). */
int local_layout_load(const struct head *c, struct layout *l);
/* l as cluster.json. 0, or -1 + err. */
int local_layout_save(const struct head *c, const struct layout *l, mtc_error_t *err);
const struct lnode *local_layout_find(const struct layout *l, const char *name);
/* The cluster's layout (caller frees) and node's entry in it into *n; NULL
 * + err: ENOENT (never applied), EINVAL ("cluster C has no WHAT \"NODE\"":
 * what names the kind of node asked for), ENOMEM. */
struct layout *local_layout_node(const struct head *c, const char *node, const char *what,
                                 const struct lnode **n, mtc_error_t *err);
/* NVIDIA devices this host has (/dev/nvidia0, 1, ... in a row). */
int local_host_gpus(void);

/* ---- local_node.c ---- */

/* Emulated hardware of a node (nodes/<node>/hw: GPU device files when fake,
 * nvml.state, kernel.log) and its instance id; created when missing, or
 * afresh when fresh is set (a replacement machine). 0/-1 + err. */
int local_node_provision(const struct head *c, const char *node, int gpus, int fake_devices,
                         int fresh, mtc_error_t *err);
/* Write nodes/<node>/agent.json and agent.env from the spec. 1 when changed,
 * 0 same, -1 + err. */
int local_agent_config(const struct provider *p, const struct head *c, const json_t *spec,
                       const char *node, int port, mtc_error_t *err);
pid_t local_agent_running(const struct head *c, const char *node);
/* Start `mtc-agent run` for node (p->agent must be set). 0/-1 + err. */
int local_agent_start(const struct provider *p, const struct head *c, const char *node,
                      mtc_error_t *err);
/* Stop the node's agent, if any. */
void local_agent_stop(const struct head *c, const char *node);
/* Bring node n up (a node action's restart, an elastic node's power-on): its
 * emulated hardware (made when missing) and agent config, then its slurmd
 * when not running — boot: as a machine that boots now (local_slurmd_start),
 * waited for until it writes its pid file — then its agent when missing
 * (p->agent). 0/-1 + err. */
int local_node_up(const struct provider *p, const struct head *c, const json_t *spec,
                  const struct lnode *n, int boot, mtc_error_t *err);
/* Power the node off: freeze every process of it (slurmd, agent, slurmstepd,
 * job tasks, hook programs — found by recorded pid, environment marker and
 * parent pid, never by name) so none forks away, look again until nothing
 * new appears, then SIGKILL them all and wait (5 s). node NULL: every node
 * of the cluster at once (one /proc scan a round). 0/-1 + err. */
int local_node_kill(const struct head *c, const char *node, mtc_error_t *err);
int local_node_action(struct provider *p, const char *id, const json_t *spec, const char *node,
                      const char *action, mtc_error_t *err);
json_t *local_node_check(struct provider *p, const char *id, const json_t *spec, const char *node,
                         mtc_error_t *err);

/* ---- local_fault.c ---- */

/* provider_node_fault for the local provider. */
int local_node_fault(struct provider *p, const char *id, const json_t *spec, const char *node,
                     enum provider_fault f, const char *job, unsigned pick,
                     struct provider_fault_hit *hit, mtc_error_t *err);

/* ---- local_power.c: elastic nodes ---- */

/* Before an apply changes old into l: refuse to remove an elastic node that
 * is on, or to make a static node that runs jobs elastic (EBUSY); power down
 * static nodes that become elastic. 0/-1 + err. */
int local_power_plan(const struct head *c, const struct layout *old, const struct layout *l,
                     provider_progress_fn progress, void *arg, mtc_error_t *err);
/* The ports of l's elastic nodes that are off held by this process (one
 * something else has stays unheld: its power-up says so), those of l's other
 * nodes released, and those of old's nodes that l lacks (old: NULL for
 * none; a deleted cluster's go with mtc_port_release_owner). Supervise calls
 * it each pass (holds are lost with mtcd). */
void local_power_ports(const struct head *c, const struct layout *l, const struct layout *old);
/* provider_power for the local provider. */
int local_power(struct provider *p, const char *id, const json_t *spec, const char *node, int on,
                mtc_error_t *err);
/* Supervise's watch of powered-up nodes (the caller holds the cluster's
 * lock): one that Slurm still has POWERING_UP LOCAL_WATCH_NUDGE_S after its
 * slurmd started gets SIGHUP (slurmd sends its registration again); at
 * LOCAL_WATCH_RESTART_S its slurmd is restarted (a SLURMD_RESTART event
 * through ev), at most LOCAL_WATCH_RESTARTS times; past that Slurm's
 * ResumeTimeout ends the resume. Nothing to do when slurmctld does not
 * answer. 0/-1 + err. */
int local_power_watch(const struct head *c, const struct layout *l, provider_event_fn ev, void *arg,
                      mtc_error_t *err);

#endif
