/* report: the agent's side of mtcd's :reportHealth — the body and the POST
 * (mtc_mtcd_post: unix socket or URL, node token) — shared by mtc-agent and
 * the load generator that plays many agents (mtc-simload), so both send the
 * same. */
#include "health/health.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *health_report_body(const char *node, enum health_mode mode, json_t *results)
{
    return json_pack("{s:s, s:s, s:o}", "nodeId", node, "mode",
                     schema_enum_name(&health_mode_enum, (int)mode), "results", results);
}

int health_report_post(const struct health_reporter *rep, const char *body, long *status,
                       mtc_error_t *err)
{
    char path[512];
    long code = 0;
    snprintf(path, sizeof(path),
             "/v1beta1/projects/%s/locations/%s/modelDevelopmentClusters/%s:reportHealth",
             rep->project, rep->location, rep->cluster);
    const struct mtc_mtcd m = {
        .socket = rep->socket, .url = rep->url, .ca_file = rep->ca_file, .token = rep->token};
    int rc = mtc_mtcd_post(&m, path, body, 5, &code, NULL, err);
    if (status)
        *status = code;
    if (rc < 0)
        return -1;
    if (code < 200 || code > 299)
        return errprintf(err, "mtcd answered HTTP %ld to reportHealth", code);
    return 0;
}
