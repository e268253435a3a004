/* healthscan: the cluster health scanner's operation (issue 17, docs/
 * healthscan.md). A HEALTH_SCAN operation (its request checked by
 * healthscan_request.c) submits the scan job (healthscan_job.c), waits for it,
 * builds the report from each mode's (healthscan_report.c) and records it:
 * each node's last scan, events, and with drainBadNodes the failing nodes
 * drained and recorded as failed health so the remediation controller takes
 * them over. */
#include "control/healthscan_internal.h"
#include "cluster/cluster.h"
#include "slurm/slurm.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    struct healthscan_target t;
    char dir[PATH_MAX - 64], scan[PATH_MAX], path[PATH_MAX];
    int rc = -1;
    char *job = NULL;
    if (healthscan_target(c, cl.id, &t, err) < 0 ||
        healthscan_program(c, &cl, &t, scan, sizeof(scan), err) < 0 ||
        healthscan_dir(c, &cl, op->id, dir, sizeof(dir), err) < 0)
        goto out;
    /* a resumed operation (mtcd restarted) waits for the job it submitted */
    job = healthscan_read_text(dir, "job");
    if (!job) {
        char id[32], *out = NULL;
        snprintf(path, sizeof(path), "%s/healthscan.sbatch", dir);
        struct healthscan_machine mo;
        healthscan_machine_opts(&cl, json_object_get(req, "nodes"), &mo);
        char cdir[PATH_MAX - 32];
        if (!cluster_spec_on_hosts(cl.spec) &&
            provider_cluster_dir(c->prov, cl.id, cdir, sizeof(cdir), NULL) == 0)
            snprintf(mo.gpu_dir, sizeof(mo.gpu_dir), "%s/nodes/%%n/hw", cdir);
        if (healthscan_write_script(path, dir, scan, &t, &mo, req, err) < 0)
            goto out;
        if (slurm_submit(t.conf, path, id, &out) < 0) {
            char line[200];
            healthscan_last_line(out, line, sizeof(line));
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
    if (healthscan_wait_job(c, op, t.conf, job, dir, err) < 0)
        goto out;
    json_t *report = healthscan_build_report(req, dir, job);
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
