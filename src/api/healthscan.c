/* healthscan: POST …/modelDevelopmentClusters/C:healthScan — the request
 * checked (schema table, then the cluster's nodes and Slurm's view of them in
 * control_healthscan_prepare) before anything is stored, then a HEALTH_SCAN
 * operation whose result is the scan's report (docs/healthscan.md). */
#include "api/internal.h"
#include "control/healthscan.h"

#include <errno.h>
#include <string.h>

int api_cluster_healthscan(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    mtc_error_t err = {""};
    int http = 400;
    json_t *body =
        r->body ? schema_normalize(r->body, &control_scan_request_schema, "", &err) : NULL;
    json_t *req = body ? control_healthscan_prepare(r->ctl, &cl, body, &http, &err) : NULL;
    json_decref(body);
    if (!req) {
        store_cluster_release(&cl);
        return api_error(out, http, "healthScan: %s",
                         r->body ? err.text : "body must be {\"checks\": [...], ...}");
    }
    struct store_op op;
    control_op_init(&op, cl.project, cl.location, cl.id,
                    schema_enum_name(&control_op_kind_enum, CONTROL_HEALTHSCAN));
    op.request = req;
    store_cluster_release(&cl);
    char busy[48] = "";
    int rc = control_begin_op(r->ctl, &op, CLUSTER_STATE_RUNNING, busy, &err);
    json_decref(req);
    if (rc < 0)
        return api_error(out,
                         errno == EBUSY    ? 400
                         : errno == ENOENT ? 404
                                           : 500,
                         "%s%s", errno == EBUSY ? "precondition: " : "", err.text);
    return api_reply_op(r, out, op.id);
}
