/* provider: bring a cluster spec to life on machines. One ops table per kind
 * ("local": N emulated nodes on this host; "hosts": real servers over ssh;
 * "sim": simulated nodes, no Slurm — docs/scale.md); callers use only the
 * functions below, which pick the kind per cluster (a spec whose pools list
 * hosts runs on "hosts", one with a "sim" section on "sim"; the kind is recorded in the
 * cluster's directory, so it survives restarts and is known to delete). */
#ifndef MTC_PROVIDER_H
#define MTC_PROVIDER_H

#include <jansson.h>

#include "common/common.h"
#include "slurm/slurm.h"

typedef void (*provider_progress_fn)(void *arg, const char *message);
/* type: "SLURMCTLD_RESTART", "SLURMD_RESTART", "MUNGED_RESTART", "AGENT_RESTART";
 * node may be NULL */
typedef void (*provider_event_fn)(void *arg, const char *type, const char *node,
                                  const char *message);

struct provider;

/* kind: the kind of a cluster whose spec does not say ("local"). home:
 * $MTC_HOME (clusters live in home/clusters/<id>). NULL + err (unknown kind,
 * ENOMEM). Destroy with provider_destroy. */
struct provider *provider_create(const char *kind, const char *home, mtc_error_t *err);
void provider_destroy(struct provider *p);

/* Converge cluster id to the normalized spec: create when absent, else
 * add/remove nodes and partitions without losing queued jobs. Idempotent and
 * safe to call again after the caller died mid-way: running daemons are
 * adopted (pid files + liveness), never started twice. Returns 0 once
 * slurmctld answers and every node is registered; -1 + err otherwise.
 * progress (may be NULL) receives one-line messages. */
int provider_apply(struct provider *p, const char *id, const json_t *spec,
                   provider_progress_fn progress, void *arg, mtc_error_t *err);
/* Stop every daemon of the cluster and remove its directory. Idempotent. */
int provider_delete(struct provider *p, const char *id, mtc_error_t *err);
/* Per node: [{"instanceName","nodePoolId","nodePoolType","nodeState","slurmState"}].
 * Caller owns. NULL + err on error. */
json_t *provider_nodes(struct provider *p, const char *id, const json_t *spec, mtc_error_t *err);
/* One supervision pass: restart dead munged/slurmctld/slurmd/mtc-agent, each reported
 * through ev (may be NULL). Cheap (pid checks) when all is well; skips the
 * pass (returns 0) while an apply or delete holds the cluster. */
int provider_supervise(struct provider *p, const char *id, const json_t *spec, provider_event_fn ev,
                       void *arg, mtc_error_t *err);
/* When the newest look at cluster id's node daemons began whose findings
 * (SLURMD_RESTART ...) provider_supervise has all reported: pass_ms (the
 * start of the caller's last provider_supervise) for a provider that looks
 * in the call itself; on hosts, an earlier pass (they are looked at in a
 * thread of their own, at most every few seconds, and what it found is
 * reported by the next call). 0: none yet. */
int64_t provider_supervised_at(struct provider *p, const char *id, int64_t pass_ms);
/* Shell text for `eval "$(mtc env ID)"`. Caller frees. NULL + err. */
char *provider_env(struct provider *p, const char *id, mtc_error_t *err);
/* KEY's value in provider_env's text (export KEY='VALUE') into buf: 0, or -1
 * when absent, empty or longer than len - 1. */
int provider_env_get(const char *env, const char *key, char *buf, size_t len);
/* 1 when the cluster's directory exists. */
int provider_exists(struct provider *p, const char *id);
/* The kind ("local", "hosts") cluster id runs on, or would run on with spec
 * (may be NULL): the recorded kind first, else the spec's. Static string. */
const char *provider_kind(struct provider *p, const char *id, const json_t *spec);
/* A cluster on hosts: every host it knows, [{"host","hostname","nodePoolId",
 * "node","role":"node"|"spare"|"quarantined","reason"?}], from the provider's
 * state (no remote call). NULL for a cluster that runs on no hosts. Caller owns. */
json_t *provider_hosts(struct provider *p, const char *id);
/* A cluster with Slurm's backup controller (hosts, controller.backupHost):
 * {"primary": {"host","address","up"?}, "backup": {...}, "failoverSeconds",
 * "inControl"?: "primary"|"backup"|"none", "since"?: RFC 3339} as the
 * supervision last saw it (no remote call; "up", "inControl" and "since"
 * once it has looked). NULL for a cluster without one. Caller owns. */
json_t *provider_controller(struct provider *p, const char *id);
/* Before a backup of mtcd: what of cluster id's head cannot be copied as
 * files made copyable (its private accounting database dumped to
 * db/dump.sql). 0/-1 + err. */
int provider_backup_prepare(struct provider *p, const char *id, mtc_error_t *err);
/* A cluster adopted from a restored backup: 1 when its machines must reach
 * the controller at another address than they did, that address into addr
 * — mtcd's --listen address when it is one address of this machine, else,
 * when this machine does not hold the old address, its source address
 * towards the first host; 0 when the controller has not moved (the same
 * address, or a name: DNS moves it), or the cluster runs on this machine
 * alone; -1 + err. */
int provider_controller_moved(struct provider *p, const char *id, char *addr, size_t len,
                              mtc_error_t *err);
/* The cluster's experiment root is shared storage: every node's host sees
 * the marker the controller writes there (hosts; nothing to check for a
 * cluster on one machine). 0, or -1 + err naming the hosts that do not. */
int provider_check_storage(struct provider *p, const char *id, const json_t *spec,
                           mtc_error_t *err);
/* How `mtc login` reaches the cluster's login node when that is another
 * machine: {"host","user","port","keyFile"?,"knownHosts","remoteEnv"} where
 * remoteEnv is shell text that sets the Slurm environment there. NULL (no
 * err) when the login node is this host; NULL + err on error. Caller owns. */
json_t *provider_login(struct provider *p, const char *id, mtc_error_t *err);

/* Node repair, for the remediation controller. action, in escalating order:
 * "restart" (the node's daemons), "reboot" (every process of the node stopped
 * and started again), "reimage" (the node's local state wiped and
 * re-provisioned), "replace" (a new node — fresh state and hardware — takes
 * the same Slurm name). Returns once the node's new slurmd has registered
 * with slurmctld (bounded: 60 s), leaving its Slurm state (drain) as it was.
 * 0, or -1 + err (unknown node or action, EINVAL; timeout, ETIMEDOUT). */
int provider_node_action(struct provider *p, const char *id, const json_t *spec, const char *node,
                         const char *action, mtc_error_t *err);
/* The repair actions' names, in escalating order (each provider has its own
 * table of what they do). */
enum provider_action {
    PROVIDER_RESTART,
    PROVIDER_REBOOT,
    PROVIDER_REIMAGE,
    PROVIDER_REPLACE,
    PROVIDER_NACTIONS
};
extern const char *const provider_action_names[PROVIDER_NACTIONS];
/* action's index in provider_action_names, or -1 + err (EINVAL) when it is none. */
int provider_action_find(const char *action, mtc_error_t *err);
/* Power an elastic node (State=CLOUD: its pool's min..max-1) on or off, for
 * Slurm's power saving (mtc-power, through mtcd): on starts the node's
 * daemons (slurmd, mtc-agent) without waiting for them to register (Slurm
 * waits up to ResumeTimeout); off stops every process of the node and clears
 * its runtime state (spool, scratch, agent state). The supervisor restarts
 * only the daemons of nodes that are on. 0, or -1 + err (EINVAL: not an
 * elastic node of the cluster). */
/* The pseudo-node whose node token Slurm's power programs hold: it names no
 * compute node (so it reports no health); :powerNodes accepts it. */
#define PROVIDER_POWER_PRINCIPAL "slurmctld"
int provider_power(struct provider *p, const char *id, const json_t *spec, const char *node, int on,
                   mtc_error_t *err);

/* Run the node's health checks once (mtc-agent check) and return its results
 * array [{"check","status","severity","reason","value"}]. Caller owns. NULL+err. */
json_t *provider_node_check(struct provider *p, const char *id, const json_t *spec,
                            const char *node, mtc_error_t *err);

/* Drain, resume or down (op) a compute node of cluster id, with reason
 * (may be NULL): Slurm's `scontrol update` with conf (the cluster's
 * slurm.conf), or for a cluster without Slurm (sim) the provider's own node
 * state, which provider_nodes reports. 0, or -1 + err. */
int provider_node_set(struct provider *p, const char *id, const char *conf, const char *node,
                      enum slurm_node_op op, const char *reason, mtc_error_t *err);
/* 1 when cluster id runs Slurm (jobs to requeue, squeue to ask), 0 when it is
 * simulated. */
int provider_has_slurm(struct provider *p, const char *id);

/* Faults injected on purpose (`mtc chaos`, docs/any-framework.md), by the
 * mechanisms the fault tests use: HANG stops (SIGSTOP) one task of a Slurm
 * job on a node — a rank: a process Slurm started for a step (its
 * SLURM_TASK_PID is its own pid), with its descendants — KILL_TASK kills
 * (SIGKILL) one the same way, KILL_SLURMD kills -9 the node's slurmd (which
 * supervision restarts; the job's steps run on). */
enum provider_fault { PROVIDER_FAULT_HANG, PROVIDER_FAULT_KILL_TASK, PROVIDER_FAULT_KILL_SLURMD };
/* What a fault hit: the process signalled, the task's rank (SLURM_PROCID;
 * -1 for slurmd) and how many tasks of the job the node runs (0 for slurmd). */
struct provider_fault_hit {
    long pid;
    int rank;
    int tasks;
};
/* Inject fault f on node of cluster id; for a task, one of Slurm job job's
 * tasks on the node: the pick-th in rank order, modulo their count. Root acts
 * here for an admin (the API route is admin-only); node and job are checked
 * against patterns before they reach a path or a command. 0 with *hit, or -1
 * + err: EINVAL (not a node of the cluster, a bad job id), ENOENT (no task of
 * the job runs on the node now, no slurmd runs), ENOTSUP (a provider without
 * processes: sim). */
int provider_node_fault(struct provider *p, const char *id, const json_t *spec, const char *node,
                        enum provider_fault f, const char *job, unsigned pick,
                        struct provider_fault_hit *hit, mtc_error_t *err);

/* A simulated node's health results (what its mtc-agent would report), the
 * checks policy (a canonical healthPolicy; NULL: the defaults) enables that
 * run every pass, each PASS — but failing (a check name of the table, may be
 * NULL) FAILs with its table severity and reason. The load generator
 * (mtc-simload) and the sim provider's node check share it. Caller owns;
 * NULL + err (unknown check). */
json_t *provider_sim_results(const json_t *policy, const char *failing, const char *reason,
                             mtc_error_t *err);

/* Commands slurmd runs on every node of every cluster this provider applies
 * from now on (mtc-agent, for instance). In each, "{cluster}" becomes the
 * cluster id, "{dir}" its directory and "{nodedir}" the running node's
 * directory ({dir}/nodes/$SLURMD_NODENAME, holding agent.json and agent.env),
 * "{agent}" the mtc-agent binary — on a cluster on hosts, the paths there
 * (/etc/mtc/<uid>, /var/lib/mtc/<uid>/bin/mtc-agent); $SLURMD_NODENAME is the
 * node at run time. NULL or "" = none. */
struct provider_hooks {
    const char *health_check; /* HealthCheckProgram */
    int health_interval_s;    /* HealthCheckInterval; <= 0 means 60 (a spec's
                                 healthPolicy.slurmIntervalSeconds wins) */
    const char *prolog;       /* runs before the spec's prologBashScripts */
    const char *epilog;       /* runs before the spec's epilogBashScripts */
    const char *agent;        /* mtc-agent binary: one `mtc-agent run` per compute
                                 node, supervised like slurmd; NULL = none (node
                                 checks then use "mtc-agent" from PATH). Copied
                                 to the hosts of a cluster on hosts. */
    const char *power;        /* mtc-power binary: Slurm's Suspend/Resume/ResumeFailProgram
                                 for elastic pools; NULL = none (such pools are refused) */
    /* Agents on other hosts report over TCP: mtcd's --listen "HOST:PORT"
     * (NULL: mtcd does not listen, and a cluster on hosts cannot be created),
     * https when tls, trusting ca_file (copied to the hosts; NULL: the hosts'
     * system CAs). */
    const char *listen;
    int tls;
    const char *ca_file;
    /* The container plugin, spank_mtc.so (docs/containers.md): in every
     * cluster's plugstack.conf, copied to the hosts. NULL: none. */
    const char *spank;
};
/* Copy the hooks into p (replacing earlier ones). 0, or -1 + err (ENOMEM). */
int provider_set_hooks(struct provider *p, const struct provider_hooks *h, mtc_error_t *err);

/* Who a cluster's agents are, from mtcd's store (set by the control layer).
 * parent: the cluster's project and location, for the agents' report URL.
 * node_token: a fresh node token for (cluster, node) into token[len], the
 * ones before it revoked — only mtcd mints them (docs/api.md, "node").
 * Both 0/-1. Without an identity, agents report as local/local, tokenless. */
struct provider_identity {
    int (*parent)(void *arg, const char *cluster, char project[64], char location[64]);
    int (*node_token)(void *arg, const char *cluster, const char *node, char *token, size_t len);
    void *arg;
};
/* Copy id into p (replacing an earlier one; NULL clears it). */
void provider_set_identity(struct provider *p, const struct provider_identity *id);

/* ---- for provider implementations ---- */
struct provider_ops {
    const char *kind;
    int (*apply)(struct provider *p, const char *id, const json_t *spec,
                 provider_progress_fn progress, void *arg, mtc_error_t *err);
    int (*delete_)(struct provider *p, const char *id, mtc_error_t *err);
    json_t *(*nodes)(struct provider *p, const char *id, const json_t *spec, mtc_error_t *err);
    int (*supervise)(struct provider *p, const char *id, const json_t *spec, provider_event_fn ev,
                     void *arg, mtc_error_t *err);
    /* may be NULL: supervise looks at the nodes within the call */
    int64_t (*supervised_at)(struct provider *p, const char *id);
    char *(*env)(struct provider *p, const char *id, mtc_error_t *err);
    int (*node_action)(struct provider *p, const char *id, const json_t *spec, const char *node,
                       const char *action, mtc_error_t *err);
    json_t *(*node_check)(struct provider *p, const char *id, const json_t *spec, const char *node,
                          mtc_error_t *err);
    json_t *(*hosts)(struct provider *p, const char *id);                   /* may be NULL */
    json_t *(*login)(struct provider *p, const char *id, mtc_error_t *err); /* may be NULL */
    json_t *(*controller)(struct provider *p, const char *id);              /* may be NULL */
    int (*controller_moved)(struct provider *p, const char *id, char *addr, size_t len,
                            mtc_error_t *err); /* may be NULL: the controller is this machine */
    int (*check_storage)(struct provider *p, const char *id, const json_t *spec,
                         mtc_error_t *err); /* may be NULL: one machine sees its own files */
    /* may be NULL: Slurm keeps the nodes' state (scontrol); set: no Slurm */
    int (*node_set)(struct provider *p, const char *id, const char *node, enum slurm_node_op op,
                    const char *reason, mtc_error_t *err);
    int (*power)(struct provider *p, const char *id, const json_t *spec, const char *node, int on,
                 mtc_error_t *err); /* may be NULL: no elastic pools */
    /* may be NULL: no processes to inject faults into (ENOTSUP) */
    int (*node_fault)(struct provider *p, const char *id, const json_t *spec, const char *node,
                      enum provider_fault f, const char *job, unsigned pick,
                      struct provider_fault_hit *hit, mtc_error_t *err);
};

struct provider {
    const struct provider_ops *ops; /* the default kind */
    char *home;
    char *hook_health, *hook_prolog, *hook_epilog; /* NULL: none */
    char *agent;                                   /* mtc-agent path; NULL: none */
    char *power;                                   /* mtc-power path; NULL: none */
    char *spank;                                   /* spank_mtc.so path; NULL: none */
    int hook_health_interval;
    char *listen, *ca_file; /* mtcd's TCP address and CA for remote agents; NULL: none */
    int tls;
    struct provider_identity identity; /* all NULL: none */
};

/* hook with {cluster}, {dir}, {nodedir} and {agent} replaced; NULL when hook
 * is NULL/empty. Caller frees. */
char *provider_hook_expand(const char *hook, const char *id, const char *dir, const char *agent);

/* The cluster directory <home>/clusters/<id> into buf. 0, or -1 + err when
 * the id is invalid or the path too long. */
int provider_cluster_dir(const struct provider *p, const char *id, char *buf, size_t len,
                         mtc_error_t *err);

extern const struct provider_ops provider_local_ops;
extern const struct provider_ops provider_hosts_ops;
extern const struct provider_ops provider_sim_ops;

#endif
