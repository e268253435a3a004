/* hosts.h: internal to the hosts provider — one Slurm cluster across real
 * servers over ssh. hosts.c: apply and delete and the per-host work run in
 * parallel (the controller side is the cluster head's, head.h);
 * hosts_files.c: the cluster's files (the agents' configs, the bundle,
 * slurm.conf) and a node's sizes; hosts_state.c: the cluster's state file
 * and the placement of nodes on hosts (pure); hosts_view.c: supervision and
 * the views (nodes, hosts, env, login); hosts_remote.c: what runs on a host
 * (the mtc-host script, preflight, the bundle of files, parallel runs);
 * hosts_node.c: node repair actions, checks and faults injected on purpose.
 * Not part of the provider interface. */
#ifndef MTC_PROVIDER_HOSTS_H
#define MTC_PROVIDER_HOSTS_H

#include <jansson.h>
#include <stdint.h>

#include "provider/head.h"
#include "provider/ssh.h"

#define HOSTS_MAX 256             /* nodes, and hosts of each role */
#define HOSTS_SLURMD_PORT 6818    /* a host serves one cluster: Slurm's default port */
#define HOSTS_CHECK_MS 2000       /* supervise looks at the hosts at most this often */
#define HOSTS_BOOT_TIMEOUT_S 600  /* hostRemediation.bootTimeoutSeconds default */
#define HOSTS_SUSPEND_TIMEOUT_S 5 /* SuspendTimeout of elastic nodes on hosts */
#define HOSTS_REBOOT_DEFAULT "systemctl reboot"
#define HOSTS_MIN_FREE_MB 1024 /* free disk a host needs under /var/lib/mtc */
#define HOSTS_FAILOVER_S 30    /* controller.failoverSeconds default: SlurmctldTimeout */

/* One Slurm node on one host. */
struct hnode {
    char name[64];      /* <cluster>-<pool>-<i> */
    char pool[32];      /* node pool id */
    int login;          /* a node of the login pool (in no partition) */
    int cloud;          /* elastic (a pool's min..max-1): State=CLOUD, on while
                         * run/power-<node>.on exists (hosts_node.c powers it) */
    char host[256];     /* where it runs: the ssh target and NodeAddr, as the spec lists it */
    char hostname[256]; /* NodeHostname: the host's own name */
    int cpus;
    long memory_mb;
    int gpus;
};

enum hrole { HOST_NODE, HOST_SPARE, HOST_QUARANTINED, HOST_TOUCHED, HOST_BACKUP };

/* A host mtc knows for the cluster, other than through a node. */
struct hhost {
    char host[256];
    char pool[32];
    enum hrole role; /* SPARE, QUARANTINED, TOUCHED (written to; cleaned when unused), or
                      * BACKUP (Slurm's backup controller on a host that runs no node) */
    char reason[200];
    int64_t since_ms;
    int stop_pending; /* quarantined while unreachable: stop its daemons when it answers */
};

/* clusters/<id>/hosts.json */
struct hstate {
    char uid[17];        /* per cluster: /run/mtc/<uid>, /var/lib/mtc/<uid>, /etc/mtc/<uid> */
    int ctld_port;       /* kept for the life of the cluster */
    char ctld_addr[256]; /* where hosts reach slurmctld and mtcd */
    char ssh_user[64];   /* the spec's ssh settings as last applied (for login, delete) */
    int ssh_port;
    char ssh_key[256];
    struct hnode nodes[HOSTS_MAX];
    size_t nnodes;
    struct hhost hosts[2 * HOSTS_MAX];
    size_t nhosts;
    struct head_applied applied; /* what slurmctld last loaded */
    /* Slurm's backup controller (spec controller.backupHost): the host of
     * one of the nodes, "" none; StateSaveLocation both controllers share
     * ("" : <cluster dir>/state, the controller's alone); SlurmctldTimeout */
    char backup_addr[256];
    char backup_hostname[256]; /* its own name (SlurmctldHost), from its preflight */
    char state_dir[1024];
    int failover_s;
};

/* ---- hosts_state.c ---- */

/* The spec's experimentRoot (borrowed), or NULL when it sets none. */
const char *hosts_experiment_root(const json_t *spec);
/* 1 for an elastic node that is powered down: nothing of it runs, mtc leaves
 * its host alone (no preflight, bring-up or supervision). */
int hosts_node_off(const struct head *c, const struct hnode *n);
/* Load clusters/<id>/hosts.json into s (zeroed first). 0, or -1 (ENOENT: never applied). */
int hosts_state_load(const struct head *c, struct hstate *s);
int hosts_state_save(const struct head *c, const struct hstate *s, mtc_error_t *err);
struct hnode *hosts_node_find(struct hstate *s, const char *name);
struct hhost *hosts_host_find(struct hstate *s, const char *host);
/* Record host with role (replacing its earlier record). 0, or -1 when full. */
int hosts_host_set(struct hstate *s, const char *host, const char *pool, enum hrole role,
                   const char *reason);
void hosts_host_forget(struct hstate *s, const char *host);
/* 1 when host runs a node of s. */
int hosts_in_use(const struct hstate *s, const char *host);
/* The first spare of pool that runs no node and is not quarantined, or NULL. */
const char *hosts_free_spare(const struct hstate *s, const char *pool);
/* Place the spec's nodes on hosts into next (sizes left 0), given old (the
 * last state, may be NULL): node i of a pool runs on hosts[i], unless old
 * moved it to one of the pool's spares (it stays there) or hosts[i] is
 * quarantined (the next free spare takes it). Quarantine records of hosts
 * still in the spec are kept, touched hosts carried over, spares listed.
 * Node i is elastic (cloud) when i >= the pool's minNodeCount.
 * 0, or -1 + err naming the host when a quarantined host has no spare left. */
int hosts_plan(const char *id, const json_t *spec, const struct hstate *old, struct hstate *next,
               mtc_error_t *err);
/* Slurm's backup controller of s: its host (the spec's backupHost: the
 * ssh target and SlurmctldHost's address), its own name, and the node it
 * runs (NULL: a host in no pool, where mtc runs munged and slurmctld only). */
struct hbackup {
    const char *host, *hostname;
    const struct hnode *node;
};
/* 1 and b filled when s has a backup controller, else 0. */
int hosts_backup_of(const struct hstate *s, struct hbackup *b);
/* Where the hosts reach slurmctld, for slurmd's --conf-server and
 * SLURM_CONF_SERVER: "ADDR:PORT", then ",BACKUP:PORT" with a backup. */
void hosts_conf_servers(const struct hstate *s, char *buf, size_t len);
/* Node names, comma-separated, in order, an elastic one with "~" (for "which
 * nodes slurmctld knows": it restarts when that changes). */
void hosts_node_names(const struct hstate *s, char *buf, size_t len);

/* ---- hosts_remote.c ---- */

/* The programs mtc copies into every host's /var/lib/mtc/<uid> (a host's
 * copy is replaced only when it differs): the agent, the trainer the recipes
 * run, the health scanner's workload, mtc-serve (endpoint replicas) and mtc
 * (a job's registration of its checkpoint, over TCP), from beside mtcd, into
 * bin/; the container plugin (mtcd's spank_mtc.so) into lib/. Names are
 * paths under /var/lib/mtc/<uid>. */
enum hosts_bin {
    HOSTS_BIN_AGENT,
    HOSTS_BIN_TRAIN,
    HOSTS_BIN_SPANK,
    HOSTS_BIN_SCAN,
    HOSTS_BIN_SERVE,
    HOSTS_BIN_MTC,
    HOSTS_NBIN
};
extern const char *const hosts_bin_names[HOSTS_NBIN];

/* What the preflight learned about a host. */
struct hfacts {
    char hostname[256];
    int cpus;
    long memory_mb;
    int gpus;                 /* /dev/nvidiaN devices */
    int systemd;              /* the host runs systemd */
    char sha[HOSTS_NBIN][65]; /* sha256 of each program's copy there ("" none) */
};

/* The controller's own facts the hosts must match. */
struct hcontroller {
    char arch[64];
    char slurm[64]; /* version, e.g. "22.05.8" */
    char munge[64]; /* "munge-0.5.15" */
    char hostname[256];
};
int hosts_controller_facts(struct hcontroller *ctl, mtc_error_t *err);

/* An ssh connection to host with the state's ssh settings; mtc's known_hosts
 * under <home>/ssh. NULL + err. Free with ssh_free (keeps the master) or
 * ssh_destroy (closes it). */
struct ssh_conn *hosts_ssh(const struct provider *p, const struct hstate *s, const char *host,
                           mtc_error_t *err);

/* Preflight host: (with install) apt-get the packages first; then reachable,
 * Linux, the controller's architecture, Slurm and munge versions, free disk,
 * no munged of the distribution on /run/munge/munge.socket.2, port 6818 free,
 * not another cluster's (its /etc/mtc/owner); then users (the spec's,
 * cluster_users_args; NULL or "": none) checked and made where missing.
 * 0 and facts, or -1 + err ("host H: ..."). */
int hosts_preflight(struct ssh_conn *ssh, const struct hstate *s, const struct hcontroller *ctl,
                    int install, const char *users, struct hfacts *facts, mtc_error_t *err);

/* The files every host of the cluster gets, under <dir>/image (the munge key
 * linked, the scripts, the mtc-host script, the agent binary, the CA). */
struct hbundle {
    char image[PLEN];
    char sha[HOSTS_NBIN][65]; /* of each program copied ("" when not copied) */
    char owner[512];          /* /etc/mtc/owner's line for this cluster */
};
/* The programs of b whose copy on the host (f) differs: a bit (1 << enum
 * hosts_bin) each. */
unsigned hosts_bins_stale(const struct hbundle *b, const struct hfacts *f);
/* Bring node n up on its host: claim the host (/etc/mtc/owner), unpack the
 * bundle and the node's own files (<dir>/nodes/<node>/image), start munged,
 * the default-socket link, slurmd --conf-server and the agent (kept when
 * running with the same config). send: the programs to copy too
 * (hosts_bins_stale). n NULL: the backup controller's host in no pool —
 * the bundle alone, then munged and slurmctld (mtc-host ctld).
 * gpus_fake: emulated GPUs to provide (-1: real hardware). 0 or -1 + err. */
int hosts_remote_up(struct ssh_conn *ssh, const struct head *c, const struct hstate *s,
                    const struct hbundle *b, const struct hnode *n, unsigned send, int gpus_fake,
                    mtc_error_t *err);
/* Run one mtc-host operation on host ("check", "restart", "up", "stop",
 * "clean", "mark", "booted", "fault") for node (may be ""); stdout into out (may be
 * NULL, caller frees). Returns the remote status or -1 + err like ssh_run. */
int hosts_remote_op(struct ssh_conn *ssh, const struct hstate *s, const char *op, const char *node,
                    int gpus_fake, char **out, int timeout_ms, mtc_error_t *err);
/* The same with args, words the op takes after GPUS ("fault": KIND JOB
 * PICK), checked by the caller (they reach a command line); NULL: none. */
int hosts_remote_op_args(struct ssh_conn *ssh, const struct hstate *s, const char *op,
                         const char *node, int gpus_fake, const char *args, char **out,
                         int timeout_ms, mtc_error_t *err);

/* The mtc-host script's text (static). */
const char *hosts_script(void);

/* Run fn(arg, i, &errs[i]) for i in [0, n) on up to 16 threads at once.
 * Returns the index of the first failure (by index), or -1 when all succeed. */
typedef mtc_task_fn hosts_task_fn;
long hosts_parallel(size_t n, hosts_task_fn fn, void *arg, mtc_error_t *errs);

/* The default controller address: this host's source address on the route to host. */
int hosts_route_source(const char *host, char *addr, size_t len, mtc_error_t *err);
/* sha256 of a buffer as hex into out[65]. */
void hosts_sha256(const void *data, size_t len, char out[65]);

/* ---- hosts_files.c ---- */
/* mtcd's API as the hosts reach it: http(s)://<controller address>:<mtcd's
 * TCP port> (the agents report there; jobs register their checkpoints there).
 * -1 + err when mtcd has no TCP listener the hosts can reach. */
int hosts_api_url(const struct provider *p, const struct hstate *s, char *url, size_t len,
                  mtc_error_t *err);
/* Write the node's own files (agent.json, agent.env, token) under
 * <dir>/nodes/<node>/image; fresh: a new machine (new token). 0/-1 + err. */
int hosts_node_files(const struct provider *p, const struct head *c, const struct hstate *s,
                     const json_t *spec, const struct hnode *n, int fresh, mtc_error_t *err);
/* Emulated GPUs of node n's pool (-1: real hardware). */
int hosts_fake_gpus(const json_t *spec, const struct hnode *n);
/* Render and write slurm.conf + gres.conf for s (checked by Slurm first)
 * and, with the container plugin, its plugstack.conf: the hosts' copy in the
 * image, and /etc/mtc/<uid>/etc/plugstack.conf here (a link to the
 * controller's copy) for srun and sbatch run here; sha gets the sha256 of
 * what slurmd reads. 0/-1 + err. */
int hosts_write_conf(const struct provider *p, const struct head *c, const struct hstate *s,
                     const json_t *spec, char sha[65], mtc_error_t *err);
/* The bundle (every host's files) for the cluster: image dir filled. 0/-1 + err. */
int hosts_bundle(const struct provider *p, const struct head *c, const struct hstate *s,
                 const json_t *spec, struct hbundle *b, mtc_error_t *err);
/* Fill node n's sizes and hostname from its host's facts, checking the pool's
 * machine type against them ("host": what the host has). 0/-1 + err naming the host. */
int hosts_size_node(const json_t *spec, struct hnode *n, const struct hfacts *f, mtc_error_t *err);
/* Wait until slurmctld sees every node of s registered (powered-down
 * elastic ones aside). 0/-1 + err. */
int hosts_wait_registered(const struct head *c, const struct hstate *s, mtc_error_t *err);
/* The head of cluster id, with the controller's munge socket /run/mtc/<uid>/... once s is known. */
void hosts_lc_socket(struct head *c, const struct hstate *s);

/* ---- hosts_storage.c ---- */

/* The marker of the cluster's experiment root: its path there
 * (<root>/.mtc/<id>-<uid>.marker) and content (32 hex, made once and kept in
 * clusters/<id>/storage.marker). path "" when the spec has no experimentRoot.
 * 0/-1 + err. */
int hosts_storage_marker(const struct head *c, const struct hstate *s, const json_t *spec,
                         char path[PLEN], char content[33], mtc_error_t *err);
/* Write node n's mounts file (TYPE SOURCE PATH OPTIONS a line, for mtc-host)
 * into its image. 0/-1 + err. */
int hosts_node_mounts(const struct head *c, const struct hstate *s, const json_t *spec,
                      const struct hnode *n, mtc_error_t *err);
/* Write the marker into the experiment root here (the agents compare it from
 * their first pass: before the hosts start). 0, or -1 + err when the root is
 * missing here or not writable. */
int hosts_storage_write(const struct head *c, const struct hstate *s, const json_t *spec,
                        mtc_error_t *err);
/* Write the marker into the experiment root here and check, on every node's
 * host in parallel, that it reads the same content at the same path. 0 (also
 * when there is no experimentRoot), or -1 + err naming the hosts that do not
 * see it. */
int hosts_storage_verify(struct provider *p, const struct head *c, const struct hstate *s,
                         const json_t *spec, mtc_error_t *err);
/* Remove the marker verify wrote (the cluster is going away). */
void hosts_storage_forget(const struct head *c);
/* provider_check_storage for a cluster on hosts. */
int hosts_check_storage(struct provider *p, const char *id, const json_t *spec, mtc_error_t *err);

/* slurmctld's StateSaveLocation (the state's stateSaveLocation, else
 * <cluster dir>/state) into path. */
void hosts_state_dir(const struct head *c, const struct hstate *s, char path[PLEN]);
#define HOSTS_STATE_MARKER "mtc-cluster" /* "<id> <uid> <nonce>" in the state directory */
/* The state directory of a state_dir set: made here (0700), refused when
 * it holds another cluster's state or files mtc did not put there, and a
 * fresh marker with a new nonce (33 bytes; "" when state_dir is unset)
 * written into it. 0/-1 + err. */
int hosts_state_dir_prepare(const struct head *c, const struct hstate *s, char nonce[33],
                            mtc_error_t *err);
/* The backup controller's host reads the marker prepare wrote (nonce) in
 * the state directory: 0 (also without a backup), or -1 + err naming the
 * host that does not see it. */
int hosts_state_dir_verify(struct provider *p, const struct head *c, const struct hstate *s,
                           const char *nonce, mtc_error_t *err);
/* The cluster is going away: what it kept in a state_dir of its own removed. */
void hosts_state_dir_forget(const struct head *c, const struct hstate *s);

/* ---- hosts_view.c ---- */

/* Wait until no pass over a cluster's hosts is at work (before the provider
 * goes away). */
void hosts_checks_wait(void);
/* Drop what the passes over the cluster in dir found and did not report yet
 * (it is being deleted). */
void hosts_checks_forget(const char *dir);
/* provider_supervise: the controller's daemons now; the hosts (at most every
 * HOSTS_CHECK_MS) by a pass in a thread of its own, whose findings are
 * reported (ev) by the next call. */
int hosts_supervise(struct provider *p, const char *id, const json_t *spec, provider_event_fn ev,
                    void *arg, mtc_error_t *err);
/* provider_supervised_at: when the last pass over the cluster's hosts whose
 * findings a supervise call has reported began (0: none yet). */
int64_t hosts_supervised_at(struct provider *p, const char *id);
json_t *hosts_nodes(struct provider *p, const char *id, const json_t *spec, mtc_error_t *err);
json_t *hosts_hosts(struct provider *p, const char *id);
char *hosts_env(struct provider *p, const char *id, mtc_error_t *err);
json_t *hosts_login(struct provider *p, const char *id, mtc_error_t *err);
/* provider_controller_moved for a cluster on hosts. */
int hosts_controller_moved(struct provider *p, const char *id, char *addr, size_t len,
                           mtc_error_t *err);
/* provider_controller: the controllers of a cluster with a backup, from the
 * state and supervision's last look (no remote call); NULL without one. */
json_t *hosts_controller(struct provider *p, const char *id);

/* ---- hosts_node.c ---- */

int hosts_node_action(struct provider *p, const char *id, const json_t *spec, const char *node,
                      const char *action, mtc_error_t *err);
json_t *hosts_node_check(struct provider *p, const char *id, const json_t *spec, const char *node,
                         mtc_error_t *err);
/* provider_node_fault for a cluster on hosts: mtc-host's "fault" on the node's host. */
int hosts_node_fault(struct provider *p, const char *id, const json_t *spec, const char *node,
                     enum provider_fault f, const char *job, unsigned pick,
                     struct provider_fault_hit *hit, mtc_error_t *err);
/* Power elastic node n on (hostRemediation.powerOnCommand if any, SSH back
 * within bootTimeoutSeconds, preflight, its files and daemons up: slurmd -b,
 * its start the host's boot) or off (everything of the cluster removed from
 * the host, as a delete's clean, then powerOffCommand if any), marking it on
 * or off. The caller holds the cluster's or the node's lock. 0/-1 + err. */
int hosts_power_node(struct provider *p, struct head *c, struct hstate *s, const json_t *spec,
                     struct hnode *n, int on, mtc_error_t *err);
/* The first half of a power-on: powerOnCommand (if any), then SSH back
 * (and booted, when a power-off left the boot mark) within
 * bootTimeoutSeconds. 0/-1 + err. */
int hosts_power_wake(struct provider *p, struct head *c, struct hstate *s, const json_t *spec,
                     struct hnode *n, mtc_error_t *err);
/* provider_power for a cluster on hosts. */
int hosts_power(struct provider *p, const char *id, const json_t *spec, const char *node, int on,
                mtc_error_t *err);

#endif
