/* clusters: the modelDevelopmentClusters resource — create, get, list,
 * patch (updateMask), delete, :env and :checkStorage — and the cluster
 * lookups the other handler files share (api_load_cluster). Everything is
 * checked before the store is touched, so a rejected request changes nothing. */
#include "api/internal.h"
#include "cluster/cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int api_check_cluster_id(const char *id, struct api_resp *out)
{
    if (!cluster_id_valid(id))
        return api_error(out, 400,
                         "cluster id \"%.40s\": must match ^[a-z][a-z0-9]{0,9}$ (1-10 "
                         "lowercase letters and digits, starting with a letter)",
                         id),
               -1;
    return 0;
}

/* The cluster named by the path into cl: whole, or its head only (no spec,
 * no nodesStatus: store_cluster_head); 404 if absent or under another parent. */
static int find_cluster(struct api_req *r, struct api_resp *out, struct store_cluster *cl,
                        int whole)
{
    if (api_check_parent(r, out) < 0 || api_check_cluster_id(r->cap[2], out) < 0)
        return -1;
    if ((whole ? store_cluster_get : store_cluster_head)(r->st, r->cap[2], cl) < 0)
        return api_error(out, 404, "cluster %s not found", r->cap[2]), -1;
    if (strcmp(cl->project, r->cap[0]) != 0 || strcmp(cl->location, r->cap[1]) != 0) {
        store_cluster_release(cl);
        return api_error(out, 404, "cluster %s not found in projects/%s/locations/%s", r->cap[2],
                         r->cap[0], r->cap[1]),
               -1;
    }
    return 0;
}

int api_load_cluster(struct api_req *r, struct api_resp *out, struct store_cluster *cl)
{
    return find_cluster(r, out, cl, 1);
}

int api_load_cluster_head(struct api_req *r, struct api_resp *out, struct store_cluster *cl)
{
    return find_cluster(r, out, cl, 0);
}

/* Begin op on an existing cluster (setting its state) and start it; the
 * cluster being busy is FAILED_PRECONDITION naming the running operation. */
static int begin_op(struct api_req *r, struct api_resp *out, struct store_op *op,
                    enum cluster_state state)
{
    char busy[48] = "";
    mtc_error_t err = {""};
    if (control_begin_op(r->ctl, op, state, busy, &err) < 0) {
        if (errno == EBUSY)
            return api_error(out, 400, "precondition: %s", err.text);
        return api_error(out, errno == ENOENT ? 404 : 500, "%s", err.text);
    }
    return api_reply_op(r, out, op->id);
}

/* A spec's root-executing fields (cluster_spec_privileged_change) are an
 * admin's to set or change; a new NVML library must be one mtcd allows. */
static int guard_spec(struct api_req *r, struct api_resp *out, const json_t *old,
                      const json_t *spec)
{
    char field[200];
    if (r->who.role < ROLE_ADMIN && cluster_spec_privileged_change(old, spec, field, sizeof(field)))
        return api_error(out, 403,
                         "%s: only an admin may set or change %s (mtc or Slurm would run "
                         "something, connect to a machine or read a credential as root)",
                         field, strchr(field, ',') ? "these fields" : "this field"),
               -1;
    const char *path = "healthPolicy.nvmlLibrary";
    const char *lib =
        json_string_value(json_object_get(json_object_get(spec, "healthPolicy"), "nvmlLibrary"));
    const char *was = old ? json_string_value(json_object_get(json_object_get(old, "healthPolicy"),
                                                              "nvmlLibrary"))
                          : NULL;
    if (!lib || !*lib || (was && strcmp(was, lib) == 0))
        return 0;
    for (const char *const *a = r->cfg ? r->cfg->nvml_libraries : NULL; a && *a; a++)
        if (strcmp(*a, lib) == 0)
            return 0;
    return api_error(out, 400,
                     "%s: \"%.200s\" is not an NVML library this mtcd allows (mtcd "
                     "--nvml-library PATH)",
                     path, lib),
           -1;
}

/* A host serves one cluster at a time: none of spec's hosts (and spares) may
 * be listed by another stored cluster. 409 naming the host and the cluster. */
static int guard_hosts(struct api_req *r, struct api_resp *out, const char *id, const json_t *spec)
{
    if (!cluster_spec_on_hosts(spec))
        return 0;
    json_t *ids = store_cluster_ids(r->st);
    size_t k;
    json_t *other;
    int rc = 0;
    json_array_foreach(ids, k, other)
    {
        struct store_cluster cl;
        if (!strcmp(json_string_value(other), id) ||
            store_cluster_get(r->st, json_string_value(other), &cl) < 0)
            continue;
        char where[64];
        const char *h = cluster_spec_shared_host(spec, cl.spec, where, sizeof(where));
        if (h) {
            api_error(out, 409,
                      "%s: host %s belongs to cluster %s (projects/%s/locations/%s); a host "
                      "serves one cluster at a time",
                      where, h, cl.id, cl.project, cl.location);
            rc = -1;
        }
        store_cluster_release(&cl);
        if (h)
            break;
    }
    json_decref(ids);
    return rc;
}

int api_cluster_create(struct api_req *r, struct api_resp *out)
{
    if (api_check_parent(r, out) < 0)
        return 0;
    const char *id = api_query(r, "modelDevelopmentClusterId");
    if (!id)
        id = api_query(r, "model_development_cluster_id");
    if (!id)
        return api_error(out, 400, "model_development_cluster_id: required query parameter");
    if (api_check_cluster_id(id, out) < 0)
        return 0;
    if (!r->body)
        return api_error(out, 400, "request body: a ModelDevelopmentCluster object is required");
    mtc_error_t err = {""};
    json_t *spec = cluster_spec_normalize(r->body, &err);
    if (!spec)
        return api_error(out, 400, "%s", err.text);
    if (guard_spec(r, out, NULL, spec) < 0 || guard_hosts(r, out, id, spec) < 0) {
        json_decref(spec);
        return 0;
    }
    struct store_cluster cl = {.spec = spec};
    snprintf(cl.id, sizeof(cl.id), "%s", id);
    snprintf(cl.project, sizeof(cl.project), "%.63s", r->cap[0]);
    snprintf(cl.location, sizeof(cl.location), "%.63s", r->cap[1]);
    snprintf(cl.state, sizeof(cl.state), "%s",
             schema_enum_name(&cluster_state_enum, CLUSTER_STATE_PROVISIONING));
    struct store_op op;
    control_op_init(&op, r->cap[0], r->cap[1], id,
                    schema_enum_name(&control_op_kind_enum, CONTROL_CREATE));
    op.request = spec;
    int rc = control_create_cluster(r->ctl, &cl, &op, &err);
    json_decref(spec);
    if (rc < 0)
        return api_error(out, errno == EEXIST ? 409 : 500, "%s", err.text);
    return api_reply_op(r, out, op.id);
}

/* A GET's kept-view key: its path (the parent and id are in it) and the
 * page arguments that shape it. */
/* A kept reply's key: the path, the page asked for and (a cluster's events
 * show a job's run to its owners only) whose eyes it was built for. */
static void view_key(char *key, size_t len, const char *path, int size, const char *token,
                     const struct api_principal *who)
{
    snprintf(key, len, "%s?%d&%s#%s%s", path, size, token,
             who->role >= ROLE_ADMIN ? "admin"
             : *who->user            ? "user:"
                                     : "unbound",
             who->role >= ROLE_ADMIN ? "" : who->user);
}

int api_cluster_get(struct api_req *r, struct api_resp *out)
{
    char key[400];
    int64_t gen = store_changes(r->st); /* before the reads */
    view_key(key, sizeof(key), r->path, 0, "", &r->who);
    if (api_check_parent(r, out) < 0 || api_check_cluster_id(r->cap[2], out) < 0 ||
        api_view_get(r->st, key, gen, out))
        return 0;
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    out->body = api_cluster_json(r->st, r->prov, &cl, &r->who);
    api_view_put(r->st, key, gen, out->body);
    store_cluster_release(&cl);
    return 0;
}

int api_cluster_list(struct api_req *r, struct api_resp *out)
{
    int size;
    char token[128];
    char key[400];
    int64_t gen = store_changes(r->st); /* before the reads */
    if (api_check_parent(r, out) < 0 || api_page_args(r, out, cluster_id_valid, &size, token) < 0)
        return 0;
    view_key(key, sizeof(key), r->path, size, token, &r->who);
    if (api_view_get(r->st, key, gen, out))
        return 0;
    int n = 0;
    /* one extra row tells whether another page follows */
    struct store_cluster *arr =
        store_cluster_list(r->st, r->cap[0], r->cap[1], token, size + 1, &n);
    json_t *items = json_array();
    for (int i = 0; i < n && i < size; i++)
        json_array_append_new(items, api_cluster_json(r->st, r->prov, &arr[i], NULL));
    out->body = json_pack("{s:o}", "modelDevelopmentClusters", items);
    if (n > size)
        json_object_set_new(out->body, "nextPageToken", json_string(arr[size - 1].id));
    api_view_put(r->st, key, gen, out->body);
    for (int i = 0; i < n; i++)
        store_cluster_release(&arr[i]);
    free(arr);
    return 0;
}

/* The member of obj named key in camelCase or its snake_case spelling. */
static json_t *get_field(json_t *obj, const char *camel_key)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        char c[128];
        mtc_camel_case(k, c, sizeof(c));
        if (strcmp(c, camel_key) == 0)
            return v;
    }
    return NULL;
}

/* 1 when a camelCase top-level field is output only. */
static int output_only(const char *camel)
{
    for (const char *const *o = cluster_output_only; *o; o++)
        if (strcmp(*o, camel) == 0)
            return 1;
    return 0;
}

/* Copy each updateMask path from body into spec (absent in body → removed). */
static int apply_mask(json_t *spec, json_t *body, const char *mask, struct api_resp *out)
{
    char *copy = strdup(mask), *save = NULL;
    int rc = 0;
    for (char *path = strtok_r(copy, ",", &save); path && rc == 0;
         path = strtok_r(NULL, ",", &save)) {
        while (*path == ' ')
            path++;
        json_t *dst = spec, *src = body;
        char *seg_save = NULL, cseg[128] = "";
        char *seg = strtok_r(path, ".", &seg_save);
        mtc_camel_case(seg ? seg : "", cseg, sizeof(cseg));
        if (output_only(cseg))
            rc = (api_error(out, 400, "updateMask: %s is output only", cseg), -1);
        if (!seg || rc)
            break;
        for (;;) {
            char *next = strtok_r(NULL, ".", &seg_save);
            if (!next)
                break;
            /* descend one level, creating intermediate objects in spec */
            json_t *d = json_object_get(dst, cseg);
            if (!json_is_object(d)) {
                d = json_object();
                json_object_set_new(dst, cseg, d);
            }
            dst = d;
            src = src ? get_field(src, cseg) : NULL;
            if (src && !json_is_object(src))
                src = NULL;
            mtc_camel_case(next, cseg, sizeof(cseg));
        }
        json_t *v = src ? get_field(src, cseg) : NULL;
        if (v)
            json_object_set(dst, cseg, v);
        else
            json_object_del(dst, cseg);
    }
    free(copy);
    return rc;
}

int api_cluster_patch(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    if (!r->body) {
        store_cluster_release(&cl);
        return api_error(out, 400, "request body: a ModelDevelopmentCluster object is required");
    }
    json_t *merged = json_deep_copy(cl.spec);
    const char *mask = api_query(r, "updateMask");
    if (!mask)
        mask = api_query(r, "update_mask");
    int rc = 0;
    if (mask && *mask) {
        rc = apply_mask(merged, r->body, mask, out);
    } else { /* no mask: every field present in the body is replaced */
        const char *k;
        json_t *v;
        json_object_foreach(r->body, k, v)
        {
            char c[128];
            mtc_camel_case(k, c, sizeof(c));
            if (!output_only(c))
                json_object_set(merged, c, v);
        }
    }
    mtc_error_t err = {""};
    json_t *spec = rc == 0 ? cluster_spec_normalize(merged, &err) : NULL;
    json_decref(merged);
    if (rc == 0 && !spec)
        api_error(out, 400, "%s", err.text);
    if (spec && cluster_spec_on_hosts(spec) != cluster_spec_on_hosts(cl.spec)) {
        api_error(out, 400,
                  "nodePools: cluster %s runs %s; a cluster cannot move between local and hosts "
                  "(delete it and create it again)",
                  cl.id, cluster_spec_on_hosts(cl.spec) ? "on hosts" : "locally");
        json_decref(spec);
        spec = NULL;
    }
    if (spec && (guard_spec(r, out, cl.spec, spec) < 0 || guard_hosts(r, out, cl.id, spec) < 0)) {
        json_decref(spec);
        spec = NULL;
    }
    if (!spec) {
        store_cluster_release(&cl);
        return 0;
    }
    struct store_op op;
    control_op_init(&op, cl.project, cl.location, cl.id,
                    schema_enum_name(&control_op_kind_enum, CONTROL_UPDATE));
    op.request = spec;
    store_cluster_release(&cl);
    rc = begin_op(r, out, &op, CLUSTER_STATE_UPDATING);
    json_decref(spec);
    return rc;
}

int api_cluster_delete(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    struct store_op op;
    control_op_init(&op, cl.project, cl.location, cl.id,
                    schema_enum_name(&control_op_kind_enum, CONTROL_DELETE));
    store_cluster_release(&cl);
    return begin_op(r, out, &op, CLUSTER_STATE_STOPPING);
}

int api_cluster_env(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    int running = schema_enum_parse(&cluster_state_enum, cl.state, 0) == CLUSTER_STATE_RUNNING;
    /* the spec's experiment root (a checked path: safe in single quotes) for mtc run */
    char root[400] = "";
    const char *er = json_string_value(json_object_get(cl.spec, "experimentRoot"));
    if (er && *er)
        snprintf(root, sizeof(root),
                 "# mtc run: experiments and checkpoints\n"
                 "export MTC_EXPERIMENT_ROOT='%.255s'\n",
                 er);
    store_cluster_release(&cl);
    if (!running)
        return api_error(out, 400, "precondition: cluster %s is not RUNNING", r->cap[2]);
    mtc_error_t err = {""};
    char *script = provider_env(r->prov, r->cap[2], &err);
    if (!script)
        return api_error(out, 500, "cluster %s: %s", r->cap[2], err.text);
    out->body = json_pack("{s:s+}", "script", script, root);
    free(script);
    /* a login node on another host: how `mtc login` reaches it */
    json_t *login = provider_login(r->prov, r->cap[2], &err);
    if (login)
        json_object_set_new(out->body, "login", login);
    return 0;
}

/* :checkStorage — before `mtc run` submits: every host of the cluster sees
 * the experiment root (the controller's marker there). {"experimentRoot"}
 * ("" when the spec sets none), or FAILED_PRECONDITION naming the hosts. */
int api_cluster_check_storage(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    if (schema_enum_parse(&cluster_state_enum, cl.state, 0) != CLUSTER_STATE_RUNNING) {
        store_cluster_release(&cl);
        return api_error(out, 400, "precondition: cluster %s is not RUNNING", r->cap[2]);
    }
    mtc_error_t err = {""};
    int rc = provider_check_storage(r->prov, r->cap[2], cl.spec, &err);
    const char *root = json_string_value(json_object_get(cl.spec, "experimentRoot"));
    if (rc == 0)
        out->body = json_pack("{s:s}", "experimentRoot", root ? root : "");
    store_cluster_release(&cl);
    return rc == 0 ? 0 : api_error(out, 400, "precondition: cluster %s: %s", r->cap[2], err.text);
}
