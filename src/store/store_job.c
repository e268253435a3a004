/* store_job: training jobs, a cluster's record of the Slurm jobs mtc submitted
 * (their state and restart count). */
#include "store/internal.h"

#include <errno.h>
#include <string.h>

#define JOB_COLS                                                                                   \
    "seq, id, project, location, cluster_id, slurm_job, state, restart_count, request, config,"    \
    " create_ms, update_ms"

static void read_job(sqlite3_stmt *s, void *out)
{
    struct store_job *j = out;
    memset(j, 0, sizeof(*j));
    j->seq = sqlite3_column_int64(s, 0);
    store_i_col_text(s, 1, j->id, sizeof(j->id));
    store_i_col_text(s, 2, j->project, sizeof(j->project));
    store_i_col_text(s, 3, j->location, sizeof(j->location));
    store_i_col_text(s, 4, j->cluster_id, sizeof(j->cluster_id));
    store_i_col_text(s, 5, j->slurm_job, sizeof(j->slurm_job));
    store_i_col_text(s, 6, j->state, sizeof(j->state));
    j->restart_count = sqlite3_column_int(s, 7);
    j->request = store_i_col_json(s, 8);
    j->config = store_i_col_json(s, 9);
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
    return store_i_run_locked(
        st, store_i_prep(st,
                         "INSERT INTO training_jobs (id, project, location, cluster_id,"
                         " slurm_job, state, restart_count, request, config, create_ms,"
                         " update_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                         "ssssssijjll", j->id, j->project, j->location, j->cluster_id, j->slurm_job,
                         j->state, j->restart_count, j->request, j->config, now, now));
}

int store_job_get(struct store *st, const char *cluster_id, const char *id, struct store_job *out)
{
    int rc = -1;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&st->lock);
    sqlite3_stmt *s =
        store_i_prep(st, "SELECT " JOB_COLS " FROM training_jobs WHERE cluster_id=? AND id=?", "ss",
                     cluster_id, id);
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
    return store_i_list(st, read_job, sizeof(struct store_job), limit, n,
                        "SELECT " JOB_COLS " FROM training_jobs WHERE cluster_id=? AND seq > ?"
                        " AND (? = '' OR state = ?) ORDER BY seq LIMIT ?",
                        "slssi", cluster_id, after, state ? state : "", state ? state : "", limit);
}

/* the job monitor's query, every pass: the partial index of v12 serves it */
const char store_job_unfinished_sql[] =
    "SELECT " JOB_COLS " FROM training_jobs WHERE seq > ?"
    " AND state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED') ORDER BY seq LIMIT ?";

struct store_job *store_job_list_unfinished(struct store *st, int64_t after, int limit, int *n)
{
    return store_i_list(st, read_job, sizeof(struct store_job), limit, n, store_job_unfinished_sql,
                        "li", after, limit);
}

int store_job_set_state(struct store *st, const char *cluster_id, const char *id,
                        const char *state, int restart_count)
{
    return store_i_update_one(
        st, store_i_prep(st,
                         "UPDATE training_jobs SET state=?, restart_count=?, update_ms=?"
                         " WHERE cluster_id=? AND id=?",
                         "silss", state, restart_count, mtc_now_ms(), cluster_id, id));
}
