/* internal: what the store's files share — struct store, the statement and row
 * helpers (store.c) the resource files (store_*.c) build on. Not part of the
 * module's interface (that is store.h). */
#ifndef MTC_STORE_INTERNAL_H
#define MTC_STORE_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>

#include "store/store.h"

/* Statements kept prepared across calls (store_i_prep_kept): the read
 * paths every API GET takes, so a GET does not parse its SQL again. */
#define STORE_KEPT_MAX 48
struct store_kept {
    unsigned hash; /* of the SQL text */
    sqlite3_stmt *s;
    int busy; /* handed out, not released yet */
};

/* Principals of verified token hashes, valid while nothing in the database
 * changed (store_token_lookup): a revoke, like any write, empties it. */
#define STORE_TOKEN_CACHE 16
struct store_token_cached {
    char hash[65];
    struct store_principal who;
};

/* One connection; every accessor holds lock for its statements (one transaction). */
struct store {
    sqlite3 *db;
    char *path; /* the database file (store_copy_to's second connection) */
    pthread_mutex_t lock;
    struct store_kept kept[STORE_KEPT_MAX];
    int nkept;
    struct store_token_cached tokens[STORE_TOKEN_CACHE];
    int ntokens, next_token;
    sqlite3_int64 tokens_gen; /* sqlite3_total_changes64 when tokens[] was filled */
};

/* Run sql (any number of statements, no rows); err may be NULL. 0, or -1 with
 * errno EIO and err. */
int store_i_exec_sql(sqlite3 *db, const char *sql, mtc_error_t *err);
/* SQL: cluster_nodes rows from the nodesStatus of the clusters matching
 * where (a condition on clusters c): each named node once, with its pool. */
#define STORE_I_FILL_CLUSTER_NODES(where)                                                          \
    "INSERT OR IGNORE INTO cluster_nodes (cluster_id, node, pool)"                                 \
    " SELECT c.id, json_extract(j.value, '$.instanceName'),"                                       \
    " COALESCE(json_extract(j.value, '$.nodePoolId'), '')"                                         \
    " FROM clusters c, json_each(c.nodes) j WHERE (" where ")"                                     \
    " AND json_type(j.value, '$.instanceName') = 'text'"

/* Prepare sql and bind its parameters from the varargs, one per fmt letter:
 * 's' text (NULL → NULL), 'i' int, 'l' int64, 'j' json_t* serialised (NULL → NULL).
 * The statement (caller finalizes), or NULL when sql does not prepare. */
sqlite3_stmt *store_i_prep(struct store *st, const char *sql, const char *fmt, ...);
/* store_i_prep for a statement run again and again: the first call prepares
 * it and keeps it (keyed by the SQL text), later ones rebind it. The caller
 * holds the lock and hands it back with store_i_release before unlocking
 * (never sqlite3_finalize). NULL when sql does not prepare. */
sqlite3_stmt *store_i_prep_kept(struct store *st, const char *sql, const char *fmt, ...);
/* Reset a kept statement (ending its read transaction) for its next use, or
 * finalize any other; s may be NULL. Under the lock. */
void store_i_release(struct store *st, sqlite3_stmt *s);
/* Run a statement that returns no rows; finalizes it (NULL fails). 0, or -1
 * with errno EEXIST (a constraint) or EIO. The caller holds the lock. */
int store_i_run(struct store *st, sqlite3_stmt *s);
/* store_i_run as its own transaction: takes the lock. */
int store_i_run_locked(struct store *st, sqlite3_stmt *s);
/* store_i_run under the lock; -1 with errno ENOENT when it changed no row. */
int store_i_update_one(struct store *st, sqlite3_stmt *s);

/* Column col of the current row: text into buf ("" for NULL), or parsed JSON
 * (NULL for NULL or bad JSON; caller decrefs). */
void store_i_col_text(sqlite3_stmt *s, int col, char *buf, size_t len);
json_t *store_i_col_json(sqlite3_stmt *s, int col);

/* Reads the current row of a statement into one element of a list. */
typedef void (*row_reader_fn)(sqlite3_stmt *s, void *elem);

/* Every list: steps s (finalizes it; NULL reads no rows) and reads at most max
 * rows, each into a zeroed elem_size-byte element of a growing array. The
 * array (NULL only when out of memory), its count in *n; the caller frees it.
 * Under the lock. */
void *store_i_read_rows(sqlite3_stmt *s, row_reader_fn read, size_t elem_size, int max, int *n);

#define ALL_ROWS INT_MAX

/* A list function's whole work: store_i_read_rows over sql with fmt's
 * arguments bound (a kept statement: store_i_prep_kept), under the lock. */
void *store_i_list(struct store *st, row_reader_fn read, size_t elem_size, int max, int *n,
                   const char *sql, const char *fmt, ...);
/* A page of a project's named resources (datasets, models, endpoints):
 * select ("SELECT cols FROM table") of those in project/location with
 * name > after, by name, at most limit. */
void *store_i_name_page(struct store *st, const char *select, row_reader_fn read, size_t elem_size,
                        const char *project, const char *location, const char *after, int limit,
                        int *n);

/* Insert op (not done) as of now. 0, or -1 with errno (store_i_run). Under the lock. */
int store_i_insert_op(struct store *st, const struct store_op *op);
/* The id of a running operation on target in project/location other than
 * except (may be NULL) into busy_op: 1, else 0. Under the lock. */
int store_i_target_busy(struct store *st, const char *project, const char *location,
                        const char *target, const char *except, char busy_op[48]);

#endif
