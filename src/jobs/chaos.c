/* chaos: faults injected on purpose into a running training job (`mtc
 * chaos`, :injectFault), by the mechanisms mtc's fault tests use — one of
 * the job's nodes reported faulty (control's remediation: drained, the job
 * requeued, the node rebooted), one rank stopped or killed, or the node's
 * slurmd killed (the provider's node_fault) — each one a CHAOS_FAULT event
 * of the cluster. The node and the rank are picked from a seed, so a run
 * of faults can be repeated. */
#include "experiment/experiment.h"
#include "jobs/jobs.h"
#include "health/health.h"
#include "provider/provider.h"
#include "recipes/recipes.h"
#include "slurm/slurm.h"
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct schema_enum jobs_fault_enum =
    SCHEMA_NAMES(NULL, [JOBS_FAULT_NODE] = "node", [JOBS_FAULT_HANG] = "hang",
                 [JOBS_FAULT_KILL_RANK] = "kill-rank", [JOBS_FAULT_SLURMD] = "slurmd");

struct fault_req {
    int fault;     /* enum jobs_fault */
    char node[64]; /* "": picked */
    int seed;      /* -1: a random one */
    int index;
    int validate_only;
};

static int node_hook(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    if (!mtc_name_valid(json_string_value(*v), 63))
        return schema_error(err, path, "\"%.64s\": not a node name ([a-z][a-z0-9-]{0,62})",
                            json_string_value(*v));
    return 0;
}

static const struct schema_field fault_fields[] = {
    {"fault", SCHEMA_ENUM, SCHEMA_REQUIRED, .enm = &jobs_fault_enum,
     SCHEMA_MEMBER(struct fault_req, fault)},
    {"node", SCHEMA_STR, SCHEMA_NONEMPTY, .check = node_hook, SCHEMA_MEMBER(struct fault_req, node)},
    {"seed", SCHEMA_INT, SCHEMA_RANGE, .lo = 0, .hi = 2147483647,
     SCHEMA_MEMBER(struct fault_req, seed)},
    {"index", SCHEMA_INT, SCHEMA_RANGE, .lo = 1, .hi = 1000000, .dflt = "1",
     SCHEMA_MEMBER(struct fault_req, index)},
    {"validateOnly", SCHEMA_BOOL, 0, .dflt = "false", SCHEMA_MEMBER(struct fault_req, validate_only)},
    {NULL},
};
const struct schema jobs_fault_request_schema = {fault_fields, SCHEMA_PROTO3, NULL, NULL};

unsigned jobs_fault_pick(int seed, int index, int what)
{
    /* splitmix64 over (seed, index, what): independent picks, the same for
     * the same three on every machine */
    uint64_t z = (uint64_t)(uint32_t)seed * 0x9E3779B97F4A7C15ull +
                 (uint64_t)(uint32_t)index * 0xD1B54A32D192ED03ull + (uint64_t)(uint32_t)what;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (unsigned)((z ^ (z >> 31)) >> 32);
}

/* The node to hit: f->node, which must be one of the job's nodes, else one
 * of them picked by the seed. Borrowed from nodes, or NULL + err. */
static const char *pick_node(const struct fault_req *f, const json_t *nodes,
                             const struct store_job *j, mtc_error_t *err)
{
    size_t i, n = json_array_size(nodes);
    json_t *v;
    if (!*f->node)
        return json_string_value(json_array_get(nodes, jobs_fault_pick(f->seed, f->index, 0) % n));
    json_array_foreach(nodes, i, v)
    {
        if (strcmp(json_string_value(v), f->node) == 0)
            return json_string_value(v);
    }
    char list[200] = "";
    json_array_foreach(nodes, i, v)
    {
        size_t used = strlen(list);
        snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", json_string_value(v));
    }
    errno = EINVAL;
    errprintf(err, "node: %s is not a node of trainingJob %s (it runs on %s)", f->node, j->id, list);
    return NULL;
}

/* The fault itself; what it hit is said in what (one line). 0, or -1 +
 * errno + err (EBUSY, ENOENT: worth trying again once the job runs). */
static int inject(const struct jobs_ops *ops, const struct store_cluster *cl, const struct store_job *j,
                  const struct fault_req *f, const char *node, json_t *out, char *what,
                  size_t len, mtc_error_t *err)
{
    if (f->fault == JOBS_FAULT_NODE) {
        /* as :reportFaultyNodes does: a REMEDIATE operation for the node */
        char reason[200], op_id[48] = "";
        snprintf(reason, sizeof(reason), "mtc chaos: fault %d into trainingJob %s", f->index,
                 j->id);
        json_t *items = json_pack("[{s:s, s:s, s:s, s:s}]", "node", node, "check", "chaos.node",
                                  "reason", reason, "severity",
                                  schema_enum_name(&health_severity_enum, HEALTH_SEV_REBOOT));
        int rc = ops->remediate(ops->arg, cl->project, cl->location, cl->id, items, op_id,
                                           err);
        int e = errno;
        json_decref(items);
        if (rc < 0 && !*op_id) /* EBUSY: the node is being remediated already */
            return errno = e, -1;
        json_object_set_new(out, "operation", json_string(op_id));
        snprintf(what, len, "reported faulty: remediation %s drains it, requeues the job and "
                            "repairs it (a reboot first)",
                 op_id);
        return 0;
    }
    static const enum provider_fault kinds[] = {[JOBS_FAULT_HANG] = PROVIDER_FAULT_HANG,
                                                [JOBS_FAULT_KILL_RANK] = PROVIDER_FAULT_KILL_TASK,
                                                [JOBS_FAULT_SLURMD] = PROVIDER_FAULT_KILL_SLURMD};
    struct provider_fault_hit hit;
    if (provider_node_fault(ops->prov, cl->id, cl->spec, node, kinds[f->fault], j->slurm_job,
                           jobs_fault_pick(f->seed, f->index, 1), &hit, err) < 0)
        return -1;
    json_object_set_new(out, "pid", json_integer(hit.pid));
    if (f->fault == JOBS_FAULT_SLURMD) {
        snprintf(what, len, "slurmd (pid %ld) killed -9", hit.pid);
        return 0;
    }
    json_object_set_new(out, "rank", json_integer(hit.rank));
    snprintf(what, len, "rank %d (pid %ld, one of the node's %d task(s)) %s", hit.rank, hit.pid,
             hit.tasks, f->fault == JOBS_FAULT_HANG ? "stopped (SIGSTOP)" : "killed (SIGKILL)");
    return 0;
}

/* What a job lacks to survive fault f, or NULL: a hang is acted on only
 * with monitor.hang_timeout_s, a killed rank retried only with
 * retry_on_error (node faults and a killed slurmd every job survives). */
static const char *unprepared(const struct store_job *j, int fault, char *buf, size_t len)
{
    struct exp_run run;
    exp_run_of(j->config, &run);
    if (fault == JOBS_FAULT_HANG && run.monitor.hang_timeout_s <= 0)
        snprintf(buf, len, "trainingJob %s sets no monitor.hang_timeout_s: a hung rank is not "
                           "acted on, the job hangs until its time limit",
                 j->id);
    else if (fault == JOBS_FAULT_KILL_RANK &&
             run.retry_on_error <= 0)
        snprintf(buf, len, "trainingJob %s sets no retry_on_error: a killed rank fails the job",
                 j->id);
    else
        return NULL;
    return buf;
}

json_t *jobs_inject_fault(struct store *st, const struct jobs_ops *ops, const struct store_cluster *cl,
                          struct store_job *j, const json_t *body, int *http, mtc_error_t *err)
{
    *http = 400;
    json_t *empty = json_object();
    json_t *req = schema_normalize(body ? body : empty, &jobs_fault_request_schema, "", err);
    json_decref(empty);
    struct fault_req f = {.fault = -1, .seed = -1, .index = 1};
    if (!req || schema_fill(req, &jobs_fault_request_schema, &f) < 0) {
        json_decref(req);
        return NULL;
    }
    json_decref(req);
    if (f.seed < 0) {
        char hex[9] = "0";
        mtc_random_hex(hex, 4);
        f.seed = (int)(strtoul(hex, NULL, 16) & 0x7fffffff);
    }
    char note[200];
    const char *warning = unprepared(j, f.fault, note, sizeof(note));
    if (f.validate_only) { /* who may, what and into which job: nothing injected */
        *http = 200;
        return json_pack("{s:s, s:i, s:i, s:s, s:b, s:s*}", "fault",
                         schema_enum_name(&jobs_fault_enum, f.fault), "index", f.index, "seed",
                         f.seed, "trainingJob", j->id, "validateOnly", 1, "warning", warning);
    }
    jobs_refresh_state(st, j, NULL);
    if (strcmp(j->state, "RUNNING") != 0) {
        errprintf(err, "precondition: trainingJob %s is %s: faults go into a RUNNING job", j->id,
                  j->state);
        return NULL;
    }
    const char *conf = NULL;
    mtc_error_t e2 = {""};
    json_t *nodes = exp_slurm_conf(j->config, &conf) == 0
                        ? slurm_job_nodes(conf, j->slurm_job, &e2)
                        : (errno = EIO, NULL);
    if (!nodes || json_array_size(nodes) == 0) {
        json_decref(nodes);
        if (errno == ENOENT)
            return errprintf(err, "precondition: trainingJob %s: Slurm job %s is not running",
                             j->id, j->slurm_job),
                   NULL;
        *http = 500;
        return errprintf(err, "trainingJob %s: its nodes cannot be read: %s", j->id,
                         *e2.text ? e2.text : "its cluster's slurm.conf is gone"),
               NULL;
    }
    const char *node = pick_node(&f, nodes, j, err);
    const char *fname = schema_enum_name(&jobs_fault_enum, f.fault);
    json_t *out = node ? json_pack("{s:s, s:i, s:i, s:s, s:s, s:s}", "fault", fname, "index",
                                   f.index, "seed", f.seed, "node", node, "trainingJob", j->id,
                                   "slurmJobId", j->slurm_job)
                       : NULL;
    char what[300], msg[600];
    if (!out || inject(ops, cl, j, &f, node, out, what, sizeof(what), err) < 0) {
        int e = node ? errno : EINVAL;
        /* a node taken by a remediation, or a task not started yet: try again */
        *http = e == EINVAL || e == EBUSY || e == ENOENT ? 400 : e == ENOTSUP ? 501 : 500;
        if (e == EBUSY || e == ENOENT) {
            mtc_error_t e3 = *err;
            errprintf(err, "precondition: %s", e3.text);
        }
        json_decref(out);
        json_decref(nodes);
        return NULL;
    }
    const char *exp = exp_experiment(j->config);
    snprintf(msg, sizeof(msg),
             "mtc chaos: fault %d (%s, seed %d) into trainingJob %s (experiment %s, Slurm job "
             "%s) on %s: %s",
             f.index, fname, f.seed, j->id, exp ? exp : j->id, j->slurm_job, node, what);
    store_event_add(st, cl->id, "CHAOS_FAULT", node, msg);
    log_msg(LOG_NOTICE, "cluster %s: %s", cl->id, msg);
    json_object_set_new(out, "hit", json_string(what));
    if (warning)
        json_object_set_new(out, "warning", json_string(warning));
    json_object_set_new(out, "description", json_string(msg));
    json_decref(nodes);
    *http = 200;
    return out;
}
