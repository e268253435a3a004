/* endpoints: the endpoints resource's handlers — create, get, list, delete,
 * :deployModel, :undeployModel — over the endpoint controller; the routed
 * .../endpoints/E/v1/... requests are proxy.c's. Bad input is refused before
 * anything changes. */
#include "api/internal.h"
#include "endpoint/endpoint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int only_members(struct api_resp *out, const json_t *body, const char *const *allowed);

static int name_ok(const char *s)
{
    return mtc_name_valid(s, 63);
}

/* The endpoint name in r->cap[2] (and the parent): 0, or -1 with out a 400. */
static int check_name(struct api_req *r, struct api_resp *out, const char *name)
{
    if (api_check_parent(r, out) < 0)
        return -1;
    if (!name_ok(name))
        return api_error(out, 400, "endpoint \"%.64s\": must match [a-z][a-z0-9-]{0,62}", name),
               -1;
    if (!r->cfg->endpoints)
        return api_error(out, 503, "this mtcd runs no endpoints controller"), -1;
    return 0;
}

static int status_of(int e)
{
    return e == ENOENT ? 404 : e == EEXIST ? 409 : e == EINVAL ? 400 : e == EBUSY ? 400 : 500;
}

static int fail(struct api_resp *out, const mtc_error_t *err)
{
    int e = errno;
    if (e == EBUSY && strncmp(err->text, "precondition: ", 14) != 0)
        return api_error(out, 400, "precondition: %s", err->text);
    return api_error(out, status_of(e), "%s", err->text);
}

static int reply_endpoint(struct api_req *r, struct api_resp *out, const char *name)
{
    struct store_endpoint e;
    if (store_endpoint_get(r->st, r->cap[0], r->cap[1], name, &e) < 0)
        return api_error(out, 404, "endpoint %s not found", name);
    out->body = endpoint_json(r->cfg->endpoints, &e);
    store_endpoint_release(&e);
    return 0;
}

int api_endpoint_create(struct api_req *r, struct api_resp *out)
{
    const char *id = api_query(r, "endpointId");
    if (!id)
        id = api_query(r, "endpoint_id");
    if (!id)
        return api_error(out, 400, "endpoint_id: required query parameter");
    char name[64];
    snprintf(name, sizeof(name), "%.63s", id);
    if (check_name(r, out, id) < 0)
        return 0;
    mtc_error_t err = {""};
    json_t *spec = endpoint_spec_parse(r->body, &err);
    if (!spec)
        return api_error(out, 400, "%s", err.text);
    int rc = endpoint_create(r->cfg->endpoints, r->cap[0], r->cap[1], name, spec, &err);
    json_decref(spec);
    if (rc < 0)
        return fail(out, &err);
    return reply_endpoint(r, out, name);
}

int api_endpoint_get(struct api_req *r, struct api_resp *out)
{
    if (check_name(r, out, r->cap[2]) < 0)
        return 0;
    return reply_endpoint(r, out, r->cap[2]);
}

int api_endpoint_list(struct api_req *r, struct api_resp *out)
{
    int size, n = 0;
    char token[128];
    if (api_check_parent(r, out) < 0 || api_page_args(r, out, name_ok, &size, token) < 0)
        return 0;
    if (!r->cfg->endpoints)
        return api_error(out, 503, "this mtcd runs no endpoints controller");
    struct store_endpoint *arr =
        store_endpoint_list(r->st, r->cap[0], r->cap[1], token, size + 1, &n);
    json_t *items = json_array();
    for (int i = 0; i < n && i < size; i++)
        json_array_append_new(items, endpoint_json(r->cfg->endpoints, &arr[i]));
    out->body = json_pack("{s:o}", "endpoints", items);
    if (n > size)
        json_object_set_new(out->body, "nextPageToken", json_string(arr[size - 1].name));
    for (int i = 0; i < n; i++)
        store_endpoint_release(&arr[i]);
    free(arr);
    return 0;
}

int api_endpoint_delete(struct api_req *r, struct api_resp *out)
{
    if (check_name(r, out, r->cap[2]) < 0)
        return 0;
    mtc_error_t err = {""};
    if (endpoint_delete(r->cfg->endpoints, r->cap[0], r->cap[1], r->cap[2], &err) < 0)
        return fail(out, &err);
    out->body = json_object();
    return 0;
}

/* PATCH: displayName and trafficSplit (updateMask, if given, names which). */
int api_endpoint_patch(struct api_req *r, struct api_resp *out)
{
    if (check_name(r, out, r->cap[2]) < 0)
        return 0;
    if (!r->body)
        return api_error(out, 400, "request body: {\"trafficSplit\": {...}} or "
                                   "{\"displayName\": ...} is required");
    static const char *const allowed[] = {"displayName", "display_name", "trafficSplit",
                                          "traffic_split", NULL};
    if (only_members(out, r->body, allowed) < 0)
        return 0;
    json_t *name = json_object_get(r->body, "displayName");
    name = name ? name : json_object_get(r->body, "display_name");
    json_t *split = json_object_get(r->body, "trafficSplit");
    split = split ? split : json_object_get(r->body, "traffic_split");
    const char *mask = api_query(r, "updateMask");
    mask = mask ? mask : api_query(r, "update_mask");
    if (mask) {
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", mask);
        int want_name = 0, want_split = 0;
        for (char *save = NULL, *f = strtok_r(buf, ",", &save); f;
             f = strtok_r(NULL, ",", &save)) {
            char camel[64];
            mtc_camel_case(f, camel, sizeof(camel));
            if (strcmp(camel, "displayName") == 0)
                want_name = 1;
            else if (strcmp(camel, "trafficSplit") == 0)
                want_split = 1;
            else
                return api_error(out, 400,
                                 "updateMask: \"%.60s\": only displayName and trafficSplit "
                                 "can change",
                                 f);
        }
        name = want_name ? name : NULL;
        split = want_split ? split : NULL;
    }
    if (name && (!json_is_string(name) || strpbrk(json_string_value(name), "\r\n")))
        return api_error(out, 400, "displayName: must be a string of one line");
    mtc_error_t err = {""};
    if (endpoint_update(r->cfg->endpoints, r->cap[0], r->cap[1], r->cap[2],
                        name ? json_string_value(name) : NULL, split, &err) < 0)
        return fail(out, &err);
    return reply_endpoint(r, out, r->cap[2]);
}

/* Replicas run as mtcd's user: as root, only an admin may start them. */
static int guard_root(struct api_req *r, struct api_resp *out)
{
    if (geteuid() == 0 && r->who.role < ROLE_ADMIN)
        return api_error(out, 403,
                         "endpoints: mtcd runs as root, so its replicas would run as root: only "
                         "an admin may deploy"),
               -1;
    return 0;
}

static int only_members(struct api_resp *out, const json_t *body, const char *const *allowed)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v)
    {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= strcmp(*a, k) == 0;
        if (!ok)
            return api_error(out, 400, "%s: unknown field", k), -1;
    }
    return 0;
}

int api_endpoint_deploy(struct api_req *r, struct api_resp *out)
{
    if (check_name(r, out, r->cap[2]) < 0 || guard_root(r, out) < 0)
        return 0;
    static const char *const allowed[] = {"deployedModel", "deployed_model", "trafficSplit",
                                          "traffic_split", NULL};
    if (!r->body)
        return api_error(out, 400, "request body: {\"deployedModel\": {...}} is required");
    if (only_members(out, r->body, allowed) < 0)
        return 0;
    json_t *in = json_object_get(r->body, "deployedModel");
    if (!in)
        in = json_object_get(r->body, "deployed_model");
    json_t *split = json_object_get(r->body, "trafficSplit");
    if (!split)
        split = json_object_get(r->body, "traffic_split");
    mtc_error_t err = {""};
    json_t *d = endpoint_deployed_parse(in, &err);
    if (!d)
        return api_error(out, 400, "%s", err.text);
    char id[16];
    int rc = endpoint_deploy(r->cfg->endpoints, r->cap[0], r->cap[1], r->cap[2], d, split, id,
                             &err);
    json_decref(d);
    if (rc < 0)
        return fail(out, &err);
    struct store_endpoint e;
    if (store_endpoint_get(r->st, r->cap[0], r->cap[1], r->cap[2], &e) < 0)
        return api_error(out, 404, "endpoint %s not found", r->cap[2]);
    json_t *full = endpoint_json(r->cfg->endpoints, &e);
    store_endpoint_release(&e);
    json_t *mine = NULL, *x;
    size_t i;
    json_array_foreach(json_object_get(full, "deployedModels"), i, x)
    {
        if (strcmp(json_string_value(json_object_get(x, "id")), id) == 0)
            mine = x;
    }
    out->body = json_pack("{s:O, s:O}", "deployedModel", mine ? mine : json_null(), "endpoint",
                          full);
    json_decref(full);
    return 0;
}

int api_endpoint_undeploy(struct api_req *r, struct api_resp *out)
{
    if (check_name(r, out, r->cap[2]) < 0 || guard_root(r, out) < 0)
        return 0;
    static const char *const allowed[] = {"deployedModelId", "deployed_model_id", "trafficSplit",
                                          "traffic_split", NULL};
    if (!r->body)
        return api_error(out, 400, "request body: {\"deployedModelId\": ID} is required");
    if (only_members(out, r->body, allowed) < 0)
        return 0;
    json_t *id = json_object_get(r->body, "deployedModelId");
    if (!id)
        id = json_object_get(r->body, "deployed_model_id");
    if (!json_is_string(id))
        return api_error(out, 400, "deployedModelId: required (a string)");
    json_t *split = json_object_get(r->body, "trafficSplit");
    if (!split)
        split = json_object_get(r->body, "traffic_split");
    mtc_error_t err = {""};
    if (endpoint_undeploy(r->cfg->endpoints, r->cap[0], r->cap[1], r->cap[2],
                          json_string_value(id), split, &err) < 0)
        return fail(out, &err);
    return reply_endpoint(r, out, r->cap[2]);
}

/* The routed paths (…/endpoints/E/v1/…) are proxied by the HTTP server
 * (proxy.c) without this handler; a transport without a proxy (the fuzz
 * harness) gets the checks and a 503. */
int api_endpoint_route(struct api_req *r, struct api_resp *out)
{
    if (check_name(r, out, r->cap[2]) < 0)
        return 0;
    return api_error(out, 503, "endpoint %s: requests are routed by mtcd's HTTP server only",
                     r->cap[2]);
}
