/* store_token: API tokens (kept as hashes), the per-node tokens mtc-agent
 * reports with and the registrar tokens a job on hosts registers its
 * checkpoint with; a cluster's node and registrar tokens are revoked with it.
 * Verified hashes are cached until any row of the database changes. */
#include "store/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int store_token_add(struct store *st, const char *id, const char *name, const char *role,
                    const char *user, const char *hash)
{
    return store_i_run_locked(
        st, store_i_prep(st,
                         "INSERT INTO tokens (id, name, role, unix_user, hash, create_ms)"
                         " VALUES (?,?,?,?,?,?)",
                         "sssssl", id, name, role, user ? user : "", hash, mtc_now_ms()));
}

/* The cached principal of hash into out: 1, else 0. A cache filled before
 * the last change to any row (a revoke is one) is emptied first. */
static int cached(struct store *st, const char *hash, struct store_principal *out)
{
    sqlite3_int64 gen = sqlite3_total_changes64(st->db);
    if (gen != st->tokens_gen) {
        st->ntokens = st->next_token = 0;
        st->tokens_gen = gen;
        return 0;
    }
    for (int i = 0; i < st->ntokens; i++)
        if (strcmp(st->tokens[i].hash, hash) == 0)
            return *out = st->tokens[i].who, 1;
    return 0;
}

static void cache(struct store *st, const char *hash, const struct store_principal *who)
{
    struct store_token_cached *c = &st->tokens[st->next_token];
    snprintf(c->hash, sizeof(c->hash), "%s", hash);
    c->who = *who;
    st->next_token = (st->next_token + 1) % STORE_TOKEN_CACHE;
    if (st->ntokens < STORE_TOKEN_CACHE)
        st->ntokens++;
}

int store_token_lookup(struct store *st, const char *hash, struct store_principal *out)
{
    int rc = -1;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&st->lock);
    if (cached(st, hash, out)) {
        pthread_mutex_unlock(&st->lock);
        return 0;
    }
    sqlite3_stmt *s = store_i_prep_kept(st,
                                        "SELECT role, COALESCE(cluster_id, ''), COALESCE(node, ''),"
                                        " COALESCE(scope, ''), COALESCE(unix_user, '')"
                                        " FROM tokens WHERE hash=? AND revoked=0",
                                        "s", hash);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
        store_i_col_text(s, 0, out->role, sizeof(out->role));
        store_i_col_text(s, 1, out->cluster, sizeof(out->cluster));
        store_i_col_text(s, 2, out->node, sizeof(out->node));
        store_i_col_text(s, 3, out->scope, sizeof(out->scope));
        store_i_col_text(s, 4, out->user, sizeof(out->user));
        cache(st, hash, out);
        rc = 0;
    } else {
        errno = ENOENT;
    }
    store_i_release(st, s);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int store_registrar_token_add(struct store *st, const char *id, const char *name,
                              const char *cluster_id, const char *scope, const char *hash)
{
    if (strlen(scope) >= sizeof(((struct store_principal *)0)->scope)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return store_i_run_locked(
        st, store_i_prep(st,
                         "INSERT INTO tokens (id, name, role, hash, create_ms, cluster_id, scope)"
                         " VALUES (?,?,'registrar',?,?,?,?)",
                         "ssslss", id, name, hash, mtc_now_ms(), cluster_id, scope));
}

int store_node_token_set(struct store *st, const char *cluster_id, const char *node,
                         const char *id, const char *hash)
{
    char name[128];
    snprintf(name, sizeof(name), "node-%s-%s", cluster_id, id);
    pthread_mutex_lock(&st->lock);
    int rc = store_i_exec_sql(st->db, "BEGIN IMMEDIATE", NULL);
    if (rc == 0)
        rc = store_i_run(
            st, store_i_prep(st, "UPDATE tokens SET revoked=1 WHERE cluster_id=? AND node=?", "ss",
                             cluster_id, node));
    if (rc == 0)
        rc = store_i_run(
            st,
            store_i_prep(st,
                         "INSERT INTO tokens (id, name, role, hash, create_ms, cluster_id, node)"
                         " VALUES (?,?,'node',?,?,?,?)",
                         "ssslss", id, name, hash, mtc_now_ms(), cluster_id, node));
    int saved = errno;
    store_i_exec_sql(st->db, rc == 0 ? "COMMIT" : "ROLLBACK", NULL);
    pthread_mutex_unlock(&st->lock);
    errno = saved;
    return rc;
}

static void read_token(sqlite3_stmt *s, void *out)
{
    struct store_token *t = out;
    store_i_col_text(s, 0, t->id, sizeof(t->id));
    store_i_col_text(s, 1, t->name, sizeof(t->name));
    store_i_col_text(s, 2, t->who.role, sizeof(t->who.role));
    t->create_ms = sqlite3_column_int64(s, 3);
    store_i_col_text(s, 4, t->who.cluster, sizeof(t->who.cluster));
    store_i_col_text(s, 5, t->who.node, sizeof(t->who.node));
    store_i_col_text(s, 6, t->who.scope, sizeof(t->who.scope));
    store_i_col_text(s, 7, t->who.user, sizeof(t->who.user));
}

struct store_token *store_token_list(struct store *st, int *n)
{
    return store_i_list(st, read_token, sizeof(struct store_token), ALL_ROWS, n,
                        "SELECT id, name, role, create_ms, COALESCE(cluster_id, ''),"
                        " COALESCE(node, ''), COALESCE(scope, ''), COALESCE(unix_user, '')"
                        " FROM tokens WHERE revoked=0"
                        " ORDER BY create_ms",
                        "");
}

int store_token_revoke(struct store *st, const char *id_or_name)
{
    return store_i_update_one(
        st, store_i_prep(st, "UPDATE tokens SET revoked=1 WHERE (id=? OR name=?) AND revoked=0",
                         "ss", id_or_name, id_or_name));
}
