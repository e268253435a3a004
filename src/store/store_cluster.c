/* store_cluster: clusters, their long-running operations (one running per
 * cluster, or several REMEDIATEs on distinct nodes), the /metrics tallies of
 * operations and remediations, and cluster events. */
#include "store/internal.h"

#include <errno.h>
#include <string.h>

/* --- clusters ------------------------------------------------------------ */

#define CLUSTER_COLS "id, project, location, state, spec, nodes, create_ms, update_ms"

static void read_cluster(sqlite3_stmt *s, void *out)
{
    struct store_cluster *c = out;
    memset(c, 0, sizeof(*c));
    store_i_col_text(s, 0, c->id, sizeof(c->id));
    store_i_col_text(s, 1, c->project, sizeof(c->project));
    store_i_col_text(s, 2, c->location, sizeof(c->location));
    store_i_col_text(s, 3, c->state, sizeof(c->state));
    c->spec = store_i_col_json(s, 4);
    c->nodes = store_i_col_json(s, 5);
    c->create_ms = sqlite3_column_int64(s, 6);
    c->update_ms = sqlite3_column_int64(s, 7);
}

void store_cluster_release(struct store_cluster *c)
{
    if (!c)
        return;
    json_decref(c->spec);
    json_decref(c->nodes);
    c->spec = c->nodes = NULL;
}

int store_cluster_create(struct store *st, const struct store_cluster *c, const struct store_op *op,
                         mtc_error_t *err)
{
    int64_t now = mtc_now_ms();
    int rc = -1;
    pthread_mutex_lock(&st->lock);
    if (store_i_exec_sql(st->db, "BEGIN IMMEDIATE", err) < 0)
        goto out;
    if (store_i_run(
            st, store_i_prep(
                    st, "INSERT INTO clusters (" CLUSTER_COLS ") VALUES (?,?,?,?,?,NULL,?,?)",
                    "ssssjll", c->id, c->project, c->location, c->state, c->spec, now, now)) < 0) {
        int e = errno;
        store_i_exec_sql(st->db, "ROLLBACK", NULL);
        errno = e;
        errprintf(err, e == EEXIST ? "cluster %s already exists" : "cannot store cluster %s",
                  c->id);
        goto out;
    }
    if (store_i_insert_op(st, op) < 0) {
        store_i_exec_sql(st->db, "ROLLBACK", NULL);
        errprintf(err, "cannot store operation for cluster %s", c->id);
        errno = EIO;
        goto out;
    }
    rc = store_i_exec_sql(st->db, "COMMIT", err);
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_cluster_get(struct store *st, const char *id, struct store_cluster *out)
{
    int rc = -1;
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s =
        store_i_prep_kept(st, "SELECT " CLUSTER_COLS " FROM clusters WHERE id=?", "s", id);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        read_cluster(s, out);
        rc = 0;
    } else {
        errno = s ? ENOENT : EIO;
    }
    store_i_release(st, s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

struct store_cluster *store_cluster_list(struct store *st, const char *project,
                                         const char *location, const char *after, int limit, int *n)
{
    return store_i_list(st, read_cluster, sizeof(struct store_cluster), limit, n,
                        "SELECT " CLUSTER_COLS " FROM clusters WHERE project=? AND location=?"
                        " AND id > ? ORDER BY id LIMIT ?",
                        "sssi", project, location, after ? after : "", limit);
}

json_t *store_cluster_ids(struct store *st)
{
    json_t *ids = json_array();
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = store_i_prep(st, "SELECT id FROM clusters ORDER BY id", "");
    while (s && sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(ids, json_string((const char *)sqlite3_column_text(s, 0)));
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return ids;
}

int store_cluster_set_state(struct store *st, const char *id, const char *state)
{
    return store_i_update_one(
        st, store_i_prep(st, "UPDATE clusters SET state=?, update_ms=? WHERE id=?", "sls", state,
                         mtc_now_ms(), id));
}

int store_cluster_set_spec(struct store *st, const char *id, const json_t *spec, const char *state)
{
    return store_i_update_one(
        st, store_i_prep(st, "UPDATE clusters SET spec=?, state=?, update_ms=? WHERE id=?", "jsls",
                         spec, state, mtc_now_ms(), id));
}

int store_cluster_head(struct store *st, const char *id, struct store_cluster *out)
{
    int rc = -1;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = store_i_prep(
        st, "SELECT id, project, location, state, create_ms, update_ms FROM clusters WHERE id=?",
        "s", id);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        store_i_col_text(s, 0, out->id, sizeof(out->id));
        store_i_col_text(s, 1, out->project, sizeof(out->project));
        store_i_col_text(s, 2, out->location, sizeof(out->location));
        store_i_col_text(s, 3, out->state, sizeof(out->state));
        out->create_ms = sqlite3_column_int64(s, 4);
        out->update_ms = sqlite3_column_int64(s, 5);
        rc = 0;
    } else {
        errno = s ? ENOENT : EIO;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_cluster_node_pool(struct store *st, const char *cluster_id, const char *node, char *pool,
                            size_t len)
{
    int rc = -1;
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = store_i_prep(
        st, "SELECT pool FROM cluster_nodes WHERE cluster_id=? AND node=?", "ss", cluster_id, node);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        store_i_col_text(s, 0, pool, len);
        rc = 0;
    } else {
        errno = s ? ENOENT : EIO;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

/* nodesStatus and its cluster_nodes index change together, in one transaction. */
int store_cluster_set_nodes(struct store *st, const char *id, const json_t *nodes)
{
    pthread_mutex_lock(&st->lock);
    int rc = store_i_exec_sql(st->db, "BEGIN IMMEDIATE", NULL);
    if (rc == 0)
        rc = store_i_run(st,
                         store_i_prep(st, "UPDATE clusters SET nodes=? WHERE id=?", "js", nodes, id));
    if (rc == 0 && sqlite3_changes(st->db) == 0) {
        errno = ENOENT;
        rc = -1;
    }
    if (rc == 0)
        rc = store_i_run(st,
                         store_i_prep(st, "DELETE FROM cluster_nodes WHERE cluster_id=?", "s", id));
    if (rc == 0)
        rc = store_i_run(st, store_i_prep(st, STORE_I_FILL_CLUSTER_NODES("c.id=?"), "s", id));
    int saved = errno;
    store_i_exec_sql(st->db, rc == 0 ? "COMMIT" : "ROLLBACK", NULL);
    pthread_mutex_unlock(&st->lock);
    errno = saved;
    return rc;
}

int store_op_begin(struct store *st, const struct store_op *op, const char *cluster_state,
                   char busy_op[48])
{
    int rc = -1;
    pthread_mutex_lock(&st->lock);
    if (store_i_exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    sqlite3_stmt *s = store_i_prep(st, "SELECT id FROM operations WHERE cluster_id=? AND done=0",
                                   "s", op->cluster_id);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        store_i_col_text(s, 0, busy_op, 48);
        sqlite3_finalize(s);
        store_i_exec_sql(st->db, "ROLLBACK", NULL);
        errno = EBUSY;
        goto out;
    }
    sqlite3_finalize(s);
    if (store_i_run(st, store_i_prep(st, "UPDATE clusters SET state=?, update_ms=? WHERE id=?",
                                     "sls", cluster_state, mtc_now_ms(), op->cluster_id)) < 0 ||
        sqlite3_changes(st->db) == 0 || store_i_insert_op(st, op) < 0) {
        int e = sqlite3_changes(st->db) == 0 ? ENOENT : EIO;
        store_i_exec_sql(st->db, "ROLLBACK", NULL);
        errno = e;
        goto out;
    }
    rc = store_i_exec_sql(st->db, "COMMIT", NULL);
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}

/* 1 when request {"nodes": [{"node"}...]} names node. */
static int request_names(const json_t *request, const char *node)
{
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(request, "nodes"), i, it)
    {
        const char *n = json_string_value(json_object_get(it, "node"));
        if (n && strcmp(n, node) == 0)
            return 1;
    }
    return 0;
}

int store_op_begin_shared(struct store *st, const struct store_op *op, const char *cluster_state,
                          char busy_op[48])
{
    int rc = -1, busy = 0;
    pthread_mutex_lock(&st->lock);
    if (store_i_exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    sqlite3_stmt *s =
        store_i_prep(st, "SELECT id, kind, request FROM operations WHERE cluster_id=? AND done=0",
                     "s", op->cluster_id);
    while (!busy && s && sqlite3_step(s) == SQLITE_ROW) {
        const char *kind = (const char *)sqlite3_column_text(s, 1);
        busy = !kind || strcmp(kind, op->kind) != 0;
        json_t *req = busy ? NULL : store_i_col_json(s, 2);
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(op->request, "nodes"), i, it)
        {
            const char *n = json_string_value(json_object_get(it, "node"));
            busy |= n && request_names(req, n);
        }
        json_decref(req);
        if (busy)
            store_i_col_text(s, 0, busy_op, 48);
    }
    sqlite3_finalize(s);
    if (busy) {
        store_i_exec_sql(st->db, "ROLLBACK", NULL);
        errno = EBUSY;
        goto out;
    }
    if (store_i_run(st, store_i_prep(st, "UPDATE clusters SET state=?, update_ms=? WHERE id=?",
                                     "sls", cluster_state, mtc_now_ms(), op->cluster_id)) < 0 ||
        sqlite3_changes(st->db) == 0 || store_i_insert_op(st, op) < 0) {
        int e = sqlite3_changes(st->db) == 0 ? ENOENT : EIO;
        store_i_exec_sql(st->db, "ROLLBACK", NULL);
        errno = e;
        goto out;
    }
    rc = store_i_exec_sql(st->db, "COMMIT", NULL);
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}

json_t *store_ops_active_nodes(struct store *st, const char *cluster_id, const char *kind)
{
    json_t *nodes = json_array();
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s =
        store_i_prep(st, "SELECT request FROM operations WHERE cluster_id=? AND kind=? AND done=0",
                     "ss", cluster_id, kind);
    while (s && sqlite3_step(s) == SQLITE_ROW) {
        json_t *req = store_i_col_json(s, 0), *it;
        size_t i;
        json_array_foreach(json_object_get(req, "nodes"), i, it)
        {
            json_t *n = json_object_get(it, "node");
            if (json_is_string(n))
                json_array_append(nodes, n);
        }
        json_decref(req);
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return nodes;
}

int store_cluster_delete(struct store *st, const char *id)
{
    int rc;
    pthread_mutex_lock(&st->lock);
    rc = store_i_run(st, store_i_prep(st, "DELETE FROM clusters WHERE id=?", "s", id));
    if (rc == 0)
        rc = store_i_run(st,
                         store_i_prep(st, "DELETE FROM cluster_nodes WHERE cluster_id=?", "s", id));
    /* its nodes' tokens die with it */
    if (rc == 0)
        rc = store_i_run(
            st, store_i_prep(st, "UPDATE tokens SET revoked=1 WHERE cluster_id=?", "s", id));
    /* and so does its job history (a new cluster of the same id starts empty) */
    if (rc == 0)
        rc = store_i_run(st,
                         store_i_prep(st, "DELETE FROM training_jobs WHERE cluster_id=?", "s", id));
    pthread_mutex_unlock(&st->lock);
    return rc;
}

/* --- operations ---------------------------------------------------------- */

void store_op_release(struct store_op *op)
{
    if (!op)
        return;
    json_decref(op->request);
    json_decref(op->response);
    op->request = op->response = NULL;
}

int store_op_get(struct store *st, const char *id, struct store_op *out)
{
    int rc = -1, step = SQLITE_ERROR;
    memset(out, 0, sizeof(*out)); /* releasing it is safe whatever happens */
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s =
        store_i_prep(st,
                     "SELECT id, project, location, cluster_id, kind, done, progress, request,"
                     " response, err_code, err_message, create_ms, update_ms, target"
                     " FROM operations WHERE id=?",
                     "s", id);
    if (s && (step = sqlite3_step(s)) == SQLITE_ROW) {
        store_i_col_text(s, 0, out->id, sizeof(out->id));
        store_i_col_text(s, 1, out->project, sizeof(out->project));
        store_i_col_text(s, 2, out->location, sizeof(out->location));
        store_i_col_text(s, 3, out->cluster_id, sizeof(out->cluster_id));
        store_i_col_text(s, 4, out->kind, sizeof(out->kind));
        out->done = sqlite3_column_int(s, 5);
        store_i_col_text(s, 6, out->progress, sizeof(out->progress));
        out->request = store_i_col_json(s, 7);
        out->response = store_i_col_json(s, 8);
        out->err_code = sqlite3_column_int(s, 9);
        store_i_col_text(s, 10, out->err_message, sizeof(out->err_message));
        out->create_ms = sqlite3_column_int64(s, 11);
        out->update_ms = sqlite3_column_int64(s, 12);
        store_i_col_text(s, 13, out->target, sizeof(out->target));
        rc = 0;
    } else {
        errno = step == SQLITE_DONE ? ENOENT : EIO;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_op_progress(struct store *st, const char *id, const char *message)
{
    return store_i_update_one(
        st, store_i_prep(st, "UPDATE operations SET progress=?, update_ms=? WHERE id=?", "sls",
                         message, mtc_now_ms(), id));
}

int store_op_finish(struct store *st, const char *id, const json_t *response, int err_code,
                    const char *err_message)
{
    return store_i_update_one(st,
                              store_i_prep(st,
                                           "UPDATE operations SET done=1, response=?, err_code=?,"
                                           " err_message=?, update_ms=? WHERE id=?",
                                           "jisls", err_code ? NULL : response, err_code,
                                           err_message ? err_message : "", mtc_now_ms(), id));
}

json_t *store_ops_pending(struct store *st)
{
    json_t *ids = json_array();
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s =
        store_i_prep(st, "SELECT id FROM operations WHERE done=0 ORDER BY create_ms", "");
    while (s && sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(ids, json_string((const char *)sqlite3_column_text(s, 0)));
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return ids;
}

/* --- tallies for /metrics ------------------------------------------------ */

/* Rows of a GROUP BY query: arrays of its text columns and a final count. */
static json_t *tally(struct store *st, const char *sql, int ncols)
{
    json_t *rows = json_array();
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = store_i_prep(st, sql, "");
    while (s && sqlite3_step(s) == SQLITE_ROW) {
        json_t *row = json_array();
        for (int i = 0; i < ncols; i++) {
            const unsigned char *t = sqlite3_column_text(s, i);
            json_array_append_new(row, json_string(t ? (const char *)t : ""));
        }
        json_array_append_new(row, json_integer(sqlite3_column_int64(s, ncols)));
        json_array_append_new(rows, row);
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return rows;
}

json_t *store_remediation_tally(struct store *st)
{
    return tally(st,
                 "SELECT cluster_id, action, count(*) FROM remediations"
                 " GROUP BY cluster_id, action ORDER BY cluster_id, action",
                 2);
}

json_t *store_op_tally(struct store *st)
{
    return tally(st,
                 "SELECT kind, CASE WHEN done=0 THEN 'RUNNING' WHEN err_code<>0 THEN 'FAILED'"
                 " ELSE 'SUCCEEDED' END AS outcome, count(*) FROM operations"
                 " GROUP BY kind, outcome ORDER BY kind, outcome",
                 2);
}

/* --- events -------------------------------------------------------------- */

int store_event_add(struct store *st, const char *cluster_id, const char *type, const char *node,
                    const char *message)
{
    return store_i_run_locked(
        st, store_i_prep(st,
                         "INSERT INTO events (cluster_id, time_ms, type, node, message)"
                         " VALUES (?,?,?,?,?)",
                         "slsss", cluster_id, mtc_now_ms(), type, node, message));
}

int store_event_add_job(struct store *st, const char *cluster_id, const char *type,
                        const char *owner, const char *brief, const char *message)
{
    return store_i_run_locked(
        st, store_i_prep(st,
                         "INSERT INTO events (cluster_id, time_ms, type, node, message, owner, brief)"
                         " VALUES (?,?,?,NULL,?,?,?)",
                         "slssss", cluster_id, mtc_now_ms(), type, message, owner ? owner : "",
                         brief));
}

static void read_event(sqlite3_stmt *s, void *out)
{
    struct store_event *e = out;
    e->time_ms = sqlite3_column_int64(s, 0);
    store_i_col_text(s, 1, e->type, sizeof(e->type));
    store_i_col_text(s, 2, e->node, sizeof(e->node));
    store_i_col_text(s, 3, e->message, sizeof(e->message));
    e->of_job = sqlite3_column_type(s, 4) != SQLITE_NULL;
    store_i_col_text(s, 4, e->owner, sizeof(e->owner));
    store_i_col_text(s, 5, e->brief, sizeof(e->brief));
}

struct store_event *store_events(struct store *st, const char *cluster_id, int limit, int *n)
{
    return store_i_list(st, read_event, sizeof(struct store_event), limit, n,
                        "SELECT time_ms, type, node, message, owner, brief FROM (SELECT * FROM"
                        " events WHERE cluster_id=? ORDER BY seq DESC LIMIT ?) ORDER BY seq",
                        "si", cluster_id, limit);
}
