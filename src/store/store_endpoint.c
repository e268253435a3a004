/* store_endpoint: inference endpoints (spec and last observed status). */
#include "store/internal.h"

#include <errno.h>
#include <string.h>

#define EP_COLS "project, location, name, spec, status, create_ms, update_ms"
#define EP_WHERE " WHERE project=? AND location=? AND name=?"

static void read_endpoint(sqlite3_stmt *s, void *out)
{
    struct store_endpoint *e = out;
    memset(e, 0, sizeof(*e));
    store_i_col_text(s, 0, e->project, sizeof(e->project));
    store_i_col_text(s, 1, e->location, sizeof(e->location));
    store_i_col_text(s, 2, e->name, sizeof(e->name));
    e->spec = store_i_col_json(s, 3);
    e->status = store_i_col_json(s, 4);
    if (!e->spec)
        e->spec = json_object();
    if (!e->status)
        e->status = json_object();
    e->create_ms = sqlite3_column_int64(s, 5);
    e->update_ms = sqlite3_column_int64(s, 6);
}

void store_endpoint_release(struct store_endpoint *e)
{
    if (!e)
        return;
    json_decref(e->spec);
    json_decref(e->status);
    e->spec = e->status = NULL;
}

int store_endpoint_create(struct store *st, const struct store_endpoint *e)
{
    int64_t now = mtc_now_ms();
    pthread_mutex_lock(&st->lock);
    int rc = store_i_run(
        st,
        store_i_prep(st, "INSERT INTO endpoints (" EP_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?)",
                     "sssjjll", e->project, e->location, e->name, e->spec, e->status, now, now));
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_endpoint_get(struct store *st, const char *project, const char *location,
                       const char *name, struct store_endpoint *out)
{
    int rc = -1;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = store_i_prep(st, "SELECT " EP_COLS " FROM endpoints" EP_WHERE, "sss", project,
                                   location, name);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        read_endpoint(s, out);
        rc = 0;
    } else {
        errno = s ? ENOENT : EIO;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_endpoint_put(struct store *st, const struct store_endpoint *e)
{
    pthread_mutex_lock(&st->lock);
    int rc = store_i_run(
        st,
        store_i_prep(st, "UPDATE endpoints SET spec=?, status=?, update_ms=?" EP_WHERE, "jjlsss",
                     e->spec, e->status, mtc_now_ms(), e->project, e->location, e->name));
    if (rc == 0 && sqlite3_changes(st->db) == 0)
        rc = -1, errno = ENOENT;
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_endpoint_delete(struct store *st, const char *project, const char *location,
                          const char *name)
{
    pthread_mutex_lock(&st->lock);
    int rc = store_i_run(
        st, store_i_prep(st, "DELETE FROM endpoints" EP_WHERE, "sss", project, location, name));
    if (rc == 0 && sqlite3_changes(st->db) == 0)
        rc = -1, errno = ENOENT;
    pthread_mutex_unlock(&st->lock);
    return rc;
}

struct store_endpoint *store_endpoint_list(struct store *st, const char *project,
                                           const char *location, const char *after, int limit,
                                           int *n)
{
    if (!project) /* every endpoint (mtcd's restart and supervision) */
        return store_i_list(st, read_endpoint, sizeof(struct store_endpoint), limit, n,
                            "SELECT " EP_COLS
                            " FROM endpoints ORDER BY project, location, name LIMIT ?",
                            "i", limit);
    return store_i_name_page(st, "SELECT " EP_COLS " FROM endpoints", read_endpoint,
                             sizeof(struct store_endpoint), project, location, after, limit, n);
}
