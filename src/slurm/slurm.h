/* slurm: everything mtc knows about Slurm itself — rendering slurm.conf and
 * gres.conf from a normalized cluster spec plus a node layout, starting the
 * daemons, and thin wrappers over scontrol/sinfo (always with SLURM_CONF). */
#ifndef MTC_SLURM_H
#define MTC_SLURM_H

#include <jansson.h>
#include <sys/types.h>

#include "common/common.h"
#include "schema/schema.h"

/* One compute node (one slurmd). */
struct slurm_node {
    char name[64]; /* <cluster>-<pool>-<index>, also the `slurmd -N` name */
    char pool[32]; /* node pool id */
    int port;      /* its slurmd Port= */
    int cpus;
    long memory_mb;     /* RealMemory= */
    char gres_type[32]; /* "" when the node has no GPUs */
    int gpus;
    /* on hosts (slurm_layout.uid set): NodeHostname= and NodeAddr=; the
     * local layout uses the layout's hostname and 127.0.0.1 */
    char hostname[256];
    char addr[256];
    /* 1: an elastic node (a pool's min..max-1): State=CLOUD, powered down
     * until Slurm's power saving resumes it through slurm_layout.power */
    int cloud;
};

/* Power saving defaults (seconds) when slurm_power leaves them 0. */
#define SLURM_RESUME_TIMEOUT 300
#define SLURM_SUSPEND_TIMEOUT 60

/* Accounting through slurmdbd (orchestratorSpec.slurmSpec.accounting). */
struct slurm_accounting {
    int port;            /* slurmdbd's DbdPort; 0: no accounting */
    const char *host;    /* where slurmctld and the clients reach slurmdbd */
    const char *enforce; /* AccountingStorageEnforce (NULL: none) */
};

/* Slurm power saving for a layout with cloud nodes (docs/clusters.md). */
struct slurm_power {
    const char *suspend_program; /* SuspendProgram=: stops the named nodes */
    const char *resume_program;  /* ResumeProgram=: starts them */
    const char *resume_fail_program; /* ResumeFailProgram= (NULL: none) */
    int suspend_time;   /* SuspendTime= seconds idle before suspend; -1 never */
    int resume_timeout; /* ResumeTimeout= seconds; 0: mtc's default */
    int suspend_timeout; /* SuspendTimeout= seconds; 0: mtc's default */
};

/* Timeouts and fan-out sized to the slurmds sharing one host (sizing.c,
 * docs/clusters.md). Zero fields render Slurm's usual values. */
#define SLURM_MSG_TIMEOUT 10       /* MessageTimeout for a host of few nodes */
#define SLURM_MSG_TIMEOUT_MAX 100  /* Slurm warns above it */
#define SLURM_SLURMD_TIMEOUT 60    /* SlurmdTimeout */
#define SLURM_TREE_WIDTH_MAX 65533 /* TreeWidth's maximum */
struct slurm_sizing {
    int message_timeout; /* MessageTimeout= seconds; 0: 10 */
    int slurmd_timeout;  /* SlurmdTimeout= seconds; 0: 60 */
    int tree_width;      /* TreeWidth=; 0: not set (Slurm's default, 50) */
    int health_cycle;    /* 1: HealthCheckNodeState gets CYCLE */
};
/* The sizing for nodes_on_host slurmds on a host of host_cores CPUs:
 * MessageTimeout = 2 s x nodes per core (10..100), SlurmdTimeout =
 * max(60, 2 x MessageTimeout), TreeWidth = nodes (flat; none for one node),
 * health checks cycled when more than 4 nodes a core. Pure. */
void slurm_sizing_for(int nodes_on_host, int host_cores, struct slurm_sizing *s);

/* Where and how a cluster's daemons live. All paths absolute. */
struct slurm_layout {
    const char *cluster;  /* ClusterName (the cluster id) */
    const char *dir;      /* the cluster directory: slurm.conf, state/, spool/, log/, run/ ... */
    const char *hostname; /* this host's name for SlurmctldHost / NodeHostname */
    int ctld_port;        /* SlurmctldPort */
    int slurmd_port;      /* SlurmdPort (every node also has its own Port=) */
    const struct slurm_node *nodes;
    size_t nnodes;
    int fake_gpus; /* 1: GRES File= points at <dir>/nodes/<node>/hw/nvidiaN; 0: /dev/nvidiaN */
    int prolog;    /* 1: Prolog=<dir>/etc/prolog.sh */
    int epilog;    /* 1: Epilog=<dir>/etc/epilog.sh */
    int health_interval; /* >0: HealthCheckProgram=<dir>/etc/health.sh every N s */
    /* A cluster on hosts: slurmd runs on each node's own host in configless
     * mode (fetching this slurm.conf from slurmctld), every path slurmd reads
     * resolves on the host, under /run/mtc/<uid>, /var/lib/mtc/<uid> and
     * /etc/mtc/<uid> (scripts in /etc/mtc/<uid>/etc). NULL: the local layout. */
    const char *uid;
    const char *ctld_addr; /* with uid: the address hosts reach slurmctld at */
    /* With uid: Slurm's backup controller (a second SlurmctldHost) on the
     * host named backup_host at backup_addr; NULL: none. Both controllers
     * then keep their pid file and log under the per-host directories and
     * share state_dir (which must be storage both see). */
    const char *backup_host, *backup_addr;
    const char *state_dir; /* StateSaveLocation; NULL: <dir>/state */
    int ctld_timeout;      /* SlurmctldTimeout= seconds; 0: 30 */
    /* The container plugin (spank_mtc.so) as slurmd, slurmstepd and srun find
     * it: PlugStackConfig=<etc>/plugstack.conf loads it. NULL: no plugin. */
    const char *spank;
    /* Registry images (docs/containers.md, "Images from a registry"): the
     * cache directory every node of the cluster pulls into (NULL: the
     * cluster directory's images/ here, each host's own on hosts) and its
     * limit in GB (spec containers.cacheMaxGb; 0: 200). */
    const char *image_cache;
    double image_cache_gb;
    /* Used when a node has .cloud set: the programs must be set then. */
    struct slurm_power power;
    /* timeouts and fan-out (all zero: Slurm's usual values) */
    struct slurm_sizing sizing;
    struct slurm_accounting acct; /* port 0: no accounting */
};
/* The directories of a cluster on hosts, on every host (printf formats of the uid). */
#define SLURM_HOST_RUN "/run/mtc/%s"     /* runtime: sockets, pid files, TmpFS */
#define SLURM_HOST_VAR "/var/lib/mtc/%s" /* state: spool, logs, binaries */
#define SLURM_HOST_ETC "/etc/mtc/%s"     /* configuration: munge key, agent, scripts */

/* slurm.conf text for a normalized spec (partitions, default partition,
 * partitions[].config and nodeSets[].config passed through, scheduling keys)
 * and the layout. Caller frees. NULL + err on error. */
char *slurm_conf_render(const json_t *spec, const struct slurm_layout *l, mtc_error_t *err);
/* gres.conf text: one line per GPU node. Caller frees. NULL + err on error. */
char *slurm_gres_render(const struct slurm_layout *l, mtc_error_t *err);
/* plugstack.conf text loading l->spank with each node's container runtime
 * directory, its emulated GPU files, NVIDIA driver tree (hw/driver) and
 * InfiniBand tree (hw/ib), and PMIx's directory (bound into containers).
 * Caller frees; NULL + err (also when l->spank is NULL). */
char *slurm_plugstack_render(const struct slurm_layout *l, mtc_error_t *err);

/* Write <dir>/etc/<kind>.sh (kind "prolog" or "epilog"): runs hook (a shell
 * command, may be NULL) and then each script of the JSON string array scripts
 * (saved as <dir>/etc/<kind>.d/NN.sh) in order, failing on the first failure.
 * Returns 1 when written, 0 when there is nothing to run (file removed), -1 + err. */
int slurm_scripts_write(const char *dir, const char *kind, const char *hook, const json_t *scripts,
                        mtc_error_t *err);
/* The same, written under dir but naming run_dir (where slurmd will find
 * them: a host's /etc/mtc/<uid>) in the wrapper. */
int slurm_scripts_write_at(const char *dir, const char *run_dir, const char *kind, const char *hook,
                           const json_t *scripts, mtc_error_t *err);
/* Write <dir>/etc/health.sh running command (NULL/"": remove it). 1/0/-1 as above. */
int slurm_health_write(const char *dir, const char *command, mtc_error_t *err);

/* Run a Slurm client command with SLURM_CONF=conf (conf NULL or "": the
 * caller's environment decides); returns like mtc_run.
 * out (optional) receives stdout+stderr, caller frees. */
int slurm_cmd(const char *conf, char *const argv[], char **out, int timeout_ms);
/* slurm_cmd with SLURM_CMD_TIMEOUT_MS: 0, or -1 (EIO) with err "<what>: <the
 * first line of its output>". out (optional): the output on success. */
#define SLURM_CMD_TIMEOUT_MS 30000
int slurm_cmd_ok(const char *conf, char *const argv[], char **out, const char *what,
                 mtc_error_t *err);
/* slurm_cmd_ok, its output kept (cache.c): the same command for the same
 * conf answered within max_age_ms, while conf's mtime and size are what they
 * were, is answered from memory. For the answers that change only with the
 * cluster's configuration (partitions, srun's options). A failure is not
 * kept. *out: caller frees. */
int slurm_cmd_cached(const char *conf, char *const argv[], int max_age_ms, char **out,
                     const char *what, mtc_error_t *err);
/* The same with extra "K=V" strings (up to 32, NULL-terminated) in its environment. */
int slurm_cmd_env(const char *conf, char *const extra[], char *const argv[], char **out,
                  int timeout_ms);

/* Start daemons in the foreground of a detached session (mtc_spawn); stdio
 * appended to logpath. Return the pid, or -1 with errno. */
pid_t slurm_ctld_start(const char *conf, const char *logpath);
/* slurmd gets MTC_NODE=<node> in its environment, which its slurmstepds inherit. */
pid_t slurm_slurmd_start(const char *conf, const char *node, const char *logpath);
/* slurm_slurmd_start for a node that powers up (power saving's resume):
 * `slurmd -b`, started in the second after the call, reports its own start
 * as the node's boot, since slurmctld accepts a resumed node only when it
 * booted at or after the resume request (and emulated nodes share this
 * host's uptime). */
pid_t slurm_slurmd_boot(const char *conf, const char *node, const char *logpath);

/* `scontrol ping` of conf's controllers: names as slurm.conf's
 * SlurmctldHost gives them and whether each answers. */
struct slurm_ping {
    char primary[64], backup[64]; /* backup "": none configured */
    int primary_up, backup_up;
};
/* 0, or -1 (EIO) when scontrol printed no controller's line. */
int slurm_ping(const char *conf, struct slurm_ping *p);
/* 1 when the primary slurmctld (the first SlurmctldHost) answers `scontrol ping`. */
int slurm_ctld_up(const char *conf);
/* Wait up to ms for slurmctld to answer. 0 or -1 (ETIMEDOUT). */
int slurm_ctld_wait(const char *conf, int ms);
/* `scontrol reconfigure`. 0 or -1 + err. */
int slurm_reconfigure(const char *conf, mtc_error_t *err);
/* Parse slurm.conf text the way every Slurm command does before it goes live
 * (written to check_path, read by `sinfo -V`): 0, or -1 with Slurm's own
 * complaint in err ("slurm.conf: Bad value \"x\" for MaxTime"). */
int slurm_conf_check(const char *text, const char *check_path, mtc_error_t *err);

/* Node states as sinfo's compact state ("idle", "alloc", "down*", "drain"...):
 * a JSON object node name -> state, including nodes in no partition. Caller owns.
 * NULL + err when slurmctld does not answer. */
json_t *slurm_node_states(const char *conf, mtc_error_t *err);
/* One field of `scontrol show node NODE -o` (e.g. "SlurmdStartTime", "State")
 * into buf; values end at a blank. 0, or -1 (EIO: no answer, ENOENT: no such key). */
int slurm_node_get(const char *conf, const char *node, const char *key, char *buf, size_t len);
/* 1 when a compact state means the node's slurmd has registered and answers
 * (not down, unknown, invalid or not responding). */
int slurm_state_registered(const char *state);

/* ---- node and job operations (ops.c). conf: the cluster's slurm.conf, or
 * NULL for whatever the caller's environment names ($SLURM_CONF, configless).
 * 0/-1 with err naming the command and Slurm's first line of output. ---- */
enum slurm_node_op { SLURM_NODE_DRAIN, SLURM_NODE_RESUME, SLURM_NODE_DOWN };
/* `scontrol update nodename=NODE state=…` with reason (drain, down; one line). */
int slurm_node_set(const char *conf, const char *node, enum slurm_node_op op, const char *reason,
                   mtc_error_t *err);
/* Ids of the jobs on node / of every job, as a JSON array of strings. Caller owns. */
json_t *slurm_node_jobs(const char *conf, const char *node, mtc_error_t *err);
json_t *slurm_jobs(const char *conf, mtc_error_t *err);
/* A job's state ("RUNNING", "PENDING", "COMPLETED"…) into state; -1/ENOENT unknown. */
int slurm_job_state(const char *conf, const char *job, char *state, size_t len);
/* How many times Slurm requeued a job it still knows (Restarts=), or -1. */
int slurm_job_restarts(const char *conf, const char *job);
/* The state, requeue count, pending reason and account of every job
 * slurmctld still knows (job NULL: one `scontrol show job`), or of job:
 * {"ID": {"state": "PENDING", "restarts": 1, "reason": "BeginTime",
 * "account": "team"}, ...} (account "" without accounting); {} when it
 * knows none of them. NULL + err when slurmctld does
 * not answer. Caller owns. */
json_t *slurm_job_states(const char *conf, const char *job, mtc_error_t *err);
/* The same from `scontrol show job -o`'s text (lines it cannot read are passed over). */
json_t *slurm_job_states_parse(const char *text);
int slurm_job_requeue(const char *conf, const char *job, mtc_error_t *err);
/* StartTime=now+1: a requeued job may start without Slurm's hold (about two
 * minutes: its credential's lifetime) — but not within the second its old
 * credential was revoked, which a slurmd refuses ("Job credential revoked":
 * the check is ctime <= revoked, in whole seconds). Call it once the job is
 * PENDING (not COMPLETING: every node has killed the old one). */
int slurm_job_release(const char *conf, const char *job, mtc_error_t *err);
int slurm_job_cancel(const char *conf, const char *job, mtc_error_t *err);
/* Cancel every job and wait up to wait_ms for the queue to empty. 0, or -1 (ETIMEDOUT). */
int slurm_cancel_all(const char *conf, int wait_ms);
/* The hostnames of a running job's nodes, in order (JSON array). -1/ENOENT not running. */
json_t *slurm_job_nodes(const char *conf, const char *job, mtc_error_t *err);
/* {"name": {"nodes": N, "default": bool}} from `scontrol show partition -o`.
 * _cached: slurm_cmd_cached's answer when it is younger than max_age_ms and
 * slurm.conf has not changed since (0: ask now, and keep the answer). */
json_t *slurm_partitions(const char *conf, mtc_error_t *err);
json_t *slurm_partitions_cached(const char *conf, int max_age_ms, mtc_error_t *err);
/* sbatch --parsable script: the job id into job. out (optional) gets sbatch's
 * output (its complaint on failure), caller frees. 0, or -1 (EIO). */
int slurm_submit(const char *conf, const char *script, char job[32], char **out);
/* A job for a request: sbatch (whose environment the job inherits) runs
 * with a clean one — the login environment of its user (mtc_login_env: HOME,
 * USER, LOGNAME, SHELL, PATH), SLURM_CONF and env ("K=V", NULL-terminated:
 * secrets reach the job without being written down), nothing of this
 * process's. as: sbatch runs as that user (setpriv: its uid, gid and
 * groups), so the job is that user's; NULL: as this process (root's login
 * environment for mtcd). slurm_submit keeps the caller's environment (the
 * CLI's user, mtcd's own scan and replica jobs). */
int slurm_submit_env(const char *conf, char *const env[], const struct mtc_user *as,
                     const char *script, char job[32], char **out);

/* A Slurm host list ("c1-gpu-[1-3,5]", "a-1,b-[01-02]") as a JSON array of
 * names, in order. Caller owns. NULL + err (EINVAL) for a malformed list. */
json_t *slurm_hostlist_expand(const char *list, mtc_error_t *err);

/* An elastic node's power state, from sinfo's compact state suffix ("idle~"
 * POWERED_DOWN, "alloc#" POWERING_UP, "idle%" POWERING_DOWN; none: ON). The
 * names are the API's nodeState values (ON is "RUNNING"). */
enum slurm_power_state {
    SLURM_POWER_ON,
    SLURM_POWERED_DOWN,
    SLURM_POWERING_UP,
    SLURM_POWERING_DOWN
};
extern const struct schema_enum slurm_power_state_enum;
enum slurm_power_state slurm_power_state_of(const char *state);

/* This host as slurmd sees it (`slurmd -C`): CPUs and RealMemory. 0/-1. */
int slurm_host_resources(int *cpus, long *memory_mb, mtc_error_t *err);

/* ---- accounts and users in the accounting database (acct.c) ---- */

#define SLURM_ACCT_UNSET (-2) /* a limit not given (leave it); -1 clears one */
struct slurm_account {
    const char *name, *description, *parent; /* NULL: not given (parent: root) */
    int fairshare;                           /* > 0: the fair-share weight */
    int max_nodes, max_gpus;                 /* GrpTRES node= and gres/gpu= */
    int max_running_jobs;                    /* GrpJobs */
    const char *max_wall;                    /* MaxWall (Slurm's time), NULL: not given */
    const char *qos;                         /* allowed QoS, comma list; NULL: not given */
};
/* [a-z][a-z0-9_-]{0,31}: an account's, a user's or a QoS's name mtc passes to sacctmgr. */
int slurm_acct_name_valid(const char *s);
int slurm_account_add(const char *conf, const char *cluster, const struct slurm_account *a,
                      mtc_error_t *err);
/* The settings a gives (and parent) changed. */
int slurm_account_modify(const char *conf, const char *cluster, const struct slurm_account *a,
                         mtc_error_t *err);
int slurm_account_delete(const char *conf, const char *cluster, const char *name,
                         mtc_error_t *err);
/* user added to (add 1) or removed from account. */
int slurm_account_user(const char *conf, const char *cluster, const char *account,
                       const char *user, int add, mtc_error_t *err);
/* The cluster's accounts but root: [{name, description, parent, fairshare,
 * limits {maxNodes, maxGpus, maxRunningJobs, maxWall}, qos [...], users
 * [...]}]. NULL + err. */
json_t *slurm_accounts(const char *conf, const char *cluster, mtc_error_t *err);
/* The ids of the account's jobs that run, wait or are suspended. NULL + err. */
json_t *slurm_account_jobs(const char *conf, const char *account, mtc_error_t *err);

/* A quality of service: priority, limits over all its jobs, which QoS its
 * jobs preempt (PreemptType=preempt/qos, PreemptMode=REQUEUE). */
struct slurm_qos {
    const char *name;
    int priority;
    int max_nodes, max_gpus; /* GrpTRES; -1: none */
    const char *max_wall;    /* NULL: none */
    const char *preempt;     /* comma list of QoS names; NULL: none */
    int grace_s;             /* GraceTime: seconds between TERM and KILL at preemption */
};
int slurm_qos_add(const char *conf, const struct slurm_qos *q, mtc_error_t *err);
int slurm_qos_delete(const char *conf, const char *name, mtc_error_t *err);
/* [{name, priority, limits {maxNodes, maxGpus, maxWall}, preempt [...]}]. NULL + err. */
json_t *slurm_qos_list(const char *conf, mtc_error_t *err);

/* ---- the queue (queue.c) ---- */

/* Every job slurmctld has running, waiting, suspended or completing (one
 * `squeue -a`), in squeue's order: [{jobId, name, user, account, qos,
 * partition, state ("RUNNING", "PENDING"...), nodeCount, nodes (the node
 * list; "" while waiting), reason (why it waits: "Priority", "Resources",
 * "AssocGrpNodeLimit"...; "" when none), time (its run time, Slurm's
 * [D-]H:MM:SS)}]; "" where Slurm has no value (account without
 * accounting). Caller owns. NULL + err when slurmctld does not answer. */
json_t *slurm_queue(const char *conf, mtc_error_t *err);
/* The same from squeue's output in queue.c's format (lines that are not a
 * job's are passed over). Never NULL. Pure. */
json_t *slurm_queue_parse(const char *text);
/* A preemption of a job (preempt.c): slurmctld's log line that requeued (or
 * killed, or gave a grace time to) it "to reclaim resources for" another. */
struct slurm_preemption {
    double time;  /* epoch s of the line (slurmctld logs local time) */
    char by[32];  /* the preempting job's id ("": not known) */
    char qos[64]; /* its QoS ("" when Slurm no longer says) */
};
/* The preemptions of job, oldest first, at most max, from the log slurm.conf
 * (conf; NULL: $SLURM_CONF) names as SlurmctldLogFile, each with the
 * preemptor's QoS; where that log cannot be read (it lives on the
 * controller's host, readable by root), the attempts sacct records as
 * PREEMPTED, at their end, by "" (not known). The count, or -1 + err
 * (neither answered). */
int slurm_job_preemptions(const char *conf, const char *job, struct slurm_preemption *out, int max,
                          mtc_error_t *err);
/* The same from a log's lines (qos left ""): the count found, which may be
 * more than max (only max are filled). */
int slurm_preemptions_parse(FILE *log, const char *job, struct slurm_preemption *out, int max);
/* The same from `sacct -n -X -P -D -o state,end`'s lines (by and qos ""). */
int slurm_preempted_parse(const char *text, struct slurm_preemption *out, int max);

/* Node-hours and GPU-hours of the jobs since (sacct -S: 2026-12-01,
 * now-7days ...) per account and user, from the accounting database:
 * [{account, user, jobs, nodeHours, gpuHours}]. NULL + err. */
json_t *slurm_usage(const char *conf, const char *since, mtc_error_t *err);

#endif
