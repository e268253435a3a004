/* reports: what a cluster's nodes are reported to be — :reportHealth (an
 * agent's health check results, node tokens only, for its own node) and
 * :reportFaultyNodes (a user's fault report: the nodes are remediated). */
#include "api/internal.h"
#include "control/reports.h"
#include "health/health.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* 1 when node is a node of the cluster (as last observed, or by its name). */
static int cluster_has_node(const struct store_cluster *cl, const char *node)
{
    size_t i;
    json_t *n;
    json_array_foreach(cl->nodes, i, n)
    {
        const char *name = json_string_value(json_object_get(n, "instanceName"));
        if (name && strcmp(name, node) == 0)
            return 1;
    }
    return 0;
}

/* An agent's report: the cluster's head and the node's membership are read
 * by index, never its spec or nodesStatus (their parse grew with the node
 * count, under the store's lock: docs/scale.md). */
int api_cluster_report_health(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster_head(r, out, &cl) < 0)
        return 0;
    const char *node = NULL, *mode = "HEALTH";
    json_t *results = NULL;
    json_error_t jerr;
    if (!r->body || json_unpack_ex(r->body, &jerr, JSON_STRICT, "{s:s, s:o, s?:s}", "nodeId", &node,
                                   "results", &results, "mode", &mode) < 0) {
        store_cluster_release(&cl);
        return api_error(out, 400,
                         "reportHealth: body must be {\"nodeId\", \"results\": [...], "
                         "\"mode\"?}: %s",
                         r->body ? jerr.text : "missing body");
    }
    if (strcmp(r->who.cluster, cl.id) != 0 || strcmp(r->who.node, node) != 0) {
        store_cluster_release(&cl);
        return api_error(out, 403, "nodeId: this node token speaks for node %s of cluster %s only",
                         r->who.node, r->who.cluster);
    }
    char pool[64];
    int known = store_cluster_node_pool(r->st, cl.id, node, pool, sizeof(pool)) == 0;
    if (!known && errno != ENOENT) {
        store_cluster_release(&cl);
        return api_error(out, 500, "cannot read the nodes of cluster %s", cl.id);
    }
    int m = schema_enum_parse(&health_mode_enum, mode, 0);
    if (!known || m < 0) {
        store_cluster_release(&cl);
        return !known ? api_error(out, 404, "nodeId: %.64s is not a node of cluster %s", node,
                                  r->cap[2])
                      : api_error(out, 400, "mode: must be HEALTH, PROLOG or EPILOG");
    }
    mtc_error_t err = {""};
    int worst = control_report_health(r->ctl, &cl, node, (enum health_mode)m, results, &err);
    store_cluster_release(&cl);
    if (worst < 0)
        return api_error(out, errno == EINVAL ? 400 : 500, "%s", err.text);
    out->body = json_pack("{s:s}", "status", health_status_name((enum health_status)worst));
    return 0;
}

/* behavior → (check name, severity) for a manual fault report. */
static const struct {
    const char *behavior, *check, *severity;
} behaviors[] = {
    {"PERFORMANCE", "report.performance", "REBOOT"},
    {"SILENT_DATA_CORRUPTION", "report.sdc", "REPLACE"},
    {"UNRECOVERABLE_GPU_ERROR", "report.gpu", "REPLACE"},
    {"BEHAVIOR_UNSPECIFIED", "report.unspecified", "REBOOT"},
};

int api_cluster_report_faulty(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    json_t *actions = NULL, *items = json_array(), *a;
    json_error_t jerr;
    size_t i;
    int bad = 0;
    if (!r->body ||
        json_unpack_ex(r->body, &jerr, JSON_STRICT, "{s:o}", "nodeActions", &actions) < 0 ||
        !json_is_array(actions) || json_array_size(actions) == 0) {
        bad = 1;
        api_error(out, 400, "reportFaultyNodes: body must be {\"nodeActions\": [...]}");
    }
    json_array_foreach(bad ? NULL : actions, i, a)
    {
        const char *node = NULL;
        json_t *host = NULL, *reasons = NULL;
        if (json_unpack_ex(a, &jerr, JSON_STRICT, "{s:s, s?:o}", "nodeId", &node,
                           "reportFaultyHost", &host) < 0) {
            bad = 1;
            api_error(out, 400, "nodeActions[%zu]: %s", i, jerr.text);
            break;
        }
        if (!cluster_has_node(&cl, node)) {
            bad = 1;
            api_error(out, 404, "nodeActions[%zu].nodeId: %.64s is not a node of cluster %s", i,
                      node, cl.id);
            break;
        }
        const char *check = "report.deleted", *severity = "REPLACE";
        char reason[256] = "node deleted by reportFaultyNodes (recreated: static node)";
        if (host) {
            if (json_unpack_ex(host, &jerr, JSON_STRICT, "{s:o}", "faultReasons", &reasons) < 0 ||
                !json_is_array(reasons) || json_array_size(reasons) == 0) {
                bad = 1;
                api_error(out, 400,
                          "nodeActions[%zu].reportFaultyHost.faultReasons: a non-empty list "
                          "is required",
                          i);
                break;
            }
            json_t *fr = json_array_get(reasons, 0);
            const char *behavior = "BEHAVIOR_UNSPECIFIED", *desc = "";
            if (json_unpack_ex(fr, &jerr, JSON_STRICT, "{s?:s, s?:s}", "behavior", &behavior,
                               "description", &desc) < 0) {
                bad = 1;
                api_error(out, 400, "nodeActions[%zu].reportFaultyHost.faultReasons[0]: %s", i,
                          jerr.text);
                break;
            }
            int k = -1;
            for (size_t b = 0; b < sizeof(behaviors) / sizeof(behaviors[0]); b++)
                if (strcmp(behaviors[b].behavior, behavior) == 0)
                    k = (int)b;
            if (k < 0) {
                bad = 1;
                api_error(out, 400,
                          "nodeActions[%zu].reportFaultyHost.faultReasons[0].behavior: must "
                          "be PERFORMANCE, SILENT_DATA_CORRUPTION, UNRECOVERABLE_GPU_ERROR "
                          "or BEHAVIOR_UNSPECIFIED",
                          i);
                break;
            }
            check = behaviors[k].check;
            severity = behaviors[k].severity;
            snprintf(reason, sizeof(reason), "reported %s: %.200s", behavior, desc);
        }
        json_array_append_new(items, json_pack("{s:s, s:s, s:s, s:s}", "node", node, "check", check,
                                               "reason", reason, "severity", severity));
    }
    char project[64], location[64], op_id[48] = "";
    snprintf(project, sizeof(project), "%s", cl.project);
    snprintf(location, sizeof(location), "%s", cl.location);
    store_cluster_release(&cl);
    if (bad) {
        json_decref(items);
        return 0;
    }
    mtc_error_t err = {""};
    int rc = control_start_remediation(r->ctl, project, location, r->cap[2], items, op_id, &err);
    int busy = rc < 0 && errno == EBUSY;
    json_decref(items);
    if (rc < 0 && busy)
        return api_error(out, 400, "precondition: %s", err.text);
    if (rc < 0 && !*op_id)
        return api_error(out, 500, "%s", err.text);
    return api_reply_op(r, out, op_id);
}
