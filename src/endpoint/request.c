/* request: the endpoints API's request tables — an endpoint, a deployed
 * model (deployModel's deployedModel) — and the traffic split's rules. */
#include "endpoint/endpoint.h"
#include "cluster/cluster.h"
#include "registry/registry.h"
#include "schema/schema.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const output_only[] = {"name", "deployedModels", "createTime", "updateTime",
                                          NULL};

static const struct schema_field spec_fields[] = {
    {.name = "displayName", .kind = SCHEMA_STR, .flags = SCHEMA_ONELINE, .dflt = "\"\""},
    {.name = "trafficSplit", .kind = SCHEMA_OBJ, .flags = SCHEMA_NOINPUT},
    {0},
};
static const struct schema spec_schema = {
    .fields = spec_fields, .flags = SCHEMA_PROTO3, .ignore = output_only};

json_t *endpoint_spec_parse(const json_t *body, mtc_error_t *err)
{
    json_t *empty = body ? NULL : json_object();
    json_t *s = schema_normalize(body ? body : empty, &spec_schema, "", err);
    json_decref(empty);
    return s;
}

/* model: NAME, NAME@N or NAME@alias (registry_ref_parse's rules) */
static int model_check(const struct schema_field *f, json_t **v, const char *path,
                       mtc_error_t *err)
{
    (void)f;
    struct registry_ref ref;
    mtc_error_t e = {""};
    if (registry_ref_parse(json_string_value(*v), &ref, &e) < 0)
        return schema_error(err, path, "%s", e.text);
    return 0;
}

static int cluster_check(const struct schema_field *f, json_t **v, const char *path,
                         mtc_error_t *err)
{
    (void)f;
    if (!cluster_id_valid(json_string_value(*v)))
        return schema_error(err, path, "\"%.40s\": not a cluster id (^[a-z][a-z0-9]{0,9}$)",
                            json_string_value(*v));
    return 0;
}

static int partition_check(const struct schema_field *f, json_t **v, const char *path,
                           mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (*s && !mtc_name_valid(s, 63))
        return schema_error(err, path, "\"%.64s\": not a partition name ([a-z][a-z0-9-]{0,62})",
                            s);
    return 0;
}

static const struct schema_field autoscaling_fields[] = {
    {.name = "targetConcurrentRequests",
     .kind = SCHEMA_INT,
     .flags = SCHEMA_RANGE,
     .lo = 1,
     .hi = 1024,
     .dflt = "4"},
    {.name = "scaleDownDelaySeconds",
     .kind = SCHEMA_INT,
     .flags = SCHEMA_RANGE,
     .lo = 1,
     .hi = 86400,
     .dflt = "300"},
    {0},
};
static const struct schema autoscaling_schema = {.fields = autoscaling_fields,
                                                 .flags = SCHEMA_PROTO3};

static int deployed_rules(json_t *obj, const char *path, mtc_error_t *err)
{
    json_int_t lo = json_integer_value(json_object_get(obj, "minReplicaCount"));
    json_t *hi = json_object_get(obj, "maxReplicaCount");
    if (!hi)
        json_object_set_new(obj, "maxReplicaCount", json_integer(lo));
    else if (json_integer_value(hi) < lo)
        return schema_error(err, path,
                            "maxReplicaCount (%lld) is below minReplicaCount (%lld)",
                            (long long)json_integer_value(hi), (long long)lo);
    return 0;
}

static const struct schema_field deployed_fields[] = {
    {.name = "id", .kind = SCHEMA_STR, .flags = SCHEMA_NOINPUT},
    {.name = "model",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REQUIRED | SCHEMA_NONEMPTY,
     .check = model_check},
    {.name = "modelVersion", .kind = SCHEMA_STR, .flags = SCHEMA_NOINPUT},
    {.name = "artifact", .kind = SCHEMA_STR, .flags = SCHEMA_NOINPUT},
    {.name = "cluster",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REQUIRED | SCHEMA_NONEMPTY,
     .check = cluster_check},
    {.name = "partition", .kind = SCHEMA_STR, .dflt = "\"\"", .check = partition_check},
    {.name = "minReplicaCount",
     .kind = SCHEMA_INT,
     .flags = SCHEMA_RANGE,
     .lo = 1,
     .hi = ENDPOINT_MAX_REPLICAS,
     .dflt = "1"},
    {.name = "maxReplicaCount",
     .kind = SCHEMA_INT,
     .flags = SCHEMA_RANGE,
     .lo = 1,
     .hi = ENDPOINT_MAX_REPLICAS},
    {.name = "autoscaling", .kind = SCHEMA_OBJ, .obj = &autoscaling_schema, .dflt = "{}"},
    {.name = "createTime", .kind = SCHEMA_STR, .flags = SCHEMA_NOINPUT},
    {0},
};
static const char *const deployed_ignore[] = {"replicas", NULL};
static const struct schema deployed_schema = {.fields = deployed_fields,
                                              .flags = SCHEMA_PROTO3,
                                              .ignore = deployed_ignore,
                                              .check = deployed_rules};

json_t *endpoint_deployed_parse(const json_t *in, mtc_error_t *err)
{
    if (!json_is_object(in)) {
        errprintf(err, "deployedModel: required (an object)");
        errno = EINVAL;
        return NULL;
    }
    return schema_normalize(in, &deployed_schema, "deployedModel", err);
}

json_t *endpoint_split_check(const json_t *split, const json_t *deployed, const char *new_id,
                             mtc_error_t *err)
{
    errno = EINVAL;
    if (!json_is_object(split))
        return errprintf(err, "trafficSplit: must be an object of deployedModelId: percent"),
               NULL;
    json_t *out = json_object();
    size_t i;
    json_t *d;
    json_array_foreach((json_t *)deployed, i, d)
        json_object_set_new(out, json_string_value(json_object_get(d, "id")), json_integer(0));
    const char *k;
    json_t *v;
    long sum = 0;
    json_object_foreach((json_t *)split, k, v)
    {
        const char *id = strcmp(k, "0") == 0 && new_id ? new_id : k;
        if (!json_object_get(out, id)) {
            errprintf(err, "trafficSplit: \"%.40s\" is not a model deployed on this endpoint", k);
            goto bad;
        }
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 100) {
            errprintf(err, "trafficSplit.%.40s: must be an integer percentage 0..100", k);
            goto bad;
        }
        sum += (long)json_integer_value(v);
        json_object_set(out, id, v);
    }
    if (json_object_size(out) > 0 && sum != 100) {
        errprintf(err, "trafficSplit: the percentages sum to %ld, not 100", sum);
        goto bad;
    }
    errno = 0;
    return out;
bad:
    json_decref(out);
    return NULL;
}
