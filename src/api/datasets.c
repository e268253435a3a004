/* datasets: the API's dataset handlers — create and :prepare (operations that
 * run mtc-train's preparation), get, list, delete. Everything a request can
 * get wrong (name, body, kind, where its files lie) is refused here, before
 * anything is stored. */
#include "api/internal.h"
#include "control/datasets.h"
#include "dataset/dataset.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int check_name(const char *name, struct api_resp *out)
{
    mtc_error_t err = {""};
    if (dataset_name_valid(name))
        return 0;
    dataset_name_error(name, &err);
    return api_error(out, 400, "%s", err.text), -1;
}

/* Load the dataset the path names (r->cap[2]); 404 if absent. */
static int load(struct api_req *r, struct api_resp *out, struct store_dataset *d)
{
    if (api_check_parent(r, out) < 0 || check_name(r->cap[2], out) < 0)
        return -1;
    if (store_dataset_get(r->st, r->cap[0], r->cap[1], r->cap[2], d) < 0)
        return api_error(out, errno == ENOENT ? 404 : 500, "dataset %s %s", r->cap[2],
                         errno == ENOENT ? "not found" : "cannot be read"),
               -1;
    return 0;
}

/* Whom a request's files are read as (as the registry's uploads, api/models.c):
 * a token bound to a Unix user, that user; a non-admin's unbound token stands
 * for no one, so nobody (what every user may read); an admin's, root (NULL).
 * -1 with out filled when the bound user is gone. */
static int reader(struct api_req *r, struct api_resp *out, struct mtc_user *u,
                  const struct mtc_user **as)
{
    mtc_error_t err = {""};
    *as = NULL;
    if (*r->who.user) {
        if (mtc_user_lookup(r->who.user, u, &err) < 0)
            return api_error(out, 403, "this token's user: %s", err.text), -1;
        *as = u;
    } else if (r->who.role < ROLE_ADMIN) {
        mtc_user_nobody(u);
        *as = u;
    }
    return 0;
}

/* The request's files can be read as the caller, and a non-admin's lie under
 * mtcd's data roots: opened as the operation will open them, and closed (the
 * operation opens them again, once, and prepares what it read from its own
 * descriptors). Else 403 or 400 naming the field. */
static int check_files(struct api_req *r, struct api_resp *out, const json_t *spec)
{
    static const char *const fields[] = {"source", "tokenizer"};
    int restricted = r->who.role < ROLE_ADMIN;
    const struct control_datasets *cfg = control_datasets(r->ctl);
    static const char *const none[] = {NULL}; /* no roots configured: nowhere */
    const char *const *roots = cfg->roots ? cfg->roots : none;
    struct mtc_user u;
    const struct mtc_user *as;
    if (reader(r, out, &u, &as) < 0)
        return -1;
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const char *v = json_string_value(json_object_get(spec, fields[i]));
        mtc_error_t err = {""};
        if (!v || dataset_is_builtin(v))
            continue;
        int fd = dataset_open(fields[i], v, restricted ? roots : NULL, as, &err);
        if (fd < 0)
            return api_error(out, errno == EACCES || errno == EPERM ? 403 : 400, "%s", err.text),
                   -1;
        close(fd);
    }
    return 0;
}

/* Start op (its request: spec, whether its files are restricted to the roots
 * and, for a token bound to a Unix user, whom they are read as: runAs);
 * d: the new dataset of a create, NULL for a :prepare. */
static int begin(struct api_req *r, struct api_resp *out, const struct store_dataset *d,
                 struct store_op *op, json_t *spec)
{
    char busy[48] = "";
    mtc_error_t err = {""};
    struct mtc_user u;
    op->request = json_pack("{s:O, s:b}", "spec", spec, "restricted", r->who.role < ROLE_ADMIN);
    if (*r->who.user && mtc_user_lookup(r->who.user, &u, &err) == 0)
        json_object_set_new(op->request, "runAs",
                            json_pack("{s:s, s:I, s:I}", "user", u.name, "uid", (json_int_t)u.uid,
                                      "gid", (json_int_t)u.gid));
    int rc = control_dataset_begin(r->ctl, d, op, busy, &err);
    int e = errno;
    json_decref(op->request);
    op->request = NULL;
    if (rc < 0)
        return api_error(out,
                         e == EEXIST   ? 409
                         : e == ENOENT ? 404
                         : e == EBUSY  ? 400
                                       : 500,
                         "%s%s", e == EBUSY ? "precondition: " : "", err.text);
    return api_reply_op(r, out, op->id);
}

static void op_for(struct store_op *op, struct api_req *r, const char *name, int kind)
{
    control_op_init(op, r->cap[0], r->cap[1], "", schema_enum_name(&control_op_kind_enum, kind));
    snprintf(op->target, sizeof(op->target), "datasets/%s", name);
}

int api_dataset_create(struct api_req *r, struct api_resp *out)
{
    if (api_check_parent(r, out) < 0)
        return 0;
    const char *id = api_query(r, "datasetId");
    if (!id)
        id = api_query(r, "dataset_id");
    if (!id)
        return api_error(out, 400, "dataset_id: required query parameter");
    if (check_name(id, out) < 0)
        return 0;
    char name[DATASET_NAME_MAX + 1];
    snprintf(name, sizeof(name), "%s", id); /* api_query's buffer is reused */
    mtc_error_t err = {""};
    json_t *spec = dataset_request_normalize(r->body, 1, &err);
    if (!spec)
        return api_error(out, 400, "%s", err.text);
    if (check_files(r, out, spec) < 0) {
        json_decref(spec);
        return 0;
    }
    struct store_dataset d = {.spec = spec};
    snprintf(d.project, sizeof(d.project), "%.63s", r->cap[0]);
    snprintf(d.location, sizeof(d.location), "%.63s", r->cap[1]);
    snprintf(d.name, sizeof(d.name), "%s", name);
    snprintf(d.state, sizeof(d.state), "%s",
             schema_enum_name(&dataset_state_enum, DATASET_PREPARING));
    struct store_op op;
    op_for(&op, r, name, CONTROL_CREATE);
    int rc = begin(r, out, &d, &op, spec);
    json_decref(spec);
    return rc;
}

int api_dataset_prepare(struct api_req *r, struct api_resp *out)
{
    struct store_dataset d;
    if (load(r, out, &d) < 0)
        return 0;
    mtc_error_t err = {""};
    json_t *given = dataset_request_normalize(r->body, 0, &err);
    const char *was = json_string_value(json_object_get(d.spec, "kind"));
    const char *kind = json_string_value(json_object_get(given, "kind"));
    if (!given) {
        api_error(out, 400, "%s", err.text);
    } else if (kind && was && strcmp(kind, was) != 0) {
        api_error(out, 400,
                  "precondition: kind: dataset %s holds %s data, not %s (a source of another "
                  "kind is another dataset: delete this one or choose a new name)",
                  d.name, was, kind);
    } else {
        /* what the request leaves out stays as stored */
        json_t *spec = json_deep_copy(d.spec);
        json_object_update(spec, given);
        if (check_files(r, out, spec) == 0) {
            struct store_op op;
            op_for(&op, r, d.name, CONTROL_PREPARE);
            begin(r, out, NULL, &op, spec);
        }
        json_decref(spec);
    }
    json_decref(given);
    store_dataset_release(&d);
    return 0;
}

int api_dataset_get(struct api_req *r, struct api_resp *out)
{
    struct store_dataset d;
    if (load(r, out, &d) < 0)
        return 0;
    out->body = dataset_json(r->st, &d, 1);
    store_dataset_release(&d);
    return 0;
}

int api_dataset_list(struct api_req *r, struct api_resp *out)
{
    int size, n = 0;
    char token[128];
    if (api_check_parent(r, out) < 0 || api_page_args(r, out, dataset_name_valid, &size, token) < 0)
        return 0;
    /* one extra row tells whether another page follows */
    struct store_dataset *arr =
        store_dataset_list(r->st, r->cap[0], r->cap[1], token, size + 1, &n);
    json_t *items = json_array();
    for (int i = 0; i < n && i < size; i++)
        json_array_append_new(items, dataset_json(r->st, &arr[i], 0));
    out->body = json_pack("{s:o}", "datasets", items);
    if (n > size)
        json_object_set_new(out->body, "nextPageToken", json_string(arr[size - 1].name));
    for (int i = 0; i < n; i++)
        store_dataset_release(&arr[i]);
    free(arr);
    return 0;
}

/* mtc-train's link from the dataset's name to its latest data,
 * <dir>/by-name/NAME beside the data's directory <dir>/KEY, removed when it
 * is a link. */
static void remove_name_link(const char *data_dir, const char *name)
{
    char link[PATH_MAX + 80];
    struct stat sb;
    const char *slash = strrchr(data_dir, '/');
    snprintf(link, sizeof(link), "%.*s/by-name/%s", (int)(slash - data_dir), data_dir, name);
    if (lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode) && unlink(link) < 0)
        log_msg(LOG_WARNING, "cannot remove %s: %s", link, strerror(errno));
}

/* Remove a deleted dataset's prepared data (rec: a version's record) when it
 * lies in mtcd's cache, below it, in a directory named by its key. */
static void remove_prepared(const struct control_datasets *cfg, const json_t *rec)
{
    const char *path = json_string_value(json_object_get(rec, "path"));
    const char *key = json_string_value(json_object_get(rec, "key"));
    char real[PATH_MAX], cache[PATH_MAX];
    if (!path || !key || !*key || !cfg->cache_dir || !realpath(cfg->cache_dir, cache) ||
        !realpath(path, real))
        return;
    size_t n = strlen(cache);
    const char *base = strrchr(real, '/');
    if (strncmp(real, cache, n) != 0 || real[n] != '/' || !base || strcmp(base + 1, key) != 0) {
        log_msg(LOG_WARNING, "dataset data %s is not a cache entry of %s: left in place", real,
                cache);
        return;
    }
    if (mtc_rm_rf(real) < 0)
        log_msg(LOG_WARNING, "cannot remove %s: %s", real, strerror(errno));
    else
        log_msg(LOG_NOTICE, "removed prepared data %s", real);
}

int api_dataset_delete(struct api_req *r, struct api_resp *out)
{
    if (api_check_parent(r, out) < 0 || check_name(r->cap[2], out) < 0)
        return 0;
    char busy[48] = "", data_dir[PATH_MAX] = "";
    json_t *orphans = NULL;
    int n = 0;
    struct store_dataset_version *v =
        store_dataset_versions(r->st, r->cap[0], r->cap[1], r->cap[2], &n);
    if (n > 0)
        snprintf(data_dir, sizeof(data_dir), "%s",
                 json_string_value(json_object_get(v[n - 1].record, "path")));
    store_dataset_versions_free(v, n);
    if (store_dataset_delete(r->st, r->cap[0], r->cap[1], r->cap[2], NULL, busy, &orphans) < 0) {
        if (errno == EBUSY)
            return api_error(out, 400, "precondition: dataset %s has an operation in progress: %s",
                             r->cap[2], busy);
        return api_error(out, errno == ENOENT ? 404 : 500, "dataset %s %s", r->cap[2],
                         errno == ENOENT ? "not found" : "cannot be deleted");
    }
    size_t i;
    json_t *rec;
    json_array_foreach(orphans, i, rec) remove_prepared(control_datasets(r->ctl), rec);
    if (strrchr(data_dir, '/'))
        remove_name_link(data_dir, r->cap[2]);
    json_decref(orphans);
    log_msg(LOG_NOTICE, "dataset %s deleted", r->cap[2]);
    out->body = json_object(); /* google.protobuf.Empty */
    return 0;
}
