/* routes: the API's route table and its handlers — clusters (create, get,
 * list, patch, delete, env), operations, tokens, health (datasets' handlers
 * are in datasets.c, trainingJobs' in jobs.c, models' in models.c). Handlers validate
 * everything before touching the store, so a rejected request changes nothing. */
#include "api/internal.h"
#include "api/console.h"
#include "cluster/cluster.h"
#include "health/health.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Project and location name path segments of every resource route. */
static int check_parent(struct api_req *r, struct api_resp *out)
{
    if (!mtc_name_valid(r->cap[0], 63))
        return api_error(out, 400, "project \"%s\": must match [a-z][a-z0-9-]{0,62}", r->cap[0]),
               -1;
    if (!mtc_name_valid(r->cap[1], 63))
        return api_error(out, 400, "location \"%s\": must match [a-z][a-z0-9-]{0,62}", r->cap[1]),
               -1;
    return 0;
}

static int check_cluster_id(const char *id, struct api_resp *out)
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
    if (check_parent(r, out) < 0 || check_cluster_id(r->cap[2], out) < 0)
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

/* Reply with a stored operation. */
static int reply_op(struct api_req *r, struct api_resp *out, const char *op_id)
{
    struct store_op op;
    if (store_op_get(r->st, op_id, &op) < 0)
        return api_error(out, 500, "operation %s vanished", op_id);
    out->body = api_op_json(r->st, r->ctl, &op);
    store_op_release(&op);
    return 0;
}

/* Begin op on an existing cluster (setting its state) and start it; the
 * cluster being busy is FAILED_PRECONDITION naming the running operation. */
static int begin_op(struct api_req *r, struct api_resp *out, struct store_op *op,
                    enum control_state state)
{
    char busy[48] = "";
    mtc_error_t err = {""};
    if (control_begin_op(r->ctl, op, state, busy, &err) < 0) {
        if (errno == EBUSY)
            return api_error(out, 400, "precondition: %s", err.text);
        return api_error(out, errno == ENOENT ? 404 : 500, "%s", err.text);
    }
    return reply_op(r, out, op->id);
}

/* A spec's root-executing fields (cluster_spec_privileged_change) are an
 * admin's to set or change; a new NVML library must be one mtcd allows. */
static int guard_spec(struct api_req *r, struct api_resp *out, const json_t *old,
                      const json_t *spec)
{
    char field[128];
    if (r->who.role < ROLE_ADMIN && cluster_spec_privileged_change(old, spec, field, sizeof(field)))
        return api_error(out, 403,
                         "%s: only an admin may set or change this field (it makes mtc or Slurm "
                         "run something as root on the nodes)",
                         field),
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

int api_check_parent(struct api_req *r, struct api_resp *out)
{
    return check_parent(r, out);
}

int api_reply_op(struct api_req *r, struct api_resp *out, const char *op_id)
{
    return reply_op(r, out, op_id);
}

static int h_health(struct api_req *r, struct api_resp *out)
{
    out->body =
        json_pack("{s:s, s:i}", "status", "ok", "schemaVersion", store_schema_version(r->st));
    return 0;
}

static int h_create(struct api_req *r, struct api_resp *out)
{
    if (check_parent(r, out) < 0)
        return 0;
    const char *id = api_query(r, "modelDevelopmentClusterId");
    if (!id)
        id = api_query(r, "model_development_cluster_id");
    if (!id)
        return api_error(out, 400, "model_development_cluster_id: required query parameter");
    if (check_cluster_id(id, out) < 0)
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
             schema_enum_name(&control_state_enum, CONTROL_PROVISIONING));
    struct store_op op;
    control_op_init(&op, r->cap[0], r->cap[1], id,
                    schema_enum_name(&control_op_kind_enum, CONTROL_CREATE));
    op.request = spec;
    int rc = control_create_cluster(r->ctl, &cl, &op, &err);
    json_decref(spec);
    if (rc < 0)
        return api_error(out, errno == EEXIST ? 409 : 500, "%s", err.text);
    return reply_op(r, out, op.id);
}

static int h_get(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    out->body = api_cluster_json(r->st, r->ctl, &cl, 1);
    store_cluster_release(&cl);
    return 0;
}

int api_page_args(struct api_req *r, struct api_resp *out, int (*token_valid)(const char *),
                  int *size, char token[128])
{
    *size = 50;
    token[0] = '\0';
    const char *ps = api_query(r, "pageSize");
    if (!ps)
        ps = api_query(r, "page_size");
    if (ps) {
        char *end;
        long v = strtol(ps, &end, 10);
        if (*ps == '\0' || *end || v < 0 || v > 1000)
            return api_error(out, 400, "pageSize: must be an integer from 0 to 1000, got \"%s\"",
                             ps),
                   -1;
        *size = v == 0 ? 50 : (int)v;
    }
    const char *t = api_query(r, "pageToken");
    if (!t)
        t = api_query(r, "page_token");
    if (t && *t && (strlen(t) >= 128 || !token_valid(t)))
        return api_error(out, 400, "pageToken: not a token this API returned"), -1;
    snprintf(token, 128, "%s", t ? t : "");
    return 0;
}

static int h_list(struct api_req *r, struct api_resp *out)
{
    int size;
    char token[128];
    if (check_parent(r, out) < 0 || api_page_args(r, out, cluster_id_valid, &size, token) < 0)
        return 0;
    int n = 0;
    /* one extra row tells whether another page follows */
    struct store_cluster *arr =
        store_cluster_list(r->st, r->cap[0], r->cap[1], token, size + 1, &n);
    json_t *items = json_array();
    for (int i = 0; i < n && i < size; i++)
        json_array_append_new(items, api_cluster_json(r->st, r->ctl, &arr[i], 0));
    out->body = json_pack("{s:o}", "modelDevelopmentClusters", items);
    if (n > size)
        json_object_set_new(out->body, "nextPageToken", json_string(arr[size - 1].id));
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

static int h_patch(struct api_req *r, struct api_resp *out)
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
    rc = begin_op(r, out, &op, CONTROL_UPDATING);
    json_decref(spec);
    return rc;
}

static int h_delete(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    struct store_op op;
    control_op_init(&op, cl.project, cl.location, cl.id,
                    schema_enum_name(&control_op_kind_enum, CONTROL_DELETE));
    store_cluster_release(&cl);
    return begin_op(r, out, &op, CONTROL_STOPPING);
}

static int h_env(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    int running = schema_enum_parse(&control_state_enum, cl.state, 0) == CONTROL_RUNNING;
    /* the spec's experiment root (a checked path: safe in single quotes) for mtc run */
    char root[400] = "";
    const char *er = json_string_value(json_object_get(cl.spec, "experimentRoot"));
    if (er && *er)
        snprintf(root, sizeof(root), "# mtc run: experiments and checkpoints\n"
                 "export MTC_EXPERIMENT_ROOT='%.255s'\n", er);
    store_cluster_release(&cl);
    if (!running)
        return api_error(out, 400, "precondition: cluster %s is not RUNNING", r->cap[2]);
    mtc_error_t err = {""};
    char *script = control_env(r->ctl, r->cap[2], &err);
    if (!script)
        return api_error(out, 500, "cluster %s: %s", r->cap[2], err.text);
    out->body = json_pack("{s:s+}", "script", script, root);
    free(script);
    /* a login node on another host: how `mtc login` reaches it */
    json_t *login = control_login(r->ctl, r->cap[2], &err);
    if (login)
        json_object_set_new(out->body, "login", login);
    return 0;
}

/* :checkStorage — before `mtc run` submits: every host of the cluster sees
 * the experiment root (the controller's marker there). {"experimentRoot"}
 * ("" when the spec sets none), or FAILED_PRECONDITION naming the hosts. */
static int h_check_storage(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return 0;
    if (schema_enum_parse(&control_state_enum, cl.state, 0) != CONTROL_RUNNING) {
        store_cluster_release(&cl);
        return api_error(out, 400, "precondition: cluster %s is not RUNNING", r->cap[2]);
    }
    mtc_error_t err = {""};
    int rc = control_check_storage(r->ctl, r->cap[2], cl.spec, &err);
    const char *root = json_string_value(json_object_get(cl.spec, "experimentRoot"));
    if (rc == 0)
        out->body = json_pack("{s:s}", "experimentRoot", root ? root : "");
    store_cluster_release(&cl);
    return rc == 0 ? 0 : api_error(out, 400, "precondition: cluster %s: %s", r->cap[2], err.text);
}

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
static int h_report_health(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (find_cluster(r, out, &cl, 0) < 0)
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

static int h_report_faulty(struct api_req *r, struct api_resp *out)
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
    struct store_op op;
    if (store_op_get(r->st, op_id, &op) < 0)
        return api_error(out, 500, "operation %s vanished", op_id);
    out->body = api_op_json(r->st, r->ctl, &op);
    store_op_release(&op);
    return 0;
}

static int h_op_get(struct api_req *r, struct api_resp *out)
{
    if (check_parent(r, out) < 0)
        return 0;
    if (strncmp(r->cap[2], "op-", 3) != 0 || strlen(r->cap[2]) > 40)
        return api_error(out, 400, "operation id \"%.40s\": not an operation id", r->cap[2]);
    struct store_op op;
    if (store_op_get(r->st, r->cap[2], &op) < 0)
        return api_error(out, errno == ENOENT ? 404 : 500, "operation %s %s", r->cap[2],
                         errno == ENOENT ? "not found" : "cannot be read");
    if (strcmp(op.project, r->cap[0]) != 0 || strcmp(op.location, r->cap[1]) != 0) {
        store_op_release(&op);
        return api_error(out, 404, "operation %s not found", r->cap[2]);
    }
    /* a registrar reads its model's uploads only */
    if (api_registrar_model(r, out, strncmp(op.target, "models/", 7) ? NULL : op.target + 7) < 0) {
        store_op_release(&op);
        return 0;
    }
    out->body = api_op_json(r->st, r->ctl, &op);
    store_op_release(&op);
    return 0;
}

/* A registrar token: {"role": "registrar", "cluster", "project",
 * "location", "model", "run", "checkpoint"}, what `mtc run` asks for a run
 * on hosts (registrar.c). */
static int registrar_create(struct api_req *r, struct api_resp *out)
{
    const char *role, *cluster, *project, *location, *model, *run, *ckpt;
    json_error_t jerr;
    if (json_unpack_ex(r->body, &jerr, JSON_STRICT, "{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "role",
                       &role, "cluster", &cluster, "project", &project, "location", &location,
                       "model", &model, "run", &run, "checkpoint", &ckpt) < 0)
        return api_error(out, 400,
                         "token: a registrar token's body is {\"role\": \"registrar\", "
                         "\"cluster\", \"project\", \"location\", \"model\", \"run\", "
                         "\"checkpoint\"}: %s",
                         jerr.text);
    if (check_cluster_id(cluster, out) < 0)
        return 0;
    char token[80], id[24];
    mtc_error_t err = {""};
    if (api_registrar_mint(r->st, cluster, project, location, model, run, ckpt, token, id, &err) <
        0)
        return api_error(out, errno == ENOENT ? 404 : 400, "token: %s", err.text);
    out->body = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "role", "registrar", "cluster", cluster,
                          "token", token);
    explicit_bzero(token, sizeof(token));
    return 0;
}

static int h_token_create(struct api_req *r, struct api_resp *out)
{
    const char *name = NULL, *role = "viewer";
    json_error_t jerr;
    if (r->body && json_is_string(json_object_get(r->body, "role")) &&
        strcmp(json_string_value(json_object_get(r->body, "role")), "registrar") == 0)
        return registrar_create(r, out);
    if (!r->body || json_unpack_ex(r->body, &jerr, JSON_STRICT, "{s:s, s?:s}", "name", &name,
                                   "role", &role) < 0)
        return api_error(out, 400, "token: body must be {\"name\": NAME, \"role\": ROLE}: %s",
                         r->body ? jerr.text : "missing body");
    if (!mtc_name_valid(name, 63))
        return api_error(out, 400, "name \"%.64s\": must match [a-z][a-z0-9-]{0,62}", name);
    enum api_role rl = api_role_parse(role);
    if (rl == ROLE_NONE || rl == ROLE_NODE) /* node tokens are mtcd's to mint */
        return api_error(out, 400, "role \"%.32s\": must be viewer, editor, admin or registrar",
                         role);
    char secret[65], token[80], hash[65], id[24], hex[9];
    mtc_random_hex(secret, 24);
    snprintf(token, sizeof(token), "mtc_%s", secret);
    mtc_sha256_hex(token, hash);
    mtc_random_hex(hex, 4);
    snprintf(id, sizeof(id), "tok-%s", hex);
    if (store_token_add(r->st, id, name, role, hash) < 0)
        return api_error(out, errno == EEXIST ? 409 : 500, "token %s: %s", name,
                         errno == EEXIST ? "a token with this name exists" : "cannot store");
    out->body =
        json_pack("{s:s, s:s, s:s, s:s}", "id", id, "name", name, "role", role, "token", token);
    return 0;
}

static int h_token_list(struct api_req *r, struct api_resp *out)
{
    out->body = json_pack("{s:o}", "tokens", api_tokens_json(r->st));
    return 0;
}

static int h_token_revoke(struct api_req *r, struct api_resp *out)
{
    if (store_token_revoke(r->st, r->cap[0]) < 0)
        return api_error(out, 404, "token %.64s not found", r->cap[0]);
    out->body = json_object();
    return 0;
}

const struct api_route api_routes[] = {
    {"GET", "/healthz", ROLE_VIEWER, h_health, 0},
    {"GET", "/metrics", ROLE_VIEWER, api_metrics, 0},
    {"POST", CLUSTERS, ROLE_EDITOR, h_create, 0},
    {"GET", CLUSTERS, ROLE_VIEWER, h_list, 0},
    {"GET", CLUSTERS "/*", ROLE_VIEWER, h_get, 0},
    {"PATCH", CLUSTERS "/*", ROLE_EDITOR, h_patch, 0},
    {"DELETE", CLUSTERS "/*", ROLE_EDITOR, h_delete, 0},
    {"GET", CLUSTERS "/*:env", ROLE_VIEWER, h_env, 0},
    {"POST", CLUSTERS "/*:checkStorage", ROLE_EDITOR, h_check_storage, 0},
    {"POST", CLUSTERS "/*:reportHealth", ROLE_NODE, h_report_health, 0},
    {"POST", CLUSTERS "/*:reportFaultyNodes", ROLE_EDITOR, h_report_faulty, 0},
    {"POST", CLUSTERS "/*:healthScan", ROLE_EDITOR, api_cluster_healthscan, 0},
    {"POST", CLUSTERS "/*:powerNodes", ROLE_NODE, api_power_nodes, API_ROUTE_ADMIN_TOO},
    {"POST", DATASETS, ROLE_EDITOR, api_dataset_create, 0},
    {"GET", DATASETS, ROLE_VIEWER, api_dataset_list, 0},
    {"GET", DATASETS "/*", ROLE_VIEWER, api_dataset_get, 0},
    {"DELETE", DATASETS "/*", ROLE_EDITOR, api_dataset_delete, 0},
    {"POST", DATASETS "/*:prepare", ROLE_EDITOR, api_dataset_prepare, 0},
    {"POST", MODELS ":upload", ROLE_EDITOR, api_model_upload, API_ROUTE_REGISTRAR},
    {"GET", MODELS, ROLE_VIEWER, api_model_list, 0},
    {"GET", MODELS "/*", ROLE_VIEWER, api_model_get, API_ROUTE_REGISTRAR},
    {"PATCH", MODELS "/*", ROLE_EDITOR, api_model_patch, 0},
    {"DELETE", MODELS "/*", ROLE_EDITOR, api_model_delete, 0},
    {"GET", MODELS "/*:listVersions", ROLE_VIEWER, api_model_versions, 0},
    {"POST", MODELS "/*:mergeVersionAliases", ROLE_EDITOR, api_model_aliases, 0},
    {"POST", MODELS "/*:export", ROLE_EDITOR, api_model_export, 0},
    {"POST", ENDPOINTS, ROLE_EDITOR, api_endpoint_create, 0},
    {"GET", ENDPOINTS, ROLE_VIEWER, api_endpoint_list, 0},
    {"GET", ENDPOINTS "/*", ROLE_VIEWER, api_endpoint_get, 0},
    {"DELETE", ENDPOINTS "/*", ROLE_EDITOR, api_endpoint_delete, 0},
    {"PATCH", ENDPOINTS "/*", ROLE_EDITOR, api_endpoint_patch, 0},
    {"POST", ENDPOINTS "/*:deployModel", ROLE_EDITOR, api_endpoint_deploy, 0},
    {"POST", ENDPOINTS "/*:undeployModel", ROLE_EDITOR, api_endpoint_undeploy, 0},
    {"POST", ENDPOINTS "/*/v1/completions", ROLE_VIEWER, api_endpoint_route, API_ROUTE_PROXY},
    {"POST", ENDPOINTS "/*/v1/chat/completions", ROLE_VIEWER, api_endpoint_route, API_ROUTE_PROXY},
    {"GET", ENDPOINTS "/*/v1/models", ROLE_VIEWER, api_endpoint_route, API_ROUTE_PROXY},
    {"POST", CLUSTERS "/*/trainingJobs", ROLE_EDITOR, api_job_create, 0},
    {"GET", CLUSTERS "/*/trainingJobs", ROLE_VIEWER, api_job_list, 0},
    {"GET", CLUSTERS "/*/trainingJobs/*", ROLE_VIEWER, api_job_get, 0},
    {"GET", CLUSTERS "/*/trainingJobs/*:metrics", ROLE_VIEWER, api_job_metrics, 0},
    {"POST", CLUSTERS "/*/trainingJobs/*:cancel", ROLE_EDITOR, api_job_cancel, 0},
    {"GET", "/v1/projects/*/locations/*/operations/*", ROLE_VIEWER, h_op_get, API_ROUTE_REGISTRAR},
    {"GET", "/v1beta1/projects/*/locations/*/operations/*", ROLE_VIEWER, h_op_get,
     API_ROUTE_REGISTRAR},
    {"POST", "/v1/tokens", ROLE_ADMIN, h_token_create, 0},
    {"POST", "/v1/consoleLinks", ROLE_ADMIN, api_console_link, 0},
    {"GET", "/v1/tokens", ROLE_ADMIN, h_token_list, 0},
    {"DELETE", "/v1/tokens/*", ROLE_ADMIN, h_token_revoke, 0},
};
const size_t api_nroutes = sizeof(api_routes) / sizeof(api_routes[0]);
