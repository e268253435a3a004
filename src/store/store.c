/* store: SQLite persistence for mtcd. Schema changes are appended to the
 * migrations table below; PRAGMA user_version records how many have run. */
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct store {
    sqlite3 *db;
    pthread_mutex_t lock;
};

/* Each entry moves the schema from version i to i+1. Never edit a shipped one. */
static const char *migrations[] = {
    "CREATE TABLE clusters ("
    "  id TEXT PRIMARY KEY, project TEXT NOT NULL, location TEXT NOT NULL,"
    "  state TEXT NOT NULL, spec TEXT NOT NULL, nodes TEXT,"
    "  create_ms INTEGER NOT NULL, update_ms INTEGER NOT NULL);"
    "CREATE TABLE operations ("
    "  id TEXT PRIMARY KEY, project TEXT NOT NULL, location TEXT NOT NULL,"
    "  cluster_id TEXT NOT NULL, kind TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0,"
    "  progress TEXT NOT NULL DEFAULT '', request TEXT, response TEXT,"
    "  err_code INTEGER NOT NULL DEFAULT 0, err_message TEXT NOT NULL DEFAULT '',"
    "  create_ms INTEGER NOT NULL, update_ms INTEGER NOT NULL);"
    "CREATE INDEX operations_pending ON operations(done, create_ms);"
    "CREATE TABLE events ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT, cluster_id TEXT NOT NULL, time_ms INTEGER NOT NULL,"
    "  type TEXT NOT NULL, node TEXT, message TEXT NOT NULL);"
    "CREATE INDEX events_cluster ON events(cluster_id, seq);"
    "CREATE TABLE tokens ("
    "  id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, role TEXT NOT NULL,"
    "  hash TEXT NOT NULL UNIQUE, create_ms INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);",
    /* v2: node health as reported by mtc-agent, and the remediation history */
    "CREATE TABLE node_health ("
    "  cluster_id TEXT NOT NULL, node TEXT NOT NULL, time_ms INTEGER NOT NULL,"
    "  status TEXT NOT NULL, failing_check TEXT NOT NULL DEFAULT '',"
    "  reason TEXT NOT NULL DEFAULT '', severity TEXT NOT NULL DEFAULT 'NONE',"
    "  results TEXT, remediation TEXT NOT NULL DEFAULT '',"
    "  PRIMARY KEY (cluster_id, node));"
    "CREATE TABLE remediations ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT, cluster_id TEXT NOT NULL, node TEXT NOT NULL,"
    "  time_ms INTEGER NOT NULL, action TEXT NOT NULL, check_name TEXT NOT NULL, op_id TEXT);"
    "CREATE INDEX remediations_node ON remediations(cluster_id, node, time_ms);",
    /* v3: node tokens — role "node", bound to one node of one cluster */
    "ALTER TABLE tokens ADD COLUMN cluster_id TEXT;"
    "ALTER TABLE tokens ADD COLUMN node TEXT;"
    "CREATE INDEX tokens_node ON tokens(cluster_id, node);",
    /* v4: datasets and their prepared versions; an operation may be about a
     * resource other than a cluster (target: "datasets/NAME") */
    "CREATE TABLE datasets ("
    "  project TEXT NOT NULL, location TEXT NOT NULL, name TEXT NOT NULL,"
    "  state TEXT NOT NULL, spec TEXT NOT NULL,"
    "  create_ms INTEGER NOT NULL, update_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (project, location, name));"
    "CREATE TABLE dataset_versions ("
    "  project TEXT NOT NULL, location TEXT NOT NULL, name TEXT NOT NULL,"
    "  version INTEGER NOT NULL, key TEXT NOT NULL, record TEXT NOT NULL,"
    "  create_ms INTEGER NOT NULL, PRIMARY KEY (project, location, name, version));"
    "CREATE INDEX dataset_versions_key ON dataset_versions(key);"
    "ALTER TABLE operations ADD COLUMN target TEXT NOT NULL DEFAULT '';",
    /* v5: training jobs submitted through the API (seq orders them for pages) */
    "CREATE TABLE training_jobs ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, project TEXT NOT NULL,"
    "  location TEXT NOT NULL, cluster_id TEXT NOT NULL, slurm_job TEXT NOT NULL DEFAULT '',"
    "  state TEXT NOT NULL, restart_count INTEGER NOT NULL DEFAULT 0, request TEXT,"
    "  config TEXT, create_ms INTEGER NOT NULL, update_ms INTEGER NOT NULL,"
    "  UNIQUE (cluster_id, id));",
    /* v6: the model registry — models and their versions (manifest: the
     * artifact's files; aliases: a JSON array; lineage: where it came from) */
    "CREATE TABLE models ("
    "  project TEXT NOT NULL, location TEXT NOT NULL, name TEXT NOT NULL, meta TEXT NOT NULL,"
    "  next_version INTEGER NOT NULL DEFAULT 1,"
    "  create_ms INTEGER NOT NULL, update_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (project, location, name));"
    "CREATE TABLE model_versions ("
    "  project TEXT NOT NULL, location TEXT NOT NULL, name TEXT NOT NULL,"
    "  version INTEGER NOT NULL, aliases TEXT NOT NULL, manifest TEXT NOT NULL,"
    "  lineage TEXT, create_ms INTEGER NOT NULL, update_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (project, location, name, version));",
    /* v7: inference endpoints — spec: what was asked (deployed models, the
     * traffic split); status: what mtcd runs for it (replicas) */
    "CREATE TABLE endpoints ("
    "  project TEXT NOT NULL, location TEXT NOT NULL, name TEXT NOT NULL,"
    "  spec TEXT NOT NULL, status TEXT NOT NULL,"
    "  create_ms INTEGER NOT NULL, update_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (project, location, name));",
    /* v8: the last health scan of each node (mtc healthscan, :healthScan):
     * its verdict, the checks it ran, the reason and the operation */
    "CREATE TABLE node_scans ("
    "  cluster_id TEXT NOT NULL, node TEXT NOT NULL, time_ms INTEGER NOT NULL,"
    "  state TEXT NOT NULL, checks TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',"
    "  op_id TEXT NOT NULL DEFAULT '', PRIMARY KEY (cluster_id, node));",
};
#define N_MIGRATIONS ((int)(sizeof(migrations) / sizeof(migrations[0])))

static int exec_sql(sqlite3 *db, const char *sql, mtc_error_t *err)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        errprintf(err, "sqlite: %s", msg ? msg : "error");
        sqlite3_free(msg);
        errno = EIO;
        return -1;
    }
    return 0;
}

static int user_version(sqlite3 *db)
{
    sqlite3_stmt *s;
    int v = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return v;
}

static int migrate(sqlite3 *db, mtc_error_t *err)
{
    int v = user_version(db);
    if (v < 0)
        return errprintf(err, "sqlite: cannot read schema version");
    if (v > N_MIGRATIONS)
        return errprintf(err, "database schema version %d is newer than this mtcd (%d)", v,
                         N_MIGRATIONS);
    for (; v < N_MIGRATIONS; v++) {
        char pragma[64];
        snprintf(pragma, sizeof(pragma), "PRAGMA user_version=%d;", v + 1);
        if (exec_sql(db, "BEGIN IMMEDIATE", err) < 0)
            return -1;
        if (exec_sql(db, migrations[v], err) < 0 || exec_sql(db, pragma, err) < 0) {
            exec_sql(db, "ROLLBACK", NULL);
            return -1;
        }
        if (exec_sql(db, "COMMIT", err) < 0)
            return -1;
    }
    return 0;
}

struct store *store_open(const char *path, mtc_error_t *err)
{
    struct store *st = calloc(1, sizeof(*st));
    if (!st) {
        errprintf(err, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&st->lock, NULL);
    /* the database holds token hashes: owner-only whatever the umask (SQLite
     * gives its -wal and -shm files the database file's mode) */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || fchmod(fd, 0600) < 0) {
        errprintf(err, "cannot open database %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        goto error;
    }
    close(fd);
    if (sqlite3_open_v2(path, &st->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        NULL) != SQLITE_OK) {
        errprintf(err, "cannot open database %s: %s", path,
                  st->db ? sqlite3_errmsg(st->db) : "out of memory");
        goto error;
    }
    sqlite3_busy_timeout(st->db, 5000);
    /* synchronous=FULL: in WAL mode NORMAL may lose the last commits on power
     * loss, and the API acknowledges an operation once its row is committed */
    if (exec_sql(st->db,
                 "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                 "PRAGMA foreign_keys=ON;",
                 err) < 0)
        goto error;
    if (migrate(st->db, err) < 0)
        goto error;
    return st;
error:
    store_close(st);
    errno = EIO;
    return NULL;
}

void store_close(struct store *st)
{
    if (!st)
        return;
    int saved = errno;
    sqlite3_close(st->db);
    pthread_mutex_destroy(&st->lock);
    free(st);
    errno = saved;
}

int store_schema_version(struct store *st)
{
    pthread_mutex_lock(&st->lock);
    int v = user_version(st->db);
    pthread_mutex_unlock(&st->lock);
    return v;
}

/* --- statement helpers: bind by a tiny format string ---------------------
 * 's' text (NULL → NULL), 'i' int, 'l' int64, 'j' json_t* serialised (NULL → NULL). */
static sqlite3_stmt *vprep(struct store *st, const char *sql, const char *fmt, va_list ap)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
        return NULL;
    for (int i = 0; fmt[i]; i++) {
        int col = i + 1;
        switch (fmt[i]) {
        case 's':
            sqlite3_bind_text(s, col, va_arg(ap, const char *), -1, SQLITE_TRANSIENT);
            break;
        case 'i':
            sqlite3_bind_int(s, col, va_arg(ap, int));
            break;
        case 'l':
            sqlite3_bind_int64(s, col, va_arg(ap, int64_t));
            break;
        case 'j': {
            const json_t *j = va_arg(ap, const json_t *);
            char *txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
            if (txt)
                sqlite3_bind_text(s, col, txt, -1, free);
            else
                sqlite3_bind_null(s, col);
            break;
        }
        }
    }
    return s;
}

static sqlite3_stmt *prep(struct store *st, const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sqlite3_stmt *s = vprep(st, sql, fmt, ap);
    va_end(ap);
    return s;
}

/* Run a statement that returns no rows; finalizes it. */
static int run(struct store *st, sqlite3_stmt *s)
{
    if (!s)
        return -1;
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    (void)st;
    if (rc == SQLITE_CONSTRAINT) {
        errno = EEXIST;
        return -1;
    }
    if (rc != SQLITE_DONE) {
        errno = EIO;
        return -1;
    }
    return 0;
}

static void col_text(sqlite3_stmt *s, int col, char *buf, size_t len)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    snprintf(buf, len, "%s", t ? (const char *)t : "");
}

static json_t *col_json(sqlite3_stmt *s, int col)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    return t ? json_loads((const char *)t, 0, NULL) : NULL;
}

/* Reads the current row of a statement into one element of a list. */
typedef void (*row_reader_fn)(sqlite3_stmt *s, void *elem);

/* Every list: steps s (finalizes it; NULL reads no rows) and reads at most max
 * rows, each into a zeroed elem_size-byte element of a growing array. The
 * array (NULL only when out of memory), its count in *n; the caller frees it.
 * Under the lock. */
static void *read_rows(sqlite3_stmt *s, row_reader_fn read, size_t elem_size, int max, int *n)
{
    *n = 0;
    size_t cap = max > 0 && max < 16 ? (size_t)max : 16;
    char *arr = calloc(cap, elem_size);
    while (arr && s && *n < max && sqlite3_step(s) == SQLITE_ROW) {
        if ((size_t)*n == cap) {
            char *na = realloc(arr, 2 * cap * elem_size);
            if (!na)
                break;
            arr = na;
            cap *= 2;
        }
        char *elem = arr + (size_t)*n * elem_size;
        memset(elem, 0, elem_size);
        read(s, elem);
        (*n)++;
    }
    sqlite3_finalize(s);
    return arr;
}

#define ALL_ROWS INT_MAX

/* A list function's whole work: read_rows over sql with fmt's arguments
 * bound (prep), under the lock. */
static void *list(struct store *st, row_reader_fn read, size_t elem_size, int max, int *n,
                  const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&st->lock);
    void *arr = read_rows(vprep(st, sql, fmt, ap), read, elem_size, max, n);
    pthread_mutex_unlock(&st->lock);
    va_end(ap);
    return arr;
}

/* A page of a project's named resources (datasets, models, endpoints):
 * select ("SELECT cols FROM table") of those in project/location with
 * name > after, by name, at most limit. */
static void *name_page(struct store *st, const char *select, row_reader_fn read, size_t elem_size,
                       const char *project, const char *location, const char *after, int limit,
                       int *n)
{
    char sql[512];
    snprintf(sql, sizeof(sql),
             "%s WHERE project=? AND location=? AND name > ? ORDER BY name LIMIT ?", select);
    return list(st, read, elem_size, limit, n, sql, "sssi", project, location, after ? after : "",
                limit);
}

/* --- clusters ------------------------------------------------------------ */

#define CLUSTER_COLS "id, project, location, state, spec, nodes, create_ms, update_ms"

static void read_cluster(sqlite3_stmt *s, void *out)
{
    struct store_cluster *c = out;
    memset(c, 0, sizeof(*c));
    col_text(s, 0, c->id, sizeof(c->id));
    col_text(s, 1, c->project, sizeof(c->project));
    col_text(s, 2, c->location, sizeof(c->location));
    col_text(s, 3, c->state, sizeof(c->state));
    c->spec = col_json(s, 4);
    c->nodes = col_json(s, 5);
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

static int insert_op(struct store *st, const struct store_op *op)
{
    int64_t now = mtc_now_ms();
    return run(st, prep(st,
                        "INSERT INTO operations (id, project, location, cluster_id, kind, progress,"
                        " request, create_ms, update_ms, target) VALUES (?,?,?,?,?,?,?,?,?,?)",
                        "ssssssjlls", op->id, op->project, op->location, op->cluster_id, op->kind,
                        op->progress, op->request, now, now, op->target));
}

int store_cluster_create(struct store *st, const struct store_cluster *c, const struct store_op *op,
                         mtc_error_t *err)
{
    int64_t now = mtc_now_ms();
    int rc = -1;
    pthread_mutex_lock(&st->lock);
    if (exec_sql(st->db, "BEGIN IMMEDIATE", err) < 0)
        goto out;
    if (run(st, prep(st, "INSERT INTO clusters (" CLUSTER_COLS ") VALUES (?,?,?,?,?,NULL,?,?)",
                     "ssssjll", c->id, c->project, c->location, c->state, c->spec, now, now)) < 0) {
        int e = errno;
        exec_sql(st->db, "ROLLBACK", NULL);
        errno = e;
        errprintf(err, e == EEXIST ? "cluster %s already exists" : "cannot store cluster %s",
                  c->id);
        goto out;
    }
    if (insert_op(st, op) < 0) {
        exec_sql(st->db, "ROLLBACK", NULL);
        errprintf(err, "cannot store operation for cluster %s", c->id);
        errno = EIO;
        goto out;
    }
    rc = exec_sql(st->db, "COMMIT", err);
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_cluster_get(struct store *st, const char *id, struct store_cluster *out)
{
    int rc = -1;
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = prep(st, "SELECT " CLUSTER_COLS " FROM clusters WHERE id=?", "s", id);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        read_cluster(s, out);
        rc = 0;
    } else {
        errno = s ? ENOENT : EIO;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

struct store_cluster *store_cluster_list(struct store *st, const char *project,
                                         const char *location, const char *after, int limit, int *n)
{
    return list(st, read_cluster, sizeof(struct store_cluster), limit, n,
                "SELECT " CLUSTER_COLS " FROM clusters WHERE project=? AND location=?"
                " AND id > ? ORDER BY id LIMIT ?",
                "sssi", project, location, after ? after : "", limit);
}

json_t *store_cluster_ids(struct store *st)
{
    json_t *ids = json_array();
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = prep(st, "SELECT id FROM clusters ORDER BY id", "");
    while (s && sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(ids, json_string((const char *)sqlite3_column_text(s, 0)));
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return ids;
}

/* One statement that returns no rows, as its own transaction. */
static int run_locked(struct store *st, sqlite3_stmt *s)
{
    pthread_mutex_lock(&st->lock);
    int rc = run(st, s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

static int update_one(struct store *st, sqlite3_stmt *s)
{
    pthread_mutex_lock(&st->lock);
    int rc = run(st, s);
    if (rc == 0 && sqlite3_changes(st->db) == 0) {
        errno = ENOENT;
        rc = -1;
    }
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_cluster_set_state(struct store *st, const char *id, const char *state)
{
    return update_one(st, prep(st, "UPDATE clusters SET state=?, update_ms=? WHERE id=?", "sls",
                               state, mtc_now_ms(), id));
}

int store_cluster_set_spec(struct store *st, const char *id, const json_t *spec, const char *state)
{
    return update_one(st, prep(st, "UPDATE clusters SET spec=?, state=?, update_ms=? WHERE id=?",
                               "jsls", spec, state, mtc_now_ms(), id));
}

int store_cluster_set_nodes(struct store *st, const char *id, const json_t *nodes)
{
    return update_one(st, prep(st, "UPDATE clusters SET nodes=? WHERE id=?", "js", nodes, id));
}

int store_op_begin(struct store *st, const struct store_op *op, const char *cluster_state,
                   char busy_op[48])
{
    int rc = -1;
    pthread_mutex_lock(&st->lock);
    if (exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    sqlite3_stmt *s =
        prep(st, "SELECT id FROM operations WHERE cluster_id=? AND done=0", "s", op->cluster_id);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        col_text(s, 0, busy_op, 48);
        sqlite3_finalize(s);
        exec_sql(st->db, "ROLLBACK", NULL);
        errno = EBUSY;
        goto out;
    }
    sqlite3_finalize(s);
    if (run(st, prep(st, "UPDATE clusters SET state=?, update_ms=? WHERE id=?", "sls",
                     cluster_state, mtc_now_ms(), op->cluster_id)) < 0 ||
        sqlite3_changes(st->db) == 0 || insert_op(st, op) < 0) {
        int e = sqlite3_changes(st->db) == 0 ? ENOENT : EIO;
        exec_sql(st->db, "ROLLBACK", NULL);
        errno = e;
        goto out;
    }
    rc = exec_sql(st->db, "COMMIT", NULL);
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
    if (exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    sqlite3_stmt *s = prep(st, "SELECT id, kind, request FROM operations WHERE cluster_id=? AND done=0",
                           "s", op->cluster_id);
    while (!busy && s && sqlite3_step(s) == SQLITE_ROW) {
        const char *kind = (const char *)sqlite3_column_text(s, 1);
        busy = !kind || strcmp(kind, op->kind) != 0;
        json_t *req = busy ? NULL : col_json(s, 2);
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(op->request, "nodes"), i, it)
        {
            const char *n = json_string_value(json_object_get(it, "node"));
            busy |= n && request_names(req, n);
        }
        json_decref(req);
        if (busy)
            col_text(s, 0, busy_op, 48);
    }
    sqlite3_finalize(s);
    if (busy) {
        exec_sql(st->db, "ROLLBACK", NULL);
        errno = EBUSY;
        goto out;
    }
    if (run(st, prep(st, "UPDATE clusters SET state=?, update_ms=? WHERE id=?", "sls",
                     cluster_state, mtc_now_ms(), op->cluster_id)) < 0 ||
        sqlite3_changes(st->db) == 0 || insert_op(st, op) < 0) {
        int e = sqlite3_changes(st->db) == 0 ? ENOENT : EIO;
        exec_sql(st->db, "ROLLBACK", NULL);
        errno = e;
        goto out;
    }
    rc = exec_sql(st->db, "COMMIT", NULL);
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}

json_t *store_ops_active_nodes(struct store *st, const char *cluster_id, const char *kind)
{
    json_t *nodes = json_array();
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = prep(
        st, "SELECT request FROM operations WHERE cluster_id=? AND kind=? AND done=0", "ss",
        cluster_id, kind);
    while (s && sqlite3_step(s) == SQLITE_ROW) {
        json_t *req = col_json(s, 0), *it;
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
    rc = run(st, prep(st, "DELETE FROM clusters WHERE id=?", "s", id));
    /* its nodes' tokens die with it */
    if (rc == 0)
        rc = run(st, prep(st, "UPDATE tokens SET revoked=1 WHERE cluster_id=?", "s", id));
    /* and so does its job history (a new cluster of the same id starts empty) */
    if (rc == 0)
        rc = run(st, prep(st, "DELETE FROM training_jobs WHERE cluster_id=?", "s", id));
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
        prep(st,
             "SELECT id, project, location, cluster_id, kind, done, progress, request,"
             " response, err_code, err_message, create_ms, update_ms, target"
             " FROM operations WHERE id=?",
             "s", id);
    if (s && (step = sqlite3_step(s)) == SQLITE_ROW) {
        col_text(s, 0, out->id, sizeof(out->id));
        col_text(s, 1, out->project, sizeof(out->project));
        col_text(s, 2, out->location, sizeof(out->location));
        col_text(s, 3, out->cluster_id, sizeof(out->cluster_id));
        col_text(s, 4, out->kind, sizeof(out->kind));
        out->done = sqlite3_column_int(s, 5);
        col_text(s, 6, out->progress, sizeof(out->progress));
        out->request = col_json(s, 7);
        out->response = col_json(s, 8);
        out->err_code = sqlite3_column_int(s, 9);
        col_text(s, 10, out->err_message, sizeof(out->err_message));
        out->create_ms = sqlite3_column_int64(s, 11);
        out->update_ms = sqlite3_column_int64(s, 12);
        col_text(s, 13, out->target, sizeof(out->target));
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
    return update_one(st, prep(st, "UPDATE operations SET progress=?, update_ms=? WHERE id=?",
                               "sls", message, mtc_now_ms(), id));
}

int store_op_finish(struct store *st, const char *id, const json_t *response, int err_code,
                    const char *err_message)
{
    return update_one(st, prep(st,
                               "UPDATE operations SET done=1, response=?, err_code=?,"
                               " err_message=?, update_ms=? WHERE id=?",
                               "jisls", err_code ? NULL : response, err_code,
                               err_message ? err_message : "", mtc_now_ms(), id));
}

json_t *store_ops_pending(struct store *st)
{
    json_t *ids = json_array();
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = prep(st, "SELECT id FROM operations WHERE done=0 ORDER BY create_ms", "");
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
    sqlite3_stmt *s = prep(st, sql, "");
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
    return run_locked(st, prep(st,
                               "INSERT INTO events (cluster_id, time_ms, type, node, message)"
                               " VALUES (?,?,?,?,?)",
                               "slsss", cluster_id, mtc_now_ms(), type, node, message));
}

static void read_event(sqlite3_stmt *s, void *out)
{
    struct store_event *e = out;
    e->time_ms = sqlite3_column_int64(s, 0);
    col_text(s, 1, e->type, sizeof(e->type));
    col_text(s, 2, e->node, sizeof(e->node));
    col_text(s, 3, e->message, sizeof(e->message));
}

struct store_event *store_events(struct store *st, const char *cluster_id, int limit, int *n)
{
    return list(st, read_event, sizeof(struct store_event), limit, n,
                "SELECT time_ms, type, node, message FROM (SELECT * FROM events"
                " WHERE cluster_id=? ORDER BY seq DESC LIMIT ?) ORDER BY seq",
                "si", cluster_id, limit);
}

/* --- tokens -------------------------------------------------------------- */

int store_token_add(struct store *st, const char *id, const char *name, const char *role,
                    const char *hash)
{
    return run_locked(
        st, prep(st, "INSERT INTO tokens (id, name, role, hash, create_ms) VALUES (?,?,?,?,?)",
                 "ssssl", id, name, role, hash, mtc_now_ms()));
}

int store_token_lookup(struct store *st, const char *hash, struct store_principal *out)
{
    int rc = -1;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = prep(st,
                           "SELECT role, COALESCE(cluster_id, ''), COALESCE(node, '') FROM tokens"
                           " WHERE hash=? AND revoked=0",
                           "s", hash);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        col_text(s, 0, out->role, sizeof(out->role));
        col_text(s, 1, out->cluster, sizeof(out->cluster));
        col_text(s, 2, out->node, sizeof(out->node));
        rc = 0;
    } else {
        errno = ENOENT;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_node_token_set(struct store *st, const char *cluster_id, const char *node,
                         const char *id, const char *hash)
{
    char name[128];
    snprintf(name, sizeof(name), "node-%s-%s", cluster_id, id);
    pthread_mutex_lock(&st->lock);
    int rc = exec_sql(st->db, "BEGIN IMMEDIATE", NULL);
    if (rc == 0)
        rc = run(st, prep(st, "UPDATE tokens SET revoked=1 WHERE cluster_id=? AND node=?", "ss",
                          cluster_id, node));
    if (rc == 0)
        rc = run(st, prep(st,
                          "INSERT INTO tokens (id, name, role, hash, create_ms, cluster_id, node)"
                          " VALUES (?,?,'node',?,?,?,?)",
                          "ssslss", id, name, hash, mtc_now_ms(), cluster_id, node));
    int saved = errno;
    exec_sql(st->db, rc == 0 ? "COMMIT" : "ROLLBACK", NULL);
    pthread_mutex_unlock(&st->lock);
    errno = saved;
    return rc;
}

static void read_token(sqlite3_stmt *s, void *out)
{
    struct store_token *t = out;
    col_text(s, 0, t->id, sizeof(t->id));
    col_text(s, 1, t->name, sizeof(t->name));
    col_text(s, 2, t->who.role, sizeof(t->who.role));
    t->create_ms = sqlite3_column_int64(s, 3);
    col_text(s, 4, t->who.cluster, sizeof(t->who.cluster));
    col_text(s, 5, t->who.node, sizeof(t->who.node));
}

struct store_token *store_token_list(struct store *st, int *n)
{
    return list(st, read_token, sizeof(struct store_token), ALL_ROWS, n,
                "SELECT id, name, role, create_ms, COALESCE(cluster_id, ''),"
                " COALESCE(node, '') FROM tokens WHERE revoked=0 ORDER BY create_ms",
                "");
}

int store_token_revoke(struct store *st, const char *id_or_name)
{
    return update_one(st,
                      prep(st, "UPDATE tokens SET revoked=1 WHERE (id=? OR name=?) AND revoked=0",
                           "ss", id_or_name, id_or_name));
}

/* --- node health and remediation history ---------------------------------- */

int store_health_put(struct store *st, const char *cluster_id, const char *node,
                     const struct store_health *h)
{
    return run_locked(
        st, prep(st,
                 "INSERT INTO node_health (cluster_id, node, time_ms, status, failing_check,"
                 " reason, severity, results) VALUES (?,?,?,?,?,?,?,?)"
                 " ON CONFLICT (cluster_id, node) DO UPDATE SET time_ms=excluded.time_ms,"
                 " status=excluded.status, failing_check=excluded.failing_check,"
                 " reason=excluded.reason, severity=excluded.severity,"
                 " results=excluded.results",
                 "sslssssj", cluster_id, node, mtc_now_ms(), h->status, h->failing_check, h->reason,
                 h->severity, h->results));
}

int store_health_set_remediation(struct store *st, const char *cluster_id, const char *node,
                                 const char *state)
{
    return run_locked(
        st, prep(st,
                 "INSERT INTO node_health (cluster_id, node, time_ms, status, remediation)"
                 " VALUES (?,?,?,'UNKNOWN',?) ON CONFLICT (cluster_id, node)"
                 " DO UPDATE SET remediation=excluded.remediation",
                 "ssls", cluster_id, node, mtc_now_ms(), state));
}

static void read_health(sqlite3_stmt *s, void *out)
{
    struct store_health *h = out;
    col_text(s, 0, h->node, sizeof(h->node));
    h->time_ms = sqlite3_column_int64(s, 1);
    col_text(s, 2, h->status, sizeof(h->status));
    col_text(s, 3, h->failing_check, sizeof(h->failing_check));
    col_text(s, 4, h->reason, sizeof(h->reason));
    col_text(s, 5, h->severity, sizeof(h->severity));
    h->results = col_json(s, 6);
    col_text(s, 7, h->remediation, sizeof(h->remediation));
}

struct store_health *store_health_list(struct store *st, const char *cluster_id, int *n)
{
    return list(st, read_health, sizeof(struct store_health), ALL_ROWS, n,
                "SELECT node, time_ms, status, failing_check, reason, severity, results,"
                " remediation FROM node_health WHERE cluster_id=? ORDER BY node",
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
    int rc = run(st, prep(st, "DELETE FROM node_health WHERE cluster_id=?", "s", cluster_id));
    if (rc == 0)
        rc = run(st, prep(st, "DELETE FROM remediations WHERE cluster_id=?", "s", cluster_id));
    if (rc == 0)
        rc = run(st, prep(st, "DELETE FROM node_scans WHERE cluster_id=?", "s", cluster_id));
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_scan_put(struct store *st, const char *cluster_id, const struct store_scan *sc)
{
    return run_locked(
        st, prep(st,
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
    col_text(s, 0, sc->node, sizeof(sc->node));
    sc->time_ms = sqlite3_column_int64(s, 1);
    col_text(s, 2, sc->state, sizeof(sc->state));
    col_text(s, 3, sc->checks, sizeof(sc->checks));
    col_text(s, 4, sc->reason, sizeof(sc->reason));
    col_text(s, 5, sc->op_id, sizeof(sc->op_id));
}

struct store_scan *store_scan_list(struct store *st, const char *cluster_id, int *n)
{
    return list(st, read_scan, sizeof(struct store_scan), ALL_ROWS, n,
                "SELECT node, time_ms, state, checks, reason, op_id FROM node_scans"
                " WHERE cluster_id=? ORDER BY node",
                "s", cluster_id);
}

int store_remediation_add(struct store *st, const char *cluster_id, const char *node,
                          const char *action, const char *check, const char *op_id)
{
    return run_locked(
        st, prep(st,
                 "INSERT INTO remediations (cluster_id, node, time_ms, action, check_name,"
                 " op_id) VALUES (?,?,?,?,?,?)",
                 "sslsss", cluster_id, node, mtc_now_ms(), action, check, op_id));
}

int store_remediation_last(struct store *st, const char *cluster_id, const char *node,
                           char action[16], char op_id[48])
{
    int rc = -1;
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = prep(st,
                           "SELECT action, op_id FROM remediations WHERE cluster_id=? AND node=?"
                           " ORDER BY seq DESC LIMIT 1",
                           "ss", cluster_id, node);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        col_text(s, 0, action, 16);
        col_text(s, 1, op_id, 48);
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
    sqlite3_stmt *s = prep(st,
                           "SELECT count(*) FROM remediations WHERE cluster_id=? AND node=?"
                           " AND time_ms >= ?",
                           "ssl", cluster_id, node, since_ms);
    if (s && sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return n;
}

/* --- datasets -------------------------------------------------------------- */

#define DATASET_COLS "project, location, name, state, spec, create_ms, update_ms"

static void read_dataset(sqlite3_stmt *s, void *out)
{
    struct store_dataset *d = out;
    memset(d, 0, sizeof(*d));
    col_text(s, 0, d->project, sizeof(d->project));
    col_text(s, 1, d->location, sizeof(d->location));
    col_text(s, 2, d->name, sizeof(d->name));
    col_text(s, 3, d->state, sizeof(d->state));
    d->spec = col_json(s, 4);
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
    if (exec_sql(st->db, "BEGIN IMMEDIATE", err) < 0)
        goto out;
    if (run(st, prep(st, "INSERT INTO datasets (" DATASET_COLS ") VALUES (?,?,?,?,?,?,?)",
                     "ssssjll", d->project, d->location, d->name, d->state, d->spec, now,
                     now)) < 0 ||
        insert_op(st, op) < 0) {
        int e = errno == EEXIST ? EEXIST : EIO;
        exec_sql(st->db, "ROLLBACK", NULL);
        errno = e;
        errprintf(err, e == EEXIST ? "dataset %s already exists" : "cannot store dataset %s",
                  d->name);
        goto out;
    }
    rc = exec_sql(st->db, "COMMIT", err);
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
    sqlite3_stmt *s = prep(st,
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
    return name_page(st, "SELECT " DATASET_COLS " FROM datasets", read_dataset,
                     sizeof(struct store_dataset), project, location, after, limit, n);
}

static void read_dataset_version(sqlite3_stmt *s, void *out)
{
    struct store_dataset_version *v = out;
    v->version = sqlite3_column_int(s, 0);
    col_text(s, 1, v->key, sizeof(v->key));
    v->record = col_json(s, 2);
    v->create_ms = sqlite3_column_int64(s, 3);
}

struct store_dataset_version *store_dataset_versions(struct store *st, const char *project,
                                                     const char *location, const char *name,
                                                     int *n)
{
    return list(st, read_dataset_version, sizeof(struct store_dataset_version), ALL_ROWS, n,
                "SELECT version, key, record, create_ms FROM dataset_versions"
                " WHERE project=? AND location=? AND name=? ORDER BY version",
                "sss", project, location, name);
}

/* The id of a running operation on target in project/location other than
 * except (may be NULL) into busy_op: 1, else 0. Under the lock. */
static int target_busy(struct store *st, const char *project, const char *location,
                       const char *target, const char *except, char busy_op[48])
{
    sqlite3_stmt *s = prep(st,
                           "SELECT id FROM operations WHERE project=? AND location=? AND target=?"
                           " AND done=0 AND id != ?",
                           "ssss", project, location, target, except ? except : "");
    int busy = s && sqlite3_step(s) == SQLITE_ROW;
    if (busy && busy_op)
        col_text(s, 0, busy_op, 48);
    sqlite3_finalize(s);
    return busy;
}

int store_dataset_op_begin(struct store *st, const struct store_op *op, const char *name,
                           char busy_op[48])
{
    int rc = -1, e = EIO;
    pthread_mutex_lock(&st->lock);
    if (exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    if (target_busy(st, op->project, op->location, op->target, NULL, busy_op)) {
        e = EBUSY;
    } else if (run(st, prep(st,
                            "UPDATE datasets SET state='PREPARING', update_ms=? WHERE project=?"
                            " AND location=? AND name=?",
                            "lsss", mtc_now_ms(), op->project, op->location, name)) < 0) {
        e = EIO;
    } else if (sqlite3_changes(st->db) == 0) {
        e = ENOENT;
    } else if (insert_op(st, op) == 0) {
        rc = exec_sql(st->db, "COMMIT", NULL);
        goto out;
    }
    exec_sql(st->db, "ROLLBACK", NULL);
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
    if (exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    sqlite3_stmt *s = prep(st,
                           "SELECT version, key FROM dataset_versions WHERE project=? AND"
                           " location=? AND name=? ORDER BY version DESC LIMIT 1",
                           "sss", project, location, name);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        latest = sqlite3_column_int(s, 0);
        col_text(s, 1, latest_key, sizeof(latest_key));
    }
    sqlite3_finalize(s);
    int same = latest > 0 && strcmp(latest_key, key) == 0;
    *version = same ? latest : latest + 1;
    int e = 0;
    if (run(st, prep(st,
                     "UPDATE datasets SET state='READY', spec=COALESCE(?, spec), update_ms=?"
                     " WHERE project=? AND location=? AND name=?",
                     "jlsss", spec, now, project, location, name)) < 0)
        e = EIO;
    else if (sqlite3_changes(st->db) == 0)
        e = ENOENT;
    else if (!same && run(st, prep(st,
                                   "INSERT INTO dataset_versions (project, location, name,"
                                   " version, key, record, create_ms) VALUES (?,?,?,?,?,?,?)",
                                   "sssisjl", project, location, name, *version, key, record,
                                   now)) < 0)
        e = EIO;
    if (e) {
        exec_sql(st->db, "ROLLBACK", NULL);
        errno = e;
        goto out;
    }
    rc = exec_sql(st->db, "COMMIT", NULL);
    *added = rc == 0 && !same;
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_dataset_set_state(struct store *st, const char *project, const char *location,
                            const char *name, const char *state)
{
    return update_one(st, prep(st,
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
    if (exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    if (target_busy(st, project, location, target, except_op, busy_op)) {
        e = EBUSY;
        goto rollback;
    }
    if (run(st, prep(st, "DELETE FROM datasets WHERE project=? AND location=? AND name=?", "sss",
                     project, location, name)) < 0)
        goto rollback;
    if (sqlite3_changes(st->db) == 0) {
        e = ENOENT;
        goto rollback;
    }
    /* one record per key of this dataset that no other dataset's version uses */
    sqlite3_stmt *s = prep(st,
                           "SELECT record FROM dataset_versions v WHERE project=? AND location=?"
                           " AND name=? AND NOT EXISTS (SELECT 1 FROM dataset_versions o WHERE"
                           " o.key = v.key AND NOT (o.project=v.project AND"
                           " o.location=v.location AND o.name=v.name)) GROUP BY key",
                           "sss", project, location, name);
    while (s && sqlite3_step(s) == SQLITE_ROW) {
        json_t *r = col_json(s, 0);
        if (r)
            json_array_append_new(gone, r);
    }
    sqlite3_finalize(s);
    if (run(st, prep(st, "DELETE FROM dataset_versions WHERE project=? AND location=? AND name=?",
                     "sss", project, location, name)) < 0)
        goto rollback;
    rc = exec_sql(st->db, "COMMIT", NULL);
    if (rc == 0 && orphans) {
        *orphans = gone;
        gone = NULL;
    }
    goto out;
rollback:
    exec_sql(st->db, "ROLLBACK", NULL);
    errno = e;
out:
    pthread_mutex_unlock(&st->lock);
    json_decref(gone);
    return rc;
}

/* --- training jobs ------------------------------------------------------- */

#define JOB_COLS                                                                                   \
    "seq, id, project, location, cluster_id, slurm_job, state, restart_count, request, config,"    \
    " create_ms, update_ms"

static void read_job(sqlite3_stmt *s, void *out)
{
    struct store_job *j = out;
    memset(j, 0, sizeof(*j));
    j->seq = sqlite3_column_int64(s, 0);
    col_text(s, 1, j->id, sizeof(j->id));
    col_text(s, 2, j->project, sizeof(j->project));
    col_text(s, 3, j->location, sizeof(j->location));
    col_text(s, 4, j->cluster_id, sizeof(j->cluster_id));
    col_text(s, 5, j->slurm_job, sizeof(j->slurm_job));
    col_text(s, 6, j->state, sizeof(j->state));
    j->restart_count = sqlite3_column_int(s, 7);
    j->request = col_json(s, 8);
    j->config = col_json(s, 9);
    j->create_ms = sqlite3_column_int64(s, 10);
    j->update_ms = sqlite3_column_int64(s, 11);
}

void store_job_release(struct store_job *j)
{
    if (!j)
        return;
    json_decref(j->request);
    json_decref(j->config);
    j->request = j->config = NULL;
}

int store_job_create(struct store *st, const struct store_job *j)
{
    int64_t now = mtc_now_ms();
    return run_locked(st, prep(st,
                               "INSERT INTO training_jobs (id, project, location, cluster_id,"
                               " slurm_job, state, restart_count, request, config, create_ms,"
                               " update_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                               "ssssssijjll", j->id, j->project, j->location, j->cluster_id,
                               j->slurm_job, j->state, j->restart_count, j->request, j->config, now,
                               now));
}

int store_job_get(struct store *st, const char *cluster_id, const char *id, struct store_job *out)
{
    int rc = -1;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = prep(st, "SELECT " JOB_COLS " FROM training_jobs WHERE cluster_id=? AND id=?",
                           "ss", cluster_id, id);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        read_job(s, out);
        rc = 0;
    } else {
        errno = s ? ENOENT : EIO;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

struct store_job *store_job_list(struct store *st, const char *cluster_id, const char *state,
                                 int64_t after, int limit, int *n)
{
    return list(st, read_job, sizeof(struct store_job), limit, n,
                "SELECT " JOB_COLS " FROM training_jobs WHERE cluster_id=? AND seq > ?"
                " AND (? = '' OR state = ?) ORDER BY seq LIMIT ?",
                "slssi", cluster_id, after, state ? state : "", state ? state : "", limit);
}

int store_job_set_state(struct store *st, const char *cluster_id, const char *id,
                        const char *state, int restart_count)
{
    return update_one(st, prep(st,
                               "UPDATE training_jobs SET state=?, restart_count=?, update_ms=?"
                               " WHERE cluster_id=? AND id=?",
                               "silss", state, restart_count, mtc_now_ms(), cluster_id, id));
}

/* --- models (the registry) ------------------------------------------------ */

#define MODEL_COLS "project, location, name, meta, create_ms, update_ms"
#define MODEL_WHERE " WHERE project=? AND location=? AND name=?"

static void read_model(sqlite3_stmt *s, void *out)
{
    struct store_model *m = out;
    memset(m, 0, sizeof(*m));
    col_text(s, 0, m->project, sizeof(m->project));
    col_text(s, 1, m->location, sizeof(m->location));
    col_text(s, 2, m->name, sizeof(m->name));
    m->meta = col_json(s, 3);
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
    sqlite3_stmt *s = prep(st, "SELECT " MODEL_COLS " FROM models" MODEL_WHERE, "sss", project,
                           location, name);
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
    return name_page(st, "SELECT " MODEL_COLS " FROM models", read_model,
                     sizeof(struct store_model), project, location, after, limit, n);
}

static void read_model_version(sqlite3_stmt *s, void *out)
{
    struct store_model_version *v = out;
    v->version = sqlite3_column_int(s, 0);
    v->aliases = col_json(s, 1);
    if (!json_is_array(v->aliases)) {
        json_decref(v->aliases);
        v->aliases = json_array();
    }
    v->manifest = col_json(s, 2);
    v->lineage = col_json(s, 3);
    v->create_ms = sqlite3_column_int64(s, 4);
    v->update_ms = sqlite3_column_int64(s, 5);
}

/* The versions of a model, oldest first; under the lock. */
static struct store_model_version *versions_locked(struct store *st, const char *project,
                                                   const char *location, const char *name, int *n)
{
    return read_rows(prep(st,
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
    if (exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    json_t *empty = json_object();
    if (run(st, prep(st,
                     "INSERT OR IGNORE INTO models (project, location, name, meta, next_version,"
                     " create_ms, update_ms) VALUES (?,?,?,?,1,?,?)",
                     "sssjll", project, location, name, meta ? meta : empty, now, now)) < 0) {
        json_decref(empty);
        goto rollback;
    }
    json_decref(empty);
    sqlite3_stmt *s = prep(st,
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
    int bad = run(st, prep(st,
                           "INSERT INTO model_versions (project, location, name, version, aliases,"
                           " manifest, lineage, create_ms, update_ms) VALUES (?,?,?,?,?,?,?,?,?)",
                           "sssijjjll", project, location, name, *version, aliases, manifest,
                           lineage, now, now)) < 0 ||
              run(st, prep(st,
                           "UPDATE models SET next_version=?, update_ms=?" MODEL_WHERE, "ilsss",
                           *version + 1, now, project, location, name)) < 0;
    json_decref(aliases);
    if (bad)
        goto rollback;
    rc = exec_sql(st->db, "COMMIT", NULL);
    goto out;
rollback:
    exec_sql(st->db, "ROLLBACK", NULL);
    errno = e;
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_model_set_meta(struct store *st, const char *project, const char *location,
                         const char *name, const json_t *meta)
{
    return update_one(st, prep(st, "UPDATE models SET meta=?, update_ms=?" MODEL_WHERE, "jlsss",
                               meta, mtc_now_ms(), project, location, name));
}

/* 1 when the JSON array a holds the string s. */
static int has_str(const json_t *a, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) if (strcmp(json_string_value(v), s) == 0) return 1;
    return 0;
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
            run(st, prep(st,
                         "UPDATE model_versions SET aliases=?, update_ms=?" MODEL_WHERE
                         " AND version=?",
                         "jlsssi", v[i].aliases, now, project, location, name, v[i].version)) < 0)
            return -1;
    return 0;
}

int store_model_aliases(struct store *st, const char *project, const char *location,
                        const char *name, int version, const json_t *add, const json_t *remove)
{
    int rc = -1, e = EIO, n = 0;
    json_t **before = NULL;
    pthread_mutex_lock(&st->lock);
    if (exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0) {
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
        if (strcmp(json_string_value(a), "default") == 0 && has_str(me->aliases, "default")) {
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
    rc = exec_sql(st->db, "COMMIT", NULL);
    goto out;
rollback:
    exec_sql(st->db, "ROLLBACK", NULL);
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
    if (exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0) {
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
    if (run(st, prep(st, "DELETE FROM model_versions" MODEL_WHERE " AND version=?", "sssi",
                     project, location, name, version)) < 0)
        goto rollback;
    /* default moves to the newest remaining version */
    if (has_str(v[at].aliases, "default") && !has_str(v[newest].aliases, "default")) {
        json_array_append_new(v[newest].aliases, json_string("default"));
        if (run(st, prep(st,
                         "UPDATE model_versions SET aliases=?, update_ms=?" MODEL_WHERE
                         " AND version=?",
                         "jlsssi", v[newest].aliases, mtc_now_ms(), project, location, name,
                         v[newest].version)) < 0)
            goto rollback;
    }
    rc = exec_sql(st->db, "COMMIT", NULL);
    if (rc == 0)
        *manifest = json_incref(v[at].manifest);
    goto out;
rollback:
    exec_sql(st->db, "ROLLBACK", NULL);
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
    if (exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0) {
        pthread_mutex_unlock(&st->lock);
        return -1;
    }
    struct store_model_version *v = versions_locked(st, project, location, name, &n);
    if (run(st, prep(st, "DELETE FROM models" MODEL_WHERE, "sss", project, location, name)) < 0)
        goto rollback;
    if (sqlite3_changes(st->db) == 0) {
        e = ENOENT;
        goto rollback;
    }
    if (run(st, prep(st, "DELETE FROM model_versions" MODEL_WHERE, "sss", project, location,
                     name)) < 0)
        goto rollback;
    rc = exec_sql(st->db, "COMMIT", NULL);
    if (rc == 0) {
        *manifests = json_array();
        for (int i = 0; i < n; i++)
            if (v[i].manifest)
                json_array_append(*manifests, v[i].manifest);
    }
    goto out;
rollback:
    exec_sql(st->db, "ROLLBACK", NULL);
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
    sqlite3_stmt *s = prep(st, "SELECT project, location, name FROM models ORDER BY 1, 2, 3", "");
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
    if (exec_sql(st->db, "BEGIN IMMEDIATE", NULL) < 0)
        goto out;
    if (target_busy(st, op->project, op->location, op->target, NULL, busy_op))
        e = EBUSY;
    else if (insert_op(st, op) == 0) {
        rc = exec_sql(st->db, "COMMIT", NULL);
        goto out;
    }
    exec_sql(st->db, "ROLLBACK", NULL);
    errno = e;
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}

/* --- endpoints ----------------------------------------------------------- */

#define EP_COLS "project, location, name, spec, status, create_ms, update_ms"
#define EP_WHERE " WHERE project=? AND location=? AND name=?"

static void read_endpoint(sqlite3_stmt *s, void *out)
{
    struct store_endpoint *e = out;
    memset(e, 0, sizeof(*e));
    col_text(s, 0, e->project, sizeof(e->project));
    col_text(s, 1, e->location, sizeof(e->location));
    col_text(s, 2, e->name, sizeof(e->name));
    e->spec = col_json(s, 3);
    e->status = col_json(s, 4);
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
    int rc = run(st, prep(st,
                          "INSERT INTO endpoints (" EP_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?)",
                          "sssjjll", e->project, e->location, e->name, e->spec, e->status, now,
                          now));
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_endpoint_get(struct store *st, const char *project, const char *location,
                       const char *name, struct store_endpoint *out)
{
    int rc = -1;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s =
        prep(st, "SELECT " EP_COLS " FROM endpoints" EP_WHERE, "sss", project, location, name);
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
    int rc = run(st, prep(st, "UPDATE endpoints SET spec=?, status=?, update_ms=?" EP_WHERE,
                          "jjlsss", e->spec, e->status, mtc_now_ms(), e->project, e->location,
                          e->name));
    if (rc == 0 && sqlite3_changes(st->db) == 0)
        rc = -1, errno = ENOENT;
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_endpoint_delete(struct store *st, const char *project, const char *location,
                          const char *name)
{
    pthread_mutex_lock(&st->lock);
    int rc = run(st, prep(st, "DELETE FROM endpoints" EP_WHERE, "sss", project, location, name));
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
        return list(st, read_endpoint, sizeof(struct store_endpoint), limit, n,
                    "SELECT " EP_COLS " FROM endpoints ORDER BY project, location, name LIMIT ?",
                    "i", limit);
    return name_page(st, "SELECT " EP_COLS " FROM endpoints", read_endpoint,
                     sizeof(struct store_endpoint), project, location, after, limit, n);
}
