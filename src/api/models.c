/* models: the model registry's handlers — upload (import an artifact, with
 * the lineage of the run that made it), get (NAME = its default version,
 * NAME@3, NAME@alias), list, listVersions, patch, mergeVersionAliases,
 * deleteVersion, delete, export. Records live in the store, artifacts under
 * <home>/models (src/registry); every change rewrites the model's refs file
 * that registry_resolve reads. Bad input is refused before anything changes. */
#include "api/internal.h"
#include "control/datasets.h"
#include "control/models.h"
#include "dataset/dataset.h"
#include "registry/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static const char *models_dir(struct api_req *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s/models", r->cfg && r->cfg->home ? r->cfg->home : "/nonexistent");
    return buf;
}

/* The registry's files need mtcd's home (the fuzz harness runs without one). */
static int have_home(struct api_req *r, struct api_resp *out)
{
    if (r->cfg && r->cfg->home && r->cfg->home[0] == '/')
        return 1;
    api_error(out, 500, "mtcd has no home directory for the model registry");
    return 0;
}

static void sync_refs(struct api_req *r, const char *name)
{
    char models[PATH_MAX];
    control_model_refs(r->st, models_dir(r, models, sizeof(models)), r->cap[0], r->cap[1], name,
                       NULL);
}

int api_models_recover(struct store *st, const char *home)
{
    char models[PATH_MAX];
    mtc_error_t err = {""};
    int removed = 0;
    snprintf(models, sizeof(models), "%s/models", home);
    if (!mtc_path_exists(models))
        return 0;
    json_t *all = store_model_all(st), *dirs = json_array(), *m;
    size_t i;
    json_array_foreach(all, i, m) control_model_refs(st, models, json_string_value(json_object_get(m, "project")),
                                              json_string_value(json_object_get(m, "location")),
                                              json_string_value(json_object_get(m, "name")), dirs);
    int rc = registry_sweep(models, dirs, &removed, &err);
    if (rc < 0)
        log_msg(LOG_WARNING, "model registry: %s", err.text);
    if (removed)
        log_msg(LOG_NOTICE, "model registry: removed %d leftovers of interrupted registrations",
                removed);
    json_decref(all);
    json_decref(dirs);
    return rc;
}

/* ---- views ---- */

static json_t *version_json(struct api_req *r, const struct store_model *m,
                            const struct store_model_version *v)
{
    char t[40];
    json_t *labels = json_object_get(m->meta, "labels");
    const char *display = json_string_value(json_object_get(m->meta, "displayName"));
    /* "o" steals: a model without labels gets a new {} (an "O" of it leaked one). */
    json_t *o = json_pack("{s:s+++++, s:s, s:o}", "name", "projects/", m->project, "/locations/",
                          m->location, "/models/", m->name, "displayName",
                          display ? display : m->name, "labels",
                          labels ? json_incref(labels) : json_object());
    if (json_object_get(m->meta, "description"))
        json_object_set(o, "description", json_object_get(m->meta, "description"));
    json_object_set_new(o, "versionId", json_sprintf("%d", v->version));
    json_object_set(o, "versionAliases", v->aliases);
    json_object_set_new(o, "createTime", json_string(mtc_time_rfc3339(m->create_ms, t, sizeof t)));
    json_object_set_new(o, "updateTime", json_string(mtc_time_rfc3339(m->update_ms, t, sizeof t)));
    json_object_set_new(o, "versionCreateTime",
                        json_string(mtc_time_rfc3339(v->create_ms, t, sizeof t)));
    json_object_set_new(o, "versionUpdateTime",
                        json_string(mtc_time_rfc3339(v->update_ms, t, sizeof t)));
    const json_t *mf = v->manifest;
    json_object_set(o, "artifactUri", json_object_get(mf, "dir"));
    json_object_set_new(o, "artifact",
                        json_pack("{s:O, s:O, s:O, s:O}", "format", json_object_get(mf, "format"),
                                  "sizeBytes", json_object_get(mf, "sizeBytes"), "digest",
                                  json_object_get(mf, "digest"), "files",
                                  json_object_get(mf, "files")));
    json_object_set_new(o, "lineage", v->lineage ? json_incref(v->lineage) : json_object());
    (void)r;
    return o;
}

/* The version of the model sel picks (a registry_ref: number, alias, or
 * neither = default) among v[0..n): its index, or -1 with out a 404. */
static int pick(struct api_resp *out, const struct registry_ref *ref,
                const struct store_model_version *v, int n)
{
    const char *alias = ref->version ? NULL : *ref->alias ? ref->alias : "default";
    for (int i = 0; i < n; i++) {
        if (ref->version && v[i].version == ref->version)
            return i;
        size_t k;
        json_t *a;
        json_array_foreach(v[i].aliases, k, a) if (alias && strcmp(json_string_value(a), alias) == 0) return i;
    }
    if (ref->version)
        api_error(out, 404, "model %s has no version %d", ref->name, ref->version);
    else
        api_error(out, 404, "model %s has no version with alias %s", ref->name, alias);
    return -1;
}

/* The model and its versions named by the path (cap[2]: NAME[@SEL]) into m,
 * *v, *n, ref; -1 with out filled (400 bad reference, 404). */
static int load(struct api_req *r, struct api_resp *out, struct registry_ref *ref,
                struct store_model *m, struct store_model_version **v, int *n)
{
    mtc_error_t err = {""};
    *v = NULL;
    *n = 0;
    if (api_check_parent(r, out) < 0)
        return -1;
    if (registry_ref_parse(r->cap[2], ref, &err) < 0)
        return api_error(out, 400, "%s", err.text), -1;
    if (store_model_get(r->st, r->cap[0], r->cap[1], ref->name, m) < 0)
        return api_error(out, errno == ENOENT ? 404 : 500, "model %s %s", ref->name,
                         errno == ENOENT ? "not found" : "cannot be read"),
               -1;
    *v = store_model_versions(r->st, r->cap[0], r->cap[1], ref->name, n);
    return 0;
}

/* ---- where mtcd may read and write for a non-admin ---- */

/* A path field of a request, resolved; a non-admin's must lie under mtcd's
 * data roots or its experiments directory (datasets' mechanism). 0 or -1 +
 * out (400 / 403 / 404 naming the field). */
struct roots {
    const char *list[66];
    char exps[PATH_MAX];
    struct api_registrar scope;
};

/* Where a non-admin's files may lie (NULL for an admin: anywhere); a
 * registrar's: the one directory its token registers (the run's checkpoints,
 * or what a custom task's program wrote) or, for the run field (run_dir), its
 * run's directory. */
static const char *const *roots_of(struct api_req *r, struct roots *rt, int run_dir)
{
    const struct control_datasets *cfg = control_datasets(r->ctl);
    int n = 0;
    if (r->who.role == ROLE_REGISTRAR) {
        if (api_registrar_scope(r, &rt->scope) == 0)
            rt->list[n++] = run_dir ? rt->scope.run : rt->scope.checkpoint;
        rt->list[n] = NULL;
        return rt->list;
    }
    for (const char *const *p = cfg->roots; p && *p && n < 64; p++)
        rt->list[n++] = *p;
    if (r->cfg && r->cfg->home) {
        snprintf(rt->exps, sizeof(rt->exps), "%s/experiments", r->cfg->home);
        rt->list[n++] = rt->exps;
    }
    rt->list[n] = NULL;
    return r->who.role < ROLE_ADMIN ? rt->list : NULL;
}

/* Who mtcd is on files for r (fsafe's mtc_reach; docs/design-notes.md): a
 * token bound to a Unix user acts as that user; an admin's unbound token as
 * root, anywhere; a registrar's as root beneath its one directory (no link
 * followed); an editor's unbound token stands for no user, so it reads as
 * nobody (what every user of the machine may read) and writes as root only
 * where no user can change anything (write: trusted). -1 with out filled
 * when the bound user is gone. */
static int reach_of(struct api_req *r, struct api_resp *out, struct roots *rt, int run_dir,
                    int write, struct mtc_reach *how, struct mtc_user *u)
{
    mtc_error_t err = {""};
    memset(how, 0, sizeof(*how));
    how->roots = roots_of(r, rt, run_dir);
    if (*r->who.user) {
        if (mtc_user_lookup(r->who.user, u, &err) < 0)
            return api_error(out, 403, "this token's user: %s", err.text), -1;
        how->as = u;
    } else if (r->who.role < ROLE_ADMIN && r->who.role != ROLE_REGISTRAR) {
        if (write) {
            how->trusted = 1;
        } else {
            mtc_user_nobody(u);
            how->as = u;
        }
    }
    return 0;
}

/* The status a refused path gets, by errno. */
static int path_status(int e)
{
    return e == EACCES || e == EPERM ? 403 : e == ENOENT ? 404 : 400;
}

/* ---- upload ---- */

static const char *const alias_list_desc = "version aliases: [a-z][a-z0-9-]{0,126}, not a number";

static int alias_check(const struct schema_field *f, json_t **v, const char *path,
                       mtc_error_t *err)
{
    (void)f;
    size_t i;
    json_t *a;
    json_array_foreach(*v, i, a)
    {
        const char *s = json_string_value(a);
        if (!registry_alias_valid(s + (f->arg && s[0] == '-')))
            return schema_error(err, path, "\"%.80s\": %s", s, alias_list_desc);
    }
    return 0;
}

static int abs_path_check(const struct schema_field *f, json_t **v, const char *path,
                          mtc_error_t *err)
{
    (void)f;
    if (json_string_value(*v)[0] != '/')
        return schema_error(err, path, "\"%.80s\": must be an absolute path (mtcd reads it)",
                            json_string_value(*v));
    return 0;
}

#define PATH_FIELD(name_, flags_)                                                                  \
    {                                                                                              \
        .name = name_, .kind = SCHEMA_STR, .flags = (flags_) | SCHEMA_NONEMPTY | SCHEMA_ONELINE,   \
        .size = PATH_MAX, .check = abs_path_check                                                  \
    }

/* The Model object of an upload: what the model says of itself, and where
 * its artifact lies. */
static const char *const model_output_only[] = {
    "name",       "versionId",         "createTime",        "updateTime", "artifact",
    "lineage",    "versionCreateTime", "versionUpdateTime", NULL};
static const struct schema_field model_fields[] = {
    {.name = "displayName", .kind = SCHEMA_STR, .flags = SCHEMA_ONELINE, .size = 129},
    {.name = "description", .kind = SCHEMA_STR, .size = 2049},
    {.name = "labels", .kind = SCHEMA_LABELS},
    PATH_FIELD("artifactUri", SCHEMA_REQUIRED),
    {.name = "format", .kind = SCHEMA_ENUM, .enm = &registry_format_enum},
    {.name = "versionAliases",
     .kind = SCHEMA_STRS,
     .flags = SCHEMA_NONEMPTY,
     .max_items = 32,
     .check = alias_check},
    PATH_FIELD("sourceRun", 0),
    {.name = NULL},
};
static const struct schema model_schema = {
    .fields = model_fields, .flags = SCHEMA_PROTO3, .ignore = model_output_only};

static const struct schema_field upload_fields[] = {
    {.name = "modelId",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REQUIRED | SCHEMA_NONEMPTY | SCHEMA_ONELINE,
     .size = 128},
    {.name = "model", .kind = SCHEMA_OBJ, .flags = SCHEMA_REQUIRED, .obj = &model_schema},
    {.name = NULL},
};
static const struct schema upload_schema = {.fields = upload_fields, .flags = SCHEMA_PROTO3};

int api_model_upload(struct api_req *r, struct api_resp *out)
{
    if (api_check_parent(r, out) < 0 || !have_home(r, out))
        return 0;
    if (!r->body)
        return api_error(out, 400, "request body: {\"modelId\", \"model\": {\"artifactUri\"}} is "
                                   "required");
    mtc_error_t err = {""};
    json_t *req = schema_normalize(r->body, &upload_schema, "", &err);
    if (!req)
        return api_error(out, 400, "%s", err.text);
    const json_t *model = json_object_get(req, "model");
    const char *name = mtc_json_str(req, "modelId");
    char busy[48] = "";
    int format = json_object_get(model, "format")
                     ? schema_enum_parse(&registry_format_enum, mtc_json_str(model, "format"), 0)
                     : -1;
    if (!registry_name_valid(name)) {
        registry_name_error(name, &err);
        api_error(out, 400, "modelId: %s", err.text);
        goto out;
    }
    if (api_registrar_upload(r, out, name, mtc_json_str(model, "sourceRun")) < 0)
        goto out;
    /* what can be said now is said now: the source opened as the operation
     * will open it (and closed: the operation opens it again, once, and
     * stores what it read from its own descriptors) */
    struct roots rt, rr;
    struct mtc_reach how, run_how;
    struct mtc_user u;
    struct registry_source s;
    if (reach_of(r, out, &rt, 0, 0, &how, &u) < 0 || reach_of(r, out, &rr, 1, 0, &run_how, &u) < 0)
        goto out;
    if (registry_source_open(mtc_json_str(model, "artifactUri"), &how, format, &s, &err) < 0) {
        api_error(out, path_status(errno), "model.artifactUri: %s", err.text);
        goto out;
    }
    registry_source_close(&s);
    if (mtc_json_str(model, "sourceRun")) {
        int fd = mtc_reach_open(mtc_json_str(model, "sourceRun"), &run_how, O_DIRECTORY, &err);
        if (fd < 0) {
            api_error(out, path_status(errno), "model.sourceRun: %s", err.text);
            goto out;
        }
        close(fd);
    }
    struct store_op op;
    control_op_init(&op, r->cap[0], r->cap[1], "",
                    schema_enum_name(&control_op_kind_enum, CONTROL_UPLOAD));
    snprintf(op.target, sizeof(op.target), "models/%s", name);
    op.request = json_pack("{s:s, s:O, s:b, s:s}", "modelId", name, "model", model, "restricted",
                           r->who.role < ROLE_ADMIN, "home", r->cfg->home);
    if (how.as && *r->who.user) /* the operation reads as the token's user */
        json_object_set_new(op.request, "runAs",
                            json_pack("{s:s, s:I, s:I}", "user", u.name, "uid", (json_int_t)u.uid,
                                      "gid", (json_int_t)u.gid));
    if (r->who.role == ROLE_REGISTRAR) { /* the operation's roots are the token's */
        json_object_set_new(op.request, "roots", json_pack("[s]", rt.list[0]));
        json_object_set_new(op.request, "runRoots", json_pack("[s]", rr.list[0]));
    }
    int rc = control_model_begin(r->ctl, &op, busy, &err);
    int e = errno;
    json_decref(op.request);
    op.request = NULL;
    if (rc < 0)
        api_error(out, e == EBUSY ? 400 : 500, "%s%s", e == EBUSY ? "precondition: " : "",
                  err.text);
    else
        api_reply_op(r, out, op.id);
out:
    json_decref(req);
    return 0;
}

/* ---- reads ---- */

int api_model_get(struct api_req *r, struct api_resp *out)
{
    struct registry_ref ref;
    struct store_model m;
    struct store_model_version *v;
    int n;
    char name[128]; /* a registrar reads its own model only */
    snprintf(name, sizeof(name), "%.*s", (int)strcspn(r->cap[2], "@"), r->cap[2]);
    if (api_registrar_model(r, out, name) < 0 || load(r, out, &ref, &m, &v, &n) < 0)
        return 0;
    int i = pick(out, &ref, v, n);
    if (i >= 0)
        out->body = version_json(r, &m, &v[i]);
    store_model_versions_free(v, n);
    store_model_release(&m);
    return 0;
}

int api_model_list(struct api_req *r, struct api_resp *out)
{
    int size, n = 0;
    char token[128];
    if (api_check_parent(r, out) < 0 ||
        api_page_args(r, out, registry_name_valid, &size, token) < 0)
        return 0;
    struct store_model *arr = store_model_list(r->st, r->cap[0], r->cap[1], token, size + 1, &n);
    json_t *items = json_array();
    struct registry_ref def = {.version = 0};
    for (int i = 0; i < n && i < size; i++) {
        int nv = 0;
        struct store_model_version *v =
            store_model_versions(r->st, r->cap[0], r->cap[1], arr[i].name, &nv);
        struct api_resp scratch = {0};
        int k = pick(&scratch, &def, v, nv);
        json_decref(scratch.body);
        if (k >= 0) {
            json_t *o = version_json(r, &arr[i], &v[k]);
            json_object_set_new(o, "versionCount", json_integer(nv));
            json_array_append_new(items, o);
        }
        store_model_versions_free(v, nv);
    }
    out->body = json_pack("{s:o}", "models", items);
    if (n > size)
        json_object_set_new(out->body, "nextPageToken", json_string(arr[size - 1].name));
    for (int i = 0; i < n; i++)
        store_model_release(&arr[i]);
    free(arr);
    return 0;
}

int api_model_versions(struct api_req *r, struct api_resp *out)
{
    struct registry_ref ref;
    struct store_model m;
    struct store_model_version *v;
    int n;
    if (load(r, out, &ref, &m, &v, &n) < 0)
        return 0;
    if (ref.version || *ref.alias) {
        api_error(out, 400, "listVersions takes a model (NAME), not a version (%s)", r->cap[2]);
    } else {
        json_t *items = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(items, version_json(r, &m, &v[i]));
        out->body = json_pack("{s:o}", "models", items);
    }
    store_model_versions_free(v, n);
    store_model_release(&m);
    return 0;
}

/* ---- changes ---- */

static const struct schema_field patch_fields[] = {
    {.name = "displayName", .kind = SCHEMA_STR, .flags = SCHEMA_ONELINE, .size = 129},
    {.name = "description", .kind = SCHEMA_STR, .size = 2049},
    {.name = "labels", .kind = SCHEMA_LABELS},
    {.name = NULL},
};
static const char *const patch_ignore[] = {
    "name",       "versionId",  "versionAliases",    "createTime",        "updateTime",
    "artifact",   "lineage",    "versionCreateTime", "versionUpdateTime", "artifactUri",
    "versionCount", NULL};
static const struct schema patch_schema = {
    .fields = patch_fields, .flags = SCHEMA_PROTO3, .ignore = patch_ignore};

int api_model_patch(struct api_req *r, struct api_resp *out)
{
    struct registry_ref ref;
    struct store_model m;
    struct store_model_version *v;
    int n;
    if (load(r, out, &ref, &m, &v, &n) < 0)
        return 0;
    mtc_error_t err = {""};
    json_t *body = r->body ? schema_normalize(r->body, &patch_schema, "", &err) : json_object();
    const char *mask = api_query(r, "updateMask");
    if (!mask)
        mask = api_query(r, "update_mask");
    char maskbuf[512];
    snprintf(maskbuf, sizeof(maskbuf), "%s", mask ? mask : "");
    int i = pick(out, &ref, v, n);
    if (!body) {
        api_error(out, 400, "%s", err.text);
    } else if (i >= 0) {
        json_t *meta = json_deep_copy(m.meta);
        int bad = 0;
        if (mask) { /* the fields named, set or cleared */
            for (char *save = NULL, *f = strtok_r(maskbuf, ",", &save); f && !bad;
                 f = strtok_r(NULL, ",", &save)) {
                char camel[64];
                mtc_camel_case(f, camel, sizeof(camel));
                if (strcmp(camel, "displayName") && strcmp(camel, "description") &&
                    strcmp(camel, "labels")) {
                    api_error(out, 400,
                              "updateMask: \"%.60s\": only displayName, description and labels "
                              "can change",
                              f);
                    bad = 1;
                } else if (json_object_get(body, camel)) {
                    json_object_set(meta, camel, json_object_get(body, camel));
                } else {
                    json_object_del(meta, camel);
                }
            }
        } else {
            json_object_update(meta, body);
        }
        if (!bad && store_model_set_meta(r->st, r->cap[0], r->cap[1], ref.name, meta) < 0) {
            api_error(out, 500, "model %s cannot be updated", ref.name);
            bad = 1;
        }
        if (!bad) {
            json_decref(m.meta);
            m.meta = json_incref(meta);
            out->body = version_json(r, &m, &v[i]);
        }
        json_decref(meta);
    }
    json_decref(body);
    store_model_versions_free(v, n);
    store_model_release(&m);
    return 0;
}

int api_model_aliases(struct api_req *r, struct api_resp *out)
{
    struct registry_ref ref;
    struct store_model m;
    struct store_model_version *v;
    int n;
    if (load(r, out, &ref, &m, &v, &n) < 0)
        return 0;
    const json_t *list = json_object_get(r->body, "versionAliases");
    if (!list)
        list = json_object_get(r->body, "version_aliases");
    json_t *add = json_array(), *del = json_array();
    int i = pick(out, &ref, v, n), bad = i < 0;
    const char *k;
    json_t *x;
    json_object_foreach(r->body, k, x) if (!bad && strcmp(k, "versionAliases") &&
                                           strcmp(k, "version_aliases"))
    {
        api_error(out, 400, "%.60s: unknown field (the body is {\"versionAliases\": [...]})", k);
        bad = 1;
    }
    if (!bad && (!json_is_array(list) || json_array_size(list) == 0)) {
        api_error(out, 400, "versionAliases: a non-empty array of aliases (\"-alias\" removes one) "
                            "is required");
        bad = 1;
    }
    size_t j;
    json_array_foreach(list, j, x)
    {
        const char *s = json_string_value(x);
        if (bad)
            break;
        int minus = s && s[0] == '-';
        if (!s || !registry_alias_valid(s + minus)) {
            api_error(out, 400, "versionAliases[%zu]: \"%.80s\": %s", j, s ? s : "(not a string)",
                      alias_list_desc);
            bad = 1;
        } else {
            json_array_append_new(minus ? del : add, json_string(s + minus));
        }
    }
    if (!bad) {
        control_models_lock();
        int rc = store_model_aliases(r->st, r->cap[0], r->cap[1], ref.name, v[i].version, add, del);
        int e = errno;
        if (rc == 0)
            sync_refs(r, ref.name);
        control_models_unlock();
        if (rc < 0 && e == EPERM)
            api_error(out, 400,
                      "precondition: version %d holds default, which exactly one version holds: "
                      "give default to another version instead",
                      v[i].version);
        else if (rc < 0)
            api_error(out, e == ENOENT ? 404 : 500, "model %s: aliases cannot be changed",
                      ref.name);
        else {
            int n2 = 0;
            struct store_model_version *v2 =
                store_model_versions(r->st, r->cap[0], r->cap[1], ref.name, &n2);
            for (int q = 0; q < n2; q++)
                if (v2[q].version == v[i].version)
                    out->body = version_json(r, &m, &v2[q]);
            store_model_versions_free(v2, n2);
            log_msg(LOG_NOTICE, "model %s: version %d aliases changed", ref.name, v[i].version);
        }
    }
    json_decref(add);
    json_decref(del);
    store_model_versions_free(v, n);
    store_model_release(&m);
    return 0;
}

/* DELETE models/NAME (the model) or models/NAME@V (deleteVersion). */
int api_model_delete(struct api_req *r, struct api_resp *out)
{
    struct registry_ref ref;
    struct store_model m;
    struct store_model_version *v;
    int n;
    if (load(r, out, &ref, &m, &v, &n) < 0)
        return 0;
    char models[PATH_MAX];
    models_dir(r, models, sizeof(models));
    json_t *gone = NULL;
    mtc_error_t err = {""};
    if (ref.version || *ref.alias) {
        int i = pick(out, &ref, v, n);
        if (i >= 0) {
            control_models_lock();
            int rc = store_model_delete_version(r->st, r->cap[0], r->cap[1], ref.name,
                                                v[i].version, &gone);
            int e = errno;
            if (rc == 0)
                sync_refs(r, ref.name);
            control_models_unlock();
            if (rc < 0 && e == EBUSY)
                api_error(out, 400,
                          "precondition: version %d is model %s's only version: delete the model",
                          v[i].version, ref.name);
            else if (rc < 0)
                api_error(out, e == ENOENT ? 404 : 500, "model %s: version %d cannot be deleted",
                          ref.name, v[i].version);
            else if (registry_remove(models, gone, &err) < 0)
                log_msg(LOG_WARNING, "model %s@%d: %s", ref.name, v[i].version, err.text);
            if (rc == 0)
                log_msg(LOG_NOTICE, "model %s: version %d deleted", ref.name, v[i].version);
        }
    } else {
        control_models_lock();
        int rc = store_model_delete(r->st, r->cap[0], r->cap[1], ref.name, &gone);
        if (rc == 0)
            sync_refs(r, ref.name);
        control_models_unlock();
        if (rc < 0) {
            api_error(out, errno == ENOENT ? 404 : 500, "model %s cannot be deleted", ref.name);
        } else {
            size_t k;
            json_t *mf;
            json_array_foreach(gone, k, mf) if (registry_remove(models, mf, &err) < 0)
                log_msg(LOG_WARNING, "model %s: %s", ref.name, err.text);
            log_msg(LOG_NOTICE, "model %s deleted (%d versions)", ref.name, n);
        }
    }
    if (!out->body)
        out->body = json_object(); /* google.protobuf.Empty */
    json_decref(gone);
    store_model_versions_free(v, n);
    store_model_release(&m);
    return 0;
}

static const struct schema_field export_fields[] = {
    PATH_FIELD("outputDir", SCHEMA_REQUIRED),
    {.name = "format", .kind = SCHEMA_ENUM, .enm = &registry_format_enum},
    {.name = NULL},
};
static const struct schema export_schema = {.fields = export_fields, .flags = SCHEMA_PROTO3};

int api_model_export(struct api_req *r, struct api_resp *out)
{
    struct registry_ref ref;
    struct store_model m;
    struct store_model_version *v;
    int n;
    if (load(r, out, &ref, &m, &v, &n) < 0)
        return 0;
    mtc_error_t err = {""};
    json_t *body = r->body ? schema_normalize(r->body, &export_schema, "", &err) : NULL;
    int i = pick(out, &ref, v, n);
    char models[PATH_MAX];
    if (i < 0 || !have_home(r, out)) {
        /* 404 or 500 said */
    } else if (!body) {
        api_error(out, 400, "%s", *err.text ? err.text : "request body: {\"outputDir\"} is required");
    } else {
        char od[PATH_MAX];
        struct roots rt;
        struct mtc_reach how;
        struct mtc_user u;
        int format = json_object_get(body, "format")
                         ? schema_enum_parse(&registry_format_enum, mtc_json_str(body, "format"), 0)
                         : -1;
        if (mtc_path_clean(mtc_json_str(body, "outputDir"), 0, od, sizeof(od)) < 0) {
            api_error(out, 400, "outputDir: \"%.200s\": an absolute path without \"..\"",
                      mtc_json_str(body, "outputDir"));
        } else if (reach_of(r, out, &rt, 0, 1, &how, &u) == 0) {
            /* made and written as the caller (or, for an editor's unbound
             * token, as root where only root writes): by descriptor */
            if (registry_export(models_dir(r, models, sizeof(models)), v[i].manifest, format,
                                control_datasets(r->ctl)->trainer, od, &how, &err) < 0) {
                if (strncmp(err.text, "outputDir:", 10) == 0)
                    api_error(out, path_status(errno), "%s%s", err.text,
                              errno == EPERM && how.trusted
                                  ? " (a token bound to no user writes only there; one bound "
                                    "to the directory's owner writes as that user)"
                                  : "");
                else
                    api_error(out, 500, "model %s@%d: export: %s", ref.name, v[i].version,
                              err.text);
            } else {
                out->body =
                    json_pack("{s:s, s:s, s:s}", "model", r->cap[2], "outputDir", od, "format",
                              format < 0 ? mtc_json_str(v[i].manifest, "format")
                                         : schema_enum_name(&registry_format_enum, format));
                json_object_set_new(out->body, "versionId", json_sprintf("%d", v[i].version));
                log_msg(LOG_NOTICE, "model %s@%d exported to %s", ref.name, v[i].version, od);
            }
        }
    }
    json_decref(body);
    store_model_versions_free(v, n);
    store_model_release(&m);
    return 0;
}
