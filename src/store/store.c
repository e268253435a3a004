/* store: SQLite persistence for mtcd. This file opens the database, runs the
 * schema migrations and holds the helpers the resource files (store_*.c) share
 * (internal.h). Schema changes are appended to the migrations table below;
 * PRAGMA user_version records how many have run. */
#include "store/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Each entry moves the schema from version i to i+1. Never edit a shipped one.
 * Each after the first starts with its comment, "v<N>: ..." (the package's
 * upgrade test builds an older mtcd by removing the newest entry). */
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
    /* v9: each cluster's nodes as its nodesStatus last named them, with their
     * pool, so that a health report checks membership by index (filled from
     * the stored nodesStatus; store_cluster_set_nodes keeps it in step) */
    "CREATE TABLE cluster_nodes ("
    "  cluster_id TEXT NOT NULL, node TEXT NOT NULL, pool TEXT NOT NULL,"
    "  PRIMARY KEY (cluster_id, node));" STORE_I_FILL_CLUSTER_NODES("1") ";",
    /* v10: registrar tokens — role "registrar", bound to one cluster and a
     * scope (JSON: the project, location and model it may register into, the
     * run and checkpoint directory it may register from) */
    "ALTER TABLE tokens ADD COLUMN scope TEXT;",
    /* v11: a token bound to a Unix user runs its training jobs as that user */
    "ALTER TABLE tokens ADD COLUMN unix_user TEXT;",
    /* v12: the job monitor's pass over unfinished jobs (every 5 s) reads only
     * them, not every job ever submitted (store_job_list_unfinished) */
    "CREATE INDEX training_jobs_unfinished ON training_jobs(seq)"
    " WHERE state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED');",
    /* v13: an event about a training job's run says whose job it is (owner:
     * the Unix user it runs as, '' for mtcd's own; NULL: no job's) and what
     * others see of it (brief): its log line and metrics are the owner's */
    "ALTER TABLE events ADD COLUMN owner TEXT;"
    "ALTER TABLE events ADD COLUMN brief TEXT;",
};
#define N_MIGRATIONS ((int)(sizeof(migrations) / sizeof(migrations[0])))

int store_i_exec_sql(sqlite3 *db, const char *sql, mtc_error_t *err)
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
        if (store_i_exec_sql(db, "BEGIN IMMEDIATE", err) < 0)
            return -1;
        if (store_i_exec_sql(db, migrations[v], err) < 0 || store_i_exec_sql(db, pragma, err) < 0) {
            store_i_exec_sql(db, "ROLLBACK", NULL);
            return -1;
        }
        if (store_i_exec_sql(db, "COMMIT", err) < 0)
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
    if (!(st->path = strdup(path))) {
        errprintf(err, "out of memory");
        goto error;
    }
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
    if (store_i_exec_sql(st->db,
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
    for (int i = 0; i < st->nkept; i++)
        sqlite3_finalize(st->kept[i].s);
    sqlite3_close(st->db);
    pthread_mutex_destroy(&st->lock);
    free(st->path);
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

int store_schema_latest(void)
{
    return N_MIGRATIONS;
}

/* A second connection to a database file, read-only (a WAL snapshot per
 * statement): NULL + err. */
static sqlite3 *open_ro(const char *path, mtc_error_t *err)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        errprintf(err, "cannot open %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 5000);
    return db;
}

/* The statement and the connection closed; rc returned (errno EIO when -1). */
static int close_ro(sqlite3 *db, sqlite3_stmt *s, int rc)
{
    sqlite3_finalize(s);
    sqlite3_close(db);
    if (rc < 0)
        errno = EIO;
    return rc;
}

int store_copy_to(struct store *st, const char *dest, mtc_error_t *err)
{
    /* VACUUM INTO on a second connection reads one WAL snapshot (every
     * commit before it, none after) while mtcd's connection writes on */
    sqlite3 *db = open_ro(st->path, err);
    sqlite3_stmt *s = NULL;
    if (!db)
        return close_ro(NULL, NULL, -1);
    if (sqlite3_prepare_v2(db, "VACUUM INTO ?", -1, &s, NULL) != SQLITE_OK ||
        sqlite3_bind_text(s, 1, dest, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
        sqlite3_step(s) != SQLITE_DONE)
        return close_ro(db, s,
                        errprintf(err, "copying the store into %s: %s", dest, sqlite3_errmsg(db)));
    return close_ro(db, s, 0);
}

int store_check(const char *path, int *schema, mtc_error_t *err)
{
    sqlite3 *db = open_ro(path, err);
    sqlite3_stmt *s = NULL;
    if (!db)
        return close_ro(NULL, NULL, -1);
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL) != SQLITE_OK ||
        sqlite3_step(s) != SQLITE_ROW)
        return close_ro(db, s, errprintf(err, "%s: %s", path, sqlite3_errmsg(db)));
    const char *said = (const char *)sqlite3_column_text(s, 0);
    if (!said || strcmp(said, "ok") != 0)
        return close_ro(db, s, errprintf(err, "%s: integrity check: %.200s", path,
                                         said ? said : "(nothing)"));
    if (schema && (*schema = user_version(db)) < 0)
        return close_ro(db, s, errprintf(err, "%s: cannot read its schema version", path));
    return close_ro(db, s, 0);
}

int64_t store_changes(struct store *st)
{
    pthread_mutex_lock(&st->lock);
    int64_t n = (int64_t)sqlite3_total_changes64(st->db);
    pthread_mutex_unlock(&st->lock);
    return n;
}

/* --- helpers shared by the resource files (contracts in internal.h) ------ */

static void bind_args(sqlite3_stmt *s, const char *fmt, va_list ap)
{
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
}

static sqlite3_stmt *vprep(struct store *st, const char *sql, const char *fmt, va_list ap)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
        return NULL;
    bind_args(s, fmt, ap);
    return s;
}

static unsigned sql_hash(const char *sql)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)sql; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

/* The kept statement for sql (prepared and kept on first use while there is
 * room); one in use already, or no room, gives a statement of its own. */
static sqlite3_stmt *vprep_kept(struct store *st, const char *sql, const char *fmt, va_list ap)
{
    unsigned h = sql_hash(sql);
    struct store_kept *k = NULL;
    for (int i = 0; i < st->nkept && !k; i++)
        if (st->kept[i].hash == h && strcmp(sqlite3_sql(st->kept[i].s), sql) == 0)
            k = &st->kept[i];
    if (k && k->busy)
        return vprep(st, sql, fmt, ap);
    if (!k) {
        if (st->nkept == STORE_KEPT_MAX)
            return vprep(st, sql, fmt, ap);
        sqlite3_stmt *s;
        if (sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK)
            return NULL;
        k = &st->kept[st->nkept++];
        *k = (struct store_kept){h, s, 0};
    }
    k->busy = 1;
    bind_args(k->s, fmt, ap);
    return k->s;
}

sqlite3_stmt *store_i_prep_kept(struct store *st, const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sqlite3_stmt *s = vprep_kept(st, sql, fmt, ap);
    va_end(ap);
    return s;
}

void store_i_release(struct store *st, sqlite3_stmt *s)
{
    if (!s)
        return;
    for (int i = 0; i < st->nkept; i++) {
        if (st->kept[i].s == s) {
            sqlite3_reset(s);
            sqlite3_clear_bindings(s);
            st->kept[i].busy = 0;
            return;
        }
    }
    sqlite3_finalize(s);
}

sqlite3_stmt *store_i_prep(struct store *st, const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sqlite3_stmt *s = vprep(st, sql, fmt, ap);
    va_end(ap);
    return s;
}

int store_i_run(struct store *st, sqlite3_stmt *s)
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

void store_i_col_text(sqlite3_stmt *s, int col, char *buf, size_t len)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    snprintf(buf, len, "%s", t ? (const char *)t : "");
}

json_t *store_i_col_json(sqlite3_stmt *s, int col)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    return t ? json_loads((const char *)t, 0, NULL) : NULL;
}

/* store_i_read_rows without finalizing s. */
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
    return arr;
}

void *store_i_read_rows(sqlite3_stmt *s, row_reader_fn read, size_t elem_size, int max, int *n)
{
    void *arr = read_rows(s, read, elem_size, max, n);
    sqlite3_finalize(s);
    return arr;
}

void *store_i_list(struct store *st, row_reader_fn read, size_t elem_size, int max, int *n,
                   const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s = vprep_kept(st, sql, fmt, ap);
    void *arr = read_rows(s, read, elem_size, max, n);
    store_i_release(st, s);
    pthread_mutex_unlock(&st->lock);
    va_end(ap);
    return arr;
}

void *store_i_name_page(struct store *st, const char *select, row_reader_fn read, size_t elem_size,
                        const char *project, const char *location, const char *after, int limit,
                        int *n)
{
    char sql[512];
    snprintf(sql, sizeof(sql),
             "%s WHERE project=? AND location=? AND name > ? ORDER BY name LIMIT ?", select);
    return store_i_list(st, read, elem_size, limit, n, sql, "sssi", project, location,
                        after ? after : "", limit);
}

int store_i_insert_op(struct store *st, const struct store_op *op)
{
    int64_t now = mtc_now_ms();
    return store_i_run(
        st,
        store_i_prep(st,
                     "INSERT INTO operations (id, project, location, cluster_id, kind, progress,"
                     " request, create_ms, update_ms, target) VALUES (?,?,?,?,?,?,?,?,?,?)",
                     "ssssssjlls", op->id, op->project, op->location, op->cluster_id, op->kind,
                     op->progress, op->request, now, now, op->target));
}

int store_i_run_locked(struct store *st, sqlite3_stmt *s)
{
    pthread_mutex_lock(&st->lock);
    int rc = store_i_run(st, s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_i_update_one(struct store *st, sqlite3_stmt *s)
{
    pthread_mutex_lock(&st->lock);
    int rc = store_i_run(st, s);
    if (rc == 0 && sqlite3_changes(st->db) == 0) {
        errno = ENOENT;
        rc = -1;
    }
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_i_target_busy(struct store *st, const char *project, const char *location,
                        const char *target, const char *except, char busy_op[48])
{
    sqlite3_stmt *s =
        store_i_prep(st,
                     "SELECT id FROM operations WHERE project=? AND location=? AND target=?"
                     " AND done=0 AND id != ?",
                     "ssss", project, location, target, except ? except : "");
    int busy = s && sqlite3_step(s) == SQLITE_ROW;
    if (busy && busy_op)
        store_i_col_text(s, 0, busy_op, 48);
    sqlite3_finalize(s);
    return busy;
}
