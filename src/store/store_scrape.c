/* store_scrape: the rows /metrics formats, read straight from SQLite (its
 * JSON functions pick the fields): a cluster's nodes with their remediation
 * state, each node's latest check results, the nodes under remediation —
 * no JSON objects are made, so a scrape of thousands of nodes stays cheap. */
#include "store/internal.h"

#include <errno.h>

/* Step s (finalizing it) and call fn with each row's ncols columns as text
 * ("" for NULL); under the lock. 0, or -1 (EIO). */
static int rows(struct store *st, sqlite3_stmt *s, int ncols, store_row_fn fn, void *arg)
{
    const char *cols[8];
    int rc = SQLITE_ERROR;
    while (s && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        for (int i = 0; i < ncols && i < 8; i++) {
            const char *v = (const char *)sqlite3_column_text(s, i);
            cols[i] = v ? v : "";
        }
        fn(arg, cols);
    }
    int ok = s && rc == SQLITE_DONE;
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    if (!ok)
        errno = EIO;
    return ok ? 0 : -1;
}

int store_scrape_nodes(struct store *st, const char *cluster_id, store_row_fn fn, void *arg)
{
    pthread_mutex_lock(&st->lock);
    return rows(st,
                store_i_prep(st,
                             "SELECT json_extract(j.value, '$.instanceName'),"
                             " json_extract(j.value, '$.nodePoolId'),"
                             " json_extract(j.value, '$.nodeState'), h.remediation"
                             " FROM clusters c, json_each(c.nodes) j"
                             " LEFT JOIN node_health h ON h.cluster_id = c.id"
                             " AND h.node = json_extract(j.value, '$.instanceName')"
                             " WHERE c.id = ? ORDER BY j.key",
                             "s", cluster_id),
                4, fn, arg);
}

int store_scrape_report_times(struct store *st, const char *cluster_id, store_row_fn fn, void *arg)
{
    pthread_mutex_lock(&st->lock);
    return rows(st,
                store_i_prep(st,
                             "SELECT node, time_ms FROM node_health WHERE cluster_id = ?"
                             " ORDER BY node",
                             "s", cluster_id),
                2, fn, arg);
}

int store_scrape_checks(struct store *st, const char *cluster_id, int64_t since_ms, store_row_fn fn,
                        void *arg)
{
    pthread_mutex_lock(&st->lock);
    return rows(st,
                store_i_prep(st,
                             "SELECT h.node, h.time_ms, json_extract(r.value, '$.check'),"
                             " json_extract(r.value, '$.status')"
                             " FROM node_health h, json_each(h.results) r"
                             " WHERE h.cluster_id = ? AND h.time_ms >= ? ORDER BY h.node, r.key",
                             "sl", cluster_id, since_ms),
                4, fn, arg);
}

int store_scrape_remediations(struct store *st, const char *cluster_id, store_row_fn fn, void *arg)
{
    pthread_mutex_lock(&st->lock);
    return rows(st,
                store_i_prep(st,
                             "SELECT node, remediation FROM node_health"
                             " WHERE cluster_id = ? AND remediation != '' ORDER BY node",
                             "s", cluster_id),
                2, fn, arg);
}
