/* spec_fixture: what the cluster spec tests (test_spec.c, test_spec_nodes.c)
 * share — a valid base spec, parsing test JSON, and cluster_spec_normalize's
 * error text for a spec. */
#ifndef MTC_SPEC_FIXTURE_H
#define MTC_SPEC_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "cluster/cluster.h"

/* A valid base spec; tests patch it with a JSON text where noted. */
static const char *BASE =
    "{\"nodePools\":[{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":\"a3-megagpu-8g\"},"
    "\"scalingSpec\":{\"minNodeCount\":2,\"maxNodeCount\":4}},"
    "{\"id\":\"login\",\"machineSpec\":{\"machineType\":\"n2-standard-4\"}}],"
    "\"orchestratorSpec\":{\"slurmSpec\":{\"loginNodePoolId\":\"login\","
    "\"partitions\":[{\"id\":\"a3m\",\"nodePoolIds\":[\"gpu\"]}],\"defaultPartitionId\":\"a3m\"}}}";

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j)
        printf("# bad test json: %s: %s\n", je.text, text);
    return j;
}

/* Normalize in (consumed); the error text, "" when accepted. */
static const char *normalize_err(json_t *in)
{
    static mtc_error_t err;
    memset(&err, 0, sizeof(err));
    json_t *out = cluster_spec_normalize(in, &err);
    json_decref(in);
    if (out) {
        json_decref(out);
        return "";
    }
    return err.text;
}

/* Normalize text; return the error text ("" when accepted). */
static const char *norm_err(const char *text)
{
    return normalize_err(parse(text));
}

static json_t *pool(json_t *s, size_t i)
{
    return json_array_get(json_object_get(s, "nodePools"), i);
}

#endif
