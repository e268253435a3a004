/* cluster: the cluster spec (a ModelDevelopmentCluster JSON object) — parse,
 * validate with one-line errors naming the field, normalize to canonical
 * camelCase with defaults — and the machine-type catalog (data/machine-types.json). */
#ifndef MTC_CLUSTER_H
#define MTC_CLUSTER_H

#include <jansson.h>

#include "common/common.h"
#include "schema/schema.h"

/* Validate a cluster spec (snake_case or camelCase keys) and return its
 * canonical form: camelCase keys in a fixed order, defaults filled in,
 * output-only fields (name, createTime, updateTime, clusterStatus,
 * clusterEvents) dropped. NULL + errno=EINVAL and a one-line err
 * ("nodePools[1].id: duplicate node pool id \"gpu\"") on error.
 * The caller owns the result (json_decref). */
json_t *cluster_spec_normalize(const json_t *in, mtc_error_t *err);

/* Whether new_ sets or changes a field that makes mtc or Slurm act as root —
 * run a program (scripts, hook commands, a library the agent loads, apt-get),
 * connect to a machine (nodePools[].hosts and spareHosts, ssh, controller) or
 * read a root-owned file as a credential (ssh, accounting.database) — compared
 * with old (NULL for a create; a field left as it was is no change). 1 and
 * the paths of all such fields, ", " between, into field[len], else 0. Both
 * specs normalized. Only an admin may make such a change. */
int cluster_spec_privileged_change(const json_t *old, const json_t *new_, char *field, size_t len);

/* The resource's output-only fields (name, createTime, …; NULL-terminated):
 * accepted in a request (a GET body sent back) and dropped. */
extern const char *const cluster_output_only[];

/* The spec's field table (static; not owned by callers). Fields that make mtc
 * or Slurm act as root (run, connect, read a credential) carry SCHEMA_ROOT_EXEC:
 * schema_walk(&cluster_spec_schema, SCHEMA_ROOT_EXEC, fn, arg) lists their
 * paths ("orchestratorSpec.slurmSpec.prologBashScripts",
 * "nodePools[].startupScript", "healthPolicy.nvmlLibrary"). */
extern const struct schema cluster_spec_schema;

/* A cluster's state (clusterStatus.state; the store keeps its name). */
enum cluster_state {
    CLUSTER_STATE_PROVISIONING,
    CLUSTER_STATE_RUNNING,
    CLUSTER_STATE_UPDATING,
    CLUSTER_STATE_STOPPING,
    CLUSTER_STATE_ERROR,
};
extern const struct schema_enum cluster_state_enum;

/* The spec's enums. JSON carries the names (canonical: the short ones, e.g.
 * "SPOT"); input may also use the cloud API's proto names where it has them
 * ("PROVISIONING_MODEL_SPOT", "RESERVATION_AFFINITY_TYPE_SPECIFIC_RESERVATION"). */
enum cluster_provisioning_model {
    CLUSTER_PROVISIONING_ON_DEMAND,
    CLUSTER_PROVISIONING_RESERVATION,
    CLUSTER_PROVISIONING_SPOT,
    CLUSTER_PROVISIONING_FLEX_START,
};
extern const struct schema_enum cluster_provisioning_model_enum;
enum cluster_reservation_affinity {
    CLUSTER_NO_RESERVATION,
    CLUSTER_ANY_RESERVATION,
    CLUSTER_SPECIFIC_RESERVATION,
};
extern const struct schema_enum cluster_reservation_affinity_enum;
enum cluster_boot_disk_type {
    CLUSTER_PD_STANDARD,
    CLUSTER_PD_BALANCED,
    CLUSTER_PD_SSD,
    CLUSTER_PD_EXTREME,
    CLUSTER_HYPERDISK_BALANCED,
};
extern const struct schema_enum cluster_boot_disk_type_enum;
/* slurmSpec.scheduling's plugin names, as slurm.conf writes them */
enum cluster_priority_type { CLUSTER_PRIORITY_BASIC, CLUSTER_PRIORITY_MULTIFACTOR };
extern const struct schema_enum cluster_priority_type_enum;
enum cluster_preempt_type {
    CLUSTER_PREEMPT_NONE,
    CLUSTER_PREEMPT_PARTITION_PRIO,
    CLUSTER_PREEMPT_QOS,
};
extern const struct schema_enum cluster_preempt_type_enum;

/* ---- clusters on hosts (hosts.c) ---- */

/* 1 when host is an IPv4 or IPv6 address or a DNS name (labels of
 * [A-Za-z0-9-]), safe on a command line and in slurm.conf; else 0. */
int cluster_host_valid(const char *host);
/* 1 when the spec's node pools list hosts (the cluster runs on real hosts
 * through the hosts provider), else 0. Normalized or not. */
int cluster_spec_on_hosts(const json_t *spec);
/* 1 when spec has a "sim" section: the cluster is simulated (provider "sim",
 * docs/scale.md). Normalized or not. */
int cluster_spec_simulated(const json_t *spec);
/* 1 when a node pool of spec lists host (hosts or spareHosts, any case). */
int cluster_spec_host_listed(const json_t *spec, const char *host);
/* The first host of spec (hosts or spareHosts) that other lists too, with its
 * path in spec ("nodePools[1].hosts[0]") in where; NULL when they share none. */
const char *cluster_spec_shared_host(const json_t *spec, const json_t *other, char *where,
                                     size_t len);
/* cluster_spec_normalize's rules for hosts, on the canonical object: every
 * pool lists hosts or none does (naming the pool), minNodeCount equals the
 * number of hosts, no host twice, the hosts-only sections only on hosts.
 * 0, or -1 + err ("nodePools[1].hosts[0]: host \"a\" is also ..."). */
int cluster_spec_hosts_check(json_t *spec, mtc_error_t *err);

/* ---- users (users.c) ---- */

#define CLUSTER_USERS_MAX 64
/* users NAME:UID:GID...: a POSIX sh function (mtc-host's, and run here by
 * cluster_users_apply) — first every user checked (one that exists with
 * other ids, or a uid held by another name: `mtc-host: …` on stderr, exit
 * 3, nothing made), then the missing groups and users made (no home
 * directory, no password). */
#define CLUSTER_USERS_SH                                                                           \
    "users() {\n"                                                                                  \
    "  for x in \"$@\"; do n=${x%%:*} r=${x#*:}; u=${r%%:*} g=${r#*:}\n"                             \
    "    e=$(getent passwd \"$n\") && { [ \"$(echo \"$e\" | cut -d: -f3-4)\" = \"$u:$g\" ] || { echo "  \
    "\"mtc-host: user $n is uid:gid $(echo \"$e\" | cut -d: -f3-4) here, the spec says $u:$g\" >&2; "   \
    "exit 3; }; continue; }\n"                                                                     \
    "    o=$(getent passwd \"$u\" | cut -d: -f1); [ -z \"$o\" ] || { echo \"mtc-host: uid $u is "   \
    "$o's here, the spec gives it to $n\" >&2; exit 3; }\n"                                         \
    "  done\n"                                                                                     \
    "  for x in \"$@\"; do n=${x%%:*} r=${x#*:}; u=${r%%:*} g=${r#*:}\n"                             \
    "    getent passwd \"$n\" >/dev/null && continue\n"                                             \
    "    getent group \"$g\" >/dev/null || groupadd -g \"$g\" \"$n\" || { echo \"mtc-host: cannot "    \
    "make group $n ($g)\" >&2; exit 3; }\n"                                                          \
    "    useradd -M -N -u \"$u\" -g \"$g\" -s /bin/bash \"$n\" || { echo \"mtc-host: cannot make user " \
    "$n ($u:$g)\" >&2; exit 3; }\n"                                                                 \
    "    echo \"mtc-host: made user $n ($u:$g)\"\n"                                                   \
    "  done\n"                                                                                     \
    "}\n"
/* The spec's users as mtc-host's arguments ("alice:2001:2001 bob:…") into
 * buf: their count, or -1 when buf is too small. */
int cluster_users_args(const json_t *spec, char *buf, size_t len);
/* The spec's users made on this machine (mtcd's) where missing; 0, or -1 +
 * err with the function's one line (a user with other ids, a uid taken). */
int cluster_users_apply(const json_t *spec, mtc_error_t *err);

/* ---- shared storage (storage.c) ---- */

/* 1 when s is an NFS export "ADDRESS:/share" ("[v6]:/share"), else 0. */
int cluster_nfs_source_valid(const char *s);
/* 1 when s is a Lustre target "NID[,NID][:NID]:/fsname" (NID host@net), else 0. */
int cluster_lustre_source_valid(const char *s);
/* 1 with why[len] when s is no usable mount point (not a clean absolute path,
 * or a system directory or mtc's own); 0 when fine. */
int cluster_mount_path_bad(const char *s, char *why, size_t len);
/* 1 with why[len] when s is no acceptable mountOptions (a comma list of
 * [A-Za-z0-9_.=-] options, none naming a helper, file or user, no suid/dev). */
int cluster_mount_options_bad(const char *s, char *why, size_t len);
/* A storage field's rule, the .arg of cluster_hook_storage in the spec's
 * tables: a mount source (valid(s), or a cloud instance name; else "must be
 * <want>"), or bad(s, why, len) (1 with the reason in why): NFS sources,
 * Lustre targets, mount paths (and the experiment root), mount options. */
struct cluster_storage_rule {
    int (*valid)(const char *s);
    const char *want;
    int (*bad)(const char *s, char *why, size_t len);
};
extern const struct cluster_storage_rule cluster_rule_nfs, cluster_rule_lustre, cluster_rule_path,
    cluster_rule_options;
int cluster_hook_storage(const struct schema_field *f, json_t **v, const char *path,
                         mtc_error_t *err);
/* cluster_spec_normalize's storage rules across the spec: on hosts every entry
 * is a mount source (not a cloud instance name); no path mounted twice on a
 * pool's nodes. 0, or -1 + err naming the field. */
int cluster_spec_storage_check(const json_t *spec, mtc_error_t *err);
/* What a node of pool_id mounts, in order (the home storage at /home first,
 * then the pool's filestores, then its lustres): [{"type": "nfs"|"lustre",
 * "source", "path", "options"}] with options starting "nosuid,nodev". Cloud
 * instance names are skipped. Caller owns. */
json_t *cluster_spec_mounts(const json_t *spec, const char *pool_id);

/* 1 when id matches ^[a-z][a-z0-9]{0,9}$, else 0. */
int cluster_id_valid(const char *id);

/* Elastic node pools (scalingSpec maxNodeCount > minNodeCount): nodes
 * min..max-1 are powered up and down by Slurm's power saving; defaults and
 * bounds of their scalingSpec fields, in seconds (docs/clusters.md). */
#define CLUSTER_SUSPEND_TIME_DEFAULT 300
#define CLUSTER_SUSPEND_TIME_MAX 604800
#define CLUSTER_RESUME_TIMEOUT_DEFAULT 300
#define CLUSTER_RESUME_TIMEOUT_MAX 3600

/* Static compute nodes the spec asks for: the sum of scalingSpec.minNodeCount
 * over the node pools that are not the login pool. Expects a normalized spec. */
int cluster_spec_node_count(const json_t *spec);

/* Partition ids in spec order, comma-separated ("a3m,cpu"); "" when none.
 * Caller frees. NULL on allocation failure. */
char *cluster_spec_partitions(const json_t *spec);

/* The index of the node pool with this id in pools (a spec's "nodePools"),
 * or -1 (spec_view.c, as the functions below). */
int cluster_spec_pool_index(const json_t *pools, const char *id);

/* The node pool object with this id in a normalized spec (borrowed), or NULL. */
const json_t *cluster_spec_pool(const json_t *spec, const char *pool_id);

/* The login pool id of a normalized spec (borrowed), or NULL when none. */
const char *cluster_spec_login_pool(const json_t *spec);

/* One machine type from the catalog. Host-sized types ("local", "local-gpu")
 * have host_sized = 1 and vcpus/memory_mb 0: the provider sizes them. */
struct cluster_machine_type {
    char name[64];
    int vcpus;
    long memory_mb;
    char accelerator_type[64]; /* "" for CPU-only types */
    int accelerator_count;
    char gres_type[32]; /* Slurm GRES type, e.g. "h100"; "" for CPU-only */
    int host_sized;
    /* the health scanner's absolute thresholds (NCCL bus bandwidth, GB/s;
     * mtc-scan --min-bus-gbps): the ring's all_reduce and each pair's; 0 =
     * none, judge measured-relative (CPU and local types) */
    double min_allreduce_bus_gbps, min_pair_bus_gbps;
};

/* Look a machine type up in the catalog (mtc_data_path("machine-types.json")).
 * 0 on success; -1 with errno ENOENT (unknown type) or another errno (catalog
 * unreadable or malformed) and err set. */
int cluster_machine_type_lookup(const char *name, struct cluster_machine_type *out,
                                mtc_error_t *err);

/* Every machine type the catalog knows, families expanded, as a JSON array of
 * {"name","vcpus","memoryMb","acceleratorType","acceleratorCount","hostSized"}.
 * Caller owns. NULL + err on error. */
json_t *cluster_catalog_list(mtc_error_t *err);

/* A by-name index over a nodesStatus array: each object's "instanceName" to
 * the object (borrowed: nodes must outlive the index and keep its names),
 * looked up in O(log n). NULL when out of memory. */
struct cluster_node_index;
struct cluster_node_index *cluster_node_index_create(const json_t *nodes);
/* The node named name (the first, should two share it), or NULL. */
json_t *cluster_node_index_get(const struct cluster_node_index *ix, const char *name);
void cluster_node_index_destroy(struct cluster_node_index *ix);

#endif
