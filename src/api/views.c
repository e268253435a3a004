/* views: the API's JSON for what the store holds — a cluster resource (its
 * spec, state, nodes with their health, events), a dataset with its
 * versions, a long-running operation, a token — in the cloud API's shape (reference/api.md). Nothing else builds
 * wire JSON for these. */
#include "api/api.h"

#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "control/control.h"
#include "dataset/dataset.h"

const char *api_node_state(const char *state, const char *remediation)
{
    if (!*remediation || strcmp(remediation, "QUEUED") == 0) // a QUEUED node waits in service
        return state;
    return strcmp(remediation, "FAILED") == 0 ? "ERROR" : "UPDATING";
}

/* Add each node's last health report and remediation state to nodesStatus:
 * a node being remediated is UPDATING, one given up on is ERROR (one QUEUED
 * for a remediation keeps its state). */
static void overlay_health(struct store *st, const char *id,
                           const struct cluster_node_index *ix)
{
    int n = 0;
    struct store_health *h = store_health_status_list(st, id, &n);
    for (int k = 0; k < n; k++) {
        json_t *node = cluster_node_index_get(ix, h[k].node);
        if (!node)
            continue;
        char ts[40];
        json_object_set_new(node, "health", json_string(h[k].status));
        json_object_set_new(node, "healthTime",
                            json_string(mtc_time_rfc3339(h[k].time_ms, ts, sizeof(ts))));
        if (*h[k].failing_check) {
            json_object_set_new(node, "failingCheck", json_string(h[k].failing_check));
            json_object_set_new(node, "failingReason", json_string(h[k].reason));
        }
        if (*h[k].remediation)
            json_object_set_new(node, "remediation", json_string(h[k].remediation));
        const char *shown = api_node_state(NULL, h[k].remediation);
        if (shown)
            json_object_set_new(node, "nodeState", json_string(shown));
    }
    store_health_free(h, n);
}

/* Add each node's last health scan (mtc healthscan) to nodesStatus as
 * lastHealthScan {time, state, checks, reason, operation}. */
static void overlay_scans(struct store *st, const char *id, const struct cluster_node_index *ix)
{
    int n = 0;
    struct store_scan *sc = store_scan_list(st, id, &n);
    for (int k = 0; k < n; k++) {
        json_t *node = cluster_node_index_get(ix, sc[k].node);
        if (!node)
            continue;
        char ts[40];
        json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "time",
                              mtc_time_rfc3339(sc[k].time_ms, ts, sizeof(ts)), "state",
                              sc[k].state, "checks", sc[k].checks, "operation", sc[k].op_id);
        if (*sc[k].reason)
            json_object_set_new(o, "reason", json_string(sc[k].reason));
        json_object_set_new(node, "lastHealthScan", o);
    }
    free(sc);
}

int api_owner_sees(const struct api_principal *who, const char *owner)
{
    if (!who || who->role >= ROLE_ADMIN)
        return 1;
    if (*who->user)
        return *owner && strcmp(owner, who->user) == 0;
    return !*owner;
}

json_t *api_events_json(struct store *st, const char *cluster_id, int limit,
                        const struct api_principal *who)
{
    int n = 0;
    struct store_event *ev = store_events(st, cluster_id, limit, &n);
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        char ts[40];
        json_t *e =
            json_pack("{s:s, s:s}", "eventTime", mtc_time_rfc3339(ev[i].time_ms, ts, sizeof(ts)),
                      "eventType", ev[i].type);
        if (*ev[i].node)
            json_object_set_new(e, "nodeName", json_string(ev[i].node));
        /* a job's run (its log line, its metrics) is its owner's */
        int whole = !ev[i].of_job || api_owner_sees(who, ev[i].owner);
        json_object_set_new(e, "description", json_string(whole ? ev[i].message : ev[i].brief));
        json_array_append_new(arr, e);
    }
    free(ev);
    return arr;
}

json_t *api_cluster_json(struct store *st, struct provider *prov, const struct store_cluster *cl,
                         const struct api_principal *events_for)
{
    json_t *j = json_deep_copy(cl->spec);
    char ts[40];
    json_object_set_new(j, "name",
                        json_sprintf("projects/%s/locations/%s/modelDevelopmentClusters/%s",
                                     cl->project, cl->location, cl->id));
    json_object_set_new(j, "createTime", json_string(mtc_time_rfc3339(cl->create_ms, ts, 40)));
    json_object_set_new(j, "updateTime", json_string(mtc_time_rfc3339(cl->update_ms, ts, 40)));
    json_t *status = json_pack("{s:s}", "state", cl->state);
    json_t *nodes = cl->nodes ? json_deep_copy(cl->nodes) : json_array();
    /* one by-name index joins the nodes with their health and scan rows */
    struct cluster_node_index *ix = cluster_node_index_create(nodes);
    overlay_health(st, cl->id, ix);
    overlay_scans(st, cl->id, ix);
    cluster_node_index_destroy(ix);
    json_object_set_new(status, "nodesStatus", nodes);
    /* a cluster on hosts: every host, its node or role (spare, quarantined) */
    json_t *hosts = prov ? provider_hosts(prov, cl->id) : NULL;
    if (hosts)
        json_object_set_new(status, "hosts", hosts);
    /* with Slurm's backup controller: which one is in control */
    json_t *ctl = prov ? provider_controller(prov, cl->id) : NULL;
    if (ctl)
        json_object_set_new(status, "controller", ctl);
    json_object_set_new(j, "clusterStatus", status);
    if (events_for)
        json_object_set_new(j, "clusterEvents", api_events_json(st, cl->id, 100, events_for));
    return j;
}

/* A finished create or update answers with the cluster resource (as it is
 * now); the other kinds with what they stored (remediation: its nodes;
 * delete: google.protobuf.Empty). */
static json_t *op_response(struct store *st, struct provider *prov, const struct store_op *op)
{
    if (op->response)
        return json_incref(op->response);
    int kind = schema_enum_parse(&control_op_kind_enum, op->kind, 0);
    struct store_cluster cl;
    if ((kind == CONTROL_CREATE || kind == CONTROL_UPDATE) &&
        store_cluster_get(st, op->cluster_id, &cl) == 0) {
        json_t *j = api_cluster_json(st, prov, &cl, NULL);
        store_cluster_release(&cl);
        return j;
    }
    return json_object();
}

json_t *api_op_json(struct store *st, struct provider *prov, const struct store_op *op)
{
    char c_ts[40], u_ts[40];
    json_t *j = json_pack(
        "{s:o, s:b, s:{s:{s:s, s:s}, s:s, s:s, s:s}}", "name",
        json_sprintf("projects/%s/locations/%s/operations/%s", op->project, op->location, op->id),
        "done", op->done, "metadata", "genericMetadata", "createTime",
        mtc_time_rfc3339(op->create_ms, c_ts, 40), "updateTime",
        mtc_time_rfc3339(op->update_ms, u_ts, 40), "progressMessage", op->progress, "verb",
        op->kind, "target", op->cluster_id);
    json_object_set_new(json_object_get(j, "metadata"), "target",
                        op->target[0]
                            ? json_sprintf("projects/%s/locations/%s/%s", op->project,
                                           op->location, op->target)
                            : json_sprintf("projects/%s/locations/%s/modelDevelopmentClusters/%s",
                                           op->project, op->location, op->cluster_id));
    if (op->done && op->err_code)
        json_object_set_new(
            j, "error", json_pack("{s:i, s:s}", "code", op->err_code, "message", op->err_message));
    else if (op->done)
        json_object_set_new(j, "response", op_response(st, prov, op));
    return j;
}

json_t *api_tokens_json(struct store *st)
{
    int n = 0;
    struct store_token *t = store_token_list(st, &n);
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        char ts[40];
        json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "id", t[i].id, "name", t[i].name, "role",
                              t[i].who.role, "createTime",
                              mtc_time_rfc3339(t[i].create_ms, ts, sizeof(ts)));
        if (*t[i].who.user)
            json_object_set_new(o, "user", json_string(t[i].who.user));
        if (*t[i].who.node) {
            json_object_set_new(o, "cluster", json_string(t[i].who.cluster));
            json_object_set_new(o, "node", json_string(t[i].who.node));
        }
        json_t *scope = *t[i].who.scope ? json_loads(t[i].who.scope, 0, NULL) : NULL;
        if (scope) { /* a registrar's: what it may register, from where */
            json_object_set_new(o, "cluster", json_string(t[i].who.cluster));
            json_object_set_new(o, "scope", scope);
        }
        json_array_append_new(arr, o);
    }
    free(t);
    return arr;
}
