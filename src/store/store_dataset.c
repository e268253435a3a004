/* store_dataset: datasets, their versions (one per distinct prepared key) and
 * the operations that prepare or delete them. */
#include "store/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DATASET_COLS "project, location, name, state, spec, create_ms, update_ms"

static void read_dataset(sqlite3_stmt *s, void *out)
{
    struct store_dataset *d = out;
    memset(d, 0, sizeof(*d));
    store_i_col_text(s, 0, d->project, sizeof(d->project));
    store_i_col_text(s, 1, d->location, sizeof(d->location));
    store_i_col_text(s, 2, d->name, sizeof(d->name));
    store_i_col_text(s, 3, d->state, sizeof(d->state));
    d->spec = store_i_col_json(s, 4);
    d->create_ms = sqlite3_column_int64(s, 5);
    d->update_ms = sqlite3_column_int64(s, 6);
}

void store_dataset_release(struct store_dataset *d)
{
    if (!d)
        return;
    json_decref(d->spec);
    d->spec = NULL;
}

void store_dataset_versions_free(struct store_dataset_version *v, int n)
{
    for (int i = 0; v && i < n; i++)
        json_decref(v[i].record);
    free(v);
}

int store_dataset_create(struct store *st, const struct store_dataset *d, const struct store_op *op,
                         mtc_error_t *err)
{
    int64_t now = mtc_now_ms();
    int rc = -1;
    pthread_mutex_lock(&st->lock);
    if (store_i_exec_sql(st->db, "BEGIN IMMEDIATE", err) < 0)
        goto out;
    if (store_i_run(
            st, store_i_prep(st, "INSERT INTO datasets (" DATASET_COLS ") VALUES (?,?,?,?,?,?,?)",
                             "ssssjll", d->project, d->location, d->name, d->state, d->spec, now,
                             now)) < 0 ||
        store_i_insert_op(st, op) < 0) {
        int e = errno == EEXIST ? EEXIST : EIO;
        store_i_exec_sql(st->db, "ROLLBACK", NULL);
        errno = e;
        errprintf(err, e == EEXIST ? "dataset %s already exists" : "cannot store dataset %s",
                  d->name);
        goto out;
    }
    rc = store_i_exec_sql(st->db, "COMMIT", err);
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_dataset_get(struct store *st, const char *project, const char *location,
                      const char *name, struct store_dataset *out)
{
    int rc = -1;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s =
        store_i_prep(st,
                     "SELECT " DATASET_COLS " FROM datasets WHERE project=? AND location=?"
                     " AND name=?",
                     "sss", project, location, name);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        read_dataset(s, out);
        rc = 0;
    } else {
        errno = s ? ENOENT : EIO;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

struct store_dataset *store_dataset_list(struct store *st, const char *project,
                                         const char *location, const char *after, int limit, int *n)
{
    return store_i_name_page(st, "SELECT " DATASET_COLS " FROM datasets", read_dataset,
                             sizeof(struct store_dataset), project, location, after, limit, n);
}

static void read_dataset_version(sqlite3_stmt *s, void *out)
{
    struct store_dataset_version *v = out;
    v->version = sqlite3_column_int(s, 0);
    store_i_col_text(s, 1, v->key, sizeof(v->key));
    v->record = store_i_col_json(s, 2);
    v->create_ms = sqlite3_column_int64(s, 3);
}

struct store_dataset_version *store_dataset_versions(struct store *st, const char *project,
                                                     const char *location, const char *name,
                                                     int *n)
{
    return store_i_list(st, read_dataset_version, sizeof(struct store_dataset_version), ALL_ROWS, n,
                        "SELECT version, key, record, create_ms FROM dataset_versions"
                        " WHERE project=? AND location=? AND name=? ORDER BY version",
                        "sss", project, location, name);
}

int store_dataset_op_begin(struct store *st, const struct store_op *op, const char *name,
                           char busy_op[48])
{
    int rc = -1, e = EIO;
    pthread_mutex_lock(&st->lock);
    if (store_i_exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    if (store_i_target_busy(st, op->project, op->location, op->target, NULL, busy_op)) {
        e = EBUSY;
    } else if (store_i_run(
                   st,
                   store_i_prep(st,
                                "UPDATE datasets SET state='PREPARING', update_ms=? WHERE project=?"
                                " AND location=? AND name=?",
                                "lsss", mtc_now_ms(), op->project, op->location, name)) < 0) {
        e = EIO;
    } else if (sqlite3_changes(st->db) == 0) {
        e = ENOENT;
    } else if (store_i_insert_op(st, op) == 0) {
        rc = store_i_exec_sql(st->db, "COMMIT", NULL);
        goto out;
    }
    store_i_exec_sql(st->db, "ROLLBACK", NULL);
    errno = e;
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_dataset_record(struct store *st, const char *project, const char *location,
                         const char *name, const json_t *spec, const char *key,
                         const json_t *record, int *version, int *added)
{
    int rc = -1, latest = 0;
    char latest_key[160] = "";
    int64_t now = mtc_now_ms();
    *added = 0;
    pthread_mutex_lock(&st->lock);
    if (store_i_exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    sqlite3_stmt *s = store_i_prep(st,
                                   "SELECT version, key FROM dataset_versions WHERE project=? AND"
                                   " location=? AND name=? ORDER BY version DESC LIMIT 1",
                                   "sss", project, location, name);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        latest = sqlite3_column_int(s, 0);
        store_i_col_text(s, 1, latest_key, sizeof(latest_key));
    }
    sqlite3_finalize(s);
    int same = latest > 0 && strcmp(latest_key, key) == 0;
    *version = same ? latest : latest + 1;
    int e = 0;
    if (store_i_run(st, store_i_prep(
                            st,
                            "UPDATE datasets SET state='READY', spec=COALESCE(?, spec), update_ms=?"
                            " WHERE project=? AND location=? AND name=?",
                            "jlsss", spec, now, project, location, name)) < 0)
        e = EIO;
    else if (sqlite3_changes(st->db) == 0)
        e = ENOENT;
    else if (!same &&
             store_i_run(st,
                         store_i_prep(st,
                                      "INSERT INTO dataset_versions (project, location, name,"
                                      " version, key, record, create_ms) VALUES (?,?,?,?,?,?,?)",
                                      "sssisjl", project, location, name, *version, key, record,
                                      now)) < 0)
        e = EIO;
    if (e) {
        store_i_exec_sql(st->db, "ROLLBACK", NULL);
        errno = e;
        goto out;
    }
    rc = store_i_exec_sql(st->db, "COMMIT", NULL);
    *added = rc == 0 && !same;
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_dataset_set_state(struct store *st, const char *project, const char *location,
                            const char *name, const char *state)
{
    return store_i_update_one(
        st, store_i_prep(st,
                         "UPDATE datasets SET state=?, update_ms=? WHERE project=? AND"
                         " location=? AND name=?",
                         "slsss", state, mtc_now_ms(), project, location, name));
}

int store_dataset_delete(struct store *st, const char *project, const char *location,
                         const char *name, const char *except_op, char busy_op[48],
                         json_t **orphans)
{
    int rc = -1, e = EIO;
    char target[96];
    snprintf(target, sizeof(target), "datasets/%s", name);
    if (orphans)
        *orphans = NULL;
    json_t *gone = json_array();
    pthread_mutex_lock(&st->lock);
    if (store_i_exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    if (store_i_target_busy(st, project, location, target, except_op, busy_op)) {
        e = EBUSY;
        goto rollback;
    }
    if (store_i_run(
            st, store_i_prep(st, "DELETE FROM datasets WHERE project=? AND location=? AND name=?",
                             "sss", project, location, name)) < 0)
        goto rollback;
    if (sqlite3_changes(st->db) == 0) {
        e = ENOENT;
        goto rollback;
    }
    /* one record per key of this dataset that no other dataset's version uses */
    sqlite3_stmt *s =
        store_i_prep(st,
                     "SELECT record FROM dataset_versions v WHERE project=? AND location=?"
                     " AND name=? AND NOT EXISTS (SELECT 1 FROM dataset_versions o WHERE"
                     " o.key = v.key AND NOT (o.project=v.project AND"
                     " o.location=v.location AND o.name=v.name)) GROUP BY key",
                     "sss", project, location, name);
    while (s && sqlite3_step(s) == SQLITE_ROW) {
        json_t *r = store_i_col_json(s, 0);
        if (r)
            json_array_append_new(gone, r);
    }
    sqlite3_finalize(s);
    if (store_i_run(
            st, store_i_prep(
                    st, "DELETE FROM dataset_versions WHERE project=? AND location=? AND name=?",
                    "sss", project, location, name)) < 0)
        goto rollback;
    rc = store_i_exec_sql(st->db, "COMMIT", NULL);
    if (rc == 0 && orphans) {
        *orphans = gone;
        gone = NULL;
    }
    goto out;
rollback:
    store_i_exec_sql(st->db, "ROLLBACK", NULL);
    errno = e;
out:
    pthread_mutex_unlock(&st->lock);
    json_decref(gone);
    return rc;
}
