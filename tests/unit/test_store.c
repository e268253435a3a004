/* Unit tests for src/store: schema and migrations, clusters with their first
 * operation, one operation per cluster, events, tokens, node health. */
#include "check.h"
#include "store/store.h"

#include <errno.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

static struct store_op op_for(const char *id, const char *cluster, const char *kind)
{
    struct store_op op;
    memset(&op, 0, sizeof(op));
    snprintf(op.id, sizeof(op.id), "%s", id);
    snprintf(op.project, sizeof(op.project), "local");
    snprintf(op.location, sizeof(op.location), "local");
    snprintf(op.cluster_id, sizeof(op.cluster_id), "%s", cluster);
    snprintf(op.kind, sizeof(op.kind), "%s", kind);
    return op;
}

/* The statements the read paths keep prepared end their read transaction
 * when handed back: another connection can still truncate the WAL (a kept
 * statement left mid-read would pin it). */
static void test_kept_released(struct store *st, const char *path)
{
    struct store_cluster cl;
    struct store_principal who;
    int n = 0;
    for (int i = 0; i < 3; i++) {
        if (store_cluster_get(st, "c", &cl) == 0)
            store_cluster_release(&cl);
        free(store_events(st, "c", 100, &n));
        store_token_lookup(st, "nope", &who);
    }
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int busy = -1;
    if (sqlite3_open(path, &db) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "PRAGMA wal_checkpoint(TRUNCATE)", -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        busy = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    CHECK(busy == 0, "kept statements hold no read transaction once handed back (busy=%d)", busy);
    CHECK(store_cluster_get(st, "c", &cl) == 0 && !strcmp(cl.id, "c"),
          "a kept statement runs again after the checkpoint");
    store_cluster_release(&cl);
}

/* The node index a health report checks membership with follows nodesStatus;
 * a cluster's head carries no spec or nodes. Cluster c exists. */
static void test_node_index(struct store *st)
{
    char pool[64] = "";
    CHECK(store_cluster_node_pool(st, "c", "c-gpu-0", pool, sizeof(pool)) < 0 && errno == ENOENT,
          "no nodes stored yet: not a node");
    json_t *nodes = json_pack("[{s:s, s:s}, {s:s}, {s:s}]", "instanceName", "c-gpu-0",
                              "nodePoolId", "gpu", "instanceName", "c-login", "nodePoolId", "x");
    CHECK(store_cluster_set_nodes(st, "c", nodes) == 0, "set c's nodes");
    CHECK(store_cluster_node_pool(st, "c", "c-gpu-0", pool, sizeof(pool)) == 0 &&
              !strcmp(pool, "gpu"),
          "a stored node is a node, with its pool (%s)", pool);
    CHECK(store_cluster_node_pool(st, "c", "c-login", pool, sizeof(pool)) == 0 && !*pool,
          "a node without a pool is a node, pool \"\"");
    CHECK(store_cluster_node_pool(st, "c", "x", pool, sizeof(pool)) < 0 && errno == ENOENT,
          "an entry without an instanceName names no node");
    CHECK(store_cluster_node_pool(st, "a", "c-gpu-0", pool, sizeof(pool)) < 0 && errno == ENOENT,
          "another cluster's node is not a node");
    CHECK(store_cluster_set_nodes(st, "nope", nodes) < 0 && errno == ENOENT &&
              store_cluster_node_pool(st, "nope", "c-gpu-0", pool, sizeof(pool)) < 0,
          "nodes of a missing cluster: ENOENT, nothing indexed");
    json_decref(nodes);
    nodes = json_pack("[{s:s, s:s}]", "instanceName", "c-gpu-1", "nodePoolId", "gpu");
    CHECK(store_cluster_set_nodes(st, "c", nodes) == 0 &&
              store_cluster_node_pool(st, "c", "c-gpu-0", pool, sizeof(pool)) < 0 &&
              store_cluster_node_pool(st, "c", "c-gpu-1", pool, sizeof(pool)) == 0,
          "new nodes replace the old ones");
    json_decref(nodes);
    struct store_cluster h;
    CHECK(store_cluster_head(st, "c", &h) == 0 && !strcmp(h.id, "c") &&
              !strcmp(h.project, "local") && !strcmp(h.location, "local") && *h.state &&
              !h.spec && !h.nodes,
          "a cluster's head: id, place and state, no spec or nodes");
    store_cluster_release(&h);
    CHECK(store_cluster_head(st, "zz", &h) < 0 && errno == ENOENT, "missing head: ENOENT");
}

static int create(struct store *st, const char *id, const char *op_id)
{
    struct store_cluster c = {.spec = json_pack("{s:s}", "displayName", id)};
    snprintf(c.id, sizeof(c.id), "%s", id);
    snprintf(c.project, sizeof(c.project), "local");
    snprintf(c.location, sizeof(c.location), "local");
    snprintf(c.state, sizeof(c.state), "PROVISIONING");
    struct store_op op = op_for(op_id, id, "CREATE");
    op.request = c.spec;
    int rc = store_cluster_create(st, &c, &op, NULL);
    json_decref(c.spec);
    return rc;
}

/* Lists grow past their first allocation, keep every row in order, and a
 * bound of 0 reads none. */
static void test_many_rows(struct store *st)
{
    for (int i = 0; i < 40; i++) {
        struct store_scan sc = {.time_ms = i};
        snprintf(sc.node, sizeof(sc.node), "g-x-%02d", i);
        snprintf(sc.state, sizeof(sc.state), "PASS");
        snprintf(sc.op_id, sizeof(sc.op_id), "op-%d", i);
        store_scan_put(st, "g", &sc);
    }
    int n = 0, ok = 1;
    struct store_scan *sl = store_scan_list(st, "g", &n);
    for (int i = 0; sl && i < n; i++) {
        char node[64];
        snprintf(node, sizeof(node), "g-x-%02d", i);
        ok &= !strcmp(sl[i].node, node) && sl[i].time_ms == i && !strcmp(sl[i].state, "PASS");
    }
    CHECK(sl && n == 40 && ok, "40 scans listed, in node order, each row whole");
    free(sl);
    struct store_job *none = store_job_list(st, "g", NULL, 0, 0, &n);
    CHECK(none && n == 0, "a list bounded by 0 reads nothing");
    free(none);
    store_health_delete(st, "g");
}

/* Training jobs: unique per cluster, pages by creation order, the state
 * filter, state updates, and gone with their cluster. */
static void test_jobs(struct store *st)
{
    const char *const ids[] = {"j-b", "j-a", "j-c"};
    for (int i = 0; i < 3; i++) {
        struct store_job j = {.restart_count = 0};
        snprintf(j.id, sizeof(j.id), "%s", ids[i]);
        snprintf(j.project, sizeof(j.project), "local");
        snprintf(j.location, sizeof(j.location), "local");
        snprintf(j.cluster_id, sizeof(j.cluster_id), "c");
        snprintf(j.slurm_job, sizeof(j.slurm_job), "%d", i + 1);
        snprintf(j.state, sizeof(j.state), i == 1 ? "RUNNING" : "PENDING");
        j.request = json_pack("{s:s}", "recipe", "pretrain/tiny_gpt2_pt");
        j.config = json_pack("{s:s}", "jobId", j.slurm_job);
        CHECK(store_job_create(st, &j) == 0, "job %s stored", ids[i]);
        if (i == 0)
            CHECK(store_job_create(st, &j) < 0 && errno == EEXIST, "a job id is unique in its cluster");
        json_decref(j.request);
        json_decref(j.config);
    }
    struct store_job g;
    CHECK(store_job_get(st, "c", "j-a", &g) == 0 && !strcmp(g.slurm_job, "2") &&
              !strcmp(json_string_value(json_object_get(g.request, "recipe")),
                      "pretrain/tiny_gpt2_pt"),
          "get a job with its request");
    store_job_release(&g);
    CHECK(store_job_get(st, "b", "j-a", &g) < 0 && errno == ENOENT, "another cluster's job: ENOENT");
    int n = 0;
    struct store_job *page = store_job_list(st, "c", NULL, 0, 2, &n);
    CHECK(n == 2 && !strcmp(page[0].id, "j-b") && !strcmp(page[1].id, "j-a"),
          "first page in creation order");
    int64_t after = n == 2 ? page[1].seq : 0;
    for (int i = 0; i < n; i++)
        store_job_release(&page[i]);
    free(page);
    page = store_job_list(st, "c", NULL, after, 2, &n);
    CHECK(n == 1 && !strcmp(page[0].id, "j-c"), "next page after the token");
    store_job_release(&page[0]);
    free(page);
    page = store_job_list(st, "c", "RUNNING", 0, 10, &n);
    CHECK(n == 1 && !strcmp(page[0].id, "j-a"), "state filter");
    store_job_release(&page[0]);
    free(page);
    CHECK(store_job_set_state(st, "c", "j-a", "REQUEUED", 1) == 0 &&
              store_job_get(st, "c", "j-a", &g) == 0 && !strcmp(g.state, "REQUEUED") &&
              g.restart_count == 1,
          "state and restart count updated");
    store_job_release(&g);
    CHECK(store_job_set_state(st, "c", "nope", "FAILED", 0) < 0 && errno == ENOENT,
          "updating a missing job: ENOENT");
    /* the job monitor's list: every cluster's jobs not final, in pages */
    CHECK(store_job_set_state(st, "c", "j-b", "COMPLETED", 0) == 0, "j-b completed");
    page = store_job_list_unfinished(st, 0, 1, &n);
    CHECK(n == 1 && !strcmp(page[0].id, "j-a"), "unfinished, first page: j-a (j-b is final)");
    after = n == 1 ? page[0].seq : 0;
    for (int i = 0; i < n; i++)
        store_job_release(&page[i]);
    free(page);
    page = store_job_list_unfinished(st, after, 10, &n);
    CHECK(n == 1 && !strcmp(page[0].id, "j-c") && !strcmp(page[0].state, "PENDING"),
          "unfinished, next page: j-c");
    for (int i = 0; i < n; i++)
        store_job_release(&page[i]);
    free(page);
    CHECK(store_job_set_state(st, "c", "j-b", "PENDING", 0) == 0, "j-b back to PENDING");
}

static struct store_op remediate(const char *id, const char *node)
{
    struct store_op op = op_for(id, "d", "REMEDIATE");
    op.request = json_pack("{s:[{s:s}]}", "nodes", "node", node);
    return op;
}

/* Remediations share a cluster (other nodes), an UPDATE holds it alone. */
static void test_shared(struct store *st)
{
    char busy[48] = "";
    CHECK(create(st, "d", "op-s0") == 0, "create cluster d");
    struct store_op r1 = remediate("op-s1", "d-n1"), r2 = remediate("op-s2", "d-n2"),
                    r1b = remediate("op-s3", "d-n1"), upd = op_for("op-s4", "d", "UPDATE");
    CHECK(store_op_begin_shared(st, &r1, "RUNNING", busy) < 0 && errno == EBUSY &&
              !strcmp(busy, "op-s0"),
          "no remediation while the CREATE runs");
    store_op_finish(st, "op-s0", NULL, 0, NULL);
    CHECK(store_op_begin_shared(st, &r1, "RUNNING", busy) == 0, "remediation of d-n1 begins");
    CHECK(store_op_begin_shared(st, &r2, "RUNNING", busy) == 0,
          "remediation of d-n2 begins beside it");
    busy[0] = '\0';
    CHECK(store_op_begin_shared(st, &r1b, "RUNNING", busy) < 0 && errno == EBUSY &&
              !strcmp(busy, "op-s1"),
          "a second remediation of d-n1 is refused, naming the first");
    json_t *nodes = store_ops_active_nodes(st, "d", "REMEDIATE");
    CHECK(json_array_size(nodes) == 2 &&
              !strcmp(json_string_value(json_array_get(nodes, 0)), "d-n1") &&
              !strcmp(json_string_value(json_array_get(nodes, 1)), "d-n2"),
          "the nodes in flight: d-n1, d-n2");
    json_decref(nodes);
    CHECK(store_op_begin(st, &upd, "UPDATING", busy) < 0 && errno == EBUSY,
          "an UPDATE is refused while remediations run");
    store_op_finish(st, "op-s1", NULL, 0, NULL);
    store_op_finish(st, "op-s2", NULL, 0, NULL);
    CHECK(store_op_begin(st, &upd, "UPDATING", busy) == 0, "the UPDATE begins once they are done");
    CHECK(store_op_begin_shared(st, &r1b, "RUNNING", busy) < 0 && errno == EBUSY &&
              !strcmp(busy, "op-s4"),
          "no remediation while the UPDATE runs");
    nodes = store_ops_active_nodes(st, "d", "REMEDIATE");
    CHECK(json_array_size(nodes) == 0, "no node in flight");
    json_decref(nodes);
    store_op_finish(st, "op-s4", NULL, 0, NULL);
    char action[16] = "", by[48] = "";
    CHECK(store_remediation_last(st, "d", "d-n1", action, by) < 0, "no action recorded yet");
    store_remediation_add(st, "d", "d-n1", "reboot", "gpu.xid", "op-s1");
    store_remediation_add(st, "d", "d-n2", "restart", "disk", "op-s2");
    store_remediation_add(st, "d", "d-n1", "reimage", "gpu.xid", "op-s1");
    CHECK(store_remediation_last(st, "d", "d-n1", action, by) == 0 && !strcmp(action, "reimage") &&
              !strcmp(by, "op-s1"),
          "the node's latest action and its operation (%s by %s)", action, by);
    json_decref(r1.request);
    json_decref(r2.request);
    json_decref(r1b.request);
}

/* store_scrape_*'s rows joined: "col|col|...;" per row, the columns picked
 * by the collector's list (the time column is left out: it is now). */
struct joined {
    char text[1024];
    const int *pick; /* column indexes, -1 ends */
};

static void join(void *arg, const char *const *col)
{
    struct joined *j = arg;
    size_t n = strlen(j->text);
    for (int i = 0; j->pick[i] >= 0; i++)
        n += (size_t)snprintf(j->text + n, sizeof(j->text) - n, "%s%s", i ? "|" : "",
                              col[j->pick[i]]);
    snprintf(j->text + n, sizeof(j->text) - n, ";");
}

/* The rows /metrics formats (store_scrape.c): nodes in nodesStatus order
 * with their state and remediation, the results of the reports since a
 * time, the nodes under remediation. Cluster b exists, without health. */
static void test_scrape(struct store *st)
{
    json_t *nodes = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s}]", "instanceName", "b-1",
                              "nodePoolId", "gpu", "nodeState", "RUNNING", "instanceName", "b-0",
                              "nodePoolId", "gpu", "nodeState", "RUNNING", "instanceName", "b-2");
    CHECK(store_cluster_set_nodes(st, "b", nodes) == 0, "b's nodes");
    json_decref(nodes);
    struct store_health h = {.results = json_pack("[{s:s, s:s}, {s:s, s:s}]", "check", "gpu.ecc",
                                                  "status", "FAIL", "check", "disk", "status",
                                                  "PASS")};
    snprintf(h.status, sizeof(h.status), "FAIL");
    CHECK(store_health_put(st, "b", "b-0", &h) == 0 &&
              store_health_set_remediation(st, "b", "b-0", "REMEDIATING") == 0,
          "b-0 failed a check, under remediation");
    json_decref(h.results);
    h.results = json_pack("[{s:s, s:s}]", "check", "disk", "status", "PASS");
    snprintf(h.status, sizeof(h.status), "PASS");
    CHECK(store_health_put(st, "b", "b-1", &h) == 0, "b-1 passed");
    static const int n4[] = {0, 1, 2, 3, -1}, c4[] = {0, 2, 3, -1}, two[] = {0, 1, -1},
                     one[] = {0, -1};
    struct joined j = {"", n4};
    CHECK(store_scrape_nodes(st, "b", join, &j) == 0, "nodes read");
    CHECK_STR(j.text, "b-1|gpu|RUNNING|;b-0|gpu|RUNNING|REMEDIATING;b-2|||;",
              "nodes in nodesStatus order: pool, state, remediation (\"\" where none)");
    j = (struct joined){"", c4};
    CHECK(store_scrape_checks(st, "b", 0, join, &j) == 0, "checks read");
    CHECK_STR(j.text, "b-0|gpu.ecc|FAIL;b-0|disk|PASS;b-1|disk|PASS;",
              "every result of the latest reports, by node, in the report's order");
    j = (struct joined){"", one};
    CHECK(store_scrape_report_times(st, "b", join, &j) == 0, "report times read");
    CHECK_STR(j.text, "b-0;b-1;", "a report time per node that reported");
    mtc_sleep_ms(5);
    int64_t mid = mtc_now_ms();
    mtc_sleep_ms(5);
    CHECK(store_health_put(st, "b", "b-1", &h) == 0, "b-1 reported again");
    j = (struct joined){"", c4};
    store_scrape_checks(st, "b", mid, join, &j);
    CHECK_STR(j.text, "b-1|disk|PASS;", "since a time: only the reports made since");
    j = (struct joined){"", two};
    CHECK(store_scrape_remediations(st, "b", join, &j) == 0, "remediations read");
    CHECK_STR(j.text, "b-0|REMEDIATING;", "the nodes with a remediation state");
    json_decref(h.results);
    j = (struct joined){"", n4};
    CHECK(store_scrape_nodes(st, "zz", join, &j) == 0 && !*j.text, "no such cluster: no rows");
    store_health_delete(st, "b");
}

/* SQLite's plan for sql on the database at path, its details joined by ';'. */
static void query_plan(const char *path, const char *sql, char *out, size_t len)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    char q[2048];
    snprintf(q, sizeof(q), "EXPLAIN QUERY PLAN %s", sql);
    *out = '\0';
    if (sqlite3_open(path, &db) == SQLITE_OK && sqlite3_prepare_v2(db, q, -1, &s, NULL) == SQLITE_OK)
        while (sqlite3_step(s) == SQLITE_ROW) {
            size_t n = strlen(out);
            snprintf(out + n, len - n, "%s;", (const char *)sqlite3_column_text(s, 3));
        }
    sqlite3_finalize(s);
    sqlite3_close(db);
}

int main(void)
{
    char dir[] = "/tmp/mtc-store-XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    snprintf(path, sizeof(path), "%s/db", dir);
    mtc_error_t err;
    mode_t old_umask = umask(022);
    struct store *st = store_open(path, &err);
    umask(old_umask);
    CHECK(st != NULL, "open creates the database");
    CHECK(store_schema_version(st) == 13, "migrated to the latest schema");
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600,
          "database created 0600 under umask 022 (mode %o)", (unsigned)(sb.st_mode & 0777));

    CHECK(create(st, "b", "op-1") == 0, "create cluster b with its operation");
    CHECK(create(st, "a", "op-2") == 0, "create cluster a");
    CHECK(create(st, "c", "op-3") == 0, "create cluster c");
    CHECK(create(st, "a", "op-4") < 0 && errno == EEXIST, "duplicate id refused with EEXIST");
    struct store_op op;
    CHECK(store_op_get(st, "op-4", &op) < 0 && errno == ENOENT,
          "a refused create stores no operation");

    struct store_cluster cl;
    CHECK(store_cluster_get(st, "a", &cl) == 0, "get a");
    CHECK_STR(cl.state, "PROVISIONING", "state stored");
    CHECK_STR(json_string_value(json_object_get(cl.spec, "displayName")), "a", "spec stored");
    store_cluster_release(&cl);
    CHECK(store_cluster_get(st, "zz", &cl) < 0 && errno == ENOENT, "missing cluster: ENOENT");

    int n = 0;
    struct store_cluster *page = store_cluster_list(st, "local", "local", NULL, 2, &n);
    CHECK(n == 2 && !strcmp(page[0].id, "a") && !strcmp(page[1].id, "b"), "first page by id");
    for (int i = 0; i < n; i++)
        store_cluster_release(&page[i]);
    free(page);
    page = store_cluster_list(st, "local", "local", "b", 2, &n);
    CHECK(n == 1 && !strcmp(page[0].id, "c"), "next page after the token");
    store_cluster_release(&page[0]);
    free(page);
    page = store_cluster_list(st, "other", "local", NULL, 10, &n);
    CHECK(n == 0, "other project sees nothing");
    free(page);

    char busy[48] = "";
    struct store_op upd = op_for("op-5", "a", "UPDATE");
    CHECK(store_op_begin(st, &upd, "UPDATING", busy) < 0 && errno == EBUSY,
          "second operation refused while the create runs");
    CHECK_STR(busy, "op-2", "the running operation is named");
    json_t *empty = json_object();
    CHECK(store_op_finish(st, "op-2", empty, 0, NULL) == 0, "finish create");
    json_decref(empty);
    CHECK(store_op_begin(st, &upd, "UPDATING", busy) == 0, "update starts once it is done");
    CHECK(store_cluster_get(st, "a", &cl) == 0 && !strcmp(cl.state, "UPDATING"),
          "begin sets the cluster state");
    store_cluster_release(&cl);
    struct store_op ghost = op_for("op-6", "nope", "DELETE");
    CHECK(store_op_begin(st, &ghost, "STOPPING", busy) < 0 && errno == ENOENT,
          "operation on a missing cluster refused");
    CHECK(store_op_finish(st, "op-5", NULL, 13, "boom") == 0, "finish with an error");
    CHECK(store_op_get(st, "op-5", &op) == 0 && op.done && op.err_code == 13 &&
              !strcmp(op.err_message, "boom"),
          "error recorded");
    store_op_release(&op);
    json_t *pending = store_ops_pending(st);
    CHECK(json_array_size(pending) == 2, "two creates still pending");
    json_decref(pending);

    for (int i = 0; i < 105; i++) {
        char msg[32];
        snprintf(msg, sizeof(msg), "event %d", i);
        store_event_add(st, "a", "TEST", i % 2 ? "a-x-0" : NULL, msg);
    }
    int nev = 0;
    struct store_event *ev = store_events(st, "a", 100, &nev);
    CHECK(ev && nev == 100, "last 100 events");
    CHECK_STR(ev ? ev[0].message : NULL, "event 5", "oldest first");
    CHECK(ev && !strcmp(ev[0].node, "a-x-0") && !*ev[1].node, "node recorded, or none");
    CHECK(ev && !ev[0].of_job && !ev[1].of_job, "a cluster's event is no job's");
    free(ev);
    CHECK(store_event_add_job(st, "a", "TRAINING_HANG", "alice", "job j hung", "job j hung; last line: x") == 0 &&
              store_event_add_job(st, "a", "TRAINING_FAILED", "", "job k FAILED", "job k FAILED; last line: y") == 0,
          "events about two jobs' runs, alice's and mtcd's own");
    ev = store_events(st, "a", 2, &nev);
    CHECK(ev && nev == 2 && ev[0].of_job && !strcmp(ev[0].owner, "alice") &&
              !strcmp(ev[0].brief, "job j hung") && strstr(ev[0].message, "last line: x") &&
              ev[1].of_job && !*ev[1].owner && !strcmp(ev[1].brief, "job k FAILED"),
          "each with its owner, its brief and its whole message");
    free(ev);

    CHECK(store_token_add(st, "tok-1", "ci", "editor", "alice", "h1") == 0, "token added");
    CHECK(store_token_add(st, "tok-2", "ci", "viewer", NULL, "h2") < 0, "token names unique");
    struct store_principal who;
    CHECK(store_token_lookup(st, "h1", &who) == 0 && !strcmp(who.role, "editor") && !*who.node &&
              !strcmp(who.user, "alice"),
          "role and Unix user by hash");
    CHECK(store_token_lookup(st, "h1", &who) == 0 && !strcmp(who.role, "editor") &&
              !strcmp(who.user, "alice") && store_token_lookup(st, "nope", &who) < 0 &&
              errno == ENOENT && store_token_lookup(st, "h1", &who) == 0 &&
              !strcmp(who.role, "editor"),
          "a cached lookup answers the same; an unknown hash is not cached as one");
    CHECK(store_token_revoke(st, "ci") == 0, "revoke by name");
    CHECK(store_token_lookup(st, "h1", &who) < 0 && errno == ENOENT,
          "revoked token is gone (its cached lookup with it)");
    CHECK(store_token_revoke(st, "ci") < 0 && errno == ENOENT &&
              store_token_lookup(st, "h1", &who) < 0,
          "a second revoke changes nothing and the token stays gone");
    CHECK(store_node_token_set(st, "a", "a-x-0", "tok-n1", "n1") == 0, "node token set");
    CHECK(store_token_lookup(st, "n1", &who) == 0 && !strcmp(who.role, "node") &&
              !strcmp(who.cluster, "a") && !strcmp(who.node, "a-x-0"),
          "node token names its cluster and node");
    CHECK(store_node_token_set(st, "a", "a-x-0", "tok-n2", "n2") == 0 &&
              store_token_lookup(st, "n1", &who) < 0 && store_token_lookup(st, "n2", &who) == 0,
          "a new node token revokes the node's old one");
    int ntok = 0;
    struct store_token *toks = store_token_list(st, &ntok);
    CHECK(toks && ntok == 1 && !strcmp(toks[0].who.role, "node") && !strcmp(toks[0].who.node, "a-x-0"),
          "token list: the live node token with its node");
    free(toks);
    const char *scope = "{\"model\":\"m\",\"run\":\"/exp/r\"}";
    CHECK(store_registrar_token_add(st, "tok-r1", "registrar-a-1", "a", scope, "r1") == 0 &&
              store_token_lookup(st, "r1", &who) == 0 && !strcmp(who.role, "registrar") &&
              !strcmp(who.cluster, "a") && !strcmp(who.scope, scope) && !*who.node,
          "a registrar token names its cluster and scope");
    char big[2100];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CHECK(store_registrar_token_add(st, "tok-r2", "registrar-a-2", "a", big, "r2") < 0 &&
              errno == ENAMETOOLONG && store_token_lookup(st, "r2", &who) < 0,
          "a scope too long for the principal is refused, nothing stored");
    toks = store_token_list(st, &ntok);
    CHECK(toks && ntok == 2 && !strcmp(toks[1].who.scope, scope), "token list: with its scope");
    free(toks);

    test_scrape(st);
    struct store_health h = {.results = json_array()};
    snprintf(h.status, sizeof(h.status), "FAIL");
    snprintf(h.failing_check, sizeof(h.failing_check), "gpu.ecc");
    snprintf(h.severity, sizeof(h.severity), "REPLACE");
    CHECK(store_health_put(st, "a", "a-x-0", &h) == 0, "health stored");
    CHECK(store_health_set_remediation(st, "a", "a-x-0", "REMEDIATING") == 0, "remediation state");
    snprintf(h.status, sizeof(h.status), "PASS");
    CHECK(store_health_put(st, "a", "a-x-0", &h) == 0, "health replaced");
    json_decref(h.results);
    int nh = 0;
    struct store_health *hl = store_health_list(st, "a", &nh);
    CHECK(nh == 1 && !strcmp(hl[0].status, "PASS") && !strcmp(hl[0].remediation, "REMEDIATING"),
          "a new report keeps the remediation state");
    store_health_free(hl, nh);
    hl = store_health_status_list(st, "a", &nh);
    CHECK(nh == 1 && !strcmp(hl[0].status, "PASS") && !strcmp(hl[0].remediation, "REMEDIATING") &&
              !strcmp(hl[0].failing_check, "gpu.ecc") && !strcmp(hl[0].severity, "REPLACE") &&
              !hl[0].results,
          "the status list: the same row without its results");
    store_health_free(hl, nh);
    store_remediation_add(st, "a", "a-x-0", "restart", "gpu.ecc", "op-9");
    store_remediation_add(st, "a", "a-x-0", "reboot", "gpu.ecc", "op-9");
    CHECK(store_remediation_count(st, "a", "a-x-0", 0) == 2, "remediation history counted");
    CHECK(store_remediation_count(st, "a", "a-x-0", mtc_now_ms() + 1000) == 0, "window honoured");
    struct store_scan sc = {.time_ms = 1000};
    snprintf(sc.node, sizeof(sc.node), "a-x-1");
    snprintf(sc.state, sizeof(sc.state), "FAIL");
    snprintf(sc.checks, sizeof(sc.checks), "straggler");
    snprintf(sc.reason, sizeof(sc.reason), "straggler: 3%% of the pool median");
    snprintf(sc.op_id, sizeof(sc.op_id), "op-s1");
    CHECK(store_scan_put(st, "a", &sc) == 0, "a node's scan stored");
    snprintf(sc.state, sizeof(sc.state), "PASS");
    sc.reason[0] = '\0';
    sc.time_ms = 2000;
    CHECK(store_scan_put(st, "a", &sc) == 0, "the next scan replaces it");
    snprintf(sc.node, sizeof(sc.node), "a-x-0");
    CHECK(store_scan_put(st, "a", &sc) == 0, "another node's scan");
    int ns = 0;
    struct store_scan *sl = store_scan_list(st, "a", &ns);
    CHECK(ns == 2 && !strcmp(sl[0].node, "a-x-0") && !strcmp(sl[1].node, "a-x-1") &&
              !strcmp(sl[1].state, "PASS") && sl[1].time_ms == 2000 && !*sl[1].reason &&
              !strcmp(sl[1].op_id, "op-s1"),
          "scans: the last per node, by node");
    free(sl);
    CHECK(store_health_delete(st, "a") == 0 && (free(store_scan_list(st, "a", &ns)), ns == 0),
          "a deleted cluster's scans are forgotten");
    test_jobs(st);
    test_many_rows(st);
    test_shared(st);
    test_node_index(st);
    store_close(st);
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "sqlite3 %s 'DROP TABLE cluster_nodes; ALTER TABLE tokens DROP COLUMN scope; "
             "ALTER TABLE tokens DROP COLUMN unix_user; DROP INDEX training_jobs_unfinished; "
             "ALTER TABLE events DROP COLUMN owner; ALTER TABLE events DROP COLUMN brief; "
             "PRAGMA user_version=8'",
             path);
    CHECK(system(cmd) == 0, "simulate a store from before the node index");

    st = store_open(path, &err);
    char pool[64] = "";
    CHECK(st && store_cluster_node_pool(st, "c", "c-gpu-1", pool, sizeof(pool)) == 0 &&
              !strcmp(pool, "gpu"),
          "the migration indexes the nodes already stored");
    CHECK(st && store_cluster_get(st, "c", &cl) == 0, "data survives reopen");
    store_cluster_release(&cl);
    CHECK(store_token_lookup(st, "n2", &who) == 0 && store_token_lookup(st, "r1", &who) == 0 &&
              store_cluster_delete(st, "a") == 0 && store_token_lookup(st, "n2", &who) < 0 &&
              store_token_lookup(st, "r1", &who) < 0,
          "deleting a cluster revokes its node and registrar tokens (cached lookups too)");
    test_kept_released(st, path);
    char plan[256];
    query_plan(path, store_job_unfinished_sql, plan, sizeof(plan)); /* the SQL it runs */
    CHECK(strstr(plan, "training_jobs_unfinished") != NULL,
          "the monitor's unfinished-jobs query reads the partial index (v12): %s", plan);
    struct store_job g;
    CHECK(store_job_get(st, "c", "j-c", &g) == 0, "jobs survive reopen");
    store_job_release(&g);
    int nj = 0;
    CHECK(store_cluster_delete(st, "c") == 0 && (free(store_job_list(st, "c", NULL, 0, 10, &nj)), nj == 0),
          "deleting a cluster forgets its jobs");
    CHECK(store_cluster_node_pool(st, "c", "c-gpu-1", pool, sizeof(pool)) < 0 && errno == ENOENT,
          "and its nodes");
    store_close(st);
    snprintf(cmd, sizeof(cmd), "sqlite3 %s 'PRAGMA user_version=99'", path);
    CHECK(system(cmd) == 0, "simulate a newer schema");
    st = store_open(path, &err);
    CHECK(st == NULL && strstr(err.text, "newer"), "a newer schema is refused: %s", err.text);
    mtc_rm_rf(dir);
    return check_done();
}
