/* store_model: the model registry's records — models, their versions and
 * aliases (exactly one version holds "default"), and model operations. */
#include "store/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_COLS "project, location, name, meta, create_ms, update_ms"
#define MODEL_WHERE " WHERE project=? AND location=? AND name=?"

static void read_model(sqlite3_stmt *s, void *out)
{
    struct store_model *m = out;
    memset(m, 0, sizeof(*m));
    store_i_col_text(s, 0, m->project, sizeof(m->project));
    store_i_col_text(s, 1, m->location, sizeof(m->location));
    store_i_col_text(s, 2, m->name, sizeof(m->name));
    m->meta = store_i_col_json(s, 3);
    if (!m->meta)
        m->meta = json_object();
    m->create_ms = sqlite3_column_int64(s, 4);
    m->update_ms = sqlite3_column_int64(s, 5);
}

void store_model_release(struct store_model *m)
{
    if (!m)
        return;
    json_decref(m->meta);
    m->meta = NULL;
}

void store_model_versions_free(struct store_model_version *v, int n)
{
    for (int i = 0; v && i < n; i++) {
        json_decref(v[i].aliases);
        json_decref(v[i].manifest);
        json_decref(v[i].lineage);
    }
    free(v);
}

int store_model_get(struct store *st, const char *project, const char *location,
                    const char *name, struct store_model *out)
{
    int rc = -1;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = store_i_prep(st, "SELECT " MODEL_COLS " FROM models" MODEL_WHERE, "sss",
                                   project, location, name);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        read_model(s, out);
        rc = 0;
    } else {
        errno = s ? ENOENT : EIO;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

struct store_model *store_model_list(struct store *st, const char *project, const char *location,
                                     const char *after, int limit, int *n)
{
    return store_i_name_page(st, "SELECT " MODEL_COLS " FROM models", read_model,
                             sizeof(struct store_model), project, location, after, limit, n);
}

static void read_model_version(sqlite3_stmt *s, void *out)
{
    struct store_model_version *v = out;
    v->version = sqlite3_column_int(s, 0);
    v->aliases = store_i_col_json(s, 1);
    if (!json_is_array(v->aliases)) {
        json_decref(v->aliases);
        v->aliases = json_array();
    }
    v->manifest = store_i_col_json(s, 2);
    v->lineage = store_i_col_json(s, 3);
    v->create_ms = sqlite3_column_int64(s, 4);
    v->update_ms = sqlite3_column_int64(s, 5);
}

/* The versions of a model, oldest first; under the lock. */
static struct store_model_version *versions_locked(struct store *st, const char *project,
                                                   const char *location, const char *name, int *n)
{
    return store_i_read_rows(
        store_i_prep(st,
                     "SELECT version, aliases, manifest, lineage, create_ms, update_ms"
                     " FROM model_versions" MODEL_WHERE " ORDER BY version",
                     "sss", project, location, name),
        read_model_version, sizeof(struct store_model_version), ALL_ROWS, n);
}

struct store_model_version *store_model_versions(struct store *st, const char *project,
                                                 const char *location, const char *name, int *n)
{
    pthread_mutex_lock(&st->lock);
    struct store_model_version *v = versions_locked(st, project, location, name, n);
    pthread_mutex_unlock(&st->lock);
    return v;
}

int store_model_add_version(struct store *st, const char *project, const char *location,
                            const char *name, const json_t *meta, const json_t *manifest,
                            const json_t *lineage, int *version)
{
    int rc = -1, e = EIO, count = 0;
    int64_t now = mtc_now_ms();
    pthread_mutex_lock(&st->lock);
    if (store_i_exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    json_t *empty = json_object();
    if (store_i_run(st,
                    store_i_prep(
                        st,
                        "INSERT OR IGNORE INTO models (project, location, name, meta, next_version,"
                        " create_ms, update_ms) VALUES (?,?,?,?,1,?,?)",
                        "sssjll", project, location, name, meta ? meta : empty, now, now)) < 0) {
        json_decref(empty);
        goto rollback;
    }
    json_decref(empty);
    sqlite3_stmt *s =
        store_i_prep(st,
                     "SELECT next_version, (SELECT COUNT(*) FROM model_versions" MODEL_WHERE
                     ") FROM models" MODEL_WHERE,
                     "ssssss", project, location, name, project, location, name);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        *version = sqlite3_column_int(s, 0);
        count = sqlite3_column_int(s, 1);
    } else {
        sqlite3_finalize(s);
        goto rollback;
    }
    sqlite3_finalize(s);
    /* the first version holds "default" */
    json_t *aliases = count == 0 ? json_pack("[s]", "default") : json_array();
    int bad =
        store_i_run(st, store_i_prep(
                            st,
                            "INSERT INTO model_versions (project, location, name, version, aliases,"
                            " manifest, lineage, create_ms, update_ms) VALUES (?,?,?,?,?,?,?,?,?)",
                            "sssijjjll", project, location, name, *version, aliases, manifest,
                            lineage, now, now)) < 0 ||
        store_i_run(st,
                    store_i_prep(st, "UPDATE models SET next_version=?, update_ms=?" MODEL_WHERE,
                                 "ilsss", *version + 1, now, project, location, name)) < 0;
    json_decref(aliases);
    if (bad)
        goto rollback;
    rc = store_i_exec_sql(st->db, "COMMIT", NULL);
    goto out;
rollback:
    store_i_exec_sql(st->db, "ROLLBACK", NULL);
    errno = e;
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_model_set_meta(struct store *st, const char *project, const char *location,
                         const char *name, const json_t *meta)
{
    return store_i_update_one(st,
                              store_i_prep(st, "UPDATE models SET meta=?, update_ms=?" MODEL_WHERE,
                                           "jlsss", meta, mtc_now_ms(), project, location, name));
}

static void del_str(json_t *a, const char *s)
{
    for (size_t i = json_array_size(a); i-- > 0;)
        if (strcmp(json_string_value(json_array_get(a, i)), s) == 0)
            json_array_remove(a, i);
}

/* Write back every version's aliases (those that changed); under the lock. */
static int save_aliases(struct store *st, const char *project, const char *location,
                        const char *name, struct store_model_version *v, int n, json_t *before[])
{
    int64_t now = mtc_now_ms();
    for (int i = 0; i < n; i++)
        if (!json_equal(before[i], v[i].aliases) &&
            store_i_run(st,
                        store_i_prep(st,
                                     "UPDATE model_versions SET aliases=?, update_ms=?" MODEL_WHERE
                                     " AND version=?",
                                     "jlsssi", v[i].aliases, now, project, location, name,
                                     v[i].version)) < 0)
            return -1;
    return 0;
}

int store_model_aliases(struct store *st, const char *project, const char *location,
                        const char *name, int version, const json_t *add, const json_t *remove)
{
    int rc = -1, e = EIO, n = 0;
    json_t **before = NULL;
    pthread_mutex_lock(&st->lock);
    if (store_i_exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0) {
        pthread_mutex_unlock(&st->lock);
        return -1;
    }
    struct store_model_version *v = versions_locked(st, project, location, name, &n), *me = NULL;
    before = calloc((size_t)n + 1, sizeof(*before));
    for (int i = 0; i < n && before; i++) {
        before[i] = json_deep_copy(v[i].aliases);
        if (v[i].version == version)
            me = &v[i];
    }
    if (!me || !before) {
        e = me ? ENOMEM : ENOENT;
        goto rollback;
    }
    size_t k;
    json_t *a;
    json_array_foreach(remove, k, a)
    {
        if (strcmp(json_string_value(a), "default") == 0 &&
            mtc_json_array_has(me->aliases, "default")) {
            e = EPERM; /* exactly one version holds default: move it instead */
            goto rollback;
        }
        del_str(me->aliases, json_string_value(a));
    }
    json_array_foreach(add, k, a)
    {
        for (int i = 0; i < n; i++) /* an alias names one version: it moves */
            del_str(v[i].aliases, json_string_value(a));
        json_array_append(me->aliases, a);
    }
    if (save_aliases(st, project, location, name, v, n, before) < 0)
        goto rollback;
    rc = store_i_exec_sql(st->db, "COMMIT", NULL);
    goto out;
rollback:
    store_i_exec_sql(st->db, "ROLLBACK", NULL);
    errno = e;
out:
    pthread_mutex_unlock(&st->lock);
    for (int i = 0; before && i < n; i++)
        json_decref(before[i]);
    free(before);
    store_model_versions_free(v, n);
    return rc;
}

int store_model_delete_version(struct store *st, const char *project, const char *location,
                               const char *name, int version, json_t **manifest)
{
    int rc = -1, e = EIO, n = 0;
    *manifest = NULL;
    pthread_mutex_lock(&st->lock);
    if (store_i_exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0) {
        pthread_mutex_unlock(&st->lock);
        return -1;
    }
    struct store_model_version *v = versions_locked(st, project, location, name, &n);
    int at = -1, newest = -1;
    for (int i = 0; i < n; i++)
        if (v[i].version == version)
            at = i;
        else
            newest = i;
    if (at < 0 || n < 2) {
        e = at < 0 ? ENOENT : EBUSY; /* the last version goes with its model */
        goto rollback;
    }
    if (store_i_run(st, store_i_prep(st, "DELETE FROM model_versions" MODEL_WHERE " AND version=?",
                                     "sssi", project, location, name, version)) < 0)
        goto rollback;
    /* default moves to the newest remaining version */
    if (mtc_json_array_has(v[at].aliases, "default") &&
        !mtc_json_array_has(v[newest].aliases, "default")) {
        json_array_append_new(v[newest].aliases, json_string("default"));
        if (store_i_run(st,
                        store_i_prep(st,
                                     "UPDATE model_versions SET aliases=?, update_ms=?" MODEL_WHERE
                                     " AND version=?",
                                     "jlsssi", v[newest].aliases, mtc_now_ms(), project, location,
                                     name, v[newest].version)) < 0)
            goto rollback;
    }
    rc = store_i_exec_sql(st->db, "COMMIT", NULL);
    if (rc == 0)
        *manifest = json_incref(v[at].manifest);
    goto out;
rollback:
    store_i_exec_sql(st->db, "ROLLBACK", NULL);
    errno = e;
out:
    pthread_mutex_unlock(&st->lock);
    store_model_versions_free(v, n);
    return rc;
}

int store_model_delete(struct store *st, const char *project, const char *location,
                       const char *name, json_t **manifests)
{
    int rc = -1, e = EIO, n = 0;
    *manifests = NULL;
    pthread_mutex_lock(&st->lock);
    if (store_i_exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0) {
        pthread_mutex_unlock(&st->lock);
        return -1;
    }
    struct store_model_version *v = versions_locked(st, project, location, name, &n);
    if (store_i_run(st, store_i_prep(st, "DELETE FROM models" MODEL_WHERE, "sss", project, location,
                                     name)) < 0)
        goto rollback;
    if (sqlite3_changes(st->db) == 0) {
        e = ENOENT;
        goto rollback;
    }
    if (store_i_run(st, store_i_prep(st, "DELETE FROM model_versions" MODEL_WHERE, "sss", project,
                                     location, name)) < 0)
        goto rollback;
    rc = store_i_exec_sql(st->db, "COMMIT", NULL);
    if (rc == 0) {
        *manifests = json_array();
        for (int i = 0; i < n; i++)
            if (v[i].manifest)
                json_array_append(*manifests, v[i].manifest);
    }
    goto out;
rollback:
    store_i_exec_sql(st->db, "ROLLBACK", NULL);
    errno = e;
out:
    pthread_mutex_unlock(&st->lock);
    store_model_versions_free(v, n);
    return rc;
}

json_t *store_model_all(struct store *st)
{
    json_t *all = json_array();
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s =
        store_i_prep(st, "SELECT project, location, name FROM models ORDER BY 1, 2, 3", "");
    while (s && sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(all, json_pack("{s:s, s:s, s:s}", "project",
                                             (const char *)sqlite3_column_text(s, 0), "location",
                                             (const char *)sqlite3_column_text(s, 1), "name",
                                             (const char *)sqlite3_column_text(s, 2)));
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return all;
}

int store_model_op_begin(struct store *st, const struct store_op *op, char busy_op[48])
{
    int rc = -1, e = EIO;
    pthread_mutex_lock(&st->lock);
    if (store_i_exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    if (store_i_target_busy(st, op->project, op->location, op->target, NULL, busy_op))
        e = EBUSY;
    else if (store_i_insert_op(st, op) == 0) {
        rc = store_i_exec_sql(st->db, "COMMIT", NULL);
        goto out;
    }
    store_i_exec_sql(st->db, "ROLLBACK", NULL);
    errno = e;
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}
