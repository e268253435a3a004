/* healthscan: the cluster health scanner's control plane (issue 17, docs/
 * healthscan.md). A :healthScan request is checked against the cluster and
 * Slurm (its nodes exist and are idle), then a HEALTH_SCAN operation submits
 * one sbatch job running `srun mtc-scan MODE` per check on the chosen nodes,
 * waits for it, reads each mode's JSON report and builds the scan's report:
 * per node and per pair, stored as each node's last scan; failing nodes may be
 * drained and recorded as failed health so the remediation controller takes
 * them over. */
#include "control/internal.h"
#include "cluster/cluster.h"
#include "slurm/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const struct schema_enum control_scan_check_enum =
    SCHEMA_NAMES(NULL, [CONTROL_SCAN_GPU] = "gpu", [CONTROL_SCAN_COLLECTIVE] = "collective",
                 [CONTROL_SCAN_STRAGGLER] = "straggler");

/* The mtc-scan modes each check runs, in order. */
static const char *const check_modes[][3] = {
    [CONTROL_SCAN_GPU] = {"gpu", NULL},
    [CONTROL_SCAN_COLLECTIVE] = {"pairs", "ring", NULL},
    [CONTROL_SCAN_STRAGGLER] = {"pipeline", NULL},
};

/* A scan job waits at most this long to start, and runs at most this long. */
#define SCAN_PENDING_S 120
#define SCAN_LIMIT_S 1800
/* One mode (an srun step) at most this long: a rank that never starts must
 * not hold the others. */
#define SCAN_STEP_S 600

/* checks: "all" or one of the check names ("path: ..." on error). */
static int check_hook(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    size_t i;
    json_t *s;
    char names[64];
    json_array_foreach(*v, i, s)
    {
        const char *name = json_string_value(s);
        if (strcmp(name, "all") != 0 && schema_enum_parse(&control_scan_check_enum, name, 0) < 0)
            return schema_error(err, path, "unknown check \"%.40s\" (one of %s, all)", name,
                                schema_enum_list(&control_scan_check_enum, names, sizeof(names)));
    }
    /* canonical: the distinct checks in the table's order */
    json_t *out = json_array();
    for (int k = 0; k < control_scan_check_enum.n; k++) {
        json_array_foreach(*v, i, s)
        {
            const char *name = json_string_value(s);
            if (strcmp(name, "all") == 0 || strcmp(name, control_scan_check_enum.names[k]) == 0) {
                json_array_append_new(out, json_string(control_scan_check_enum.names[k]));
                break;
            }
        }
    }
    json_decref(*v);
    *v = out;
    return 0;
}

/* A node list: names, or Slurm hostlist expressions (a-[0-2]) expanded later. */
static int nodes_hook(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    size_t i;
    json_t *s;
    json_array_foreach(*v, i, s)
    {
        const char *n = json_string_value(s);
        if (!*n || strlen(n) > 1000 ||
            strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789-[],") != strlen(n) ||
            !(n[0] >= 'a' && n[0] <= 'z'))
            return schema_error(err, path, "\"%.64s\": not a node name or list (a-0, a-[0-2])", n);
    }
    return 0;
}

static int partition_hook(const struct schema_field *f, json_t **v, const char *path,
                          mtc_error_t *err)
{
    (void)f;
    if (!mtc_name_valid(json_string_value(*v), 63))
        return schema_error(err, path, "\"%.64s\": must match [a-z][a-z0-9-]{0,62}",
                            json_string_value(*v));
    return 0;
}

static const struct schema_field request_fields[] = {
    {"checks", SCHEMA_STRS, SCHEMA_REQUIRED | SCHEMA_NONEMPTY, .max_items = 8, .check = check_hook},
    {"nodes", SCHEMA_STRS, SCHEMA_NONEMPTY, .max_items = 1024, .check = nodes_hook},
    {"partition", SCHEMA_STR, 0, .check = partition_hook},
    {"drainBadNodes", SCHEMA_BOOL, 0, .dflt = "false"},
    {"force", SCHEMA_BOOL, 0, .dflt = "false"},
    /* the largest message of the collective check (pairs, ring) */
    {"maxBytes", SCHEMA_INT, SCHEMA_RANGE, .lo = 8192, .hi = 268435456},
    /* the straggler check's microbatches */
    {"microbatches", SCHEMA_INT, SCHEMA_RANGE, .lo = 10, .hi = 100000},
    /* measured-relative verdicts: FAIL below this fraction of the pool median */
    {"failFraction", SCHEMA_NUM, SCHEMA_RANGE, .lo = 0.01, .hi = 0.99},
    /* the gpu check's burn-in on nodes without GPUs */
    {"burnInSeconds", SCHEMA_INT, SCHEMA_RANGE, .lo = 1, .hi = 86400},
    {NULL, 0, 0, .max_items = 0},
};
const struct schema control_scan_request_schema = {request_fields, SCHEMA_PROTO3, NULL, NULL};

/* ---- request: nodes and Slurm ---- */

/* The cluster's slurm.conf (and, on hosts, the mtc-scan copied there and the
 * MPI network). */
struct target {
    char conf[PATH_MAX], scan[PATH_MAX], net[64];
};

static int cluster_target(struct control *c, const char *id, struct target *t, mtc_error_t *err)
{
    memset(t, 0, sizeof(*t));
    char *env = control_env(c, id, err);
    if (!env)
        return -1;
    int rc = provider_env_get(env, "SLURM_CONF", t->conf, sizeof(t->conf));
    provider_env_get(env, "MTC_SCAN", t->scan, sizeof(t->scan));
    provider_env_get(env, "MTC_MPI_NETWORK", t->net, sizeof(t->net));
    free(env);
    if (rc < 0)
        return errprintf(err, "cluster %s has no slurm.conf in its environment", id);
    return 0;
}

/* The compute nodes of the cluster (of partition part when not NULL), as a
 * JSON array of names. */
static json_t *compute_nodes(const struct store_cluster *cl, const json_t *pools)
{
    json_t *out = json_array(), *n;
    size_t i;
    json_array_foreach(cl->nodes, i, n)
    {
        const char *name = json_string_value(json_object_get(n, "instanceName"));
        const char *type = json_string_value(json_object_get(n, "nodePoolType"));
        const char *pool = json_string_value(json_object_get(n, "nodePoolId"));
        if (!name || !type || strcmp(type, "NODE_POOL_TYPE_COMPUTE") != 0)
            continue;
        int in = !pools;
        size_t k;
        json_t *p;
        json_array_foreach(pools, k, p) in |= pool && strcmp(json_string_value(p), pool) == 0;
        if (in)
            json_array_append_new(out, json_string(name));
    }
    return out;
}

/* The node pools of partition part from the spec, or NULL when it has none of that id. */
static const json_t *partition_pools(const json_t *spec, const char *part)
{
    const json_t *parts = json_object_get(
        json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec"), "partitions");
    size_t i;
    json_t *p;
    json_array_foreach(parts, i, p)
    {
        const char *id = json_string_value(json_object_get(p, "id"));
        if (id && strcmp(id, part) == 0)
            return json_object_get(p, "nodePoolIds");
    }
    return NULL;
}

/* The names of list (names or hostlist expressions), expanded by Slurm. */
static json_t *expand(const char *conf, const json_t *list, mtc_error_t *err)
{
    json_t *out = json_array(), *v;
    size_t i;
    json_array_foreach(list, i, v)
    {
        const char *s = json_string_value(v);
        if (!strpbrk(s, "[,")) {
            json_array_append(out, v);
            continue;
        }
        char *o = NULL;
        char *argv[] = {"scontrol", "show", "hostnames", (char *)s, NULL};
        if (slurm_cmd(conf, argv, &o, 30000) != 0) {
            errprintf(err, "nodes: \"%.64s\": Slurm cannot expand it: %.120s", s, o ? o : "");
            free(o);
            json_decref(out);
            return NULL;
        }
        for (char *save = NULL, *t = strtok_r(o, "\n", &save); t; t = strtok_r(NULL, "\n", &save))
            json_array_append_new(out, json_string(t));
        free(o);
    }
    return out;
}

/* A node state Slurm would never run the scan on. */
static int unusable(const char *st)
{
    static const char *const bad[] = {"down",  "drain", "drng", "fail", "unk", "inval",
                                      "maint", "futr",  "plnd", "resv", NULL};
    if (strchr(st, '*'))
        return 1;
    for (int i = 0; bad[i]; i++)
        if (strncmp(st, bad[i], strlen(bad[i])) == 0)
            return 1;
    return 0;
}

json_t *control_healthscan_prepare(struct control *c, const struct store_cluster *cl,
                                   const json_t *req, int *http, mtc_error_t *err)
{
    *http = 400;
    if (schema_enum_parse(&cluster_state_enum, cl->state, 0) != CLUSTER_STATE_RUNNING)
        return errprintf(err, "precondition: cluster %s is %s, not RUNNING", cl->id, cl->state),
               NULL;
    struct target t;
    if (cluster_target(c, cl->id, &t, err) < 0) {
        *http = 500;
        return NULL;
    }
    const char *part = json_string_value(json_object_get(req, "partition"));
    const json_t *pools = NULL;
    if (part && !(pools = partition_pools(cl->spec, part))) {
        *http = 404;
        return errprintf(err, "partition: cluster %s has no partition \"%s\"", cl->id, part), NULL;
    }
    json_t *all = compute_nodes(cl, pools);
    json_t *given = json_object_get(req, "nodes");
    json_t *nodes = given ? expand(t.conf, given, err) : json_incref(all);
    json_t *out = NULL, *states = NULL;
    size_t i;
    json_t *v;
    if (!nodes)
        goto done;
    json_array_foreach(given ? nodes : NULL, i, v)
    {
        const char *n = json_string_value(v);
        if (!mtc_json_array_has(all, n)) {
            *http = 404;
            errprintf(err, "nodes: \"%.64s\" is not a compute node of cluster %s%s%s", n, cl->id,
                      part ? " in partition " : "", part ? part : "");
            goto done;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(json_string_value(json_array_get(nodes, k)), n) == 0) {
                errprintf(err, "nodes: \"%.64s\" is given twice", n);
                goto done;
            }
    }
    if (json_array_size(nodes) < 2) {
        errprintf(err,
                  "nodes: a health scan needs at least 2 nodes (it tests them against each "
                  "other), got %zu",
                  json_array_size(nodes));
        goto done;
    }
    /* like CHS: only idle nodes, unless forced (never nodes Slurm cannot use) */
    if (!(states = slurm_node_states(t.conf, err))) {
        *http = 503;
        goto done;
    }
    char busy[512] = "", dead[512] = "";
    json_array_foreach(nodes, i, v)
    {
        const char *n = json_string_value(v);
        const char *st = json_string_value(json_object_get(states, n));
        /* a node completing its last job runs nothing of anyone's: the
         * scan's job just starts once it is idle */
        int free_ = st && (strncmp(st, "idle", 4) == 0 || strcmp(st, "comp") == 0);
        char *list = !st || unusable(st) ? dead : !free_ ? busy : NULL;
        if (list && strlen(list) < sizeof(busy) - 100)
            snprintf(list + strlen(list), sizeof(busy) - strlen(list), "%s%s (%s)",
                     *list ? ", " : "", n, st ? st : "unknown");
    }
    if (*dead) {
        errprintf(err, "precondition: nodes Slurm cannot run the scan on: %.200s", dead);
        goto done;
    }
    if (*busy && !json_is_true(json_object_get(req, "force"))) {
        errprintf(err, "precondition: nodes not idle: %.200s (force runs the scan anyway)", busy);
        goto done;
    }
    out = json_deep_copy(req);
    json_object_set(out, "nodes", nodes);
done:
    json_decref(all);
    json_decref(nodes);
    json_decref(states);
    return out;
}

/* ---- the job ---- */

/* Single-quoted for the shell; our own paths and validated names only (no '). */
static int put_q(FILE *f, const char *s)
{
    if (strchr(s, '\''))
        return -1;
    fprintf(f, "'%s'", s);
    return 0;
}

/* name under dirfd (a directory, not followed when a symlink) made mode. */
static int fchmod_dir(int dirfd, const char *name, mode_t mode, mtc_error_t *err)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc = fd < 0 || fchmod(fd, mode) < 0 ? errprintf(err, "%s: %s", name, strerror(errno)) : 0;
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Where the scan's files go: a directory only root (mtcd's user) can write,
 * mode 0700 — the script sbatch runs as root and the reports mtcd trusts
 * must be beyond every user's reach. A local cluster's nodes are this
 * machine: the cluster's own directory (under MTC_HOME). A cluster on hosts
 * needs storage every host shares: <experimentRoot>/.mtc-healthscans, with
 * every directory from / to it checked (root's, writable by no one else
 * unless sticky): a user who could write the experiment root could rename
 * the scans' directory away and put their own in its place. */
static int scan_dir(struct control *c, const struct store_cluster *cl, const char *op_id, char *dir,
                    size_t len, mtc_error_t *err)
{
    const char *root = json_string_value(json_object_get(cl->spec, "experimentRoot"));
    char base[PATH_MAX];
    const char *sub = "healthscans";
    if (cluster_spec_on_hosts(cl->spec)) {
        if (!root || !*root)
            return errprintf(err, "a cluster on hosts scans with an experimentRoot (storage every "
                                  "host shares): the nodes write the reports there");
        snprintf(base, sizeof(base), "%s", root);
        sub = ".mtc-healthscans";
    } else if (provider_cluster_dir(c->prov, cl->id, base, sizeof(base), err) < 0) {
        return -1;
    }
    if ((size_t)snprintf(dir, len, "%s/%s/%s", base, sub, op_id) >= len)
        return errprintf(err, "%s: path too long", base);
    mtc_error_t e = {""};
    int b = mtc_dir_open_trusted(base, 0, 0, &e), s = -1, o = -1, rc = -1;
    if (b >= 0 && (s = mtc_dir_at(b, sub, 1, 0700, &e)) >= 0 && fchmod_dir(b, sub, 0700, &e) == 0 &&
        (o = mtc_dir_at(s, op_id, 1, 0700, &e)) >= 0)
        rc = 0;
    else
        errprintf(err, "the scan's directory %s: %s (a scan writes its script and reads its "
                       "reports only where no one but root can write)",
                  dir, e.text);
    int fds[] = {o, s, b};
    for (size_t i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return rc;
}

/* What the nodes' machine type asks of mtc-scan: the catalog's absolute
 * thresholds (NCCL bus bandwidth) for GPU types — on hosts only: emulated GPU
 * nodes have no NCCL and are judged measured-relative — its GPU count, and the
 * NVML library the cluster's healthPolicy names. Mixed types: none of these. */
struct machine_opts {
    double min_pair, min_allreduce;
    int gpus;
    const char *nvml; /* borrowed from the spec */
    /* a local cluster's emulated hardware, nodes/%n/hw: mtc-scan checks an
     * emulated node as its agent does (its device files or emulated NVML) */
    char gpu_dir[PATH_MAX];
};

static void machine_opts(const struct store_cluster *cl, const json_t *nodes,
                         struct machine_opts *m)
{
    memset(m, 0, sizeof(*m));
    m->nvml = json_string_value(
        json_object_get(json_object_get(cl->spec, "healthPolicy"), "nvmlLibrary"));
    if (m->nvml && !*m->nvml)
        m->nvml = NULL;
    char type[64] = "";
    size_t i, k;
    json_t *v, *n, *p;
    json_array_foreach(nodes, i, v)
    {
        const char *pool = NULL, *t = NULL;
        json_array_foreach(cl->nodes, k, n)
        {
            const char *name = json_string_value(json_object_get(n, "instanceName"));
            if (name && !strcmp(name, json_string_value(v)))
                pool = json_string_value(json_object_get(n, "nodePoolId"));
        }
        json_array_foreach(json_object_get(cl->spec, "nodePools"), k, p)
        {
            const char *id = json_string_value(json_object_get(p, "id"));
            if (pool && id && !strcmp(id, pool))
                t = json_string_value(
                    json_object_get(json_object_get(p, "machineSpec"), "machineType"));
        }
        if (!t || (*type && strcmp(type, t) != 0))
            return;
        snprintf(type, sizeof(type), "%s", t);
    }
    struct cluster_machine_type mt;
    mtc_error_t err;
    if (!*type || cluster_machine_type_lookup(type, &mt, &err) < 0)
        return;
    m->gpus = mt.accelerator_count;
    if (cluster_spec_on_hosts(cl->spec)) {
        m->min_pair = mt.min_pair_bus_gbps;
        m->min_allreduce = mt.min_allreduce_bus_gbps;
    }
}

/* The batch script: one srun step per mode, each writing MODE.json, MODE.err
 * and MODE.rc; "done" at the end. */
static int write_script(const char *path, const char *dir, const char *scan, const struct target *t,
                        const struct machine_opts *mo, const json_t *req, mtc_error_t *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return errprintf(err, "cannot write %s: %s", path, strerror(errno));
    const json_t *nodes = json_object_get(req, "nodes");
    const char *part = json_string_value(json_object_get(req, "partition"));
    size_t n = json_array_size(nodes), i;
    json_t *v;
    int bad = 0;
    fprintf(f, "#!/bin/bash\n# mtc healthscan: checks");
    json_array_foreach(json_object_get(req, "checks"), i, v)
        fprintf(f, " %s", json_string_value(v));
    fprintf(f, "\n#SBATCH --job-name=mtc-healthscan\n#SBATCH --nodes=%zu\n", n);
    fprintf(f, "#SBATCH --ntasks-per-node=1\n#SBATCH --nodelist=");
    json_array_foreach(nodes, i, v) fprintf(f, "%s%s", i ? "," : "", json_string_value(v));
    fprintf(f, "\n");
    if (part)
        fprintf(f, "#SBATCH --partition=%s\n", part);
    /* forced onto busy nodes it shares them (its figures then include their load) */
    if (!json_is_true(json_object_get(req, "force")))
        fprintf(f, "#SBATCH --exclusive\n");
    fprintf(f, "#SBATCH --time=%d\n#SBATCH --no-requeue\n#SBATCH --output=", SCAN_LIMIT_S / 60);
    bad |= put_q(f, dir);
    fprintf(f, "/job.log\n\nD=");
    bad |= put_q(f, dir);
    fprintf(f, "\nSCAN=");
    bad |= put_q(f, scan);
    fprintf(f, "\nexport OMP_NUM_THREADS=1\n");
    if (*t->net) /* ranks on several hosts: Open MPI over TCP on the cluster's network */
        fprintf(f,
                "export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp "
                "OMPI_MCA_btl_tcp_if_include='%s'\n",
                t->net);
    /* a step whose ranks crashed before rank 0 reported (not a verdict: exit
     * 0 pass, 1 fail, 2 usage; 124 its time limit) runs once more: Open MPI's
     * start-up under a loaded machine sometimes loses a rank */
    fprintf(f,
            "step() { # MODE ARGS...: one srun step, its report, stderr and exit status\n"
            "    echo \"$1\" >\"$D/step\"\n"
            "    for a in 1 2; do\n"
            "        timeout %d srun --mpi=pmix --kill-on-bad-exit=1 -N %zu "
            "--ntasks-per-node=1 \"$SCAN\" \"$@\" >\"$D/$1.json\" 2>\"$D/$1.err\"\n"
            "        rc=$?\n        echo $a >\"$D/$1.attempts\"\n"
            "        case $rc in 0|1|2|124) break ;; esac\n"
            "        [ -s \"$D/$1.json\" ] && break # rank 0 reported; the others were stopped\n"
            "        cp \"$D/$1.err\" \"$D/$1.err.$a\"\n"
            "    done\n"
            "    echo $rc >\"$D/$1.rc\"\n}\n",
            SCAN_STEP_S, n);
    int mb = (int)json_integer_value(json_object_get(req, "maxBytes"));
    int micro = (int)json_integer_value(json_object_get(req, "microbatches"));
    double ff = json_real_value(json_object_get(req, "failFraction"));
    int secs = (int)json_integer_value(json_object_get(req, "burnInSeconds"));
    json_array_foreach(json_object_get(req, "checks"), i, v)
    {
        int k = schema_enum_parse(&control_scan_check_enum, json_string_value(v), 0);
        for (int m = 0; k >= 0 && check_modes[k][m]; m++) {
            const char *mode = check_modes[k][m];
            fprintf(f, "step %s", mode);
            if (mb && (!strcmp(mode, "pairs") || !strcmp(mode, "ring")))
                fprintf(f, " --max-bytes %d", mb);
            if (micro && !strcmp(mode, "pipeline"))
                fprintf(f, " --microbatches %d", micro);
            if (ff > 0 && (!strcmp(mode, "pairs") || !strcmp(mode, "pipeline")))
                fprintf(f, " --fail-fraction %.4g", ff);
            double min = !strcmp(mode, "pairs")  ? mo->min_pair
                         : !strcmp(mode, "ring") ? mo->min_allreduce
                                                 : 0;
            if (min > 0)
                fprintf(f, " --nccl --min-bus-gbps %g", min);
            if (!strcmp(mode, "gpu")) {
                if (mo->gpus > 0)
                    fprintf(f, " --expected-gpus %d", mo->gpus);
                if (secs > 0)
                    fprintf(f, " --seconds %d", secs);
                if (mo->nvml) {
                    fprintf(f, " --nvml-library ");
                    bad |= put_q(f, mo->nvml);
                }
                if (*mo->gpu_dir) {
                    fprintf(f, " --gpu-dir ");
                    bad |= put_q(f, mo->gpu_dir);
                }
            }
            fprintf(f, "\n");
        }
    }
    fprintf(f, "echo done >\"$D/step\"\n: >\"$D/done\"\n");
    if (fclose(f) != 0 || bad)
        return errprintf(err, "cannot write %s%s", path, bad ? ": a quote in a path" : "");
    return 0;
}

/* The mtc-scan the nodes run: the copy on the hosts, else the one built
 * beside mtcd (a local cluster's nodes are this machine). */
static int scan_program(const struct control *c, const struct store_cluster *cl,
                        const struct target *t, char *buf, size_t len, mtc_error_t *err)
{
    (void)c;
    if (*t->scan) {
        snprintf(buf, len, "%s", t->scan);
        return 0;
    }
    if (cluster_spec_on_hosts(cl->spec))
        return errprintf(err, "mtc-scan is not on the cluster's hosts (it was not built beside "
                              "mtcd when they were set up)");
    char self[PATH_MAX] = "";
    if (mtc_exe_dir(self, sizeof(self)) < 0)
        return errprintf(err, "cannot find mtcd's own directory");
    snprintf(buf, len, "%.4000s/mtc-scan", self);
    if (access(buf, X_OK) < 0)
        return errprintf(err, "mtc-scan is not installed beside mtcd (%s)", buf);
    return 0;
}

/* A file the scan job wrote: untrusted input, read only up to 4 MiB (more
 * is no report of mtc-scan's; NULL then, as for a missing file). */
static char *read_text(const char *dir, const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    size_t n = 0;
    char *t = mtc_read_file(path, &n);
    if (t && n > (4u << 20)) {
        free(t);
        return NULL;
    }
    return t;
}

/* Wait for the job to leave Slurm's queue; progress names its step. 0, or -1
 * (cancelled after waiting too long to start or running too long). */
static int wait_job(struct control *c, const struct store_op *op, const char *conf, const char *job,
                    const char *dir, mtc_error_t *err)
{
    int64_t start = mtc_now_ms(), running_since = 0, done_since = 0;
    char last[256] = "";
    for (;;) {
        char state[32] = "";
        int known = slurm_job_state(conf, job, state, sizeof(state)) == 0;
        char *done = read_text(dir, "done");
        free(done);
        int64_t now = mtc_now_ms();
        if (done && !done_since)
            done_since = now;
        /* the script's end: the report is complete; waiting for the job to
         * leave the nodes (COMPLETING) lets the next scan find them idle */
        if ((done && (!known || now - done_since > 30000 ||
                      (strcmp(state, "RUNNING") != 0 && strcmp(state, "COMPLETING") != 0))) ||
            (known && strcmp(state, "PENDING") != 0 && strcmp(state, "RUNNING") != 0 &&
             strcmp(state, "CONFIGURING") != 0 && strcmp(state, "COMPLETING") != 0))
            return done || !strcmp(state, "COMPLETED") || !strcmp(state, "FAILED")
                       ? 0
                       : errprintf(err, "scan job %s ended %s before it finished", job, state);
        if (!known && now - start > 60000)
            return errprintf(err, "scan job %s vanished from Slurm without its reports", job);
        if (strcmp(state, "RUNNING") == 0 && !running_since)
            running_since = now;
        const char *why =
            !running_since && now - start > SCAN_PENDING_S * 1000        ? "did not start within"
            : running_since && now - running_since > SCAN_LIMIT_S * 1000 ? "ran longer than"
                                                                         : NULL;
        if (why) {
            slurm_job_cancel(conf, job, NULL);
            return errprintf(err, "scan job %s %s %d s: cancelled", job, why,
                             running_since ? SCAN_LIMIT_S : SCAN_PENDING_S);
        }
        char *step = read_text(dir, "step"), msg[256];
        if (step)
            step[strcspn(step, "\n")] = '\0';
        snprintf(msg, sizeof(msg), "job %s %s%s%s", job, state, step ? ": " : "", step ? step : "");
        free(step);
        if (strcmp(msg, last) != 0) {
            store_op_progress(c->st, op->id, msg);
            snprintf(last, sizeof(last), "%s", msg);
        }
        mtc_sleep_ms(500);
    }
}

/* ---- the report ---- */

static int state_rank(const char *s)
{
    return !s ? -1 : !strcmp(s, "PASS") ? 0 : !strcmp(s, "WARN") ? 1 : !strcmp(s, "FAIL") ? 3 : 2;
}

/* s cut to fit buf (at a UTF-8 character's start), or NULL for NULL. */
static const char *clip(const char *s, char *buf, size_t len)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    if (n >= len) {
        n = len - 1;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

/* A state the scan job reported, as one mtc knows (anything else: ERROR). */
static const char *known_state(const char *s)
{
    static const char *const known[] = {"PASS", "WARN", "FAIL", "ERROR"};
    for (size_t i = 0; s && i < sizeof(known) / sizeof(known[0]); i++)
        if (!strcmp(s, known[i]))
            return known[i];
    return "ERROR";
}

/* A mode's verdict: its "state", else the worst of its nodes' and pairs'. */
static const char *report_state(const json_t *r)
{
    const char *st = json_string_value(json_object_get(r, "state"));
    if (st)
        return known_state(st);
    const char *keys[] = {"nodes", "pairs"};
    for (int k = 0; k < 2; k++) {
        size_t i;
        json_t *n;
        json_array_foreach(json_object_get(r, keys[k]), i, n)
        {
            const char *s = json_string_value(json_object_get(n, "state"));
            if (s && state_rank(known_state(s)) > state_rank(st))
                st = known_state(s);
        }
    }
    return st;
}

/* Fold one mode's report into the scan's: its nodes' verdicts into nodes
 * (name -> {node, state, reason, results[]}), its pairs and ring sizes. */
static void fold(json_t *report, json_t *nodes, const char *check, const char *mode,
                 const json_t *r)
{
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(r, "nodes"), i, n)
    {
        const char *name = json_string_value(json_object_get(n, "node"));
        if (!name)
            continue;
        json_t *agg = json_object_get(nodes, name);
        if (!agg) {
            agg = json_pack("{s:s, s:s, s:[]}", "node", name, "state", "PASS", "results");
            json_object_set_new(nodes, name, agg);
        }
        json_t *res = json_deep_copy(n);
        json_object_del(res, "node");
        json_object_set_new(res, "check", json_string(check));
        json_object_set_new(res, "mode", json_string(mode));
        json_array_append_new(json_object_get(agg, "results"), res);
        const char *st = known_state(json_string_value(json_object_get(n, "state")));
        const char *was = json_string_value(json_object_get(agg, "state"));
        if (state_rank(st) > state_rank(was)) {
            char why_buf[240];
            const char *why = clip(json_string_value(json_object_get(n, "reason")), why_buf,
                                   sizeof(why_buf));
            json_object_set_new(agg, "state", json_string(st));
            /* "CHECK: REASON", unless mtc-scan's reason names it already */
            size_t cl = strlen(check);
            json_object_set_new(agg, "reason",
                                why && !strncmp(why, check, cl) && why[cl] == ':'
                                    ? json_string(why)
                                    : json_sprintf("%s: %s", check, why ? why : "no reason given"));
        }
    }
    json_t *p;
    json_array_foreach(json_object_get(r, "pairs"), i, p)
    {
        json_t *q = json_deep_copy(p);
        json_object_set_new(q, "check", json_string(check));
        json_array_append_new(json_object_get(report, "pairs"), q);
    }
    if (json_object_get(r, "sizes"))
        json_object_set(report, "ring", json_object_get(r, "sizes"));
    if (json_object_get(r, "heatmap"))
        json_object_set(report, "heatmap", json_object_get(r, "heatmap"));
}

/* The last line of text that names an error (srun's "error: N: task 1:
 * Segmentation fault"), else its last non-empty line, into buf. */
static void last_line(const char *text, char *buf, size_t len)
{
    *buf = '\0';
    const char *e = NULL;
    for (const char *p = text ? strstr(text, "error") : NULL; p; p = strstr(p + 1, "error"))
        e = p;
    if (e) {
        while (e > text && e[-1] != '\n')
            e--;
        snprintf(buf, len, "%.*s", (int)strcspn(e, "\n"), e);
        return;
    }
    const char *end = text ? text + strlen(text) : NULL;
    while (end && end > text && (end[-1] == '\n' || end[-1] == ' '))
        end--;
    if (!end || end == text)
        return;
    const char *start = end;
    while (start > text && start[-1] != '\n')
        start--;
    snprintf(buf, len, "%.*s", (int)(end - start), start);
}

/* The report of the files under dir for req's checks (caller owns). */
static json_t *build_report(const json_t *req, const char *dir, const char *job)
{
    json_t *report = json_pack("{s:s, s:O, s:s, s:[], s:[]}", "state", "PASS", "checks",
                               json_object_get(req, "checks"), "jobId", job, "scans", "pairs");
    json_t *nodes = json_object();
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(req, "checks"), i, v)
    {
        const char *check = json_string_value(v);
        int k = schema_enum_parse(&control_scan_check_enum, check, 0);
        for (int m = 0; k >= 0 && check_modes[k][m]; m++) {
            const char *mode = check_modes[k][m];
            char name[32], line[200];
            snprintf(name, sizeof(name), "%s.json", mode);
            char *text = read_text(dir, name);
            snprintf(name, sizeof(name), "%s.err", mode);
            char *errs = read_text(dir, name);
            snprintf(name, sizeof(name), "%s.rc", mode);
            char *rc = read_text(dir, name);
            json_t *r = text ? json_loads(text, 0, NULL) : NULL;
            const char *st = r ? report_state(r) : NULL;
            snprintf(name, sizeof(name), "%s.attempts", mode);
            char *att = read_text(dir, name);
            json_t *scan =
                json_pack("{s:s, s:s, s:i, s:i}", "check", check, "mode", mode, "exitStatus",
                          rc ? atoi(rc) : -1, "attempts", att ? atoi(att) : 0);
            free(att);
            /* a complete report counts whatever the step's exit status (rank 0
             * exiting 1 on a FAIL makes srun stop the other ranks) */
            if (!r || !st || !rc) {
                last_line(errs, line, sizeof(line));
                if (rc && atoi(rc) == 124)
                    snprintf(line, sizeof(line), "ran over %d s: stopped", SCAN_STEP_S);
                json_object_set_new(scan, "state", json_string("ERROR"));
                json_object_set_new(scan, "reason",
                                    json_sprintf("mtc-scan %s %s: %s", mode,
                                                 rc ? "failed" : "did not run",
                                                 *line ? line : "no report"));
            } else {
                json_object_set_new(scan, "state", json_string(st));
                if (json_object_get(r, "reason"))
                    json_object_set(scan, "reason", json_object_get(r, "reason"));
                fold(report, nodes, check, mode, r);
            }
            const char *ss = json_string_value(json_object_get(scan, "state"));
            /* a check that could not run fails the scan, never a node */
            if (state_rank(ss) > state_rank(json_string_value(json_object_get(report, "state"))))
                json_object_set_new(report, "state",
                                    json_string(state_rank(ss) >= 2 ? "FAIL" : ss));
            json_array_append_new(json_object_get(report, "scans"), scan);
            json_decref(r);
            free(text);
            free(errs);
            free(rc);
        }
    }
    json_t *list = json_array();
    json_array_foreach(json_object_get(req, "nodes"), i, v)
    {
        json_t *n = json_object_get(nodes, json_string_value(v));
        json_array_append(list, n ? n
                                  : json_pack("{s:s, s:s, s:s, s:[]}", "node", json_string_value(v),
                                              "state", "UNKNOWN", "reason",
                                              "no check reported on this node", "results"));
        if (!n)
            json_decref(json_array_get(list, json_array_size(list) - 1));
    }
    json_object_set_new(report, "nodes", list);
    json_decref(nodes);
    return report;
}

/* ---- recording ---- */

/* Each node's last scan, the events, and with drainBadNodes the failing nodes
 * drained ("healthscan: REASON") and recorded as failed health. */
static void record(struct control *c, const struct store_op *op, const char *conf,
                   const json_t *req, json_t *report)
{
    const char *id = op->cluster_id;
    char checks[64] = "";
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(req, "checks"), i, v)
        snprintf(checks + strlen(checks), sizeof(checks) - strlen(checks), "%s%s", i ? "," : "",
                 json_string_value(v));
    int drain = json_is_true(json_object_get(req, "drainBadNodes")), failed = 0;
    json_array_foreach(json_object_get(report, "nodes"), i, v)
    {
        const char *node = json_string_value(json_object_get(v, "node"));
        const char *st = json_string_value(json_object_get(v, "state"));
        const char *reason = json_string_value(json_object_get(v, "reason"));
        if (!strcmp(st, "UNKNOWN"))
            continue;
        struct store_scan sc = {.time_ms = mtc_now_ms()};
        snprintf(sc.node, sizeof(sc.node), "%s", node);
        snprintf(sc.state, sizeof(sc.state), "%s", st);
        snprintf(sc.checks, sizeof(sc.checks), "%s", checks);
        snprintf(sc.reason, sizeof(sc.reason), "%s", reason ? reason : "");
        snprintf(sc.op_id, sizeof(sc.op_id), "%s", op->id);
        if (store_scan_put(c->st, id, &sc) < 0)
            log_msg(LOG_ERR, "cluster %s: cannot store %s's scan", id, node);
        if (strcmp(st, "FAIL") != 0)
            continue;
        failed++;
        int drained = 0;
        if (drain) {
            char why[300];
            mtc_error_t err = {""};
            snprintf(why, sizeof(why), "healthscan: %.280s", sc.reason);
            drained = slurm_node_set(conf, node, SLURM_NODE_DRAIN, why, &err) == 0;
            if (!drained)
                log_msg(LOG_ERR, "cluster %s: drain %s: %s", id, node, err.text);
            /* failed health: the remediation controller takes the node over */
            struct store_health h = {0};
            snprintf(h.status, sizeof(h.status), "%s", health_status_name(HEALTH_FAIL));
            snprintf(h.failing_check, sizeof(h.failing_check), "healthscan.%.*s",
                     (int)strcspn(sc.reason, ":"), sc.reason);
            snprintf(h.reason, sizeof(h.reason), "%s", sc.reason);
            snprintf(h.severity, sizeof(h.severity), "%s", health_severity_name(HEALTH_SEV_REBOOT));
            store_health_put(c->st, id, node, &h);
            json_object_set_new(v, "drained", json_boolean(drained));
        }
        char msg[320];
        snprintf(msg, sizeof(msg), "%s%s", sc.reason, drained ? "; drained" : "");
        store_event_add(c->st, id, "HEALTH_SCAN_FAILED", node, msg);
    }
    const char *st = json_string_value(json_object_get(report, "state"));
    char msg[256];
    if (!failed && !strcmp(st, "FAIL")) {
        json_array_foreach(json_object_get(report, "scans"), i, v)
        {
            if (strcmp(json_string_value(json_object_get(v, "state")), "PASS") != 0) {
                const char *why = json_string_value(json_object_get(v, "reason"));
                snprintf(msg, sizeof(msg), "%s (%s): %.200s",
                         json_string_value(json_object_get(v, "check")),
                         json_string_value(json_object_get(v, "mode")),
                         why ? why : json_string_value(json_object_get(v, "state")));
                store_event_add(c->st, id, "HEALTH_SCAN_FAILED", NULL, msg);
                break;
            }
        }
    } else if (!failed) {
        snprintf(msg, sizeof(msg), "%s on %zu nodes: %s", checks,
                 json_array_size(json_object_get(report, "nodes")), st);
        store_event_add(c->st, id, "HEALTH_SCAN_PASSED", NULL, msg);
    }
    if (drain && failed)
        control_poke(c);
}

int control_run_healthscan(struct control *c, struct store_op *op, json_t **response, int *code,
                           mtc_error_t *err)
{
    struct store_cluster cl;
    const json_t *req = op->request;
    *code = RPC_FAILED_PRECONDITION;
    if (store_cluster_get(c->st, op->cluster_id, &cl) < 0)
        return errprintf(err, "cluster %s no longer exists", op->cluster_id);
    struct target t;
    char dir[PATH_MAX - 64], scan[PATH_MAX], path[PATH_MAX];
    int rc = -1;
    char *job = NULL;
    if (cluster_target(c, cl.id, &t, err) < 0 ||
        scan_program(c, &cl, &t, scan, sizeof(scan), err) < 0 ||
        scan_dir(c, &cl, op->id, dir, sizeof(dir), err) < 0)
        goto out;
    /* a resumed operation (mtcd restarted) waits for the job it submitted */
    job = read_text(dir, "job");
    if (!job) {
        char id[32], *out = NULL;
        snprintf(path, sizeof(path), "%s/healthscan.sbatch", dir);
        struct machine_opts mo;
        machine_opts(&cl, json_object_get(req, "nodes"), &mo);
        char cdir[PATH_MAX - 32];
        if (!cluster_spec_on_hosts(cl.spec) &&
            provider_cluster_dir(c->prov, cl.id, cdir, sizeof(cdir), NULL) == 0)
            snprintf(mo.gpu_dir, sizeof(mo.gpu_dir), "%s/nodes/%%n/hw", cdir);
        if (write_script(path, dir, scan, &t, &mo, req, err) < 0)
            goto out;
        if (slurm_submit(t.conf, path, id, &out) < 0) {
            char line[200];
            last_line(out, line, sizeof(line));
            free(out);
            errprintf(err, "sbatch refused the scan: %s", *line ? line : "no reason given");
            goto out;
        }
        free(out);
        snprintf(path, sizeof(path), "%s/job", dir);
        mtc_write_file_atomic(path, id, strlen(id), 0644);
        job = strdup(id);
        char msg[300], checks[64] = "";
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(req, "checks"), i, v)
            snprintf(checks + strlen(checks), sizeof(checks) - strlen(checks), "%s%s", i ? "," : "",
                     json_string_value(v));
        snprintf(msg, sizeof(msg), "%s on %zu nodes (job %s, operation %s)", checks,
                 json_array_size(json_object_get(req, "nodes")), id, op->id);
        store_event_add(c->st, cl.id, "HEALTH_SCAN_STARTED", NULL, msg);
    }
    job[strcspn(job, "\n")] = '\0';
    *code = RPC_ABORTED;
    if (wait_job(c, op, t.conf, job, dir, err) < 0)
        goto out;
    json_t *report = build_report(req, dir, job);
    record(c, op, t.conf, req, report);
    char ts[40];
    mtc_time_rfc3339(op->create_ms, ts, sizeof(ts));
    json_object_set_new(report, "startTime", json_string(ts));
    mtc_time_rfc3339(mtc_now_ms(), ts, sizeof(ts));
    json_object_set_new(report, "endTime", json_string(ts));
    log_msg(LOG_NOTICE, "cluster %s: health scan %s: %s", cl.id, op->id,
            json_string_value(json_object_get(report, "state")));
    *response = report;
    rc = 0;
out:
    free(job);
    store_cluster_release(&cl);
    return rc;
}
