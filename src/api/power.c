/* power: POST …/clusters/C:powerNodes — Slurm's power saving (mtc-power,
 * with the cluster's own power token) or an admin asks for elastic nodes to
 * be started (RESUME) or stopped (SUSPEND, RESUME_FAILED). */
#include "api/internal.h"
#include "control/power.h"
#include "control/control.h"
#include "provider/provider.h"

#include <errno.h>
#include <string.h>

#define POWER_MAX_NODES 256

int api_power_nodes(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    /* a node token speaks only for its own cluster's power programs */
    if (r->who.role == ROLE_NODE &&
        (strcmp(r->who.cluster, cl.id) != 0 || strcmp(r->who.node, PROVIDER_POWER_PRINCIPAL) != 0)) {
        store_cluster_release(&cl);
        return api_error(out, 403, "only cluster %s's power programs or an admin may power its nodes",
                         r->cap[2]);
    }
    const char *action = NULL;
    json_t *nodes = NULL;
    json_error_t jerr;
    if (!r->body || json_unpack_ex(r->body, &jerr, JSON_STRICT, "{s:s, s:o}", "action", &action,
                                   "nodes", &nodes) < 0) {
        store_cluster_release(&cl);
        return api_error(out, 400,
                         "powerNodes: body must be {\"action\": RESUME|SUSPEND|RESUME_FAILED, "
                         "\"nodes\": [...]}: %s",
                         r->body ? jerr.text : "missing body");
    }
    int a = schema_enum_parse(&control_power_enum, action, 0);
    size_t i, n = json_array_size(nodes);
    json_t *v;
    const char *bad = NULL;
    if (a < 0 || !json_is_array(nodes) || n == 0 || n > POWER_MAX_NODES) {
        store_cluster_release(&cl);
        return a < 0 ? api_error(out, 400, "action: \"%.32s\" must be RESUME, SUSPEND or "
                                           "RESUME_FAILED",
                                 action)
                     : api_error(out, 400, "nodes: must be an array of 1..%d node names",
                                 POWER_MAX_NODES);
    }
    json_array_foreach(nodes, i, v)
    {
        const char *name = json_string_value(v);
        int known = 0;
        size_t k;
        json_t *sn;
        json_array_foreach(cl.nodes, k, sn)
        {
            const char *s = json_string_value(json_object_get(sn, "instanceName"));
            known |= name && s && strcmp(s, name) == 0;
        }
        if (!name || !mtc_name_valid(name, 63) || !known) {
            bad = name ? name : "(not a string)";
            break;
        }
    }
    if (bad) {
        api_error(out, 404, "nodes: \"%.64s\" is not a node of cluster %s", bad, cl.id);
        store_cluster_release(&cl);
        return 0;
    }
    mtc_error_t err = {""};
    int rc = control_power_nodes(r->ctl, &cl, (enum control_power)a, nodes, &err);
    store_cluster_release(&cl);
    if (rc < 0)
        return api_error(out, 500, "%s", err.text);
    out->body = json_pack("{s:s, s:O}", "action", action, "nodes", nodes);
    return 0;
}
