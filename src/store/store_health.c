/* store_health: node health (the last report per node, with its remediation
 * state), health scans and the remediation history the policy counts. */
#include "store/internal.h"

#include <stdlib.h>

int store_health_put(struct store *st, const char *cluster_id, const char *node,
                     const struct store_health *h)
{
    return store_i_run_locked(
        st,
        store_i_prep(st,
                     "INSERT INTO node_health (cluster_id, node, time_ms, status, failing_check,"
                     " reason, severity, results) VALUES (?,?,?,?,?,?,?,?)"
                     " ON CONFLICT (cluster_id, node) DO UPDATE SET time_ms=excluded.time_ms,"
                     " status=excluded.status, failing_check=excluded.failing_check,"
                     " reason=excluded.reason, severity=excluded.severity,"
                     " results=excluded.results",
                     "sslssssj", cluster_id, node, mtc_now_ms(), h->status, h->failing_check,
                     h->reason, h->severity, h->results));
}

int store_health_set_remediation(struct store *st, const char *cluster_id, const char *node,
                                 const char *state)
{
    return store_i_run_locked(
        st, store_i_prep(st,
                         "INSERT INTO node_health (cluster_id, node, time_ms, status, remediation)"
                         " VALUES (?,?,?,'UNKNOWN',?) ON CONFLICT (cluster_id, node)"
                         " DO UPDATE SET remediation=excluded.remediation",
                         "ssls", cluster_id, node, mtc_now_ms(), state));
}

/* A node_health row: its columns in this order, results last and only when the
 * statement selects it (a cluster view's rows leave the array out, unparsed). */
#define HEALTH_COLS "node, time_ms, status, failing_check, reason, severity, remediation"

static void read_health(sqlite3_stmt *s, void *out)
{
    struct store_health *h = out;
    store_i_col_text(s, 0, h->node, sizeof(h->node));
    h->time_ms = sqlite3_column_int64(s, 1);
    store_i_col_text(s, 2, h->status, sizeof(h->status));
    store_i_col_text(s, 3, h->failing_check, sizeof(h->failing_check));
    store_i_col_text(s, 4, h->reason, sizeof(h->reason));
    store_i_col_text(s, 5, h->severity, sizeof(h->severity));
    store_i_col_text(s, 6, h->remediation, sizeof(h->remediation));
    h->results = sqlite3_column_count(s) > 7 ? store_i_col_json(s, 7) : NULL;
}

struct store_health *store_health_list(struct store *st, const char *cluster_id, int *n)
{
    return store_i_list(st, read_health, sizeof(struct store_health), ALL_ROWS, n,
                        "SELECT " HEALTH_COLS ", results FROM node_health WHERE cluster_id=?"
                        " ORDER BY node",
                        "s", cluster_id);
}

struct store_health *store_health_status_list(struct store *st, const char *cluster_id, int *n)
{
    return store_i_list(st, read_health, sizeof(struct store_health), ALL_ROWS, n,
                        "SELECT " HEALTH_COLS " FROM node_health WHERE cluster_id=? ORDER BY node",
                        "s", cluster_id);
}

void store_health_free(struct store_health *arr, int n)
{
    for (int i = 0; arr && i < n; i++)
        json_decref(arr[i].results);
    free(arr);
}

int store_health_delete(struct store *st, const char *cluster_id)
{
    pthread_mutex_lock(&st->lock);
    int rc = store_i_run(
        st, store_i_prep(st, "DELETE FROM node_health WHERE cluster_id=?", "s", cluster_id));
    if (rc == 0)
        rc = store_i_run(
            st, store_i_prep(st, "DELETE FROM remediations WHERE cluster_id=?", "s", cluster_id));
    if (rc == 0)
        rc = store_i_run(
            st, store_i_prep(st, "DELETE FROM node_scans WHERE cluster_id=?", "s", cluster_id));
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_scan_put(struct store *st, const char *cluster_id, const struct store_scan *sc)
{
    return store_i_run_locked(
        st, store_i_prep(
                st,
                "INSERT INTO node_scans (cluster_id, node, time_ms, state, checks, reason, op_id)"
                " VALUES (?,?,?,?,?,?,?) ON CONFLICT (cluster_id, node) DO UPDATE SET"
                " time_ms=excluded.time_ms, state=excluded.state, checks=excluded.checks,"
                " reason=excluded.reason, op_id=excluded.op_id",
                "sslssss", cluster_id, sc->node, sc->time_ms, sc->state, sc->checks, sc->reason,
                sc->op_id));
}

static void read_scan(sqlite3_stmt *s, void *out)
{
    struct store_scan *sc = out;
    store_i_col_text(s, 0, sc->node, sizeof(sc->node));
    sc->time_ms = sqlite3_column_int64(s, 1);
    store_i_col_text(s, 2, sc->state, sizeof(sc->state));
    store_i_col_text(s, 3, sc->checks, sizeof(sc->checks));
    store_i_col_text(s, 4, sc->reason, sizeof(sc->reason));
    store_i_col_text(s, 5, sc->op_id, sizeof(sc->op_id));
}

struct store_scan *store_scan_list(struct store *st, const char *cluster_id, int *n)
{
    return store_i_list(st, read_scan, sizeof(struct store_scan), ALL_ROWS, n,
                        "SELECT node, time_ms, state, checks, reason, op_id FROM node_scans"
                        " WHERE cluster_id=? ORDER BY node",
                        "s", cluster_id);
}

int store_remediation_add(struct store *st, const char *cluster_id, const char *node,
                          const char *action, const char *check, const char *op_id)
{
    return store_i_run_locked(
        st, store_i_prep(st,
                         "INSERT INTO remediations (cluster_id, node, time_ms, action, check_name,"
                         " op_id) VALUES (?,?,?,?,?,?)",
                         "sslsss", cluster_id, node, mtc_now_ms(), action, check, op_id));
}

int store_remediation_last(struct store *st, const char *cluster_id, const char *node,
                           char action[16], char op_id[48])
{
    int rc = -1;
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s =
        store_i_prep(st,
                     "SELECT action, op_id FROM remediations WHERE cluster_id=? AND node=?"
                     " ORDER BY seq DESC LIMIT 1",
                     "ss", cluster_id, node);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        store_i_col_text(s, 0, action, 16);
        store_i_col_text(s, 1, op_id, 48);
        rc = 0;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_remediation_count(struct store *st, const char *cluster_id, const char *node,
                            int64_t since_ms)
{
    int n = -1;
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = store_i_prep(st,
                                   "SELECT count(*) FROM remediations WHERE cluster_id=? AND node=?"
                                   " AND time_ms >= ?",
                                   "ssl", cluster_id, node, since_ms);
    if (s && sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return n;
}
